//! Running a lock client under test the way a Nomad allocation runs it.
//!
//! Two shapes, after the singleton guide:
//! - **Shim**: one task whose command wraps the protected process (`nomad var lock PATH CMD`).
//!   `{protected}` is replaced by the probe's shell-quoted command line and `{path}` by the
//!   shell-quoted variable path; the line is then split into words and run directly, as Nomad
//!   runs a task's `command` and `args` (a line that needs a shell runs under `/bin/sh -c`,
//!   see [`task_argv`]). (A shim that
//!   joins its arguments and hands them to a shell again, as `nomad var lock` does, needs
//!   paths without spaces or quotes: keep the probe socket in a short plain temp path.)
//! - **Sidecar**: a leader task that takes the lock and writes a sentinel file, and the
//!   application task (the probe) the harness starts once the sentinel appears. When the
//!   leader exits the harness stops the application as Nomad does when a leader task dies:
//!   SIGTERM, then SIGKILL after the kill timeout. `{path}` and `{sentinel}` are replaced in
//!   the sidecar's command; it also gets `NOMAD_CONFORM_APP_PIDFILE`, a file the harness writes
//!   the application's PID to once it started (a sidecar must be able to stop the application
//!   without the Nomad client).
//!
//! Environment: exactly `NOMAD_ADDR` (an `http://` address) or `NOMAD_UNIX_ADDR` (a
//! `unix://` socket, as Nomad sets for the Task API), `NOMAD_TOKEN` and `NOMAD_NAMESPACE` when
//! given, `NOMAD_CONFORM_LOCK_PATH` (the variable path), `PATH` and `HOME` from the harness's
//! own environment (so that a client can be found and can find its config), and the options'
//! `extra_env`. Nothing else of the harness's environment is passed.
//!
//! Each process runs in a process group of its own, registered so that an interrupted run
//! kills it; stdout and stderr are captured with a bound. When a task's main process exits
//! whatever is left of its group is killed, as Nomad's drivers clean up a task's processes;
//! those leftovers are recorded. Dropping a [`RunningClient`] kills every group it started.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use nomad_conform_reports::model::{Excerpt, ExitStatus};
use tokio::process::{Child, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::probe::ProbeCommand;
use crate::process::{Captures, ProcInfo, Stream};

/// How long the pipes may stay open after a group was killed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);
/// How often the harness looks for the sidecar's sentinel file.
const SENTINEL_POLL: Duration = Duration::from_millis(10);

/// Failures to run a client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("failed to start client {label}: the shim command has no {{protected}} placeholder")]
    NoProtected { label: String },
    #[error("failed to start client {label}: {source}")]
    Spawn {
        label: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to start client {label}: {why}")]
    Address { label: String, why: String },
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientSpec {
    /// A shell command line with `{protected}` and `{path}` placeholders.
    Shim { command: String },
    /// A leader task's shell command line (`{path}`, `{sentinel}`), the sentinel file that
    /// means "the lock is held, start the application", and Nomad's `kill_timeout`.
    Sidecar {
        command: String,
        sentinel: PathBuf,
        kill_timeout: Duration,
    },
}

/// Where the client reaches the Variables API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiAddr {
    /// `NOMAD_ADDR=http://...`
    Http(String),
    /// `NOMAD_UNIX_ADDR=unix://<path>`
    Unix(PathBuf),
}

impl ApiAddr {
    /// From `http://host:port` or `unix:///path` (what [`super::proxy::Proxy::nomad_addr`]
    /// gives).
    pub fn parse(addr: &str) -> Result<ApiAddr, String> {
        if let Some(p) = addr.strip_prefix("unix://") {
            return Ok(ApiAddr::Unix(PathBuf::from(p)));
        }
        if addr.starts_with("http://") || addr.starts_with("https://") {
            return Ok(ApiAddr::Http(addr.to_string()));
        }
        Err(format!(
            "{addr:?} is neither an http(s):// address nor a unix:// socket"
        ))
    }
}

/// Everything about one client but its command.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// The client's name in records and reports (and its probe's `--label`).
    pub label: String,
    /// The proxy's address for this client.
    pub addr: ApiAddr,
    pub token: Option<String>,
    pub namespace: Option<String>,
    /// NOMAD_REGION, as Nomad sets it in every task's environment.
    pub region: Option<String>,
    /// The variable path the lock lives at.
    pub lock_path: String,
    /// The probe listener's socket.
    pub probe_socket: PathBuf,
    pub probe: ProbeCommand,
    /// Make the probe exit by itself with code N after D.
    pub probe_exit_after: Option<(Duration, u8)>,
    pub extra_env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Bytes of stdout and stderr kept per process, the two together (head and tail).
    pub capture_limit: usize,
}

