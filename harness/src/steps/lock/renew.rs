//! The renew clauses: renew before the TTL lapses and about every half TTL; a renew conflict
//! stops the protected process; renew failures are retried; when renews keep failing the
//! protected process is stopped before the lock can pass to another holder.

use std::time::{Duration, Instant};

use cucumber::{then, when};

use super::acquire::{CLIENT, answers, failed, wait_running};
use super::{LockWorld, ROOT, StepResult, answered_at, fmt, granted_delay, granted_ttl, lock_ops};
use crate::plugins::lock::{Exchange, Fault, Operation};

/// How often the steps look at the records while waiting for something.
const POLL: Duration = Duration::from_millis(20);

/// The client's lease as the server granted it: TTL and lock delay.
pub struct Lease {
    pub ttl: Duration,
    pub delay: Duration,
}

/// The first lease of `label` (waiting for it up to the profile's start time), or the clause
/// is blocked on LOCK-STARTS.
pub async fn lease(w: &LockWorld, label: &str) -> Result<Lease, String> {
    let within = w.lock_profile().start_within;
    let found = wait_exchange(w, label, w.scene()?.t0, within, |e| {
        e.operation == Operation::Acquire && e.succeeded()
    })
    .await?;
    let Some(acq) = found else {
        return Err(w.ctx().blocked(
            ROOT,
            w.fail(
                "the client acquires the lock",
                &format!(
                    "no acquire of the client was answered 200 within {}",
                    fmt(within)
                ),
                &[],
            ),
        ));
    };
    let server = &w.config().server;
    Ok(Lease {
        ttl: granted_ttl(&acq).unwrap_or_else(|| server.ttl_default()),
        delay: granted_delay(&acq).unwrap_or_else(|| server.delay_default()),
    })
}

/// The last acquire or renew of `label` the server answered 200, before `before`.
pub fn last_success(exchanges: &[Exchange], label: &str, before: Instant) -> Option<Exchange> {
    lock_ops(exchanges, label)
        .into_iter()
        .rfind(|e| {
            matches!(e.operation, Operation::Acquire | Operation::Renew)
                && e.succeeded()
                && e.at < before
        })
        .cloned()
}

/// How long the renew clauses watch a client hold its lock: long enough for the renews of the
/// TTL the server granted (two and a half TTLs: two renews even at 3/4 TTL), at least the
/// profile's `hold_for`, and at most four times it, whatever the TTL. A client whose TTL is
/// longer than that allows is judged on what was seen, or skipped where nothing was.
fn keep_for(hold_for: Duration, ttl: Duration) -> Duration {
    (ttl * 5 / 2).clamp(hold_for, hold_for * MAX_HOLDS)
}

/// The most profile `hold_for`s the renew clauses wait.
const MAX_HOLDS: u32 = 4;

#[when("the client keeps the lock for a while")]
async fn keeps(w: &mut LockWorld) -> StepResult {
    wait_running(w, CLIENT).await?;
    let l = lease(w, CLIENT).await?;
    tokio::time::sleep(keep_for(w.lock_profile().hold_for, l.ttl)).await;
    Ok(())
}

/// How long the client has held its lock: since its first acquire the server answered 200.
fn held_for(ex: &[Exchange]) -> Duration {
    lock_ops(ex, CLIENT)
        .into_iter()
        .find(|e| e.operation == Operation::Acquire && e.succeeded())
        .map(|e| answered_at(e).elapsed())
        .unwrap_or_default()
}

/// The reason a renew clause was not exercised: the client held its lock for too short a time
/// against its TTL for the renews the clause judges.
fn held_too_short(w: &LockWorld, held: Duration, l: &Lease, needed: &str) -> String {
    format!(
        "the client held its lock for {} with a TTL of {}: too short for {needed} (the clause watches two and a half TTLs, at most {} × the profile's hold_for of {}); a profile with a longer hold_for, or a client run with a shorter TTL, exercises it",
        fmt(held),
        fmt(l.ttl),
        MAX_HOLDS,
        fmt(w.lock_profile().hold_for)
    )
}

