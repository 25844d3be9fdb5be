//! The HTML report: one self-contained file (inline CSS and JS, no network) rendered from a run
//! record with minijinja. A verdict badge and counts at the top, then what needs attention
//! (failed, blocked, timed out, errors, leaked, warnings, in that order, each with why in a line
//! and its rerun command), then the clauses that did not pass grouped by operation, and the
//! passed and skipped ones folded below them; a status filter and free-text search over the
//! clauses, each clause expandable to its text, what was required and seen, its calls drawn
//! against their deadlines, its attachments, and the commands that reproduce it; the run's
//! environment at the bottom. Works without JavaScript (the script only adds the filter, the
//! search and the copy buttons).
//!
//! Nothing a plugin influenced can run in the page: text is escaped, and an SVG attachment is
//! shown through `<img src="data:...">`, where a browser runs no script and loads nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use minijinja::{Environment, Value, context};
use serde::Serialize;

use base64::Engine as _;

use crate::attention::{Problem, needs_attention};
use crate::model::{Attachment, Case, OpEvent, Request, Response, RunRecord, Verdict};
use crate::transcript::{fmt_bytes, fmt_ms};

const TEMPLATE: &str = include_str!("../templates/report.html");
/// A group of clauses, included by the page for each group.
const GROUP_TEMPLATE: &str = include_str!("../templates/group.html");
/// One clause, included by a group for each of its cases.
const CASE_TEMPLATE: &str = include_str!("../templates/case.html");
/// The styles the run report shares with the fleet report.
pub(crate) const STYLES_TEMPLATE: &str = include_str!("../templates/styles.html");

#[derive(Debug, thiserror::Error)]
#[error("failed to render the HTML report: {0}")]
pub struct HtmlError(#[from] minijinja::Error);

/// The status a case shows as, and filters by.
fn status(case: &Case, strict: bool) -> &'static str {
    if case.is_known() && case.verdict != Verdict::Pass {
        return "known";
    }
    match case.verdict {
        Verdict::Pass => "pass",
        Verdict::Skip => "skip",
        Verdict::Interrupted => "interrupted",
        Verdict::Error => "error",
        Verdict::Blocked => "blocked",
        _ if case.is_blocking(strict) => "fail",
        _ => "warn",
    }
}

// The views borrow the record's text: it is copied once, into the template's values when the
// context is built, and the page is written straight into its file (a failure quoting 50 MB of
// a plugin's output is not also held as view fields, macro output and the whole page). Text
// made for the page (the search text, a call's request and response) is made as a template
// value directly.

#[derive(Serialize)]
struct GroupView<'a> {
    name: String,
    /// For a group of blocked clauses: the clause that blocked them.
    root: Option<&'a str>,
    counts: BTreeMap<&'static str, usize>,
    cases: Vec<CaseView<'a>>,
}

#[derive(Serialize)]
struct CaseView<'a> {
    id: &'a str,
    title: &'a str,
    level: &'static str,
    status: &'static str,
    verdict: &'static str,
    duration: String,
    text: &'a str,
    basis: Option<&'a str>,
    reason: Option<String>,
    /// The calls are listed without their bodies ([`with_bodies`]).
    bodies_left_out: bool,
    /// ... because the page's budget for them was spent on clauses before it.
    budget_spent: bool,
    /// The clause that blocked this one.
    blocked_by: Option<&'a str>,
    /// Clauses this one blocked (it is their root cause).
    blocks: Vec<&'a str>,
    /// What the list of known failures says of this clause, in a line.
    known: Option<String>,
    /// The entry's link, when it is a web address.
    known_link: Option<&'a str>,
    rerun: Option<&'a str>,
    notes: &'a [String],
    steps: Vec<StepView<'a>>,
    events: Vec<EventView<'a>>,
    attachments: Vec<AttachmentView<'a>>,
    spec: String,
}

#[derive(Serialize)]
struct AttachmentView<'a> {
    title: &'a str,
    media_type: &'a str,
    size: String,
    /// Base64 of a complete SVG drawing, shown as `<img src="data:image/svg+xml;base64,...">`
    /// (only base64 characters, so the template need not escape it).
    svg_base64: Option<Value>,
    /// The content of anything else, shown as escaped text.
    text: Option<&'a str>,
    /// Set when the content was cut: says how much is shown.
    truncated: Option<String>,
}

