//! Problems first: the HTML report opens on what needs attention (failed, blocked, timed out,
//! errors, leaked, warnings, in that order, each with its rerun line) with the passed and
//! skipped clauses folded below, and the console summary ends with the same list, right before
//! the verdict and the count line CI reads. A clause blocked by a failure is folded beneath
//! that failure, not listed on its own.

use nomad_conform_reports::attention::{Problem, needs_attention};
use nomad_conform_reports::model::{Case, Level, RunRecord, Verdict};
use nomad_conform_reports::summary::{MAX_ATTENTION_LINES, Verbosity};
use nomad_conform_reports::{html, json, summary};

fn golden() -> RunRecord {
    json::parse(include_str!("data/golden-run.json")).unwrap()
}

fn case(template: &Case, id: &str, level: Level, verdict: Verdict, reason: &str) -> Case {
    Case {
        clause: id.into(),
        level,
        title: format!("title of {id}"),
        verdict,
        reason: (!reason.is_empty()).then(|| reason.to_string()),
        blocked_by: None,
        rerun: Some(format!("nomad-conform dhv ./plugin --seed 7 --tags @{id}")),
        attachments: Vec::new(),
        known: None,
        notes: Vec::new(),
        ..template.clone()
    }
}

/// One case of each kind of problem, in the opposite of the order they are listed in, with a
/// passed and a skipped case around them.
fn one_of_each() -> RunRecord {
    let mut r = golden();
    let t = r.cases[0].clone();
    let mut blocked = case(
        &t,
        "DHV-G-BLOCKED",
        Level::Must,
        Verdict::Blocked,
        "blocked by DHV-Z-ELSEWHERE: this clause cannot be judged because a call it needs failed\ncreate failed: exit status 3",
    );
    // Its root is not in the record (another shard's clause): it is listed on its own.
    blocked.blocked_by = Some("DHV-Z-ELSEWHERE".into());
    let mut folded = case(
        &t,
        "DHV-I-FOLDED",
        Level::Must,
        Verdict::Blocked,
        "blocked by DHV-H-FAILED: this clause cannot be judged because a call it needs failed",
    );
    folded.blocked_by = Some("DHV-H-FAILED".into());
    r.cases = vec![
        case(&t, "DHV-A-PASSED", Level::Must, Verdict::Pass, ""),
        case(
            &t,
            "DHV-C-WARNING",
            Level::Should,
            Verdict::Fail,
            "expected: quiet\nseen:     chatty",
        ),
        case(
            &t,
            "DHV-D-LEAKED",
            Level::Must,
            Verdict::Leaked,
            "left behind after cleanup:\n  mount /tmp/x",
        ),
        case(
            &t,
            "DHV-E-ERROR",
            Level::Must,
            Verdict::Error,
            "harness error: no scratch space",
        ),
        case(
            &t,
            "DHV-F-TIMED-OUT",
            Level::Must,
            Verdict::TimedOut,
            "expected: create within 60s\nseen: killed at the deadline",
        ),
        blocked,
        case(
            &t,
            "DHV-H-FAILED",
            Level::Must,
            Verdict::Fail,
            "expected: exit 0\nseen: exit status 3",
        ),
        case(
            &t,
            "DHV-B-SKIPPED",
            Level::Must,
            Verdict::Skip,
            "capability absent",
        ),
        folded,
    ];
    r.strict = false;
    r.interrupted = false;
    r
}

const ORDER: [&str; 6] = [
    "DHV-H-FAILED",
    "DHV-G-BLOCKED",
    "DHV-F-TIMED-OUT",
    "DHV-E-ERROR",
    "DHV-D-LEAKED",
    "DHV-C-WARNING",
];

#[test]
fn needs_attention_lists_problems_in_order() {
    let r = one_of_each();
    let list = needs_attention(&r);
    let ids: Vec<&str> = list.iter().map(|e| e.case.clause.as_str()).collect();
    assert_eq!(ids, ORDER);
    let problems: Vec<Problem> = list.iter().map(|e| e.problem).collect();
    // Known and Fixed come only from a list of known failures (tests in harness/tests/
    // known_and_compare.rs and compare's unit tests); the rest, one of each, in order.
    assert_eq!(problems, Problem::ALL[..6]);
    assert_eq!(list[0].reason, "expected: exit 0; seen: exit status 3");
    assert_eq!(list[1].reason, "create failed: exit status 3");
    assert_eq!(list[4].reason, "left behind after cleanup: mount /tmp/x");
    assert_eq!(list[5].reason, "expected: quiet; seen: chatty");
    // The clause the failure blocked is beneath it.
    let folded: Vec<&str> = list[0].blocks.iter().map(|c| c.clause.as_str()).collect();
    assert_eq!(folded, ["DHV-I-FOLDED"]);
    assert!(list[1..].iter().all(|e| e.blocks.is_empty()));

    // Under --strict a SHOULD failure counts: it is listed with the failures.
    let mut strict = r.clone();
    strict.strict = true;
    let list = needs_attention(&strict);
    let ids: Vec<&str> = list.iter().map(|e| e.case.clause.as_str()).collect();
    assert_eq!(
        ids,
        [
            "DHV-C-WARNING",
            "DHV-H-FAILED",
            "DHV-G-BLOCKED",
            "DHV-F-TIMED-OUT",
            "DHV-E-ERROR",
            "DHV-D-LEAKED"
        ]
    );
}

