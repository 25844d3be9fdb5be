//! Dynamic host volume plugins: executables run as `<plugin> <operation>` with `DHV_*`
//! variables. This module runs them exactly as Nomad does and records what happened; judging
//! is left to the steps.

pub mod agent;
pub mod env;
pub mod paths;
pub mod response;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use nomad_conform_reports::model::{ExitStatus, OpEvent, Request, Response};

use crate::ledger::{Resource, TeardownOutcome};
use crate::process::{self, ExecOutput, ExecSpec, REPORT_EXCERPT_BYTES};
use crate::recorder::{CaseHandle, lock};
use crate::shell::quote;

pub use env::{Parameters, VolumeRequest, fingerprint_env};

/// How long before its deadline a plugin must have ended for output closed only after the
/// deadline to count as held past it: not a Nomad number, a margin for the harness's own
/// scheduling on a loaded machine.
const HOLD_MARGIN: Duration = Duration::from_secs(1);

/// Which environment a call gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvPolicy {
    /// As the run is configured: exactly Nomad's, unless `--inherit-env` was given.
    Configured,
    /// Exactly Nomad's, whatever the run's configuration.
    Exact,
    /// Nomad's plus the harness's own environment, whatever the run's configuration.
    Inherit,
}

/// A plugin executable and how to run it.
#[derive(Clone, Debug)]
pub struct Plugin {
    /// Absolute path, as Nomad runs it (`<plugin_dir>/<id>`).
    pub path: PathBuf,
    /// The directory holding the plugin: DHV_PLUGIN_DIR.
    pub dir: PathBuf,
    pub inherit_env: bool,
    pub capture_limit: usize,
    pub output_close_grace: Duration,
    /// How long strays left in the plugin's group may finish on their own (see
    /// [`crate::process::ExecSpec::settle`]).
    pub stray_settle: Duration,
    /// The stand-in for the Nomad agent that runs each call (see [`agent`]): the harness
    /// binary, `/proc/self/exe`. `None` runs the plugin directly, in a group of its own.
    pub agent: Option<PathBuf>,
    /// Where the stand-in writes its report of each call.
    pub reports_dir: PathBuf,
    /// Every call takes this shared; a clause that must see the plugin alone (nothing else of
    /// it running, see [`Plugin::alone`]) takes it exclusively.
    pub gate: Arc<tokio::sync::RwLock<()>>,
    /// Numbers the stand-in's report files.
    pub calls: Arc<AtomicU64>,
}

/// How one call is made, beyond its operation and environment.
#[derive(Clone, Debug, Default)]
pub struct CallOpts {
    pub expect: Option<Expect>,
    /// A directory the stand-in bind-mounts over /tmp for the plugin (see [`agent`]).
    pub private_tmp: Option<PathBuf>,
    /// How long to wait for stdout and stderr to close once the plugin exited, instead of the
    /// run's output-close grace: Nomad waits for them without a limit.
    pub linger: Option<Duration>,
    /// The caller holds [`Plugin::alone`]: do not take the gate again.
    pub alone: bool,
    /// With `private_tmp`: trees under /tmp that must stay visible at their own paths (the
    /// volumes directory of a create or delete).
    pub keep_visible: Vec<PathBuf>,
}

/// Extra time the harness gives a call past its deadline, so that the stand-in, not the
/// harness, applies the deadline the way Nomad does.
const AGENT_MARGIN: Duration = Duration::from_secs(2);

/// One finished invocation of the plugin.
#[derive(Debug)]
pub struct Call {
    /// The operation as reported (`create`, `delete (cleanup)`...).
    pub label: String,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub inherit_env: bool,
    pub cwd: PathBuf,
    pub deadline: Duration,
    pub started: Instant,
    pub out: ExecOutput,
    /// What the stand-in for the agent recorded, when the call ran under it.
    pub agent: Option<agent::Report>,
    /// Whether DHV_VOLUMES_DIR existed when the call was made (its reproduction makes it then).
    pub volumes_dir_existed: bool,
}

