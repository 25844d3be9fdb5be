//! Protocol definitions nomad-conform speaks, compiled from our own `.proto` files (under
//! `proto/proto/`, laid out like the upstream files so that imports resolve).
//!
//! Generated modules mirror the protobuf package names exactly, because code generated for
//! one package refers to another with `super::` paths:
//!
//! | package | module | services (tonic client / server) |
//! |---|---|---|
//! | `csi.v1` | [`csi::v1`] | `identity_client::IdentityClient`, `controller_client`, `node_client`, … / `identity_server::{Identity, IdentityServer}`, … |
//! | `hashicorp.nomad.plugins.base.proto` | [`hashicorp::nomad::plugins::base::proto`] | `base_plugin_client::BasePluginClient` / `base_plugin_server::{BasePlugin, BasePluginServer}` |
//! | `hashicorp.nomad.plugins.drivers.proto` | [`hashicorp::nomad::plugins::drivers::proto`] | `driver_client::DriverClient` / `driver_server::{Driver, DriverServer}` |
//! | `hashicorp.nomad.plugins.shared.hclspec` | [`hashicorp::nomad::plugins::shared::hclspec`] | (messages only: the HCL schema `Spec`) |
//! | `hashicorp.nomad.plugins.shared.structs` | [`hashicorp::nomad::plugins::shared::structs`] | (messages only: `Attribute`, `RecoverableError`, `StatObject`, `StatValue`) |
//! | `plugin` (go-plugin internals) | [`goplugin`] | `grpc_broker_client::GrpcBrokerClient`, `grpc_controller_client::GrpcControllerClient`, `grpc_stdio_client::GrpcStdioClient` / `grpc_broker_server::{GrpcBroker, GrpcBrokerServer}`, … |
//! | `grpc.health.v1` | [`grpc::health::v1`] | `health_client::HealthClient` / `health_server::{Health, HealthServer}` |
//!
//! [`nomad`] re-exports the four Nomad packages under short names (`nomad::base`,
//! `nomad::drivers`, `nomad::hclspec`, `nomad::structs`).
//!
//! A go-plugin host (the harness standing in for Nomad) uses the clients of `BasePlugin`,
//! `Driver`, `GRPCBroker`, `GRPCController`, `GRPCStdio` and `Health` over one connection; a
//! go-plugin server (a Rust driver) serves all of them on one tonic server. gRPC paths are
//! `/<package>.<Service>/<Rpc>`, e.g. `/hashicorp.nomad.plugins.drivers.proto.Driver/StartTask`
//! and `/plugin.GRPCController/Shutdown`.
//!
//! [`SECRET_FIELDS`] lists the CSI fields that carry secrets, so whoever records a request can
//! redact them.
//!
//! Every generated message and enum implements `serde::Serialize`. Secret fields serialise
//! with each value replaced by [`REDACTED`] (the keys stay, so a report still shows which
//! secrets were sent); `google.protobuf.Timestamp` fields serialise as RFC 3339 strings and
//! `google.protobuf.Duration` fields as protobuf-JSON duration strings (`"1.500s"`); enums
//! serialise as their numbers, `bytes` as arrays of numbers. `Debug` output is prost's and does
//! **not** redact.

pub mod csi {
    /// Container Storage Interface, spec v1.12 (package `csi.v1`).
    pub mod v1 {
        tonic::include_proto!("csi.v1");
    }
}

/// Nomad's plugin protocols; the nesting is the package path `hashicorp.nomad.plugins.*`.
pub mod hashicorp {
    pub mod nomad {
        pub mod plugins {
            /// Package `hashicorp.nomad.plugins.base` (parent of the `proto` package only).
            pub mod base {
                /// Package `hashicorp.nomad.plugins.base.proto`: the `BasePlugin` service every
                /// Nomad plugin serves (`PluginInfo`, `ConfigSchema`, `SetConfig`).
                pub mod proto {
                    tonic::include_proto!("hashicorp.nomad.plugins.base.proto");
                }
            }

