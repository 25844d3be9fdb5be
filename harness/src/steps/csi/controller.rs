//! Steps of the controller feature (and the volume/listing steps other features share).

use cucumber::{given, then, when};

use super::common::unknown_id;
use super::requests::{self, Mode};
use super::{CsiWorld, Page, StepResult, describe_pages, rpc};
use crate::plugins::csi::{Rpc, pb};

#[when("the harness calls ControllerGetCapabilities")]
async fn get_capabilities(w: &mut CsiWorld) {
    let (rpc, _) = rpc!(
        w,
        controller,
        controller,
        "Controller",
        "ControllerGetCapabilities",
        controller_get_capabilities,
        pb::ControllerGetCapabilitiesRequest {}
    );
    w.last = vec![rpc];
}

#[given("the plugin has created a volume")]
pub(super) async fn created_volume(w: &mut CsiWorld) -> StepResult {
    w.must_create_volume(Mode::SingleNodeWriter)
        .await
        .map(|_| ())
}

#[given("the plugin has created a second volume")]
async fn created_second_volume(w: &mut CsiWorld) -> StepResult {
    w.must_create_volume(Mode::SingleNodeWriter)
        .await
        .map(|_| ())
}

#[given(expr = "the plugin has created {int} volumes")]
async fn created_volumes(w: &mut CsiWorld, n: usize) -> StepResult {
    for _ in 0..n {
        w.must_create_volume(Mode::SingleNodeWriter).await?;
    }
    Ok(())
}

#[when("the harness creates a volume")]
async fn creates(w: &mut CsiWorld) {
    let name = w.unique_name("vol");
    let rpc = w
        .create_sized(
            |w| requests::create_volume(w, &name, Mode::SingleNodeWriter),
            Mode::SingleNodeWriter,
        )
        .await;
    w.last = vec![rpc];
}

/// The `volume` of the latest response.
fn volume_of(rpc: &Rpc) -> Option<&serde_json::Value> {
    rpc.response.as_ref().and_then(|r| r.get("volume"))
}

fn field_str<'a>(v: &'a serde_json::Value, name: &str) -> &'a str {
    v.get(name).and_then(|x| x.as_str()).unwrap_or_default()
}

fn field_i64(v: &serde_json::Value, name: &str) -> i64 {
    v.get(name).and_then(|x| x.as_i64()).unwrap_or(0)
}

#[then("the response holds a volume with a non-empty ID")]
async fn has_volume_id(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    match volume_of(rpc) {
        Some(v) if !field_str(v, "volume_id").is_empty() => Ok(()),
        Some(v) => Err(w.fail(
            "a volume with a non-empty volume_id",
            &format!("volume: {v}"),
            &[rpc],
        )),
        None => Err(w.fail("a volume in the response", &rpc.summary(), &[rpc])),
    }
}

/// The range CSI-CONTROLLER-CREATE-CAPACITY asks for: from the clause's volume size to twice
/// that.
fn doubled_range(w: &CsiWorld) -> Option<pb::CapacityRange> {
    let size = w.volume_size();
    Some(pb::CapacityRange {
        required_bytes: size,
        limit_bytes: size * 2,
    })
}

#[when("the harness creates a volume with a capacity range")]
async fn creates_with_range(w: &mut CsiWorld) -> StepResult {
    let name = w.unique_name("vol");
    let rpc = w
        .create_sized(
            |w| {
                let mut req = requests::create_volume(w, &name, Mode::SingleNodeWriter);
                req.capacity_range = doubled_range(w);
                req
            },
            Mode::SingleNodeWriter,
        )
        .await;
    // A plugin whose sizes the harness cannot name: nothing to hold it to.
    if w.size_unspecified() {
        return Err(w.ctx().skip(format!(
            "CreateVolume refuses the run's volume size as OUT_OF_RANGE and names no size it accepts (neither GetCapacity's minimum_volume_size nor its error): the spec allows a plugin its own limits, so whether a range is honoured cannot be judged; give --test-volume-size ({})",
            rpc.outcome()
        )));
    }
    w.last = vec![rpc];
    Ok(())
}

