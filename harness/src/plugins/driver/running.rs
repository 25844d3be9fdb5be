//! A launched plugin process: its pid (which is also its process group), whether it still
//! runs, what it printed. Dropping it SIGKILLs the whole group, so that a cancelled scenario
//! leaves nothing running.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use nomad_conform_reports::model::{Excerpt, ExitStatus};
use tokio::process::Child;
use tokio::sync::watch;

use super::handshake::Handshake;
use super::hclog::LogLine;
use super::launch_spec::LaunchSpec;
use super::pipes::{self, SharedOutput};
use crate::process::{ProcInfo, group_members, unregister_group};

/// How long [`PluginProcess::kill_now`] waits for the killed plugin to be reaped.
const REAP_WITHIN: Duration = Duration::from_secs(2);

/// Hand `child` to a task that waits for it; the receiver says how it ended once it has.
pub(crate) fn exit_watch(mut child: Child) -> watch::Receiver<Option<ExitStatus>> {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let status = match child.wait().await {
            Ok(st) => exit_status(st),
            Err(e) => ExitStatus::SpawnFailed {
                message: format!("failed to wait for the plugin: {e}"),
            },
        };
        let _ = tx.send(Some(status));
    });
    rx
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

/// What killing a plugin's group left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Killed {
    /// How the plugin ended (None if it was not reaped in time).
    pub status: Option<ExitStatus>,
    /// Members of its process group still alive after the SIGKILL (should be none).
    pub survivors: Vec<ProcInfo>,
}

/// A running (or finished) plugin.
#[derive(Debug)]
pub struct PluginProcess {
    spec: LaunchSpec,
    /// The handshake line as parsed (empty until the launch read it).
    pub handshake: Handshake,
    started: Instant,
    handshake_after: Duration,
    pid: i32,
    exit: watch::Receiver<Option<ExitStatus>>,
    output: SharedOutput,
    killed_by_harness: AtomicBool,
    group_gone: AtomicBool,
}

impl PluginProcess {
    pub(crate) fn new(
        spec: LaunchSpec,
        pid: i32,
        started: Instant,
        exit: watch::Receiver<Option<ExitStatus>>,
        output: SharedOutput,
    ) -> Self {
        PluginProcess {
            spec,
            handshake: Handshake::parse("", &[]),
            started,
            handshake_after: Duration::ZERO,
            pid,
            exit,
            output,
            killed_by_harness: AtomicBool::new(false),
            group_gone: AtomicBool::new(false),
        }
    }

    pub(crate) fn with_handshake(mut self, handshake: Handshake, after: Duration) -> Self {
        self.handshake = handshake;
        self.handshake_after = after;
        self
    }

    /// The plugin's pid, which is also its process group ID.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn spec(&self) -> &LaunchSpec {
        &self.spec
    }

    /// When it was spawned.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// From spawn until its handshake line arrived.
    pub fn handshake_after(&self) -> Duration {
        self.handshake_after
    }

    /// Whether the plugin process (the group leader) has not exited yet.
    pub fn is_alive(&self) -> bool {
        self.exit.borrow().is_none()
    }

    /// How it ended, once it has.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.exit.borrow().clone()
    }

    /// Whether the harness killed it (rather than it exiting on its own).
    pub fn killed_by_harness(&self) -> bool {
        self.killed_by_harness.load(Ordering::SeqCst)
    }

    /// Wait at most `within` for the plugin to exit; its status if it did.
    pub async fn wait_exit(&self, within: Duration) -> Option<ExitStatus> {
        let mut rx = self.exit.clone();
        let _ = tokio::time::timeout(within, async {
            let _ = rx.wait_for(Option::is_some).await;
        })
        .await;
        self.exit_status()
    }

    /// Live members of its process group (the plugin and whatever it started there).
    pub fn group_members(&self) -> Vec<ProcInfo> {
        group_members(self.pid)
    }

    /// SIGKILL to the plugin process alone (what go-plugin's `Kill` does).
    pub fn sigkill_leader(&self) {
        if self.pid > 0 && self.is_alive() {
            self.killed_by_harness.store(true, Ordering::SeqCst);
            let _ = kill(Pid::from_raw(self.pid), Signal::SIGKILL);
        }
    }

    /// SIGKILL to the whole process group, then reap: the plugin and everything it started in
    /// its group are gone afterwards (the survivors list says otherwise).
    pub async fn kill_now(&self) -> Killed {
        if self.pid <= 0 {
            return Killed::default();
        }
        if self.is_alive() {
            self.killed_by_harness.store(true, Ordering::SeqCst);
        }
        let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
        let status = self.wait_exit(REAP_WITHIN).await;
        crate::escapees::reap_group(self.pid).await;
        let survivors = group_members(self.pid);
        if survivors.is_empty() {
            self.group_gone.store(true, Ordering::SeqCst);
            unregister_group(self.pid);
        }
        Killed { status, survivors }
    }

    /// The parsed stderr lines kept so far.
    pub fn logs(&self) -> Vec<LogLine> {
        pipes::lock(&self.output).logs.lines()
    }

    /// stderr lines dropped from the middle of the kept ones.
    pub fn logs_dropped(&self) -> u64 {
        pipes::lock(&self.output).logs.dropped()
    }

    /// stderr, raw.
    pub fn stderr_excerpt(&self, max: usize) -> Excerpt {
        pipes::lock(&self.output).stderr.excerpt(max)
    }

    /// The last bytes of stderr, for failure messages.
    pub fn stderr_tail(&self) -> String {
        self.stderr_excerpt(4096).text
    }

    /// A shell command that starts the plugin the same way ([`LaunchSpec::command_line`]).
    pub fn command_line(&self) -> String {
        self.spec.command_line()
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        if self.pid > 0 && !self.group_gone.load(Ordering::SeqCst) {
            let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
            unregister_group(self.pid);
        }
    }
}
