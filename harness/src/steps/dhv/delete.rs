//! Steps of the delete feature.

use std::path::Path;
use std::sync::atomic::Ordering;

use cucumber::{given, then, when};
use futures::future::join_all;

use super::{DhvWorld, StepResult};
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
    let call = w
        .delete_request("delete (after a failed state save)", env)
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
    for call in &w.last {
        let path = call.env_var("DHV_CREATED_PATH").unwrap_or_default();
        if !call.succeeded() {
            return Err(w.fail(
                &format!("{n} concurrent deletes of different volumes all succeed"),
                &call.summary(),
                &[call],
            ));
        }
        if Path::new(path).symlink_metadata().is_ok() {
            return Err(w.fail(
                &format!("{n} concurrent deletes of different volumes all remove their path"),
                &format!("{path} still exists"),
                &[call],
            ));
        }
    }
    Ok(())
}
