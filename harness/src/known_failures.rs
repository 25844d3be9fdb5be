//! A list of known failures (`--known-failures FILE`): clauses a plugin is known to break, each
//! with a reason, and optionally a link, the plugin versions it is for and an expiry date.
//!
//! ```toml
//! [[known-failure]]
//! clause = "DRIVER-WAIT-EXIT-CODE"
//! reason = "WaitTask reports exit code 0 (issue 41)"
//! link = "https://example.com/driver/issues/41"
//! plugin-version = "< 2.0.0"
//! expires = 2026-06-30
//! ```
//!
//! A failing clause on the list keeps its verdict in the record and is marked known
//! ([`KnownStatus::Known`]): it does not count against the run, and neither do the clauses it
//! blocked. A clause on the list that passes is marked fixed (the list is out of date: a
//! failure under `--strict`). An entry past its expiry date, or for other plugin versions, does
//! not excuse anything; an expired one says so. The list is read and checked before anything
//! runs: a clause the suite does not have, a constraint or date that does not parse, an entry
//! without a reason, are usage errors.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use chrono::NaiveDate;
use nomad_conform_reports::model::{KnownFailure, KnownStatus, RunRecord, Verdict};

use crate::error::HarnessError;
use crate::goversion::GoVersion;

/// One entry of the list, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub clause: String,
    pub reason: String,
    pub link: Option<String>,
    /// The constraint as written, and parsed.
    pub plugin_version: Option<(String, Constraints)>,
    pub expires: Option<NaiveDate>,
}

/// A list of known failures, read from a file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KnownFailures {
    pub entries: Vec<Entry>,
}

/// The file as TOML holds it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(rename = "known-failure", default)]
    known_failure: Vec<EntryToml>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryToml {
    clause: String,
    reason: String,
    link: Option<String>,
    #[serde(rename = "plugin-version")]
    plugin_version: Option<String>,
    expires: Option<toml::Value>,
}

impl KnownFailures {
    /// Read and check the list at `path` against the clause IDs the suite has.
    pub fn load(path: &Path, clauses: &BTreeSet<String>) -> Result<Self, HarnessError> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| {
            HarnessError::Usage(format!("--known-failures {shown}: failed to read: {e}"))
        })?;
        Self::parse(&text, clauses)
            .map_err(|e| HarnessError::Usage(format!("--known-failures {shown}: {e}")))
    }

    /// Parse and check a list (the error is one line, without the file's name).
    pub fn parse(text: &str, clauses: &BTreeSet<String>) -> Result<Self, String> {
        let file: FileToml = toml::from_str(text).map_err(|e| {
            format!(
                "not a list of known failures ([[known-failure]] tables with clause and reason): {}",
                e.message()
            )
        })?;
        let mut entries = Vec::new();
        let mut seen = BTreeSet::new();
        for e in file.known_failure {
            let clause = e.clause.trim().trim_start_matches('@').to_string();
            if !clauses.contains(&clause) {
                return Err(format!(
                    "clause {clause:?} does not exist in this suite (see `nomad-conform list`)"
                ));
            }
            if !seen.insert(clause.clone()) {
                return Err(format!("clause {clause} is listed twice"));
            }
            if e.reason.trim().is_empty() {
                return Err(format!("the entry for {clause} has no reason"));
            }
            let plugin_version = match e.plugin_version {
                Some(c) => {
                    let parsed = Constraints::parse(&c).map_err(|why| {
                        format!("the entry for {clause}: plugin-version {c:?}: {why}")
                    })?;
                    Some((c, parsed))
                }
                None => None,
            };
            let expires = match e.expires {
                None => None,
                Some(v) => Some(date(&v).ok_or_else(|| {
                    format!("the entry for {clause}: expires {v} is not a date (YYYY-MM-DD)")
                })?),
            };
            entries.push(Entry {
                clause,
                reason: e.reason.trim().to_string(),
                link: e.link.filter(|l| !l.trim().is_empty()),
                plugin_version,
                expires,
            });
        }
        Ok(KnownFailures { entries })
    }

    /// Mark the record's cases the list names (replacing earlier marks): a failure the list
    /// expects is known, and so are the clauses it blocked; a clause on the list that passed is
    /// fixed; an entry past its date is expired (the failure counts). The day the run started
    /// is the day entries are judged against, so a record renders the same on any later day.
    pub fn apply(&self, record: &mut RunRecord) {
        let today = record.started_at.date_naive();
        let version = record
            .subject
            .version
            .as_deref()
            .and_then(|v| GoVersion::parse(v.trim()).ok());
        for case in &mut record.cases {
            case.known = None;
        }
        for entry in &self.entries {
            let Some(case) = record.cases.iter_mut().find(|c| c.clause == entry.clause) else {
                continue;
            };
            // An entry for other versions of the plugin (or one whose version is unknown)
            // says nothing about this run.
            if let Some((_, constraint)) = &entry.plugin_version {
                match &version {
                    Some(v) if constraint.check(v) => {}
                    _ => continue,
                }
            }
            let status = if case.verdict == Verdict::Pass {
                KnownStatus::Fixed
            } else if entry.expires.is_some_and(|d| d < today) {
                KnownStatus::Expired
            } else if case.verdict.is_failure() || case.verdict == Verdict::Blocked {
                KnownStatus::Known
            } else {
                // Skipped, an error of the harness, interrupted: nothing to excuse or to fix.
                continue;
            };
            case.known = Some(KnownFailure {
                reason: entry.reason.clone(),
                link: entry.link.clone(),
                plugin_version: entry.plugin_version.as_ref().map(|(s, _)| s.clone()),
                expires: entry.expires.map(|d| d.to_string()),
                via: None,
                status,
            });
        }
        // The clauses a known failure blocked are not judged because of it: known too.
        // Roots are followed through blocked clauses (a chain ends within the record's length).
        let known_roots: Vec<(String, KnownFailure)> = record
            .cases
            .iter()
            .filter(|c| c.is_known() && c.verdict != Verdict::Blocked)
            .filter_map(|c| c.known.clone().map(|k| (c.clause.clone(), k)))
            .collect();
        for i in 0..record.cases.len() {
            if record.cases[i].verdict != Verdict::Blocked || record.cases[i].known.is_some() {
                continue;
            }
            let mut root = record.cases[i].blocked_by.clone();
            for _ in 0..record.cases.len() {
                let Some(r) = root.clone() else { break };
                if let Some((id, k)) = known_roots.iter().find(|(id, _)| *id == r) {
                    record.cases[i].known = Some(KnownFailure {
                        via: Some(id.clone()),
                        ..k.clone()
                    });
                    break;
                }
                root = record
                    .cases
                    .iter()
                    .find(|c| c.clause == r && c.verdict == Verdict::Blocked)
                    .and_then(|c| c.blocked_by.clone());
            }
        }
    }
}

