//! Steps of the snapshots feature.

use cucumber::{given, then, when};

use super::common::unknown_id;
use super::{CsiWorld, Page, StepResult, rpc};
use crate::plugins::csi::{Rpc, pb};

fn snapshot_request(w: &CsiWorld, source: &str, name: &str) -> pb::CreateSnapshotRequest {
    pb::CreateSnapshotRequest {
        source_volume_id: source.to_string(),
        name: name.to_string(),
        secrets: w.secrets(),
        parameters: w.config().snapshot_parameters.clone(),
    }
}

async fn must_snapshot(w: &mut CsiWorld, vol: usize) -> StepResult {
    let source = w.vol(vol)?.id.clone();
    let name = w.unique_name("snap");
    let rpc = w.create_snapshot(snapshot_request(w, &source, &name)).await;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.precondition(
        "CSI-SNAPSHOT-CREATE",
        "CreateSnapshot succeeds",
        &rpc.summary(),
        &[&rpc],
    ))
}

#[given("the plugin has created a snapshot of the volume")]
async fn has_snapshot(w: &mut CsiWorld) -> StepResult {
    must_snapshot(w, 0).await
}

#[given("the plugin has created a snapshot of the second volume")]
async fn has_snapshot_of_second(w: &mut CsiWorld) -> StepResult {
    must_snapshot(w, 1).await
}

#[given(expr = "the plugin has created {int} snapshots of the volume")]
async fn has_snapshots(w: &mut CsiWorld, n: usize) -> StepResult {
    for _ in 0..n {
        must_snapshot(w, 0).await?;
    }
    Ok(())
}

#[when("the harness creates a snapshot of the volume")]
async fn creates(w: &mut CsiWorld) -> StepResult {
    let source = w.vol(0)?.id.clone();
    let name = w.unique_name("snap");
    let rpc = w.create_snapshot(snapshot_request(w, &source, &name)).await;
    w.last = vec![rpc];
    Ok(())
}

fn snapshot_of(rpc: &Rpc) -> Option<&serde_json::Value> {
    rpc.response.as_ref().and_then(|r| r.get("snapshot"))
}

fn str_of<'a>(v: &'a serde_json::Value, f: &str) -> &'a str {
    v.get(f).and_then(|x| x.as_str()).unwrap_or_default()
}

#[then("the snapshot has an ID, the volume as its source and a creation time")]
async fn snapshot_ok(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    let source = w.vol(0)?.id.clone();
    let Some(s) = snapshot_of(rpc) else {
        return Err(w.fail("a snapshot in the response", &rpc.summary(), &[rpc]));
    };
    let mut problems = Vec::new();
    if str_of(s, "snapshot_id").is_empty() {
        problems.push("snapshot_id is empty".to_string());
    }
    if str_of(s, "source_volume_id") != source {
        problems.push(format!(
            "source_volume_id is {:?}",
            str_of(s, "source_volume_id")
        ));
    }
    if s.get("creation_time").is_none_or(|t| t.is_null()) {
        problems.push("creation_time is missing".into());
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        &format!("a snapshot with a snapshot_id, source_volume_id {source:?} and a creation_time"),
        &format!("{}: {s}", problems.join("; ")),
        &[rpc],
    ))
}

#[when("the harness creates a snapshot of the volume with the same name again")]
async fn creates_again(w: &mut CsiWorld) -> StepResult {
    let source = w.vol(0)?.id.clone();
    let name = w
        .snaps
        .first()
        .ok_or_else(|| w.ctx().harness_error("no snapshot yet"))?
        .name
        .clone();
    let rpc = w.create_snapshot(snapshot_request(w, &source, &name)).await;
    w.last = vec![rpc];
    Ok(())
}

#[then("the response holds the same snapshot")]
async fn same_snapshot(w: &mut CsiWorld) -> StepResult {
    let first = w.snaps.first().map(|s| s.id.clone()).unwrap_or_default();
    let rpc = w.last_call()?;
    let id = snapshot_of(rpc)
        .map(|s| str_of(s, "snapshot_id"))
        .unwrap_or_default();
    if id == first {
        return Ok(());
    }
    Err(w.fail(
        "the same snapshot as the first CreateSnapshot with this name and source (CreateSnapshot is idempotent)",
        &format!("first snapshot_id {first:?}, now {id:?}"),
        &[rpc],
    ))
}

