//! Getting, keeping and giving back the lock: when to ask, how long to wait, when to give up.
//!
//! The timing rules (the guide, contract B.3/B.4) and why:
//! - **Renew every TTL/2**, measured from when the last successful request was *sent*: the
//!   server reset its timer at some moment after that, so counting from the send time never
//!   overestimates what we hold. Half the TTL leaves the other half for retries.
//! - **Our lease ends one TTL after the last successful renew was sent.** The server's timer
//!   runs 2 × TTL and then adds the lock delay, but that grace is the server's, not ours: the
//!   API only promises "not expired before TTL".
//! - **Renew failures that are not conflicts (5xx, 429, refused connections, timeouts) are
//!   retried** with a short doubling delay, each request bounded by a third of the TTL and by the
//!   time left. If no renew can succeed before the **stop deadline** — the lease end minus the
//!   stop grace (SIGTERM to SIGKILL, TTL/10, at most 30 s) minus a safety margin (TTL/10) — the
//!   protected process is stopped, so it is gone before the lease ends.
//! - **A renew 409 (or 404) means the lock is lost now**: no retry, the caller stops at once.
//! - **Acquire conflicts are retried** with exponential backoff and full jitter (base 500 ms,
//!   doubling, capped by `--max-backoff`), never sooner than 250 ms after the previous request,
//!   until `--give-up` has passed, each request bounded by half the TTL. A 403 or 400 is
//!   final: retrying cannot help.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rand::RngExt as _;
use thiserror::Error;
use tokio::time::{Instant, sleep, sleep_until};

use crate::api::{Answer, Api};
use crate::duration::human;
use crate::faults::{Fault, Switches, Variant};

/// Nomad's default TTL, used for timing until the server tells us what it granted.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15);
/// No two acquire requests closer than this (at most 4 a second).
pub const MIN_ACQUIRE_GAP: Duration = Duration::from_millis(250);
/// First ceiling of the acquire backoff.
pub const ACQUIRE_BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest SIGTERM-to-SIGKILL grace, whatever the TTL.
pub const MAX_STOP_GRACE: Duration = Duration::from_secs(30);

/// The numbers derived from one TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The TTL the server granted.
    pub ttl: Duration,
    /// Time from one successful renew (or the acquire) to the next renew.
    pub renew_every: Duration,
    /// How long after a successful request we count the lock as ours (TTL).
    pub trusted_for: Duration,
    /// SIGTERM to SIGKILL when we stop the protected process.
    pub stop_grace: Duration,
    /// Kept free before the lease ends (process exit, reaping, clock skew).
    pub safety_margin: Duration,
    /// Bound of each request.
    pub request_timeout: Duration,
    /// First wait after a failed renew (doubles up to `renew_retry_cap`).
    pub renew_retry_initial: Duration,
    /// Longest wait between renew retries.
    pub renew_retry_cap: Duration,
}

impl Timing {
    /// The timing for a granted `ttl` with the switches in force.
    pub fn new(ttl: Duration, switches: &Switches) -> Self {
        let renew_every = if switches.fault(Fault::RenewsLate) {
            ttl.mul_f64(1.5)
        } else if switches.variant(Variant::Renew07) {
            ttl.mul_f64(0.7)
        } else if switches.variant(Variant::RenewThird) {
            ttl / 3
        } else {
            ttl / 2
        };
        // Fault renews-late counts the server's 2 × TTL grace as its own lease, or it would stop
        // the protected process before its first (late) renew and never show the late renew.
        let trusted_for = if switches.fault(Fault::RenewsLate) {
            ttl * 2
        } else {
            ttl
        };
        let renew_retry_initial = (ttl / 20).max(Duration::from_millis(25));
        Self {
            ttl,
            renew_every,
            trusted_for,
            stop_grace: (ttl / 10).min(MAX_STOP_GRACE),
            safety_margin: ttl / 10,
            request_timeout: request_timeout(ttl),
            renew_retry_initial,
            renew_retry_cap: (ttl / 8).max(renew_retry_initial),
        }
    }