/// The part of `page` between the first `from` and the first `to` after it.
fn between<'a>(page: &'a str, from: &str, to: &str) -> &'a str {
    let start = page
        .find(from)
        .unwrap_or_else(|| panic!("{from} not in the page"));
    let end = start
        + page[start..]
            .find(to)
            .unwrap_or_else(|| panic!("{to} not after {from}"));
    &page[start..end]
}

#[test]
fn html_opens_on_the_problems_in_order_with_their_rerun_lines() {
    let page = html::render(&one_of_each()).unwrap();
    let main = between(&page, "<main>", "</main>");
    // The first thing in the page's body after the header is the list of problems, outside
    // any <details> and not hidden, so it shows without a click and without a script.
    let attention = between(main, "<section class=\"attention\"", "</section>");
    assert!(
        main["<main>".len()..]
            .trim_start()
            .starts_with("<section class=\"attention\"")
    );
    assert!(attention.contains("<h2 id=\"attention-title\">Needs attention"));
    assert!(!attention.contains("hidden"));
    // The only folds in the list are the clauses a failure blocked, beneath it.
    assert_eq!(
        attention.matches("<details").count(),
        attention.matches("<details class=\"blocks\">").count()
    );
    let blocks = between(attention, "<details class=\"blocks\">", "</details>");
    assert!(blocks.contains("blocks 1 clause (not judged because of this failure)"));
    assert!(blocks.contains("<a class=\"id\" href=\"#DHV-I-FOLDED\">DHV-I-FOLDED</a>"));
    assert!(
        attention.find("DHV-H-FAILED").unwrap() < attention.find("DHV-I-FOLDED").unwrap()
            && attention.find("DHV-I-FOLDED").unwrap() < attention.find("DHV-G-BLOCKED").unwrap(),
        "folded beneath its root"
    );
    assert!(
        !attention.contains("@DHV-I-FOLDED"),
        "a folded clause has no rerun line of its own"
    );
    let mut at = 0;
    for id in ORDER {
        let link = format!("<a class=\"id\" href=\"#{id}\">{id}</a>");
        let pos = attention
            .find(&link)
            .unwrap_or_else(|| panic!("{id} is not listed:\n{attention}"));
        assert!(pos > at, "{id} is out of order:\n{attention}");
        at = pos;
        let rerun = format!(
            "<pre><code>nomad-conform dhv ./plugin --seed 7 --tags @{id}</code></pre><button type=\"button\" class=\"copy\">Copy</button>"
        );
        assert!(attention.contains(&rerun), "{id} has its rerun line");
    }
    for heading in [
        "Failed",
        "Blocked",
        "Timed out",
        "Errors",
        "Leaked",
        "Warnings",
    ] {
        assert!(
            attention.contains(&format!(">{heading} <small>1</small></h3>")),
            "{heading}"
        );
    }
    assert!(attention.contains(
        "blocked by <a href=\"#DHV-Z-ELSEWHERE\">DHV-Z-ELSEWHERE</a>: create failed: exit status 3"
    ));
    for passing in ["DHV-A-PASSED", "DHV-B-SKIPPED"] {
        assert!(!attention.contains(passing), "{passing} needs no attention");
    }
}

