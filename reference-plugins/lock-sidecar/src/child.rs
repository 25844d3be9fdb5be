//! The protected process: started in its own process group, signalled as a group, stopped with
//! SIGTERM then SIGKILL, and never outliving us.
//!
//! - **Own process group** (`setpgid(0, 0)` in the child): a stop reaches the command and
//!   everything it started (a shell and its children), and nothing else.
//! - **Parent-death signal** (Linux `PR_SET_PDEATHSIG`): if lock-sidecar itself dies, even by
//!   SIGKILL, the kernel kills the protected process, because nobody would renew its lock any
//!   more. The spawn happens on the runtime's only thread (the signal follows the thread that
//!   forked), and the child checks that its parent did not die before the signal was armed.
//!   (Faults `panics-on-late-409` and `no-parent-death-signal` arm none, so the process outlives
//!   lock-sidecar.)
//! - Variant `same-group`: the command stays in lock-sidecar's own process group (as a Go
//!   `exec.Cmd` does), so whoever kills lock-sidecar's group (Nomad's driver) kills it too;
//!   signals then go to the command alone.
//! - **Nothing of the group outlives a release**: once the command exited, whatever it left in
//!   its group is killed before the lock is released.
//!
//! stdin, stdout, stderr and the environment are inherited, as a shim must.

use std::io;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::duration::human;
use crate::faults::{Fault, Switches, Variant};

/// A running protected process.
#[derive(Debug)]
pub struct Protected {
    child: tokio::process::Child,
    pid: Pid,
    exited: Option<ExitStatus>,
    /// Whether it leads a process group of its own (not with variant `same-group`).
    own_group: bool,
}

impl Protected {
    /// Starts `argv` in its own process group.
    pub fn spawn(argv: &[String], switches: &Switches) -> io::Result<Self> {
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no command"))?;
        let parent = nix::unistd::getpid();
        let mut command = std::process::Command::new(program);
        command.args(args);
        let own_group = !switches.variant(Variant::SameGroup);
        if own_group {
            command.process_group(0);
        }
        // Faults panics-on-late-409 (like the Go client it models) and no-parent-death-signal:
        // no parent-death signal.
        let dies_with_us =
            !switches.fault(Fault::PanicsOnLate409) && !switches.fault(Fault::NoParentDeathSignal);
        if dies_with_us {
            // SAFETY: the closure runs in the forked child before exec and only makes
            // async-signal-safe system calls (prctl, getppid, kill).
            unsafe {
                command.pre_exec(move || {
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
                    if nix::unistd::getppid() != parent {
                        // Our parent died before the death signal was armed.
                        let _ = nix::sys::signal::raise(Signal::SIGKILL);
                    }
                    Ok(())
                });
            }
        }
        let child = tokio::process::Command::from(command).spawn()?;
        let raw = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| io::Error::other("the child has no pid"))?;
        Ok(Self {
            child,
            pid: Pid::from_raw(raw),
            exited: None,
            own_group,
        })
    }

    /// Process ID (and process group ID).
    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Waits for the command to exit (cancel-safe; returns the same status again later).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        let status = self.child.wait().await?;
        self.exited = Some(status);
        Ok(status)
    }

    /// Sends `signal` to the whole process group (to the command alone when it shares
    /// lock-sidecar's group).
    pub fn signal_group(&self, signal: Signal) -> nix::Result<()> {
        if self.own_group {
            killpg(self.pid, signal)
        } else {
            nix::sys::signal::kill(self.pid, signal)
        }
    }

    /// SIGTERM to the group, SIGKILL after `grace`; returns once the command is reaped.
    pub async fn stop(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        if let Some(status) = self.exited {
            return Ok(status);
        }
        let _ = self.signal_group(Signal::SIGTERM);
        match tokio::time::timeout(grace, self.wait()).await {
            Ok(status) => status,
            Err(_) => {
                crate::event!(
                    "protected process {} still running {} after SIGTERM; sending SIGKILL",
                    self.pid,
                    human(grace)
                );
                let _ = self.signal_group(Signal::SIGKILL);
                self.wait().await
            }
        }
    }

    /// Kills what the command left in its group; true if anything was there (nothing to do
    /// when it shares lock-sidecar's group: Nomad's driver cleans that up).
    pub fn kill_leftovers(&self) -> bool {
        self.own_group && self.signal_group(Signal::SIGKILL).is_ok()
    }
}

/// The exit code a shell would report: the status, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from((128 + signal) & 0xff).unwrap_or(1),
        (None, None) => 1,
    }
}

/// `exited with status 3` or `killed by SIGKILL`.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => match Signal::try_from(signal) {
            Ok(sig) => format!("was killed by {sig}"),
            Err(_) => format!("was killed by signal {signal}"),
        },
        (None, None) => "ended".to_string(),
    }
}

/// Exit code for a command that could not be started, as shells report it.
pub fn spawn_failure_code(err: &io::Error) -> u8 {
    match err.kind() {
        io::ErrorKind::NotFound => 127,
        _ => 126,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_like_a_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
        assert_eq!(describe(ExitStatus::from_raw(9)), "was killed by SIGKILL");
        assert_eq!(
            describe(ExitStatus::from_raw(3 << 8)),
            "exited with status 3"
        );
        assert_eq!(
            spawn_failure_code(&io::Error::from(io::ErrorKind::NotFound)),
            127
        );
        assert_eq!(
            spawn_failure_code(&io::Error::from(io::ErrorKind::PermissionDenied)),
            126
        );
    }
}
