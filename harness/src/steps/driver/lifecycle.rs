//! Steps of the lifecycle feature: StartTask, WaitTask, StopTask, DestroyTask, InspectTask as
//! the client's task runner calls them.

use std::time::{Duration, Instant};

use cucumber::{given, then, when};
use nomad_conform_hclspec::SpecTree;
use tonic::Code;

use super::tasks::{Placeholders, TRAP_TERM_CODE};
use super::{DriverWorld, StepResult};
use crate::plugins::driver::taskconfig::marked_processes;
use crate::plugins::driver::{DriverRpc, Service, drivers};

pub(super) fn duration(d: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(d).ok()
}

/// The exit result in a WaitTask answer.
pub(super) fn exit_of(rpc: &DriverRpc) -> Option<(i64, i64)> {
    let r = rpc.response.as_ref()?.get("result")?;
    let n = |k: &str| r.get(k).and_then(|v| v.as_i64()).unwrap_or(0);
    Some((n("exit_code"), n("signal")))
}

/// WaitTask of task `i`, bounded by `within`.
/// The task's exit as Nomad learns it: the answer of the WaitTask made when the task started
/// (or was recovered), waiting up to `within` more for it.
pub(super) async fn wait(w: &DriverWorld, i: usize, within: Duration) -> Result<DriverRpc, String> {
    let task = w.task(i)?;
    let Some(waiter) = task.waiter.clone() else {
        return wait_fresh(w, i, within).await;
    };
    let rpc = match waiter.answer(within).await {
        Some(rpc) => rpc,
        None => DriverRpc::unanswered(
            Service::Driver,
            "WaitTask",
            serde_json::json!({ "task_id": task.id }),
            waiter.open_for(),
        ),
    };
    w.record(&rpc);
    Ok(rpc)
}

/// A WaitTask call made now (the clauses about WaitTask itself).
pub(super) async fn wait_fresh(
    w: &DriverWorld,
    i: usize,
    within: Duration,
) -> Result<DriverRpc, String> {
    let id = w.task(i)?.id.clone();
    let (rpc, _) = w.client()?.wait_task(&id, within).await;
    w.record(&rpc);
    Ok(rpc)
}

/// How long a WaitTask may take for a task that is about to exit.
pub(super) fn wait_budget(w: &DriverWorld) -> Duration {
    w.driver_profile().rpc_deadline
}

/// The harness's safety cap on what Nomad's client waits for without any deadline: StopTask
/// and DestroyTask (plugins/drivers/client.go calls them with only the plugin's life as a
/// context) and the WaitTask after them (task_runner.go, handleKill, waits on it until the task
/// ends). Not a Nomad number: only an answer that never comes within it fails, and a slow one
/// is reported as slow (DRIVER-STOP-PROMPT, DRIVER-DESTROY-PROMPT), never as a timeout.
pub(super) fn patience(w: &DriverWorld) -> Duration {
    w.config().timings.task_call
}

/// The WaitTask Nomad made when task `id` started, still open after `open_for`: shown as a
/// call still waiting, not as one that timed out (Nomad sets it no deadline).
pub(super) fn still_open(id: &str, open_for: Duration) -> DriverRpc {
    let mut rpc = DriverRpc::unanswered(
        crate::plugins::driver::Service::Driver,
        "WaitTask",
        serde_json::json!({ "task_id": id }),
        open_for,
    );
    rpc.timed_out = false;
    rpc.message =
        "still waiting: no answer yet (Nomad's client waits on it without a deadline)".into();
    rpc
}

/// When an answered call's answer came.
fn answered_at(rpc: &DriverRpc) -> Instant {
    rpc.started + rpc.duration
}

pub(super) async fn stop(
    w: &mut DriverWorld,
    i: usize,
    signal: &str,
    timeout: Duration,
) -> Result<DriverRpc, String> {
    let id = w.task(i)?.id.clone();
    let req = drivers::StopTaskRequest {
        task_id: id,
        timeout: duration(timeout),
        signal: signal.into(),
    };
    let started = Instant::now();
    let (rpc, _) = w
        .client()?
        .stop_task(req, timeout + w.config().timings.task_call)
        .await;
    w.stop_sent = Some((started, timeout));
    w.record(&rpc);
    Ok(rpc)
}

