//! `--launch "CMD ARGS"`: the harness starts the plugin itself, waits for its socket, can
//! restart it (as Nomad restarts a crashed plugin task), and stops it at the end.
//!
//! The command may use `{endpoint}` (unix:///path), `{socket}` (the path) and `{state_dir}`
//! (a directory the harness made for the plugin, kept across restarts); the plugin also gets
//! `CSI_ENDPOINT`, as Nomad sets it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::process::{Capture, drain, register_group, unregister_group};

/// How much of the plugin's output is kept for error messages.
const LOG_LIMIT: usize = 256 * 1024;
/// How long a stopping plugin gets between SIGTERM and SIGKILL (Nomad's default kill_timeout).
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long after its start the plugin's socket is looked for every millisecond (then every 5).
const START_POLL_FINE: Duration = Duration::from_millis(200);

#[derive(Debug)]
pub struct Launcher {
    /// The command as given, placeholders unfilled.
    template: Vec<String>,
    argv: Vec<String>,
    pub socket: PathBuf,
    pub state_dir: PathBuf,
    log: Arc<Mutex<Capture>>,
    /// The running plugin and its process group ID (its pid).
    child: tokio::sync::Mutex<Option<(Child, i32)>>,
    /// Processes of the plugin that had left its process group (setsid) when it was stopped;
    /// the harness killed them.
    escaped: Mutex<Vec<crate::process::ProcInfo>>,
    /// When the plugin was last started: Nomad's health timeout counts from there.
    started: Mutex<Option<Instant>>,
}

impl Launcher {
    /// Parse the command and fill in its placeholders.
    pub fn new(command: &str, socket: &Path, state_dir: &Path) -> Result<Launcher, String> {
        let words = crate::shell::split_words("--launch", command)?;
        if words.is_empty() {
            return Err(format!("--launch {command:?}: not a command line"));
        }
        let argv = fill(&words, socket, state_dir);
        Ok(Launcher {
            template: words,
            argv,
            socket: socket.to_path_buf(),
            state_dir: state_dir.to_path_buf(),
            log: Arc::new(Mutex::new(Capture::new(LOG_LIMIT))),
            child: tokio::sync::Mutex::new(None),
            escaped: Mutex::new(Vec::new()),
            started: Mutex::new(None),
        })
    }

    pub fn command_line(&self) -> String {
        self.argv.join(" ")
    }

    /// A shell command that starts the plugin again, as the run did, with its socket at
    /// `<dir>/csi.sock` and a fresh state directory `<dir>/state` (the run's own are gone once it
    /// ends); it waits a moment for the socket.
    pub fn reproduce_start(&self, dir: &Path) -> String {
        let socket = dir.join("csi.sock");
        let state = dir.join("state");
        let argv: Vec<String> = fill(&self.template, &socket, &state)
            .iter()
            .map(|w| crate::shell::quote(w))
            .collect();
        format!(
            "mkdir -p {state} && (CSI_ENDPOINT=unix://{socket} {} &) && sleep 2",
            argv.join(" "),
            state = crate::shell::quote(&state.display().to_string()),
            socket = socket.display(),
        )
    }

    /// When the plugin was last started (now if it never was).
    pub fn started_at(&self) -> Instant {
        self.started
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or_else(Instant::now)
    }

    /// How the plugin ended and its output, when it died by itself since it was last started
    /// (None while it runs, and once the harness stopped it).
    pub fn died(&self) -> Option<(std::process::ExitStatus, String)> {
        let mut guard = self.child.try_lock().ok()?;
        let (child, _) = guard.as_mut()?;
        let status = child.try_wait().ok().flatten()?;
        drop(guard);
        // All the output kept (256 KiB at most): a crash report may be far from the end.
        let log = self
            .log
            .lock()
            .map(|c| c.excerpt(LOG_LIMIT).text)
            .unwrap_or_default();
        Some((status, log))
    }

    /// The last lines the plugin printed.
    pub fn log_tail(&self) -> String {
        let ex = self.log.lock().map(|c| c.excerpt(4096)).unwrap_or_default();
        ex.text
    }

