//! The scene's set-up steps and the acquire clauses: start only after a successful acquire,
//! never while another holds the lock, retry with backoff, give up, well-formed requests.

use std::time::{Duration, Instant};

use cucumber::{given, then, when};
use nomad_conform_reports::model::ExitStatus;

use super::scene::Scene;
use super::{LockWorld, ROOT, StepResult, answered_at, fmt, lock_ops};
use crate::plugins::lock::{Exchange, Fault, Operation};

/// The label of the (first) client under test.
pub const CLIENT: &str = "client-1";

/// Whether an exit reports a failure to Nomad.
pub fn failed(s: &ExitStatus) -> bool {
    !matches!(s, ExitStatus::Exited { code: 0 })
}

#[given("a Variables server")]
async fn server(w: &mut LockWorld) -> StepResult {
    let scene = Scene::build(w.ctx(), None).await?;
    w.scene = Some(scene);
    Ok(())
}

#[given("another holder has the lock")]
async fn other_holds(w: &mut LockWorld) -> StepResult {
    let run = w.ctx().run.clone();
    let r = w.scene_mut()?.take_lock(&run.config).await;
    r.map_err(|e| w.ctx().harness_error(e))
}

#[given(regex = r"^acquire answers are delayed by (\d+) ms$")]
async fn acquire_delayed(w: &mut LockWorld, ms: u64) -> StepResult {
    let task_api = w.config().task_api;
    let p = w.scene_mut()?.proxy(CLIENT, task_api).await?;
    p.inject_until_cleared(
        &[Operation::Acquire],
        Fault::latency(Duration::from_millis(ms)),
    );
    Ok(())
}

#[given(regex = r"^the protected process exits by itself with code (\d+) after a second$")]
async fn probe_exits(w: &mut LockWorld, code: u8) -> StepResult {
    w.scene_mut()?.probe_exit = Some((Duration::from_secs(1), code));
    Ok(())
}

#[when("the client starts")]
async fn client_starts(w: &mut LockWorld) -> StepResult {
    let run = w.ctx().run.clone();
    let r = w
        .scene_mut()?
        .start_client(&run.config, CLIENT)
        .await
        .map(|_| ());
    r.map_err(|e| w.ctx().harness_error(e))
}

/// Waits until the client's protected process runs; a client that never gets there blocks
/// the clause on LOCK-STARTS.
pub async fn wait_running(w: &mut LockWorld, label: &str) -> StepResult {
    let within = w.lock_profile().start_within;
    let started = w.scene()?.listener.wait_started(label, within).await;
    if started.is_some() {
        return Ok(());
    }
    let msg = not_started_text(w, label, within);
    Err(w.ctx().blocked(ROOT, msg))
}

fn not_started_text(w: &LockWorld, label: &str, within: Duration) -> String {
    let scene = w.scene.as_ref().expect("a scene");
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, label);
    let status = scene
        .client(label)
        .and_then(|c| c.status())
        .map(|s| format!("the client ended with {s}"))
        .unwrap_or_else(|| "the client is still running".into());
    let seen = if ops.is_empty() {
        format!("no lock request within {}; {status}", fmt(within))
    } else {
        format!(
            "{} lock request(s), answered {}; no protected process within {}; {status}",
            ops.len(),
            answers(&ops),
            fmt(within)
        )
    };
    let seen = match granted_then_asked_again(&ops) {
        Some(hint) => format!("{seen}; {hint}"),
        None => seen,
    };
    w.fail(
        "with the lock free, the client acquires it and starts the protected process",
        &seen,
        &ops.iter().rev().take(2).copied().collect::<Vec<_>>(),
    )
}

