//! Running plugin executables with deadlines, the way Nomad runs them, and keeping the host tidy.
//!
//! Every executable runs in a process group of its own. At the deadline the whole group gets
//! SIGKILL (Nomad kills only the direct child; we kill the group so that nothing outlives a run).
//! stdout and stderr are drained concurrently into captures that keep the head and the tail of
//! each, under one bound for the two. After the plugin exits we watch for descendants that keep its stdout or stderr open:
//! with real Nomad such a descendant blocks the call past its deadline, because the agent reads
//! both pipes to EOF. A descendant that left the group with setsid(2) is found through the
//! harness being a child subreaper (see [`crate::escapees`]), reported and killed too.

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use nomad_conform_reports::model::ExitStatus;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

/// How long to wait for the pipes to close once the group has been killed.
const AFTER_KILL_DRAIN: Duration = Duration::from_millis(500);
/// Largest excerpt of a stream kept in a report (head and tail, half each).
pub const REPORT_EXCERPT_BYTES: usize = 16 * 1024;

/// What to run and under which limits.
#[derive(Clone, Debug)]
pub struct ExecSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The exact environment; nothing else is passed unless `inherit_env` is set.
    pub env: Vec<(String, String)>,
    pub inherit_env: bool,
    pub cwd: Option<PathBuf>,
    pub deadline: Duration,
    /// Bytes of stdout and stderr kept together (see [`Captures`]); the rest is counted and
    /// dropped.
    pub capture_limit: usize,
    /// How long descendants may keep stdout/stderr open after the plugin exits before it counts
    /// as holding them.
    pub linger_grace: Duration,
    /// How long descendants still in the plugin's process group after it exited (with its output
    /// closed) may go on before they are killed: what they do in that time (remove a lock file,
    /// say) is done before anything is judged.
    pub settle: Duration,
    /// RLIMIT_FSIZE for the process and its children: calls meant to fail
    /// ([`crate::disk_guard::FAILING_CALL_FILE_SIZE`]).
    pub file_size_limit: Option<u64>,
    /// Filesystems the call may write to: it is stopped if one falls below its floor.
    pub disk_watch: crate::disk_guard::DiskWatch,
    /// No other process of the run's subject runs during this call: a process that left its
    /// session during the call is this call's, even with an environment of its own (`env -i`).
    pub alone: bool,
}

pub use crate::capture::{Capture, Captures, Stream};
pub(crate) use crate::procfs::proc_stat;
pub use crate::procfs::{
    ProcInfo, cmdline, group_members, processes_in, signal_bit, signal_dispositions,
};

#[derive(Debug)]
pub struct ExecOutput {
    /// Process ID of the plugin, which is also its process group ID (0 if it never started).
    pub pid: i32,
    pub status: ExitStatus,
    pub stdout: Capture,
    pub stderr: Capture,
    /// From spawn until the plugin had exited and its output pipes were closed (what Nomad
    /// waits for), or until the harness gave up on them.
    pub wall: Duration,
    /// Descendants that still held stdout or stderr open after the plugin exited and the grace
    /// period passed. Empty when the pipes closed in time.
    pub held_output: Vec<ProcInfo>,
    /// Whether the pipes stayed open past the grace period (even if the holder could not be
    /// named, e.g. because it left the process group).
    pub output_held_open: bool,
    /// Processes of the plugin's group still alive after it exited: strays, whether they ended
    /// on their own within the settle time or were killed.
    pub strays: Vec<ProcInfo>,
    /// Some stray was still running when the settle time was over and the harness killed it:
    /// what it would have done next never happened.
    pub strays_killed: bool,
    /// Some of `strays` had left the plugin's process group with setsid (found by the run's
    /// marker in their environment).
    pub strays_escaped: bool,
}

impl ExecOutput {
    pub fn exit_code(&self) -> Option<i32> {
        match self.status {
            ExitStatus::Exited { code } => Some(code),
            _ => None,
        }
    }

    pub fn succeeded(&self) -> bool {
        self.exit_code() == Some(0)
    }
}

static LIVE_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// SIGKILL every process group the harness started and has not finished with. Called when a run
/// is interrupted, before the report is written.
pub fn kill_all_live_groups() -> usize {
    let groups: Vec<i32> = LIVE_GROUPS
        .lock()
        .map(|g| g.iter().copied().collect())
        .unwrap_or_default();
    for g in &groups {
        let _ = killpg(Pid::from_raw(*g), Signal::SIGKILL);
    }
    groups.len()
}

