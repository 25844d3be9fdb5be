//! The report files a run was asked for: checked before anything runs, written at the end.
//!
//! Before a run, every report path is resolved (through symlinks) and refused, with exit 2, when
//! it is or resolves to something the run must not replace: the plugin or another program the
//! run executes, an input record, a directory, a device, FIFO or socket, or the path of another
//! report of the same run; a missing or unwritable directory is said then too, once. Writing
//! goes through [`nomad_conform_reports::output::write_report_with`], each report streamed into
//! its file as it is rendered.

use std::path::{Path, PathBuf};

use nomad_conform_reports::model::RunRecord;
use nomad_conform_reports::output::{check_writable, refuse_existing, resolve, write_report_with};
use nomad_conform_reports::{html, json, junit};

use crate::cli::ReportFiles;
use crate::error::HarnessError;

/// A file the run reads or executes: never a report's path.
#[derive(Clone, Debug)]
pub struct Protected {
    pub path: PathBuf,
    /// What it is, for the message: "the plugin", "the launched binary", ...
    pub what: String,
}

impl Protected {
    pub fn new(path: impl Into<PathBuf>, what: impl Into<String>) -> Protected {
        Protected {
            path: path.into(),
            what: what.into(),
        }
    }

    /// The program a command line runs (its first word, looked up on PATH when it has no
    /// slash), if it can be found.
    pub fn program_of(command: &str, what: &str) -> Option<Protected> {
        let first = shlex::split(command)?.into_iter().next()?;
        program_path(&first).map(|p| Protected::new(p, what))
    }
}

/// Where `name` is executed from: as given when it has a slash, else the first match on PATH.
pub fn program_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The report paths of `files`, each with its flag.
pub fn named(files: &ReportFiles) -> Vec<(&'static str, &Path)> {
    [
        ("--junit", files.junit.as_deref()),
        ("--html", files.html.as_deref()),
        ("--json", files.json.as_deref()),
    ]
    .into_iter()
    .filter_map(|(flag, p)| p.map(|p| (flag, p)))
    .collect()
}

/// Check every report path before the run (see the module's text). `reports` pairs a label
/// (the flag, or the file's role) with the path given.
pub fn check_targets(
    reports: &[(&str, &Path)],
    protected: &[Protected],
) -> Result<(), HarnessError> {
    let usage = |flag: &str, p: &Path, why: String| {
        HarnessError::Usage(format!("{flag} {}: {why}; nothing was run", p.display()))
    };
    let guarded: Vec<(PathBuf, &str)> = protected
        .iter()
        .filter_map(|p| Some((p.path.canonicalize().ok()?, p.what.as_str())))
        .collect();
    let mut seen: Vec<(PathBuf, &str)> = Vec::new();
    for (flag, path) in reports {
        let resolved = resolve(path).map_err(|e| usage(flag, path, e.to_string()))?;
        if let Some((_, what)) = guarded.iter().find(|(g, _)| *g == resolved) {
            return Err(usage(
                flag,
                path,
                format!("that is {what}; a report would replace it"),
            ));
        }
        refuse_existing(&resolved).map_err(|e| usage(flag, path, e.to_string()))?;
        if let Some((_, other)) = seen.iter().find(|(s, _)| *s == resolved) {
            return Err(usage(
                flag,
                path,
                format!("{other} names the same file; give each report a path of its own"),
            ));
        }
        check_writable(&resolved).map_err(|e| {
            usage(
                flag,
                path,
                format!("a report cannot be written there ({e})"),
            )
        })?;
        seen.push((resolved, flag));
    }
    Ok(())
}

/// [`check_targets`] for a suite's `--junit`, `--html` and `--json`.
pub fn check_files(files: &ReportFiles, protected: &[Protected]) -> Result<(), HarnessError> {
    check_targets(&named(files), protected)
}

/// Each report is streamed into its file as it is rendered (through
/// [`nomad_conform_reports::output::write_report_with`]): a record holding large outputs is not
/// rendered into a string first.
pub fn write_junit(record: &RunRecord, path: &Path) -> Result<(), HarnessError> {
    write_streamed(path, "JUnit report", |out| {
        junit::write(record, out).map_err(std::io::Error::other)
    })
}

pub fn write_json(record: &RunRecord, path: &Path) -> Result<(), HarnessError> {
    write_streamed(path, "JSON report", |out| json::write(record, out))
}

pub fn write_html(record: &RunRecord, path: &Path) -> Result<(), HarnessError> {
    write_streamed(path, "HTML report", |out| {
        html::write(record, out).map_err(std::io::Error::other)
    })
}

fn write_streamed(
    path: &Path,
    what: &str,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), HarnessError> {
    write_report_with(path, write).map_err(|e| {
        HarnessError::Internal(format!("failed to write {what} {}: {e}", path.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_the_plugin_duplicates_and_devices() {
        let d = tempfile::tempdir().unwrap();
        let plugin = d.path().join("plugin");
        std::fs::write(&plugin, "#!/bin/sh\n").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&plugin, &link).unwrap();
        let guard = [Protected::new(&plugin, "the plugin")];
        for p in [&plugin, &link] {
            let e = check_targets(&[("--json", p)], &guard).unwrap_err();
            assert!(e.to_string().contains("that is the plugin"), "{e}");
            assert_eq!(e.exit_code(), 2);
        }
        let a = d.path().join("a.xml");
        let e = check_targets(&[("--junit", &a), ("--html", &a)], &guard).unwrap_err();
        assert!(e.to_string().contains("--junit names the same file"), "{e}");
        let e = check_targets(&[("--json", Path::new("/dev/full"))], &guard).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let e = check_targets(&[("--json", &d.path().join("none/r.json"))], &guard).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        check_targets(
            &[("--json", &d.path().join("r.json")), ("--junit", &a)],
            &guard,
        )
        .unwrap();
        // The check leaves nothing behind.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    }

    #[test]
    fn programs_are_found_on_path() {
        assert!(program_path("sh").is_some_and(|p| p.is_absolute()));
        assert_eq!(
            Protected::program_of("./x --endpoint {endpoint}", "the launched binary")
                .map(|p| p.path),
            Some(PathBuf::from("./x"))
        );
    }
}
