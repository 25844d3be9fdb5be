//! The run record: everything one run of the harness found, and nothing about how to show it.
//!
//! The recorder in the harness is the only producer; the writers in this crate are the only
//! consumers. The record is plain serde data so that it can be written as JSON and rendered again
//! later without the plugin.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bumped whenever a field changes meaning or disappears. Adding a field does not bump it.
pub const SCHEMA_VERSION: u32 = 1;

/// How the reason of a skipped clause begins when the machine, not the plugin, kept it from
/// being judged (a driver that fingerprints UNDETECTED on this node): such a run is incomplete
/// (exit 3), never conformant on the strength of what could not be tried.
pub const NOT_JUDGED_ON_THIS_NODE: &str = "not judged on this node: ";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunRecord {
    pub schema_version: u32,
    pub run_id: String,
    /// Plugin kind: `dhv`, `csi`, `driver`, `lock`.
    pub kind: String,
    pub harness: HarnessInfo,
    pub subject: Subject,
    pub profile: ProfileInfo,
    pub seed: u64,
    /// The command line the run was started with, one argument per entry.
    pub command_line: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
    /// True when the run was stopped before every selected scenario had finished.
    pub interrupted: bool,
    /// Whether SHOULD failures count as failures (`--strict`).
    #[serde(default)]
    pub strict: bool,
    /// Where the run happened.
    #[serde(default)]
    pub environment: Environment,
    /// Set when the run covered one shard of the clauses (`--shard M/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Run IDs of the records this one was merged from (`report --merge`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
    pub cases: Vec<Case>,
}

/// The machine and build a run happened on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Environment {
    pub os: String,
    pub kernel: String,
    pub arch: String,
    pub hostname: String,
    /// Git commit the harness was built from, when known.
    pub harness_commit: Option<String>,
}

/// Shard `index` (1-based) of `total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Shard {
    pub index: u32,
    pub total: u32,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.total)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HarnessInfo {
    pub name: String,
    pub version: String,
}

/// The plugin under test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Subject {
    /// Path or endpoint of the plugin.
    pub plugin: String,
    /// The version the plugin reported about itself, when it reported one.
    pub version: Option<String>,
    /// Anything else the harness learned while probing (capabilities, names).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub details: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProfileInfo {
    pub name: String,
    /// The Nomad versions whose behaviour the profile describes, e.g. `>= 1.10.0, < 2.1.0`.
    pub nomad_versions: String,
}

/// One scenario of the spec, that is one contract clause, and what became of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Case {
    /// Stable clause ID, e.g. `DHV-CREATE-IDEMPOTENT`.
    pub clause: String,
    pub level: Level,
    /// Scenario title.
    pub title: String,
    /// What the clause requires and why, from the scenario's description.
    pub text: String,
    /// What the clause rests on: the spec section and its RFC 2119 word, or the Nomad source
    /// and what Nomad does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    /// Plugin kind and operation: together they form the JUnit classname `<kind>.<operation>`.
    pub kind: String,
    pub operation: String,
    /// The spec file the scenario comes from, and its line.
    pub spec_file: String,
    pub line: u32,
    pub verdict: Verdict,
    /// Why the verdict is not Pass: what was required, what was seen, how to reproduce.
    pub reason: Option<String>,
    /// For a Blocked case: the clause whose failure kept this one from being judged (the root
    /// cause, e.g. `CSI-CONTROLLER-CREATE` when a precondition's CreateVolume failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<String>,
    /// A command line that runs this clause alone with the same seed.
    pub rerun: Option<String>,
    pub duration_ms: u64,
    pub steps: Vec<StepRecord>,
    pub events: Vec<OpEvent>,
    /// Observations from cleanup that are not failures (e.g. a mount the harness had to remove).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Artefacts the clause left for people to look at (a timeline drawing, a log).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// Set when the clause is on the run's list of known failures (`--known-failures`): the
    /// entry, and what became of it. The verdict above stays the one the run gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known: Option<KnownFailure>,
}

/// An entry of a list of known failures that names a clause of the run, and what became of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KnownFailure {
    /// Why the failure is known, as the list says.
    pub reason: String,
    /// Where it is tracked (an issue), when the list says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The plugin versions the entry is for (a go-version constraint such as `< 2.0.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_version: Option<String>,
    /// The last day the entry holds (`YYYY-MM-DD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// For a clause that is not on the list itself: the clause on the list whose failure
    /// blocked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    pub status: KnownStatus,
}