impl ClientOptions {
    /// Defaults: no token, no namespace, this binary as probe, no extra env, 256 KiB captures.
    pub fn new(
        label: &str,
        addr: ApiAddr,
        lock_path: &str,
        probe_socket: &Path,
        probe: ProbeCommand,
    ) -> ClientOptions {
        ClientOptions {
            label: label.to_string(),
            addr,
            token: None,
            namespace: None,
            region: None,
            lock_path: lock_path.to_string(),
            probe_socket: probe_socket.to_path_buf(),
            probe,
            probe_exit_after: None,
            extra_env: Vec::new(),
            cwd: None,
            capture_limit: 256 * 1024,
        }
    }

    /// The exact environment of the client's processes.
    pub fn env(&self) -> Vec<(String, String)> {
        let mut env = Vec::new();
        match &self.addr {
            ApiAddr::Http(a) => env.push(("NOMAD_ADDR".to_string(), a.clone())),
            ApiAddr::Unix(p) => env.push((
                "NOMAD_UNIX_ADDR".to_string(),
                format!("unix://{}", p.display()),
            )),
        }
        if let Some(t) = &self.token {
            env.push(("NOMAD_TOKEN".to_string(), t.clone()));
        }
        if let Some(ns) = &self.namespace {
            env.push(("NOMAD_NAMESPACE".to_string(), ns.clone()));
        }
        if let Some(r) = &self.region {
            env.push(("NOMAD_REGION".to_string(), r.clone()));
        }
        env.push((
            "NOMAD_CONFORM_LOCK_PATH".to_string(),
            self.lock_path.clone(),
        ));
        for name in ["PATH", "HOME"] {
            if let Ok(v) = std::env::var(name) {
                env.push((name.to_string(), v));
            }
        }
        env.extend(self.extra_env.iter().cloned());
        env
    }

    /// The probe's shell-quoted command line.
    pub fn protected_line(&self) -> String {
        self.probe
            .shell_line(&self.probe_socket, &self.label, self.probe_exit_after)
    }
}

/// Replaces `{name}` placeholders with shell-quoted values.
pub fn substitute(command: &str, values: &[(&str, &str)]) -> String {
    let mut out = command.to_string();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), &crate::shell::quote(value));
    }
    out
}

/// One process of a client (the shim, or the sidecar, or the application).
#[derive(Clone, Debug)]
pub struct TaskRecord {
    /// `shim`, `sidecar` or `app`.
    pub role: &'static str,
    pub argv: Vec<String>,
    /// Its PID, which is also its process group.
    pub pid: i32,
    pub started: Instant,
    pub exited: Option<Instant>,
    pub status: Option<ExitStatus>,
    /// Processes of its group still alive when it exited (killed then).
    pub leftovers: Vec<ProcInfo>,
    pub stdout: Excerpt,
    pub stderr: Excerpt,
}

struct Task {
    role: &'static str,
    argv: Vec<String>,
    pid: i32,
    started: Instant,
    exited: Option<(Instant, ExitStatus)>,
    leftovers: Vec<ProcInfo>,
    output: Arc<Mutex<Captures>>,
}

