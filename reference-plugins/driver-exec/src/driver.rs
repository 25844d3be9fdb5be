//! The Driver service: all 18 RPCs, each answered here or by the module that implements it.
//!
//! | RPC | where |
//! |---|---|
//! | Init, Shutdown, TaskConfigSchema, Capabilities | here |
//! | Fingerprint | `fingerprint.rs` |
//! | StartTask, RecoverTask | `start.rs` |
//! | WaitTask, InspectTask | here |
//! | StopTask, DestroyTask, SignalTask | `stop.rs` |
//! | TaskStats | `stats.rs` |
//! | TaskEvents | `events.rs` |
//! | ExecTask | `exec.rs` |
//! | ExecTaskStreaming | `exec_stream.rs` |
//! | CreateNetwork, DestroyNetwork | here: UNIMPLEMENTED (never called: must_create_network is false) |

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nomad_conform_proto::nomad::drivers::driver_server::Driver;
use nomad_conform_proto::nomad::drivers::network_isolation_spec::NetworkIsolationMode;
use nomad_conform_proto::nomad::drivers::*;
use tonic::{Request, Response, Status, Streaming};

use crate::events::EventStream;
use crate::exec_stream::ExecStream;
use crate::faults::Fault;
use crate::fingerprint::FingerprintStream;
use crate::plugin::Plugin;
use crate::stats::StatsStream;
use crate::variants::Variant;
use crate::{
    exec, exec_stream, fingerprint, isolation, rpc, start, stats, stop, taskconfig, users,
};

/// Go's zero `time.Time` as a protobuf timestamp (0001-01-01T00:00:00Z): what Go drivers send
/// as `completed_at` while a task runs. Nomad cannot convert a *missing* timestamp.
pub const GO_ZERO_TIME: prost_types::Timestamp = prost_types::Timestamp {
    seconds: -62_135_596_800,
    nanos: 0,
};

/// How often a WaitTask looks for the exit of a running task with the wait-poll variant.
const WAIT_POLL: Duration = Duration::from_secs(2);

pub struct DriverService {
    plugin: Arc<Plugin>,
}

impl DriverService {
    pub fn new(plugin: Arc<Plugin>) -> Self {
        DriverService { plugin }
    }

    fn capabilities(&self) -> Result<CapabilitiesResponse, Status> {
        if self.plugin.faults.has(Fault::CapabilitiesError) {
            return Err(rpc::failed(
                "failed to get capabilities (capabilities-error fault)",
            ));
        }
        Ok(CapabilitiesResponse {
            capabilities: Some(DriverCapabilities {
                send_signals: stop::sends_signals(&self.plugin),
                exec: !self.plugin.variants.has(Variant::NoExec),
                fs_isolation: isolation::fs_isolation(&self.plugin) as i32,
                // Tasks share the host's network.
                network_isolation_modes: vec![NetworkIsolationMode::Host as i32],
                must_create_network: false,
                dynamic_workload_users: users::asks_for_users(&self.plugin.variants),
                ..Default::default()
            }),
        })
    }

    async fn wait_task(&self, request: WaitTaskRequest) -> Result<WaitTaskResponse, Status> {
        let faults = &self.plugin.faults;
        let task = match self.plugin.tasks.get(&request.task_id) {
            Some(task) => task,
            None if faults.has(Fault::UnknownTaskHangs) => std::future::pending().await,
            None => return Err(rpc::task_not_found(&self.plugin.variants)),
        };
        let exited = task.exit();
        let running = exited.is_none();
        match exited {
            Some(_) if faults.has(Fault::WaitOnce) => std::future::pending().await,
            Some(_) => {}
            None if faults.has(Fault::WaitSingleWaiter) && task.count_running_waiter() > 0 => {
                std::future::pending().await
            }
            None => {}
        }
        // wait-poll: a WaitTask made while the task runs looks for the exit every few seconds
        // instead of being told of it.
        let exit = if running && self.plugin.variants.has(Variant::WaitPoll) {
            task.poll_exit(WAIT_POLL).await
        } else {
            task.wait().await
        };
        let mut result = exit.result;
        if faults.has(Fault::WaitWrongCode) {
            result.exit_code = 0;
        }
        Ok(WaitTaskResponse {
            result: Some(result),
            err: exit.error.unwrap_or_default(),
        })
    }