#[when("the harness creates a snapshot with the same name of the second volume")]
async fn creates_conflict(w: &mut CsiWorld) -> StepResult {
    let source = w.vol(1)?.id.clone();
    let name = w
        .snaps
        .first()
        .ok_or_else(|| w.ctx().harness_error("no snapshot yet"))?
        .name
        .clone();
    let rpc = w.create_snapshot(snapshot_request(w, &source, &name)).await;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness creates a snapshot of the volume with a 128-character name")]
async fn creates_long(w: &mut CsiWorld) -> StepResult {
    let source = w.vol(0)?.id.clone();
    let mut name = w.unique_name("long");
    while name.len() < 128 {
        name.push('s');
    }
    name.truncate(128);
    let rpc = w.create_snapshot(snapshot_request(w, &source, &name)).await;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness deletes a snapshot that does not exist")]
async fn deletes_unknown(w: &mut CsiWorld) {
    let id = unknown_id(w, "snapshot");
    let rpc = w.delete_snapshot(&id).await;
    w.last = vec![rpc];
}

/// List snapshots page by page with the given filters.
async fn list(w: &mut CsiWorld, max_entries: i32, snapshot_id: &str, source: &str) {
    let mut pages = Vec::new();
    let mut token = String::new();
    let mut calls = Vec::new();
    let unfiltered = snapshot_id.is_empty() && source.is_empty();
    let before = w.config().known_snapshots.live();
    for _ in 0..10_000 {
        let req = pb::ListSnapshotsRequest {
            max_entries,
            starting_token: token.clone(),
            source_volume_id: source.to_string(),
            snapshot_id: snapshot_id.to_string(),
            secrets: w.secrets(),
        };
        let (rpc, resp) = rpc!(
            w,
            controller,
            controller,
            "Controller",
            "ListSnapshots",
            list_snapshots,
            req
        );
        calls.push(rpc);
        let Some(resp) = resp else {
            w.pages.clear();
            w.last = calls;
            return;
        };
        pages.push(Page {
            ids: resp
                .entries
                .iter()
                .filter_map(|e| e.snapshot.as_ref())
                .map(|s| s.snapshot_id.clone())
                .collect(),
            next_token: resp.next_token.clone(),
        });
        if resp.next_token.is_empty() {
            break;
        }
        token = resp.next_token;
    }
    w.must_list = if unfiltered {
        let after = w.config().known_snapshots.live();
        before.intersection(&after).cloned().collect()
    } else {
        Default::default()
    };
    w.pages = pages;
    w.last = calls;
}

#[when("the harness lists every snapshot")]
async fn lists_all(w: &mut CsiWorld) {
    list(w, 0, "", "").await;
}

fn listed(w: &CsiWorld) -> Vec<String> {
    w.pages.iter().flat_map(|p| p.ids.iter()).cloned().collect()
}

fn ensure_ok(w: &CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() {
        Ok(())
    } else {
        Err(w.fail("ListSnapshots succeeds", &rpc.summary(), &[rpc]))
    }
}

#[then("the list holds the snapshot")]
async fn holds_snapshot(w: &mut CsiWorld) -> StepResult {
    ensure_ok(w)?;
    let id = w.snaps.first().map(|s| s.id.clone()).unwrap_or_default();
    let missing = super::controller::left_out(w, std::slice::from_ref(&id));
    if missing.is_empty() {
        return Ok(());
    }
    let rpc = w.last_call()?;
    let whose = if missing.contains(&id) {
        format!("the new snapshot {id:?} is on no page")
    } else {
        "this clause's snapshot is listed, but snapshots other clauses cut before the listing began, and no call had asked to delete, are not".to_string()
    };
    Err(w.fail(
        "ListSnapshots lists every snapshot that exists (this clause's and every other one the run cut and has not asked to delete)",
        &format!(
            "{whose}: missing {missing:?}; every page:\n{}",
            super::describe_pages(&w.pages)
        ),
        &[rpc],
    ))
}

#[then("the list holds the first snapshot")]
async fn holds_first(w: &mut CsiWorld) -> StepResult {
    holds_snapshot(w).await
}

#[when("the harness lists the snapshots with the first snapshot's ID")]
async fn lists_by_id(w: &mut CsiWorld) -> StepResult {
    let id = w
        .snaps
        .first()
        .ok_or_else(|| w.ctx().harness_error("no snapshot yet"))?
        .id
        .clone();
    list(w, 0, &id, "").await;
    Ok(())
}

#[then("the list holds exactly the first snapshot")]
async fn exactly_first(w: &mut CsiWorld) -> StepResult {
    ensure_ok(w)?;
    let id = w.snaps.first().map(|s| s.id.clone()).unwrap_or_default();
    let got = listed(w);
    if got == vec![id.clone()] {
        return Ok(());
    }
    let rpc = w.last_call()?;
    Err(w.fail(
        &format!("ListSnapshots with snapshot_id {id:?} returns that snapshot and nothing else"),
        &format!(
            "listed {got:?}; every page:\n{}",
            super::describe_pages(&w.pages)
        ),
        &[rpc],
    ))
}

#[when("the harness lists the snapshots with a snapshot ID that does not exist")]
async fn lists_by_unknown_id(w: &mut CsiWorld) {
    let id = unknown_id(w, "snapshot");
    list(w, 0, &id, "").await;
}

#[then("the list is empty")]
async fn empty(w: &mut CsiWorld) -> StepResult {
    ensure_ok(w)?;
    let got = listed(w);
    if got.is_empty() {
        return Ok(());
    }
    let rpc = w.last_call()?;
    Err(w.fail(
        "an empty list for a filter that matches nothing",
        &format!(
            "listed {got:?}; every page:\n{}",
            super::describe_pages(&w.pages)
        ),
        &[rpc],
    ))
}

#[when("the harness lists the snapshots of the first volume")]
async fn lists_by_source(w: &mut CsiWorld) -> StepResult {
    let source = w.vol(0)?.id.clone();
    list(w, 0, "", &source).await;
    Ok(())
}

#[then("every listed snapshot has the first volume as its source")]
async fn all_from_source(w: &mut CsiWorld) -> StepResult {
    ensure_ok(w)?;
    // The volume is this scenario's own: every snapshot of it is one the scenario made.
    let source = w.vol(0)?.id.clone();
    let own: Vec<String> = w
        .snaps
        .iter()
        .filter(|s| s.source == source)
        .map(|s| s.id.clone())
        .collect();
    let got = listed(w);
    let wrong: Vec<&String> = got.iter().filter(|id| !own.contains(id)).collect();
    if wrong.is_empty() {
        return Ok(());
    }
    let rpc = w.last_call()?;
    Err(w.fail(
        &format!(
            "ListSnapshots with source_volume_id {source:?} returns only that volume's snapshots"
        ),
        &format!("also listed: {wrong:?}"),
        &[rpc],
    ))
}

#[when("the harness lists the snapshots of a volume that does not exist")]
async fn lists_by_unknown_source(w: &mut CsiWorld) {
    let id = unknown_id(w, "volume");
    list(w, 0, "", &id).await;
}

#[when(expr = "the harness lists the snapshots one page of {int} at a time")]
async fn lists_paged(w: &mut CsiWorld, n: i32) {
    list(w, n, "", "").await;
}

#[when("the harness lists snapshots from an invalid starting token")]
async fn lists_bad_token(w: &mut CsiWorld) {
    let req = pb::ListSnapshotsRequest {
        starting_token: format!("{}-not-a-token", w.ctx().token),
        secrets: w.secrets(),
        ..Default::default()
    };
    let (rpc, _) = rpc!(
        w,
        controller,
        controller,
        "Controller",
        "ListSnapshots",
        list_snapshots,
        req
    );
    w.last = vec![rpc];
}

async fn get_snapshot(w: &mut CsiWorld, id: &str) -> Rpc {
    let req = pb::GetSnapshotRequest {
        snapshot_id: id.to_string(),
        secrets: w.secrets(),
    };
    rpc!(
        w,
        controller,
        controller,
        "Controller",
        "GetSnapshot",
        get_snapshot,
        req
    )
    .0
}

#[when("the harness gets the second snapshot by its ID")]
async fn gets_second(w: &mut CsiWorld) -> StepResult {
    let id = w
        .snaps
        .get(1)
        .ok_or_else(|| w.ctx().harness_error("the scenario has no second snapshot"))?
        .id
        .clone();
    let rpc = get_snapshot(w, &id).await;
    w.last = vec![rpc];
    Ok(())
}

#[then("the response holds the second snapshot, with the volume as its source and a creation time")]
async fn holds_second(w: &mut CsiWorld) -> StepResult {
    let want = w.snaps.get(1).map(|s| s.id.clone()).unwrap_or_default();
    let rpc = w.last_call()?;
    let got = snapshot_of(rpc)
        .map(|s| str_of(s, "snapshot_id"))
        .unwrap_or_default();
    if got != want {
        return Err(w.fail(
            &format!("GetSnapshot of {want:?} returns that snapshot"),
            &format!("it returned snapshot_id {got:?}"),
            &[rpc],
        ));
    }
    snapshot_ok(w).await
}

#[when("the harness gets a snapshot that does not exist")]
async fn gets_unknown(w: &mut CsiWorld) {
    let id = unknown_id(w, "snapshot");
    let rpc = get_snapshot(w, &id).await;
    w.last = vec![rpc];
}