    /// Variant trusts-grace: the lock counted as held for 2 × TTL plus half the lock `delay`
    /// asked for (zero: the server's default, taken as one TTL), so that the protected process
    /// stops within the lock delay, after the leader's timer fired and before the lock leaves
    /// the server's state.
    pub fn trusting_grace(mut self, delay: Duration) -> Self {
        let delay = if delay.is_zero() { self.ttl } else { delay };
        self.trusted_for = self.ttl * 2 + delay / 2;
        self
    }

    /// When the protected process must start stopping if no renew after `last_ok` succeeded.
    pub fn stop_deadline(&self, last_ok: Instant) -> Instant {
        last_ok + self.trusted_for - self.stop_grace - self.safety_margin
    }

    /// How long `lock-release` may keep trying when the server is unreachable.
    pub fn release_budget(&self) -> Duration {
        self.ttl.min(Duration::from_secs(30))
    }
}

/// A third of the TTL (at least 50 ms): a renew must be answered, or given up, well before
/// the lease it extends runs out.
pub fn request_timeout(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(50))
}

/// Half the TTL (at least 50 ms). Nothing runs yet while acquiring, and the lease is counted
/// from when the request was sent, so a slow answer costs only lease time: half a TTL leaves
/// the other half to renew in. (A third cut it fine on a busy machine: an acquire the server
/// granted and answered late was abandoned, and the lock, held under a lock ID the client
/// never saw, answered every retry 409 until it expired.)
pub fn acquire_timeout(ttl: Duration) -> Duration {
    (ttl / 2).max(Duration::from_millis(50))
}

/// Exponential backoff with full jitter and a floor.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    floor: Duration,
    attempt: u32,
}

impl Backoff {
    /// The acquire backoff, capped by `max_backoff` (never below [`MIN_ACQUIRE_GAP`]).
    pub fn for_acquire(max_backoff: Duration) -> Self {
        Self {
            base: ACQUIRE_BACKOFF_BASE,
            cap: max_backoff,
            floor: MIN_ACQUIRE_GAP,
            attempt: 0,
        }
    }

    /// The ceiling of the next wait (before jitter).
    pub fn ceiling(&self) -> Duration {
        let doubled = self
            .base
            .saturating_mul(1u32.checked_shl(self.attempt.min(20)).unwrap_or(u32::MAX));
        doubled.min(self.cap)
    }

    /// The next wait: uniform in `[0, ceiling]`, raised to the floor.
    pub fn next_wait(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        let millis = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        let jittered = Duration::from_millis(rand::rng().random_range(0..=millis));
        jittered.max(self.floor)
    }
}

/// What `acquire` needs.
#[derive(Clone, Copy, Debug)]
pub struct AcquireSettings {
    /// TTL to ask for (zero: the server's default).
    pub ttl: Duration,
    /// Lock delay to ask for (zero: the server's default).
    pub delay: Duration,
    /// Stop retrying after this long (`None`: never).
    pub give_up: Option<Duration>,
    /// Cap of the backoff.
    pub max_backoff: Duration,
}

/// A lock we hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The lock ID the server made.
    pub id: String,
    /// The TTL the server granted.
    pub ttl: Duration,
    /// When the successful acquire was sent.
    pub sent_at: Instant,
}

/// Why there is no lock.
#[derive(Debug, Error)]
pub enum AcquireError {
    #[error(
        "gave up after {} and {attempts} attempts: {last}",
        human(*.waited)
    )]
    GaveUp {
        waited: Duration,
        attempts: u32,
        last: String,
    },
    #[error(
        "the token is not allowed to write {path} in namespace {namespace}: grant it write on the path (server answered {status}: {message})"
    )]
    Forbidden {
        path: String,
        namespace: String,
        status: u16,
        message: String,
    },
    #[error("the server refused the lock request ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error(
        "held by another holder ({message}); not retrying, the restart policy starts us again (variant exit-on-conflict)"
    )]
    HeldElsewhere { message: String },
    #[error("unexpected answer to lock-acquire ({status}): {message}")]
    Unexpected { status: u16, message: String },
    #[error("lock-acquire answered 200 without a lock ID: {0}")]
    NoLockId(String),
}

