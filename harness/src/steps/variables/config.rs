//! What the Variables suite's steps read: which server is checked, where it listens, the lock
//! numbers it enforces, the harness's management credential and how the harness times what it
//! observes.

use std::sync::Arc;
use std::time::Duration;

use nomad_conform_variables::{ServerConfig, ServerHandle};

use crate::plugins::variables::{Credential, Endpoint};

/// Which server the run checks.
#[derive(Debug)]
pub enum Target {
    /// The reference server the run started; `template` starts more like it.
    Reference {
        server: Arc<ServerHandle>,
        template: Box<ServerConfig>,
    },
    /// A Nomad agent at `addr`.
    Nomad { addr: String },
}

impl Target {
    pub fn is_reference(&self) -> bool {
        matches!(self, Target::Reference { .. })
    }
}

/// Whether the ACL clauses can run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acl {
    /// ACLs are on and the run has a management token.
    On,
    /// Why the ACL clauses are skipped.
    Off(String),
}

/// How the harness times what it observes (not numbers of the contract: those are in
/// [`VariablesConfig::numbers`]).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Between two attempts of a client that keeps trying to acquire.
    pub poll: Duration,
    /// How late past the point Nomad's numbers give a lock may be cleared.
    pub tolerance: Duration,
    /// Longest wait for one answer.
    pub request_timeout: Duration,
}

impl Timing {
    /// A tenth of the shortest TTL between attempts, half of it as tolerance.
    pub fn for_numbers(numbers: &nomad_conform_variables::Profile) -> Timing {
        Timing {
            poll: (numbers.lock_ttl_min / 10).max(Duration::from_millis(20)),
            tolerance: numbers.lock_ttl_min / 2,
            request_timeout: Duration::from_secs(10),
        }
    }
}

/// What the steps of a variables run read.
#[derive(Debug)]
pub struct VariablesConfig {
    pub target: Target,
    pub endpoint: Endpoint,
    /// The lock numbers the server enforces (TTL bounds and defaults, the leader's timer).
    pub numbers: nomad_conform_variables::Profile,
    /// The management token "the harness" uses (none without ACLs).
    pub admin: Credential,
    pub acl: Acl,
    pub timing: Timing,
    /// The rerun line's prefix, for reproduce text.
    pub command_line: String,
}