/// How many process groups the run started are still registered as running.
pub fn live_group_count() -> usize {
    LIVE_GROUPS.lock().map(|g| g.len()).unwrap_or(0)
}

/// Count a long-running process group (a launched CSI plugin) among the groups an interrupted
/// run kills.
pub fn register_group(pgid: i32) {
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.insert(pgid);
    }
}

pub fn unregister_group(pgid: i32) {
    if let Ok(mut g) = LIVE_GROUPS.lock() {
        g.remove(&pgid);
    }
}

/// Kills the group when dropped unless disarmed: a cancelled call (Ctrl-C) leaves nothing
/// running.
struct GroupGuard {
    pgid: i32,
    armed: bool,
}

impl GroupGuard {
    fn new(pgid: i32) -> Self {
        if let Ok(mut g) = LIVE_GROUPS.lock() {
            g.insert(pgid);
        }
        GroupGuard { pgid, armed: true }
    }

    fn kill(&self) {
        let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            self.kill();
        }
        if let Ok(mut g) = LIVE_GROUPS.lock() {
            g.remove(&self.pgid);
        }
    }
}

/// Run `spec` to completion (or to its deadline) and report everything observed.
pub async fn run(spec: &ExecSpec) -> ExecOutput {
    crate::escapees::become_subreaper();
    let detached_before = spec.alone.then(crate::escapees::detached_pids);
    let started = Instant::now();
    let mut child = match spawn(spec).await {
        Ok(c) => c,
        Err(e) => {
            return ExecOutput {
                pid: 0,
                status: ExitStatus::SpawnFailed {
                    message: e.to_string(),
                },
                stdout: Capture::new(spec.capture_limit),
                stderr: Capture::new(spec.capture_limit),
                wall: started.elapsed(),
                held_output: Vec::new(),
                output_held_open: false,
                strays: Vec::new(),
                strays_killed: false,
                strays_escaped: false,
            };
        }
    };
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    let guard = GroupGuard::new(pgid);

    let output = Arc::new(Mutex::new(Captures::new(spec.capture_limit)));
    let mut readers = vec![
        drain_stream(child.stdout.take(), output.clone(), Stream::Stdout),
        drain_stream(child.stderr.take(), output.clone(), Stream::Stderr),
    ];

    let deadline_at = tokio::time::Instant::from_std(started + spec.deadline);
    let status = match wait_watched(&mut child, deadline_at, &spec.disk_watch).await {
        Waited::Exited(Ok(st)) => exit_status(st),
        Waited::Exited(Err(e)) => ExitStatus::SpawnFailed {
            message: format!("failed to wait for the process: {e}"),
        },
        Waited::Deadline => {
            guard.kill();
            let _ = child.wait().await;
            ExitStatus::KilledAtDeadline
        }
        Waited::Disk(reason) => {
            guard.kill();
            let _ = child.wait().await;
            ExitStatus::StoppedByHarness { reason }
        }
    };

    // The plugin is gone; its output is complete once every holder of the pipes closed them.
    let grace = if status == ExitStatus::KilledAtDeadline {
        AFTER_KILL_DRAIN
    } else {
        spec.linger_grace
    };
    let mut held_output = Vec::new();
    let mut output_held_open = false;
    if !wait_readers(&mut readers, grace).await {
        output_held_open = true;
        held_output = group_members(pgid);
        guard.kill();
        if !wait_readers(&mut readers, AFTER_KILL_DRAIN).await {
            for r in &readers {
                r.abort();
            }
        }
    }
    let wall = started.elapsed();

    let mut strays_killed = false;
    let mut strays = if output_held_open {
        Vec::new()
    } else {
        let s = group_members(pgid);
        if !s.is_empty() && !settle(pgid, spec.settle).await {
            strays_killed = true;
            guard.kill();
        }
        s
    };
    guard.disarm();
    // Killed members whose parent had exited are the harness's children now.
    if output_held_open || !strays.is_empty() || status == ExitStatus::KilledAtDeadline {
        crate::escapees::reap_group(pgid).await;
    }
    let mut escaped = crate::escapees::find(&spec.env);
    if let Some(before) = &detached_before {
        let named: Vec<i32> = escaped.iter().map(|p| p.pid).collect();
        escaped.extend(
            crate::escapees::detached()
                .into_iter()
                .filter(|p| !before.contains(&p.pid) && !named.contains(&p.pid)),
        );
    }
    let strays_escaped = !escaped.is_empty();
    if strays_escaped {
        crate::escapees::kill(&escaped).await;
        strays_killed = true;
        // One that was still in the group when it was listed (`setsid` before it called
        // setsid(2)) and left it since is one process: it is told once, as having left.
        strays.retain(|s| !escaped.iter().any(|e| e.pid == s.pid));
        strays.extend(escaped.into_iter().map(|p| ProcInfo {
            cmdline: format!(
                "{}; it left the plugin's process group with setsid",
                p.cmdline
            ),
            ..p
        }));
    }

    // Move the captures out (the reader tasks are done or aborted): no copy of up to the
    // capture limit.
    let (stdout, stderr) = output.lock().unwrap_or_else(|p| p.into_inner()).take();
    ExecOutput {
        pid: pgid,
        status,
        stdout,
        stderr,
        wall,
        held_output,
        output_held_open,
        strays,
        strays_killed,
        strays_escaped,
    }
}

