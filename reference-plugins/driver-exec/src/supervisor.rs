//! The supervisor: a small process between the plugin and each task.
//!
//! Tasks must outlive the plugin (Nomad may restart or kill it at any time, and recovers the
//! tasks afterwards), but a process can only `wait()` for its own children. So the plugin does
//! not start a task itself: it re-executes its own binary as
//!
//! ```text
//! driver-exec supervise --status-file F --stdout P --stderr P --task-dir D
//!     [--isolation chroot|image --root R [--alloc-dir A]] [--user-id N --cgroup C]
//!     -- COMMAND ARGS...
//! ```
//!
//! with exactly the task's environment. The supervisor
//! 1. starts a new session (so neither the plugin's death nor a signal to the plugin's process
//!    group reaches it or the task),
//! 2. opens the log FIFOs for writing and starts the task in the task directory, as the
//!    leader of a process group of its own (the group StopTask and SignalTask signal); with
//!    `--isolation` it first makes the task's mount namespace and root (`isolation.rs`), and
//!    the task enters its root, cgroup and user between fork and exec (`confine.rs`),
//! 3. reports one JSON line on its stdout to the plugin: the task's pid, or why it could not
//!    start it,
//! 4. waits for the task and writes its exit status atomically to the status file (temporary
//!    file, fsync, rename), then exits.
//!
//! The plugin learns of the exit when its supervisor child exits; a plugin that recovered the
//! task after a restart polls whether the supervisor is still running instead. Either way the
//! status file has the result, also when the task ended while no plugin was running.
//!
//! This file has both sides of that protocol: [`launch`] in the plugin, [`run`] in the
//! supervisor, and [`read_exit`] for the status file.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt as _, BufReader};

use crate::confine::{self, Entry};
use crate::isolation::{self, Isolation};
use crate::{process, users};

/// How long StartTask waits for the supervisor's report. Opening a FIFO for writing blocks
/// until its reader (Nomad's logmon) has opened it.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The hidden `supervise` subcommand's arguments.
#[derive(Debug, clap::Args)]
pub struct SuperviseArgs {
    /// Where to write the task's exit status
    #[arg(long, value_name = "PATH")]
    status_file: PathBuf,
    /// The task's stdout: Nomad's FIFO (opened for writing, appending)
    #[arg(long, value_name = "PATH")]
    stdout: PathBuf,
    /// The task's stderr: Nomad's FIFO
    #[arg(long, value_name = "PATH")]
    stderr: PathBuf,
    /// The task's working directory
    #[arg(long, value_name = "DIR")]
    task_dir: PathBuf,
    /// Stay in the caller's session and process group (the tasks-die-with-plugin fault)
    #[arg(long)]
    same_session: bool,
    /// Run the task in a root filesystem of its own, in a mount namespace of its own
    #[arg(long, value_enum, requires = "root")]
    isolation: Option<Isolation>,
    /// The task's root (the task directory for chroot, an empty directory for image)
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The allocation directory, whose `alloc` an image root gets at /alloc
    #[arg(long, value_name = "DIR")]
    alloc_dir: Option<PathBuf>,
    /// Run the task as this uid and gid, without supplementary groups
    #[arg(long, value_name = "N", requires = "cgroup")]
    user_id: Option<u32>,
    /// Put the task into this cgroup
    #[arg(long, value_name = "DIR")]
    cgroup: Option<PathBuf>,
    /// The command and its arguments
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// The supervisor's one-line report to the plugin.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StartReport {
    Started { task_pid: i32 },
    Failed { error: String },
}

/// What the status file holds once the task has exited.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExitRecord {
    pub exit_code: i32,
    pub signal: i32,
    /// When the supervisor saw the exit, in nanoseconds since the Unix epoch.
    pub completed_at_unix_nanos: i64,
}

