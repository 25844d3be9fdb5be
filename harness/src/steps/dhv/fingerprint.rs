//! Steps of the fingerprint feature.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cucumber::{then, when};

use super::{DhvWorld, StepResult, list_paths, list_tree};
use crate::goversion::GoVersion;
use crate::plugins::dhv::EnvPolicy;
use crate::plugins::dhv::response::{VersionField, version_field};

/// Top-level entries of a directory with their modification times.
fn entries_with_mtime(dir: &Path) -> Vec<(PathBuf, Option<SystemTime>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let m = e.metadata().ok().and_then(|m| m.modified().ok());
                    (e.path(), m)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[when("Nomad fingerprints the plugin")]
async fn fingerprints(w: &mut DhvWorld) {
    let plugin_dir = w.plugin().dir.clone();
    w.fingerprint_before = Some((list_tree(&w.cwd()), entries_with_mtime(&plugin_dir)));
    let call = w.fingerprint(EnvPolicy::Configured).await;
    w.last = vec![call];
}

#[then(r#"the response has a "version" that is a string"#)]
async fn has_version_string(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let json = call.stdout_json().map_err(|p| {
        w.fail(
            "stdout is a JSON object with a \"version\" string",
            &format!("{p}\n{}", call.summary()),
            &[call],
        )
    })?;
    match version_field(&json) {
        VersionField::Present(_) => Ok(()),
        VersionField::Missing(why) => Err(w.fail(
            "a \"version\" string: without one the Nomad agent dereferences a nil version and crashes",
            &format!("{why}: {json}"),
            &[call],
        )),
        VersionField::Invalid(why) => Err(w.fail(
            "a \"version\" string that Nomad can decode",
            &why,
            &[call],
        )),
    }
}

#[then("the version parses with hashicorp/go-version's grammar")]
async fn version_parses(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let version = match call.stdout_json().map(|j| version_field(&j)) {
        Ok(VersionField::Present(v)) => v,
        Ok(VersionField::Missing(why)) => return Err(no_version(w, call, why)),
        Ok(VersionField::Invalid(why)) => return Err(no_version(w, call, &why)),
        Err(p) => {
            return Err(w.fail(
                "a version string valid for hashicorp/go-version",
                &format!("{p}\n{}", call.summary()),
                &[call],
            ));
        }
    };
    match GoVersion::parse(&version) {
        Ok(_) => Ok(()),
        Err(e) => Err(w.fail(
            "a version valid for hashicorp/go-version: optional \"v\", dot-separated numbers, optional pre-release and +metadata, no spaces (e.g. \"1.2.0\", \"v0.3.1-beta1\")",
            &format!("{version:?}: {e}"),
            &[call],
        )),
    }
}

fn no_version(w: &DhvWorld, call: &crate::plugins::dhv::Call, why: &str) -> String {
    w.fail(
        "a version string valid for hashicorp/go-version",
        &format!("no version string to parse: {why}"),
        &[call],
    )
}

#[then("nothing was written into the working directory or the plugin directory")]
async fn no_side_effects(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    let Some((cwd_before, plugin_before)) = &w.fingerprint_before else {
        return Err(w
            .ctx()
            .harness_error("no listing was taken before fingerprint"));
    };
    let cwd_now = list_tree(&w.cwd());
    let mut changed: Vec<PathBuf> = cwd_now.difference(cwd_before).cloned().collect();
    let plugin_now = entries_with_mtime(&w.plugin().dir);
    for entry in &plugin_now {
        if !plugin_before.contains(entry) {
            changed.push(entry.0.clone());
        }
    }
    if changed.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "fingerprint does no work: no file created or modified in the working directory or the plugin directory",
        &format!("created or modified: {}", list_paths(&changed)),
        &[call],
    ))
}
