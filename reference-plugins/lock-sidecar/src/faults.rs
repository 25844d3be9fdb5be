//! Fault switches (`--fault NAME`) and variants (`--variant NAME`).
//!
//! A fault breaks exactly one rule of a singleton lock client, so the suite's fixtures can show
//! that the clause guarding that rule notices. A variant is a behaviour the guide allows that
//! differs from our default; with any variant the client must still conform. Each switch is
//! consulted at the one place where its rule is implemented: search for its enum variant.

use std::collections::BTreeSet;

use clap::ValueEnum;

/// One deliberate rule violation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Fault {
    /// Renews every 1.5 × TTL instead of TTL/2 (counting on the server's 2 × TTL grace, so its
    /// own stop deadline moves out to match).
    RenewsLate,
    /// After a renew 409 keeps the protected process (or sentinel) and tries to acquire again,
    /// like the Go `LockLeaser`, instead of stopping it.
    IgnoresConflict,
    /// Starts the protected process (or writes the sentinel) before the acquire succeeds.
    StartsBeforeAcquire,
    /// Never calls lock-release (the lock stays until the server expires it).
    NeverReleases,
    /// On losing the lock for any reason never stops the protected process (nor removes the
    /// sentinel); only stops renewing.
    KeepsChild,
    /// Treats 403 (and 401) on acquire as retryable and retries forever, ignoring --give-up.
    #[value(name = "retries-forever-403")]
    RetriesForever403,
    /// Sends `"Items": {}` in the lock-release body, which Nomad refuses with 400.
    MalformedRelease,
    /// Does not forward SIGTERM to the protected process (and in sidecar mode ignores it).
    IgnoresSigterm,
    /// The same for SIGINT, Nomad's default kill signal.
    IgnoresSigint,
    /// Keeps retrying an acquire that conflicts, ignoring --give-up.
    NeverGivesUp,
    /// Sends the TTL and lock delay as JSON numbers of seconds; Nomad reads numbers as
    /// nanoseconds, so it refuses the TTL (400) and the lock is never taken.
    TtlAsNumber,
    /// Ignores NOMAD_NAMESPACE and always locks in the default namespace.
    IgnoresNamespace,
    /// Puts no timeout on lock requests (acquire, renew, release), like Nomad's Go api client:
    /// each waits for its answer as long as it takes, and the stop deadline, which only bounds
    /// a renew through its timeout, never interrupts one still waiting. A renew the server never
    /// answers (the connection staying open) keeps the protected process running forever.
    NoRequestTimeout,
    /// On SIGTERM or SIGINT (Nomad's kill signals) caught while a lock request is in flight,
    /// first waits for that request's answer, its timeout no longer applying, like the Go
    /// `LockLeaser`'s deadlock; only then stops the protected process and releases. A renew that
    /// hangs leaves the process running and lock-sidecar never exits. A signal caught with no
    /// request in flight is handled at once, as by default.
    DeadlockOnSigterm,
    /// Panics (`send on closed channel`, exit status 101) when a renew is answered 409 more than
    /// TTL/10 after it was sent, like the Go `LockLeaser` on a late conflict: the protected
    /// process is not stopped and is left running as an orphan. Like the Go client it models,
    /// it starts the protected process without the parent-death signal, so the orphan outlives
    /// lock-sidecar (also when lock-sidecar is killed). A 409 that comes sooner is handled as by
    /// default.
    #[value(name = "panics-on-late-409")]
    PanicsOnLate409,
    /// Retries a failed lock-release forever (every 100 ms, doubling up to TTL/2), whatever the
    /// answer: Nomad's 500 "variable doesn't hold a lock" to a release after a lapse included,
    /// so after losing its lock it never exits.
    RetriesReleaseForever,
    /// Starts the protected process without the parent-death signal (still in a process group
    /// of its own): if lock-sidecar is killed with SIGKILL, the protected process runs on
    /// without anyone holding its lock.
    NoParentDeathSignal,
    /// On SIGTERM crashes as a Go program does (`panic: send on closed channel`, a goroutine
    /// trace on stderr, exit status 2), like the Go `LockLeaser` under `nomad var lock` when
    /// its protected function returns after the leaser closed its error channel
    /// (api/locks.go): no release, no error of its own. The protected process ends with
    /// lock-sidecar through its parent-death signal.
    PanicsOnSigterm,
}

