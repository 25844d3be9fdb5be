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

#[when("the agent restarts and restores every volume at once")]
async fn restores(w: &mut DhvWorld) -> StepResult {
    create_all_at_once(w, "create (restore)").await
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

#[then(r#"the response's "bytes" is absent or an integer from 0 to 9223372036854775807"#)]
async fn has_bytes(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let expected = "\"bytes\" is absent, or a JSON integer from 0 to 9223372036854775807";
    let json = call
        .stdout_json()
        .map_err(|p| w.fail(expected, &format!("{p}\n{}", call.summary()), &[call]))?;
    let resp = create_response(&json).map_err(|e| w.fail(expected, &e, &[call]))?;
    match resp.bytes {
        Field::Absent | Field::Null => Ok(()),
        Field::Value(b) if b >= 0 => Ok(()),
        Field::Value(b) => Err(w.fail(
            expected,
            &format!("\"bytes\" is {b}: a negative size"),
            &[call],
        )),
        Field::Invalid(e) => Err(w.fail(
            expected,
            &format!("{e}: Nomad fails the create after the volume was made"),
            &[call],
        )),
    }
}

#[then(r#"each reported path is distinct, and none is "/", the volumes directory or one of its parents"#)]
async fn paths_are_own(w: &mut DhvWorld) -> StepResult {
    let mut seen: Vec<String> = Vec::new();
    let vols = w.volumes_dir();
    for call in &w.last {
        let Some(created) = created_from(call) else {
            let why = created_problem(call).unwrap_or_default();
            return Err(w.fail(
                "each create reports a path",
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

#[then("stdout holds the same JSON as the first create")]
async fn same_json(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let first = w.volume(0)?.created.clone().ok_or_else(|| {
        w.ctx()
            .harness_error("the first create did not succeed, nothing to compare")
    })?;
    let seen = match call.stdout_json() {
        Ok(j) if j == first.json => return Ok(()),
        Ok(j) => format!("first: {}\nsecond: {j}", first.json),
        Err(p) => format!("first: {}\nsecond: {p}", first.json),
    };
    Err(w.fail_after(
        "the second create returns the same JSON as the first",
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
    for (i, call) in w.last.iter().enumerate() {
        let first = w.created_path(i)?;
        let again = created_from(call);
        match again {
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
                let why = created_problem(call).unwrap_or_default();
                return Err(w.fail(
                    "create at agent start succeeds for an existing volume",
                    &why,
                    &[call],
                ));
            }
        }
    }
    Ok(())
}

#[then("every create exits with status 0 and reports a distinct path that exists")]
async fn parallel_ok(w: &mut DhvWorld) -> StepResult {
    let vols = w.volumes_dir();
    let mut seen = Vec::new();
    for call in &w.last {
        let created = match created_from(call) {
            Some(c) => c,
            None => {
                let why = created_problem(call).unwrap_or_default();
                return Err(w.fail(
                    &format!(
                        "{} concurrent creates of different volumes all succeed",
                        w.last.len()
                    ),
                    &why,
                    &[call],
                ));
            }
        };
        if let Some(p) = own_path_problem(&created.path, &vols, &seen) {
            return Err(w.fail("every volume has a path of its own", &p, &[call]));
        }
        if !Path::new(&created.path).exists() {
            return Err(w.fail(
                "every reported path exists",
                &format!("{} does not exist", created.path),
                &[call],
            ));
        }
        seen.push(created.path);
    }
    Ok(())
}

#[then(
    "each create either succeeds or fails with a non-zero exit status and leaves nothing behind"
)]
async fn forms_handled(w: &mut DhvWorld) -> StepResult {
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
