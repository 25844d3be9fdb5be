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

#[then("the first fingerprint has a known health state and a description")]
async fn health(w: &mut DriverWorld) -> StepResult {
    let f = first(w)?;
    let known = drivers::fingerprint_response::HealthState::try_from(f.health).is_ok();
    if known && !f.health_description.trim().is_empty() {
        return Ok(());
    }
    let h = stream(w)?;
    Err(fail_on(
        w,
        &h,
        "health UNDETECTED (0), UNHEALTHY (1) or HEALTHY (2), with a health_description",
        &format!(
            "health {} with description {:?}",
            f.health, f.health_description
        ),
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
            "the Fingerprint stream stays open (watched for {}); Nomad marks the driver unhealthy and re-dispenses it when it ends",
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
    Err(fail_on(
        w,
        &h,
        &format!(
            "a second fingerprint within {} (the profile's fingerprint period)",
            crate::fmt_duration(period)
        ),
        &format!("{} message(s); the stream: {:?}", h.received(), h.end()),
    ))
}
