//! The leader's in-memory lock timers: TTL timers, lock delays and the invalidation that
//! clears an expired lock from state.
//!
//! Source: contract B.3 (`nomad/locks.go`):
//! - timers are keyed by lock ID; acquire creates one of `ttl_timer_multiplier` × TTL (2 × TTL)
//!   unless one already runs for that ID (then nothing is reset); renew resets it to 2 × the
//!   TTL stored in state and fails if no timer exists; release removes it;
//! - when a timer fires it is removed and the lock delay starts (renew and foreign acquires
//!   now get 409; the holder's release still works); when the delay ends, a raft
//!   `lock-release` without a lock ID clears whatever lock the variable holds, even a newer
//!   holder's (the delay is not cancelled by a release);
//! - none of this is in raft: a restart drops every timer and pending delay, and the new
//!   leader rebuilds a fresh 2 × TTL timer for every lock found in state
//!   (`restoreLockTTLTimers`), so a lock that was in its delay becomes renewable again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::AbortHandle;

use crate::engine::{Core, Engine, lock};
use crate::faults::Fault;
use crate::history::LockEventKind;
use crate::store::StateResult;
use crate::wire::VariableLock;

/// A running lock timer, for inspection by tests and checkers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimerInfo {
    /// Lock ID the timer belongs to.
    pub lock_id: String,
    /// Namespace of the variable.
    pub namespace: String,
    /// Path of the variable.
    pub path: String,
    /// When the timer fires (TTL timers) or the lock is cleared (delays).
    pub deadline: Instant,
    /// True for a lock delay in progress, false for a TTL timer.
    pub in_delay: bool,
}

#[derive(Debug)]
struct TtlTimer {
    generation: u64,
    namespace: String,
    path: String,
    /// Captured at creation, like the closure Nomad schedules.
    lock_delay: Duration,
    deadline: Instant,
    task: AbortHandle,
}

#[derive(Debug)]
struct DelayTimer {
    lock_id: String,
    namespace: String,
    path: String,
    deadline: Instant,
    task: AbortHandle,
}

/// TTL timers by lock ID and pending lock delays by sequence number.
#[derive(Debug, Default)]
pub(crate) struct LockTimers {
    ttl: HashMap<String, TtlTimer>,
    delays: HashMap<u64, DelayTimer>,
    next_id: u64,
}

impl LockTimers {
    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(crate) fn has_ttl(&self, lock_id: &str) -> bool {
        self.ttl.contains_key(lock_id)
    }

    pub(crate) fn snapshot(&self) -> Vec<TimerInfo> {
        let ttl = self.ttl.iter().map(|(id, t)| TimerInfo {
            lock_id: id.clone(),
            namespace: t.namespace.clone(),
            path: t.path.clone(),
            deadline: t.deadline,
            in_delay: false,
        });
        let delays = self.delays.values().map(|d| TimerInfo {
            lock_id: d.lock_id.clone(),
            namespace: d.namespace.clone(),
            path: d.path.clone(),
            deadline: d.deadline,
            in_delay: true,
        });
        let mut all: Vec<TimerInfo> = ttl.chain(delays).collect();
        all.sort_by_key(|t| t.deadline);
        all
    }

    /// Aborts and forgets every timer and delay; returns the lock IDs that had one.
    pub(crate) fn drop_all(&mut self) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for (id, timer) in self.ttl.drain() {
            timer.task.abort();
            ids.push(id);
        }
        for (_, delay) in self.delays.drain() {
            delay.task.abort();
            ids.push(delay.lock_id);
        }
        ids.sort();
        ids.dedup();
        ids
    }
}

impl Engine {
    /// Now plus `after` (capped for absurd lock delays; only `timers()` shows it).
    fn deadline_after(&self, after: Duration) -> Instant {
        let now = self.clock.now();
        now.checked_add(after)
            .or_else(|| now.checked_add(Duration::from_secs(u64::from(u32::MAX))))
            .unwrap_or(now)
    }

