//! The singleton invariant: several clients against one server under faults (a seeded random
//! campaign with one outage longer than a lock's lifetime, or a server restart); from the
//! recorded history alone, no two protected processes overlap and none runs while its client
//! holds no lock as the server saw it. Also the timing advice of the guide.

use std::time::{Duration, Instant};

use cucumber::{then, when};
use nix::sys::signal::Signal;

use super::acquire::{CLIENT, wait_running};
use super::checker::{self, MeasuredTiming, client_timing, timing_advice, violations};
use super::renew::lease;
use super::timeline::{ClientPartitions, Timeline};
use super::{LockWorld, StepResult, fmt};
use crate::plugins::lock::{Campaign, Fault, FaultRates, Operation, PartitionMode};

use super::acquire::RESTART_DELAY;

fn label(i: usize) -> String {
    format!("client-{}", i + 1)
}

/// The faults every campaign applies, whatever its seed: each failure mode the campaign exists
/// to catch is exercised on every run. All but the outage hit the client that holds the lock
/// at the time (the one whose protected process runs), and a fault that needs a holder waits
/// for one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheduled {
    /// Its next renew's connection is reset.
    Reset,
    /// Its next three renews are answered 503.
    Burst5xx,
    /// Its next renew is answered 409 an eighth of a TTL late, as a renew delivered after the
    /// lock passed on is answered: the client must stop. (Answered again to a later renew if
    /// the client gave up on that one before the answer came.) On the reference server the
    /// lock is then cleared, as the 409 said it had passed on, so that another client can take
    /// it at once.
    LateConflict,
    /// An outage longer than a lock's lifetime: for 2 × TTL + lock delay + TTL the holder's
    /// requests hang (the connection open, no answer) and every other client is refused; then
    /// the holder's held requests are delivered. Only a client that bounds its requests, and
    /// stops its protected process when it cannot renew, stops in time.
    Outage,
}

impl Scheduled {
    fn describe(self) -> &'static str {
        match self {
            Scheduled::Reset => "a renew's connection reset",
            Scheduled::Burst5xx => "three renews answered 503",
            Scheduled::LateConflict => "a renew conflict answered an eighth of a TTL late (409)",
            Scheduled::Outage => {
                "an outage longer than a lock's lifetime (2 × TTL + lock delay + TTL): the holder's requests held, then delivered, every other client refused"
            }
        }
    }
}

/// A scheduled fault and when it took effect (on whom).
#[derive(Clone, Debug)]
pub struct Applied {
    pub at: Instant,
    pub fault: &'static str,
    pub target: String,
}

/// The scheduled faults in order, each with the least time after the previous one took effect
/// (after the campaign's start, for the first): long enough for the previous one to have
/// played out on a client that behaves, from the clients' TTL and lock delay. `freed`: the
/// harness clears the lock after the late conflict (the reference server), so the next holder
/// need not wait the lock's lifetime.
fn schedule(ttl: Duration, delay: Duration, freed: bool) -> Vec<(Duration, Scheduled)> {
    let lapse = ttl * 2 + delay;
    vec![
        // The first holder's next renew, within a TTL.
        (Duration::ZERO, Scheduled::Reset),
        // The renews after the reset's retry.
        (ttl, Scheduled::Burst5xx),
        // Once the burst's three renews (and their retries) are over.
        (ttl, Scheduled::LateConflict),
        // The conflict's renew comes within a TTL; then the lock is cleared at once, or lapses
        // (2 × TTL + lock delay after that renew) against a real Nomad, and the outage waits
        // for the next holder.
        (if freed { ttl } else { ttl + lapse }, Scheduled::Outage),
    ]
}

/// How long after it took effect a scheduled fault has played out: its random faults are
/// paused on the clients it hits for that long, so that the seed's partitions and resets never
/// cut it short (a random partition closing the connection of the late conflict's renew, say);
/// the campaign lasts at least that long after its last scheduled fault.
fn plays_out(fault: Scheduled, ttl: Duration, delay: Duration) -> Duration {
    let lapse = ttl * 2 + delay;
    match fault {
        Scheduled::Reset | Scheduled::Burst5xx | Scheduled::LateConflict => ttl * 2,
        // The outage, then a TTL for the delivered requests' answers to be acted on.
        Scheduled::Outage => lapse + ttl + ttl,
    }
}

/// The client whose protected process runs now, if any.
fn holder(w: &LockWorld, n: usize) -> Option<String> {
    let scene = w.scene().ok()?;
    (0..n)
        .map(label)
        .find(|l| scene.probes_of(l).iter().any(|p| p.end.is_none()))
}

