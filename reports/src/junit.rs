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
use std::io;
use std::time::Duration;

use quick_junit::{
    NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite, XmlString,
};

use crate::model::{Case, KnownStatus, RunRecord, Verdict};
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
    let mut xml = Vec::new();
    write(record, &mut xml)?;
    String::from_utf8(xml).map_err(|e| JunitError::Rewrite(e.to_string()))
}

/// [`render`], streamed into `out` as it is serialised (the same bytes): the document is never
/// held in memory whole, and neither is the escaped text of a case. quick-junit serialises the
/// report with a short stand-in for each case's failure text and `system-out`; the stand-ins
/// are replaced by the escaped text as they pass by, one case at a time.
pub fn write(record: &RunRecord, out: &mut dyn io::Write) -> Result<(), JunitError> {
    let mut texts = StandIns::new();
    let report = report(record, &mut |case, part| texts.add(case, part));
    let mut out = JunitOut {
        out,
        head: Some(Vec::new()),
        texts: &texts,
        written: 0,
    };
    report.serialize(&mut out)?;
    if out.head.is_some() {
        return Err(JunitError::Rewrite("no <testsuites> element".into()));
    }
    if out.written != texts.parts.len() {
        return Err(JunitError::Rewrite(format!(
            "{} of {} case texts were written",
            out.written,
            texts.parts.len()
        )));
    }
    Ok(())
}

/// The report quick-junit serialises, each case's texts as `text` gives them.
fn report<'a>(record: &'a RunRecord, text: &mut dyn FnMut(&'a Case, Part) -> String) -> Report {
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
            let tc = testcase_with(record, case, text);
            total += Duration::from_millis(case.duration_ms);
            suite.add_test_case(tc);
        }
        suite.set_time(total);
        report.add_test_suite(suite);
    }
    report
}

/// The long texts of a testcase: they go into the document as it is written, not into the
/// report quick-junit holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// The body of `<failure>`, `<error>` or `<skipped>`.
    Description,
    /// `<system-out>`: the transcript of the case's calls and its attachments.
    SystemOut,
}

impl Part {
    /// The text, whole.
    fn text(self, case: &Case) -> String {
        match self.pieces(case) {
            Some(pieces) => pieces.concat(),
            None => system_out(case),
        }
    }

    /// The text as pieces of the record, when it is made of them.
    fn pieces(self, case: &Case) -> Option<Vec<&str>> {
        match (self, case.verdict) {
            (Part::Description, Verdict::Skip | Verdict::Interrupted) => {
                Some(vec![case.reason.as_deref().unwrap_or("skipped")])
            }
            (Part::Description, _) => {
                let mut body = known_parts(case);
                body.extend(failure_body_parts(case));
                Some(body)
            }
            (Part::SystemOut, _) => None,
        }
    }
}

/// The stand-ins of one document: `<nonce><n>` for the `n`th text. The nonce is random per
/// document, so no text a plugin wrote can pass for one.
struct StandIns<'a> {
    nonce: String,
    parts: Vec<(&'a Case, Part)>,
}

impl<'a> StandIns<'a> {
    fn new() -> Self {
        use std::hash::{BuildHasher as _, Hasher as _};
        let random = |salt: u64| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(salt);
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos(),
            );
            h.finish()
        };
        StandIns {
            nonce: format!("nomad-conform-text-{:016x}{:016x}-", random(1), random(2)),
            parts: Vec::new(),
        }
    }

    fn add(&mut self, case: &'a Case, part: Part) -> String {
        self.parts.push((case, part));
        format!("{}{}", self.nonce, self.parts.len() - 1)
    }

    /// The text `stand_in` stands for, if it is one of ours.
    fn part(&self, stand_in: &[u8]) -> Option<(&'a Case, Part)> {
        let n = stand_in.strip_prefix(self.nonce.as_bytes())?;
        let n: usize = std::str::from_utf8(n).ok()?.parse().ok()?;
        self.parts.get(n).copied()
    }
}

