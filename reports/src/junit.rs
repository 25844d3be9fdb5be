//! JUnit XML from a run record.
//!
//! Shape: one `<testsuite>` per spec file (with a `file` attribute), one `<testcase>` per clause
//! with `classname = <kind>.<operation>` and `name = <CLAUSE-ID>: <title>`. A broken clause is a
//! `<failure>`, a case the harness could not judge an `<error>`, a skipped one `<skipped>` with
//! its reason. Messages go in the element body as well as the one-line `message` attribute.
//! `system-out` holds the transcript of the case's calls and its attachments (a line naming
//! each; the content of text ones, bounded).
//! The output validates against the Jenkins xunit `junit-10.xsd`.

use std::collections::BTreeMap;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::model::{Case, RunRecord, Verdict};
use crate::transcript::{attachments_transcript, case_transcript};

/// The most of a text attachment's content that goes into `system-out` (the HTML and JSON
/// reports keep all of it).
pub const MAX_ATTACHMENT_TEXT: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum JunitError {
    #[error("failed to serialise the JUnit report: {0}")]
    Serialize(#[from] quick_junit::SerializeError),
    #[error("failed to rewrite the JUnit root element: {0}")]
    Rewrite(String),
}

/// Render the record as a JUnit XML document.
pub fn render(record: &RunRecord) -> Result<String, JunitError> {
    let mut report = Report::new(format!("nomad-conform {}", record.kind));
    report.set_timestamp(record.started_at.fixed_offset());
    report.set_time(elapsed(record));

    let mut by_file: BTreeMap<&str, Vec<&Case>> = BTreeMap::new();
    for case in &record.cases {
        by_file
            .entry(case.spec_file.as_str())
            .or_default()
            .push(case);
    }
    for (file, cases) in by_file {
        let mut suite = TestSuite::new(suite_name(record, file));
        suite.set_timestamp(record.started_at.fixed_offset());
        suite.extra.insert("file".into(), file.into());
        for (k, v) in properties(record) {
            suite.add_property(Property::new(k, v));
        }
        let mut total = Duration::ZERO;
        for case in cases {
            let tc = testcase(record, case);
            total += Duration::from_millis(case.duration_ms);
            suite.add_test_case(tc);
        }
        suite.set_time(total);
        report.add_test_suite(suite);
    }
    let xml = report.to_string()?;
    strip_root_attributes(&xml)
}

fn suite_name(record: &RunRecord, file: &str) -> String {
    let stem = file
        .rsplit('/')
        .next()
        .unwrap_or(file)
        .trim_end_matches(".feature");
    format!("{}.{}", record.kind, stem)
}

fn elapsed(record: &RunRecord) -> Duration {
    (record.finished_at - record.started_at)
        .to_std()
        .unwrap_or_default()
}

/// Suite-level properties: the JUnit schema allows properties only on `<testsuite>`.
pub fn properties(record: &RunRecord) -> Vec<(String, String)> {
    let mut p = vec![
        ("nomad_conform.kind".to_string(), record.kind.clone()),
        ("plugin.path".to_string(), record.subject.plugin.clone()),
        (
            "plugin.version".to_string(),
            record
                .subject
                .version
                .clone()
                .unwrap_or_else(|| "unknown".into()),
        ),
        ("profile".to_string(), record.profile.name.clone()),
        (
            "profile.nomad_versions".to_string(),
            record.profile.nomad_versions.clone(),
        ),
        ("seed".to_string(), record.seed.to_string()),
        ("run_id".to_string(), record.run_id.clone()),
        (
            "harness.version".to_string(),
            format!("{} {}", record.harness.name, record.harness.version),
        ),
        (
            "assessment".to_string(),
            record.assessment().as_str().to_string(),
        ),
        ("strict".to_string(), record.strict.to_string()),
        ("interrupted".to_string(), record.interrupted.to_string()),
    ];
    for (k, v) in &record.subject.details {
        p.push((format!("plugin.{k}"), v.clone()));
    }
    p
}

/// The testcase of one clause (also used by the fleet report, one suite per node × plugin).
pub(crate) fn testcase(record: &RunRecord, case: &Case) -> TestCase {
    let status = match case.verdict {
        Verdict::Pass => TestCaseStatus::success(),
        Verdict::Skip => {
            let mut s = TestCaseStatus::skipped();
            let reason = case.reason.clone().unwrap_or_else(|| "skipped".into());
            s.set_message(first_line(&reason));
            s.set_description(reason);
            s
        }
        v => {
            let kind = if v == Verdict::Error {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            };
            let mut s = TestCaseStatus::non_success(kind);
            let reason = case.reason.clone().unwrap_or_default();
            let level = if case.is_blocking(record.strict) || v == Verdict::Error {
                case.level.as_str().to_string()
            } else {
                format!("{} (warning)", case.level.as_str())
            };
            s.set_type(v.as_str());
            s.set_message(format!("{level}: {}", first_line(&reason)));
            s.set_description(failure_body(case, &reason));
            s
        }
    };
    let mut tc = TestCase::new(case.display_name(), status);
    tc.set_classname(case.classname());
    tc.set_time(Duration::from_millis(case.duration_ms));
    let mut transcript = case_transcript(case);
    let attachments = attachments_transcript(case, MAX_ATTACHMENT_TEXT);
    if !attachments.is_empty() {
        if !transcript.is_empty() {
            transcript.push('\n');
        }
        transcript.push_str(&attachments);
    }
    if !transcript.is_empty() {
        tc.set_system_out(transcript);
    }
    tc
}

fn failure_body(case: &Case, reason: &str) -> String {
    let mut body = format!(
        "{} ({}): {}\n",
        case.clause,
        case.level.as_str(),
        case.title
    );
    if !case.text.is_empty() {
        body.push_str(&case.text);
        body.push('\n');
    }
    if let Some(basis) = &case.basis {
        body.push_str("Basis: ");
        body.push_str(basis);
        body.push('\n');
    }
    body.push('\n');
    body.push_str(reason);
    if let Some(rerun) = &case.rerun {
        body.push_str("\n\nrerun this clause: ");
        body.push_str(rerun);
    }
    body.push('\n');
    body
}

fn first_line(s: &str) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    const MAX: usize = 200;
    if line.chars().count() > MAX {
        let cut: String = line.chars().take(MAX).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// quick-junit writes `skipped` (and sometimes `disabled`) on `<testsuites>`; the Jenkins schema
/// allows only `name`, `time`, `tests`, `failures` and `errors` there. Re-emit the document with
/// the root element's other attributes dropped; everything else passes through unchanged.
pub(crate) fn strip_root_attributes(xml: &str) -> Result<String, JunitError> {
    let start = xml
        .find("<testsuites")
        .ok_or_else(|| JunitError::Rewrite("no <testsuites> element".into()))?;
    let end = start
        + xml[start..]
            .find('>')
            .ok_or_else(|| JunitError::Rewrite("unterminated <testsuites> tag".into()))?;
    let tag = &xml[start..end];
    let mut kept = String::from("<testsuites");
    for (name, value) in parse_attributes(&tag["<testsuites".len()..])? {
        if matches!(name, "name" | "time" | "tests" | "failures" | "errors") {
            kept.push_str(&format!(" {name}=\"{value}\""));
        }
    }
    Ok(format!("{}{}{}", &xml[..start], kept, &xml[end..]))
}

/// Attributes of a start tag as written by quick-junit: `name="value"` pairs, values already
/// escaped (so they never contain a raw `"`).
fn parse_attributes(s: &str) -> Result<Vec<(&str, &str)>, JunitError> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() && !rest.starts_with('/') {
        let eq = rest
            .find("=\"")
            .ok_or_else(|| JunitError::Rewrite(format!("bad attribute list: {s}")))?;
        let name = rest[..eq].trim();
        let after = &rest[eq + 2..];
        let close = after
            .find('"')
            .ok_or_else(|| JunitError::Rewrite(format!("unterminated attribute: {s}")))?;
        out.push((name, &after[..close]));
        rest = after[close + 1..].trim_start();
    }
    Ok(out)
}
