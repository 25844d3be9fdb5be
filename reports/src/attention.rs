//! What needs attention after a run: every case that did not pass, in the order a reader should
//! deal with them. The HTML report opens on this list and the console summary ends with it.

use crate::model::{Case, KnownStatus, RunRecord, Verdict};

/// Why a case needs attention. The order of the variants is the order of the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Problem {
    /// The plugin broke a clause that counts (a MUST, or any clause under `--strict`).
    Failed,
    /// Not judged because the plugin broke another clause first (its root cause).
    Blocked,
    /// The plugin broke a clause that counts by missing its deadline.
    TimedOut,
    /// The harness could not judge the clause.
    Error,
    /// Something the clause made could not be removed afterwards: it is still on the machine.
    Leaked,
    /// A SHOULD clause failed; graded as a warning unless `--strict`.
    Warning,
    /// A clause on the list of known failures passed: the list is out of date (a failure
    /// under `--strict`).
    Fixed,
    /// A failure the list of known failures expects (and the clauses it blocked): shown, not
    /// counted against the run.
    Known,
}

impl Problem {
    pub const ALL: [Problem; 8] = [
        Problem::Failed,
        Problem::Blocked,
        Problem::TimedOut,
        Problem::Error,
        Problem::Leaked,
        Problem::Warning,
        Problem::Fixed,
        Problem::Known,
    ];

    /// The problem a case has, if any.
    pub fn of(case: &Case, strict: bool) -> Option<Problem> {
        match case.known_status() {
            Some(KnownStatus::Known) if case.verdict != Verdict::Pass => {
                return Some(Problem::Known);
            }
            Some(KnownStatus::Fixed) => return Some(Problem::Fixed),
            _ => {}
        }
        let blocking = case.is_blocking(strict);
        match case.verdict {
            Verdict::Pass | Verdict::Skip | Verdict::Interrupted => None,
            Verdict::Blocked => Some(Problem::Blocked),
            Verdict::Error => Some(Problem::Error),
            // Whatever the level: what was left behind is on the machine either way.
            Verdict::Leaked => Some(Problem::Leaked),
            Verdict::Fail | Verdict::TimedOut if !blocking => Some(Problem::Warning),
            Verdict::Fail => Some(Problem::Failed),
            Verdict::TimedOut => Some(Problem::TimedOut),
        }
    }

    /// The console label, as in the progress lines.
    pub fn label(self) -> &'static str {
        match self {
            Problem::Failed => "FAIL",
            Problem::Blocked => "BLOCKED",
            Problem::TimedOut => "TIMEOUT",
            Problem::Error => "ERROR",
            Problem::Leaked => "LEAKED",
            Problem::Warning => "WARN",
            Problem::Fixed => "FIXED",
            Problem::Known => "KNOWN",
        }
    }

    /// A heading for the problems of this kind.
    pub fn heading(self) -> &'static str {
        match self {
            Problem::Failed => "Failed",
            Problem::Blocked => "Blocked",
            Problem::TimedOut => "Timed out",
            Problem::Error => "Errors",
            Problem::Leaked => "Leaked",
            Problem::Warning => "Warnings",
            Problem::Fixed => "Fixed: remove from the list of known failures",
            Problem::Known => "Known failures",
        }
    }

    /// A stable lower-case name (HTML ids and classes).
    pub fn key(self) -> &'static str {
        match self {
            Problem::Failed => "failed",
            Problem::Blocked => "blocked",
            Problem::TimedOut => "timed-out",
            Problem::Error => "error",
            Problem::Leaked => "leaked",
            Problem::Warning => "warning",
            Problem::Fixed => "fixed",
            Problem::Known => "known",
        }
    }
}

/// One case that needs attention.
#[derive(Clone, Debug)]
pub struct Entry<'a> {
    pub problem: Problem,
    pub case: &'a Case,
    /// Why, in one line (see [`one_line_reason`]).
    pub reason: String,
    /// The clauses this one's failure blocked, in spec order: folded beneath it rather than
    /// listed one by one (a driver whose StartTask crashes blocks two dozen clauses).
    pub blocks: Vec<&'a Case>,
    /// Other clauses that failed on the same observation (the same expected and seen, with the
    /// same problem): one bug, one entry (a WaitTask that always answers exit code 0 fails
    /// three clauses). Each keeps its own verdict in the record and in JUnit.
    pub same: Vec<&'a Case>,
}

