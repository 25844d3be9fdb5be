//! Pure functions over recorded histories: who held the lock when (as the server saw it),
//! where protected processes overlapped or ran without their client holding the lock, how a
//! client's timing measured up, and what that means for TTL, lock delay and
//! `stop_on_client_after`.
//!
//! Inputs are the reference server's lock history ([`LockEvent`]), the proxies' records
//! ([`Exchange`]: they tie lock IDs to clients, since a successful acquire's response carries
//! `Lock.ID`), the probe listener's [`ProbeInterval`]s and the clients' [`ClientRun`]s. Times
//! are monotonic [`Instant`]s; windows in results are milliseconds from a `t0` the caller
//! picks (the case's start). Intervals still open are taken to last until `until`, the end of
//! observation. Nothing here waits, reads a clock or does I/O.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::time::{Duration, Instant};

use nomad_conform_variables::{LockEvent, LockEventKind};
use serde::Serialize;

use crate::plugins::lock::client::ClientRun;
use crate::plugins::lock::exchange::Exchange;
use crate::plugins::lock::probe::ProbeInterval;
use crate::plugins::lock::proxy_faults::Operation;

/// Milliseconds from `t0` to `at` (0 for instants before `t0`).
pub fn offset_ms(t0: Instant, at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(t0).as_millis()).unwrap_or(u64::MAX)
}

fn fmt(d: Duration) -> String {
    crate::fmt_duration(d)
}

/// Lock ID → client label, from the successful acquires in the proxies' records (the
/// response's `Lock.ID`).
pub fn lock_owners(exchanges: &[Exchange]) -> BTreeMap<String, String> {
    let mut sorted: Vec<&Exchange> = exchanges.iter().collect();
    sorted.sort_by_key(|e| e.at);
    let mut owners = BTreeMap::new();
    for e in sorted {
        if e.operation == Operation::Acquire
            && e.succeeded()
            && let Some(id) = &e.lock_id
        {
            owners.entry(id.clone()).or_insert_with(|| e.client.clone());
        }
    }
    owners
}

/// How a hold ended in the server's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HoldEnd {
    /// The holder released it.
    Released,
    /// The harness cleared it (`force_release`).
    Forced,
    /// The lock delay after expiry ended and the leader cleared it (or a stale invalidation
    /// cleared a newer holder's lock).
    Invalidated,
}

/// One lock ID held on one variable, as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The client whose acquire got this lock ID (`None`: not through a proxy, e.g. the
    /// harness itself).
    pub client: Option<String>,
    pub lock_id: String,
    pub namespace: String,
    pub path: String,
    pub start: Instant,
    /// The leader's 2 × TTL timer fired: the lock is lost, though it stays in state for the
    /// lock delay (`None` again if a restarted leader rebuilt its timer).
    pub expired: Option<Instant>,
    /// It left the server's state.
    pub end: Option<Instant>,
    pub end_reason: Option<HoldEnd>,
    /// When a renew of this lock was first answered 409 (see [`with_conflicts`]).
    pub conflicted: Option<Instant>,
}

impl Hold {
    /// Until when the holder validly held it: until it left the server's state, when another
    /// holder's acquire can first succeed. The leader's 2 × TTL timer firing is not the end:
    /// the lock stays in state through the lock delay (nomad/locks.go) and Nomad answers every
    /// other acquire 409 while it does (nomad/state/state_store_variables.go, VarLockAcquire,
    /// isLocked), so a protected process still running then is not a second copy; it runs past
    /// the TTL the guide trusts, which LOCK-LAPSE-TTL judges.
    ///
    /// A renew answered 409 ends it too: Nomad answers 409 once the lock ID no longer holds the
    /// variable (nomad/variables_endpoint.go, RenewLock), and the harness answers one as a renew
    /// delivered after the lock passed on is answered, while its own server still keeps the
    /// lock; from that answer on, the client must act as if another holder has it.
    pub fn valid_until(&self) -> Option<Instant> {
        match (self.end, self.conflicted) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// When another holder's acquire can first succeed once `hold` ends, as the server saw it
/// (`None`: it has not).
pub fn free_at(hold: &Hold) -> Option<Instant> {
    hold.end
}

/// `holds` with the first renew answered 409 of each lock ID (when the answer came) from the
/// proxies' records.
pub fn with_conflicts(mut holds: Vec<Hold>, exchanges: &[Exchange]) -> Vec<Hold> {
    for h in &mut holds {
        h.conflicted = exchanges
            .iter()
            .filter(|e| {
                e.operation == Operation::Renew
                    && e.status == Some(409)
                    && e.lock_id.as_deref() == Some(h.lock_id.as_str())
                    && e.at >= h.start
            })
            .map(|e| e.at + e.duration)
            .min();
    }
    holds
}

/// Every hold in the server's history, in order of acquisition, with its client from
/// `owners` (see [`lock_owners`]).
pub fn holder_intervals(history: &[LockEvent], owners: &BTreeMap<String, String>) -> Vec<Hold> {
    let mut events: Vec<&LockEvent> = history.iter().collect();
    events.sort_by_key(|e| e.seq);
    let mut holds: Vec<Hold> = Vec::new();
    // (namespace, path, lock id) → index of the open hold.
    let mut open: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    let key = |e: &LockEvent, id: &str| (e.namespace.clone(), e.path.clone(), id.to_string());
    for e in events {
        let mut close = |id: &str, reason: HoldEnd, holds: &mut Vec<Hold>| {
            if let Some(i) = open.remove(&key(e, id))
                && let Some(h) = holds.get_mut(i)
            {
                h.end = Some(e.at);
                h.end_reason = Some(reason);
            }
        };
        match &e.kind {
            LockEventKind::Acquired { lock_id, .. } => {
                // A re-acquire with the held ID does not open a second hold.
                if let Entry::Vacant(slot) = open.entry(key(e, lock_id)) {
                    slot.insert(holds.len());
                    holds.push(Hold {
                        client: owners.get(lock_id).cloned(),
                        lock_id: lock_id.clone(),
                        namespace: e.namespace.clone(),
                        path: e.path.clone(),
                        start: e.at,
                        expired: None,
                        end: None,
                        end_reason: None,
                        conflicted: None,
                    });
                }
            }
            LockEventKind::TtlExpired { lock_id } => {
                if let Some(h) = open.get(&key(e, lock_id)).and_then(|i| holds.get_mut(*i)) {
                    h.expired.get_or_insert(e.at);
                }
            }
            LockEventKind::TimerRestored { lock_id } => {
                if let Some(h) = open.get(&key(e, lock_id)).and_then(|i| holds.get_mut(*i)) {
                    h.expired = None;
                }
            }
            LockEventKind::Released { lock_id } => close(lock_id, HoldEnd::Released, &mut holds),
            LockEventKind::ForcedRelease { lock_id } => close(lock_id, HoldEnd::Forced, &mut holds),
            LockEventKind::Invalidated {
                cleared_lock_id: Some(id),
                ..
            } => close(id, HoldEnd::Invalidated, &mut holds),
            _ => {}
        }
    }
    holds
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    /// Protected processes of two clients ran at the same time.
    Overlap,
    /// A protected process ran while its client held no lock, as the server saw it.
    RanWithoutLock,
}

/// Milliseconds from `t0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    pub start_ms: u64,
    pub end_ms: u64,
}

impl Window {
    pub fn length_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.start_ms)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    pub clients: Vec<String>,
    pub window: Window,
    pub detail: String,
}