/// Acquires the lock, retrying conflicts and failures with backoff until `give_up`.
pub async fn acquire(
    api: &Api,
    settings: &AcquireSettings,
    switches: &Switches,
) -> Result<Lease, AcquireError> {
    let start = Instant::now();
    let deadline = settings.give_up.map(|g| start + g);
    let mut backoff = Backoff::for_acquire(settings.max_backoff);
    let timeout = acquire_timeout(if settings.ttl.is_zero() {
        DEFAULT_TTL
    } else {
        settings.ttl
    });
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let sent_at = Instant::now();
        let outcome = api.acquire(settings.ttl, settings.delay, timeout).await;
        // (why it failed, whether --give-up applies)
        let (reason, bounded) = match outcome {
            Ok(answer) if answer.status == 200 => return lease_from(&answer, settings, sent_at),
            Ok(answer) if answer.status == 409 => {
                if switches.variant(Variant::ExitOnConflict) {
                    return Err(AcquireError::HeldElsewhere {
                        message: answer.message(),
                    });
                }
                (
                    "held by another holder".to_string(),
                    !switches.fault(Fault::NeverGivesUp),
                )
            }
            Ok(answer) if matches!(answer.status, 401 | 403) => {
                if !switches.fault(Fault::RetriesForever403) {
                    return Err(AcquireError::Forbidden {
                        path: api.path().to_string(),
                        namespace: api.namespace().to_string(),
                        status: answer.status,
                        message: answer.message(),
                    });
                }
                (format!("refused with {}", answer.status), false)
            }
            Ok(answer) if answer.status == 400 => {
                return Err(AcquireError::Refused {
                    status: answer.status,
                    message: answer.message(),
                });
            }
            Ok(answer) if answer.status == 429 || answer.status >= 500 => (
                format!("server answered {}: {}", answer.status, answer.message()),
                true,
            ),
            Ok(answer) => {
                return Err(AcquireError::Unexpected {
                    status: answer.status,
                    message: answer.message(),
                });
            }
            Err(err) => (err.to_string(), true),
        };
        let now = Instant::now();
        let mut wait = backoff.next_wait();
        if bounded && let Some(deadline) = deadline {
            if now >= deadline {
                return Err(AcquireError::GaveUp {
                    waited: now - start,
                    attempts,
                    last: reason,
                });
            }
            // One last attempt at the deadline, still no sooner than the floor.
            wait = wait.min(deadline - now).max(MIN_ACQUIRE_GAP);
        }
        crate::event!(
            "lock on {} not acquired ({reason}); retrying in {}",
            api.path(),
            human(wait)
        );
        sleep(wait).await;
    }
}

fn lease_from(
    answer: &Answer,
    settings: &AcquireSettings,
    sent_at: Instant,
) -> Result<Lease, AcquireError> {
    let json = answer.json().unwrap_or_default();
    let id = json["Lock"]["ID"].as_str().unwrap_or_default().to_string();
    if id.is_empty() {
        return Err(AcquireError::NoLockId(answer.message()));
    }
    let requested = if settings.ttl.is_zero() {
        DEFAULT_TTL
    } else {
        settings.ttl
    };
    let ttl = json["Lock"]["TTL"]
        .as_str()
        .and_then(crate::duration::parse_go)
        .filter(|ttl| !ttl.is_zero())
        .unwrap_or(requested);
    Ok(Lease { id, ttl, sent_at })
}

/// The ID of the lock we hold right now, shared between the renewer and whoever releases.
#[derive(Debug, Default)]
pub struct HeldLock(Mutex<Option<String>>);

impl HeldLock {
    /// Holding `id`.
    pub fn new(id: &str) -> Self {
        Self(Mutex::new(Some(id.to_string())))
    }

    /// The lock ID, if we hold one.
    pub fn id(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, id: Option<String>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = id;
    }
}

/// Why keeping the lock ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseEnd {
    /// Renew answered 409 or 404: someone else holds it or it is gone.
    Conflict { status: u16, message: String },
    /// Renew answered 400, 401 or 403: the server will not let us renew.
    Refused { status: u16, message: String },
    /// No renew succeeded and the stop deadline came.
    Lapsing { failures: u32, last_error: String },
}

