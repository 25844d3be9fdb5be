//! Steps of the nomad feature: claims and releases the way the Nomad client and server make
//! them, with Nomad's path layout.

use cucumber::{given, then, when};
use futures::future::join_all;
use tonic::Code;

use super::common::ok_or_not_found;
use super::node::{marker_name, take_marker, write_marker};
use super::requests::{self, Mode};
use super::{Alloc, CsiWorld, StepResult, is_mounted};
use crate::plugins::csi::{Rpc, call};

/// Claim volume `i` for a new allocation: ControllerPublishVolume (once per node, when the
/// controller publishes), NodeStageVolume (when the node stages and the staging directory is not
/// yet a mount), NodePublishVolume at the allocation's target. With `retry`, every call is made
/// a second time with the same request, as Nomad does when it retries after a lost answer.
/// With `readonly`, a read claim: both publishes say readonly and the paths' usage is `ro-`.
/// Returns the calls made.
async fn claim_with(w: &mut CsiWorld, i: usize, retry: bool) -> Result<Vec<Rpc>, String> {
    claim_as(w, i, retry, false).await
}

pub(super) async fn claim_as(
    w: &mut CsiWorld,
    i: usize,
    retry: bool,
    readonly: bool,
) -> Result<Vec<Rpc>, String> {
    let tries = if retry { 2 } else { 1 };
    let v = w.vol(i)?.clone();
    let mut calls = Vec::new();
    // Loop devices attached before the claim (by CreateVolume, say) are not the claim's.
    let loops_before = if v.mode.is_block() {
        crate::loop_devices::all_attached()
    } else {
        Vec::new()
    };
    // ControllerPublishVolume for every new claim, as nomad/csi_endpoint.go (Claim) sends it.
    if w.controller_publishes() {
        let req = requests::controller_publish(w, &v, readonly)?;
        for _ in 0..tries {
            let (rpc, resp) = w.controller_publish(req.clone()).await?;
            let ok = rpc.ok();
            calls.push(rpc);
            if !ok {
                return Ok(calls);
            }
            w.publish_context = resp.and_then(|r| serde_json::to_value(r.publish_context).ok());
        }
        w.controller_published.insert(v.id.clone());
    }
    let staging = if w.stages() {
        let staging = w.staging_path(&v, readonly)?;
        // Staged already where it is mounted; where that cannot be told, staged again (which
        // NodeStageVolume must take).
        if !is_mounted(&staging).unwrap_or(false) {
            let req = requests::node_stage(
                w,
                &v,
                &staging.display().to_string(),
                super::node::context(w),
            );
            for _ in 0..tries {
                let rpc = w.node_stage(req.clone()).await?;
                w.stage_calls += 1;
                let ok = rpc.ok();
                calls.push(rpc);
                if !ok {
                    return Ok(calls);
                }
            }
        }
        staging.display().to_string()
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
        super::node::context(w),
    );
    let mut ok = true;
    for _ in 0..tries {
        let rpc = w.node_publish(req.clone()).await?;
        ok = rpc.ok();
        calls.push(rpc);
        if !ok {
            break;
        }
    }
    if ok {
        if v.mode.is_block()
            && let Some(attached) = crate::loop_devices::loop_behind(&target)
        {
            if !loops_before.contains(&attached) {
                w.claim_loops.push(attached.clone());
            }
            w.loops_seen.note(attached);
        }
        w.claims.push((
            i,
            Alloc {
                id,
                target,
                readonly,
            },
            false,
        ));
    }
    Ok(calls)
}