enum Waited {
    Exited(io::Result<std::process::ExitStatus>),
    Deadline,
    Disk(String),
}

/// Wait for `child` until `deadline`, looking at the watched filesystems meanwhile.
async fn wait_watched(
    child: &mut tokio::process::Child,
    deadline: tokio::time::Instant,
    watch: &crate::disk_guard::DiskWatch,
) -> Waited {
    if watch.is_empty() {
        return match tokio::time::timeout_at(deadline, child.wait()).await {
            Ok(r) => Waited::Exited(r),
            Err(_) => Waited::Deadline,
        };
    }
    let mut tick = tokio::time::interval(crate::disk_guard::WATCH_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let wait = child.wait();
    tokio::pin!(wait);
    loop {
        tokio::select! {
            r = &mut wait => return Waited::Exited(r),
            _ = tokio::time::sleep_until(deadline) => return Waited::Deadline,
            _ = tick.tick() => {
                if let Some(reason) = watch.check() {
                    return Waited::Disk(reason);
                }
            }
        }
    }
}

/// Wait, at most `within`, for every member of process group `pgid` to be gone (zombies count
/// as gone). Returns whether they all went on their own.
async fn settle(pgid: i32, within: Duration) -> bool {
    let until = tokio::time::Instant::now() + within;
    loop {
        if group_members(pgid).is_empty() {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn spawn(spec: &ExecSpec) -> io::Result<tokio::process::Child> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args);
    if !spec.inherit_env {
        cmd.env_clear();
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::exec_signals::reset_on_tokio_spawn(&mut cmd);
    if let Some(limit) = spec.file_size_limit {
        // SAFETY: setrlimit(2) is async-signal-safe, and the closure touches nothing else.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::resource::setrlimit(
                    nix::sys::resource::Resource::RLIMIT_FSIZE,
                    limit,
                    limit,
                )
                .map_err(io::Error::from)
            });
        }
    }
    spawn_retrying(&mut cmd).await
}

/// `cmd.spawn()`, tried again (up to 20 times, 10 ms apart) while it fails with ETXTBSY:
/// another thread of ours briefly held the executable open for writing while forking, which
/// happens when executables are written during a run (fixtures, the driver's copies). The
/// process runner here and the driver's launch both spawn through it.
pub async fn spawn_retrying(cmd: &mut Command) -> io::Result<tokio::process::Child> {
    let mut attempts = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) && attempts < 20 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            other => return other,
        }
    }
}

/// Read `pipe` to its end into a bounded capture.
pub fn drain<R>(pipe: Option<R>, into: Arc<Mutex<Capture>>) -> JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    drain_with(pipe, move |chunk| {
        if let Ok(mut c) = into.lock() {
            c.push(chunk);
        }
    })
}

/// Read `pipe`, the process's `stream`, to its end into the captures of its call.
pub fn drain_stream<R>(
    pipe: Option<R>,
    into: Arc<Mutex<Captures>>,
    stream: Stream,
) -> JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    drain_with(pipe, move |chunk| {
        if let Ok(mut c) = into.lock() {
            c.push(stream, chunk);
        }
    })
}

fn drain_with<R, F>(pipe: Option<R>, mut push: F) -> JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    F: FnMut(&[u8]) + Send + 'static,
{
    tokio::spawn(async move {
        let Some(mut pipe) = pipe else { return };
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => push(&buf[..n]),
            }
        }
    })
}

