//! Task driver plugins: a go-plugin host that launches a driver binary and talks to it exactly
//! as the Nomad client does (contracts/task-drivers.md, A.1 to A.8, B.4, C.2). Faithful
//! transport, timing and recording only: nothing here judges conformance, the steps do.
//!
//! The pieces, in the order a step meets them:
//!
//! | file | what it does |
//! |---|---|
//! | [`launch_spec`], [`mod@launch`] | [`LaunchSpec`] (program, env as Nomad builds it, start timeout, capture limits) and [`launch()`]: own process group, first stdout line within the start timeout |
//! | [`handshake`] | [`Handshake::parse`]: the `CORE\|APP\|NETWORK\|ADDR\|PROTOCOL\|CERT[\|MUX]` line, raw and typed, with every [`Violation`] a host would reject (returned, not enforced) |
//! | [`golang`] | the Go parsing the host relies on: `strconv.Atoi`/`ParseBool`, `ResolveTCPAddr` syntax, `time.Parse` with hclog's layout |
//! | [`pipes`], [`hclog`] | stdout drained into a bounded capture after the handshake; stderr read line by line and parsed as go-plugin's host parses it ([`LogLine`]) |
//! | [`running`] | [`PluginProcess`]: pid, alive/exit status, logs, [`PluginProcess::kill_now`]; dropping it kills its process group |
//! | [`mod@connect`] | [`connect()`]: h2c gRPC over the announced unix socket or TCP address (`:authority` `unused`), then the broker and stdio streams a Go host opens ([`Client`]) |
//! | [`mod@call`], [`rpcs`], [`protojson`], [`reproduce`] | one RPC with a deadline, recorded as a [`DriverRpc`] (status details decoded, `RecoverableError` included; JSON in record and protobuf forms), with an [`OpEvent`](nomad_conform_reports::model::OpEvent) and a grpcurl reproduction; [`Client`] has a method per RPC |
//! | [`streams`], [`exec_stream`] | Fingerprint, TaskEvents, TaskStats and ExecTaskStreaming collected in the background into a bounded buffer ([`StreamHandle`], [`ExecSession`]) |
//! | [`host`] | the host's deadlines ([`HostTimings`]) and the API version negotiation |
//! | [`lifecycle`], [`shutdown`] | Nomad's load sequence (fingerprint, validation and instance launches), reattach, and the kill sequences of Nomad and go-plugin (shutdown below lifecycle) |
//!
//! Every RPC and every stream read has a deadline given by the caller; errors are
//! [`thiserror`] enums reading "failed to ..."; plugin misbehaviour never panics the harness.

pub mod call;
pub mod closable;
pub mod connect;
pub mod exec_stream;
pub mod golang;
pub mod handshake;
pub mod hclog;
pub mod host;
pub mod launch;
pub mod launch_spec;
pub mod lifecycle;
pub mod pipes;
pub mod protocol;
pub mod protojson;
pub mod reproduce;
pub mod rpcs;
pub mod running;
pub mod shutdown;
pub mod side_streams;
pub mod streams;
pub mod taskconfig;
pub mod taskhost;
pub mod topology;

pub use call::{Deadline, DriverRpc, StatusDetails, call};
pub use connect::{Client, ConnectError, ConnectionFacts, connect};
pub use exec_stream::{ExecOutput, ExecSession};
pub use handshake::{Handshake, PluginAddress, Violation};
pub use hclog::{HclogParser, Level, LogLine};
pub use host::{ApiNegotiation, HostTimings, negotiate_api_version};
pub use launch::{LaunchError, LaunchFailure, launch};
pub use launch_spec::{BaseEnv, LaunchSpec};
pub use lifecycle::{
    FingerprintLaunch, InfoAssessment, InstanceLaunch, LoadError, ValidationLaunch,
    assess_plugin_info, fingerprint_launch, instance_launch, nomad_config, validation_launch,
};
pub use running::{Killed, PluginProcess};
pub use shutdown::{
    KillReport, Reattached, ShutdownReport, kill_like_go_plugin, reattach, shutdown_like_nomad,
};
pub use side_streams::SideStream;
pub use streams::{Arrived, StreamEnd, StreamHandle};

pub use protocol::*;

pub use nomad_conform_proto::goplugin;
pub use nomad_conform_proto::grpc::health::v1 as health;
pub use nomad_conform_proto::nomad::{base, drivers, hclspec, structs};