/// Release claim `c`: NodeUnpublishVolume (then the target directory is removed, as Nomad does),
/// NodeUnstageVolume when no other live claim on the node uses the volume, and
/// ControllerUnpublishVolume likewise. NOT_FOUND counts as done, as in Nomad.
pub(super) async fn release(w: &mut CsiWorld, c: usize) -> Result<Vec<Rpc>, String> {
    let (i, alloc, _) = w
        .claims
        .get(c)
        .cloned()
        .ok_or_else(|| w.ctx().harness_error(format!("no claim #{}", c + 1)))?;
    let v = w.vol(i)?.clone();
    let mut calls = Vec::new();
    let rpc = w
        .node_unpublish(requests::node_unpublish(&v.id, &alloc.target))
        .await;
    let done = ok_or_not_found(&rpc);
    calls.push(rpc);
    if !done {
        return Ok(calls);
    }
    remove_target(&alloc.target);
    w.claims[c].2 = true;
    // Nomad counts the claims on the node per volume and usage (usage_tracker.go): the staging
    // path of a usage is unstaged when its last claim goes, and the controller unpublishes only
    // when no claim of the volume is left on the node (nomad/csi_endpoint.go).
    let same_usage = w
        .claims
        .iter()
        .any(|(j, a, released)| *j == i && !released && a.readonly == alloc.readonly);
    let any_left = w.claims.iter().any(|(j, _, released)| *j == i && !released);
    if same_usage {
        return Ok(calls);
    }
    if w.stages() {
        let staging = w.staging_path(&v, alloc.readonly)?;
        let rpc = w
            .node_unstage(requests::node_unstage(&v.id, &staging))
            .await;
        let done = ok_or_not_found(&rpc);
        calls.push(rpc);
        if !done {
            return Ok(calls);
        }
    }
    if any_left {
        return Ok(calls);
    }
    if w.controller_publishes() {
        let req = requests::controller_unpublish(w, &v.id)?;
        let rpc = w.controller_unpublish(req).await;
        if ok_or_not_found(&rpc) {
            w.controller_published.remove(&v.id);
        }
        calls.push(rpc);
    }
    Ok(calls)
}

/// Nomad removes the allocation's target once NodeUnpublishVolume succeeded: a directory, or
/// for a block volume the file the plugin made. Nothing still mounted is touched.
fn remove_target(target: &std::path::Path) {
    if is_mounted(target).unwrap_or(true) {
        return;
    }
    match target.symlink_metadata() {
        Ok(m) if m.is_dir() => {
            let _ = std::fs::remove_dir(target);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(target);
        }
        Err(_) => {}
    }
}

async fn claim(w: &mut CsiWorld, i: usize) -> Result<Vec<Rpc>, String> {
    claim_with(w, i, false).await
}

#[when("Nomad claims the volume for an allocation")]
async fn claims(w: &mut CsiWorld) -> StepResult {
    w.last = claim(w, 0).await?;
    Ok(())
}

#[given("Nomad has claimed the volume for an allocation")]
async fn has_claimed(w: &mut CsiWorld) -> StepResult {
    let calls = claim(w, 0).await?;
    match calls.iter().find(|c| !c.ok()) {
        None => Ok(()),
        Some(bad) => Err(w.precondition(
            "CSI-NOMAD-CLAIM",
            "every call of the claim succeeds",
            &bad.summary(),
            &[bad],
        )),
    }
}

fn all_succeed(w: &CsiWorld, what: &str) -> StepResult {
    w.last_call()?;
    match w.last.iter().find(|c| !c.ok()) {
        None => Ok(()),
        // The node refused an attachment the harness kept within its limit: the clause that
        // judges why (ControllerUnpublishVolume not freeing attachments) is named instead.
        Some(bad) if !w.root_for("", &[bad]).is_empty() => Err(w.precondition(
            "",
            &format!("every call of {what} succeeds, in Nomad's order"),
            &bad.summary(),
            &w.last.iter().collect::<Vec<_>>(),
        )),
        Some(bad) => Err(w.fail(
            &format!("every call of {what} succeeds, in Nomad's order"),
            &bad.summary(),
            &w.last.iter().collect::<Vec<_>>(),
        )),
    }
}

#[then("every call of the claim succeeds")]
async fn claim_ok(w: &mut CsiWorld) -> StepResult {
    all_succeed(w, "the claim")
}

