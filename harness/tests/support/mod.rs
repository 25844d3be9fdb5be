// Compiled into several test binaries, each of which uses part of it.
#![allow(dead_code)]

//! Shared by the fixture tests: what an expect.toml says, and how a run is compared with it.

pub mod field;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nomad_conform_reports::model::{RunRecord, Verdict};
use serde::Deserialize;

/// A fixture's expectations.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub description: String,
    /// Clauses whose verdict must be a failure (fail, timed-out or leaked).
    #[serde(default)]
    pub fail: Vec<String>,
    /// Clauses that must be skipped.
    #[serde(default)]
    pub skip: Vec<String>,
    /// Clauses that must be Blocked: a precondition they need is what another clause checks,
    /// and that clause failed first.
    #[serde(default)]
    pub blocked: Vec<String>,
    /// Extra arguments for nomad-conform, run from the fixture's directory.
    #[serde(default)]
    pub args: Vec<String>,
    /// CSI and driver: the fault switches of the reference plugin this fixture turns on.
    #[serde(default)]
    pub faults: Vec<String>,
    /// CSI and driver: the variant switches (behaviours the contract allows) it turns on.
    #[serde(default)]
    pub variants: Vec<String>,
    /// CSI and driver: extra arguments for the reference plugin; lock: for the reference client
    /// (in place of the default flags they name).
    #[serde(default)]
    pub plugin_args: Vec<String>,
    /// Lock: how the reference client runs, `shim` (the default) or `sidecar`.
    #[serde(default)]
    pub pattern: Option<String>,
    /// DHV: a plugin binary built with the workspace (next to the tests), instead of the
    /// fixture's own `plugin` file.
    #[serde(default)]
    pub plugin_bin: Option<String>,
    /// Texts a clause's reason must contain (what the failure message, or the reason it was
    /// blocked or skipped, must say).
    #[serde(default)]
    pub reasons: std::collections::BTreeMap<String, Vec<String>>,
    /// The exit status, when the verdicts alone do not decide it (3: clauses the node kept
    /// from being judged).
    #[serde(default)]
    pub exit: Option<i32>,
}