/// Where quick-junit writes the document: passes it on to `out` with
/// [`strip_root_attributes`] applied to the root start tag (held back until it is complete),
/// and with each stand-in replaced by its text, made safe as quick-junit makes text safe
/// ([`XmlString`]) and escaped as quick-xml escapes it. quick-xml writes the content of a text
/// element in one write, so a stand-in is always a write of its own.
struct JunitOut<'a, 'r> {
    out: &'a mut dyn io::Write,
    /// What came before the end of the root start tag, while it has not been seen.
    head: Option<Vec<u8>>,
    texts: &'a StandIns<'r>,
    /// How many stand-ins were replaced.
    written: usize,
}

impl JunitOut<'_, '_> {
    fn text(&mut self, case: &Case, part: Part) -> io::Result<()> {
        self.written += 1;
        // A text that quick-junit would not change is escaped from where it is in the record;
        // others are cleaned into a copy first (that drops ANSI escapes and control
        // characters).
        if let Some(pieces) = part.pieces(case)
            && pieces.iter().all(|p| xml_unchanged(p))
        {
            for p in pieces {
                write_escaped(self.out, p)?;
            }
            return Ok(());
        }
        let text = part.text(case);
        if xml_unchanged(&text) {
            write_escaped(self.out, &text)
        } else {
            write_escaped(self.out, XmlString::new(&text).as_str())
        }
    }
}

impl io::Write for JunitOut<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(head) = &mut self.head else {
            match self.texts.part(buf) {
                Some((case, part)) => self.text(case, part)?,
                None => self.out.write_all(buf)?,
            }
            return Ok(buf.len());
        };
        head.extend_from_slice(buf);
        let Some(end) = root_tag_end(head) else {
            return Ok(buf.len());
        };
        let tag = std::str::from_utf8(&head[..=end]).map_err(io::Error::other)?;
        let rewritten = strip_root_attributes(tag).map_err(io::Error::other)?;
        self.out.write_all(rewritten.as_bytes())?;
        self.out.write_all(&head[end + 1..])?;
        self.head = None;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Whether quick-junit's [`XmlString`] would leave `text` as it is: it drops ANSI escape
/// sequences and every control character but the newline (C0 and C1), and nothing else.
fn xml_unchanged(text: &str) -> bool {
    // Byte by byte (the reports carry megabytes of transcript): a C0 control is one byte, and
    // a C1 control (U+0080..U+009F) is encoded 0xC2 0x80..0x9F.
    let b = text.as_bytes();
    !(0..b.len()).any(|i| {
        (b[i] < b' ' && b[i] != b'\n') || (b[i] == 0xC2 && b.get(i + 1).is_some_and(|n| *n <= 0x9F))
    })
}

/// `text` escaped as quick-xml escapes text content (`<`, `>`, `&`, `'` and `"`), written piece
/// by piece.
fn write_escaped(out: &mut dyn io::Write, text: &str) -> io::Result<()> {
    let bytes = text.as_bytes();
    let mut from = 0;
    for (i, b) in bytes.iter().enumerate() {
        let entity: &[u8] = match b {
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'&' => b"&amp;",
            b'\'' => b"&apos;",
            b'"' => b"&quot;",
            _ => continue,
        };
        out.write_all(&bytes[from..i])?;
        out.write_all(entity)?;
        from = i + 1;
    }
    out.write_all(&bytes[from..])
}

/// Where the `>` closing the `<testsuites` start tag is, once it has been written.
fn root_tag_end(xml: &[u8]) -> Option<usize> {
    const ROOT: &[u8] = b"<testsuites";
    let start = xml.windows(ROOT.len()).position(|w| w == ROOT)?;
    xml[start..]
        .iter()
        .position(|b| *b == b'>')
        .map(|i| start + i)
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
        ("coverage".to_string(), record.coverage().sentence()),
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
    testcase_with(record, case, &mut |case, part| part.text(case))
}