impl std::fmt::Display for LeaseEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Conflict { status, message } => {
                write!(f, "renew conflict: lock lost ({status}: {message})")
            }
            Self::Refused { status: 0, message } => write!(f, "lock lost: {message}"),
            Self::Refused { status, message } => {
                write!(f, "renew refused ({status}: {message})")
            }
            Self::Lapsing {
                failures,
                last_error,
            } => write!(
                f,
                "renew failed {failures} times (last: {last_error}); the lock's TTL would lapse"
            ),
        }
    }
}

/// Keeps the lock until it is lost; returns only then (cancel it to stop renewing).
pub async fn maintain(
    api: &Api,
    lease: Lease,
    acquire_settings: &AcquireSettings,
    switches: &Switches,
    held: &HeldLock,
    verbose: bool,
) -> LeaseEnd {
    let timing_for = |ttl| {
        let t = Timing::new(ttl, switches);
        if switches.variant(Variant::TrustsGrace) {
            t.trusting_grace(acquire_settings.delay)
        } else {
            t
        }
    };
    let mut timing = timing_for(lease.ttl);
    let mut id = lease.id;
    let mut last_ok = lease.sent_at;
    loop {
        let first_try = last_ok + timing.renew_every;
        let mut stop_by = if switches.variant(Variant::RetriesForTtl) {
            // One TTL of tries from the first renew, whatever its answer.
            first_try + timing.ttl
        } else {
            timing.stop_deadline(last_ok)
        };
        sleep_until(first_try.min(stop_by)).await;
        let mut wait = timing.renew_retry_initial;
        let mut failures = 0u32;
        let mut last_error = format!(
            "renew period {} leaves no time before the stop deadline",
            human(timing.renew_every)
        );
        loop {
            let now = Instant::now();
            if now >= stop_by {
                return LeaseEnd::Lapsing {
                    failures,
                    last_error,
                };
            }
            let sent_at = Instant::now();
            let outcome = api
                .renew(&id, timing.request_timeout.min(stop_by - now))
                .await;
            let took = sent_at.elapsed();
            match outcome {
                Ok(answer) if answer.status == 200 => {
                    last_ok = sent_at;
                    if failures > 0 {
                        crate::event!("renewed lock {id} after {failures} failed attempts");
                    } else if verbose {
                        crate::event!("renewed lock {id}");
                    }
                    break;
                }
                Ok(answer) if matches!(answer.status, 404 | 409) => {
                    if answer.status == 409
                        && took > timing.ttl / 10
                        && switches.fault(Fault::PanicsOnLate409)
                    {
                        // The Go LockLeaser's renewer reports a conflict on a channel that its
                        // owner has closed by then: the process dies, the protected one runs on.
                        panic!(
                            "send on closed channel (fault panics-on-late-409: renew of lock {id} answered 409 after {})",
                            human(took)
                        );
                    }
                    held.set(None);
                    if !switches.fault(Fault::IgnoresConflict) {
                        return LeaseEnd::Conflict {
                            status: answer.status,
                            message: answer.message(),
                        };
                    }
                    crate::event!(
                        "renew conflict: lock lost ({}); keeping the protected process and acquiring again (fault ignores-conflict)",
                        answer.status
                    );
                    let again = AcquireSettings {
                        give_up: None,
                        ..*acquire_settings
                    };
                    match acquire(api, &again, switches).await {
                        Ok(lease) => {
                            crate::event!("re-acquired lock {} on {}", lease.id, api.path());
                            timing = timing_for(lease.ttl);
                            id = lease.id;
                            held.set(Some(id.clone()));
                            last_ok = lease.sent_at;
                        }
                        Err(err) => {
                            // Status 0: the re-acquire, not a renew, was refused.
                            return LeaseEnd::Refused {
                                status: 0,
                                message: err.to_string(),
                            };
                        }
                    }
                    break;
                }
                Ok(answer) if matches!(answer.status, 400 | 401 | 403) => {
                    return LeaseEnd::Refused {
                        status: answer.status,
                        message: answer.message(),
                    };
                }
                Ok(answer) => {
                    last_error = format!("server answered {}: {}", answer.status, answer.message())
                }
                Err(err) => last_error = err.to_string(),
            }
            failures += 1;
            if failures == 1 && switches.variant(Variant::RetriesForTtl) {
                // One TTL of retries from the first failure, then stop.
                stop_by = sent_at + timing.ttl;
            }
            let left = stop_by.saturating_duration_since(Instant::now());
            crate::event!(
                "renew of lock {id} failed ({last_error}); retrying in {}, {} left before the protected process must stop",
                human(wait.min(left)),
                human(left)
            );
            sleep(wait.min(left)).await;
            wait = (wait * 2).min(timing.renew_retry_cap);
        }
    }
}

