//! The singleton invariant: several clients against one server under faults (a seeded random
//! campaign with one outage longer than a lock's lifetime, or a server restart); from the
//! recorded history alone, no two protected processes overlap and none runs while its client
//! holds no lock as the server saw it. Also the timing advice of the guide.

use std::time::{Duration, Instant};

use cucumber::{then, when};
use nix::sys::signal::Signal;

use super::acquire::{CLIENT, wait_running};
use super::renew::lease;
use super::{LockWorld, StepResult, fmt};
use crate::plugins::lock::checker::client_timing;
use crate::plugins::lock::timeline::{ClientPartitions, Timeline};
use crate::plugins::lock::{
    Campaign, FaultRates, MeasuredTiming, Operation, PartitionMode, checker, timing_advice,
    violations,
};

/// How soon the harness restarts a client that exited, as Nomad's restart policy would (its
/// default delay is 15 s; shorter here so that a short campaign sees many hand-overs).
const RESTART_DELAY: Duration = Duration::from_millis(500);

fn label(i: usize) -> String {
    format!("client-{}", i + 1)
}

/// Keeps `n` clients running until `until`, restarting any that exits.
async fn keep_running(w: &mut LockWorld, n: usize, until: Instant) -> StepResult {
    let run = w.ctx().run.clone();
    let mut exited_at: Vec<Option<Instant>> = vec![None; n];
    while Instant::now() < until {
        for (i, slot) in exited_at.iter_mut().enumerate() {
            let l = label(i);
            let scene = w.scene_mut()?;
            let running = scene
                .clients
                .iter()
                .any(|c| c.label() == l && !c.finished());
            if running {
                continue;
            }
            match slot {
                None => *slot = Some(Instant::now()),
                Some(at) if at.elapsed() >= RESTART_DELAY => {
                    *slot = None;
                    let r = scene.start_client(&run.config, &l).await.map(|_| ());
                    r.map_err(|e| w.ctx().harness_error(e))?;
                }
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Stops every client as Nomad stops a task, all at once.
async fn stop_all(w: &LockWorld) -> StepResult {
    let kill = w.config().kill_timeout;
    let scene = w.scene()?;
    for c in &scene.clients {
        let _ = c.signal(Signal::SIGTERM);
    }
    for c in &scene.clients {
        if c.wait_exit(kill).await.is_none() {
            c.kill();
            c.wait_exit(Duration::from_secs(5)).await;
        }
    }
    Ok(())
}

#[when(
    "the clients run under a seeded fault campaign with an outage longer than a lock's lifetime"
)]
async fn campaign(w: &mut LockWorld) -> StepResult {
    let run = w.ctx().run.clone();
    let n = run.config.clients;
    let p = &run.profile.lock;
    let seed = w.ctx().seed;
    for i in 0..n {
        let r = w
            .scene_mut()?
            .start_client(&run.config, &label(i))
            .await
            .map(|_| ());
        r.map_err(|e| w.ctx().harness_error(e))?;
    }
    // The first holder tells the TTL and delay the clients ask for.
    wait_running_any(w, n).await?;
    let l = lease_of_any(w)?;
    let start = Instant::now();
    let outage_at = start + p.campaign / 4;
    let outage = l.ttl * 2 + l.delay + l.ttl;
    let rates = FaultRates {
        ops: Operation::LOCK.to_vec(),
        latency: 0.2,
        max_latency: l.ttl / 5,
        error: 0.1,
        statuses: vec![500, 502, 503, 429],
        reset: 0.05,
        partitions_per_minute: 6.0,
        partition_min: l.ttl / 4,
        partition_max: l.ttl * 2,
        partition_modes: vec![PartitionMode::Refuse, PartitionMode::Hang],
    };
    let campaign = Campaign {
        seed,
        duration: p.campaign,
        rates,
    };
    let task_api = run.config.task_api;
    for i in 0..n {
        let proxy = w.scene_mut()?.proxy(&label(i), task_api).await?;
        if let Err(e) = proxy.start_campaign(campaign.clone()) {
            return Err(w.ctx().harness_error(e.to_string()));
        }
        proxy.partition_window(PartitionMode::Refuse, outage_at, outage_at + outage);
    }
    keep_running(w, n, start + p.campaign).await?;
    for proxy in w.scene()?.proxies.values() {
        proxy.stop_campaign();
        proxy.heal();
    }
    w.fault_at = Some(outage_at);
    stop_all(w).await
}

async fn wait_running_any(w: &LockWorld, n: usize) -> StepResult {
    let within = w.lock_profile().start_within;
    let labels: Vec<String> = (0..n).map(label).collect();
    let found = w
        .scene()?
        .listener
        .wait_for(within, |v| v.iter().any(|p| labels.contains(&p.label)))
        .await;
    match found {
        Some(_) => Ok(()),
        None => Err(w.ctx().blocked(
            super::ROOT,
            w.fail(
                "with the lock free, one of the clients acquires it and starts its protected process",
                &format!("no protected process within {}", fmt(within)),
                &[],
            ),
        )),
    }
}

/// The TTL and delay the first holder got; the server's defaults if none got a lock.
fn lease_of_any(w: &LockWorld) -> Result<super::renew::Lease, String> {
    let ex = w.scene()?.exchanges();
    let server = &w.config().server;
    let acq = ex
        .iter()
        .find(|e| e.operation == Operation::Acquire && e.succeeded());
    Ok(super::renew::Lease {
        ttl: acq
            .and_then(super::granted_ttl)
            .unwrap_or_else(|| server.ttl_default()),
        delay: acq
            .and_then(super::granted_delay)
            .unwrap_or_else(|| server.delay_default()),
    })
}

#[when("two clients run and the first holds the lock")]
async fn two_clients(w: &mut LockWorld) -> StepResult {
    let run = w.ctx().run.clone();
    let r = w
        .scene_mut()?
        .start_client(&run.config, CLIENT)
        .await
        .map(|_| ());
    r.map_err(|e| w.ctx().harness_error(e))?;
    wait_running(w, CLIENT).await?;
    let r = w
        .scene_mut()?
        .start_client(&run.config, &label(1))
        .await
        .map(|_| ());
    r.map_err(|e| w.ctx().harness_error(e))?;
    Ok(())
}

#[when("the server restarts, losing its lock timers, and is down for a TTL")]
async fn restart(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let server = w
        .scene()?
        .server
        .clone()
        .ok_or_else(|| w.ctx().harness_error("no reference server to restart"))?;
    w.fault_at = Some(Instant::now());
    server.restart_with_downtime(l.ttl).await.map_err(|e| {
        w.ctx()
            .harness_error(format!("failed to restart the server: {e}"))
    })?;
    let until = Instant::now() + w.lock_profile().hold_for;
    keep_running(w, 2, until).await?;
    stop_all(w).await
}

#[then("no two protected processes overlapped and none ran without its client holding the lock")]
async fn invariant(w: &mut LockWorld) -> StepResult {
    let p = w.lock_profile().clone();
    let reference = w.config().server.is_reference();
    let seed = w.ctx().seed;
    let scene = w.scene()?;
    let until = Instant::now();
    let probes = scene.probes();
    let holds = scene.holds();
    let exchanges = scene.exchanges();
    let found = if reference {
        violations(
            &probes,
            &holds,
            p.overlap_tolerance,
            p.lapse_tolerance,
            scene.t0,
            until,
        )
    } else {
        // Against a real Nomad the server's history is not visible: overlaps only.
        checker::overlaps(&probes, p.overlap_tolerance, scene.t0, until)
    };
    let r = if found.is_empty() {
        Ok(())
    } else {
        let partitions: Vec<ClientPartitions> = scene
            .proxies
            .iter()
            .map(|(l, px)| ClientPartitions {
                client: l.clone(),
                windows: px.partitions(),
            })
            .collect();
        let svg = Timeline {
            t0: scene.t0,
            until,
            clients: scene.proxies.keys().cloned().collect(),
            holds: &holds,
            probes: &probes,
            exchanges: &exchanges,
            partitions: &partitions,
            violations: &found,
        }
        .render();
        attach_timeline(w, svg);
        let first = &found[0];
        let schedule: Vec<String> = partitions
            .iter()
            .flat_map(|c| {
                c.windows.iter().map(move |win| {
                    format!(
                        "{} unreachable ({}) {} ms .. {}",
                        c.client,
                        win.mode.as_str(),
                        checker::offset_ms(scene.t0, win.start),
                        win.end
                            .map(|e| format!("{} ms", checker::offset_ms(scene.t0, e)))
                            .unwrap_or_else(|| "end".into())
                    )
                })
            })
            .collect();
        Err(w.fail(
            "at most one protected process runs at any time, and only while its client holds the lock as the server saw it",
            &format!(
                "{} violation(s); the first: {} ms .. {} ms ({} ms), {}: {}\nfault schedule (seed {seed}): {}",
                found.len(),
                first.window.start_ms,
                first.window.end_ms,
                first.window.length_ms(),
                first.clients.join(" and "),
                first.detail,
                if schedule.is_empty() { "none".into() } else { schedule.join("; ") }
            ),
            &[],
        ))
    };
    w.record_scene();
    r
}

/// The timeline goes with the case (the HTML report draws it).
fn attach_timeline(w: &LockWorld, svg: String) {
    w.ctx().attach(
        "timeline: lock holders, protected processes, requests and faults",
        nomad_conform_reports::model::MEDIA_SVG,
        svg,
    );
}

#[then("the timing advice shows no window in which two copies could run")]
async fn advice(w: &mut LockWorld) -> StepResult {
    let l = lease(w, CLIENT).await?;
    let stop_on_client_after = w.config().stop_on_client_after.unwrap_or_default();
    let scene = w.scene()?;
    let ex = scene.exchanges();
    let holds = scene.holds();
    let probes = scene.probes();
    let run = scene.client(CLIENT).map(|c| c.run());
    let timing = client_timing(CLIENT, &ex, &holds, &probes, run.as_ref());
    let measured = MeasuredTiming::from_clients(&[timing]);
    let a = timing_advice(&measured, l.ttl, l.delay, stop_on_client_after);
    {
        let mut st = crate::recorder::lock(&w.ctx().case);
        st.notes
            .extend(a.explanation.iter().map(|l| format!("timing: {l}")));
    }
    let r = if a.overlap_bounded && a.worst_overlap.is_zero() {
        Ok(())
    } else {
        Err(w.fail(
            "with the measured renew period and stop time, the TTL and lock delay the client asks for and the job's stop_on_client_after, no window exists in which two copies could run after a node failure",
            &format!(
                "{}\n{}",
                if a.overlap_bounded {
                    format!("worst overlap {}", fmt(a.worst_overlap))
                } else {
                    "a protected process ran on after its lock was lost: no bound holds".to_string()
                },
                a.explanation.join("\n")
            ),
            &[],
        ))
    };
    w.record_scene();
    r
}
