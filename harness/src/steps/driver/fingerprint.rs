//! Steps of the fingerprint feature: the long-lived instance's Fingerprint stream.

use std::sync::Arc;

use cucumber::{then, when};

use super::{DriverWorld, StepResult};
use crate::plugins::driver::{StreamEnd, drivers};

/// Messages kept of a fingerprint stream.
const KEEP: usize = 64;

#[when("Nomad opens the Fingerprint stream")]
async fn opens(w: &mut DriverWorld) -> StepResult {
    let client = w.client()?;
    let first = w.driver_profile().fingerprint_deadline;
    let h = client.fingerprint(first, KEEP).await;
    w.fingerprint = Some(Arc::new(h));
    Ok(())
}

fn stream(
    w: &DriverWorld,
) -> Result<Arc<crate::plugins::driver::StreamHandle<drivers::FingerprintResponse>>, String> {
    w.fingerprint.clone().ok_or_else(|| {
        w.ctx()
            .harness_error("the Fingerprint stream was not opened")
    })
}

/// Record the stream (as it is now) and build a failure message about it.
fn fail_on(
    w: &DriverWorld,
    h: &crate::plugins::driver::StreamHandle<drivers::FingerprintResponse>,
    expected: &str,
    seen: &str,
) -> String {
    w.record_event(h.event(0, Some(w.spec()), KEEP));
    crate::steps::failure_text(expected, seen, &[w.spec().command_line()])
}

fn first(w: &DriverWorld) -> Result<drivers::FingerprintResponse, String> {
    let h = stream(w)?;
    match h.messages().into_iter().next() {
        Some(m) => Ok(m.message),
        None => Err(w.precondition(
            "DRIVER-FINGERPRINT-FIRST",
            "a first fingerprint",
            &format!("none arrived; the stream: {:?}", h.end()),
            &[],
        )),
    }
}

#[then("a first fingerprint arrives within the fingerprint deadline")]
async fn first_in_time(w: &mut DriverWorld) -> StepResult {
    let h = stream(w)?;
    let deadline = w.driver_profile().fingerprint_deadline;
    match h.first_message_after() {
        Some(d) if d <= deadline => Ok(()),
        other => {
            w.ctx().hint(crate::recorder::Hint::TimedOut);
            Err(fail_on(
                w,
                &h,
                &format!(
                    "the first fingerprint within {} (the profile's fingerprint deadline; Nomad batches first fingerprints for 50 s)",
                    crate::fmt_duration(deadline)
                ),
                &match other {
                    Some(d) => format!("it came after {}", crate::fmt_duration(d)),
                    None => format!("none came; the stream: {:?}", h.end()),
                },
            ))
        }
    }
}

#[then("the first fingerprint has a known health state")]
async fn health(w: &mut DriverWorld) -> StepResult {
    let f = first(w)?;
    if drivers::fingerprint_response::HealthState::try_from(f.health).is_ok() {
        return Ok(());
    }
    let h = stream(w)?;
    Err(fail_on(
        w,
        &h,
        "health UNDETECTED (0), UNHEALTHY (1) or HEALTHY (2)",
        &format!(
            "health {} (description {:?})",
            f.health, f.health_description
        ),
    ))
}

#[then("the first fingerprint has a health description")]
async fn description(w: &mut DriverWorld) -> StepResult {
    let f = first(w)?;
    if !f.health_description.trim().is_empty() {
        return Ok(());
    }
    let h = stream(w)?;
    Err(fail_on(
        w,
        &h,
        "a health_description saying why the driver is in its state (operators read it in the node's driver info)",
        &format!("health {} with an empty description", f.health),
    ))
}

#[then("every attribute of the first fingerprint has a name and a value")]
async fn attributes(w: &mut DriverWorld) -> StepResult {
    let f = first(w)?;
    let bad: Vec<String> = f
        .attributes
        .iter()
        .filter(|(k, v)| k.trim().is_empty() || v.value.is_none())
        .map(|(k, _)| format!("{k:?}"))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let h = stream(w)?;
    Err(fail_on(
        w,
        &h,
        "every attribute named and holding one value (string, int, float or bool)",
        &format!("attributes without a name or a value: {}", bad.join(", ")),
    ))
}