/// One release attempt bounded by a tenth of the TTL, for a lock already lost: a sidecar's
/// application only stops once the sidecar exits, so the attempt must not hold that up.
pub async fn release_once(api: &Api, id: &str, ttl: Duration, switches: &Switches) -> bool {
    if switches.fault(Fault::NeverReleases) {
        crate::event!("not releasing lock {id} (fault never-releases)");
        return false;
    }
    let timeout = (ttl / 10).max(Duration::from_millis(50));
    match api
        .release(id, switches.fault(Fault::MalformedRelease), timeout)
        .await
    {
        Ok(answer) if answer.status == 200 => {
            crate::event!("released lock {id} on {}", api.path());
            true
        }
        Ok(answer) => {
            crate::event!(
                "could not release lock {id} ({}: {}); the server frees it 2 × TTL + lock delay after the last renew",
                answer.status,
                answer.message()
            );
            false
        }
        Err(err) => {
            crate::event!("could not release lock {id} ({err})");
            false
        }
    }
}

/// Nomad's answer to a release of a lock that is already gone: `VarLockRelease`'s plain
/// errors, which Nomad's HTTP layer turns into 500 with their text. No retry can change it.
fn lock_gone(answer: &crate::api::Answer) -> bool {
    let text = answer.message();
    answer.status == 500 && (text.contains("doesn't hold a lock") || text.contains("doesn't exist"))
}

