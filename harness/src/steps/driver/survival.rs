//! Steps of the survival feature: tasks outlive the plugin; a relaunched plugin recovers them
//! from their handles; an agent restart reattaches to the running plugin.

use std::sync::Arc;
use std::time::Duration;

use cucumber::{then, when};

use super::{DriverWorld, Instance, StepResult};
use crate::plugins::driver::taskconfig::marked_processes;
use crate::plugins::driver::{DriverRpc, drivers, reattach};

#[when("the plugin process is killed")]
async fn killed(w: &mut DriverWorld) -> StepResult {
    if w.task(0)?.shape == "long" {
        w.require_visible(0).await?;
    }
    let inst = w.instance()?;
    // A crash of the plugin: its process group dies; tasks in their own groups or sessions go on.
    inst.client.close();
    inst.process.kill_now().await;
    Ok(())
}

#[then("the task is still running")]
async fn still_running(w: &mut DriverWorld) -> StepResult {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = w.task(0)?.clone();
    if !marked_processes(&t.marker).is_empty() {
        return Ok(());
    }
    Err(crate::steps::failure_text(
        "the task's processes keep running when the plugin process dies (Nomad relaunches the plugin and recovers them)",
        &format!(
            "no process carrying NOMAD_CONFORM_TASK={} is left",
            t.marker
        ),
        &[w.spec().command_line()],
    ))
}

#[when("the task has exited while the plugin was down")]
async fn exited_meanwhile(w: &mut DriverWorld) -> StepResult {
    let t = w.task(0)?.clone();
    for _ in 0..100 {
        if marked_processes(&t.marker).is_empty() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(w
        .ctx()
        .harness_error("the exit task was still running 5 s after the plugin died"))
}

#[when("Nomad relaunches the plugin and recovers the task from its handle")]
async fn relaunches(w: &mut DriverWorld) -> StepResult {
    w.start_instance(false).await?;
    let handle = w.task(0)?.handle.clone().ok_or_else(|| {
        w.ctx()
            .harness_error("the task has no handle to recover it from")
    })?;
    let (rpc, _) = w
        .client()?
        .recover_task(handle, w.config().timings.rpc)
        .await;
    w.record(&rpc);
    // Nomad's task runner waits on a recovered task at once, as on a started one.
    let waiter = rpc.ok().then(|| {
        let id = w.tasks[0].id.clone();
        super::waiter::Waiter::start(w.client().expect("instance started above"), id)
    });
    w.tasks[0].waiter = waiter;
    w.last = vec![rpc];
    Ok(())
}

#[then("RecoverTask succeeds")]
async fn recovered(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.fail(
        "RecoverTask with the handle StartTask returned succeeds on the relaunched plugin",
        &rpc.summary(),
        &[rpc],
    ))
}

#[then("the recovered task can be inspected, stopped and waited for")]
async fn usable(w: &mut DriverWorld) -> StepResult {
    let id = w.task(0)?.id.clone();
    let c = w.client()?;
    let d = w.config().timings.rpc;
    let (inspect, _) = c.inspect_task(&id, d).await;
    w.record(&inspect);
    let stop = super::lifecycle::stop(w, 0, "SIGTERM", Duration::from_secs(1)).await?;
    let wait = super::lifecycle::wait(w, 0, super::lifecycle::wait_budget(w)).await?;
    let calls: Vec<&DriverRpc> = vec![&inspect, &stop, &wait];
    let running = inspect
        .response
        .as_ref()
        .and_then(|r| r.pointer("/task/state"))
        .and_then(|s| s.as_i64())
        == Some(drivers::TaskState::Running as i64);
    if inspect.ok() && running && stop.ok() && wait.ok() {
        return Ok(());
    }
    Err(w.fail(
        "after RecoverTask, InspectTask shows the task running, StopTask stops it and WaitTask returns",
        &calls
            .iter()
            .map(|c| format!("{}: {}", c.method, c.outcome()))
            .collect::<Vec<_>>()
            .join("; "),
        &calls,
    ))
}

/// How long the harness (playing a restarting agent) stays away before reattaching.
const AGENT_RESTART_GAP: Duration = Duration::from_secs(1);

#[when("the harness drops its connection and reattaches to the plugin")]
async fn reattaches(w: &mut DriverWorld) -> StepResult {
    let inst = w.instance()?;
    inst.client.close();
    // The agent is down for a while before it comes back and reattaches; a plugin that exits
    // when its client goes away is gone by then.
    tokio::time::sleep(AGENT_RESTART_GAP).await;
    let timings = w.config().timings;
    let r = reattach(&inst.process.handshake, &timings)
        .await
        .map_err(|e| {
            crate::steps::failure_text(
                "the running plugin accepts a new connection at the same address (an agent restart reattaches)",
                &format!("{e}; the plugin process is {}", if inst.process.is_alive() { "alive" } else { "gone" }),
                &[w.spec().command_line()],
            )
        })?;
    w.record(&r.plugin_info);
    w.last = vec![r.plugin_info.clone()];
    w.instances.push(Arc::new(Instance {
        process: inst.process.clone(),
        client: r.client,
    }));
    Ok(())
}

#[then("PluginInfo answers again")]
async fn info_again(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.fail(
        "PluginInfo succeeds on the new connection",
        &rpc.summary(),
        &[rpc],
    ))
}

#[then("the task is still known and running")]
async fn still_known(w: &mut DriverWorld) -> StepResult {
    let id = w.task(0)?.id.clone();
    let (rpc, _) = w.client()?.inspect_task(&id, w.config().timings.rpc).await;
    w.record(&rpc);
    let running = rpc
        .response
        .as_ref()
        .and_then(|r| r.pointer("/task/state"))
        .and_then(|s| s.as_i64())
        == Some(drivers::TaskState::Running as i64);
    if rpc.ok() && running {
        return Ok(());
    }
    Err(w.fail(
        "after a reattach the plugin still knows the task, running (no RecoverTask needed)",
        &rpc.summary(),
        &[&rpc],
    ))
}

#[then("the error carries a RecoverableError detail")]
async fn recoverable_detail(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() {
        return Err(w.precondition(
            "DRIVER-START-BAD-CONFIG",
            "StartTask with a configuration that breaks the schema fails",
            &rpc.summary(),
            &[rpc],
        ));
    }
    if rpc.recoverable().is_some() {
        return Ok(());
    }
    Err(w.fail(
        "the failed StartTask's status details hold a hashicorp.nomad.plugins.shared.structs.RecoverableError (Nomad reads it to choose between a restart and failing the task)",
        &format!(
            "{}; details: {}",
            rpc.outcome(),
            rpc.details
                .as_ref()
                .map(|d| format!("{:?}", d.type_urls))
                .unwrap_or_else(|| "none".into())
        ),
        &[rpc],
    ))
}
