//! Steps of the general feature: how the plugin is run and what it must never do.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use cucumber::{then, when};
use rand::RngExt as _;

use super::{DhvWorld, StepResult, created_from, created_problem, list_paths, list_tree};
use crate::ledger::StrayPath;
use crate::plugins::dhv::paths::own_path_problem;
use crate::plugins::dhv::{Call, EnvPolicy};

#[when(regex = r#"^Nomad calls the plugin with the operation "([^"]+)"$"#)]
async fn unknown_operation(w: &mut DhvWorld, op: String) -> StepResult {
    w.snapshot_volumes_dir();
    let (req, deleted) = {
        let v = w.volume(0)?;
        (v.req.clone(), v.deleted.clone())
    };
    let env: Vec<(String, String)> = req
        .create_env()
        .into_iter()
        .map(|(k, v)| {
            if k == "DHV_OPERATION" {
                (k, op.clone())
            } else {
                (k, v)
            }
        })
        .collect();
    let call = w
        .invoke(
            &op,
            &op,
            env,
            EnvPolicy::Configured,
            w.deadlines().create_deadline,
        )
        .await;
    // If the plugin treated the operation as a create, make sure the volume goes away.
    if let Some(c) = created_from(&call) {
        w.track_volume(&req, &c.path, deleted);
    }
    w.last = vec![call];
    Ok(())
}

/// fingerprint, create and delete of one new volume.
async fn lifecycle(w: &mut DhvWorld, policy: EnvPolicy) -> Vec<Call> {
    let mut calls = vec![w.fingerprint(policy).await];
    let i = w.add_volume();
    let (req, deleted) = (w.volumes[i].req.clone(), w.volumes[i].deleted.clone());
    let (create, created) = w
        .create_request("create", &req, policy, deleted.clone())
        .await;
    calls.push(create);
    if let Some(c) = created {
        let delete = w
            .invoke(
                "delete",
                "delete",
                req.delete_env(&c.path),
                policy,
                w.deadlines().delete_deadline,
            )
            .await;
        if delete.succeeded() {
            deleted.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        calls.push(delete);
    }
    calls
}

#[when("Nomad fingerprints, creates and deletes a volume with exactly its own environment")]
async fn lifecycle_exact(w: &mut DhvWorld) {
    w.last = lifecycle(w, EnvPolicy::Exact).await;
}

#[when("Nomad fingerprints, creates and deletes a volume")]
async fn lifecycle_configured(w: &mut DhvWorld) {
    w.last = lifecycle(w, EnvPolicy::Configured).await;
}

#[then("every call exits with status 0 with nothing but Nomad's environment")]
async fn minimal_env_ok(w: &mut DhvWorld) -> StepResult {
    w.last_call()?;
    let Some(call) = w.last.iter().find(|c| !c.succeeded()) else {
        return Ok(());
    };
    // Would the same call succeed with the harness's whole environment? That tells a missing
    // variable (PATH, HOME...) from a plugin that fails anyway.
    let again = w
        .plugin()
        .invoke(
            &format!("{} (again, with the harness's environment)", call.label),
            call.argv.get(1).map(String::as_str).unwrap_or_default(),
            call.env.clone(),
            EnvPolicy::Inherit,
            &call.cwd,
            call.deadline,
        )
        .await;
    let ctx = w.ctx();
    ctx.record(again.event(ctx.offset_ms(again.started)));
    let verdict = if again.succeeded() {
        "with the harness's environment added the same call exits 0: the plugin relies on a \
         variable Nomad does not pass (PATH, HOME, USER...)"
    } else {
        "it fails with the harness's environment too, so the environment is not the cause"
    };
    Err(w.fail(
        &format!(
            "{} exits with status 0 with only the DHV_* variables, as Nomad runs it",
            call.label
        ),
        &format!("{}\n{verdict}", call.summary()),
        &[call],
    ))
}

const REQUIRED: [&str; 3] = ["DHV_VOLUMES_DIR", "DHV_VOLUME_ID", "DHV_VOLUME_NAME"];

/// Top-level entries of `dir` (not recursive).
fn entries(dir: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[when(
    "Nomad creates volumes with each of DHV_VOLUMES_DIR, DHV_VOLUME_ID and DHV_VOLUME_NAME missing in turn"
)]
async fn missing_variables(w: &mut DhvWorld) -> StepResult {
    let plugin_dir = w.plugin().dir.clone();
    let cwd = w.cwd();
    let watched_before: BTreeSet<PathBuf> = entries(Path::new("/"))
        .into_iter()
        .chain(entries(&plugin_dir))
        .chain(list_tree(&cwd))
        .collect();
    let mut names: Vec<String> = Vec::new();
    let mut calls = Vec::new();
    for var in REQUIRED {
        let req = w.new_request();
        names.push(req.id.clone());
        names.push(req.name.clone());
        let env: Vec<(String, String)> = req
            .create_env()
            .into_iter()
            .filter(|(k, _)| k != var)
            .collect();
        let call = w
            .invoke(
                &format!("create (without {var})"),
                "create",
                env,
                EnvPolicy::Configured,
                w.deadlines().create_deadline,
            )
            .await;
        if let Some(c) = created_from(&call) {
            w.track_volume(&req, &c.path, Arc::new(AtomicBool::new(false)));
        }
        calls.push(call);
    }
    let watched_after: BTreeSet<PathBuf> = entries(Path::new("/"))
        .into_iter()
        .chain(entries(&plugin_dir))
        .chain(list_tree(&cwd))
        .collect();
    let strays: Vec<PathBuf> = watched_after
        .difference(&watched_before)
        .filter(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            names.iter().any(|n| name.contains(n.as_str()))
        })
        .cloned()
        .collect();
    for p in &strays {
        // New, and named after this scenario's volumes: made by this run, so ours to remove.
        if !p.starts_with(&w.ctx().scratch) {
            w.ctx().ledger.track(StrayPath { path: p.clone() });
        }
    }
    w.strays_seen = strays;
    w.last = calls;
    Ok(())
}

#[then(
    "each create either fails with a non-zero exit status or reports a path of its own that exists"
)]
async fn missing_handled(w: &mut DhvWorld) -> StepResult {
    let vols = w.volumes_dir();
    for call in &w.last {
        let expected = format!(
            "{}: a non-zero exit status, or a usable path of the volume's own",
            call.label
        );
        match call.exit_code() {
            Some(0) => {
                let Some(c) = created_from(call) else {
                    let why = created_problem(call).unwrap_or_default();
                    return Err(w.fail(&expected, &why, &[call]));
                };
                if let Some(p) = own_path_problem(&c.path, &vols, &[]) {
                    return Err(w.fail(&expected, &p, &[call]));
                }
                if !Path::new(&c.path).exists() {
                    return Err(w.fail(&expected, &format!("{} does not exist", c.path), &[call]));
                }
            }
            Some(_) => {}
            None => return Err(w.fail(&expected, &call.summary(), &[call])),
        }
    }
    Ok(())
}