#[then("every call of the claims succeeds")]
async fn claims_ok(w: &mut CsiWorld) -> StepResult {
    all_succeed(w, "the claims")
}

#[then("every call of the release succeeds")]
async fn release_ok(w: &mut CsiWorld) -> StepResult {
    all_succeed(w, "the release")
}

#[then("every call of the release succeeds or fails with NOT_FOUND")]
async fn release_ok_or_not_found(w: &mut CsiWorld) -> StepResult {
    w.last_call()?;
    match w.last.iter().find(|c| !ok_or_not_found(c)) {
        None => Ok(()),
        Some(bad) => Err(w.fail(
            "a repeated release gets OK or NOT_FOUND; any other error keeps the volume claimed in Nomad",
            &bad.summary(),
            &w.last.iter().collect::<Vec<_>>(),
        )),
    }
}

/// The volume index and allocation of claim `c`, or a failure naming the claim's calls.
pub(super) fn claim_alloc(w: &CsiWorld, c: usize) -> Result<(usize, Alloc), String> {
    w.claims
        .get(c)
        .map(|(i, a, _)| (*i, a.clone()))
        .ok_or_else(|| {
            let calls: Vec<&Rpc> = w.last.iter().collect();
            w.fail(
                "the claim succeeds",
                &calls
                    .iter()
                    .find(|c| !c.ok())
                    .map(|c| c.summary())
                    .unwrap_or_else(|| "no allocation holds the volume".into()),
                &calls,
            )
        })
}

#[then("the allocation's target path is a writable directory")]
async fn target_writable(w: &mut CsiWorld) -> StepResult {
    let (_, alloc) = claim_alloc(w, 0)?;
    let token = w.ctx().token.clone();
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    write_marker(&alloc.target, &token)
        .and_then(|()| take_marker(&alloc.target, &token))
        .map_err(|e| {
            w.fail(
                "the allocation's target path is a directory its tasks can write into (Nomad bind-mounts it into them)",
                &e,
                &refs,
            )
        })
}

#[given("the allocation has written a file at its target path")]
async fn alloc_wrote(w: &mut CsiWorld) -> StepResult {
    let (_, alloc) = claim_alloc(w, 0)?;
    let token = w.ctx().token.clone();
    write_marker(&alloc.target, &token).map_err(|e| {
        w.precondition(
            "CSI-NOMAD-CLAIM",
            "the allocation can write at its target path",
            &e,
            &[],
        )
    })
}

#[then("the new allocation's target path holds the file the first wrote")]
async fn new_alloc_has_file(w: &mut CsiWorld) -> StepResult {
    let (_, alloc) = claim_alloc(w, 1)?;
    let token = w.ctx().token.clone();
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    take_marker(&alloc.target, &token).map_err(|e| {
        w.fail(
            "what the first allocation wrote is in the volume when the next allocation claims it",
            &e,
            &refs,
        )
    })
}

#[when("Nomad releases the volume for the allocation")]
async fn releases(w: &mut CsiWorld) -> StepResult {
    w.last = release(w, 0).await?;
    Ok(())
}

#[when("Nomad releases the volume for the allocation again")]
async fn releases_again(w: &mut CsiWorld) -> StepResult {
    w.last = release(w, 0).await?;
    Ok(())
}

#[given("Nomad has released the volume for the allocation")]
async fn has_released(w: &mut CsiWorld) -> StepResult {
    let calls = release(w, 0).await?;
    match calls.iter().find(|c| !ok_or_not_found(c)) {
        None => Ok(()),
        Some(bad) => Err(w.precondition(
            "CSI-NOMAD-RELEASE",
            "the release succeeds",
            &bad.summary(),
            &[bad],
        )),
    }
}