/// A client that asks again after an acquire was answered 200 did not take that answer: most
/// likely it stopped waiting for it (an acquire timeout shorter than the answer took). The
/// lock then stays held under the ID it never saw, and every retry meets 409 until it lapses.
fn granted_then_asked_again(ops: &[&crate::plugins::lock::Exchange]) -> Option<String> {
    use crate::plugins::lock::Operation;
    let granted = ops
        .iter()
        .position(|e| e.operation == Operation::Acquire && e.status == Some(200))?;
    let granted_op = ops[granted];
    ops.get(granted + 1)
        .filter(|e| e.operation == Operation::Acquire)?;
    Some(format!(
        "the client asked again after an acquire was granted (answered 200 after {} ms): it did not take that answer (an acquire timeout shorter than that?), and the lock stays held under the ID it granted until its TTL lapses (every retry meanwhile gets 409)",
        granted_op.duration.as_millis()
    ))
}

/// `200, 200, 409` (at most 12, then a count).
pub fn answers(ops: &[&crate::plugins::lock::Exchange]) -> String {
    let mut parts: Vec<String> = ops
        .iter()
        .take(12)
        .map(|e| match e.status {
            Some(s) => format!("{} {s}", e.operation.as_str()),
            None => format!("{} (no answer)", e.operation.as_str()),
        })
        .collect();
    if ops.len() > 12 {
        parts.push(format!("… {} more", ops.len() - 12));
    }
    parts.join(", ")
}

#[when("the client holds the lock and its protected process runs")]
async fn holds(w: &mut LockWorld) -> StepResult {
    wait_running(w, CLIENT).await
}

/// How soon the harness starts a client again that exited, as Nomad's restart policy would
/// (its default delay is 15 s; shorter here so that a short clause sees the restart).
pub const RESTART_DELAY: Duration = Duration::from_millis(500);

