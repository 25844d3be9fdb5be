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

use super::PluginConfigSource;
use super::tasks::Placeholders;
use super::tasks::{SHAPES, Shapes};
use crate::clauses::{CaseKey, ClauseSet};
use crate::plugins::driver::taskconfig::{self, Placement};
use crate::plugins::driver::taskhost::{self, Isolation, TaskHost};
use crate::plugins::driver::{
    Client, DRIVER_API_VERSION, HostTimings, LaunchSpec, base, drivers, fingerprint_launch,
    instance_launch, negotiate_api_version, nomad_config, shutdown_like_nomad,
};
use crate::run::Selection;

/// What the probe learned.
#[derive(Debug)]
pub struct DriverProbe {
    pub info: Option<base::PluginInfoResponse>,
    /// The API version Nomad would negotiate (v0.1.0 when it could not be learned).
    pub api_version: String,
    /// The plugin's ConfigSchema, converted as Nomad converts it.
    pub config_schema: Result<SpecTree, String>,
    /// The plugin's TaskConfigSchema, converted as Nomad converts it.
    pub task_schema: Result<SpecTree, String>,
    pub caps: Option<drivers::DriverCapabilities>,
    /// The first message of the instance's Fingerprint stream (None: none came in time).
    pub fingerprint: Option<drivers::FingerprintResponse>,
    /// The probe task: None when the run has no `long` shape or no instance came up.
    pub task: Option<ProbeTask>,
    /// The first launch got no handshake line within the start timeout (the error): every
    /// other launch would wait as long for nothing, so the clauses are judged on this one.
    pub launch_timed_out: Option<String>,
    /// ConfigSchema answered without a spec: Nomad skips the validation launch and sends the
    /// long-lived instance empty msgpack_config bytes (helper/pluginutils/loader/init.go).
    pub config_schema_nil: bool,
    /// How the client builds this driver's tasks on this node (its isolation and users from
    /// Capabilities, once they are known).
    pub host: TaskHost,
    /// What failed, for skip reasons and the report.
    pub failures: Vec<String>,
}

/// What the probe's `long` task showed.
#[derive(Clone, Debug)]
pub struct ProbeTask {
    /// StartTask's outcome (`OK`, or the error).
    pub outcome: String,
    pub started: bool,
    /// Whether a process carrying the task's marker showed up in /proc within 2 s.
    pub visible: bool,
}

/// The health of a fingerprint as Nomad's scheduler reads it (`UNDETECTED`, `UNHEALTHY`,
/// `HEALTHY`, or the number).
pub fn health_name(health: i32) -> String {
    drivers::fingerprint_response::HealthState::try_from(health)
        .map(|h| h.as_str_name().to_string())
        .unwrap_or_else(|_| health.to_string())
}

impl DriverProbe {
    pub fn name(&self) -> Option<&str> {
        self.info
            .as_ref()
            .map(|i| i.name.as_str())
            .filter(|n| !n.is_empty())
    }

    pub fn version(&self) -> Option<&str> {
        self.info
            .as_ref()
            .map(|i| i.plugin_version.as_str())
            .filter(|v| !v.is_empty())
    }

    pub fn details(&self, shapes: &Shapes, available: &[String]) -> BTreeMap<String, String> {
        let mut d = BTreeMap::new();
        if let Some(n) = self.name() {
            d.insert("name".into(), n.to_string());
        }
        d.insert("api_version".into(), self.api_version.clone());
        if let Some(c) = &self.caps {
            d.insert(
                "capabilities".into(),
                format!(
                    "send_signals={} exec={} fs_isolation={} must_create_network={}",
                    c.send_signals,
                    c.exec,
                    drivers::driver_capabilities::FsIsolation::try_from(c.fs_isolation)
                        .map(|f| f.as_str_name().to_string())
                        .unwrap_or_else(|_| c.fs_isolation.to_string()),
                    c.must_create_network
                ),
            );
        }
        let source = match shapes {
            Shapes::Hcl(_) | Shapes::Toml(_) => "--tasks",
            Shapes::Command(_) => "--task-command",
            Shapes::None => "none",
        };
        d.insert(
            "task_shapes".into(),
            format!("{} (from {source})", available.join(", ")),
        );
        if let Some(f) = &self.fingerprint {
            d.insert(
                "health".into(),
                format!("{} ({:?})", health_name(f.health), f.health_description),
            );
        }
        if let Some(t) = &self.task {
            d.insert(
                "task_processes".into(),
                if t.visible {
                    "seen in /proc (carrying the task's environment)".into()
                } else if t.started {
                    "not seen in /proc: judged through the driver's answers".into()
                } else {
                    format!("the probe task did not start: {}", t.outcome)
                },
            );
        }
        if !self.failures.is_empty() {
            d.insert("probe_failures".into(), self.failures.join("; "));
        }
        d
    }

    /// Whether the driver's task processes can be found in /proc by the environment the
    /// harness gave them (true when the probe could not tell).
    pub fn tasks_visible(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.visible || !t.started)
    }

    /// Why Nomad would place no task on this driver here: its first fingerprint is not HEALTHY.
    pub fn unhealthy(&self) -> Option<String> {
        let f = self.fingerprint.as_ref()?;
        if f.health == drivers::fingerprint_response::HealthState::Healthy as i32 {
            return None;
        }
        Some(format!(
            "the driver fingerprints {} on this node ({:?}): Nomad places no task on a driver that is not detected and healthy (scheduler DriverChecker), so no task can be judged here",
            health_name(f.health),
            f.health_description
        ))
    }
}

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
        let _ = client.stop_task(stop, timings.rpc).await;
        let _ = client.destroy_task(&id, true, timings.rpc).await;
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
