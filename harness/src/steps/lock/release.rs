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
    let client = w.client(CLIENT)?;
    let _ = client.signal(sig);
    if client.wait_exit(kill).await.is_none() {
        // Nomad's SIGKILL after kill_timeout (which protected processes it ends is kept).
        w.alive_at_kill = Some(alive_probes(w));
        let client = w.client(CLIENT)?;
        client.kill();
        client.wait_exit(Duration::from_secs(5)).await;
    }
    // The sidecar pattern: the application stops after the leader, with its own kill timeout.
    w.scene()?.listener.wait_ended(CLIENT, kill).await;
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
        // Nomad's SIGKILL after kill_timeout; what the client was doing is kept for the verdict,
        // and which protected processes were still alive the instant before it: only those did
        // the kill timeout end (the probe listener learns of an end a little later, and a probe
        // the client itself killed is as "killed" as one the harness did).
        w.notes_at_kill = Some(client_state(w));
        w.alive_at_kill = Some(alive_probes(w));
        let client = w.client(CLIENT)?;
        client.kill();
        client.wait_exit(Duration::from_secs(5)).await;
    }
    w.scene()?.listener.wait_ended(CLIENT, kill).await;
    Ok(())
}

/// The protected processes of the client under test that are alive now, by /proc (a zombie
/// is dead: the client killed it and has not reaped it yet).
fn alive_probes(w: &LockWorld) -> Vec<u32> {
    let Ok(scene) = w.scene() else {
        return Vec::new();
    };
    scene
        .probes_of(CLIENT)
        .iter()
        .filter(|p| p.end.is_none() && p.pid > 0)
        .filter(|p| {
            i32::try_from(p.pid)
                .ok()
                .and_then(crate::procfs::proc_stat)
                .is_some_and(|s| !s.zombie)
        })
        .map(|p| p.pid)
        .collect()
}

