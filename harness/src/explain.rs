//! `nomad-conform explain CLAUSE-ID`: one clause's text, level and basis, where its scenario is
//! written, which file of the bundled reference plugin shows a correct answer, and the command
//! that runs only that clause against that plugin.
//!
//! The model answers come from `specs/<kind>/answers.toml` (one table per clause: `file`, and
//! optionally `symbol`), embedded in the binary with the specs so an installed binary can
//! explain without the source tree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clauses::Clause;
use crate::error::HarnessError;
use crate::run::SuiteOptions;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_specs.rs"));
}

/// Every suite, in the order `explain` searches them.
pub const KINDS: &[&str] = &["dhv", "csi", "driver", "lock", "variables"];

/// Where the reference implementation answers a clause correctly.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// Repository-relative path of the file.
    pub file: String,
    /// The function (or other item) in that file, when one is the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
}

/// The embedded `answers.toml` of one kind, by clause ID (empty when the kind has none).
pub fn answers(kind: &str) -> Result<BTreeMap<String, Answer>, HarnessError> {
    let want = format!("{kind}/answers.toml");
    match embedded::EMBEDDED.iter().find(|(rel, _)| *rel == want) {
        Some((_, text)) => {
            parse_answers(text).map_err(|e| HarnessError::Internal(format!("specs/{want}: {e}")))
        }
        None => Ok(BTreeMap::new()),
    }
}

/// Parse an `answers.toml`: `[CLAUSE-ID]` tables with `file` and optional `symbol`.
pub fn parse_answers(text: &str) -> Result<BTreeMap<String, Answer>, toml::de::Error> {
    toml::from_str(text)
}

/// A clause found by `explain`, with its model answer.
#[derive(Debug)]
pub struct Explained {
    pub clause: Clause,
    pub answer: Option<Answer>,
}

/// Every clause of every kind whose specs define any.
fn all_clauses() -> Result<Vec<Clause>, HarnessError> {
    let opts = SuiteOptions::default();
    let mut all = Vec::new();
    for kind in KINDS {
        match crate::run::load_suite(kind, &opts) {
            Ok((_, clauses, _)) => all.extend(clauses.iter().cloned()),
            // A kind without specs yet (the run reports it as "define no clauses").
            Err(HarnessError::Usage(m)) if m.contains("define no") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(all)
}

/// Find a clause by ID, case-insensitive, in every kind; an unknown ID is a usage error that
/// lists close matches.
pub fn find(id: &str) -> Result<Explained, HarnessError> {
    let want = id.trim().trim_start_matches('@').to_ascii_uppercase();
    let all = all_clauses()?;
    if let Some(clause) = all.iter().find(|c| c.id == want) {
        let answer = answers(&clause.kind)?.remove(&clause.id);
        return Ok(Explained {
            clause: clause.clone(),
            answer,
        });
    }
    let ids: Vec<&str> = all.iter().map(|c| c.id.as_str()).collect();
    let close = close_matches(&want, &ids);
    let hint = if close.is_empty() {
        "see `nomad-conform list <kind>` for the clause IDs".to_string()
    } else {
        format!("did you mean: {}", close.join(", "))
    };
    Err(HarnessError::Usage(format!(
        "no clause {want:?} in any suite ({}); {hint}",
        KINDS.join(", ")
    )))
}

/// IDs that start with, contain, or share their leading segments with `want` (at most 10).
pub fn close_matches<'a>(want: &str, ids: &[&'a str]) -> Vec<&'a str> {
    let mut out: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| !want.is_empty() && (id.starts_with(want) || id.contains(want)))
        .collect();
    if out.is_empty() {
        // Drop trailing segments until something shares the prefix (CSI-NODE-PUBLSH -> CSI-NODE-).
        let segments: Vec<&str> = want.split('-').collect();
        for n in (2..segments.len()).rev() {
            let prefix = format!("{}-", segments[..n].join("-"));
            out = ids
                .iter()
                .copied()
                .filter(|id| id.starts_with(&prefix))
                .collect();
            if !out.is_empty() {
                break;
            }
        }
    }
    if out.is_empty() {
        // Any one segment of three or more letters in common (PUBLISH, STOP).
        out = ids
            .iter()
            .copied()
            .filter(|id| {
                want.split('-')
                    .skip(1)
                    .filter(|s| s.len() >= 3)
                    .any(|s| id.split('-').skip(1).any(|t| t == s))
            })
            .collect();
    }
    out.truncate(10);
    out
}

/// The reference plugin a model answer file belongs to, and how to build it.
fn build_command(kind: &str) -> Option<&'static str> {
    match kind {
        "csi" => Some("cargo build -p csi-hostpath"),
        "driver" => Some("cargo build -p driver-exec"),
        "lock" => Some("cargo build -p lock-sidecar"),
        _ => None,
    }
}

