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
    if !w.task_visible(0) {
        return still_running_per_driver(w).await;
    }
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

/// Where the harness cannot see the task's processes, the driver tells: relaunched, it
/// recovers the task from its handle, and the task's WaitTask does not return (it still runs).
async fn still_running_per_driver(w: &mut DriverWorld) -> StepResult {
    recover_first_task(w).await?;
    let rpc = w.last_call()?.clone();
    if !rpc.ok() {
        return Err(w.precondition(
            "DRIVER-RECOVER",
            "the relaunched plugin recovers the task from its handle (the harness cannot see the task's processes, so it asks the driver)",
            &rpc.summary(),
            &[&rpc],
        ));
    }
    let waiter = w.task(0)?.waiter.clone();
    let ended = match waiter {
        Some(waiter) => waiter.answer(Duration::from_millis(500)).await,
        None => None,
    };
    crate::recorder::lock(&w.ctx().case).notes.push(
        "judged through the driver's answers: the harness cannot see this driver's task processes in /proc, so it relaunched the plugin, recovered the task and waited on it".into(),
    );
    match ended {
        None => Ok(()),
        Some(end) => {
            w.record(&end);
            Err(w.fail(
                "the task keeps running when the plugin process dies (Nomad relaunches the plugin and recovers it)",
                &format!(
                    "recovered, the task's WaitTask returned at once: {} — it ended with the plugin",
                    end.outcome()
                ),
                &[&rpc, &end],
            ))
        }
    }
}

#[when("the task has exited while the plugin was down")]
async fn exited_meanwhile(w: &mut DriverWorld) -> StepResult {
    let t = w.task(0)?.clone();
    if !w.task_visible(0) {
        // The exit shape ends about a second after it starts; whether it did is asked of the
        // relaunched driver.
        tokio::time::sleep(Duration::from_secs(3)).await;
        w.exit_unseen = true;
        return Ok(());
    }
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
    recover_first_task(w).await?;
    // A task whose RecoverTask fails is destroyed by Nomad: no exit of it is ever read, so the
    // exit code cannot be judged; the failure is DRIVER-RECOVER's, not a second card's.
    if let Some(rpc) = w.last.first().filter(|r| !r.ok()).cloned() {
        return Err(w.precondition(
            "DRIVER-RECOVER",
            "the relaunched plugin recovers the task from its handle (Nomad's restoreHandle destroys a task whose RecoverTask fails, and never reads its exit)",
            &rpc.summary(),
            &[&rpc],
        ));
    }
    if w.exit_unseen && w.last.first().is_some_and(|r| r.ok()) {
        // Hidden processes: the driver says whether the task ended while it was down. Still
        // running means the clause's case (an exit the relaunched driver must report) did not
        // happen.
        let id = w.task(0)?.id.clone();
        let (inspect, _) = w.client()?.inspect_task(&id, w.config().timings.rpc).await;
        w.record(&inspect);
        if super::lifecycle::task_running(&inspect) {
            return Err(w.ctx().skip(
                "the task was still running when the plugin came back (the harness cannot see this driver's task processes, waited 3 s for the exit shape's second, and InspectTask then said RUNNING): a task that exited while the plugin was down was not exercised",
            ));
        }
    }
    Ok(())
}

#[when(
    "Nomad relaunches the plugin and recovers the first task from the handle it holds and the second from the handle it stored"
)]
async fn relaunches_both(w: &mut DriverWorld) -> StepResult {
    w.start_instance(false).await?;
    let a = recover(w, 0, HandleForm::Held).await?;
    let b = recover(w, 1, HandleForm::Stored).await?;
    w.last = vec![a, b];
    Ok(())
}

/// Which copy of a task's handle Nomad gives RecoverTask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HandleForm {
    /// After a plugin crash: the handle in the task runner's memory, as StartTask returned it.
    Held,
    /// After an agent restart: the handle read back from the client's state store, which does
    /// not keep the task config's raw driver config (msgpack_driver_config, an unexported field
    /// of Nomad's TaskConfig) and never had parent_job_id (not converted to protobuf).
    Stored,
}

/// The handle of task `i` as Nomad gives it back in `form`.
pub(super) fn handle_as(
    w: &DriverWorld,
    i: usize,
    form: HandleForm,
) -> Result<drivers::TaskHandle, String> {
    let mut handle = w.task(i)?.handle.clone().ok_or_else(|| {
        w.ctx()
            .harness_error("the task has no handle to recover it from")
    })?;
    if let Some(c) = handle.config.as_mut() {
        c.parent_job_id.clear();
        if form == HandleForm::Stored {
            c.msgpack_driver_config.clear();
        }
    }
    Ok(handle)
}

