//! The faults a [`super::proxy::Proxy`] applies: which operation a request is, rules set by a
//! step ("answer the next 2 renews with 503"), partition windows, and seeded random campaigns.
//!
//! A request is first checked against the partition windows (a `Hang` window holds it until the
//! window ends), then against the rules in the order they were added (the first rule that
//! matches its operation and still has uses left applies), and only then against a running
//! campaign. Everything here is plain data plus a deterministic generator, so a campaign is
//! repeatable from its seed: the same seed and client label give the same partition windows,
//! and the k-th request the campaign looks at gets the same fault.

use std::time::{Duration, Instant};

use serde::Serialize;

/// Failures to set up a fault.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FaultError {
    #[error("failed to inject status {status}: only statuses 400 to 599 can be injected")]
    BadStatus { status: u16 },
    #[error("failed to start the campaign: {0}")]
    BadCampaign(String),
}

/// What a request to the Variables API does, as far as the lock suite cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// `PUT|POST /v1/var/<path>?lock-acquire`
    Acquire,
    /// `PUT|POST /v1/var/<path>?lock-renew`
    Renew,
    /// `PUT|POST /v1/var/<path>?lock-release`
    Release,
    /// `GET` (or `HEAD`) of anything.
    Read,
    /// Anything else: plain writes, deletes, requests with several lock flags.
    Other,
}

impl Operation {
    /// The three lock operations.
    pub const LOCK: [Operation; 3] = [Operation::Acquire, Operation::Renew, Operation::Release];

    /// Recognise a request by its method and raw query string. The lock flags count by their
    /// presence (`lock-acquire`, `lock-acquire=`, `lock-acquire=x`), as Nomad reads them; a
    /// request with more than one of them is `Other` (Nomad answers it with 400).
    pub fn classify(method: &str, query: &str) -> Operation {
        let method = method.to_ascii_uppercase();
        if method == "GET" || method == "HEAD" {
            return Operation::Read;
        }
        if method != "PUT" && method != "POST" {
            return Operation::Other;
        }
        let mut found = None;
        let mut flags = 0;
        for pair in query.split('&') {
            let key = pair.split_once('=').map_or(pair, |(k, _)| k);
            let op = match key {
                "lock-acquire" => Operation::Acquire,
                "lock-renew" => Operation::Renew,
                "lock-release" => Operation::Release,
                _ => continue,
            };
            if found != Some(op) {
                flags += 1;
            }
            found = Some(op);
        }
        match (found, flags) {
            (Some(op), 1) => op,
            _ => Operation::Other,
        }
    }

    /// The name reports use: the contract's `lock-acquire`, `lock-renew`, `lock-release`, or
    /// `read` / `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Acquire => "lock-acquire",
            Operation::Renew => "lock-renew",
            Operation::Release => "lock-release",
            Operation::Read => "read",
            Operation::Other => "other",
        }
    }
}

/// What happens to a request instead of (or before) plain forwarding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum FaultAction {
    /// Forward it (after the fault's delay).
    Forward,
    /// Answer this status without forwarding, with a Nomad-like plain-text body.
    Status { status: u16 },
    /// Drop the client's connection without answering (a TCP reset on TCP).
    Reset,
}

/// A delay, then an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fault {
    pub delay: Duration,
    pub action: FaultAction,
}

impl Fault {
    /// Forward after `delay`.
    pub fn latency(delay: Duration) -> Fault {
        Fault {
            delay,
            action: FaultAction::Forward,
        }
    }

    /// Answer `status` (400..=599) without forwarding.
    pub fn status(status: u16) -> Result<Fault, FaultError> {
        if !(400..=599).contains(&status) {
            return Err(FaultError::BadStatus { status });
        }
        Ok(Fault {
            delay: Duration::ZERO,
            action: FaultAction::Status { status },
        })
    }

    /// Drop the connection without answering.
    pub fn reset() -> Fault {
        Fault {
            delay: Duration::ZERO,
            action: FaultAction::Reset,
        }
    }

    /// The same fault, after `delay`.
    pub fn after(mut self, delay: Duration) -> Fault {
        self.delay = delay;
        self
    }