#[test]
fn html_folds_passed_and_skipped_clauses_in_a_closed_details() {
    let page = html::render(&one_of_each()).unwrap();
    let fold_tag = "<details class=\"fold\" id=\"passing\">";
    let fold = page.find(fold_tag).expect("a fold for the passing clauses");
    let env = page.find("<h2>Environment</h2>").unwrap();
    assert!(fold < env);
    let case_at = |id: &str| {
        page.find(&format!("<details class=\"case\" id=\"{id}\""))
            .unwrap_or_else(|| panic!("no details for {id}"))
    };
    for id in ["DHV-A-PASSED", "DHV-B-SKIPPED"] {
        let at = case_at(id);
        assert!(fold < at && at < env, "{id} is inside the fold");
    }
    for id in ORDER {
        assert!(case_at(id) < fold, "{id} is shown above the fold");
    }
    assert!(
        between(&page, "<section class=\"attention\"", "</section>").len() < fold,
        "problems come first"
    );
    assert!(page[fold..].starts_with(fold_tag), "the fold starts closed");
    assert!(
        between(&page[fold..], "<summary>", "</summary>").contains("<h2>Passed and skipped"),
        "the fold says what it holds"
    );

    // Blocked cards are in a closed fold of their own, between the problems and the passing.
    let blocked_tag = "<details class=\"fold\" id=\"blocked\">";
    let blocked = page
        .find(blocked_tag)
        .expect("a fold for the blocked clauses");
    for id in ["DHV-I-FOLDED", "DHV-G-BLOCKED"] {
        let at = case_at(id);
        assert!(blocked < at && at < fold, "{id} is in the blocked fold");
    }
    for id in ["DHV-H-FAILED", "DHV-C-WARNING"] {
        assert!(case_at(id) < blocked, "{id} is shown above the folds");
    }

    // Nothing passing or blocked: no fold. Nothing failing: the list says so.
    let mut r = one_of_each();
    r.cases
        .retain(|c| !matches!(c.verdict, Verdict::Pass | Verdict::Skip | Verdict::Blocked));
    assert!(!html::render(&r).unwrap().contains("class=\"fold\""));
    let mut r = one_of_each();
    r.cases.retain(|c| c.verdict == Verdict::Pass);
    let page = html::render(&r).unwrap();
    assert!(page.contains("<p>Nothing: every clause that ran passed.</p>"));
}

#[test]
fn console_summary_ends_with_the_problems_then_the_count_line() {
    let r = one_of_each();
    let text = summary::render(&r, Verbosity::Normal);
    let lines: Vec<&str> = text.lines().collect();
    let last = lines[lines.len() - 1];
    assert!(
        last.starts_with("1 passed, 4 failed (3 MUST, 1 SHOULD), 2 blocked, 1 skipped, 1 errors"),
        "the count line CI reads stays last: {last}"
    );
    assert!(
        lines[lines.len() - 2].starts_with("verdict: not conformant, judged on "),
        "{}",
        lines[lines.len() - 2]
    );
    let start = lines
        .iter()
        .position(|l| *l == "needs attention (6 clauses, and 1 they blocked):")
        .expect("the list");
    let list = &lines[start + 1..lines.len() - 2];
    // The failure has a fourth line, what it blocked; every other entry has three.
    assert_eq!(list.len(), 3 * ORDER.len() + 1, "{list:#?}");
    assert_eq!(
        list[0],
        "  FAIL    MUST   DHV-H-FAILED title of DHV-H-FAILED"
    );
    assert_eq!(list[2].trim(), "blocks 1 clause: DHV-I-FOLDED");
    let entries: Vec<&[&str]> = std::iter::once(&list[..4])
        .chain(list[4..].chunks(3))
        .collect();
    for (entry, id) in entries.iter().zip(ORDER) {
        assert!(entry[0].contains(id), "{id}: {entry:?}");
        assert_eq!(
            entry[entry.len() - 1].trim(),
            format!("rerun: nomad-conform dhv ./plugin --seed 7 --tags @{id}")
        );
    }
    assert!(!text.contains("@DHV-I-FOLDED"), "no rerun line of its own");
    assert_eq!(
        list[5].trim(),
        "blocked by DHV-Z-ELSEWHERE: create failed: exit status 3"
    );
    assert!(list[7].starts_with("  TIMEOUT "));
    assert!(list[10].starts_with("  ERROR   "));
    assert!(list[13].starts_with("  LEAKED  "));
    assert!(list[16].starts_with("  WARN    SHOULD DHV-C-WARNING"));
    // The failure's details say what it blocked; no paragraph of its own for the folded one.
    assert!(text.contains("blocks 1 clause: DHV-I-FOLDED (not judged because of this failure)"));
    assert!(!text.contains("BLOCKED by DHV-H-FAILED"));
    assert!(text.contains("--- BLOCKED by DHV-Z-ELSEWHERE: 1 clause could not be judged"));

    // The details above the list come in the same order.
    let details: Vec<&str> = lines
        .iter()
        .filter(|l| l.starts_with("--- "))
        .copied()
        .collect();
    for (line, id) in details.iter().zip(ORDER) {
        assert!(line.contains(id), "{line} is not {id}");
    }

    // Quiet: the verdict and the totals only.
    let quiet = summary::render(&r, Verbosity::Quiet);
    assert!(!quiet.contains("needs attention"));
    // Nothing to attend to: no list.
    let mut ok = r.clone();
    ok.cases.retain(|c| c.verdict == Verdict::Pass);
    assert!(!summary::render(&ok, Verbosity::Normal).contains("needs attention"));
}

