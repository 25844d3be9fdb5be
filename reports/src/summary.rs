//! The console summary printed at the end of a run.

use std::fmt::Write as _;

use crate::attention::{Entry, Problem, needs_attention};
use crate::model::{Case, RunRecord, Verdict};
use crate::transcript::{attachment_line, case_transcript, fmt_ms};

/// How much the summary says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verbosity {
    /// The verdict and the totals.
    Quiet,
    /// Plus a table per operation and the details of every clause that did not pass.
    #[default]
    Normal,
    /// Plus every call of every clause that did not pass.
    Verbose,
}

/// One line for a finished case, as printed while the run goes on.
pub fn case_line(case: &Case, strict: bool) -> String {
    let label = match case.verdict {
        Verdict::Pass if case.known_status() == Some(crate::model::KnownStatus::Fixed) => "FIXED",
        Verdict::Pass => "PASS",
        _ if case.is_known() => "KNOWN",
        Verdict::Skip => "SKIP",
        Verdict::Interrupted => "STOPPED",
        Verdict::Error => "ERROR",
        Verdict::Blocked => "BLOCKED",
        Verdict::TimedOut if case.is_blocking(strict) => "TIMEOUT",
        Verdict::Leaked if case.is_blocking(strict) => "LEAKED",
        _ if case.is_blocking(strict) => "FAIL",
        _ => "WARN",
    };
    format!(
        "{label:<7} {:<6} {} {} ({})",
        case.level.as_str(),
        case.clause,
        case.title,
        fmt_ms(case.duration_ms as f64)
    )
}

/// Counts per `kind.operation`, as a fixed-width table.
pub fn operation_table(record: &RunRecord) -> String {
    #[derive(Default)]
    struct Row {
        pass: usize,
        fail: usize,
        warn: usize,
        blocked: usize,
        skip: usize,
        error: usize,
        known: usize,
    }
    // Rows in spec order: the order in which each operation's first clause appears.
    let mut rows: Vec<(String, Row)> = Vec::new();
    for c in &record.cases {
        let name = c.classname();
        let i = match rows.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                rows.push((name, Row::default()));
                rows.len() - 1
            }
        };
        let r = &mut rows[i].1;
        match c.verdict {
            Verdict::Pass => r.pass += 1,
            _ if c.is_known() => r.known += 1,
            Verdict::Skip | Verdict::Interrupted => r.skip += 1,
            Verdict::Error => r.error += 1,
            Verdict::Blocked => r.blocked += 1,
            _ if c.is_blocking(record.strict) => r.fail += 1,
            _ => r.warn += 1,
        }
    }
    let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(9).max(9);
    // The column of known failures is there when the run has a list that names some.
    let known = rows.iter().any(|(_, r)| r.known > 0);
    let mut out = format!(
        "{:<width$}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}",
        "operation", "passed", "failed", "warned", "blocked", "skipped", "errors"
    );
    out.push_str(if known { "  known\n" } else { "\n" });
    for (name, r) in &rows {
        let _ = write!(
            out,
            "{name:<width$}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}",
            r.pass, r.fail, r.warn, r.blocked, r.skip, r.error
        );
        if known {
            let _ = write!(out, "  {:>5}", r.known);
        }
        out.push('\n');
    }
    out
}

/// At most this many clauses in the closing "needs attention" list; the rest are counted.
pub const MAX_ATTENTION_LINES: usize = 20;

/// How many of the clauses a failure blocked the closing list names.
const BLOCKED_NAMES: usize = 6;