impl Entry<'_> {
    /// The clause IDs of this entry: its own, then those that failed on the same observation.
    pub fn clauses(&self) -> Vec<&str> {
        std::iter::once(self.case)
            .chain(self.same.iter().copied())
            .map(|c| c.clause.as_str())
            .collect()
    }

    /// "the same observation fails 2 more clauses: B, C"; empty when it is alone.
    pub fn same_line(&self) -> String {
        if self.same.is_empty() {
            return String::new();
        }
        let ids: Vec<&str> = self.same.iter().map(|c| c.clause.as_str()).collect();
        format!(
            "{} {} more clause{}: {}",
            self.same_says(),
            ids.len(),
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", ")
        )
    }

    /// How [`Entry::same_line`] begins: a failure's observation fails clauses, a failed
    /// precondition blocks them.
    pub fn same_says(&self) -> &'static str {
        if self.problem == Problem::Blocked {
            "the same failed precondition blocks"
        } else {
            "the same observation fails"
        }
    }

    /// One rerun line for every clause of the entry: the case's own, its `--tags @ID` widened
    /// to all of them (the case's own line when it does not end so).
    pub fn rerun(&self) -> Option<String> {
        let own = self.case.rerun.as_deref()?;
        if self.same.is_empty() {
            return Some(own.to_string());
        }
        let tag = format!("--tags @{}", self.case.clause);
        let Some(prefix) = own.strip_suffix(&tag) else {
            return Some(own.to_string());
        };
        let all: Vec<String> = self.clauses().iter().map(|id| format!("@{id}")).collect();
        Some(format!("{prefix}--tags '{}'", all.join(" or ")))
    }

    /// "blocks 3 clauses: A, B, C", naming at most `names` of them; empty when it blocks none.
    pub fn blocks_line(&self, names: usize) -> String {
        if self.blocks.is_empty() {
            return String::new();
        }
        let n = self.blocks.len();
        let mut shown: Vec<&str> = self
            .blocks
            .iter()
            .take(names)
            .map(|c| c.clause.as_str())
            .collect();
        if n > names {
            shown.push("…");
        }
        format!(
            "blocks {n} clause{}: {}",
            if n == 1 { "" } else { "s" },
            shown.join(", ")
        )
    }
}

/// Every case that needs attention: by problem in the order of [`Problem`], then in spec
/// order. A blocked case is folded under the entry of the clause that blocked it (following
/// a chain of blocked roots to its end); it has an entry of its own only when its root needs
/// no attention or is not in the record.
pub fn needs_attention(record: &RunRecord) -> Vec<Entry<'_>> {
    let mut entries: Vec<Entry<'_>> = Vec::new();
    let mut blocked: Vec<&Case> = Vec::new();
    for case in &record.cases {
        match Problem::of(case, record.strict) {
            // A blocked clause folds under its root, known or not.
            Some(_) if case.verdict == Verdict::Blocked => blocked.push(case),
            Some(problem) => {
                let reason = entry_reason(case);
                let key = observation(case);
                // The same observation as an entry already made: one entry for both.
                let same = key.as_ref().and_then(|k| {
                    entries.iter().position(|e| {
                        e.problem == problem
                            && e.case.level == case.level
                            && e.case.known.is_none()
                            && case.known.is_none()
                            && observation(e.case).as_ref() == Some(k)
                    })
                });
                match same {
                    Some(i) => entries[i].same.push(case),
                    None => entries.push(Entry {
                        problem,
                        case,
                        reason,
                        blocks: Vec::new(),
                        same: Vec::new(),
                    }),
                }
            }
            None => {}
        }
    }
    for case in blocked {
        let precondition = precondition_observation(case);
        // A precondition that failed the same way for several clauses (no clause of the run
        // failed on it): one entry for them all.
        let same = || {
            let key = precondition.as_ref()?;
            entries.iter().position(|e| {
                e.problem == Problem::Blocked
                    && e.case.level == case.level
                    && e.case.known.is_none()
                    && case.known.is_none()
                    && precondition_observation(e.case).as_ref() == Some(key)
            })
        };
        match (root_entry(record, &entries, case), same()) {
            (Some(i), _) => entries[i].blocks.push(case),
            (None, Some(i)) => entries[i].same.push(case),
            (None, None) => entries.push(Entry {
                problem: Problem::of(case, record.strict).unwrap_or(Problem::Blocked),
                case,
                reason: entry_reason(case),
                blocks: Vec::new(),
                same: Vec::new(),
            }),
        }
    }
    // A stable sort keeps spec order within each problem.
    entries.sort_by_key(|e| e.problem);
    entries
}