    /// Start the plugin and wait until its socket accepts connections, at most `timeout`.
    pub async fn start(&self, timeout: Duration) -> Result<(), String> {
        crate::escapees::become_subreaper();
        let _ = std::fs::remove_file(&self.socket);
        let mut cmd = Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .env("CSI_ENDPOINT", self.endpoint())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        crate::exec_signals::reset_on_tokio_spawn(&mut cmd);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("failed to start {}: {e}", self.argv[0]))?;
        *self.started.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        register_group(pgid);
        drain(child.stdout.take(), self.log.clone());
        drain(child.stderr.take(), self.log.clone());
        let began = Instant::now();
        let until = began + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let _ = kill_group(pgid, Signal::SIGKILL);
                unregister_group(pgid);
                // Give the drainers a moment to collect the last words.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return Err(format!(
                    "the plugin exited ({status}) before its socket {} appeared; its output:\n{}",
                    self.socket.display(),
                    self.log_tail()
                ));
            }
            if self.socket.exists()
                && super::dial(&self.socket, Duration::from_millis(500))
                    .await
                    .is_ok()
            {
                break;
            }
            if Instant::now() > until {
                let _ = kill_group(pgid, Signal::SIGKILL);
                let _ = child.wait().await;
                unregister_group(pgid);
                return Err(format!(
                    "the plugin's socket {} did not accept connections within {}; its output:\n{}",
                    self.socket.display(),
                    crate::fmt_duration(timeout),
                    self.log_tail()
                ));
            }
            // Short: a plugin is usually up within tens of milliseconds, and the suite waits
            // for it twice (at the start and in CSI-NOMAD-RESTART); a millisecond between looks
            // (a stat, then a connect once the socket exists) for the first fifth of a second,
            // so that what the run measures as the plugin's start is the plugin's.
            let pause = if began.elapsed() < START_POLL_FINE {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(5)
            };
            tokio::time::sleep(pause).await;
        }
        *self.child.lock().await = Some((child, pgid));
        Ok(())
    }

    /// SIGTERM to the plugin's process group, SIGKILL after the grace period.
    pub async fn stop(&self) {
        let Some((mut child, pgid)) = self.child.lock().await.take() else {
            return;
        };
        let _ = kill_group(pgid, Signal::SIGTERM);
        if tokio::time::timeout(STOP_GRACE, child.wait())
            .await
            .is_err()
        {
            let _ = kill_group(pgid, Signal::SIGKILL);
            let _ = child.wait().await;
        }
        // Anything left in the group goes too, and so does what left the group: a live child of
        // the harness in a session of its own that carries this plugin's CSI_ENDPOINT.
        let _ = kill_group(pgid, Signal::SIGKILL);
        unregister_group(pgid);
        crate::escapees::reap_group(pgid).await;
        let escaped = crate::escapees::find(&[("CSI_ENDPOINT".into(), self.endpoint())]);
        if !escaped.is_empty() {
            crate::escapees::kill(&escaped).await;
            self.escaped
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(escaped);
        }
    }

    /// What the plugin left running outside its process group, found when it was stopped.
    pub fn escaped(&self) -> Vec<crate::process::ProcInfo> {
        self.escaped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Stop and start again with the same command and state directory.
    pub async fn restart(&self, timeout: Duration) -> Result<(), String> {
        self.stop().await;
        self.start(timeout).await
    }
}

/// The command's words with `{endpoint}`, `{socket}` and `{state_dir}` filled in.
fn fill(words: &[String], socket: &Path, state_dir: &Path) -> Vec<String> {
    let endpoint = format!("unix://{}", socket.display());
    words
        .iter()
        .map(|w| {
            w.replace("{endpoint}", &endpoint)
                .replace("{socket}", &socket.display().to_string())
                .replace("{state_dir}", &state_dir.display().to_string())
        })
        .collect()
}

fn kill_group(pgid: i32, signal: Signal) -> nix::Result<()> {
    if pgid <= 0 {
        return Ok(());
    }
    killpg(Pid::from_raw(pgid), signal)
}
