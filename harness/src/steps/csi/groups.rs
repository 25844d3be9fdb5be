//! Steps of the group snapshots feature (the GroupController service).

use cucumber::{given, then, when};

use super::common::unknown_id;
use super::{CsiWorld, GroupSnap, StepResult, rpc};
use crate::plugins::csi::{Rpc, pb};

#[when("the harness calls GroupControllerGetCapabilities")]
async fn get_capabilities(w: &mut CsiWorld) {
    let (rpc, _) = rpc!(
        w,
        controller,
        group,
        "GroupController",
        "GroupControllerGetCapabilities",
        group_controller_get_capabilities,
        pb::GroupControllerGetCapabilitiesRequest {}
    );
    w.last = vec![rpc];
}

fn group_request(
    w: &CsiWorld,
    name: &str,
    sources: Vec<String>,
) -> pb::CreateVolumeGroupSnapshotRequest {
    pb::CreateVolumeGroupSnapshotRequest {
        name: name.to_string(),
        source_volume_ids: sources,
        secrets: w.secrets(),
        parameters: w.config().snapshot_parameters.clone(),
    }
}

/// IDs of the scenario's volumes `0..n`.
fn sources(w: &CsiWorld, n: usize) -> Result<Vec<String>, String> {
    (0..n).map(|i| w.vol(i).map(|v| v.id.clone())).collect()
}

async fn must_group(w: &mut CsiWorld, n: usize) -> StepResult {
    let sources = sources(w, n)?;
    let name = w.unique_name("group");
    let (rpc, group) = w
        .create_group_snapshot(group_request(w, &name, sources))
        .await;
    if group.is_some() {
        return Ok(());
    }
    Err(w.precondition(
        "CSI-GROUP-CREATE-IDEMPOTENT",
        "CreateVolumeGroupSnapshot succeeds",
        &rpc.summary(),
        &[&rpc],
    ))
}

#[given("the plugin has created a group snapshot of both volumes")]
async fn has_group_of_both(w: &mut CsiWorld) -> StepResult {
    must_group(w, 2).await
}

#[given("the plugin has created a group snapshot of the volume")]
async fn has_group(w: &mut CsiWorld) -> StepResult {
    must_group(w, 1).await
}

#[given("the plugin has created another group snapshot of the first volume")]
async fn has_another_group(w: &mut CsiWorld) -> StepResult {
    must_group(w, 1).await
}

#[when("the harness creates a group snapshot of both volumes twice with one name")]
async fn creates_twice(w: &mut CsiWorld) -> StepResult {
    let sources = sources(w, 2)?;
    let name = w.unique_name("group");
    let (a, _) = w
        .create_group_snapshot(group_request(w, &name, sources.clone()))
        .await;
    let (b, _) = w
        .create_group_snapshot(group_request(w, &name, sources))
        .await;
    w.last = vec![a, b];
    Ok(())
}

fn group_of(rpc: &Rpc) -> Option<&serde_json::Value> {
    rpc.response.as_ref().and_then(|r| r.get("group_snapshot"))
}

fn group_id(rpc: &Rpc) -> &str {
    group_of(rpc)
        .and_then(|g| g.get("group_snapshot_id"))
        .and_then(|i| i.as_str())
        .unwrap_or_default()
}

#[then("both calls succeed with the same group snapshot")]
async fn same_group(w: &mut CsiWorld) -> StepResult {
    let [a, b] = w.last.as_slice() else {
        return Err(w.ctx().harness_error("expected two calls"));
    };
    for rpc in [a, b] {
        if !rpc.ok() {
            return Err(w.fail(
                "CreateVolumeGroupSnapshot succeeds, and again with the same name and sources",
                &rpc.summary(),
                &[rpc],
            ));
        }
    }
    if !group_id(a).is_empty() && group_id(a) == group_id(b) {
        return Ok(());
    }
    Err(w.fail(
        "the second call returns the group snapshot the first made (CreateVolumeGroupSnapshot is idempotent)",
        &format!(
            "first group_snapshot_id {:?}, second {:?}",
            group_id(a),
            group_id(b)
        ),
        &[a, b],
    ))
}

/// Problems with a group snapshot of `sources`, as the spec describes one.
pub(crate) fn group_problems(g: &serde_json::Value, sources: &[String]) -> Vec<String> {
    let id = g
        .get("group_snapshot_id")
        .and_then(|i| i.as_str())
        .unwrap_or_default();
    let mut problems = Vec::new();
    if id.is_empty() {
        problems.push("group_snapshot_id is empty".to_string());
    }
    if g.get("creation_time").is_none_or(|t| t.is_null()) {
        problems.push("creation_time is missing".into());
    }
    let snaps = g
        .get("snapshots")
        .and_then(|s| s.as_array())
        .cloned()
        .unwrap_or_default();
    let mut seen: Vec<String> = Vec::new();
    for s in &snaps {
        let src = s
            .get("source_volume_id")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        let sid = s
            .get("snapshot_id")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        let gid = s
            .get("group_snapshot_id")
            .and_then(|v| v.as_str())
            .unwrap_or_default();
        if sid.is_empty() {
            problems.push(format!("a snapshot of {src:?} has no snapshot_id"));
        }
        // group_snapshot_id is OPTIONAL on a snapshot; set, it must name this group.
        if !gid.is_empty() && gid != id {
            problems.push(format!("snapshot {sid:?} names group {gid:?}, not {id:?}"));
        }
        seen.push(src.to_string());
    }
    let mut want = sources.to_vec();
    want.sort();
    seen.sort();
    if seen != want {
        problems.push(format!(
            "snapshots are of volumes {seen:?}, expected one of each of {want:?}"
        ));
    }
    problems
}