/// Waits for the first exchange of `label` after `since` that `pred` accepts.
async fn wait_exchange(
    w: &LockWorld,
    label: &str,
    since: Instant,
    within: Duration,
    pred: impl Fn(&Exchange) -> bool,
) -> Result<Option<Exchange>, String> {
    let until = Instant::now() + within;
    loop {
        let found = w
            .scene()?
            .exchanges()
            .into_iter()
            .find(|e| e.client == label && e.at >= since && pred(e));
        if found.is_some() || Instant::now() >= until {
            return Ok(found);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Injects `status` on the client's next renew and waits for it to happen.
async fn next_renew_answered(w: &mut LockWorld, status: u16) -> StepResult {
    next_renew_answered_after(w, CLIENT, status, |_| Duration::ZERO).await
}

/// Injects `status`, held `hold(lease)` first, on the next renew of client `label` and waits
/// for it.
async fn next_renew_answered_after(
    w: &mut LockWorld,
    label: &str,
    status: u16,
    hold: impl Fn(&Lease) -> Duration,
) -> StepResult {
    let l = lease(w, label).await?;
    let since = Instant::now();
    let task_api = w.config().task_api;
    let fault = Fault::status(status)
        .map_err(|e| e.to_string())?
        .after(hold(&l));
    w.scene_mut()?
        .proxy(label, task_api)
        .await?
        .inject_next(&[Operation::Renew], fault, 1);
    // The renew the fault hit, answered or (for a held answer) given up on by the client.
    let hit = wait_exchange(w, label, since, l.ttl * 2, |e| {
        e.operation == Operation::Renew
            && (e.status == Some(status) || (e.fault.is_some() && e.status.is_none()))
    })
    .await?;
    match hit {
        Some(e) => {
            w.fault_at = Some(answered_at(&e));
            Ok(())
        }
        None => Err(w.ctx().blocked(
            "LOCK-RENEW-BEFORE-TTL",
            w.fail(
                "the client renews its lock (so that the harness can answer a renew)",
                &format!("no renew within {} (2 × TTL)", fmt(l.ttl * 2)),
                &[],
            ),
        )),
    }
}

#[when("the next renew is answered 409")]
async fn renew_409(w: &mut LockWorld) -> StepResult {
    next_renew_answered(w, 409).await
}

#[when("the next renew is held an eighth of the TTL and then answered 409")]
async fn renew_late_409(w: &mut LockWorld) -> StepResult {
    if !late_conflict(w, CLIENT).await? {
        return Err(w.ctx().skip(GAVE_UP_ON_LATE_409));
    }
    Ok(())
}

/// Why a late-conflict clause was not exercised.
pub const GAVE_UP_ON_LATE_409: &str = "the client gave up on the renew before the late 409 came (its request timeout is shorter than an eighth of the TTL), so it never met a late conflict";

/// Answers the next renew of client `label` 409 an eighth of the TTL late; whether the client
/// got that answer (it may have given up on the renew first).
pub async fn late_conflict(w: &mut LockWorld, label: &str) -> Result<bool, String> {
    next_renew_answered_after(w, label, 409, |l| l.ttl / 8).await?;
    let scene = w.scene()?;
    let ex = scene.exchanges();
    Ok(lock_ops(&ex, label)
        .into_iter()
        .any(|e| e.operation == Operation::Renew && e.status == Some(409) && e.fault.is_some()))
}

/// From now on the server takes the client's requests and never answers them (the
/// connection stays open).
async fn start_hang(w: &mut LockWorld) -> StepResult {
    wait_running(w, CLIENT).await?;
    let task_api = w.config().task_api;
    w.scene_mut()?
        .proxy(CLIENT, task_api)
        .await?
        .partition_until_healed(crate::plugins::lock::PartitionMode::Hang);
    w.fault_at = Some(Instant::now());
    Ok(())
}

#[when("the server stops answering the client's requests")]
async fn stops_answering(w: &mut LockWorld) -> StepResult {
    start_hang(w).await
}

#[when("every renew and release hangs from now on")]
async fn renews_hang(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    start_hang(w).await?;
    let stop_within = w.lock_profile().stop_within;
    let now = Instant::now();
    let last = last_success(&w.scene()?.exchanges(), CLIENT, now)
        .map(|e| answered_at(&e))
        .unwrap_or(now);
    let deadline = last + l.ttl * 2 + l.delay + stop_within;
    let wait = deadline.saturating_duration_since(Instant::now());
    w.scene()?.listener.wait_ended(CLIENT, wait).await;
    Ok(())
}

#[when("the next renew fails with 503")]
async fn renew_503(w: &mut LockWorld) -> StepResult {
    next_renew_answered(w, 503).await
}

#[when("every renew and release fails with 503 from now on")]
async fn renews_fail(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let task_api = w.config().task_api;
    let stop_within = w.lock_profile().stop_within;
    let fault = Fault::status(503).map_err(|e| e.to_string())?;
    w.scene_mut()?
        .proxy(CLIENT, task_api)
        .await?
        .inject_until_cleared(&[Operation::Renew, Operation::Release], fault);
    let now = Instant::now();
    w.fault_at = Some(now);
    // Until the protected process ends, or the lock could have passed to another holder.
    let last = last_success(&w.scene()?.exchanges(), CLIENT, now)
        .map(|e| answered_at(&e))
        .unwrap_or(now);
    let deadline = last + l.ttl * 2 + l.delay + stop_within;
    let wait = deadline.saturating_duration_since(Instant::now());
    w.scene()?.listener.wait_ended(CLIENT, wait).await;
    // Give the client a moment to attempt its release.
    tokio::time::sleep(stop_within.min(Duration::from_millis(500))).await;
    Ok(())
}

#[then("every renew was sent within the TTL of the previous successful acquire or renew")]
async fn within_ttl(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let now = Instant::now();
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let still_running = scene.probes_of(CLIENT).iter().any(|p| p.end.is_none());
    // Not a single renew while the lock was held for less than its TTL: nothing to judge.
    let held = held_for(&ex);
    if held < l.ttl && !ops.iter().any(|e| e.operation == Operation::Renew) {
        let why = held_too_short(w, held, &l, "a renew to be due");
        w.record_scene();
        return Err(w.ctx().skip(why));
    }
    let mut prev: Option<&Exchange> = None;
    let mut worst: Option<(Duration, Option<&Exchange>, &Exchange)> = None;
    for e in &ops {
        if let Some(p) = prev
            && matches!(e.operation, Operation::Renew)
        {
            let gap = e.at.saturating_duration_since(answered_at(p));
            if gap > l.ttl && worst.is_none_or(|(g, _, _)| gap > g) {
                worst = Some((gap, Some(e), p));
            }
        }
        if matches!(e.operation, Operation::Acquire | Operation::Renew) && e.succeeded() {
            prev = Some(e);
        }
        if e.operation == Operation::Release {
            prev = None;
        }
    }
    // Still holding, and the last success is older than the TTL: a renew is overdue.
    if let Some(p) = prev
        && still_running
    {
        let gap = now.saturating_duration_since(answered_at(p));
        if gap > l.ttl && worst.is_none_or(|(g, _, _)| gap > g) {
            worst = Some((gap, None, p));
        }
    }
    let r = match worst {
        None => Ok(()),
        Some((gap, next, p)) => Err(w.fail(
            &format!(
                "each renew is sent within the TTL ({}) of the last acquire or renew the server answered 200 (Nomad promises the lock only until then)",
                fmt(l.ttl)
            ),
            &match next {
                Some(_) => format!(
                    "a renew came {} after the previous success was answered",
                    fmt(gap)
                ),
                None => format!(
                    "no renew for {} after the last success, while the protected process runs",
                    fmt(gap)
                ),
            },
            &[Some(p), next].into_iter().flatten().collect::<Vec<_>>(),
        )),
    };
    w.record_scene();
    r
}

#[then("renews came about every half TTL")]
async fn half_ttl(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let ok: Vec<&Exchange> = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| matches!(e.operation, Operation::Acquire | Operation::Renew) && e.succeeded())
        .collect();
    let mut gaps: Vec<Duration> = ok
        .windows(2)
        .filter(|p| p[1].operation == Operation::Renew)
        .map(|p| p[1].at.saturating_duration_since(p[0].at))
        .collect();
    gaps.sort();
    let (lo, hi) = (l.ttl / 10, l.ttl.mul_f64(0.75));
    let held = held_for(&ex);
    if gaps.is_empty() && held < l.ttl * 2 {
        let why = held_too_short(w, held, &l, "two renews to be measured");
        w.record_scene();
        return Err(w.ctx().skip(why));
    }
    let r = match gaps.get(gaps.len() / 2) {
        None => Err(w.fail(
            "renews about every half TTL",
            &format!("fewer than two successful renews to measure (requests: {})", answers(&ok)),
            &[],
        )),
        Some(&m) if m >= lo && m <= hi => Ok(()),
        Some(&m) => Err(w.fail(
            &format!(
                "renews about every TTL/2 ({}): a median period between TTL/10 ({}) and 3/4 TTL ({})",
                fmt(l.ttl / 2),
                fmt(lo),
                fmt(hi)
            ),
            &format!(
                "a median period of {} over {} renews",
                fmt(m),
                gaps.len()
            ),
            &ok.iter().take(3).copied().collect::<Vec<_>>(),
        )),
    };
    w.record_scene();
    r
}

#[then("the protected process stopped soon after the conflict")]
async fn stopped_after_conflict(w: &mut LockWorld) -> StepResult {
    let within = w.lock_profile().stop_within;
    let at = w.fault_at.unwrap_or_else(Instant::now);
    let wait = (at + within).saturating_duration_since(Instant::now());
    let scene = w.scene()?;
    scene.listener.wait_ended(CLIENT, wait).await;
    let running: Vec<_> = scene
        .probes_of(CLIENT)
        .into_iter()
        .filter(|p| p.end.is_none_or(|e| e > at + within))
        .collect();
    let ex = scene.exchanges();
    let conflict = lock_ops(&ex, CLIENT)
        .into_iter()
        .find(|e| e.operation == Operation::Renew && e.status == Some(409));
    let after: Vec<&Exchange> = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| e.at > at)
        .collect();
    let r = if running.is_empty() {
        Ok(())
    } else {
        Err(w.fail(
            &format!(
                "a renew answered 409 means another holder has the lock: the protected process is stopped within {}",
                fmt(within)
            ),
            &format!(
                "the protected process was still running {} after the 409; the client's requests since: {}",
                fmt(within),
                if after.is_empty() { "none".to_string() } else { answers(&after) }
            ),
            &conflict.into_iter().collect::<Vec<_>>(),
        ))
    };
    w.record_scene();
    r
}

#[then("the client exits non-zero after the conflict")]
async fn exits_after_conflict(w: &mut LockWorld) -> StepResult {
    let within = w.lock_profile().stop_within * 2;
    let client = w.client(CLIENT)?;
    let status = client.wait_exit(within).await;
    let r = match status {
        Some(s) if failed(&s) => Ok(()),
        other => Err(w.fail(
            "after a renew conflict the client exits with an error code, so that Nomad reads the allocation as failed",
            &match other {
                Some(s) => format!("the client ended with {s}"),
                None => format!("the client was still running {} after the 409", fmt(within)),
            },
            &[],
        )),
    };
    w.record_scene();
    r
}

#[then("the client keeps the lock: a later renew succeeds and the protected process runs on")]
async fn keeps_after_failure(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let at = w.fault_at.unwrap_or_else(Instant::now);
    let ok = wait_exchange(w, CLIENT, at, l.ttl, |e| {
        e.operation == Operation::Renew && e.succeeded()
    })
    .await?;
    let scene = w.scene()?;
    let ended = scene
        .probes_of(CLIENT)
        .into_iter()
        .find(|p| p.end.is_some());
    let ex = scene.exchanges();
    let after: Vec<&Exchange> = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| e.at >= at)
        .collect();
    let expected = format!(
        "a renew that fails with 503 is retried (\"retry with backoff up to TTL\"): a renew succeeds within the TTL ({}) and the protected process keeps running",
        fmt(l.ttl)
    );
    let r = match (ok, ended) {
        (Some(_), None) => Ok(()),
        (_, Some(p)) => Err(w.fail(
            &expected,
            &format!(
                "the protected process ended {} after the 503; requests since: {}",
                fmt(p.end.unwrap_or(at).saturating_duration_since(at)),
                answers(&after)
            ),
            &[],
        )),
        (None, None) => Err(w.fail(
            &expected,
            &format!(
                "no successful renew within {} of the 503; requests since: {}",
                fmt(l.ttl),
                answers(&after)
            ),
            &[],
        )),
    };
    w.record_scene();
    r
}