/// What an entry of the list of known failures did to its clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum KnownStatus {
    /// The clause failed as the list expects: shown as known, it does not count against the
    /// run (JUnit `skipped`).
    Known,
    /// The clause passed: the list is out of date (a failure under `--strict`).
    Fixed,
    /// The entry expired before the run: the failure counts again.
    Expired,
}

impl KnownStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            KnownStatus::Known => "known",
            KnownStatus::Fixed => "fixed",
            KnownStatus::Expired => "expired",
        }
    }
}

/// The most content an attachment keeps (1 MiB); the rest is cut off and marked truncated.
pub const MAX_ATTACHMENT_BYTES: usize = 1024 * 1024;

/// Media type of an SVG drawing: the HTML report shows it as an image.
pub const MEDIA_SVG: &str = "image/svg+xml";
/// Media type of plain text: shown as preformatted text.
pub const MEDIA_TEXT: &str = "text/plain";

/// An artefact attached to a case: text content (SVG source, a log, a dump) with a title and a
/// media type that says how to show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Attachment {
    pub title: String,
    /// `image/svg+xml` (drawn as an image in the HTML report), `text/plain`, `application/json`
    /// ... Anything but SVG is shown as text.
    pub media_type: String,
    /// The content, at most [`MAX_ATTACHMENT_BYTES`] of it.
    pub content: String,
    /// Size of the content before it was cut.
    pub total_bytes: u64,
    /// True when `content` holds only the first [`MAX_ATTACHMENT_BYTES`] of it.
    #[serde(default)]
    pub truncated: bool,
}

impl Attachment {
    /// An attachment of `content`, cut to [`MAX_ATTACHMENT_BYTES`] (at a character boundary).
    pub fn new(title: impl Into<String>, media_type: &str, content: String) -> Self {
        Self::bounded(title, media_type, content, MAX_ATTACHMENT_BYTES)
    }

    /// An attachment of `content` cut to at most `max` bytes.
    pub fn bounded(
        title: impl Into<String>,
        media_type: &str,
        mut content: String,
        max: usize,
    ) -> Self {
        let total_bytes = content.len() as u64;
        let truncated = content.len() > max;
        if truncated {
            let end = crate::text::head(&content, max).len();
            content.truncate(end);
        }
        Attachment {
            title: title.into(),
            media_type: media_type.trim().to_ascii_lowercase(),
            content,
            total_bytes,
            truncated,
        }
    }

    /// Whether the HTML report draws it as an image: a complete SVG drawing. A cut one would
    /// not draw, so it is shown as text instead.
    pub fn is_svg(&self) -> bool {
        self.media_type == MEDIA_SVG && !self.truncated
    }
}

impl Case {
    /// JUnit-style name: the clause ID first, so that history survives title edits.
    pub fn display_name(&self) -> String {
        format!("{}: {}", self.clause, self.title)
    }

    pub fn classname(&self) -> String {
        format!("{}.{}", self.kind, self.operation)
    }

    /// Whether this case counts against conformance (a MUST that failed or could not be judged
    /// because of another failure, or any such clause under `--strict`).
    pub fn is_blocking(&self, strict: bool) -> bool {
        match self.known_status() {
            // A failure the list of known failures expects does not count.
            Some(KnownStatus::Known) => return false,
            // A clause on the list that passes: the list is out of date.
            Some(KnownStatus::Fixed) => return strict,
            Some(KnownStatus::Expired) | None => {}
        }
        (self.verdict.is_failure() || self.verdict == Verdict::Blocked)
            && (self.level == Level::Must || strict)
    }

    /// What the list of known failures did to this clause, if it names it.
    pub fn known_status(&self) -> Option<KnownStatus> {
        self.known.as_ref().map(|k| k.status)
    }

    /// A failure (or a clause it blocked) the list of known failures expects.
    pub fn is_known(&self) -> bool {
        self.known_status() == Some(KnownStatus::Known)
    }

    /// Whether this case was skipped because of the node it ran on (its reason begins with
    /// [`NOT_JUDGED_ON_THIS_NODE`]), not because the plugin does not offer what it is about.
    pub fn not_judged_on_this_node(&self) -> bool {
        self.verdict == Verdict::Skip
            && self
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with(NOT_JUDGED_ON_THIS_NODE))
    }
}

