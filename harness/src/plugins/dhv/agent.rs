//! The stand-in for the Nomad agent that every DHV plugin call runs under.
//!
//! The Nomad client runs a plugin with `exec.CommandContext(ctx, <plugin_dir>/<id>, <op>)` and
//! `cmd.Output()` (client/hostvolumemanager/host_volume_plugin.go): no `Setpgid`, so the plugin
//! is a member of the *agent's* process group, and no `Cancel` or `WaitDelay`, so at the deadline
//! only the direct child gets SIGKILL and the call then waits for stdout and stderr to close.
//!
//! The harness cannot let a plugin signal the harness's own group, so it starts this small
//! program (the harness binary itself, `nomad-conform __dhv-agent ...`) in a process group of its
//! own and the plugin as its child in that same group, as the agent would. It then:
//! - records every signal sent to it (a plugin's `kill 0`, `trap 'kill 0' EXIT`, `kill -HUP 0`
//!   would reach the Nomad agent: SIGTERM and SIGINT stop it, SIGHUP reloads it), with the
//!   sender, as it arrives;
//! - at the call's deadline kills only its direct child with SIGKILL, as Go's `os/exec` does,
//!   and exits; the harness then waits for the pipes (bounded) to measure how long Nomad would
//!   have hung, and cleans up the whole group as before;
//! - optionally gives the plugin a private `/tmp` (a mount namespace with a directory of the
//!   harness bind-mounted over `/tmp`), so that what a call writes there can be seen.
//!
//! Everything is written to a report file as JSON lines, each one as soon as it is known, so
//! that what was recorded survives the stand-in being killed (`kill -9 0`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::libc;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// The first argument that makes the harness binary act as the stand-in.
pub const ARG: &str = "__dhv-agent";

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Line {
    /// The plugin was started.
    Started { pid: i32 },
    /// What became of the private /tmp that was asked for.
    Tmp { private: bool, note: String },
    /// A signal someone sent to the stand-in (the agent), ms after the start.
    Signal {
        signal: i32,
        name: String,
        from_pid: i32,
        from: String,
        at_ms: u64,
    },
    /// How the plugin ended.
    Ended {
        code: Option<i32>,
        signal: Option<i32>,
        killed_at_deadline: bool,
        at_ms: u64,
    },
}

/// The stand-in's command line: what `nomad-conform __dhv-agent` is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    pub report: PathBuf,
    pub deadline: Duration,
    pub private_tmp: Option<PathBuf>,
    pub plugin: PathBuf,
    pub op: String,
    /// Trees besides the plugin's that must stay visible at their own paths in a private /tmp
    /// (the volumes directory of a create or delete).
    pub keep: Vec<PathBuf>,
}

impl Args {
    /// The arguments after the program name.
    pub fn to_argv(&self) -> Vec<String> {
        vec![
            ARG.to_string(),
            self.report.display().to_string(),
            self.deadline.as_millis().to_string(),
            self.private_tmp
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "-".into()),
            self.plugin.display().to_string(),
            self.op.clone(),
        ]
        .into_iter()
        .chain(self.keep.iter().map(|k| k.display().to_string()))
        .collect()
    }

    fn parse(argv: &[std::ffi::OsString]) -> Option<Args> {
        let s = |i: usize| argv.get(i).map(PathBuf::from);
        if argv.get(1)?.to_str()? != ARG || argv.len() < 7 {
            return None;
        }
        let tmp = s(4)?;
        Some(Args {
            report: s(2)?,
            deadline: Duration::from_millis(argv.get(3)?.to_str()?.parse().ok()?),
            private_tmp: (tmp != Path::new("-")).then_some(tmp),
            plugin: s(5)?,
            op: argv.get(6)?.to_str()?.to_string(),
            keep: argv[7..].iter().map(PathBuf::from).collect(),
        })
    }
}

/// Whether `argv` asks for the stand-in (checked by `main` before anything else).
pub fn is_agent(argv: &[std::ffi::OsString]) -> bool {
    argv.get(1).is_some_and(|a| a == ARG)
}

