//! What changed between two runs of one suite (`report --compare BEFORE.json AFTER.json`): new
//! failures, fixed clauses, verdicts that moved, clauses a harness upgrade added or removed,
//! with the plugin versions of both. Rendered as text (the console), HTML and JUnit (one test
//! case per change; a change for the worse is a failure).

use std::fmt::Write as _;
use std::time::Duration;

use minijinja::{Environment, context};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use serde::Serialize;

use crate::attention::one_line_reason;
use crate::model::{Case, RunRecord, Verdict};

const TEMPLATE: &str = include_str!("../templates/compare.html");

/// What became of one clause between the two runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// It did not fail before (or was not there) and fails now.
    NewFailure,
    /// Its verdict moved, and now it counts against the run where it did not.
    Worse,
    /// It failed before and passes now.
    Fixed,
    /// Its verdict moved otherwise (skip to pass, fail to timed out, ...).
    Moved,
    /// A clause the earlier run did not have (a harness upgrade added it, or the selection
    /// differs), that does not fail.
    Added,
    /// A clause the later run does not have.
    Removed,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 6] = [
        ChangeKind::NewFailure,
        ChangeKind::Worse,
        ChangeKind::Fixed,
        ChangeKind::Moved,
        ChangeKind::Added,
        ChangeKind::Removed,
    ];

    pub fn heading(self) -> &'static str {
        match self {
            ChangeKind::NewFailure => "New failures",
            ChangeKind::Worse => "Worse",
            ChangeKind::Fixed => "Fixed",
            ChangeKind::Moved => "Verdicts that moved",
            ChangeKind::Added => "Added clauses",
            ChangeKind::Removed => "Removed clauses",
        }
    }

    /// Whether the change makes the later run worse (the exit status is 1).
    pub fn is_worse(self) -> bool {
        matches!(self, ChangeKind::NewFailure | ChangeKind::Worse)
    }

    fn class(self) -> &'static str {
        match self {
            ChangeKind::NewFailure | ChangeKind::Worse => "fail",
            ChangeKind::Fixed => "pass",
            ChangeKind::Moved => "warn",
            ChangeKind::Added | ChangeKind::Removed => "skip",
        }
    }
}

/// One clause whose verdict is not the same in both runs.
#[derive(Clone, Debug)]
pub struct Change<'a> {
    pub kind: ChangeKind,
    pub before: Option<&'a Case>,
    pub after: Option<&'a Case>,
}

impl<'a> Change<'a> {
    /// The case of the later run, or the earlier one's when the clause was removed.
    pub fn case(&self) -> &'a Case {
        self.after.or(self.before).expect("a change has a case")
    }

    /// `pass -> fail`, `(absent) -> pass`.
    pub fn verdicts(&self) -> String {
        let v = |c: Option<&Case>| c.map_or("(absent)".to_string(), verdict_of);
        format!("{} -> {}", v(self.before), v(self.after))
    }

    /// Why the later verdict, in a line (the earlier one's for a removed clause).
    pub fn reason(&self) -> String {
        match (self.kind, self.after) {
            (ChangeKind::Removed, _) | (_, None) => String::new(),
            (_, Some(after)) => one_line_reason(after),
        }
    }
}

/// A verdict as a comparison shows it: `fail (known)` for a failure on the list of known
/// failures.
fn verdict_of(c: &Case) -> String {
    if c.is_known() && c.verdict != Verdict::Pass {
        format!("{} (known)", c.verdict.as_str())
    } else {
        c.verdict.as_str().to_string()
    }
}

/// Two runs and what changed between them.
#[derive(Clone, Debug)]
pub struct Comparison<'a> {
    pub before: &'a RunRecord,
    pub after: &'a RunRecord,
    /// In the order of [`ChangeKind`], then the later run's order (removed: the earlier's).
    pub changes: Vec<Change<'a>>,
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("cannot compare a {before} run with a {after} run: compare runs of one suite")]
    Kinds { before: String, after: String },
}

/// A failure that counts for the plugin: failed, timed out or leaked, and not known.
fn fails(c: &Case) -> bool {
    c.verdict.is_failure() && !c.is_known()
}

/// Compare two runs of one suite.
pub fn compare<'a>(
    before: &'a RunRecord,
    after: &'a RunRecord,
) -> Result<Comparison<'a>, CompareError> {
    if before.kind != after.kind {
        return Err(CompareError::Kinds {
            before: before.kind.clone(),
            after: after.kind.clone(),
        });
    }
    let mut changes = Vec::new();
    for a in &after.cases {
        let b = before.cases.iter().find(|c| c.clause == a.clause);
        let kind = match b {
            None if fails(a) => ChangeKind::NewFailure,
            None => ChangeKind::Added,
            Some(b) if verdict_of(a) == verdict_of(b) => continue,
            Some(b) if fails(a) && !fails(b) => ChangeKind::NewFailure,
            Some(b) if fails(b) && a.verdict == Verdict::Pass => ChangeKind::Fixed,
            Some(b) if a.is_blocking(after.strict) && !b.is_blocking(before.strict) => {
                ChangeKind::Worse
            }
            Some(_) => ChangeKind::Moved,
        };
        changes.push(Change {
            kind,
            before: b,
            after: Some(a),
        });
    }
    for b in &before.cases {
        if !after.cases.iter().any(|c| c.clause == b.clause) {
            changes.push(Change {
                kind: ChangeKind::Removed,
                before: Some(b),
                after: None,
            });
        }
    }
    changes.sort_by_key(|c| c.kind);
    Ok(Comparison {
        before,
        after,
        changes,
    })
}