/// Whether a call is expected to succeed: a call meant to fail (an impossible capacity) may not
/// write a file larger than [`crate::disk_guard::FAILING_CALL_FILE_SIZE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Normal,
    MeantToFail,
}

impl Plugin {
    /// Run `<plugin> <op>` with `env` in `cwd`, killed at `deadline`.
    pub async fn invoke(
        &self,
        label: &str,
        op: &str,
        env: Vec<(String, String)>,
        policy: EnvPolicy,
        cwd: &Path,
        deadline: Duration,
    ) -> Call {
        self.invoke_expecting(label, op, env, policy, cwd, deadline, Expect::Normal)
            .await
    }

    /// [`Plugin::invoke`], for a call that may be meant to fail. Every call watches the free
    /// space of the working, volumes and temporary directories' filesystems.
    #[allow(clippy::too_many_arguments)]
    pub async fn invoke_expecting(
        &self,
        label: &str,
        op: &str,
        env: Vec<(String, String)>,
        policy: EnvPolicy,
        cwd: &Path,
        deadline: Duration,
        expect: Expect,
    ) -> Call {
        let opts = CallOpts {
            expect: Some(expect),
            ..CallOpts::default()
        };
        self.invoke_opts(label, op, env, policy, cwd, deadline, &opts)
            .await
    }

    /// Wait until no call of the plugin runs, and keep others from starting until the guard is
    /// dropped: what a call made under it sees, no other call can have caused (a process a
    /// concurrent call left, a file it wrote, a lock it holds). Calls made meanwhile pass
    /// [`CallOpts::alone`].
    pub async fn alone(&self) -> tokio::sync::OwnedRwLockWriteGuard<()> {
        self.gate.clone().write_owned().await
    }

    /// Run `<plugin> <op>` under the stand-in for the agent, with `opts`.
    #[allow(clippy::too_many_arguments)]
    pub async fn invoke_opts(
        &self,
        label: &str,
        op: &str,
        env: Vec<(String, String)>,
        policy: EnvPolicy,
        cwd: &Path,
        deadline: Duration,
        opts: &CallOpts,
    ) -> Call {
        let _shared = if opts.alone {
            None
        } else {
            Some(self.gate.read().await)
        };
        let inherit_env = match policy {
            EnvPolicy::Configured => self.inherit_env,
            EnvPolicy::Exact => false,
            EnvPolicy::Inherit => true,
        };
        let (program, args, run_deadline, report) = match &self.agent {
            Some(agent) => {
                let n = self.calls.fetch_add(1, Ordering::SeqCst);
                let report = self.reports_dir.join(format!("{n}.jsonl"));
                let argv = agent::Args {
                    report: report.clone(),
                    deadline,
                    private_tmp: opts.private_tmp.clone(),
                    plugin: self.path.clone(),
                    op: op.to_string(),
                    keep: opts.keep_visible.clone(),
                }
                .to_argv();
                (agent.clone(), argv, deadline + AGENT_MARGIN, Some(report))
            }
            None => (self.path.clone(), vec![op.to_string()], deadline, None),
        };
        let spec = ExecSpec {
            program,
            args,
            env: env.clone(),
            inherit_env,
            cwd: Some(cwd.to_path_buf()),
            deadline: run_deadline,
            capture_limit: self.capture_limit,
            linger_grace: opts.linger.unwrap_or(self.output_close_grace),
            settle: self.stray_settle,
            file_size_limit: (opts.expect == Some(Expect::MeantToFail))
                .then_some(crate::disk_guard::FAILING_CALL_FILE_SIZE),
            disk_watch: crate::disk_guard::DiskWatch::new(&watched_dirs(cwd, &env)),
            alone: opts.alone,
        };
        let volumes_dir_existed = env
            .iter()
            .find(|(k, _)| k == "DHV_VOLUMES_DIR")
            .is_some_and(|(_, v)| !v.is_empty() && Path::new(v).is_dir());
        let started = Instant::now();
        let mut out = process::run(&spec).await;
        let agent = report.map(|path| {
            let r = agent::Report::read(&path);
            let _ = std::fs::remove_file(&path);
            r
        });
        if let Some(r) = &agent {
            // The plugin's own status, unless the harness stopped the call itself (its
            // backstop deadline, a filling disk) or the stand-in did not live to say.
            let harness_stopped = matches!(
                out.status,
                ExitStatus::KilledAtDeadline | ExitStatus::StoppedByHarness { .. }
            );
            if let (false, Some(status)) = (harness_stopped, r.status()) {
                out.status = status;
            }
        }
        Call {
            label: label.to_string(),
            argv: vec![self.path.display().to_string(), op.to_string()],
            env,
            inherit_env,
            cwd: cwd.to_path_buf(),
            deadline,
            started,
            out,
            agent,
            volumes_dir_existed,
        }
    }
}

