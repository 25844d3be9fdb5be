//! Steps shared by every CSI feature: outcomes of the latest call, deadlines, and the
//! required-field checks ("calls X without Y").

use cucumber::{then, when};
use tonic::Code;

use super::requests::{self, Mode, known_omission};
use super::{CsiWorld, StepResult, Vol, rpc};
use crate::plugins::csi::{Rpc, pb};
use crate::recorder::Hint;

#[then("the call succeeds")]
async fn call_succeeds(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.fail(&format!("{} succeeds", rpc.method), &rpc.summary(), &[rpc]))
}

#[then("the call succeeds or fails with NOT_FOUND")]
async fn call_ok_or_not_found(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    if ok_or_not_found(rpc) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "{} succeeds, or fails with NOT_FOUND (Nomad takes NOT_FOUND on a release call as done)",
            rpc.method
        ),
        &rpc.summary(),
        &[rpc],
    ))
}

#[then(regex = r"^the call fails with ([A-Z_]+) or ([A-Z_]+)$")]
async fn call_fails_with_either(w: &mut CsiWorld, a: String, b: String) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.code_name() == a || rpc.code_name() == b {
        return Ok(());
    }
    let seen = if rpc.ok() {
        format!("{} succeeded\nrequest: {}", rpc.method, rpc.request)
    } else {
        rpc.summary()
    };
    Err(w.fail(
        &format!(
            "{} fails with {a} or {b} (the spec allows either here)",
            rpc.method
        ),
        &seen,
        &[rpc],
    ))
}

#[then(regex = r"^the call fails with ([A-Z_]+)$")]
async fn call_fails_with(w: &mut CsiWorld, code: String) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.code_name() == code {
        return Ok(());
    }
    let seen = if rpc.ok() {
        format!("{} succeeded\nrequest: {}", rpc.method, rpc.request)
    } else {
        rpc.summary()
    };
    Err(w.fail(&format!("{} fails with {code}", rpc.method), &seen, &[rpc]))
}

#[then(regex = r#"^the call completes within the "([^"]+)" deadline$"#)]
async fn within_deadline(w: &mut CsiWorld, name: String) -> StepResult {
    let Some(deadline) = w.ctx().run.profile.csi.deadline(&name) else {
        return Err(w
            .ctx()
            .harness_error(format!("the profile has no CSI deadline called {name:?}")));
    };
    let rpc = w.last_call()?;
    if rpc.duration <= deadline && !rpc.timed_out {
        return Ok(());
    }
    w.ctx().hint(Hint::TimedOut);
    Err(w.fail(
        &format!(
            "{} answers within {} (the {name} deadline of profile {})",
            rpc.method,
            crate::fmt_duration(deadline),
            w.ctx().run.profile.name
        ),
        &format!(
            "it took {}: {}",
            crate::fmt_duration(rpc.duration),
            rpc.outcome()
        ),
        &[rpc],
    ))
}

#[then("the error has a message and no details")]
async fn error_without_details(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() {
        return Err(w.fail("an error status", "the call succeeded", &[rpc]));
    }
    let mut problems = Vec::new();
    if rpc.message.trim().is_empty() {
        problems.push("the message is empty".to_string());
    }
    if rpc.details_len > 0 {
        problems.push(format!("the details hold {} bytes", rpc.details_len));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "a human-readable message and an empty details list (the spec: details MUST be empty)",
        &format!("{}: {}", rpc.outcome(), problems.join("; ")),
        &[rpc],
    ))
}

/// The scenario's first volume, or a stand-in with an ID no plugin knows.
fn some_vol(w: &CsiWorld) -> Vol {
    w.vols.first().cloned().unwrap_or_else(|| Vol {
        name: format!("{}-missing", w.ctx().token),
        id: format!("{}-no-such-volume", w.ctx().token),
        capacity: w.volume_size(),
        mode: Mode::SingleNodeWriter,
        nomad_id: "vol-missing".into(),
        volume: None,
        range: None,
        borrowed: false,
    })
}

#[when(regex = r"^the harness calls (\w+) without (?:a |an )?(.+)$")]
async fn call_without(w: &mut CsiWorld, method: String, field: String) -> StepResult {
    if !known_omission(&method, &field) {
        return Err(w
            .ctx()
            .harness_error(format!("no way to call {method} without {field:?}")));
    }
    let rpc = if method.starts_with("Node") {
        node_call_without(w, &method, &field).await?
    } else if method.contains("Snapshot") {
        snapshot_call_without(w, &method, &field).await?
    } else {
        controller_call_without(w, &method, &field).await?
    };
    w.last = vec![rpc];
    Ok(())
}