fn attachment_view(a: &Attachment) -> AttachmentView<'_> {
    let svg = a.is_svg();
    AttachmentView {
        title: &a.title,
        media_type: &a.media_type,
        size: fmt_bytes(a.total_bytes),
        svg_base64: svg
            .then(|| Value::from(base64::engine::general_purpose::STANDARD.encode(&a.content))),
        text: (!svg).then_some(a.content.as_str()),
        truncated: a.truncated.then(|| {
            let drawn = if a.media_type == crate::model::MEDIA_SVG {
                "too large to draw; "
            } else {
                ""
            };
            format!(
                "{drawn}only the first {} of {} kept",
                fmt_bytes(a.content.len() as u64),
                fmt_bytes(a.total_bytes)
            )
        }),
    }
}

/// The problems of one kind at the top of the page.
#[derive(Serialize)]
struct AttentionGroupView<'a> {
    key: &'static str,
    heading: &'static str,
    entries: Vec<AttentionView<'a>>,
}

#[derive(Serialize)]
struct AttentionView<'a> {
    id: &'a str,
    title: &'a str,
    level: &'static str,
    label: &'static str,
    /// The case's status (its colour).
    status: &'static str,
    reason: String,
    blocked_by: Option<&'a str>,
    /// One rerun line for the entry's clauses.
    rerun: Option<String>,
    /// The clauses its failure blocked, folded beneath it.
    blocks: Vec<BlockedView<'a>>,
    /// The clauses that failed on the same observation, shown in this entry.
    same: Vec<BlockedView<'a>>,
    /// How the line naming them begins ([`crate::attention::Entry::same_says`]).
    same_says: &'static str,
}

/// Clauses not judged because of the node the run was on (a runtime missing, a driver
/// UNDETECTED here): one card per reason, the clauses folded under it, no failure.
#[derive(Serialize)]
struct UnjudgedView<'a> {
    reason: &'a str,
    clauses: Vec<BlockedView<'a>>,
}

fn unjudged_groups(record: &RunRecord) -> Vec<UnjudgedView<'_>> {
    let mut groups: Vec<UnjudgedView<'_>> = Vec::new();
    for case in record.cases.iter().filter(|c| c.not_judged_on_this_node()) {
        let reason = case
            .reason
            .as_deref()
            .unwrap_or_default()
            .trim_start_matches(crate::model::NOT_JUDGED_ON_THIS_NODE)
            .lines()
            .next()
            .unwrap_or_default();
        let view = BlockedView {
            id: &case.clause,
            title: &case.title,
        };
        match groups.iter_mut().find(|g| g.reason == reason) {
            Some(g) => g.clauses.push(view),
            None => groups.push(UnjudgedView {
                reason,
                clauses: vec![view],
            }),
        }
    }
    groups
}

#[derive(Serialize)]
struct BlockedView<'a> {
    id: &'a str,
    title: &'a str,
}

fn attention_groups(record: &RunRecord) -> Vec<AttentionGroupView<'_>> {
    let entries = needs_attention(record);
    Problem::ALL
        .iter()
        .map(|p| AttentionGroupView {
            key: p.key(),
            heading: p.heading(),
            entries: entries
                .iter()
                .filter(|e| e.problem == *p)
                .map(|e| AttentionView {
                    id: &e.case.clause,
                    title: &e.case.title,
                    level: e.case.level.as_str(),
                    label: p.label(),
                    status: status(e.case, record.strict),
                    reason: e.reason.clone(),
                    blocked_by: e.case.blocked_by.as_deref(),
                    rerun: e.rerun(),
                    same_says: e.same_says(),
                    same: e
                        .same
                        .iter()
                        .map(|c| BlockedView {
                            id: &c.clause,
                            title: &c.title,
                        })
                        .collect(),
                    blocks: e
                        .blocks
                        .iter()
                        .map(|c| BlockedView {
                            id: &c.clause,
                            title: &c.title,
                        })
                        .collect(),
                })
                .collect(),
        })
        .filter(|g| !g.entries.is_empty())
        .collect()
}

#[derive(Serialize)]
struct StepView<'a> {
    keyword: &'a str,
    text: &'a str,
    outcome: String,
}