    fn ttl_timer_length(&self, ttl: Duration) -> Duration {
        if self.has(Fault::EarlyExpiry) {
            return ttl / 2;
        }
        ttl.saturating_mul(self.profile.ttl_timer_multiplier)
    }

    /// The lock delay that follows an expiry (none with the delay faults).
    fn effective_delay(&self, delay: Duration) -> Duration {
        if self.has(Fault::EarlyExpiry) || self.has(Fault::NoLockDelay) {
            Duration::ZERO
        } else {
            delay
        }
    }

    fn spawn_ttl_task(
        self: &Arc<Self>,
        lock_id: &str,
        generation: u64,
        after: Duration,
    ) -> AbortHandle {
        let engine = Arc::clone(self);
        let id = lock_id.to_string();
        let sleep = self.clock.sleep(after);
        let never = self.has(Fault::NoExpiry);
        tokio::spawn(async move {
            if never {
                std::future::pending::<()>().await;
            }
            sleep.await;
            engine.on_ttl_fired(&id, generation);
        })
        .abort_handle()
    }

    /// `CreateVariableLockTTLTimer`; false if a timer for this lock ID already runs.
    pub(crate) fn create_ttl_timer(
        self: &Arc<Self>,
        core: &mut Core,
        namespace: &str,
        path: &str,
        lock: &VariableLock,
    ) -> bool {
        if core.timers.has_ttl(&lock.id) {
            return false;
        }
        let generation = core.timers.next();
        let length = self.ttl_timer_length(lock.ttl());
        let task = self.spawn_ttl_task(&lock.id, generation, length);
        core.timers.ttl.insert(
            lock.id.clone(),
            TtlTimer {
                generation,
                namespace: namespace.to_string(),
                path: path.to_string(),
                lock_delay: lock.lock_delay(),
                deadline: self.deadline_after(length),
                task,
            },
        );
        true
    }

    /// `RenewTTLTimer` with the lock as stored; false if no timer runs for its ID.
    pub(crate) fn renew_ttl_timer(self: &Arc<Self>, core: &mut Core, held: &VariableLock) -> bool {
        let generation = core.timers.next();
        let length = self.ttl_timer_length(held.ttl());
        let Some(timer) = core.timers.ttl.get_mut(&held.id) else {
            return false;
        };
        if self.has(Fault::RenewNoReset) {
            return true;
        }
        timer.task.abort();
        timer.generation = generation;
        timer.deadline = self.deadline_after(length);
        timer.task = self.spawn_ttl_task(&held.id, generation, length);
        true
    }

    /// `RemoveVariableLockTTLTimer`; a pending lock delay is not cancelled.
    pub(crate) fn remove_ttl_timer(&self, core: &mut Core, lock_id: &str) -> bool {
        match core.timers.ttl.remove(lock_id) {
            Some(timer) => {
                timer.task.abort();
                true
            }
            None => false,
        }
    }

    /// The TTL timer fired: forget it and start the lock delay.
    fn on_ttl_fired(self: &Arc<Self>, lock_id: &str, generation: u64) {
        let mut core = lock(&self.core);
        let current = core.timers.ttl.get(lock_id).map(|t| t.generation);
        if current != Some(generation) {
            return; // renewed, removed or dropped meanwhile
        }
        let Some(timer) = core.timers.ttl.remove(lock_id) else {
            return;
        };
        let key = core.timers.next();
        let engine = Arc::clone(self);
        let lock_delay = self.effective_delay(timer.lock_delay);
        let sleep = self.clock.sleep(lock_delay);
        let task = tokio::spawn(async move {
            sleep.await;
            engine.on_delay_over(key);
        })
        .abort_handle();
        core.timers.delays.insert(
            key,
            DelayTimer {
                lock_id: lock_id.to_string(),
                namespace: timer.namespace.clone(),
                path: timer.path.clone(),
                deadline: self.deadline_after(lock_delay),
                task,
            },
        );
        self.record(
            &timer.namespace,
            &timer.path,
            LockEventKind::TtlExpired {
                lock_id: lock_id.to_string(),
            },
        );
    }

