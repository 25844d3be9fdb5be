//! Steps of the observation feature: stats and events streams, the log FIFOs, and what the
//! task sees.

use std::sync::Arc;
use std::time::Duration;

use cucumber::{given, then, when};

use super::{DriverWorld, StepResult};
use crate::plugins::driver::{StreamEnd, drivers};

const KEEP: usize = 256;

#[when("the harness collects the task's stats for three intervals")]
async fn stats_three(w: &mut DriverWorld) -> StepResult {
    let id = w.task(0)?.id.clone();
    let interval = w.driver_profile().stats_interval;
    // As Nomad's stats hook: one stream at the interval; when it ends, another one interval
    // later. Three intervals and a half, whatever the streams do.
    let until = std::time::Instant::now() + interval * 7 / 2;
    let mut streams = 0;
    let mut ends = Vec::new();
    while std::time::Instant::now() < until {
        let left = until.saturating_duration_since(std::time::Instant::now());
        let h = w.client()?.task_stats(&id, interval, left, KEEP).await;
        streams += 1;
        let end = h.wait_end(left).await;
        h.stop();
        w.record_event(h.event(w.offset_now(), Some(w.spec()), 16));
        w.stats_messages
            .extend(h.messages().into_iter().map(|m| m.message));
        if matches!(end, StreamEnd::Open) {
            break;
        }
        ends.push(format!("{end:?}"));
        tokio::time::sleep(
            interval.min(until.saturating_duration_since(std::time::Instant::now())),
        )
        .await;
    }
    w.notes = vec![format!(
        "{streams} stream(s){}",
        if ends.is_empty() {
            String::new()
        } else {
            format!(", ended: {}", ends.join(", "))
        }
    )];
    Ok(())
}