/// Processes still carrying task `i`'s marker after up to `within` for them to go.
pub(super) async fn processes_left(
    w: &DriverWorld,
    i: usize,
    within: Duration,
) -> Result<Vec<crate::process::ProcInfo>, String> {
    let marker = w.task(i)?.marker.clone();
    let until = Instant::now() + within;
    loop {
        let left = marked_processes(&marker);
        if left.is_empty() || Instant::now() >= until {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[when("the harness asks for the task configuration schema")]
async fn asks_schema(w: &mut DriverWorld) -> StepResult {
    let (rpc, resp) = w.client()?.task_config_schema(w.config().timings.rpc).await;
    w.record(&rpc);
    w.notes = match resp.and_then(|r| r.spec) {
        Some(s) => SpecTree::from_proto(&s)
            .err()
            .map(|e| vec![e.to_string()])
            .unwrap_or_default(),
        None => Vec::new(),
    };
    w.last = vec![rpc];
    Ok(())
}

#[then("the task configuration schema converts")]
async fn schema_converts(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    if !rpc.ok() {
        return Err(w.fail("TaskConfigSchema succeeds", &rpc.summary(), &[rpc]));
    }
    if w.notes.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "a task schema Nomad's hclspecutils.Convert accepts",
        &w.notes.join("\n"),
        &[rpc],
    ))
}

#[when("the harness asks for the capabilities")]
async fn asks_caps(w: &mut DriverWorld) -> StepResult {
    let (rpc, _) = w.client()?.capabilities(w.config().timings.rpc).await;
    w.record(&rpc);
    w.last = vec![rpc];
    Ok(())
}

#[then("the call succeeds")]
async fn call_succeeds(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.fail(&format!("{} succeeds", rpc.method), &rpc.summary(), &[rpc]))
}

#[then("the call fails")]
async fn call_fails(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    if !rpc.ok() && !rpc.timed_out {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "{} fails (an error status, within its deadline)",
            rpc.method
        ),
        &rpc.summary(),
        &[rpc],
    ))
}

#[when("the harness starts a long task")]
async fn starts_long(w: &mut DriverWorld) -> StepResult {
    let rpc = w.start_task("long", 0).await?;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness starts a long task and stops it")]
async fn starts_and_stops_long(w: &mut DriverWorld) -> StepResult {
    w.must_start_task("long", 0).await?;
    let rpc = stop(w, 0, "", Duration::from_secs(1)).await?;
    w.last = vec![rpc];
    Ok(())
}

#[then("the handle names the task and carries the task's configuration")]
async fn handle_ok(w: &mut DriverWorld) -> StepResult {
    let task = w.task(0)?.clone();
    let rpc = w.last_call()?;
    let Some(handle) = &task.handle else {
        return Err(w.fail(
            "StartTask returns a handle",
            "no handle in the answer",
            &[rpc],
        ));
    };
    let mut problems = Vec::new();
    match &handle.config {
        Some(c) if c.id == task.id => {}
        Some(c) => problems.push(format!(
            "handle.config.id is {:?}, the task's ID is {:?}",
            c.id, task.id
        )),
        None => problems.push("handle.config is missing".into()),
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "a handle whose config.id is the task's ID (Nomad stores it, gives it back to RecoverTask and, after a restore, addresses the task by that id)",
        &problems.join("; "),
        &[rpc],
    ))
}

/// Plain msgpack of a configuration that breaks `spec`: its first primitive attribute given a
/// map, which no decoder can put into a string, number or bool.
fn breaking_config(spec: &SpecTree) -> Option<(String, Vec<u8>)> {
    let SpecTree::Object(attrs) = spec else {
        return None;
    };
    let name = attrs.iter().find_map(|(k, v)| match v {
        SpecTree::Attr { ty, .. } if ty.is_primitive() => Some(k.clone()),
        _ => None,
    })?;
    let json = serde_json::json!({ name.clone(): {"nomad-conform": true} });
    Some((name, nomad_conform_hclspec::encode_plain(&json)))
}

