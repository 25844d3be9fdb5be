//! What the task driver suite's steps read: the plugin's launch and timings, what the one load
//! before the run learned of the plugin, its configuration encoded as Nomad sends it, and the
//! task shapes.

use std::collections::BTreeMap;

use nomad_conform_hclspec::{
    SpecTree, Value, decode_hcl, decode_json_str, encode_cty, encode_plain,
};

use super::tasks::Shapes;
use crate::plugins::driver::taskhost::TaskHost;
use crate::plugins::driver::{HostTimings, LaunchSpec, base, drivers};

/// The agent's `plugin "x" { config { ... } }` body as the user wrote it.
#[derive(Clone, Debug)]
pub enum PluginConfigSource {
    Hcl(String),
    Json(String),
}

impl PluginConfigSource {
    /// No configuration at all: no file, or one with nothing but blanks (and, in HCL,
    /// comments).
    pub fn is_empty(&self) -> bool {
        match self {
            PluginConfigSource::Hcl(t) => t
                .lines()
                .map(str::trim)
                .all(|l| l.is_empty() || l.starts_with('#') || l.starts_with("//")),
            PluginConfigSource::Json(t) => t.trim().is_empty(),
        }
    }

    /// The configuration encoded as Nomad sends it to the long-lived instance: against the
    /// plugin's ConfigSchema; or, when the plugin declared none (`nil`), no bytes at all, and
    /// any configuration refused as Nomad refuses it ("configuration not allowed but config
    /// passed", helper/pluginutils/loader/init.go).
    pub fn encode(
        &self,
        schema: &Result<SpecTree, String>,
        nil: bool,
    ) -> Result<EncodedConfig, String> {
        let spec = schema.as_ref().map_err(|e| e.clone())?;
        if nil {
            if !self.is_empty() {
                return Err(
                    "the plugin declares no ConfigSchema, and Nomad refuses any configuration for it (\"configuration not allowed but config passed\")"
                        .into(),
                );
            }
            return Ok(EncodedConfig {
                cty: Vec::new(),
                plain: Vec::new(),
                hcl: String::new(),
            });
        }
        Ok(EncodedConfig::of(spec, &self.decode(spec)?))
    }

    /// Decode against the plugin's ConfigSchema.
    pub fn decode(&self, spec: &SpecTree) -> Result<Value, String> {
        let decoded = match self {
            // The HCL library's integer arithmetic overflows unchecked (`77777 * 7777777777777777`
            // panics where overflow checks are on, as in the tests; found by the plugin_config
            // fuzz target): a user's file must get an error, never a crash.
            PluginConfigSource::Hcl(t) => {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decode_hcl(spec, t)))
                {
                    Ok(decoded) => decoded.map_err(|e| e.to_string()),
                    Err(_) => {
                        Err("an expression in it cannot be evaluated (an integer overflow?)".into())
                    }
                }
            }
            PluginConfigSource::Json(t) => decode_json_str(spec, t).map_err(|e| e.to_string()),
        };
        decoded.map_err(|e| {
            format!("the plugin configuration does not fit the plugin's ConfigSchema: {e}")
        })
    }
}

/// The plugin configuration as Nomad would send it, in both encodings.
#[derive(Clone, Debug)]
pub struct EncodedConfig {
    /// go-cty msgpack (what Nomad sends).
    pub cty: Vec<u8>,
    /// Plain msgpack of the same values (what Nomad's own driver tests send).
    pub plain: Vec<u8>,
    /// The configuration as HCL, for messages.
    pub hcl: String,
}

impl EncodedConfig {
    pub fn of(spec: &SpecTree, value: &Value) -> EncodedConfig {
        EncodedConfig {
            cty: encode_cty(value),
            plain: encode_plain(&given_only(value.to_json())),
            hcl: nomad_conform_hclspec::config_to_hcl(spec, value),
        }
    }
}

/// Plain msgpack carries only the attributes that were given: a map entry whose value is null
/// (unset, no default) is left out, as a Go struct with `omitempty` fields encodes.
fn given_only(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => serde_json::Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, given_only(v)))
                .collect(),
        ),
        other => other,
    }
}

/// What the steps of a driver run read.
#[derive(Debug)]
pub struct DriverConfig {
    /// How every launch starts the plugin (the profile's start timeout included).
    pub launch: LaunchSpec,
    pub timings: HostTimings,
    pub probe: DriverProbe,
    /// The user's plugin configuration encoded against the plugin's schema, or why it cannot be.
    pub config: Result<EncodedConfig, String>,
    /// `{}` encoded against the schema: an agent without a `plugin` block.
    pub empty_config: Result<EncodedConfig, String>,
    pub shapes: Shapes,
}

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

/// Why no task can be placed on the driver on this node.
#[derive(Clone, Debug)]
pub struct NotPlaceable {
    /// The health is a known state (UNDETECTED, UNHEALTHY): the node's doing, not judged here.
    pub node: bool,
    pub why: String,
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
        let source = shapes.flag().unwrap_or("none");
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
        self.not_placeable().map(|n| n.why)
    }

    /// Why Nomad would place no task on this driver here, and whose doing that is: a known
    /// health other than HEALTHY (UNDETECTED, UNHEALTHY) is the driver's report on this node,
    /// the machine's doing; a health that is no HealthState is the plugin's.
    pub fn not_placeable(&self) -> Option<NotPlaceable> {
        use drivers::fingerprint_response::HealthState;
        let f = self.fingerprint.as_ref()?;
        if f.health == HealthState::Healthy as i32 {
            return None;
        }
        let description = if f.health_description.is_empty() {
            "no health description".to_string()
        } else {
            format!("{:?}", f.health_description)
        };
        Some(NotPlaceable {
            node: HealthState::try_from(f.health).is_ok(),
            why: format!(
                "the driver fingerprints {} on this node ({description}): Nomad places no task on a driver that is not detected and healthy (scheduler/feasible/feasible.go, DriverChecker), so no task can be judged here",
                health_name(f.health),
            ),
        })
    }
}
