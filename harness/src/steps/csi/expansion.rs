//! Steps of the expansion feature.

use cucumber::{given, then, when};

use super::common::unknown_id;
use super::requests::{self, Mode};
use super::{CsiWorld, StepResult, rpc};
use crate::plugins::csi::{Rpc, pb};

async fn expand(w: &mut CsiWorld, id: &str, bytes: i64) -> Rpc {
    let req = pb::ControllerExpandVolumeRequest {
        volume_id: id.to_string(),
        capacity_range: requests::capacity(bytes),
        secrets: w.secrets(),
        volume_capability: Some(Mode::SingleNodeWriter.capability()),
    };
    rpc!(
        w,
        controller,
        controller,
        "Controller",
        "ControllerExpandVolume",
        controller_expand_volume,
        req
    )
    .0
}

#[when("the harness expands a volume that does not exist")]
async fn expands_unknown(w: &mut CsiWorld) {
    let id = unknown_id(w, "volume");
    let size = w.config().volume_size;
    let rpc = expand(w, &id, size * 2).await;
    w.last = vec![rpc];
}

fn doubled(w: &CsiWorld) -> Result<(String, i64), String> {
    let v = w.vol(0)?;
    Ok((v.id.clone(), v.capacity.max(w.config().volume_size) * 2))
}

#[when("the harness expands the volume to twice its size")]
async fn expands(w: &mut CsiWorld) -> StepResult {
    let (id, bytes) = doubled(w)?;
    let rpc = expand(w, &id, bytes).await;
    w.last = vec![rpc];
    Ok(())
}

#[given("the plugin has expanded the volume to twice its size")]
async fn has_expanded(w: &mut CsiWorld) -> StepResult {
    let (id, bytes) = doubled(w)?;
    let rpc = expand(w, &id, bytes).await;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.precondition(
        "CSI-EXPAND-CONTROLLER",
        "ControllerExpandVolume succeeds",
        &rpc.summary(),
        &[&rpc],
    ))
}

fn reported(rpc: &Rpc) -> i64 {
    rpc.response
        .as_ref()
        .and_then(|r| r.get("capacity_bytes"))
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
}

fn at_least(w: &CsiWorld, bytes: i64, what: &str) -> StepResult {
    let rpc = w.last_call()?;
    if !rpc.ok() {
        return Err(w.fail(&format!("{} succeeds", rpc.method), &rpc.summary(), &[rpc]));
    }
    let got = reported(rpc);
    if got >= bytes {
        return Ok(());
    }
    Err(w.fail(
        &format!("capacity_bytes of at least {bytes} ({what})"),
        &format!("capacity_bytes = {got}"),
        &[rpc],
    ))
}

#[then("the reported capacity is at least the requested size")]
async fn at_least_requested(w: &mut CsiWorld) -> StepResult {
    let (_, bytes) = doubled(w)?;
    at_least(w, bytes, "the requested size")
}

#[when("the harness expands the volume to its original size")]
async fn expands_to_original(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let rpc = expand(w, &v.id, v.capacity.max(w.config().volume_size)).await;
    w.last = vec![rpc];
    Ok(())
}

#[then("the reported capacity is at least twice the original size")]
async fn not_shrunk(w: &mut CsiWorld) -> StepResult {
    let (_, bytes) = doubled(w)?;
    at_least(w, bytes, "a volume is never shrunk by a smaller request")
}

#[when("the harness expands a volume that does not exist on the node")]
async fn node_expands_unknown(w: &mut CsiWorld) {
    let req = pb::NodeExpandVolumeRequest {
        volume_id: unknown_id(w, "volume"),
        volume_path: w.mount_base().join("nowhere").display().to_string(),
        capacity_range: requests::capacity(w.config().volume_size * 2),
        volume_capability: Some(Mode::SingleNodeWriter.capability()),
        ..Default::default()
    };
    let (rpc, _) = rpc!(
        w,
        node,
        node,
        "Node",
        "NodeExpandVolume",
        node_expand_volume,
        req
    );
    w.last = vec![rpc];
}

#[then("the call succeeds, or fails with FAILED_PRECONDITION without online expansion")]
async fn node_expand_ok(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    let online = w.config().caps.plugin.contains("VOLUME_EXPANSION_ONLINE");
    if rpc.ok() || (!online && rpc.code == tonic::Code::FailedPrecondition) {
        return Ok(());
    }
    let also = if online {
        " (the plugin advertises ONLINE expansion, so a published volume can grow)"
    } else {
        ", or FAILED_PRECONDITION (without ONLINE expansion a published volume may be refused as in use)"
    };
    Err(w.fail(
        &format!("NodeExpandVolume of a published volume succeeds{also}"),
        &rpc.summary(),
        &[rpc],
    ))
}

#[when("the harness expands the published volume on the node")]
async fn node_expands(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let alloc = w
        .allocs
        .first()
        .cloned()
        .ok_or_else(|| w.ctx().harness_error("no allocation yet"))?;
    // As Nomad: the controller first, then the node only when the controller says so
    // (nomad/csi_endpoint.go, expandVolume).
    let controller = if w.config().caps.controller.contains("EXPAND_VOLUME") {
        Some(expand(w, &v.id, v.capacity.max(w.config().volume_size) * 2).await)
    } else {
        None
    };
    if let Some(c) = &controller
        && c.ok()
        && !c
            .response
            .as_ref()
            .and_then(|r| r.get("node_expansion_required"))
            .and_then(|b| b.as_bool())
            .unwrap_or(false)
    {
        return Err(w.ctx().skip(
            "ControllerExpandVolume answered node_expansion_required = false: Nomad does not call NodeExpandVolume then",
        ));
    }
    let staging = if w.stages() {
        w.staging_path(&v, false)?.display().to_string()
    } else {
        String::new()
    };
    let req = pb::NodeExpandVolumeRequest {
        volume_id: v.id.clone(),
        volume_path: alloc.target.display().to_string(),
        capacity_range: requests::capacity(v.capacity.max(w.config().volume_size) * 2),
        staging_target_path: staging,
        volume_capability: Some(v.mode.capability()),
        ..Default::default()
    };
    let (rpc, _) = rpc!(
        w,
        node,
        node,
        "Node",
        "NodeExpandVolume",
        node_expand_volume,
        req
    );
    w.last = controller
        .into_iter()
        .filter(|c| !c.ok())
        .chain(std::iter::once(rpc))
        .collect();
    Ok(())
}
