//! Helpers shared by the three services: answering a call (with a log line), checking
//! required fields, turning a `VolumeCapability` into what this plugin supports, and the
//! paging of ListVolumes and ListSnapshots.
//!
//! Errors follow the CSI error scheme: a gRPC code from the spec's tables and a message a
//! person can act on ("volume \"x\" does not exist"), with empty status details.

use nomad_conform_proto::csi::v1::volume_capability::access_mode::Mode;
use nomad_conform_proto::csi::v1::volume_capability::{AccessType as ProtoAccessType, MountVolume};
use nomad_conform_proto::csi::v1::{CapacityRange, VolumeCapability};
use prost::Message;
use tonic::codegen::Bytes;
use tonic::{Response, Status};

use crate::faults::{Fault, Faults};
use crate::page_tokens;
use crate::state::{AccessMode, AccessType, Capability};
use crate::variants::Variants;

/// Turns a handler's result into the gRPC answer and logs one line about it to stderr.
///
/// `subject` names what the call was about (a volume id, a name, a path) for the log.
pub fn finish<T>(
    faults: &Faults,
    method: &str,
    subject: &str,
    result: Result<T, Status>,
) -> Result<Response<T>, Status> {
    let call = if subject.is_empty() {
        method.to_string()
    } else {
        format!("{method} {subject}")
    };
    match result {
        Ok(reply) => {
            eprintln!("{call}: OK");
            Ok(Response::new(reply))
        }
        Err(status) => {
            eprintln!("{call}: {:?}: {}", status.code(), status.message());
            if faults.has(Fault::ErrorDetails) {
                return Err(with_details(status));
            }
            Err(status)
        }
    }
}

/// The error-details fault: the same error, plus a `google.rpc.Status` in the details, which
/// the CSI spec forbids.
fn with_details(status: Status) -> Status {
    #[derive(Clone, PartialEq, Message)]
    struct RpcStatus {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }
    let details = RpcStatus {
        code: status.code() as i32,
        message: status.message().to_string(),
    };
    Status::with_details(
        status.code(),
        status.message(),
        Bytes::from(details.encode_to_vec()),
    )
}

/// Checks that a request has a required field: INVALID_ARGUMENT, naming the field, if not.
///
/// Every required-field check of the plugin comes through here. With the
/// skip-required-field-checks fault, the plugin trusts the CO instead: the call goes on without
/// the field, and whatever happens next (NOT_FOUND for an empty id, an assumed capability, ...)
/// is its answer.
pub fn require_field(faults: &Faults, present: bool, field: &str) -> Result<(), Status> {
    if present || faults.has(Fault::SkipRequiredFieldChecks) {
        return Ok(());
    }
    Err(Status::invalid_argument(format!("{field} is required")))
}

/// A required string field: INVALID_ARGUMENT if empty.
pub fn require(faults: &Faults, value: &str, field: &str) -> Result<(), Status> {
    require_field(faults, !value.is_empty(), field)
}

/// An error that says what failed and why, as INTERNAL.
pub fn internal(what: &str, err: impl std::fmt::Display) -> Status {
    Status::internal(format!("failed to {what}: {err}"))
}

/// Checks a capability and reduces it to what this plugin supports.
///
/// Both access types are supported. Mount volumes are directories, so any fs_type goes
/// (there is no file system to make: the directory is bind-mounted as it is); mount flags
/// and volume_mount_group are recorded but not applied. Block volumes are image files handed
/// out as loop devices.
pub fn parse_capability(cap: &VolumeCapability) -> Result<Capability, Status> {
    let empty = MountVolume::default();
    let (access_type, mount) = match &cap.access_type {
        Some(ProtoAccessType::Mount(mount)) => (AccessType::Mount, mount),
        Some(ProtoAccessType::Block(_)) => (AccessType::Block, &empty),
        None => {
            return Err(Status::invalid_argument(
                "volume capability has no access type (block or mount)",
            ));
        }
    };
    let mode = cap
        .access_mode
        .as_ref()
        .map(|m| m.mode)
        .ok_or_else(|| Status::invalid_argument("volume capability has no access mode"))?;
    let access_mode = match Mode::try_from(mode) {
        Ok(Mode::SingleNodeWriter) => AccessMode::SingleNodeWriter,
        Ok(Mode::SingleNodeReaderOnly) => AccessMode::SingleNodeReaderOnly,
        Ok(Mode::MultiNodeReaderOnly) => AccessMode::MultiNodeReaderOnly,
        Ok(Mode::MultiNodeSingleWriter) => AccessMode::MultiNodeSingleWriter,
        Ok(Mode::MultiNodeMultiWriter) => AccessMode::MultiNodeMultiWriter,
        Ok(Mode::SingleNodeSingleWriter) => AccessMode::SingleNodeSingleWriter,
        Ok(Mode::SingleNodeMultiWriter) => AccessMode::SingleNodeMultiWriter,
        Ok(Mode::Unknown) | Err(_) => {
            return Err(Status::invalid_argument(format!(
                "access mode {mode} is not supported"
            )));
        }
    };
    Ok(Capability {
        access_type,
        access_mode,
        fs_type: mount.fs_type.clone(),
        mount_flags: mount.mount_flags.clone(),
        volume_mount_group: mount.volume_mount_group.clone(),
    })
}