    /// `latency 200ms`, `status 503`, `latency 1s then reset`.
    pub fn describe(&self) -> String {
        let action = match self.action {
            FaultAction::Forward => None,
            FaultAction::Status { status } => Some(format!("status {status}")),
            FaultAction::Reset => Some("reset".to_string()),
        };
        match (self.delay.is_zero(), action) {
            (true, Some(a)) => a,
            (true, None) => "none".to_string(),
            (false, None) => format!("latency {}", crate::fmt_duration(self.delay)),
            (false, Some(a)) => format!("latency {} then {a}", crate::fmt_duration(self.delay)),
        }
    }
}

/// A fault for requests of some operations, for the next N of them or until cleared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FaultRule {
    /// The operations it applies to; empty means every request.
    pub ops: Vec<Operation>,
    pub fault: Fault,
    /// How many more requests it applies to; `None` until cleared.
    pub remaining: Option<u32>,
}

impl FaultRule {
    /// `fault` for every request, until cleared.
    pub fn new(fault: Fault) -> FaultRule {
        FaultRule {
            ops: Vec::new(),
            fault,
            remaining: None,
        }
    }

    /// Only for requests of these operations.
    pub fn only(mut self, ops: &[Operation]) -> FaultRule {
        self.ops = ops.to_vec();
        self
    }

    /// Only for the next `n` matching requests.
    pub fn next(mut self, n: u32) -> FaultRule {
        self.remaining = Some(n);
        self
    }

    fn matches(&self, op: Operation) -> bool {
        self.remaining != Some(0) && (self.ops.is_empty() || self.ops.contains(&op))
    }
}

/// Handle of an added rule, to clear it alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RuleId(pub u64);

/// How a partition looks to the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionMode {
    /// The proxy stops listening: new connections are refused, open ones are cut.
    Refuse,
    /// Connections are accepted but requests get no answer until the window ends; then they
    /// are forwarded (a healed network delivering late), unless the client gave up.
    Hang,
}

impl PartitionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            PartitionMode::Refuse => "refuse",
            PartitionMode::Hang => "hang",
        }
    }
}

/// Who set a partition window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultSource {
    /// A step, through the proxy's methods.
    Step,
    /// A running campaign.
    Campaign,
}

/// A partition, past, present or planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionWindow {
    pub start: Instant,
    /// `None` until healed.
    pub end: Option<Instant>,
    pub mode: PartitionMode,
    pub source: FaultSource,
}

impl PartitionWindow {
    pub fn contains(&self, at: Instant) -> bool {
        self.start <= at && self.end.is_none_or(|end| at < end)
    }
}

/// Probabilities per request and partition frequency of a campaign.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FaultRates {
    /// Operations the campaign touches; empty means every request.
    pub ops: Vec<Operation>,
    /// Chance that a request is delayed (independent of the other faults).
    pub latency: f64,
    /// Largest added delay; the delay is uniform in [0, max_latency].
    pub max_latency: Duration,
    /// Chance that a request is answered with one of `statuses` instead of being forwarded.
    pub error: f64,
    /// Statuses to answer, picked uniformly (e.g. 500, 502, 503, 429, 403).
    pub statuses: Vec<u16>,
    /// Chance that a request's connection is reset.
    pub reset: f64,
    /// Average number of partitions per minute (0 for none).
    pub partitions_per_minute: f64,
    /// Shortest and longest partition.
    pub partition_min: Duration,
    pub partition_max: Duration,
    /// Modes to pick from for each partition (empty means `Refuse`).
    pub partition_modes: Vec<PartitionMode>,
}

impl Default for FaultRates {
    /// Nothing happens.
    fn default() -> Self {
        FaultRates {
            ops: Operation::LOCK.to_vec(),
            latency: 0.0,
            max_latency: Duration::ZERO,
            error: 0.0,
            statuses: vec![500, 502, 503, 429],
            reset: 0.0,
            partitions_per_minute: 0.0,
            partition_min: Duration::from_millis(100),
            partition_max: Duration::from_secs(1),
            partition_modes: vec![PartitionMode::Refuse, PartitionMode::Hang],
        }
    }
}

/// A seeded random fault schedule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Campaign {
    pub seed: u64,
    /// How long it runs from its start.
    pub duration: Duration,
    pub rates: FaultRates,
}

/// A partition a campaign will cause, relative to the campaign's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PlannedPartition {
    pub offset: Duration,
    pub length: Duration,
    pub mode: PartitionMode,
}