/// The probe's end against a deadline; `deadline` gets the lease and the last acquire or renew
/// the server answered 200 before the failures, and says when the deadline is and from what.
async fn lapse_check(
    w: &LockWorld,
    deadline: impl Fn(&Lease, &Exchange) -> (Instant, String),
    expected: &str,
) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let at = w.fault_at.unwrap_or_else(Instant::now);
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let Some(last) = last_success(&ex, CLIENT, at) else {
        return Err(w
            .ctx()
            .harness_error("no successful acquire or renew before the failures"));
    };
    let (deadline, from) = deadline(&l, &last);
    let late: Vec<_> = scene
        .probes_of(CLIENT)
        .into_iter()
        .filter(|p| p.start < deadline && p.end.is_none_or(|e| e > deadline))
        .collect();
    let after: Vec<&Exchange> = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| e.at >= at)
        .collect();
    match late.first() {
        None => Ok(()),
        Some(p) => Err(w.fail(
            expected,
            &format!(
                "the protected process {} (the deadline was {from}); the client's requests since the failures began: {}",
                match p.end {
                    Some(e) => format!("ended {} after the deadline", fmt(e.saturating_duration_since(deadline))),
                    None => "was still running".to_string(),
                },
                if after.is_empty() { "none".into() } else { answers(&after) }
            ),
            &[&last],
        )),
    }
}

