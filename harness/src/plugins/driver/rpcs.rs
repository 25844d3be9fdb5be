//! Every unary RPC of the driver protocol as a recorded call on [`Client`]: each returns the
//! [`DriverRpc`] record and, on OK, the typed response. The request is sent as given; building
//! it as Nomad would (B.4) is the caller's business (see `taskconfig`).

use std::time::Duration;

use super::call::{Deadline, DriverRpc, call};
use super::connect::Client;
use super::protocol::Service;
use super::protojson;
use super::streams::{StreamHandle, wait_first};
use nomad_conform_proto::goplugin;
use nomad_conform_proto::grpc::health::v1 as health;
use nomad_conform_proto::nomad::{base, drivers};

type Rpc<T> = (DriverRpc, Option<T>);

impl Client {
    /// `BasePlugin/PluginInfo`.
    pub async fn plugin_info(&self, d: impl Into<Deadline>) -> Rpc<base::PluginInfoResponse> {
        let mut c = self.base();
        call(
            Service::Base,
            "PluginInfo",
            base::PluginInfoRequest {},
            d,
            |r| async move { c.plugin_info(r).await },
        )
        .await
    }

    /// `BasePlugin/ConfigSchema`.
    pub async fn config_schema(&self, d: impl Into<Deadline>) -> Rpc<base::ConfigSchemaResponse> {
        let mut c = self.base();
        call(
            Service::Base,
            "ConfigSchema",
            base::ConfigSchemaRequest {},
            d,
            |r| async move { c.config_schema(r).await },
        )
        .await
    }

    /// `BasePlugin/SetConfig`.
    pub async fn set_config(
        &self,
        req: base::SetConfigRequest,
        d: impl Into<Deadline>,
    ) -> Rpc<base::SetConfigResponse> {
        let mut c = self.base();
        call(Service::Base, "SetConfig", req, d, |r| async move {
            c.set_config(r).await
        })
        .await
    }

    /// `Driver/Init` (UNIMPLEMENTED is success for Nomad).
    pub async fn init(&self, d: impl Into<Deadline>) -> Rpc<drivers::InitResponse> {
        let mut c = self.driver();
        call(
            Service::Driver,
            "Init",
            drivers::InitRequest {},
            d,
            |r| async move { c.init(r).await },
        )
        .await
    }

