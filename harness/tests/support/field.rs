//! The field ledger (fixtures/field/*.toml, described in fixtures/field/README.md), read as
//! scripts/field reads it: what a real plugin is launched with, and the verdict every clause must
//! get (a clause the ledger does not list must pass). For the CI tests that run a field plugin of
//! any kind against its ledger entry.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nomad_conform_reports::model::{RunRecord, Verdict};
use serde::Deserialize;

/// One ledger file.
#[derive(Debug, Deserialize)]
pub struct Ledger {
    pub plugin: String,
    pub kind: String,
    #[serde(default)]
    pub source: String,
    /// The file the exam looks for in the field directory.
    pub binary: String,
    #[serde(default)]
    pub needs_root: bool,
    /// nomad-conform's arguments; `{bin}` and `{field}` are filled in by [`Ledger::args_with`].
    pub args: Vec<String>,
    #[serde(default)]
    pub clauses: BTreeMap<String, Entry>,
}

/// A clause the ledger lists: the verdict it must get, and why.
#[derive(Debug, Deserialize)]
pub struct Entry {
    pub verdict: String,
    pub why: String,
}

impl Ledger {
    /// fixtures/field/<name>.toml.
    pub fn load(name: &str) -> Ledger {
        let path = super::root()
            .join("fixtures/field")
            .join(format!("{name}.toml"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The arguments with `{bin}` (the plugin's binary) and `{field}` (the directory it came
    /// from) filled in, as scripts/field fills them.
    pub fn args_with(&self, bin: &Path, field: &Path) -> Vec<String> {
        self.args
            .iter()
            .map(|a| {
                a.replace("{field}", &field.display().to_string())
                    .replace("{bin}", &bin.display().to_string())
            })
            .collect()
    }

    /// The verdict the ledger wants for `clause`: its entry's, or pass.
    pub fn expected(&self, clause: &str) -> &str {
        self.clauses
            .get(clause)
            .map(|e| e.verdict.as_str())
            .unwrap_or("pass")
    }

    /// Every difference between a run's verdicts and the ledger, as scripts/field names them
    /// (`fail` is met by fail, timed-out and leaked), and every ledger entry the run lacks.
    pub fn differences(&self, record: &RunRecord) -> Vec<String> {
        let mut out = Vec::new();
        for case in &record.cases {
            let want = self.expected(&case.clause);
            let seen = case.verdict;
            let ok = match want {
                "fail" => seen.is_failure(),
                other => other == seen.as_str(),
            };
            if !ok {
                out.push(format!(
                    "{}: expected {want}, seen {}: {}",
                    case.clause,
                    seen.as_str(),
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
                out.push(format!("{id}: listed in the ledger, not in the run"));
            }
        }
        out
    }
}

/// Whether `verdict` is one of the words a ledger may use.
pub fn known_verdict(verdict: &str) -> bool {
    verdict == "fail"
        || [
            Verdict::Pass,
            Verdict::Skip,
            Verdict::Blocked,
            Verdict::TimedOut,
            Verdict::Leaked,
        ]
        .iter()
        .any(|v| v.as_str() == verdict)
}

/// Where a tool the test set-up installs lives: `$NOMAD_CONFORM_FIELD_DIR`, or
/// `target/field` of the workspace (scripts/deps.sh, ensure_field_plugins).
pub fn field_dir() -> PathBuf {
    std::env::var_os("NOMAD_CONFORM_FIELD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| super::root().join("target/field"))
}