/// Keep client `label` running until `until` as an allocation's restart policy does: a client
/// that exited (say with 1 on an acquire conflict, as the guide allows: "once out of
/// attempts, exit the process with error code") is started again after [`RESTART_DELAY`].
pub async fn restarting_until(w: &mut LockWorld, label: &str, until: Instant) -> StepResult {
    let run = w.ctx().run.clone();
    let mut exited_at: Option<Instant> = None;
    while Instant::now() < until {
        let scene = w.scene_mut()?;
        let running = scene
            .clients
            .iter()
            .any(|c| c.label() == label && !c.finished());
        if running {
            exited_at = None;
        } else {
            match exited_at {
                None => exited_at = Some(Instant::now()),
                Some(at) if at.elapsed() >= RESTART_DELAY => {
                    exited_at = None;
                    let r = scene.start_client(&run.config, label).await.map(|_| ());
                    r.map_err(|e| w.ctx().harness_error(e))?;
                }
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[when("the other holder keeps the lock for a while and then releases it")]
async fn other_releases(w: &mut LockWorld) -> StepResult {
    // Shorter than the client's give-up window, when it is known: the clause is about
    // waiting, not giving up.
    let hold = match w.config().give_up {
        Some(g) => w.lock_profile().hold_for.min(g / 2),
        None => w.lock_profile().hold_for,
    };
    let start = Instant::now();
    restarting_until(w, CLIENT, start + hold).await?;
    // Held on, up to a second hold, until the client's first run has shown whether it retries:
    // a second acquire attempt, or its end. Where the release falls must not decide whether a
    // retry is seen (a client slow to start under load made its second attempt just after a
    // fixed hold, and LOCK-ACQUIRE-BACKOFF was skipped, or just before, and it was judged).
    while Instant::now() < start + hold * 2 && !first_run_shown_retry(w)? {
        restarting_until(w, CLIENT, Instant::now() + Duration::from_millis(50)).await?;
    }
    let Some(other) = w.scene_mut()?.other.take() else {
        return Err(w.ctx().harness_error("nobody else holds the lock"));
    };
    match other.release().await {
        Ok(at) => {
            w.scene_mut()?.other_released = Some(at);
            Ok(())
        }
        Err(e) => Err(w.ctx().harness_error(e)),
    }
}

/// Whether the client's first run has made a second acquire attempt or ended.
fn first_run_shown_retry(w: &LockWorld) -> Result<bool, String> {
    let scene = w.scene()?;
    let Some(first) = scene.client(CLIENT) else {
        return Ok(true);
    };
    let run = first.run();
    if run.exited.is_some() {
        return Ok(true);
    }
    let ex = scene.exchanges();
    let attempts = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| e.operation == Operation::Acquire && e.at >= run.started)
        .count();
    Ok(attempts >= 2)
}

#[then("the client acquires the lock and starts the protected process in time")]
async fn starts_in_time(w: &mut LockWorld) -> StepResult {
    // After the other holder left, a client that had exited on the conflict is started again
    // by the restart policy, and must then get the lock.
    if w.scene()?.other_released.is_some() {
        let until = Instant::now() + RESTART_DELAY * 2;
        restarting_until(w, CLIENT, until).await?;
    }
    let r = {
        let within = w.lock_profile().start_within;
        let started = w.scene()?.listener.wait_started(CLIENT, within).await;
        match started {
            Some(_) => Ok(()),
            None => Err(w.ctx().blocked(ROOT, not_started_text(w, CLIENT, within))),
        }
    };
    w.record_scene();
    r
}

#[then("the protected process started only after a successful acquire was answered")]
async fn after_acquire(w: &mut LockWorld) -> StepResult {
    let within = w.lock_profile().start_within;
    let scene = w.scene()?;
    let started = scene.listener.wait_started(CLIENT, within).await;
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let first_ok = ops
        .iter()
        .find(|e| e.operation == Operation::Acquire && e.succeeded());
    let r = match (started, first_ok) {
        (None, _) => Err(w
            .ctx()
            .blocked(ROOT, not_started_text(w, CLIENT, within))),
        (Some(p), Some(ok)) if p.start >= answered_at(ok) => Ok(()),
        (Some(p), Some(ok)) => Err(w.fail(
            "the protected process starts only once a lock-acquire was answered 200",
            &format!(
                "it started {} before the first successful acquire was answered (the proxy held that answer back for a while on purpose)",
                fmt(answered_at(ok).saturating_duration_since(p.start))
            ),
            &[ok],
        )),
        (Some(_), None) => Err(w.fail(
            "the protected process starts only once a lock-acquire was answered 200",
            &format!(
                "it started, and no acquire of the client was answered 200 (requests: {})",
                answers(&ops)
            ),
            &ops.iter().take(2).copied().collect::<Vec<_>>(),
        )),
    };
    w.record_scene();
    r
}

#[then("the protected process did not start while the other holder had the lock")]
async fn not_while_held(w: &mut LockWorld) -> StepResult {
    let scene = w.scene()?;
    let released = scene.other_released.unwrap_or_else(Instant::now);
    let early: Vec<_> = scene
        .probes_of(CLIENT)
        .into_iter()
        .filter(|p| p.start < released)
        .collect();
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let r = match early.first() {
        None => Ok(()),
        Some(p) => Err(w.fail(
            "no protected process while another allocation holds the lock (its acquires are answered 409)",
            &format!(
                "the protected process started {} before the other holder released the lock; the client's requests until then: {}",
                fmt(released.saturating_duration_since(p.start)),
                answers(
                    &ops.iter()
                        .filter(|e| e.at < released)
                        .copied()
                        .collect::<Vec<_>>()
                )
            ),
            &ops.iter().take(1).copied().collect::<Vec<_>>(),
        )),
    };
    w.record_scene();
    r
}

#[then("the client's acquire attempts came no faster than the profile allows")]
async fn backoff(w: &mut LockWorld) -> StepResult {
    let rate = w.lock_profile().max_acquire_rate;
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let released = scene.other_released.unwrap_or_else(Instant::now);
    let attempts: Vec<_> = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| e.operation == Operation::Acquire && e.at < released)
        .collect();
    // Retries of one run of the client, each run on its own: a restart by the restart policy
    // (the harness's, after its restart delay) is not the client's backoff.
    let runs: Vec<crate::plugins::lock::ClientRun> = scene
        .clients
        .iter()
        .filter(|c| c.label() == CLIENT)
        .map(|c| c.run())
        .collect();
    let per_run: Vec<Vec<&Exchange>> = runs
        .iter()
        .map(|r| {
            attempts
                .iter()
                .filter(|e| e.at >= r.started && r.exited.is_none_or(|x| e.at <= x))
                .copied()
                .collect()
        })
        .collect();
    if per_run.iter().all(|a| a.len() < 2) {
        let n = attempts.len();
        let r = Err(w.ctx().skip(format!(
            "the client never retried an acquire within one run while the lock was held ({n} attempt(s) over {} run(s)): there is no backoff to judge (giving up is LOCK-GIVES-UP's question, and the restart policy paced the restarts)",
            runs.len()
        )));
        w.record_scene();
        return r;
    }
    // The busiest run: the most attempts beyond the rate over its own span (two free: the
    // first try and one quick retry).
    let worst = per_run
        .iter()
        .filter(|a| a.len() >= 2)
        .map(|a| {
            let span = a[a.len() - 1]
                .at
                .saturating_duration_since(a[0].at)
                .as_secs_f64();
            let allowed = (rate * span).floor() as usize + 2;
            (a.len() as i64 - allowed as i64, span, a)
        })
        .max_by(|x, y| x.0.cmp(&y.0));
    let r = match worst {
        Some((excess, span, a)) if excess > 0 => Err(w.fail(
            &format!(
                "while the lock is held elsewhere, acquire attempts with backoff: at most {rate} a second"
            ),
            &format!(
                "{} attempts in {} within one run of the client ({:.1} a second)",
                a.len(),
                fmt(Duration::from_secs_f64(span)),
                a.len() as f64 / span.max(0.001)
            ),
            &a[..1],
        )),
        _ => Ok(()),
    };
    w.record_scene();
    r
}

#[then(
    "the client exits non-zero within its give-up window, without starting the protected process"
)]
async fn gives_up(w: &mut LockWorld) -> StepResult {
    let give_up = w.config().give_up.unwrap_or_default();
    let slack = w.lock_profile().stop_within;
    let scene = w.scene()?;
    let client = w.client(CLIENT)?;
    let status = client.wait_exit(give_up + slack).await;
    let took = client
        .exited_at()
        .map(|e| e.saturating_duration_since(client.started()));
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let started = scene.probes_of(CLIENT);
    let expected = format!(
        "with the lock held elsewhere, the client gives up after its window ({}) and exits non-zero, never starting the protected process",
        fmt(give_up)
    );
    let r = if !started.is_empty() {
        Err(w.fail(
            &expected,
            "the protected process started while another allocation held the lock",
            &ops.iter().take(1).copied().collect::<Vec<_>>(),
        ))
    } else {
        match status {
            Some(s) if failed(&s) => Ok(()),
            Some(s) => Err(w.fail(
                &expected,
                &format!(
                    "the client ended with {s} after {} (Nomad reads exit 0 as success: the allocation does not fail)",
                    took.map(fmt).unwrap_or_default()
                ),
                &[],
            )),
            None => Err(w.fail(
                &expected,
                &format!(
                    "the client was still running {} after it started ({} acquire attempts: {})",
                    fmt(give_up + slack),
                    ops.len(),
                    answers(&ops)
                ),
                &ops.iter().rev().take(1).copied().collect::<Vec<_>>(),
            )),
        }
    };
    w.record_scene();
    r
}

