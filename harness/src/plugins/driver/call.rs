//! One unary RPC with a deadline, recorded ([`DriverRpc`]), with its status details decoded as
//! Nomad reads them (B.4): the details are a `google.rpc.Status`; when its first `Any` is a
//! `hashicorp.nomad.plugins.shared.structs.RecoverableError`, its `recoverable` flag decides
//! whether the restart policy applies.
//!
//! Deadlines: the harness stops waiting at [`Deadline::wait`] and cancels the call (the plugin
//! sees its context cancelled, as when Nomad cancels one). A `grpc-timeout` header is sent only
//! when asked ([`Deadline::header`]): Nomad sets a context deadline on few calls (`Shutdown`,
//! 2 s), and a header changes what a Go server's handler sees.

use std::future::Future;
use std::time::{Duration, Instant};

use nomad_conform_proto::nomad::structs::RecoverableError;
use nomad_conform_reports::model::OpEvent;
use prost::Message as _;
use serde::Serialize;
use serde_json::Value;
use tonic::{Code, Status};

use super::launch_spec::LaunchSpec;
use super::protocol::{RECOVERABLE_ERROR_TYPE_URL, Service};
use super::protojson;
use super::reproduce::reproduce_script;
use crate::plugins::grpc;
use crate::plugins::grpc::code_name;

/// How long to wait for an answer, and whether to tell the plugin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    /// The harness gives up (and cancels the call) after this.
    pub wait: Duration,
    /// Send it as the call's `grpc-timeout` too.
    pub header: bool,
}

impl Deadline {
    /// Wait `d` and send it as `grpc-timeout` (a Go context with a deadline).
    pub fn with_header(d: Duration) -> Self {
        Deadline {
            wait: d,
            header: true,
        }
    }
}

impl From<Duration> for Deadline {
    fn from(wait: Duration) -> Self {
        Deadline {
            wait,
            header: false,
        }
    }
}

/// `google.rpc.Status`, as carried in `grpc-status-details-bin`.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<prost_types::Any>,
}

/// The details of a failed call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatusDetails {
    /// Bytes of `grpc-status-details-bin`.
    pub bytes: usize,
    /// The type URL of each `Any` in the decoded `google.rpc.Status`.
    pub type_urls: Vec<String>,
    /// `RecoverableError.recoverable`, when the first detail is one (what Nomad reads).
    pub recoverable: Option<bool>,
    /// Why the details could not be decoded.
    pub decode_error: Option<String>,
}

impl StatusDetails {
    /// Decode `raw` (None when the status has no details).
    pub fn decode(raw: &[u8]) -> Option<StatusDetails> {
        if raw.is_empty() {
            return None;
        }
        let mut d = StatusDetails {
            bytes: raw.len(),
            type_urls: Vec::new(),
            recoverable: None,
            decode_error: None,
        };
        match RpcStatus::decode(raw) {
            Err(e) => d.decode_error = Some(format!("not a google.rpc.Status: {e}")),
            Ok(st) => {
                d.type_urls = st.details.iter().map(|a| a.type_url.clone()).collect();
                if let Some(first) = st.details.first()
                    && first.type_url == RECOVERABLE_ERROR_TYPE_URL
                {
                    match RecoverableError::decode(first.value.as_slice()) {
                        Ok(r) => d.recoverable = Some(r.recoverable),
                        Err(e) => {
                            d.decode_error = Some(format!("RecoverableError does not decode: {e}"))
                        }
                    }
                }
            }
        }
        Some(d)
    }
}

/// One finished unary RPC.
#[derive(Clone, Debug)]
pub struct DriverRpc {
    pub service: Service,
    /// The short method name (`StartTask`).
    pub method: String,
    /// The gRPC path (`/hashicorp.nomad.plugins.drivers.proto.Driver/StartTask`).
    pub path: String,
    /// The request, record form ([`protojson::record`]).
    pub request: Value,
    pub code: Code,
    pub message: String,
    pub details: Option<StatusDetails>,
    /// The response, record form, when the code is OK.
    pub response: Option<Value>,
    pub started: Instant,
    pub duration: Duration,
    pub deadline: Deadline,
    /// The harness gave up at the deadline.
    pub timed_out: bool,
}