impl Expect {
    pub fn load(dir: &Path) -> Expect {
        let path = dir.join("expect.toml");
        toml::from_str(&std::fs::read_to_string(&path).expect("expect.toml"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// A binary built with the workspace, next to the running test (`cargo test --workspace`
/// builds every package's binaries).
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).unwrap();
    let bin = dir.join(name);
    assert!(
        bin.is_file(),
        "{} is missing: build the workspace (scripts/test runs `cargo test --workspace`)",
        bin.display()
    );
    bin
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Tests that mount need root: skip elsewhere, but never in CI.
pub fn needs_root(what: &str) -> bool {
    if is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run {what} as root"
    );
    eprintln!("skipped: {what} needs root");
    false
}

/// Names of the fixture directories (those with an expect.toml) under `fixtures/<kind>`.
pub fn fixture_dirs(kind: &str) -> BTreeSet<String> {
    std::fs::read_dir(root().join("fixtures").join(kind))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("expect.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The most bytes the HTML report of any fixture's run may take (issue 33: under 500 KB for a
/// full failing run of any kind).
pub const MAX_HTML_BYTES: u64 = 500_000;

/// Run nomad-conform with `args` from `dir`, writing JSON, JUnit and HTML, and compare every verdict
/// with `expect`; panics listing every mismatch. Returns the run's record.
pub fn run_and_check(dir: &Path, args: &[String], expect: &Expect, label: &str) -> RunRecord {
    // A variant is a plugin that is right in a way the reference is not: it must conform.
    let variant = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("variant"));
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("run.json");
    let junit = out_dir.path().join("run.xml");
    let html = out_dir.path().join("run.html");
    let output: Output = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .current_dir(dir)
        .args(args)
        .args(&expect.args)
        .args(["--seed", "7", "--json"])
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .arg("--html")
        .arg(&html)
        .output()
        .expect("run nomad-conform");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no JSON record ({e})\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    let record: RunRecord = serde_json::from_str(&text).unwrap();

    let mut problems = Vec::new();
    // A report stays readable however the run failed: the page carries the evidence of the
    // failures, not every byte of the record.
    let page = std::fs::metadata(&html).map(|m| m.len()).unwrap_or(0);
    if !(1..MAX_HTML_BYTES).contains(&page) {
        problems.push(format!(
            "the HTML report is {page} bytes (it must be written, and under {MAX_HTML_BYTES})"
        ));
    }
    let ids: BTreeSet<&str> = record.cases.iter().map(|c| c.clause.as_str()).collect();
    for named in expect
        .fail
        .iter()
        .chain(&expect.skip)
        .chain(&expect.blocked)
    {
        if !ids.contains(named.as_str()) {
            problems.push(format!("{named}: named in expect.toml but not in the run"));
        }
    }
    for case in &record.cases {
        let wanted = if expect.fail.contains(&case.clause) {
            "fail"
        } else if expect.skip.contains(&case.clause) {
            "skip"
        } else if expect.blocked.contains(&case.clause) {
            "blocked"
        } else {
            "pass"
        };
        let ok = match wanted {
            "fail" => case.verdict.is_failure(),
            "skip" => case.verdict == Verdict::Skip,
            "blocked" => case.verdict == Verdict::Blocked,
            _ => case.verdict == Verdict::Pass,
        };
        if !ok {
            problems.push(format!(
                "{}: expected {wanted}, got {}\n    {}",
                case.clause,
                case.verdict.as_str(),
                case.reason.as_deref().unwrap_or("").replace('\n', "\n    ")
            ));
        }
    }
    for (clause, texts) in &expect.reasons {
        let reason = record
            .cases
            .iter()
            .find(|c| &c.clause == clause)
            .and_then(|c| c.reason.clone())
            .unwrap_or_default();
        for t in texts {
            if !reason.contains(t.as_str()) {
                problems.push(format!(
                    "{clause}: its reason does not say {t:?}:\n    {}",
                    reason.replace('\n', "\n    ")
                ));
            }
        }
    }
    let want_code = if record.cases.iter().any(|c| c.is_blocking(false)) {
        1
    } else {
        expect.exit.unwrap_or(0)
    };
    if variant {
        for case in record.cases.iter().filter(|c| c.is_blocking(false)) {
            problems.push(format!(
                "{}: a variant must conform, but this MUST clause is {}",
                case.clause,
                case.verdict.as_str()
            ));
        }
        if !expect.faults.is_empty() {
            problems.push("a variant fixture turns on no fault switch".into());
        }
    }
    if output.status.code() != Some(want_code) {
        problems.push(format!(
            "exit status {:?}, expected {want_code}",
            output.status.code()
        ));
    }
    // Every shape of failure still validates against Jenkins' JUnit schema.
    let lint = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(root().join("reports/schema/junit-10.xsd"))
        .arg(&junit)
        .output()
        .expect("xmllint (libxml2-utils) is installed by scripts/test");
    if !lint.status.success() {
        problems.push(format!(
            "the JUnit report does not validate: {}",
            String::from_utf8_lossy(&lint.stderr)
        ));
    }
    assert!(
        problems.is_empty(),
        "{label} ({}): {} mismatches\n{}\n\nstdout:\n{stdout}\nstderr:\n{stderr}",
        expect.description,
        problems.len(),
        problems.join("\n")
    );
    record
}

/// The MUST clauses of a suite that no fixture names in its `fail` list.
pub fn unproven_must_clauses(kind: &str, fixtures: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(["list", kind])
        .output()
        .unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    let must: BTreeSet<&str> = listing
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("MUST"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(must.len() >= 5, "{listing}");
    let mut failed = BTreeSet::new();
    for dir in fixtures {
        let e = Expect::load(&root().join("fixtures").join(kind).join(dir));
        failed.extend(e.fail);
    }
    must.iter()
        .filter(|c| !failed.contains(**c))
        .map(|c| c.to_string())
        .collect()
}

/// The verdict of every clause, by clause ID, from one run of the suite with `args`, started
/// in `cwd` (the harness's own when `None`).
pub fn verdicts<S: AsRef<std::ffi::OsStr>>(
    cwd: Option<&Path>,
    args: &[S],
) -> std::collections::BTreeMap<String, String> {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("run.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nomad-conform"));
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let status = cmd
        .args(args)
        .args(["-q", "--json"])
        .arg(&json)
        .output()
        .expect("run nomad-conform");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "no record ({e}): {}",
            String::from_utf8_lossy(&status.stderr)
        )
    });
    let record: RunRecord = serde_json::from_str(&text).unwrap();
    record
        .cases
        .iter()
        .map(|c| (c.clause.clone(), c.verdict.as_str().to_string()))
        .collect()
}