#[then(r#"nothing named after those volumes appears in "/", the working directory or the plugin directory"#)]
async fn no_strays(w: &mut DhvWorld) -> StepResult {
    if w.strays_seen.is_empty() {
        return Ok(());
    }
    let calls: Vec<&Call> = w.last.iter().collect();
    Err(w.fail(
        "a plugin missing a variable acts nowhere outside its volumes (it builds no path from an empty variable)",
        &format!(
            "appeared: {} (removed by the harness)",
            list_paths(&w.strays_seen)
        ),
        &calls,
    ))
}

#[then("no call left a process holding the plugin's stdout or stderr")]
async fn no_held_output(w: &mut DhvWorld) -> StepResult {
    for call in &w.last {
        if call.out.output_held_open {
            let who: Vec<String> = call.out.held_output.iter().map(|p| p.to_string()).collect();
            return Err(w.fail(
                "when the plugin exits, stdout and stderr close (Nomad waits for both to close, past the deadline)",
                &format!(
                    "{} exited but its output stayed open for longer than {}, held by {}",
                    call.label,
                    crate::fmt_duration(w.ctx().run.profile.harness.output_close_grace),
                    if who.is_empty() { "a process outside its process group".into() } else { who.join(", ") }
                ),
                &[call],
            ));
        }
    }
    Ok(())
}

#[then("no call left a process of the plugin running")]
async fn no_strays_running(w: &mut DhvWorld) -> StepResult {
    for call in &w.last {
        if !call.out.strays.is_empty() {
            let who: Vec<String> = call.out.strays.iter().map(|p| p.to_string()).collect();
            return Err(w.fail(
                "no process the plugin started is still running when it exits",
                &format!(
                    "after {} exited: {} (killed by the harness)",
                    call.label,
                    who.join(", ")
                ),
                &[call],
            ));
        }
    }
    Ok(())
}

#[when("Nomad creates and deletes a volume whose parameters carry a secret")]
async fn secret_lifecycle(w: &mut DhvWorld) -> StepResult {
    let token: u64 = w.ctx_mut().rng.random();
    let secret = format!("S3cr3t{token:016x}");
    w.ctx().run.store.add_secret(&secret);
    let i = w.add_volume();
    let params = w.volumes[i].req.parameters.with("password", &secret);
    w.volumes[i].req.parameters = params;
    let mut calls = vec![w.create(i, "create").await?];
    if w.volumes[i].created.is_some()
        && let Ok(d) = w.delete(i, "delete").await
    {
        calls.push(d);
    }
    w.secret = Some(secret);
    w.last = calls;
    Ok(())
}

#[then("the secret appears in no output of the plugin")]
async fn secret_not_echoed(w: &mut DhvWorld) -> StepResult {
    let Some(secret) = &w.secret else {
        return Err(w.ctx().harness_error("no secret was planted"));
    };
    for call in &w.last {
        for (name, cap) in [("stdout", &call.out.stdout), ("stderr", &call.out.stderr)] {
            let text = cap.excerpt(usize::MAX / 4).text;
            if text.contains(secret.as_str()) {
                return Err(w.fail(
                    "parameter values never appear on stdout or stderr (both go to the Nomad agent's logs)",
                    &format!(
                        "{} printed the value of parameter \"password\" on {name}",
                        call.label
                    ),
                    &[call],
                ));
            }
        }
    }
    Ok(())
}
