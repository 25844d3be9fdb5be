//! StopTask, DestroyTask and SignalTask: signals to a task's processes.
//!
//! - StopTask(timeout, signal) sends `signal` (SIGINT when empty) to the task's process group,
//!   waits up to `timeout` for the task to exit, then sends SIGKILL to the group, and answers
//!   once the task has exited. Stopping a task that has already exited succeeds. It does not
//!   forget the task: WaitTask and InspectTask still work afterwards.
//! - DestroyTask(force) refuses a running task unless `force`; with it, it SIGKILLs the task's
//!   group and everything else left in its session, waits for the exit, removes the task's
//!   state directory and forgets the task.
//! - SignalTask sends a signal, by name, to the task's process group.
//!
//! With the no-send-signals variant the driver cannot deliver signals (as if its tasks ran in
//! a VM): Capabilities says so, SignalTask fails, and StopTask kills the task at once.

use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use nomad_conform_proto::nomad::drivers::{DestroyTaskRequest, SignalTaskRequest, StopTaskRequest};
use tonic::Status;

use crate::faults::Fault;
use crate::plugin::Plugin;
use crate::tasks::Task;
use crate::variants::Variant;
use crate::{process, rpc, start};

/// The signal when StopTask names none: Nomad sends "" for a job without `kill_signal`, and its
/// own executor then uses SIGINT, so this driver does too (it used SIGTERM before).
const DEFAULT_STOP_SIGNAL: Signal = Signal::SIGINT;
/// How long to wait for a task to die after SIGKILL before reporting a failure.
const KILL_GRACE: Duration = Duration::from_secs(10);
/// How long after StopTask's timeout the stop-late-escalation fault sends SIGKILL.
const LATE_ESCALATION: Duration = Duration::from_secs(12);
/// How long DestroyTask(force) waits for a running task after SIGTERM with the destroy-grace
/// variant (nomad-driver-lxc: `handle.shutdown(1 * time.Minute)`).
const DESTROY_GRACE: Duration = Duration::from_secs(60);

/// Whether this driver can deliver signals to its tasks: Capabilities, SignalTask and StopTask
/// all ask here.
pub fn sends_signals(plugin: &Plugin) -> bool {
    // no-send-signals: a driver whose tasks no signal reaches (a VM).
    !plugin.variants.has(Variant::NoSendSignals)
}

pub async fn stop_task(plugin: &Plugin, request: StopTaskRequest) -> Result<(), Status> {
    let faults = &plugin.faults;
    let task = plugin.task(&request.task_id)?;
    let timeout = request
        .timeout
        .ok_or_else(|| rpc::bad_request("StopTask without a timeout"))
        .and_then(|t| {
            Duration::try_from(t).map_err(|_| rpc::bad_request("StopTask with a negative timeout"))
        })?;
    let signal = if faults.has(Fault::StopIgnoresSignal) || !sends_signals(plugin) {
        Signal::SIGKILL
    } else if request.signal.is_empty() {
        // rejects-empty-signal: "" is what Nomad sends for a job without kill_signal.
        if faults.has(Fault::RejectsEmptySignal) {
            return Err(rpc::failed("invalid signal \"\""));
        }
        DEFAULT_STOP_SIGNAL
    } else {
        process::parse_signal(&request.signal)
            .ok_or_else(|| rpc::failed(format!("unknown signal {:?}", request.signal)))?
    };

    let targets = if faults.has(Fault::StopKillsAll) {
        plugin.tasks.all()
    } else {
        vec![task]
    };
    for task in targets {
        stop_one(plugin, &task, signal, timeout).await?;
    }
    Ok(())
}

