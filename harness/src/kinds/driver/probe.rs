//! The one load before the run, as Nomad loads a driver: the fingerprint launch (PluginInfo,
//! ConfigSchema), then a long-lived instance with the user's configuration for what every
//! task start asks (TaskConfigSchema, Capabilities), the first fingerprint (is the driver
//! healthy on this node?) and one `long` task (can the harness see the driver's task processes
//! in /proc?), shut down as Nomad shuts plugins down. What it learns decides skips (exec,
//! signals, task shapes), how configurations are encoded, and whether clauses judge task
//! processes directly or only through the driver's answers; what fails is left to the clauses
//! that judge it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use nomad_conform_hclspec::SpecTree;

use crate::clauses::{CaseKey, ClauseSet};
use crate::plugins::driver::taskconfig::{self, Placement};
use crate::plugins::driver::taskhost::{self, Isolation, TaskHost};
use crate::plugins::driver::{
    Client, DRIVER_API_VERSION, HostTimings, LaunchSpec, drivers, fingerprint_launch,
    instance_launch, negotiate_api_version, nomad_config, shutdown_like_nomad,
};
use crate::run::Selection;
use crate::steps::driver::tasks::{Placeholders, SHAPES, Shapes};
use crate::steps::driver::{DriverProbe, PluginConfigSource, ProbeTask};

fn schema(spec: Option<&nomad_conform_proto::nomad::hclspec::Spec>) -> Result<SpecTree, String> {
    match spec {
        // No schema: the plugin takes no configuration (an empty object).
        None => Ok(SpecTree::Object(BTreeMap::new())),
        Some(s) => SpecTree::from_proto(s).map_err(|e| e.to_string()),
    }
}

/// Where the probe task is made, and what it runs.
pub struct ProbeSetup<'a> {
    pub scratch: &'a Path,
    pub run_id: &'a str,
    pub shapes: &'a Shapes,
    pub fingerprint_deadline: std::time::Duration,
    /// The client's chroot_env (None: Nomad's default).
    pub chroot_env: Option<Vec<(std::path::PathBuf, std::path::PathBuf)>>,
}

/// Load the plugin once, as Nomad does, and learn what the run needs.
pub async fn probe(
    launch: &LaunchSpec,
    timings: &HostTimings,
    config: &PluginConfigSource,
    setup: &ProbeSetup<'_>,
) -> DriverProbe {
    let mut p = DriverProbe {
        info: None,
        api_version: DRIVER_API_VERSION.into(),
        config_schema: Err("the plugin's fingerprint launch failed".into()),
        task_schema: Err("no long-lived instance of the plugin could be started".into()),
        caps: None,
        fingerprint: None,
        task: None,
        launch_timed_out: None,
        config_schema_nil: false,
        host: TaskHost::new(Isolation::None, false, setup.chroot_env.clone()),
        failures: Vec::new(),
    };
    match fingerprint_launch(launch, timings).await {
        Err(e) => {
            if matches!(
                e,
                crate::plugins::driver::LoadError::Launch(
                    crate::plugins::driver::LaunchError::NoHandshake { .. }
                )
            ) {
                p.launch_timed_out = Some(e.to_string());
            }
            p.failures.push(format!("fingerprint launch: {e}"));
        }
        Ok(f) => {
            p.info = f.info.clone();
            if let Some(info) = &f.info
                && let Some(api) = negotiate_api_version(&info.plugin_api_versions).chosen
            {
                p.api_version = api;
            }
            match (&f.config_schema, &f.schema) {
                (Some(_), Some(resp)) => {
                    p.config_schema_nil = resp.spec.is_none();
                    p.config_schema = schema(resp.spec.as_ref());
                }
                (Some(rpc), None) => {
                    p.failures.push(format!("ConfigSchema: {}", rpc.outcome()));
                    p.config_schema = Err(format!("ConfigSchema failed: {}", rpc.outcome()));
                }
                (None, _) => p
                    .failures
                    .push(format!("PluginInfo: {}", f.plugin_info.outcome())),
            }
        }
    }
    let encoded = config.encode(&p.config_schema, p.config_schema_nil);
    let cty = match &encoded {
        Ok(e) => e.cty.clone(),
        Err(e) => {
            p.failures.push(e.clone());
            return p;
        }
    };
    match instance_launch(launch, cty, &p.api_version, nomad_config(), timings).await {
        Err(e) => p.failures.push(format!("instance launch: {e}")),
        Ok(inst) if !inst.running() => p.failures.push(inst.failure.clone().unwrap_or_default()),
        Ok(inst) => {
            let (rpc, resp) = inst.client.task_config_schema(timings.rpc).await;
            p.task_schema = match resp {
                Some(r) => schema(r.spec.as_ref()),
                None => Err(format!("TaskConfigSchema failed: {}", rpc.outcome())),
            };
            let (rpc, resp) = inst.client.capabilities(timings.rpc).await;
            p.caps = resp.and_then(|r| r.capabilities);
            if p.caps.is_none() {
                p.failures.push(format!("Capabilities: {}", rpc.outcome()));
            }
            if let Some(c) = &p.caps {
                p.host = TaskHost::new(
                    Isolation::from_proto(c.fs_isolation),
                    c.dynamic_workload_users,
                    setup.chroot_env.clone(),
                );
            }
            let stream = inst.client.fingerprint(setup.fingerprint_deadline, 4).await;
            stream.wait_first(setup.fingerprint_deadline).await;
            p.fingerprint = stream.messages().into_iter().next().map(|m| m.message);
            stream.stop();
            if p.unhealthy().is_none()
                && let Ok(spec) = &p.task_schema
            {
                p.task = probe_task(&inst.client, spec, setup, timings, &p.host).await;
            }
            shutdown_like_nomad(&inst.client, &inst.process, timings).await;
        }
    }
    p
}