#[then("the volume's capacity lies within the requested range")]
async fn capacity_in_range(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    let size = w.volume_size();
    let Some(v) = volume_of(rpc) else {
        return Err(w.fail("a volume in the response", &rpc.summary(), &[rpc]));
    };
    let cap = field_i64(v, "capacity_bytes");
    if cap == 0 {
        return Err(w.ctx().skip(
            "CreateVolume answered capacity_bytes 0, which the spec defines as unknown (a share on a file server, say): whether the range is honoured cannot be seen",
        ));
    }
    if (size..=size * 2).contains(&cap) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "capacity_bytes between required_bytes {size} and limit_bytes {} (or 0: unknown)",
            size * 2
        ),
        &format!("capacity_bytes = {cap}"),
        &[rpc],
    ))
}

#[when("the harness creates a volume with the same name and capacity again")]
async fn creates_again(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let mut req = requests::create_volume(w, &v.name, Mode::SingleNodeWriter);
    req.capacity_range = v.range;
    let rpc = w.create_volume(req, Mode::SingleNodeWriter).await;
    w.last = vec![rpc];
    Ok(())
}

#[then("the response holds the same volume")]
async fn same_volume(w: &mut CsiWorld) -> StepResult {
    let first = w.vol(0)?.id.clone();
    let rpc = w.last_call()?;
    let id = volume_of(rpc)
        .map(|v| field_str(v, "volume_id"))
        .unwrap_or_default();
    if id == first {
        return Ok(());
    }
    Err(w.fail(
        "the same volume as the first CreateVolume with this name (CreateVolume is idempotent)",
        &format!("first volume_id {first:?}, now {id:?}"),
        &[rpc],
    ))
}