/// When another allocation's acquire can first succeed after `last`, the last acquire or renew
/// of the client the server answered 200: when the lock left the server's state, as its
/// history shows (the reference server), or else 2 × TTL (the leader's timer) plus the lock
/// delay after that answer (nomad/locks.go; the lock stays in state through the delay, and
/// nomad/state/state_store_variables.go, VarLockAcquire, answers every other acquire 409 while
/// it does). The same instant LOCK-SINGLETON counts a lock valid until.
fn lock_free_at(w: &LockWorld, l: &Lease, last: &Exchange) -> (Instant, String) {
    let computed = answered_at(last) + l.ttl * 2 + l.delay;
    let from_history = last.lock_id.as_deref().and_then(|id| {
        w.scene()
            .ok()?
            .holds()
            .into_iter()
            .find(|h| h.lock_id == id)
            .and_then(|h| super::checker::free_at(&h))
    });
    match from_history {
        Some(free) => (
            free,
            format!(
                "when the server freed the lock, {} after the last renew it accepted",
                fmt(free.saturating_duration_since(answered_at(last)))
            ),
        ),
        None => (
            computed,
            format!(
                "2 × TTL + lock delay = {} after the last renew the server accepted",
                fmt(l.ttl * 2 + l.delay)
            ),
        ),
    }
}