/// Run as the stand-in; returns the exit code.
pub fn main(argv: &[std::ffi::OsString]) -> i32 {
    let Some(args) = Args::parse(argv) else {
        eprintln!("nomad-conform {ARG}: bad arguments");
        return 125;
    };
    let started = Instant::now();
    let mut report = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.report)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("nomad-conform {ARG}: {}: {e}", args.report.display());
            return 125;
        }
    };
    let mut put = |line: &Line| {
        if let Ok(text) = serde_json::to_string(line) {
            let _ = writeln!(report, "{text}");
        }
    };
    // Every signal is taken from a queue below, never by a handler: blocked here. The plugin
    // starts with nothing blocked and every disposition the default, as Go's os/exec starts it
    // (exec_signals).
    let all = SigSet::all();
    if sigprocmask(SigmaskHow::SIG_BLOCK, Some(&all), None).is_err() {
        return 125;
    }
    if let Some(dir) = &args.private_tmp {
        let trees =
            std::iter::once(args.plugin.as_path()).chain(args.keep.iter().map(|k| k.as_path()));
        let (private, note) = private_tmp(dir, &kept_under_tmp(trees));
        put(&Line::Tmp { private, note });
    }
    // The plugin, as Nomad runs it: its path, the operation, the environment this process was
    // given (exactly Nomad's), stdout and stderr the harness's pipes, in this process group.
    let mut command = std::process::Command::new(&args.plugin);
    command.arg(&args.op).stdin(std::process::Stdio::null());
    crate::exec_signals::reset_on_spawn(&mut command);
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            // As Go reports a failed start: no status at all.
            eprintln!("{}: {e}", args.plugin.display());
            return 127;
        }
    };
    let pid = child.id() as i32;
    // std's Child is not used to wait: the status is taken with waitpid below.
    std::mem::forget(child);
    // The stand-in lets go of the harness's pipes at once: they close when the plugin and what
    // it started close them, never later because the stand-in was slow to notice the exit (a
    // loaded machine once made that look like a plugin holding its output open).
    release_output();
    put(&Line::Started { pid });
    let deadline = started + args.deadline;
    let ended = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match wait_signal(&all, left) {
            Some(info) if info.signal == libc::SIGCHLD => {}
            Some(info) => {
                let sender = crate::process::cmdline(info.from_pid);
                put(&Line::Signal {
                    signal: info.signal,
                    name: signal_name(info.signal),
                    from_pid: info.from_pid,
                    from: sender,
                    at_ms: started.elapsed().as_millis() as u64,
                });
            }
            None if Instant::now() >= deadline => {
                // Go's exec.CommandContext: Process.Kill, the direct child only.
                let _ = nix::sys::signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
                let status = waitpid(Pid::from_raw(pid), None);
                break ended_line(status, true, started);
            }
            None => {}
        }
        match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            status => break ended_line(status, false, started),
        }
    };
    put(&ended);
    match ended {
        Line::Ended {
            code: Some(code), ..
        } => code,
        Line::Ended {
            signal: Some(s), ..
        } => 128 + s,
        _ => 125,
    }
}

/// Point this process's stdout and stderr at /dev/null.
fn release_output() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd as _;
        // SAFETY: dup2 onto the standard descriptors; `null` stays open for the call.
        unsafe {
            libc::dup2(null.as_raw_fd(), libc::STDOUT_FILENO);
            libc::dup2(null.as_raw_fd(), libc::STDERR_FILENO);
        }
    }
}

fn ended_line(status: nix::Result<WaitStatus>, killed: bool, started: Instant) -> Line {
    let (code, signal) = match status {
        Ok(WaitStatus::Exited(_, c)) => (Some(c), None),
        Ok(WaitStatus::Signaled(_, s, _)) => (None, Some(s as i32)),
        _ => (None, None),
    };
    Line::Ended {
        code,
        signal,
        killed_at_deadline: killed,
        at_ms: started.elapsed().as_millis() as u64,
    }
}

struct SignalInfo {
    signal: i32,
    from_pid: i32,
}

