//! Steps of the create feature.

use std::path::Path;

use cucumber::{given, then, when};
use futures::future::join_all;

use super::{DhvWorld, StepResult, created_from, created_problem, list_paths, sample_object};
use crate::plugins::dhv::paths::own_path_problem;
use crate::plugins::dhv::response::{Field, create_response};
use crate::plugins::dhv::{Call, EnvPolicy, Expect, Parameters, VolumeRequest};

const MIB: i64 = 1 << 20;
/// A capacity no real storage can provide: 4 EiB.
const IMPOSSIBLE_CAPACITY: i64 = 1 << 62;

#[given("the volume request asks for a capacity range")]
async fn asks_for_capacity(w: &mut DhvWorld) {
    let range = w.config().capacity.unwrap_or((MIB, 64 * MIB));
    w.volumes[0].req.capacity_min = range.0;
    w.volumes[0].req.capacity_max = range.1;
}

#[given("a volume request whose volumes directory does not exist")]
async fn request_without_volumes_dir(w: &mut DhvWorld) -> StepResult {
    let i = w.add_volume();
    let dir = w.volumes[i].req.volumes_dir.clone();
    if dir.exists() {
        return Err(w
            .ctx()
            .harness_error(format!("{} exists already", dir.display())));
    }
    Ok(())
}

#[then("the create succeeds although the volumes directory did not exist")]
async fn created_without_volumes_dir(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let v = w.volume(0)?;
    let Err((root, seen)) = super::usable_volume(call, v.created.as_ref(), &v.req, &[]) else {
        return Ok(());
    };
    // Does a create work once the directory is there? If not, the directory is not the cause.
    let dir = v.req.volumes_dir.clone();
    let _ = std::fs::create_dir_all(&dir);
    if let Err(problem) = w.ordinary_calls(1, false).await {
        return Err(w.blocked_on(&problem, &seen));
    }
    let call = w.last_call()?;
    Err(w.fail(
        "create makes DHV_VOLUMES_DIR when it does not exist yet (Nomad never makes it)",
        &format!(
            "{seen}\nwith DHV_VOLUMES_DIR ({}) made beforehand, the same create succeeds (so {root} is not the cause)",
            dir.display()
        ),
        &[call],
    ))
}

#[when("Nomad creates the volume")]
async fn creates_the_volume(w: &mut DhvWorld) -> StepResult {
    w.snapshot_volumes_dir();
    let call = w.create(0, "create").await?;
    w.last = vec![call];
    Ok(())
}

#[when("Nomad creates both volumes")]
async fn creates_both(w: &mut DhvWorld) -> StepResult {
    let a = w.create(0, "create (first volume)").await?;
    let b = w.create(1, "create (second volume)").await?;
    w.last = vec![a, b];
    Ok(())
}

#[when("Nomad creates the volume again with the same environment")]
async fn creates_again(w: &mut DhvWorld) -> StepResult {
    let call = w.create(0, "create (again)").await?;
    w.last = vec![call];
    Ok(())
}

/// Create every volume of the scenario concurrently.
async fn create_all_at_once(w: &mut DhvWorld, label: &str) -> StepResult {
    let n = w.volumes.len();
    let calls: Vec<Call> = {
        let w: &DhvWorld = w;
        join_all((0..n).map(|i| async move {
            let v = &w.volumes[i];
            w.create_request(label, &v.req, EnvPolicy::Configured, v.deleted.clone())
                .await
                .0
        }))
        .await
    };
    for (i, call) in calls.iter().enumerate() {
        if w.volumes[i].created.is_none() {
            w.volumes[i].created = created_from(call);
        }
    }
    w.last = calls;
    Ok(())
}

/// The budget every restore at agent start shares: the fingerprint manager's context,
/// `batchFirstFingerprintsTimeout` in client/node_updater.go.
const RESTORE_BUDGET: std::time::Duration = std::time::Duration::from_secs(50);