    fn inspect_task(&self, request: InspectTaskRequest) -> Result<InspectTaskResponse, Status> {
        let task = self.plugin.task(&request.task_id)?;
        let exit = task.exit();
        let completed_at = if self.plugin.faults.has(Fault::InspectNoCompletedAt) {
            None
        } else {
            Some(match &exit {
                Some(exit) => prost_types::Timestamp::from(exit.completed_at),
                None => GO_ZERO_TIME,
            })
        };
        let state = if exit.is_some() {
            TaskState::Exited
        } else {
            TaskState::Running
        };
        let processes = &task.processes;
        Ok(InspectTaskResponse {
            task: Some(TaskStatus {
                id: task.config.id.clone(),
                name: task.config.name.clone(),
                state: state as i32,
                started_at: Some(prost_types::Timestamp::from(task.started_at)),
                completed_at,
                result: exit.map(|e| e.result),
            }),
            driver: Some(TaskDriverStatus {
                attributes: HashMap::from([
                    ("pid".to_string(), processes.task_pid.to_string()),
                    (
                        "supervisor_pid".to_string(),
                        processes.supervisor_pid.to_string(),
                    ),
                ]),
            }),
            network_override: None,
        })
    }
}

#[tonic::async_trait]
impl Driver for DriverService {
    async fn init(&self, _: Request<InitRequest>) -> Result<Response<InitResponse>, Status> {
        let earlier_calls = self.plugin.count_init();
        let result = if self.plugin.variants.has(Variant::NoInitShutdown) {
            Err(Status::unimplemented(
                "Init is not implemented (no-init-shutdown variant)",
            ))
        } else if self.plugin.faults.has(Fault::InitFails) {
            Err(rpc::failed(
                "failed to initialise the driver (init-fails fault)",
            ))
        } else if earlier_calls > 0 && self.plugin.faults.has(Fault::SecondInitFails) {
            // Nomad calls Init again when it reattaches to this process after a restart.
            Err(rpc::failed(
                "failed to initialise the driver: already initialised (second-init-fails fault)",
            ))
        } else {
            Ok(InitResponse {})
        };
        rpc::finish("Init", "", result)
    }

    async fn task_config_schema(
        &self,
        _: Request<TaskConfigSchemaRequest>,
    ) -> Result<Response<TaskConfigSchemaResponse>, Status> {
        let spec = taskconfig::schema(&self.plugin.faults);
        rpc::finish(
            "TaskConfigSchema",
            "",
            Ok(TaskConfigSchemaResponse { spec: Some(spec) }),
        )
    }

    async fn capabilities(
        &self,
        _: Request<CapabilitiesRequest>,
    ) -> Result<Response<CapabilitiesResponse>, Status> {
        rpc::finish("Capabilities", "", self.capabilities())
    }

    type FingerprintStream = FingerprintStream;

    async fn fingerprint(
        &self,
        _: Request<FingerprintRequest>,
    ) -> Result<Response<Self::FingerprintStream>, Status> {
        rpc::finish(
            "Fingerprint",
            "",
            Ok(fingerprint::stream(Arc::clone(&self.plugin))),
        )
    }

    async fn recover_task(
        &self,
        request: Request<RecoverTaskRequest>,
    ) -> Result<Response<RecoverTaskResponse>, Status> {
        let request = request.into_inner();
        let id = request
            .handle
            .as_ref()
            .and_then(|h| h.config.as_ref())
            .map(|c| c.id.clone())
            .unwrap_or_default();
        let result = start::recover_task(&self.plugin, request).map(|()| RecoverTaskResponse {});
        rpc::finish("RecoverTask", &id, result)
    }

    async fn start_task(
        &self,
        request: Request<StartTaskRequest>,
    ) -> Result<Response<StartTaskResponse>, Status> {
        let request = request.into_inner();
        let id = request
            .task
            .as_ref()
            .map(|t| t.id.clone())
            .unwrap_or_default();
        rpc::finish(
            "StartTask",
            &id,
            start::start_task(&self.plugin, request).await,
        )
    }

