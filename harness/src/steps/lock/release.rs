//! The ending clauses: release when the protected process exits, report its status, stop on
//! the task's kill signal and release, refuse clearly on 403, use the allocation's token and
//! namespace.

use std::time::{Duration, Instant};

use cucumber::{then, when};
use nix::sys::signal::Signal;

use super::acquire::{CLIENT, answers, failed, wait_running};
use super::{LockWorld, StepResult, answered_at, fmt, lock_ops};
use crate::plugins::lock::{Exchange, Operation};

#[when("the protected process exits")]
async fn probe_exits(w: &mut LockWorld) -> StepResult {
    wait_running(w, CLIENT).await?;
    let within = w.lock_profile().start_within;
    w.scene()?.listener.wait_ended(CLIENT, within).await;
    w.fault_at = Some(Instant::now());
    Ok(())
}

#[then("the client released the lock")]
async fn released(w: &mut LockWorld) -> StepResult {
    let within = w.lock_profile().stop_within * 2;
    let scene = w.scene()?;
    if let Some(c) = scene.client(CLIENT) {
        c.wait_exit(within).await;
    }
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let releases: Vec<&Exchange> = ops
        .iter()
        .filter(|e| e.operation == Operation::Release)
        .copied()
        .collect();
    let r = if releases.iter().any(|e| e.succeeded()) {
        Ok(())
    } else {
        Err(w.fail(
            "the client releases its lock when it is done (a lock-release answered 200), so that the next allocation need not wait 2 × TTL plus the lock delay",
            &if releases.is_empty() {
                format!("no lock-release request (requests: {})", answers(&ops))
            } else {
                format!("lock-release answered {}", answers(&releases))
            },
            &releases.iter().take(1).copied().collect::<Vec<_>>(),
        ))
    };
    w.record_scene();
    r
}

#[then(regex = r"^the client exits (0|non-zero)$")]
async fn exits(w: &mut LockWorld, want: String) -> StepResult {
    let within = w.lock_profile().stop_within * 2;
    let scene = w.scene()?;
    let client = w.client(CLIENT)?;
    let status = client.wait_exit(within).await;
    let probe_exit = scene.probes_of(CLIENT).first().and_then(|p| p.exit);
    let ok = match (&status, want.as_str()) {
        (Some(s), "0") => !failed(s),
        (Some(s), _) => failed(s),
        (None, _) => false,
    };
    let r = if ok {
        Ok(())
    } else {
        Err(w.fail(
            &format!(
                "the client exits {want} when the protected process exits with {} (Nomad's restart policy reads the task's exit status)",
                probe_exit.map(|c| c.to_string()).unwrap_or_else(|| "its code".into())
            ),
            &match status {
                Some(s) => format!("the client ended with {s}"),
                None => format!(
                    "the client was still running {} after the protected process exited",
                    fmt(within)
                ),
            },
            &[],
        ))
    };
    w.record_scene();
    r
}

#[when(regex = r"^Nomad stops the task with (SIGTERM|SIGINT)$")]
async fn stop_with(w: &mut LockWorld, signal: String) -> StepResult {
    wait_running(w, CLIENT).await?;
    let sig = if signal == "SIGINT" {
        Signal::SIGINT
    } else {
        Signal::SIGTERM
    };
    let kill = w.config().kill_timeout;
    w.signalled_at = Some(Instant::now());
    let scene = w.scene()?;
    let client = w.client(CLIENT)?;
    let _ = client.signal(sig);
    if client.wait_exit(kill).await.is_none() {
        // Nomad's SIGKILL after kill_timeout.
        client.kill();
        client.wait_exit(Duration::from_secs(5)).await;
    }
    // The sidecar pattern: the application stops after the leader, with its own kill timeout.
    scene.listener.wait_ended(CLIENT, kill).await;
    Ok(())
}

#[then(
    "the protected process stopped within the kill timeout, never running while the lock was free"
)]
async fn stopped_in_order(w: &mut LockWorld) -> StepResult {
    let kill = w.config().kill_timeout;
    let tol = w.lock_profile().lapse_tolerance;
    let shim = w.config().pattern.is_shim();
    let at = w.signalled_at.unwrap_or_else(Instant::now);
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let release = lock_ops(&ex, CLIENT)
        .into_iter()
        .find(|e| e.operation == Operation::Release && e.succeeded() && e.at >= at);
    let probes = scene.probes_of(CLIENT);
    let mut problem = None;
    for p in &probes {
        let end = p.end;
        if end.is_none_or(|e| e > at + kill)
            || (p.killed && end.is_some_and(|e| e + tol >= at + kill))
        {
            problem = Some(format!(
                "the protected process {} — it was not stopped before Nomad's SIGKILL at the kill timeout ({})",
                match end {
                    Some(e) => format!(
                        "ended {} after the signal",
                        fmt(e.saturating_duration_since(at))
                    ),
                    None => "was still running".into(),
                },
                fmt(kill)
            ));
        } else if shim
            && let (Some(r), Some(e)) = (release, end)
            && e > answered_at(r) + tol
        {
            problem = Some(format!(
                "the lock was released {} before the protected process ended: another allocation could take it while this one still ran",
                fmt(e.saturating_duration_since(answered_at(r)))
            ));
        }
    }
    let r = match problem {
        None => Ok(()),
        Some(seen) => Err(w.fail(
            &format!(
                "on the task's kill signal the protected process stops within the kill timeout ({}){}",
                fmt(kill),
                if shim { ", before the lock is released" } else { "" }
            ),
            &seen,
            &release.into_iter().collect::<Vec<_>>(),
        )),
    };
    w.record_scene();
    r
}