/// The command that runs only this clause against the bundled reference plugin, from the
/// repository's root (after the build command, if any).
pub fn run_command(clause: &Clause, answer: Option<&Answer>) -> String {
    let id = &clause.id;
    match clause.kind.as_str() {
        "dhv" => {
            let plugin = match answer {
                Some(a) if a.file.contains("ext4-image") => "reference-plugins/dhv/ext4-image",
                _ => "reference-plugins/dhv/mkdir",
            };
            format!("nomad-conform dhv {plugin} --tags @{id}")
        }
        "csi" => format!(
            "nomad-conform csi --launch 'target/debug/csi-hostpath --endpoint {{endpoint}} \
             --node-id node-1 --state-dir {{state_dir}} --max-volumes-per-node 16' \
             --mutable-parameters '{{\"tier\":\"fast\"}}' --tags @{id}"
        ),
        "driver" => format!(
            "nomad-conform driver target/debug/driver-exec --task-command 'command = {{command}}\n\
             args = {{args}}' --plugin-config fixtures/driver/plugin.hcl --profile fast --tags @{id}"
        ),
        "lock" => format!(
            "nomad-conform lock --client 'target/debug/lock-sidecar --path {{path}} --ttl 1s \
             --delay 1s --give-up 2s --max-backoff 500ms -- {{protected}}' --give-up 2s \
             --stop-on-client-after 1s --profile fast --tags @{id}"
        ),
        "variables" => format!("nomad-conform variables --tags @{id}"),
        other => format!("nomad-conform {other} --tags @{id}"),
    }
}

/// The explanation as JSON.
pub fn to_json(e: &Explained) -> serde_json::Value {
    let c = &e.clause;
    serde_json::json!({
        "id": c.id,
        "level": c.level,
        "kind": c.kind,
        "title": c.title,
        "text": c.text,
        "basis": c.basis,
        "file": c.key.file,
        "line": c.key.line,
        "tags": c.tags,
        "answer": e.answer,
        "build": build_command(&c.kind),
        "command": run_command(c, e.answer.as_ref()),
    })
}

/// The explanation as text.
pub fn to_text(e: &Explained) -> String {
    use std::fmt::Write as _;
    let c = &e.clause;
    let mut s = String::new();
    let _ = writeln!(s, "{}  {}  ({})", c.id, c.level.as_str(), c.kind);
    let _ = writeln!(s, "{}", c.title);
    if !c.text.is_empty() {
        let _ = writeln!(s, "\n{}", c.text);
    }
    let _ = writeln!(
        s,
        "\nbasis: {}",
        c.basis.as_deref().unwrap_or("(the spec names none)")
    );
    let _ = writeln!(s, "spec:  {}:{}", c.key.file, c.key.line);
    match &e.answer {
        Some(a) => match &a.symbol {
            Some(sym) => {
                let _ = writeln!(s, "model answer: {} ({sym})", a.file);
            }
            None => {
                let _ = writeln!(s, "model answer: {}", a.file);
            }
        },
        None => {
            let _ = writeln!(
                s,
                "model answer: (not recorded in specs/{}/answers.toml)",
                c.kind
            );
        }
    }
    let _ = writeln!(s, "\nrun only this clause against the reference plugin:");
    if let Some(build) = build_command(&c.kind) {
        let _ = writeln!(s, "  {build}");
    }
    let _ = write!(s, "  {}", run_command(c, e.answer.as_ref()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_matches_by_prefix_substring_and_segment() {
        let ids = [
            "CSI-NODE-PUBLISH-IDEMPOTENT",
            "CSI-NODE-STAGE-IDEMPOTENT",
            "LOCK-CONFLICT-STOPS",
        ];
        assert_eq!(close_matches("LOCK", &ids), ["LOCK-CONFLICT-STOPS"]);
        assert_eq!(close_matches("STAGE", &ids), ["CSI-NODE-STAGE-IDEMPOTENT"]);
        assert_eq!(close_matches("CSI-NODE-PUBLSH", &ids).len(), 2);
        assert_eq!(
            close_matches("DRIVER-CONFLICT-STOPS", &ids),
            ["LOCK-CONFLICT-STOPS"]
        );
        assert!(close_matches("XYZ-ABC", &ids).is_empty());
    }

    #[test]
    fn answers_parse() {
        let a =
            parse_answers("[X-Y]\nfile = \"a.rs\"\nsymbol = \"f\"\n[X-Z]\nfile = \"b\"\n").unwrap();
        assert_eq!(a["X-Y"].symbol.as_deref(), Some("f"));
        assert_eq!(a["X-Z"].symbol, None);
        assert!(parse_answers("[X-Y]\nfil = \"a\"\n").is_err());
    }
}
