//! The command line: bad input gets one clear line and exit status 2, never a panic; listing;
//! exit statuses of real runs.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
}

fn mkdir_plugin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-plugins/dhv/mkdir")
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// A usage error: exit 2, a single line on stderr starting with our prefix, no panic.
fn usage_error(args: &[&str], needle: &str) {
    let out = bin().args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("nomad-conform: error: "), "{stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in {stderr}"
    );
}

#[test]
fn missing_plugin() {
    usage_error(&["dhv", "/nonexistent/plugin"], "no such file");
}

#[test]
fn plugin_not_executable() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plugin");
    std::fs::write(&p, "#!/bin/sh\n").unwrap();
    usage_error(&["dhv", p.to_str().unwrap()], "not executable");
}

#[test]
fn plugin_is_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    usage_error(&["dhv", dir.path().to_str().unwrap()], "is a directory");
}

#[test]
fn bad_parameters_json() {
    let p = mkdir_plugin();
    let p = p.to_str().unwrap();
    usage_error(
        &["dhv", p, "--parameters", "{nope"],
        "--parameters: not valid JSON",
    );
    usage_error(
        &["dhv", p, "--parameters", r#"{"mode": 700}"#],
        "map of strings",
    );
    usage_error(
        &["dhv", p, "--failing-parameters", "[]"],
        "--failing-parameters",
    );
}

#[test]
fn bad_capacities() {
    let p = mkdir_plugin();
    let p = p.to_str().unwrap();
    usage_error(&["dhv", p, "--capacity-min", "lots"], "is not a size");
    usage_error(
        &["dhv", p, "--capacity-min", "2GB", "--capacity-max", "1GB"],
        "must be at least",
    );
}

#[test]
fn unreadable_or_bad_specs() {
    let p = mkdir_plugin();
    let p = p.to_str().unwrap();
    usage_error(
        &["dhv", p, "--specs", "/nonexistent/specs"],
        "failed to read specs directory",
    );
    let dir = tempfile::tempdir().unwrap();
    usage_error(
        &["dhv", p, "--specs", dir.path().to_str().unwrap()],
        "no .feature files",
    );
    std::fs::write(dir.path().join("x.feature"), "this is not gherkin\n").unwrap();
    usage_error(
        &["dhv", p, "--specs", dir.path().to_str().unwrap()],
        "failed to parse",
    );
    std::fs::write(
        dir.path().join("x.feature"),
        "Feature: f\n  Scenario: s\n    Given a volume request\n",
    )
    .unwrap();
    usage_error(
        &["dhv", p, "--specs", dir.path().to_str().unwrap()],
        "clause ID tag",
    );
}

#[test]
fn bad_tags_profile_and_volumes_dir() {
    let p = mkdir_plugin();
    let p = p.to_str().unwrap();
    usage_error(&["dhv", p, "--tags", "@must and and"], "invalid --tags");
    usage_error(
        &["dhv", p, "--tags", "@NO-SUCH-CLAUSE"],
        "no dhv clause matches",
    );
    usage_error(&["dhv", p, "--profile", "nomad-0.1"], "unknown profile");
    usage_error(
        &["dhv", p, "--volumes-dir", "/nonexistent/dir"],
        "not a directory",
    );
    usage_error(&["dhv", p, "--capture-limit", "10"], "--capture-limit");
}

#[test]
fn clap_errors_exit_2() {
    bin().arg("dhv").assert().code(2);
    bin().arg("nope").assert().code(2);
    bin().args(["list", "nope"]).assert().code(2);
}

#[test]
fn list_prints_every_clause() {
    bin()
        .args(["list", "dhv"])
        .assert()
        .success()
        .stdout(predicate::str::contains("DHV-CREATE-IDEMPOTENT"))
        .stdout(predicate::str::contains("MUST"))
        .stdout(predicate::str::contains("SHOULD"))
        .stdout(predicate::str::contains(
            "DHV-DELETE-AUTO-DELETE-KEEPS-OTHERS",
        ));
}

#[test]
fn version_flag() {
    bin()
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn conformant_plugin_exits_0_and_writes_junit() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("out.xml");
    bin()
        .arg("dhv")
        .arg(mkdir_plugin())
        .args(["--tags", "@DHV-CREATE-IDEMPOTENT or @DHV-DELETE-IDEMPOTENT"])
        .arg("--junit")
        .arg(&junit)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("2 passed, 0 failed"))
        .stdout(predicate::str::contains("verdict: conformant"));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains(r#"classname="dhv.create""#), "{xml}");
    assert!(
        xml.contains("DHV-DELETE-IDEMPOTENT: delete is idempotent"),
        "{xml}"
    );
}

#[test]
fn must_failure_exits_1_and_should_failure_exits_0_unless_strict() {
    let dir = tempfile::tempdir().unwrap();
    // Logs its parameters, then behaves like the reference: breaks only the SHOULD clause
    // about secrets.
    let p = mkdir_plugin();
    let wrapper = script(
        dir.path(),
        "wrapper",
        &format!(
            "#!/bin/sh\necho \"params: $DHV_PARAMETERS\" >&2\nexec {} \"$@\"\n",
            p.display()
        ),
    );
    let secret = "@DHV-GENERAL-NO-SECRETS-ECHOED";
    bin()
        .arg("dhv")
        .arg(&wrapper)
        .args(["--tags", secret])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("WARN"))
        .stdout(predicate::str::contains("conformant with warnings"));
    bin()
        .arg("dhv")
        .arg(&wrapper)
        .args(["--tags", secret, "--strict"])
        .assert()
        .code(1);
    // Exits 1 on create: breaks a MUST clause.
    let broken = script(
        dir.path(),
        "broken",
        "#!/bin/sh\n[ \"$1\" = fingerprint ] && echo '{\"version\":\"1\"}' && exit 0\nexit 1\n",
    );
    bin()
        .arg("dhv")
        .arg(&broken)
        .args(["--tags", "@DHV-CREATE-EXIT-ZERO"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("FAIL"))
        .stdout(predicate::str::contains(
            "expected: create exits with status 0",
        ))
        .stdout(predicate::str::contains("seen:     exit status 1"))
        .stdout(predicate::str::contains("reproduce:"))
        .stdout(predicate::str::contains("env -i DHV_OPERATION=create"))
        .stdout(predicate::str::contains("--seed"));
}

#[test]
fn nothing_tested_is_not_success() {
    // Every selected clause is skipped (create cannot be made to fail): exit 3, not 0.
    let dir = tempfile::tempdir().unwrap();
    let lenient = script(
        dir.path(),
        "lenient",
        "#!/bin/sh\ncase \"$1\" in\n\
         fingerprint) echo '{\"version\":\"1\"}';;\n\
         create) mkdir -p \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"; \
         printf '{\"path\":\"%s\"}' \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\";;\n\
         delete) rm -rf \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\";;\n\
         *) exit 1;;\nesac\n",
    );
    bin()
        .arg("dhv")
        .arg(&lenient)
        .args(["--tags", "@DHV-CREATE-FAILED-CLEANUP"])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("SKIP"))
        .stdout(predicate::str::contains("--failing-parameters"));
    // With parameters it refuses, the clause can be judged.
    let picky = script(
        dir.path(),
        "picky",
        &format!(
            "#!/bin/sh\nif [ \"$1\" = create ] && [ \"$DHV_PARAMETERS\" = '{{\"fail\":\"yes\"}}' ]; then exit 1; fi\nexec {} \"$@\"\n",
            lenient.display()
        ),
    );
    bin()
        .arg("dhv")
        .arg(&picky)
        .args(["--tags", "@DHV-CREATE-FAILED-CLEANUP"])
        .args(["--failing-parameters", r#"{"fail":"yes"}"#])
        .assert()
        .code(0);
}

/// docs/clauses/<kind>.md is what `list KIND --format markdown` writes from the compiled specs:
/// a renamed clause, a changed level or basis cannot leave the reference behind.
#[test]
fn the_clause_reference_is_what_the_specs_say() {
    let mut stale = Vec::new();
    for kind in ["dhv", "csi", "driver", "lock", "variables"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
            .args(["list", kind, "--format", "markdown"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let page =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/clauses/").to_string() + kind + ".md";
        let committed = std::fs::read_to_string(&page).unwrap_or_default();
        if committed.as_bytes() != out.stdout.as_slice() {
            stale.push(page);
        }
    }
    assert!(
        stale.is_empty(),
        "stale clause reference (regenerate with scripts/clause-docs): {stale:?}"
    );
}

/// A step no definition matches is the harness's fault: the clause is an Error that names the
/// step, and the other clauses of the run are judged as usual.
#[test]
fn a_step_without_a_definition_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("x.feature"),
        "Feature: f\n\
         \n  @DHV-T-UNDEFINED @must\n  Scenario: undefined\n    When Nomad fingerprints the plugin\n    Then the plugin sings\n\
         \n  @DHV-T-DEFINED @must\n  Scenario: defined\n    When Nomad fingerprints the plugin\n    Then the plugin exits with status 0\n",
    )
    .unwrap();
    let json = dir.path().join("r.json");
    let p = mkdir_plugin();
    let out = bin()
        .args(["-q", "dhv", p.to_str().unwrap(), "--specs"])
        .arg(dir.path())
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let case = |id: &str| {
        record["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["clause"] == id)
            .unwrap_or_else(|| panic!("no case {id} in {record}"))
            .clone()
    };
    let undefined = case("DHV-T-UNDEFINED");
    assert_eq!(undefined["verdict"], "error", "{undefined}");
    assert_eq!(
        undefined["reason"],
        "no step definition in this harness matches: Then the plugin sings"
    );
    let steps = undefined["steps"].as_array().unwrap();
    assert_eq!(steps[0]["outcome"], "passed", "{undefined}");
    assert_eq!(steps[1]["outcome"], "undefined", "{undefined}");
    assert_eq!(case("DHV-T-DEFINED")["verdict"], "pass");
}