impl Task {
    fn record(&self) -> TaskRecord {
        let output = self.output.lock().unwrap_or_else(|p| p.into_inner());
        let ex = |c: &crate::process::Capture| c.excerpt(crate::process::REPORT_EXCERPT_BYTES);
        TaskRecord {
            role: self.role,
            argv: self.argv.clone(),
            pid: self.pid,
            started: self.started,
            exited: self.exited.as_ref().map(|(t, _)| *t),
            status: self.exited.as_ref().map(|(_, s)| s.clone()),
            leftovers: self.leftovers.clone(),
            stdout: ex(&output.stdout),
            stderr: ex(&output.stderr),
        }
    }
}

#[derive(Default)]
struct State {
    main: Option<Task>,
    app: Option<Task>,
    sentinel_seen: Option<Instant>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The start and end of a client, for the checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRun {
    pub label: String,
    pub started: Instant,
    pub exited: Option<Instant>,
    pub status: Option<ExitStatus>,
}

/// A client under test, running.
pub struct RunningClient {
    label: String,
    env: Vec<(String, String)>,
    started: Instant,
    state: Arc<Mutex<State>>,
    /// Process groups to kill on drop.
    groups: Arc<Mutex<Vec<i32>>>,
    done: watch::Receiver<bool>,
    supervisor: JoinHandle<()>,
}

impl std::fmt::Debug for RunningClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningClient")
            .field("label", &self.label)
            .finish()
    }
}

struct Spawned {
    child: Child,
    task: Task,
    readers: [JoinHandle<()>; 2],
}

/// A program named by a relative path with a directory in it (`target/debug/client`) is found
/// from the directory nomad-conform was started in, as the shell that typed it would find it:
/// the task itself runs in its own task directory, where that path names nothing. A bare name
/// is looked up on PATH, an absolute path is left alone.
fn from_invoking_dir(program: &str) -> PathBuf {
    let path = Path::new(program);
    if path.is_relative()
        && program.contains('/')
        && let Ok(cwd) = std::env::current_dir()
    {
        return cwd.join(path);
    }
    path.to_path_buf()
}

fn spawn_task(
    role: &'static str,
    argv: Vec<String>,
    env: &[(String, String)],
    cwd: Option<&Path>,
    capture_limit: usize,
    groups: &Mutex<Vec<i32>>,
) -> std::io::Result<Spawned> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command"))?;
    let mut cmd = Command::new(from_invoking_dir(program));
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    crate::exec_signals::reset_on_tokio_spawn(&mut cmd);
    let mut child = cmd.spawn()?;
    let started = Instant::now();
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    if pid > 0 {
        crate::process::register_group(pid);
        groups.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
    }
    let output = Arc::new(Mutex::new(Captures::new(capture_limit)));
    let readers = [
        crate::process::drain_stream(child.stdout.take(), output.clone(), Stream::Stdout),
        crate::process::drain_stream(child.stderr.take(), output.clone(), Stream::Stderr),
    ];
    Ok(Spawned {
        child,
        task: Task {
            role,
            argv,
            pid,
            started,
            exited: None,
            leftovers: Vec::new(),
            output,
        },
        readers,
    })
}

fn exit_status(st: std::io::Result<std::process::ExitStatus>) -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    match st {
        Ok(st) => match (st.code(), st.signal()) {
            (Some(code), _) => ExitStatus::Exited { code },
            (None, Some(signal)) => ExitStatus::Signaled { signal },
            (None, None) => ExitStatus::SpawnFailed {
                message: "process ended without a status".into(),
            },
        },
        Err(e) => ExitStatus::SpawnFailed {
            message: format!("failed to wait for the process: {e}"),
        },
    }
}

/// Waits for a task's main process, then kills what is left of its group, drains its pipes
/// and records the exit in `slot`.
async fn watch_task(
    mut child: Child,
    readers: [JoinHandle<()>; 2],
    pid: i32,
    state: Arc<Mutex<State>>,
    groups: Arc<Mutex<Vec<i32>>>,
    app: bool,
) {
    let status = exit_status(child.wait().await);
    let exited = Instant::now();
    let leftovers = crate::process::group_members(pid);
    if !leftovers.is_empty() {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        crate::escapees::reap_group(pid).await;
    }
    let [a, b] = readers;
    let _ = tokio::time::timeout(DRAIN_AFTER_EXIT, async {
        let _ = a.await;
        let _ = b.await;
    })
    .await;
    // Gone: no later kill may hit a process that reused the ID.
    crate::process::unregister_group(pid);
    groups
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|g| *g != pid);
    let mut st = lock(&state);
    let slot = if app { &mut st.app } else { &mut st.main };
    if let Some(t) = slot.as_mut() {
        t.exited = Some((exited, status));
        t.leftovers = leftovers;
    }
}

