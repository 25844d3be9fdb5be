//! A tiny go-plugin driver server, run by this test binary re-executed with
//! `NOMAD_CONFORM_FAKE_DRIVER=<mode>` (see `main.rs`). It checks the magic cookie as a Go
//! plugin does, logs to stderr, prints its handshake on fd 3 (the launcher's stdout: libtest's
//! own chatter on fd 1 goes to /dev/null), and serves Health, GRPCController, BasePlugin and
//! Driver on a unix socket; the broker and stdio services are absent (UNIMPLEMENTED), as in a
//! plugin built with go-plugin before 1.3.
//!
//! Modes: `serve`; `stubborn` (GRPCController/Shutdown answers but the process stays);
//! `silent` (never prints); `garbage` (prints a line that is no handshake); `exit` (exits 1
//! at once).

use std::io::Write as _;
use std::os::fd::FromRawFd as _;
use std::pin::Pin;
use std::time::Duration;

use nomad_conform::plugins::driver::{base, drivers, goplugin, health};
use prost::Message as _;
use tokio::net::UnixListener;
use tokio_stream::Stream;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status, Streaming};

pub const MODE_VAR: &str = "NOMAD_CONFORM_FAKE_DRIVER";
pub const DIR_VAR: &str = "NOMAD_CONFORM_FAKE_DIR";
const COOKIE: (&str, &str) = (
    "NOMAD_PLUGIN_MAGIC_COOKIE",
    "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255",
);

type Replies<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn unimplemented<T>() -> Result<T, Status> {
    Err(Status::unimplemented("not in the fake driver"))
}

/// Run the fake plugin for `mode`; never returns.
pub fn run(mode: &str) -> ! {
    if std::env::var(COOKIE.0).ok().as_deref() != Some(COOKIE.1) {
        eprintln!("This binary is a plugin. These are not meant to be executed directly.");
        std::process::exit(1);
    }
    // A child in the plugin's process group, which outlives the plugin unless the group dies.
    let _ = std::process::Command::new("sleep")
        .arg("30")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    eprintln!(
        r#"{{"@level":"debug","@message":"fake starting","@timestamp":"2024-05-06T07:08:09.123456Z","@module":"fake","versions":"{}","ports":"{}-{}"}}"#,
        std::env::var("PLUGIN_PROTOCOL_VERSIONS").unwrap_or_default(),
        std::env::var("PLUGIN_MIN_PORT").unwrap_or_default(),
        std::env::var("PLUGIN_MAX_PORT").unwrap_or_default(),
    );
    eprintln!("[INFO] a plain line");
    // SAFETY: fd 3 is the launcher's stdout pipe, opened by the shell that exec'd us.
    let mut stdout = unsafe { std::fs::File::from_raw_fd(3) };
    match mode {
        "exit" => std::process::exit(1),
        "silent" => loop {
            std::thread::sleep(Duration::from_secs(60));
        },
        "garbage" => {
            let _ = writeln!(stdout, "hello from a plugin");
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        _ => {}
    }
    let dir = std::env::var(DIR_VAR).expect("the test sets the socket directory");
    let socket = std::path::Path::new(&dir).join("plugin.sock");
    let exit_on_shutdown = mode == "serve";
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        let listener = UnixListener::bind(&socket).expect("binds");
        let _ = writeln!(stdout, "1|2|unix|{}|grpc|", socket.display());
        std::mem::forget(stdout);
        let _ = tonic::transport::Server::builder()
            .add_service(health::health_server::HealthServer::new(Fake))
            .add_service(goplugin::grpc_controller_server::GrpcControllerServer::new(
                Controller { exit_on_shutdown },
            ))
            .add_service(base::base_plugin_server::BasePluginServer::new(Fake))
            .add_service(drivers::driver_server::DriverServer::new(Fake))
            .serve_with_incoming(UnixListenerStream::new(listener))
            .await;
    });
    std::process::exit(0)
}

struct Fake;

struct Controller {
    exit_on_shutdown: bool,
}

#[tonic::async_trait]
impl goplugin::grpc_controller_server::GrpcController for Controller {
    async fn shutdown(
        &self,
        _: Request<goplugin::Empty>,
    ) -> Result<Response<goplugin::Empty>, Status> {
        if self.exit_on_shutdown {
            tokio::spawn(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                std::process::exit(0);
            });
        }
        Ok(Response::new(goplugin::Empty {}))
    }
}

#[tonic::async_trait]
impl health::health_server::Health for Fake {
    async fn check(
        &self,
        _: Request<health::HealthCheckRequest>,
    ) -> Result<Response<health::HealthCheckResponse>, Status> {
        Ok(Response::new(health::HealthCheckResponse {
            status: health::health_check_response::ServingStatus::Serving as i32,
        }))
    }

    type WatchStream = Replies<health::HealthCheckResponse>;

    async fn watch(
        &self,
        _: Request<health::HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        unimplemented()
    }
}