/// [`testcase`] with its long texts as `text` gives them (whole, or stand-ins).
fn testcase_with<'a>(
    record: &RunRecord,
    case: &'a Case,
    text: &mut dyn FnMut(&'a Case, Part) -> String,
) -> TestCase {
    let known = case.known.as_ref().map(|k| k.status);
    let status = match case.verdict {
        // A failure the list of known failures expects: skipped, so that CI stays green, with
        // the list's reason.
        v if known == Some(KnownStatus::Known) && v != Verdict::Pass => {
            let mut s = TestCaseStatus::skipped();
            let reason = case.known.as_ref().map_or("", |k| k.reason.as_str());
            s.set_message(format!(
                "known failure ({}): {}",
                v.as_str(),
                first_line(reason)
            ));
            s.set_description(text(case, Part::Description));
            s
        }
        // On the list, but it passed: under --strict the stale entry is a failure.
        Verdict::Pass if known == Some(KnownStatus::Fixed) && record.strict => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_type("fixed");
            s.set_message("fixed: remove it from the list of known failures");
            s.set_description(text(case, Part::Description));
            s
        }
        Verdict::Pass => TestCaseStatus::success(),
        Verdict::Skip | Verdict::Interrupted => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(first_line(case.reason.as_deref().unwrap_or("skipped")));
            s.set_description(text(case, Part::Description));
            s
        }
        v => {
            let kind = if v == Verdict::Error {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            };
            let mut s = TestCaseStatus::non_success(kind);
            let reason = case.reason.as_deref().unwrap_or_default();
            let level = if case.is_blocking(record.strict) || v == Verdict::Error {
                case.level.as_str().to_string()
            } else {
                format!("{} (warning)", case.level.as_str())
            };
            s.set_type(v.as_str());
            // What was expected beside what was seen, as the console's list says it; a blocked
            // case keeps its "blocked by" line.
            let line = match crate::attention::one_line_reason(case) {
                l if l.is_empty() || v == Verdict::Blocked => first_line(reason),
                l => l,
            };
            match &case.known {
                Some(k) if k.status == KnownStatus::Expired => s.set_message(format!(
                    "{level}: the known-failure entry expired on {}: {line}",
                    k.expires.as_deref().unwrap_or("?"),
                )),
                _ => s.set_message(format!("{level}: {line}")),
            };
            s.set_description(text(case, Part::Description));
            s
        }
    };
    let mut tc = TestCase::new(case.display_name(), status);
    tc.set_classname(case.classname());
    tc.set_time(Duration::from_millis(case.duration_ms));
    // Every call and every attachment adds a line, so the transcript is empty only without
    // either.
    if !case.events.is_empty() || !case.attachments.is_empty() {
        tc.set_system_out(text(case, Part::SystemOut));
    }
    tc
}

/// `system-out` of a case: the transcript of its calls, then its attachments.
fn system_out(case: &Case) -> String {
    let mut transcript = case_transcript(case);
    let attachments = attachments_transcript(case, MAX_ATTACHMENT_TEXT);
    if !attachments.is_empty() {
        if !transcript.is_empty() {
            transcript.push('\n');
        }
        transcript.push_str(&attachments);
    }
    transcript
}

/// What the list of known failures says of a case, in pieces, before the rest of its body.
fn known_parts(case: &Case) -> Vec<&str> {
    let Some(k) = &case.known else {
        return Vec::new();
    };
    let mut body = match k.status {
        KnownStatus::Known => vec!["known failure: ", k.reason.as_str(), "\n"],
        KnownStatus::Fixed => vec![
            "fixed: remove it from the list of known failures (it says: ",
            k.reason.as_str(),
            ")\n",
        ],
        KnownStatus::Expired => vec![
            "the known-failure entry expired on ",
            k.expires.as_deref().unwrap_or("?"),
            " (it said: ",
            k.reason.as_str(),
            ")\n",
        ],
    };
    if let Some(root) = &k.via {
        body.extend(["blocked by the known failure of ", root.as_str(), "\n"]);
    }
    if let Some(link) = &k.link {
        body.extend(["link: ", link.as_str(), "\n"]);
    }
    body.push("\n");
    body
}