#[when("the harness starts a task whose configuration breaks the schema")]
async fn starts_bad(w: &mut DriverWorld) -> StepResult {
    let spec = match &w.config().probe.task_schema {
        Ok(s) => s.clone(),
        Err(e) => {
            return Err(w.precondition(
                "DRIVER-TASK-CONFIG-SCHEMA",
                "the driver's TaskConfigSchema converts",
                e,
                &[],
            ));
        }
    };
    let Some((attr, bytes)) = breaking_config(&spec) else {
        return Err(w.ctx().skip(
            "the driver's task schema has no attribute of a simple type to give a wrong value",
        ));
    };
    w.notes.push(format!("attribute {attr:?} given a map"));
    let rpc = w
        .start_task_with("broken", Placeholders::default(), bytes)
        .await?;
    w.last = vec![rpc];
    Ok(())
}

#[then("no process of that task is running")]
async fn no_process(w: &mut DriverWorld) -> StepResult {
    let i = w.tasks.len().saturating_sub(1);
    let task = w.task(i)?.clone();
    let margin = w.driver_profile().stop_margin;
    let cap = patience(w);
    let visible = w.task_visible(i);
    // What Nomad sees: the WaitTask it made when the task started comes back once the task is
    // gone. Nomad waits on it without a deadline; so does the harness, up to its safety cap,
    // unless the task is seen running meanwhile: its processes still there `margin` after the
    // stop or destroy answered, or the driver itself saying RUNNING. A task that never started
    // has no WaitTask; then only its processes can tell.
    let answered = w.last.last().map(answered_at).unwrap_or_else(Instant::now);
    let mut inspect: Option<DriverRpc> = None;
    let waited = match &task.waiter {
        None => None,
        Some(waiter) => {
            let until = Instant::now() + cap;
            let mut next_inspect = Instant::now();
            loop {
                if let Some(rpc) = waiter.answer(Duration::from_millis(100)).await {
                    break Some(Some(rpc));
                }
                if Instant::now() >= until {
                    break Some(None);
                }
                if visible && answered.elapsed() >= margin {
                    if !marked_processes(&task.marker).is_empty() {
                        break Some(None);
                    }
                } else if !visible && Instant::now() >= next_inspect {
                    next_inspect = Instant::now() + Duration::from_secs(1);
                    let (rpc, _) = w
                        .client()?
                        .inspect_task(&task.id, w.config().timings.rpc)
                        .await;
                    if task_running(&rpc) {
                        w.record(&rpc);
                        inspect = Some(rpc);
                        break Some(None);
                    }
                }
            }
        }
    };
    if let Some(Some(rpc)) = &waited {
        w.record(rpc);
    }
    let mut calls: Vec<DriverRpc> = w.last.clone();
    if let Some(None) = &waited {
        let open = still_open(
            &task.id,
            task.waiter
                .as_ref()
                .map(|w| w.open_for())
                .unwrap_or_default(),
        );
        calls.push(open);
        let seen = match &inspect {
            Some(rpc) => {
                format!(
                    "InspectTask says the task is RUNNING {} after {} answered {}, and the WaitTask Nomad made when it started is still open",
                    crate::fmt_duration(answered.elapsed()),
                    w.last_call()?.method,
                    w.last_call()?.outcome()
                ) + &format!(" (InspectTask: {})", rpc.outcome())
            }
            None if visible && !marked_processes(&task.marker).is_empty() => format!(
                "{} after {} answered, the WaitTask Nomad made when the task started is still open and its processes still run: {}",
                crate::fmt_duration(answered.elapsed()),
                w.last_call()?.method,
                marked_processes(&task.marker)
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!(
                "WaitTask had not returned {} after the call (the harness's safety cap, the profile's task_call_deadline; Nomad's client would wait on it for ever, taking the task to be running)",
                crate::fmt_duration(cap)
            ),
        };
        if let Some(rpc) = inspect {
            calls.push(rpc);
        }
        let refs: Vec<&DriverRpc> = calls.iter().collect();
        return Err(w.fail(
            "the task is gone: the WaitTask Nomad made when it started comes back, and none of its processes is left",
            &seen,
            &refs,
        ));
    }
    if !visible {
        if waited.is_none() {
            return Err(w.ctx().skip(
                "the task was refused, so there is no handle to ask the driver about it, and the harness cannot see this driver's task processes in /proc to check that nothing was started",
            ));
        }
        crate::recorder::lock(&w.ctx().case).notes.push(
            "judged through the driver's answers only: the harness cannot see this driver's task processes (children included) in /proc".into(),
        );
        return Ok(());
    }
    // The kernel's moment to reap what WaitTask said has ended.
    let left = processes_left(w, i, margin).await?;
    if left.is_empty() {
        return Ok(());
    }
    let refs: Vec<&DriverRpc> = calls.iter().collect();
    Err(w.fail(
        "no process of the task is left running",
        &format!(
            "still running: {}",
            left.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        &refs,
    ))
}

#[given(expr = "the harness has started a task that exits with code {int}")]
async fn started_exit(w: &mut DriverWorld, code: i32) -> StepResult {
    w.must_start_task("exit", code).await
}

#[given("the harness has started a long task")]
async fn started_long(w: &mut DriverWorld) -> StepResult {
    w.must_start_task("long", 0).await
}

#[given("the harness has started two long tasks")]
async fn started_two(w: &mut DriverWorld) -> StepResult {
    w.must_start_task("long", 0).await?;
    w.must_start_task("long", 0).await
}

#[given("the harness has started a task that traps SIGTERM")]
async fn started_trap(w: &mut DriverWorld) -> StepResult {
    w.must_start_task("trap", 0).await?;
    w.await_signal_ready(0).await
}

#[given("the harness has started a task that ignores SIGTERM")]
async fn started_stubborn(w: &mut DriverWorld) -> StepResult {
    w.must_start_task("stubborn", 0).await?;
    w.await_signal_ready(0).await
}

#[given("the harness has started a task that writes known lines to stdout and stderr")]
async fn started_output(w: &mut DriverWorld) -> StepResult {
    w.must_start_task("output", 0).await
}

#[when("the harness waits for the task")]
async fn waits(w: &mut DriverWorld) -> StepResult {
    let rpc = wait(w, 0, wait_budget(w)).await?;
    w.last = vec![rpc];
    Ok(())
}

#[given("the task has exited")]
async fn has_exited_given(w: &mut DriverWorld) -> StepResult {
    has_exited(w).await
}

#[when("the task has exited")]
async fn has_exited_when(w: &mut DriverWorld) -> StepResult {
    has_exited(w).await
}

async fn has_exited(w: &mut DriverWorld) -> StepResult {
    let rpc = wait(w, 0, wait_budget(w)).await?;
    if rpc.ok() && exit_of(&rpc).is_some() {
        w.last = vec![rpc];
        return Ok(());
    }
    Err(w.precondition(
        "DRIVER-WAIT-EXIT-CODE",
        "WaitTask returns once the task exits",
        &rpc.summary(),
        &[&rpc],
    ))
}

#[when("the harness waits for the task again")]
async fn waits_again(w: &mut DriverWorld) -> StepResult {
    // Nomad sets no deadline; the profile's RPC deadline stands in for "it comes back".
    let rpc = wait_fresh(w, 0, wait_budget(w)).await?;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness waits for the task twice at the same time")]
async fn waits_twice(w: &mut DriverWorld) -> StepResult {
    let id = w.task(0)?.id.clone();
    let c = w.client()?;
    let d = wait_budget(w);
    let ((a, _), (b, _)) = futures::join!(c.wait_task(&id, d), c.wait_task(&id, d));
    w.record(&a);
    w.record(&b);
    w.last = vec![a, b];
    Ok(())
}

/// Every WaitTask of the latest step returned `code` (one is made if the step made none).
async fn waits_returned(w: &mut DriverWorld, code: i64) -> StepResult {
    if !w.last.iter().any(|c| c.method == "WaitTask") {
        let rpc = wait(w, 0, wait_budget(w)).await?;
        w.last = vec![rpc];
    }
    let calls: Vec<&DriverRpc> = w.last.iter().filter(|c| c.method == "WaitTask").collect();
    for rpc in &calls {
        let got = exit_of(rpc);
        if !(rpc.ok() && got.map(|g| g.0) == Some(code)) {
            let seen = match got {
                Some((c, s)) if rpc.ok() => format!("exit_code {c}, signal {s}"),
                _ => rpc.summary(),
            };
            return Err(w.fail(
                &format!(
                    "WaitTask returns exit code {code} (within the profile's RPC deadline, {})",
                    crate::fmt_duration(wait_budget(w))
                ),
                &seen,
                &calls,
            ));
        }
    }
    Ok(())
}

#[then(expr = "WaitTask returns exit code {int}")]
async fn returns_code(w: &mut DriverWorld, code: i64) -> StepResult {
    waits_returned(w, code).await
}

#[then(expr = "both WaitTask calls return exit code {int}")]
async fn both_return(w: &mut DriverWorld, code: i64) -> StepResult {
    waits_returned(w, code).await
}

#[when(
    regex = r"^the harness stops the (?:first )?task with (SIG[A-Z0-9]+|no kill signal) and a (\d+) s timeout$"
)]
async fn stops(w: &mut DriverWorld, signal: String, secs: u64) -> StepResult {
    // "no kill signal": what Nomad sends for a job that sets none (an empty string).
    let signal = if signal == "no kill signal" {
        String::new()
    } else {
        signal
    };
    let rpc = stop(w, 0, &signal, Duration::from_secs(secs)).await?;
    w.last = vec![rpc];
    Ok(())
}

#[then("the task exits with its own code for SIGTERM")]
async fn own_code_term(w: &mut DriverWorld) -> StepResult {
    own_code(w, TRAP_TERM_CODE, "SIGTERM").await
}

pub(super) async fn own_code(w: &mut DriverWorld, code: i32, signal: &str) -> StepResult {
    let prior: Vec<DriverRpc> = w.last.clone();
    let rpc = wait(w, 0, wait_budget(w)).await?;
    let got = exit_of(&rpc);
    if rpc.ok() && got.map(|g| g.0) == Some(code as i64) {
        return Ok(());
    }
    let mut calls: Vec<&DriverRpc> = prior.iter().collect();
    calls.push(&rpc);
    Err(w.fail(
        &format!(
            "the task gets {signal} and exits with the code it chose for it ({code}), not killed outright"
        ),
        &match got {
            Some((c, s)) => format!("exit_code {c}, signal {s}"),
            None => rpc.summary(),
        },
        &calls,
    ))
}

#[then("the task is gone after the timeout")]
async fn gone_after_timeout(w: &mut DriverWorld) -> StepResult {
    let stop = w.last_call()?.clone();
    let cap = patience(w);
    let (sent, timeout) = w
        .stop_sent
        .ok_or_else(|| w.ctx().harness_error("no StopTask was sent"))?;
    let expected = format!(
        "after StopTask, the task is gone: the WaitTask Nomad made when it started comes back (task_runner.go, handleKill, waits on it without a deadline; the harness waits up to its safety cap, {} past the {} timeout)",
        crate::fmt_duration(cap),
        crate::fmt_duration(timeout),
    );
    if !stop.ok() {
        return Err(w.fail(&expected, &stop.summary(), &[&stop]));
    }
    let task = w.task(0)?.clone();
    let Some(waiter) = task.waiter else {
        return Err(w.ctx().harness_error("the task has no waiter"));
    };
    let by = (sent + timeout + cap).saturating_duration_since(Instant::now());
    match waiter.answer(by).await {
        Some(rpc) => {
            w.record(&rpc);
            crate::recorder::lock(&w.ctx().case).notes.push(format!(
                "WaitTask came back {} after StopTask was sent ({} timeout)",
                crate::fmt_duration(answered_at(&rpc).saturating_duration_since(sent)),
                crate::fmt_duration(timeout)
            ));
            Ok(())
        }
        None => {
            let open = still_open(&task.id, waiter.open_for());
            Err(w.fail(
                &expected,
                &format!(
                    "StopTask answered {} after {}, and {} after it was sent WaitTask still had not returned (Nomad's client learns that a task ended from WaitTask alone)",
                    stop.outcome(),
                    crate::fmt_duration(stop.duration),
                    crate::fmt_duration(sent.elapsed())
                ),
                &[&stop, &open],
            ))
        }
    }
}

#[then("the task is gone soon after the timeout")]
async fn gone_soon(w: &mut DriverWorld) -> StepResult {
    let stop = w.last_call()?.clone();
    let soon = w.config().timings.rpc;
    let (sent, timeout) = w
        .stop_sent
        .ok_or_else(|| w.ctx().harness_error("no StopTask was sent"))?;
    if !stop.ok() {
        return Err(w.precondition(
            "DRIVER-STOP-ESCALATES",
            "StopTask succeeds",
            &stop.summary(),
            &[&stop],
        ));
    }
    let task = w.task(0)?.clone();
    let Some(waiter) = task.waiter else {
        return Err(w.ctx().harness_error("the task has no waiter"));
    };
    let expected = format!(
        "the WaitTask Nomad made when the task started comes back within {} of StopTask's {} timeout (the profile's rpc_deadline, the harness's \"soon\": Nomad has no number for it)",
        crate::fmt_duration(soon),
        crate::fmt_duration(timeout),
    );
    let by = (sent + timeout + soon).saturating_duration_since(Instant::now());
    match waiter.answer(by).await {
        Some(rpc) => {
            w.record(&rpc);
            let took = answered_at(&rpc).saturating_duration_since(sent);
            crate::recorder::lock(&w.ctx().case).notes.push(format!(
                "WaitTask came back {} after StopTask was sent ({} timeout)",
                crate::fmt_duration(took),
                crate::fmt_duration(timeout)
            ));
            if took <= timeout + soon {
                return Ok(());
            }
            Err(w.fail(
                &expected,
                &format!(
                    "WaitTask came back {} after StopTask was sent, {} past its timeout",
                    crate::fmt_duration(took),
                    crate::fmt_duration(took.saturating_sub(timeout))
                ),
                &[&stop, &rpc],
            ))
        }
        None => {
            let open = still_open(&task.id, waiter.open_for());
            Err(w.fail(
                &expected,
                &format!(
                    "StopTask answered {} after {}; {} after it was sent, WaitTask still had not come back: the task still ran {} past its timeout",
                    stop.outcome(),
                    crate::fmt_duration(stop.duration),
                    crate::fmt_duration(sent.elapsed()),
                    crate::fmt_duration(sent.elapsed().saturating_sub(timeout))
                ),
                &[&stop, &open],
            ))
        }
    }
}

#[when("the harness destroys the task with force")]
async fn destroys(w: &mut DriverWorld) -> StepResult {
    let id = w.task(0)?.id.clone();
    let (rpc, _) = w
        .client()?
        .destroy_task(&id, true, w.config().timings.task_call)
        .await;
    w.record(&rpc);
    w.last = vec![rpc];
    Ok(())
}

#[then("DestroyTask answered soon")]
async fn destroy_soon(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?.clone();
    let soon = w.config().timings.rpc;
    if !rpc.ok() {
        return Err(w.precondition(
            "DRIVER-DESTROY-FORCE",
            "DestroyTask(force) of a running task succeeds",
            &rpc.summary(),
            &[&rpc],
        ));
    }
    crate::recorder::lock(&w.ctx().case).notes.push(format!(
        "DestroyTask(force) answered after {}",
        crate::fmt_duration(rpc.duration)
    ));
    if rpc.duration <= soon {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "DestroyTask(force) of a running task answers within {} (the profile's rpc_deadline, the harness's \"soon\": Nomad has no number for it)",
            crate::fmt_duration(soon)
        ),
        &format!("DestroyTask(force) answered after {}", crate::fmt_duration(rpc.duration)),
        &[&rpc],
    ))
}