/// Overlaps longer than `tolerance` between probes of different clients. Probes still
/// running are taken to run until `until`.
pub fn overlaps(
    probes: &[ProbeInterval],
    tolerance: Duration,
    t0: Instant,
    until: Instant,
) -> Vec<Violation> {
    let mut sorted: Vec<&ProbeInterval> = probes.iter().collect();
    sorted.sort_by_key(|p| p.start);
    let end_of = |p: &ProbeInterval| p.end.unwrap_or(until).max(p.start);
    let mut out = Vec::new();
    for (i, a) in sorted.iter().enumerate() {
        let a_end = end_of(a);
        // Two protected processes of the same client count too: a client that starts a second
        // copy beside the first (Nomad's Go LockLeaser after a late conflict) runs two.
        for b in sorted[i + 1..].iter().take_while(|b| b.start < a_end) {
            let (start, end) = (b.start, a_end.min(end_of(b)));
            let length = end.saturating_duration_since(start);
            if length > tolerance {
                let (x, y) = if a.label <= b.label { (a, b) } else { (b, a) };
                out.push(Violation {
                    kind: ViolationKind::Overlap,
                    clients: vec![x.label.clone(), y.label.clone()],
                    window: Window {
                        start_ms: offset_ms(t0, start),
                        end_ms: offset_ms(t0, end),
                    },
                    detail: format!(
                        "the protected processes of {} (pid {}) and {} (pid {}) both ran for {} \
                         (from {} to {} ms; tolerance {}){}",
                        x.label,
                        x.pid,
                        y.label,
                        y.pid,
                        fmt(length),
                        offset_ms(t0, start),
                        offset_ms(t0, end),
                        fmt(tolerance),
                        if a.end.is_none() || b.end.is_none() {
                            "; one was still running when observation ended"
                        } else {
                            ""
                        }
                    ),
                });
            }
        }
    }
    out
}

/// Stretches longer than `tolerance` in which a client's probe ran while that client held no
/// lock (between acquisition and the lock leaving the state: release, or the end of the lock
/// delay after expiry) on any variable, as the server saw it.
pub fn runs_without_lock(
    probes: &[ProbeInterval],
    holds: &[Hold],
    tolerance: Duration,
    t0: Instant,
    until: Instant,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for p in probes {
        let p_end = p.end.unwrap_or(until).max(p.start);
        let mut held: Vec<(Instant, Instant, &Hold)> = holds
            .iter()
            .filter(|h| h.client.as_deref() == Some(p.label.as_str()))
            .map(|h| (h.start, h.valid_until().unwrap_or(until).max(h.start), h))
            .collect();
        held.sort_by_key(|(s, _, _)| *s);
        // A renew answered 409 while this process ran told its client another holder has the
        // lock: from then on no later lock of the same client covers this process (under Nomad
        // the other holder keeps the lock, and a client that re-acquires at once on the
        // harness's freed lock must not look like one that stopped).
        let cut = held
            .iter()
            .filter(|(_, e, h)| h.conflicted == Some(*e) && *e > p.start && *e < p_end)
            .map(|(_, e, _)| *e)
            .min();
        let covered_until = cut.unwrap_or(p_end);
        let mut cursor = p.start;
        let mut gaps = Vec::new();
        for (s, e, _) in &held {
            if *s >= covered_until {
                break;
            }
            if *s > cursor {
                gaps.push((cursor, (*s).min(covered_until)));
            }
            cursor = cursor.max((*e).min(covered_until));
            if cursor >= covered_until {
                break;
            }
        }
        if cursor < p_end {
            gaps.push((cursor, p_end));
        }
        for (gs, ge) in gaps {
            let length = ge.saturating_duration_since(gs);
            if length <= tolerance {
                continue;
            }
            let before = held
                .iter()
                .filter(|(_, e, _)| *e <= gs)
                .max_by_key(|(_, e, _)| *e)
                .map(|(_, e, h)| {
                    let how = match (h.expired, h.end_reason) {
                        _ if h.conflicted.is_some() && h.conflicted == h.valid_until() => {
                            "was answered 409 on a renew (another holder has it)"
                        }
                        (Some(_), Some(HoldEnd::Invalidated)) => {
                            "expired and was invalidated at the end of its lock delay"
                        }
                        (_, Some(HoldEnd::Released)) => "was released",
                        (_, Some(HoldEnd::Forced)) => "was cleared by the harness",
                        (_, Some(HoldEnd::Invalidated)) => "was invalidated",
                        _ => "ended",
                    };
                    format!("; its lock {} {how} at {} ms", h.lock_id, offset_ms(t0, *e))
                })
                .unwrap_or_else(|| {
                    if held.is_empty() {
                        "; it never held the lock".to_string()
                    } else {
                        "; it had not acquired the lock yet".to_string()
                    }
                });
            out.push(Violation {
                kind: ViolationKind::RanWithoutLock,
                clients: vec![p.label.clone()],
                window: Window {
                    start_ms: offset_ms(t0, gs),
                    end_ms: offset_ms(t0, ge),
                },
                detail: format!(
                    "the protected process of {} (pid {}) ran for {} without {} holding the lock \
                     (from {} to {} ms; tolerance {}){before}",
                    p.label,
                    p.pid,
                    fmt(length),
                    p.label,
                    offset_ms(t0, gs),
                    offset_ms(t0, ge),
                    fmt(tolerance),
                ),
            });
        }
    }
    out
}

