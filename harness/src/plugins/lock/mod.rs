//! Singleton lock clients: programs that hold a Nomad Variables lock around a protected process
//! (`nomad var lock`, a lock sidecar, a lock built into the application).
//!
//! The lock suite runs each client the way an allocation would ([`client`]), with a probe as
//! its protected process ([`probe`]: a hidden `nomad-conform probe` subcommand reporting to a
//! [`probe::ProbeListener`]), and puts a fault-injecting proxy ([`proxy`], its fault vocabulary
//! in [`proxy_faults`], records in [`exchange`]) between each client and the Variables API: the
//! reference server of `nomad-conform-variables`, or a real Nomad agent. Nothing here judges:
//! the checker over what was recorded and the timeline drawn from it are the lock steps'
//! (`crate::steps::lock::checker`, `crate::steps::lock::timeline`).

pub mod api;
pub mod client;
pub mod exchange;
pub mod probe;
pub mod proxy;
pub mod proxy_faults;

pub use client::{
    ApiAddr, ClientOptions, ClientRun, ClientSpec, RunningClient, substitute, task_argv,
};
pub use exchange::{Exchange, Outcome};
pub use probe::{ProbeArgs, ProbeCommand, ProbeInterval, ProbeListener};
pub use proxy::{Listen, Proxy, ProxyConfig};
pub use proxy_faults::{Campaign, Fault, FaultRates, FaultRule, Operation, PartitionMode};