#[then("at least two stats messages arrived, with a timestamp and no negative usage")]
async fn stats_ok(w: &mut DriverWorld) -> StepResult {
    let msgs = w.stats_messages.clone();
    let mut problems = Vec::new();
    if msgs.len() < 2 {
        problems.push(format!(
            "{} message(s) in three collection intervals and a half, reopening a stream that ended one interval later as Nomad does ({})",
            msgs.len(),
            w.notes.join("; ")
        ));
    }
    for (i, m) in msgs.iter().enumerate() {
        let Some(s) = &m.stats else {
            problems.push(format!("message {i} carries no stats"));
            continue;
        };
        if s.timestamp.is_none() {
            problems.push(format!("message {i} has no timestamp"));
        }
        if let Some(cpu) = s.agg_resource_usage.as_ref().and_then(|u| u.cpu.as_ref())
            && (cpu.percent < 0.0 || cpu.total_ticks < 0.0 || cpu.user_mode < 0.0)
        {
            problems.push(format!("message {i} has negative CPU usage"));
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(crate::steps::failure_text(
        &format!(
            "TaskStats messages keep coming at the requested interval ({}), each with a timestamp and no negative numbers",
            crate::fmt_duration(w.driver_profile().stats_interval)
        ),
        &problems.join("; "),
        &[w.spec().command_line()],
    ))
}

#[when("the harness collects the task's stats until it exits")]
async fn stats_until_exit(w: &mut DriverWorld) -> StepResult {
    let id = w.task(0)?.id.clone();
    let interval = w.driver_profile().stats_interval;
    let h = w
        .client()?
        .task_stats(&id, interval, Duration::ZERO, KEEP)
        .await;
    // WaitTask for the exit shape (it ends after about a second). A stream that ends first is
    // asked about at once: if the driver still calls the task running, the stream ended for
    // another reason, and whether it ends when its task exits is not shown by this run.
    let budget = super::lifecycle::wait_budget(w);
    let mut running_at_end = None;
    let wait = {
        let waiting = super::lifecycle::wait(w, 0, budget);
        tokio::pin!(waiting);
        tokio::select! {
            r = &mut waiting => r?,
            _ = h.wait_end(budget) => {
                let (inspect, _) = w.client()?.inspect_task(&id, w.config().timings.rpc).await;
                running_at_end = Some(super::lifecycle::task_running(&inspect));
                waiting.await?
            }
        }
    };
    w.last = vec![wait];
    // A moment after the exit for the stream to end: a few collection intervals.
    let end = h.wait_end(interval * 3 + Duration::from_secs(2)).await;
    if matches!(end, StreamEnd::Open) {
        h.stop();
    }
    w.record_event(h.event(w.offset_now(), Some(w.spec()), 16));
    w.notes = vec![format!("{end:?}")];
    if let Some(why) = not_exercised(&end, h.received(), running_at_end) {
        w.notes.push(why);
    }
    w.stats = Some(Arc::new(h));
    Ok(())
}

/// Why a stats stream's end says nothing of whether the driver ends it when its task exits.
fn not_exercised(end: &StreamEnd, received: u64, running_at_end: Option<bool>) -> Option<String> {
    match end {
        StreamEnd::Status { code, .. } if code.eq_ignore_ascii_case("unimplemented") => Some(
            "the driver answers TaskStats UNIMPLEMENTED: there is no stream to end (DRIVER-STATS judges that)".into(),
        ),
        StreamEnd::Open | StreamEnd::StoppedByHarness => None,
        _ if received == 0 => Some(format!(
            "the stats stream ended ({end:?}) without a single message: whether the driver ends a stream that was serving its task when the task exits was not exercised"
        )),
        _ if running_at_end == Some(true) => Some(format!(
            "the stats stream ended ({end:?}) while InspectTask still said the task was running (a driver may end a stream at any time; Nomad opens another): whether the driver ends it when the task exits was not exercised"
        )),
        _ => None,
    }
}

#[then("the stats stream ends after the task exited")]
async fn stats_ended(w: &mut DriverWorld) -> StepResult {
    if let Some(why) = w.notes.get(1).cloned() {
        return Err(w.ctx().skip(why));
    }
    if w.notes.first().is_some_and(|e| !e.starts_with("Open")) {
        return Ok(());
    }
    Err(crate::steps::failure_text(
        "the TaskStats stream ends once its task has exited",
        "it was still open a few collection intervals after the task's exit",
        &[w.spec().command_line()],
    ))
}

#[given("Nomad has opened the TaskEvents stream")]
async fn events_open(w: &mut DriverWorld) -> StepResult {
    let h = w.client()?.task_events(Duration::ZERO, KEEP).await;
    w.events = Some(Arc::new(h));
    Ok(())
}

#[then("every task event received carries the task's alloc_id and task_name")]
async fn events_named(w: &mut DriverWorld) -> StepResult {
    let h = w.events.clone().ok_or_else(|| {
        w.ctx()
            .harness_error("the TaskEvents stream was not opened")
    })?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.stop();
    w.record_event(h.event(w.offset_now(), Some(w.spec()), 32));
    let task = w.task(0)?.clone();
    let alloc_id = task.config.alloc_id.clone();
    let messages = h.messages();
    // Events about the task: naming it by any of its identifiers.
    let about: Vec<&drivers::DriverTaskEvent> = messages
        .iter()
        .map(|m| &m.message)
        .filter(|e| e.task_id == task.id || e.alloc_id == alloc_id)
        .collect();
    if about.is_empty() {
        return Err(w.ctx().skip(format!(
            "the driver sent no event about the task ({} event(s) in all): nothing to judge",
            messages.len()
        )));
    }
    let bad: Vec<String> = about
        .iter()
        .filter(|e| e.alloc_id != alloc_id || e.task_name != task.name)
        .map(|e| {
            format!(
                "{:?} (alloc_id {:?}, task_name {:?})",
                e.message, e.alloc_id, e.task_name
            )
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(crate::steps::failure_text(
        &format!(
            "every event about the task carries its alloc_id {alloc_id:?} and task_name {:?} (Nomad routes events by them and drops the others)",
            task.name
        ),
        &bad.join("; "),
        &[w.spec().command_line()],
    ))
}

/// Wait up to 2 s for both FIFOs to show what the task printed.
async fn fifo_texts(w: &DriverWorld) -> Result<(String, String), String> {
    let t = w.task(0)?.clone();
    for _ in 0..40 {
        let (o, e) = (t.fifos.stdout_text(), t.fifos.stderr_text());
        if o.contains(&t.placeholders.stdout) && e.contains(&t.placeholders.stderr) {
            return Ok((o, e));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((t.fifos.stdout_text(), t.fifos.stderr_text()))
}

#[then("its stdout FIFO carried its stdout lines and its stderr FIFO its stderr lines")]
async fn fifos_ok(w: &mut DriverWorld) -> StepResult {
    let t = w.task(0)?.clone();
    let (o, e) = fifo_texts(w).await?;
    if o.contains(&t.placeholders.stdout) && e.contains(&t.placeholders.stderr) {
        return Ok(());
    }
    Err(crate::steps::failure_text(
        &format!(
            "{:?} on the stdout FIFO ({}) and {:?} on the stderr FIFO ({})",
            t.placeholders.stdout,
            t.fifos.stdout_path.display(),
            t.placeholders.stderr,
            t.fifos.stderr_path.display()
        ),
        &format!("stdout FIFO: {o:?}\nstderr FIFO: {e:?}"),
        &[w.spec().command_line()],
    ))
}

#[then("the task saw the environment it was given")]
async fn env_ok(w: &mut DriverWorld) -> StepResult {
    let t = w.task(0)?.clone();
    let (o, _) = fifo_texts(w).await?;
    let want = format!("marker={}", t.marker);
    // The directories as this task should see them, for the driver's isolation (printed as
    // `dirs=ALLOC|TASK|SECRETS` by the --task-command shape; optional in --tasks shapes).
    let dirs = format!("{}|{}|{}", t.view.alloc, t.view.local, t.view.secrets);
    let seen_dirs = o
        .lines()
        .find_map(|l| l.trim().strip_prefix("dirs="))
        .map(str::to_string);
    if o.contains(&want) && seen_dirs.as_ref().is_none_or(|d| *d == dirs) {
        return Ok(());
    }
    if o.contains(&want)
        && let Some(d) = seen_dirs
    {
        return Err(crate::steps::failure_text(
            &format!(
                "NOMAD_ALLOC_DIR, NOMAD_TASK_DIR and NOMAD_SECRETS_DIR as Nomad sets them for this driver's filesystem isolation ({})",
                dirs
            ),
            &format!("the task saw {d}"),
            &[w.spec().command_line()],
        ));
    }
    if !o.contains(&t.placeholders.stdout) {
        return Err(w.precondition(
            "DRIVER-LOGS",
            "the task's output reaches its stdout FIFO",
            &format!("stdout FIFO: {o:?}"),
            &[],
        ));
    }
    Err(crate::steps::failure_text(
        &format!(
            "the task sees NOMAD_CONFORM_TASK={} from TaskConfig.env (it prints {want:?})",
            t.marker
        ),
        &format!("it printed: {o:?}"),
        &[w.spec().command_line()],
    ))
}

#[then("the task wrote a file into each of its directories")]
async fn dirs_ok(w: &mut DriverWorld) -> StepResult {
    let t = w.task(0)?.clone();
    let file = &t.placeholders.file;
    let missing: Vec<String> = [t.dir.shared(), t.dir.task_dir(), t.dir.secrets_dir()]
        .iter()
        .map(|d| d.join(file))
        .filter(|p| {
            std::fs::read_to_string(p)
                .map(|s| s.trim() != file)
                .unwrap_or(true)
        })
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    // What the task said its directories were, when its shape prints them: an empty one means
    // the environment never arrived, which the host paths alone do not show.
    let (o, _) = fifo_texts(w).await.unwrap_or_default();
    let told = match o.lines().find_map(|l| l.trim().strip_prefix("dirs=")) {
        Some(d) if d.split('|').any(str::is_empty) => format!(
            "\nthe task printed dirs={d}: NOMAD_ALLOC_DIR, NOMAD_TASK_DIR or NOMAD_SECRETS_DIR was empty in its environment (see DRIVER-TASK-ENV)"
        ),
        Some(d) => format!("\nthe task printed dirs={d} (its directories as it saw them)"),
        None if o.is_empty() => {
            "\nthe task printed nothing on its stdout FIFO: it may never have run (see DRIVER-LOGS)"
                .to_string()
        }
        None => String::new(),
    };
    Err(crate::steps::failure_text(
        "the task wrote its file into $NOMAD_ALLOC_DIR, $NOMAD_TASK_DIR and $NOMAD_SECRETS_DIR, which are the allocation's directories on the host",
        &format!("not there: {}{told}", missing.join(", ")),
        &[w.spec().command_line()],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stats_stream_that_never_served_its_task_does_not_pass_its_end() {
        let unimplemented = StreamEnd::Status {
            code: "UNIMPLEMENTED".into(),
            message: String::new(),
            details: None,
        };
        assert!(not_exercised(&unimplemented, 0, None).is_some());
        assert!(not_exercised(&StreamEnd::Ok, 0, Some(false)).is_some());
        assert!(not_exercised(&StreamEnd::Ok, 1, Some(true)).is_some());
        // Ended after the task, having served it: judged.
        assert!(not_exercised(&StreamEnd::Ok, 3, Some(false)).is_none());
        assert!(not_exercised(&StreamEnd::Ok, 3, None).is_none());
        // Still open: judged (a failure).
        assert!(not_exercised(&StreamEnd::Open, 3, None).is_none());
    }
}
