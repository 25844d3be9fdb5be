//! Checks the generated task-driver and go-plugin code against the task-driver contract
//! (sections B and F, plus `grpc.health.v1`):
//! - field numbers and enum values, via the exact bytes prost writes and reads;
//! - gRPC paths, via what each generated client puts on the wire;
//! - a round trip through every go-plugin service on one tonic server over a Unix socket,
//!   dialled the way a go-plugin host dials a plugin.
//!
//! Every expected byte, number and path below is typed in from the contract, not derived
//! from the .proto files, so a wrong number or name in a .proto fails here.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use prost::Message;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Response, Status, Streaming};

use nomad_conform_proto::goplugin;
use nomad_conform_proto::grpc::health::v1 as health;
use nomad_conform_proto::nomad::{base, drivers, hclspec, structs};

// ---------------------------------------------------------------------------------------------
// Wire format: field numbers, enum values, round trips
// ---------------------------------------------------------------------------------------------

/// Encodes a message, for comparing with hand-written bytes.
fn wire<M: Message>(message: M) -> Vec<u8> {
    message.encode_to_vec()
}

#[test]
fn driver_field_numbers_match_the_contract() {
    // A tag byte is (field number << 3) | wire type; 0 = varint, 1 = 64-bit, 2 = length-delimited.
    // TaskConfig.parent_job_id is 22: tag 178 needs two varint bytes.
    let config = drivers::TaskConfig {
        parent_job_id: "p".into(),
        ..Default::default()
    };
    assert_eq!(wire(config), [0xb2, 0x01, 0x01, b'p']);
    let config = drivers::TaskConfig {
        msgpack_driver_config: vec![0x80],
        ..Default::default()
    };
    assert_eq!(wire(config), [0x1a, 0x01, 0x80]);

    // MemoryUsage: measured_fields is 6 (packed), usage 7, swap 8.
    let memory = drivers::MemoryUsage {
        measured_fields: vec![drivers::memory_usage::Fields::Swap as i32],
        ..Default::default()
    };
    assert_eq!(wire(memory), [0x32, 0x01, 0x06]);
    let memory = drivers::MemoryUsage {
        usage: 1,
        swap: 2,
        ..Default::default()
    };
    assert_eq!(wire(memory), [0x38, 0x01, 0x40, 0x02]);
    // CPUUsage.measured_fields is 7.
    let cpu = drivers::CpuUsage {
        measured_fields: vec![drivers::cpu_usage::Fields::Percent as i32],
        ..Default::default()
    };
    assert_eq!(wire(cpu), [0x3a, 0x01, 0x05]);

    // LinuxResources: PercentTicks is 8 (double), cpuset_cgroup 9.
    let linux = drivers::LinuxResources {
        percent_ticks: 1.0,
        ..Default::default()
    };
    let mut expected = vec![0x41];
    expected.extend(1.0f64.to_le_bytes());
    assert_eq!(wire(linux), expected);
    let linux = drivers::LinuxResources {
        cpuset_cgroup: "c".into(),
        ..Default::default()
    };
    assert_eq!(wire(linux), [0x4a, 0x01, b'c']);

    // DriverCapabilities: fs_isolation 3, mount_configs 6, disable_log_collection 8,
    // dynamic_workload_users 9.
    let caps = drivers::DriverCapabilities {
        fs_isolation: drivers::driver_capabilities::FsIsolation::Unveil as i32,
        mount_configs: drivers::driver_capabilities::MountConfigs::NoMounts as i32,
        disable_log_collection: true,
        dynamic_workload_users: true,
        ..Default::default()
    };
    assert_eq!(wire(caps), [0x18, 0x03, 0x30, 0x01, 0x40, 0x01, 0x48, 0x01]);

    // AllocatedTaskResources.networks is 5; AllocatedMemoryResources.memory_mb is 2.
    let allocated = drivers::AllocatedTaskResources {
        networks: vec![drivers::NetworkResource::default()],
        ..Default::default()
    };
    assert_eq!(wire(allocated), [0x2a, 0x00]);
    let memory = drivers::AllocatedMemoryResources {
        memory_mb: 1,
        ..Default::default()
    };
    assert_eq!(wire(memory), [0x10, 0x01]);

    // Mount.request_name 6; FingerprintResponse.err 4; NetworkIsolationSpec.hostsConfig 4.
    let mount = drivers::Mount {
        request_name: "r".into(),
        ..Default::default()
    };
    assert_eq!(wire(mount), [0x32, 0x01, b'r']);
    let fingerprint = drivers::FingerprintResponse {
        err: "e".into(),
        ..Default::default()
    };
    assert_eq!(wire(fingerprint), [0x22, 0x01, b'e']);
    let isolation = drivers::NetworkIsolationSpec {
        hosts_config: Some(drivers::HostsConfig::default()),
        ..Default::default()
    };
    assert_eq!(wire(isolation), [0x22, 0x00]);

    // TaskHandle.driver_state 4; StartTaskResponse.network_override 4.
    let handle = drivers::TaskHandle {
        driver_state: vec![1, 2],
        ..Default::default()
    };
    assert_eq!(wire(handle), [0x22, 0x02, 0x01, 0x02]);
    let started = drivers::StartTaskResponse {
        network_override: Some(drivers::NetworkOverride::default()),
        ..Default::default()
    };
    assert_eq!(wire(started), [0x22, 0x00]);

    // StopTaskRequest.timeout is field 2, a google.protobuf.Duration (seconds = 5).
    let stop = drivers::StopTaskRequest {
        timeout: Some(prost_types::Duration {
            seconds: 5,
            nanos: 0,
        }),
        ..Default::default()
    };
    assert_eq!(wire(stop), [0x12, 0x02, 0x08, 0x05]);
    // ExecTaskRequest.timeout is 3; TaskStatsRequest.collection_interval is 2.
    let exec = drivers::ExecTaskRequest {
        timeout: Some(prost_types::Duration::default()),
        ..Default::default()
    };
    assert_eq!(wire(exec), [0x1a, 0x00]);
    let stats = drivers::TaskStatsRequest {
        collection_interval: Some(prost_types::Duration::default()),
        ..Default::default()
    };
    assert_eq!(wire(stats), [0x12, 0x00]);

    // ExecTaskStreamingRequest: setup 1, tty_size 2, stdin 3; TerminalSize width 2.
    let exec = drivers::ExecTaskStreamingRequest {
        tty_size: Some(drivers::exec_task_streaming_request::TerminalSize {
            height: 0,
            width: 80,
        }),
        stdin: Some(drivers::ExecTaskStreamingIoOperation {
            data: Vec::new(),
            close: true,
        }),
        ..Default::default()
    };
    assert_eq!(wire(exec), [0x12, 0x02, 0x10, 80, 0x1a, 0x02, 0x10, 0x01]);
}

