//! Steps of the identity feature.

use cucumber::{given, then, when};

use super::{CsiWorld, StepResult, identity_call};
use crate::plugins::csi::pb;
use crate::recorder::Hint;

#[when("the harness calls GetPluginInfo")]
async fn get_plugin_info(w: &mut CsiWorld) {
    let mut c = w.config().node.identity();
    let d = w.ctx().run.profile.csi.plugin_info_deadline;
    let (rpc, _) = identity_call(
        w,
        "GetPluginInfo",
        pb::GetPluginInfoRequest {},
        d,
        |r| async move { c.get_plugin_info(r).await },
    )
    .await;
    w.last = vec![rpc];
}

fn response_str(w: &CsiWorld, field: &str) -> Result<String, String> {
    let rpc = w.last_call()?;
    let Some(resp) = &rpc.response else {
        return Err(w.fail(&format!("{} succeeds", rpc.method), &rpc.summary(), &[rpc]));
    };
    Ok(resp
        .get(field)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string())
}

/// Domain-name style: labels of letters, digits and dashes, separated by dots.
pub(crate) fn domain_style(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[then("the plugin name is a non-empty domain-style name of at most 63 characters")]
async fn plugin_name_ok(w: &mut CsiWorld) -> StepResult {
    let name = response_str(w, "name")?;
    if domain_style(&name) && name.len() <= 63 {
        return Ok(());
    }
    let rpc = w.last_call()?;
    let seen = if name.is_empty() {
        "name is empty: Nomad refuses the plugin (\"plugin returned empty name field\")".to_string()
    } else {
        format!("name is {name:?} ({} characters)", name.len())
    };
    Err(w.fail(
        "GetPluginInfo name: a domain-style name (e.g. hostpath.csi.example.com) of at most 63 characters",
        &seen,
        &[rpc],
    ))
}

#[then("the vendor version is not empty")]
async fn vendor_version_ok(w: &mut CsiWorld) -> StepResult {
    if !response_str(w, "vendor_version")?.is_empty() {
        return Ok(());
    }
    let rpc = w.last_call()?;
    Err(w.fail(
        "GetPluginInfo vendor_version is REQUIRED (Nomad shows it as the plugin's version)",
        "vendor_version is empty",
        &[rpc],
    ))
}

#[when("the harness calls GetPluginCapabilities")]
async fn get_plugin_capabilities(w: &mut CsiWorld) {
    let mut c = w.config().node.identity();
    let d = w.ctx().run.profile.csi.rpc_deadline;
    let (rpc, _) = identity_call(
        w,
        "GetPluginCapabilities",
        pb::GetPluginCapabilitiesRequest {},
        d,
        |r| async move { c.get_plugin_capabilities(r).await },
    )
    .await;
    w.last = vec![rpc];
}

#[then("the plugin advertises CONTROLLER_SERVICE, as the monolith it was run as")]
async fn monolith_has_controller(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    if !rpc.ok() {
        return Err(w.precondition(
            "CSI-IDENTITY-CAPABILITIES",
            "GetPluginCapabilities succeeds",
            &rpc.summary(),
            &[rpc],
        ));
    }
    if w.config().caps.plugin.contains("CONTROLLER_SERVICE") {
        return Ok(());
    }
    let how = if w.config().plugin_type_given {
        "the run was told the plugin is a monolith (--plugin-type monolith)".to_string()
    } else {
        "no --plugin-type was given, so the run judged the plugin as a monolith (the default)"
            .to_string()
    };
    Err(w.fail(
        "a monolith plugin advertises CONTROLLER_SERVICE (without it Nomad registers no controller: `nomad volume create` fails with \"plugin has no controller\" and no claim is ever attached)",
        &format!(
            "GetPluginCapabilities advertises no CONTROLLER_SERVICE, and {how}: every clause that needs the controller service was skipped. A node plugin is judged with --plugin-type node (and --volume ID for the volumes to claim)"
        ),
        &[rpc],
    ))
}

#[when("the harness calls Probe")]
async fn probe(w: &mut CsiWorld) {
    let mut c = w.config().node.identity();
    let d = w.ctx().run.profile.csi.probe_deadline;
    let (rpc, _) = identity_call(w, "Probe", pb::ProbeRequest {}, d, |r| async move {
        c.probe(r).await
    })
    .await;
    w.last = vec![rpc];
}

/// Probe's `ready`: absent means ready.
pub(crate) fn ready(resp: &serde_json::Value) -> bool {
    !matches!(resp.get("ready"), Some(serde_json::Value::Bool(false)))
}

#[then("the plugin reports ready")]
async fn reports_ready(w: &mut CsiWorld) -> StepResult {
    let rpc = w.last_call()?;
    match &rpc.response {
        Some(r) if ready(r) => Ok(()),
        Some(r) => Err(w.fail(
            "Probe ready is absent or true",
            &format!("Probe answered {r}: Nomad counts the plugin as not ready"),
            &[rpc],
        )),
        None => Err(w.fail("Probe succeeds", &rpc.summary(), &[rpc])),
    }
}

#[when("Nomad probes the plugin from its start, every 5 seconds until it is ready")]
async fn probe_until_ready(w: &mut CsiWorld) {
    // The probes were made before the first clause, as Nomad makes them before it calls
    // anything else (kinds/csi, ready.rs); this clause judges what they saw.
    let readiness = w.config().readiness.clone();
    w.ready_after = Some(readiness.ready_after.ok_or_else(|| readiness.why_not()));
    // Record the first and the last probe, not every one in between.
    let probes = &readiness.probes;
    let calls: Vec<_> = probes
        .iter()
        .take(1)
        .chain(probes.iter().skip(1).last())
        .map(|(_, rpc, _)| rpc.clone())
        .collect();
    for rpc in &calls {
        w.record(rpc, &w.config().node);
    }
    w.ctx().note(format!(
        "{} probe{} from {}, at Nomad's interval of {}",
        probes.len(),
        if probes.len() == 1 { "" } else { "s" },
        readiness.counted_from,
        crate::fmt_duration(super::ready::NOMAD_PROBE_INTERVAL)
    ));
    w.last = calls;
}

#[given("Nomad has found the plugin ready")]
async fn found_ready(w: &mut CsiWorld) -> StepResult {
    let readiness = &w.config().readiness;
    if readiness.ready() {
        return Ok(());
    }
    let calls: Vec<&crate::plugins::csi::Rpc> =
        readiness.probes.iter().map(|(_, r, _)| r).collect();
    Err(w.precondition(
        "CSI-IDENTITY-PROBE-READY-IN-TIME",
        "the plugin reports ready within Nomad's health timeout: until then Nomad calls nothing but Probe, and then restarts the plugin instead of registering it",
        &readiness.why_not(),
        &calls[calls.len().saturating_sub(1)..],
    ))
}

#[then(regex = r#"^it reports ready within the "([^"]+)" deadline$"#)]
async fn ready_in_time(w: &mut CsiWorld, name: String) -> StepResult {
    let deadline = w.ctx().run.profile.csi.deadline(&name).ok_or_else(|| {
        w.ctx()
            .harness_error(format!("no CSI deadline called {name:?}"))
    })?;
    match &w.ready_after {
        Some(Ok(t)) if *t <= deadline => Ok(()),
        Some(Ok(t)) => {
            w.ctx().hint(Hint::TimedOut);
            Err(w.fail(
                &format!("ready within {}", crate::fmt_duration(deadline)),
                &format!("ready after {}", crate::fmt_duration(*t)),
                &w.last.iter().collect::<Vec<_>>(),
            ))
        }
        Some(Err(e)) => {
            w.ctx().hint(Hint::TimedOut);
            Err(w.fail(
                &format!(
                    "Probe reports ready within Nomad's health timeout ({}); otherwise Nomad restarts the plugin task",
                    crate::fmt_duration(deadline)
                ),
                e,
                &w.last.iter().collect::<Vec<_>>(),
            ))
        }
        None => Err(w.ctx().harness_error("the plugin was never probed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domain_names() {
        assert!(domain_style("hostpath.csi.k8s.io"));
        assert!(domain_style("ebs"));
        assert!(!domain_style(""));
        assert!(!domain_style("bad name"));
        assert!(!domain_style("a..b"));
        assert!(!domain_style("-a.b"));
    }
}