#[when("the harness inspects the task")]
async fn inspects(w: &mut DriverWorld) -> StepResult {
    let id = w.task(0)?.id.clone();
    let (rpc, _) = w.client()?.inspect_task(&id, w.config().timings.rpc).await;
    w.record(&rpc);
    w.last.push(rpc);
    Ok(())
}

/// Whether InspectTask says the task runs.
pub(super) fn task_running(inspect: &DriverRpc) -> bool {
    use crate::plugins::driver::drivers::TaskState;
    inspect.ok()
        && inspect
            .response
            .as_ref()
            .and_then(|r| r.pointer("/task/state"))
            .and_then(|s| s.as_i64())
            == Some(TaskState::Running as i64)
}

/// Whether a call about a task says the driver does not know it: any error it answered. Nomad's
/// Go drivers answer UNKNOWN "task not found for given id", others NOT_FOUND or words of their
/// own, and over gRPC Nomad's client cannot tell one error from another. A broken connection,
/// a timeout or UNIMPLEMENTED says nothing of the task.
pub(super) fn task_unknown(rpc: &DriverRpc) -> bool {
    !rpc.ok() && !rpc.timed_out && !super::broken_connection(rpc) && rpc.code != Code::Unimplemented
}

/// Whether the error is worded as Nomad's own drivers word it (UNKNOWN "... not found") or
/// coded NOT_FOUND.
pub(super) fn task_not_found(rpc: &DriverRpc) -> bool {
    rpc.code == Code::NotFound
        || (rpc.code == Code::Unknown && rpc.message.to_lowercase().contains("not found"))
}

