//! The services every go-plugin gRPC server has next to the plugin's own
//! (contracts/task-drivers.md A.5):
//! - `grpc.health.v1.Health`: service "plugin" (and the server as a whole, "") is SERVING;
//! - `plugin.GRPCBroker`: the host opens its stream on connect; Nomad's plugins never use the
//!   broker, so this one reads the stream until the host closes it and sends nothing;
//! - `plugin.GRPCController/Shutdown`: stop serving and exit;
//! - `plugin.GRPCStdio/StreamStdio`: the plugin's stdout and stderr after the handshake. This
//!   plugin writes nothing to stdout after the handshake and logs to the real stderr (as Go
//!   plugins' loggers do), so the stream stays open without data.

use std::pin::Pin;
use std::sync::Arc;

use nomad_conform_proto::goplugin::grpc_broker_server::GrpcBroker;
use nomad_conform_proto::goplugin::grpc_controller_server::GrpcController;
use nomad_conform_proto::goplugin::grpc_stdio_server::GrpcStdio;
use nomad_conform_proto::goplugin::{ConnInfo, Empty, StdioData};
use nomad_conform_proto::grpc::health::v1::health_check_response::ServingStatus;
use nomad_conform_proto::grpc::health::v1::health_server::Health;
use nomad_conform_proto::grpc::health::v1::{HealthCheckRequest, HealthCheckResponse};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};

use crate::log;
use crate::plugin::Plugin;

type Replies<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The health service name go-plugin registers.
const HEALTH_SERVICE: &str = "plugin";

pub struct HealthService;

impl HealthService {
    fn status_of(service: &str) -> Option<ServingStatus> {
        (service.is_empty() || service == HEALTH_SERVICE).then_some(ServingStatus::Serving)
    }
}

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let service = request.into_inner().service;
        match HealthService::status_of(&service) {
            Some(status) => Ok(Response::new(HealthCheckResponse {
                status: status as i32,
            })),
            None => Err(Status::not_found(format!("unknown service {service:?}"))),
        }
    }

    type WatchStream = Replies<HealthCheckResponse>;

    /// The current status, then nothing (it never changes) until the client leaves.
    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let status = HealthService::status_of(&request.into_inner().service)
            .unwrap_or(ServingStatus::ServiceUnknown);
        let first = tokio_stream::once(Ok(HealthCheckResponse {
            status: status as i32,
        }));
        Ok(Response::new(Box::pin(
            first.chain(tokio_stream::pending()),
        )))
    }
}

pub struct BrokerService;

#[tonic::async_trait]
impl GrpcBroker for BrokerService {
    type StartStreamStream = Replies<ConnInfo>;

    async fn start_stream(
        &self,
        request: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<Self::StartStreamStream>, Status> {
        let mut incoming = request.into_inner();
        let (sender, replies) = tokio::sync::mpsc::channel(1);
        // Read until the host closes its side; then dropping the sender ends our side. Nothing
        // is ever offered back.
        tokio::spawn(async move {
            let _sender = sender;
            while let Ok(Some(_)) = incoming.message().await {}
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(replies))))
    }
}

pub struct ControllerService {
    plugin: Arc<Plugin>,
}

impl ControllerService {
    pub fn new(plugin: Arc<Plugin>) -> Self {
        ControllerService { plugin }
    }
}

#[tonic::async_trait]
impl GrpcController for ControllerService {
    async fn shutdown(&self, _: Request<Empty>) -> Result<Response<Empty>, Status> {
        log::info("shutdown requested by the host", &[]);
        self.plugin.shutdown.notify_one();
        Ok(Response::new(Empty {}))
    }
}

pub struct StdioService;

#[tonic::async_trait]
impl GrpcStdio for StdioService {
    type StreamStdioStream = Replies<StdioData>;

    async fn stream_stdio(
        &self,
        _: Request<()>,
    ) -> Result<Response<Self::StreamStdioStream>, Status> {
        Ok(Response::new(Box::pin(tokio_stream::pending())))
    }
}
