//! SIGTERM and SIGINT, the signals Nomad (kill_signal) and a terminal send.
//!
//! Both are caught from the very start, before anything is acquired or spawned, so none can
//! kill lock-sidecar between "lock held" and "process running" without the lock being handled.

use std::io;

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

use crate::api::InFlight;
use crate::faults::{Fault, Switches};

/// The caught signals.
#[derive(Debug)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    /// Fault deadlock-on-sigterm: the lock requests a caught signal waits for.
    waits_for: Option<InFlight>,
    /// A caught signal not handed out yet (it waits for `waits_for`).
    pending: Option<Signal>,
    /// Fault panics-on-sigterm: crash like a Go program on SIGTERM.
    panics_on_term: bool,
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            waits_for: None,
            pending: None,
            panics_on_term: false,
        })
    }

    /// The same signals, handed out as the switched-on faults say; `requests` are the lock
    /// client's requests in flight.
    pub fn with_faults(mut self, switches: &Switches, requests: &InFlight) -> Self {
        if switches.fault(Fault::DeadlockOnSigterm) {
            self.waits_for = Some(requests.clone());
        }
        self.panics_on_term = switches.fault(Fault::PanicsOnSigterm);
        self
    }

    /// The next signal (cancel-safe: a signal caught but not handed out is kept for the next
    /// call).
    pub async fn recv(&mut self) -> Signal {
        let signal = match self.pending {
            Some(signal) => signal,
            None => {
                let signal = tokio::select! {
                    _ = self.term.recv() => Signal::SIGTERM,
                    _ = self.int.recv() => Signal::SIGINT,
                };
                if let Some(requests) = &self.waits_for
                    && requests.busy()
                {
                    crate::event!(
                        "{signal} caught while a lock request is in flight; waiting for its answer first (fault deadlock-on-sigterm)"
                    );
                }
                signal
            }
        };
        if signal == Signal::SIGTERM && self.panics_on_term {
            go_panic();
        }
        if let Some(requests) = &self.waits_for {
            self.pending = Some(signal);
            requests.finished().await;
            self.pending = None;
        }
        signal
    }
}

/// Fault panics-on-sigterm: what a Go program prints when it sends on a closed channel, and
/// Go's exit status for a panic; nothing of lock-sidecar's own cleanup runs.
fn go_panic() -> ! {
    use std::io::Write as _;
    let mut err = io::stderr().lock();
    let _ = write!(
        err,
        "panic: send on closed channel\n\ngoroutine 23 [running]:\nlock_sidecar/signals.(*Signals).recv.func1()\n\tsrc/signals.rs:70 +0x1c5 (fault panics-on-sigterm)\ncreated by lock_sidecar/signals.(*Signals).recv in goroutine 1\n\tsrc/signals.rs:60 +0x2c5\n"
    );
    let _ = err.flush();
    std::process::exit(2)
}
