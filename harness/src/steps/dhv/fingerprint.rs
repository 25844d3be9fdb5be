//! Steps of the fingerprint feature.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cucumber::{then, when};

use super::{DhvWorld, StepResult, list_paths, list_tree};
use crate::goversion::GoVersion;
use crate::plugins::dhv::response::{VersionField, version_field};
use crate::plugins::dhv::{CallOpts, EnvPolicy};

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
    let call = w.fingerprint(EnvPolicy::Configured).await;
    w.last = vec![call];
}

/// Alone (no other call of the plugin runs, so nothing else writes where this one is watched),
/// and with a /tmp of its own: a directory of the scenario that the stand-in for the agent
/// bind-mounts over /tmp (see [`crate::plugins::dhv::agent`]), so that whatever the plugin
/// writes under /tmp lands there, where it can be seen and nowhere else.
#[when("Nomad fingerprints the plugin while nothing else of it runs")]
async fn fingerprints_alone(w: &mut DhvWorld) -> StepResult {
    let plugin = w.plugin();
    let tmp = w.ctx().scratch().join("tmp");
    std::fs::create_dir_all(&tmp)
        .map_err(|e| w.ctx().harness_error(format!("{}: {e}", tmp.display())))?;
    w.alone().await;
    w.fingerprint_before = Some((list_tree(&w.cwd()), entries_with_mtime(&plugin.dir)));
    let opts = CallOpts {
        private_tmp: Some(tmp.clone()),
        ..CallOpts::default()
    };
    let deadline = w.deadlines().fingerprint_kill_deadline();
    let call = w
        .invoke_with(
            "fingerprint",
            "fingerprint",
            crate::plugins::dhv::fingerprint_env(),
            EnvPolicy::Configured,
            deadline,
            opts,
        )
        .await;
    w.together();
    w.private_tmp = Some(tmp);
    w.last = vec![call];
    Ok(())
}

#[then(r#"the response has a "version" that is a string"#)]
async fn has_version_string(w: &mut DhvWorld) -> StepResult {
    let call = w.last_call()?;
    answer_readable(w, call)?;
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
    answer_readable(w, call)?;
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

/// No version string at all: DHV-FINGERPRINT-VERSION-PRESENT judges that.
fn no_version(w: &DhvWorld, call: &crate::plugins::dhv::Call, why: &str) -> String {
    w.precondition(
        "DHV-FINGERPRINT-VERSION-PRESENT",
        "fingerprint reports a version string",
        &format!("no version string to parse: {why}"),
        &[call],
    )
}

/// A clause about the fingerprint's answer needs one: a call that did not exit 0, or whose
/// stdout does not decode, is judged by the clause of that.
fn answer_readable(w: &DhvWorld, call: &crate::plugins::dhv::Call) -> StepResult {
    match super::answer_problem(call) {
        None => Ok(()),
        Some((root, seen)) => Err(w.precondition(
            root,
            "fingerprint exits 0 with an answer Nomad can decode",
            &seen,
            &[call],
        )),
    }
}

#[then("nothing was written into the working directory, the plugin directory or /tmp")]
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
    let tmp = w.private_tmp.clone().unwrap_or_default();
    let isolated = call
        .agent
        .as_ref()
        .and_then(|a| a.tmp.clone())
        .filter(|(private, _)| *private);
    match &isolated {
        // What the plugin wrote under its /tmp is in the scenario's directory; shown as the
        // plugin saw it.
        // A plugin living under /tmp had its tree mounted back at its own path: the empty
        // mount points the stand-in made for it are not the plugin's writing.
        Some(_) => {
            let kept = crate::plugins::dhv::agent::kept_under_tmp(&w.plugin().path);
            changed.extend(
                list_tree(&tmp)
                    .into_iter()
                    .filter_map(|p| Some(Path::new("/tmp").join(p.strip_prefix(&tmp).ok()?)))
                    .filter(|p| !kept.iter().any(|k| k == p || k.starts_with(p))),
            )
        }
        None => {
            let why = call
                .agent
                .as_ref()
                .and_then(|a| a.tmp.clone())
                .map(|(_, note)| note)
                .unwrap_or_else(|| "the stand-in did not say".into());
            w.ctx().note(format!(
                "/tmp was not given to the plugin privately ({why}): what it wrote there could not be told from what others wrote"
            ));
        }
    }
    if changed.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "fingerprint does no work: no file created or modified in the working directory, the plugin directory or /tmp",
        &format!("created or modified: {}", list_paths(&changed)),
        &[call],
    ))
}