#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Must,
    Should,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
        }
    }
}

/// Verdicts in rising order of severity; a case's verdict only ever rises.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    /// Not run, with a reason (capability absent, could not be provoked, run interrupted).
    Skip,
    /// Cut short by an interrupt of the run (Ctrl-C, SIGTERM): neither judged nor blamed on
    /// the plugin; what its cleanup could not undo is listed in its reason.
    Interrupted,
    /// Could not be judged because a precondition failed: the plugin broke another clause first
    /// (named in [`Case::blocked_by`]). Counts against conformance like a failure, but the
    /// summary counts it apart and reports group it under its root cause.
    Blocked,
    /// The plugin broke the clause.
    Fail,
    /// The harness could not judge the clause.
    Error,
    /// The plugin broke the clause by taking longer than its deadline.
    TimedOut,
    /// Something the scenario made could not be removed afterwards.
    Leaked,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Skip => "skip",
            Verdict::Interrupted => "interrupted",
            Verdict::Blocked => "blocked",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
            Verdict::TimedOut => "timed-out",
            Verdict::Leaked => "leaked",
        }
    }

    /// The plugin did not meet the clause (as opposed to: met it, was not tested, or the harness
    /// could not tell).
    pub fn is_failure(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::TimedOut | Verdict::Leaked)
    }

    pub fn raise(&mut self, to: Verdict) {
        if to > *self {
            *self = to;
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepRecord {
    pub keyword: String,
    pub text: String,
    pub outcome: StepOutcome,
    pub duration_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    Passed,
    Failed,
    /// The harness has no definition for the step text (a bug in a spec or the harness).
    Undefined,
    /// An earlier step failed, so this one never ran.
    NotRun,
}

/// One operation the harness performed against the plugin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpEvent {
    /// Operation as the contract spells it: `fingerprint`, `create`, `NodePublishVolume`.
    pub operation: String,
    /// Milliseconds since the case started.
    pub started_ms: u64,
    pub duration_ms: f64,
    /// The deadline the operation was held to, if any.
    pub deadline_ms: Option<u64>,
    pub request: Request,
    pub response: Response,
    /// A shell command that repeats this exact operation.
    pub reproduce: Option<String>,
    /// Observations about the call that are not part of the response (lingering processes...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// An executable run with an argv and an exact environment.
    Exec {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
    },
    /// A gRPC call: the full method path and the request message as JSON.
    Grpc {
        method: String,
        request: serde_json::Value,
    },
    /// An HTTP exchange the plugin made with the harness (or the harness with the plugin).
    Http {
        method: String,
        path: String,
        body: Option<serde_json::Value>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Exec {
        status: ExitStatus,
        stdout: Excerpt,
        stderr: Excerpt,
    },
    /// A gRPC status code name (`OK`, `NOT_FOUND`), its message, and the response message
    /// when the code is OK.
    Grpc {
        code: String,
        message: String,
        response: Option<serde_json::Value>,
    },
    Http {
        status: u16,
        body: Option<serde_json::Value>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExitStatus {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    /// The harness killed the process group because the deadline passed.
    KilledAtDeadline,
    /// The executable could not be started at all.
    SpawnFailed {
        message: String,
    },
    /// The harness stopped the process group to protect the machine (a filesystem fell below
    /// the free space the harness keeps): the call's outcome is the harness's, not the plugin's.
    StoppedByHarness {
        reason: String,
    },
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Exited { code } => write!(f, "exit status {code}"),
            ExitStatus::Signaled { signal } => write!(f, "killed by signal {signal}"),
            ExitStatus::KilledAtDeadline => write!(f, "killed at the deadline"),
            ExitStatus::SpawnFailed { message } => write!(f, "could not be started: {message}"),
            ExitStatus::StoppedByHarness { reason } => {
                write!(f, "stopped by the harness: {reason}")
            }
        }
    }
}

/// Captured output, possibly cut in the middle to respect the capture limit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Excerpt {
    /// The text (lossy UTF-8); when truncated, head and tail joined by a marker line.
    pub text: String,
    pub total_bytes: u64,
    pub truncated: bool,
}

/// How a whole run reads at a glance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Assessment {
    Conformant,
    ConformantWithWarnings,
    NotConformant,
    /// Every failure that counts is on the list of known failures (`--known-failures`).
    KnownFailuresOnly,
    /// Nothing was judged, or the harness could not judge some clauses and none failed.
    Incomplete,
}

