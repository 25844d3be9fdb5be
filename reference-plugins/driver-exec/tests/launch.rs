//! The go-plugin launch and the plugin-level RPCs: cookie, handshake, stderr format, SIGINT,
//! go-plugin's own services, BasePlugin, Init, Capabilities, Fingerprint, Shutdown.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use nomad_conform_proto::goplugin::{ConnInfo, Empty};
use nomad_conform_proto::grpc::health::v1::HealthCheckRequest;
use nomad_conform_proto::grpc::health::v1::health_check_response::ServingStatus;
use nomad_conform_proto::nomad::base::{
    ConfigSchemaRequest, NomadConfig, NomadDriverConfig, PluginInfoRequest, PluginType,
    SetConfigRequest,
};
use nomad_conform_proto::nomad::drivers::driver_capabilities::FsIsolation;
use nomad_conform_proto::nomad::drivers::fingerprint_response::HealthState;
use nomad_conform_proto::nomad::drivers::{
    CapabilitiesRequest, FingerprintRequest, InitRequest, ShutdownRequest, TaskConfigSchemaRequest,
};
use nomad_conform_proto::nomad::hclspec::Spec;
use nomad_conform_proto::nomad::hclspec::spec::Block;
use nomad_conform_proto::nomad::structs::attribute;
use rmpv::Value;
use support::*;

fn set_config(bytes: Vec<u8>, with_nomad_config: bool) -> SetConfigRequest {
    SetConfigRequest {
        msgpack_config: bytes,
        nomad_config: with_nomad_config.then_some(NomadConfig {
            driver: Some(NomadDriverConfig {
                client_max_port: 14999,
                client_min_port: 14000,
                topology: None,
            }),
        }),
        plugin_api_version: "v0.1.0".into(),
    }
}

fn block(spec: &Spec) -> &Block {
    spec.block.as_ref().expect("a spec block")
}

#[test]
fn without_the_cookie_it_refuses_with_status_1_and_no_handshake() {
    let scratch = Scratch::new();
    let mut options = LaunchOptions::new(&[]);
    options.cookie = false;
    let child = PluginProcess::spawn(&scratch, options);
    let output = child.wait_with_output().expect("exits");
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("NOMAD_PLUGIN_MAGIC_COOKIE"), "{stderr}");
}

#[tokio::test]
async fn handshake_announces_a_socket_in_the_socket_dir() {
    let setup = Setup::new(&[]).await;
    let fields = setup.plugin.fields();
    assert_eq!(fields.len(), 6, "{}", setup.plugin.handshake);
    assert_eq!(&fields[..3], ["1", "2", "unix"]);
    assert_eq!(&fields[4..], ["grpc", ""]);
    assert!(
        fields[3].starts_with(&setup.scratch.path().display().to_string()),
        "{} is not in PLUGIN_UNIX_SOCKET_DIR",
        fields[3]
    );
}

#[tokio::test]
async fn go_plugin_services_answer() {
    let mut setup = Setup::new(&[]).await;
    let clients = &mut setup.clients;
    for service in ["plugin", ""] {
        let status = clients
            .health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("Health/Check")
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "service {service:?}");
    }
    let (_keep, outgoing) = tokio::sync::mpsc::channel::<ConnInfo>(1);
    clients
        .broker
        .start_stream(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect("GRPCBroker/StartStream opens");
    clients
        .stdio
        .stream_stdio(())
        .await
        .expect("GRPCStdio/StreamStdio opens");
}