impl Call {
    /// A shell command that repeats this call exactly. It recreates the working directory and
    /// the volumes directory first, because the harness removes its scratch directories after
    /// a run; where the volumes directory did not exist at the call (the plugin's to make, as
    /// with Nomad), only its parent. A variable holding a secret is passed on from the shell
    /// (`DHV_PARAMETERS="$DHV_PARAMETERS"`), with a comment saying to set it.
    pub fn reproduce(&self) -> String {
        let cwd = quote(&self.cwd.display().to_string());
        let mut dirs = vec![cwd.clone()];
        if let Some(v) = self
            .env_var("DHV_VOLUMES_DIR")
            .filter(|v| v.starts_with('/'))
            .map(Path::new)
            .and_then(|v| {
                if self.volumes_dir_existed {
                    Some(v)
                } else {
                    v.parent()
                }
            })
            .filter(|p| *p != Path::new("/"))
        {
            dirs.push(quote(&v.display().to_string()));
        }
        let mut line = crate::command_line::CommandLine::from_shell_words([format!(
            "mkdir -p {} && cd {cwd} && env",
            dirs.join(" ")
        )]);
        if !self.inherit_env {
            line.word("-i");
        }
        for (k, v) in &self.env {
            line.assign(k, v);
        }
        for a in &self.argv {
            line.word(a);
        }
        line.line()
    }

    pub fn exit_code(&self) -> Option<i32> {
        self.out.exit_code()
    }

    pub fn succeeded(&self) -> bool {
        self.out.succeeded()
    }

    pub fn killed_at_deadline(&self) -> bool {
        self.out.status == ExitStatus::KilledAtDeadline
    }

    /// Why the harness stopped the call itself (a disk it writes to fell below its floor, see
    /// [`crate::disk_guard`]), if it did.
    pub fn stopped_by_harness(&self) -> Option<&str> {
        match &self.out.status {
            ExitStatus::StoppedByHarness { reason } => Some(reason),
            _ => None,
        }
    }

    /// A copy of complete stdout, if it fitted in the capture limit.
    pub fn stdout(&self) -> Option<Vec<u8>> {
        self.out.stdout.complete()
    }

    /// Complete stdout decoded as Nomad decodes it, read where it was captured when it is in
    /// memory (a copy only of stdout that was moved to a file).
    pub fn stdout_json(&self) -> Result<serde_json::Value, response::StdoutProblem> {
        response::single_json(
            self.out.stdout.bytes().as_deref(),
            self.out.stdout.total_bytes(),
        )
    }

    /// How long stdout and stderr stayed open after the plugin ended (exited, or was killed at
    /// its deadline), when that is known: the stand-in says when it ended.
    pub fn output_held_after_exit(&self) -> Option<Duration> {
        let ended = match self.agent.as_ref()?.ended.as_ref()? {
            agent::Line::Ended { at_ms, .. } => Duration::from_millis(*at_ms),
            _ => return None,
        };
        Some(self.out.wall.saturating_sub(ended))
    }