#[when("the agent restarts and restores every volume at once")]
async fn restores(w: &mut DhvWorld) -> StepResult {
    // All at once under one shared budget (they start together, so each gets what is left of
    // it: all of it); a profile's shorter create deadline caps it too.
    let deadline = RESTORE_BUDGET.min(w.deadlines().create_deadline);
    let n = w.volumes.len();
    let calls: Vec<Call> = {
        let w: &DhvWorld = w;
        join_all((0..n).map(|i| async move {
            let v = &w.volumes[i];
            let call = w
                .invoke(
                    "create (restore)",
                    "create",
                    v.req.create_env(),
                    EnvPolicy::Configured,
                    deadline,
                )
                .await;
            if let Some(c) = created_from(&call) {
                w.track_volume(&v.req, &c.path, v.deleted.clone());
            }
            call
        }))
        .await
    };
    w.last = calls;
    Ok(())
}

#[when("the volume's path vanishes, as after a host reboot")]
async fn path_vanishes(w: &mut DhvWorld) -> StepResult {
    let path = w.created_path(0)?;
    let vols = w.volumes_dir();
    // Never remove what is not the volume's own (its own clause judges such a path).
    if let Some(problem) = own_path_problem(&path, &vols, &[]) {
        let text = w.fail_after(
            "precondition: the volume has a path of its own, which the harness can remove",
            &format!("{problem}; the harness removes nothing there"),
            &w.create_repro(0),
            &[],
        );
        return Err(w.ctx().blocked("DHV-CREATE-OWN-PATH", text));
    }
    // Only what this run made can be removed: the path must lie inside the run's own scratch
    // directory (resolved, symlinks and all). A plugin that keeps its volumes elsewhere cannot
    // be judged here, since the harness never removes what it did not create.
    let run_dir = std::fs::canonicalize(&w.ctx().run.scratch_base).ok();
    let target = std::fs::canonicalize(&path).ok();
    let target = match (run_dir, target) {
        (Some(run), Some(t)) if t.starts_with(&run) && t != run => t,
        (_, None) => {
            // Gone already: DHV-CREATE-PATH-EXISTS judges a path that does not exist.
            let text = w.fail_after(
                "precondition: the volume's path exists after create",
                &format!("{path} does not exist"),
                &w.create_repro(0),
                &[],
            );
            return Err(w.ctx().blocked("DHV-CREATE-PATH-EXISTS", text));
        }
        _ => {
            return Err(w.ctx().skip(format!(
                "the volume's path {path} lies outside the run's scratch directory: the harness removes nothing it did not create, so it cannot make the path vanish as a reboot would"
            )));
        }
    };
    vanish(&target).map_err(|e| {
        w.ctx()
            .harness_error(format!("cannot make {path} vanish as a reboot would: {e}"))
    })?;
    w.ctx()
        .note(format!("{path} was removed (unmounted first where it was a mount point), as a host reboot loses a mount or a tmpfs"));
    Ok(())
}

/// Unmount `path` while it is a mount point, then remove it: what a reboot does to a mount,
/// and to a directory on a tmpfs. A path still mounted after that (more mounts stacked on it
/// than the harness takes off, or one it cannot unmount) is left in place with all beneath it,
/// and so is anything under it on another mount: never removed through.
fn vanish(path: &Path) -> std::io::Result<()> {
    for _ in 0..MAX_STACKED {
        if !crate::mounts::is_mount_point(path)? {
            break;
        }
        nix::mount::umount2(path, nix::mount::MntFlags::empty()).map_err(std::io::Error::from)?;
    }
    if crate::mounts::is_mount_point(path)? {
        return Err(std::io::Error::other(format!(
            "it is still a mount point after {MAX_STACKED} unmounts; left in place"
        )));
    }
    crate::safe_remove::remove_tree_or_err(path)
}

/// How many mounts stacked on a volume's path the harness takes off before it leaves it.
const MAX_STACKED: usize = 256;

#[then("the reported path exists again")]
async fn path_exists_again(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let path = w.created_path(0)?;
    if Path::new(&path).is_dir() || Path::new(&path).exists() {
        return Ok(());
    }
    Err(w.fail_after(
        "the restore makes the volume available again: its path exists (a task mounting it binds that path)",
        &format!(
            "the restore exited 0 and reported {path}, which does not exist: every task that mounts the volume would fail"
        ),
        &w.create_repro(0),
        &[call],
    ))
}