impl Campaign {
    pub fn validate(&self) -> Result<(), FaultError> {
        let r = &self.rates;
        for (name, v) in [
            ("latency", r.latency),
            ("error", r.error),
            ("reset", r.reset),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(FaultError::BadCampaign(format!(
                    "the {name} rate {v} is not between 0 and 1"
                )));
            }
        }
        if r.error + r.reset > 1.0 {
            return Err(FaultError::BadCampaign(format!(
                "the error and reset rates add up to {} (more than 1)",
                r.error + r.reset
            )));
        }
        if r.error > 0.0 && r.statuses.is_empty() {
            return Err(FaultError::BadCampaign(
                "an error rate needs at least one status".into(),
            ));
        }
        if let Some(s) = r.statuses.iter().find(|s| !(400..=599).contains(*s)) {
            return Err(FaultError::BadCampaign(format!(
                "status {s} cannot be injected (400 to 599 only)"
            )));
        }
        if !r.partitions_per_minute.is_finite() || r.partitions_per_minute < 0.0 {
            return Err(FaultError::BadCampaign(format!(
                "partitions per minute must be a number >= 0, not {}",
                r.partitions_per_minute
            )));
        }
        if r.partition_min > r.partition_max {
            return Err(FaultError::BadCampaign(
                "the shortest partition is longer than the longest".into(),
            ));
        }
        Ok(())
    }

    /// The seed a client's proxy uses: the campaign's seed mixed with the client's label, so
    /// that clients of one campaign get different (but repeatable) faults.
    pub fn seed_for(&self, label: &str) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in label.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.seed ^ h
    }

    /// The partitions this campaign causes for the client `label`: gaps drawn from an
    /// exponential distribution with the configured mean, lengths uniform between the
    /// shortest and longest; the last one is cut at the campaign's end.
    pub fn planned_partitions(&self, label: &str) -> Vec<PlannedPartition> {
        let r = &self.rates;
        if r.partitions_per_minute <= 0.0 || self.duration.is_zero() {
            return Vec::new();
        }
        let mut rng = SplitMix::new(self.seed_for(label) ^ 0x5041_5254_4954_494f);
        let mean_gap = 60.0 / r.partitions_per_minute;
        let modes = if r.partition_modes.is_empty() {
            vec![PartitionMode::Refuse]
        } else {
            r.partition_modes.clone()
        };
        let mut out = Vec::new();
        let mut t = 0.0f64;
        let end = self.duration.as_secs_f64();
        // Bounded: at most one partition per 10 ms of campaign, and never more than 10 000.
        while out.len() < 10_000 {
            let gap = -mean_gap * (1.0 - rng.next_f64()).ln();
            let start = t + gap;
            if !start.is_finite() || start >= end {
                break;
            }
            let span = r
                .partition_max
                .saturating_sub(r.partition_min)
                .as_secs_f64();
            let length = (r.partition_min.as_secs_f64() + span * rng.next_f64()).min(end - start);
            let mode = modes[(rng.next_u64() % modes.len() as u64) as usize];
            out.push(PlannedPartition {
                offset: Duration::from_secs_f64(start),
                length: Duration::from_secs_f64(length.max(0.0)),
                mode,
            });
            t = start + length.max(0.01);
        }
        out
    }
}

/// A small deterministic generator (SplitMix64): enough for fault rolls, and stable across
/// versions of any random crate.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What the plan decided for one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Forward untouched.
    Pass,
    /// Hold the request until the hang partition ends (`None`: until healed).
    Hang {
        until: Option<Instant>,
        source: FaultSource,
    },
    /// A refusing partition is in force: cut the connection.
    Refuse { source: FaultSource },
    /// Apply a fault.
    Apply {
        fault: Fault,
        source: FaultSource,
        rule: Option<RuleId>,
    },
}

#[derive(Debug)]
struct RunningCampaign {
    campaign: Campaign,
    started: Instant,
    rng: SplitMix,
}

/// The runtime state of a proxy's faults.
#[derive(Debug, Default)]
pub struct FaultPlan {
    rules: Vec<(RuleId, FaultRule)>,
    next_rule: u64,
    partitions: Vec<PartitionWindow>,
    campaign: Option<RunningCampaign>,
}

/// Most partition windows a plan keeps (older ones are forgotten first).
const MAX_WINDOWS: usize = 10_000;