#[test]
fn base_and_shared_field_numbers_match_the_contract() {
    // PluginInfoResponse: type 1 (DRIVER = 2), name 4.
    let info = base::PluginInfoResponse {
        r#type: base::PluginType::Driver as i32,
        name: "n".into(),
        ..Default::default()
    };
    assert_eq!(wire(info), [0x08, 0x02, 0x22, 0x01, b'n']);
    // NomadDriverConfig: ClientMinPort 2, Topology 3.
    let driver = base::NomadDriverConfig {
        client_min_port: 1,
        topology: Some(base::ClientTopology::default()),
        ..Default::default()
    };
    assert_eq!(wire(driver), [0x10, 0x01, 0x1a, 0x00]);
    // ClientTopology.override_withold_compute 5; ClientTopologySLIT.values 2, packed.
    let topology = base::ClientTopology {
        override_withold_compute: 1,
        ..Default::default()
    };
    assert_eq!(wire(topology), [0x28, 0x01]);
    let slit = base::ClientTopologySlit {
        dimension: 0,
        values: vec![1, 2],
    };
    assert_eq!(wire(slit), [0x12, 0x02, 0x01, 0x02]);
    // ClientTopologyCore: core_grade 4 (Efficiency = 1), guess_speed 8.
    let core = base::ClientTopologyCore {
        core_grade: base::CoreGrade::Efficiency as i32,
        guess_speed: 1,
        ..Default::default()
    };
    assert_eq!(wire(core), [0x20, 0x01, 0x40, 0x01]);

    // Spec is a oneof: Attr 3, default 9, literal 10.
    let attr = hclspec::Spec {
        block: Some(hclspec::spec::Block::Attr(hclspec::Attr::default())),
    };
    assert_eq!(wire(attr), [0x1a, 0x00]);
    let default = hclspec::Spec {
        block: Some(hclspec::spec::Block::Default(Box::default())),
    };
    assert_eq!(wire(default), [0x4a, 0x00]);
    let literal = hclspec::Spec {
        block: Some(hclspec::spec::Block::Literal(hclspec::Literal {
            value: "1".into(),
        })),
    };
    assert_eq!(wire(literal), [0x52, 0x03, 0x0a, 0x01, b'1']);
    // BlockList.max_items 3; BlockMap.labels 2.
    let list = hclspec::BlockList {
        max_items: 1,
        ..Default::default()
    };
    assert_eq!(wire(list), [0x18, 0x01]);
    let map = hclspec::BlockMap {
        labels: vec!["l".into()],
        ..Default::default()
    };
    assert_eq!(wire(map), [0x12, 0x01, b'l']);

    // Attribute: oneof value with bool_val 4, then unit 5.
    let attribute = structs::Attribute {
        value: Some(structs::attribute::Value::BoolVal(true)),
        unit: "u".into(),
    };
    assert_eq!(wire(attribute), [0x20, 0x01, 0x2a, 0x01, b'u']);
    let attribute = structs::Attribute {
        value: Some(structs::attribute::Value::IntVal(3)),
        unit: String::new(),
    };
    assert_eq!(wire(attribute), [0x10, 0x03]);
    assert_eq!(
        wire(structs::RecoverableError { recoverable: true }),
        [0x08, 0x01]
    );
    // StatValue.bool_val is 6, a google.protobuf.BoolValue; desc is 8.
    let stat = structs::StatValue {
        bool_val: Some(true),
        desc: "d".into(),
        ..Default::default()
    };
    assert_eq!(wire(stat), [0x32, 0x02, 0x08, 0x01, 0x42, 0x01, b'd']);
}