#[tokio::test]
async fn stderr_is_hclog_json_with_go_timestamps() {
    let mut setup = Setup::new(&[]).await;
    setup
        .clients
        .base
        .plugin_info(PluginInfoRequest {})
        .await
        .expect("PluginInfo");
    let deadline = Instant::now() + Duration::from_secs(2);
    while setup.plugin.stderr_lines().len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let lines = setup.plugin.stderr_lines();
    assert!(lines.len() >= 2, "{lines:?}");
    for line in lines {
        let json: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        let level = json["@level"].as_str().expect("@level");
        assert!(["trace", "debug", "info", "warn", "error"].contains(&level));
        assert!(json["@message"].is_string());
        let timestamp = json["@timestamp"].as_str().expect("@timestamp");
        // 2006-01-02T15:04:05.000000Z07:00, in UTC: six fractional digits, then Z.
        assert_eq!(timestamp.len(), 27, "{timestamp}");
        assert!(
            chrono::NaiveDateTime::parse_from_str(timestamp, "%Y-%m-%dT%H:%M:%S%.6fZ").is_ok(),
            "{timestamp}"
        );
        assert_eq!(&timestamp[19..20], ".");
        assert!(timestamp.ends_with('Z'));
    }
}

#[tokio::test]
async fn sigint_is_ignored() {
    let mut setup = Setup::new(&[]).await;
    kill(Pid::from_raw(setup.plugin.pid()), Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(setup.plugin.wait_exit(0), None, "SIGINT ended the plugin");
    setup
        .clients
        .base
        .plugin_info(PluginInfoRequest {})
        .await
        .expect("PluginInfo after SIGINT");
}

#[tokio::test]
async fn base_plugin_identifies_a_driver_with_its_config_schema() {
    let mut setup = Setup::new(&[]).await;
    let info = setup
        .clients
        .base
        .plugin_info(PluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.r#type, PluginType::Driver as i32);
    assert_eq!(info.name, "exec-reference");
    assert_eq!(info.plugin_version, "0.1.0");
    assert_eq!(info.plugin_api_versions, ["v0.1.0"]);

    let spec = setup
        .clients
        .base
        .config_schema(ConfigSchemaRequest {})
        .await
        .unwrap()
        .into_inner()
        .spec
        .expect("a spec");
    let Block::Object(object) = block(&spec) else {
        panic!("the root is not an Object: {spec:?}")
    };
    let mut names: Vec<&String> = object.attributes.keys().collect();
    names.sort();
    assert_eq!(names, ["enabled", "extra_attributes", "fingerprint_period"]);
    let Block::Attr(extra) = block(&object.attributes["extra_attributes"]) else {
        panic!("extra_attributes is not a plain Attr (it has no default)")
    };
    assert_eq!(
        (extra.r#type.as_str(), extra.required),
        ("map(string)", false)
    );
    let Block::Default(period) = block(&object.attributes["fingerprint_period"]) else {
        panic!("fingerprint_period has no default")
    };
    let Block::Attr(attr) = block(period.primary.as_ref().unwrap()) else {
        panic!("fingerprint_period is not an Attr")
    };
    assert_eq!((attr.r#type.as_str(), attr.required), ("string", false));
    let Block::Literal(literal) = block(period.default.as_ref().unwrap()) else {
        panic!("fingerprint_period's default is not a Literal")
    };
    assert_eq!(literal.value, "\"30s\"");
}

#[tokio::test]
async fn set_config_accepts_cty_and_plain_msgpack_and_refuses_garbage() {
    let mut setup = Setup::new(&[]).await;
    let base = &mut setup.clients.base;
    // Nomad's validation launch: go-cty map with every attribute, no nomad_config.
    let cty = cty_config(&[
        ("enabled", Value::Nil),
        ("extra_attributes", Value::Nil),
        ("fingerprint_period", Value::Nil),
    ]);
    base.set_config(set_config(cty, false))
        .await
        .expect("cty config without nomad_config");
    let plain = msgpack_map(&[("fingerprint_period", "10s".into())]);
    base.set_config(set_config(plain, true))
        .await
        .expect("plain config with nomad_config");
    base.set_config(set_config(Vec::new(), true))
        .await
        .expect("no config at all");
    for bad in [
        msgpack_map(&[("fingerprint_period", "soon".into())]),
        msgpack_map(&[("enabled", 1.into())]),
        vec![0xc1],
    ] {
        base.set_config(set_config(bad.clone(), true))
            .await
            .expect_err("a bad config");
    }
}

#[tokio::test]
async fn init_schema_and_capabilities() {
    let mut setup = Setup::new(&[]).await;
    let driver = setup.driver();
    driver.init(InitRequest {}).await.expect("Init");
    let spec = driver
        .task_config_schema(TaskConfigSchemaRequest {})
        .await
        .unwrap()
        .into_inner()
        .spec
        .expect("a spec");
    let Block::Object(object) = block(&spec) else {
        panic!("the root is not an Object")
    };
    let attr = |name: &str| match block(&object.attributes[name]) {
        Block::Attr(attr) => (attr.r#type.clone(), attr.required),
        other => panic!("{name} is {other:?}"),
    };
    assert_eq!(attr("command"), ("string".to_string(), true));
    assert_eq!(attr("args"), ("list(string)".to_string(), false));

    let capabilities = driver
        .capabilities(CapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .expect("capabilities");
    assert!(capabilities.send_signals);
    assert!(capabilities.exec);
    assert_eq!(capabilities.fs_isolation, FsIsolation::None as i32);
    assert!(!capabilities.must_create_network);
    driver.shutdown(ShutdownRequest {}).await.expect("Shutdown");
}

#[tokio::test]
async fn fingerprint_comes_at_once_then_every_period() {
    let mut setup = Setup::new(&[]).await;
    let plain = msgpack_map(&[("fingerprint_period", "300ms".into())]);
    setup
        .clients
        .base
        .set_config(set_config(plain, true))
        .await
        .unwrap();
    let started = Instant::now();
    let mut stream = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .expect("Fingerprint")
        .into_inner();
    let first = within(2, "the first fingerprint", stream.message())
        .await
        .unwrap()
        .expect("a message");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the first message took {:?}",
        started.elapsed()
    );
    assert_eq!(first.health, HealthState::Healthy as i32);
    assert_eq!(first.health_description, "healthy");
    assert_eq!(first.err, "");
    assert_eq!(
        first.attributes["driver.exec-reference"].value,
        Some(attribute::Value::BoolVal(true))
    );
    assert!(matches!(
        first.attributes["driver.exec-reference.version"].value,
        Some(attribute::Value::StringVal(_))
    ));
    for n in 2..=3 {
        within(2, "a later fingerprint", stream.message())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended before message {n}"));
    }
    assert!(started.elapsed() >= Duration::from_millis(550));
}

#[tokio::test]
async fn a_disabled_driver_fingerprints_as_undetected() {
    let mut setup = Setup::new(&[]).await;
    let config = msgpack_map(&[("enabled", false.into())]);
    setup
        .clients
        .base
        .set_config(set_config(config, true))
        .await
        .unwrap();
    let mut stream = setup
        .driver()
        .fingerprint(FingerprintRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = within(2, "the first fingerprint", stream.message())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.health, HealthState::Undetected as i32);
}

#[tokio::test]
async fn the_plugin_serves_on_after_the_client_disconnects() {
    let scratch = Scratch::new();
    let mut plugin = PluginProcess::launch(&scratch, &[]);
    {
        let mut clients = plugin.connect().await;
        clients
            .base
            .plugin_info(PluginInfoRequest {})
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(plugin.wait_exit(0), None, "the plugin exited");
    let mut clients = plugin.connect().await;
    clients
        .base
        .plugin_info(PluginInfoRequest {})
        .await
        .expect("PluginInfo on a new connection");
}

#[tokio::test]
async fn controller_shutdown_stops_the_plugin() {
    let mut setup = Setup::new(&[]).await;
    let socket = setup.plugin.address();
    setup
        .clients
        .controller
        .shutdown(Empty {})
        .await
        .expect("GRPCController/Shutdown");
    let status = setup.plugin.wait_exit(5).expect("the plugin exits");
    assert_eq!(status.code(), Some(0));
    assert!(
        !std::path::Path::new(&socket).exists(),
        "the socket is left"
    );
}