#[when("the harness waits for the destroyed task and inspects it")]
async fn waits_and_inspects_destroyed(w: &mut DriverWorld) -> StepResult {
    let id = w.task(0)?.id.clone();
    let c = w.client()?;
    let d = w.config().timings.rpc;
    let (wait, _) = c.wait_task(&id, d).await;
    w.record(&wait);
    let (inspect, _) = c.inspect_task(&id, d).await;
    w.record(&inspect);
    w.last = vec![wait, inspect];
    Ok(())
}

#[then("WaitTask fails with task not found")]
async fn wait_not_found(w: &mut DriverWorld) -> StepResult {
    let wait = w
        .last
        .iter()
        .find(|c| c.method == "WaitTask")
        .ok_or_else(|| w.ctx().harness_error("no WaitTask was made"))?;
    let inspect = w.last.iter().find(|c| c.method == "InspectTask");
    if wait.timed_out && inspect.is_some_and(task_unknown) {
        // The driver forgot the task (InspectTask says so) but hangs on a WaitTask of a task
        // it does not know: that is DRIVER-UNKNOWN-TASK's rule, judged there.
        let calls: Vec<&DriverRpc> = w.last.iter().collect();
        return Err(w.precondition(
            "DRIVER-UNKNOWN-TASK",
            "WaitTask of a task the driver no longer knows comes back",
            &format!(
                "WaitTask: {}; InspectTask: {}",
                wait.outcome(),
                inspect.map(|i| i.outcome()).unwrap_or_default()
            ),
            &calls,
        ));
    }
    if task_unknown(wait) {
        if !task_not_found(wait) || wait.code == Code::NotFound {
            crate::recorder::lock(&w.ctx().case).notes.push(format!(
                "WaitTask answered {} (Go drivers answer UNKNOWN \"task not found for given id\"; Nomad's client cannot tell one error from another, so any error says the task is gone)",
                wait.outcome()
            ));
        }
        return Ok(());
    }
    let mut seen = format!("WaitTask: {}", wait.outcome());
    if let Some(i) = inspect {
        seen.push_str(&format!("; InspectTask (extra evidence): {}", i.outcome()));
    }
    let calls: Vec<&DriverRpc> = w.last.iter().collect();
    Err(w.fail(
        "after DestroyTask the task is unknown: WaitTask answers an error (Go drivers: UNKNOWN \"task not found for given id\"), not the task's result, and neither hangs nor breaks the connection",
        &seen,
        &calls,
    ))
}