/// A volume call of the controller (create, delete, validate, publish, expand, modify) with
/// `field` left out.
async fn controller_call_without(
    w: &mut CsiWorld,
    method: &str,
    field: &str,
) -> Result<Rpc, String> {
    let vol = some_vol(w);
    let secrets = w.secrets();
    Ok(match method {
        "CreateVolume" => {
            let name = w.unique_name("vol");
            w.create_sized(
                |w| {
                    let mut r = requests::create_volume(w, &name, Mode::SingleNodeWriter);
                    if field == "name" {
                        r.name.clear();
                    } else {
                        r.volume_capabilities.clear();
                    }
                    r
                },
                Mode::SingleNodeWriter,
            )
            .await
        }
        "DeleteVolume" => w.delete_volume("").await,
        "ValidateVolumeCapabilities" => {
            let mut r = pb::ValidateVolumeCapabilitiesRequest {
                volume_id: vol.id.clone(),
                volume_capabilities: vec![w.cap(vol.mode)],
                secrets,
                ..Default::default()
            };
            if field == "volume ID" {
                r.volume_id.clear();
            } else {
                r.volume_capabilities.clear();
            }
            rpc!(
                w,
                controller,
                controller,
                "Controller",
                "ValidateVolumeCapabilities",
                validate_volume_capabilities,
                r
            )
            .0
        }
        "ControllerPublishVolume" => {
            let mut r = requests::controller_publish(w, &vol, false)?;
            match field {
                "volume ID" => r.volume_id.clear(),
                "node ID" => r.node_id.clear(),
                _ => r.volume_capability = None,
            }
            w.controller_publish(r).await?.0
        }
        "ControllerUnpublishVolume" => {
            let r = requests::controller_unpublish(w, "")?;
            w.controller_unpublish(r).await
        }
        "ControllerExpandVolume" => {
            // An unclaimed volume: Nomad sends no capability (nomad/csi_endpoint.go,
            // expandVolume, finds no access mode to build one from).
            let mut r = pb::ControllerExpandVolumeRequest {
                volume_id: vol.id.clone(),
                // The volume's own size: valid but for the missing field, also for a plugin
                // with a maximum volume size.
                capacity_range: requests::capacity(vol.capacity.max(w.volume_size())),
                secrets,
                volume_capability: None,
            };
            if field == "volume ID" {
                r.volume_id.clear();
            } else {
                r.capacity_range = None;
            }
            rpc!(
                w,
                controller,
                controller,
                "Controller",
                "ControllerExpandVolume",
                controller_expand_volume,
                r
            )
            .0
        }
        "ControllerModifyVolume" => {
            let r = pb::ControllerModifyVolumeRequest {
                volume_id: String::new(),
                secrets,
                mutable_parameters: w.config().mutable_parameters.clone().unwrap_or_default(),
            };
            rpc!(
                w,
                controller,
                controller,
                "Controller",
                "ControllerModifyVolume",
                controller_modify_volume,
                r
            )
            .0
        }
        _ => return Err(w.ctx().harness_error(format!("unknown method {method}"))),
    })
}

/// A node call with `field` left out.
async fn node_call_without(w: &mut CsiWorld, method: &str, field: &str) -> Result<Rpc, String> {
    let vol = some_vol(w);
    Ok(match method {
        "NodeStageVolume" => {
            let staging = w.staging_path(&vol, false)?;
            let mut r =
                requests::node_stage(w, &vol, &staging.display().to_string(), Default::default());
            match field {
                "volume ID" => r.volume_id.clear(),
                "staging target path" => r.staging_target_path.clear(),
                _ => r.volume_capability = None,
            }
            w.node_stage(r).await?
        }
        "NodeUnstageVolume" => {
            let staging = w.staging_path(&vol, false)?;
            let mut r = requests::node_unstage(&vol.id, &staging);
            if field == "volume ID" {
                r.volume_id.clear();
            } else {
                r.staging_target_path.clear();
            }
            w.node_unstage(r).await
        }
        "NodePublishVolume" => {
            let staging = if w.stages() {
                w.staging_path(&vol, false)?.display().to_string()
            } else {
                String::new()
            };
            let alloc = w.new_alloc_id();
            let target = w.target_path(&alloc, &vol, false)?;
            let mut r = requests::node_publish(
                w,
                &vol,
                &staging,
                &target.display().to_string(),
                false,
                Default::default(),
            );
            match field {
                "volume ID" => r.volume_id.clear(),
                "target path" => r.target_path.clear(),
                _ => r.volume_capability = None,
            }
            w.node_publish(r).await?
        }
        "NodeUnpublishVolume" => {
            let alloc = w.new_alloc_id();
            let target = w.target_path(&alloc, &vol, false)?;
            let mut r = requests::node_unpublish(&vol.id, &target);
            if field == "volume ID" {
                r.volume_id.clear();
            } else {
                r.target_path.clear();
            }
            w.node_unpublish(r).await
        }
        "NodeGetVolumeStats" => {
            let alloc = w.new_alloc_id();
            let target = w.target_path(&alloc, &vol, false)?;
            let mut r = requests::volume_stats(&vol.id, &target, "");
            if field == "volume ID" {
                r.volume_id.clear();
            } else {
                r.volume_path.clear();
            }
            rpc!(
                w,
                node,
                node,
                "Node",
                "NodeGetVolumeStats",
                node_get_volume_stats,
                r
            )
            .0
        }
        "NodeExpandVolume" => {
            let alloc = w.new_alloc_id();
            let target = w.target_path(&alloc, &vol, false)?;
            let mut r = pb::NodeExpandVolumeRequest {
                volume_id: vol.id.clone(),
                volume_path: target.display().to_string(),
                // The volume's own size: valid but for the missing field, also for a plugin
                // with a maximum volume size.
                capacity_range: requests::capacity(vol.capacity.max(w.volume_size())),
                volume_capability: Some(w.cap(vol.mode)),
                ..Default::default()
            };
            if field == "volume ID" {
                r.volume_id.clear();
            } else {
                r.volume_path.clear();
            }
            rpc!(
                w,
                node,
                node,
                "Node",
                "NodeExpandVolume",
                node_expand_volume,
                r
            )
            .0
        }
        _ => return Err(w.ctx().harness_error(format!("unknown method {method}"))),
    })
}