#[then("the protected process stopped before the server could give the lock to another")]
async fn before_handover(w: &mut LockWorld) -> StepResult {
    let tol = w.lock_profile().overlap_tolerance;
    let r = lapse_check(
        w,
        |l, last| {
            let (free, from) = lock_free_at(w, l, last);
            (free + tol, from)
        },
        "when renews keep failing, the protected process is gone before Nomad can give the lock to another allocation: 2 × TTL (the leader's timer) plus the lock delay after the last renew it accepted",
    )
    .await;
    w.record_scene();
    r
}

/// The guide's lock-renew sequence: once a renew has failed, retry with backoff for up to a
/// TTL, then stop. Counted from the first renew that failed after the failures began, if it
/// was sent within the TTL of the last success; a client that sent none by then has no retry
/// to make: its TTL expired, and it stops then.
fn ttl_after_first_failure(w: &LockWorld, l: &Lease, last: &Exchange) -> (Instant, String) {
    let at = w.fault_at.unwrap_or_else(Instant::now);
    let due = answered_at(last) + l.ttl;
    let first_failed = w.scene().ok().and_then(|scene| {
        lock_ops(&scene.exchanges(), CLIENT)
            .into_iter()
            .find(|e| e.operation == Operation::Renew && e.at >= at && !e.succeeded())
            .map(|e| e.at)
    });
    match first_failed {
        Some(f) if f < due => (
            f + l.ttl,
            format!(
                "one TTL ({}) after the first renew that failed, sent {} after the last renew the server accepted",
                fmt(l.ttl),
                fmt(f.saturating_duration_since(answered_at(last)))
            ),
        ),
        _ => (
            due,
            format!(
                "the TTL ({}) after the last renew the server accepted: no renew was sent within it, so none failed to be retried",
                fmt(l.ttl)
            ),
        ),
    }
}