    /// `Driver/TaskConfigSchema`.
    pub async fn task_config_schema(
        &self,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::TaskConfigSchemaResponse> {
        let mut c = self.driver();
        let req = drivers::TaskConfigSchemaRequest {};
        call(
            Service::Driver,
            "TaskConfigSchema",
            req,
            d,
            |r| async move { c.task_config_schema(r).await },
        )
        .await
    }

    /// `Driver/Capabilities`.
    pub async fn capabilities(&self, d: impl Into<Deadline>) -> Rpc<drivers::CapabilitiesResponse> {
        let mut c = self.driver();
        let req = drivers::CapabilitiesRequest {};
        call(Service::Driver, "Capabilities", req, d, |r| async move {
            c.capabilities(r).await
        })
        .await
    }

    /// `Driver/StartTask` with `task`.
    pub async fn start_task(
        &self,
        task: drivers::TaskConfig,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::StartTaskResponse> {
        let mut c = self.driver();
        let req = drivers::StartTaskRequest { task: Some(task) };
        call(Service::Driver, "StartTask", req, d, |r| async move {
            c.start_task(r).await
        })
        .await
    }

    /// `Driver/WaitTask`: Nomad's long poll; `d` bounds how long the harness waits.
    pub async fn wait_task(
        &self,
        task_id: &str,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::WaitTaskResponse> {
        let mut c = self.driver();
        let req = drivers::WaitTaskRequest {
            task_id: task_id.into(),
        };
        call(Service::Driver, "WaitTask", req, d, |r| async move {
            c.wait_task(r).await
        })
        .await
    }

    /// `Driver/StopTask`; Nomad always sets `timeout` and may leave `signal` empty.
    pub async fn stop_task(
        &self,
        req: drivers::StopTaskRequest,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::StopTaskResponse> {
        let mut c = self.driver();
        call(Service::Driver, "StopTask", req, d, |r| async move {
            c.stop_task(r).await
        })
        .await
    }

    /// `Driver/DestroyTask`.
    pub async fn destroy_task(
        &self,
        task_id: &str,
        force: bool,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::DestroyTaskResponse> {
        let mut c = self.driver();
        let req = drivers::DestroyTaskRequest {
            task_id: task_id.into(),
            force,
        };
        call(Service::Driver, "DestroyTask", req, d, |r| async move {
            c.destroy_task(r).await
        })
        .await
    }

    /// `Driver/InspectTask`.
    pub async fn inspect_task(
        &self,
        task_id: &str,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::InspectTaskResponse> {
        let mut c = self.driver();
        let req = drivers::InspectTaskRequest {
            task_id: task_id.into(),
        };
        call(Service::Driver, "InspectTask", req, d, |r| async move {
            c.inspect_task(r).await
        })
        .await
    }

    /// `Driver/RecoverTask` as Nomad sends it: `task_id` unset, only the stored `handle`.
    pub async fn recover_task(
        &self,
        handle: drivers::TaskHandle,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::RecoverTaskResponse> {
        let req = drivers::RecoverTaskRequest {
            task_id: String::new(),
            handle: Some(handle),
        };
        self.recover_task_with(req, d).await
    }

    /// `Driver/RecoverTask` with any request.
    pub async fn recover_task_with(
        &self,
        req: drivers::RecoverTaskRequest,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::RecoverTaskResponse> {
        let mut c = self.driver();
        call(Service::Driver, "RecoverTask", req, d, |r| async move {
            c.recover_task(r).await
        })
        .await
    }

    /// `Driver/SignalTask` (`signal` is a name such as `SIGHUP`).
    pub async fn signal_task(
        &self,
        task_id: &str,
        signal: &str,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::SignalTaskResponse> {
        let mut c = self.driver();
        let req = drivers::SignalTaskRequest {
            task_id: task_id.into(),
            signal: signal.into(),
        };
        call(Service::Driver, "SignalTask", req, d, |r| async move {
            c.signal_task(r).await
        })
        .await
    }

    /// `Driver/ExecTask`.
    pub async fn exec_task(
        &self,
        req: drivers::ExecTaskRequest,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::ExecTaskResponse> {
        let mut c = self.driver();
        call(Service::Driver, "ExecTask", req, d, |r| async move {
            c.exec_task(r).await
        })
        .await
    }

    /// `Driver/CreateNetwork`.
    pub async fn create_network(
        &self,
        req: drivers::CreateNetworkRequest,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::CreateNetworkResponse> {
        let mut c = self.driver();
        call(Service::Driver, "CreateNetwork", req, d, |r| async move {
            c.create_network(r).await
        })
        .await
    }

    /// `Driver/DestroyNetwork`.
    pub async fn destroy_network(
        &self,
        req: drivers::DestroyNetworkRequest,
        d: impl Into<Deadline>,
    ) -> Rpc<drivers::DestroyNetworkResponse> {
        let mut c = self.driver();
        call(Service::Driver, "DestroyNetwork", req, d, |r| async move {
            c.destroy_network(r).await
        })
        .await
    }

    /// `Driver/Shutdown` (UNIMPLEMENTED is success for Nomad, which sends a 2 s deadline).
    pub async fn driver_shutdown(&self, d: impl Into<Deadline>) -> Rpc<drivers::ShutdownResponse> {
        let mut c = self.driver();
        call(
            Service::Driver,
            "Shutdown",
            drivers::ShutdownRequest {},
            d,
            |r| async move { c.shutdown(r).await },
        )
        .await
    }

    /// `GRPCController/Shutdown` (go-plugin's Close; errors ignored by the host).
    pub async fn controller_shutdown(&self, d: impl Into<Deadline>) -> Rpc<goplugin::Empty> {
        let mut c = self.controller();
        call(
            Service::Controller,
            "Shutdown",
            goplugin::Empty {},
            d,
            |r| async move { c.shutdown(r).await },
        )
        .await
    }

    /// `grpc.health.v1.Health/Check` for service `plugin` (go-plugin's Ping).
    pub async fn health_check(&self, d: impl Into<Deadline>) -> Rpc<health::HealthCheckResponse> {
        let mut c = self.health();
        let req = health::HealthCheckRequest {
            service: "plugin".into(),
        };
        call(Service::Health, "Check", req, d, |r| async move {
            c.check(r).await
        })
        .await
    }
}

/// The server streams, collected in the background (see [`super::streams`]).
impl Client {
    /// Open `Driver/Fingerprint` and wait at most `first_within` for its first message (zero:
    /// do not wait). Keeps at most `limit` messages.
    pub async fn fingerprint(
        &self,
        first_within: Duration,
        limit: usize,
    ) -> StreamHandle<drivers::FingerprintResponse> {
        let mut c = self.driver();
        let req = drivers::FingerprintRequest {};
        let h = StreamHandle::spawn(
            Service::Driver,
            "Fingerprint",
            protojson::record(&req),
            limit,
            async move { c.fingerprint(req).await },
        );
        wait_first(h, first_within).await
    }

    /// Open `Driver/TaskEvents` (Nomad does not expect a first message: events come with
    /// tasks); waits at most `first_within` for one.
    pub async fn task_events(
        &self,
        first_within: Duration,
        limit: usize,
    ) -> StreamHandle<drivers::DriverTaskEvent> {
        let mut c = self.driver();
        let req = drivers::TaskEventsRequest {};
        let h = StreamHandle::spawn(
            Service::Driver,
            "TaskEvents",
            protojson::record(&req),
            limit,
            async move { c.task_events(req).await },
        );
        wait_first(h, first_within).await
    }

    /// Open `Driver/TaskStats` for `task_id` at `interval` (Nomad: 1 s, always set).
    pub async fn task_stats(
        &self,
        task_id: &str,
        interval: Duration,
        first_within: Duration,
        limit: usize,
    ) -> StreamHandle<drivers::TaskStatsResponse> {
        let mut c = self.driver();
        let req = drivers::TaskStatsRequest {
            task_id: task_id.into(),
            collection_interval: prost_types::Duration::try_from(interval).ok(),
        };
        let h = StreamHandle::spawn(
            Service::Driver,
            "TaskStats",
            protojson::record(&req),
            limit,
            async move { c.task_stats(req).await },
        );
        wait_first(h, first_within).await
    }
}