#[derive(Serialize)]
struct EventView<'a> {
    operation: &'a str,
    started: String,
    duration: String,
    deadline: Option<String>,
    /// Width of the timing bar, percent of the deadline (capped at 100).
    percent: f64,
    over: bool,
    request: Value,
    response: Value,
    outcome: String,
    ok: bool,
    reproduce: Option<&'a str>,
    notes: &'a [String],
}

/// The most of one text (a reason, a request, a response) the page shows; the JSON record keeps
/// all of it.
const MAX_SHOWN_TEXT: usize = 16 * 1024;

/// `text`, cut to [`MAX_SHOWN_TEXT`] bytes with a line saying how much more the JSON record holds.
fn shown(text: &str) -> String {
    let head = crate::text::head(text, MAX_SHOWN_TEXT);
    if head.len() == text.len() {
        return text.to_string();
    }
    format!(
        "{head}\n… {} more bytes in the JSON record",
        text.len() - head.len()
    )
}

/// The most of a blocked clause's reason the page shows: what it needed and what was seen.
const MAX_BLOCKED_REASON: usize = 2048;

/// A case's reason as the page shows it. One whose calls are shown without their bodies (a
/// blocked clause: the clause that failed first has them; a failure past the page's budget)
/// ends before its reproduce block and is cut shorter.
fn reason_shown(reason: &str, bodies: bool) -> String {
    if bodies {
        return shown(reason);
    }
    let head = reason
        .split_once("\nreproduce:")
        .map_or(reason, |(head, _)| head);
    let cut = crate::text::head(head, MAX_BLOCKED_REASON);
    if cut.len() == head.len() {
        return head.to_string();
    }
    format!("{cut}…\n(the whole text is in the JSON record)")
}

/// Whether a case's calls may be shown with their bodies (requests, responses, reproduce
/// lines): a clause that failed, timed out, leaked or errored, where they are the evidence. A
/// passing, skipped or blocked clause's calls are listed by their outcome and timing only (a
/// failing driver run's blocked clauses repeat the same StartTask a few dozen times); the JSON
/// record keeps every body.
fn may_show_bodies(case: &Case) -> bool {
    !matches!(
        case.verdict,
        Verdict::Pass | Verdict::Skip | Verdict::Blocked
    )
}

/// The most bytes of call bodies one page shows: with the rest of a page of a few hundred
/// clauses, it keeps a failing run's page under 500 KB.
const BODY_BUDGET: usize = 128 * 1024;

/// The bytes `text` takes in the page, escaped (each of `&<>"` is written as an entity of four to
/// six bytes; see [`escape_few`]).
fn escaped_len(text: &str) -> usize {
    text.len()
        + 5 * text
            .bytes()
            .filter(|b| matches!(b, b'&' | b'<' | b'>' | b'"'))
            .count()
}

/// What showing a case's bodies adds to the page: its calls' requests, responses and
/// reproduce lines with their markup, and the rest of its reason past what a brief case shows.
fn body_cost(case: &Case) -> usize {
    let calls: usize = case
        .events
        .iter()
        .map(|ev| {
            escaped_len(&shown(&render_request(&ev.request)))
                + escaped_len(&shown(&render_response(&ev.response)))
                + ev.reproduce.as_deref().map_or(0, escaped_len)
                + 200
        })
        .sum();
    let reason = case.reason.as_deref().map_or(0, |r| {
        escaped_len(&shown(r)).saturating_sub(escaped_len(&reason_shown(r, false)))
    });
    calls + reason
}

/// The clauses whose calls the page shows with their bodies: those that [`may_show_bodies`], in
/// the order the reader meets them in "needs attention", while [`BODY_BUDGET`] lasts. A clause
/// that failed on the same observation as one before it is left brief: that one shows it.
fn with_bodies(record: &RunRecord) -> BTreeSet<&str> {
    let mut left = BODY_BUDGET;
    let mut shown = BTreeSet::new();
    for entry in needs_attention(record) {
        let case = entry.case;
        if !may_show_bodies(case) {
            continue;
        }
        let cost = body_cost(case);
        if cost <= left {
            left -= cost;
            shown.insert(case.clause.as_str());
        }
    }
    shown
}

