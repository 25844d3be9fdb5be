//! SIGTERM and SIGINT, the signals Nomad (kill_signal) and a terminal send.
//!
//! Both are caught from the very start, before anything is acquired or spawned, so none can
//! kill lock-sidecar between "lock held" and "process running" without the lock being handled.

use std::io;

use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

/// The caught signals.
#[derive(Debug)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> io::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next signal.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.int.recv() => Signal::SIGINT,
        }
    }
}
