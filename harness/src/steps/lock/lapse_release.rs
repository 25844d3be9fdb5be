//! A release after the lock lapsed and Nomad cleared it: Nomad answers 500 "variable doesn't
//! hold a lock" (`VarLockRelease`'s plain error, made a 500 by `errCodeFromHandler`), which no
//! retry can change. The client must give the release up and exit with an error.

use std::time::{Duration, Instant};

use cucumber::{then, when};

use super::acquire::{CLIENT, answers, failed};
use super::renew::{last_success, lease};
use super::{LockWorld, StepResult, answered_at, fmt, lock_ops};
use crate::plugins::lock::{Exchange, Fault, Operation};

/// Nomad's text for a release of a variable that holds no lock (or no longer exists).
fn nomad_not_held(e: &Exchange) -> bool {
    e.status == Some(500)
        && (e.response_body.contains("doesn't hold a lock")
            || e.response_body.contains("doesn't exist"))
}

#[when("every renew and release fails with 503 until Nomad would have freed the lock")]
async fn fail_until_freed(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let task_api = w.config().task_api;
    let fault = Fault::status(503).map_err(|e| e.to_string())?;
    let rule = w
        .scene_mut()?
        .proxy(CLIENT, task_api)
        .await?
        .inject_until_cleared(&[Operation::Renew, Operation::Release], fault);
    let now = Instant::now();
    w.fault_at = Some(now);
    let last = last_success(&w.scene()?.exchanges(), CLIENT, now)
        .map(|e| answered_at(&e))
        .unwrap_or(now);
    // The leader's timer fires 2 × TTL after the last renew and the lock delay then clears the
    // lock; a little margin so the server has cleared it when the 503s end.
    let freed = last + l.ttl * 2 + l.delay + Duration::from_millis(100);
    tokio::time::sleep_until(freed.into()).await;
    w.scene_mut()?
        .proxy(CLIENT, task_api)
        .await?
        .clear_rule(rule);
    w.freed_at = Some(Instant::now());
    Ok(())
}

#[then("the client gave up its release and exited with an error code")]
async fn gave_up(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let freed = w.freed_at.unwrap_or_else(Instant::now);
    // A lock's lifetime after Nomad freed it: more than enough for any release budget that is
    // meant to end, since nothing sent after `freed` can succeed.
    let lifetime = l.ttl * 2 + l.delay;
    let wait = (freed + lifetime).saturating_duration_since(Instant::now());
    let status = w.client(CLIENT)?.wait_exit(wait).await;
    let fault_at = w.fault_at.unwrap_or(freed);
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let releases: Vec<&Exchange> = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| e.operation == Operation::Release && e.at >= fault_at)
        .collect();
    let met_500 = releases.iter().filter(|e| nomad_not_held(e)).count();
    let after_freed = releases.iter().filter(|e| e.at >= freed).count();
    let seen_releases = if releases.is_empty() {
        "no lock-release since the failures began".to_string()
    } else {
        format!(
            "{} lock-release(s) since the failures began ({} after Nomad freed the lock, {met_500} answered Nomad's 500): {}",
            releases.len(),
            after_freed,
            answers(&releases)
        )
    };
    let first_500: Vec<&Exchange> = releases
        .iter()
        .copied()
        .filter(|e| nomad_not_held(e))
        .take(1)
        .collect();
    let crashed = super::release::crashed(w.client(CLIENT)?);
    let r = match &status {
        // A crash is no exit of the client's own: whatever it was doing (its release, most
        // likely) was cut short, not given up. The crash itself is added by fail().
        Some(s) if crashed => Err(w.fail(
            "after a lapse the client gives its release up and exits with an error code of its own (\"If TTL expires, attempt to revoke lock, then exit the process with error code\"), not by crashing",
            &format!("the client crashed and ended with {s}; {seen_releases}"),
            &first_500,
        )),
        Some(s) if failed(s) => {
            w.ctx().note(if met_500 == 0 {
                format!(
                    "the client gave its release up before Nomad freed the lock, so it never met Nomad's 500; it ended with {s}"
                )
            } else {
                format!(
                    "the client met Nomad's 500 {met_500} time(s) and ended with {s}"
                )
            });
            Ok(())
        }
        Some(s) => Err(w.fail(
            "after a lapse the client exits with an error code (\"If TTL expires, attempt to revoke lock, then exit the process with error code\"): a release Nomad answers 500 \"variable doesn't hold a lock\" released nothing",
            &format!("the client ended with {s}; {seen_releases}"),
            &first_500,
        )),
        None => Err(w.fail(
            &format!(
                "after a lapse the client gives its release up and exits with an error code: Nomad answers a release of a cleared lock 500 \"variable doesn't hold a lock\", which no retry changes (the Go api client does not retry it); waited {} after Nomad freed the lock",
                fmt(lifetime)
            ),
            &format!("the client was still running; {seen_releases}"),
            &first_500,
        )),
    };
    w.record_scene();
    r
}