impl FaultPlan {
    pub fn add_rule(&mut self, rule: FaultRule) -> RuleId {
        let id = RuleId(self.next_rule);
        self.next_rule += 1;
        self.rules.push((id, rule));
        id
    }

    pub fn remove_rule(&mut self, id: RuleId) -> bool {
        let before = self.rules.len();
        self.rules.retain(|(r, _)| *r != id);
        before != self.rules.len()
    }

    pub fn clear_rules(&mut self) {
        self.rules.clear();
    }

    pub fn rules(&self) -> Vec<(RuleId, FaultRule)> {
        self.rules.clone()
    }

    /// Adds a partition window; a window still open (no end) is closed at its start first.
    pub fn add_partition(&mut self, window: PartitionWindow) {
        for w in &mut self.partitions {
            if w.end.is_none() {
                w.end = Some(window.start.max(w.start));
            }
        }
        if self.partitions.len() >= MAX_WINDOWS {
            self.partitions.remove(0);
        }
        self.partitions.push(window);
    }

    /// Ends every current partition now and drops planned ones.
    pub fn heal(&mut self, now: Instant) {
        self.partitions.retain(|w| w.start <= now);
        for w in &mut self.partitions {
            if w.end.is_none_or(|e| e > now) {
                w.end = Some(now);
            }
        }
    }

    /// Every window, past and planned, in the order they were added.
    pub fn partitions(&self) -> Vec<PartitionWindow> {
        self.partitions.clone()
    }

    /// The window in force at `at` (the latest added wins).
    pub fn partition_at(&self, at: Instant) -> Option<PartitionWindow> {
        self.partitions
            .iter()
            .rev()
            .find(|w| w.contains(at))
            .copied()
    }

    /// The next instant after `at` at which a window starts or ends.
    pub fn next_change(&self, at: Instant) -> Option<Instant> {
        self.partitions
            .iter()
            .flat_map(|w| [Some(w.start), w.end])
            .flatten()
            .filter(|t| *t > at)
            .min()
    }

    /// Starts `campaign` at `now`: its partitions become windows, its per-request rolls start.
    /// A running campaign is stopped first.
    pub fn start_campaign(
        &mut self,
        campaign: Campaign,
        label: &str,
        now: Instant,
    ) -> Result<Vec<PlannedPartition>, FaultError> {
        campaign.validate()?;
        self.stop_campaign(now);
        let planned = campaign.planned_partitions(label);
        for p in &planned {
            self.add_partition(PartitionWindow {
                start: now + p.offset,
                end: Some(now + p.offset + p.length),
                mode: p.mode,
                source: FaultSource::Campaign,
            });
        }
        let rng = SplitMix::new(campaign.seed_for(label));
        self.campaign = Some(RunningCampaign {
            campaign,
            started: now,
            rng,
        });
        Ok(planned)
    }

    /// Stops the campaign: its future windows are dropped, a current one ends now.
    pub fn stop_campaign(&mut self, now: Instant) {
        if self.campaign.take().is_none() {
            return;
        }
        self.partitions
            .retain(|w| w.source != FaultSource::Campaign || w.start <= now);
        for w in &mut self.partitions {
            if w.source == FaultSource::Campaign && w.end.is_none_or(|e| e > now) {
                w.end = Some(now);
            }
        }
    }