impl Assessment {
    pub fn as_str(self) -> &'static str {
        match self {
            Assessment::Conformant => "conformant",
            Assessment::ConformantWithWarnings => "conformant with warnings",
            Assessment::NotConformant => "not conformant",
            Assessment::KnownFailuresOnly => "conformant but for known failures",
            Assessment::Incomplete => "incomplete",
        }
    }
}

/// Counts of cases by verdict and level.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tally {
    pub total: usize,
    pub passed: usize,
    pub skipped: usize,
    pub failed_must: usize,
    pub failed_should: usize,
    /// Cases that could not be judged because a precondition failed (any level).
    #[serde(default)]
    pub blocked: usize,
    /// Cases an interrupt of the run cut short.
    #[serde(default)]
    pub interrupted: usize,
    pub errors: usize,
    /// Failures (and the clauses they blocked) the list of known failures expects; counted
    /// here and nowhere else.
    #[serde(default)]
    pub known: usize,
    /// Clauses on the list of known failures that passed (counted in `passed` too).
    #[serde(default)]
    pub fixed: usize,
}

impl RunRecord {
    pub fn tally(&self) -> Tally {
        let mut t = Tally {
            total: self.cases.len(),
            ..Tally::default()
        };
        for c in &self.cases {
            if c.is_known() && c.verdict != Verdict::Pass {
                t.known += 1;
                continue;
            }
            if c.known_status() == Some(KnownStatus::Fixed) {
                t.fixed += 1;
            }
            match c.verdict {
                Verdict::Pass => t.passed += 1,
                Verdict::Skip => t.skipped += 1,
                Verdict::Interrupted => t.interrupted += 1,
                Verdict::Blocked => t.blocked += 1,
                Verdict::Error => t.errors += 1,
                v if v.is_failure() && c.level == Level::Must => t.failed_must += 1,
                _ => t.failed_should += 1,
            }
        }
        t
    }

    pub fn assessment(&self) -> Assessment {
        let t = self.tally();
        let blocking = self.cases.iter().any(|c| c.is_blocking(self.strict));
        if blocking {
            Assessment::NotConformant
        } else if t.errors > 0
            || t.blocked > 0
            || t.passed + t.failed_should + t.known == 0
            || self.interrupted
            || self.cases.iter().any(Case::not_judged_on_this_node)
        {
            // A blocked SHOULD clause: nothing failed, but not everything was judged.
            Assessment::Incomplete
        } else if t.known > 0 {
            Assessment::KnownFailuresOnly
        } else if t.failed_should > 0 {
            Assessment::ConformantWithWarnings
        } else {
            Assessment::Conformant
        }
    }
}

/// How much of the contract a run judged: a verdict is only as strong as the clauses behind it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Clauses the run selected.
    pub total: usize,
    /// Clauses with a verdict on the plugin: passed or failed.
    pub judged: usize,
    /// Skipped clauses, grouped by the head of their reason (what precedes its first colon),
    /// most common first: what made them not applicable.
    pub skipped: Vec<(String, usize)>,
    /// Blocked, errors and interrupted: clauses that could not be judged.
    pub not_judged: usize,
}

impl Coverage {
    /// `judged on 39 of 44 clauses` and, when some were not judged, why, as one sentence.
    pub fn sentence(&self) -> String {
        let mut s = format!("judged on {} of {} clauses", self.judged, self.total);
        let skipped: usize = self.skipped.iter().map(|(_, n)| n).sum();
        if skipped > 0 {
            let heads: Vec<String> = self
                .skipped
                .iter()
                .take(3)
                .map(|(why, n)| format!("{why}: {n}"))
                .collect();
            let more = self.skipped.len().saturating_sub(3);
            s.push_str(&format!(
                "; {skipped} not applicable ({}{})",
                heads.join("; "),
                if more > 0 {
                    format!("; {more} other reasons")
                } else {
                    String::new()
                }
            ));
        }
        if self.not_judged > 0 {
            s.push_str(&format!(
                "; {} could not be judged (blocked, errors or interrupted)",
                self.not_judged
            ));
        }
        s
    }
}