    /// Whether the plugin exited in time but stdout or stderr were still open at the call's
    /// deadline (counted from its start, as Nomad's context is): Nomad's call would have hung
    /// there. A call killed at its deadline is the deadline clause's (see
    /// [`Call::deadline_note`]).
    pub fn output_held_past_deadline(&self) -> bool {
        if self.killed_at_deadline() || self.output_held_after_exit().is_none_or(|h| h.is_zero()) {
            return false;
        }
        if self.out.output_held_open {
            // Still open when the harness stopped waiting: held by the plugin's own, if seen.
            return self.output_holder_seen();
        }
        // Closed, but after the deadline: only a hold that began well before it counts (a
        // plugin that ended a moment before its deadline on a loaded machine is not one).
        let ended = self
            .output_held_after_exit()
            .map(|h| self.out.wall.saturating_sub(h));
        self.out.wall > self.deadline && ended.is_some_and(|e| e + HOLD_MARGIN <= self.deadline)
    }

    /// Whether a process the plugin started was seen holding its stdout or stderr after it
    /// ended: one in its process group, or one that left it with setsid (found by the run's
    /// marker). When the pipes stayed open with neither, no process of the plugin's held them:
    /// on a loaded machine a process the harness is starting at that moment holds copies of
    /// every pipe until it executes (seen once: 5 s, the reference plugin's fingerprint under a
    /// load of 8 on 2 cores), and the plugin is not blamed for it.
    pub fn output_holder_seen(&self) -> bool {
        !self.out.held_output.is_empty() || self.out.strays_escaped
    }

    /// Signals the plugin (or a process it started) sent to its process group, which under
    /// Nomad is the agent's, as the stand-in recorded them.
    pub fn group_signals(&self) -> Vec<String> {
        let Some(a) = &self.agent else {
            return Vec::new();
        };
        let mut out: Vec<String> = a
            .signals
            .iter()
            .filter_map(|l| match l {
                agent::Line::Signal {
                    name,
                    from_pid,
                    from,
                    at_ms,
                    ..
                } => Some(format!(
                    "{name} from pid {from_pid} ({}) after {at_ms}ms",
                    if from.is_empty() {
                        "gone by then"
                    } else {
                        from
                    }
                )),
                _ => None,
            })
            .collect();
        if a.started
            && a.ended.is_none()
            && let ExitStatus::Signaled { signal } = self.out.status
        {
            out.push(format!(
                "{}: the stand-in itself was killed before the plugin ended (a signal to the whole group that cannot be caught)",
                agent::signal_name(signal)
            ));
        }
        out
    }

    /// The value of one variable of the call's environment.
    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A few lines describing the outcome, for failure messages: status, time, output excerpts.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} after {} ({})",
            self.out.status,
            crate::fmt_duration(self.out.wall),
            self.label
        );
        if let Some(note) = self.deadline_note() {
            s.push_str(&format!("\n{note}"));
        }
        for (name, cap) in [("stdout", &self.out.stdout), ("stderr", &self.out.stderr)] {
            if cap.total_bytes() > 0 {
                let ex = cap.excerpt(600);
                s.push_str(&format!("\n{name}: {}", ex.text.trim_end()));
            }
        }
        s
    }

    /// For a call killed at its deadline: what Nomad would have done next. It kills only the
    /// plugin and then waits for the output to close, without a limit.
    pub fn deadline_note(&self) -> Option<String> {
        if !self.killed_at_deadline() {
            return None;
        }
        let held = self.output_held_after_exit()?;
        Some(if self.out.output_held_open {
            format!(
                "killed at the deadline; its output was still held open {} later by {}: Nomad's call would have gone on hanging until that process exits",
                crate::fmt_duration(held),
                self.out
                    .held_output
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!(
                "killed at the deadline (the plugin only, as Nomad does); its output closed {} later, when Nomad's call would have returned",
                crate::fmt_duration(held)
            )
        })
    }

    pub fn event(&self, offset_ms: u64) -> OpEvent {
        let mut notes = Vec::new();
        if self.out.output_held_open {
            let who: Vec<String> = self.out.held_output.iter().map(|p| p.to_string()).collect();
            notes.push(format!(
                "stdout/stderr stayed open after the plugin exited, held by: {}",
                if who.is_empty() {
                    "a process outside the plugin's process group".to_string()
                } else {
                    who.join(", ")
                }
            ));
        }
        if !self.out.strays.is_empty() {
            let who: Vec<String> = self.out.strays.iter().map(|p| p.to_string()).collect();
            notes.push(format!(
                "still running after the plugin exited (killed by the harness): {}",
                who.join(", ")
            ));
        }
        for signal in self.group_signals() {
            notes.push(format!(
                "signal to the plugin's process group (under Nomad, the agent's): {signal}"
            ));
        }
        if let Some(note) = self.deadline_note() {
            notes.push(note);
        }
        OpEvent {
            operation: self.label.clone(),
            started_ms: offset_ms,
            duration_ms: self.out.wall.as_secs_f64() * 1000.0,
            deadline_ms: Some(self.deadline.as_millis() as u64),
            request: Request::Exec {
                argv: self.argv.clone(),
                env: self.env.clone(),
                cwd: Some(self.cwd.display().to_string()),
            },
            response: Response::Exec {
                status: self.out.status.clone(),
                stdout: self.out.stdout.excerpt(REPORT_EXCERPT_BYTES),
                stderr: self.out.stderr.excerpt(REPORT_EXCERPT_BYTES),
            },
            reproduce: Some(self.reproduce()),
            notes,
        }
    }
}

