//! Where the Gherkin specs come from (embedded in the binary, or a directory given with
//! `--specs`) and how they are parsed.

use std::path::{Path, PathBuf};

use cucumber::feature::Ext as _;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_specs.rs"));
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("failed to read specs directory {path}: {source}")]
    ReadDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to read spec file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no .feature files under {0}")]
    Empty(PathBuf),
    #[error("failed to parse {path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}:{line}: {message}")]
    Clause {
        path: String,
        line: usize,
        message: String,
    },
}

/// Where to take feature files from.
#[derive(Clone, Debug)]
pub enum SpecSource {
    Embedded,
    Dir(PathBuf),
}

/// One feature file: a display path (used in reports) and its text.
#[derive(Clone, Debug)]
pub struct SpecFile {
    pub path: String,
    pub text: String,
}

/// The feature files of one plugin kind.
pub fn spec_files(kind: &str, source: &SpecSource) -> Result<Vec<SpecFile>, SpecError> {
    match source {
        SpecSource::Embedded => {
            let prefix = format!("{kind}/");
            Ok(embedded::EMBEDDED
                .iter()
                .filter(|(rel, _)| rel.starts_with(&prefix) && rel.ends_with(".feature"))
                .map(|(rel, text)| SpecFile {
                    path: format!("specs/{rel}"),
                    text: (*text).to_string(),
                })
                .collect())
        }
        SpecSource::Dir(dir) => {
            let mut paths = Vec::new();
            walk(dir, &mut paths)?;
            paths.sort();
            if paths.is_empty() {
                return Err(SpecError::Empty(dir.clone()));
            }
            paths
                .into_iter()
                .map(|p| {
                    let text =
                        std::fs::read_to_string(&p).map_err(|source| SpecError::ReadFile {
                            path: p.clone(),
                            source,
                        })?;
                    Ok(SpecFile {
                        path: p.display().to_string(),
                        text,
                    })
                })
                .collect()
        }
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), SpecError> {
    let entries = std::fs::read_dir(dir).map_err(|source| SpecError::ReadDir {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| SpecError::ReadDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "feature") {
            out.push(path);
        }
    }
    Ok(())
}

/// Parse feature files, expanding Scenario Outline examples, with `path` set to the display
/// path.
pub fn parse(files: &[SpecFile]) -> Result<Vec<gherkin::Feature>, SpecError> {
    files
        .iter()
        .map(|f| {
            let text = if f.text.ends_with('\n') {
                f.text.clone()
            } else {
                format!("{}\n", f.text)
            };
            let mut feature = gherkin::Feature::parse(&text, gherkin::GherkinEnv::default())
                .map_err(|e| SpecError::Parse {
                    path: f.path.clone(),
                    message: e.to_string(),
                })?;
            feature.path = Some(PathBuf::from(&f.path));
            feature.expand_examples().map_err(|e| SpecError::Parse {
                path: f.path.clone(),
                message: e.to_string(),
            })
        })
        .collect()
}

/// A profile embedded in the binary, by name (`nomad-1.10`).
pub fn embedded_profile(name: &str) -> Option<&'static str> {
    let want = format!("profiles/{name}.toml");
    embedded::EMBEDDED
        .iter()
        .find(|(rel, _)| *rel == want)
        .map(|(_, text)| *text)
}

/// Names of the embedded profiles.
pub fn embedded_profile_names() -> Vec<&'static str> {
    embedded::EMBEDDED
        .iter()
        .filter_map(|(rel, _)| rel.strip_prefix("profiles/")?.strip_suffix(".toml"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dhv_specs_are_embedded_and_parse() {
        let files = spec_files("dhv", &SpecSource::Embedded).unwrap();
        assert!(files.len() >= 4);
        assert!(files.iter().all(|f| f.path.starts_with("specs/dhv/")));
        let features = parse(&files).unwrap();
        assert!(features.iter().all(|f| !f.scenarios.is_empty()));
    }

    #[test]
    fn empty_or_missing_dir_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            spec_files("dhv", &SpecSource::Dir(dir.path().into())),
            Err(SpecError::Empty(_))
        ));
        assert!(matches!(
            spec_files("dhv", &SpecSource::Dir(dir.path().join("nope"))),
            Err(SpecError::ReadDir { .. })
        ));
    }

    #[test]
    fn parse_error_names_the_file() {
        let bad = SpecFile {
            path: "x.feature".into(),
            text: "this is not gherkin".into(),
        };
        let err = parse(&[bad]).unwrap_err().to_string();
        assert!(err.contains("x.feature"), "{err}");
    }
}