/// Apply `fault` now; returns on whom (the clients whose random faults are paused), or None
/// when it needs a holder and there is none yet.
async fn apply(
    w: &mut LockWorld,
    fault: Scheduled,
    n: usize,
    ttl: Duration,
    delay: Duration,
) -> Result<Option<(String, Vec<String>)>, String> {
    let task_api = w.config().task_api;
    let Some(target) = holder(w, n) else {
        return Ok(None);
    };
    let bad = |e: crate::plugins::lock::proxy_faults::FaultError| e.to_string();
    if fault == Scheduled::Outage {
        let now = Instant::now();
        let end = now + ttl * 2 + delay + ttl;
        for i in 0..n {
            let l = label(i);
            let proxy = w.scene_mut()?.proxy(&l, task_api).await?;
            proxy.stop_campaign();
            let mode = if l == target {
                PartitionMode::Hang
            } else {
                PartitionMode::Refuse
            };
            proxy.partition_window(mode, now, end);
        }
        return Ok(Some((
            format!("{target} held, every other client refused"),
            (0..n).map(label).collect(),
        )));
    }
    let proxy = w.scene_mut()?.proxy(&target, task_api).await?;
    proxy.stop_campaign();
    match fault {
        Scheduled::LateConflict => {
            let f = Fault::status(409).map_err(bad)?.after(ttl / 8);
            proxy.inject_next(&[Operation::Renew], f, 1);
        }
        Scheduled::Reset => {
            proxy.inject_next(&[Operation::Renew], Fault::reset(), 1);
        }
        Scheduled::Burst5xx => {
            proxy.inject_next(&[Operation::Renew], Fault::status(503).map_err(bad)?, 3);
        }
        Scheduled::Outage => {}
    }
    Ok(Some((target.clone(), vec![target])))
}

/// The reference server clears the lock on the campaign's path, as the late conflict told its
/// holder it had passed on.
fn clear_lock(w: &LockWorld) -> Result<(), String> {
    let scene = w.scene()?;
    if let Some(server) = &scene.server {
        let ns = scene.namespace.clone().unwrap_or_else(|| "default".into());
        server.force_release(&ns, &w.config().path);
    }
    Ok(())
}