/// The end-of-run summary: the details of every clause that did not pass (failed, blocked,
/// timed out, errors, leaked, warnings, in that order), the table per operation, the run's
/// identity, then the same problems again as a short list with their rerun lines, and last
/// the verdict and the line `N passed, N failed, ...` that CI log scrapers look for.
pub fn render(record: &RunRecord, verbosity: Verbosity) -> String {
    let mut out = String::new();
    let problems = needs_attention(record);
    if verbosity != Verbosity::Quiet {
        for case in record.cases.iter().filter(|c| c.verdict == Verdict::Skip) {
            if let Some(reason) = &case.reason {
                let _ = writeln!(out, "\nskipped {}: {reason}", case.clause);
            }
        }
        let mut blocked_shown = false;
        for entry in &problems {
            if entry.problem == Problem::Blocked {
                // Blocked clauses whose root needs no attention are told once per root,
                // where the list reaches them.
                if !blocked_shown {
                    blocked_shown = true;
                    let orphans: Vec<&Case> = problems
                        .iter()
                        .filter(|e| e.problem == Problem::Blocked)
                        .map(|e| e.case)
                        .collect();
                    blocked_details(&mut out, &orphans, record.strict, verbosity);
                }
                continue;
            }
            case_details(&mut out, entry.case, record.strict, verbosity);
            for case in &entry.same {
                let _ = writeln!(
                    out,
                    "\n--- {} {:<6} {} {}: the same observation as {}",
                    entry.problem.label(),
                    case.level.as_str(),
                    case.clause,
                    case.title,
                    entry.case.clause
                );
            }
            // What this failure blocked, beneath it rather than a paragraph each.
            if !entry.blocks.is_empty() {
                let _ = writeln!(
                    out,
                    "{} (not judged because of this failure)",
                    entry.blocks_line(usize::MAX)
                );
                if verbosity == Verbosity::Verbose {
                    for case in &entry.blocks {
                        blocked_case(&mut out, case, record.strict);
                    }
                }
            }
        }
        let _ = writeln!(out);
        out.push_str(&operation_table(record));
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "plugin: {} (version {})",
            record.subject.plugin,
            record.subject.version.as_deref().unwrap_or("unknown")
        );
        let _ = writeln!(
            out,
            "profile: {} (Nomad {}), seed {}, run {}",
            record.profile.name, record.profile.nomad_versions, record.seed, record.run_id
        );
        if let Some(shard) = record.shard {
            let _ = writeln!(
                out,
                "shard {shard}: the other shards' clauses are not in this report"
            );
        }
        attention_list(&mut out, &problems);
    }
    if record.interrupted {
        let _ = writeln!(out, "the run was interrupted: this report is partial");
    }
    let t = record.tally();
    let _ = writeln!(
        out,
        "verdict: {}, {}",
        record.assessment().as_str(),
        record.coverage().sentence()
    );
    let _ = write!(
        out,
        "{} passed, {} failed ({} MUST, {} SHOULD), {} blocked, {} skipped, {} errors",
        t.passed,
        t.failed_must + t.failed_should,
        t.failed_must,
        t.failed_should,
        t.blocked,
        t.skipped,
        t.errors
    );
    if t.interrupted > 0 {
        let _ = write!(out, ", {} interrupted", t.interrupted);
    }
    if t.known > 0 {
        let _ = write!(out, ", {} known failures (not counted)", t.known);
    }
    if t.fixed > 0 {
        let _ = write!(
            out,
            ", {} fixed (remove from the list of known failures)",
            t.fixed
        );
    }
    out
}

/// Everything the summary tells about one clause that did not pass.
fn case_details(out: &mut String, case: &Case, strict: bool, verbosity: Verbosity) {
    let _ = writeln!(out, "\n--- {}", case_line(case, strict));
    if !case.text.is_empty() {
        let _ = writeln!(out, "{}", case.text);
    }
    if let Some(basis) = &case.basis {
        let _ = writeln!(out, "basis: {basis}");
    }
    if let Some(reason) = &case.reason {
        let _ = writeln!(out, "{reason}");
    }
    if let Some(rerun) = &case.rerun {
        let _ = writeln!(out, "rerun this clause: {rerun}");
    }
    for note in &case.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for a in &case.attachments {
        let _ = writeln!(out, "{}: in the HTML and JSON reports", attachment_line(a));
    }
    if verbosity == Verbosity::Verbose {
        let _ = writeln!(out, "calls:\n{}", case_transcript(case));
    }
}

