//! The console summary printed at the end of a run.

use std::fmt::Write as _;

use crate::model::{RunRecord, Verdict};
use crate::transcript::fmt_ms;

/// One line for a finished case, as printed while the run goes on.
pub fn case_line(case: &crate::model::Case, strict: bool) -> String {
    let label = match case.verdict {
        Verdict::Pass => "PASS",
        Verdict::Skip => "SKIP",
        Verdict::Error => "ERROR",
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

/// The end-of-run summary: details of every case that did not pass, then the totals.
/// The last line is `N passed, N failed, ...` so that CI log scrapers find it.
pub fn render(record: &RunRecord) -> String {
    let mut out = String::new();
    let problems: Vec<_> = record
        .cases
        .iter()
        .filter(|c| !matches!(c.verdict, Verdict::Pass | Verdict::Skip))
        .collect();
    for case in record.cases.iter().filter(|c| c.verdict == Verdict::Skip) {
        if let Some(reason) = &case.reason {
            let _ = writeln!(out, "\nskipped {}: {reason}", case.clause);
        }
    }
    for case in &problems {
        let _ = writeln!(out, "\n--- {}", case_line(case, record.strict));
        if !case.text.is_empty() {
            let _ = writeln!(out, "{}", case.text);
        }
        if let Some(reason) = &case.reason {
            let _ = writeln!(out, "{reason}");
        }
        if let Some(rerun) = &case.rerun {
            let _ = writeln!(out, "rerun this clause: {rerun}");
        }
    }
    let t = record.tally();
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
    if record.interrupted {
        let _ = writeln!(out, "the run was interrupted: this report is partial");
    }
    let _ = writeln!(out, "verdict: {}", record.assessment().as_str());
    let _ = write!(
        out,
        "{} passed, {} failed ({} MUST, {} SHOULD), {} skipped, {} errors",
        t.passed,
        t.failed_must + t.failed_should,
        t.failed_must,
        t.failed_should,
        t.skipped,
        t.errors
    );
    out
}
