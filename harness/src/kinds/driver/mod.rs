//! The task driver suite: read the plugin's configuration and task shapes, probe the plugin
//! once as Nomad loads it (what it is, its schemas, its capabilities), skip what it does not
//! offer, run; and whatever happened, leave no plugin or task process behind.
//!
//! Modules: `tasks` (the task shapes), `probe` (the one load before the run).

pub mod probe;
pub mod tasks;

use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use nomad_conform_hclspec::{
    SpecTree, Value, decode_hcl, decode_json_str, encode_cty, encode_plain,
};
use nomad_conform_reports::model::{RunRecord, Subject};

use crate::error::HarnessError;
use crate::plugins::dhv::quote;
use crate::plugins::driver::{HostTimings, LaunchSpec};
use crate::profile::Profile;
use crate::recorder::RunStore;
use crate::run::{RunMeta, SuiteOptions, execute, finish_record, load_suite};
use crate::steps::driver::DriverWorld;
use crate::world::RunCtx;

pub use probe::DriverProbe;
pub use tasks::Shapes;

pub const KIND: &str = "driver";

/// What the user asked for, as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct DriverOptions {
    pub plugin: PathBuf,
    pub plugin_args: Option<String>,
    pub plugin_config: Option<PathBuf>,
    pub tasks: Option<PathBuf>,
    pub task_command: Option<String>,
    /// `--chroot-env SRC[:DST],...`.
    pub chroot_env: Option<String>,
}

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
        match self {
            PluginConfigSource::Hcl(t) => decode_hcl(spec, t),
            PluginConfigSource::Json(t) => decode_json_str(spec, t),
        }
        .map_err(|e| {
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

/// `SRC[:DST],...`: absolute host paths, each mapped to itself unless a destination is given.
pub fn parse_chroot_env(text: &str) -> Result<Vec<(PathBuf, PathBuf)>, HarnessError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (src, dst) = item.split_once(':').unwrap_or((item, item));
        if !src.starts_with('/') || !dst.starts_with('/') {
            return Err(HarnessError::Usage(format!(
                "--chroot-env {text:?}: {item:?} is not SRC[:DST] with absolute paths"
            )));
        }
        out.push((PathBuf::from(src), PathBuf::from(dst)));
    }
    if out.is_empty() {
        return Err(HarnessError::Usage(format!(
            "--chroot-env {text:?}: give at least one path"
        )));
    }
    Ok(out)
}

impl DriverOptions {
    fn plugin_args(&self) -> Result<Vec<String>, HarnessError> {
        match &self.plugin_args {
            None => Ok(Vec::new()),
            Some(a) => shlex::split(a).ok_or_else(|| {
                HarnessError::Usage(format!("--plugin-args {a:?}: not a shell-quoted list"))
            }),
        }
    }

    fn config_source(&self) -> Result<PluginConfigSource, HarnessError> {
        let Some(p) = &self.plugin_config else {
            return Ok(PluginConfigSource::Hcl(String::new()));
        };
        let text = std::fs::read_to_string(p)
            .map_err(|e| HarnessError::Usage(format!("--plugin-config {}: {e}", p.display())))?;
        Ok(if p.extension().is_some_and(|e| e == "json") {
            PluginConfigSource::Json(text)
        } else {
            PluginConfigSource::Hcl(text)
        })
    }

    fn rerun_prefix(&self, common: &SuiteOptions) -> String {
        let mut parts = vec![
            "nomad-conform".to_string(),
            KIND.into(),
            quote(&self.plugin.display().to_string()),
        ];
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                parts.push(name.into());
                parts.push(quote(&v));
            }
        };
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        flag("--plugin-args", self.plugin_args.clone());
        flag("--plugin-config", path(&self.plugin_config));
        flag("--tasks", path(&self.tasks));
        flag("--task-command", self.task_command.clone());
        flag("--chroot-env", self.chroot_env.clone());
        flag("--profile", common.profile.clone());
        flag("--specs", path(&common.specs));
        parts.join(" ")
    }
}