#[when("Nomad updates the volume to a larger capacity range")]
async fn updates_capacity(w: &mut DhvWorld) -> StepResult {
    let (min, max) = {
        let req = &w.volume(0)?.req;
        (req.capacity_min, req.capacity_max)
    };
    w.first_range = Some((min, max));
    // Strictly above the old range, so the old size cannot lie within the new one.
    let new_min = max.max(min).max(MIB).saturating_mul(2);
    let new_max = new_min.saturating_mul(2);
    w.volumes[0].req.capacity_min = new_min;
    w.volumes[0].req.capacity_max = new_max;
    let call = w
        .create(0, "create (update: a larger capacity range)")
        .await?;
    w.last = vec![call];
    Ok(())
}

#[then(
    "the update reports 0 bytes or a size within the new range, or fails with a non-zero exit status"
)]
async fn update_applied(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let req = w.volume(0)?.req.clone();
    let (first_min, first_max) = w.first_range.unwrap_or_default();
    if call.exit_code().is_some_and(|c| c != 0) {
        w.ctx()
            .note("the plugin refused the update with a non-zero exit status");
        return Ok(());
    }
    let expected = format!(
        "the update applies the new range {}..{} (\"bytes\" 0 or within it) or fails with a non-zero exit status",
        req.capacity_min, req.capacity_max
    );
    if let Some((root, seen)) = super::answer_problem(call) {
        return Err(w.precondition(
            root,
            "create exits 0 with an answer Nomad can decode, or fails",
            &seen,
            &[call],
        ));
    }
    let json = call
        .stdout_json()
        .map_err(|p| w.fail(&expected, &p.to_string(), &[call]))?;
    let resp = create_response(&json).map_err(|e| w.fail(&expected, &e, &[call]))?;
    let bytes = match resp.bytes {
        Field::Invalid(e) => {
            return Err(w.precondition(
                "DHV-CREATE-BYTES",
                "create reports \"bytes\" Go can decode",
                &e,
                &[call],
            ));
        }
        Field::Value(b) => b,
        Field::Absent | Field::Null => 0,
    };
    if bytes == 0 || (req.capacity_min..=req.capacity_max).contains(&bytes) {
        return Ok(());
    }
    // A size already outside the first create's range is DHV-CREATE-CAPACITY's finding: the
    // update cannot be told from it.
    let first =
        w.volume(0)?
            .created
            .as_ref()
            .and_then(|c| match create_response(&c.json).ok()?.bytes {
                Field::Value(b) => Some(b),
                _ => None,
            });
    if let Some(b) = first.filter(|b| *b != 0 && !(first_min..=first_max).contains(b)) {
        let text = w.fail_after(
            "precondition: the first create reports 0 bytes or a size within its range",
            &format!(
                "the first create, asked for {first_min}..{first_max}, reported {b} bytes already"
            ),
            &w.create_repro(0),
            &[],
        );
        return Err(w.ctx().blocked("DHV-CREATE-CAPACITY", text));
    }
    Err(w.fail_after(
        &expected,
        &format!(
            "it exited 0 with \"bytes\": {bytes}, outside the new range: Nomad reports the update as done and stores {bytes} as the volume's capacity"
        ),
        &w.create_repro(0),
        &[call],
    ))
}

#[when("Nomad creates all the volumes at once")]
async fn creates_all_at_once(w: &mut DhvWorld) -> StepResult {
    create_all_at_once(w, "create").await
}

#[when("Nomad creates volumes with DHV_PARAMETERS set to null, {} and a sorted compact object")]
async fn creates_parameter_forms(w: &mut DhvWorld) -> StepResult {
    let base = w.config().parameters.clone();
    let forms = [
        Parameters::Null,
        Parameters::Map(Default::default()),
        sample_object(&base),
    ];
    w.last.clear();
    w.form_leftovers.clear();
    for params in forms {
        let i = w.add_volume();
        w.volumes[i].req.parameters = params.clone();
        w.snapshot_volumes_dir();
        let label = format!("create (DHV_PARAMETERS={})", params.to_go_json());
        let call = w.create(i, &label).await?;
        let leftovers = if call.succeeded() {
            Vec::new()
        } else {
            w.new_in_volumes_dir()?
        };
        w.form_leftovers.push(leftovers);
        w.last.push(call);
    }
    Ok(())
}