/// The directories a call may write to: its working directory, DHV_VOLUMES_DIR (or the
/// nearest existing parent) and the temporary directory.
fn watched_dirs(cwd: &Path, env: &[(String, String)]) -> Vec<PathBuf> {
    let mut dirs = vec![cwd.to_path_buf(), std::env::temp_dir()];
    if let Some((_, v)) = env.iter().find(|(k, _)| k == "DHV_VOLUMES_DIR") {
        let mut p = PathBuf::from(v);
        while !p.exists() && p.pop() {}
        if p.is_absolute() {
            dirs.push(p);
        }
    }
    dirs
}

/// A volume the plugin reported creating, undone by calling delete the way Nomad would.
pub struct CreatedVolume {
    pub plugin: Arc<Plugin>,
    pub request: VolumeRequest,
    pub path: String,
    pub cwd: PathBuf,
    pub deadline: Duration,
    /// The harness's own directory: a volume path inside it is removed with it.
    pub scratch_root: PathBuf,
    /// Set once a step deleted the volume successfully: nothing left to undo.
    pub deleted: Arc<AtomicBool>,
    pub case: CaseHandle,
}

impl Resource for CreatedVolume {
    fn describe(&self) -> String {
        format!("volume {} at {}", self.request.id, self.path)
    }

    fn independent(&self) -> bool {
        true
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        Box::pin(async move {
            if self.deleted.load(Ordering::SeqCst) {
                return TeardownOutcome::default();
            }
            let call = self
                .plugin
                .invoke(
                    "delete (cleanup)",
                    "delete",
                    self.request.delete_env(&self.path),
                    EnvPolicy::Configured,
                    &self.cwd,
                    self.deadline,
                )
                .await;
            let offset = {
                let state = lock(&self.case);
                call.started
                    .saturating_duration_since(state.started)
                    .as_millis() as u64
            };
            lock(&self.case).events.push(call.event(offset));
            let mut outcome = TeardownOutcome::default();
            if !call.succeeded() {
                outcome.notes.push(format!(
                    "cleanup: delete of volume {} failed: {}",
                    self.request.id, call.out.status
                ));
            }
            // Only a path of the volume's own can be a leaked volume: "/" or the volumes
            // directory reported as a path are the plugin's error, checked by the clauses.
            let path = Path::new(&self.path);
            let own = paths::own_path_problem(&self.path, &self.request.volumes_dir, &[]).is_none();
            if own && !path.starts_with(&self.scratch_root) && path.symlink_metadata().is_ok() {
                outcome.leaked.push(format!(
                    "volume {} is still at {} after delete (outside the harness's directories: not removed)",
                    self.request.id, self.path
                ));
            }
            outcome
        })
    }
}