/// `plugin ./p (version 1.2.0), run 1a2b3c4d of 2025-01-31`.
fn run_line(r: &RunRecord) -> String {
    format!(
        "plugin {} (version {}), run {} of {}",
        r.subject.plugin,
        r.subject.version.as_deref().unwrap_or("unknown"),
        r.run_id,
        r.started_at.format("%Y-%m-%d %H:%M UTC")
    )
}

impl Comparison<'_> {
    /// Whether something got worse: a new failure, or a verdict that now counts against the run.
    pub fn is_worse(&self) -> bool {
        self.changes.iter().any(|c| c.kind.is_worse())
    }

    fn count(&self, kind: ChangeKind) -> usize {
        self.changes.iter().filter(|c| c.kind == kind).count()
    }

    /// `2 new failures, 1 worse, 3 fixed, 0 moved, 4 added, 1 removed`.
    pub fn counts_line(&self) -> String {
        format!(
            "{} new failures, {} worse, {} fixed, {} moved, {} added, {} removed",
            self.count(ChangeKind::NewFailure),
            self.count(ChangeKind::Worse),
            self.count(ChangeKind::Fixed),
            self.count(ChangeKind::Moved),
            self.count(ChangeKind::Added),
            self.count(ChangeKind::Removed)
        )
    }

    /// The comparison as console text.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "before: {}", run_line(self.before));
        let _ = writeln!(out, "after:  {}", run_line(self.after));
        for kind in ChangeKind::ALL {
            let changes: Vec<&Change<'_>> =
                self.changes.iter().filter(|c| c.kind == kind).collect();
            if changes.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{} ({}):", kind.heading(), changes.len());
            for c in changes {
                let case = c.case();
                let _ = writeln!(
                    out,
                    "  {:<6} {} {}: {}",
                    case.level.as_str(),
                    case.clause,
                    case.title,
                    c.verdicts()
                );
                let why = c.reason();
                if !why.is_empty() {
                    let _ = writeln!(out, "         {why}");
                }
            }
        }
        if self.changes.is_empty() {
            let _ = writeln!(out, "\nno verdict changed");
        }
        let _ = writeln!(
            out,
            "\nverdict: before {}, after {}",
            self.before.assessment().as_str(),
            self.after.assessment().as_str()
        );
        let _ = write!(out, "{}", self.counts_line());
        out
    }

    /// The comparison as JUnit: one test case per change (a change for the worse is a
    /// failure, others pass with what changed in `system-out`), in a suite of its own.
    pub fn junit(&self) -> Result<String, quick_junit::SerializeError> {
        let mut report = Report::new(format!("nomad-conform {} comparison", self.after.kind));
        let mut suite = TestSuite::new(format!("{}.changes", self.after.kind));
        for (k, v) in [
            ("before.run_id", self.before.run_id.clone()),
            (
                "before.plugin.version",
                self.before.subject.version.clone().unwrap_or_default(),
            ),
            ("after.run_id", self.after.run_id.clone()),
            (
                "after.plugin.version",
                self.after.subject.version.clone().unwrap_or_default(),
            ),
        ] {
            suite.add_property(Property::new(k, v));
        }
        for c in &self.changes {
            let case = c.case();
            let what = format!("{}: {}", c.kind.heading(), c.verdicts());
            let status = if c.kind.is_worse() {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_type(match c.kind {
                    ChangeKind::NewFailure => "new-failure",
                    _ => "worse",
                });
                s.set_message(format!("{}: {}", what, c.reason()));
                if let Some(reason) = c.after.and_then(|a| a.reason.as_deref()) {
                    s.set_description(reason);
                }
                s
            } else {
                TestCaseStatus::success()
            };
            let mut tc = TestCase::new(case.display_name(), status);
            tc.set_classname(case.classname());
            tc.set_time(Duration::from_millis(c.after.map_or(0, |a| a.duration_ms)));
            if !c.kind.is_worse() {
                tc.set_system_out(format!("{what}\n{}", c.reason()));
            }
            suite.add_test_case(tc);
        }
        report.add_test_suite(suite);
        let xml = report.to_string()?;
        Ok(crate::junit::strip_root_attributes(&xml).unwrap_or(xml))
    }

    /// The comparison as one self-contained HTML page.
    pub fn html(&self) -> Result<String, minijinja::Error> {
        #[derive(Serialize)]
        struct Row {
            id: String,
            title: String,
            level: &'static str,
            verdicts: String,
            reason: String,
        }
        #[derive(Serialize)]
        struct Group {
            heading: &'static str,
            class: &'static str,
            rows: Vec<Row>,
        }
        let groups: Vec<Group> = ChangeKind::ALL
            .iter()
            .map(|k| Group {
                heading: k.heading(),
                class: k.class(),
                rows: self
                    .changes
                    .iter()
                    .filter(|c| c.kind == *k)
                    .map(|c| Row {
                        id: c.case().clause.clone(),
                        title: c.case().title.clone(),
                        level: c.case().level.as_str(),
                        verdicts: c.verdicts(),
                        reason: c.reason(),
                    })
                    .collect(),
            })
            .filter(|g| !g.rows.is_empty())
            .collect();
        let mut env = Environment::new();
        env.add_template("compare.html", TEMPLATE)?;
        env.add_template("styles.html", crate::html::STYLES_TEMPLATE)?;
        env.get_template("compare.html")?.render(context! {
            kind => self.after.kind.clone(),
            worse => self.is_worse(),
            before => run_line(self.before),
            after => run_line(self.after),
            before_assessment => self.before.assessment().as_str(),
            after_assessment => self.after.assessment().as_str(),
            counts => self.counts_line(),
            groups => minijinja::Value::from(minijinja::value::Serde(&groups)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{KnownFailure, KnownStatus, Level};

    fn case(id: &str, verdict: Verdict) -> Case {
        Case {
            clause: id.into(),
            level: Level::Must,
            title: format!("title of {id}"),
            text: String::new(),
            basis: None,
            kind: "dhv".into(),
            operation: "create".into(),
            spec_file: "specs/dhv/02_create.feature".into(),
            line: 1,
            verdict,
            reason: (verdict != Verdict::Pass).then(|| format!("expected: x\nseen: {id}")),
            blocked_by: None,
            rerun: None,
            duration_ms: 1,
            steps: Vec::new(),
            events: Vec::new(),
            notes: Vec::new(),
            attachments: Vec::new(),
            known: None,
        }
    }

    fn run(cases: &[(&str, Verdict)]) -> RunRecord {
        RunRecord::for_tests(cases.iter().map(|(id, v)| case(id, *v)).collect())
    }

    #[test]
    fn changes_are_sorted_by_kind_and_worse_only_when_something_fails_anew() {
        use Verdict::*;
        let before = run(&[
            ("A", Pass),
            ("B", Fail),
            ("C", Skip),
            ("D", Fail),
            ("E", Pass),
            ("GONE", Pass),
            ("SAME", Fail),
        ]);
        let mut after = run(&[
            ("A", Fail),
            ("B", Pass),
            ("C", Pass),
            ("D", TimedOut),
            ("E", Blocked),
            ("NEW", Pass),
            ("NEWFAIL", Fail),
            ("SAME", Fail),
        ]);
        let c = compare(&before, &after).unwrap();
        let got: Vec<(&str, ChangeKind)> = c
            .changes
            .iter()
            .map(|c| (c.case().clause.as_str(), c.kind))
            .collect();
        use ChangeKind::*;
        assert_eq!(
            got,
            [
                ("A", NewFailure),
                ("NEWFAIL", NewFailure),
                ("E", Worse),
                ("B", Fixed),
                ("C", Moved),
                ("D", Moved),
                ("NEW", Added),
                ("GONE", Removed),
            ]
        );
        assert!(c.is_worse());
        assert_eq!(c.changes[0].verdicts(), "pass -> fail");
        assert_eq!(c.changes[6].verdicts(), "(absent) -> pass");
        let text = c.text();
        assert!(text.contains("New failures (2):"), "{text}");
        assert!(
            text.ends_with("2 new failures, 1 worse, 1 fixed, 2 moved, 1 added, 1 removed"),
            "{text}"
        );
        // A failure that became known is a move, not a new failure; nothing got worse.
        after
            .cases
            .retain(|c| ["B", "C", "SAME"].contains(&c.clause.as_str()));
        after.cases[2].known = Some(KnownFailure {
            reason: "r".into(),
            link: None,
            plugin_version: None,
            expires: None,
            via: None,
            status: KnownStatus::Known,
        });
        let mut before = before;
        before
            .cases
            .retain(|c| ["B", "C", "SAME"].contains(&c.clause.as_str()));
        let c = compare(&before, &after).unwrap();
        assert!(!c.is_worse(), "{}", c.text());
        assert_eq!(c.changes.len(), 3, "{}", c.text());
    }

    #[test]
    fn runs_of_other_suites_are_refused() {
        let a = run(&[]);
        let mut b = run(&[]);
        b.kind = "csi".into();
        assert!(compare(&a, &b).is_err());
    }
}