#[when("Nomad creates a volume that the plugin cannot create")]
async fn creates_impossible(w: &mut DhvWorld) -> StepResult {
    let mut attempts: Vec<(String, VolumeRequest)> = Vec::new();
    let mut base = w.new_request();
    if let Some(p) = w.config().failing_parameters.clone() {
        let mut r = base.clone();
        r.parameters = p;
        attempts.push(("the parameters given with --failing-parameters".into(), r));
        base = w.new_request();
    }
    let mut huge = base.clone();
    huge.capacity_min = IMPOSSIBLE_CAPACITY;
    huge.capacity_max = IMPOSSIBLE_CAPACITY;
    attempts.push(("a capacity of 4 EiB".into(), huge));
    let mut unknown = w.new_request();
    unknown.parameters = unknown
        .parameters
        .with("nomad-conform-unknown-parameter", "1");
    attempts.push(("an unknown parameter".into(), unknown));

    let mut accepted = Vec::new();
    let mut stopped = Vec::new();
    for (what, req) in attempts {
        w.snapshot_volumes_dir();
        let deleted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Under a file-size limit: a plugin that writes the capacity it is asked for must not
        // fill the disk before it fails (see crate::disk_guard).
        let (call, created) = w
            .create_expecting(
                "create (meant to fail)",
                &req,
                EnvPolicy::Configured,
                deleted.clone(),
                Expect::MeantToFail,
            )
            .await;
        if let Some(why) = stopped_by_harness(&call) {
            stopped.push(format!("{what} ({why})"));
            continue;
        }
        if !call.succeeded() {
            // Killed at its deadline: if an ordinary create is killed too, the deadline
            // clause judges that.
            if call.killed_at_deadline()
                && let Err(problem) = w.ordinary_calls(1, false).await
            {
                w.root_problem = Some(problem);
            }
            w.last = vec![call];
            return Ok(());
        }
        if let Some(c) = created {
            let undo = w
                .delete_request("delete (undo)", req.delete_env(&c.path))
                .await;
            if undo.succeeded() {
                deleted.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        accepted.push(what);
    }
    let mut why = Vec::new();
    if !accepted.is_empty() {
        why.push(format!("the plugin accepted {}", accepted.join(" and ")));
    }
    if !stopped.is_empty() {
        why.push(format!(
            "the harness stopped the plugin on {}, so the failure was not the plugin's own",
            stopped.join(" and ")
        ));
    }
    Err(w.ctx().skip(format!(
        "could not make create fail: {}. Pass --failing-parameters JSON with parameters the \
         plugin refuses to judge this clause.",
        why.join("; ")
    )))
}

/// Why a call meant to fail ended by the harness's hand rather than the plugin's: the plugin
/// itself was killed for writing past the file-size limit (SIGXFSZ), or stopped because a
/// disk was filling. A shell plugin whose `dd` is killed goes on to fail by itself: that is
/// its own failure, judged as such.
fn stopped_by_harness(call: &Call) -> Option<String> {
    use nomad_conform_reports::model::ExitStatus;
    match &call.out.status {
        ExitStatus::Signaled { signal } if *signal == nix::libc::SIGXFSZ => Some(format!(
            "killed by SIGXFSZ for writing a file past the harness's limit of {} for calls \
             meant to fail",
            bytesize::ByteSize::b(crate::disk_guard::FAILING_CALL_FILE_SIZE)
                .display()
                .iec()
        )),
        ExitStatus::StoppedByHarness { reason } => Some(reason.clone()),
        _ => None,
    }
}

#[then(r#"the response has a "path" that is a non-empty absolute path"#)]
async fn has_path(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let expected = "stdout is {\"path\": \"<absolute path>\", ...} with a non-empty absolute path";
    answer_readable(w, call)?;
    let json = call
        .stdout_json()
        .map_err(|p| w.fail(expected, &format!("{p}\n{}", call.summary()), &[call]))?;
    let resp = create_response(&json).map_err(|e| w.fail(expected, &e, &[call]))?;
    match resp.path {
        Field::Value(p) if p.starts_with('/') => Ok(()),
        Field::Value(p) if p.is_empty() => Err(w.fail(
            expected,
            &format!("\"path\" is empty (Nomad would store an empty host path): {json}"),
            &[call],
        )),
        Field::Value(p) => Err(w.fail(expected, &format!("{p:?} is not absolute"), &[call])),
        Field::Absent | Field::Null => Err(w.fail(
            expected,
            &format!("no \"path\" (Nomad would store an empty host path): {json}"),
            &[call],
        )),
        Field::Invalid(e) => Err(w.fail(expected, &e, &[call])),
    }
}

#[then(r#"the response's "bytes" is absent or an integer Go decodes into an int64"#)]
async fn has_bytes(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let expected =
        "\"bytes\" is absent, or a JSON integer from -9223372036854775808 to 9223372036854775807";
    answer_readable(w, call)?;
    let json = call
        .stdout_json()
        .map_err(|p| w.fail(expected, &format!("{p}\n{}", call.summary()), &[call]))?;
    let resp = create_response(&json).map_err(|e| w.fail(expected, &e, &[call]))?;
    match resp.bytes {
        Field::Invalid(e) => Err(w.fail(
            expected,
            &format!("{e}: Nomad fails the create after the volume was made"),
            &[call],
        )),
        _ => Ok(()),
    }
}

#[then(r#"each reported path is distinct, and none is "/", the volumes directory or one of its parents"#)]
async fn paths_are_own(w: &mut DhvWorld) -> StepResult {
    let mut seen: Vec<String> = Vec::new();
    let vols = w.volumes_dir();
    for call in &w.last {
        let Some(created) = created_from(call) else {
            let why = created_problem(call).unwrap_or_default();
            return Err(w.precondition(
                super::create_root_clause(call),
                "each create reports a path Nomad would register",
                &format!("no usable path: {why}"),
                &[call],
            ));
        };
        if let Some(problem) = own_path_problem(&created.path, &vols, &seen) {
            let calls: Vec<&Call> = w.last.iter().collect();
            return Err(w.fail(
                "every volume has a path of its own: not \"/\", not DHV_VOLUMES_DIR or a parent of it, not another volume's",
                &problem,
                &calls,
            ));
        }
        seen.push(created.path);
    }
    Ok(())
}

#[then("the answer has the path and bytes of the first create")]
async fn same_answer(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let first = w.volume(0)?.created.clone().ok_or_else(|| {
        w.ctx()
            .harness_error("the first create did not succeed, nothing to compare")
    })?;
    // What Nomad keeps of an answer: the path (the volume's host path) and the bytes (its
    // capacity), as Go decodes them; any other field is ignored.
    let kept = |j: &serde_json::Value| create_response(j).map(|r| (r.stored_path(), r.bytes)).ok();
    let seen = match call.stdout_json() {
        Ok(j) if kept(&j).is_some() && kept(&j) == kept(&first.json) => return Ok(()),
        Ok(j) => format!("first: {}\nagain: {j}", first.json),
        Err(p) => format!("first: {}\nagain: {p}", first.json),
    };
    Err(w.fail_after(
        "the repeated create answers the same \"path\" and \"bytes\" as the first (what Nomad keeps of the answer)",
        &seen,
        &[&first.reproduce],
        &[call],
    ))
}

#[then("the file written into the volume is still there")]
async fn marker_still_there(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    w.marker_intact(0).map_err(|e| {
        w.fail_after(
            "the volume keeps its contents when create runs again",
            &format!("{e} (written after the first create)"),
            &w.create_repro(0),
            &[call],
        )
    })
}

#[then("the files written into the volumes are still there")]
async fn markers_still_there(w: &mut DhvWorld) -> StepResult {
    for i in 0..w.volumes.len() {
        if let Err(e) = w.marker_intact(i) {
            let calls: Vec<&Call> = w.last.iter().collect();
            return Err(w.fail_after(
                "every volume keeps its contents when create runs again",
                &format!("{e} (written after the first create)"),
                &w.create_repro(i),
                &calls,
            ));
        }
    }
    Ok(())
}

#[then("every restore exits with status 0 and reports the path of the first create")]
async fn restores_match(w: &mut DhvWorld) -> StepResult {
    let mut failed: Option<(usize, String)> = None;
    for (i, call) in w.last.iter().enumerate() {
        let first = w.created_path(i)?;
        match created_from(call) {
            Some(c) if call.succeeded() && c.path == first => {}
            Some(c) => {
                return Err(w.fail_after(
                    "create at agent start reports the same path as the first create",
                    &format!("first: {first}\nat restore: {}", c.path),
                    &w.create_repro(i),
                    &[call],
                ));
            }
            None => {
                failed = Some((i, created_problem(call).unwrap_or_else(|| call.summary())));
                break;
            }
        }
    }
    let Some((i, why)) = failed else {
        return Ok(());
    };
    // A create repeated alone that fails too is judged by the idempotency clause (or the
    // clause of an ordinary create): not a restore problem.
    if let Err(problem) = repeat_alone(w).await {
        return Err(w.blocked_on(&problem, &why));
    }
    let call = &w.last[i];
    Err(w.fail(
        "create at agent start succeeds for an existing volume",
        &format!("{why}\n(an ordinary volume created twice, one call after the other, is fine)"),
        &[call],
    ))
}

/// Create a new ordinary volume, then create it again: the problem, if either does not give
/// the volume, with the clause that judges it.
async fn repeat_alone(w: &mut DhvWorld) -> Result<(), super::Problem> {
    let req = w.new_request();
    let deleted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let label = "create (an ordinary volume, alone)";
    let (first, created) = w
        .create_request(label, &req, EnvPolicy::Configured, deleted.clone())
        .await;
    if let Err((root, seen)) = super::usable_volume(&first, created.as_ref(), &req, &[]) {
        return Err(super::Problem {
            root,
            expected: "an ordinary create, alone, gives a volume Nomad can use".into(),
            seen,
            calls: vec![first],
        });
    }
    let path = created.map(|c| c.path).unwrap_or_default();
    let (again, created) = w
        .create_request(
            "create (the same volume again, alone)",
            &req,
            EnvPolicy::Configured,
            deleted,
        )
        .await;
    match created {
        Some(c) if again.succeeded() && c.path == path => Ok(()),
        _ => Err(super::Problem {
            root: "DHV-CREATE-IDEMPOTENT",
            expected: "the same create repeated alone succeeds with the same path".into(),
            seen: created_problem(&again)
                .unwrap_or_else(|| format!("first: {path}\n{}", again.summary())),
            calls: vec![first, again],
        }),
    }
}

#[then("every create exits with status 0 and reports a distinct path that exists")]
async fn parallel_ok(w: &mut DhvWorld) -> StepResult {
    let Some((expected, seen, k)) = parallel_problem(w) else {
        return Ok(());
    };
    // Two creates one after the other that fail the same way are not a concurrency problem:
    // the clause that judges an ordinary create says what is wrong.
    if let Err(problem) = w.ordinary_calls(2, false).await {
        return Err(w.blocked_on(&problem, &seen));
    }
    let call = &w.last[k];
    Err(w.fail(
        &expected,
        &format!("{seen}\n(two ordinary creates one after the other are fine)"),
        &[call],
    ))
}

/// The first problem among concurrent creates: what was expected, what was seen, which call.
fn parallel_problem(w: &DhvWorld) -> Option<(String, String, usize)> {
    let vols = w.volumes_dir();
    let mut seen = Vec::new();
    for (k, call) in w.last.iter().enumerate() {
        let created = match created_from(call) {
            Some(c) => c,
            None => {
                let why = created_problem(call).unwrap_or_default();
                let expected = format!(
                    "{} concurrent creates of different volumes all succeed",
                    w.last.len()
                );
                return Some((expected, why, k));
            }
        };
        if let Some(p) = own_path_problem(&created.path, &vols, &seen) {
            return Some(("every volume has a path of its own".into(), p, k));
        }
        if !Path::new(&created.path).exists() {
            let p = format!("{} does not exist", created.path);
            return Some(("every reported path exists".into(), p, k));
        }
        seen.push(created.path);
    }
    None
}

/// A clause about a field of create's answer needs an answer: a create that did not exit 0,
/// or whose stdout does not decode, is judged by the clause of that.
fn answer_readable(w: &DhvWorld, call: &Call) -> StepResult {
    match super::answer_problem(call) {
        None => Ok(()),
        Some((root, seen)) => Err(w.precondition(
            root,
            "create exits 0 with an answer Nomad can decode",
            &seen,
            &[call],
        )),
    }
}

#[then(
    "each create either succeeds or fails with a non-zero exit status and leaves nothing behind"
)]
async fn forms_handled(w: &mut DhvWorld) -> StepResult {
    // The form every other clause sends (the run's parameters) failing is not about the form:
    // the clause that judges an ordinary create says what is wrong.
    let usual = w.config().parameters.to_go_json();
    for call in &w.last {
        if call.env_var("DHV_PARAMETERS") == Some(usual.as_str()) && created_from(call).is_none() {
            let why = created_problem(call).unwrap_or_else(|| call.summary());
            return Err(w.precondition(
                super::create_root_clause(call),
                &format!("create with the run's own parameters ({usual}) succeeds"),
                &why,
                &[call],
            ));
        }
    }
    for (call, leftovers) in w.last.iter().zip(&w.form_leftovers) {
        let form = call.env_var("DHV_PARAMETERS").unwrap_or("?").to_string();
        let expected = format!(
            "DHV_PARAMETERS={form} is accepted (exit 0 and a usable path) or refused (non-zero exit, nothing left behind)"
        );
        match call.exit_code() {
            Some(0) => {
                if let Some(why) = created_problem(call) {
                    return Err(w.fail(&expected, &why, &[call]));
                }
            }
            Some(_) => {
                if !leftovers.is_empty() {
                    return Err(w.fail(
                        &expected,
                        &format!("refused, but left {}", list_paths(leftovers)),
                        &[call],
                    ));
                }
            }
            None => return Err(w.fail(&expected, &call.summary(), &[call])),
        }
    }
    Ok(())
}