fn event_view(ev: &OpEvent, bodies: bool) -> EventView<'_> {
    let (percent, over) = match ev.deadline_ms {
        Some(d) if d > 0 => {
            let p = ev.duration_ms / d as f64 * 100.0;
            (p.clamp(0.5, 100.0), p > 100.0)
        }
        _ => (0.0, false),
    };
    let (request, response, outcome, ok) = match (&ev.request, &ev.response) {
        (
            Request::Exec { argv, env, cwd },
            Response::Exec {
                status,
                stdout,
                stderr,
            },
        ) => {
            let mut req = format!("argv: {argv:?}\n");
            if let Some(cwd) = cwd {
                req.push_str(&format!("cwd:  {cwd}\n"));
            }
            for (k, v) in env {
                req.push_str(&format!("{k}={v}\n"));
            }
            let mut resp = String::new();
            for (name, ex) in [("stdout", stdout), ("stderr", stderr)] {
                if ex.total_bytes == 0 {
                    let _ = writeln!(resp, "{name}: (empty)");
                } else {
                    let cut = if ex.truncated { ", excerpt" } else { "" };
                    let _ = writeln!(resp, "{name} ({} bytes{cut}):\n{}", ex.total_bytes, ex.text);
                }
            }
            let ok = matches!(status, crate::model::ExitStatus::Exited { code: 0 });
            (req, resp, status.to_string(), ok)
        }
        (req, resp) => (
            render_request(req),
            render_response(resp),
            outcome_of(resp),
            matches!(resp, Response::Grpc { code, .. } if code == "OK")
                || matches!(resp, Response::Http { status, .. } if (1..400).contains(status)),
        ),
    };
    // A call that answered well needs no reproduce line of its own: the failure's reason has
    // the lines of the calls it judged.
    let (request, response, reproduce) = if bodies {
        (
            shown(&request),
            shown(&response),
            ev.reproduce.as_deref().filter(|_| !ok),
        )
    } else {
        (String::new(), String::new(), None)
    };
    EventView {
        operation: &ev.operation,
        started: fmt_ms(ev.started_ms as f64),
        duration: fmt_ms(ev.duration_ms),
        deadline: ev.deadline_ms.map(|d| fmt_ms(d as f64)),
        percent,
        over,
        request: Value::from(request),
        response: Value::from(response),
        outcome,
        ok,
        reproduce,
        notes: &ev.notes,
    }
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn render_request(r: &Request) -> String {
    match r {
        Request::Exec { argv, .. } => format!("{argv:?}"),
        Request::Grpc { method, request } => format!("{method}\n{}", pretty(request)),
        Request::Http { method, path, body } => match body {
            Some(b) => format!("{method} {path}\n{}", pretty(b)),
            None => format!("{method} {path}"),
        },
    }
}

fn render_response(r: &Response) -> String {
    match r {
        Response::Exec { stdout, .. } => stdout.text.clone(),
        Response::Grpc {
            response, message, ..
        } => match response {
            Some(v) => pretty(v),
            None => message.clone(),
        },
        Response::Http { body, .. } => body.as_ref().map(pretty).unwrap_or_default(),
    }
}

fn outcome_of(r: &Response) -> String {
    match r {
        Response::Exec { status, .. } => status.to_string(),
        Response::Grpc { code, .. } => code.clone(),
        // Status 0: no answer came (a dropped or refused connection, a client that gave up).
        Response::Http { status: 0, .. } => "no answer".to_string(),
        Response::Http { status, .. } => format!("HTTP {status}"),
    }
}

fn case_view<'a>(case: &'a Case, record: &'a RunRecord, bodies: bool) -> CaseView<'a> {
    let strict = record.strict;
    CaseView {
        id: &case.clause,
        title: &case.title,
        level: case.level.as_str(),
        status: status(case, strict),
        verdict: case.verdict.as_str(),
        duration: fmt_ms(case.duration_ms as f64),
        text: &case.text,
        basis: case.basis.as_deref(),
        reason: case.reason.as_deref().map(|r| reason_shown(r, bodies)),
        blocked_by: case.blocked_by.as_deref(),
        blocks: record
            .cases
            .iter()
            .filter(|c| {
                c.verdict == Verdict::Blocked && c.blocked_by.as_deref() == Some(&case.clause)
            })
            .map(|c| c.clause.as_str())
            .collect(),
        known: case
            .known
            .as_ref()
            .map(|_| crate::attention::entry_reason(case)),
        known_link: case
            .known
            .as_ref()
            .and_then(|k| k.link.as_deref())
            .filter(|l| l.starts_with("https://") || l.starts_with("http://")),
        // A clause that passed or was skipped needs no rerun line (each one is as long as
        // the run's command line): the problems have theirs.
        rerun: case
            .rerun
            .as_deref()
            .filter(|_| !matches!(case.verdict, Verdict::Pass | Verdict::Skip)),
        notes: &case.notes,
        steps: case
            .steps
            .iter()
            .map(|s| StepView {
                keyword: &s.keyword,
                text: &s.text,
                outcome: format!("{:?}", s.outcome).to_lowercase(),
            })
            .collect(),
        events: case
            .events
            .iter()
            .map(|ev| event_view(ev, bodies))
            .collect(),
        bodies_left_out: !bodies && !case.events.is_empty(),
        budget_spent: !bodies && may_show_bodies(case),
        attachments: case.attachments.iter().map(attachment_view).collect(),
        spec: format!("{}:{}", case.spec_file, case.line),
    }
}