    /// The lock delay ended: clear whatever lock the variable holds (a raft write).
    ///
    /// nomad/locks.go (invalidateVariableLock) applies a lock-release whose variable has no
    /// Lock; nomad/state/state_store_variables.go (VarLockRelease) compares lock IDs only
    /// when the request has a Lock, so the lock is cleared whoever holds it now: the holder
    /// that lapsed, or a client that took the lock after that holder released it during the
    /// delay (the delay's `time.AfterFunc` is never cancelled).
    fn on_delay_over(self: &Arc<Self>, key: u64) {
        let mut core = lock(&self.core);
        let Some(delay) = core.timers.delays.remove(&key) else {
            return; // dropped by a restart
        };
        let index = core.store.next_index();
        let held = core
            .store
            .get(&delay.namespace, &delay.path)
            .and_then(|v| v.metadata.lock.as_ref())
            .map(|l| l.id.clone());
        let only = self
            .has(Fault::DelayChecksId)
            .then_some(delay.lock_id.as_str());
        let result = core
            .store
            .lock_release(index, &delay.namespace, &delay.path, only);
        let cleared = matches!(result, StateResult::Ok(_))
            .then_some(held)
            .flatten();
        self.record(
            &delay.namespace,
            &delay.path,
            LockEventKind::Invalidated {
                expired_lock_id: delay.lock_id,
                cleared_lock_id: cleared,
            },
        );
        drop(core);
    }

    /// Drops every timer and delay (what a leader loses), recording which locks had one.
    pub(crate) fn drop_timers(&self) {
        let mut core = lock(&self.core);
        let ids = core.timers.drop_all();
        self.record("", "", LockEventKind::TimersLost { lock_ids: ids });
        drop(core);
    }

    /// Clears every lock from state (the `restart-drops-locks` fault).
    pub(crate) fn drop_all_locks(&self) {
        let mut core = lock(&self.core);
        let locked: Vec<(String, String)> = core
            .store
            .all()
            .filter(|v| v.metadata.lock.is_some())
            .map(|v| (v.metadata.namespace.clone(), v.metadata.path.clone()))
            .collect();
        for (namespace, path) in locked {
            let index = core.store.next_index();
            core.store.lock_release(index, &namespace, &path, None);
        }
    }

    /// `restoreLockTTLTimers`: a fresh 2 × TTL timer for every lock in state.
    pub(crate) fn restore_timers(self: &Arc<Self>) {
        let mut core = lock(&self.core);
        let locked: Vec<(String, String, VariableLock)> = core
            .store
            .all()
            .filter_map(|v| {
                v.metadata.lock.as_ref().map(|l| {
                    (
                        v.metadata.namespace.clone(),
                        v.metadata.path.clone(),
                        l.clone(),
                    )
                })
            })
            .collect();
        for (namespace, path, held) in locked {
            if self.create_ttl_timer(&mut core, &namespace, &path, &held) {
                let lock_id = held.id;
                self.record(&namespace, &path, LockEventKind::TimerRestored { lock_id });
            }
        }
        drop(core);
    }

    /// Clears a lock right now, as the delayed invalidation would (a harness action, not a
    /// Nomad API). Returns the cleared lock ID.
    pub(crate) fn force_release(&self, namespace: &str, path: &str) -> Option<String> {
        let mut core = lock(&self.core);
        let held = core
            .store
            .get(namespace, path)
            .and_then(|v| v.metadata.lock.as_ref())
            .map(|l| l.id.clone())?;
        let index = core.store.next_index();
        core.store.lock_release(index, namespace, path, None);
        self.remove_ttl_timer(&mut core, &held);
        self.record(
            namespace,
            path,
            LockEventKind::ForcedRelease {
                lock_id: held.clone(),
            },
        );
        drop(core);
        Some(held)
    }
}

#[cfg(test)]
mod tests {
    //! Nomad's real numbers (15s TTL and delay, 2 × TTL timer) in tokio's paused time.