    async fn wait_task(
        &self,
        request: Request<WaitTaskRequest>,
    ) -> Result<Response<WaitTaskResponse>, Status> {
        let request = request.into_inner();
        let id = request.task_id.clone();
        rpc::finish("WaitTask", &id, self.wait_task(request).await)
    }

    async fn stop_task(
        &self,
        request: Request<StopTaskRequest>,
    ) -> Result<Response<StopTaskResponse>, Status> {
        let request = request.into_inner();
        let id = request.task_id.clone();
        let result = stop::stop_task(&self.plugin, request).await;
        rpc::finish("StopTask", &id, result.map(|()| StopTaskResponse {}))
    }

    async fn destroy_task(
        &self,
        request: Request<DestroyTaskRequest>,
    ) -> Result<Response<DestroyTaskResponse>, Status> {
        let request = request.into_inner();
        let id = request.task_id.clone();
        let result = stop::destroy_task(&self.plugin, request).await;
        rpc::finish("DestroyTask", &id, result.map(|()| DestroyTaskResponse {}))
    }

    async fn inspect_task(
        &self,
        request: Request<InspectTaskRequest>,
    ) -> Result<Response<InspectTaskResponse>, Status> {
        let request = request.into_inner();
        let id = request.task_id.clone();
        rpc::finish("InspectTask", &id, self.inspect_task(request))
    }

    type TaskStatsStream = StatsStream;

    async fn task_stats(
        &self,
        request: Request<TaskStatsRequest>,
    ) -> Result<Response<Self::TaskStatsStream>, Status> {
        let request = request.into_inner();
        let id = request.task_id.clone();
        rpc::finish("TaskStats", &id, stats::stream(&self.plugin, request))
    }

    type TaskEventsStream = EventStream;

    async fn task_events(
        &self,
        _: Request<TaskEventsRequest>,
    ) -> Result<Response<Self::TaskEventsStream>, Status> {
        rpc::finish("TaskEvents", "", Ok(self.plugin.events.subscribe()))
    }

    async fn shutdown(
        &self,
        _: Request<ShutdownRequest>,
    ) -> Result<Response<ShutdownResponse>, Status> {
        // Nothing to release: tasks outlive the plugin on purpose, and streams end when the
        // process does.
        let result = if self.plugin.variants.has(Variant::NoInitShutdown) {
            Err(Status::unimplemented(
                "Shutdown is not implemented (no-init-shutdown variant)",
            ))
        } else {
            Ok(ShutdownResponse {})
        };
        rpc::finish("Shutdown", "", result)
    }

    async fn signal_task(
        &self,
        request: Request<SignalTaskRequest>,
    ) -> Result<Response<SignalTaskResponse>, Status> {
        let request = request.into_inner();
        let id = request.task_id.clone();
        let result = stop::signal_task(&self.plugin, request);
        rpc::finish("SignalTask", &id, result.map(|()| SignalTaskResponse {}))
    }

    async fn exec_task(
        &self,
        request: Request<ExecTaskRequest>,
    ) -> Result<Response<ExecTaskResponse>, Status> {
        let request = request.into_inner();
        let id = request.task_id.clone();
        rpc::finish(
            "ExecTask",
            &id,
            exec::exec_task(&self.plugin, request).await,
        )
    }

    type ExecTaskStreamingStream = ExecStream;

    async fn exec_task_streaming(
        &self,
        request: Request<Streaming<ExecTaskStreamingRequest>>,
    ) -> Result<Response<Self::ExecTaskStreamingStream>, Status> {
        let result = exec_stream::start(Arc::clone(&self.plugin), request.into_inner()).await;
        rpc::finish("ExecTaskStreaming", "", result)
    }

    async fn create_network(
        &self,
        _: Request<CreateNetworkRequest>,
    ) -> Result<Response<CreateNetworkResponse>, Status> {
        Err(Status::unimplemented(
            "CreateNetwork: this driver does not create networks (must_create_network is false)",
        ))
    }

    async fn destroy_network(
        &self,
        _: Request<DestroyNetworkRequest>,
    ) -> Result<Response<DestroyNetworkResponse>, Status> {
        Err(Status::unimplemented(
            "DestroyNetwork: this driver does not create networks (must_create_network is false)",
        ))
    }
}