#[then("the status has started_at, completed_at and state running")]
async fn status_ok(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    let task = rpc.response.as_ref().and_then(|r| r.get("task"));
    let mut problems = Vec::new();
    match task {
        None => problems.push("no task status in the answer".to_string()),
        Some(t) => {
            for f in ["started_at", "completed_at"] {
                if t.get(f).is_none_or(|v| v.is_null()) {
                    problems.push(format!("{f} is missing (Nomad fails on a nil timestamp)"));
                }
            }
            let state = t.get("state").and_then(|s| s.as_i64()).unwrap_or(0);
            if state != drivers::TaskState::Running as i64 {
                problems.push(format!("state is {state}, not RUNNING"));
            }
        }
    }
    if rpc.ok() && problems.is_empty() {
        return Ok(());
    }
    if !rpc.ok() {
        problems.push(rpc.summary());
    }
    Err(w.fail(
        "InspectTask of a running task: started_at and completed_at both set (completed_at the zero time while it runs), state RUNNING",
        &problems.join("; "),
        &[rpc],
    ))
}

#[when("the harness waits, inspects, stops and destroys a task that does not exist")]
async fn unknown_calls(w: &mut DriverWorld) -> StepResult {
    let c = w.client()?;
    let id = format!("no-such-alloc/task/{}", w.ctx().token);
    let d = w.config().timings.rpc;
    let (a, _) = c.wait_task(&id, d).await;
    let (b, _) = c.inspect_task(&id, d).await;
    let req = drivers::StopTaskRequest {
        task_id: id.clone(),
        timeout: duration(Duration::from_secs(1)),
        signal: String::new(),
    };
    let (s, _) = c.stop_task(req, d).await;
    let (x, _) = c.destroy_task(&id, true, d).await;
    for r in [&a, &b, &s, &x] {
        w.record(r);
    }
    w.last = vec![a, b, s, x];
    Ok(())
}

