//! A reference Nomad Variables server for testing singleton lock clients.
//!
//! It plays Nomad's Variables HTTP API (`/v1/var/<path>` with `cas`, `lock-acquire`,
//! `lock-renew`, `lock-release`, and `/v1/vars`) on loopback TCP (plain or TLS) or a unix socket
//! (optionally with the Task API's authentication), enforcing Nomad's lock rules (TTL bounds and default,
//! the leader's 2 × TTL timer, the lock delay, 409 conflicts, locked variables refusing writes
//! and deletes) and Variables ACLs (capabilities, exact rule first, workload-identity paths,
//! closest glob). Everything observable is recorded for checkers: lock events with monotonic
//! and wall-clock times, and the HTTP exchanges. Tools set it up over HTTP as they would set
//! up Nomad: the ACL policy and token APIs and the namespace API answer too.
//!
//! [`Fault`]s make a server break one rule on purpose; the conformance suite's own tests use
//! them to check that `nomad-conform variables` notices. A server with a fault is no reference.
//!
//! The facts come from `shared/contracts/locks-and-variables.md` (sections B.2, B.3, B.6, C,
//! D), which reads them from `hashicorp/nomad`; each module says which part it implements.
//! No test-suite logic lives here: the harness drives the server through [`ServerHandle`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), nomad_conform_variables::Error> {
//! use nomad_conform_variables::{Profile, ServerConfig, VariablesServer};
//! let server = VariablesServer::start(ServerConfig::localhost().with_profile(Profile::fast())).await?;
//! println!("NOMAD_ADDR={}", server.nomad_addr());
//! // ... run a lock client against it, then judge `server.history()` ...
//! server.shutdown().await?;
//! # Ok(()) }
//! ```

mod acl;
mod admin;
mod clock;
mod engine;
mod error;
mod faults;
#[doc(hidden)]
pub mod fuzz_api;
mod godur;
mod history;
mod http;
mod locks;
mod profile;
mod rules;
mod server;
mod store;
mod tls;
mod validate;
mod wire;

pub use acl::{
    AclConfig, Capability, NamespaceRule, PathRule, Policy, Token, TokenKind, WorkloadClaim,
};
pub use clock::{Clock, Sleep, TokioClock};
pub use error::Error;
pub use faults::{Fault, Faults};
pub use godur::{format as format_go_duration, parse as parse_go_duration};
pub use history::{LockEvent, LockEventKind, RequestRecord};
pub use http::parse_token as request_token;
pub use locks::TimerInfo;
pub use profile::Profile;
pub use server::{Listen, ServerConfig, ServerHandle, VariablesServer};
pub use tls::TlsListener;
pub use wire::{Variable, VariableLock, VariableMetadata};
