//! ember-csi 0.9.1 (PyPI, its fake Cinder backend) in CI: launched through the harness with its
//! ledger entry's arguments (fixtures/field/ember-csi-0.9.1.toml, which carry the whole launch
//! environment), every clause's verdict compared with the ledger's, exactly as scripts/field
//! compares them. scripts/deps.sh (ensure_ember) installs it into target/field/ember-venv; a
//! missing install fails the test, never skips it.

mod support;

use nomad_conform_reports::model::RunRecord;
use support::field::{Ledger, field_dir, known_verdict};

#[test]
fn ember_csi_gets_the_verdicts_of_its_ledger_entry() {
    let ledger = Ledger::load("ember-csi-0.9.1");
    assert_eq!(ledger.kind, "csi");
    for (id, e) in &ledger.clauses {
        assert!(known_verdict(&e.verdict), "{id}: verdict {:?}", e.verdict);
        assert!(!e.why.trim().is_empty(), "{id}: no why");
    }
    let field = field_dir();
    let bin = field.join(&ledger.binary);
    assert!(
        bin.is_file(),
        "{} is missing: scripts/test installs ember-csi (scripts/deps.sh, ensure_ember; \
         NOMAD_CONFORM_FIELD_DIR names another field directory)",
        bin.display()
    );
    if ledger.needs_root && !support::needs_root("ember-csi's field run") {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("run.json");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(ledger.args_for(&bin, &field))
        .args(["--seed", "1000", "--json"])
        .arg(&json)
        .output()
        .expect("run nomad-conform");
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
        panic!(
            "no record ({e}), exit {:?}\nstdout:\n{}\nstderr:\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let record: RunRecord = serde_json::from_str(&text).unwrap();
    let differences = ledger.differences(&record);
    assert!(
        differences.is_empty(),
        "{} differs from its ledger entry in {} clauses:\n{}\n\nstdout:\n{}",
        ledger.plugin,
        differences.len(),
        differences.join("\n"),
        String::from_utf8_lossy(&output.stdout)
    );
}