/// Releases lock `id`, retrying unreachable-server failures within the release budget.
/// Returns whether the server confirmed the release. `delay` is the lock delay asked for
/// (zero: the server's default), used by the `release-until-freed` variant.
pub async fn release(
    api: &Api,
    id: &str,
    ttl: Duration,
    delay: Duration,
    switches: &Switches,
) -> bool {
    if switches.fault(Fault::NeverReleases) {
        crate::event!("not releasing lock {id} (fault never-releases)");
        return false;
    }
    let forever = switches.fault(Fault::RetriesReleaseForever);
    let timing = Timing::new(ttl, switches);
    let budget = if switches.variant(Variant::ReleaseUntilFreed) {
        // Until the server would have freed the lock anyway: 2 × TTL plus the lock delay after
        // the last renew, which was at most a TTL ago.
        ttl * 3 + if delay.is_zero() { ttl } else { delay }
    } else {
        timing.release_budget()
    };
    let deadline = Instant::now() + budget;
    let mut wait = Duration::from_millis(100);
    loop {
        let now = Instant::now();
        let timeout = if forever {
            timing.request_timeout
        } else {
            timing
                .request_timeout
                .min(deadline.saturating_duration_since(now))
                .max(Duration::from_millis(50))
        };
        let reason = match api
            .release(id, switches.fault(Fault::MalformedRelease), timeout)
            .await
        {
            Ok(answer) if answer.status == 200 => {
                crate::event!("released lock {id} on {}", api.path());
                return true;
            }
            Ok(answer) if forever => format!(
                "server answered {}: {} (fault retries-release-forever)",
                answer.status,
                answer.message()
            ),
            Ok(answer) if lock_gone(&answer) => {
                crate::event!(
                    "lock {id} is already gone ({}: {}); nothing to release",
                    answer.status,
                    answer.message()
                );
                return false;
            }
            Ok(answer) if answer.status < 500 && answer.status != 429 => {
                crate::event!(
                    "lock-release of {id} refused ({}: {})",
                    answer.status,
                    answer.message()
                );
                return false;
            }
            Ok(answer) => format!("server answered {}: {}", answer.status, answer.message()),
            Err(err) => err.to_string(),
        };
        if !forever && Instant::now() + wait >= deadline {
            crate::event!(
                "could not release lock {id} ({reason}); the server frees it 2 × TTL + lock delay after the last renew"
            );
            return false;
        }
        sleep(wait).await;
        wait = (wait * 2).min((ttl / 2).max(Duration::from_millis(100)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nomads_500_for_a_cleared_lock_is_final_other_500s_are_not() {
        let answer = |status: u16, body: &str| crate::api::Answer {
            status,
            body: body.to_string(),
        };
        assert!(lock_gone(&answer(500, "variable doesn't hold a lock")));
        assert!(lock_gone(&answer(500, "variable doesn't exist\n")));
        assert!(!lock_gone(&answer(500, "No cluster leader")));
        assert!(!lock_gone(&answer(409, "variable doesn't hold a lock")));
    }

    #[test]
    fn default_timing_for_nomad_default_ttl() {
        let t = Timing::new(Duration::from_secs(15), &Switches::default());
        assert_eq!(t.renew_every, Duration::from_millis(7500));
        assert_eq!(t.trusted_for, Duration::from_secs(15));
        assert_eq!(t.stop_grace, Duration::from_millis(1500));
        assert_eq!(t.safety_margin, Duration::from_millis(1500));
        assert_eq!(t.request_timeout, Duration::from_secs(5));
        let start = Instant::now();
        // Stop deadline at 0.8 × TTL: a 0.3 × TTL window for renew retries after TTL/2.
        assert_eq!(t.stop_deadline(start) - start, Duration::from_secs(12));
        assert!(t.stop_grace <= t.ttl / 3);
    }

    #[test]
    fn switches_change_the_renew_period_only_where_they_say() {
        let ttl = Duration::from_secs(10);
        let variant = Timing::new(ttl, &Switches::new(&[], &[Variant::Renew07]));
        assert_eq!(variant.renew_every, Duration::from_secs(7));
        let start = Instant::now();
        // The variant still renews before its stop deadline.
        assert!(start + variant.renew_every < variant.stop_deadline(start));
        let third = Timing::new(ttl, &Switches::new(&[], &[Variant::RenewThird]));
        assert_eq!(third.renew_every, ttl / 3);
        assert_eq!(third.stop_deadline(start), variant.stop_deadline(start));
        let late = Timing::new(ttl, &Switches::new(&[Fault::RenewsLate], &[]));
        assert_eq!(late.renew_every, Duration::from_secs(15));
        assert!(start + late.renew_every < late.stop_deadline(start));
    }

    #[test]
    fn grace_is_capped() {
        let t = Timing::new(Duration::from_secs(3600), &Switches::default());
        assert_eq!(t.stop_grace, MAX_STOP_GRACE);
    }

    #[test]
    fn acquire_backoff_grows_to_the_cap_and_keeps_the_floor() {
        let mut backoff = Backoff::for_acquire(Duration::from_secs(4));
        let ceilings: Vec<u128> = (0..6)
            .map(|_| {
                let ceiling = backoff.ceiling().as_millis();
                let wait = backoff.next_wait();
                assert!(wait >= MIN_ACQUIRE_GAP && wait.as_millis() <= ceiling.max(250));
                ceiling
            })
            .collect();
        assert_eq!(ceilings, [500, 1000, 2000, 4000, 4000, 4000]);
        let mut tiny = Backoff::for_acquire(Duration::ZERO);
        assert_eq!(tiny.next_wait(), MIN_ACQUIRE_GAP);
    }

    #[test]
    fn lease_ends_read_as_log_lines() {
        let conflict = LeaseEnd::Conflict {
            status: 409,
            message: "attempting to modify locked variable".into(),
        };
        assert_eq!(
            conflict.to_string(),
            "renew conflict: lock lost (409: attempting to modify locked variable)"
        );
        let lapsing = LeaseEnd::Lapsing {
            failures: 2,
            last_error: "x".into(),
        };
        assert!(lapsing.to_string().ends_with("the lock's TTL would lapse"));
    }
}
