//! The protocol's fixed points, as Nomad and go-plugin set them: the magic cookie, protocol
//! and API versions, port ranges, timeouts, the status detail of recoverable errors, and the
//! gRPC services a driver serves on one connection.

use std::time::Duration;

/// The environment variable a go-plugin server checks before it serves (A.1).
pub const MAGIC_COOKIE_KEY: &str = "NOMAD_PLUGIN_MAGIC_COOKIE";
/// Nomad's magic cookie value (A.1).
pub const MAGIC_COOKIE_VALUE: &str =
    "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255";
/// go-plugin's core protocol version: the first handshake field must be this (A.3).
pub const CORE_PROTOCOL_VERSION: i64 = 1;
/// Nomad's application protocol version for plugins, the only one it offers (A.1).
pub const APP_PROTOCOL_VERSION: i64 = 2;
/// The port range go-plugin passes when the host leaves MinPort/MaxPort at 0 (A.2).
pub const DEFAULT_MIN_PORT: u32 = 10000;
pub const DEFAULT_MAX_PORT: u32 = 25000;
/// go-plugin's default StartTimeout, which Nomad keeps (A.2).
pub const NOMAD_START_TIMEOUT: Duration = Duration::from_secs(60);
/// The only driver plugin API version the Nomad agent supports (A.8).
pub const DRIVER_API_VERSION: &str = "v0.1.0";
/// Nomad's context for `Driver/Shutdown` (`driverShutdownTimeout`, A.6).
pub const DRIVER_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);
/// How long go-plugin's `Kill` waits for the process after closing the client (A.6).
pub const KILL_GRACE: Duration = Duration::from_secs(2);
/// The client's executor port range that Nomad sends in `NomadDriverConfig` (A.8).
pub const CLIENT_MIN_PORT: u32 = 14000;
pub const CLIENT_MAX_PORT: u32 = 14512;
/// The status detail Nomad reads to tell recoverable errors from fatal ones (B.4).
pub const RECOVERABLE_ERROR_TYPE_URL: &str =
    "type.googleapis.com/hashicorp.nomad.plugins.shared.structs.RecoverableError";

/// The gRPC services a go-plugin driver serves on one connection (A.5, B.1, B.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Service {
    /// `hashicorp.nomad.plugins.base.proto.BasePlugin`
    Base,
    /// `hashicorp.nomad.plugins.drivers.proto.Driver`
    Driver,
    /// `plugin.GRPCController`
    Controller,
    /// `plugin.GRPCBroker`
    Broker,
    /// `plugin.GRPCStdio`
    Stdio,
    /// `grpc.health.v1.Health`
    Health,
}

impl Service {
    /// The fully-qualified service name, as in the gRPC path.
    pub fn full_name(self) -> &'static str {
        match self {
            Service::Base => "hashicorp.nomad.plugins.base.proto.BasePlugin",
            Service::Driver => "hashicorp.nomad.plugins.drivers.proto.Driver",
            Service::Controller => "plugin.GRPCController",
            Service::Broker => "plugin.GRPCBroker",
            Service::Stdio => "plugin.GRPCStdio",
            Service::Health => "grpc.health.v1.Health",
        }
    }

    /// The gRPC path of `method`: `/hashicorp.nomad.plugins.drivers.proto.Driver/StartTask`.
    pub fn path(self, method: &str) -> String {
        format!("/{}/{method}", self.full_name())
    }

    /// Our .proto file that defines the service, relative to `proto/proto` (for grpcurl).
    pub fn proto_file(self) -> &'static str {
        match self {
            Service::Base => "plugins/base/proto/base.proto",
            Service::Driver => "plugins/drivers/proto/driver.proto",
            Service::Controller => "internal/plugin/grpc_controller.proto",
            Service::Broker => "internal/plugin/grpc_broker.proto",
            Service::Stdio => "internal/plugin/grpc_stdio.proto",
            Service::Health => "grpc/health/v1/health.proto",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_paths_match_the_contract() {
        assert_eq!(
            Service::Driver.path("StartTask"),
            "/hashicorp.nomad.plugins.drivers.proto.Driver/StartTask"
        );
        assert_eq!(
            Service::Base.path("PluginInfo"),
            "/hashicorp.nomad.plugins.base.proto.BasePlugin/PluginInfo"
        );
        assert_eq!(
            Service::Controller.path("Shutdown"),
            "/plugin.GRPCController/Shutdown"
        );
        assert_eq!(
            Service::Stdio.path("StreamStdio"),
            "/plugin.GRPCStdio/StreamStdio"
        );
        assert_eq!(
            Service::Broker.path("StartStream"),
            "/plugin.GRPCBroker/StartStream"
        );
        // Every proto file named here exists in the source tree.
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../proto/proto");
        for s in [
            Service::Base,
            Service::Driver,
            Service::Controller,
            Service::Broker,
            Service::Stdio,
            Service::Health,
        ] {
            let p = std::path::Path::new(root).join(s.proto_file());
            assert!(p.exists(), "{}", p.display());
        }
    }
}