/// A TOML date (`expires = 2026-06-30`) or a string holding one.
fn date(v: &toml::Value) -> Option<NaiveDate> {
    let text = match v {
        toml::Value::Datetime(d) if d.time.is_none() && d.offset.is_none() => d.to_string(),
        toml::Value::String(s) => s.trim().to_string(),
        _ => return None,
    };
    NaiveDate::parse_from_str(&text, "%Y-%m-%d").ok()
}

/// The list of known failures a run's record gives: every failing clause (failed, timed out,
/// leaked), with the first line of its reason.
pub fn write_list(record: &RunRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Known failures of {} (version {}), from run {} of {}.\n\
         # Give it to a run with --known-failures FILE: these clauses' failures do not count, and\n\
         # a clause that passes again is reported fixed. Each entry may also have a link, a\n\
         # plugin-version constraint (\"< 2.0.0\") and an expiry date (expires = 2026-12-31).",
        record.subject.plugin,
        record.subject.version.as_deref().unwrap_or("unknown"),
        record.run_id,
        record.started_at.date_naive(),
    );
    let quoted = |s: &str| toml::Value::String(s.to_string()).to_string();
    for case in record.cases.iter().filter(|c| c.verdict.is_failure()) {
        let reason = first_line(case.reason.as_deref().unwrap_or(""));
        let reason = if reason.is_empty() {
            format!("{} ({})", case.verdict.as_str(), case.title)
        } else {
            reason
        };
        let _ = writeln!(
            out,
            "\n[[known-failure]]\nclause = {}\nreason = {}",
            quoted(&case.clause),
            quoted(&reason)
        );
        if let Some(k) = &case.known {
            if let Some(link) = &k.link {
                let _ = writeln!(out, "link = {}", quoted(link));
            }
            if let Some(c) = &k.plugin_version {
                let _ = writeln!(out, "plugin-version = {}", quoted(c));
            }
        }
    }
    out
}

/// The first line of a reason that says something, its alignment spaces folded.
fn first_line(reason: &str) -> String {
    reason
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// go-version's constraints: comma-separated `OP VERSION`, every one of which must hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraints(Vec<(Op, GoVersion, usize)>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    /// `~>`: at least the version, below the next release of its second-to-last segment.
    Pessimistic,
}

impl Constraints {
    /// Parse as go-version's `NewConstraint` does.
    pub fn parse(s: &str) -> Result<Constraints, String> {
        let mut out = Vec::new();
        for part in s.split(',') {
            let p = part.trim();
            let (op, rest) = [
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("!=", Op::Ne),
                ("~>", Op::Pessimistic),
                (">", Op::Gt),
                ("<", Op::Lt),
                ("=", Op::Eq),
            ]
            .iter()
            .find_map(|(prefix, op)| p.strip_prefix(prefix).map(|r| (*op, r)))
            .unwrap_or((Op::Eq, p));
            let v = rest.trim();
            if v.is_empty() {
                return Err(format!("{p:?} names no version"));
            }
            let version = GoVersion::parse(v).map_err(|e| e.to_string())?;
            // How many segments were written: `~> 1.2` and `~> 1.2.0` differ.
            let written = v
                .trim_start_matches('v')
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()
                .unwrap_or("")
                .split('.')
                .count();
            out.push((op, version, written));
        }
        Ok(Constraints(out))
    }