/// Blocked clauses, one paragraph per root cause.
fn blocked_details(out: &mut String, cases: &[&Case], strict: bool, verbosity: Verbosity) {
    for (root, blocked) in group_by_root(cases.iter().copied()) {
        let _ = writeln!(
            out,
            "\n--- BLOCKED by {root}: {} clause{} could not be judged: {}",
            blocked.len(),
            if blocked.len() == 1 { "" } else { "s" },
            blocked
                .iter()
                .map(|c| c.clause.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if verbosity == Verbosity::Verbose {
            for case in blocked {
                blocked_case(out, case, strict);
            }
        }
    }
}

/// One blocked clause in full (verbose summaries).
fn blocked_case(out: &mut String, case: &Case, strict: bool) {
    let _ = writeln!(out, "{}", case_line(case, strict));
    if let Some(reason) = &case.reason {
        let _ = writeln!(out, "{reason}");
    }
}

/// The closing list: each clause that needs attention in a line, why in another, and the
/// command that reruns it; at most [`MAX_ATTENTION_LINES`] clauses, then what is left by kind.
fn attention_list(out: &mut String, problems: &[Entry<'_>]) {
    if problems.is_empty() {
        return;
    }
    let folded: usize = problems.iter().map(|e| e.blocks.len()).sum();
    let _ = writeln!(
        out,
        "\nneeds attention ({} clause{}{}):",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" },
        if folded > 0 {
            format!(", and {folded} they blocked")
        } else {
            String::new()
        }
    );
    for entry in problems.iter().take(MAX_ATTENTION_LINES) {
        let case = entry.case;
        let _ = writeln!(
            out,
            "  {:<7} {:<6} {} {}",
            entry.problem.label(),
            case.level.as_str(),
            case.clause,
            case.title
        );
        let why = match (&case.blocked_by, entry.reason.as_str()) {
            (Some(root), "") => format!("blocked by {root}"),
            (Some(root), r) => format!("blocked by {root}: {r}"),
            (None, r) => r.to_string(),
        };
        if !why.is_empty() {
            let _ = writeln!(out, "          {why}");
        }
        if !entry.same.is_empty() {
            let _ = writeln!(out, "          {}", entry.same_line());
        }
        if !entry.blocks.is_empty() {
            let _ = writeln!(out, "          {}", entry.blocks_line(BLOCKED_NAMES));
        }
        if let Some(rerun) = entry.rerun() {
            let _ = writeln!(out, "          rerun: {rerun}");
        }
    }
    if problems.len() > MAX_ATTENTION_LINES {
        let rest = &problems[MAX_ATTENTION_LINES..];
        let by_kind: Vec<String> = Problem::ALL
            .iter()
            .filter_map(|p| {
                let n = rest.iter().filter(|e| e.problem == *p).count();
                let name = match (p, n) {
                    (Problem::Error, 1) => "error".to_string(),
                    (Problem::Warning, 1) => "warning".to_string(),
                    (Problem::Known, 1) => "known failure".to_string(),
                    (Problem::Fixed, _) => "fixed".to_string(),
                    _ => p.heading().to_lowercase(),
                };
                (n > 0).then(|| format!("{n} {name}"))
            })
            .collect();
        let _ = writeln!(
            out,
            "  ... and {} more ({}): see the details above or the HTML report",
            rest.len(),
            by_kind.join(", ")
        );
    }
}

/// Blocked cases grouped by the clause that blocked them, roots in the order they first block.
pub fn blocked_by_root(record: &RunRecord) -> Vec<(&str, Vec<&Case>)> {
    group_by_root(
        record
            .cases
            .iter()
            .filter(|c| c.verdict == Verdict::Blocked),
    )
}

/// What blocked clauses that name no clause are grouped under.
pub const PRECONDITION_ROOT: &str = "a precondition that failed";

/// `cases` (blocked ones) grouped by the clause named in their `blocked_by`.
fn group_by_root<'a>(cases: impl Iterator<Item = &'a Case>) -> Vec<(&'a str, Vec<&'a Case>)> {
    let mut groups: Vec<(&str, Vec<&Case>)> = Vec::new();
    for case in cases {
        // A precondition that failed in no failing clause: `RunRecord::settle_preconditions`.
        let root = case.blocked_by.as_deref().unwrap_or(PRECONDITION_ROOT);
        match groups.iter_mut().find(|(r, _)| *r == root) {
            Some((_, v)) => v.push(case),
            None => groups.push((root, vec![case])),
        }
    }
    groups
}