/// Start one `long` task as the client would, see whether its processes carry the environment
/// the harness gave them, then stop and destroy it (and kill whatever is left of it).
async fn probe_task(
    client: &Client,
    spec: &SpecTree,
    setup: &ProbeSetup<'_>,
    timings: &HostTimings,
    host: &TaskHost,
) -> Option<ProbeTask> {
    let (value, _) = setup
        .shapes
        .render("long", &Placeholders::default(), spec)
        .ok()??;
    let alloc_id = uuid::Uuid::new_v4().to_string();
    let placement = Placement {
        alloc_id: alloc_id.clone(),
        job_id: "nomad-conform".into(),
        job_name: "nomad-conform".into(),
        group: "group".into(),
        task: "probe".into(),
        namespace: "default".into(),
        node_id: uuid::Uuid::new_v4().to_string(),
        node_name: "nomad-conform-node".into(),
    };
    let id = taskconfig::task_id(&alloc_id, "probe", &mut rand::rng());
    let marker = format!("{}/probe", setup.run_id);
    let prepared = taskconfig::prepare(
        host,
        &setup.scratch.join("probe"),
        &placement,
        &id,
        &marker,
        nomad_conform_hclspec::encode_cty(&value),
        true,
    )
    .ok()?;
    let prepared_cgroup = prepared.cgroup.clone();
    let (rpc, _) = client.start_task(prepared.config, timings.task_call).await;
    let mut visible = false;
    if rpc.ok() {
        for _ in 0..40 {
            if !taskconfig::marked_processes(&marker).is_empty() {
                visible = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let stop = drivers::StopTaskRequest {
            task_id: id.clone(),
            timeout: prost_types::Duration::try_from(Duration::from_secs(1)).ok(),
            signal: String::new(),
        };
        // Nomad sets these no deadline; the harness's safety cap, so that a driver with a
        // grace of its own still ends the probe task.
        let (stopped, _) = client.stop_task(stop, timings.task_call).await;
        // As the client: the task's end (WaitTask), then DestroyTask(force).
        if stopped.ok() {
            let _ = client.wait_task(&id, timings.rpc).await;
        }
        let _ = client.destroy_task(&id, true, timings.task_call).await;
    }
    taskconfig::kill_marked(&marker).await;
    for p in crate::process::processes_in(&setup.scratch.join("probe")) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    taskhost::unmount_under(&setup.scratch.join("probe"));
    if let Some(cg) = &prepared_cgroup {
        taskhost::destroy_cgroup(&host.cgroups, cg);
    }
    Some(ProbeTask {
        outcome: rpc.outcome(),
        started: rpc.ok(),
        visible,
    })
}

/// Clauses the run cannot judge, with the reason: a capability the driver does not offer, or a
/// task shape the run has no configuration for.
pub fn skips(
    clauses: &ClauseSet,
    selection: &Selection,
    probe: &DriverProbe,
    shapes: &[String],
) -> Vec<(CaseKey, String)> {
    let caps_reason = |what: &str, has: fn(&drivers::DriverCapabilities) -> bool| match &probe.caps
    {
        Some(c) if has(c) => None,
        Some(_) => Some(format!("the driver's Capabilities say {what} = false")),
        // Unknown: the clause runs and is blocked on the clause that judges why.
        None => None,
    };
    let mut out = Vec::new();
    for key in &selection.run {
        let Some(clause) = clauses.get(key) else {
            continue;
        };
        let reason = clause.tags.iter().find_map(|t| match t.as_str() {
            "requires-exec" => caps_reason("exec", |c| c.exec),
            "requires-send-signals" => caps_reason("send_signals", |c| c.send_signals),
            "requires-log-collection" => probe
                .caps
                .as_ref()
                .filter(|c| c.disable_log_collection)
                .map(|_| {
                    "the driver's Capabilities set disable_log_collection: Nomad reads no output from the task's FIFOs, and this clause reads the task's output there".to_string()
                }),
            t => {
                let shape = t.strip_prefix("shape-")?;
                (SHAPES.contains(&shape) && !shapes.iter().any(|s| s == shape)).then(|| {
                    format!(
                        "the run has no task configuration for the {shape} shape: give it with --tasks FILE, or use --task-command for a driver that runs commands"
                    )
                })
            }
        });
        if let Some(r) = reason {
            out.push((key.clone(), r));
        }
    }
    out
}