#[tonic::async_trait]
impl base::base_plugin_server::BasePlugin for Fake {
    async fn plugin_info(
        &self,
        _: Request<base::PluginInfoRequest>,
    ) -> Result<Response<base::PluginInfoResponse>, Status> {
        Ok(Response::new(base::PluginInfoResponse {
            r#type: base::PluginType::Driver as i32,
            plugin_api_versions: vec!["0.1.0".into()],
            plugin_version: "0.2.0".into(),
            name: "fake".into(),
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
        req: Request<base::SetConfigRequest>,
    ) -> Result<Response<base::SetConfigResponse>, Status> {
        match req.into_inner().plugin_api_version.as_str() {
            "0.1.0" => Ok(Response::new(base::SetConfigResponse {})),
            other => Err(Status::unknown(format!("SetConfig failed: api {other:?}"))),
        }
    }
}

/// `google.rpc.Status`, to carry a RecoverableError detail.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<prost_types::Any>,
}

#[tonic::async_trait]
impl drivers::driver_server::Driver for Fake {
    async fn init(
        &self,
        _: Request<drivers::InitRequest>,
    ) -> Result<Response<drivers::InitResponse>, Status> {
        unimplemented()
    }

    async fn task_config_schema(
        &self,
        _: Request<drivers::TaskConfigSchemaRequest>,
    ) -> Result<Response<drivers::TaskConfigSchemaResponse>, Status> {
        unimplemented()
    }

    async fn capabilities(
        &self,
        _: Request<drivers::CapabilitiesRequest>,
    ) -> Result<Response<drivers::CapabilitiesResponse>, Status> {
        unimplemented()
    }

    type FingerprintStream = Replies<drivers::FingerprintResponse>;

    /// UNHEALTHY at once, HEALTHY 100 ms later, then the stream stays open.
    async fn fingerprint(
        &self,
        _: Request<drivers::FingerprintRequest>,
    ) -> Result<Response<Self::FingerprintStream>, Status> {
        use drivers::fingerprint_response::HealthState;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            for (health, pause) in [(HealthState::Unhealthy, 0), (HealthState::Healthy, 100)] {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                let msg = drivers::FingerprintResponse {
                    health: health as i32,
                    ..Default::default()
                };
                if tx.send(Ok(msg)).await.is_err() {
                    return;
                }
            }
            tx.closed().await;
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn recover_task(
        &self,
        _: Request<drivers::RecoverTaskRequest>,
    ) -> Result<Response<drivers::RecoverTaskResponse>, Status> {
        unimplemented()
    }

    /// A task whose id contains `fail` fails recoverably, as a Go server reports it.
    async fn start_task(
        &self,
        req: Request<drivers::StartTaskRequest>,
    ) -> Result<Response<drivers::StartTaskResponse>, Status> {
        let task = req.into_inner().task.unwrap_or_default();
        if task.id.contains("fail") {
            let detail = prost_types::Any {
                type_url:
                    "type.googleapis.com/hashicorp.nomad.plugins.shared.structs.RecoverableError"
                        .into(),
                value: vec![0x08, 0x01],
            };
            let status = RpcStatus {
                code: 9,
                message: "try again".into(),
                details: vec![detail],
            };
            return Err(Status::with_details(
                tonic::Code::FailedPrecondition,
                "try again",
                status.encode_to_vec().into(),
            ));
        }
        Ok(Response::new(drivers::StartTaskResponse {
            handle: Some(drivers::TaskHandle {
                version: 1,
                config: Some(task),
                state: drivers::TaskState::Running as i32,
                driver_state: vec![0x81, 0xa3, b'p', b'i', b'd', 0x2a],
            }),
            ..Default::default()
        }))
    }

    async fn wait_task(
        &self,
        _: Request<drivers::WaitTaskRequest>,
    ) -> Result<Response<drivers::WaitTaskResponse>, Status> {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(Response::new(drivers::WaitTaskResponse {
            result: Some(drivers::ExitResult {
                exit_code: 3,
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
        unimplemented()
    }

    async fn destroy_task(
        &self,
        _: Request<drivers::DestroyTaskRequest>,
    ) -> Result<Response<drivers::DestroyTaskResponse>, Status> {
        unimplemented()
    }

    async fn inspect_task(
        &self,
        _: Request<drivers::InspectTaskRequest>,
    ) -> Result<Response<drivers::InspectTaskResponse>, Status> {
        unimplemented()
    }

    type TaskStatsStream = Replies<drivers::TaskStatsResponse>;

    async fn task_stats(
        &self,
        _: Request<drivers::TaskStatsRequest>,
    ) -> Result<Response<Self::TaskStatsStream>, Status> {
        unimplemented()
    }

    type TaskEventsStream = Replies<drivers::DriverTaskEvent>;

    async fn task_events(
        &self,
        _: Request<drivers::TaskEventsRequest>,
    ) -> Result<Response<Self::TaskEventsStream>, Status> {
        unimplemented()
    }

    async fn shutdown(
        &self,
        _: Request<drivers::ShutdownRequest>,
    ) -> Result<Response<drivers::ShutdownResponse>, Status> {
        Ok(Response::new(drivers::ShutdownResponse {}))
    }

    async fn signal_task(
        &self,
        _: Request<drivers::SignalTaskRequest>,
    ) -> Result<Response<drivers::SignalTaskResponse>, Status> {
        unimplemented()
    }

    async fn exec_task(
        &self,
        _: Request<drivers::ExecTaskRequest>,
    ) -> Result<Response<drivers::ExecTaskResponse>, Status> {
        unimplemented()
    }

    type ExecTaskStreamingStream = Replies<drivers::ExecTaskStreamingResponse>;

    async fn exec_task_streaming(
        &self,
        _: Request<Streaming<drivers::ExecTaskStreamingRequest>>,
    ) -> Result<Response<Self::ExecTaskStreamingStream>, Status> {
        unimplemented()
    }

    async fn create_network(
        &self,
        _: Request<drivers::CreateNetworkRequest>,
    ) -> Result<Response<drivers::CreateNetworkResponse>, Status> {
        unimplemented()
    }

    async fn destroy_network(
        &self,
        _: Request<drivers::DestroyNetworkRequest>,
    ) -> Result<Response<drivers::DestroyNetworkResponse>, Status> {
        unimplemented()
    }
}
