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
use crate::plugins::dhv::{Call, CallOpts, EnvPolicy};

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
    lifecycle_with(w, policy, false).await
}

/// [`lifecycle`]; with `nomad_wait`, each call waits for the plugin's output to close until its
/// deadline, as Nomad does, instead of the run's short output-close grace.
async fn lifecycle_with(w: &mut DhvWorld, policy: EnvPolicy, nomad_wait: bool) -> Vec<Call> {
    let opts = |deadline: std::time::Duration| CallOpts {
        linger: nomad_wait.then_some(deadline),
        ..CallOpts::default()
    };
    let d = w.deadlines().clone();
    let fp_deadline = d.fingerprint_kill_deadline();
    let mut calls = vec![
        w.invoke_with(
            "fingerprint",
            "fingerprint",
            crate::plugins::dhv::fingerprint_env(),
            policy,
            fp_deadline,
            opts(fp_deadline),
        )
        .await,
    ];
    let i = w.add_volume();
    let (req, deleted) = (w.volumes[i].req.clone(), w.volumes[i].deleted.clone());
    let create = w
        .invoke_with(
            "create",
            "create",
            req.create_env(),
            policy,
            d.create_deadline,
            opts(d.create_deadline),
        )
        .await;
    let created = created_from(&create);
    if let Some(c) = &created {
        w.track_volume(&req, &c.path, deleted.clone());
    }
    calls.push(create);
    if let Some(c) = created {
        let delete = w
            .invoke_with(
                "delete",
                "delete",
                req.delete_env(&c.path),
                policy,
                d.delete_deadline,
                opts(d.delete_deadline),
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

/// Alone: no other call of the plugin runs meanwhile, and every earlier one has ended and had
/// what it left running stopped. What these calls leave is theirs whatever `--jobs` is (a
/// background job guarded by a node-wide lock is started by these calls, not by a concurrent
/// clause's call that happened to take the lock first).
#[when("Nomad fingerprints, creates and deletes a volume, waiting for their output as Nomad does")]
async fn lifecycle_nomad_wait(w: &mut DhvWorld) {
    w.last = lifecycle_with(w, EnvPolicy::Configured, true).await;
}

#[when("Nomad fingerprints, creates and deletes a volume")]
async fn lifecycle_configured(w: &mut DhvWorld) {
    w.alone().await;
    w.last = lifecycle(w, EnvPolicy::Configured).await;
    w.together();
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
    if !again.succeeded() {
        // It fails with the harness's environment too: the environment is not the cause, and
        // the clause that judges such a call says what is.
        return Err(w.precondition(
            super::exit_clause(&again),
            &format!("{} exits with status 0", call.label),
            &format!(
                "{}\nit fails with the harness's environment too, so the environment is not the cause",
                again.summary()
            ),
            &[call, &again],
        ));
    }
    let verdict = "with the harness's environment added the same call exits 0: the plugin relies \
         on a variable Nomad does not pass (PATH, HOME, USER...)";
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
        if !p.starts_with(w.ctx().scratch()) {
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
    let mut found: Option<(String, String, usize)> = None;
    for (k, call) in w.last.iter().enumerate() {
        let expected = format!(
            "{}: a non-zero exit status, or a usable path of the volume's own",
            call.label
        );
        let problem = match call.exit_code() {
            Some(0) => match created_from(call) {
                None => Some(created_problem(call).unwrap_or_default()),
                Some(c) => own_path_problem(&c.path, &vols, &[]).or_else(|| {
                    (!Path::new(&c.path).exists()).then(|| format!("{} does not exist", c.path))
                }),
            },
            Some(_) => None,
            None => Some(call.summary()),
        };
        if let Some(p) = problem {
            found = Some((expected, p, k));
            break;
        }
    }
    let Some((expected, seen, k)) = found else {
        return Ok(());
    };
    // An ordinary create (every variable set) that goes wrong the same way is judged by the
    // create clauses: the missing variable is not the cause.
    if let Err(problem) = w.ordinary_calls(1, false).await {
        return Err(w.blocked_on(&problem, &seen));
    }
    let call = &w.last[k];
    Err(w.fail(&expected, &seen, &[call]))
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

/// The lifecycle's create gave no volume, so its delete never ran: nothing was seen to judge
/// by, and the clause that judges that create says what is wrong.
fn lifecycle_incomplete(w: &DhvWorld) -> StepResult {
    let Some(create) = w.last.iter().find(|c| super::op_of(c) == "create") else {
        return Ok(());
    };
    if w.last.iter().any(|c| super::op_of(c) == "delete") {
        return Ok(());
    }
    let why = created_problem(create).unwrap_or_else(|| create.summary());
    Err(w.precondition(
        super::create_root_clause(create),
        "create gives a volume, so that its delete can be watched too",
        &why,
        &[create],
    ))
}

/// Who held a call's output, for a message.
fn holders(call: &Call) -> String {
    let who: Vec<String> = call.out.held_output.iter().map(|p| p.to_string()).collect();
    if who.is_empty() {
        "a process outside its process group".into()
    } else {
        who.join(", ")
    }
}

#[then("no call left a process holding the plugin's stdout or stderr")]
async fn no_held_output(w: &mut DhvWorld) -> StepResult {
    let grace = w.ctx().run.profile.harness.output_close_grace;
    for call in &w.last {
        let Some(held) = call.output_held_after_exit() else {
            continue;
        };
        // Killed at its deadline: the deadline clause judges that call.
        if held <= grace || call.killed_at_deadline() {
            continue;
        }
        if call.out.output_held_open && !call.output_holder_seen() {
            crate::recorder::lock(&w.ctx().case).notes.push(format!(
                "{}: its output stayed open {} after it exited, but no process it started was found holding it (a process the harness was starting at that moment holds copies of the pipes until it executes): not judged",
                call.label,
                crate::fmt_duration(held)
            ));
            continue;
        }
        if call.output_held_past_deadline() {
            return Err(w.precondition(
                "DHV-GENERAL-OUTPUT-CLOSED-BY-DEADLINE",
                "the plugin's output is closed by the call's deadline",
                &format!(
                    "{} exited, but its output was still open at its deadline, held by {}",
                    call.label,
                    holders(call)
                ),
                &[call],
            ));
        }
        return Err(w.fail(
            "when the plugin exits, stdout and stderr close (Nomad's call returns only once both are closed)",
            &format!(
                "{} exited but its output stayed open {} longer (Nomad's call was delayed that long)",
                call.label,
                crate::fmt_duration(held)
            ),
            &[call],
        ));
    }
    lifecycle_incomplete(w)
}

#[then("every call's output was closed by its deadline")]
async fn closed_by_deadline(w: &mut DhvWorld) -> StepResult {
    if let Some(call) = w.last.iter().find(|c| c.killed_at_deadline()) {
        return Err(w.precondition(
            super::deadline_clause(call),
            &format!("{} ends before its deadline", call.label),
            &call.summary(),
            &[call],
        ));
    }
    for call in &w.last {
        if call.output_held_past_deadline() {
            return Err(w.fail(
                "stdout and stderr are closed by the call's deadline (after it, Nomad's call hangs until they are)",
                &format!(
                    "{}: its output was still open at its deadline of {}, held by {}; the harness then killed the holder",
                    call.label,
                    crate::fmt_duration(call.deadline),
                    holders(call)
                ),
                &[call],
            ));
        }
    }
    lifecycle_incomplete(w)
}

#[then("no call signalled the agent's process group")]
async fn no_group_signal(w: &mut DhvWorld) -> StepResult {
    for call in &w.last {
        let signals = call.group_signals();
        if !signals.is_empty() {
            return Err(w.fail(
                "no signal reaches the plugin's process group, which under Nomad is the agent's",
                &format!(
                    "during {}, the stand-in for the Nomad agent got: {}",
                    call.label,
                    signals.join("; ")
                ),
                &[call],
            ));
        }
    }
    lifecycle_incomplete(w)
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
    lifecycle_incomplete(w)
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