#[then("nothing stays mounted under the staging and allocation directories")]
async fn nothing_mounted(w: &mut CsiWorld) -> StepResult {
    let left = crate::mounts::under(&w.mount_base()).map_err(|e| {
        w.ctx()
            .harness_error(format!("cannot tell what is still mounted: {e}"))
    })?;
    if left.is_empty() {
        return Ok(());
    }
    let calls: Vec<&Rpc> = w.last.iter().collect();
    Err(w.fail(
        "after the release nothing the claim mounted is still mounted",
        &format!(
            "still mounted: {}",
            left.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        &calls,
    ))
}

#[then("the volume can be deleted")]
async fn can_delete(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    if v.borrowed {
        // The user's volume, registered rather than created: never deleted.
        w.ctx().note(
            "the volume is one of --volume, registered rather than created: DeleteVolume is not called on it",
        );
        return Ok(());
    }
    let id = v.id;
    let rpc = w.delete_volume(&id).await;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.fail(
        "after the release DeleteVolume succeeds (nothing holds the volume any more)",
        &rpc.summary(),
        &[&rpc],
    ))
}

#[given("the plugin has created a multi-writer volume")]
async fn multi_writer(w: &mut CsiWorld) -> StepResult {
    w.must_create_volume(Mode::MultiNodeMultiWriter)
        .await
        .map(|_| ())
}

#[when("Nomad claims the volume for two allocations on the node")]
async fn claims_twice(w: &mut CsiWorld) -> StepResult {
    let mut calls = claim(w, 0).await?;
    calls.extend(claim(w, 0).await?);
    w.last = calls;
    Ok(())
}

#[then("a file written by the first allocation is seen by the second")]
async fn shared_data(w: &mut CsiWorld) -> StepResult {
    let (_, a) = claim_alloc(w, 0)?;
    let (_, b) = claim_alloc(w, 1)?;
    let token = w.ctx().token.clone();
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    write_marker(&a.target, &token)
        .and_then(|()| {
            let seen = b.target.join(marker_name(&token));
            match std::fs::read_to_string(&seen) {
                Ok(s) if s == token => Ok(()),
                _ => Err(format!(
                    "a file written at {} is not at the second allocation's target {}: they are not the same volume",
                    a.target.display(),
                    b.target.display()
                )),
            }
        })
        .map_err(|e| w.fail("both allocations' targets show the same volume", &e, &refs))
}

#[when("Nomad releases the volume for the first allocation")]
async fn releases_first(w: &mut CsiWorld) -> StepResult {
    w.last = release(w, 0).await?;
    Ok(())
}

#[when("Nomad releases the volume for the second allocation")]
async fn releases_second(w: &mut CsiWorld) -> StepResult {
    w.last = release(w, 1).await?;
    Ok(())
}

#[then("the second allocation still sees the volume")]
async fn second_still_sees(w: &mut CsiWorld) -> StepResult {
    let (_, b) = claim_alloc(w, 1)?;
    let token = w.ctx().token.clone();
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    if let Some(bad) = refs.iter().find(|c| !c.ok()) {
        return Err(w.fail(
            "releasing the first allocation succeeds",
            &bad.summary(),
            &refs,
        ));
    }
    take_marker(&b.target, &token).map_err(|e| {
        w.fail(
            "after the first allocation stops, the second one's target still shows the volume (Nomad unstages only after the last allocation on the node)",
            &e,
            &refs,
        )
    })
}

#[given("the plugin has created as many volumes as the node's limit, and one more")]
async fn created_limit_plus_one(w: &mut CsiWorld) -> StepResult {
    let n = w.config().max_volumes_per_node;
    if !(1..=64).contains(&n) {
        return Err(w.ctx().skip(format!(
            "max_volumes_per_node is {n}: the harness tests limits from 1 to 64"
        )));
    }
    for _ in 0..=n {
        w.must_create_volume(Mode::SingleNodeWriter).await?;
    }
    Ok(())
}

#[when("Nomad publishes every volume to the node")]
async fn publishes_all(w: &mut CsiWorld) -> StepResult {
    let mut calls = Vec::new();
    for i in 0..w.vols.len() {
        let v = w.vols[i].clone();
        let req = requests::controller_publish(w, &v, false)?;
        calls.push(w.controller_publish(req).await?.0);
    }
    w.last = calls;
    Ok(())
}

