//! The writers on a golden record (tests/data/golden-run.json: real runs against fixtures, merged,
//! with machine-specific values normalised): snapshots of every rendering, schema validation of
//! the JUnit and JSON output, and record -> JSON -> record round trips.

use std::io::Write as _;
use std::process::{Command, Stdio};

use nomad_conform_reports::model::{Attachment, MEDIA_SVG, RunRecord, Verdict};
use nomad_conform_reports::summary::Verbosity;
use nomad_conform_reports::{html, json, junit, merge, redact, summary};

const GOLDEN: &str = include_str!("data/golden-run.json");
/// Jenkins' JUnit schema, vendored (see schema/README.md).
const JUNIT_XSD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/junit-10.xsd");

fn golden() -> RunRecord {
    json::parse(GOLDEN).expect("the golden record parses")
}

#[test]
fn golden_has_every_kind_of_verdict() {
    let r = golden();
    let verdicts: Vec<Verdict> = r.cases.iter().map(|c| c.verdict).collect();
    for v in [Verdict::Pass, Verdict::Fail, Verdict::Skip, Verdict::Error] {
        assert!(
            verdicts.contains(&v),
            "{v:?} missing from the golden record"
        );
    }
}

#[test]
fn json_round_trip_renders_identical_reports() {
    let r = golden();
    let again = json::parse(&json::render(&r).unwrap()).unwrap();
    assert_eq!(r, again);
    assert_eq!(junit::render(&r).unwrap(), junit::render(&again).unwrap());
    assert_eq!(html::render(&r).unwrap(), html::render(&again).unwrap());
    assert_eq!(
        summary::render(&r, Verbosity::Verbose),
        summary::render(&again, Verbosity::Verbose)
    );
}

#[test]
fn other_schema_versions_are_refused() {
    let text = GOLDEN.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1);
    let err = json::parse(&text).unwrap_err().to_string();
    assert!(err.contains("schema 99"), "{err}");
    assert!(json::parse("{\"no\": 1}").is_err());
    assert!(
        json::parse("not json")
            .unwrap_err()
            .to_string()
            .contains("not a nomad-conform run record")
    );
}

#[test]
fn junit_snapshot() {
    insta::assert_snapshot!("junit", junit::render(&golden()).unwrap());
}

#[test]
fn summary_snapshots() {
    let r = golden();
    insta::assert_snapshot!("summary-normal", summary::render(&r, Verbosity::Normal));
    insta::assert_snapshot!("summary-quiet", summary::render(&r, Verbosity::Quiet));
    insta::assert_snapshot!("summary-verbose", summary::render(&r, Verbosity::Verbose));
}

#[test]
fn html_snapshot() {
    insta::assert_snapshot!("html", html::render(&golden()).unwrap());
}

#[test]
fn html_is_self_contained_and_escaped() {
    let mut r = golden();
    r.cases[0].title = "<script>alert(1)</script>".into();
    let page = html::render(&r).unwrap();
    assert!(!page.contains("<script>alert(1)"), "titles are escaped");
    // The SVG attachment's own namespace URL is inside its base64 text, not in the page.
    for external in ["http://", "https://", "<link", "url("] {
        assert!(
            !page.contains(external),
            "the page loads nothing: found {external}"
        );
    }
    // The only source is an image in the page itself.
    for (at, _) in page.match_indices("src=") {
        assert!(
            page[at..].starts_with("src=\"data:image/svg+xml;base64,"),
            "{}",
            &page[at..at + 60]
        );
    }
    assert!(
        page.contains(
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:;"
        ),
        "the browser is told to load nothing from elsewhere"
    );
}

#[test]
fn html_draws_an_svg_attachment_as_an_image_and_escapes_text() {
    use base64::Engine as _;
    let r = golden();
    let case = r
        .cases
        .iter()
        .find(|c| c.clause == "DHV-CREATE-IDEMPOTENT")
        .unwrap();
    let svg = &case.attachments[0];
    assert_eq!(svg.media_type, "image/svg+xml");
    assert!(
        svg.content.contains("<script>"),
        "the test SVG carries a script"
    );
    let page = html::render(&r).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&svg.content);
    assert!(
        page.contains(&format!(
            "<img alt=\"create calls against the volume's contents\" src=\"data:image/svg+xml;base64,{b64}\">"
        )),
        "the SVG is an image from a data: URL, where it cannot run anything"
    );
    assert!(
        !page.contains("<svg"),
        "no SVG markup is inlined into the page"
    );
    // The text attachment is escaped text: its <script> is not markup.
    assert!(
        !page.contains("<script>alert"),
        "plugin text never becomes markup"
    );
    assert!(
        page.contains(
            "<pre class=\"attachment-text\">create #2 stdout (as the plugin printed it):\n&lt;script&gt;alert(&quot;from the plugin&quot;)&lt;/script&gt; ]]&gt; &amp; more"
        ),
        "the text attachment is escaped into a <pre>"
    );
    assert_eq!(
        page.matches("<script").count(),
        1,
        "the page's own script is the only one"
    );
}

