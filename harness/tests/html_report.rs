//! The HTML report in a real headless Chromium (Debian's chromium and chromium-driver, installed
//! by scripts/test): it loads without console errors, it opens on what needs attention with
//! the passed clauses folded away, the status filter and the search work, a failing clause
//! expands to its reproduction command, the copy button works, an SVG attachment draws as an
//! image without running its script, and a screenshot is saved under target/.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod support;

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// chromedriver, killed when dropped.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_driver() -> (Driver, u16) {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver is installed (scripts/test installs Debian's chromium-driver)");
    let driver = Driver(child);
    let until = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (driver, port)
}

/// The browser's console log, through chromedriver's log endpoint.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

async fn severe_console_entries(c: &Client) -> Vec<Value> {
    let log = c.issue_cmd(BrowserLog).await.expect("browser log");
    log.as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["level"] == "SEVERE")
        .collect()
}

async fn visible_cases(c: &Client) -> usize {
    c.execute(
        "return document.querySelectorAll('details.case:not([hidden])').length;",
        vec![],
    )
    .await
    .unwrap()
    .as_u64()
    .unwrap() as usize
}

/// Run the suite against a fixture with a MUST failure, writing the HTML report.
fn make_report(dir: &Path) -> PathBuf {
    let html = dir.join("report.html");
    let plugin =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/dhv/create-not-idempotent/plugin");
    let status = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .arg("dhv")
        .arg(plugin)
        .arg("--html")
        .arg(&html)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    html
}

/// How many DHV clauses there are (`nomad-conform list dhv`).
fn dhv_clause_count() -> usize {
    let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(["list", "dhv", "--format", "json"])
        .output()
        .unwrap();
    let items: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!items.is_empty());
    items.len()
}

/// A headless Chromium session through chromedriver, at `width` × `height`.
async fn browser(dir: &Path, port: u16, width: u32, height: u32) -> Client {
    let profile = dir.join("chromium-profile");
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                format!("--window-size={width},{height}"), format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    caps.insert("goog:loggingPrefs".into(), json!({"browser": "ALL"}));
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a Chromium session")
}

