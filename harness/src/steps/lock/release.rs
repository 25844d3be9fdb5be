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

#[when("the client is killed with SIGKILL")]
async fn killed(w: &mut LockWorld) -> StepResult {
    wait_running(w, CLIENT).await?;
    w.signalled_at = Some(Instant::now());
    let client = w.client(CLIENT)?;
    // The main process only: the harness then kills what is left in its group, as a driver
    // cleaning up a task does; a group of the client's own making is the client's business.
    let _ = client.signal(Signal::SIGKILL);
    client.wait_exit(Duration::from_secs(5)).await;
    Ok(())
}

#[then("the protected process ended soon after its client")]
async fn no_orphan(w: &mut LockWorld) -> StepResult {
    let within = w.lock_profile().stop_within;
    let at = w.signalled_at.unwrap_or_else(Instant::now);
    let scene = w.scene()?;
    scene.listener.wait_ended(CLIENT, within).await;
    let late = scene
        .probes_of(CLIENT)
        .into_iter()
        .find(|p| p.end.is_none_or(|e| e > at + within));
    let r = match late {
        None => Ok(()),
        Some(p) => Err(w.fail(
            &format!(
                "once its client is killed with SIGKILL, the protected process ends within {} (its client can no longer renew the lock: a parent-death signal, or the client's process group)",
                fmt(within)
            ),
            &match p.end {
                Some(e) => format!(
                    "the protected process (pid {}) ended {} after the SIGKILL",
                    p.pid,
                    fmt(e.saturating_duration_since(at))
                ),
                None => format!(
                    "the protected process (pid {}) was still running {} after the SIGKILL, in a process group the driver's cleanup did not reach",
                    p.pid,
                    fmt(within)
                ),
            },
            &[],
        )),
    };
    w.record_scene();
    r
}