    /// Whether `v` meets every constraint, as go-version's `Constraints.Check`.
    pub fn check(&self, v: &GoVersion) -> bool {
        use std::cmp::Ordering::*;
        self.0.iter().all(|(op, c, written)| {
            let ord = v.compare(c);
            match op {
                Op::Eq => ord == Equal,
                Op::Ne => ord != Equal,
                Op::Gt => prerelease_check(v, c) && ord == Greater,
                Op::Ge => prerelease_check(v, c) && ord != Less,
                Op::Lt => prerelease_check(v, c) && ord == Less,
                Op::Le => prerelease_check(v, c) && ord != Greater,
                Op::Pessimistic => pessimistic(v, c, *written),
            }
        })
    }
}

/// go-version's `prereleaseCheck`: a prerelease only meets a constraint with a prerelease on
/// the same segments.
fn prerelease_check(v: &GoVersion, c: &GoVersion) -> bool {
    match (!v.prerelease().is_empty(), !c.prerelease().is_empty()) {
        (true, true) => v.segments() == c.segments(),
        (true, false) => false,
        _ => true,
    }
}

/// go-version's `constraintPessimistic`.
fn pessimistic(v: &GoVersion, c: &GoVersion, written: usize) -> bool {
    if !prerelease_check(v, c) || (!c.prerelease().is_empty() && v.prerelease().is_empty()) {
        return false;
    }
    if v.compare(c) == std::cmp::Ordering::Less {
        return false;
    }
    let (vs, cs) = (v.segments(), c.segments());
    if cs.len() > vs.len() {
        return false;
    }
    if (0..written.saturating_sub(1)).any(|i| vs[i] != cs[i]) {
        return false;
    }
    cs[cs.len() - 1] <= vs[cs.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> GoVersion {
        GoVersion::parse(s).unwrap()
    }

    #[test]
    fn constraints_as_go_version_checks_them() {
        let ok = |c: &str, ver: &str| Constraints::parse(c).unwrap().check(&v(ver));
        assert!(ok("< 2.0.0", "1.9.9"));
        assert!(!ok("< 2.0.0", "2.0.0"));
        assert!(ok(">= 1.2, < 2.0", "1.2.0"));
        assert!(!ok(">= 1.2, < 2.0", "1.1.9"));
        assert!(ok("1.2.3", "v1.2.3"));
        assert!(ok("!= 1.2.3", "1.2.4"));
        // A prerelease only meets a constraint with a prerelease on the same segments.
        assert!(!ok("< 2.0.0", "1.5.0-beta"));
        assert!(ok(">= 1.5.0-alpha", "1.5.0-beta"));
        // ~> 1.2 is >= 1.2, < 2; ~> 1.2.0 is >= 1.2.0, < 1.3.
        assert!(ok("~> 1.2", "1.9.0"));
        assert!(!ok("~> 1.2", "2.0.0"));
        assert!(ok("~> 1.2.0", "1.2.7"));
        assert!(!ok("~> 1.2.0", "1.3.0"));
        assert!(Constraints::parse("< two").is_err());
        assert!(Constraints::parse(">=").is_err());
    }

    fn ids(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lists_are_checked_before_anything_runs() {
        let clauses = ids(&["A-ONE", "A-TWO"]);
        let good = "[[known-failure]]\nclause = \"A-ONE\"\nreason = \"r\"\nlink = \"https://x/1\"\nplugin-version = \"< 2.0.0\"\nexpires = 2030-01-31\n";
        let list = KnownFailures::parse(good, &clauses).unwrap();
        assert_eq!(list.entries.len(), 1);
        assert_eq!(list.entries[0].expires.unwrap().to_string(), "2030-01-31");
        for (text, says) in [
            (
                "[[known-failure]]\nclause = \"A-NOPE\"\nreason = \"r\"\n",
                "\"A-NOPE\" does not exist",
            ),
            (
                "[[known-failure]]\nclause = \"A-ONE\"\nreason = \" \"\n",
                "has no reason",
            ),
            (
                "[[known-failure]]\nclause = \"A-ONE\"\n",
                "missing field `reason`",
            ),
            (
                "[[known-failure]]\nclause = \"A-ONE\"\nreason = \"r\"\nexpires = \"soon\"\n",
                "is not a date",
            ),
            (
                "[[known-failure]]\nclause = \"A-ONE\"\nreason = \"r\"\nplugin-version = \"<< 1\"\n",
                "plugin-version",
            ),
            (
                "[[known-failure]]\nclause = \"A-ONE\"\nreason = \"r\"\n[[known-failure]]\nclause = \"A-ONE\"\nreason = \"s\"\n",
                "listed twice",
            ),
            (
                "[[known-failure]]\nclause = \"A-ONE\"\nreason = \"r\"\nwhy = 1\n",
                "unknown field",
            ),
        ] {
            let e = KnownFailures::parse(text, &clauses).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }
}