/// A capability that must be present and supported.
///
/// Only a plugin that skips required-field checks gets past a missing one; it assumes the
/// most common capability, a single-node-writer mount.
pub fn required_capability(
    faults: &Faults,
    cap: &Option<VolumeCapability>,
    field: &str,
) -> Result<Capability, Status> {
    require_field(faults, cap.is_some(), field)?;
    match cap {
        Some(cap) => parse_capability(cap),
        None => Ok(Capability {
            access_type: AccessType::Mount,
            access_mode: AccessMode::SingleNodeWriter,
            fs_type: String::new(),
            mount_flags: Vec::new(),
            volume_mount_group: String::new(),
        }),
    }
}

/// The access type CreateVolume's capabilities ask for: all block or all mount. One volume
/// cannot be both, so a mix is INVALID_ARGUMENT (the spec's general "invalid or unsupported
/// field in the request").
pub fn requested_access_type(capabilities: &[Capability]) -> Result<AccessType, Status> {
    let block = capabilities
        .iter()
        .any(|c| c.access_type == AccessType::Block);
    let mount = capabilities
        .iter()
        .any(|c| c.access_type == AccessType::Mount);
    match (block, mount) {
        (true, true) => Err(Status::invalid_argument(
            "volume_capabilities mix the block and mount access types; a volume is one or \
             the other",
        )),
        (true, false) => Ok(AccessType::Block),
        _ => Ok(AccessType::Mount),
    }
}

/// Why a capability does not fit a volume, if it is of the other access type: a block
/// volume is only ever a device, a mount volume only ever a directory. Each caller picks the
/// code its error table gives "Exceeds capabilities" (the capabilities are not supported by
/// the volume).
pub fn access_type_mismatch(
    volume_id: &str,
    volume: AccessType,
    capability: &Capability,
) -> Option<String> {
    (capability.access_type != volume).then(|| {
        format!(
            "volume {volume_id:?} is a {} volume and cannot be used with the {} access type",
            volume.name(),
            capability.access_type.name()
        )
    })
}

/// A checked capacity range: `(required, limit)`, where 0 means "no bound".
pub fn capacity_bounds(range: Option<&CapacityRange>) -> Result<(i64, i64), Status> {
    let Some(range) = range else {
        return Ok((0, 0));
    };
    let (required, limit) = (range.required_bytes, range.limit_bytes);
    if required < 0 || limit < 0 {
        return Err(Status::invalid_argument(format!(
            "capacity_range must not be negative (required_bytes {required}, limit_bytes {limit})"
        )));
    }
    if limit > 0 && limit < required {
        return Err(Status::invalid_argument(format!(
            "capacity_range limit_bytes {limit} is smaller than required_bytes {required}"
        )));
    }
    Ok((required, limit))
}

/// One page of a listing, keyed and ordered by id.
///
/// Tokens are opaque to callers and name the last id returned (see `page_tokens.rs` for
/// their formats). The next page starts after that id, so deleting entries between pages
/// does not break a listing. A token this plugin could not have issued is ABORTED, as the
/// spec asks.
pub fn page<T>(
    faults: &Faults,
    variants: &Variants,
    items: Vec<(String, T)>,
    max_entries: i32,
    starting_token: &str,
) -> Result<(Vec<T>, String), Status> {
    if max_entries < 0 {
        return Err(Status::invalid_argument(format!(
            "max_entries must not be negative, got {max_entries}"
        )));
    }
    let after = match page_tokens::decode(variants, starting_token) {
        Some(after) => after,
        // list-bad-token-ok: start from the beginning instead of refusing the token.
        None if faults.has(Fault::ListBadTokenOk) => None,
        None => {
            return Err(Status::aborted(format!(
                "starting_token {starting_token:?} was not issued by this plugin"
            )));
        }
    };
    let mut rest: Vec<(String, T)> = match &after {
        Some(after) => items.into_iter().filter(|(id, _)| id > after).collect(),
        None => items,
    };
    // list-ignores-max-entries: return everything whatever the caller asked for.
    let limit = if max_entries == 0 || faults.has(Fault::ListIgnoresMaxEntries) {
        rest.len()
    } else {
        usize::try_from(max_entries).unwrap_or(usize::MAX)
    };
    let next_token = if rest.len() > limit {
        rest.truncate(limit);
        rest.last()
            .map(|(id, _)| page_tokens::encode(variants, id))
            .unwrap_or_default()
    } else {
        String::new()
    };
    Ok((rest.into_iter().map(|(_, item)| item).collect(), next_token))
}

#[cfg(test)]
mod tests {
    use nomad_conform_proto::csi::v1::volume_capability::{AccessMode as ProtoMode, BlockVolume};

    use tonic::Code;

    use super::*;
    use crate::variants::Variant;

