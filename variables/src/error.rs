//! Errors of the library API (starting, restarting and configuring the server). Requests from
//! clients never produce these: they get the HTTP answer Nomad gives.

use std::io;
use std::path::PathBuf;

/// What can go wrong driving the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The TCP listener could not be bound.
    #[error("failed to bind TCP listener on {addr}: {source}")]
    BindTcp {
        addr: std::net::SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The unix socket could not be bound (or a stale file could not be removed).
    #[error("failed to bind unix socket {}: {source}", path.display())]
    BindUnix {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A policy breaks Nomad's policy rules.
    #[error("failed to accept ACL policy {policy:?}: {reason}")]
    InvalidPolicy { policy: String, reason: String },
    /// The server has been shut down.
    #[error("failed to {action}: the server was shut down")]
    ShutDown { action: &'static str },
    /// The HTTP serving task ended with an error.
    #[error("failed to serve HTTP: {0}")]
    Serve(#[source] io::Error),
}