/// RecoverTask of task `i` on the current instance; on success a waiter watches the task again
/// (Nomad's task runner waits on a recovered task at once, as on a started one).
pub(super) async fn recover(
    w: &mut DriverWorld,
    i: usize,
    form: HandleForm,
) -> Result<DriverRpc, String> {
    let handle = handle_as(w, i, form)?;
    let (mut rpc, _) = w
        .client()?
        .recover_task(handle, w.config().timings.task_call)
        .await;
    crate::plugins::driver::taskhost::elide_agent_env(
        &mut rpc.request,
        &w.config().probe.host.host_env,
    );
    w.record(&rpc);
    let waiter = if rpc.ok() {
        let id = w.tasks[i].id.clone();
        let client = w.client().expect("an instance is running");
        Some(super::waiter::Waiter::start(client, id).await)
    } else {
        None
    };
    w.tasks[i].waiter = waiter;
    Ok(rpc)
}

/// Relaunch the plugin as Nomad does after it died and recover task 0 from the handle held in
/// memory; the RecoverTask call is the step's last call.
async fn recover_first_task(w: &mut DriverWorld) -> StepResult {
    w.start_instance(false).await?;
    let rpc = recover(w, 0, HandleForm::Held).await?;
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

#[then("RecoverTask succeeds with either handle")]
async fn recovered_both(w: &mut DriverWorld) -> StepResult {
    let bad: Vec<&DriverRpc> = w.last.iter().filter(|c| !c.ok()).collect();
    if bad.is_empty() {
        return Ok(());
    }
    let which: Vec<String> = w
        .last
        .iter()
        .zip([
            "as StartTask returned it (after a plugin crash)",
            "as Nomad stores it, without msgpack_driver_config (after an agent restart)",
        ])
        .filter(|(c, _)| !c.ok())
        .map(|(c, form)| format!("the handle {form}: {}", c.outcome()))
        .collect();
    Err(w.fail(
        "RecoverTask succeeds on the relaunched plugin with the handle as Nomad holds it after a plugin crash, and as it stores it across an agent restart (without the task config's msgpack_driver_config: recover from driver_state, not from the task configuration)",
        &which.join("; "),
        &bad,
    ))
}

#[then("the recovered tasks can be stopped and waited for")]
async fn usable_both(w: &mut DriverWorld) -> StepResult {
    // Both still run before either is stopped (stopping one must not be what ends the other:
    // that is DRIVER-TASKS-INDEPENDENT's question).
    still_running_recovered(w, 0).await?;
    still_running_recovered(w, 1).await?;
    stop_recovered(w, 0).await?;
    stop_recovered(w, 1).await
}

#[then("the recovered task can be stopped and waited for")]
async fn usable(w: &mut DriverWorld) -> StepResult {
    still_running_recovered(w, 0).await?;
    stop_recovered(w, 0).await
}

/// What Nomad needs of a recovered task first: it still runs (the WaitTask made when it was
/// recovered has not returned).
async fn still_running_recovered(w: &mut DriverWorld, i: usize) -> StepResult {
    let early = match w.task(i)?.waiter.clone() {
        Some(waiter) => waiter.answer(Duration::from_millis(200)).await,
        None => None,
    };
    match early {
        None => Ok(()),
        Some(e) => {
            w.record(&e);
            Err(w.fail(
                "after RecoverTask the task is still running: its WaitTask does not return before it is stopped",
                &format!("WaitTask returned at once: {}", e.outcome()),
                &[&e],
            ))
        }
    }
}

/// Then StopTask stops it and WaitTask returns; InspectTask (which Nomad's client never calls)
/// is extra evidence.
async fn stop_recovered(w: &mut DriverWorld, i: usize) -> StepResult {
    let id = w.task(i)?.id.clone();
    let (inspect, _) = w.client()?.inspect_task(&id, w.config().timings.rpc).await;
    w.record(&inspect);
    // The job sets kill_signal = "SIGTERM": whether the driver takes an empty signal is
    // DRIVER-STOP-DEFAULT-SIGNAL's question, judged there.
    let stop = super::lifecycle::stop(w, i, "SIGTERM", Duration::from_secs(1)).await?;
    let wait = super::lifecycle::wait(w, i, super::lifecycle::wait_budget(w)).await?;
    let calls: Vec<&DriverRpc> = vec![&inspect, &stop, &wait];
    let running = inspect
        .response
        .as_ref()
        .and_then(|r| r.pointer("/task/state"))
        .and_then(|s| s.as_i64())
        == Some(drivers::TaskState::Running as i64);
    if stop.ok() && wait.ok() {
        if !inspect.ok() || !running {
            crate::recorder::lock(&w.ctx().case).notes.push(format!(
                "InspectTask of the recovered task answered {} (Nomad's client never calls it)",
                inspect.outcome()
            ));
        }
        return Ok(());
    }
    Err(w.fail(
        "after RecoverTask, StopTask stops the task and WaitTask returns (InspectTask as extra evidence)",
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

#[when("the agent restarts and reattaches to the plugin as Nomad does")]
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
    w.instances.push(Arc::new(Instance {
        process: inst.process.clone(),
        client: r.client.clone(),
    }));
    // The driver manager's dispense: PluginInfo (above), no SetConfig, then Init; then the
    // Fingerprint and TaskEvents streams, as on any start.
    let (init, _) = r.client.init(timings.rpc).await;
    w.record(&init);
    let deadline = w.driver_profile().fingerprint_deadline;
    let fingerprint = r.client.fingerprint(deadline, 8).await;
    let events = r.client.task_events(std::time::Duration::ZERO, 64).await;
    fingerprint.wait_first(deadline).await;
    w.fingerprint = Some(Arc::new(fingerprint));
    w.events = Some(Arc::new(events));
    // Every task runner restores its handle, as stored, on this same running plugin.
    let recovered = recover(w, 0, HandleForm::Stored).await?;
    w.last = vec![r.plugin_info.clone(), init, recovered];
    Ok(())
}

#[then("PluginInfo and Init answer again, and the Fingerprint stream opens")]
async fn info_again(w: &mut DriverWorld) -> StepResult {
    let calls: Vec<&DriverRpc> = w.last.iter().collect();
    let mut problems = Vec::new();
    for c in &calls {
        let fine = c.ok() || (c.method == "Init" && c.code == tonic::Code::Unimplemented);
        if !fine && c.method != "RecoverTask" {
            problems.push(format!("{}: {}", c.method, c.outcome()));
        }
    }
    let fp = w.fingerprint.clone();
    if fp.as_ref().is_none_or(|h| h.received() == 0) {
        problems.push(format!(
            "no fingerprint on the reopened Fingerprint stream within {} (the stream: {:?})",
            crate::fmt_duration(w.driver_profile().fingerprint_deadline),
            fp.map(|h| h.end())
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "after an agent restart, on the same running plugin: PluginInfo succeeds, Init succeeds again (or is UNIMPLEMENTED), and a reopened Fingerprint stream sends a fingerprint",
        &problems.join("; "),
        &calls,
    ))
}

#[then("RecoverTask of the stored handle succeeds on the same plugin")]
async fn recovered_in_place(w: &mut DriverWorld) -> StepResult {
    let rpc = w
        .last
        .iter()
        .find(|c| c.method == "RecoverTask")
        .ok_or_else(|| w.ctx().harness_error("no RecoverTask was made"))?;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.fail(
        "RecoverTask of a task the plugin still runs, with the handle as Nomad stored it (no msgpack_driver_config), succeeds: Nomad destroys the task when it fails",
        &rpc.summary(),
        &[rpc],
    ))
}

#[then("the task is still running after the reattach")]
async fn still_running_after_reattach(w: &mut DriverWorld) -> StepResult {
    let task = w.task(0)?.clone();
    let ended = match &task.waiter {
        Some(waiter) => waiter.answer(Duration::from_millis(500)).await,
        None => None,
    };
    let (inspect, _) = w
        .client()?
        .inspect_task(&task.id, w.config().timings.rpc)
        .await;
    w.record(&inspect);
    let running = inspect
        .response
        .as_ref()
        .and_then(|r| r.pointer("/task/state"))
        .and_then(|s| s.as_i64())
        == Some(drivers::TaskState::Running as i64);
    if ended.is_none() && task.waiter.is_some() {
        if !running {
            crate::recorder::lock(&w.ctx().case).notes.push(format!(
                "InspectTask after the reattach answered {} (Nomad's client never calls it)",
                inspect.outcome()
            ));
        }
        return Ok(());
    }
    let seen = match &ended {
        Some(rpc) => {
            w.record(rpc);
            format!("the task's WaitTask returned: {}", rpc.outcome())
        }
        None => "the task could not be waited on (RecoverTask failed)".to_string(),
    };
    Err(w.fail(
        "after the reattach the task still runs: its WaitTask does not return (InspectTask as extra evidence)",
        &format!("{seen}; InspectTask: {}", inspect.outcome()),
        &[&inspect],
    ))
}

#[then("the error is not marked recoverable")]
async fn not_marked_recoverable(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() {
        return Err(w.precondition(
            "DRIVER-START-BAD-CONFIG",
            "StartTask with a configuration that breaks the schema fails",
            &rpc.summary(),
            &[rpc],
        ));
    }
    if rpc.recoverable() != Some(true) {
        return Ok(());
    }
    Err(w.fail(
        "a StartTask refused for a configuration that cannot be decoded carries no RecoverableError detail, or one with recoverable = false (retrying can never help)",
        &format!(
            "{}; its RecoverableError says recoverable = true, so Nomad would restart the task again and again until its restart policy gives up",
            rpc.outcome()
        ),
        &[rpc],
    ))
}