#[then("the group snapshot holds one snapshot of each volume, none naming another group")]
async fn group_shape(w: &mut CsiWorld) -> StepResult {
    let sources = sources(w, 2)?;
    let rpc = w.last_call()?;
    let g = group_of(rpc).cloned().unwrap_or_default();
    let problems = group_problems(&g, &sources);
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "a group snapshot with an ID, a creation time, and one snapshot per source volume whose group_snapshot_id is the group's",
        &format!("{}: {g}", problems.join("; ")),
        &[rpc],
    ))
}

async fn get(w: &mut CsiWorld, id: &str, snapshot_ids: Vec<String>) -> Rpc {
    let req = pb::GetVolumeGroupSnapshotRequest {
        group_snapshot_id: id.to_string(),
        snapshot_ids,
        secrets: w.secrets(),
    };
    rpc!(
        w,
        controller,
        group,
        "GroupController",
        "GetVolumeGroupSnapshot",
        get_volume_group_snapshot,
        req
    )
    .0
}

fn first_group(w: &CsiWorld) -> Result<GroupSnap, String> {
    w.groups
        .first()
        .cloned()
        .ok_or_else(|| w.ctx().harness_error("no group snapshot yet"))
}

#[when("the harness gets the first group snapshot by its ID")]
async fn gets_first(w: &mut CsiWorld) -> StepResult {
    let g = first_group(w)?;
    let rpc = get(w, &g.id, g.snapshot_ids.clone()).await;
    w.last = vec![rpc];
    Ok(())
}

#[then("the response holds the first group snapshot with its snapshots")]
async fn holds_first(w: &mut CsiWorld) -> StepResult {
    let g = first_group(w)?;
    let sources = sources(w, 2)?;
    let rpc = w.last_call()?;
    let got = group_of(rpc).cloned().unwrap_or_default();
    let mut problems = group_problems(&got, &sources);
    if group_id(rpc) != g.id {
        problems.insert(
            0,
            format!("group_snapshot_id is {:?}, not {:?}", group_id(rpc), g.id),
        );
    }
    let mut ids: Vec<String> = got
        .get("snapshots")
        .and_then(|s| s.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.get("snapshot_id").and_then(|v| v.as_str()))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut want = g.snapshot_ids.clone();
    ids.sort();
    want.sort();
    if ids != want {
        problems.push(format!(
            "snapshot IDs {ids:?}, CreateVolumeGroupSnapshot returned {want:?}"
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "GetVolumeGroupSnapshot returns group snapshot {:?} with the snapshots CreateVolumeGroupSnapshot returned",
            g.id
        ),
        &format!("{}: {got}", problems.join("; ")),
        &[rpc],
    ))
}

#[when("the harness gets a group snapshot that does not exist")]
async fn gets_unknown(w: &mut CsiWorld) {
    // snapshot_ids is REQUIRED (at least one entry): made-up IDs, so only the group is unknown.
    let id = unknown_id(w, "group-snapshot");
    let snaps = vec![unknown_id(w, "snapshot")];
    let rpc = get(w, &id, snaps).await;
    w.last = vec![rpc];
}

#[when("the harness deletes a group snapshot that does not exist")]
async fn deletes_unknown(w: &mut CsiWorld) {
    let id = unknown_id(w, "group-snapshot");
    let snaps = vec![unknown_id(w, "snapshot")];
    let rpc = w.delete_group_snapshot(&id, snaps).await;
    w.last = vec![rpc];
}

#[when("the harness deletes the group snapshot")]
async fn deletes(w: &mut CsiWorld) -> StepResult {
    let g = first_group(w)?;
    let rpc = w.delete_group_snapshot(&g.id, g.snapshot_ids).await;
    w.last = vec![rpc];
    Ok(())
}

#[then("getting the group snapshot fails with NOT_FOUND")]
async fn gone(w: &mut CsiWorld) -> StepResult {
    let g = first_group(w)?;
    let delete = w.last_call()?.clone();
    let rpc = get(w, &g.id, g.snapshot_ids.clone()).await;
    if rpc.code == tonic::Code::NotFound {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "after DeleteVolumeGroupSnapshot succeeded, GetVolumeGroupSnapshot of {:?} fails with NOT_FOUND",
            g.id
        ),
        &rpc.summary(),
        &[&delete, &rpc],
    ))
}
