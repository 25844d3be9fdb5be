//! How calls are answered: the error codes and messages Nomad expects, and one log line per
//! call.
//!
//! Nomad's Go driver servers return plain Go errors, which gRPC turns into status UNKNOWN with
//! the error text as message (contracts/task-drivers.md B.4). This driver does the same for
//! driver failures, with two exceptions the contract names:
//! - an unknown task id is UNKNOWN "task not found for given id" (NOT_FOUND with the
//!   not-found variant: Nomad handles both as a generic failure);
//! - StartTask errors are FAILED_PRECONDITION with a `RecoverableError` detail in
//!   `grpc-status-details-bin`, which Nomad's restart policy reads (plain UNKNOWN errors with
//!   the plain-start-errors variant, as raw_exec's).
//!
//! A request that lacks a field Nomad always sets is INVALID_ARGUMENT.

use nomad_conform_proto::nomad::structs::RecoverableError;
use prost::Message as _;
use tonic::codegen::Bytes;
use tonic::{Response, Status};

use crate::log;
use crate::variants::{Variant, Variants};

/// Nomad's `drivers.ErrTaskNotFound` text.
pub const TASK_NOT_FOUND: &str = "task not found for given id";

/// The type URL Nomad looks for in the status details.
const RECOVERABLE_ERROR_TYPE: &str =
    "type.googleapis.com/hashicorp.nomad.plugins.shared.structs.RecoverableError";

/// `google.rpc.Status`, the message `grpc-status-details-bin` carries.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<prost_types::Any>,
}

/// The answer for a task id the plugin does not know.
pub fn task_not_found(variants: &Variants) -> Status {
    if variants.has(Variant::NotFound) {
        Status::not_found(TASK_NOT_FOUND)
    } else if variants.has(Variant::OwnUnknownTaskError) {
        Status::failed_precondition("no task with this id on this driver")
    } else {
        Status::unknown(TASK_NOT_FOUND)
    }
}

/// A driver failure, as a Go driver's plain error reaches Nomad.
pub fn failed(message: impl Into<String>) -> Status {
    Status::unknown(message)
}

/// A request without a field Nomad always sets.
pub fn bad_request(message: impl Into<String>) -> Status {
    Status::invalid_argument(message)
}

/// A StartTask error: FAILED_PRECONDITION with `RecoverableError{recoverable: false}` as the
/// first (and only) detail. Nothing this driver refuses gets better by retrying.
pub fn start_error(variants: &Variants, message: impl Into<String>) -> Status {
    start_error_marked(variants, message, false)
}

/// A StartTask error whose RecoverableError detail says `recoverable`.
pub fn start_error_marked(
    variants: &Variants,
    message: impl Into<String>,
    recoverable: bool,
) -> Status {
    let message = message.into();
    // plain-start-errors: a plain Go error, which Nomad's plugin server passes on as it is
    // (UNKNOWN, no details), as it does for raw_exec.
    if variants.has(Variant::PlainStartErrors) {
        return failed(message);
    }
    let detail = RecoverableError { recoverable };
    let status = RpcStatus {
        code: tonic::Code::FailedPrecondition as i32,
        message: message.clone(),
        details: vec![prost_types::Any {
            type_url: RECOVERABLE_ERROR_TYPE.to_string(),
            value: detail.encode_to_vec(),
        }],
    };
    Status::with_details(
        tonic::Code::FailedPrecondition,
        message,
        Bytes::from(status.encode_to_vec()),
    )
}

/// Turns a handler's result into the gRPC answer and logs one line about it.
pub fn finish<T>(
    method: &str,
    task_id: &str,
    result: Result<T, Status>,
) -> Result<Response<T>, Status> {
    let mut fields = vec![("method", method.to_string())];
    if !task_id.is_empty() {
        fields.push(("task_id", task_id.to_string()));
    }
    match result {
        Ok(reply) => {
            log::debug("call answered", &fields);
            Ok(Response::new(reply))
        }
        Err(status) => {
            fields.push(("code", format!("{:?}", status.code())));
            fields.push(("error", status.message().to_string()));
            log::warn("call failed", &fields);
            Err(status)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_errors_carry_a_recoverable_error_detail() {
        let status = start_error(&Variants::default(), "no command");
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        let details = RpcStatus::decode(status.details()).unwrap();
        assert_eq!(details.message, "no command");
        assert_eq!(details.details.len(), 1);
        assert_eq!(details.details[0].type_url, RECOVERABLE_ERROR_TYPE);
        let detail = RecoverableError::decode(details.details[0].value.as_slice()).unwrap();
        assert!(!detail.recoverable);

        let marked = start_error_marked(&Variants::default(), "bad config", true);
        let details = RpcStatus::decode(marked.details()).unwrap();
        let detail = RecoverableError::decode(details.details[0].value.as_slice()).unwrap();
        assert!(detail.recoverable);

        let plain = Variants::new([Variant::PlainStartErrors]);
        let bare = start_error_marked(&plain, "no command", true);
        assert_eq!(bare.code(), tonic::Code::Unknown);
        assert!(bare.details().is_empty());
    }

    #[test]
    fn unknown_tasks_are_unknown_unless_the_variant_says_not_found() {
        let status = task_not_found(&Variants::default());
        assert_eq!(
            (status.code(), status.message()),
            (tonic::Code::Unknown, TASK_NOT_FOUND)
        );
        let status = task_not_found(&Variants::new([Variant::NotFound]));
        assert_eq!(status.code(), tonic::Code::NotFound);
    }
}
