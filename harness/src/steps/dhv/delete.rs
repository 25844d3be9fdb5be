//! Steps of the delete feature.

use std::path::Path;
use std::sync::atomic::Ordering;

use cucumber::{given, then, when};
use futures::future::join_all;

use super::{DhvWorld, Problem, StepResult, exit_clause};
use crate::plugins::dhv::Call;

#[given("Nomad has deleted the volume")]
async fn has_deleted(w: &mut DhvWorld) -> StepResult {
    let call = w.delete(0, "delete").await?;
    if call.succeeded() {
        return Ok(());
    }
    let text = w.fail(
        "precondition: the first delete succeeds",
        &call.summary(),
        &[&call],
    );
    let root = if call.killed_at_deadline() {
        "DHV-DELETE-DEADLINE"
    } else {
        "DHV-DELETE-EXIT-ZERO"
    };
    Err(w.ctx().blocked(root, text))
}

#[when("Nomad deletes the volume")]
async fn deletes(w: &mut DhvWorld) -> StepResult {
    let call = w.delete(0, "delete").await?;
    w.last = vec![call];
    Ok(())
}

#[when("Nomad deletes the volume again")]
async fn deletes_again(w: &mut DhvWorld) -> StepResult {
    let call = w.delete(0, "delete (again)").await?;
    w.last = vec![call];
    Ok(())
}

#[when("Nomad deletes a volume that was never created")]
async fn deletes_never_created(w: &mut DhvWorld) -> StepResult {
    let req = w.new_request();
    let path = req.volumes_dir.join(&req.id).display().to_string();
    let call = w
        .delete_request("delete (never created)", req.delete_env(&path))
        .await;
    if !call.succeeded() {
        // Does the plugin fail every delete, of an existing volume too? Then that is what is
        // wrong, and DHV-DELETE-EXIT-ZERO judges it. The comparison needs a volume; where
        // create fails, there is none, and this delete is judged on its own (it needs no
        // create).
        let i = w.add_volume();
        let created = w.create(i, "create (a volume to compare with)").await?;
        if created.succeeded() && w.created_path(i).is_ok() {
            let ordinary = w
                .delete(i, "delete (an existing volume, to compare)")
                .await?;
            if !ordinary.succeeded() {
                w.root_problem = Some(Problem {
                    root: exit_clause(&ordinary),
                    expected: "an ordinary delete of an existing volume exits with status 0".into(),
                    seen: ordinary.summary(),
                    calls: vec![ordinary],
                });
            }
        }
    }
    w.last = vec![call];
    Ok(())
}

#[when("Nomad deletes all the volumes at once")]
async fn deletes_all(w: &mut DhvWorld) -> StepResult {
    let n = w.volumes.len();
    let calls: Vec<Call> = {
        let w: &DhvWorld = w;
        join_all((0..n).map(|i| async move {
            match w.created_path(i) {
                Ok(path) => {
                    let env = w.volumes[i].req.delete_env(&path);
                    Some(w.delete_with(i, "delete", env).await)
                }
                Err(_) => None,
            }
        }))
        .await
        .into_iter()
        .flatten()
        .collect()
    };
    w.last = calls;
    Ok(())
}

#[when("Nomad deletes the volume the way it does after failing to save client state")]
async fn auto_delete(w: &mut DhvWorld) -> StepResult {
    let path = w.created_path(0)?;
    let env = w.volume(0)?.req.auto_delete_env();
    // HostVolumeManager.Create runs this delete with the create's own context: what is left
    // of the create's deadline once the create returned, not a deadline of its own.
    let used = w
        .volume(0)?
        .created
        .as_ref()
        .map(|c| c.wall)
        .unwrap_or_default();
    let deadline = w.deadlines().create_deadline.saturating_sub(used);
    let call = w
        .invoke(
            "delete (after a failed state save)",
            "delete",
            env,
            crate::plugins::dhv::EnvPolicy::Configured,
            deadline,
        )
        .await;
    if call.succeeded() && Path::new(&path).symlink_metadata().is_err() {
        w.volumes[0].deleted.store(true, Ordering::SeqCst);
    }
    w.last = vec![call];
    Ok(())
}

#[then("the second volume and its file are still there")]
async fn second_intact(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let path = w.created_path(1)?;
    let problem = if !Path::new(&path).exists() {
        Some(format!("the second volume's path {path} is gone"))
    } else {
        w.marker_intact(1).err()
    };
    match problem {
        None => Ok(()),
        Some(p) => Err(w.fail_after(
            "deleting one volume leaves every other volume and its data untouched",
            &format!("{p}\n{}", call.summary()),
            &w.create_repro(1),
            &[call],
        )),
    }
}

#[then("every delete exits with status 0 and every path is gone")]
async fn all_deleted(w: &mut DhvWorld) -> StepResult {
    let n = w.last.len();
    let mut found: Option<(String, String, usize)> = None;
    for (k, call) in w.last.iter().enumerate() {
        let path = call.env_var("DHV_CREATED_PATH").unwrap_or_default();
        if !call.succeeded() {
            found = Some((
                format!("{n} concurrent deletes of different volumes all succeed"),
                call.summary(),
                k,
            ));
            break;
        }
        if Path::new(path).symlink_metadata().is_ok() {
            found = Some((
                format!("{n} concurrent deletes of different volumes all remove their path"),
                format!("{path} still exists"),
                k,
            ));
            break;
        }
    }
    let Some((expected, seen, k)) = found else {
        return Ok(());
    };
    // A delete that fails alone too is not a concurrency problem: its own clause judges it.
    if let Err(problem) = w.ordinary_calls(1, true).await {
        return Err(w.blocked_on(&problem, &seen));
    }
    let call = &w.last[k];
    Err(w.fail(
        &expected,
        &format!("{seen}\n(an ordinary volume created and deleted alone is fine)"),
        &[call],
    ))
}

/// The volume ID of a delete no plugin should carry out: not a UUID, and a path outside the
/// volumes directory if used as one (under the scenario's scratch directory, where nothing is).
const NOT_AN_ID: &str = "../nomad-conform-not-an-id";

#[when("Nomad deletes the volume, and then a volume the plugin cannot delete")]
async fn deletes_undeletable(w: &mut DhvWorld) -> StepResult {
    let ordinary = w.delete(0, "delete").await?;
    if ordinary.killed_at_deadline() {
        w.root_problem = Some(Problem {
            root: exit_clause(&ordinary),
            expected: "delete ends before its deadline".into(),
            seen: ordinary.summary(),
            calls: vec![],
        });
    }
    if !ordinary.succeeded() {
        w.last = vec![ordinary];
        return Ok(());
    }
    let v = w.volume(0)?;
    let vols = v.req.volumes_dir.clone();
    let mut env = v
        .req
        .delete_env(&vols.join(NOT_AN_ID).display().to_string());
    for (k, val) in env.iter_mut() {
        if k == "DHV_VOLUME_ID" {
            *val = NOT_AN_ID.to_string();
        }
    }
    let call = w
        .delete_request("delete (a volume ID that is no ID)", env)
        .await;
    if call.exit_code() == Some(0) {
        return Err(w.ctx().skip(format!(
            "no delete failed: the ordinary delete succeeded, and so did a delete with DHV_VOLUME_ID={NOT_AN_ID}; a failed delete's error could not be seen"
        )));
    }
    if call.killed_at_deadline() {
        w.root_problem = Some(Problem {
            root: exit_clause(&call),
            expected: "delete ends before its deadline".into(),
            seen: call.summary(),
            calls: vec![],
        });
    }
    w.last = vec![call];
    Ok(())
}
