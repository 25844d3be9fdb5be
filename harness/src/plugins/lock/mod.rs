//! Singleton lock clients: programs that hold a Nomad Variables lock around a protected process
//! (`nomad var lock`, a lock sidecar, a lock built into the application).
//!
//! The lock suite runs each client the way an allocation would ([`client`]), with a probe as
//! its protected process ([`probe`]: a hidden `nomad-conform probe` subcommand reporting to a
//! [`probe::ProbeListener`]), and puts a fault-injecting proxy ([`proxy`], faults in
//! [`faults`], records in [`exchange`]) between each client and the Variables API: the
//! reference server of `nomad-conform-variables`, or a real Nomad agent. Nothing here judges:
//! [`checker`] holds pure functions over what was recorded (the server's lock history, the
//! proxies' exchanges, the probes' intervals), and [`timeline`] draws it for the report.

pub mod api;
pub mod checker;
pub mod client;
pub mod exchange;
pub mod faults;
pub mod probe;
pub mod proxy;
pub mod timeline;

pub use checker::{
    Advice, ClientTiming, Hold, MeasuredTiming, Violation, ViolationKind, holder_intervals,
    lock_owners, timing_advice, violations,
};
pub use client::{
    ApiAddr, ClientOptions, ClientRun, ClientSpec, RunningClient, substitute, task_argv,
};
pub use exchange::{Exchange, Outcome};
pub use faults::{Campaign, Fault, FaultRates, FaultRule, Operation, PartitionMode};
pub use probe::{ProbeArgs, ProbeCommand, ProbeInterval, ProbeListener};
pub use proxy::{Listen, Proxy, ProxyConfig, Upstream};
