//! Steps of the fingerprint feature.

use cucumber::{then, when};

use super::{DhvWorld, StepResult, list_paths};
use crate::goversion::GoVersion;
use crate::plugins::dhv::response::{VersionField, version_field};
use crate::plugins::dhv::{CallOpts, EnvPolicy};

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
    let tmp = w.ctx().scratch().join("tmp");
    std::fs::create_dir_all(&tmp)
        .map_err(|e| w.ctx().harness_error(format!("{}: {e}", tmp.display())))?;
    w.alone().await;
    w.watch_outside_before(&tmp);
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
    let changed = w.written_outside()?;
    if changed.is_empty() {
        return Ok(());
    }
    let calls: Vec<&crate::plugins::dhv::Call> = w.last.iter().collect();
    Err(w.fail(
        "fingerprint does no work: no file created or modified in the working directory, the plugin directory or /tmp",
        &format!("created or modified: {}", list_paths(&changed)),
        &calls,
    ))
}