#[then(r#"stdout is a JSON object with a non-empty "error" string"#)]
async fn has_error_object(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let expected = "stdout is {\"error\": \"<what went wrong>\"}, which Nomad shows to the user";
    if let Some(problem) = &w.root_problem {
        return Err(w.blocked_on(problem, &call.summary()));
    }
    let json = call
        .stdout_json()
        .map_err(|p| w.fail(expected, &format!("{p}\n{}", call.summary()), &[call]))?;
    let resp = create_response(&json).map_err(|e| w.fail(expected, &e, &[call]))?;
    match resp.error {
        Field::Value(e) if !e.trim().is_empty() => Ok(()),
        _ => Err(w.fail(expected, &format!("stdout: {json}"), &[call])),
    }
}

#[then("the reported bytes are 0 or within the requested range")]
async fn bytes_in_range(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let req = w.volume(0)?.req.clone();
    if let Some((root, seen)) = super::answer_problem(call).or_else(|| {
        create_response(&call.stdout_json().ok()?)
            .ok()?
            .bytes
            .invalid()
            .map(|e| ("DHV-CREATE-BYTES", e.to_string()))
    }) {
        // Does an ordinary create, without the capacity range, fail the same way? Then the
        // clause of that judges it; if not, the plugin refused this range, which is its right.
        if let Err(problem) = w.ordinary_calls(1, false).await {
            return Err(w.blocked_on(&problem, &seen));
        }
        let call = w.last_call()?;
        let refused = call.exit_code().is_some_and(|c| c != 0);
        if !refused {
            return Err(w.fail(
                "a create response with \"bytes\"",
                &format!("{seen}\n(only with a capacity range: an ordinary create is fine; {root} judges only that)"),
                &[call],
            ));
        }
        return Err(w.ctx().skip(format!(
            "the plugin refused the capacity range {}..{} that an ordinary create does not send ({}); pass --capacity-min and --capacity-max with a range it accepts to judge this clause",
            req.capacity_min,
            req.capacity_max,
            seen.lines().next().unwrap_or_default()
        )));
    }
    let call = w.last_call()?;
    let json = call.stdout_json().map_err(|p| {
        w.fail(
            "a create response with \"bytes\"",
            &format!("{p}\n{}", call.summary()),
            &[call],
        )
    })?;
    let bytes = match create_response(&json).map(|r| r.bytes) {
        Ok(Field::Value(b)) => b,
        Ok(Field::Absent | Field::Null) => 0,
        Ok(Field::Invalid(e)) | Err(e) => {
            return Err(w.fail("a create response with \"bytes\"", &e, &[call]));
        }
    };
    if bytes == 0 || (req.capacity_min..=req.capacity_max).contains(&bytes) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "bytes is 0 (not sized) or between DHV_CAPACITY_MIN_BYTES={} and DHV_CAPACITY_MAX_BYTES={}",
            req.capacity_min, req.capacity_max
        ),
        &format!("bytes = {bytes}"),
        &[call],
    ))
}
