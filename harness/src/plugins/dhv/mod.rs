//! Dynamic host volume plugins: executables run as `<plugin> <operation>` with `DHV_*`
//! variables. This module runs them exactly as Nomad does and records what happened; judging
//! is left to the steps.

pub mod env;
pub mod paths;
pub mod response;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use nomad_conform_reports::model::{ExitStatus, OpEvent, Request, Response};

use crate::ledger::{Resource, TeardownOutcome};
use crate::process::{self, ExecOutput, ExecSpec, REPORT_EXCERPT_BYTES};
use crate::recorder::{CaseHandle, lock};

pub use env::{Parameters, VolumeRequest, fingerprint_env};

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
}

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
        let inherit_env = match policy {
            EnvPolicy::Configured => self.inherit_env,
            EnvPolicy::Exact => false,
            EnvPolicy::Inherit => true,
        };
        let spec = ExecSpec {
            program: self.path.clone(),
            args: vec![op.to_string()],
            env: env.clone(),
            inherit_env,
            cwd: Some(cwd.to_path_buf()),
            deadline,
            capture_limit: self.capture_limit,
            linger_grace: self.output_close_grace,
            settle: self.stray_settle,
            file_size_limit: (expect == Expect::MeantToFail)
                .then_some(crate::disk_guard::FAILING_CALL_FILE_SIZE),
            disk_watch: crate::disk_guard::DiskWatch::new(&watched_dirs(cwd, &env)),
        };
        let started = Instant::now();
        let out = process::run(&spec).await;
        Call {
            label: label.to_string(),
            argv: vec![self.path.display().to_string(), op.to_string()],
            env,
            inherit_env,
            cwd: cwd.to_path_buf(),
            deadline,
            started,
            out,
        }
    }
}

impl Call {
    /// A shell command that repeats this call exactly. It recreates the working and volumes
    /// directories first, because the harness removes its scratch directories after a run.
    pub fn reproduce(&self) -> String {
        let cwd = quote(&self.cwd.display().to_string());
        let mut dirs = vec![cwd.clone()];
        if let Some(v) = self
            .env_var("DHV_VOLUMES_DIR")
            .filter(|v| v.starts_with('/'))
        {
            dirs.push(quote(v));
        }
        let mut parts = vec![format!("mkdir -p {} && cd {cwd} && env", dirs.join(" "))];
        if !self.inherit_env {
            parts.push("-i".into());
        }
        for (k, v) in &self.env {
            parts.push(format!("{k}={}", quote(v)));
        }
        parts.extend(self.argv.iter().map(|a| quote(a)));
        parts.join(" ")
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

    /// A copy of complete stdout, if it fitted in the capture limit ([`Call::stdout_json`]
    /// reads it in place).
    pub fn stdout(&self) -> Option<Vec<u8>> {
        self.out.stdout.complete()
    }

    /// Complete stdout decoded as Nomad decodes it, read where it was captured: no copy of up
    /// to the capture limit per check.
    pub fn stdout_json(&self) -> Result<serde_json::Value, response::StdoutProblem> {
        response::single_json(self.out.stdout.bytes(), self.out.stdout.total_bytes())
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
        for (name, cap) in [("stdout", &self.out.stdout), ("stderr", &self.out.stderr)] {
            if cap.total_bytes() > 0 {
                let ex = cap.excerpt(600);
                s.push_str(&format!("\n{name}: {}", ex.text.trim_end()));
            }
        }
        s
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

/// Shell-quote one word.
pub fn quote(s: &str) -> String {
    shlex::try_quote(s)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| format!("'{}'", s.replace('\0', "").replace('\'', r"'\''")))
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
