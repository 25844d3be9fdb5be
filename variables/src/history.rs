//! What happened, for checkers and reports: every lock state change and every lock refusal
//! ([`LockEvent`]), and every HTTP exchange ([`RequestRecord`]).
//!
//! Each entry has a sequence number, a monotonic [`Instant`] (for ordering and for measuring,
//! e.g. "the lock was not free before 2 × TTL + delay") and a wall-clock time (for reports).
//! The event kinds follow the lock life cycle of contract B.2/B.3: acquire, renew, release, the
//! leader's TTL timer firing (the lock delay starts), the delayed invalidation that clears the
//! lock in state, refusals with their HTTP status, and timers lost and rebuilt on restart.

use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

/// One lock state change or refusal.
#[derive(Clone, Debug, Serialize)]
pub struct LockEvent {
    /// Position in the history, from 0.
    pub seq: u64,
    /// Monotonic time of the event.
    #[serde(skip)]
    pub at: Instant,
    /// Wall-clock time of the event.
    pub wall: SystemTime,
    /// Namespace of the variable.
    pub namespace: String,
    /// Path of the variable.
    pub path: String,
    /// What happened.
    pub kind: LockEventKind,
}

impl LockEvent {
    /// The lock ID the event is about, if any (for invalidation: the lock that expired).
    pub fn lock_id(&self) -> Option<&str> {
        use LockEventKind::*;
        match &self.kind {
            Acquired { lock_id, .. }
            | Renewed { lock_id }
            | Released { lock_id }
            | TtlExpired { lock_id }
            | ForcedRelease { lock_id }
            | TimerRestored { lock_id }
            | LockWrittenBySet { lock_id, .. } => Some(lock_id),
            RenewRefused { lock_id, .. } | ReleaseRefused { lock_id, .. } => Some(lock_id),
            Invalidated {
                expired_lock_id, ..
            } => Some(expired_lock_id),
            AcquireConflict {
                requested_lock_id, ..
            } => requested_lock_id.as_deref(),
            WriteRefused { .. } | TimersLost { .. } => None,
        }
    }
}

/// The kinds of [`LockEvent`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum LockEventKind {
    /// `lock-acquire` succeeded; `reacquired` when the caller already held this lock ID.
    Acquired {
        lock_id: String,
        ttl: Duration,
        lock_delay: Duration,
        reacquired: bool,
        /// False when an earlier timer for this lock ID still ran (Nomad does not reset it).
        timer_started: bool,
    },
    /// `lock-acquire` answered 409: someone else holds the lock (or it is in its delay).
    AcquireConflict {
        requested_lock_id: Option<String>,
        held_lock_id: String,
    },
    /// `lock-renew` reset the leader's timer to 2 × TTL.
    Renewed { lock_id: String },
    /// `lock-renew` was refused (404 or 409).
    RenewRefused {
        lock_id: String,
        status: u16,
        reason: String,
    },
    /// `lock-release` removed the lock.
    Released { lock_id: String },
    /// `lock-release` was refused (404, 409 or 500).
    ReleaseRefused {
        lock_id: String,
        status: u16,
        reason: String,
    },
    /// The leader's 2 × TTL timer fired: the lock is lost but stays in state for the lock delay.
    TtlExpired { lock_id: String },
    /// The lock delay ended and the invalidation cleared whatever lock the variable held
    /// (`cleared_lock_id` differs from `expired_lock_id` when a newer holder lost its lock).
    Invalidated {
        expired_lock_id: String,
        cleared_lock_id: Option<String>,
    },
    /// A set, cas or delete answered 409 because the variable is locked.
    WriteRefused {
        operation: String,
        held_lock_id: String,
    },
    /// A plain set carried a lock ID: the stored lock was rewritten (TTL and delay reset to the
    /// defaults); `timer_running` is false when no leader timer exists for that ID.
    LockWrittenBySet {
        lock_id: String,
        timer_running: bool,
    },
    /// The harness cleared a lock through the server handle (not a Nomad API).
    ForcedRelease { lock_id: String },
    /// A restart dropped the in-memory timers (TTL timers and pending delays).
    TimersLost { lock_ids: Vec<String> },
    /// After a restart the leader rebuilt a timer of 2 × TTL for a lock found in state.
    TimerRestored { lock_id: String },
}

/// One HTTP exchange.
#[derive(Clone, Debug, Serialize)]
pub struct RequestRecord {
    /// Position in the request log, from 0.
    pub seq: u64,
    /// Monotonic time the request arrived.
    #[serde(skip)]
    pub at: Instant,
    /// Wall-clock time the request arrived.
    pub wall: SystemTime,
    /// Time spent answering.
    pub duration: Duration,
    /// `tcp`, `unix` or `task-api`.
    pub listener: &'static str,
    /// HTTP method.
    pub method: String,
    /// URL path as sent.
    pub path: String,
    /// Raw query string as sent (empty if none).
    pub query: String,
    /// Status code answered.
    pub status: u16,
    /// Whether a token was sent (the token itself is not recorded).
    pub token_sent: bool,
    /// Request body as text, cut at 4 KiB.
    pub request_body: String,
    /// Response body as text, cut at 4 KiB.
    pub response_body: String,
}

const BODY_EXCERPT: usize = 4096;

/// Request or response bytes as text for the log, cut at a character boundary.
pub(crate) fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= BODY_EXCERPT {
        return text.into_owned();
    }
    let mut end = BODY_EXCERPT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The recorder both logs live in.
#[derive(Debug, Default)]
pub(crate) struct History {
    events: Vec<LockEvent>,
    requests: Vec<RequestRecord>,
}

impl History {
    pub(crate) fn push_event(
        &mut self,
        at: Instant,
        wall: SystemTime,
        namespace: &str,
        path: &str,
        kind: LockEventKind,
    ) {
        let seq = self.events.len() as u64;
        self.events.push(LockEvent {
            seq,
            at,
            wall,
            namespace: namespace.to_string(),
            path: path.to_string(),
            kind,
        });
    }

    pub(crate) fn push_request(&mut self, mut record: RequestRecord) {
        record.seq = self.requests.len() as u64;
        self.requests.push(record);
    }

    pub(crate) fn events(&self) -> Vec<LockEvent> {
        self.events.clone()
    }

    pub(crate) fn requests(&self) -> Vec<RequestRecord> {
        self.requests.clone()
    }
}
