//! What the lock client suite's steps read: how the client runs, which server plays Nomad,
//! and the timings the user gave.

use std::time::Duration;

use crate::nomad_api::ApiSettings;
use crate::plugins::lock::ProbeCommand;

/// How the client under test runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// One task: the command wraps the protected process (`{protected}`).
    Shim { command: String },
    /// A leader task and the application the harness starts once `sentinel` (a file name in
    /// the client's allocation directory) exists.
    Sidecar { command: String, sentinel: String },
}

impl Pattern {
    pub fn is_shim(&self) -> bool {
        matches!(self, Pattern::Shim { .. })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Pattern::Shim { .. } => "shim",
            Pattern::Sidecar { .. } => "sidecar",
        }
    }

    pub fn command(&self) -> &str {
        match self {
            Pattern::Shim { command } | Pattern::Sidecar { command, .. } => command,
        }
    }
}

/// Which server plays Nomad.
#[derive(Clone, Debug)]
pub enum ServerChoice {
    /// The reference Variables server with these numbers, one per clause.
    Reference(nomad_conform_variables::Profile),
    /// A real Nomad agent (address, TLS, token, namespace, region); the token is the clients'
    /// NOMAD_TOKEN and the harness's own "other holder"'s.
    Nomad(Box<ApiSettings>),
}

impl ServerChoice {
    pub fn is_reference(&self) -> bool {
        matches!(self, ServerChoice::Reference(_))
    }

    /// The server's lock numbers: the reference server's profile, or Nomad's own.
    fn numbers(&self) -> nomad_conform_variables::Profile {
        match self {
            ServerChoice::Reference(p) => p.clone(),
            ServerChoice::Nomad(_) => nomad_conform_variables::Profile::nomad(),
        }
    }

    /// The shortest TTL the server grants (Nomad: 10 s).
    pub fn ttl_min(&self) -> Duration {
        self.numbers().lock_ttl_min
    }

    /// The TTL a lock gets when it asks for none (Nomad: 15 s).
    pub fn ttl_default(&self) -> Duration {
        self.numbers().lock_ttl_default
    }

    /// The lock delay a lock gets when it asks for none (Nomad: 15 s).
    pub fn delay_default(&self) -> Duration {
        self.numbers().lock_delay_default
    }
}

/// What the steps of a lock run read.
#[derive(Debug)]
pub struct LockConfig {
    pub pattern: Pattern,
    /// The lock's variable path.
    pub path: String,
    pub server: ServerChoice,
    /// Clients reach the API over a unix socket (NOMAD_UNIX_ADDR), as through the Task API.
    pub task_api: bool,
    /// The sidecar pattern's application kill_timeout, and how long Nomad waits after the
    /// kill signal before SIGKILL.
    pub kill_timeout: Duration,
    /// The client's give-up window, as the user configured it.
    pub give_up: Option<Duration>,
    /// The job's `disconnect { stop_on_client_after }`.
    pub stop_on_client_after: Option<Duration>,
    /// Clients in the singleton campaign.
    pub clients: usize,
    /// The least the singleton campaign lasts (`--campaign`, else the profile's).
    pub campaign: Duration,
    pub probe: ProbeCommand,
    /// The rerun line's prefix, for reproduce text.
    pub command_line: crate::command_line::CommandLine,
}
