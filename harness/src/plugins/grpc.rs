//! What the gRPC transports (CSI and task drivers) share: status code names as the specs write
//! them, one unary call timed against its deadline, and a finished call as a report event.
//! Each transport keeps its own record type (a driver's carries decoded status details and
//! msgpack payloads) and its own reproduce command; the plumbing between is here, once.

use std::future::Future;
use std::time::{Duration, Instant};

use nomad_conform_reports::model::{OpEvent, Request, Response};
use serde_json::Value;
use tonic::{Code, Status};

/// The gRPC status code's canonical name (`INVALID_ARGUMENT`), as the CSI spec and Nomad's
/// logs write it.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// `OK`, `NOT_FOUND`, or `NOT_FOUND: volume x does not exist`.
pub fn outcome(code: Code, message: &str) -> String {
    match (code, message.is_empty()) {
        (Code::Ok, _) => "OK".into(),
        (_, true) => code_name(code).into(),
        (_, false) => format!("{}: {message}", code_name(code)),
    }
}

/// A few lines for failure messages: the method, its outcome and time, and the request.
pub fn summary(method: &str, outcome: &str, duration: Duration, request: &Value) -> String {
    format!(
        "{method} {outcome} after {}\nrequest: {request}",
        crate::fmt_duration(duration)
    )
}

/// How one call ended, timed.
pub struct Timed<Resp> {
    pub started: Instant,
    pub duration: Duration,
    /// `None` when the harness stopped waiting at its limit (the call is cancelled).
    pub answer: Option<Result<tonic::Response<Resp>, Status>>,
}

/// Make one unary call: `f` gets `request` (with `header` as its `grpc-timeout` when given)
/// and returns the client's future, which is awaited at most `wait`.
pub async fn timed<Req, Resp, F, Fut>(
    request: Req,
    header: Option<Duration>,
    wait: Duration,
    f: F,
) -> Timed<Resp>
where
    F: FnOnce(tonic::Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
{
    let mut req = tonic::Request::new(request);
    if let Some(t) = header {
        req.set_timeout(t);
    }
    let started = Instant::now();
    let answer = tokio::time::timeout(wait, f(req)).await.ok();
    Timed {
        started,
        duration: started.elapsed(),
        answer,
    }
}

/// What a report event of one call is made of.
pub struct CallParts<'a> {
    /// The short method name (`CreateVolume`).
    pub method: &'a str,
    /// The full gRPC path (`/csi.v1.Controller/CreateVolume`).
    pub path: &'a str,
    pub request: &'a Value,
    pub code: Code,
    pub message: &'a str,
    pub response: Option<&'a Value>,
    pub duration: Duration,
    pub deadline: Duration,
}

impl CallParts<'_> {
    /// The call as an event `offset_ms` after its case started.
    pub fn event(&self, offset_ms: u64, reproduce: Option<String>, notes: Vec<String>) -> OpEvent {
        OpEvent {
            operation: self.method.to_string(),
            started_ms: offset_ms,
            duration_ms: self.duration.as_secs_f64() * 1000.0,
            deadline_ms: Some(self.deadline.as_millis() as u64),
            request: Request::Grpc {
                method: self.path.to_string(),
                request: self.request.clone(),
            },
            response: Response::Grpc {
                code: code_name(self.code).into(),
                message: self.message.to_string(),
                response: self.response.cloned(),
            },
            reproduce,
            notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_outcomes() {
        assert_eq!(code_name(Code::InvalidArgument), "INVALID_ARGUMENT");
        assert_eq!(code_name(Code::FailedPrecondition), "FAILED_PRECONDITION");
        assert_eq!(outcome(Code::Ok, "ignored"), "OK");
        assert_eq!(outcome(Code::NotFound, ""), "NOT_FOUND");
        assert_eq!(outcome(Code::NotFound, "no x"), "NOT_FOUND: no x");
        let s = summary(
            "Probe",
            "OK",
            Duration::from_millis(3),
            &serde_json::json!({}),
        );
        assert!(s.starts_with("Probe OK after 3"), "{s}");
        assert!(s.ends_with("request: {}"), "{s}");
    }

    #[tokio::test]
    async fn a_call_that_does_not_answer_is_given_up_at_the_limit() {
        let t = timed((), None, Duration::from_millis(20), |_req| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, Status>(tonic::Response::new(()))
        })
        .await;
        assert!(t.answer.is_none());
        assert!(t.duration >= Duration::from_millis(20) && t.duration < Duration::from_secs(5));
        let t = timed(
            (),
            Some(Duration::from_secs(1)),
            Duration::from_secs(1),
            |req| {
                let has_header = req.metadata().get("grpc-timeout").is_some();
                async move {
                    if has_header {
                        Ok(tonic::Response::new(()))
                    } else {
                        Err(Status::internal("no header"))
                    }
                }
            },
        )
        .await;
        assert!(
            matches!(t.answer, Some(Ok(_))),
            "the grpc-timeout header is sent"
        );
    }
}