    use super::*;
    use crate::acl::{AclConfig, Caller};
    use crate::clock::TokioClock;
    use crate::engine::{ApplyOutcome, Op};
    use crate::profile::Profile;
    use crate::wire::RequestVariable;

    fn engine() -> Arc<Engine> {
        Arc::new(Engine::new(
            Profile::nomad(),
            Arc::new(TokioClock::new()),
            AclConfig::disabled(),
        ))
    }

    /// Acquires with default TTL and delay; returns the lock ID or `None` on conflict.
    fn acquire(engine: &Arc<Engine>, path: &str) -> Option<String> {
        let mut var = RequestVariable::default();
        var.metadata.path = path.to_string();
        match engine.apply(Op::LockAcquire, var, "default", &Caller::all()) {
            Ok(ApplyOutcome::Output {
                body: Some(body), ..
            }) => Some(body["Lock"]["ID"].as_str().unwrap().to_string()),
            Ok(ApplyOutcome::Conflict { .. }) => None,
            other => panic!("unexpected acquire answer: {other:?}"),
        }
    }

    fn renew_status(engine: &Arc<Engine>, path: &str, id: &str) -> u16 {
        match engine.renew("default", path, id, &Caller::all()) {
            Ok(_) => 200,
            Err(err) => err.status,
        }
    }

    fn event_at(engine: &Engine, pred: impl Fn(&LockEventKind) -> bool) -> Option<Instant> {
        lock(&engine.history)
            .events()
            .into_iter()
            .find(|e| pred(&e.kind))
            .map(|e| e.at)
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_uses_twice_the_ttl_then_the_delay() {
        let engine = engine();
        let id = acquire(&engine, "v").unwrap();
        let acquired = event_at(&engine, |k| matches!(k, LockEventKind::Acquired { .. })).unwrap();
        let timer = lock(&engine.core).timers.snapshot().remove(0);
        assert_eq!(timer.deadline - acquired, Duration::from_secs(30));

        tokio::time::sleep(Duration::from_millis(29_999)).await;
        assert_eq!(acquire(&engine, "v"), None, "held until 2 × TTL");
        tokio::time::sleep(Duration::from_millis(2)).await;
        let expired = event_at(&engine, |k| matches!(k, LockEventKind::TtlExpired { .. })).unwrap();
        assert_eq!(expired - acquired, Duration::from_secs(30));
        assert_eq!(renew_status(&engine, "v", &id), 409);
        assert_eq!(acquire(&engine, "v"), None, "still locked during the delay");

        tokio::time::sleep(Duration::from_secs(15)).await;
        let cleared =
            event_at(&engine, |k| matches!(k, LockEventKind::Invalidated { .. })).unwrap();
        assert_eq!(cleared - expired, Duration::from_secs(15));
        assert!(acquire(&engine, "v").is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn renewing_at_seven_tenths_of_the_ttl_holds_for_ten_minutes() {
        let engine = engine();
        let id = acquire(&engine, "v").unwrap();
        for _ in 0..57 {
            tokio::time::sleep(Duration::from_millis(10_500)).await;
            assert_eq!(renew_status(&engine, "v", &id), 200);
        }
        assert_eq!(acquire(&engine, "v"), None);
        assert!(event_at(&engine, |k| matches!(k, LockEventKind::TtlExpired { .. })).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn restart_revives_a_lock_in_its_delay() {
        let engine = engine();
        let id = acquire(&engine, "v").unwrap();
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(renew_status(&engine, "v", &id), 409);
        engine.drop_timers();
        engine.restore_timers();
        assert_eq!(renew_status(&engine, "v", &id), 200);
        // The lost delay would have cleared the lock at 45s; it is still held at 60s.
        tokio::time::sleep(Duration::from_secs(29)).await;
        assert_eq!(acquire(&engine, "v"), None);
        assert!(event_at(&engine, |k| matches!(k, LockEventKind::Invalidated { .. })).is_none());
        // Without renewals it expires 30s + 15s after the restart.
        tokio::time::sleep(Duration::from_secs(30 + 15 - 29 + 1)).await;
        assert!(acquire(&engine, "v").is_some());
    }
}