/// The entry a blocked case folds under: its root's, or its root's root's when the root was
/// blocked too.
fn root_entry(record: &RunRecord, entries: &[Entry<'_>], case: &Case) -> Option<usize> {
    let mut root = case.blocked_by.as_deref()?;
    // A chain is at most as long as the record; a cycle (never written) ends the search.
    for _ in 0..record.cases.len() {
        if let Some(i) = entries
            .iter()
            .position(|e| e.case.clause == root || e.same.iter().any(|c| c.clause == root))
        {
            return Some(i);
        }
        let next = record
            .cases
            .iter()
            .find(|c| c.clause == root && c.verdict == Verdict::Blocked)?;
        root = next.blocked_by.as_deref()?;
    }
    None
}

/// What a failure observed, when its reason says what was expected and what was seen: the
/// `expected:` line and the `seen:` lines after it, up to the reproduce block. Two failures with
/// the same observation are one bug seen by several clauses.
fn observation(case: &Case) -> Option<String> {
    if case.verdict == Verdict::Blocked {
        return None;
    }
    let reason = case.reason.as_deref()?;
    let mut lines = reason.lines().skip_while(|l| !l.starts_with("expected:"));
    let expected = lines.next()?;
    let mut seen = Vec::new();
    for l in lines {
        if l.starts_with("reproduce:") || l.starts_with("rerun") || l.is_empty() {
            break;
        }
        seen.push(l);
    }
    if !seen.first().is_some_and(|l| l.starts_with("seen:")) {
        return None;
    }
    Some(format!("{expected}\n{}", seen.join("\n")))
}

/// What a blocked clause that names no root saw of the precondition that failed (a call it
/// needs, judged by a clause that did not fail: see `RunRecord::settle_preconditions`): its
/// `expected:` and `seen:` lines.
fn precondition_observation(case: &Case) -> Option<String> {
    if case.verdict != Verdict::Blocked || case.blocked_by.is_some() {
        return None;
    }
    let reason = case.reason.as_deref()?;
    let mut lines = reason.lines().skip_while(|l| !l.starts_with("expected:"));
    let expected = lines.next()?;
    let seen: Vec<&str> = lines
        .take_while(|l| !(l.starts_with("reproduce:") || l.starts_with("rerun") || l.is_empty()))
        .collect();
    Some(format!("{expected}\n{}", seen.join("\n")))
}

/// Why an entry needs attention, in a line: [`one_line_reason`], with what the list of known
/// failures says when it names the clause.
pub fn entry_reason(case: &Case) -> String {
    let line = one_line_reason(case);
    let Some(known) = &case.known else {
        return line;
    };
    let link = known
        .link
        .as_deref()
        .map(|l| format!(" ({l})"))
        .unwrap_or_default();
    match known.status {
        KnownStatus::Fixed => format!(
            "fixed: remove it from the list of known failures (it says: {}{link})",
            known.reason
        ),
        KnownStatus::Known => match &known.via {
            Some(root) => format!("blocked by {root}, a known failure: {}{link}", known.reason),
            None if line.is_empty() => format!("known: {}{link}", known.reason),
            None => format!("known: {}{link}; {line}", known.reason),
        },
        KnownStatus::Expired => format!(
            "the known-failure entry expired on {}; {line}",
            known.expires.as_deref().unwrap_or("?")
        ),
    }
}

/// The longest reason line shown in a list.
const MAX_REASON_CHARS: usize = 300;

/// The reason of a case in one line: what was expected and what was seen when the reason says
/// (`expected: ...; seen: ...`),
/// otherwise its first line (with the line after it when the first one ends in a colon, as
/// in "left behind after cleanup:"). For a blocked case, the recorder's "blocked by ..." line is
/// left out: lists show the root clause on their own.
pub fn one_line_reason(case: &Case) -> String {
    let Some(reason) = case.reason.as_deref() else {
        return String::new();
    };
    let lines: Vec<&str> = reason
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .skip_while(|l| case.blocked_by.is_some() && l.starts_with("blocked by "))
        .collect();
    let line = match lines.iter().position(|l| l.starts_with("seen:")) {
        // What was seen, beside what was expected: "seen: exit_code 0" alone does not say
        // what was wrong with it.
        Some(i) => match lines[..i].iter().rev().find(|l| l.starts_with("expected:")) {
            Some(expected) => format!("{expected}; {}", lines[i]),
            None => lines[i].to_string(),
        },
        None => match lines.as_slice() {
            [] => String::new(),
            [first, next, ..] if first.ends_with(':') => format!("{first} {next}"),
            [first, ..] => first.to_string(),
        },
    };
    // Reasons align their labels ("seen:     ..."); one line needs no alignment.
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > MAX_REASON_CHARS {
        let cut: String = line.chars().take(MAX_REASON_CHARS).collect();
        format!("{cut}…")
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Level;

    fn case(clause: &str, level: Level, verdict: Verdict, reason: &str) -> Case {
        Case {
            clause: clause.into(),
            level,
            title: format!("title of {clause}"),
            text: String::new(),
            basis: None,
            kind: "dhv".into(),
            operation: "create".into(),
            spec_file: "specs/dhv/02_create.feature".into(),
            line: 1,
            verdict,
            reason: (!reason.is_empty()).then(|| reason.to_string()),
            blocked_by: None,
            rerun: Some(format!("nomad-conform dhv ./p --seed 1 --tags @{clause}")),
            duration_ms: 1,
            steps: Vec::new(),
            events: Vec::new(),
            notes: Vec::new(),
            attachments: Vec::new(),
            known: None,
        }
    }

    #[test]
    fn a_precondition_that_failed_in_a_passing_clause_is_one_finding() {
        let blocked = |id: &str, level| {
            let mut c = case(id, level, Verdict::Blocked, "");
            c.blocked_by = Some("CSI-NOMAD-CLAIM".into());
            c.reason = Some("blocked by CSI-NOMAD-CLAIM: this clause cannot be judged because a call it needs failed\nexpected: precondition: ControllerPublishVolume succeeds\nseen:     ControllerPublishVolume RESOURCE_EXHAUSTED: node has too many volumes\nreproduce:\n  grpcurl ...".into());
            c
        };
        let mut record = RunRecord::for_tests(vec![
            case("CSI-NOMAD-CLAIM", Level::Must, Verdict::Pass, ""),
            blocked("CSI-A", Level::Must),
            blocked("CSI-B", Level::Must),
            blocked("CSI-C", Level::Must),
            blocked("CSI-D", Level::Should),
        ]);
        record.settle_preconditions(true);
        let entries = needs_attention(&record);
        // One entry for the MUST clauses, one for the SHOULD one; neither names the clause that
        // passed as a cause.
        assert_eq!(entries.len(), 2, "{entries:?}");
        let e = &entries[0];
        assert_eq!(e.clauses(), ["CSI-A", "CSI-B", "CSI-C"]);
        assert_eq!(e.case.blocked_by, None);
        assert_eq!(
            e.same_line(),
            "the same failed precondition blocks 2 more clauses: CSI-B, CSI-C"
        );
        assert!(e.reason.contains("RESOURCE_EXHAUSTED"), "{}", e.reason);
        assert_eq!(
            e.rerun().unwrap(),
            "nomad-conform dhv ./p --seed 1 --tags '@CSI-A or @CSI-B or @CSI-C'"
        );
        let text = e.case.reason.as_deref().unwrap();
        assert!(
            text.starts_with("precondition failed: a call this clause needs failed here, though CSI-NOMAD-CLAIM, the clause that judges that call, passed"),
            "{text}"
        );
        assert_eq!(entries[1].clauses(), ["CSI-D"]);
    }

    #[test]
    fn problems_of_each_verdict_and_level() {
        use Level::*;
        use Verdict::*;
        let p = |level, verdict, strict| Problem::of(&case("X", level, verdict, ""), strict);
        assert_eq!(p(Must, Pass, false), None);
        assert_eq!(p(Should, Skip, true), None);
        assert_eq!(p(Must, Fail, false), Some(Problem::Failed));
        assert_eq!(p(Should, Fail, false), Some(Problem::Warning));
        assert_eq!(p(Should, Fail, true), Some(Problem::Failed));
        assert_eq!(p(Must, TimedOut, false), Some(Problem::TimedOut));
        assert_eq!(p(Should, TimedOut, false), Some(Problem::Warning));
        assert_eq!(p(Should, TimedOut, true), Some(Problem::TimedOut));
        assert_eq!(p(Should, Blocked, false), Some(Problem::Blocked));
        assert_eq!(p(Should, Error, false), Some(Problem::Error));
        assert_eq!(p(Should, Leaked, false), Some(Problem::Leaked));
        assert_eq!(p(Must, Leaked, false), Some(Problem::Leaked));
    }

    #[test]
    fn blocked_clauses_fold_under_their_root() {
        let mut root = case("ROOT", Level::Must, Verdict::Fail, "seen: crash");
        root.line = 1;
        let mut blocked = Vec::new();
        for (id, by) in [("B1", "ROOT"), ("B2", "B1"), ("B3", "GONE"), ("B4", "ROOT")] {
            let mut c = case(id, Level::Must, Verdict::Blocked, "blocked by x");
            c.blocked_by = Some(by.into());
            blocked.push(c);
        }
        let mut warn = case("W", Level::Should, Verdict::Fail, "seen: slow");
        warn.line = 9;
        let mut cases = vec![warn, root];
        cases.extend(blocked);
        let record = RunRecord::for_tests(cases);
        let entries = needs_attention(&record);
        let ids: Vec<_> = entries.iter().map(|e| e.case.clause.as_str()).collect();
        // B1, B2 (blocked by the blocked B1) and B4 fold under ROOT; B3's root is not in the
        // record, so it stays on its own.
        assert_eq!(ids, ["ROOT", "B3", "W"]);
        let folded: Vec<_> = entries[0]
            .blocks
            .iter()
            .map(|c| c.clause.as_str())
            .collect();
        assert_eq!(folded, ["B1", "B2", "B4"]);
        assert_eq!(entries[0].blocks_line(2), "blocks 3 clauses: B1, B2, …");
        assert_eq!(entries[2].blocks_line(2), "");
    }

    #[test]
    fn one_line_reasons() {
        let mut c = case(
            "X",
            Level::Must,
            Verdict::Fail,
            "expected: create exits with status 0\nseen:     exit status 1 after 2ms\nreproduce:\n  env -i ./p create",
        );
        assert_eq!(
            one_line_reason(&c),
            "expected: create exits with status 0; seen: exit status 1 after 2ms"
        );
        c.reason = Some("seen: exit_code 0\nreproduce: x".into());
        assert_eq!(one_line_reason(&c), "seen: exit_code 0");
        c.reason = Some("\nleft behind after cleanup:\n  mount /tmp/a\n  mount /tmp/b".into());
        assert_eq!(
            one_line_reason(&c),
            "left behind after cleanup: mount /tmp/a"
        );
        c.reason = Some(
            "blocked by DHV-CREATE-X: this clause cannot be judged because a call it needs failed\ncreate failed: exit status 3".into(),
        );
        c.blocked_by = Some("DHV-CREATE-X".into());
        assert_eq!(one_line_reason(&c), "create failed: exit status 3");
        c.reason = Some("x".repeat(400));
        assert_eq!(one_line_reason(&c).chars().count(), MAX_REASON_CHARS + 1);
        c.reason = None;
        assert_eq!(one_line_reason(&c), "");
    }
}