impl RunningClient {
    /// Starts the client (for a sidecar: the leader task; the application follows the
    /// sentinel).
    pub async fn start(
        spec: &ClientSpec,
        opts: &ClientOptions,
    ) -> Result<RunningClient, ClientError> {
        let env = opts.env();
        let groups = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(Mutex::new(State::default()));
        let (done_tx, done) = watch::channel(false);
        let spawn_err = |source| ClientError::Spawn {
            label: opts.label.clone(),
            source,
        };
        let supervisor = match spec {
            ClientSpec::Shim { command } => {
                if !command.contains("{protected}") {
                    return Err(ClientError::NoProtected {
                        label: opts.label.clone(),
                    });
                }
                let line = command
                    .replace("{protected}", &opts.protected_line())
                    .replace("{path}", &crate::shell::quote(&opts.lock_path));
                let argv = task_argv(&line);
                let s = spawn_task(
                    "shim",
                    argv,
                    &env,
                    opts.cwd.as_deref(),
                    opts.capture_limit,
                    &groups,
                )
                .map_err(spawn_err)?;
                let pid = s.task.pid;
                lock(&state).main = Some(s.task);
                let (state2, groups2) = (state.clone(), groups.clone());
                tokio::spawn(async move {
                    watch_task(s.child, s.readers, pid, state2, groups2, false).await;
                    let _ = done_tx.send(true);
                })
            }
            ClientSpec::Sidecar {
                command,
                sentinel,
                kill_timeout,
            } => {
                let pidfile = pidfile_for(sentinel);
                let mut sidecar_env = env.clone();
                sidecar_env.push((
                    "NOMAD_CONFORM_APP_PIDFILE".to_string(),
                    pidfile.display().to_string(),
                ));
                let line = substitute(
                    command,
                    &[
                        ("path", &opts.lock_path),
                        ("sentinel", &sentinel.display().to_string()),
                    ],
                );
                let argv = task_argv(&line);
                let s = spawn_task(
                    "sidecar",
                    argv,
                    &sidecar_env,
                    opts.cwd.as_deref(),
                    opts.capture_limit,
                    &groups,
                )
                .map_err(spawn_err)?;
                let pid = s.task.pid;
                lock(&state).main = Some(s.task);
                let app_argv =
                    opts.probe
                        .argv(&opts.probe_socket, &opts.label, opts.probe_exit_after);
                let group = Group {
                    state: state.clone(),
                    groups: groups.clone(),
                    env: env.clone(),
                    cwd: opts.cwd.clone(),
                    capture_limit: opts.capture_limit,
                };
                let (sentinel, kill_timeout) = (sentinel.clone(), *kill_timeout);
                let (child, readers) = (s.child, s.readers);
                tokio::spawn(async move {
                    group
                        .run(
                            child,
                            readers,
                            pid,
                            app_argv,
                            sentinel,
                            pidfile,
                            kill_timeout,
                        )
                        .await;
                    let _ = done_tx.send(true);
                })
            }
        };
        let started = lock(&state)
            .main
            .as_ref()
            .map(|t| t.started)
            .unwrap_or_else(Instant::now);
        Ok(RunningClient {
            label: opts.label.clone(),
            env,
            started,
            state,
            groups,
            done,
            supervisor,
        })
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// The environment the client got.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// PID of the shim or sidecar (its process group too).
    pub fn pid(&self) -> i32 {
        lock(&self.state).main.as_ref().map_or(0, |t| t.pid)
    }

    /// When the sidecar's sentinel appeared.
    pub fn sentinel_seen(&self) -> Option<Instant> {
        lock(&self.state).sentinel_seen
    }

    /// Whether everything of the client has ended.
    pub fn finished(&self) -> bool {
        *self.done.borrow()
    }

    /// The exit status of the shim or sidecar, once it exited.
    pub fn status(&self) -> Option<ExitStatus> {
        lock(&self.state)
            .main
            .as_ref()
            .and_then(|t| t.exited.as_ref().map(|(_, s)| s.clone()))
    }

    /// When the shim or sidecar exited.
    pub fn exited_at(&self) -> Option<Instant> {
        lock(&self.state)
            .main
            .as_ref()
            .and_then(|t| t.exited.as_ref().map(|(at, _)| *at))
    }

    /// Sends `sig` to the shim's or sidecar's main process (as Nomad signals a task).
    pub fn signal(&self, sig: Signal) -> Result<(), nix::Error> {
        let pid = self.pid();
        if pid <= 0 || self.exited_at().is_some() {
            return Err(nix::Error::ESRCH);
        }
        kill(Pid::from_raw(pid), sig)
    }

    /// Sends `sig` to every process group of the client.
    pub fn signal_groups(&self, sig: Signal) {
        for g in self.groups.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = killpg(Pid::from_raw(*g), sig);
        }
    }