#[then("every volume up to the limit is published")]
async fn up_to_limit(w: &mut CsiWorld) -> StepResult {
    let n = w.config().max_volumes_per_node as usize;
    match w.last.iter().take(n).find(|c| !c.ok()) {
        None => Ok(()),
        Some(bad) => Err(w.fail(
            &format!("the first {n} volumes (max_volumes_per_node) can be published to the node"),
            &bad.summary(),
            &[bad],
        )),
    }
}

#[then("the one over the limit is published or fails with RESOURCE_EXHAUSTED")]
async fn over_limit(w: &mut CsiWorld) -> StepResult {
    let n = w.config().max_volumes_per_node;
    let rpc = w.last_call()?;
    // Nomad's scheduler keeps to the limit itself; a controller may publish one more, but if it
    // refuses because the node is full, the spec's code is RESOURCE_EXHAUSTED.
    if matches!(rpc.code, Code::Ok | Code::ResourceExhausted) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "volume {} on a node whose max_volumes_per_node is {n} is published, or refused with RESOURCE_EXHAUSTED",
            n + 1
        ),
        &rpc.outcome(),
        &[rpc],
    ))
}

#[when(expr = "the harness creates one volume name with {int} concurrent calls")]
async fn concurrent_creates(w: &mut CsiWorld, n: usize) {
    let name = w.unique_name("vol");
    let mut calls = concurrent_round(w, &name, n).await;
    // Every call refused the run's size as OUT_OF_RANGE: find a size the plugin accepts with a
    // volume of another name (deleted with the clause), then race again at that size.
    if calls.iter().all(|c| c.code == Code::OutOfRange) {
        let probe_name = w.unique_name("size");
        w.create_sized(
            |w| requests::create_volume(w, &probe_name, Mode::SingleNodeWriter),
            Mode::SingleNodeWriter,
        )
        .await;
        let name = w.unique_name("vol");
        calls = concurrent_round(w, &name, n).await;
    }
    w.last = calls;
}

/// `n` CreateVolume calls with one name at once, at the clause's volume size.
async fn concurrent_round(w: &mut CsiWorld, name: &str, n: usize) -> Vec<Rpc> {
    let conn = w.config().controller.clone();
    let d = w.ctx().run.profile.csi.rpc_deadline;
    let reqs: Vec<_> = (0..n)
        .map(|_| requests::create_volume(w, name, Mode::SingleNodeWriter))
        .collect();
    let results = join_all(reqs.into_iter().map(|req| {
        let mut cl = conn.controller();
        async move {
            call("Controller", "CreateVolume", req, d, |r| async move {
                cl.create_volume(r).await
            })
            .await
        }
    }))
    .await;
    let mut calls = Vec::new();
    for (rpc, resp) in results {
        w.record(&rpc, &conn);
        if let Some(v) = resp.and_then(|r| r.volume)
            && !w.vols.iter().any(|x| x.id == v.volume_id)
        {
            let size = w.volume_size();
            w.adopt_volume(name, &v, size, Mode::SingleNodeWriter);
        }
        calls.push(rpc);
    }
    calls
}

fn volume_id(rpc: &Rpc) -> Option<String> {
    rpc.response
        .as_ref()?
        .get("volume")?
        .get("volume_id")?
        .as_str()
        .map(str::to_string)
}

#[then("every call that succeeds returns the same volume ID")]
async fn same_id(w: &mut CsiWorld) -> StepResult {
    let ids: std::collections::BTreeSet<String> = w.last.iter().filter_map(volume_id).collect();
    if ids.len() <= 1 {
        return Ok(());
    }
    let calls: Vec<&Rpc> = w.last.iter().collect();
    Err(w.fail(
        "concurrent CreateVolume calls with one name make one volume",
        &format!("{} different volumes: {ids:?}", ids.len()),
        &calls,
    ))
}

