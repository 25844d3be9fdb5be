//! Steps of the node feature, and the claim building blocks the nomad feature reuses.

use std::collections::HashMap;
use std::path::Path;

use cucumber::{given, then, when};

use super::common::unknown_id;
use super::requests;
use super::{Alloc, CsiWorld, StepResult, is_mounted, rpc};
use crate::plugins::csi::{Rpc, pb};

#[when("the harness calls NodeGetCapabilities")]
async fn get_capabilities(w: &mut CsiWorld) {
    let (rpc, _) = rpc!(
        w,
        node,
        node,
        "Node",
        "NodeGetCapabilities",
        node_get_capabilities,
        pb::NodeGetCapabilitiesRequest {}
    );
    w.last = vec![rpc];
}

#[when("the harness calls NodeGetInfo")]
async fn get_info(w: &mut CsiWorld) {
    let (rpc, _) = rpc!(
        w,
        node,
        node,
        "Node",
        "NodeGetInfo",
        node_get_info,
        pb::NodeGetInfoRequest {}
    );
    w.last = vec![rpc];
}

fn info_field(w: &CsiWorld) -> Result<(serde_json::Value, &Rpc), String> {
    let rpc = w.last_call()?;
    match &rpc.response {
        Some(r) => Ok((r.clone(), rpc)),
        None => Err(w.fail("NodeGetInfo succeeds", &rpc.summary(), &[rpc])),
    }
}

#[then("the node ID is not empty and at most 256 bytes long")]
async fn node_id_ok(w: &mut CsiWorld) -> StepResult {
    let (r, rpc) = info_field(w)?;
    let id = r
        .get("node_id")
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    if !id.is_empty() && id.len() <= 256 {
        return Ok(());
    }
    let seen = if id.is_empty() {
        "node_id is empty: Nomad refuses it (\"plugin failed to return nodeid\") and can never publish to this node".to_string()
    } else {
        format!("node_id is {} bytes long", id.len())
    };
    Err(w.fail("a node_id of 1 to 256 bytes", &seen, &[rpc]))
}

#[then("max_volumes_per_node is not negative")]
async fn max_volumes_ok(w: &mut CsiWorld) -> StepResult {
    let (r, rpc) = info_field(w)?;
    let n = r
        .get("max_volumes_per_node")
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    if n >= 0 {
        return Ok(());
    }
    Err(w.fail(
        "max_volumes_per_node >= 0",
        &format!("max_volumes_per_node = {n}"),
        &[rpc],
    ))
}

#[then("a topology is reported only with the VOLUME_ACCESSIBILITY_CONSTRAINTS capability")]
async fn topology_ok(w: &mut CsiWorld) -> StepResult {
    let (r, rpc) = info_field(w)?;
    let has_topology = r.get("accessible_topology").is_some_and(|t| !t.is_null());
    let advertised = w
        .config()
        .caps
        .plugin
        .contains("VOLUME_ACCESSIBILITY_CONSTRAINTS");
    if !has_topology || advertised {
        return Ok(());
    }
    Err(w.fail(
        "accessible_topology only from a plugin with the VOLUME_ACCESSIBILITY_CONSTRAINTS capability",
        &format!("accessible_topology = {} without the capability", r["accessible_topology"]),
        &[rpc],
    ))
}