/// Both checks, ordered by window start.
pub fn violations(
    probes: &[ProbeInterval],
    holds: &[Hold],
    overlap_tolerance: Duration,
    unheld_tolerance: Duration,
    t0: Instant,
    until: Instant,
) -> Vec<Violation> {
    let mut v = overlaps(probes, overlap_tolerance, t0, until);
    v.extend(runs_without_lock(
        probes,
        holds,
        unheld_tolerance,
        t0,
        until,
    ));
    v.sort_by_key(|x| (x.window.start_ms, x.window.end_ms));
    v
}

/// Why a client lost its lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossCause {
    /// A renew was answered 409.
    RenewConflict,
    /// The leader's TTL timer fired.
    Expired,
    /// The harness cleared the lock.
    Forced,
    /// Cleared by an invalidation (a stale one, for a newer holder).
    Invalidated,
}

/// A lock lost by its client, and how long the protected process ran on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockLoss {
    pub lock_id: String,
    /// The earliest sign of the loss: server-side or a 409 renew.
    pub at: Instant,
    pub cause: LossCause,
    /// A probe of the client was running at the loss.
    pub probe_running: bool,
    /// How long after the loss that probe ended (`None`: not running, or never ended).
    pub probe_end_after: Option<Duration>,
}

/// Timing facts measured for one client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTiming {
    pub client: String,
    /// Between a successful acquire or renew and the next successful renew of the same lock.
    pub renew_intervals: Vec<Duration>,
    /// Between an acquire attempt that did not succeed and the next attempt.
    pub acquire_retry_intervals: Vec<Duration>,
    pub losses: Vec<LockLoss>,
    /// From the first of its last run of unsuccessful acquire attempts to its exit.
    pub give_up: Option<Duration>,
}

/// The timing facts of `client` (exchanges of other clients are ignored).
pub fn client_timing(
    client: &str,
    exchanges: &[Exchange],
    holds: &[Hold],
    probes: &[ProbeInterval],
    run: Option<&ClientRun>,
) -> ClientTiming {
    let mut mine: Vec<&Exchange> = exchanges.iter().filter(|e| e.client == client).collect();
    mine.sort_by_key(|e| e.at);

    let mut renew_intervals = Vec::new();
    let mut last_ok: BTreeMap<&str, Instant> = BTreeMap::new();
    for e in &mine {
        let Some(id) = e.lock_id.as_deref() else {
            continue;
        };
        if !e.succeeded() {
            continue;
        }
        match e.operation {
            Operation::Acquire => {
                last_ok.insert(id, e.at);
            }
            Operation::Renew => {
                if let Some(prev) = last_ok.insert(id, e.at) {
                    renew_intervals.push(e.at.saturating_duration_since(prev));
                }
            }
            _ => {}
        }
    }

    let acquires: Vec<&&Exchange> = mine
        .iter()
        .filter(|e| e.operation == Operation::Acquire)
        .collect();
    let acquire_retry_intervals = acquires
        .windows(2)
        .filter(|w| !w[0].succeeded())
        .map(|w| w[1].at.saturating_duration_since(w[0].at))
        .collect();

    let give_up = run.and_then(|r| r.exited).and_then(|exited| {
        let last_success = acquires.iter().rposition(|e| e.succeeded());
        let first_failing = match last_success {
            Some(i) => acquires.get(i + 1),
            None => acquires.first(),
        }?;
        Some(exited.saturating_duration_since(first_failing.at))
    });

    // The earliest sign of each lost lock.
    let mut lost: BTreeMap<String, (Instant, LossCause)> = BTreeMap::new();
    let mut note = |id: &str, at: Instant, cause: LossCause| {
        let entry = lost.entry(id.to_string()).or_insert((at, cause));
        if at < entry.0 {
            *entry = (at, cause);
        }
    };
    for h in holds.iter().filter(|h| h.client.as_deref() == Some(client)) {
        if let Some(x) = h.expired {
            note(&h.lock_id, x, LossCause::Expired);
        }
        match (h.end, h.end_reason) {
            (Some(at), Some(HoldEnd::Forced)) => note(&h.lock_id, at, LossCause::Forced),
            (Some(at), Some(HoldEnd::Invalidated)) => note(&h.lock_id, at, LossCause::Invalidated),
            _ => {}
        }
    }
    for e in &mine {
        if e.operation == Operation::Renew
            && e.status == Some(409)
            && let Some(id) = &e.lock_id
        {
            note(id, e.at, LossCause::RenewConflict);
        }
    }
    let mut losses: Vec<LockLoss> = lost
        .into_iter()
        .map(|(lock_id, (at, cause))| {
            let probe = probes
                .iter()
                .filter(|p| p.label == client && p.running_at(at))
                .min_by_key(|p| p.start);
            LockLoss {
                lock_id,
                at,
                cause,
                probe_running: probe.is_some(),
                probe_end_after: probe
                    .and_then(|p| p.end)
                    .map(|e| e.saturating_duration_since(at)),
            }
        })
        .collect();
    losses.sort_by_key(|l| l.at);

    ClientTiming {
        client: client.to_string(),
        renew_intervals,
        acquire_retry_intervals,
        losses,
        give_up,
    }
}