#[test]
fn html_shows_a_cut_svg_as_text() {
    let mut r = golden();
    let i = r
        .cases
        .iter()
        .position(|c| c.clause == "DHV-CREATE-IDEMPOTENT")
        .unwrap();
    let svg = r.cases[i].attachments[0].content.clone();
    r.cases[i].attachments[0] = Attachment::bounded("big drawing", MEDIA_SVG, svg, 40);
    let page = html::render(&r).unwrap();
    assert!(!page.contains("src=\"data:"), "a cut SVG would not draw");
    assert!(
        page.contains("too large to draw; only the first 40 B of"),
        "{page}"
    );
}

#[test]
fn junit_names_attachments_and_bounds_their_text() {
    let mut r = golden();
    let xml = junit::render(&r).unwrap();
    assert!(
        xml.contains(
            "attachment: create calls against the volume&apos;s contents (image/svg+xml, "
        ) || xml
            .contains("attachment: create calls against the volume's contents (image/svg+xml, "),
        "{xml}"
    );
    assert!(xml.contains("): drawn in the HTML report"), "{xml}");
    assert!(
        xml.contains("attachment: plugin output of the second create (text/plain, "),
        "{xml}"
    );
    assert!(
        xml.contains(
            "&lt;script&gt;alert(&quot;from the plugin&quot;)&lt;/script&gt; ]]&gt; &amp; more"
        ),
        "{xml}"
    );
    // A long text attachment: only the first MAX_ATTACHMENT_TEXT bytes reach system-out.
    let i = r
        .cases
        .iter()
        .position(|c| c.clause == "DHV-CREATE-IDEMPOTENT")
        .unwrap();
    r.cases[i].attachments[1] = Attachment::new(
        "long log",
        "text/plain",
        "é".repeat(junit::MAX_ATTACHMENT_TEXT),
    );
    let xml = junit::render(&r).unwrap();
    assert!(
        xml.contains("attachment: long log (text/plain, 128.0 KiB):"),
        "{xml}"
    );
    assert!(xml.contains("[... 64.0 KiB more in the HTML and JSON reports]"));
    assert!(xml.len() < 100 * 1024);
    xmllint(&xml).unwrap();
}

#[test]
fn records_without_attachments_keep_their_json() {
    let r = golden();
    let text = json::render(&r).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    for case in value["cases"].as_array().unwrap() {
        let has = case.get("attachments").is_some();
        assert_eq!(
            has,
            case["clause"] == "DHV-CREATE-IDEMPOTENT",
            "attachments are written only when there are some"
        );
    }
}

