//! Steps of the launch feature: the go-plugin handshake as Nomad's client reads it.

use std::sync::Arc;

use cucumber::{given, then, when};

use super::{
    DriverWorld, Instance, LaunchFailureKind, StepResult, launch_root, looks_like_handshake,
};
use crate::plugins::driver::{LaunchError, connect, launch};

/// The launched instance's handshake, or the launch failure (Blocked on the clause that judges
/// it when `root` is not this clause's own).
fn launched(w: &DriverWorld) -> Result<Arc<Instance>, String> {
    match &w.launched {
        Some(Ok(())) => w.instance(),
        Some(Err(f)) => Err(w.precondition(
            f.root,
            "the plugin launches and prints a handshake line",
            &f.error,
            &[],
        )),
        None => Err(w.ctx().harness_error("the plugin was not launched")),
    }
}

#[when("the harness launches the plugin as Nomad does")]
async fn launches(w: &mut DriverWorld) -> StepResult {
    // The probe's launch already waited the whole start timeout for nothing: that launch is
    // the one judged, not another wait as long.
    if let Some(e) = w.config().probe.launch_timed_out.clone() {
        w.launched = Some(Err(LaunchFailureKind {
            root: "DRIVER-LAUNCH-DEADLINE",
            error: format!("{e}\n(the harness's first launch of the plugin, before the clauses)"),
            unrecognized_line: None,
        }));
        return Ok(());
    }
    let spec = w.spec().clone();
    match launch(&spec).await {
        Ok(process) => {
            let timings = w.config().timings;
            // Connect when the handshake gives an address; the address clause judges the rest.
            let client = match connect(&process.handshake, timings.connect).await {
                Ok(c) => Some(c),
                Err(e) => {
                    w.notes.push(e.to_string());
                    None
                }
            };
            match client {
                Some(client) => {
                    w.instances.push(Arc::new(Instance {
                        process: Arc::new(process),
                        client,
                    }));
                }
                None => {
                    w.notes
                        .push(format!("handshake: {:?}", process.handshake.line));
                    w.handshake_only = Some(process.handshake.clone());
                    process.kill_now().await;
                }
            }
            w.launched = Some(Ok(()));
        }
        Err(e) => {
            let unrecognized_line = match &e {
                LaunchError::Unrecognized { line, .. } => Some(line.clone()),
                _ => None,
            };
            w.launched = Some(Err(LaunchFailureKind {
                root: launch_root(&e),
                error: e.to_string(),
                unrecognized_line,
            }));
        }
    }
    Ok(())
}

/// The handshake the launch got (also when no connection could be made).
fn handshake(w: &DriverWorld) -> Result<crate::plugins::driver::Handshake, String> {
    if let Some(h) = &w.handshake_only {
        return Ok(h.clone());
    }
    Ok(launched(w)?.process.handshake.clone())
}

fn launch_failure_here(w: &DriverWorld, expected: &str) -> Option<String> {
    match &w.launched {
        Some(Err(f)) => Some(w.fail(expected, &f.error, &[])),
        _ => None,
    }
}

#[then("the first line on stdout is a handshake line")]
async fn first_line(w: &mut DriverWorld) -> StepResult {
    let expected = "the plugin's first stdout line is its handshake (CORE|APP|NETWORK|ADDR|PROTOCOL), nothing before it";
    match &w.launched {
        // No line at all within the start timeout: the deadline clause judges that.
        Some(Err(f)) if f.root == "DRIVER-LAUNCH-DEADLINE" => Err(w.precondition(
            f.root,
            "the plugin prints a line on stdout within the start timeout",
            &f.error,
            &[],
        )),
        Some(Err(f)) => match &f.unrecognized_line {
            Some(l) if looks_like_handshake(l) => Ok(()),
            _ => Err(w.fail(expected, &f.error, &[])),
        },
        Some(Ok(())) => Ok(()),
        None => Err(w.ctx().harness_error("the plugin was not launched")),
    }
}