/// The head of a skip reason: what precedes its first colon (or its first 80 characters).
fn reason_head(reason: &str) -> String {
    let first = reason.lines().next().unwrap_or("").trim();
    let head = first.split(": ").next().unwrap_or(first);
    let head: String = head.chars().take(80).collect();
    if head.is_empty() {
        "without a reason".into()
    } else {
        head
    }
}

/// The first line the recorder gives a blocked case's reason: `blocked by ROOT: ...`.
const BLOCKED_LINE_END: &str = ": this clause cannot be judged because a call it needs failed";

/// The line above the list of what a clause's cleanup could not undo, in its reason.
pub const LEFT_BEHIND: &str = "left behind after cleanup:";

impl RunRecord {
    /// A blocked clause never names as its cause a clause that did not fail. A precondition that
    /// failed inside a clause whose own check passed (or was skipped), or inside a clause this
    /// run did not hold, is a finding of its own: the case's `blocked_by` is cleared and its
    /// reason says which clause judges that call and what became of it. Such a clause that also
    /// left something behind is Leaked: a blocked clause keeps Blocked over its leak only
    /// because the leak is taken for its root cause's doing, and here no root cause failed.
    /// `complete` says the record holds every clause that ran (not one shard's): only then is a
    /// root missing from it known not to have run.
    pub fn settle_preconditions(&mut self, complete: bool) {
        let verdicts: std::collections::HashMap<String, Verdict> = self
            .cases
            .iter()
            .map(|c| (c.clause.clone(), c.verdict))
            .collect();
        for case in &mut self.cases {
            let (Verdict::Blocked, Some(root)) = (case.verdict, case.blocked_by.as_deref()) else {
                continue;
            };
            let fate = match verdicts.get(root) {
                Some(Verdict::Pass) => "passed",
                Some(Verdict::Skip) => "was skipped",
                None if complete => "did not run in this run",
                _ => continue,
            };
            let line = format!(
                "precondition failed: a call this clause needs failed here, though {root}, the clause that judges that call, {fate}"
            );
            let prefix = format!("blocked by {root}{BLOCKED_LINE_END}");
            case.reason = Some(match case.reason.as_deref() {
                Some(r) => match r.strip_prefix(&prefix) {
                    Some(rest) => format!("{line}{rest}"),
                    None => format!("{line}\n{r}"),
                },
                None => line,
            });
            case.blocked_by = None;
            if case
                .reason
                .as_deref()
                .is_some_and(|r| r.contains(LEFT_BEHIND))
            {
                case.verdict = Verdict::Leaked;
            }
        }
    }

    /// What the run judged: see [`Coverage`].
    pub fn coverage(&self) -> Coverage {
        let mut c = Coverage {
            total: self.cases.len(),
            ..Coverage::default()
        };
        let mut heads: Vec<(String, usize)> = Vec::new();
        for case in &self.cases {
            match case.verdict {
                Verdict::Pass => c.judged += 1,
                v if v.is_failure() => c.judged += 1,
                Verdict::Skip => {
                    let head = reason_head(case.reason.as_deref().unwrap_or(""));
                    match heads.iter_mut().find(|(h, _)| *h == head) {
                        Some((_, n)) => *n += 1,
                        None => heads.push((head, 1)),
                    }
                }
                _ => c.not_judged += 1,
            }
        }
        // Most common first; ties keep the order they were met in.
        heads.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        c.skipped = heads;
        c
    }
}