/// A snapshot or group snapshot call with `field` left out.
async fn snapshot_call_without(w: &mut CsiWorld, method: &str, field: &str) -> Result<Rpc, String> {
    let vol = some_vol(w);
    let secrets = w.secrets();
    Ok(match method {
        "CreateSnapshot" => {
            let mut r = pb::CreateSnapshotRequest {
                source_volume_id: vol.id.clone(),
                name: w.unique_name("snap"),
                secrets,
                parameters: w.config().snapshot_parameters.clone(),
            };
            if field == "name" {
                r.name.clear();
            } else {
                r.source_volume_id.clear();
            }
            w.create_snapshot(r).await
        }
        "DeleteSnapshot" => w.delete_snapshot("").await,
        "GetSnapshot" => {
            let r = pb::GetSnapshotRequest {
                snapshot_id: String::new(),
                secrets,
            };
            rpc!(
                w,
                controller,
                controller,
                "Controller",
                "GetSnapshot",
                get_snapshot,
                r
            )
            .0
        }
        "CreateVolumeGroupSnapshot" => {
            let mut r = pb::CreateVolumeGroupSnapshotRequest {
                name: w.unique_name("group"),
                source_volume_ids: vec![vol.id.clone()],
                secrets,
                parameters: w.config().snapshot_parameters.clone(),
            };
            if field == "name" {
                r.name.clear();
            } else {
                r.source_volume_ids.clear();
            }
            w.create_group_snapshot(r).await.0
        }
        "GetVolumeGroupSnapshot" => {
            let r = pb::GetVolumeGroupSnapshotRequest {
                secrets,
                ..Default::default()
            };
            rpc!(
                w,
                controller,
                group,
                "GroupController",
                "GetVolumeGroupSnapshot",
                get_volume_group_snapshot,
                r
            )
            .0
        }
        "DeleteVolumeGroupSnapshot" => w.delete_group_snapshot("", Vec::new()).await,
        _ => return Err(w.ctx().harness_error(format!("unknown method {method}"))),
    })
}

/// A volume ID no plugin knows.
pub fn unknown_id(w: &CsiWorld, what: &str) -> String {
    format!("{}-no-such-{what}", w.ctx().token)
}

/// Accept OK or NOT_FOUND (Nomad treats NOT_FOUND as success on release).
pub fn ok_or_not_found(rpc: &Rpc) -> bool {
    matches!(rpc.code, Code::Ok | Code::NotFound)
}

/// A plugin without PUBLISH_READONLY may refuse `readonly = true` in ControllerPublishVolume:
/// the spec says the CO MUST send `readonly = false` to such a plugin, so the request is outside
/// its contract, and the spec's own codes for it are INVALID_ARGUMENT (an unsupported field
/// value) and ALREADY_EXISTS (a volume published "but incompatible with the specified
/// volume_capability or readonly flag", ControllerPublishVolume Errors). Nomad sends it for every
/// read claim all the same (nomad/csi_endpoint.go, Claim), so the read claim cannot be judged:
/// skipped, saying so.
pub(super) fn readonly_refusal_allowed(w: &CsiWorld, calls: &[Rpc]) -> StepResult {
    let refused = calls.iter().find(|c| {
        c.method == "ControllerPublishVolume"
            && c.request.get("readonly").and_then(|r| r.as_bool()) == Some(true)
            && matches!(c.code, Code::InvalidArgument | Code::AlreadyExists)
    });
    match refused {
        Some(c) if !w.config().caps.controller.contains("PUBLISH_READONLY") => {
            Err(w.ctx().skip(format!(
                "ControllerPublishVolume with readonly = true was refused ({}), which the spec allows a plugin without PUBLISH_READONLY (the CO MUST send readonly = false to it; INVALID_ARGUMENT and ALREADY_EXISTS are the spec's codes for that request); Nomad sends it for every read claim all the same (nomad/csi_endpoint.go, Claim), so read claims of this plugin fail under Nomad",
                c.outcome()
            )))
        }
        _ => Ok(()),
    }
}
