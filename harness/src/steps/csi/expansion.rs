//! Steps of the expansion feature.

use cucumber::{given, then, when};

use super::common::unknown_id;
use super::requests::{self, Mode};
use super::{CsiWorld, StepResult, rpc};
use crate::plugins::csi::{Rpc, pb};

/// ControllerExpandVolume as Nomad sends it (nomad/csi_endpoint.go, expandVolume): with the
/// capability of the volume's claims when it has been claimed (`claimed`), and none for a volume
/// never claimed, whose access and attachment modes Nomad does not know.
async fn expand(w: &mut CsiWorld, id: &str, bytes: i64, claimed: Option<Mode>) -> Rpc {
    let req = pb::ControllerExpandVolumeRequest {
        volume_id: id.to_string(),
        capacity_range: requests::capacity(bytes),
        secrets: w.secrets(),
        volume_capability: claimed.map(|m| w.cap(m)),
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
    // The run's own size, which the plugin accepts: only the volume's absence is in question.
    let size = w.volume_size();
    let rpc = expand(w, &id, size, None).await;
    w.last = vec![rpc];
}

/// The volume to grow and the size it has (or was created with, if it reported none).
fn current(w: &CsiWorld) -> Result<(String, i64), String> {
    let v = w.vol(0)?;
    Ok((v.id.clone(), v.capacity.max(w.volume_size())))
}

/// One MiB: the smaller growth tried after OUT_OF_RANGE, whole sectors and pages.
const MIB: i64 = 1 << 20;

/// Grow volume `id` from `from` bytes as the expansion clauses need: to twice its size or,
/// when the plugin refuses that as OUT_OF_RANGE, by one MiB. The spec's ControllerExpandVolume
/// table lists "Unsupported capacity" (11 OUT_OF_RANGE), which a plugin with a maximum volume
/// size rightly answers, so a refused size is no failure. Returns the calls made (the last one
/// to be judged) and the size that call asked for; a skip when every growth was refused.
async fn grow(
    w: &mut CsiWorld,
    id: &str,
    from: i64,
    claimed: Option<Mode>,
) -> Result<(Vec<Rpc>, i64), String> {
    let mut calls = Vec::new();
    for bytes in [from * 2, from + MIB] {
        let rpc = expand(w, id, bytes, claimed).await;
        let refused = rpc.code == tonic::Code::OutOfRange;
        calls.push(rpc);
        if !refused {
            w.expanded_to = Some(bytes);
            return Ok((calls, bytes));
        }
    }
    Err(w.ctx().skip(format!(
        "ControllerExpandVolume refused both {} and {} bytes for a volume of {from} bytes as OUT_OF_RANGE, which the spec allows (\"Unsupported capacity\"): no growth the plugin accepts could be found, so expansion was not exercised; a smaller --test-volume-size leaves it room to grow",
        from * 2,
        from + MIB
    )))
}

#[when("the harness expands the volume to twice its size")]
async fn expands(w: &mut CsiWorld) -> StepResult {
    let (id, from) = current(w)?;
    let (calls, _) = grow(w, &id, from, None).await?;
    w.last = calls;
    Ok(())
}

#[given("the plugin has expanded the volume to twice its size")]
async fn has_expanded(w: &mut CsiWorld) -> StepResult {
    let (id, from) = current(w)?;
    let (calls, _) = grow(w, &id, from, None).await?;
    let rpc = calls.last().expect("grow makes a call");
    if rpc.ok() {
        return Ok(());
    }
    Err(w.precondition(
        "CSI-EXPAND-CONTROLLER",
        "ControllerExpandVolume succeeds",
        &rpc.summary(),
        &calls.iter().collect::<Vec<_>>(),
    ))
}

/// The size the clause's expansion asked for.
fn requested(w: &CsiWorld) -> Result<i64, String> {
    w.expanded_to
        .ok_or_else(|| w.ctx().harness_error("the volume was not expanded yet"))
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
    let bytes = requested(w)?;
    at_least(w, bytes, "the requested size")
}

#[when("the harness expands the volume to its original size")]
async fn expands_to_original(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let rpc = expand(w, &v.id, v.capacity.max(w.volume_size()), None).await;
    w.last = vec![rpc];
    Ok(())
}

#[then("the reported capacity is at least the size it was expanded to")]
async fn not_shrunk(w: &mut CsiWorld) -> StepResult {
    let bytes = requested(w)?;
    at_least(w, bytes, "a volume is never shrunk by a smaller request")
}

#[when("the harness expands a volume that does not exist on the node")]
async fn node_expands_unknown(w: &mut CsiWorld) {
    let req = pb::NodeExpandVolumeRequest {
        volume_id: unknown_id(w, "volume"),
        volume_path: w.mount_base().join("nowhere").display().to_string(),
        capacity_range: requests::capacity(w.volume_size()),
        volume_capability: Some(w.cap(Mode::SingleNodeWriter)),
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
    // NOT_FOUND is ignored by Nomad (plugins/csi/client.go, NodeExpandVolume: "ignorable").
    if rpc.ok()
        || rpc.code == tonic::Code::NotFound
        || (!online && rpc.code == tonic::Code::FailedPrecondition)
    {
        return Ok(());
    }
    let also = if online {
        " (the plugin advertises ONLINE expansion, so a published volume can grow)"
    } else {
        ", or FAILED_PRECONDITION (without ONLINE expansion a published volume may be refused as in use)"
    };
    Err(w.fail(
        &format!(
            "NodeExpandVolume of a published volume, after ControllerExpandVolume asked for it, succeeds or gets NOT_FOUND (which Nomad ignores){also}"
        ),
        &rpc.summary(),
        &w.last.iter().collect::<Vec<_>>(),
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
    let from = v.capacity.max(w.volume_size());
    // As Nomad: ControllerExpandVolume first (with the claim's capability), then
    // NodeExpandVolume for each claim only when the controller says it is needed
    // (nomad/csi_endpoint.go, expandVolume and nodeExpandVolume). A node-only run has no
    // controller here: the one elsewhere is taken to have asked for it.
    let (controller, bytes) = if w.node_only() {
        (Vec::new(), from * 2)
    } else if w.config().caps.controller.contains("EXPAND_VOLUME") {
        let (calls, bytes) = grow(w, &v.id, from, Some(v.mode)).await?;
        (calls, bytes)
    } else {
        return Err(w.ctx().skip(
            "the controller does not advertise EXPAND_VOLUME: Nomad expands volumes only through ControllerExpandVolume and never calls NodeExpandVolume on its own",
        ));
    };
    if let Some(c) = controller.last() {
        if !c.ok() {
            return Err(w.precondition(
                "CSI-EXPAND-CONTROLLER",
                "ControllerExpandVolume of the claimed volume succeeds",
                &c.summary(),
                &controller.iter().collect::<Vec<_>>(),
            ));
        }
        let required = c
            .response
            .as_ref()
            .and_then(|r| r.get("node_expansion_required"))
            .and_then(|b| b.as_bool())
            .unwrap_or(false);
        if !required {
            return Err(w.ctx().skip(
                "ControllerExpandVolume answered node_expansion_required = false: Nomad does not call NodeExpandVolume then",
            ));
        }
    }
    let staging = if w.stages() {
        w.staging_path(&v, false)?.display().to_string()
    } else {
        String::new()
    };
    let req = pb::NodeExpandVolumeRequest {
        volume_id: v.id.clone(),
        volume_path: alloc.target.display().to_string(),
        capacity_range: requests::capacity(bytes),
        staging_target_path: staging,
        volume_capability: Some(w.cap(v.mode)),
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
    w.last = controller.into_iter().chain(std::iter::once(rpc)).collect();
    Ok(())
}