/// Add `case` to the group called `name`, making the group at the end when it is new.
fn add_to_group<'a>(
    groups: &mut Vec<GroupView<'a>>,
    name: String,
    root: Option<&'a str>,
    case: &'a Case,
    record: &'a RunRecord,
    bodies: &BTreeSet<&str>,
) {
    let i = match groups.iter().position(|g| g.name == name) {
        Some(i) => i,
        None => {
            groups.push(GroupView {
                name,
                root,
                counts: BTreeMap::new(),
                cases: Vec::new(),
            });
            groups.len() - 1
        }
    };
    let g = &mut groups[i];
    *g.counts.entry(status(case, record.strict)).or_default() += 1;
    g.cases.push(case_view(
        case,
        record,
        bodies.contains(case.clause.as_str()),
    ));
}

/// The templates' formatter: a text is escaped for HTML by `&`, `<`, `>` and `"` alone, which is
/// safe in text and in the templates' attributes (every one is double-quoted, and none holds a
/// text in a script, a style or a URL). minijinja's own escaping writes `'` and `/` as entities
/// too, which made a JSON body or a shell line half again as long.
fn escape_few(
    out: &mut minijinja::Output,
    state: &mut minijinja::State,
    value: &Value,
) -> Result<(), minijinja::Error> {
    let html = matches!(state.auto_escape(), minijinja::AutoEscape::Html);
    match value.as_str() {
        Some(text) if html && !value.is_safe() => {
            let mut write = |s: &str| {
                out.write_str(s).map_err(|e| {
                    minijinja::Error::new(minijinja::ErrorKind::WriteFailure, e.to_string())
                })
            };
            let mut rest = text;
            while let Some(i) = rest.find(['&', '<', '>', '"']) {
                write(&rest[..i])?;
                write(match rest.as_bytes()[i] {
                    b'&' => "&amp;",
                    b'<' => "&lt;",
                    b'>' => "&gt;",
                    _ => "&quot;",
                })?;
                rest = &rest[i + 1..];
            }
            write(rest)
        }
        _ => minijinja::escape_formatter(out, state, value),
    }
}

/// Render the record as one self-contained HTML page.
pub fn render(record: &RunRecord) -> Result<String, HtmlError> {
    let mut page = Vec::new();
    write(record, &mut page)?;
    String::from_utf8(page).map_err(|e| {
        HtmlError(minijinja::Error::new(
            minijinja::ErrorKind::BadSerialization,
            e.to_string(),
        ))
    })
}