/// Take the next pending signal of `set`, waiting at most `within` (at most 50 ms at a time,
/// so that the child's exit is seen even if its SIGCHLD merged with another).
fn wait_signal(set: &SigSet, within: Duration) -> Option<SignalInfo> {
    let within = within.min(Duration::from_millis(50));
    let ts = libc::timespec {
        tv_sec: within.as_secs() as libc::time_t,
        tv_nsec: within.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a zeroed siginfo_t is a valid value of that plain C struct; sigtimedwait writes
    // only into it, and the set and timespec outlive the call.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let sig = unsafe { libc::sigtimedwait(set.as_ref(), &mut info, &ts) };
    if sig <= 0 {
        return None;
    }
    // SAFETY: for a signal sent with kill(2) (and for SIGCHLD) si_pid is set.
    let from_pid = unsafe { info.si_pid() };
    Some(SignalInfo {
        signal: sig,
        from_pid,
    })
}

/// The name of a signal number, `SIGTERM` or `signal 42`.
pub fn signal_name(n: i32) -> String {
    Signal::try_from(n)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {n}"))
}

/// What must stay visible at its own path inside a private /tmp for the plugin to run: the top
/// of the tree under /tmp each of `paths` lives in (`/tmp/repo` for
/// `/tmp/repo/fixtures/p/plugin`, so that files beside it stay reachable too), for each path as
/// given and for what it resolves to. Empty when none is under /tmp.
pub fn kept_under_tmp<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Vec<PathBuf> {
    let top = |p: &Path| {
        let rest = p.strip_prefix("/tmp").ok()?;
        let first = rest.components().next()?;
        Some(Path::new("/tmp").join(first))
    };
    let mut kept: Vec<PathBuf> = paths
        .into_iter()
        .flat_map(|p| [Some(p.to_path_buf()), std::fs::canonicalize(p).ok()])
        .flatten()
        .filter_map(|p| top(&p))
        .collect();
    kept.sort();
    kept.dedup();
    kept
}

/// Give this process (and so the plugin) a /tmp of its own: `dir` bind-mounted over /tmp in a
/// new mount namespace, with each of `keep` (trees under the old /tmp) bind-mounted back at its
/// own path. As root a plain mount namespace; otherwise one inside a user namespace that maps
/// this user to itself. Returns whether it worked, and how (or why not).
fn private_tmp(dir: &Path, keep: &[PathBuf]) -> (bool, String) {
    use nix::mount::{MsFlags, mount};
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    // SAFETY: unshare(2) only changes this (single-threaded) process's namespaces.
    let plain = unsafe { libc::unshare(libc::CLONE_NEWNS) } == 0;
    let how = if plain {
        "a mount namespace".to_string()
    } else {
        // SAFETY: as above.
        if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
            return (
                false,
                format!(
                    "no mount namespace could be made ({}): /tmp was not isolated",
                    std::io::Error::last_os_error()
                ),
            );
        }
        let maps = std::fs::write("/proc/self/setgroups", "deny")
            .and_then(|_| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n")))
            .and_then(|_| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n")));
        if let Err(e) = maps {
            return (false, format!("user namespace without a mapping ({e})"));
        }
        "a user and mount namespace".to_string()
    };
    let none: Option<&str> = None;
    if let Err(e) = mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none) {
        return (
            false,
            format!("{how}, but / could not be made private ({e})"),
        );
    }
    // Opened before /tmp is covered, to be mounted back from these handles after.
    let handles: Vec<(PathBuf, std::fs::File)> = {
        use std::os::unix::fs::OpenOptionsExt as _;
        let opened: Result<Vec<_>, _> = keep
            .iter()
            .map(|k| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH)
                    .open(k)
                    .map(|f| (k.clone(), f))
            })
            .collect();
        match opened {
            Ok(h) => h,
            Err(e) => {
                return (
                    false,
                    format!("{how}, but the plugin's tree under /tmp could not be opened ({e})"),
                );
            }
        }
    };
    // The private directory and the working directory are usually in the harness's run
    // directory, which may itself be on a mount under /tmp (a TMPDIR on a tmpfs of its own):
    // the mounts they live on stay, hidden under the private /tmp like the rest of the old one.
    let needed: Vec<PathBuf> = keep
        .iter()
        .cloned()
        .chain(std::iter::once(dir.to_path_buf()))
        .chain(std::env::current_dir().ok())
        .collect();
    release_copied_mounts(&needed);
    if let Err(e) = mount(
        Some(dir),
        "/tmp",
        none,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        none,
    ) {
        return (false, format!("{how}, but the bind mount failed ({e})"));
    }
    for (path, handle) in &handles {
        use std::os::fd::AsRawFd as _;
        let made = if handle.metadata().is_ok_and(|m| m.is_dir()) {
            std::fs::create_dir_all(path)
        } else {
            std::fs::File::create(path).map(drop)
        };
        let source = format!("/proc/self/fd/{}", handle.as_raw_fd());
        let bound = made.map_err(|e| e.to_string()).and_then(|()| {
            mount(
                Some(source.as_str()),
                path,
                none,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                none,
            )
            .map_err(|e| e.to_string())
        });
        if let Err(e) = bound {
            return (
                false,
                format!(
                    "{how}, but {} could not be kept visible in it ({e})",
                    path.display()
                ),
            );
        }
    }
    let kept = if handles.is_empty() {
        String::new()
    } else {
        format!(
            " ({} kept visible at {})",
            "the plugin's tree",
            keep.iter()
                .map(|k| k.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    (
        true,
        format!("{} bind-mounted over /tmp in {how}{kept}", dir.display()),
    )
}

/// Let go of the copies of the mounts under /tmp that this new namespace was given. A copy
/// holds its filesystem alive: a loop-mounted volume that a concurrent clause unmounts on the
/// host would keep its loop device attached until this namespace ends, and that clause would
/// see a leak that is ours. The copies are hidden under the private /tmp anyway; only those on
/// the way to (or inside) a path of `keep` stay: the kept trees are mounted back from them, and
/// the private directory and the working directory must stay reachable.
fn release_copied_mounts(keep: &[PathBuf]) {
    let kept = |m: &Path| keep.iter().any(|k| k.starts_with(m) || m.starts_with(k));
    for m in crate::mounts::under(Path::new("/tmp")).unwrap_or_default() {
        if !kept(&m) {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// What the report of one call says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub started: bool,
    pub tmp: Option<(bool, String)>,
    pub signals: Vec<Line>,
    pub ended: Option<Line>,
}

impl Report {
    pub fn read(path: &Path) -> Report {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut r = Report::default();
        for l in text.lines() {
            match serde_json::from_str::<Line>(l) {
                Ok(Line::Started { .. }) => r.started = true,
                Ok(Line::Tmp { private, note }) => r.tmp = Some((private, note)),
                Ok(s @ Line::Signal { .. }) => r.signals.push(s),
                Ok(e @ Line::Ended { .. }) => r.ended = Some(e),
                Err(_) => {}
            }
        }
        r
    }

    /// The plugin's own status, as Nomad would see it; `None` if the stand-in did not live to
    /// say.
    pub fn status(&self) -> Option<nomad_conform_reports::model::ExitStatus> {
        use nomad_conform_reports::model::ExitStatus;
        match &self.ended {
            Some(Line::Ended {
                killed_at_deadline: true,
                ..
            }) => Some(ExitStatus::KilledAtDeadline),
            Some(Line::Ended {
                code: Some(code), ..
            }) => Some(ExitStatus::Exited { code: *code }),
            Some(Line::Ended {
                signal: Some(signal),
                ..
            }) => Some(ExitStatus::Signaled { signal: *signal }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_round_trips() {
        let a = Args {
            report: "/r/1.jsonl".into(),
            deadline: Duration::from_millis(1500),
            private_tmp: None,
            plugin: "/p/plug in".into(),
            op: "create".into(),
            keep: Vec::new(),
        };
        let mut argv: Vec<std::ffi::OsString> = vec!["/proc/self/exe".into()];
        argv.extend(a.to_argv().into_iter().map(Into::into));
        assert!(is_agent(&argv));
        assert_eq!(Args::parse(&argv), Some(a.clone()));
        let b = Args {
            private_tmp: Some("/t".into()),
            keep: vec!["/tmp/run/volumes".into(), "/tmp/other dir".into()],
            ..a
        };
        let mut argv: Vec<std::ffi::OsString> = vec!["x".into()];
        argv.extend(b.to_argv().into_iter().map(Into::into));
        assert_eq!(Args::parse(&argv), Some(b));
    }

    #[test]
    fn report_lines_are_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r");
        let lines = [
            Line::Started { pid: 5 },
            Line::Signal {
                signal: 15,
                name: "SIGTERM".into(),
                from_pid: 5,
                from: "sh plugin".into(),
                at_ms: 3,
            },
            Line::Ended {
                code: Some(0),
                signal: None,
                killed_at_deadline: false,
                at_ms: 4,
            },
        ];
        let text: String = lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect();
        std::fs::write(&p, text + "{\"half").unwrap();
        let r = Report::read(&p);
        assert!(r.started);
        assert_eq!(r.signals.len(), 1);
        assert_eq!(
            r.status(),
            Some(nomad_conform_reports::model::ExitStatus::Exited { code: 0 })
        );
        assert_eq!(signal_name(15), "SIGTERM");
    }
}
