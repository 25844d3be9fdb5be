//! The one load before the run, as Nomad loads a driver: the fingerprint launch (PluginInfo,
//! ConfigSchema), then a long-lived instance with the user's configuration for what every
//! task start asks (TaskConfigSchema, Capabilities), shut down as Nomad shuts plugins down.
//! What it learns decides skips (exec, signals, task shapes) and how configurations are
//! encoded; what fails is left to the clauses that judge it.

use std::collections::BTreeMap;

use nomad_conform_hclspec::SpecTree;

use super::tasks::{SHAPES, Shapes};
use super::{EncodedConfig, PluginConfigSource};
use crate::clauses::{CaseKey, ClauseSet};
use crate::plugins::driver::{
    DRIVER_API_VERSION, HostTimings, LaunchSpec, base, drivers, fingerprint_launch,
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
    /// What failed, for skip reasons and the report.
    pub failures: Vec<String>,
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
        if !self.failures.is_empty() {
            d.insert("probe_failures".into(), self.failures.join("; "));
        }
        d
    }
}

fn schema(spec: Option<&nomad_conform_proto::nomad::hclspec::Spec>) -> Result<SpecTree, String> {
    match spec {
        // No schema: the plugin takes no configuration (an empty object).
        None => Ok(SpecTree::Object(BTreeMap::new())),
        Some(s) => SpecTree::from_proto(s).map_err(|e| e.to_string()),
    }
}

/// Load the plugin once, as Nomad does, and learn what the run needs.
pub async fn probe(
    launch: &LaunchSpec,
    timings: &HostTimings,
    config: &PluginConfigSource,
) -> DriverProbe {
    let mut p = DriverProbe {
        info: None,
        api_version: DRIVER_API_VERSION.into(),
        config_schema: Err("the plugin's fingerprint launch failed".into()),
        task_schema: Err("no long-lived instance of the plugin could be started".into()),
        caps: None,
        failures: Vec::new(),
    };
    match fingerprint_launch(launch, timings).await {
        Err(e) => p.failures.push(format!("fingerprint launch: {e}")),
        Ok(f) => {
            p.info = f.info.clone();
            if let Some(info) = &f.info
                && let Some(api) = negotiate_api_version(&info.plugin_api_versions).chosen
            {
                p.api_version = api;
            }
            match (&f.config_schema, &f.schema) {
                (Some(_), Some(resp)) => p.config_schema = schema(resp.spec.as_ref()),
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
    let encoded = p
        .config_schema
        .as_ref()
        .map_err(|e| e.clone())
        .and_then(|spec| Ok(EncodedConfig::of(spec, &config.decode(spec)?)));
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
            shutdown_like_nomad(&inst.client, &inst.process, timings).await;
        }
    }
    p
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