/// Whether protected process `p` outlived the kill timeout: still running, ended after it, or
/// alive when the harness sent Nomad's SIGKILL at the kill timeout. A probe that ended
/// without reporting an exit before then was stopped by the client (a SIGKILL of its own, as
/// Go's `exec.CommandContext` sends), which is as good a stop as any.
fn outlived_kill_timeout(
    p: &crate::plugins::lock::ProbeInterval,
    at: Instant,
    kill: Duration,
    alive_at_kill: Option<&[u32]>,
) -> bool {
    p.end.is_none_or(|e| e > at + kill) || alive_at_kill.is_some_and(|a| a.contains(&p.pid))
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
    let alive_at_kill = w.alive_at_kill.as_deref();
    let late_probe = probes
        .iter()
        .find(|p| outlived_kill_timeout(p, at, kill, alive_at_kill));
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
            let killed_by_harness = alive_at_kill.is_some_and(|a| a.contains(&p.pid));
            seen.push(match p.end {
                Some(_) if killed_by_harness => {
                    "the protected process was only ended by the harness's SIGKILL (Nomad's, at the kill timeout)".into()
                }
                Some(e) => format!(
                    "the protected process ended {} after the signal",
                    fmt(e.saturating_duration_since(at))
                ),
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

/// LOCK-NO-CRASH's second run of the client.
pub const SECOND_RUN: &str = "client-2";

#[when(
    "the client runs again, holds the lock, and its next renew is held an eighth of the TTL and then answered 409"
)]
async fn second_run_late_conflict(w: &mut LockWorld) -> StepResult {
    let run = w.ctx().run.clone();
    let lease = super::renew::lease(w, CLIENT).await?;
    // The first run is over. A lock it left held (it crashed rather than release) is cleared on
    // the reference server, as its lock delay would, so that the second run need not wait out
    // the lock's lifetime; against a real Nomad the second run waits for it.
    let scene = w.scene()?;
    let wait_for_lock = match &scene.server {
        Some(server) => {
            let ns = scene.namespace.clone().unwrap_or_else(|| "default".into());
            server.force_release(&ns, &run.config.path);
            Duration::ZERO
        }
        None => lease.ttl * 2 + lease.delay,
    };
    let r = w
        .scene_mut()?
        .start_client(&run.config, SECOND_RUN)
        .await
        .map(|_| ());
    r.map_err(|e| w.ctx().harness_error(e))?;
    let within = w.lock_profile().start_within + wait_for_lock;
    if w.scene()?
        .listener
        .wait_started(SECOND_RUN, within)
        .await
        .is_none()
    {
        let msg = format!(
            "the client, started again once its first run had ended and the lock was free, did not start its protected process within {}",
            fmt(within)
        );
        return Err(w.ctx().blocked(
            super::ROOT,
            w.fail(
                "the client acquires the lock and starts the protected process",
                &msg,
                &[],
            ),
        ));
    }
    let met = super::renew::late_conflict(w, SECOND_RUN).await?;
    w.second_run_met_conflict = Some(met);
    // How it ends: by itself, or stopped by Nomad as a task is.
    let stop_within = w.lock_profile().stop_within * 2;
    let kill = w.config().kill_timeout;
    let Some(client) = w.scene()?.client(SECOND_RUN) else {
        return Err(w
            .ctx()
            .harness_error("the second run of the client is gone"));
    };
    if client.wait_exit(stop_within).await.is_none() {
        let _ = client.signal(Signal::SIGTERM);
        if client.wait_exit(kill).await.is_none() {
            client.kill();
            client.wait_exit(Duration::from_secs(5)).await;
        }
    }
    Ok(())
}

/// Signals whose default action dumps core: a process that dies of one crashed (SIGTERM,
/// SIGINT and SIGKILL are how Nomad stops a task, and are no crash).
fn crash_signal(signal: i32) -> bool {
    [
        Signal::SIGSEGV,
        Signal::SIGABRT,
        Signal::SIGBUS,
        Signal::SIGILL,
        Signal::SIGFPE,
        Signal::SIGTRAP,
        Signal::SIGSYS,
        Signal::SIGQUIT,
    ]
    .iter()
    .any(|s| *s as i32 == signal)
}

/// Whether a client run crashed: a crash report in what it printed, or death by a signal that
/// dumps core.
pub fn crashed(client: &crate::plugins::lock::RunningClient) -> bool {
    let stderr: Vec<String> = client
        .tasks()
        .iter()
        .map(|t| t.stderr.text.clone())
        .collect();
    crate::crash::report(&stderr.join("\n")).is_some()
        || matches!(
            client.status(),
            Some(nomad_conform_reports::model::ExitStatus::Signaled { signal }) if crash_signal(signal)
        )
}

#[then("no run of the client crashed")]
async fn no_crash(w: &mut LockWorld) -> StepResult {
    let scene = w.scene()?;
    let runs: Vec<(&str, &str)> = vec![
        (CLIENT, "the first run, stopped by Nomad with SIGTERM"),
        (SECOND_RUN, "the second run, after a late renew conflict"),
    ];
    let mut seen = Vec::new();
    let mut any_crash = false;
    for (label, what) in &runs {
        let Some(c) = scene.client(label) else {
            continue;
        };
        let crash = crashed(c);
        any_crash |= crash;
        seen.push(format!(
            "{what} ({label}) {}{}",
            match c.status() {
                Some(s) => format!("ended with {s}"),
                None => "did not end".into(),
            },
            if crash { ", crashing" } else { "" }
        ));
    }
    let r = if any_crash {
        // The crash itself is added by fail().
        Err(w.fail(
            "the client ends with an error status of its own (\"On conflict: exit the process with error code\"), whether Nomad stops it or it meets a late renew conflict, never by crashing",
            &seen.join("; "),
            &[],
        ))
    } else if w.second_run_met_conflict == Some(false) {
        Err(w.ctx().skip(format!(
            "{}; {}",
            super::renew::GAVE_UP_ON_LATE_409,
            seen.join("; ")
        )))
    } else {
        w.ctx().note(seen.join("; "));
        Ok(())
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
    let alive_at_kill = w.alive_at_kill.as_deref();
    let mut problem = None;
    for p in &probes {
        let end = p.end;
        if outlived_kill_timeout(p, at, kill, alive_at_kill) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::lock::ProbeInterval;

    fn probe(pid: u32, t0: Instant, end_ms: Option<u64>, killed: bool) -> ProbeInterval {
        ProbeInterval {
            label: CLIENT.into(),
            pid,
            start: t0,
            end: end_ms.map(|m| t0 + Duration::from_millis(m)),
            exit: if killed { None } else { Some(143) },
            killed,
            beats: 1,
            max_gap: None,
        }
    }

    #[test]
    fn a_probe_its_client_killed_in_time_did_not_outlive_the_kill_timeout() {
        let t0 = Instant::now();
        let kill = Duration::from_secs(1);
        // Killed by the client 40 ms after the signal; the harness's SIGKILL came later and
        // found it gone.
        let p = probe(7, t0, Some(40), true);
        assert!(!outlived_kill_timeout(&p, t0, kill, Some(&[])));
        assert!(!outlived_kill_timeout(&p, t0, kill, None));
        // Alive when the harness sent Nomad's SIGKILL: the kill timeout ended it, whenever the
        // listener learnt of its end.
        let q = probe(8, t0, Some(990), true);
        assert!(outlived_kill_timeout(&q, t0, kill, Some(&[8])));
        // Still running, or ended past the kill timeout.
        assert!(outlived_kill_timeout(
            &probe(9, t0, None, false),
            t0,
            kill,
            None
        ));
        assert!(outlived_kill_timeout(
            &probe(9, t0, Some(1200), false),
            t0,
            kill,
            None
        ));
    }
}