#[then("the client released the lock after the signal")]
async fn released_after_signal(w: &mut LockWorld) -> StepResult {
    let at = w.signalled_at.unwrap_or_else(Instant::now);
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let ops: Vec<&Exchange> = lock_ops(&ex, CLIENT)
        .into_iter()
        .filter(|e| e.at >= at)
        .collect();
    let r = if ops
        .iter()
        .any(|e| e.operation == Operation::Release && e.succeeded())
    {
        Ok(())
    } else {
        Err(w.fail(
            "a client stopped by Nomad releases its lock (so that the replacement need not wait 2 × TTL plus the lock delay)",
            &format!(
                "no successful lock-release after the signal (requests since: {})",
                if ops.is_empty() { "none".into() } else { answers(&ops) }
            ),
            &ops.iter().take(1).copied().collect::<Vec<_>>(),
        ))
    };
    w.record_scene();
    r
}

/// How long a refused client may take to exit: the profile's refusal window, or its give-up
/// window when that is longer.
fn refusal_window(w: &LockWorld) -> Duration {
    let p = w.lock_profile();
    let give_up = w.config().give_up.map(|g| g + p.stop_within);
    give_up.map_or(p.refusal_within, |g| g.max(p.refusal_within))
}

#[then(
    "the client exits non-zero within the refusal window, without starting the protected process"
)]
async fn refused(w: &mut LockWorld) -> StepResult {
    let within = refusal_window(w);
    let scene = w.scene()?;
    let client = w.client(CLIENT)?;
    let status = client.wait_exit(within).await;
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let expected = format!(
        "a client whose lock requests are refused with 403 never starts the protected process and exits non-zero within {}",
        fmt(within)
    );
    let r = if !scene.probes_of(CLIENT).is_empty() {
        Err(w.fail(
            &expected,
            "the protected process started",
            &ops[..ops.len().min(1)],
        ))
    } else {
        match status {
            Some(s) if failed(&s) => Ok(()),
            Some(s) => Err(w.fail(&expected, &format!("the client ended with {s}"), &[])),
            None => Err(w.fail(
                &expected,
                &format!(
                    "the client was still running after {} ({} requests: {})",
                    fmt(within),
                    ops.len(),
                    answers(&ops)
                ),
                &ops[..ops.len().min(1)],
            )),
        }
    };
    w.record_scene();
    r
}

#[then("the client made few attempts and its output names the refusal")]
async fn refusal_prompt(w: &mut LockWorld) -> StepResult {
    let within = refusal_window(w);
    let max = w.lock_profile().refusal_max_attempts;
    let scene = w.scene()?;
    let client = w.client(CLIENT)?;
    client.wait_exit(within).await;
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let output: String = client
        .tasks()
        .iter()
        .map(|t| format!("{}\n{}", t.stdout.text, t.stderr.text))
        .collect();
    let lower = output.to_ascii_lowercase();
    let named = ["403", "permission", "denied", "forbidden", "acl"]
        .iter()
        .any(|k| lower.contains(k));
    let r = if ops.len() > max {
        Err(w.fail(
            &format!("a refusal is final: at most {max} attempts"),
            &format!("{} attempts: {}", ops.len(), answers(&ops)),
            &ops[..1],
        ))
    } else if !named {
        Err(w.fail(
            "the client's output says its request was refused (403, permission denied), so the operator knows to fix the ACL policy",
            &format!(
                "its output does not: {:?}",
                output.trim().chars().take(400).collect::<String>()
            ),
            &ops[..ops.len().min(1)],
        ))
    } else {
        Ok(())
    };
    w.record_scene();
    r
}

#[then("every request of the client carried its token and named its namespace")]
async fn token_namespace(w: &mut LockWorld) -> StepResult {
    let scene = w.scene()?;
    let ns = scene.namespace.clone().unwrap_or_default();
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let names_ns = |e: &Exchange| {
        e.query.split('&').any(|p| p == format!("namespace={ns}"))
            || serde_json::from_str::<serde_json::Value>(&e.request_body)
                .ok()
                .and_then(|v| v.get("Namespace").and_then(|n| n.as_str()).map(|n| n == ns))
                .unwrap_or(false)
    };
    let bad = ops.iter().find(|e| !e.token_sent || !names_ns(e));
    let r = match (ops.is_empty(), bad) {
        (true, _) => Err(w.fail(
            "the client uses NOMAD_TOKEN and NOMAD_NAMESPACE from its environment",
            "the client sent no lock request",
            &[],
        )),
        (false, None) => Ok(()),
        (false, Some(e)) => Err(w.fail(
            &format!(
                "every lock request carries NOMAD_TOKEN (X-Nomad-Token) and names NOMAD_NAMESPACE ({ns}) in ?namespace= or the body's Namespace"
            ),
            &format!(
                "{} {} {}{}",
                e.method,
                e.target(),
                if e.token_sent { "carried the token" } else { "carried no token" },
                if names_ns(e) { "" } else { " and did not name the namespace" }
            ),
            &[e],
        )),
    };
    w.record_scene();
    r
}