#[then("at least one call succeeds")]
async fn one_succeeds(w: &mut CsiWorld) -> StepResult {
    if w.last.iter().any(|c| c.ok()) {
        return Ok(());
    }
    let calls: Vec<&Rpc> = w.last.iter().collect();
    Err(w.fail(
        "at least one of the concurrent CreateVolume calls succeeds (others may get ABORTED)",
        &w.last
            .iter()
            .map(|c| c.outcome())
            .collect::<Vec<_>>()
            .join("; "),
        &calls,
    ))
}

#[when("the harness runs the full volume lifecycle repeatedly")]
async fn lifecycles(w: &mut CsiWorld) -> StepResult {
    let rounds = w.config().idempotency_count;
    let mut failures = Vec::new();
    let mut all = Vec::new();
    for round in 1..=rounds {
        let before = w.vols.len();
        // Create, twice: a retried create returns the same volume.
        let name = w.unique_name("vol");
        let mut first_id: Option<String> = None;
        for _ in 0..2 {
            let rpc = w
                .create_sized(
                    |w| requests::create_volume(w, &name, Mode::SingleNodeWriter),
                    Mode::SingleNodeWriter,
                )
                .await;
            if !rpc.ok() {
                failures.push(format!("round {round}: {}", rpc.summary()));
            } else if let Some(id) = volume_id(&rpc) {
                match &first_id {
                    None => first_id = Some(id),
                    Some(first) if *first != id => failures.push(format!(
                        "round {round}: the retried CreateVolume of {name:?} returned another volume ({first:?}, then {id:?})"
                    )),
                    Some(_) => {}
                }
            }
            all.push(rpc);
        }
        if w.vols.len() == before {
            break;
        }
        let i = before;
        // The Nomad claim with every call retried, then the release, then the release again.
        let claim_calls = claim_with(w, i, true).await?;
        for c in claim_calls.iter().filter(|c| !c.ok()) {
            failures.push(format!("round {round}: {}", c.summary()));
        }
        all.extend(claim_calls);
        if let Some(c) = w
            .claims
            .iter()
            .position(|(j, _, released)| *j == i && !released)
        {
            for attempt in 0..2 {
                let calls = release(w, c).await?;
                for r in calls
                    .iter()
                    .filter(|r| !(r.ok() || attempt > 0 && r.code == Code::NotFound))
                {
                    failures.push(format!("round {round}: {}", r.summary()));
                }
                all.extend(calls);
            }
        }
        let id = w.vols[i].id.clone();
        for _ in 0..2 {
            let rpc = w.delete_volume(&id).await;
            if !rpc.ok() {
                failures.push(format!("round {round}: {}", rpc.summary()));
            }
            all.push(rpc);
        }
        // A round that failed may have left its volume attached: the next would only pile up.
        if !failures.is_empty() {
            break;
        }
    }
    w.round_failures = failures;
    w.last = all;
    Ok(())
}

#[then("every step of every round succeeds")]
async fn rounds_ok(w: &mut CsiWorld) -> StepResult {
    w.last_call()?;
    if w.round_failures.is_empty() {
        return Ok(());
    }
    let failed: Vec<&Rpc> = w.last.iter().filter(|c| !c.ok()).take(5).collect();
    Err(w.fail(
        &format!(
            "{} rounds of create, claim, release and delete, each call repeated once as a retry would, all succeed",
            w.config().idempotency_count
        ),
        &w.round_failures.join("\n"),
        &failed,
    ))
}