#[test]
fn console_list_is_bounded() {
    let mut r = one_of_each();
    let t = r.cases[0].clone();
    for i in 0..25 {
        r.cases.push(case(
            &t,
            &format!("DHV-MANY-{i:02}"),
            Level::Must,
            Verdict::Fail,
            "seen: no",
        ));
    }
    r.cases.push(case(
        &t,
        "DHV-LAST-WARNING",
        Level::Should,
        Verdict::TimedOut,
        "seen: slow",
    ));
    let text = summary::render(&r, Verbosity::Normal);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == "needs attention (32 clauses, and 1 they blocked):")
        .unwrap();
    let list = &lines[start + 1..lines.len() - 2];
    let entries = list
        .iter()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .count();
    // MAX_ATTENTION_LINES entries, then one line for the rest.
    assert_eq!(entries, MAX_ATTENTION_LINES + 1, "{list:#?}");
    assert_eq!(
        list[list.len() - 1],
        "  ... and 12 more (6 failed, 1 blocked, 1 timed out, 1 error, 1 leaked, 2 warnings): see the details above or the HTML report"
    );
    assert!(lines[lines.len() - 1].starts_with("1 passed, "));
}

/// One bug seen by several clauses is one entry: three MUST failures with the same expected and
/// seen (a WaitTask that always answers exit code 0) are listed once, naming the other two, with
/// one rerun line for the three; a failure seen differently stays apart, and so does the clause
/// one of them blocked, folded beneath the shared entry. JUnit keeps a case per clause.
#[test]
fn failures_on_the_same_observation_are_one_entry() {
    let mut r = golden();
    let t = r.cases[0].clone();
    let same =
        "expected: WaitTask returns exit code 3\nseen:     exit_code 0, signal 0\nreproduce:\n  x";
    let mut blocked = case(
        &t,
        "DRIVER-E-BLOCKED",
        Level::Must,
        Verdict::Blocked,
        "blocked by DRIVER-C-AGAIN: a call failed",
    );
    blocked.blocked_by = Some("DRIVER-C-AGAIN".into());
    r.cases = vec![
        case(&t, "DRIVER-A-EXIT-CODE", Level::Must, Verdict::Fail, same),
        case(
            &t,
            "DRIVER-B-OTHER",
            Level::Must,
            Verdict::Fail,
            "expected: StopTask succeeds\nseen:     UNKNOWN",
        ),
        case(&t, "DRIVER-C-AGAIN", Level::Must, Verdict::Fail, same),
        case(&t, "DRIVER-D-CONCURRENT", Level::Must, Verdict::Fail, same),
        blocked,
    ];
    let list = needs_attention(&r);
    let ids: Vec<Vec<&str>> = list.iter().map(|e| e.clauses()).collect();
    assert_eq!(
        ids,
        [
            vec![
                "DRIVER-A-EXIT-CODE",
                "DRIVER-C-AGAIN",
                "DRIVER-D-CONCURRENT"
            ],
            vec!["DRIVER-B-OTHER"],
        ]
    );
    let folded: Vec<&str> = list[0].blocks.iter().map(|c| c.clause.as_str()).collect();
    assert_eq!(
        folded,
        ["DRIVER-E-BLOCKED"],
        "folded under the entry its root joined"
    );
    assert_eq!(
        list[0].rerun().as_deref(),
        Some(
            "nomad-conform dhv ./plugin --seed 7 --tags '@DRIVER-A-EXIT-CODE or @DRIVER-C-AGAIN or @DRIVER-D-CONCURRENT'"
        )
    );
    let text = summary::render(&r, Verbosity::Normal);
    assert!(
        text.contains(
            "the same observation fails 2 more clauses: DRIVER-C-AGAIN, DRIVER-D-CONCURRENT"
        ),
        "{text}"
    );
    let page = html::render(&r).unwrap();
    assert!(
        page.contains("the same observation fails 2 more clauses"),
        "the HTML entry names them"
    );
    let xml = nomad_conform_reports::junit::render(&r).unwrap();
    // Four failures and the blocked clause, each a test case of its own.
    assert_eq!(
        xml.matches("<failure").count(),
        5,
        "JUnit keeps one case per clause"
    );
}