    /// Decides what happens to a request of `op` arriving at `now`, using up a rule's count.
    pub fn decide(&mut self, op: Operation, now: Instant) -> Decision {
        if let Some(w) = self.partition_at(now) {
            return match w.mode {
                PartitionMode::Hang => Decision::Hang {
                    until: w.end,
                    source: w.source,
                },
                PartitionMode::Refuse => Decision::Refuse { source: w.source },
            };
        }
        if let Some((id, rule)) = self.rules.iter_mut().find(|(_, r)| r.matches(op)) {
            if let Some(n) = rule.remaining.as_mut() {
                *n -= 1;
            }
            let (id, fault) = (*id, rule.fault);
            self.rules.retain(|(_, r)| r.remaining != Some(0));
            return Decision::Apply {
                fault,
                source: FaultSource::Step,
                rule: Some(id),
            };
        }
        let Some(c) = self.campaign.as_mut() else {
            return Decision::Pass;
        };
        if now.saturating_duration_since(c.started) >= c.campaign.duration {
            self.campaign = None;
            return Decision::Pass;
        }
        let rates = &c.campaign.rates;
        if !rates.ops.is_empty() && !rates.ops.contains(&op) {
            return Decision::Pass;
        }
        // Always four draws per request, so the k-th request's fault depends on k only.
        let (kind, pick, slow, amount) = (
            c.rng.next_f64(),
            c.rng.next_u64(),
            c.rng.next_f64(),
            c.rng.next_f64(),
        );
        let delay = if slow < rates.latency {
            rates.max_latency.mul_f64(amount)
        } else {
            Duration::ZERO
        };
        let action = if kind < rates.reset {
            FaultAction::Reset
        } else if kind < rates.reset + rates.error && !rates.statuses.is_empty() {
            FaultAction::Status {
                status: rates.statuses[(pick % rates.statuses.len() as u64) as usize],
            }
        } else {
            FaultAction::Forward
        };
        if action == FaultAction::Forward && delay.is_zero() {
            return Decision::Pass;
        }
        Decision::Apply {
            fault: Fault { delay, action },
            source: FaultSource::Campaign,
            rule: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_recognised_from_method_and_query() {
        let table = [
            ("PUT", "lock-acquire", Operation::Acquire),
            ("PUT", "lock-acquire=", Operation::Acquire),
            ("POST", "namespace=x&lock-renew=1", Operation::Renew),
            ("put", "lock-release", Operation::Release),
            ("GET", "lock-acquire", Operation::Read),
            ("PUT", "", Operation::Other),
            ("PUT", "cas=0", Operation::Other),
            ("PUT", "lock-acquire&lock-renew", Operation::Other),
            ("DELETE", "lock-release", Operation::Other),
            ("PUT", "lock-acquirex", Operation::Other),
            ("PUT", "lock-acquire&lock-acquire", Operation::Acquire),
        ];
        for (method, query, want) in table {
            assert_eq!(
                Operation::classify(method, query),
                want,
                "{method} ?{query}"
            );
        }
    }

    #[test]
    fn statuses_outside_4xx_5xx_are_refused() {
        assert!(Fault::status(503).is_ok());
        assert_eq!(
            Fault::status(200),
            Err(FaultError::BadStatus { status: 200 })
        );
        assert!(Fault::status(600).is_err());
    }

    #[test]
    fn rules_apply_in_order_and_run_out() {
        let now = Instant::now();
        let mut plan = FaultPlan::default();
        plan.add_rule(
            FaultRule::new(Fault::status(503).unwrap())
                .only(&[Operation::Renew])
                .next(2),
        );
        let always = plan.add_rule(FaultRule::new(Fault::latency(Duration::from_millis(5))));
        let first = plan.decide(Operation::Renew, now);
        assert!(
            matches!(first, Decision::Apply { fault, .. } if fault.action == FaultAction::Status { status: 503 })
        );
        // An acquire skips the renew-only rule.
        assert!(
            matches!(plan.decide(Operation::Acquire, now), Decision::Apply { rule: Some(r), .. } if r == always)
        );
        assert!(matches!(
            plan.decide(Operation::Renew, now),
            Decision::Apply { fault, .. } if fault.action == FaultAction::Status { status: 503 }
        ));
        // Used up: the latency rule is next.
        assert!(
            matches!(plan.decide(Operation::Renew, now), Decision::Apply { rule: Some(r), .. } if r == always)
        );
        assert!(plan.remove_rule(always));
        assert_eq!(plan.decide(Operation::Renew, now), Decision::Pass);
    }

    #[test]
    fn hang_windows_hold_requests_and_heal_ends_them() {
        let t = Instant::now();
        let mut plan = FaultPlan::default();
        plan.add_partition(PartitionWindow {
            start: t + Duration::from_millis(100),
            end: Some(t + Duration::from_millis(200)),
            mode: PartitionMode::Hang,
            source: FaultSource::Step,
        });
        assert_eq!(plan.decide(Operation::Renew, t), Decision::Pass);
        assert_eq!(
            plan.decide(Operation::Renew, t + Duration::from_millis(150)),
            Decision::Hang {
                until: Some(t + Duration::from_millis(200)),
                source: FaultSource::Step,
            }
        );
        assert_eq!(
            plan.decide(Operation::Renew, t + Duration::from_millis(200)),
            Decision::Pass
        );
        assert_eq!(plan.next_change(t), Some(t + Duration::from_millis(100)));
        plan.heal(t + Duration::from_millis(120));
        assert_eq!(
            plan.partition_at(t + Duration::from_millis(150)),
            None,
            "healed"
        );
    }

    fn campaign(seed: u64) -> Campaign {
        Campaign {
            seed,
            duration: Duration::from_secs(60),
            rates: FaultRates {
                latency: 0.3,
                max_latency: Duration::from_millis(100),
                error: 0.2,
                reset: 0.1,
                partitions_per_minute: 6.0,
                ..FaultRates::default()
            },
        }
    }

    fn rolls(seed: u64, label: &str) -> Vec<Decision> {
        let t = Instant::now();
        let mut plan = FaultPlan::default();
        // No partitions, to look at the rolls alone.
        let mut c = campaign(seed);
        c.rates.partitions_per_minute = 0.0;
        plan.start_campaign(c, label, t).unwrap();
        (0..200).map(|_| plan.decide(Operation::Renew, t)).collect()
    }

    #[test]
    fn campaigns_repeat_from_their_seed_and_differ_per_client() {
        assert_eq!(rolls(7, "a"), rolls(7, "a"));
        assert_ne!(rolls(7, "a"), rolls(7, "b"));
        assert_ne!(rolls(7, "a"), rolls(8, "a"));
        let c = campaign(7);
        assert_eq!(c.planned_partitions("a"), c.planned_partitions("a"));
        assert_ne!(c.planned_partitions("a"), c.planned_partitions("b"));
        // About the configured rates over many requests.
        let many: Vec<Decision> = {
            let t = Instant::now();
            let mut plan = FaultPlan::default();
            let mut c = campaign(1);
            c.rates.partitions_per_minute = 0.0;
            plan.start_campaign(c, "x", t).unwrap();
            (0..5000)
                .map(|_| plan.decide(Operation::Renew, t))
                .collect()
        };
        let resets = many
            .iter()
            .filter(|d| matches!(d, Decision::Apply { fault, .. } if fault.action == FaultAction::Reset))
            .count();
        assert!((350..650).contains(&resets), "{resets} resets of 5000");
    }

    #[test]
    fn planned_partitions_stay_inside_the_campaign() {
        let c = campaign(42);
        let planned = c.planned_partitions("client-1");
        assert!(!planned.is_empty());
        for p in &planned {
            assert!(p.offset + p.length <= c.duration, "{p:?}");
            assert!(p.length <= c.rates.partition_max, "{p:?}");
        }
        for pair in planned.windows(2) {
            assert!(
                pair[0].offset + pair[0].length <= pair[1].offset,
                "{pair:?}"
            );
        }
    }

    #[test]
    fn campaign_only_touches_its_operations_and_ends() {
        let t = Instant::now();
        let mut plan = FaultPlan::default();
        let mut c = campaign(3);
        c.rates.reset = 1.0;
        c.rates.error = 0.0;
        c.rates.partitions_per_minute = 0.0;
        c.duration = Duration::from_secs(1);
        plan.start_campaign(c, "a", t).unwrap();
        assert_eq!(plan.decide(Operation::Read, t), Decision::Pass);
        assert!(matches!(
            plan.decide(Operation::Acquire, t),
            Decision::Apply {
                source: FaultSource::Campaign,
                ..
            }
        ));
        assert_eq!(
            plan.decide(Operation::Acquire, t + Duration::from_secs(2)),
            Decision::Pass
        );
    }

    #[test]
    fn bad_campaigns_are_refused() {
        let mut c = campaign(1);
        c.rates.error = 1.5;
        assert!(c.validate().is_err());
        let mut c = campaign(1);
        c.rates.error = 0.7;
        c.rates.reset = 0.7;
        assert!(c.validate().is_err());
        let mut c = campaign(1);
        c.rates.statuses = vec![200];
        assert!(c.validate().is_err());
        let mut c = campaign(1);
        c.rates.partitions_per_minute = f64::NAN;
        assert!(c.validate().is_err());
        assert!(campaign(1).validate().is_ok());
    }

    #[test]
    fn describe_reads_well() {
        assert_eq!(Fault::status(503).unwrap().describe(), "status 503");
        assert_eq!(Fault::reset().describe(), "reset");
        assert_eq!(
            Fault::reset().after(Duration::from_millis(200)).describe(),
            "latency 200ms then reset"
        );
    }
}