async fn stop_one(
    plugin: &Plugin,
    task: &Arc<Task>,
    signal: Signal,
    timeout: Duration,
) -> Result<(), Status> {
    if task.exit().is_some() {
        if plugin.faults.has(Fault::StopExitedErrors) {
            return Err(rpc::failed(
                "task has already exited (stop-exited-errors fault)",
            ));
        }
        return Ok(());
    }
    if signal == Signal::SIGKILL {
        // Nothing to escalate to: kill, and wait for the exit.
        plugin
            .events
            .emit(&task.config, "Stop requested: SIGKILL", &[]);
        return kill(task).await;
    }
    plugin.events.emit(
        &task.config,
        format!(
            "Stop requested: {signal}, then SIGKILL after {:.3}s",
            timeout.as_secs_f64()
        ),
        &[("signal", signal.to_string())],
    );
    task.processes
        .signal(signal)
        .map_err(|err| rpc::failed(format!("failed to send {signal}: {err}")))?;
    if tokio::time::timeout(timeout, task.wait()).await.is_ok() {
        return Ok(());
    }
    if plugin.faults.has(Fault::StopNoEscalation) {
        return Ok(());
    }
    if plugin.faults.has(Fault::StopLateEscalation) {
        // stop-late-escalation: answer now, kill much later.
        let task = task.clone();
        tokio::spawn(async move {
            tokio::time::sleep(LATE_ESCALATION).await;
            let _ = kill(&task).await;
        });
        return Ok(());
    }

    plugin.events.emit(
        &task.config,
        format!(
            "Task still running after {:.3}s: sending SIGKILL",
            timeout.as_secs_f64()
        ),
        &[],
    );
    kill(task).await
}

/// SIGKILL to the task's group; answers once the task has exited.
async fn kill(task: &Task) -> Result<(), Status> {
    task.processes
        .signal(Signal::SIGKILL)
        .map_err(|err| rpc::failed(format!("failed to send SIGKILL: {err}")))?;
    tokio::time::timeout(KILL_GRACE, task.wait())
        .await
        .map(|_| ())
        .map_err(|_| {
            rpc::failed(format!(
                "task still running {} s after SIGKILL",
                KILL_GRACE.as_secs()
            ))
        })
}

pub async fn destroy_task(plugin: &Plugin, request: DestroyTaskRequest) -> Result<(), Status> {
    let faults = &plugin.faults;
    let task = plugin.task(&request.task_id)?;
    if task.exit().is_none() && !request.force {
        return Err(rpc::failed(
            "cannot destroy a running task without force: stop it first",
        ));
    }
    if faults.has(Fault::DestroyLeavesTask) {
        return Ok(());
    }
    // destroy-grace: a running task is asked to stop first, and given a fixed grace.
    if plugin.variants.has(Variant::DestroyGrace) && task.exit().is_none() {
        let _ = task.processes.signal(Signal::SIGTERM);
        let _ = tokio::time::timeout(DESTROY_GRACE, task.wait()).await;
    }
    if faults.has(Fault::DestroyLeavesChildren) {
        task.processes.kill_main();
    } else {
        // Also after the main process exited: its children may still run.
        task.processes.kill_everything();
    }
    if tokio::time::timeout(KILL_GRACE, task.wait()).await.is_err() {
        return Err(rpc::failed(format!(
            "task still running {} s after SIGKILL",
            KILL_GRACE.as_secs()
        )));
    }
    if faults.has(Fault::DestroyKeepsTask) {
        return Ok(());
    }
    start::remove_task_state(&task.state.status_file);
    plugin.tasks.remove(&task.config.id);
    plugin.events.emit(&task.config, "Task destroyed", &[]);
    Ok(())
}

pub fn signal_task(plugin: &Plugin, request: SignalTaskRequest) -> Result<(), Status> {
    let faults = &plugin.faults;
    let task = plugin.task(&request.task_id)?;
    if !sends_signals(plugin) {
        return Err(Status::failed_precondition(
            "this driver cannot send signals to its tasks (no-send-signals variant)",
        ));
    }
    let Some(signal) = process::parse_signal(&request.signal) else {
        if faults.has(Fault::SignalUnknownOk) {
            return Ok(());
        }
        return Err(rpc::failed(format!("unknown signal {:?}", request.signal)));
    };
    if task.exit().is_some() {
        return Err(rpc::failed(
            "task has exited: there is no process to signal",
        ));
    }
    if faults.has(Fault::SignalIgnored) {
        return Ok(());
    }
    task.processes
        .signal(signal)
        .map_err(|err| rpc::failed(format!("failed to send {signal}: {err}")))?;
    plugin.events.emit(
        &task.config,
        format!("Sent {signal} to the task"),
        &[("signal", signal.to_string())],
    );
    Ok(())
}