/// The body of a failure, in pieces: the clause, its text and basis, the reason, the rerun
/// line.
fn failure_body_parts(case: &Case) -> Vec<&str> {
    let mut body = vec![
        case.clause.as_str(),
        " (",
        case.level.as_str(),
        "): ",
        case.title.as_str(),
        "\n",
    ];
    if !case.text.is_empty() {
        body.extend([case.text.as_str(), "\n"]);
    }
    if let Some(basis) = &case.basis {
        body.extend(["Basis: ", basis.as_str(), "\n"]);
    }
    body.extend(["\n", case.reason.as_deref().unwrap_or_default()]);
    if let Some(rerun) = &case.rerun {
        body.extend(["\n\nrerun this clause: ", rerun.as_str()]);
    }
    body.push("\n");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Attachment, Excerpt, MEDIA_TEXT, Response};

    /// The document as quick-junit writes it with every text given whole: what [`write`]
    /// must write.
    fn whole(record: &RunRecord) -> String {
        let xml = report(record, &mut |case, part| part.text(case))
            .to_string()
            .unwrap();
        strip_root_attributes(&xml).unwrap()
    }

    #[test]
    fn streamed_texts_read_as_quick_junit_writes_them() {
        let mut record = crate::json::parse(include_str!("../tests/data/golden-run.json")).unwrap();
        // Text that needs escaping, and text quick-junit cleans: ANSI colours, tabs, carriage
        // returns, C0 and C1 controls.
        let nasty = [
            "plain text\nover lines",
            "<b>bold</b> & 'quoted' \"twice\"",
            "\u{1b}[31mred\u{1b}[0m and \u{1b}]0;title\u{7}",
            "tab\there\r\nand\u{0}nul\u{85}next line",
            "unicode: é € 🦀 \u{a0}",
        ];
        for (i, case) in record.cases.iter_mut().enumerate() {
            let text = nasty[i % nasty.len()];
            case.reason = Some(format!("{text}\nseen: {text}"));
            case.text = format!("{} {text}", case.text);
            if let Some(ev) = case.events.first_mut()
                && let Response::Exec { stdout, .. } = &mut ev.response
            {
                *stdout = Excerpt {
                    text: text.into(),
                    total_bytes: text.len() as u64,
                    truncated: false,
                };
            }
            case.attachments
                .push(Attachment::new("log", MEDIA_TEXT, format!("{text}\n")));
        }
        let mut verdicts = record.cases.iter().map(|c| c.verdict).collect::<Vec<_>>();
        verdicts.dedup();
        assert!(verdicts.len() > 2, "{verdicts:?}");
        assert_eq!(render(&record).unwrap(), whole(&record));
        // A skipped case without a reason, and a case with neither calls nor attachments.
        record.cases[0].verdict = Verdict::Skip;
        record.cases[0].reason = None;
        record.cases[1].events.clear();
        record.cases[1].attachments.clear();
        assert_eq!(render(&record).unwrap(), whole(&record));
    }

    #[test]
    fn texts_quick_junit_leaves_alone_are_known() {
        for text in ["a\nb", "<&'\">", "é € 🦀 \u{a0}\u{7f}", ""] {
            assert!(xml_unchanged(text), "{text:?}");
            assert_eq!(XmlString::new(text).as_str(), text);
        }
        for text in ["a\tb", "a\rb", "\u{1b}[1m", "\u{85}", "\u{9b}1m", "\u{0}"] {
            assert!(!xml_unchanged(text), "{text:?}");
            assert_ne!(XmlString::new(text).as_str(), text);
        }
    }
}