            /// Package `hashicorp.nomad.plugins.drivers` (parent of the `proto` package only).
            pub mod drivers {
                /// Package `hashicorp.nomad.plugins.drivers.proto`: the task driver `Driver`
                /// service and its messages.
                pub mod proto {
                    tonic::include_proto!("hashicorp.nomad.plugins.drivers.proto");
                }
            }

            /// Packages shared by several plugin kinds.
            pub mod shared {
                /// Package `hashicorp.nomad.plugins.shared.hclspec`: HCL schemas returned by
                /// `ConfigSchema` and `TaskConfigSchema`.
                pub mod hclspec {
                    tonic::include_proto!("hashicorp.nomad.plugins.shared.hclspec");
                }

                /// Package `hashicorp.nomad.plugins.shared.structs`: fingerprint attributes,
                /// the `RecoverableError` status detail and generic statistics.
                pub mod structs {
                    tonic::include_proto!("hashicorp.nomad.plugins.shared.structs");
                }
            }
        }
    }
}

/// Short names for the Nomad plugin packages in [`hashicorp::nomad::plugins`].
pub mod nomad {
    pub use crate::hashicorp::nomad::plugins::base::proto as base;
    pub use crate::hashicorp::nomad::plugins::drivers::proto as drivers;
    pub use crate::hashicorp::nomad::plugins::shared::hclspec;
    pub use crate::hashicorp::nomad::plugins::shared::structs;
}

/// go-plugin's internal services (package `plugin`): `GRPCBroker`, `GRPCController` and
/// `GRPCStdio`, served by every go-plugin gRPC server next to the plugin's own services.
pub mod goplugin {
    tonic::include_proto!("plugin");
}

/// Standard gRPC services.
pub mod grpc {
    pub mod health {
        /// Package `grpc.health.v1`: the health checking service (`Check`, `Watch`) that
        /// go-plugin servers expose, reporting service `"plugin"` as `SERVING`.
        pub mod v1 {
            tonic::include_proto!("grpc.health.v1");
        }
    }
}

include!(concat!(env!("OUT_DIR"), "/secret_fields.rs"));

/// What a secret value is replaced with when a message is serialised.
pub const REDACTED: &str = "<redacted>";

/// Whether `field` (`package.Message.field`, with or without a leading dot) carries secrets.
pub fn is_secret_field(field: &str) -> bool {
    let field = field.strip_prefix('.').unwrap_or(field);
    SECRET_FIELDS.contains(&field)
}

/// serde helpers named by the attributes that build.rs puts on generated fields.
#[doc(hidden)]
pub mod serde_support {
    use std::collections::HashMap;

    use serde::Serializer;
    use serde::ser::SerializeMap;

    /// Serialises a secrets map with its keys and every value replaced by [`crate::REDACTED`].
    pub fn redacted<S: Serializer>(
        secrets: &HashMap<String, String>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut keys: Vec<&String> = secrets.keys().collect();
        keys.sort();
        let mut map = serializer.serialize_map(Some(keys.len()))?;
        for key in keys {
            map.serialize_entry(key, crate::REDACTED)?;
        }
        map.end()
    }