#[when("the plugin restarts")]
async fn restarts(w: &mut CsiWorld) -> StepResult {
    let Some(launcher) = w.config().launcher.clone() else {
        return Err(w.ctx().skip("the plugin was not launched by the harness"));
    };
    let profile = &w.ctx().run.profile;
    let timeout = profile
        .harness
        .launch_timeout
        .max(profile.csi.health_timeout);
    launcher
        .restart(timeout)
        .await
        .map_err(|e| w.fail("the plugin starts again", &e, &[]))?;
    let started = launcher.started_at();
    let dial = std::time::Duration::from_secs(1);
    w.config()
        .node
        .reconnect(dial)
        .await
        .map_err(|e| w.ctx().harness_error(e))?;
    if !std::sync::Arc::ptr_eq(&w.config().node, &w.config().controller) {
        w.config()
            .controller
            .reconnect(dial)
            .await
            .map_err(|e| w.ctx().harness_error(e))?;
    }
    // As after the first start, Nomad calls nothing but Probe until the plugin is ready again.
    let csi = w.ctx().run.profile.csi.clone();
    let readiness = super::ready::wait_ready(
        &w.config().node,
        started,
        "the plugin's restart",
        csi.probe_deadline,
        csi.health_timeout,
    )
    .await;
    // The first and the last probe, each once (a single probe is both).
    for (_, rpc, _) in readiness
        .probes
        .iter()
        .take(1)
        .chain(readiness.probes.iter().skip(1).last())
    {
        w.record(rpc, &w.config().node);
    }
    if !readiness.ready() {
        let calls: Vec<&Rpc> = readiness.probes.iter().map(|(_, r, _)| r).collect();
        return Err(w.fail(
            "the restarted plugin reports ready within Nomad's health timeout (otherwise Nomad restarts it again and never registers it)",
            &readiness.why_not(),
            &calls,
        ));
    }
    Ok(())
}

// ---- topology --------------------------------------------------------------------------------

/// Whether a volume topology is reachable from the node's (nomad/structs/node.go, Contains):
/// every segment of the volume's topology is one of the node's, with the same value.
pub(crate) fn reachable(
    volume: &serde_json::Value,
    node: &std::collections::HashMap<String, String>,
) -> bool {
    volume
        .get("segments")
        .and_then(|s| s.as_object())
        .is_some_and(|segments| {
            segments.iter().all(|(k, v)| {
                v.as_str()
                    .is_some_and(|v| node.get(k).is_some_and(|n| n == v))
            })
        })
}

#[then("the volume's topology, if it reports one, is reachable from the node's topology")]
async fn topology_reachable(w: &mut CsiWorld) -> StepResult {
    let v = w.vol(0)?.clone();
    let topologies: Vec<serde_json::Value> = v
        .volume
        .as_ref()
        .and_then(|j| j.get("accessible_topology"))
        .and_then(|t| t.as_array())
        .cloned()
        .unwrap_or_default();
    if topologies.is_empty() {
        // No constraint: Nomad's scheduler places a claim of it on any node, this one included.
        w.ctx()
            .note("the volume reports no accessible_topology: Nomad places it on any node");
        return Ok(());
    }
    let node = w.config().node_topology.clone().unwrap_or_default();
    if topologies.iter().any(|t| reachable(t, &node)) {
        return Ok(());
    }
    let node_text = if node.is_empty() {
        "NodeGetInfo reports no accessible_topology".to_string()
    } else {
        format!(
            "NodeGetInfo's accessible_topology is {}",
            serde_json::to_string(&node).unwrap_or_default()
        )
    };
    Err(w.fail(
        "a created volume is accessible from the node: one of its accessible_topology entries has only segments the node's NodeGetInfo topology has, with the same values (otherwise Nomad's scheduler never places a claim of it on this node: \"did not meet topology requirement\")",
        &format!(
            "the volume's accessible_topology is {}; {node_text}",
            serde_json::Value::Array(topologies)
        ),
        &[],
    ))
}

// ---- deleting a volume in use ----------------------------------------------------------------

#[when("`nomad volume delete` calls DeleteVolume of the claimed volume")]
async fn deletes_claimed(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    let rpc = w.delete_volume(&id).await;
    w.last = vec![rpc];
    Ok(())
}