#[cfg(test)]
impl RunRecord {
    /// An empty run of the DHV kind holding `cases`, for unit tests.
    pub(crate) fn for_tests(cases: Vec<Case>) -> RunRecord {
        RunRecord {
            schema_version: SCHEMA_VERSION,
            run_id: String::new(),
            kind: "dhv".into(),
            harness: HarnessInfo {
                name: String::new(),
                version: String::new(),
            },
            subject: Subject {
                plugin: String::new(),
                version: None,
                details: BTreeMap::new(),
            },
            profile: ProfileInfo {
                name: String::new(),
                nomad_versions: String::new(),
            },
            seed: 0,
            command_line: Vec::new(),
            started_at: Utc::now(),
            finished_at: Utc::now(),
            interrupted: false,
            strict: false,
            environment: Environment::default(),
            shard: None,
            merged_from: Vec::new(),
            cases,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_only_rise() {
        let mut v = Verdict::Fail;
        v.raise(Verdict::Pass);
        assert_eq!(v, Verdict::Fail);
        v.raise(Verdict::Leaked);
        assert_eq!(v, Verdict::Leaked);
        assert!(Verdict::Skip < Verdict::Fail && Verdict::Error < Verdict::TimedOut);
        let mut b = Verdict::Blocked;
        b.raise(Verdict::Skip);
        assert_eq!(b, Verdict::Blocked);
        b.raise(Verdict::Leaked);
        assert_eq!(b, Verdict::Leaked);
    }

    #[test]
    fn blocked_counts_against_conformance_and_apart() {
        use Level::*;
        use Verdict::*;
        let r = record(&[(Must, Pass), (Must, Blocked)]);
        assert_eq!(r.assessment(), Assessment::NotConformant);
        let t = r.tally();
        assert_eq!((t.blocked, t.failed_must, t.passed), (1, 0, 1));
        // A blocked SHOULD is not a failure, but the run was not fully judged.
        let r = record(&[(Must, Pass), (Should, Blocked)]);
        assert_eq!(r.assessment(), Assessment::Incomplete);
    }

    #[test]
    fn a_blocked_clause_never_names_a_clause_that_did_not_fail() {
        use Level::*;
        use Verdict::*;
        let mut r = record(&[
            (Must, Pass),
            (Must, Blocked),
            (Should, Blocked),
            (Must, Blocked),
        ]);
        for (i, c) in r.cases.iter_mut().enumerate() {
            c.clause = format!("CSI-C{i}");
        }
        let blocked = |by: &str| {
            format!(
                "blocked by {by}{BLOCKED_LINE_END}\nexpected: precondition: ControllerPublishVolume succeeds\nseen:     RESOURCE_EXHAUSTED"
            )
        };
        for (i, by) in [(1, "CSI-C0"), (2, "CSI-GONE"), (3, "CSI-C1")] {
            r.cases[i].blocked_by = Some(by.into());
            r.cases[i].reason = Some(blocked(by));
        }
        // One shard's record: a root it does not hold may have failed in another.
        let mut shard = r.clone();
        shard.settle_preconditions(false);
        assert_eq!(shard.cases[2].blocked_by.as_deref(), Some("CSI-GONE"));
        r.settle_preconditions(true);
        // C0 passed: C1 is not blocked by it, and says so.
        assert_eq!(r.cases[1].blocked_by, None);
        let reason = r.cases[1].reason.as_deref().unwrap();
        assert!(
            reason.starts_with("precondition failed: a call this clause needs failed here, though CSI-C0, the clause that judges that call, passed\nexpected: precondition"),
            "{reason}"
        );
        assert!(
            r.cases[2]
                .reason
                .as_deref()
                .unwrap()
                .contains("CSI-GONE, the clause that judges that call, did not run in this run")
        );
        // C1 did not pass (it was blocked): C3 stays blocked by it.
        assert_eq!(r.cases[3].blocked_by.as_deref(), Some("CSI-C1"));
        assert_eq!(r.cases[1].verdict, Blocked);
    }

    /// A blocked clause that left something behind stays Blocked while its root cause failed
    /// (the leak is taken for that failure's doing), and is Leaked when the root cause passed.
    #[test]
    fn a_blocked_clause_that_leaked_is_leaked_unless_its_root_cause_failed() {
        use Level::*;
        use Verdict::*;
        for (root, want) in [(Pass, Leaked), (Fail, Blocked)] {
            let mut r = record(&[(Must, root), (Must, Blocked)]);
            r.cases[0].clause = "CSI-ROOT".into();
            r.cases[1].blocked_by = Some("CSI-ROOT".into());
            r.cases[1].reason = Some(format!(
                "blocked by CSI-ROOT{BLOCKED_LINE_END}\nexpected: precondition: the release succeeds\n\n{LEFT_BEHIND}\n  /x was still mounted"
            ));
            r.settle_preconditions(true);
            assert_eq!(r.cases[1].verdict, want, "root {root:?}");
            assert!(
                r.cases[1]
                    .reason
                    .as_deref()
                    .unwrap()
                    .contains("/x was still mounted")
            );
        }
    }

    fn record(cases: &[(Level, Verdict)]) -> RunRecord {
        let case = |(level, verdict): &(Level, Verdict)| Case {
            clause: "DHV-X-Y".into(),
            level: *level,
            title: String::new(),
            text: String::new(),
            basis: None,
            kind: "dhv".into(),
            operation: "x".into(),
            spec_file: String::new(),
            line: 1,
            verdict: *verdict,
            reason: None,
            blocked_by: None,
            rerun: None,
            duration_ms: 0,
            steps: Vec::new(),
            events: Vec::new(),
            notes: Vec::new(),
            attachments: Vec::new(),
            known: None,
        };
        RunRecord::for_tests(cases.iter().map(case).collect())
    }

    #[test]
    fn coverage_counts_what_was_judged_and_groups_skips_by_reason() {
        let mut r = record(&[
            (Level::Must, Verdict::Pass),
            (Level::Must, Verdict::Fail),
            (Level::Should, Verdict::Skip),
            (Level::Must, Verdict::Skip),
            (Level::Must, Verdict::Skip),
            (Level::Must, Verdict::Blocked),
        ]);
        r.cases[2].reason =
            Some("the plugin does not advertise LIST_VOLUMES: nothing to list".into());
        r.cases[3].reason = Some("not judged on this node: the driver is UNDETECTED here".into());
        r.cases[4].reason = Some("not judged on this node: the driver is UNDETECTED here".into());
        let c = r.coverage();
        assert_eq!((c.total, c.judged, c.not_judged), (6, 2, 1));
        assert_eq!(
            c.skipped,
            vec![
                ("not judged on this node".to_string(), 2),
                ("the plugin does not advertise LIST_VOLUMES".to_string(), 1)
            ]
        );
        assert_eq!(
            c.sentence(),
            "judged on 2 of 6 clauses; 3 not applicable (not judged on this node: 2; the plugin does not advertise LIST_VOLUMES: 1); 1 could not be judged (blocked, errors or interrupted)"
        );
    }

    #[test]
    fn assessments() {
        use Level::*;
        use Verdict::*;
        let a = |c: &[(Level, Verdict)]| record(c).assessment();
        assert_eq!(a(&[(Must, Pass), (Should, Pass)]), Assessment::Conformant);
        assert_eq!(
            a(&[(Must, Pass), (Should, Fail)]),
            Assessment::ConformantWithWarnings
        );
        assert_eq!(a(&[(Should, TimedOut)]), Assessment::ConformantWithWarnings);
        assert_eq!(
            a(&[(Must, Leaked), (Should, Pass)]),
            Assessment::NotConformant
        );
        assert_eq!(a(&[(Must, Pass), (Must, Error)]), Assessment::Incomplete);
        assert_eq!(a(&[(Must, Skip)]), Assessment::Incomplete);
        assert_eq!(a(&[]), Assessment::Incomplete);
        let mut node = record(&[(Must, Pass), (Must, Skip)]);
        node.cases[1].reason = Some(format!("{NOT_JUDGED_ON_THIS_NODE}the runtime is missing"));
        assert_eq!(node.assessment(), Assessment::Incomplete);
        node.cases[1].reason = Some("the driver's Capabilities say exec = false".into());
        assert_eq!(node.assessment(), Assessment::Conformant);
        let mut strict = record(&[(Must, Pass), (Should, Fail)]);
        strict.strict = true;
        assert_eq!(strict.assessment(), Assessment::NotConformant);
    }

    #[test]
    fn attachments_are_bounded_at_a_character_boundary() {
        let a = Attachment::bounded("t", "Text/Plain", "aé€b".into(), 4);
        assert_eq!(a.content, "aé");
        assert_eq!((a.total_bytes, a.truncated), (7, true));
        assert_eq!(a.media_type, MEDIA_TEXT);
        let a = Attachment::new("drawing", MEDIA_SVG, "<svg/>".into());
        assert!(!a.truncated && a.is_svg());
        let big = Attachment::new("big", MEDIA_SVG, "x".repeat(MAX_ATTACHMENT_BYTES + 1));
        assert!(big.truncated && !big.is_svg());
        assert_eq!(big.content.len(), MAX_ATTACHMENT_BYTES);
    }

    #[test]
    fn failure_kinds() {
        assert!(Verdict::TimedOut.is_failure());
        assert!(Verdict::Leaked.is_failure());
        assert!(!Verdict::Error.is_failure());
        assert!(!Verdict::Skip.is_failure());
    }
}