/// [`render`], streamed into `out` as the template runs (the same bytes): the page is never
/// held in memory whole.
pub fn write(record: &RunRecord, out: &mut dyn std::io::Write) -> Result<(), HtmlError> {
    // The clauses that did not pass, grouped by operation in the order each operation's
    // first clause appears in the specs (fingerprint, create, ...), blocked clauses after
    // them, one group per root cause; then, folded, the passed and skipped ones by operation.
    let passing = |c: &Case| {
        matches!(
            c.verdict,
            Verdict::Pass | Verdict::Skip | Verdict::Interrupted
        )
    };
    let bodies = with_bodies(record);
    let mut problem_groups: Vec<GroupView<'_>> = Vec::new();
    let mut passing_groups: Vec<GroupView<'_>> = Vec::new();
    for case in &record.cases {
        if case.verdict == Verdict::Blocked {
            continue;
        }
        let groups = if passing(case) {
            &mut passing_groups
        } else {
            &mut problem_groups
        };
        add_to_group(groups, case.classname(), None, case, record, &bodies);
    }
    // Blocked clauses go in a fold of their own: each failure's entry already says what it
    // blocked, so their cards do not stand between the failures and the rest.
    let mut blocked_groups: Vec<GroupView<'_>> = Vec::new();
    for (root, cases) in crate::summary::blocked_by_root(record) {
        let link = (root != crate::summary::PRECONDITION_ROOT).then_some(root);
        for case in cases {
            add_to_group(
                &mut blocked_groups,
                format!("blocked by {root}"),
                link,
                case,
                record,
                &bodies,
            );
        }
    }
    let passing_count = record.cases.iter().filter(|c| passing(c)).count();
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for case in &record.cases {
        *counts.entry(status(case, record.strict)).or_default() += 1;
    }
    let elapsed = (record.finished_at - record.started_at)
        .to_std()
        .unwrap_or_default();
    let e = &record.environment;
    let mut env: Vec<(&str, String)> = vec![
        ("plugin", record.subject.plugin.clone()),
        (
            "plugin version",
            record
                .subject
                .version
                .clone()
                .unwrap_or_else(|| "unknown".into()),
        ),
        ("suite", record.kind.clone()),
        (
            "profile",
            format!(
                "{} (Nomad {})",
                record.profile.name, record.profile.nomad_versions
            ),
        ),
        ("seed", record.seed.to_string()),
        ("run", record.run_id.clone()),
        (
            "harness",
            match &e.harness_commit {
                Some(c) => format!("{} {} ({c})", record.harness.name, record.harness.version),
                None => format!("{} {}", record.harness.name, record.harness.version),
            },
        ),
        ("started", record.started_at.to_rfc3339()),
        ("finished", record.finished_at.to_rfc3339()),
        ("duration", fmt_ms(elapsed.as_secs_f64() * 1000.0)),
        ("os", e.os.clone()),
        ("kernel", format!("{} ({})", e.kernel, e.arch)),
        ("host", e.hostname.clone()),
        ("command line", record.command_line.join(" ")),
        ("strict", record.strict.to_string()),
    ];
    if let Some(s) = record.shard {
        env.push(("shard", s.to_string()));
    }
    if !record.merged_from.is_empty() {
        env.push(("merged from", record.merged_from.join(", ")));
    }
    for (k, v) in &record.subject.details {
        env.push((k.as_str(), v.clone()));
    }
    let assessment = record.assessment();
    let mut jinja = Environment::new();
    // The indentation of the templates is for their readers: a page of a few hundred clauses
    // would carry it a few hundred times.
    jinja.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?,
    );
    jinja.set_formatter(escape_few);
    jinja.add_template("report.html", TEMPLATE)?;
    jinja.add_template("group.html", GROUP_TEMPLATE)?;
    jinja.add_template("case.html", CASE_TEMPLATE)?;
    jinja.add_template("styles.html", STYLES_TEMPLATE)?;
    let tmpl = jinja.get_template("report.html")?;
    let context = context! {
        kind => record.kind.clone(),
        plugin => record.subject.plugin.clone(),
        version => record.subject.version.clone(),
        assessment => assessment.as_str(),
        coverage => record.coverage().sentence(),
        assessment_class => format!("{assessment:?}").to_lowercase(),
        interrupted => record.interrupted,
        total => record.cases.len(),
        counts => Value::from(minijinja::value::Serde(&counts)),
        attention => Value::from(minijinja::value::Serde(&attention_groups(record))),
        unjudged => Value::from(minijinja::value::Serde(&unjudged_groups(record))),
        attention_total => record.cases.len() - passing_count,
        problem_groups => Value::from(minijinja::value::Serde(&problem_groups)),
        blocked_groups => Value::from(minijinja::value::Serde(&blocked_groups)),
        blocked_total => record.cases.iter().filter(|c| c.verdict == Verdict::Blocked).count(),
        passing_groups => Value::from(minijinja::value::Serde(&passing_groups)),
        passing_total => passing_count,
        environment => Value::from(minijinja::value::Serde(&env)),
        generated => format!("{} {}", record.harness.name, record.harness.version),
    };
    // The views and the borrowed text are not needed any more: the context holds its own.
    drop((problem_groups, blocked_groups, passing_groups));
    tmpl.render_captured_to(context, out)?;
    Ok(())
}