    /// SIGKILL to every process group of the client.
    pub fn kill(&self) {
        self.signal_groups(Signal::SIGKILL);
    }

    /// Waits until the client has ended (its main process exited and what it left was
    /// cleaned up), at most `timeout`; its exit status, or `None` if still running.
    pub async fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        let mut done = self.done.clone();
        let _ = tokio::time::timeout(timeout, done.wait_for(|d| *d)).await;
        if self.finished() { self.status() } else { None }
    }

    /// Stops the client as Nomad stops a task: SIGTERM to the main process, SIGKILL to its
    /// groups after `kill_timeout`. Its exit status.
    pub async fn stop(&self, kill_timeout: Duration) -> Option<ExitStatus> {
        let _ = self.signal(Signal::SIGTERM);
        if let Some(s) = self.wait_exit(kill_timeout).await {
            return Some(s);
        }
        self.kill();
        self.wait_exit(Duration::from_secs(5)).await
    }

    /// Start and end, for the checker.
    pub fn run(&self) -> ClientRun {
        ClientRun {
            label: self.label.clone(),
            started: self.started,
            exited: self.exited_at(),
            status: self.status(),
        }
    }

    /// What each process did, main first.
    pub fn tasks(&self) -> Vec<TaskRecord> {
        let st = lock(&self.state);
        st.main
            .iter()
            .chain(st.app.iter())
            .map(Task::record)
            .collect()
    }
}

impl Drop for RunningClient {
    fn drop(&mut self) {
        self.kill();
        self.supervisor.abort();
        for g in self.groups.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            crate::process::unregister_group(*g);
        }
    }
}

/// The argv a task runs for a command line: split as a shell splits words, and run directly as
/// Nomad runs a task's `command` and `args` (so the kill signal reaches the client itself); a
/// line that needs a shell (operators, redirections, `$` expansions) runs under `/bin/sh -c`,
/// and then the signal reaches the shell.
pub fn task_argv(line: &str) -> Vec<String> {
    // Any shell syntax (even quoted, to stay simple): run under a shell.
    const SHELL: [char; 9] = ['$', '`', ';', '|', '&', '<', '>', '(', ')'];
    let words = shlex::split(line).filter(|w| !w.is_empty());
    match words {
        Some(words) if !line.contains(SHELL) => words,
        _ => vec!["/bin/sh".to_string(), "-c".to_string(), line.to_string()],
    }
}

/// Where the harness writes a sidecar's application PID.
fn pidfile_for(sentinel: &Path) -> PathBuf {
    let mut name = sentinel
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".app-pid");
    sentinel.with_file_name(name)
}

/// The harness playing Nomad's task group for the sidecar shape.
struct Group {
    state: Arc<Mutex<State>>,
    groups: Arc<Mutex<Vec<i32>>>,
    env: Vec<(String, String)>,
    cwd: Option<PathBuf>,
    capture_limit: usize,
}