#[then("the stream is still open after the fingerprint period")]
async fn still_open(w: &mut DriverWorld) -> StepResult {
    first(w)?;
    let h = stream(w)?;
    let period = w.driver_profile().fingerprint_period;
    let end = h.wait_end(period).await;
    if matches!(end, StreamEnd::Open) {
        h.stop();
        return Ok(());
    }
    Err(fail_on(
        w,
        &h,
        &format!(
            "the Fingerprint stream stays open (watched for {}); when it ends, Nomad reopens it at once, in a busy loop",
            crate::fmt_duration(period)
        ),
        &format!("it ended: {end:?}"),
    ))
}

#[then("a second fingerprint arrives within the fingerprint period")]
async fn second(w: &mut DriverWorld) -> StepResult {
    first(w)?;
    let h = stream(w)?;
    let period = w.driver_profile().fingerprint_period;
    if h.wait_for_count(2, period).await {
        h.stop();
        return Ok(());
    }
    // A stream that ended is DRIVER-FINGERPRINT-STREAM-OPEN's failure, judged there.
    let end = h.end();
    if !matches!(end, crate::plugins::driver::StreamEnd::Open) {
        return Err(w.precondition(
            "DRIVER-FINGERPRINT-STREAM-OPEN",
            "the Fingerprint stream stays open",
            &format!("it ended after {} message(s): {end:?}", h.received()),
            &[],
        ));
    }
    h.stop();
    // Open and quiet: what driver.proto asks (another message only when the driver's state
    // changes), and this run changed nothing.
    Err(w.ctx().skip(format!(
        "no second fingerprint within {} (the profile's fingerprint period), the stream still open: plugins/drivers/proto/driver.proto asks for another message only when the driver's state changes, and nothing changed during the run, so there was nothing to resend (Nomad's own drivers resend every 30 s; Nomad's client does not need it)",
        crate::fmt_duration(period)
    )))
}

#[when("the harness starts a long task on the driver it reports")]
async fn starts_on_reported(w: &mut DriverWorld) -> StepResult {
    let h = stream(w)?;
    h.wait_first(w.driver_profile().fingerprint_deadline).await;
    let f = first(w)?;
    if f.health != drivers::fingerprint_response::HealthState::Healthy as i32 {
        let known = drivers::fingerprint_response::HealthState::try_from(f.health).is_ok();
        return Err(w.ctx().skip(format!(
            "{}the driver fingerprints {} ({}): Nomad places no task on it, so whether it starts one is not its claim to keep",
            if known { nomad_conform_reports::model::NOT_JUDGED_ON_THIS_NODE } else { "" },
            super::health_name(f.health),
            if f.health_description.is_empty() {
                "no health description".to_string()
            } else {
                format!("{:?}", f.health_description)
            }
        )));
    }
    h.stop();
    let started = w.start_task("long", 0).await;
    w.notes = match started {
        Ok(rpc) => {
            w.last = vec![rpc];
            Vec::new()
        }
        Err(e) => vec![e],
    };
    Ok(())
}

#[then("a driver that says it is healthy started the task, or refused it as worth retrying")]
async fn healthy_started(w: &mut DriverWorld) -> StepResult {
    let Some(refusal) = w.notes.first().cloned() else {
        let rpc = w.last_call()?;
        if rpc.ok() {
            return Ok(());
        }
        // Not a plain refusal: a crash or a timeout, judged by DRIVER-START-HANDLE.
        return Err(w.precondition(
            "DRIVER-START-HANDLE",
            "StartTask of the long task answers",
            &rpc.summary(),
            &[rpc],
        ));
    };
    let Some(start) = w.last_start.clone() else {
        return Err(refusal);
    };
    if start.recoverable() == Some(true) {
        crate::recorder::lock(&w.ctx().case).notes.push(
            "StartTask failed, marked recoverable: Nomad retries it, and a healthy claim may hold"
                .into(),
        );
        return Ok(());
    }
    if start.ok() {
        return Err(refusal);
    }
    // The long shape is the user's own configuration: a mistake in it (an image or a path that
    // does not exist) fails StartTask just as a missing runtime does. Say which to look at.
    let check_shape = w
        .config()
        .shapes
        .flag()
        .map(|flag| format!("; the long shape comes from {flag}: if it names something this node does not have (an image, a path) or does not fit this driver, the refusal is the shape's, not the health's"))
        .unwrap_or_default();
    Err(w.fail(
        "a driver whose fingerprint says HEALTHY starts the long task, or refuses it as worth retrying (RecoverableError recoverable = true)",
        &format!(
            "the fingerprint said HEALTHY, and StartTask failed for good: {}{check_shape}",
            start.outcome()
        ),
        &[&start],
    ))
}
