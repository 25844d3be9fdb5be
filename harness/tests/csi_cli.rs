//! `nomad-conform csi` targets and inputs: a running plugin by --endpoint (and
//! --controller-endpoint), --launch failures, bad options, and secrets that never reach a report.

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::needs_root;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
}

fn csi_hostpath() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("csi-hostpath")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = bin().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A plugin the test starts itself; killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_plugin(dir: &std::path::Path) -> (Running, PathBuf) {
    start_plugin_logging(dir, None)
}

/// The plugin, its stderr (a line per call) in `log` when given.
fn start_plugin_logging(
    dir: &std::path::Path,
    log: Option<&std::path::Path>,
) -> (Running, PathBuf) {
    let socket = dir.join("csi.sock");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let stderr = match log {
        Some(l) => Stdio::from(std::fs::File::create(l).unwrap()),
        None => Stdio::null(),
    };
    let child = Command::new(csi_hostpath())
        .arg("--endpoint")
        .arg(format!("unix://{}", socket.display()))
        .args(["--node-id", "outside-node", "--state-dir"])
        .arg(&state)
        .stderr(stderr)
        .spawn()
        .expect("csi-hostpath is built by `cargo test --workspace`");
    let until = Instant::now() + Duration::from_secs(10);
    while !socket.exists() {
        assert!(Instant::now() < until, "the plugin never made its socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    (Running(child), socket)
}

#[test]
fn bad_targets_are_usage_errors() {
    for (args, needle) in [
        (vec!["csi"], "give the plugin's socket"),
        (
            vec!["csi", "--endpoint", "tcp://127.0.0.1:1"],
            "not a unix:// endpoint",
        ),
        (
            vec!["csi", "--endpoint", "unix:///x.sock", "--launch", "x"],
            "exclude each other",
        ),
        (
            vec![
                "csi",
                "--launch",
                "x",
                "--controller-endpoint",
                "unix:///c.sock",
            ],
            "--controller-endpoint goes with --endpoint",
        ),
        (
            vec![
                "csi",
                "--endpoint",
                "unix:///x.sock",
                "--secrets",
                "/nonexistent.json",
            ],
            "--secrets",
        ),
        (
            vec![
                "csi",
                "--endpoint",
                "unix:///x.sock",
                "--mutable-parameters",
                "[1]",
            ],
            "--mutable-parameters",
        ),
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
}

#[test]
fn missing_unreachable_or_dying_plugins_get_a_clear_error() {
    // A socket path with nothing there is the user's input (exit 2, see tests/bad_input.rs);
    // a plugin that cannot be reached or dies is exit 3.
    let (code, _, stderr) = run(&["csi", "--endpoint", "unix:///nonexistent/csi.sock"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no such socket"), "{stderr}");

    let (code, _, stderr) = run(&["csi", "--launch", "sh -c 'echo broken config >&2; exit 1'"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("exited"), "{stderr}");
    assert!(
        stderr.contains("broken config"),
        "the plugin's own words: {stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p.toml");
    // A CSI plugin's socket is waited for as long as the longer of the harness's launch
    // timeout and Nomad's health_timeout: both short here.
    std::fs::write(
        &profile,
        "[harness]\nlaunch_timeout = \"500ms\"\n[csi]\nhealth_timeout = \"500ms\"\n",
    )
    .unwrap();
    let t = Instant::now();
    let (code, _, stderr) = run(&[
        "csi",
        "--launch",
        "sleep 30",
        "--profile",
        profile.to_str().unwrap(),
    ]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("did not accept connections within 500ms"),
        "{stderr}"
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.trim() == "sleep 30")
        .collect();
    assert!(
        left.is_empty(),
        "the launched command was left running: {left:?}"
    );
}

#[test]
fn a_running_plugin_by_endpoint_and_controller_endpoint() {
    if !needs_root("the CSI endpoint test (bind mounts)") {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("ncep")
        .tempdir_in("/tmp")
        .unwrap();
    let (_plugin, socket) = start_plugin(dir.path());
    let endpoint = format!("unix://{}", socket.display());
    let json = dir.path().join("run.json");
    let (code, stdout, stderr) = run(&[
        "csi",
        "--endpoint",
        &endpoint,
        "--controller-endpoint",
        &endpoint,
        "--tags",
        "@CSI-NOMAD-CLAIM or @CSI-NOMAD-RELEASE or @CSI-NOMAD-RESTART or @CSI-IDENTITY-PLUGIN-INFO",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let verdict = |id: &str| {
        record["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["clause"] == id)
            .map(|c| c["verdict"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(verdict("CSI-NOMAD-CLAIM"), "pass");
    assert_eq!(verdict("CSI-NOMAD-RELEASE"), "pass");
    assert_eq!(
        verdict("CSI-NOMAD-RESTART"),
        "skip",
        "a plugin the harness did not start cannot be restarted"
    );
    assert_eq!(record["subject"]["details"]["node_id"], "outside-node");
    assert_eq!(record["subject"]["version"], "0.1.0");
}

#[test]
fn secrets_never_reach_a_report() {
    if !needs_root("the CSI secrets test (bind mounts)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets.json");
    std::fs::write(&secrets, r#"{"password": "hunter2-csi-secret"}"#).unwrap();
    let launch = format!(
        "{} --endpoint {{endpoint}} --node-id n1 --state-dir {{state_dir}}",
        csi_hostpath().display()
    );
    let out = |ext: &str| dir.path().join(format!("r.{ext}"));
    let (code, stdout, stderr) = run(&[
        "-v",
        "csi",
        "--launch",
        &launch,
        "--secrets",
        secrets.to_str().unwrap(),
        "--tags",
        "@CSI-NOMAD-CLAIM or @CSI-CONTROLLER-CREATE-NO-NAME",
        "--json",
        out("json").to_str().unwrap(),
        "--junit",
        out("xml").to_str().unwrap(),
        "--html",
        out("html").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for ext in ["json", "xml", "html"] {
        let text = std::fs::read_to_string(out(ext)).unwrap();
        assert!(
            !text.contains("hunter2"),
            "the secret is in the {ext} report"
        );
        // The HTML page shows the requests of failing clauses only (both clauses pass): the
        // record and the JUnit file keep every call.
        assert!(
            ext == "html" || text.contains("password"),
            "the {ext} report shows which secret was sent"
        );
    }
    assert!(!stdout.contains("hunter2"), "{stdout}");
}

#[test]
fn a_launched_plugin_leaving_a_setsid_process_is_warned_about_and_cleaned_up() {
    if !needs_root("the CSI launch test (bind mounts)") {
        return;
    }
    // A marker no other process has, so that the test can look for it afterwards.
    let marker = format!("{}.{}", 300, std::process::id());
    let launch = format!(
        "sh -c '/usr/bin/setsid sleep {marker} </dev/null >/dev/null 2>&1 & exec {} \
         --endpoint {{endpoint}} --node-id n1 --state-dir {{state_dir}}'",
        csi_hostpath().display()
    );
    let (code, stdout, stderr) =
        run(&["csi", "--launch", &launch, "--tags", "@CSI-IDENTITY-PROBE"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "(sleep {marker}) running in a session of its own (setsid)"
        )),
        "{stderr}"
    );
    let needle = format!("sleep\0{marker}");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(&needle))
                .unwrap_or(false)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "still running: pids {left:?}");
}

/// Issue 21, item 5: an author reading `explain` can tell "Nomad breaks" from "the spec says".
/// Every CSI MUST clause's basis either names the Nomad source that fails when the rule is
/// broken, or says that its level rests on the spec alone.
#[test]
fn every_must_basis_says_how_nomad_breaks_or_that_the_spec_alone_sets_the_level() {
    let (code, listing, stderr) = run(&["list", "csi", "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let clauses: Vec<serde_json::Value> = serde_json::from_str(&listing).unwrap();
    let must: Vec<&serde_json::Value> = clauses.iter().filter(|c| c["level"] == "must").collect();
    assert!(must.len() > 100, "{listing}");
    let mut unclear = Vec::new();
    let mut spec_alone = 0;
    for c in &must {
        let basis = c["basis"].as_str().unwrap_or_default();
        let alone = basis.contains("rests on the spec alone");
        // A Nomad source file, as the bases cite them: `nomad/csi_endpoint.go (Claim)`.
        let names_nomad = basis.contains("Nomad ") && basis.contains(".go (");
        if alone {
            spec_alone += 1;
        }
        if !alone && !names_nomad {
            unclear.push(format!("{}: {basis}", c["id"]));
        }
    }
    assert!(
        unclear.is_empty(),
        "MUST clauses whose basis neither says how Nomad breaks nor that the level rests on the spec alone:\n{}",
        unclear.join("\n")
    );
    // Both kinds exist: the check can tell them apart.
    assert!(spec_alone > 0 && spec_alone < must.len(), "{spec_alone}");
}

/// `--volume` names volumes to claim for node-only runs and for controllers that cannot create
/// (`nomad volume register`); a controller that advertises CREATE_DELETE_VOLUME is refused it,
/// once its capabilities are known, and the launched plugin is stopped.
#[test]
fn volumes_to_claim_are_refused_for_a_controller_that_creates() {
    let launch = format!(
        "{} --endpoint {{endpoint}} --node-id n1 --state-dir {{state_dir}}",
        csi_hostpath().display()
    );
    let (code, stdout, stderr) = run(&["csi", "--launch", &launch, "--volume", "vol-a"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.contains("--volume is for node-only runs and for plugins that cannot create"),
        "{stderr}"
    );
    assert!(stderr.contains("CREATE_DELETE_VOLUME"), "{stderr}");
}

#[test]
fn shared_volumes_are_made_once_and_undone_after_their_last_reader() {
    if !needs_root("the shared publication test (bind mounts)") {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("ncsh")
        .tempdir_in("/tmp")
        .unwrap();
    let state = dir.path().join("state");
    let log = dir.path().join("plugin.log");
    let (_plugin, socket) = start_plugin_logging(dir.path(), Some(&log));
    let json = dir.path().join("run.json");
    let (code, stdout, stderr) = run(&[
        "csi",
        "--endpoint",
        &format!("unix://{}", socket.display()),
        "--tags",
        "@reads-shared-volume or @reads-shared-publication",
        "--jobs",
        "4",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cases = record["cases"].as_array().unwrap();
    assert!(cases.len() >= 14, "{stdout}");
    for c in cases {
        assert_eq!(c["verdict"], "pass", "{c}");
        // Each reader's record shows how its volume came about.
        assert!(
            c["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["operation"] == "CreateVolume (shared)"),
            "{c}"
        );
    }
    // The plugin was asked once for each shared volume, and each was undone after its readers.
    let calls = std::fs::read_to_string(&log).unwrap();
    let count = |method: &str| {
        calls
            .lines()
            .filter(|l| l.starts_with(&format!("{method} ")))
            .count()
    };
    assert_eq!(count("CreateVolume"), 2, "{calls}");
    assert_eq!(count("DeleteVolume"), 2, "{calls}");
    assert_eq!(count("NodePublishVolume"), 1, "{calls}");
    // Released once; the other two are the readers' own requests (no target, and a target of an
    // allocation that never had it).
    let released = calls
        .lines()
        .filter(|l| l.starts_with("NodeUnpublishVolume ") && l.contains("/shared-publication/"))
        .count();
    assert_eq!(released, 1, "{calls}");
    let left: Vec<_> = std::fs::read_dir(state.join("volumes"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "volumes left in the plugin: {left:?}");
}

#[test]
fn a_restarted_plugins_probe_is_recorded_once() {
    if !needs_root("the CSI restart test (bind mounts)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let launch = format!(
        "{} --endpoint {{endpoint}} --node-id n1 --state-dir {{state_dir}}",
        csi_hostpath().display()
    );
    let json = dir.path().join("run.json");
    let (code, stdout, stderr) = run(&[
        "csi",
        "--launch",
        &launch,
        "--tags",
        "@CSI-NOMAD-RESTART",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let case = record["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["clause"] == "CSI-NOMAD-RESTART")
        .unwrap();
    assert_eq!(case["verdict"], "pass", "{case}");
    let events = case["events"].as_array().unwrap();
    let probes: Vec<_> = events
        .iter()
        .filter(|e| e["operation"] == "Probe")
        .collect();
    assert!(!probes.is_empty(), "{case}");
    // One call is one event: the first and the last probe are the same call when there was one.
    let mut seen = std::collections::HashSet::new();
    for e in events {
        assert!(
            seen.insert((
                e["operation"].to_string(),
                e["started_ms"].to_string(),
                e["duration_ms"].to_string()
            )),
            "recorded twice: {e}"
        );
    }
}