/// What the plugin asks for.
pub struct Launch<'a> {
    pub argv: &'a [String],
    pub env: &'a HashMap<String, String>,
    pub task_dir: &'a Path,
    pub stdout: &'a Path,
    pub stderr: &'a Path,
    pub status_file: &'a Path,
    pub same_session: bool,
    /// The isolation and the task's root (chroot and image variants).
    pub isolation: Option<(Isolation, &'a Path)>,
    /// The allocation directory (for an image root's /alloc).
    pub alloc_dir: &'a Path,
    /// The task's dynamic workload user (dynamic-users variant).
    pub user: Option<&'a users::DynamicUser>,
}

/// A started task.
pub struct Supervised {
    /// The supervisor process, the plugin's child: waiting for it also reaps it.
    pub child: tokio::process::Child,
    pub supervisor_pid: i32,
    pub task_pid: i32,
}

/// Plugin side: starts a supervisor and waits for its report.
pub async fn launch(request: Launch<'_>) -> Result<Supervised, String> {
    // The running binary through /proc, not by path: a rebuild that replaces
    // the file on disk must not stop this plugin from starting tasks.
    let running = std::path::PathBuf::from("/proc/self/exe");
    let exe = if running.exists() {
        running
    } else {
        std::env::current_exe()
            .map_err(|err| format!("failed to find the driver's own binary: {err}"))?
    };
    let mut command = tokio::process::Command::new(exe);
    command
        .arg("supervise")
        .arg("--status-file")
        .arg(request.status_file)
        .arg("--stdout")
        .arg(request.stdout)
        .arg("--stderr")
        .arg(request.stderr)
        .arg("--task-dir")
        .arg(request.task_dir);
    if request.same_session {
        command.arg("--same-session");
    }
    if let Some((isolation, root)) = request.isolation {
        let name = match isolation {
            Isolation::Chroot => "chroot",
            Isolation::Image => "image",
        };
        command
            .args(["--isolation", name, "--root"])
            .arg(root)
            .arg("--alloc-dir")
            .arg(request.alloc_dir);
    }
    if let Some(user) = request.user {
        command
            .arg("--user-id")
            .arg(user.id.to_string())
            .arg("--cgroup")
            .arg(&user.cgroup);
    }
    command
        .arg("--")
        .args(request.argv)
        .env_clear()
        .envs(request.env)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command
        .spawn()
        .map_err(|err| format!("failed to start the supervisor: {err}"))?;
    let supervisor_pid = child.id().map(|pid| pid as i32).unwrap_or_default();
    let stdout = child.stdout.take().expect("stdout is piped");

    let mut line = String::new();
    let read =
        tokio::time::timeout(START_TIMEOUT, BufReader::new(stdout).read_line(&mut line)).await;
    let report = match read {
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(format!(
                "the task did not start within {} s: is the reader of stdout_path and \
                 stderr_path (Nomad's logmon) running?",
                START_TIMEOUT.as_secs()
            ));
        }
        Ok(Err(err)) => Err(format!("failed to read the supervisor's report: {err}")),
        Ok(Ok(0)) => Err("the supervisor exited without reporting".to_string()),
        Ok(Ok(_)) => serde_json::from_str::<StartReport>(&line)
            .map_err(|err| format!("the supervisor's report {line:?} is garbled: {err}")),
    };
    match report {
        Ok(StartReport::Started { task_pid }) => Ok(Supervised {
            child,
            supervisor_pid,
            task_pid,
        }),
        Ok(StartReport::Failed { error }) => {
            let _ = child.wait().await;
            Err(error)
        }
        Err(error) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            Err(error)
        }
    }
}