/// The worst of the clients' measured timing facts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeasuredTiming {
    pub renew_interval_max: Option<Duration>,
    pub renewals: usize,
    /// Longest time from a lost lock to the end of a protected process running then.
    pub stop_after_loss_max: Option<Duration>,
    pub losses_measured: usize,
    /// Some protected process running at a loss had not ended when observation stopped.
    pub ran_on_after_loss: bool,
    pub give_up_min: Option<Duration>,
    pub acquire_retry_max: Option<Duration>,
}

impl MeasuredTiming {
    pub fn from_clients(clients: &[ClientTiming]) -> MeasuredTiming {
        let mut m = MeasuredTiming::default();
        for c in clients {
            m.renewals += c.renew_intervals.len();
            m.renew_interval_max = c
                .renew_intervals
                .iter()
                .copied()
                .chain(m.renew_interval_max)
                .max();
            m.acquire_retry_max = c
                .acquire_retry_intervals
                .iter()
                .copied()
                .chain(m.acquire_retry_max)
                .max();
            m.give_up_min = c.give_up.into_iter().chain(m.give_up_min).min();
            for l in c.losses.iter().filter(|l| l.probe_running) {
                match l.probe_end_after {
                    Some(d) => {
                        m.losses_measured += 1;
                        m.stop_after_loss_max = Some(m.stop_after_loss_max.map_or(d, |x| x.max(d)));
                    }
                    None => m.ran_on_after_loss = true,
                }
            }
        }
        m
    }
}

/// What the numbers allow, with the reasoning spelled out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Advice {
    /// How long the old protected process may still run after a replacement could have taken
    /// the lock, after a node failure.
    pub worst_overlap: Duration,
    /// False when a protected process was seen running on after its lock was lost without
    /// ending: then no overlap bound holds.
    pub overlap_bounded: bool,
    /// How long nobody may hold the lock after a node failure.
    pub worst_downtime_after_node_failure: Duration,
    pub explanation: Vec<String>,
}

/// The singleton guide's reasoning applied to the numbers. After a node failure the holder
/// cannot renew; the server keeps the lock for 2 × TTL after the last renewal (the leader's
/// timer) and then for the lock delay; the disconnected client stops the old allocation
/// `stop_on_client_after` after losing the servers; the replacement takes the lock at its
/// next acquire attempt after it is free.
pub fn timing_advice(
    measured: &MeasuredTiming,
    ttl: Duration,
    lock_delay: Duration,
    stop_on_client_after: Duration,
) -> Advice {
    let mut lines = Vec::new();
    let free = when_the_lock_is_free(measured, ttl, lock_delay, &mut lines);
    let (reaction, old_gone) =
        when_the_old_allocation_is_gone(measured, stop_on_client_after, &mut lines);
    let worst_overlap = old_gone.saturating_sub(free.earliest);
    if worst_overlap.is_zero() {
        lines.push(format!(
            "Worst overlap: none — the old allocation is gone {} before the lock can first be \
             free ({}).",
            fmt(free.earliest.saturating_sub(old_gone)),
            fmt(free.earliest)
        ));
    } else {
        lines.push(format!(
            "Worst overlap: {} — the old process may still run that long after a replacement \
             could take the lock at {}. Lower stop_on_client_after below {} or raise the TTL or \
             lock delay.",
            fmt(worst_overlap),
            fmt(free.earliest),
            fmt(free.earliest.saturating_sub(reaction))
        ));
    }
    let overlap_bounded = !measured.ran_on_after_loss;
    if !overlap_bounded {
        lines.push(
            "Warning: a protected process kept running after its client lost the lock and had \
             not ended when observation stopped; no overlap bound holds for such a client."
                .to_string(),
        );
    }
    let wait = replacement_retry(measured, ttl, &mut lines);
    let downtime = free.latest + wait;
    lines.push(format!(
        "Worst downtime after a node failure: {} = {} until the lock is free + {} until the \
         replacement's next attempt. Not counted: the time the servers take to mark the node \
         down and place the replacement, and the replacement's start-up.",
        fmt(downtime),
        fmt(free.latest),
        fmt(wait)
    ));
    lines.push(give_up_verdict(measured.give_up_min, downtime));
    Advice {
        worst_overlap,
        overlap_bounded,
        worst_downtime_after_node_failure: downtime,
        explanation: lines,
    }
}

/// When the lock of a failed node's holder is free again, measured from the failure.
struct Free {
    /// The failure came just before a renewal was due.
    earliest: Duration,
    /// It came right after a renewal: 2 × TTL and the lock delay.
    latest: Duration,
}

