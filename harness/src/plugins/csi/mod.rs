//! CSI plugins: gRPC over a unix socket, as Nomad talks to them. This module connects, makes
//! calls and records each one (method, request with secrets redacted, status code, message,
//! response, timing); judging is left to the steps.

pub mod cleanup;
pub mod known;
pub mod launch;
pub mod preflight;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nomad_conform_reports::model::OpEvent;
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

pub use nomad_conform_proto::csi::v1 as pb;

use crate::plugins::grpc;

/// The path of a `unix:///path` endpoint.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, String> {
    let path = endpoint.strip_prefix("unix://").ok_or_else(|| {
        format!("{endpoint:?} is not a unix:// endpoint (CSI plugins listen on unix sockets)")
    })?;
    if !path.starts_with('/') {
        return Err(format!(
            "{endpoint:?}: the socket path must be absolute (unix:///path)"
        ));
    }
    Ok(PathBuf::from(path))
}

/// A connection to one socket, replaced when the plugin restarts.
#[derive(Debug)]
pub struct Connection {
    pub socket: PathBuf,
    channel: Mutex<Channel>,
}

/// Open a channel to `socket`, failing after `timeout` (Nomad dials with a 1 s timeout).
pub async fn dial(socket: &Path, timeout: Duration) -> Result<Channel, String> {
    let endpoint = Endpoint::from_shared(format!("unix://{}", socket.display()))
        .map_err(|e| format!("bad socket path {}: {e}", socket.display()))?
        .connect_timeout(timeout);
    endpoint
        .connect()
        .await
        .map_err(|e| format!("failed to connect to {}: {e}", socket.display()))
}

impl Connection {
    pub async fn open(socket: &Path, timeout: Duration) -> Result<Connection, String> {
        Ok(Connection {
            socket: socket.to_path_buf(),
            channel: Mutex::new(dial(socket, timeout).await?),
        })
    }