    /// Serialises an optional timestamp as an RFC 3339 string (or null).
    pub fn timestamp<S: Serializer>(
        value: &Option<prost_types::Timestamp>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(ts) => serializer.collect_str(ts),
            None => serializer.serialize_none(),
        }
    }

    /// Serialises an optional duration as a protobuf-JSON duration string (`"5s"`, `"1.500s"`,
    /// `"-0.000001s"`), or null.
    pub fn duration<S: Serializer>(
        value: &Option<prost_types::Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.collect_str(duration),
            None => serializer.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use prost::Message;

    use super::csi::v1::{
        self, CreateVolumeRequest, Snapshot, VolumeCapability, volume_capability,
    };
    use super::*;

    #[test]
    fn generated_clients_and_servers_exist() {
        // Naming the types is the test: this does not compile if codegen changes shape.
        fn assert_client<T>() {}
        assert_client::<v1::identity_client::IdentityClient<tonic::transport::Channel>>();
        assert_client::<v1::controller_client::ControllerClient<tonic::transport::Channel>>();
        assert_client::<v1::node_client::NodeClient<tonic::transport::Channel>>();
        assert_client::<
            v1::group_controller_client::GroupControllerClient<tonic::transport::Channel>,
        >();
        assert_client::<
            v1::snapshot_metadata_client::SnapshotMetadataClient<tonic::transport::Channel>,
        >();
        assert_eq!(
            <v1::identity_server::IdentityServer<()> as tonic::server::NamedService>::NAME,
            "csi.v1.Identity"
        );
        assert_eq!(
            <v1::node_server::NodeServer<()> as tonic::server::NamedService>::NAME,
            "csi.v1.Node"
        );
    }

    fn sample_request() -> CreateVolumeRequest {
        CreateVolumeRequest {
            name: "vol-1".into(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 1 << 30,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![VolumeCapability {
                access_type: Some(volume_capability::AccessType::Mount(
                    volume_capability::MountVolume {
                        fs_type: "ext4".into(),
                        mount_flags: vec!["noatime".into()],
                        volume_mount_group: String::new(),
                    },
                )),
                access_mode: Some(volume_capability::AccessMode {
                    mode: volume_capability::access_mode::Mode::SingleNodeWriter as i32,
                }),
            }],
            secrets: HashMap::from([("token".to_string(), "hunter2".to_string())]),
            ..Default::default()
        }
    }

    #[test]
    fn message_round_trips_through_prost() {
        let request = sample_request();
        let bytes = request.encode_to_vec();
        let decoded = CreateVolumeRequest::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(decoded, request);
    }

    #[test]
    fn wire_numbers_match_the_spec() {
        // CreateVolumeRequest.name is field 1 (tag 0x0a = 1 << 3 | length-delimited);
        // ProbeResponse.ready is a BoolValue wrapper in field 1.
        let bytes = CreateVolumeRequest {
            name: "x".into(),
            ..Default::default()
        }
        .encode_to_vec();
        assert_eq!(bytes, [0x0a, 0x01, b'x']);
        let probe = v1::ProbeResponse { ready: Some(false) }.encode_to_vec();
        assert_eq!(probe, [0x0a, 0x00]);
        // NodeGetInfoResponse.max_volumes_per_node is field 2, varint.
        let info = v1::NodeGetInfoResponse {
            max_volumes_per_node: 3,
            ..Default::default()
        };
        assert_eq!(info.encode_to_vec(), [0x10, 0x03]);
    }

    #[test]
    fn secret_fields_come_from_the_proto_comments() {
        assert_eq!(SECRET_FIELDS.len(), 19, "{SECRET_FIELDS:?}");
        for expected in [
            "csi.v1.CreateVolumeRequest.secrets",
            "csi.v1.NodePublishVolumeRequest.secrets",
            "csi.v1.NodeExpandVolumeRequest.secrets",
            "csi.v1.GetMetadataDeltaRequest.secrets",
        ] {
            assert!(is_secret_field(expected), "{expected} missing");
        }
        assert!(is_secret_field(".csi.v1.DeleteVolumeRequest.secrets"));
        assert!(!is_secret_field("csi.v1.CreateVolumeRequest.parameters"));
        // Every field named `secrets` in the file is marked, and nothing else is.
        let proto = include_str!("../proto/csi/v1/csi.proto");
        let secrets_lines = proto
            .lines()
            .filter(|l| l.trim_start().starts_with("map<string, string> secrets ="))
            .count();
        assert_eq!(secrets_lines, SECRET_FIELDS.len());
        assert!(SECRET_FIELDS.iter().all(|f| f.ends_with(".secrets")));
    }

    #[test]
    fn serialize_redacts_secrets_and_renders_timestamps() {
        let json = serde_json::to_value(sample_request()).expect("serialises");
        assert_eq!(json["secrets"]["token"], REDACTED);
        assert_eq!(json["name"], "vol-1");
        assert!(!json.to_string().contains("hunter2"));

        let snapshot = Snapshot {
            snapshot_id: "s".into(),
            creation_time: Some(prost_types::Timestamp {
                seconds: 0,
                nanos: 0,
            }),
            ..Default::default()
        };
        let json = serde_json::to_value(snapshot).expect("serialises");
        assert_eq!(json["creation_time"], "1970-01-01T00:00:00Z");
    }
}