#[test]
fn goplugin_and_health_field_numbers_match_the_contract() {
    // ConnInfo: service_id 1, knock 4; Knock.error 3.
    let info = goplugin::ConnInfo {
        service_id: 7,
        knock: Some(goplugin::conn_info::Knock {
            error: "x".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(wire(info), [0x08, 0x07, 0x22, 0x03, 0x1a, 0x01, b'x']);
    // StdioData: channel 1 (STDERR = 2), data 2.
    let data = goplugin::StdioData {
        channel: goplugin::stdio_data::Channel::Stderr as i32,
        data: b"hi".to_vec(),
    };
    assert_eq!(wire(data), [0x08, 0x02, 0x12, 0x02, b'h', b'i']);
    // HealthCheckRequest.service 1; HealthCheckResponse.status 1.
    let request = health::HealthCheckRequest {
        service: "plugin".into(),
    };
    assert_eq!(wire(request), b"\x0a\x06plugin");
    let response = health::HealthCheckResponse {
        status: health::health_check_response::ServingStatus::ServiceUnknown as i32,
    };
    assert_eq!(wire(response), [0x08, 0x03]);
}

#[test]
fn enum_values_match_the_contract() {
    use drivers::driver_capabilities::{FsIsolation, MountConfigs};
    use drivers::network_isolation_spec::NetworkIsolationMode;

    assert_eq!(base::PluginType::Unknown as i32, 0);
    assert_eq!(base::PluginType::Driver as i32, 2);
    assert_eq!(base::PluginType::Device as i32, 3);
    assert_eq!(base::PluginType::try_from(1).ok(), None);
    assert_eq!(base::CoreGrade::Performance as i32, 0);

    let health = drivers::fingerprint_response::HealthState::Healthy;
    assert_eq!(health as i32, 2);
    assert_eq!(health.as_str_name(), "HEALTHY");
    assert_eq!(drivers::start_task_response::Result::Retry as i32, 1);
    assert_eq!(drivers::start_task_response::Result::Fatal as i32, 2);
    assert_eq!(FsIsolation::Image as i32, 2);
    assert_eq!(FsIsolation::Unveil as i32, 3);
    // UNKNOWN_MOUNTS and ANY_MOUNTS are aliases for 0; prost keeps the first name.
    assert_eq!(MountConfigs::UnknownMounts as i32, 0);
    assert_eq!(MountConfigs::NoMounts as i32, 1);
    assert_eq!(NetworkIsolationMode::Group as i32, 1);
    assert_eq!(NetworkIsolationMode::None as i32, 3);
    assert_eq!(drivers::TaskState::Running as i32, 1);
    assert_eq!(drivers::TaskState::Exited as i32, 2);
    assert_eq!(drivers::cpu_usage::Fields::ThrottledTime as i32, 4);
    assert_eq!(drivers::memory_usage::Fields::KernelMaxUsage as i32, 4);
    assert_eq!(drivers::memory_usage::Fields::Swap as i32, 6);

    assert_eq!(goplugin::stdio_data::Channel::Invalid as i32, 0);
    assert_eq!(goplugin::stdio_data::Channel::Stdout as i32, 1);
    use health::health_check_response::ServingStatus;
    assert_eq!(ServingStatus::Serving as i32, 1);
    assert_eq!(ServingStatus::NotServing as i32, 2);
}

fn sample_task_config() -> drivers::TaskConfig {
    drivers::TaskConfig {
        id: "alloc-1/web/abcd1234".into(),
        name: "web".into(),
        // msgpack {"command": "/bin/true"}
        msgpack_driver_config: b"\x81\xa7command\xa9/bin/true".to_vec(),
        env: [("NOMAD_TASK_NAME".to_string(), "web".to_string())].into(),
        resources: Some(drivers::Resources {
            allocated_resources: Some(drivers::AllocatedTaskResources {
                cpu: Some(drivers::AllocatedCpuResources { cpu_shares: 100 }),
                memory: Some(drivers::AllocatedMemoryResources {
                    memory_mb: 64,
                    memory_max_mb: 128,
                }),
                networks: Vec::new(),
            }),
            linux_resources: Some(drivers::LinuxResources {
                memory_limit_bytes: 128 << 20,
                cpuset_cpus: "0,1".into(),
                percent_ticks: 0.25,
                ..Default::default()
            }),
            ports: vec![drivers::PortMapping {
                label: "http".into(),
                value: 25000,
                to: 8080,
                host_ip: "127.0.0.1".into(),
            }],
        }),
        mounts: vec![drivers::Mount {
            task_path: "/data".into(),
            host_path: "/srv/data".into(),
            readonly: true,
            ..Default::default()
        }],
        alloc_dir: "/var/nomad/alloc/alloc-1".into(),
        stdout_path: "/var/nomad/alloc/alloc-1/alloc/logs/.web.stdout.fifo".into(),
        alloc_id: "alloc-1".into(),
        dns: Some(drivers::DnsConfig {
            servers: vec!["1.1.1.1".into()],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn driver_messages_round_trip() {
    let handle = drivers::TaskHandle {
        version: 1,
        config: Some(sample_task_config()),
        state: drivers::TaskState::Running as i32,
        driver_state: vec![0x81, 0xa3, b'p', b'i', b'd', 0x2a],
    };
    let bytes = handle.encode_to_vec();
    assert_eq!(
        drivers::TaskHandle::decode(bytes.as_slice()).expect("decodes"),
        handle
    );

    let fingerprint = drivers::FingerprintResponse {
        attributes: [
            (
                "driver.conform".to_string(),
                structs::Attribute {
                    value: Some(structs::attribute::Value::BoolVal(true)),
                    unit: String::new(),
                },
            ),
            (
                "driver.conform.speed".to_string(),
                structs::Attribute {
                    value: Some(structs::attribute::Value::FloatVal(1.5)),
                    unit: "GHz".into(),
                },
            ),
        ]
        .into(),
        health: drivers::fingerprint_response::HealthState::Healthy as i32,
        health_description: "ready".into(),
        err: String::new(),
    };
    let bytes = fingerprint.encode_to_vec();
    assert_eq!(
        drivers::FingerprintResponse::decode(bytes.as_slice()).expect("decodes"),
        fingerprint
    );

    // A recursive schema: Object { command: Attr, args: Default { Attr, Literal } }.
    let schema = hclspec::Spec {
        block: Some(hclspec::spec::Block::Object(hclspec::Object {
            attributes: [
                ("command".to_string(), attr_spec("command", "string", true)),
                (
                    "args".to_string(),
                    hclspec::Spec {
                        block: Some(hclspec::spec::Block::Default(Box::new(hclspec::Default {
                            primary: Some(Box::new(attr_spec("args", "list(string)", false))),
                            default: Some(Box::new(hclspec::Spec {
                                block: Some(hclspec::spec::Block::Literal(hclspec::Literal {
                                    value: "[]".into(),
                                })),
                            })),
                        }))),
                    },
                ),
            ]
            .into(),
        })),
    };
    let response = drivers::TaskConfigSchemaResponse { spec: Some(schema) };
    let bytes = response.encode_to_vec();
    assert_eq!(
        drivers::TaskConfigSchemaResponse::decode(bytes.as_slice()).expect("decodes"),
        response
    );

    let stats = structs::StatObject {
        nested: [("disk".to_string(), structs::StatObject::default())].into(),
        attributes: [(
            "used".to_string(),
            structs::StatValue {
                int_numerator_val: Some(3),
                int_denominator_val: Some(4),
                unit: "GB".into(),
                ..Default::default()
            },
        )]
        .into(),
    };
    let bytes = stats.encode_to_vec();
    assert_eq!(
        structs::StatObject::decode(bytes.as_slice()).expect("decodes"),
        stats
    );
}

fn attr_spec(name: &str, r#type: &str, required: bool) -> hclspec::Spec {
    hclspec::Spec {
        block: Some(hclspec::spec::Block::Attr(hclspec::Attr {
            name: name.into(),
            r#type: r#type.into(),
            required,
        })),
    }
}

#[test]
fn decodes_hand_written_bytes() {
    // WaitTaskResponse { result (1) = ExitResult { exit_code (1) = 43, signal (2) = 9,
    // oom_killed (3) = true }, err (2) = "x" }
    let bytes = [
        0x0a, 0x06, 0x08, 0x2b, 0x10, 0x09, 0x18, 0x01, 0x12, 0x01, b'x',
    ];
    let response = drivers::WaitTaskResponse::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(
        response.result,
        Some(drivers::ExitResult {
            exit_code: 43,
            signal: 9,
            oom_killed: true,
        })
    );
    assert_eq!(response.err, "x");

    // SetConfigRequest { msgpack_config (1) = 0x80, plugin_api_version (3) = "v0.1.0" }
    let bytes = b"\x0a\x01\x80\x1a\x06v0.1.0";
    let request = base::SetConfigRequest::decode(bytes.as_slice()).expect("decodes");
    assert_eq!(request.msgpack_config, [0x80]);
    assert_eq!(request.nomad_config, None);
    assert_eq!(request.plugin_api_version, "v0.1.0");
}

#[test]
fn durations_and_timestamps_serialise_as_strings() {
    let stop = drivers::StopTaskRequest {
        task_id: "t".into(),
        timeout: Some(prost_types::Duration {
            seconds: 1,
            nanos: 500_000_000,
        }),
        signal: "SIGTERM".into(),
    };
    let json = serde_json::to_value(&stop).expect("serialises");
    assert_eq!(json["timeout"], "1.500s");
    assert_eq!(json["signal"], "SIGTERM");
    let json = serde_json::to_value(drivers::TaskStatsRequest::default()).expect("serialises");
    assert!(json["collection_interval"].is_null(), "{json}");

    let status = drivers::TaskStatus {
        id: "t".into(),
        state: drivers::TaskState::Exited as i32,
        started_at: Some(prost_types::Timestamp {
            seconds: 0,
            nanos: 0,
        }),
        // The Go zero time, which drivers send while a task has not completed.
        completed_at: Some(prost_types::Timestamp {
            seconds: -62_135_596_800,
            nanos: 0,
        }),
        ..Default::default()
    };
    let json = serde_json::to_value(&status).expect("serialises");
    assert_eq!(json["started_at"], "1970-01-01T00:00:00Z");
    assert_eq!(json["completed_at"], "0001-01-01T00:00:00Z");
    assert_eq!(json["state"], 2);

    let event = drivers::DriverTaskEvent {
        timestamp: Some(prost_types::Timestamp {
            seconds: 1,
            nanos: 5_000_000,
        }),
        ..Default::default()
    };
    let json = serde_json::to_value(&event).expect("serialises");
    assert_eq!(json["timestamp"], "1970-01-01T00:00:01.005Z");

    // Oneofs serialise as an externally tagged enum, bytes as numbers.
    let json = serde_json::to_value(attr_spec("command", "string", true)).expect("serialises");
    assert_eq!(json["block"]["Attr"]["name"], "command");
    let json = serde_json::to_value(goplugin::StdioData {
        channel: 1,
        data: vec![104, 105],
    })
    .expect("serialises");
    assert_eq!(json["data"], serde_json::json!([104, 105]));
}

// ---------------------------------------------------------------------------------------------
// gRPC paths
// ---------------------------------------------------------------------------------------------

#[test]
fn service_names_match_the_contract() {
    use tonic::server::NamedService;
    assert_eq!(
        <drivers::driver_server::DriverServer<()> as NamedService>::NAME,
        "hashicorp.nomad.plugins.drivers.proto.Driver"
    );
    assert_eq!(
        <base::base_plugin_server::BasePluginServer<()> as NamedService>::NAME,
        "hashicorp.nomad.plugins.base.proto.BasePlugin"
    );
    assert_eq!(
        <goplugin::grpc_broker_server::GrpcBrokerServer<()> as NamedService>::NAME,
        "plugin.GRPCBroker"
    );
    assert_eq!(
        <goplugin::grpc_controller_server::GrpcControllerServer<()> as NamedService>::NAME,
        "plugin.GRPCController"
    );
    assert_eq!(
        <goplugin::grpc_stdio_server::GrpcStdioServer<()> as NamedService>::NAME,
        "plugin.GRPCStdio"
    );
    assert_eq!(
        <health::health_server::HealthServer<()> as NamedService>::NAME,
        "grpc.health.v1.Health"
    );
}

/// A stand-in gRPC server that records the path of every request and answers each with a
/// trailers-only UNIMPLEMENTED status whose message is `recorded`.
#[derive(Clone, Default)]
struct Recorder {
    paths: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.paths.lock().expect("lock"))
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for Recorder {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        self.paths
            .lock()
            .expect("lock")
            .push(request.uri().path().to_owned());
        let response = http::Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", "12")
            .header("grpc-message", "recorded")
            .body(tonic::body::Body::empty())
            .expect("valid response");
        std::future::ready(Ok(response))
    }
}

/// Asserts that a call reached the [`Recorder`] (and so was not rejected client-side).
fn recorded<T>(result: Result<T, Status>) {
    match result {
        Ok(_) => panic!("the recorder never answers with success"),
        Err(status) => {
            assert_eq!(status.code(), Code::Unimplemented, "{status:?}");
            assert_eq!(status.message(), "recorded", "{status:?}");
        }
    }
}

#[tokio::test]
async fn generated_clients_use_the_contract_paths() {
    let recorder = Recorder::default();

    let mut driver = drivers::driver_client::DriverClient::new(recorder.clone());
    recorded(driver.init(drivers::InitRequest {}).await);
    recorded(
        driver
            .task_config_schema(drivers::TaskConfigSchemaRequest {})
            .await,
    );
    recorded(driver.capabilities(drivers::CapabilitiesRequest {}).await);
    recorded(driver.fingerprint(drivers::FingerprintRequest {}).await);
    recorded(
        driver
            .recover_task(drivers::RecoverTaskRequest::default())
            .await,
    );
    recorded(
        driver
            .start_task(drivers::StartTaskRequest::default())
            .await,
    );
    recorded(driver.wait_task(drivers::WaitTaskRequest::default()).await);
    recorded(driver.stop_task(drivers::StopTaskRequest::default()).await);
    recorded(
        driver
            .destroy_task(drivers::DestroyTaskRequest::default())
            .await,
    );
    recorded(
        driver
            .inspect_task(drivers::InspectTaskRequest::default())
            .await,
    );
    recorded(
        driver
            .task_stats(drivers::TaskStatsRequest::default())
            .await,
    );
    recorded(driver.task_events(drivers::TaskEventsRequest {}).await);
    recorded(driver.shutdown(drivers::ShutdownRequest {}).await);
    recorded(
        driver
            .signal_task(drivers::SignalTaskRequest::default())
            .await,
    );
    recorded(driver.exec_task(drivers::ExecTaskRequest::default()).await);
    recorded(
        driver
            .exec_task_streaming(tokio_stream::iter(
                Vec::<drivers::ExecTaskStreamingRequest>::new(),
            ))
            .await,
    );
    recorded(
        driver
            .create_network(drivers::CreateNetworkRequest::default())
            .await,
    );
    recorded(
        driver
            .destroy_network(drivers::DestroyNetworkRequest::default())
            .await,
    );
    let prefix = "/hashicorp.nomad.plugins.drivers.proto.Driver/";
    let expected: Vec<String> = [
        "Init",
        "TaskConfigSchema",
        "Capabilities",
        "Fingerprint",
        "RecoverTask",
        "StartTask",
        "WaitTask",
        "StopTask",
        "DestroyTask",
        "InspectTask",
        "TaskStats",
        "TaskEvents",
        "Shutdown",
        "SignalTask",
        "ExecTask",
        "ExecTaskStreaming",
        "CreateNetwork",
        "DestroyNetwork",
    ]
    .iter()
    .map(|rpc| format!("{prefix}{rpc}"))
    .collect();
    assert_eq!(recorder.take(), expected);

    let mut base = base::base_plugin_client::BasePluginClient::new(recorder.clone());
    recorded(base.plugin_info(base::PluginInfoRequest {}).await);
    recorded(base.config_schema(base::ConfigSchemaRequest {}).await);
    recorded(base.set_config(base::SetConfigRequest::default()).await);
    assert_eq!(
        recorder.take(),
        [
            "/hashicorp.nomad.plugins.base.proto.BasePlugin/PluginInfo",
            "/hashicorp.nomad.plugins.base.proto.BasePlugin/ConfigSchema",
            "/hashicorp.nomad.plugins.base.proto.BasePlugin/SetConfig",
        ]
    );

    let mut broker = goplugin::grpc_broker_client::GrpcBrokerClient::new(recorder.clone());
    recorded(
        broker
            .start_stream(tokio_stream::iter(Vec::<goplugin::ConnInfo>::new()))
            .await,
    );
    let mut controller =
        goplugin::grpc_controller_client::GrpcControllerClient::new(recorder.clone());
    recorded(controller.shutdown(goplugin::Empty {}).await);
    let mut stdio = goplugin::grpc_stdio_client::GrpcStdioClient::new(recorder.clone());
    recorded(stdio.stream_stdio(()).await);
    let mut health = health::health_client::HealthClient::new(recorder.clone());
    recorded(health.check(health::HealthCheckRequest::default()).await);
    recorded(health.watch(health::HealthCheckRequest::default()).await);
    assert_eq!(
        recorder.take(),
        [
            "/plugin.GRPCBroker/StartStream",
            "/plugin.GRPCController/Shutdown",
            "/plugin.GRPCStdio/StreamStdio",
            "/grpc.health.v1.Health/Check",
            "/grpc.health.v1.Health/Watch",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// One go-plugin style server over a Unix socket
// ---------------------------------------------------------------------------------------------

/// What the test servers' streaming RPCs return.
type Replies<T> = tokio_stream::Iter<std::vec::IntoIter<Result<T, Status>>>;

fn replies<T>(items: Vec<T>) -> Replies<T> {
    tokio_stream::iter(items.into_iter().map(Ok).collect::<Vec<_>>())
}

fn not_here<T>() -> Result<T, Status> {
    Err(Status::unimplemented("not implemented by the test driver"))
}

/// A driver that starts nothing: StartTask hands back a handle around the config it got,
/// WaitTask reports exit code 43.
struct TestDriver;

#[tonic::async_trait]
impl drivers::driver_server::Driver for TestDriver {
    async fn init(
        &self,
        _: Request<drivers::InitRequest>,
    ) -> Result<Response<drivers::InitResponse>, Status> {
        not_here()
    }

    async fn task_config_schema(
        &self,
        _: Request<drivers::TaskConfigSchemaRequest>,
    ) -> Result<Response<drivers::TaskConfigSchemaResponse>, Status> {
        Ok(Response::new(drivers::TaskConfigSchemaResponse {
            spec: Some(attr_spec("command", "string", true)),
        }))
    }

    async fn capabilities(
        &self,
        _: Request<drivers::CapabilitiesRequest>,
    ) -> Result<Response<drivers::CapabilitiesResponse>, Status> {
        not_here()
    }

    type FingerprintStream = Replies<drivers::FingerprintResponse>;

    async fn fingerprint(
        &self,
        _: Request<drivers::FingerprintRequest>,
    ) -> Result<Response<Self::FingerprintStream>, Status> {
        Ok(Response::new(replies(vec![
            drivers::FingerprintResponse {
                health: drivers::fingerprint_response::HealthState::Unhealthy as i32,
                health_description: "starting".into(),
                ..Default::default()
            },
            drivers::FingerprintResponse {
                health: drivers::fingerprint_response::HealthState::Healthy as i32,
                health_description: "ready".into(),
                ..Default::default()
            },
        ])))
    }

    async fn recover_task(
        &self,
        request: Request<drivers::RecoverTaskRequest>,
    ) -> Result<Response<drivers::RecoverTaskResponse>, Status> {
        let handle = request.into_inner().handle.unwrap_or_default();
        if handle.driver_state != b"pid=42" {
            return Err(Status::invalid_argument("handle did not survive the trip"));
        }
        Ok(Response::new(drivers::RecoverTaskResponse {}))
    }

    async fn start_task(
        &self,
        request: Request<drivers::StartTaskRequest>,
    ) -> Result<Response<drivers::StartTaskResponse>, Status> {
        let config = request.into_inner().task;
        Ok(Response::new(drivers::StartTaskResponse {
            handle: Some(drivers::TaskHandle {
                version: 1,
                config,
                state: drivers::TaskState::Running as i32,
                driver_state: b"pid=42".to_vec(),
            }),
            ..Default::default()
        }))
    }

    async fn wait_task(
        &self,
        _: Request<drivers::WaitTaskRequest>,
    ) -> Result<Response<drivers::WaitTaskResponse>, Status> {
        Ok(Response::new(drivers::WaitTaskResponse {
            result: Some(drivers::ExitResult {
                exit_code: 43,
                signal: 0,
                oom_killed: false,
            }),
            err: String::new(),
        }))
    }

    async fn stop_task(
        &self,
        _: Request<drivers::StopTaskRequest>,
    ) -> Result<Response<drivers::StopTaskResponse>, Status> {
        not_here()
    }

    async fn destroy_task(
        &self,
        _: Request<drivers::DestroyTaskRequest>,
    ) -> Result<Response<drivers::DestroyTaskResponse>, Status> {
        not_here()
    }

    async fn inspect_task(
        &self,
        _: Request<drivers::InspectTaskRequest>,
    ) -> Result<Response<drivers::InspectTaskResponse>, Status> {
        not_here()
    }

    type TaskStatsStream = Replies<drivers::TaskStatsResponse>;

    async fn task_stats(
        &self,
        _: Request<drivers::TaskStatsRequest>,
    ) -> Result<Response<Self::TaskStatsStream>, Status> {
        not_here()
    }

    type TaskEventsStream = Replies<drivers::DriverTaskEvent>;

    async fn task_events(
        &self,
        _: Request<drivers::TaskEventsRequest>,
    ) -> Result<Response<Self::TaskEventsStream>, Status> {
        not_here()
    }

    async fn shutdown(
        &self,
        _: Request<drivers::ShutdownRequest>,
    ) -> Result<Response<drivers::ShutdownResponse>, Status> {
        not_here()
    }

    async fn signal_task(
        &self,
        _: Request<drivers::SignalTaskRequest>,
    ) -> Result<Response<drivers::SignalTaskResponse>, Status> {
        not_here()
    }

    async fn exec_task(
        &self,
        _: Request<drivers::ExecTaskRequest>,
    ) -> Result<Response<drivers::ExecTaskResponse>, Status> {
        not_here()
    }

    type ExecTaskStreamingStream = Replies<drivers::ExecTaskStreamingResponse>;

    async fn exec_task_streaming(
        &self,
        _: Request<Streaming<drivers::ExecTaskStreamingRequest>>,
    ) -> Result<Response<Self::ExecTaskStreamingStream>, Status> {
        not_here()
    }

    async fn create_network(
        &self,
        _: Request<drivers::CreateNetworkRequest>,
    ) -> Result<Response<drivers::CreateNetworkResponse>, Status> {
        not_here()
    }

    async fn destroy_network(
        &self,
        _: Request<drivers::DestroyNetworkRequest>,
    ) -> Result<Response<drivers::DestroyNetworkResponse>, Status> {
        not_here()
    }
}

struct TestBase;

#[tonic::async_trait]
impl base::base_plugin_server::BasePlugin for TestBase {
    async fn plugin_info(
        &self,
        _: Request<base::PluginInfoRequest>,
    ) -> Result<Response<base::PluginInfoResponse>, Status> {
        Ok(Response::new(base::PluginInfoResponse {
            r#type: base::PluginType::Driver as i32,
            plugin_api_versions: vec!["v0.1.0".into()],
            plugin_version: "0.1.0".into(),
            name: "conform-test".into(),
        }))
    }

    async fn config_schema(
        &self,
        _: Request<base::ConfigSchemaRequest>,
    ) -> Result<Response<base::ConfigSchemaResponse>, Status> {
        Ok(Response::new(base::ConfigSchemaResponse { spec: None }))
    }

    async fn set_config(
        &self,
        request: Request<base::SetConfigRequest>,
    ) -> Result<Response<base::SetConfigResponse>, Status> {
        let request = request.into_inner();
        if request.plugin_api_version != "v0.1.0" {
            return Err(Status::invalid_argument("unexpected plugin API version"));
        }
        Ok(Response::new(base::SetConfigResponse {}))
    }
}

struct TestBroker;

#[tonic::async_trait]
impl goplugin::grpc_broker_server::GrpcBroker for TestBroker {
    type StartStreamStream = Replies<goplugin::ConnInfo>;

    async fn start_stream(
        &self,
        _: Request<Streaming<goplugin::ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        not_here()
    }
}

/// Stops the server when asked to shut down, as a go-plugin server does.
struct TestController {
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

#[tonic::async_trait]
impl goplugin::grpc_controller_server::GrpcController for TestController {
    async fn shutdown(
        &self,
        _: Request<goplugin::Empty>,
    ) -> Result<Response<goplugin::Empty>, Status> {
        if let Some(stop) = self.stop.lock().expect("lock").take() {
            let _ = stop.send(());
        }
        Ok(Response::new(goplugin::Empty {}))
    }
}

struct TestStdio;

#[tonic::async_trait]
impl goplugin::grpc_stdio_server::GrpcStdio for TestStdio {
    type StreamStdioStream = Replies<goplugin::StdioData>;

    async fn stream_stdio(
        &self,
        _: Request<()>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        Ok(Response::new(replies(vec![
            goplugin::StdioData {
                channel: goplugin::stdio_data::Channel::Stdout as i32,
                data: b"hello\n".to_vec(),
            },
            goplugin::StdioData {
                channel: goplugin::stdio_data::Channel::Stderr as i32,
                data: b"oops\n".to_vec(),
            },
        ])))
    }
}

/// Reports service "plugin" as SERVING, like go-plugin's stock health server.
struct TestHealth;

#[tonic::async_trait]
impl health::health_server::Health for TestHealth {
    async fn check(
        &self,
        request: Request<health::HealthCheckRequest>,
    ) -> Result<Response<health::HealthCheckResponse>, Status> {
        if request.into_inner().service != "plugin" {
            return Err(Status::not_found("unknown service"));
        }
        Ok(Response::new(health::HealthCheckResponse {
            status: health::health_check_response::ServingStatus::Serving as i32,
        }))
    }

    type WatchStream = Replies<health::HealthCheckResponse>;

    async fn watch(
        &self,
        _: Request<health::HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        not_here()
    }
}

/// Dials a Unix socket the way go-plugin's host does: the target is the literal "unused",
/// the connector goes to the announced address.
async fn dial(socket: PathBuf) -> Channel {
    Endpoint::from_static("http://unused")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let socket = socket.clone();
            async move {
                let stream = UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .expect("connects to the test server")
}

#[tokio::test]
async fn go_plugin_services_round_trip_over_a_unix_socket() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("plugin.sock");
    let listener = UnixListener::bind(&socket).expect("binds");
    let (stop_tx, stop_rx) = oneshot::channel();
    let server = tokio::spawn(
        Server::builder()
            .add_service(health::health_server::HealthServer::new(TestHealth))
            .add_service(goplugin::grpc_broker_server::GrpcBrokerServer::new(
                TestBroker,
            ))
            .add_service(goplugin::grpc_controller_server::GrpcControllerServer::new(
                TestController {
                    stop: Mutex::new(Some(stop_tx)),
                },
            ))
            .add_service(goplugin::grpc_stdio_server::GrpcStdioServer::new(TestStdio))
            .add_service(base::base_plugin_server::BasePluginServer::new(TestBase))
            .add_service(drivers::driver_server::DriverServer::new(TestDriver))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                let _ = stop_rx.await;
            }),
    );

    // All clients share one connection, as with go-plugin.
    let channel = dial(socket).await;

    let mut health = health::health_client::HealthClient::new(channel.clone());
    let reply = health
        .check(health::HealthCheckRequest {
            service: "plugin".into(),
        })
        .await
        .expect("health check")
        .into_inner();
    assert_eq!(
        reply.status(),
        health::health_check_response::ServingStatus::Serving
    );
    let unknown = health
        .check(health::HealthCheckRequest {
            service: "other".into(),
        })
        .await
        .expect_err("unknown service");
    assert_eq!(unknown.code(), Code::NotFound);

    let mut stdio = goplugin::grpc_stdio_client::GrpcStdioClient::new(channel.clone());
    let chunks: Vec<goplugin::StdioData> = stdio
        .stream_stdio(())
        .await
        .expect("stdio stream")
        .into_inner()
        .collect::<Result<_, _>>()
        .await
        .expect("stdio chunks");
    let seen: Vec<(goplugin::stdio_data::Channel, &[u8])> = chunks
        .iter()
        .map(|chunk| (chunk.channel(), chunk.data.as_slice()))
        .collect();
    assert_eq!(
        seen,
        [
            (goplugin::stdio_data::Channel::Stdout, &b"hello\n"[..]),
            (goplugin::stdio_data::Channel::Stderr, &b"oops\n"[..]),
        ]
    );

    let mut broker = goplugin::grpc_broker_client::GrpcBrokerClient::new(channel.clone());
    let refused = broker
        .start_stream(tokio_stream::iter(vec![goplugin::ConnInfo::default()]))
        .await
        .expect_err("the test broker refuses");
    assert_eq!(refused.code(), Code::Unimplemented);

    // Nomad's load order: PluginInfo, ConfigSchema, SetConfig, then Driver RPCs.
    let mut base = base::base_plugin_client::BasePluginClient::new(channel.clone());
    let info = base
        .plugin_info(base::PluginInfoRequest {})
        .await
        .expect("plugin info")
        .into_inner();
    assert_eq!(info.r#type(), base::PluginType::Driver);
    assert_eq!(info.plugin_api_versions, ["v0.1.0"]);
    assert_eq!(info.name, "conform-test");
    let schema = base
        .config_schema(base::ConfigSchemaRequest {})
        .await
        .expect("config schema")
        .into_inner();
    assert_eq!(schema.spec, None);
    base.set_config(base::SetConfigRequest {
        msgpack_config: vec![0x80],
        nomad_config: Some(base::NomadConfig {
            driver: Some(base::NomadDriverConfig {
                client_max_port: 14512,
                client_min_port: 14000,
                topology: None,
            }),
        }),
        plugin_api_version: "v0.1.0".into(),
    })
    .await
    .expect("set config");

    let mut driver = drivers::driver_client::DriverClient::new(channel.clone());
    let init = driver
        .init(drivers::InitRequest {})
        .await
        .expect_err("init is optional");
    assert_eq!(init.code(), Code::Unimplemented);
    let schema = driver
        .task_config_schema(drivers::TaskConfigSchemaRequest {})
        .await
        .expect("task config schema")
        .into_inner();
    assert_eq!(schema.spec, Some(attr_spec("command", "string", true)));

    let mut fingerprints = driver
        .fingerprint(drivers::FingerprintRequest {})
        .await
        .expect("fingerprint stream")
        .into_inner();
    let first = fingerprints
        .message()
        .await
        .expect("first fingerprint")
        .expect("not the end yet");
    assert_eq!(
        first.health(),
        drivers::fingerprint_response::HealthState::Unhealthy
    );
    let second = fingerprints
        .message()
        .await
        .expect("second fingerprint")
        .expect("not the end yet");
    assert_eq!(
        second.health(),
        drivers::fingerprint_response::HealthState::Healthy
    );

    let config = sample_task_config();
    let started = driver
        .start_task(drivers::StartTaskRequest {
            task: Some(config.clone()),
        })
        .await
        .expect("start task")
        .into_inner();
    let handle = started.handle.expect("a handle");
    assert_eq!(handle.config.as_ref(), Some(&config));
    assert_eq!(handle.state(), drivers::TaskState::Running);
    driver
        .recover_task(drivers::RecoverTaskRequest {
            task_id: String::new(),
            handle: Some(handle),
        })
        .await
        .expect("recover task");
    let waited = driver
        .wait_task(drivers::WaitTaskRequest {
            task_id: config.id.clone(),
        })
        .await
        .expect("wait task")
        .into_inner();
    assert_eq!(waited.result.map(|result| result.exit_code), Some(43));

    // Nomad's shutdown: Driver/Shutdown (UNIMPLEMENTED counts as success), then
    // GRPCController/Shutdown, after which the plugin must stop serving.
    let shutdown = driver
        .shutdown(drivers::ShutdownRequest {})
        .await
        .expect_err("driver shutdown is optional");
    assert_eq!(shutdown.code(), Code::Unimplemented);
    let mut controller = goplugin::grpc_controller_client::GrpcControllerClient::new(channel);
    controller
        .shutdown(goplugin::Empty {})
        .await
        .expect("controller shutdown");
    drop((
        health,
        stdio,
        broker,
        base,
        driver,
        controller,
        fingerprints,
    ));
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("server stops after GRPCController/Shutdown")
        .expect("server task")
        .expect("server ran cleanly");
}