#[then("every call comes back within its deadline")]
async fn all_come_back(w: &mut DriverWorld) -> StepResult {
    let bad: Vec<&DriverRpc> = w.last.iter().filter(|c| c.timed_out).collect();
    let ok: Vec<&str> = w
        .last
        .iter()
        .filter(|c| c.ok())
        .map(|c| c.method.as_str())
        .collect();
    if !ok.is_empty() {
        crate::recorder::lock(&w.ctx().case).notes.push(format!(
            "answered OK for a task that does not exist: {} (harmless to Nomad, which ignores DestroyTask's error and cannot match a not-found error over gRPC)",
            ok.join(", ")
        ));
    }
    if bad.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "WaitTask, InspectTask, StopTask and DestroyTask of an unknown task each come back (an error or OK), none hangs",
        &bad.iter().map(|c| format!("{}: {}", c.method, c.outcome())).collect::<Vec<_>>().join("; "),
        &bad,
    ))
}

#[then("the second task is still running")]
async fn second_running(w: &mut DriverWorld) -> StepResult {
    // What Nomad sees: the second task's WaitTask, made when it started, has not returned.
    // Given a moment, as the stop of the first may take the second down a little later.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let task = w.task(1)?.clone();
    let waited = match &task.waiter {
        Some(waiter) if waiter.finished() => waiter.answer(Duration::ZERO).await,
        _ => None,
    };
    let (inspect, _) = w
        .client()?
        .inspect_task(&task.id, w.config().timings.rpc)
        .await;
    w.record(&inspect);
    let inspect_running = inspect
        .response
        .as_ref()
        .and_then(|r| r.pointer("/task/state"))
        .and_then(|s| s.as_i64())
        == Some(drivers::TaskState::Running as i64);
    let processes = if w.task_visible(1) {
        Some(!marked_processes(&task.marker).is_empty())
    } else {
        None
    };
    if waited.is_none() && processes != Some(false) {
        return Ok(());
    }
    let mut seen = match &waited {
        Some(rpc) => {
            w.record(rpc);
            format!("the second task's WaitTask returned: {}", rpc.outcome())
        }
        None => "the second task's WaitTask is still waiting".to_string(),
    };
    seen.push_str(&format!(
        "; InspectTask (extra evidence): {}{}",
        inspect.outcome(),
        if inspect_running { ", RUNNING" } else { "" }
    ));
    if processes == Some(false) {
        seen.push_str("; its processes are gone");
    }
    let mut calls: Vec<&DriverRpc> = w.last.iter().collect();
    calls.push(&inspect);
    Err(w.fail("stopping one task leaves the other running", &seen, &calls))
}
