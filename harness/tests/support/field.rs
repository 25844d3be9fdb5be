//! The field ledger (fixtures/field/*.toml): the verdicts a real third-party plugin must get,
//! and how a run is compared with them. scripts/field runs the whole field; the tests use this
//! for the field plugins CI can have (the documentation's example, ember-csi from PyPI).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nomad_conform_reports::model::{RunRecord, Verdict};
use serde::Deserialize;

/// One ledger file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    pub plugin: String,
    pub kind: String,
    pub source: String,
    pub build: String,
    pub binary: String,
    #[serde(default)]
    pub needs_root: bool,
    #[serde(default)]
    pub volumes_tmpfs: Option<String>,
    pub args: Vec<String>,
    #[serde(default)]
    pub clauses: BTreeMap<String, Entry>,
}

/// What one clause must get, and why.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub verdict: String,
    pub why: String,
    #[serde(default)]
    pub plugin: Option<String>,
    #[serde(default)]
    pub nomad: Option<String>,
    #[serde(default)]
    pub spec: Option<String>,
    #[serde(default)]
    pub uncertain: Option<String>,
    #[serde(default)]
    pub racy: bool,
}

/// The ledger directory.
pub fn dir() -> PathBuf {
    super::root().join("fixtures/field")
}

impl Ledger {
    /// `fixtures/field/<name>.toml`.
    pub fn load(name: &str) -> Ledger {
        Ledger::read(&dir().join(format!("{name}.toml")))
    }

    pub fn read(path: &Path) -> Ledger {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The ledger's arguments with `{bin}` (and `{field}`) filled in.
    pub fn args_for(&self, bin: &Path, field: &Path) -> Vec<String> {
        self.args
            .iter()
            .map(|a| {
                a.replace("{bin}", &bin.display().to_string())
                    .replace("{field}", &field.display().to_string())
            })
            .collect()
    }

    /// Every way `record` differs from the ledger: a clause not listed must pass; a listed one
    /// must get its verdict (fail: fail, timed-out or leaked); a racy one may pass as well; a
    /// listed clause missing from the run is a stale entry.
    pub fn differences(&self, record: &RunRecord) -> Vec<String> {
        let mut out = Vec::new();
        for case in &record.cases {
            let entry = self.clauses.get(&case.clause);
            let want = entry.map(|e| e.verdict.as_str()).unwrap_or("pass");
            let ok = match want {
                "fail" => case.verdict.is_failure(),
                "skip" => case.verdict == Verdict::Skip,
                "blocked" => case.verdict == Verdict::Blocked,
                _ => case.verdict == Verdict::Pass,
            } || (entry.is_some_and(|e| e.racy) && case.verdict == Verdict::Pass);
            if !ok {
                out.push(format!(
                    "{}: the ledger says {want}, the run gave {}: {}",
                    case.clause,
                    case.verdict.as_str(),
                    case.reason
                        .as_deref()
                        .unwrap_or("")
                        .lines()
                        .next()
                        .unwrap_or("")
                ));
            }
        }
        for id in self.clauses.keys() {
            if !record.cases.iter().any(|c| &c.clause == id) {
                out.push(format!("{id}: in the ledger, not in the run"));
            }
        }
        out
    }

    /// What is missing from the file for a reader to trust it: empty facts, a verdict that is
    /// not one the exam knows, a clause without its reason.
    pub fn gaps(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (what, v) in [
            ("plugin", &self.plugin),
            ("source", &self.source),
            ("build", &self.build),
            ("binary", &self.binary),
        ] {
            if v.trim().is_empty() {
                out.push(format!("{what} is empty"));
            }
        }
        if !["dhv", "csi", "driver", "lock"].contains(&self.kind.as_str()) {
            out.push(format!("kind {:?} is not a suite", self.kind));
        }
        if self.args.first() != Some(&self.kind) {
            out.push("args must start with the kind's subcommand".into());
        }
        for (id, e) in &self.clauses {
            if !["fail", "skip", "blocked"].contains(&e.verdict.as_str()) {
                out.push(format!(
                    "{id}: verdict {:?} (fail, skip or blocked)",
                    e.verdict
                ));
            }
            if e.why.trim().is_empty() {
                out.push(format!("{id}: no why"));
            }
            if e.verdict == "fail" && e.plugin.is_none() {
                out.push(format!(
                    "{id}: a failure names the plugin's file that causes it"
                ));
            }
        }
        out
    }
}

/// Whether `verdict` is one of the words a ledger may use.
pub fn known_verdict(verdict: &str) -> bool {
    ["fail", "skip", "blocked"].contains(&verdict)
}

/// Where the field plugins the test set-up installs live: `$NOMAD_CONFORM_FIELD_DIR`, or
/// `target/field` of the workspace (scripts/deps.sh, ensure_field_plugins).
pub fn field_dir() -> PathBuf {
    std::env::var_os("NOMAD_CONFORM_FIELD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::root().join("target/field"))
}