/// The publish context the controller returned, as a map.
pub fn context(w: &CsiWorld) -> HashMap<String, String> {
    w.publish_context
        .as_ref()
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

#[given("the volume is published to the node")]
pub(super) async fn published_to_node(w: &mut CsiWorld) -> StepResult {
    publish_to_node(w, false).await
}

#[given("the volume is published to the node read-only")]
async fn published_to_node_readonly(w: &mut CsiWorld) -> StepResult {
    publish_to_node(w, true).await
}

/// ControllerPublishVolume of the first volume, when the controller publishes; `readonly` as a
/// read claim sends it.
async fn publish_to_node(w: &mut CsiWorld, readonly: bool) -> StepResult {
    if !w.controller_publishes() {
        return Ok(());
    }
    let v = w.vol(0)?.clone();
    let req = requests::controller_publish(w, &v, readonly)?;
    let (rpc, resp) = w.controller_publish(req).await?;
    if readonly {
        super::common::readonly_refusal_allowed(w, std::slice::from_ref(&rpc))?;
    }
    if !rpc.ok() {
        return Err(w.precondition(
            "CSI-NOMAD-CLAIM",
            "ControllerPublishVolume succeeds",
            &rpc.summary(),
            &[&rpc],
        ));
    }
    w.publish_context = resp.and_then(|r| serde_json::to_value(r.publish_context).ok());
    Ok(())
}

/// NodeStageVolume of volume `i` at Nomad's staging path.
pub async fn stage(w: &mut CsiWorld, i: usize) -> Result<Rpc, String> {
    stage_as(w, i, false).await
}

/// NodeStageVolume of volume `i` at Nomad's staging path of a read (`ro-`) or write usage.
pub async fn stage_as(w: &mut CsiWorld, i: usize, readonly: bool) -> Result<Rpc, String> {
    let v = w.vol(i)?.clone();
    let staging = w.staging_path(&v, readonly)?;
    let req = requests::node_stage(w, &v, &staging.display().to_string(), context(w));
    w.node_stage(req).await
}

#[given("the plugin has staged the volume")]
async fn has_staged(w: &mut CsiWorld) -> StepResult {
    let rpc = stage(w, 0).await?;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.precondition(
        "CSI-NOMAD-CLAIM",
        "NodeStageVolume succeeds",
        &rpc.summary(),
        &[&rpc],
    ))
}

#[given("the volume is staged for the node")]
pub(super) async fn staged_for_node(w: &mut CsiWorld) -> StepResult {
    if !w.stages() {
        return Ok(());
    }
    has_staged(w).await
}

#[given("the volume is staged for the node read-only")]
async fn staged_for_node_readonly(w: &mut CsiWorld) -> StepResult {
    if !w.stages() {
        return Ok(());
    }
    let rpc = stage_as(w, 0, true).await?;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.precondition(
        "CSI-NOMAD-CLAIM",
        "NodeStageVolume at the read claim's ro- staging path succeeds",
        &rpc.summary(),
        &[&rpc],
    ))
}