/// Validate with xmllint (Debian's libxml2-utils; scripts/test installs it) against the Jenkins
/// xunit JUnit schema.
fn xmllint(xml: &str) -> Result<(), String> {
    let mut child = Command::new("xmllint")
        .args(["--noout", "--schema", JUNIT_XSD, "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("xmllint is needed (apt-get install libxml2-utils): {e}"))?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(xml.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn junit_validates_against_the_jenkins_schema() {
    let xml = junit::render(&golden()).unwrap();
    xmllint(&xml).unwrap();
    // And the check can fail: quick-junit's own root element does not validate.
    let broken = xml.replacen("<testsuites ", "<testsuites skipped=\"1\" ", 1);
    assert!(xmllint(&broken).is_err());
}

#[test]
fn junit_shape() {
    let xml = junit::render(&golden()).unwrap();
    let report = quick_junit_parse(&xml);
    assert!(
        report.contains(r#"file="specs/dhv/02_create.feature""#),
        "{report}"
    );
    assert!(xml.contains(r#"classname="dhv.create""#));
    assert!(xml.contains(r#"name="DHV-CREATE-IDEMPOTENT: create is idempotent""#));
    // The message is one line, what was expected beside what was seen; the whole story is in
    // the element body.
    assert!(
        xml.contains(r#"<failure message="MUST: expected: the volume keeps its contents when create runs again; seen: /tmp/"#),
        "{xml}"
    );
    assert!(xml.contains("<error message=\"MUST: interrupted"), "{xml}");
    assert!(
        xml.contains("<skipped message=\"could not make create fail"),
        "{xml}"
    );
    assert!(
        xml.contains(r#"<property name="plugin.version" value="0.1.0"/>"#),
        "{xml}"
    );
    assert!(xml.contains("SHOULD (warning)"), "{xml}");
}

fn quick_junit_parse(xml: &str) -> String {
    xml.lines()
        .filter(|l| l.trim_start().starts_with("<testsuite "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn json_validates_against_the_committed_schema() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/schema/run-record.v1.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let record: serde_json::Value = serde_json::from_str(GOLDEN).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&record)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let mut bad = record.clone();
    bad["cases"][0]["verdict"] = "maybe".into();
    assert!(!validator.is_valid(&bad));
}

#[test]
fn merging_shards_gives_back_the_run() {
    let whole = golden();
    let mut a = whole.clone();
    let mut b = whole.clone();
    a.cases.retain(|c| c.clause.contains("CREATE"));
    b.cases.retain(|c| !c.clause.contains("CREATE"));
    a.run_id = "aaaa".into();
    b.run_id = "bbbb".into();
    let merged = merge::merge(vec![b.clone(), a.clone()]).unwrap();
    assert_eq!(merged.cases, whole.cases, "cases back in spec order");
    assert_eq!(merged.merged_from, vec!["bbbb", "aaaa"]);
    assert_eq!(merged.tally(), whole.tally());
    let err = merge::merge(vec![a.clone(), a.clone()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("is in both run aaaa and run aaaa"), "{err}");
    let mut other = b;
    other.kind = "csi".into();
    assert!(merge::merge(vec![a, other]).is_err());
    assert!(merge::merge(vec![]).is_err());
}

#[test]
fn redaction_reaches_every_writer() {
    let r = golden();
    let secret = r.cases[1].events[0]
        .reproduce
        .clone()
        .unwrap()
        .split("DHV_VOLUME_ID=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let mut r = r;
    let i = r
        .cases
        .iter()
        .position(|c| c.clause == "DHV-CREATE-IDEMPOTENT")
        .unwrap();
    r.cases[i].attachments[1].content = format!("volume id {secret} in a log\n");
    r.cases[i].attachments[0].content = format!("<svg><text>{secret}</text></svg>");
    let red = redact::redact(&r, std::slice::from_ref(&secret));
    for a in &red.cases[i].attachments {
        assert!(!a.content.contains(&secret), "{a:?}");
        assert!(a.content.contains(redact::MARK), "{a:?}");
    }
    for rendered in [
        junit::render(&red).unwrap(),
        html::render(&red).unwrap(),
        json::render(&red).unwrap(),
        summary::render(&red, Verbosity::Verbose),
    ] {
        assert!(!rendered.contains(&secret));
        assert!(rendered.contains(redact::MARK));
    }
}

/// A clause not judged because of the node is one neutral card naming the reason, the clauses
/// folded under it; a precondition that failed in a clause that passed is not blamed on it.
#[test]
fn html_folds_what_this_node_could_not_judge_and_never_blames_a_passing_clause() {
    let mut record = golden();
    let i = record
        .cases
        .iter()
        .position(|c| c.verdict == Verdict::Pass)
        .unwrap();
    let passing = record.cases[i].clause.clone();
    let j = record
        .cases
        .iter()
        .position(|c| c.verdict == Verdict::Skip)
        .unwrap();
    record.cases[j].reason = Some(format!(
        "{}the driver's fingerprint says UNDETECTED here: the runtime is missing",
        nomad_conform_reports::model::NOT_JUDGED_ON_THIS_NODE
    ));
    let k = record
        .cases
        .iter()
        .position(|c| c.verdict == Verdict::Blocked)
        .unwrap();
    record.cases[k].blocked_by = Some(passing.clone());
    record.cases[k].reason = Some(format!(
        "blocked by {passing}: this clause cannot be judged because a call it needs failed\nexpected: precondition: create succeeds\nseen:     exit status 1"
    ));
    record.settle_preconditions(true);
    let page = html::render(&record).unwrap();
    assert!(
        page.contains("<b>not judged on this node:</b> the driver's fingerprint says UNDETECTED here: the runtime is missing"),
        "no card for the node"
    );
    assert!(!page.contains(&format!("blocked by <a href=\"#{passing}\"")));
    assert!(page.contains("precondition failed: a call this clause needs failed here, though"));
}