/// A clause about one handshake rule: fails when the handshake breaks one of `rules`.
fn rule_holds(w: &DriverWorld, rules: &[&str], expected: &str) -> StepResult {
    if let Some(Err(f)) = &w.launched
        && f.root != "DRIVER-LAUNCH-HANDSHAKE-FORMAT"
    {
        return Err(w.precondition(f.root, "the plugin prints a handshake line", &f.error, &[]));
    }
    if rules.contains(&"too_few_fields")
        && let Some(m) = launch_failure_here(w, expected)
    {
        return Err(m);
    }
    let h = handshake(w)?;
    let broken: Vec<String> = h
        .violations
        .iter()
        .filter(|v| rules.contains(&v.rule()))
        .map(|v| v.to_string())
        .collect();
    if broken.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        expected,
        &format!("{} (handshake line {:?})", broken.join("; "), h.line),
        &[],
    ))
}

#[then("the handshake has every field, well formed")]
async fn well_formed(w: &mut DriverWorld) -> StepResult {
    rule_holds(
        w,
        &[
            "too_few_fields",
            "core_not_an_integer",
            "app_not_an_integer",
            "server_cert_announced",
        ],
        "a handshake of at least 4 |-separated fields, versions as integers, no certificate (Nomad leaves AutoMTLS off)",
    )
}

#[then("the handshake's core protocol version is 1")]
async fn core_one(w: &mut DriverWorld) -> StepResult {
    rule_holds(
        w,
        &["core_version"],
        "core protocol version 1 (go-plugin's)",
    )
}

#[then("the handshake's app protocol version is 2")]
async fn app_two(w: &mut DriverWorld) -> StepResult {
    rule_holds(
        w,
        &["app_version_not_offered"],
        "app protocol version 2, the only one Nomad offers (PLUGIN_PROTOCOL_VERSIONS=2)",
    )
}

#[then("the handshake's network is unix or tcp")]
async fn network(w: &mut DriverWorld) -> StepResult {
    rule_holds(
        w,
        &["unknown_network", "address_does_not_resolve"],
        "network unix or tcp, with an address of that network",
    )
}

#[then("the harness can connect to the announced address")]
async fn can_connect(w: &mut DriverWorld) -> StepResult {
    // A handshake the harness could not dial: judged here, before asking for the instance
    // (which does not exist, and would be a harness error).
    if w.handshake_only.is_some() {
        return Err(w.fail(
            "a plaintext gRPC connection to the announced address (as go-plugin's host dials it)",
            &w.notes.join("\n"),
            &[],
        ));
    }
    launched(w).map(|_| ())
}

#[then("the handshake's protocol is grpc")]
async fn grpc(w: &mut DriverWorld) -> StepResult {
    rule_holds(
        w,
        &["protocol_not_grpc"],
        "protocol grpc, the only one Nomad allows",
    )
}

#[then("the handshake came within the start timeout")]
async fn in_time(w: &mut DriverWorld) -> StepResult {
    let timeout = w.spec().start_timeout;
    match &w.launched {
        Some(Err(f)) if f.root == "DRIVER-LAUNCH-DEADLINE" => {
            w.ctx().hint(crate::recorder::Hint::TimedOut);
            Err(w.fail(
                &format!(
                    "the handshake line within {} (go-plugin's start timeout, in the profile)",
                    crate::fmt_duration(timeout)
                ),
                &f.error,
                &[],
            ))
        }
        Some(Err(f)) => {
            Err(w.precondition(f.root, "the plugin prints a handshake line", &f.error, &[]))
        }
        _ => Ok(()),
    }
}

#[when("the harness launches the plugin without the magic cookie")]
async fn launches_without_cookie(w: &mut DriverWorld) -> StepResult {
    w.blocked_on_first_launch()?;
    let mut spec = w.spec().clone();
    spec.send_magic_cookie = false;
    match launch(&spec).await {
        Ok(process) => {
            w.notes.push(format!(
                "it printed a handshake ({:?}) and served",
                process.handshake.line
            ));
            process.kill_now().await;
            w.launched = Some(Ok(()));
        }
        Err(e) => {
            let exited = matches!(
                &e,
                LaunchError::ExitedBeforeHandshake { status, .. }
                    if !matches!(status, nomad_conform_reports::model::ExitStatus::Exited { code: 0 })
            );
            w.notes.push(e.to_string());
            w.launched = Some(Err(LaunchFailureKind {
                root: if exited { "" } else { "?" },
                error: e.to_string(),
                unrecognized_line: None,
            }));
        }
    }
    Ok(())
}