#[when("the harness stages the volume again")]
async fn stages_again(w: &mut CsiWorld) -> StepResult {
    let rpc = stage(w, 0).await?;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness unstages the volume")]
async fn unstages(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let staging = w.staging_path(&v, false)?;
    let req = requests::node_unstage(&v.id, &staging);
    let rpc = w.node_unstage(req).await;
    w.last = vec![rpc];
    Ok(())
}

/// NodePublishVolume of volume `i` for a new allocation; returns the call and the allocation.
pub async fn publish_for_alloc(
    w: &mut CsiWorld,
    i: usize,
    readonly: bool,
    with_staging: bool,
) -> Result<(Rpc, Alloc), String> {
    let v = w.vol(i)?.clone();
    let staging = if with_staging && w.stages() {
        w.staging_path(&v, readonly)?.display().to_string()
    } else {
        String::new()
    };
    let id = w.new_alloc_id();
    let target = w.target_path(&id, &v, readonly)?;
    let req = requests::node_publish(
        w,
        &v,
        &staging,
        &target.display().to_string(),
        readonly,
        context(w),
    );
    let rpc = w.node_publish(req).await?;
    Ok((
        rpc,
        Alloc {
            id,
            target,
            readonly,
        },
    ))
}

#[when("the harness publishes the volume for an allocation")]
async fn publishes_for_alloc(w: &mut CsiWorld) -> StepResult {
    let (rpc, alloc) = publish_for_alloc(w, 0, false, true).await?;
    w.allocs.push(alloc);
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness publishes the volume for an allocation without a staging path")]
async fn publishes_without_staging(w: &mut CsiWorld) -> StepResult {
    let (rpc, alloc) = publish_for_alloc(w, 0, false, false).await?;
    w.allocs.push(alloc);
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness publishes the volume read-only for an allocation")]
async fn publishes_readonly(w: &mut CsiWorld) -> StepResult {
    let (rpc, alloc) = publish_for_alloc(w, 0, true, true).await?;
    w.allocs.push(alloc);
    w.last = vec![rpc];
    Ok(())
}

#[given("the plugin has published the volume for an allocation")]
pub(super) async fn has_published_for_alloc(w: &mut CsiWorld) -> StepResult {
    let (rpc, alloc) = publish_for_alloc(w, 0, false, true).await?;
    if !rpc.ok() {
        return Err(w.precondition(
            "CSI-NOMAD-CLAIM",
            "NodePublishVolume succeeds",
            &rpc.summary(),
            &[&rpc],
        ));
    }
    w.allocs.push(alloc);
    Ok(())
}

#[when("the harness publishes the volume for the same allocation again")]
async fn publishes_same_again(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let alloc = w
        .allocs
        .first()
        .cloned()
        .ok_or_else(|| w.ctx().harness_error("no allocation yet"))?;
    let staging = if w.stages() {
        w.staging_path(&v, alloc.readonly)?.display().to_string()
    } else {
        String::new()
    };
    let req = requests::node_publish(
        w,
        &v,
        &staging,
        &alloc.target.display().to_string(),
        alloc.readonly,
        context(w),
    );
    let rpc = w.node_publish(req).await?;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness publishes the volume for a second allocation")]
async fn publishes_second(w: &mut CsiWorld) -> StepResult {
    publishes_for_alloc(w).await
}

#[when("the harness publishes the volume for another allocation")]
async fn publishes_another(w: &mut CsiWorld) -> StepResult {
    publishes_for_alloc(w).await
}

fn first_alloc(w: &CsiWorld) -> Result<Alloc, String> {
    w.allocs
        .first()
        .cloned()
        .ok_or_else(|| w.ctx().harness_error("no allocation yet"))
}

/// The file a clause writes into a volume to find it again, named after the clause's token.
pub fn marker_name(token: &str) -> String {
    format!("nomad-conform-{token}.txt")
}

/// Write the clause's marker file into the directory `target` (what a task does with its
/// volume).
pub fn write_marker(target: &Path, token: &str) -> Result<(), String> {
    let file = target.join(marker_name(token));
    if !target.is_dir() {
        return Err(format!(
            "{} is {}, not a directory a task can write into",
            target.display(),
            if target.symlink_metadata().is_ok() {
                "there"
            } else {
                "missing"
            }
        ));
    }
    std::fs::write(&file, token).map_err(|e| format!("writing {} failed: {e}", file.display()))
}

/// Whether the marker written earlier (at another target of the same volume) is in `target`;
/// when it is, it is removed again (the volume may be the user's own).
pub fn take_marker(target: &Path, token: &str) -> Result<(), String> {
    let file = target.join(marker_name(token));
    match std::fs::read_to_string(&file) {
        Ok(s) if s == token => {
            let _ = std::fs::remove_file(&file);
            Ok(())
        }
        Ok(s) => Err(format!(
            "{} holds {s:?}, not what was written",
            file.display()
        )),
        Err(e) => Err(format!(
            "{} is not there ({e}): the new target does not show what was written to the volume",
            file.display()
        )),
    }
}

#[then("a file can be written at the target path")]
async fn file_writable(w: &mut CsiWorld) -> StepResult {
    let alloc = first_alloc(w)?;
    let token = w.ctx().token.clone();
    write_marker(&alloc.target, &token).map_err(|e| {
        let rpc = w.last_call().ok();
        w.fail(
            "after NodePublishVolume the target path is a directory holding the volume, writable (Nomad bind-mounts it into the tasks)",
            &e,
            &rpc.into_iter().collect::<Vec<_>>(),
        )
    })
}

#[then("the new target path holds the file written at the first")]
async fn file_kept(w: &mut CsiWorld) -> StepResult {
    let alloc = w
        .allocs
        .get(1)
        .cloned()
        .ok_or_else(|| w.ctx().harness_error("no second allocation"))?;
    let token = w.ctx().token.clone();
    take_marker(&alloc.target, &token).map_err(|e| {
        let calls: Vec<&Rpc> = w.last.iter().collect();
        w.fail(
            "a file written at the first target is there at a new target of the same volume (both show the volume, not a directory of their own)",
            &e,
            &calls,
        )
    })
}

#[then("the target path refuses writes")]
async fn target_readonly(w: &mut CsiWorld) -> StepResult {
    let alloc = first_alloc(w)?;
    let probe = alloc
        .target
        .join(format!("nomad-conform-{}.txt", w.ctx().token));
    match std::fs::write(&probe, "x") {
        Err(e) if e.raw_os_error() == Some(nix::libc::EROFS) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(()),
        other => {
            let _ = std::fs::remove_file(&probe);
            let rpc = w.last_call()?;
            Err(w.fail(
                "a volume published with readonly=true cannot be written at the target path",
                &match other {
                    Ok(()) => format!("writing {} succeeded", probe.display()),
                    Err(e) => format!("writing {} failed with {e}, not EROFS", probe.display()),
                },
                &[rpc],
            ))
        }
    }
}

/// NodeUnpublishVolume of `alloc`'s target, then the target directory removed, as Nomad does.
pub async fn unpublish_alloc(w: &mut CsiWorld, i: usize, alloc: &Alloc) -> Result<Rpc, String> {
    let v = w.vol(i)?.clone();
    let req = requests::node_unpublish(&v.id, &alloc.target);
    Ok(w.node_unpublish(req).await)
}

#[when("the harness unpublishes the volume for the allocation")]
async fn unpublishes_alloc(w: &mut CsiWorld) -> StepResult {
    let alloc = first_alloc(w)?;
    let rpc = unpublish_alloc(w, 0, &alloc).await?;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness unpublishes the volume for an allocation")]
async fn unpublishes_unpublished(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let id = w.new_alloc_id();
    let target = w.target_path(&id, &v, false)?;
    let alloc = Alloc {
        id,
        target,
        readonly: false,
    };
    let rpc = unpublish_alloc(w, 0, &alloc).await?;
    w.last = vec![rpc];
    Ok(())
}

#[then("the target path is no longer mounted")]
async fn target_unmounted(w: &mut CsiWorld) -> StepResult {
    let alloc = first_alloc(w)?;
    let mounted = is_mounted(&alloc.target).map_err(|e| {
        w.ctx().harness_error(format!(
            "cannot tell whether {} is mounted: {e}",
            alloc.target.display()
        ))
    })?;
    if !mounted {
        return Ok(());
    }
    let rpc = w.last_call()?;
    Err(w.fail(
        "after NodeUnpublishVolume nothing is mounted at the target path",
        &format!("{} is still a mount point", alloc.target.display()),
        &[rpc],
    ))
}

#[then("the target path is gone")]
async fn target_gone(w: &mut CsiWorld) -> StepResult {
    let alloc = first_alloc(w)?;
    if alloc.target.symlink_metadata().is_err() {
        return Ok(());
    }
    let rpc = w.last_call()?;
    Err(w.fail(
        "NodeUnpublishVolume deletes the target it created (the spec: the SP MUST delete the file or directory at target_path)",
        &format!("{} still exists", alloc.target.display()),
        &[rpc],
    ))
}

#[when("the harness asks for the stats of a volume that does not exist")]
async fn stats_unknown(w: &mut CsiWorld) {
    let req = pb::NodeGetVolumeStatsRequest {
        volume_id: unknown_id(w, "volume"),
        volume_path: w.mount_base().join("nowhere").display().to_string(),
        staging_target_path: String::new(),
    };
    let (rpc, _) = rpc!(
        w,
        node,
        node,
        "Node",
        "NodeGetVolumeStats",
        node_get_volume_stats,
        req
    );
    w.last = vec![rpc];
}

#[when("the harness asks for the stats of the volume at its target path")]
async fn stats(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let alloc = first_alloc(w)?;
    let staging = if w.stages() {
        w.staging_path(&v, false)?.display().to_string()
    } else {
        String::new()
    };
    let req = requests::volume_stats(&v.id, &alloc.target, &staging);
    let (rpc, _) = rpc!(
        w,
        node,
        node,
        "Node",
        "NodeGetVolumeStats",
        node_get_volume_stats,
        req
    );
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness asks for the stats of the volume at a path where it is not published")]
async fn stats_wrong_path(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    // Another allocation's target for the same volume: Nomad's layout, never published.
    let other = w.new_alloc_id();
    let target = w.target_path(&other, &v, false)?;
    let req = requests::volume_stats(&v.id, &target, "");
    let (rpc, _) = rpc!(
        w,
        node,
        node,
        "Node",
        "NodeGetVolumeStats",
        node_get_volume_stats,
        req
    );
    w.last = vec![rpc];
    Ok(())
}

#[then("every usage entry has a unit and a total, and nothing negative")]
async fn usage_ok(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    let usage = rpc
        .response
        .as_ref()
        .and_then(|r| r.get("usage"))
        .and_then(|u| u.as_array())
        .cloned()
        .unwrap_or_default();
    // usage is OPTIONAL; each entry's total and unit are REQUIRED, nothing may be negative.
    let problems: Vec<String> = usage
        .iter()
        .enumerate()
        .flat_map(|(i, u)| {
            let num = |f: &str| u.get(f).and_then(|v| v.as_i64()).unwrap_or(0);
            let mut p = Vec::new();
            for f in ["available", "total", "used"] {
                if num(f) < 0 {
                    p.push(format!("usage[{i}].{f} is {}", num(f)));
                }
            }
            if num("total") == 0 {
                p.push(format!("usage[{i}] has no total"));
            }
            if u.get("unit").and_then(|v| v.as_i64()).unwrap_or(0) == 0 {
                p.push(format!("usage[{i}] has no unit (UNKNOWN)"));
            }
            p
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "each usage entry sets unit and total, and no count is negative (the spec: total and unit are REQUIRED, the counts MUST NOT be negative)",
        &format!(
            "{}\nusage: {}",
            problems.join("; "),
            serde_json::Value::Array(usage)
        ),
        &[rpc],
    ))
}

// ---- a volume that does not exist ---------------------------------------------------------------

/// A volume no plugin knows, with Nomad's paths named after it.
fn unknown_vol(w: &CsiWorld) -> super::Vol {
    super::Vol {
        name: format!("{}-unknown", w.ctx().token),
        id: unknown_id(w, "volume"),
        capacity: w.volume_size(),
        mode: requests::Mode::SingleNodeWriter,
        nomad_id: "vol-unknown".into(),
        volume: None,
        range: None,
        borrowed: false,
    }
}

#[when("the harness stages a volume that does not exist")]
async fn stages_unknown(w: &mut CsiWorld) -> StepResult {
    let v = unknown_vol(w);
    let staging = w.staging_path(&v, false)?;
    let req = requests::node_stage(w, &v, &staging.display().to_string(), HashMap::new());
    let rpc = w.node_stage(req).await?;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness unstages a volume that does not exist")]
async fn unstages_unknown(w: &mut CsiWorld) -> StepResult {
    let v = unknown_vol(w);
    let staging = w.staging_path(&v, false)?;
    let rpc = w
        .node_unstage(requests::node_unstage(&v.id, &staging))
        .await;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness unpublishes a volume that does not exist")]
async fn unpublishes_unknown(w: &mut CsiWorld) -> StepResult {
    let v = unknown_vol(w);
    let alloc = w.new_alloc_id();
    // Nomad's target for it, which is not there (Nomad creates only the parent): a release
    // whose target is already gone.
    let target = w.target_path(&alloc, &v, false)?;
    let rpc = w
        .node_unpublish(requests::node_unpublish(&v.id, &target))
        .await;
    w.last = vec![rpc];
    Ok(())
}