#[then("the allocation's target path still holds the file")]
async fn still_holds_file(w: &mut CsiWorld) -> StepResult {
    let (_, alloc) = claim_alloc(w, 0)?;
    let token = w.ctx().token.clone();
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    take_marker(&alloc.target, &token).map_err(|e| {
        w.fail(
            "the running allocation still has its data after the refused delete",
            &e,
            &refs,
        )
    })
}

// ---- a read claim beside a write claim ---------------------------------------------------------

#[given("the plugin has created a multi-node-single-writer volume")]
async fn multi_node_single_writer(w: &mut CsiWorld) -> StepResult {
    w.must_create_volume(Mode::MultiNodeSingleWriter)
        .await
        .map(|_| ())
}

#[when("Nomad claims the volume read-only for a second allocation on the node")]
async fn claims_read_only_beside(w: &mut CsiWorld) -> StepResult {
    let calls = claim_as(w, 0, false, true).await?;
    super::common::readonly_refusal_allowed(w, &calls)?;
    w.last = calls;
    Ok(())
}

#[then("the second allocation sees what the first writes, and cannot write")]
async fn reader_sees_and_cannot_write(w: &mut CsiWorld) -> StepResult {
    let (_, writer) = claim_alloc(w, 0)?;
    let (_, reader) = claim_alloc(w, 1)?;
    let token = w.ctx().token.clone();
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    write_marker(&writer.target, &token).map_err(|e| {
        w.fail(
            "the writing allocation can still write beside a reader",
            &e,
            &refs,
        )
    })?;
    let seen = reader.target.join(marker_name(&token));
    match std::fs::read_to_string(&seen) {
        Ok(s) if s == token => {}
        _ => {
            return Err(w.fail(
                "the read-only allocation's target shows the volume the writer writes to",
                &format!(
                    "a file written at {} is not at the reader's target {}",
                    writer.target.display(),
                    reader.target.display()
                ),
                &refs,
            ));
        }
    }
    let probe = reader.target.join(format!("nomad-conform-{token}-ro.txt"));
    match std::fs::write(&probe, "x") {
        Err(e)
            if e.raw_os_error() == Some(nix::libc::EROFS)
                || e.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            Ok(())
        }
        other => {
            let _ = std::fs::remove_file(&probe);
            Err(w.fail(
                "a read claim (ControllerPublishVolume and NodePublishVolume with readonly = true, staged at its own ro- path) cannot write to the volume, even beside a writer on the node",
                &match other {
                    Ok(()) => format!("writing {} succeeded", probe.display()),
                    Err(e) => format!("writing {} failed with {e}, not EROFS", probe.display()),
                },
                &refs,
            ))
        }
    }
}

#[when("Nomad releases the volume for the read-only allocation")]
async fn releases_reader(w: &mut CsiWorld) -> StepResult {
    w.last = release(w, 1).await?;
    Ok(())
}

#[then("the first allocation can still write to the volume")]
async fn writer_still_writes(w: &mut CsiWorld) -> StepResult {
    let (_, writer) = claim_alloc(w, 0)?;
    let token = w.ctx().token.clone();
    let calls: Vec<Rpc> = w.last.clone();
    let refs: Vec<&Rpc> = calls.iter().collect();
    if let Some(bad) = refs.iter().find(|c| !ok_or_not_found(c)) {
        return Err(w.fail(
            "releasing the read claim succeeds (NodeUnpublishVolume, and NodeUnstageVolume of its ro- staging path)",
            &bad.summary(),
            &refs,
        ));
    }
    let probe = writer
        .target
        .join(format!("nomad-conform-{token}-after.txt"));
    let wrote = std::fs::write(&probe, "x");
    let _ = std::fs::remove_file(&probe);
    let _ = std::fs::remove_file(writer.target.join(marker_name(&token)));
    wrote.map_err(|e| {
        w.fail(
            "after the read claim is released, the write claim on the node still writes (Nomad unstages only the reader's ro- path and keeps the controller publication)",
            &format!("writing {} failed: {e}", probe.display()),
            &refs,
        )
    })
}