/// The server's side: 2 × TTL after the last renewal, then the lock delay; renewals measured
/// (or assumed at TTL/2) decide how much of that the failure can cut short.
fn when_the_lock_is_free(
    measured: &MeasuredTiming,
    ttl: Duration,
    lock_delay: Duration,
    lines: &mut Vec<String>,
) -> Free {
    let held = ttl * 2 + lock_delay;
    lines.push(format!(
        "After the holder's last renewal the server keeps the lock for 2 × TTL ({}) and then \
         the lock delay ({}): {} in all [server rule: the leader's timer is 2 × TTL, then the \
         delay runs before the lock is cleared].",
        fmt(ttl * 2),
        fmt(lock_delay),
        fmt(held)
    ));
    let renew = match measured.renew_interval_max {
        Some(r) => {
            lines.push(format!(
                "Renewals came at most {} apart [measured over {} renewals].",
                fmt(r),
                measured.renewals
            ));
            r
        }
        None => {
            let r = ttl / 2;
            lines.push(format!(
                "Renewals are taken to come every TTL/2 = {} [assumed, as the guide advises: no \
                 renewal was measured].",
                fmt(r)
            ));
            r
        }
    };
    if renew >= ttl * 2 {
        lines.push(format!(
            "Warning: renewals {} apart let the server's 2 × TTL timer ({}) fire while the \
             holder runs: the lock can be lost without any failure.",
            fmt(renew),
            fmt(ttl * 2)
        ));
    }
    let earliest = held.saturating_sub(renew.min(ttl * 2));
    lines.push(format!(
        "So after a node failure the lock is free between {} (the failure came just before a \
         renewal was due: {} − {}) and {} (it came right after a renewal).",
        fmt(earliest),
        fmt(held),
        fmt(renew.min(ttl * 2)),
        fmt(held)
    ));
    Free {
        earliest,
        latest: held,
    }
}

/// The node's side: the disconnected client stops the old allocation `stop_on_client_after`
/// after the failure, and its protected process takes the measured reaction time to end.
/// Returns the reaction time and when the old allocation is gone.
fn when_the_old_allocation_is_gone(
    measured: &MeasuredTiming,
    stop_on_client_after: Duration,
    lines: &mut Vec<String>,
) -> (Duration, Duration) {
    let reaction = match measured.stop_after_loss_max {
        Some(k) => {
            lines.push(format!(
                "A protected process ended at most {} after its client lost the lock [measured \
                 over {} losses].",
                fmt(k),
                measured.losses_measured
            ));
            k
        }
        None => {
            lines.push(
                "How long a protected process takes to end once stopped is taken as 0 [assumed: \
                 no lost lock with a running process was measured]."
                    .to_string(),
            );
            Duration::ZERO
        }
    };
    let old_gone = stop_on_client_after + reaction;
    lines.push(format!(
        "The old allocation is gone {} after the failure: stop_on_client_after ({}) [given; \
         counted from the failure, as if its client noticed the lost servers at once] plus {}. \
         A lock client that stops its process itself once renewals have failed for a TTL, as \
         the guide asks, ends it sooner; this bound does not count on that.",
        fmt(old_gone),
        fmt(stop_on_client_after),
        fmt(reaction)
    ));
    (reaction, old_gone)
}

/// How long a waiting replacement takes to try again: measured, or the Go lock helper's
/// default of 1.1 × TTL.
fn replacement_retry(
    measured: &MeasuredTiming,
    ttl: Duration,
    lines: &mut Vec<String>,
) -> Duration {
    match measured.acquire_retry_max {
        Some(w) => {
            lines.push(format!(
                "A client waiting for the lock tried again at most {} apart [measured].",
                fmt(w)
            ));
            w
        }
        None => {
            let w = ttl.mul_f64(1.1);
            lines.push(format!(
                "A client waiting for the lock is taken to try again every 1.1 × TTL = {} \
                 [assumed: the Go lock helper's default wait; no retry was measured].",
                fmt(w)
            ));
            w
        }
    }
}