impl DriverRpc {
    /// A call still open after `open_for`, which the harness stopped waiting for.
    pub fn unanswered(service: Service, method: &str, request: Value, open_for: Duration) -> Self {
        DriverRpc {
            service,
            method: method.to_owned(),
            path: service.path(method),
            request,
            code: Code::DeadlineExceeded,
            message: "no answer before the deadline (the harness stopped waiting)".into(),
            details: None,
            response: None,
            started: Instant::now() - open_for,
            duration: open_for,
            deadline: Deadline::from(open_for),
            timed_out: true,
        }
    }

    pub fn ok(&self) -> bool {
        self.code == Code::Ok
    }

    pub fn code_name(&self) -> &'static str {
        code_name(self.code)
    }

    /// `RecoverableError.recoverable` of a failure, if the plugin sent one first.
    pub fn recoverable(&self) -> Option<bool> {
        self.details.as_ref().and_then(|d| d.recoverable)
    }

    /// `OK`, or `UNKNOWN: task not found for given id`.
    pub fn outcome(&self) -> String {
        grpc::outcome(self.code, &self.message)
    }

    /// A few lines for failure messages: the outcome, the time, the request.
    pub fn summary(&self) -> String {
        grpc::summary(&self.method, &self.outcome(), self.duration, &self.request)
    }

    /// A shell script that starts the plugin as `launch` does, reads its handshake line, and
    /// repeats this call with grpcurl against the announced address using our .proto files.
    /// The request is written in protobuf JSON (bytes such as msgpack payloads base64-encoded,
    /// as that mapping requires). Calls that depend on earlier ones (a StartTask before a
    /// WaitTask) need those repeated first.
    pub fn reproduce(&self, launch: &LaunchSpec) -> String {
        let request = protojson::protobuf_json(&self.request);
        reproduce_script(launch, self.service, &self.method, &request.to_string())
    }

    /// The record as an [`OpEvent`], `offset_ms` after the case started; with `launch`, the
    /// event carries [`DriverRpc::reproduce`].
    pub fn event(&self, offset_ms: u64, launch: Option<&LaunchSpec>) -> OpEvent {
        let mut notes = Vec::new();
        if let Some(d) = &self.details {
            notes.push(format!(
                "status details: {} bytes, types {:?}{}{}",
                d.bytes,
                d.type_urls,
                d.recoverable
                    .map(|r| format!(", RecoverableError{{recoverable: {r}}}"))
                    .unwrap_or_default(),
                d.decode_error
                    .as_ref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
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
            deadline: self.deadline.wait,
        }
        .event(offset_ms, launch.map(|l| self.reproduce(l)), notes)
    }
}

/// Make one call: `f` gets the request and returns the stub's future. Returns the record and,
/// when the call succeeded, the typed response.
pub async fn call<Req, Resp, F, Fut>(
    service: Service,
    method: &str,
    request: Req,
    deadline: impl Into<Deadline>,
    f: F,
) -> (DriverRpc, Option<Resp>)
where
    Req: Serialize,
    Resp: Serialize,
    F: FnOnce(tonic::Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
{
    let deadline = deadline.into();
    let request_json = protojson::record(&request);
    let grpc::Timed {
        started,
        duration,
        answer,
    } = grpc::timed(
        request,
        deadline.header.then_some(deadline.wait),
        deadline.wait,
        f,
    )
    .await;
    let mut rpc = DriverRpc {
        service,
        method: method.to_owned(),
        path: service.path(method),
        request: request_json,
        code: Code::Ok,
        message: String::new(),
        details: None,
        response: None,
        started,
        duration,
        deadline,
        timed_out: false,
    };
    let typed = match answer {
        Some(Ok(resp)) => {
            let inner = resp.into_inner();
            let json = protojson::record(&inner);
            rpc.response = Some(json);
            Some(inner)
        }
        Some(Err(status)) => {
            rpc.code = status.code();
            rpc.message = status.message().to_owned();
            rpc.details = StatusDetails::decode(status.details());
            // tonic reports its own grpc-timeout as CANCELLED "Timeout expired".
            rpc.timed_out = status.code() == Code::DeadlineExceeded
                || (deadline.header && duration >= deadline.wait);
            None
        }
        None => {
            rpc.code = Code::DeadlineExceeded;
            rpc.message = "no answer before the deadline (the harness cancelled the call)".into();
            rpc.timed_out = true;
            None
        }
    };
    (rpc, typed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(type_url: &str, value: Vec<u8>) -> prost_types::Any {
        prost_types::Any {
            type_url: type_url.into(),
            value,
        }
    }

    #[test]
    fn recoverable_error_details() {
        let rec = RecoverableError { recoverable: true }.encode_to_vec();
        let raw = RpcStatus {
            code: 9,
            message: "m".into(),
            details: vec![any(RECOVERABLE_ERROR_TYPE_URL, rec.clone())],
        }
        .encode_to_vec();
        let d = StatusDetails::decode(&raw).unwrap();
        assert_eq!(d.recoverable, Some(true));
        assert_eq!(d.type_urls, [RECOVERABLE_ERROR_TYPE_URL]);
        // Only the first detail counts.
        let raw = RpcStatus {
            code: 9,
            message: "m".into(),
            details: vec![
                any("type.googleapis.com/other", vec![]),
                any(RECOVERABLE_ERROR_TYPE_URL, rec),
            ],
        }
        .encode_to_vec();
        assert_eq!(StatusDetails::decode(&raw).unwrap().recoverable, None);
        // recoverable=false encodes as no bytes at all.
        let raw = RpcStatus {
            code: 9,
            message: String::new(),
            details: vec![any(RECOVERABLE_ERROR_TYPE_URL, vec![])],
        }
        .encode_to_vec();
        assert_eq!(
            StatusDetails::decode(&raw).unwrap().recoverable,
            Some(false)
        );
        assert!(StatusDetails::decode(&[]).is_none());
        assert!(
            StatusDetails::decode(&[0xff, 0xff])
                .unwrap()
                .decode_error
                .is_some()
        );
    }

    #[tokio::test]
    async fn deadlines_and_errors_are_recorded() {
        use nomad_conform_proto::nomad::base::PluginInfoRequest;
        let (rpc, resp) = call(
            Service::Base,
            "PluginInfo",
            PluginInfoRequest {},
            Duration::from_millis(50),
            |_req| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok::<_, Status>(tonic::Response::new(PluginInfoRequest {}))
            },
        )
        .await;
        assert!(rpc.timed_out && resp.is_none());
        assert_eq!(rpc.code_name(), "DEADLINE_EXCEEDED");
        assert!(rpc.duration < Duration::from_secs(2));
        let (rpc, _) = call(
            Service::Driver,
            "Init",
            PluginInfoRequest {},
            Duration::from_secs(1),
            |_req| async {
                Err::<tonic::Response<PluginInfoRequest>, _>(Status::unimplemented("no"))
            },
        )
        .await;
        assert_eq!(rpc.outcome(), "UNIMPLEMENTED: no");
        assert_eq!(
            rpc.path,
            "/hashicorp.nomad.plugins.drivers.proto.Driver/Init"
        );
        let ev = rpc.event(5, Some(&LaunchSpec::new("/bin/p", vec![])));
        let script = ev.reproduce.unwrap();
        assert!(
            script.contains("grpcurl -plaintext -authority unused $u"),
            "{script}"
        );
        assert!(script.contains("hashicorp.nomad.plugins.drivers.proto.Driver/Init"));
        assert!(script.contains("-proto plugins/drivers/proto/driver.proto"));
    }
}