#[then("the protected process stopped within the TTL of the last renew the server accepted")]
async fn within_lease(w: &mut LockWorld) -> StepResult {
    let tol = w.lock_profile().lapse_tolerance;
    let r = lapse_check(
        w,
        |l, last| {
            let (d, from) = ttl_after_first_failure(w, l, last);
            (d + tol, from)
        },
        "when renews keep failing, the client retries them with backoff for up to a TTL after the first failure and then stops the protected process (\"On failure: retry with backoff up to TTL. If TTL expires, attempt to revoke lock, then exit\")",
    )
    .await;
    w.record_scene();
    r
}

#[then("the client tried to release the lock after its renews failed")]
async fn tried_release(w: &mut LockWorld) -> StepResult {
    let at = w.fault_at.unwrap_or_else(Instant::now);
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let after: Vec<&Exchange> = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| e.at >= at)
        .collect();
    let r = if after.iter().any(|e| e.operation == Operation::Release) {
        Ok(())
    } else {
        Err(w.fail(
            "once the TTL lapsed without a successful renew, the client attempts to release the lock (\"attempt to revoke lock\")",
            &format!(
                "no lock-release request; requests since the failures began: {}",
                if after.is_empty() { "none".into() } else { answers(&after) }
            ),
            &[],
        ))
    };
    w.record_scene();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_renew_clauses_watch_two_and_a_half_ttls_within_bounds() {
        let s = Duration::from_secs;
        // A TTL short against the hold: the profile's hold.
        assert_eq!(keep_for(s(30), s(10)), s(30));
        // Nomad's default TTL of 15 s on the fast profile's 3 s hold: capped at four holds.
        assert_eq!(keep_for(s(3), s(15)), s(12));
        // In between: two and a half TTLs.
        assert_eq!(keep_for(s(30), s(20)), s(50));
    }
}