/// Keeps `n` clients running until `until` (or, with a schedule, until its last fault has
/// played out, whichever is later), restarting any that exits, and applies the scheduled
/// faults in order, each once its gap after the previous one has passed and a holder exists
/// (`cap`: when the campaign stops waiting for one).
async fn keep_running(
    w: &mut LockWorld,
    n: usize,
    mut until: Instant,
    cap: Instant,
    mut due: Vec<(Duration, Scheduled)>,
    lease: (Duration, Duration),
    random: Option<&Campaign>,
) -> StepResult {
    let run = w.ctx().run.clone();
    let task_api = run.config.task_api;
    let freed = w.scene()?.server.is_some();
    let mut exited_at: Vec<Option<Instant>> = vec![None; n];
    // Clients whose random faults are paused, until when.
    let mut paused: Vec<(Instant, String)> = Vec::new();
    // The late conflict until its client really got it: (client, since, tries).
    let mut conflict: Option<(String, Instant, u32)> = None;
    // When the previous scheduled fault took effect (the campaign's start, at first).
    let mut previous = Instant::now();
    // The client the late conflict told the lock passed on, whose acquires are answered 409
    // until another client holds it: (client, the rule, at the latest until).
    let mut barred: Option<(String, crate::plugins::lock::proxy_faults::RuleId, Instant)> = None;
    while Instant::now() < until || (!due.is_empty() && Instant::now() < cap) {
        if let Some((client, rule, latest)) = barred.clone() {
            let another = holder(w, n).is_some_and(|h| h != client);
            if another || Instant::now() >= latest {
                w.scene_mut()?
                    .proxy(&client, task_api)
                    .await?
                    .clear_rule(rule);
                barred = None;
            }
        }
        if let Some((target, since, tries)) = conflict.clone() {
            let ex = w.scene()?.exchanges();
            let conflicts: Vec<&crate::plugins::lock::Exchange> = ex
                .iter()
                .filter(|e| {
                    e.client == target
                        && e.at >= since
                        && e.operation == Operation::Renew
                        && e.fault.is_some()
                })
                .collect();
            let received = conflicts.iter().any(|e| e.status == Some(409));
            let missed = conflicts.iter().any(|e| e.status.is_none());
            if received || tries >= 5 {
                conflict = None;
                if received && freed {
                    // The lock passed on, as the 409 said: another client may take it now.
                    // The client told so is answered 409 on its acquires, as Nomad answers an
                    // acquire of a lock another holder has, until another client holds it (or
                    // two TTLs passed): otherwise which of them wins the freed lock is a race,
                    // and a client that ignored the 409 but re-acquired in time would go unseen.
                    clear_lock(w)?;
                    let proxy = w.scene_mut()?.proxy(&target, task_api).await?;
                    let refuse = Fault::status(409).map_err(|e| e.to_string())?;
                    let rule = proxy.inject_until_cleared(&[Operation::Acquire], refuse);
                    barred = Some((target.clone(), rule, Instant::now() + lease.0 * 2));
                }
            } else if missed {
                // The client gave up on that renew before the answer came: answer the next.
                let f = Fault::status(409)
                    .map_err(|e| e.to_string())?
                    .after(lease.0 / 8);
                let proxy = w.scene_mut()?.proxy(&target, task_api).await?;
                proxy.inject_next(&[Operation::Renew], f, 1);
                conflict = Some((target, Instant::now(), tries + 1));
            }
        }
        if let Some((gap, fault)) = due.first().copied()
            && conflict.is_none()
            && Instant::now() >= previous + gap
            && let Some((target, hit)) = apply(w, fault, n, lease.0, lease.1).await?
        {
            let now = Instant::now();
            let played_out = now + plays_out(fault, lease.0, lease.1);
            paused.extend(hit.into_iter().map(|l| (played_out, l)));
            if fault == Scheduled::LateConflict {
                conflict = Some((target.clone(), now, 1));
            }
            w.applied.push(Applied {
                at: now,
                fault: fault.describe(),
                target,
            });
            previous = now;
            due.remove(0);
            until = until.max(played_out);
        }
        // Random faults resume where a scheduled fault has played out (the same seed, for
        // what is left of the campaign).
        let now = Instant::now();
        let (ready, waiting): (Vec<_>, Vec<_>) = paused.into_iter().partition(|(t, _)| *t <= now);
        paused = waiting;
        if let Some(c) = random {
            for (_, l) in ready {
                if paused.iter().any(|(_, p)| *p == l) {
                    continue;
                }
                let mut rest = c.clone();
                rest.duration = cap.saturating_duration_since(now);
                let proxy = w.scene_mut()?.proxy(&l, task_api).await?;
                if let Err(e) = proxy.start_campaign(rest) {
                    return Err(w.ctx().harness_error(e.to_string()));
                }
            }
        }
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
    for (_, fault) in due {
        w.applied.push(Applied {
            at: Instant::now(),
            fault: fault.describe(),
            target: "nobody: no client held the lock when it was due".into(),
        });
    }
    Ok(())
}

/// Stops every client as Nomad stops a task, all at once.
async fn stop_all(w: &mut LockWorld) -> StepResult {
    w.stopped_at = Some(Instant::now());
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
    let freed = w.scene()?.server.is_some();
    let due = schedule(l.ttl, l.delay, freed);
    // At least the profile's (or --campaign's) time; the schedule extends it as its faults
    // take effect. A fault still waiting for a holder after the schedule's own length twice
    // over (gaps, each fault's playing out, a lock's lifetime for a holder to appear) is
    // given up, and the report says so.
    let lapse = l.ttl * 2 + l.delay;
    let needed: Duration = due
        .iter()
        .map(|(gap, f)| *gap + plays_out(*f, l.ttl, l.delay))
        .sum();
    let until = start + run.config.campaign;
    let cap = start + run.config.campaign.max((needed + lapse) * 2);
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
        duration: cap.saturating_duration_since(start),
        rates,
    };
    let task_api = run.config.task_api;
    for i in 0..n {
        let proxy = w.scene_mut()?.proxy(&label(i), task_api).await?;
        if let Err(e) = proxy.start_campaign(campaign.clone()) {
            return Err(w.ctx().harness_error(e.to_string()));
        }
    }
    keep_running(w, n, until, cap, due, (l.ttl, l.delay), Some(&campaign)).await?;
    for proxy in w.scene()?.proxies.values() {
        proxy.stop_campaign();
        proxy.heal();
    }
    w.fault_at = w.applied.first().map(|a| a.at);
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
    // Watched until a lock left unrenewed across the restart can have passed on (the restored
    // timer's 2 × TTL, the lock delay) and the other client can have taken it (a TTL more), at
    // least the profile's hold_for: a client that lost its lock in the downtime and kept its
    // protected process is seen beside the next holder.
    let until = Instant::now() + w.lock_profile().hold_for.max(l.ttl * 3 + l.delay);
    keep_running(w, 2, until, until, Vec::new(), (l.ttl, l.delay), None).await?;
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
            stopped_at: w.stopped_at,
        }
        .render();
        attach_timeline(w, svg);
        let first = &found[0];
        let t0 = scene.t0;
        let scheduled: Vec<String> = w
            .applied
            .iter()
            .map(|a| {
                format!(
                    "{} ms: {} ({})",
                    checker::offset_ms(t0, a.at),
                    a.fault,
                    a.target
                )
            })
            .collect();
        // The scheduled fault that exposed it: the last one to take effect before the
        // violation began.
        let exposed_by = w
            .applied
            .iter()
            .rfind(|a| checker::offset_ms(t0, a.at) <= first.window.start_ms)
            .map(|a| {
                format!(
                    "exposed by the scheduled fault at {} ms: {} ({})",
                    checker::offset_ms(t0, a.at),
                    a.fault,
                    a.target
                )
            })
            .unwrap_or_else(|| "before any scheduled fault took effect".into());
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
                "{} violation(s); the first: {} ms .. {} ms ({} ms), {}, {exposed_by}: {}\nscheduled faults (every campaign): {}\nrandom partitions (seed {seed}): {}",
                found.len(),
                first.window.start_ms,
                first.window.end_ms,
                first.window.length_ms(),
                first.clients.join(" and "),
                first.detail,
                if scheduled.is_empty() { "none".into() } else { scheduled.join("; ") },
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
