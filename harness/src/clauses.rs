//! The clause registry: every scenario of a spec is one contract clause, identified by a stable
//! ID tag and carrying one level tag (`@must` or `@should`).

use std::collections::BTreeMap;

use nomad_conform_reports::model::Level;

use crate::specs::SpecError;

/// Identifies a scenario within a run: its spec file and line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CaseKey {
    pub file: String,
    pub line: usize,
}

impl CaseKey {
    pub fn of(feature: &gherkin::Feature, scenario: &gherkin::Scenario) -> CaseKey {
        CaseKey {
            file: feature
                .path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            line: scenario.position.line,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clause {
    pub id: String,
    pub level: Level,
    pub title: String,
    /// The scenario's description: what the clause requires and why.
    pub text: String,
    /// What the clause rests on: the spec section and its RFC 2119 word, or the Nomad source
    /// file and what Nomad does (the description's `Basis:` paragraph).
    pub basis: Option<String>,
    pub kind: String,
    pub operation: String,
    pub key: CaseKey,
    /// Every tag that applies (feature, rule and scenario), without the `@`.
    pub tags: Vec<String>,
}

/// The clauses of one kind's specs, ordered by file and line.
#[derive(Clone, Debug, Default)]
pub struct ClauseSet {
    by_key: BTreeMap<CaseKey, Clause>,
}

impl ClauseSet {
    pub fn get(&self, key: &CaseKey) -> Option<&Clause> {
        self.by_key.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Clause> {
        self.by_key.values()
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Build and validate the registry: exactly one clause tag and one level per scenario,
    /// IDs unique and prefixed with the kind (`DHV-...` for `dhv`).
    pub fn from_features(kind: &str, features: &[gherkin::Feature]) -> Result<Self, SpecError> {
        let mut by_key = BTreeMap::new();
        let mut seen: BTreeMap<String, CaseKey> = BTreeMap::new();
        for feature in features {
            let scenarios = feature.scenarios.iter().map(|s| (None, s)).chain(
                feature
                    .rules
                    .iter()
                    .flat_map(|r| r.scenarios.iter().map(move |s| (Some(r), s))),
            );
            for (rule, scenario) in scenarios {
                let key = CaseKey::of(feature, scenario);
                let err = |message: String| SpecError::Clause {
                    path: key.file.clone(),
                    line: key.line,
                    message,
                };
                let tags: Vec<String> = feature
                    .tags
                    .iter()
                    .chain(rule.into_iter().flat_map(|r| r.tags.iter()))
                    .chain(scenario.tags.iter())
                    .map(|t| t.trim_start_matches('@').to_string())
                    .collect();
                let ids: Vec<&String> = tags.iter().filter(|t| is_clause_id(t)).collect();
                let [id] = ids.as_slice() else {
                    return Err(err(format!(
                        "scenario {:?} needs exactly one clause ID tag like @DHV-CREATE-IDEMPOTENT, has {}",
                        scenario.name,
                        ids.len()
                    )));
                };
                let levels: Vec<Level> = tags
                    .iter()
                    .filter_map(|t| match t.as_str() {
                        "must" => Some(Level::Must),
                        "should" => Some(Level::Should),
                        _ => None,
                    })
                    .collect();
                let [level] = levels.as_slice() else {
                    return Err(err(format!(
                        "clause {id} needs exactly one of @must or @should, has {}",
                        levels.len()
                    )));
                };
                let mut parts = id.split('-');
                let id_kind = parts.next().unwrap_or_default().to_ascii_lowercase();
                if id_kind != kind {
                    return Err(err(format!(
                        "clause {id} does not belong to the {kind} suite (IDs start with {}-)",
                        kind.to_ascii_uppercase()
                    )));
                }
                let operation = parts.next().unwrap_or_default().to_ascii_lowercase();
                if let Some(prev) = seen.insert((*id).clone(), key.clone()) {
                    return Err(err(format!(
                        "clause {id} is also used at {}:{}",
                        prev.file, prev.line
                    )));
                }
                let (text, basis) = split_basis(
                    &scenario
                        .description
                        .as_deref()
                        .map(normalise_text)
                        .unwrap_or_default(),
                );
                by_key.insert(
                    key.clone(),
                    Clause {
                        id: (*id).clone(),
                        level: *level,
                        title: scenario.name.clone(),
                        text,
                        basis,
                        kind: kind.to_string(),
                        operation,
                        key,
                        tags,
                    },
                );
            }
        }
        Ok(ClauseSet { by_key })
    }
}

/// `DHV-CREATE-IDEMPOTENT`: upper-case segments joined by dashes, at least two.
pub fn is_clause_id(tag: &str) -> bool {
    let mut parts = tag.split('-');
    let first_ok = parts
        .next()
        .is_some_and(|p| p.starts_with(|c: char| c.is_ascii_uppercase()) && is_segment(p));
    let rest: Vec<&str> = parts.collect();
    first_ok && !rest.is_empty() && rest.iter().all(|p| is_segment(p))
}

fn is_segment(p: &str) -> bool {
    !p.is_empty()
        && p.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// The clause text without its `Basis:` paragraph, and that paragraph's content. (The Gherkin
/// parser does not keep blank lines in descriptions, so the paragraph is found by its opening
/// word: `Basis:` at the start of the text or after whitespace.)
fn split_basis(text: &str) -> (String, Option<String>) {
    let at = text
        .match_indices("Basis:")
        .map(|(i, _)| i)
        .find(|&i| i == 0 || text[..i].ends_with(char::is_whitespace));
    match at {
        Some(i) => (
            text[..i].trim_end().to_string(),
            Some(text[i + "Basis:".len()..].trim().to_string()),
        ),
        None => (text.to_string(), None),
    }
}

/// Re-flow a Gherkin description: lines joined, blank lines kept as paragraph breaks.
fn normalise_text(s: &str) -> String {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in s.lines().map(str::trim) {
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(current.join(" "));
                current.clear();
            }
        } else {
            current.push(line);
        }
    }
    if !current.is_empty() {
        paragraphs.push(current.join(" "));
    }
    paragraphs.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::specs::{SpecFile, SpecSource, parse, spec_files};

    fn load(text: &str) -> Result<ClauseSet, SpecError> {
        let f = parse(&[SpecFile {
            path: "t.feature".into(),
            text: text.into(),
        }])?;
        ClauseSet::from_features("dhv", &f)
    }

    #[test]
    fn clause_ids() {
        assert!(is_clause_id("DHV-CREATE-IDEMPOTENT"));
        assert!(is_clause_id("CSI-NODE-2"));
        assert!(!is_clause_id("must"));
        assert!(!is_clause_id("DHV"));
        assert!(!is_clause_id("dhv-create"));
        assert!(!is_clause_id("DHV--X"));
    }

    #[test]
    fn embedded_dhv_clauses_are_valid() {
        let features = parse(&spec_files("dhv", &SpecSource::Embedded).unwrap()).unwrap();
        let set = ClauseSet::from_features("dhv", &features).unwrap();
        assert!(set.len() >= 30, "{}", set.len());
        let c = set
            .iter()
            .find(|c| c.id == "DHV-CREATE-IDEMPOTENT")
            .unwrap();
        assert_eq!(c.level, Level::Must);
        assert_eq!(c.operation, "create");
        assert!(c.text.contains("same result"));
        for c in set.iter() {
            assert!(
                !c.text.is_empty() || c.title.len() > 10,
                "{} has no text",
                c.id
            );
        }
    }

    #[test]
    fn every_csi_clause_names_its_basis() {
        let features = parse(&spec_files("csi", &SpecSource::Embedded).unwrap()).unwrap();
        let set = ClauseSet::from_features("csi", &features).unwrap();
        for c in set.iter() {
            let basis = c.basis.as_deref().unwrap_or_default();
            assert!(
                basis.starts_with("CSI spec") || basis.starts_with("Nomad"),
                "{} has no basis naming the CSI spec or Nomad: {basis:?}",
                c.id
            );
            assert!(!c.text.contains("Basis:"), "{}", c.id);
        }
        let second = set
            .iter()
            .find(|c| c.id == "CSI-NODE-PUBLISH-SECOND-TARGET")
            .unwrap();
        assert_eq!(second.level, Level::Should, "the spec's table says SHOULD");
    }

    #[test]
    fn basis_is_split_from_the_text() {
        let (text, basis) = split_basis("What it needs. Basis: CSI spec v1.12, X: MUST.");
        assert_eq!(text, "What it needs.");
        assert_eq!(basis.as_deref(), Some("CSI spec v1.12, X: MUST."));
        assert_eq!(split_basis("Only text.").1, None);
    }

    #[test]
    fn validation_errors() {
        let two_ids = "Feature: f\n  @DHV-A-B @DHV-A-C @must\n  Scenario: s\n    Given x\n";
        assert!(
            load(two_ids)
                .unwrap_err()
                .to_string()
                .contains("exactly one clause ID")
        );
        let no_level = "Feature: f\n  @DHV-A-B\n  Scenario: s\n    Given x\n";
        assert!(
            load(no_level)
                .unwrap_err()
                .to_string()
                .contains("@must or @should")
        );
        let wrong_kind = "Feature: f\n  @CSI-A-B @must\n  Scenario: s\n    Given x\n";
        assert!(
            load(wrong_kind)
                .unwrap_err()
                .to_string()
                .contains("does not belong")
        );
        let dup = "Feature: f\n  @DHV-A-B @must\n  Scenario: s\n    Given x\n\n  @DHV-A-B @must\n  Scenario: t\n    Given x\n";
        let e = load(dup).unwrap_err().to_string();
        assert!(e.contains("also used at t.feature:3"), "{e}");
    }
}
