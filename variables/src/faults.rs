//! Deliberate misbehaviours, each breaking one rule of Nomad's Variables, lock or ACL API.
//!
//! They exist for one purpose: the project's own tests start a server with a fault and check
//! that the conformance suite (`nomad-conform variables`) notices, clause by clause. A server
//! with a fault is not a reference server any more; never turn one on for anything else.
//! Each variant's documentation says which rule it breaks.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One misbehaviour of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// A write answers 200 with an empty body instead of the stored variable.
    SetAnswersEmpty,
    /// A read answers the variable without its items.
    ReadDropsItems,
    /// A read of a missing variable answers 200 (`null`) instead of 404.
    MissingIs200,
    /// A write merges the new items into the old ones instead of replacing them.
    SetMergesItems,
    /// A write without items is stored instead of refused with 400.
    EmptyItemsAccepted,
    /// A delete answers 204 and keeps the variable.
    DeleteKeeps,
    /// A list ignores `prefix`.
    ListIgnoresPrefix,
    /// `cas` is ignored: set and delete happen whatever the index.
    CasIgnored,
    /// A lock-acquire answers 200 without the `Lock` (so no lock ID).
    AcquireNoId,
    /// A lock without a TTL gets the shortest TTL instead of the default one.
    DefaultTtlMin,
    /// TTLs outside the bounds are accepted.
    TtlUnchecked,
    /// A lock-acquire on a variable locked by someone else takes the lock over.
    AcquireSteals,
    /// Every renew is refused with 409, the holder's too.
    RenewRefused,
    /// A renew with any lock ID renews the held lock.
    RenewIgnoresId,
    /// A release answers 200 and keeps the lock.
    ReleaseKeepsLock,
    /// A release with any lock ID releases the held lock.
    ReleaseIgnoresId,
    /// Plain writes and deletes ignore the lock on a variable.
    LockedWritable,
    /// A read of a locked variable is refused with 409.
    LockedUnreadable,
    /// The leader's timer runs for half the TTL, and no lock delay follows.
    EarlyExpiry,
    /// A renew answers 200 without resetting the leader's timer.
    RenewNoReset,
    /// Lock timers never fire: an abandoned lock is held forever.
    NoExpiry,
    /// An expired lock is cleared at once, without its lock delay.
    NoLockDelay,
    /// Every variable lives in the default namespace, whatever the request names.
    NamespaceIgnored,
    /// Variable paths are not checked (characters, length, the reserved `nomad/` tree).
    PathUnchecked,
    /// A request without a token, or with an unknown one, counts as management.
    AnonymousManagement,
    /// `read` also grants `write`.
    ReadGrantsWrite,
    /// `write` also grants `read` and `list`.
    WriteImpliesRead,
    /// Deletes need `write` instead of `destroy`.
    DestroyNeedsWrite,
    /// `read` does not grant `list`.
    ReadNotList,
    /// Lock operations need `read` instead of `write`.
    LockNeedsRead,
    /// `deny` is dropped from rules; a rule that only denied no longer matches.
    DenyFallsThrough,
    /// `*` in a rule does not match `/`.
    GlobNoSlash,
    /// Glob rules are looked at before an exact rule.
    GlobsBeforeExact,
    /// The first matching glob in byte order wins, not the closest one.
    FirstGlobWins,
    /// The ACL policy API stores invalid policies (a path with a leading `/`, an unknown
    /// capability, which is dropped).
    PolicyUnchecked,
    /// A workload identity reads everything below `nomad/jobs/<job>`, not only its own paths.
    WorkloadPrefix,
    /// A restart loses every lock (as if locks were not raft state).
    RestartDropsLocks,
    /// A lock-release of a missing variable answers 404, and of a variable without a lock 409
    /// (the RPC's coded errors, which only renew uses), instead of Nomad's plain-error 500s.
    ReleaseErrorsCoded,
    /// Lock-acquire and lock-release conflicts carry `X-Nomad-Index`, as set, cas and delete
    /// conflicts do.
    LockConflictIndexed,
    /// A renew with a lock ID its holder released takes the lock again instead of answering 409.
    RenewRevivesReleased,
    /// When a lapsed lock's delay ends, only a lock still held under the lapsed lock ID is
    /// cleared (a newer holder keeps its lock).
    DelayChecksId,
    /// A lock-acquire with the lock ID already held restarts the leader's timer.
    ReacquireResetsTimer,
    /// Lock-acquire and lock-release use `?namespace=` even when the body names a namespace.
    LockQueryNamespace,
    /// A holder's plain write with its lock ID keeps the lock's TTL and lock delay instead of
    /// resetting them to the defaults.
    SetKeepsLockNumbers,
    /// A lock-acquire without items keeps the variable's items.
    AcquireKeepsItems,
    /// A workload identity may take, renew and release locks on its own job's paths without a
    /// policy.
    WorkloadLocks,
    /// The ACL policy API accepts unknown and repeated top-level keys.
    PolicyKeysUnchecked,
}