#[when("the harness creates a volume with the same name and an incompatible capacity")]
async fn creates_conflicting(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    // capacity_bytes 0 is "unknown" in the spec (a share on a file server): such a plugin
    // cannot tell whether a capacity conflicts with the volume it has.
    let reported = v
        .volume
        .as_ref()
        .and_then(|j| j.get("capacity_bytes"))
        .and_then(|c| c.as_i64())
        .unwrap_or(0);
    if reported == 0 {
        return Err(w.ctx().skip(
            "the first CreateVolume answered capacity_bytes 0, which the spec defines as unknown: a conflict cannot be judged by size for a plugin that does not know its volumes' sizes",
        ));
    }
    // Exact ranges the volume cannot meet, whether its size is what was asked for or what was
    // reported: twice its size, one MiB more, half of it. The next is tried only after
    // OUT_OF_RANGE, the spec's "Unsupported capacity_range", which a plugin with a maximum (or
    // minimum) volume size rightly answers whatever the name.
    const MIB: i64 = 1 << 20;
    let asked = v.capacity.max(w.volume_size());
    let (high, low) = (reported.max(asked), reported.min(asked));
    let ranges: Vec<i64> = [high * 2, high + MIB, low / 2 / MIB * MIB]
        .into_iter()
        .filter(|b| *b > 0)
        .collect();
    let mut calls = Vec::new();
    for &bytes in &ranges {
        let mut req = requests::create_volume(w, &v.name, v.mode);
        req.capacity_range = Some(pb::CapacityRange {
            required_bytes: bytes,
            limit_bytes: bytes,
        });
        let rpc = w.create_volume(req, v.mode).await;
        let refused = rpc.code == tonic::Code::OutOfRange;
        calls.push(rpc);
        if !refused {
            w.last = calls;
            return Ok(());
        }
    }
    Err(w.ctx().skip(format!(
        "CreateVolume refused every capacity that conflicts with the volume's {reported} bytes ({} bytes) as OUT_OF_RANGE, which the spec allows (\"Unsupported capacity_range\"): a conflict within the plugin's limits could not be asked for",
        ranges
            .iter()
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

#[when("the harness creates a volume with a 128-character name")]
async fn creates_long_name(w: &mut CsiWorld) {
    let mut name = w.unique_name("long");
    while name.len() < 128 {
        name.push('x');
    }
    name.truncate(128);
    let rpc = w
        .create_sized(
            |w| requests::create_volume(w, &name, Mode::SingleNodeWriter),
            Mode::SingleNodeWriter,
        )
        .await;
    w.last = vec![rpc];
}

/// CreateVolume of a new volume from `source`, at the clause's volume size.
async fn create_from(w: &mut CsiWorld, source: pb::volume_content_source::Type) -> Rpc {
    let name = w.unique_name("vol");
    w.create_sized(
        |w| {
            let mut req = requests::create_volume(w, &name, Mode::SingleNodeWriter);
            req.volume_content_source = Some(pb::VolumeContentSource {
                r#type: Some(source.clone()),
            });
            req
        },
        Mode::SingleNodeWriter,
    )
    .await
}

#[when("the harness creates a volume from the snapshot")]
async fn creates_from_snapshot(w: &mut CsiWorld) -> StepResult {
    let snap = w
        .snaps
        .first()
        .ok_or_else(|| w.ctx().harness_error("no snapshot was made"))?
        .id
        .clone();
    let rpc = create_from(
        w,
        pb::volume_content_source::Type::Snapshot(pb::volume_content_source::SnapshotSource {
            snapshot_id: snap,
        }),
    )
    .await;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness creates a volume from a snapshot that does not exist")]
async fn creates_from_missing_snapshot(w: &mut CsiWorld) {
    let snapshot_id = unknown_id(w, "snapshot");
    let rpc = create_from(
        w,
        pb::volume_content_source::Type::Snapshot(pb::volume_content_source::SnapshotSource {
            snapshot_id,
        }),
    )
    .await;
    w.last = vec![rpc];
}

#[when("the harness creates a volume from that volume")]
async fn creates_from_volume(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    let rpc = create_from(
        w,
        pb::volume_content_source::Type::Volume(pb::volume_content_source::VolumeSource {
            volume_id: id,
        }),
    )
    .await;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness creates a volume from a volume that does not exist")]
async fn creates_from_missing_volume(w: &mut CsiWorld) {
    let volume_id = unknown_id(w, "volume");
    let rpc = create_from(
        w,
        pb::volume_content_source::Type::Volume(pb::volume_content_source::VolumeSource {
            volume_id,
        }),
    )
    .await;
    w.last = vec![rpc];
}

fn content_source_is(w: &CsiWorld, kind: &str, key: &str, want: &str) -> StepResult {
    let rpc = w.last_call()?;
    let got = volume_of(rpc)
        .and_then(|v| v.get("content_source"))
        .and_then(|c| c.get(kind))
        .and_then(|s| s.get(key))
        .and_then(|s| s.as_str())
        .unwrap_or_default()
        .to_string();
    // content_source is OPTIONAL in the reply (Nomad does not read it): absent is fine, but
    // when set it must name what the volume was made from.
    let absent = volume_of(rpc)
        .and_then(|v| v.get("content_source"))
        .is_none_or(|c| c.is_null() || c.as_object().is_some_and(|o| o.is_empty()));
    if absent || got == want {
        return Ok(());
    }
    Err(w.fail(
        &format!("the new volume's content_source, when set, names {kind} {want:?}"),
        &format!(
            "content_source: {}",
            volume_of(rpc)
                .and_then(|v| v.get("content_source"))
                .map(|c| c.to_string())
                .unwrap_or_else(|| "absent".into())
        ),
        &[rpc],
    ))
}

#[then("the volume's content source, if set, is the snapshot")]
async fn source_is_snapshot(w: &mut CsiWorld) -> StepResult {
    let id = w.snaps.first().map(|s| s.id.clone()).unwrap_or_default();
    content_source_is(w, "snapshot", "snapshot_id", &id)
}

#[then("the volume's content source, if set, is the first volume")]
async fn source_is_volume(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    content_source_is(w, "volume", "volume_id", &id)
}

#[given("a file is written into the volume, when the plugin has both services")]
async fn file_into_volume(w: &mut CsiWorld) -> StepResult {
    if !w.can_read_volumes() {
        crate::recorder::lock(&w.ctx().case).notes.push(
            "the data of the new volume is not compared: that needs a plugin with both the controller and the node service".into(),
        );
        return Ok(());
    }
    let calls = super::nomad::claim_as(w, 0, false, false).await?;
    if let Some(bad) = calls.iter().find(|c| !c.ok()) {
        return Err(w.precondition(
            "CSI-NOMAD-CLAIM",
            "the claim of the source volume succeeds",
            &bad.summary(),
            &[bad],
        ));
    }
    let c = w.claims.len() - 1;
    let (_, alloc) = super::nomad::claim_alloc(w, c)?;
    let token = w.ctx().token.clone();
    super::node::write_marker(&alloc.target, &token).map_err(|e| {
        w.precondition(
            "CSI-NOMAD-CLAIM",
            "a file can be written into the source volume",
            &e,
            &[],
        )
    })?;
    let calls = super::nomad::release(w, c).await?;
    if let Some(bad) = calls.iter().find(|c| !super::common::ok_or_not_found(c)) {
        return Err(w.precondition(
            "CSI-NOMAD-RELEASE",
            "the release of the source volume succeeds",
            &bad.summary(),
            &[bad],
        ));
    }
    w.content_marker = true;
    Ok(())
}

#[then("the new volume holds the file, when the plugin has both services")]
async fn new_volume_holds_file(w: &mut CsiWorld) -> StepResult {
    if !w.content_marker {
        return Ok(());
    }
    let create = w.last_call()?.clone();
    let i = w.vols.len() - 1;
    let calls = super::nomad::claim_as(w, i, false, false).await?;
    let mut refs: Vec<&Rpc> = vec![&create];
    refs.extend(calls.iter());
    if let Some(bad) = calls.iter().find(|c| !c.ok()) {
        return Err(w.fail(
            "the new volume can be claimed like any other, and holds the source's data",
            &bad.summary(),
            &refs,
        ));
    }
    let (_, alloc) = super::nomad::claim_alloc(w, w.claims.len() - 1)?;
    let token = w.ctx().token.clone();
    super::node::take_marker(&alloc.target, &token).map_err(|e| {
        w.fail(
            "the new volume holds what the source held: a file written into the source before is there",
            &e,
            &refs,
        )
    })
}

#[when("the harness deletes a volume that does not exist")]
async fn deletes_unknown(w: &mut CsiWorld) {
    let id = unknown_id(w, "volume");
    let rpc = w.delete_volume(&id).await;
    w.last = vec![rpc];
}

#[when("the harness deletes the volume")]
async fn deletes(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    let rpc = w.delete_volume(&id).await;
    w.last = vec![rpc];
    Ok(())
}

/// Every volume ID ListVolumes returns, page by page (`max_entries` 0: the plugin decides).
/// The calls made are left in `w.last`, every page's.
pub async fn list_volume_pages(w: &mut CsiWorld, max_entries: i32) -> Result<Vec<Page>, Rpc> {
    let mut pages = Vec::new();
    let mut token = String::new();
    w.last.clear();
    let before = w.config().known_volumes.live();
    for _ in 0..10_000 {
        let req = pb::ListVolumesRequest {
            max_entries,
            starting_token: token.clone(),
        };
        let (rpc, resp) = rpc!(
            w,
            controller,
            controller,
            "Controller",
            "ListVolumes",
            list_volumes,
            req
        );
        let Some(resp) = resp else { return Err(rpc) };
        pages.push(Page {
            ids: resp
                .entries
                .iter()
                .filter_map(|e| e.volume.as_ref().map(|v| v.volume_id.clone()))
                .collect(),
            next_token: resp.next_token.clone(),
        });
        w.last.push(rpc);
        if resp.next_token.is_empty() {
            break;
        }
        token = resp.next_token;
    }
    let after = w.config().known_volumes.live();
    w.must_list = before.intersection(&after).cloned().collect();
    Ok(pages)
}

/// The volumes (or snapshots) the latest listing had to show and left out: this clause's own
/// (`own`) and every other one the run made before the listing and never asked to delete.
pub fn left_out(w: &CsiWorld, own: &[String]) -> Vec<String> {
    let listed: std::collections::BTreeSet<&String> =
        w.pages.iter().flat_map(|p| p.ids.iter()).collect();
    let mut want: Vec<String> = own.to_vec();
    want.extend(w.must_list.iter().filter(|id| !own.contains(id)).cloned());
    want.into_iter().filter(|id| !listed.contains(id)).collect()
}

#[when("the harness lists every volume")]
async fn lists_all(w: &mut CsiWorld) {
    match list_volume_pages(w, 0).await {
        Ok(pages) => w.pages = pages,
        Err(rpc) => {
            w.pages.clear();
            w.last = vec![rpc];
        }
    }
}

fn listed(w: &CsiWorld) -> Vec<String> {
    w.pages.iter().flat_map(|p| p.ids.iter()).cloned().collect()
}

#[then("the list holds the volume")]
async fn list_has_volume(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    let rpc = w.last_call()?;
    if !rpc.ok() {
        return Err(w.fail("ListVolumes succeeds", &rpc.summary(), &[rpc]));
    }
    let missing = left_out(w, std::slice::from_ref(&id));
    if missing.is_empty() {
        return Ok(());
    }
    let calls: Vec<&Rpc> = w.last.iter().collect();
    let whose = if missing.contains(&id) {
        format!("the new volume {id:?} is on no page")
    } else {
        "this clause's volume is listed, but volumes other clauses made before the listing began, and no call had asked to delete, are not".to_string()
    };
    Err(w.fail(
        "ListVolumes lists every volume that exists (this clause's and every other one the run made and has not asked to delete), on one of its pages",
        &format!(
            "{whose}: missing {missing:?}; every page:\n{}",
            describe_pages(&w.pages)
        ),
        &calls,
    ))
}

#[then("the list does not hold the volume")]
async fn list_lacks_volume(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    let rpc = w.last_call()?;
    if !listed(w).contains(&id) {
        return Ok(());
    }
    Err(w.fail(
        &format!("ListVolumes no longer lists the deleted volume {id:?}"),
        "it is still listed",
        &[rpc],
    ))
}

#[then("the volume is no longer listed")]
async fn no_longer_listed(w: &mut CsiWorld) -> StepResult {
    if !w.config().caps.controller.contains("LIST_VOLUMES") {
        return Ok(());
    }
    let delete = w.last_call()?.clone();
    let id = w.vol(0)?.id.clone();
    match list_volume_pages(w, 0).await {
        Ok(pages) if !pages.iter().flat_map(|p| p.ids.iter()).any(|v| *v == id) => Ok(()),
        Ok(_) => Err(w.fail(
            &format!("after DeleteVolume, ListVolumes no longer lists {id:?}"),
            "it is still listed",
            &[&delete],
        )),
        Err(rpc) => Err(w.fail("ListVolumes succeeds", &rpc.summary(), &[&rpc])),
    }
}

#[when(expr = "the harness lists the volumes one page of {int} at a time")]
async fn lists_paged(w: &mut CsiWorld, n: i32) {
    match list_volume_pages(w, n).await {
        Ok(pages) => w.pages = pages,
        Err(rpc) => {
            w.pages.clear();
            w.last = vec![rpc];
        }
    }
}

#[then(regex = r"^every page holds at most (\d+) entr(?:y|ies)$")]
async fn pages_bounded(w: &mut CsiWorld, n: usize) -> StepResult {
    let rpc = w.last_call()?;
    if !rpc.ok() {
        return Err(w.fail("the listing succeeds", &rpc.summary(), &[rpc]));
    }
    match w.pages.iter().find(|p| p.ids.len() > n) {
        None => Ok(()),
        Some(p) => {
            let calls: Vec<&Rpc> = w.last.iter().collect();
            Err(w.fail(
                &format!("at most max_entries = {n} entries per page"),
                &format!(
                    "a page of {} entries; every page:\n{}",
                    p.ids.len(),
                    describe_pages(&w.pages)
                ),
                &calls,
            ))
        }
    }
}

fn every_once(w: &CsiWorld, ids: &[String], what: &str) -> StepResult {
    let all = listed(w);
    for id in ids {
        let n = all.iter().filter(|x| *x == id).count();
        if n != 1 {
            w.last_call()?;
            let calls: Vec<&Rpc> = w.last.iter().collect();
            let hint = match w.pages.last() {
                Some(p) if n == 0 && p.next_token.is_empty() && w.pages.len() == 1 => {
                    " (the only page gave no next_token, so the listing ended there)"
                }
                _ => "",
            };
            return Err(w.fail(
                &format!("walking next_token through every page lists each {what} exactly once"),
                &format!(
                    "{what} {id:?} appears {n} times in {} pages{hint}; every page:\n{}",
                    w.pages.len(),
                    describe_pages(&w.pages)
                ),
                &calls,
            ));
        }
    }
    Ok(())
}

/// This clause's own IDs, then every other one the listing had to show.
fn with_must_list(w: &CsiWorld, own: Vec<String>) -> Vec<String> {
    let mut ids = own;
    let others: Vec<String> = w
        .must_list
        .iter()
        .filter(|id| !ids.contains(id))
        .cloned()
        .collect();
    ids.extend(others);
    ids
}

#[then("the pages together hold every volume once")]
async fn every_volume_once(w: &mut CsiWorld) -> StepResult {
    let ids = with_must_list(w, w.vols.iter().map(|v| v.id.clone()).collect());
    every_once(w, &ids, "volume")
}

#[then("the pages together hold every snapshot once")]
async fn every_snapshot_once(w: &mut CsiWorld) -> StepResult {
    let ids = with_must_list(w, w.snaps.iter().map(|s| s.id.clone()).collect());
    every_once(w, &ids, "snapshot")
}

#[when("the harness lists volumes from an invalid starting token")]
async fn lists_bad_token(w: &mut CsiWorld) {
    let req = pb::ListVolumesRequest {
        max_entries: 0,
        starting_token: format!("{}-not-a-token", w.ctx().token),
    };
    let (rpc, _) = rpc!(
        w,
        controller,
        controller,
        "Controller",
        "ListVolumes",
        list_volumes,
        req
    );
    w.last = vec![rpc];
}

/// The reader-only twin of `cap`: the same access type and mount options, read by one node
/// (or by many, for a multi-node volume).
fn reader_only(cap: &pb::VolumeCapability) -> pb::VolumeCapability {
    use pb::volume_capability::access_mode::Mode as M;
    let mut twin = cap.clone();
    let mode = twin.access_mode.get_or_insert_default();
    mode.mode = match M::try_from(mode.mode).unwrap_or(M::Unknown) {
        M::MultiNodeReaderOnly | M::MultiNodeSingleWriter | M::MultiNodeMultiWriter => {
            M::MultiNodeReaderOnly as i32
        }
        _ => M::SingleNodeReaderOnly as i32,
    };
    twin
}

#[when("the harness validates the volume's capabilities, all of them at once")]
async fn validates(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let own = w.cap(v.mode);
    let twin = reader_only(&own);
    let req = pb::ValidateVolumeCapabilitiesRequest {
        volume_id: v.id.clone(),
        volume_context: requests::volume_context(&v),
        volume_capabilities: vec![own, twin],
        parameters: w.config().volume_parameters.clone(),
        secrets: w.secrets(),
        ..Default::default()
    };
    let (rpc, _) = rpc!(
        w,
        controller,
        controller,
        "Controller",
        "ValidateVolumeCapabilities",
        validate_volume_capabilities,
        req
    );
    w.last = vec![rpc];
    Ok(())
}

/// Nomad's check of a confirmation (plugins/csi/client.go, compareCapabilities), for one
/// requested capability: `None` when some confirmed capability matches it (the access mode,
/// unless UNKNOWN; block or mount; a mount's fs_type, and every requested mount flag among the
/// confirmed ones), otherwise what the confirmed ones got wrong. A confirmed capability that is
/// neither block nor mount, or a block one for a block request, neither matches nor is wrong.
pub fn nomad_compare(asked: &serde_json::Value, confirmed: &[serde_json::Value]) -> Option<String> {
    let mode = |c: &serde_json::Value| {
        c.pointer("/access_mode/mode")
            .and_then(|m| m.as_i64())
            .unwrap_or(0)
    };
    let present = |c: &serde_json::Value, k: &str| c.get(k).is_some_and(|v| !v.is_null());
    let mut wrong = Vec::new();
    for c in confirmed {
        if mode(c) != 0 && mode(c) != mode(asked) {
            wrong.push(format!(
                "requested access mode {}, got {}",
                mode(asked),
                mode(c)
            ));
            continue;
        }
        if present(c, "block") && !present(asked, "block") {
            wrong.push("'block-device' access type was not requested but was validated".into());
            continue;
        }
        let Some(m) = c.get("mount").filter(|m| !m.is_null()) else {
            continue;
        };
        let Some(a) = asked.get("mount").filter(|m| !m.is_null()) else {
            wrong.push("'file-system' access type was not requested but was validated".into());
            continue;
        };
        let fs = |v: &serde_json::Value| {
            v.get("fs_type")
                .and_then(|f| f.as_str())
                .unwrap_or("")
                .to_string()
        };
        if fs(a) != fs(m) {
            wrong.push(format!(
                "requested filesystem type {:?}, got {:?}",
                fs(a),
                fs(m)
            ));
            continue;
        }
        let flags = |v: &serde_json::Value| -> Vec<String> {
            v.get("mount_flags")
                .and_then(|f| f.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let got = flags(m);
        if flags(a).iter().any(|f| !got.contains(f)) {
            wrong.push("requested mount flags are not among the confirmed ones".into());
            continue;
        }
        return None;
    }
    (!wrong.is_empty()).then(|| wrong.join("; "))
}

#[then("any confirmed capabilities are the ones asked for")]
async fn confirmed(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    // confirmed is OPTIONAL: a plugin may validate without echoing, and Nomad accepts that.
    // When it confirms, Nomad needs each requested capability confirmed by one of them.
    let confirmed = rpc
        .response
        .as_ref()
        .and_then(|r| r.get("confirmed"))
        .and_then(|c| c.get("volume_capabilities"))
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    let asked: Vec<serde_json::Value> = rpc
        .request
        .get("volume_capabilities")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    let problems: Vec<String> = asked
        .iter()
        .filter_map(|a| nomad_compare(a, &confirmed).map(|p| format!("for {a}: {p}")))
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "each requested capability is confirmed as asked, if the plugin confirms any (Nomad refuses `nomad volume register` otherwise: \"volume capability validation failed\")",
        &problems.join("\n"),
        &[rpc],
    ))
}

#[when("the harness validates the capabilities of a volume that does not exist")]
async fn validates_unknown(w: &mut CsiWorld) {
    let req = pb::ValidateVolumeCapabilitiesRequest {
        volume_id: unknown_id(w, "volume"),
        volume_capabilities: vec![w.cap(Mode::SingleNodeWriter)],
        secrets: w.secrets(),
        ..Default::default()
    };
    let (rpc, _) = rpc!(
        w,
        controller,
        controller,
        "Controller",
        "ValidateVolumeCapabilities",
        validate_volume_capabilities,
        req
    );
    w.last = vec![rpc];
}

#[when("the harness publishes a volume that does not exist to the node")]
async fn publishes_unknown_volume(w: &mut CsiWorld) -> StepResult {
    let req = pb::ControllerPublishVolumeRequest {
        volume_id: unknown_id(w, "volume"),
        node_id: w.publish_node_id()?,
        volume_capability: Some(w.cap(Mode::SingleNodeWriter)),
        secrets: w.secrets(),
        ..Default::default()
    };
    let (rpc, _) = w.controller_publish(req).await?;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness publishes the volume to a node that does not exist")]
async fn publishes_to_unknown_node(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let mut req = requests::controller_publish(w, &v, false)?;
    req.node_id = unknown_id(w, "node");
    let (rpc, _) = w.controller_publish(req).await?;
    w.last = vec![rpc];
    Ok(())
}

#[given("the plugin has published the volume to the node")]
async fn has_published(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let req = requests::controller_publish(w, &v, false)?;
    let (rpc, resp) = w.controller_publish(req).await?;
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

#[when("the harness publishes the volume to the node again")]
async fn publishes_again(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let req = requests::controller_publish(w, &v, false)?;
    let (rpc, _) = w.controller_publish(req).await?;
    w.last = vec![rpc];
    Ok(())
}

#[then("the publish context is the same as the first time")]
async fn same_publish_context(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    let now = rpc
        .response
        .as_ref()
        .and_then(|r| r.get("publish_context"))
        .cloned();
    if now == w.publish_context {
        return Ok(());
    }
    Err(w.fail(
        "the same publish_context as the first ControllerPublishVolume (Nomad passes it on to NodeStage and NodePublish)",
        &format!(
            "first: {}\nnow:   {}",
            w.publish_context.clone().unwrap_or_default(),
            now.unwrap_or_default()
        ),
        &[rpc],
    ))
}

#[when("the harness publishes the volume to the node again read-only")]
async fn publishes_again_readonly(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let req = requests::controller_publish(w, &v, true)?;
    let (rpc, _) = w.controller_publish(req).await?;
    w.last = vec![rpc];
    Ok(())
}

#[then("the call fails with ALREADY_EXISTS, or INVALID_ARGUMENT without PUBLISH_READONLY")]
async fn incompatible_refused(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    let readonly_cap = w.config().caps.controller.contains("PUBLISH_READONLY");
    if rpc.code == tonic::Code::AlreadyExists
        || (!readonly_cap && rpc.code == tonic::Code::InvalidArgument)
    {
        return Ok(());
    }
    let also = if readonly_cap {
        ""
    } else {
        " (or INVALID_ARGUMENT: the plugin does not advertise PUBLISH_READONLY, so readonly=true is not a valid request for it)"
    };
    Err(w.fail(
        &format!("ControllerPublishVolume of a volume already published with readonly=false, now with readonly=true, fails with ALREADY_EXISTS{also}"),
        &rpc.summary(),
        &[rpc],
    ))
}

#[when("the harness unpublishes the volume from the node")]
async fn unpublishes(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let req = requests::controller_unpublish(w, &v.id)?;
    let rpc = w.controller_unpublish(req).await;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness calls GetCapacity")]
async fn get_capacity(w: &mut CsiWorld) {
    let req = requests::get_capacity(w);
    let (rpc, _) = rpc!(
        w,
        controller,
        controller,
        "Controller",
        "GetCapacity",
        get_capacity,
        req
    );
    w.last = vec![rpc];
}

#[then("the available capacity is not negative")]
async fn capacity_not_negative(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    let cap = rpc
        .response
        .as_ref()
        .map(|r| field_i64(r, "available_capacity"))
        .unwrap_or(0);
    if cap >= 0 {
        return Ok(());
    }
    Err(w.fail(
        "available_capacity >= 0",
        &format!("available_capacity = {cap}"),
        &[rpc],
    ))
}

// ---- a capacity range no volume meets -------------------------------------------------------

#[when("the harness creates a volume with limit_bytes below required_bytes")]
async fn creates_bad_range(w: &mut CsiWorld) {
    let name = w.unique_name("vol");
    let required = w.volume_size().max(2);
    let mut req = requests::create_volume(w, &name, Mode::SingleNodeWriter);
    req.capacity_range = Some(pb::CapacityRange {
        required_bytes: required,
        limit_bytes: required / 2,
    });
    // Straight to the plugin: an OUT_OF_RANGE here is the answer judged, not a size to retry.
    let rpc = w.create_volume(req, Mode::SingleNodeWriter).await;
    w.last = vec![rpc];
}

// ---- ControllerUnpublishVolume frees the attachment -----------------------------------------

#[when(
    "the harness publishes the volume to the node and unpublishes it, once more than the node's limit"
)]
async fn publish_unpublish_rounds(w: &mut CsiWorld) -> StepResult {
    let n = w.config().max_volumes_per_node;
    if !(1..=64).contains(&n) {
        return Err(w.ctx().skip(format!(
            "max_volumes_per_node is {n}: the harness tests limits from 1 to 64"
        )));
    }
    let v = w.vol(0)?.clone();
    let mut calls = Vec::new();
    for _ in 0..=n {
        let req = requests::controller_publish(w, &v, false)?;
        let (rpc, _) = w.controller_publish(req).await?;
        let ok = rpc.ok();
        calls.push(rpc);
        if !ok {
            break;
        }
        let req = requests::controller_unpublish(w, &v.id)?;
        let rpc = w.controller_unpublish(req).await;
        let ok = rpc.ok();
        calls.push(rpc);
        if !ok {
            break;
        }
    }
    w.last = calls;
    Ok(())
}

#[then("every publish and unpublish succeeds")]
async fn rounds_succeed(w: &mut CsiWorld) -> StepResult {
    w.last_call()?;
    let n = w.config().max_volumes_per_node;
    let Some(at) = w.last.iter().position(|c| !c.ok()) else {
        return Ok(());
    };
    let bad = &w.last[at];
    let round = at / 2 + 1;
    let calls: Vec<&Rpc> = w.last.iter().rev().take(4).rev().collect();
    if bad.method == "ControllerPublishVolume" && bad.code != tonic::Code::ResourceExhausted {
        // A publish refused for another reason is what the claim clauses judge.
        return Err(w.precondition(
            "CSI-NOMAD-CLAIM",
            "ControllerPublishVolume succeeds",
            &bad.summary(),
            &calls,
        ));
    }
    let why = if bad.code == tonic::Code::ResourceExhausted {
        format!(
            "\nthe harness held every one of the node's {n} attachments, so nothing else was attached, and had unpublished the volume after each of the {} earlier publishes: the plugin still counts attachments that ControllerUnpublishVolume undid",
            round - 1
        )
    } else {
        String::new()
    };
    Err(w.fail(
        &format!(
            "publishing one volume to the node and unpublishing it again, {} times (max_volumes_per_node + 1), succeeds every time",
            n + 1
        ),
        &format!("round {round}: {}{why}", bad.summary()),
        &calls,
    ))
}