#[tokio::test]
async fn html_report_works_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let html = make_report(dir.path());
    let (_driver, port) = start_driver();
    let c = browser(dir.path(), port, 1280, 1600).await;

    c.goto(&format!("file://{}", html.display())).await.unwrap();
    let total = visible_cases(&c).await;
    let clauses = dhv_clause_count();
    assert_eq!(total, clauses, "every clause is shown at first");
    let severe = severe_console_entries(&c).await;
    assert!(severe.is_empty(), "console errors on load: {severe:?}");

    // Problems first: the failures and their rerun lines show without a click; the passed
    // clauses are folded away.
    let attention = c.find(Locator::Id("attention")).await.unwrap();
    let listed = attention.text().await.unwrap();
    assert!(
        listed.starts_with("Needs attention") && listed.contains("--tags @DHV-CREATE-IDEMPOTENT"),
        "{listed}"
    );
    let passed = c
        .find(Locator::Css("#DHV-FINGERPRINT-EXIT-ZERO > summary"))
        .await
        .unwrap();
    assert!(
        !passed.is_displayed().await.unwrap(),
        "passed clauses start folded"
    );

    // Verdict badge.
    let badge = c
        .find(Locator::Id("verdict"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(badge, "not conformant");

    // Status filter: hide the passed clauses; only the failures stay.
    c.find(Locator::Css("input[data-filter=pass]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(
        visible_cases(&c).await,
        3,
        "only the three failing clauses are left (IDEMPOTENT, RESTORE, and UPDATE's warning)"
    );
    let shown = c
        .find(Locator::Id("shown"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(shown, format!("3 of {clauses} shown"));
    let groups_shown = c
        .execute(
            "return document.querySelectorAll('section.group:not([hidden])').length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(groups_shown, json!(1), "only dhv.create has failures");

    // Search, with every status back on.
    c.find(Locator::Css("input[data-filter=pass]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.find(Locator::Id("search"))
        .await
        .unwrap()
        .send_keys("parallel")
        .await
        .unwrap();
    assert_eq!(
        visible_cases(&c).await,
        2,
        "DHV-CREATE-PARALLEL and DHV-DELETE-PARALLEL"
    );
    assert!(
        c.find(Locator::Css("#DHV-CREATE-PARALLEL > summary"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap(),
        "a search that finds passed clauses unfolds them"
    );
    c.find(Locator::Id("search"))
        .await
        .unwrap()
        .clear()
        .await
        .unwrap();
    c.execute(
        "document.getElementById('search').dispatchEvent(new Event('input'));",
        vec![],
    )
    .await
    .unwrap();
    assert_eq!(visible_cases(&c).await, total);

    // A failing clause expands to what was required, what was seen, and how to reproduce.
    let case = c.find(Locator::Id("DHV-CREATE-IDEMPOTENT")).await.unwrap();
    let repro = case.find(Locator::Css(".repro code")).await.unwrap();
    assert!(!repro.is_displayed().await.unwrap(), "closed at first");
    case.find(Locator::Css("summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(repro.is_displayed().await.unwrap());
    let command = repro.text().await.unwrap();
    assert!(
        command.starts_with("nomad-conform dhv ")
            && command.contains("--tags @DHV-CREATE-IDEMPOTENT"),
        "{command}"
    );
    let reason = case
        .find(Locator::Css("pre.reason"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        reason.contains("expected:") && reason.contains("seen:"),
        "{reason}"
    );
    let copy = case.find(Locator::Css(".repro button.copy")).await.unwrap();
    copy.click().await.unwrap();
    // The label changes once the clipboard answers (or its fallback runs).
    let mut label = String::new();
    for _ in 0..50 {
        label = copy.text().await.unwrap();
        if label != "Copy" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        label == "Copied" || label == "Select and copy",
        "the copy button should say it copied, or ask to select; it says {label:?}"
    );

    let png = c.screenshot().await.unwrap();
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report.png");
    std::fs::write(&shot, &png).unwrap();
    assert!(png.len() > 10_000, "a real screenshot");

    let severe = severe_console_entries(&c).await;
    assert!(
        severe.is_empty(),
        "console errors after interacting: {severe:?}"
    );

    // Attachments, from the reports crate's golden record re-rendered by `nomad-conform
    // report`: the SVG draws as an image and its <script> never runs; the text one is text.
    let golden = dir.path().join("golden.json");
    std::fs::write(
        &golden,
        include_str!("../../reports/tests/data/golden-run.json"),
    )
    .unwrap();
    let golden_html = dir.path().join("golden.html");
    let status = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .arg("report")
        .arg(&golden)
        .arg("--html")
        .arg(&golden_html)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "the golden record is not conformant"
    );
    c.goto(&format!(
        "file://{}#DHV-CREATE-IDEMPOTENT",
        golden_html.display()
    ))
    .await
    .unwrap();
    let drawn = c
        .execute(
            "var img = document.querySelector('#DHV-CREATE-IDEMPOTENT figure.attachment img');\
             return img && img.complete ? img.naturalWidth : -1;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(drawn, json!(240), "the SVG attachment is drawn");
    let text = c
        .find(Locator::Css("#DHV-CREATE-IDEMPOTENT pre.attachment-text"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("<script>alert(\"from the plugin\")</script>"),
        "{text}"
    );
    assert!(
        c.get_alert_text().await.is_err(),
        "nothing from an attachment ran"
    );
    let severe = severe_console_entries(&c).await;
    assert!(severe.is_empty(), "console errors: {severe:?}");
    c.close().await.unwrap();
}

/// A singleton campaign that fails: the report opens the clause on the first violation (who,
/// when, for how long, which scheduled fault exposed it) and the timeline, both within the
/// first screen of the opened clause; a screenshot is saved under target/.
#[tokio::test]
async fn a_failing_campaign_shows_the_violation_first() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("lock.html");
    let client = format!(
        "{} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms --fault keeps-child -- {{protected}}",
        support::workspace_bin("lock-sidecar").display()
    );
    let status = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args([
            "lock",
            "--client",
            &client,
            "--profile",
            "fast",
            "--clients",
            "2",
        ])
        .args(["--tags", "@LOCK-SINGLETON", "--seed", "5", "--html"])
        .arg(&html)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let (_driver, port) = start_driver();
    let (width, height) = (1280u32, 900u32);
    let c = browser(dir.path(), port, width, height).await;
    c.goto(&format!("file://{}", html.display())).await.unwrap();
    let summary = c
        .find(Locator::Css(
            "#attention #LOCK-SINGLETON > summary, #LOCK-SINGLETON > summary",
        ))
        .await
        .unwrap();
    summary.click().await.unwrap();
    // Bring the opened clause's head to the top of the window, as a reader who opened it sees.
    let layout = c
        .execute(
            "var d = document.querySelector('details#LOCK-SINGLETON[open]') || document.querySelector('#LOCK-SINGLETON');\
             d.scrollIntoView(); var top = d.getBoundingClientRect().top;\
             var reason = d.querySelector('pre.reason');\
             var img = d.querySelector('figure.attachment img');\
             return {reason: reason ? reason.getBoundingClientRect().top - top : -1,\
                     text: reason ? reason.textContent : '',\
                     img: img ? img.getBoundingClientRect().top - top : -1,\
                     drawn: img && img.complete ? img.naturalWidth : -1};",
            vec![],
        )
        .await
        .unwrap();
    let reason_top = layout["reason"].as_f64().unwrap();
    let img_top = layout["img"].as_f64().unwrap();
    let text = layout["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("violation(s); the first:"),
        "the reason opens on the first violation: {text}"
    );
    assert!(
        (0.0..300.0).contains(&reason_top),
        "the reason starts {reason_top}px below the clause's head"
    );
    assert!(
        img_top >= 0.0 && img_top < f64::from(height) - 150.0,
        "the timeline starts {img_top}px below the clause's head, past the first screen ({height}px)"
    );
    assert!(layout["drawn"].as_u64().unwrap_or(0) > 500, "{layout}");
    let png = c.screenshot().await.unwrap();
    // Kept for people to look at, in the test build's scratch directory.
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lock-timeline-report.png");
    std::fs::write(&out, &png).unwrap();
    assert!(png.len() > 10_000, "a real screenshot");
    c.close().await.unwrap();
}

/// A failing run of `kind` with `args`, its HTML report opened in a 1280 × 800 window: the first
/// screen, unscrolled, shows the verdict, the coverage and the first root cause (its clause and
/// why), and its screenshot is saved under target/ as `first-screen-KIND.png`.
async fn first_screen_shows_the_verdict_and_the_root_cause(kind: &str, args: &[String]) {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join(format!("{kind}.html"));
    let status = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .arg(kind)
        .args(args)
        .arg("--html")
        .arg(&html)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1), "{kind}: the run fails");
    let (_driver, port) = start_driver();
    let c = browser(dir.path(), port, 1280, 800).await;
    c.goto(&format!("file://{}", html.display())).await.unwrap();
    let seen = c
        .execute(
            "function shown(el) { if (!el) return null; var r = el.getBoundingClientRect();\
               return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight ? el.textContent.trim() : null; }\
             var first = document.querySelector('#attention li.problem');\
             return {verdict: shown(document.getElementById('verdict')),\
                     coverage: shown(document.getElementById('coverage')),\
                     root: shown(first && first.querySelector('.line')),\
                     why: shown(first && first.querySelector('.why'))};",
            vec![],
        )
        .await
        .unwrap();
    let png = c.screenshot().await.unwrap();
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("first-screen-{kind}.png"));
    std::fs::write(&shot, &png).unwrap();
    assert!(png.len() > 10_000, "{kind}: a real screenshot");
    assert_eq!(seen["verdict"], json!("not conformant"), "{kind}: {seen}");
    assert!(
        seen["coverage"]
            .as_str()
            .is_some_and(|c| c.contains("judged on")),
        "{kind}: the coverage is on the first screen: {seen}"
    );
    assert!(
        seen["root"]
            .as_str()
            .is_some_and(|r| r.contains(kind.to_uppercase().as_str()))
            && seen["why"].as_str().is_some_and(|w| w.contains("seen")),
        "{kind}: the first root cause and why are on the first screen: {seen}"
    );
    let severe = severe_console_entries(&c).await;
    assert!(severe.is_empty(), "{kind}: console errors: {severe:?}");
    c.close().await.unwrap();
}

#[tokio::test]
async fn first_screen_of_a_failing_dhv_report() {
    let plugin = support::root().join("fixtures/dhv/create-not-idempotent/plugin");
    first_screen_shows_the_verdict_and_the_root_cause(
        "dhv",
        &[
            plugin.display().to_string(),
            "--profile".into(),
            "fast".into(),
        ],
    )
    .await;
}

#[tokio::test]
async fn first_screen_of_a_failing_driver_report() {
    // Every StartTask panics: one failure blocks most of the suite.
    first_screen_shows_the_verdict_and_the_root_cause(
        "driver",
        &[
            support::workspace_bin("driver-exec").display().to_string(),
            "--plugin-args".into(),
            "--fault panics-in-start".into(),
            "--task-command".into(),
            "command = {command}\nargs = {args}".into(),
            "--plugin-config".into(),
            support::root()
                .join("fixtures/driver/plugin.hcl")
                .display()
                .to_string(),
            "--profile".into(),
            "fast".into(),
        ],
    )
    .await;
}

#[tokio::test]
async fn first_screen_of_a_failing_csi_report() {
    if !support::needs_root("the CSI suite (it mounts)") {
        return;
    }
    // A node ID that is empty: one failure, forty clauses blocked.
    let launch = format!(
        "{} --endpoint {{endpoint}} --node-id nomad-conform-node --state-dir {{state_dir}} --max-volumes-per-node 16 --fault empty-node-id",
        support::workspace_bin("csi-hostpath").display()
    );
    first_screen_shows_the_verdict_and_the_root_cause(
        "csi",
        &[
            "--launch".into(),
            launch,
            "--mutable-parameters".into(),
            r#"{"tier":"fast"}"#.into(),
            "--profile".into(),
            "fast".into(),
        ],
    )
    .await;
}

#[tokio::test]
async fn first_screen_of_a_failing_lock_report() {
    let client = format!(
        "{} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms --fault ignores-sigterm -- {{protected}}",
        support::workspace_bin("lock-sidecar").display()
    );
    first_screen_shows_the_verdict_and_the_root_cause(
        "lock",
        &[
            "--client".into(),
            client,
            "--give-up".into(),
            "2s".into(),
            "--stop-on-client-after".into(),
            "1s".into(),
            "--profile".into(),
            "fast".into(),
            "--tags".into(),
            "@LOCK-SIGTERM or @LOCK-SIGNAL-RELEASES or @LOCK-STARTS".into(),
        ],
    )
    .await;
}