#[when("the client has run until its protected process runs, or for the start time")]
async fn ran(w: &mut LockWorld) -> StepResult {
    let within = w.lock_profile().start_within;
    let scene = w.scene()?;
    let exited = async {
        if let Some(c) = scene.client(CLIENT) {
            c.wait_exit(within).await;
        }
    };
    tokio::select! {
        _ = scene.listener.wait_started(CLIENT, within) => {}
        _ = exited => {}
    }
    Ok(())
}

#[when("the client is stopped as Nomad stops a task")]
async fn stopped(w: &mut LockWorld) -> StepResult {
    let kill = w.config().kill_timeout;
    let scene = w.scene()?;
    if let Some(c) = scene.client(CLIENT) {
        c.stop(kill).await;
    }
    Ok(())
}

#[then("every lock request of the client was one Nomad accepts")]
async fn well_formed(w: &mut LockWorld) -> StepResult {
    let path = format!("/v1/var/{}", w.config().path);
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let mine: Vec<_> = ex
        .iter()
        .filter(|e| e.client == CLIENT && e.operation != Operation::Read)
        .collect();
    if mine.is_empty() {
        // Nothing to judge: a client that never asked is LOCK-STARTS's failure.
        let why = w.fail("the client sends lock requests", "it sent none", &[]);
        w.record_scene();
        return Err(w.ctx().blocked(super::ROOT, why));
    }
    let mut bad = Vec::new();
    for e in &mine {
        let injected = e.fault.as_ref().is_some_and(|f| {
            f.fault.is_some_and(|f| {
                !matches!(
                    f.action,
                    crate::plugins::lock::proxy_faults::FaultAction::Forward
                )
            })
        });
        let why = if e.operation == Operation::Other {
            Some(
                "not one lock operation (a plain write, a delete, or several lock flags)"
                    .to_string(),
            )
        } else if cas_given(&e.query) {
            Some(
                "`cas` with a lock flag (Nomad: 400 \"CAS can't be used with lock operations\")"
                    .into(),
            )
        } else if e.path != path {
            Some(format!("the path is {}, not the lock's {path}", e.path))
        } else if !injected && matches!(e.status, Some(400) | Some(500)) {
            Some(format!(
                "answered {}: {}",
                e.status.unwrap_or_default(),
                e.response_body.trim()
            ))
        } else {
            None
        };
        if let Some(why) = why {
            bad.push((*e, why));
        }
    }
    let r = match bad.first() {
        None => Ok(()),
        Some((e, why)) => Err(w.fail(
            "every lock request is one Nomad accepts: PUT /v1/var/<path> with exactly one of lock-acquire, lock-renew, lock-release, no cas, a TTL within the server's bounds, a release with Lock.ID and without Items",
            &format!(
                "{} of {} requests were not; the first, {} {}: {why}",
                bad.len(),
                mine.len(),
                e.method,
                e.target()
            ),
            &[e],
        )),
    };
    w.record_scene();
    r
}