impl Fault {
    /// Every fault, in declaration order.
    pub const ALL: &'static [Fault] = &[
        Fault::SetAnswersEmpty,
        Fault::ReadDropsItems,
        Fault::MissingIs200,
        Fault::SetMergesItems,
        Fault::EmptyItemsAccepted,
        Fault::DeleteKeeps,
        Fault::ListIgnoresPrefix,
        Fault::CasIgnored,
        Fault::AcquireNoId,
        Fault::DefaultTtlMin,
        Fault::TtlUnchecked,
        Fault::AcquireSteals,
        Fault::RenewRefused,
        Fault::RenewIgnoresId,
        Fault::ReleaseKeepsLock,
        Fault::ReleaseIgnoresId,
        Fault::LockedWritable,
        Fault::LockedUnreadable,
        Fault::EarlyExpiry,
        Fault::RenewNoReset,
        Fault::NoExpiry,
        Fault::NoLockDelay,
        Fault::NamespaceIgnored,
        Fault::PathUnchecked,
        Fault::AnonymousManagement,
        Fault::ReadGrantsWrite,
        Fault::WriteImpliesRead,
        Fault::DestroyNeedsWrite,
        Fault::ReadNotList,
        Fault::LockNeedsRead,
        Fault::DenyFallsThrough,
        Fault::GlobNoSlash,
        Fault::GlobsBeforeExact,
        Fault::FirstGlobWins,
        Fault::PolicyUnchecked,
        Fault::WorkloadPrefix,
        Fault::RestartDropsLocks,
        Fault::ReleaseErrorsCoded,
        Fault::LockConflictIndexed,
        Fault::RenewRevivesReleased,
        Fault::DelayChecksId,
        Fault::ReacquireResetsTimer,
        Fault::LockQueryNamespace,
        Fault::SetKeepsLockNumbers,
        Fault::AcquireKeepsItems,
        Fault::WorkloadLocks,
        Fault::PolicyKeysUnchecked,
    ];

    /// The fault's kebab-case name (`acquire-steals`).
    pub fn name(self) -> &'static str {
        match self {
            Fault::SetAnswersEmpty => "set-answers-empty",
            Fault::ReadDropsItems => "read-drops-items",
            Fault::MissingIs200 => "missing-is-200",
            Fault::SetMergesItems => "set-merges-items",
            Fault::EmptyItemsAccepted => "empty-items-accepted",
            Fault::DeleteKeeps => "delete-keeps",
            Fault::ListIgnoresPrefix => "list-ignores-prefix",
            Fault::CasIgnored => "cas-ignored",
            Fault::AcquireNoId => "acquire-no-id",
            Fault::DefaultTtlMin => "default-ttl-min",
            Fault::TtlUnchecked => "ttl-unchecked",
            Fault::AcquireSteals => "acquire-steals",
            Fault::RenewRefused => "renew-refused",
            Fault::RenewIgnoresId => "renew-ignores-id",
            Fault::ReleaseKeepsLock => "release-keeps-lock",
            Fault::ReleaseIgnoresId => "release-ignores-id",
            Fault::LockedWritable => "locked-writable",
            Fault::LockedUnreadable => "locked-unreadable",
            Fault::EarlyExpiry => "early-expiry",
            Fault::RenewNoReset => "renew-no-reset",
            Fault::NoExpiry => "no-expiry",
            Fault::NoLockDelay => "no-lock-delay",
            Fault::NamespaceIgnored => "namespace-ignored",
            Fault::PathUnchecked => "path-unchecked",
            Fault::AnonymousManagement => "anonymous-management",
            Fault::ReadGrantsWrite => "read-grants-write",
            Fault::WriteImpliesRead => "write-implies-read",
            Fault::DestroyNeedsWrite => "destroy-needs-write",
            Fault::ReadNotList => "read-not-list",
            Fault::LockNeedsRead => "lock-needs-read",
            Fault::DenyFallsThrough => "deny-falls-through",
            Fault::GlobNoSlash => "glob-no-slash",
            Fault::GlobsBeforeExact => "globs-before-exact",
            Fault::FirstGlobWins => "first-glob-wins",
            Fault::PolicyUnchecked => "policy-unchecked",
            Fault::WorkloadPrefix => "workload-prefix",
            Fault::RestartDropsLocks => "restart-drops-locks",
            Fault::ReleaseErrorsCoded => "release-errors-coded",
            Fault::LockConflictIndexed => "lock-conflict-indexed",
            Fault::RenewRevivesReleased => "renew-revives-released",
            Fault::DelayChecksId => "delay-checks-id",
            Fault::ReacquireResetsTimer => "reacquire-resets-timer",
            Fault::LockQueryNamespace => "lock-query-namespace",
            Fault::SetKeepsLockNumbers => "set-keeps-lock-numbers",
            Fault::AcquireKeepsItems => "acquire-keeps-items",
            Fault::WorkloadLocks => "workload-locks",
            Fault::PolicyKeysUnchecked => "policy-keys-unchecked",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Fault::ALL
            .iter()
            .copied()
            .find(|f| f.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                format!("unknown fault {text:?} (known: {})", names.join(", "))
            })
    }
}

/// The faults a server runs with (none for a reference server).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults(BTreeSet<Fault>);

impl Faults {
    /// No fault.
    pub fn none() -> Self {
        Self::default()
    }

    /// Whether `fault` is on.
    pub fn has(&self, fault: Fault) -> bool {
        self.0.contains(&fault)
    }

    /// Turns `fault` on.
    pub fn insert(&mut self, fault: Fault) {
        self.0.insert(fault);
    }

    /// Whether no fault is on.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The faults that are on, in order.
    pub fn iter(&self) -> impl Iterator<Item = Fault> + '_ {
        self.0.iter().copied()
    }
}

impl FromIterator<Fault> for Faults {
    fn from_iter<I: IntoIterator<Item = Fault>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = BTreeSet::new();
        for fault in Fault::ALL {
            assert!(seen.insert(fault.name()), "{fault:?}");
            assert_eq!(fault.name().parse::<Fault>(), Ok(*fault));
        }
        assert!(
            "no-such-fault"
                .parse::<Fault>()
                .unwrap_err()
                .contains("known")
        );
    }
}
