//! Runs the DHV suite against every reference plugin and every fixture, and checks the verdicts
//! exactly: each fixture fails the clauses its expect.toml names and passes every other one;
//! each reference plugin passes every clause. This is how we know every check can fail, and
//! does not fail wrongly.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use nomad_conform_reports::model::{RunRecord, Verdict};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    description: String,
    /// Clauses whose verdict must be a failure (fail, timed-out or leaked).
    #[serde(default)]
    fail: Vec<String>,
    /// Clauses that must be skipped.
    #[serde(default)]
    skip: Vec<String>,
    /// Extra arguments for nomad-conform, run from the fixture's directory.
    #[serde(default)]
    args: Vec<String>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Run the suite on `plugin` from `dir` and compare with `expect`; panics with every mismatch.
fn check(plugin: &Path, dir: &Path, expect: &Expect) {
    let out_dir = tempfile::tempdir().unwrap();
    let json = out_dir.path().join("run.json");
    let junit = out_dir.path().join("run.xml");
    let output = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .current_dir(dir)
        .arg("dhv")
        .arg(plugin)
        .args(&expect.args)
        .args(["--seed", "7", "--json"])
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .output()
        .expect("run nomad-conform");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no JSON record ({e})\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    let record: RunRecord = serde_json::from_str(&text).unwrap();

    let mut problems = Vec::new();
    let ids: BTreeSet<&str> = record.cases.iter().map(|c| c.clause.as_str()).collect();
    for named in expect.fail.iter().chain(&expect.skip) {
        if !ids.contains(named.as_str()) {
            problems.push(format!("{named}: named in expect.toml but not in the run"));
        }
    }
    for case in &record.cases {
        let wanted = if expect.fail.contains(&case.clause) {
            "fail"
        } else if expect.skip.contains(&case.clause) {
            "skip"
        } else {
            "pass"
        };
        let ok = match wanted {
            "fail" => case.verdict.is_failure(),
            "skip" => case.verdict == Verdict::Skip,
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
    let must_fails = record.cases.iter().any(|c| c.is_blocking(false));
    let want_code = if must_fails { 1 } else { 0 };
    if output.status.code() != Some(want_code) {
        problems.push(format!(
            "exit status {:?}, expected {want_code}",
            output.status.code()
        ));
    }
    let xml = std::fs::read_to_string(&junit).unwrap_or_default();
    if !xml.contains("<testsuites") {
        problems.push("no JUnit report was written".into());
    }
    // Every shape of failure this fixture produces still validates against Jenkins' schema.
    let xsd = root().join("reports/schema/junit-10.xsd");
    let lint = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
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
        "{} ({}): {} mismatches\n{}\n\nstdout:\n{stdout}\nstderr:\n{stderr}",
        plugin.display(),
        expect.description,
        problems.len(),
        problems.join("\n")
    );
}

fn fixture(name: &str) {
    let dir = root().join("fixtures/dhv").join(name);
    let expect: Expect =
        toml::from_str(&std::fs::read_to_string(dir.join("expect.toml")).expect("expect.toml"))
            .unwrap_or_else(|e| panic!("{name}/expect.toml: {e}"));
    check(&dir.join("plugin"), &dir, &expect);
}

#[test]
fn reference_mkdir_passes_every_clause() {
    let dir = root().join("reference-plugins/dhv");
    let expect = Expect {
        description: "reference mkdir".into(),
        ..Expect::default()
    };
    check(&dir.join("mkdir"), &dir, &expect);
}

#[test]
fn reference_ext4_image_passes_every_clause() {
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run the ext4-image reference as root"
        );
        eprintln!("skipped: ext4-image mounts loop devices and needs root");
        return;
    }
    let dir = root().join("reference-plugins/dhv");
    let expect = Expect {
        description: "reference ext4-image".into(),
        ..Expect::default()
    };
    check(&dir.join("ext4-image"), &dir, &expect);
}

/// One test per fixture directory; `every_fixture_is_listed` keeps this list complete.
macro_rules! fixtures {
    ($($name:ident => $dir:literal),* $(,)?) => {
        const LISTED: &[&str] = &[$($dir),*];
        $(
            #[test]
            fn $name() {
                fixture($dir);
            }
        )*
    };
}

fixtures! {
    control => "control",
    fingerprint_exits_nonzero => "fingerprint-exits-nonzero",
    fingerprint_trailing_text => "fingerprint-trailing-text",
    fingerprint_no_version => "fingerprint-no-version",
    fingerprint_null_version => "fingerprint-null-version",
    fingerprint_bad_version => "fingerprint-bad-version",
    fingerprint_slow => "fingerprint-slow",
    fingerprint_hangs => "fingerprint-hangs",
    create_exits_nonzero => "create-exits-nonzero",
    create_trailing_text => "create-trailing-text",
    create_no_path => "create-no-path",
    create_relative_path => "create-relative-path",
    create_bytes_float => "create-bytes-float",
    create_bytes_negative => "create-bytes-negative",
    create_path_missing => "create-path-missing",
    create_returns_root => "create-returns-root",
    create_shared_path => "create-shared-path",
    create_slow => "create-slow",
    create_not_idempotent => "create-not-idempotent",
    create_fails_if_exists => "create-fails-if-exists",
    global_lock => "global-lock",
    parameters_empty_object => "parameters-empty-object",
    no_cleanup_on_failure => "no-cleanup-on-failure",
    delete_exits_nonzero => "delete-exits-nonzero",
    delete_keeps_path => "delete-keeps-path",
    delete_not_idempotent => "delete-not-idempotent",
    delete_slow => "delete-slow",
    delete_wipes_siblings => "delete-wipes-siblings",
    delete_removes_created_path => "delete-removes-created-path",
    unknown_op_is_create => "unknown-op-is-create",
    needs_home => "needs-home",
    needs_path => "needs-path",
    unchecked_variables => "unchecked-variables",
    name_based_paths => "name-based-paths",
    holds_stdout => "holds-stdout",
    leaves_daemon => "leaves-daemon",
    fingerprint_writes_cache => "fingerprint-writes-cache",
    no_error_json => "no-error-json",
    capacity_out_of_range => "capacity-out-of-range",
    echoes_parameters => "echoes-parameters",
}

#[test]
fn every_fixture_is_listed() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(root().join("fixtures/dhv"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("expect.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let listed: BTreeSet<String> = LISTED.iter().map(|s| s.to_string()).collect();
    assert_eq!(on_disk, listed, "fixtures on disk vs. listed in this test");
}

#[test]
fn every_must_clause_is_failed_by_some_fixture() {
    let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(["list", "dhv"])
        .output()
        .unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    let must: BTreeSet<&str> = listing
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("MUST"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(must.len() > 20, "{listing}");
    let mut failed = BTreeSet::new();
    for dir in LISTED {
        let path = root().join("fixtures/dhv").join(dir).join("expect.toml");
        let e: Expect = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        failed.extend(e.fail);
    }
    let missing: Vec<&&str> = must.iter().filter(|c| !failed.contains(**c)).collect();
    assert!(
        missing.is_empty(),
        "MUST clauses no fixture fails: {missing:?}"
    );
}