impl Group {
    #[allow(clippy::too_many_arguments)]
    async fn run(
        self,
        sidecar: Child,
        readers: [JoinHandle<()>; 2],
        sidecar_pid: i32,
        app_argv: Vec<String>,
        sentinel: PathBuf,
        pidfile: PathBuf,
        kill_timeout: Duration,
    ) {
        let leader = tokio::spawn(watch_task(
            sidecar,
            readers,
            sidecar_pid,
            self.state.clone(),
            self.groups.clone(),
            false,
        ));
        tokio::pin!(leader);
        let mut app: Option<(i32, JoinHandle<()>)> = None;
        // Until the leader exits: start the application when the sentinel appears.
        loop {
            tokio::select! {
                _ = &mut leader => break,
                _ = tokio::time::sleep(SENTINEL_POLL), if app.is_none() => {
                    if sentinel.exists() {
                        lock(&self.state).sentinel_seen = Some(Instant::now());
                        app = self.start_app(&app_argv, &pidfile);
                    }
                }
            }
        }
        // The leader is gone: stop the application as Nomad does.
        if let Some((pid, mut watcher)) = app {
            if !watcher.is_finished() {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                if tokio::time::timeout(kill_timeout, &mut watcher)
                    .await
                    .is_err()
                {
                    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
                    let _ = watcher.await;
                }
            } else {
                let _ = watcher.await;
            }
        }
    }