    fn items(ids: &[&str]) -> Vec<(String, String)> {
        ids.iter()
            .map(|id| (id.to_string(), id.to_string()))
            .collect()
    }

    #[test]
    fn pages_follow_tokens_to_the_end() {
        let faults = Faults::default();
        for variants in [
            Variants::default(),
            Variants::new([Variant::OpaquePageTokens]),
        ] {
            let all = items(&["a", "b", "c", "d", "e"]);
            let (first, token) = page(&faults, &variants, all.clone(), 2, "").expect("page 1");
            assert_eq!(first, ["a", "b"]);
            let (second, token) = page(&faults, &variants, all.clone(), 2, &token).expect("page 2");
            assert_eq!(second, ["c", "d"]);
            let (third, token) = page(&faults, &variants, all.clone(), 2, &token).expect("page 3");
            assert_eq!(
                (third.as_slice(), token.as_str()),
                (&["e".to_string()][..], "")
            );
            let (everything, token) = page(&faults, &variants, all, 0, "").expect("unlimited");
            assert_eq!((everything.len(), token.as_str()), (5, ""));
        }
    }

    #[test]
    fn foreign_tokens_are_aborted() {
        let faults = Faults::default();
        let plain = Variants::default();
        for token in ["garbage", "999999", "n1.", "n1.zz", "n1.f"] {
            let err = page(&faults, &plain, items(&["a"]), 1, token).unwrap_err();
            assert_eq!(err.code(), Code::Aborted, "{token}");
        }
        let opaque = Variants::new([Variant::OpaquePageTokens]);
        for token in ["garbage", "n1.61", "AmE"] {
            let err = page(&faults, &opaque, items(&["a"]), 1, token).unwrap_err();
            assert_eq!(err.code(), Code::Aborted, "{token}");
        }
        let lenient = Faults::new([Fault::ListBadTokenOk]);
        assert!(page(&lenient, &plain, items(&["a"]), 1, "garbage").is_ok());
    }

    #[test]
    fn capabilities_are_checked() {
        let mount = VolumeCapability {
            access_type: Some(ProtoAccessType::Mount(MountVolume::default())),
            access_mode: Some(ProtoMode {
                mode: Mode::MultiNodeMultiWriter as i32,
            }),
        };
        assert_eq!(
            parse_capability(&mount).expect("supported").access_mode,
            AccessMode::MultiNodeMultiWriter
        );
        let block = VolumeCapability {
            access_type: Some(ProtoAccessType::Block(BlockVolume {})),
            ..mount.clone()
        };
        let parsed_block = parse_capability(&block).expect("block is supported");
        assert_eq!(parsed_block.access_type, AccessType::Block);
        let parsed_mount = parse_capability(&mount).expect("mount");
        assert_eq!(
            requested_access_type(&[parsed_block.clone(), parsed_block.clone()])
                .expect("all block"),
            AccessType::Block
        );
        assert_eq!(
            requested_access_type(std::slice::from_ref(&parsed_mount)).expect("mount"),
            AccessType::Mount
        );
        assert_eq!(
            requested_access_type(&[parsed_mount.clone(), parsed_block.clone()])
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );
        assert!(access_type_mismatch("v", AccessType::Block, &parsed_block).is_none());
        assert!(access_type_mismatch("v", AccessType::Mount, &parsed_block).is_some());
        let unknown_mode = VolumeCapability {
            access_mode: Some(ProtoMode { mode: 0 }),
            ..mount.clone()
        };
        assert_eq!(
            parse_capability(&unknown_mode).unwrap_err().code(),
            Code::InvalidArgument
        );
        let no_mode = VolumeCapability {
            access_mode: None,
            ..mount
        };
        assert_eq!(
            parse_capability(&no_mode).unwrap_err().code(),
            Code::InvalidArgument
        );
    }

    #[test]
    fn missing_required_fields_are_invalid_unless_the_checks_are_skipped() {
        let strict = Faults::default();
        let err = require(&strict, "", "volume_id").unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(err.message(), "volume_id is required");
        assert!(require(&strict, "v1", "volume_id").is_ok());
        assert_eq!(
            required_capability(&strict, &None, "volume_capability")
                .unwrap_err()
                .code(),
            Code::InvalidArgument
        );

        let trusting = Faults::new([Fault::SkipRequiredFieldChecks]);
        assert!(require(&trusting, "", "volume_id").is_ok());
        let assumed = required_capability(&trusting, &None, "volume_capability")
            .expect("a missing capability is assumed");
        assert_eq!(assumed.access_mode, AccessMode::SingleNodeWriter);
    }

    #[test]
    fn capacity_bounds_reject_nonsense() {
        let range = |r, l| CapacityRange {
            required_bytes: r,
            limit_bytes: l,
        };
        assert_eq!(capacity_bounds(None).expect("none"), (0, 0));
        assert_eq!(capacity_bounds(Some(&range(5, 10))).expect("ok"), (5, 10));
        assert!(capacity_bounds(Some(&range(10, 5))).is_err());
        assert!(capacity_bounds(Some(&range(-1, 0))).is_err());
    }
}