#[when("Nomad stops the task with SIGTERM while a renew hangs")]
async fn stop_while_hung(w: &mut LockWorld) -> StepResult {
    if !w.config().pattern.is_shim() {
        return Err(w.ctx().skip(
            "in the sidecar pattern Nomad stops the application task after the leader, whatever the leader does, and SIGKILLs a leader still running at its kill timeout: a leader that waits on a hung request only delays the stop, which LOCK-HANG-STOPS bounds",
        ));
    }
    let l = super::renew::lease(w, CLIENT).await?;
    let task_api = w.config().task_api;
    // The next renew comes within the TTL of the last success (LOCK-RENEW-BEFORE-TTL); wait
    // until the proxy holds one, unanswered.
    let until = Instant::now() + l.ttl * 2;
    let proxy_pending = loop {
        let pending = w
            .scene_mut()?
            .proxy(CLIENT, task_api)
            .await?
            .pending(Operation::Renew);
        if !pending.is_empty() || Instant::now() >= until {
            break pending;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let scene = w.scene()?;
    let running = scene.probes_of(CLIENT).iter().any(|p| p.end.is_none());
    if proxy_pending.is_empty() || !running {
        return Err(w.ctx().skip(if running {
            format!(
                "the client sent no renew within {} of the hang's start, so no signal could come while one hangs",
                fmt(l.ttl * 2)
            )
        } else {
            "the client stopped its protected process before any renew hung (LOCK-HANG-STOPS judges how soon), so no signal could come while one hangs".to_string()
        }));
    }
    let kill = w.config().kill_timeout;
    w.signalled_at = Some(Instant::now());
    let client = w.client(CLIENT)?;
    let _ = client.signal(Signal::SIGTERM);
    if client.wait_exit(kill).await.is_none() {
        // Nomad's SIGKILL after kill_timeout; what the client was doing is kept for the verdict.
        w.notes_at_kill = Some(client_state(w));
        let client = w.client(CLIENT)?;
        client.kill();
        client.wait_exit(Duration::from_secs(5)).await;
    }
    w.scene()?.listener.wait_ended(CLIENT, kill).await;
    Ok(())
}

/// What the client under test was doing when Nomad would SIGKILL it: running or not, its
/// protected process, whether it had released the lock, its requests still waiting.
fn client_state(w: &LockWorld) -> String {
    let Ok(scene) = w.scene() else {
        return String::new();
    };
    let at = w.signalled_at.unwrap_or_else(Instant::now);
    let ex = scene.exchanges();
    let released = lock_ops(&ex, CLIENT)
        .into_iter()
        .any(|e| e.operation == Operation::Release && e.succeeded() && e.at >= at);
    let probe_running = scene.probes_of(CLIENT).iter().any(|p| p.end.is_none());
    let pending: Vec<String> = scene
        .proxies
        .get(CLIENT)
        .map(|p| {
            Operation::LOCK
                .iter()
                .flat_map(|op| {
                    p.pending(*op)
                        .into_iter()
                        .map(move |t| format!("{} waiting for {}", op.as_str(), fmt(t.elapsed())))
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "at the kill timeout the client was still running, its protected process {}, the lock {}; requests still waiting: {}",
        if probe_running {
            "still running"
        } else {
            "stopped"
        },
        if released { "released" } else { "not released" },
        if pending.is_empty() {
            "none".to_string()
        } else {
            pending.join(", ")
        }
    )
}

#[then("the protected process stopped within the kill timeout")]
async fn stopped_within_kill(w: &mut LockWorld) -> StepResult {
    let kill = w.config().kill_timeout;
    let at = w.signalled_at.unwrap_or_else(Instant::now);
    let scene = w.scene()?;
    let exited = w.client(CLIENT)?.exited_at();
    let probes = scene.probes_of(CLIENT);
    let late_probe = probes
        .iter()
        .find(|p| p.end.is_none_or(|e| e > at + kill) || p.killed);
    let client_note = match exited {
        Some(e) => format!(
            "the client exited {} after the signal",
            fmt(e.saturating_duration_since(at))
        ),
        None => "the client did not exit".into(),
    };
    let r = match late_probe {
        None => {
            // Exiting late is not the clause's question: Nomad SIGKILLs the client at the
            // kill timeout, and its protected process is already gone.
            w.ctx().note(&client_note);
            Ok(())
        }
        Some(p) => {
            let mut seen = Vec::new();
            if let Some(state) = &w.notes_at_kill {
                seen.push(state.clone());
            }
            seen.push(match p.end {
                Some(e) if !p.killed => format!(
                    "the protected process ended {} after the signal",
                    fmt(e.saturating_duration_since(at))
                ),
                Some(_) => {
                    "the protected process was only ended by the harness's SIGKILL (Nomad's, at the kill timeout)".into()
                }
                None => "the protected process was still running".into(),
            });
            seen.push(client_note);
            Err(w.fail(
                &format!(
                    "SIGTERM while a renew hangs: the client stops its protected process within the kill timeout ({}), without waiting for the hung request",
                    fmt(kill)
                ),
                &seen.join("; "),
                &[],
            ))
        }
    };
    w.record_scene();
    r
}

#[then("the client exited with a status of its own, not a crash")]
async fn no_crash(w: &mut LockWorld) -> StepResult {
    let within = w.lock_profile().stop_within * 2;
    let client = w.client(CLIENT)?;
    let status = client.wait_exit(within).await;
    let stderr: String = client
        .tasks()
        .iter()
        .map(|t| t.stderr.text.clone())
        .collect::<Vec<_>>()
        .join("\n");
    let report = crate::crash::report(&stderr);
    let signal = match &status {
        Some(nomad_conform_reports::model::ExitStatus::Signaled { signal }) => Some(*signal),
        _ => None,
    };
    let r = match (&report, signal) {
        // Still running and nothing crashed: how it ends was not seen (whether it exits after a
        // conflict at all is LOCK-CONFLICT-EXIT's to judge).
        (None, None) if status.is_none() => Err(w.ctx().skip(format!(
            "the client had not exited {} after the late renew conflict, so how it ends was not seen (LOCK-CONFLICT-EXIT judges whether it exits)",
            fmt(within)
        ))),
        (None, None) => Ok(()),
        _ => Err(w.fail(
            "after a late renew conflict the client exits with an error status of its own (\"On conflict: exit the process with error code\"), not by crashing",
            // The crash itself is added by fail().
            &format!(
                "the client ended with {}",
                status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "no exit yet".into())
            ),
            &[],
        )),
    };
    w.record_scene();
    r
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