    fn start_app(&self, argv: &[String], pidfile: &Path) -> Option<(i32, JoinHandle<()>)> {
        match spawn_task(
            "app",
            argv.to_vec(),
            &self.env,
            self.cwd.as_deref(),
            self.capture_limit,
            &self.groups,
        ) {
            Ok(s) => {
                let pid = s.task.pid;
                let _ = std::fs::write(pidfile, format!("{pid}\n"));
                lock(&self.state).app = Some(s.task);
                let watcher = tokio::spawn(watch_task(
                    s.child,
                    s.readers,
                    pid,
                    self.state.clone(),
                    self.groups.clone(),
                    true,
                ));
                Some((pid, watcher))
            }
            Err(e) => {
                // Recorded as an application that never ran.
                lock(&self.state).app = Some(Task {
                    role: "app",
                    argv: argv.to_vec(),
                    pid: 0,
                    started: Instant::now(),
                    exited: Some((
                        Instant::now(),
                        ExitStatus::SpawnFailed {
                            message: e.to_string(),
                        },
                    )),
                    leftovers: Vec::new(),
                    output: Arc::new(Mutex::new(Captures::new(0))),
                });
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &Path) -> ClientOptions {
        ClientOptions::new(
            "c1",
            ApiAddr::Http("http://127.0.0.1:1".into()),
            "app/lock",
            &dir.join("p.sock"),
            // A stand-in for the probe that just sleeps (the probe's flags become the
            // positional parameters of `sh -c`, and are ignored).
            ProbeCommand {
                program: "/bin/sh".into(),
                args: vec!["-c".into(), "sleep 5".into(), "stand-in".into()],
            },
        )
    }

    #[test]
    fn simple_lines_run_directly_and_shell_lines_under_sh() {
        assert_eq!(
            task_argv("lock --path 'a b' -- probe --x"),
            ["lock", "--path", "a b", "--", "probe", "--x"]
        );
        for line in [
            "a; b",
            "a && b",
            "a | b",
            "echo $HOME",
            "a > f",
            "'unclosed",
        ] {
            assert_eq!(task_argv(line), ["/bin/sh", "-c", line], "{line}");
        }
    }

    #[test]
    fn environment_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.token = Some("t".into());
        o.namespace = Some("prod".into());
        o.extra_env = vec![("X".into(), "1".into())];
        let env = o.env();
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert!(names.contains(&"NOMAD_ADDR"));
        assert!(!names.contains(&"NOMAD_UNIX_ADDR"));
        assert!(env.contains(&("NOMAD_TOKEN".into(), "t".into())));
        assert!(env.contains(&("NOMAD_NAMESPACE".into(), "prod".into())));
        assert!(env.contains(&("NOMAD_CONFORM_LOCK_PATH".into(), "app/lock".into())));
        assert!(env.contains(&("X".into(), "1".into())));
        for (k, _) in &env {
            assert!(
                k.starts_with("NOMAD_") || ["PATH", "HOME", "X"].contains(&k.as_str()),
                "{k}"
            );
        }
        o.addr = ApiAddr::parse("unix:///s/api.sock").unwrap();
        assert!(
            o.env()
                .contains(&("NOMAD_UNIX_ADDR".into(), "unix:///s/api.sock".into()))
        );
        assert!(ApiAddr::parse("tcp://x").is_err());
    }

    #[test]
    fn placeholders_are_quoted() {
        assert_eq!(
            substitute("lock {path} -- {x}", &[("path", "a b"), ("x", "it's")]),
            r#"lock 'a b' -- "it's""#
        );
    }

    #[tokio::test]
    async fn shim_runs_in_its_own_group_and_leftovers_are_killed() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(dir.path());
        let spec = ClientSpec::Shim {
            command: "echo \"$NOMAD_CONFORM_LOCK_PATH\"; {protected} & echo started; exit 4".into(),
        };
        let c = RunningClient::start(&spec, &o).await.unwrap();
        let status = c.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(status, Some(ExitStatus::Exited { code: 4 }));
        let tasks = c.tasks();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].stdout.text, "app/lock\nstarted\n");
        // The backgrounded stand-in outlived the shim and was killed with the group.
        assert!(
            tasks[0]
                .leftovers
                .iter()
                .any(|p| p.cmdline.contains("sleep")),
            "{:?}",
            tasks[0].leftovers
        );
        assert!(crate::process::group_members(c.pid()).is_empty());
        assert!(c.run().exited.is_some());
    }

    #[tokio::test]
    async fn a_shim_without_protected_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = RunningClient::start(
            &ClientSpec::Shim {
                command: "true".into(),
            },
            &opts(dir.path()),
        )
        .await
        .unwrap_err();
        assert!(
            e.to_string().starts_with("failed to start client c1"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn stop_sends_sigterm_then_kills() {
        let dir = tempfile::tempdir().unwrap();
        let spec = ClientSpec::Shim {
            command: "trap '' TERM; : {protected}; sleep 30".into(),
        };
        let c = RunningClient::start(&spec, &opts(dir.path()))
            .await
            .unwrap();
        // Let the shell set its trap.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t = Instant::now();
        let status = c.stop(Duration::from_millis(300)).await;
        assert_eq!(status, Some(ExitStatus::Signaled { signal: 9 }));
        assert!(t.elapsed() >= Duration::from_millis(300));
    }

    #[tokio::test]
    async fn sidecar_starts_the_app_on_the_sentinel_and_stops_it_when_it_exits() {
        let dir = tempfile::tempdir().unwrap();
        let sentinel = dir.path().join("ready");
        let spec = ClientSpec::Sidecar {
            command: "sleep 0.2; touch {sentinel}; sleep 0.5; cat \"$NOMAD_CONFORM_APP_PIDFILE\""
                .into(),
            sentinel: sentinel.clone(),
            kill_timeout: Duration::from_millis(500),
        };
        let c = RunningClient::start(&spec, &opts(dir.path()))
            .await
            .unwrap();
        let status = c.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(status, Some(ExitStatus::Exited { code: 0 }));
        let tasks = c.tasks();
        assert_eq!(tasks.len(), 2, "{tasks:?}");
        let app = &tasks[1];
        assert_eq!(app.role, "app");
        // `sleep` dies of the SIGTERM sent when the leader exited.
        assert_eq!(app.status, Some(ExitStatus::Signaled { signal: 15 }));
        assert!(app.started >= c.sentinel_seen().unwrap());
        assert!(app.exited.unwrap() >= tasks[0].exited.unwrap());
        assert_eq!(tasks[0].stdout.text.trim(), app.pid.to_string());
    }
}