/// Wait until both readers reached EOF, at most `limit`. True when they did.
async fn wait_readers(readers: &mut [JoinHandle<()>], limit: Duration) -> bool {
    let all = async {
        for r in readers.iter_mut() {
            let _ = r.await;
        }
    };
    tokio::time::timeout(limit, all).await.is_ok()
}

fn exit_status(st: std::process::ExitStatus) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(code), _) => ExitStatus::Exited { code },
        (None, Some(signal)) => ExitStatus::Signaled { signal },
        (None, None) => ExitStatus::SpawnFailed {
            message: "process ended without a status".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, deadline_ms: u64) -> ExecSpec {
        ExecSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("X".into(), "1".into())],
            inherit_env: false,
            cwd: None,
            deadline: Duration::from_millis(deadline_ms),
            capture_limit: 1024,
            linger_grace: Duration::from_millis(200),
            settle: Duration::from_millis(300),
            file_size_limit: None,
            disk_watch: Default::default(),
            alone: false,
        }
    }

    #[tokio::test]
    async fn both_streams_of_a_call_keep_the_limit_together() {
        let mut spec = sh(
            "head -c 5000 /dev/zero | tr '\\0' o; head -c 5000 /dev/zero | tr '\\0' e >&2",
            10_000,
        );
        spec.env.push(("PATH".into(), "/usr/bin:/bin".into()));
        let out = run(&spec).await;
        assert!(out.succeeded(), "{:?}", out.status);
        assert_eq!(out.stdout.total_bytes(), 5000);
        assert_eq!(out.stderr.total_bytes(), 5000);
        assert!(out.stdout.is_truncated() && out.stderr.is_truncated());
        assert!(out.stdout.kept_bytes() + out.stderr.kept_bytes() <= 1024);
    }

    #[tokio::test]
    async fn exact_environment_only() {
        let out = run(&sh("env", 2000)).await;
        assert!(out.succeeded());
        let text = String::from_utf8(out.stdout.complete().unwrap()).unwrap();
        assert!(text.contains("X=1"), "{text}");
        assert!(!text.contains("HOME="), "{text}");
    }

    #[tokio::test]
    async fn exit_codes_and_signals() {
        let out = run(&sh("exit 3", 2000)).await;
        assert_eq!(out.status, ExitStatus::Exited { code: 3 });
        let out = run(&sh("kill -TERM $$", 2000)).await;
        assert_eq!(out.status, ExitStatus::Signaled { signal: 15 });
        let mut missing = sh("", 2000);
        missing.program = "/nonexistent/plugin".into();
        assert!(matches!(
            run(&missing).await.status,
            ExitStatus::SpawnFailed { .. }
        ));
    }

    #[tokio::test]
    async fn deadline_kills_the_whole_group() {
        // The grandchild ignores SIGTERM; only a group SIGKILL gets rid of it.
        let spec = sh(
            "trap '' TERM; (trap '' TERM; sleep 30) & echo started; sleep 30",
            300,
        );
        let t = Instant::now();
        let out = run(&spec).await;
        assert_eq!(out.status, ExitStatus::KilledAtDeadline);
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(
            String::from_utf8(out.stdout.complete().unwrap()).unwrap(),
            "started\n"
        );
        assert!(group_members(out.pid).is_empty());
    }

    #[tokio::test]
    async fn descendant_holding_stdout_is_reported_and_killed() {
        let out = run(&sh("sleep 30 & echo hi", 5000)).await;
        assert!(out.succeeded());
        assert!(out.output_held_open);
        assert!(
            out.held_output.iter().any(|p| p.cmdline.contains("sleep")),
            "{:?}",
            out.held_output
        );
        assert!(out.wall < Duration::from_secs(3));
        assert!(group_members(out.pid).is_empty());
    }

    #[tokio::test]
    async fn stray_with_closed_output_is_reported() {
        // The subshell points the sleeper's output away before the shell goes on, so that a busy
        // machine cannot make it hold the pipes past the grace.
        let out = run(&sh("(sleep 30 &) >/dev/null 2>&1; echo hi", 5000)).await;
        assert!(out.succeeded());
        assert!(!out.output_held_open);
        assert_eq!(out.strays.len(), 1, "{:?}", out.strays);
        assert!(group_members(out.pid).is_empty());
    }

    #[tokio::test]
    async fn a_stray_may_finish_its_work_before_anything_is_judged() {
        // The background job removes a file a moment after the plugin exited: within the
        // settle time it is allowed to, and is still reported as a stray.
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("lock");
        let script = format!(
            ": > {l}; (sleep 0.1; rm -f {l}) >/dev/null 2>&1 & echo hi",
            l = lock.display()
        );
        let mut spec = sh(&script, 5000);
        spec.settle = Duration::from_secs(3);
        let out = run(&spec).await;
        assert!(out.succeeded());
        assert!(!out.strays.is_empty());
        assert!(!out.strays_killed);
        assert!(
            !lock.exists(),
            "the job was killed before it removed {lock:?}"
        );
    }

    #[tokio::test]
    async fn a_stray_still_running_after_the_settle_time_is_killed() {
        let mut spec = sh("(sleep 30 &) >/dev/null 2>&1; echo hi", 5000);
        spec.settle = Duration::from_millis(100);
        let out = run(&spec).await;
        assert_eq!(out.strays.len(), 1, "{:?}", out.strays);
        assert!(out.strays_killed);
        assert!(group_members(out.pid).is_empty());
    }

    #[tokio::test]
    async fn descendant_that_left_the_group_is_reported_killed_and_reaped() {
        let mut spec = sh(
            "/usr/bin/setsid sleep 30 </dev/null >/dev/null 2>&1 & echo hi",
            5000,
        );
        // Its own variable, so that no other test's escapee can be taken for this one's.
        spec.env = vec![("ESCAPEE_TEST".into(), std::process::id().to_string())];
        let out = run(&spec).await;
        assert!(out.succeeded());
        assert!(!out.output_held_open);
        assert_eq!(out.strays.len(), 1, "{:?}", out.strays);
        let stray = &out.strays[0];
        assert!(
            stray.cmdline.contains("sleep 30") && stray.cmdline.contains("setsid"),
            "{stray}"
        );
        // Killed, and reaped: no zombie of it is left either.
        assert!(
            !std::path::Path::new(&format!("/proc/{}", stray.pid)).exists(),
            "{stray} is still there"
        );
    }

    #[tokio::test]
    async fn big_output_is_bounded() {
        let out = run(&sh("head -c 5000000 /dev/zero", 10000)).await;
        assert!(out.succeeded());
        assert_eq!(out.stdout.total_bytes(), 5_000_000);
        assert!(out.stdout.is_truncated());
        assert!(out.stdout.excerpt(100).text.len() < 200);
    }

    #[tokio::test]
    async fn a_file_size_limit_stops_a_writer_and_its_shell_goes_on() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("big");
        // As the docs' example plugin does: dd the requested size, then fail if dd failed.
        let script = format!(
            "dd if=/dev/zero of={} bs=1M count=64 2>/dev/null || {{ echo dd-failed; exit 1; }}",
            f.display()
        );
        let mut spec = sh(&script, 20_000);
        spec.env.push(("PATH".into(), "/usr/bin:/bin".into()));
        spec.file_size_limit = Some(4 << 20);
        let out = run(&spec).await;
        assert_eq!(
            out.status,
            ExitStatus::Exited { code: 1 },
            "{:?}",
            out.stderr
        );
        assert!(String::from_utf8_lossy(&out.stdout.complete().unwrap()).contains("dd-failed"));
        let size = std::fs::metadata(&f).unwrap().len();
        assert!(size <= 4 << 20, "wrote {size} bytes past the limit");
    }

    #[tokio::test]
    async fn a_call_that_eats_the_watched_disk_is_stopped() {
        let d = tempfile::tempdir().unwrap();
        let script = format!(
            "while :; do dd if=/dev/zero of={}/f.$$.$i bs=1M count=4 conv=fsync 2>/dev/null; i=$((i+1)); done",
            d.path().display()
        );
        let mut spec = sh(&script, 20_000);
        spec.env.push(("PATH".into(), "/usr/bin:/bin".into()));
        spec.disk_watch = crate::disk_guard::DiskWatch::with_budget(d.path(), 16 << 20);
        let out = run(&spec).await;
        let ExitStatus::StoppedByHarness { reason } = &out.status else {
            panic!("not stopped: {:?}", out.status);
        };
        assert!(reason.contains("fell to"), "{reason}");
        assert!(out.wall < Duration::from_secs(15), "{:?}", out.wall);
    }
}