#[then("the plugin exits with a non-zero status and prints no handshake")]
async fn refused_without_cookie(w: &mut DriverWorld) -> StepResult {
    match &w.launched {
        Some(Err(f)) if f.root.is_empty() => Ok(()),
        _ => {
            let mut spec = w.spec().clone();
            spec.send_magic_cookie = false;
            Err(crate::steps::failure_text(
                "started without NOMAD_PLUGIN_MAGIC_COOKIE, the plugin refuses: no handshake, a non-zero exit status (go-plugin's servers say the binary is a plugin)",
                &w.notes.join("\n"),
                &[spec.command_line()],
            ))
        }
    }
}

#[given("the plugin has been launched as Nomad launches it")]
async fn has_launched(w: &mut DriverWorld) -> StepResult {
    w.launch_and_connect().await.map(|_| ())
}

#[when("the harness sends SIGINT to the plugin")]
async fn sigint(w: &mut DriverWorld) -> StepResult {
    let inst = w.instance()?;
    // A Ctrl-C reaches a plugin that is up and serving: go-plugin's Serve prints the handshake
    // before signal.Notify and serves RPCs only after it, so the window between the handshake
    // and the first answer is the plugin's start, not its life. Nomad's first call on a new
    // instance is PluginInfo (helper/pluginutils/loader/init.go); once it has answered, the
    // plugin is as any Ctrl-C finds it.
    let (info, _) = inst.client.plugin_info(w.config().timings.rpc).await;
    w.record(&info);
    if !info.ok() {
        return Err(w.precondition(
            "DRIVER-BASE-PLUGIN-INFO",
            "the plugin answers PluginInfo before the harness sends SIGINT",
            &info.summary(),
            &[&info],
        ));
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(inst.process.pid()),
        nix::sys::signal::Signal::SIGINT,
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    Ok(())
}

#[then("the plugin still answers PluginInfo")]
async fn still_answers(w: &mut DriverWorld) -> StepResult {
    let inst = w.instance()?;
    let (rpc, _) = inst.client.plugin_info(w.config().timings.rpc).await;
    w.record(&rpc);
    if rpc.ok() && inst.process.is_alive() {
        return Ok(());
    }
    Err(w.fail(
        "after SIGINT the plugin still serves (go-plugin's servers ignore SIGINT)",
        &format!(
            "{}; the process {}",
            rpc.outcome(),
            match inst.process.exit_status() {
                Some(s) => format!("ended: {s}"),
                None => "is still there".into(),
            }
        ),
        &[&rpc],
    ))
}

#[then("every line on the plugin's stderr is hclog JSON or has a level prefix")]
async fn hclog_lines(w: &mut DriverWorld) -> StepResult {
    let inst = w.instance()?;
    let logs = inst.process.logs();
    let plain: Vec<String> = logs
        .iter()
        .filter(|l| !l.json && !has_level_prefix(&l.raw))
        .take(5)
        .map(|l| format!("{:?}", l.raw))
        .collect();
    if plain.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "stderr lines that Nomad can log at their level: hclog JSON (@level, @message, @timestamp) or a [TRACE]/[DEBUG]/[INFO]/[WARN]/[ERROR] prefix",
        &format!(
            "{} of {} lines are neither, e.g. {}",
            logs.iter()
                .filter(|l| !l.json && !has_level_prefix(&l.raw))
                .count(),
            logs.len(),
            plain.join(", ")
        ),
        &[],
    ))
}

fn has_level_prefix(line: &str) -> bool {
    ["[TRACE]", "[DEBUG]", "[INFO]", "[WARN]", "[ERROR]"]
        .iter()
        .any(|p| line.trim_start().starts_with(p))
}