/// Whether a query gives `cas` as Nomad reads it (command/agent/variable_endpoint.go,
/// `req.URL.Query().Get("cas")`, refused with a lock flag only when not empty): the first `cas`
/// parameter has a value.
fn cas_given(query: &str) -> bool {
    query
        .split('&')
        .find_map(|p| match p.split_once('=') {
            Some(("cas", v)) => Some(!v.is_empty()),
            None if p == "cas" => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{cas_given, granted_then_asked_again};
    use crate::plugins::lock::Operation;
    use crate::plugins::lock::exchange::tests::exchange;

    #[test]
    fn cas_counts_as_nomad_reads_it() {
        assert!(cas_given("lock-acquire&cas=3"));
        assert!(cas_given("namespace=x&cas=0&lock-renew"));
        // Empty: Nomad's Get("cas") is "", which it accepts with a lock flag.
        assert!(!cas_given("lock-acquire&cas="));
        assert!(!cas_given("lock-acquire&cas"));
        assert!(!cas_given("lock-acquire&cas=&cas=3"));
        assert!(!cas_given("lock-acquire&cascade=1"));
    }

    #[test]
    fn a_granted_acquire_asked_again_is_named_with_its_answer_time() {
        let now = Instant::now();
        let mut granted = exchange("c", Operation::Acquire, now, 200);
        granted.duration = Duration::from_millis(410);
        let retry = exchange("c", Operation::Acquire, now, 409);
        let hint = granted_then_asked_again(&[&granted, &retry]).expect("a hint");
        assert!(hint.contains("answered 200 after 410 ms"), "{hint}");
        // Refused, then granted, then renewed: nothing to say.
        let refused = exchange("c", Operation::Acquire, now, 409);
        let renew = exchange("c", Operation::Renew, now, 200);
        assert_eq!(
            granted_then_asked_again(&[&refused, &granted, &renew]),
            None
        );
        assert_eq!(granted_then_asked_again(&[&refused, &retry]), None);
    }
}
