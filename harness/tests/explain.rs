//! `nomad-conform explain`: every clause of every suite has a model answer in the reference
//! plugins, and the command prints it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("nomad-conform runs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether `text` defines `symbol`: a Rust fn or type, or a shell function.
fn defines(text: &str, symbol: &str, rust: bool) -> bool {
    if rust {
        [
            format!("fn {symbol}("),
            format!("fn {symbol}<"),
            format!("struct {symbol} "),
            format!("enum {symbol} "),
        ]
        .iter()
        .any(|p| text.contains(p.as_str()))
    } else {
        text.contains(&format!("{symbol}() {{"))
    }
}

#[test]
fn every_clause_has_a_model_answer_that_exists() {
    let mut checked = 0;
    for kind in nomad_conform::explain::KINDS {
        let out = run(&["list", kind, "--format", "json"]);
        if !out.status.success() {
            // A suite without specs yet (variables, while its specs are being written).
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("define no"), "list {kind}: {err}");
            continue;
        }
        let clauses: Vec<serde_json::Value> =
            serde_json::from_slice(&out.stdout).expect("list --format json parses");
        let answers = nomad_conform::explain::answers(kind).expect("answers.toml parses");
        let mut problems = Vec::new();
        for c in &clauses {
            let id = c["id"].as_str().unwrap();
            let Some(answer) = answers.get(id) else {
                problems.push(format!("{id}: no entry in specs/{kind}/answers.toml"));
                continue;
            };
            let path = repo().join(&answer.file);
            let Ok(text) = std::fs::read_to_string(&path) else {
                problems.push(format!("{id}: {} does not exist", answer.file));
                continue;
            };
            if let Some(symbol) = &answer.symbol
                && !defines(&text, symbol, answer.file.ends_with(".rs"))
            {
                problems.push(format!("{id}: {} does not define {symbol}", answer.file));
            }
            checked += 1;
        }
        let ids: Vec<&str> = clauses.iter().filter_map(|c| c["id"].as_str()).collect();
        for id in answers.keys() {
            if !ids.contains(&id.as_str()) {
                problems.push(format!(
                    "specs/{kind}/answers.toml: {id} is not a {kind} clause"
                ));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
    assert!(checked >= 37 + 121 + 61 + 25, "{checked} clauses checked");
}

#[test]
fn explain_prints_level_basis_file_and_command() {
    let out = run(&["explain", "csi-node-publish-idempotent"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("CSI-NODE-PUBLISH-IDEMPOTENT  MUST  (csi)"),
        "{text}"
    );
    assert!(text.contains("\nbasis: CSI spec"), "{text}");
    assert!(text.contains("spec:  specs/csi/03_node.feature:"), "{text}");
    assert!(
        text.contains("model answer: reference-plugins/csi-hostpath/src/node.rs (handle_publish)"),
        "{text}"
    );
    assert!(text.contains("cargo build -p csi-hostpath"), "{text}");
    assert!(
        text.contains("--tags @CSI-NODE-PUBLISH-IDEMPOTENT"),
        "{text}"
    );

    let out = run(&["explain", "@LOCK-CONFLICT-STOPS"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("reference-plugins/lock-sidecar/src/lease.rs (maintain)"),
        "{text}"
    );
    assert!(text.contains("-- {protected}' "), "{text}");
    assert!(
        text.contains("--profile fast --tags @LOCK-CONFLICT-STOPS"),
        "{text}"
    );

    let out = run(&["explain", "DHV-CREATE-RESTORE"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "nomad-conform dhv reference-plugins/dhv/ext4-image --tags @DHV-CREATE-RESTORE"
        ),
        "{text}"
    );
}

#[test]
fn unknown_clause_exits_2_with_close_matches() {
    let out = run(&["explain", "CSI-NODE-PUBLISH-IDEMPOTNT"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no clause \"CSI-NODE-PUBLISH-IDEMPOTNT\""),
        "{err}"
    );
    assert!(err.contains("did you mean"), "{err}");
    assert!(err.contains("CSI-NODE-PUBLISH-IDEMPOTENT"), "{err}");

    let out = run(&["explain", "NOPE"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("nomad-conform list"), "{err}");
}

#[test]
fn explain_json_parses() {
    let out = run(&["explain", "DRIVER-STOP-ESCALATES", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["id"], "DRIVER-STOP-ESCALATES");
    assert_eq!(v["level"], "must");
    assert_eq!(v["kind"], "driver");
    assert!(v["basis"].as_str().unwrap().contains("Nomad"), "{v}");
    assert_eq!(
        v["answer"]["file"],
        "reference-plugins/driver-exec/src/stop.rs"
    );
    assert_eq!(v["answer"]["symbol"], "stop_one");
    assert!(v["line"].as_u64().unwrap() > 0);
    assert!(
        v["command"]
            .as_str()
            .unwrap()
            .contains("--tags @DRIVER-STOP-ESCALATES")
    );
}