/// An allowed behaviour that differs from the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Variant {
    /// Renews every 0.7 × TTL, like the Go `LockLeaser`, instead of TTL/2.
    #[value(name = "renew-0.7")]
    Renew07,
    /// Exits 1 instead of the protected process's status when that process fails (like
    /// `nomad var lock`).
    #[value(name = "exit-1")]
    Exit1,
    /// Exits 1 at once, without starting the protected process (or writing the sentinel) and
    /// without retrying, when an acquire is answered 409 (another holder has the lock): the
    /// job's restart policy starts it again. Other acquire failures are retried as by default.
    ExitOnConflict,
    /// Renews every TTL/3 instead of TTL/2.
    RenewThird,
    /// Retries a failed release until the server would have freed the lock anyway (3 × TTL
    /// plus the lock delay), instead of for one TTL: after a long outage its release reaches
    /// Nomad once the lock is cleared, meets Nomad's 500 "variable doesn't hold a lock" and
    /// stops there, as on any release of a lock that is gone.
    ReleaseUntilFreed,
    /// Keeps the protected process in lock-sidecar's own process group instead of one of its
    /// own, as a Go `exec.Cmd` does: a SIGKILL of lock-sidecar's group takes it too.
    SameGroup,
    /// Sends the token as `Authorization: Bearer <token>` instead of `X-Nomad-Token` (Nomad's
    /// HTTP API reads either).
    BearerToken,
    /// Adds an empty `cas=` to every lock request's query, as some HTTP clients do with an
    /// unset parameter (Nomad refuses `cas` with a lock flag only when it has a value).
    EmptyCas,
    /// Counts its lock as held for 2 × TTL plus half the lock delay after the last successful
    /// request instead of one TTL: past the leader's 2 × TTL timer, inside the lock delay that
    /// keeps any other holder out until the lock leaves the state (nomad/locks.go). Against the
    /// guide's advice (stop once the TTL has passed), never two copies at once.
    TrustsGrace,
    /// On SIGTERM or SIGINT kills the protected process's group with SIGKILL at once instead of
    /// forwarding the signal, as Go's `exec.CommandContext` does when its context is cancelled
    /// (a wrapper around the `LockLeaser` that cancels on the signal); then releases as usual.
    KillChildOnSignal,
    /// Tries each renew for one TTL from its first attempt (retrying failures for one TTL
    /// counted from the first that failed) instead of stopping the protected process 0.8 × TTL
    /// after the last success, and stops it only then: the guide's lock-renew sequence ("On failure: retry with backoff
    /// up to TTL. If TTL expires, ... exit"), and what Nomad's Go helper does (api/retry.go
    /// caps a call's retries at the TTL; with renews every 0.7 × TTL it stops about 1.7 × TTL
    /// after its last success). Still gone long before Nomad can free the lock.
    RetriesForTtl,
}

/// The switches in force.
#[derive(Clone, Debug, Default)]
pub struct Switches {
    faults: BTreeSet<Fault>,
    variants: BTreeSet<Variant>,
}

impl Switches {
    /// From the command line's lists.
    pub fn new(faults: &[Fault], variants: &[Variant]) -> Self {
        Self {
            faults: faults.iter().copied().collect(),
            variants: variants.iter().copied().collect(),
        }
    }

    /// Whether a fault is on.
    pub fn fault(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// Whether a variant is on.
    pub fn variant(&self, variant: Variant) -> bool {
        self.variants.contains(&variant)
    }

    /// `fault renews-late, variant exit-1` for the start-up line; `None` when nothing is on.
    pub fn describe(&self) -> Option<String> {
        let mut parts: Vec<String> = self
            .faults
            .iter()
            .map(|f| format!("fault {}", value_name(f)))
            .collect();
        parts.extend(
            self.variants
                .iter()
                .map(|v| format!("variant {}", value_name(v))),
        );
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// The name a switch has on the command line.
pub fn value_name<T: ValueEnum>(value: &T) -> String {
    value
        .to_possible_value()
        .map(|p| p.get_name().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_on_the_command_line() {
        let names: Vec<String> = Fault::value_variants().iter().map(value_name).collect();
        assert_eq!(
            names,
            [
                "renews-late",
                "ignores-conflict",
                "starts-before-acquire",
                "never-releases",
                "keeps-child",
                "retries-forever-403",
                "malformed-release",
                "ignores-sigterm",
                "ignores-sigint",
                "never-gives-up",
                "ttl-as-number",
                "ignores-namespace",
                "no-request-timeout",
                "deadlock-on-sigterm",
                "panics-on-late-409",
                "retries-release-forever",
                "no-parent-death-signal",
                "panics-on-sigterm"
            ]
        );
        let variants: Vec<String> = Variant::value_variants().iter().map(value_name).collect();
        assert_eq!(
            variants,
            [
                "renew-0.7",
                "exit-1",
                "exit-on-conflict",
                "renew-third",
                "release-until-freed",
                "same-group",
                "bearer-token",
                "empty-cas",
                "trusts-grace",
                "kill-child-on-signal",
                "retries-for-ttl"
            ]
        );
    }

    #[test]
    fn describe_lists_what_is_on() {
        assert_eq!(Switches::default().describe(), None);
        let switches = Switches::new(&[Fault::NeverReleases], &[Variant::Exit1]);
        assert!(switches.fault(Fault::NeverReleases));
        assert!(!switches.fault(Fault::KeepsChild));
        assert!(switches.variant(Variant::Exit1));
        assert_eq!(
            switches.describe().as_deref(),
            Some("fault never-releases, variant exit-1")
        );
    }
}
