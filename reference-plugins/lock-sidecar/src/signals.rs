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
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            waits_for: None,
            pending: None,
        })
    }

    /// The same signals, handed out as the switched-on faults say; `requests` are the lock
    /// client's requests in flight.
    pub fn with_faults(mut self, switches: &Switches, requests: &InFlight) -> Self {
        if switches.fault(Fault::DeadlockOnSigterm) {
            self.waits_for = Some(requests.clone());
        }
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
        if let Some(requests) = &self.waits_for {
            self.pending = Some(signal);
            requests.finished().await;
            self.pending = None;
        }
        signal
    }
}