/// Whether the measured give-up time outlasts a failed node's lock.
fn give_up_verdict(give_up_min: Option<Duration>, downtime: Duration) -> String {
    match give_up_min {
        Some(g) if g < downtime => format!(
            "Warning: a client gave up {} after its first acquire attempt, before the lock of a \
             failed node can be free ({}): a replacement placed right after a failure fails \
             and has to be rescheduled. Let it try for longer than {}.",
            fmt(g),
            fmt(downtime),
            fmt(downtime)
        ),
        Some(g) => format!(
            "A client gave up after {} [measured]: long enough to outlast a failed node's lock \
             ({}).",
            fmt(g),
            fmt(downtime)
        ),
        None => "No give-up time was measured: make sure the client keeps trying for longer than \
             the worst downtime above."
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::lock::exchange::tests::exchange;
    use std::time::SystemTime;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ev(seq: u64, t0: Instant, at: u64, kind: LockEventKind) -> LockEvent {
        LockEvent {
            seq,
            at: t0 + ms(at),
            wall: SystemTime::now(),
            namespace: "default".into(),
            path: "app/lock".into(),
            kind,
        }
    }

    fn acquired(id: &str) -> LockEventKind {
        LockEventKind::Acquired {
            lock_id: id.into(),
            ttl: Duration::from_secs(1),
            lock_delay: Duration::from_secs(1),
            reacquired: false,
            timer_started: true,
        }
    }

    fn probe(label: &str, t0: Instant, start: u64, end: Option<u64>) -> ProbeInterval {
        ProbeInterval {
            label: label.into(),
            pid: 100,
            start: t0 + ms(start),
            end: end.map(|e| t0 + ms(e)),
            exit: end.map(|_| 0),
            killed: false,
            beats: 0,
            max_gap: None,
        }
    }

    fn owners(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn owners_come_from_successful_acquires() {
        let t0 = Instant::now();
        let mut ok = exchange("a", Operation::Acquire, t0, 200);
        ok.lock_id = Some("L1".into());
        let mut conflict = exchange("b", Operation::Acquire, t0 + ms(5), 409);
        conflict.lock_id = Some("L9".into());
        let mut renew = exchange("c", Operation::Renew, t0 + ms(6), 200);
        renew.lock_id = Some("L2".into());
        assert_eq!(lock_owners(&[ok, conflict, renew]), owners(&[("L1", "a")]));
    }

    #[test]
    fn holds_follow_the_server_history() {
        let t0 = Instant::now();
        let history = vec![
            ev(0, t0, 0, acquired("L1")),
            ev(1, t0, 50, acquired("L1")), // a re-acquire does not open a second hold
            ev(
                2,
                t0,
                100,
                LockEventKind::Released {
                    lock_id: "L1".into(),
                },
            ),
            ev(3, t0, 200, acquired("L2")),
            ev(
                4,
                t0,
                400,
                LockEventKind::TtlExpired {
                    lock_id: "L2".into(),
                },
            ),
            ev(
                5,
                t0,
                600,
                LockEventKind::Invalidated {
                    expired_lock_id: "L2".into(),
                    cleared_lock_id: Some("L2".into()),
                },
            ),
            ev(6, t0, 700, acquired("L3")),
            ev(
                7,
                t0,
                800,
                LockEventKind::ForcedRelease {
                    lock_id: "L3".into(),
                },
            ),
            ev(8, t0, 900, acquired("L4")),
        ];
        let holds = holder_intervals(&history, &owners(&[("L1", "a"), ("L2", "b"), ("L3", "a")]));
        type Row<'a> = (
            &'a str,
            Option<&'a str>,
            u64,
            Option<u64>,
            Option<u64>,
            Option<HoldEnd>,
        );
        let table: Vec<Row> = holds
            .iter()
            .map(|h| {
                (
                    h.lock_id.as_str(),
                    h.client.as_deref(),
                    offset_ms(t0, h.start),
                    h.expired.map(|x| offset_ms(t0, x)),
                    h.end.map(|x| offset_ms(t0, x)),
                    h.end_reason,
                )
            })
            .collect();
        assert_eq!(
            table,
            vec![
                ("L1", Some("a"), 0, None, Some(100), Some(HoldEnd::Released)),
                (
                    "L2",
                    Some("b"),
                    200,
                    Some(400),
                    Some(600),
                    Some(HoldEnd::Invalidated)
                ),
                ("L3", Some("a"), 700, None, Some(800), Some(HoldEnd::Forced)),
                ("L4", None, 900, None, None, None),
            ]
        );
        // Expired at 400 ms, but kept through the lock delay until 600 ms.
        assert_eq!(holds[1].valid_until(), Some(t0 + ms(600)));
    }

    #[test]
    fn a_stale_invalidation_ends_the_newer_holder() {
        let t0 = Instant::now();
        let history = vec![
            ev(0, t0, 0, acquired("old")),
            ev(
                1,
                t0,
                100,
                LockEventKind::TtlExpired {
                    lock_id: "old".into(),
                },
            ),
            ev(
                2,
                t0,
                150,
                LockEventKind::Released {
                    lock_id: "old".into(),
                },
            ),
            ev(3, t0, 160, acquired("new")),
            ev(
                4,
                t0,
                300,
                LockEventKind::Invalidated {
                    expired_lock_id: "old".into(),
                    cleared_lock_id: Some("new".into()),
                },
            ),
        ];
        let holds = holder_intervals(&history, &BTreeMap::new());
        assert_eq!(holds[1].end, Some(t0 + ms(300)));
        assert_eq!(holds[1].end_reason, Some(HoldEnd::Invalidated));
    }

    #[test]
    fn overlaps_at_the_tolerance_edges() {
        let t0 = Instant::now();
        let until = t0 + ms(10_000);
        let tol = ms(50);
        // (a, b, expected number of violations)
        let table: Vec<(ProbeInterval, ProbeInterval, usize)> = vec![
            // Disjoint.
            (
                probe("a", t0, 0, Some(100)),
                probe("b", t0, 200, Some(300)),
                0,
            ),
            // Touching.
            (
                probe("a", t0, 0, Some(100)),
                probe("b", t0, 100, Some(300)),
                0,
            ),
            // Exactly the tolerance: allowed.
            (
                probe("a", t0, 0, Some(150)),
                probe("b", t0, 100, Some(300)),
                0,
            ),
            // One millisecond more: a violation.
            (
                probe("a", t0, 0, Some(151)),
                probe("b", t0, 100, Some(300)),
                1,
            ),
            // One inside the other.
            (
                probe("a", t0, 0, Some(1000)),
                probe("b", t0, 100, Some(300)),
                1,
            ),
            // Two copies of the same client: an overlap too (a second copy beside the first).
            (
                probe("a", t0, 0, Some(1000)),
                probe("a", t0, 100, Some(300)),
                1,
            ),
            // Still running at the end of observation.
            (probe("a", t0, 0, None), probe("b", t0, 9000, None), 1),
        ];
        for (i, (a, b, want)) in table.into_iter().enumerate() {
            let found = overlaps(&[a.clone(), b.clone()], tol, t0, until);
            assert_eq!(found.len(), want, "row {i}: {found:?}");
            // Order of input does not matter.
            assert_eq!(
                overlaps(&[b, a], tol, t0, until).len(),
                want,
                "row {i} reversed"
            );
        }
        let v = &overlaps(
            &[probe("b", t0, 100, Some(300)), probe("a", t0, 0, Some(151))],
            tol,
            t0,
            until,
        )[0];
        assert_eq!(v.kind, ViolationKind::Overlap);
        assert_eq!(v.clients, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(
            v.window,
            Window {
                start_ms: 100,
                end_ms: 151
            }
        );
        assert!(v.detail.contains("51ms"), "{}", v.detail);
    }

    fn hold(client: &str, id: &str, t0: Instant, start: u64, valid: Option<u64>) -> Hold {
        Hold {
            client: Some(client.into()),
            lock_id: id.into(),
            namespace: "default".into(),
            path: "app/lock".into(),
            start: t0 + ms(start),
            expired: None,
            end: valid.map(|v| t0 + ms(v)),
            end_reason: valid.map(|_| HoldEnd::Released),
            conflicted: None,
        }
    }

    #[test]
    fn runs_without_lock_at_the_tolerance_edges() {
        let t0 = Instant::now();
        let until = t0 + ms(5000);
        let tol = ms(30);
        let holds = vec![
            hold("a", "L1", t0, 100, Some(1000)),
            hold("a", "L2", t0, 1200, Some(2000)),
            hold("b", "L3", t0, 3000, None),
        ];
        // (probe, expected windows)
        let table: Vec<(ProbeInterval, Vec<(u64, u64)>)> = vec![
            // Inside the hold.
            (probe("a", t0, 120, Some(990)), vec![]),
            // Starts 30 ms early: at the tolerance, allowed.
            (probe("a", t0, 70, Some(990)), vec![]),
            // 31 ms early: a violation.
            (probe("a", t0, 69, Some(990)), vec![(69, 100)]),
            // Runs across the gap between two holds.
            (probe("a", t0, 500, Some(1500)), vec![(1000, 1200)]),
            // Outlives its hold by 31 ms.
            (probe("a", t0, 1300, Some(2031)), vec![(2000, 2031)]),
            // Another client's hold does not count.
            (probe("c", t0, 3000, Some(3100)), vec![(3000, 3100)]),
            // An open hold covers until the end of observation.
            (probe("b", t0, 3010, None), vec![]),
        ];
        for (i, (p, want)) in table.into_iter().enumerate() {
            let got: Vec<(u64, u64)> = runs_without_lock(&[p], &holds, tol, t0, until)
                .iter()
                .map(|v| (v.window.start_ms, v.window.end_ms))
                .collect();
            assert_eq!(got, want, "row {i}");
        }
        let v = runs_without_lock(&[probe("c", t0, 3000, Some(3100))], &holds, tol, t0, until);
        assert!(v[0].detail.contains("never held"), "{}", v[0].detail);
        let v = runs_without_lock(&[probe("a", t0, 1300, Some(2031))], &holds, tol, t0, until);
        assert!(
            v[0].detail.contains("L2 was released at 2000 ms"),
            "{}",
            v[0].detail
        );
    }

    /// A renew answered 409 ends every claim of that process to a lock: a client that keeps
    /// its protected process and wins the lock back at once (the harness's server freed it)
    /// still ran it from the 409 on, as it would beside the new holder under Nomad. A process
    /// the client started under the new lock is covered by it.
    #[test]
    fn a_process_kept_across_a_409_is_not_covered_by_the_next_lock() {
        let t0 = Instant::now();
        let until = t0 + ms(5000);
        let tol = ms(30);
        let mut l1 = hold("a", "L1", t0, 100, Some(1100));
        l1.conflicted = Some(t0 + ms(1000));
        let l2 = hold("a", "L2", t0, 1010, None);
        let holds = vec![l1, l2];
        let got = |p: ProbeInterval| -> Vec<(u64, u64)> {
            runs_without_lock(&[p], &holds, tol, t0, until)
                .iter()
                .map(|v| (v.window.start_ms, v.window.end_ms))
                .collect()
        };
        // Kept across the 409 and the quick re-acquire: a violation from the 409 on.
        assert_eq!(got(probe("a", t0, 120, None)), vec![(1000, 5000)]);
        // Stopped within the tolerance of the 409: none.
        assert_eq!(
            got(probe("a", t0, 120, Some(1020))),
            Vec::<(u64, u64)>::new()
        );
        // Started under the new lock: covered.
        assert_eq!(got(probe("a", t0, 1020, None)), Vec::<(u64, u64)>::new());
        let v = runs_without_lock(&[probe("a", t0, 120, None)], &holds, tol, t0, until);
        assert!(v[0].detail.contains("answered 409"), "{}", v[0].detail);
    }

    /// Before: the expiry (the leader's 2 × TTL timer) ended a hold's validity, so a protected
    /// process running in the lock delay counted as running without the lock. Nomad keeps the
    /// lock in state through the delay and refuses every other acquire (nomad/locks.go,
    /// VarLockAcquire's isLocked): no second copy can run then, so the singleton holds; running
    /// past the TTL the guide trusts is LOCK-LAPSE-TTL's (SHOULD). Validity ends when the lock
    /// leaves the state, the instant LOCK-LAPSE-STOPS judges against too.
    #[test]
    fn validity_ends_when_the_lock_leaves_the_state_not_at_expiry() {
        let t0 = Instant::now();
        let mut h = hold("a", "L1", t0, 0, Some(900));
        h.expired = Some(t0 + ms(500));
        h.end_reason = Some(HoldEnd::Invalidated);
        assert_eq!(free_at(&h), Some(t0 + ms(900)));
        // Running in the lock delay (500..900): no violation.
        let v = runs_without_lock(
            &[probe("a", t0, 10, Some(800))],
            std::slice::from_ref(&h),
            ms(20),
            t0,
            t0 + ms(1000),
        );
        assert!(v.is_empty(), "{v:?}");
        // Running past the lock's removal: a violation from the removal on.
        let v = runs_without_lock(
            &[probe("a", t0, 10, Some(990))],
            &[h],
            ms(20),
            t0,
            t0 + ms(1000),
        );
        assert_eq!(v.len(), 1);
        assert_eq!(
            v[0].window,
            Window {
                start_ms: 900,
                end_ms: 990
            }
        );
        assert!(v[0].detail.contains("invalidated"), "{}", v[0].detail);
    }

    /// A renew answered 409 ends the hold's validity, whatever the server still keeps: the
    /// harness answers a late conflict as a renew delivered after the lock passed on.
    #[test]
    fn a_renew_conflict_ends_validity() {
        let t0 = Instant::now();
        let mut x = exchange("a", Operation::Renew, t0 + ms(300), 409);
        x.lock_id = Some("L1".into());
        x.duration = ms(50);
        let mut other = exchange("a", Operation::Renew, t0 + ms(200), 409);
        other.lock_id = Some("L2".into());
        let holds = with_conflicts(vec![hold("a", "L1", t0, 0, Some(900))], &[other, x]);
        assert_eq!(holds[0].valid_until(), Some(t0 + ms(350)));
        assert_eq!(free_at(&holds[0]), Some(t0 + ms(900)));
        let v = runs_without_lock(
            &[probe("a", t0, 10, Some(800))],
            &holds,
            ms(20),
            t0,
            t0 + ms(1000),
        );
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].window.start_ms, v[0].window.end_ms), (350, 800));
        assert!(v[0].detail.contains("409"), "{}", v[0].detail);
    }

    #[test]
    fn timing_is_measured_from_the_records() {
        let t0 = Instant::now();
        let mut x = Vec::new();
        let mut push = |op, at, status, id: Option<&str>| {
            let mut e = exchange("a", op, t0 + ms(at), status);
            e.lock_id = id.map(str::to_string);
            x.push(e);
        };
        push(Operation::Acquire, 0, 409, None);
        push(Operation::Acquire, 300, 409, None);
        push(Operation::Acquire, 700, 200, Some("L1"));
        push(Operation::Renew, 1200, 200, Some("L1"));
        push(Operation::Renew, 1800, 200, Some("L1"));
        push(Operation::Renew, 2400, 409, Some("L1"));
        push(Operation::Acquire, 2500, 409, None);
        push(Operation::Acquire, 3000, 409, None);
        let other = exchange("b", Operation::Renew, t0 + ms(1), 200);
        x.push(other);
        let mut h = hold("a", "L1", t0, 700, Some(2300));
        h.end_reason = Some(HoldEnd::Forced);
        let probes = vec![probe("a", t0, 720, Some(2450))];
        let run = ClientRun {
            label: "a".into(),
            started: t0,
            exited: Some(t0 + ms(3500)),
            status: None,
        };
        let t = client_timing("a", &x, &[h], &probes, Some(&run));
        assert_eq!(t.renew_intervals, vec![ms(500), ms(600)]);
        assert_eq!(t.acquire_retry_intervals, vec![ms(300), ms(400), ms(500)]);
        assert_eq!(t.give_up, Some(ms(1000)));
        assert_eq!(t.losses.len(), 1);
        // The forced release (2300) came before the 409 renew (2400).
        assert_eq!(t.losses[0].cause, LossCause::Forced);
        assert_eq!(t.losses[0].probe_end_after, Some(ms(150)));

        let m = MeasuredTiming::from_clients(&[t]);
        assert_eq!(m.renew_interval_max, Some(ms(600)));
        assert_eq!(m.stop_after_loss_max, Some(ms(150)));
        assert_eq!(m.give_up_min, Some(ms(1000)));
        assert!(!m.ran_on_after_loss);
    }

    #[test]
    fn advice_follows_the_guide() {
        let s = Duration::from_secs;
        // Nothing measured: renew TTL/2, retry 1.1 × TTL, stop reaction 0.
        let a = timing_advice(&MeasuredTiming::default(), s(15), s(15), s(60));
        // Free between 2×15+15−7.5 = 37.5 s and 45 s; old gone at 60 s.
        assert_eq!(a.worst_overlap, Duration::from_millis(22_500));
        assert_eq!(
            a.worst_downtime_after_node_failure,
            Duration::from_millis(61_500)
        );
        assert!(a.overlap_bounded);
        assert!(
            a.explanation.iter().any(|l| l.contains("[assumed")),
            "{:#?}",
            a.explanation
        );
        assert!(
            a.explanation
                .iter()
                .any(|l| l.contains("Lower stop_on_client_after below 37.50s"))
        );

        // Measured, and a short stop_on_client_after: no overlap.
        let m = MeasuredTiming {
            renew_interval_max: Some(s(10)),
            renewals: 4,
            stop_after_loss_max: Some(Duration::from_millis(500)),
            losses_measured: 1,
            ran_on_after_loss: false,
            give_up_min: Some(s(20)),
            acquire_retry_max: Some(s(2)),
        };
        let a = timing_advice(&m, s(15), s(15), s(30));
        assert_eq!(a.worst_overlap, Duration::ZERO);
        assert_eq!(a.worst_downtime_after_node_failure, s(47));
        assert!(
            a.explanation
                .iter()
                .any(|l| l.contains("[measured over 4 renewals]"))
        );
        assert!(
            a.explanation
                .iter()
                .any(|l| l.starts_with("Warning: a client gave up 20.00s"))
        );

        let m = MeasuredTiming {
            ran_on_after_loss: true,
            ..MeasuredTiming::default()
        };
        assert!(!timing_advice(&m, s(15), s(15), s(30)).overlap_bounded);
    }
}