    pub fn channel(&self) -> Channel {
        self.channel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Dial again (after the plugin restarted).
    pub async fn reconnect(&self, timeout: Duration) -> Result<(), String> {
        let fresh = dial(&self.socket, timeout).await?;
        *self.channel.lock().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    pub fn identity(&self) -> pb::identity_client::IdentityClient<Channel> {
        pb::identity_client::IdentityClient::new(self.channel())
    }

    pub fn controller(&self) -> pb::controller_client::ControllerClient<Channel> {
        pb::controller_client::ControllerClient::new(self.channel())
    }

    pub fn node(&self) -> pb::node_client::NodeClient<Channel> {
        pb::node_client::NodeClient::new(self.channel())
    }

    /// The GroupController service, served on the controller's socket.
    pub fn group(&self) -> pb::group_controller_client::GroupControllerClient<Channel> {
        pb::group_controller_client::GroupControllerClient::new(self.channel())
    }
}

use crate::plugins::grpc::code_name;

/// One finished RPC.
#[derive(Debug, Clone)]
pub struct Rpc {
    /// The short method name (`CreateVolume`).
    pub method: String,
    /// The full gRPC path (`/csi.v1.Controller/CreateVolume`).
    pub path: String,
    pub request: serde_json::Value,
    pub code: Code,
    pub message: String,
    /// Bytes of the status's details (the spec requires none).
    pub details_len: usize,
    pub response: Option<serde_json::Value>,
    pub started: Instant,
    pub duration: Duration,
    pub deadline: Duration,
    /// The harness gave up waiting at the deadline.
    pub timed_out: bool,
}

impl Rpc {
    pub fn ok(&self) -> bool {
        self.code == Code::Ok
    }

    pub fn code_name(&self) -> &'static str {
        code_name(self.code)
    }

    /// `OK`, or `NOT_FOUND: volume x does not exist`.
    pub fn outcome(&self) -> String {
        grpc::outcome(self.code, &self.message)
    }

    /// A few lines for failure messages: the outcome, the time, and the request.
    pub fn summary(&self) -> String {
        grpc::summary(&self.method, &self.outcome(), self.duration, &self.request)
    }

    /// A command that repeats this call with grpcurl (the request is the recorded one, with any
    /// secrets redacted: put them back before running it).
    pub fn reproduce(&self, socket: &Path) -> String {
        format!(
            "grpcurl -plaintext -import-path {} -proto csi/v1/csi.proto -unix -d {} {} {}",
            crate::shell::quote(crate::plugins::proto_dir()),
            crate::shell::quote(&self.request.to_string()),
            socket.display(),
            self.path.trim_start_matches('/')
        )
    }

    pub fn event(&self, offset_ms: u64, socket: &Path) -> OpEvent {
        let mut notes = Vec::new();
        if self.details_len > 0 {
            notes.push(format!(
                "the status carries {} bytes of details (the CSI spec requires none)",
                self.details_len
            ));
        }
        if self.timed_out {
            notes.push("no answer before the deadline".into());
        }
        grpc::CallParts {
            method: &self.method,
            path: &self.path,
            request: &self.request,
            code: self.code,
            message: &self.message,
            response: self.response.as_ref(),
            duration: self.duration,
            deadline: self.deadline,
        }
        .event(offset_ms, Some(self.reproduce(socket)), notes)
    }
}

/// Rewrite serde's JSON of a prost message into protobuf's JSON mapping, as grpcurl reads it:
/// a oneof is written by serde as `{"access_type": {"Mount": {...}}}` and by protobuf as
/// `{"mount": {...}}`; nulls (unset messages) are left out.
pub fn protojson(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                match v {
                    Value::Null => {}
                    Value::Object(inner)
                        if inner.len() == 1
                            && inner.keys().next().is_some_and(|n| {
                                n.starts_with(|c: char| c.is_ascii_uppercase())
                            }) =>
                    {
                        for (variant, value) in inner {
                            out.insert(snake_case(&variant), protojson(value));
                        }
                    }
                    other => {
                        out.insert(k, protojson(other));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(protojson).collect()),
        other => other,
    }
}

fn snake_case(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Make one call: `f` gets the request (with the deadline set as the gRPC timeout) and returns
/// the client's future. Returns the record and, when the call succeeded, the typed response.
pub async fn call<Req, Resp, F, Fut>(
    service: &str,
    method: &str,
    request: Req,
    deadline: Duration,
    f: F,
) -> (Rpc, Option<Resp>)
where
    Req: Serialize,
    Resp: Serialize,
    F: FnOnce(tonic::Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
{
    let request_json = protojson(serde_json::to_value(&request).unwrap_or_default());
    // The gRPC timeout tells the plugin; the local limit makes sure we stop waiting.
    let grpc::Timed {
        started,
        duration,
        answer,
    } = grpc::timed(
        request,
        Some(deadline),
        deadline + Duration::from_millis(500),
        f,
    )
    .await;
    let (code, message, details_len, response, typed, timed_out) = match answer {
        Some(Ok(resp)) => {
            let inner = resp.into_inner();
            let json = serde_json::to_value(&inner).ok().map(protojson);
            (Code::Ok, String::new(), 0, json, Some(inner), false)
        }
        // tonic reports its own deadline as CANCELLED "Timeout expired": whatever the code, a
        // call that ran into the deadline timed out.
        Some(Err(status)) if duration >= deadline => (
            Code::DeadlineExceeded,
            format!(
                "no answer before the deadline ({} {})",
                code_name(status.code()),
                status.message()
            ),
            status.details().len(),
            None,
            None,
            true,
        ),
        Some(Err(status)) => (
            status.code(),
            status.message().to_string(),
            status.details().len(),
            None,
            None,
            status.code() == Code::DeadlineExceeded,
        ),
        None => (
            Code::DeadlineExceeded,
            "no answer before the deadline".into(),
            0,
            None,
            None,
            true,
        ),
    };
    let rpc = Rpc {
        method: method.to_string(),
        path: format!("/csi.v1.{service}/{method}"),
        request: request_json,
        code,
        message,
        details_len,
        response,
        started,
        duration,
        deadline,
        timed_out,
    };
    (rpc, typed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            socket_path("unix:///run/csi.sock").unwrap(),
            PathBuf::from("/run/csi.sock")
        );
        assert!(socket_path("tcp://1.2.3.4:5").is_err());
        assert!(socket_path("unix://relative.sock").is_err());
        assert!(socket_path("/run/csi.sock").is_err());
    }

    #[test]
    fn protobuf_json_mapping() {
        let v = serde_json::json!({
            "volume_capability": {"access_mode": {"mode": 1}, "access_type": {"Mount": {"fs_type": ""}}},
            "source": {"type": {"VolumeExpansion": {"type": 1}}},
            "unset": null
        });
        assert_eq!(
            protojson(v),
            serde_json::json!({
                "volume_capability": {"access_mode": {"mode": 1}, "mount": {"fs_type": ""}},
                "source": {"volume_expansion": {"type": 1}}
            })
        );
    }
}