/// Supervisor side: the `supervise` subcommand.
pub fn run(args: SuperviseArgs) -> ExitCode {
    if !args.same_session {
        // Fails only if we already lead a process group, which a fresh child never does.
        let _ = nix::unistd::setsid();
    }
    let mut task = match start_task(&args) {
        Ok(task) => task,
        Err(error) => {
            report(&StartReport::Failed { error });
            return ExitCode::FAILURE;
        }
    };
    report(&StartReport::Started {
        task_pid: task.id() as i32,
    });
    // Nothing more goes to the plugin: let go of its pipe.
    if let Ok(null) = File::options().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdout(&null);
    }

    let result = match task.wait() {
        Ok(status) => process::exit_result(status),
        Err(_) => process::exit_result(std::process::ExitStatus::default()),
    };
    let record = ExitRecord {
        exit_code: result.exit_code,
        signal: result.signal,
        completed_at_unix_nanos: unix_nanos(SystemTime::now()),
    };
    match write_exit(&args.status_file, &record) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn start_task(args: &SuperviseArgs) -> Result<std::process::Child, String> {
    let open = |path: &Path| {
        OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|err| format!("failed to open {} for writing: {err}", path.display()))
    };
    let stdout = open(&args.stdout)?;
    let stderr = open(&args.stderr)?;
    let (program, rest) = args.command.split_first().ok_or("no command")?;
    // What the task enters is built and opened here, as root and with the host's paths in
    // view: the task may no longer see them (chroot) or be allowed to open them (its user).
    let mut entry = Entry::default();
    if let (Some(isolation), Some(root)) = (args.isolation, &args.root) {
        isolation::build(isolation, root, &args.task_dir, args.alloc_dir.as_deref())?;
        entry.root = Some(confine::c_path(root)?);
    }
    if let (Some(id), Some(cgroup)) = (args.user_id, &args.cgroup) {
        entry.cgroup = Some(users::open_cgroup(cgroup)?);
        entry.user = Some(id);
    }
    let mut command = Command::new(program);
    command
        .args(rest)
        .current_dir(&args.task_dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    if !args.same_session {
        command.process_group(0);
    }
    entry.install(&mut command);
    command
        .spawn()
        .map_err(|err| format!("failed to start {program:?}: {err}"))
    // `command`, and with it our copies of the FIFOs (and of the cgroup file), is dropped
    // here: only the task holds them, so the reader sees end-of-file when the task's output
    // ends.
}

fn report(report: &StartReport) {
    let line = serde_json::to_string(report).unwrap_or_default();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// Writes the record so that a reader sees either no file or the whole record.
fn write_exit(path: &Path, record: &ExitRecord) -> std::io::Result<()> {
    let temporary = path.with_extension("tmp");
    let mut file = File::create(&temporary)?;
    file.write_all(&serde_json::to_vec(record)?)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

/// The recorded exit, None while there is none (the task is running, or its supervisor died
/// without writing one).
pub fn read_exit(path: &Path) -> Option<Result<ExitRecord, String>> {
    match std::fs::read(path) {
        Ok(bytes) => Some(
            serde_json::from_slice(&bytes)
                .map_err(|err| format!("status file {} is garbled: {err}", path.display())),
        ),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => Some(Err(format!("failed to read {}: {err}", path.display()))),
    }
}

pub fn unix_nanos(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or_default()
}

pub fn from_unix_nanos(nanos: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(nanos.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_records_round_trip_through_the_status_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.json");
        assert!(read_exit(&path).is_none());
        let record = ExitRecord {
            exit_code: 137,
            signal: 9,
            completed_at_unix_nanos: 1_700_000_000_123_456_789,
        };
        write_exit(&path, &record).unwrap();
        assert_eq!(read_exit(&path).unwrap().unwrap(), record);
        assert!(!path.with_extension("tmp").exists());
        std::fs::write(&path, b"{").unwrap();
        assert!(read_exit(&path).unwrap().is_err());
    }

    #[test]
    fn reports_are_one_json_line() {
        let started = serde_json::to_string(&StartReport::Started { task_pid: 7 }).unwrap();
        assert_eq!(started, r#"{"started":{"task_pid":7}}"#);
        let failed: StartReport =
            serde_json::from_str(r#"{"failed":{"error":"no such file"}}"#).unwrap();
        assert!(matches!(failed, StartReport::Failed { error } if error == "no such file"));
    }
}