/// Run the driver suite. Returns the record; writing reports is the caller's business.
pub async fn run(common: &SuiteOptions, opts: &DriverOptions) -> Result<RunRecord, HarnessError> {
    let started_at = Utc::now();
    if !opts.plugin.is_file() {
        return Err(HarnessError::Usage(format!(
            "{} is not a file: give the driver plugin binary",
            opts.plugin.display()
        )));
    }
    let profile = Profile::load(common.profile.as_deref())?;
    let (features, clauses, mut selection) = load_suite(KIND, common)?;
    let config_source = opts.config_source()?;
    let chroot_env = opts
        .chroot_env
        .as_deref()
        .map(parse_chroot_env)
        .transpose()?;
    let shapes = Shapes::load(opts.tasks.as_deref(), opts.task_command.as_deref())
        .map_err(HarnessError::Usage)?;
    let plugin = opts
        .plugin
        .canonicalize()
        .map_err(|e| HarnessError::Usage(format!("{}: {e}", opts.plugin.display())))?;
    let mut launch = LaunchSpec::new(&plugin, opts.plugin_args()?);
    launch.start_timeout = profile.driver.start_timeout;
    let timings = HostTimings {
        rpc: profile.driver.rpc_deadline,
        task_call: profile.driver.task_call_deadline,
        driver_shutdown: profile.driver.shutdown_timeout,
        kill_grace: profile.driver.shutdown_timeout,
        ..HostTimings::default()
    };

    let run_id = crate::run::new_run_id();
    let seed = crate::run::seed_or_random(common.seed);
    let scratch_base = crate::run::make_scratch_base(&std::env::temp_dir(), &run_id)?;
    // Plugins make their sockets in TMPDIR: keep them short and in the run's own directory.
    let sockets = scratch_base.join("s");
    std::fs::create_dir_all(&sockets).map_err(|e| {
        HarnessError::Internal(format!("failed to create {}: {e}", sockets.display()))
    })?;
    launch.cwd = Some(scratch_base.clone());
    launch
        .extra_env
        .push(("TMPDIR".into(), sockets.display().to_string()));

    let probe = probe::probe(
        &launch,
        &timings,
        &config_source,
        &probe::ProbeSetup {
            scratch: &scratch_base,
            run_id: &run_id,
            shapes: &shapes,
            fingerprint_deadline: profile.driver.fingerprint_deadline,
            chroot_env,
        },
    )
    .await;
    if probe.config_schema_nil && !config_source.is_empty() {
        return Err(HarnessError::Usage(format!(
            "--plugin-config: {} declares no ConfigSchema, and Nomad refuses any configuration for such a plugin (\"configuration not allowed but config passed\"); leave --plugin-config out",
            plugin.display()
        )));
    }
    let config = config_source.encode(&probe.config_schema, probe.config_schema_nil);
    let empty_config = PluginConfigSource::Hcl(String::new())
        .encode(&probe.config_schema, probe.config_schema_nil);
    let available: Vec<String> = shapes
        .names(&tasks::Placeholders::default())
        .unwrap_or_default();
    for (key, reason) in probe::skips(&clauses, &selection, &probe, &available) {
        selection.skip(&key, reason);
    }

    let store = RunStore::new(clauses, opts.rerun_prefix(common), seed);
    let header = format!(
        "nomad-conform {KIND}: {} {} ({}), profile {}, seed {seed}, run {run_id}",
        probe.name().unwrap_or("(no name)"),
        probe.version().unwrap_or("(no version)"),
        plugin.display(),
        profile.name,
    );
    let progress = crate::console::Progress::start(
        &store,
        &header,
        selection.run.len() + selection.skip.len(),
        common.output,
        common.strict,
    );
    let subject = Subject {
        plugin: plugin.display().to_string(),
        version: probe.version().map(str::to_string),
        details: probe.details(&shapes, &available),
    };
    let ctx = Arc::new(RunCtx {
        run_id: run_id.clone(),
        seed,
        profile,
        config: DriverConfig {
            launch,
            timings,
            probe,
            config,
            empty_config,
            shapes,
        },
        scratch_base: scratch_base.clone(),
        store,
    });
    let interrupted =
        execute::<DriverWorld>(ctx.clone(), features, &selection, common.jobs.max(1)).await;
    progress.finish();
    // Whatever the clauses did, nothing of the run's tasks stays running.
    let left = crate::plugins::driver::taskconfig::kill_marked(&format!("{run_id}/")).await;
    for p in &left {
        eprintln!("warning: a task process of this run was still running at its end: {p} (killed)");
    }
    crate::process::kill_all_live_groups();
    for p in crate::process::processes_in(&scratch_base) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        eprintln!(
            "warning: a process was still running in this run's directory at its end: {p} (killed)"
        );
    }
    let cleanup = crate::ledger::remove_scratch(&scratch_base);
    for leak in &cleanup.leaked {
        eprintln!("warning: {leak}");
    }
    let meta = RunMeta {
        kind: KIND.into(),
        subject,
        command_line: common.command_line.clone(),
        started_at,
        strict: common.strict,
        shard: common.shard,
    };
    Ok(finish_record(&ctx, meta, interrupted))
}
