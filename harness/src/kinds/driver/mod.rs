//! The task driver suite: read the plugin's configuration and task shapes, probe the plugin
//! once as Nomad loads it (what it is, its schemas, its capabilities), skip what it does not
//! offer; the run itself is [`crate::run::run_suite`]'s, and at its end no task of the run is
//! left running.
//!
//! Modules: `probe` (the one load before the run). The task shapes and what the steps read are
//! the steps' (`crate::steps::driver`).

pub mod probe;

use std::path::PathBuf;

use nomad_conform_reports::model::Subject;

use crate::clauses::ClauseSet;
use crate::cli::DriverArgs;
use crate::command_line::CommandLine;
use crate::error::HarnessError;
use crate::plugins::driver::{HostTimings, LaunchSpec};
use crate::run::{Prepared, RunStart, Selection, Suite, SuiteOptions};
use crate::steps::driver::tasks::{Placeholders, Shapes};
use crate::steps::driver::{DriverConfig, DriverWorld, PluginConfigSource};
use crate::world::RunCtx;

pub const KIND: &str = "driver";

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

/// The task driver suite run with these command-line arguments.
pub struct DriverSuite<'a> {
    pub args: &'a DriverArgs,
    pub common: &'a SuiteOptions,
}

impl DriverSuite<'_> {
    fn plugin_args(&self) -> Result<Vec<String>, HarnessError> {
        match &self.args.plugin_args {
            None => Ok(Vec::new()),
            Some(a) => crate::shell::split_words("--plugin-args", a).map_err(HarnessError::Usage),
        }
    }

    fn config_source(&self) -> Result<PluginConfigSource, HarnessError> {
        let Some(p) = &self.args.plugin_config else {
            return Ok(PluginConfigSource::Hcl(String::new()));
        };
        let text = std::fs::read_to_string(p)
            .map_err(|e| HarnessError::Usage(format!("--plugin-config {}: {e}", p.display())))?;
        // Syntax first, before the plugin is started: a file that is not HCL (or JSON) is the
        // user's to fix, whatever the plugin's schema says.
        let shown = p.display();
        Ok(if p.extension().is_some_and(|e| e == "json") {
            if !text.trim().is_empty() {
                match serde_json::from_str::<serde_json::Value>(&text) {
                    Ok(v) if v.is_object() => {}
                    Ok(_) => {
                        return Err(HarnessError::Usage(format!(
                            "--plugin-config {shown}: not a JSON object (the body of the agent's plugin \"...\" {{ config {{ }} }} block)"
                        )));
                    }
                    Err(e) => {
                        return Err(HarnessError::Usage(format!(
                            "--plugin-config {shown} is not JSON: {e}"
                        )));
                    }
                }
            }
            PluginConfigSource::Json(text)
        } else {
            if let Err(e) = hcl::parse(&text) {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or_default().to_string();
                return Err(HarnessError::Usage(format!(
                    "--plugin-config {shown} is not HCL: {first}"
                )));
            }
            PluginConfigSource::Hcl(text)
        })
    }

    fn rerun_prefix(&self) -> CommandLine {
        let (args, common) = (self.args, self.common);
        let mut line =
            CommandLine::new(&["nomad-conform", KIND, &args.plugin.display().to_string()]);
        let mut flag = |name: &str, value: Option<String>| {
            line.flag(name, value.as_deref());
        };
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        flag("--plugin-args", args.plugin_args.clone());
        flag("--plugin-config", path(&args.plugin_config));
        flag("--tasks", path(&args.tasks));
        flag("--task-command", args.task_command.clone());
        flag("--chroot-env", args.chroot_env.clone());
        flag(
            "--profile",
            common.profile.as_ref().map(|p| p.display().to_string()),
        );
        flag("--specs", path(&common.specs));
        line
    }
}

impl Suite for DriverSuite<'_> {
    const KIND: &'static str = KIND;
    type World = DriverWorld;

    async fn prepare(
        &self,
        start: &RunStart,
        clauses: &ClauseSet,
        selection: &mut Selection,
    ) -> Result<Prepared<DriverConfig>, HarnessError> {
        let opts = self.args;
        let profile = &start.profile;
        if let Some(a) = &opts.plugin_args {
            crate::secrets::register_from_command(a);
        }
        crate::executable::check(&opts.plugin).map_err(|why| {
            HarnessError::Usage(format!("the driver plugin {} {why}", opts.plugin.display()))
        })?;
        let config_source = self.config_source()?;
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
        let mut launch = LaunchSpec::new(&plugin, self.plugin_args()?);
        launch.start_timeout = profile.driver.start_timeout;
        let timings = HostTimings {
            rpc: profile.driver.rpc_deadline,
            task_call: profile.driver.task_call_deadline,
            driver_shutdown: profile.driver.shutdown_timeout,
            kill_grace: profile.driver.shutdown_timeout,
            ..HostTimings::default()
        };
        // Plugins make their sockets in TMPDIR: keep them short and in the run's own directory.
        let sockets = start.scratch.join("s");
        std::fs::create_dir_all(&sockets).map_err(|e| {
            HarnessError::Internal(format!("failed to create {}: {e}", sockets.display()))
        })?;
        launch.cwd = Some(start.scratch.clone());
        launch
            .extra_env
            .push(("TMPDIR".into(), sockets.display().to_string()));

        let probe = probe::probe(
            &launch,
            &timings,
            &config_source,
            &probe::ProbeSetup {
                scratch: &start.scratch,
                run_id: &start.run_id,
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
        // The plugin's schema is sound but the user's configuration does not fit it: Nomad
        // would refuse to load the plugin with it. That is the configuration's fault, said
        // before any clause (a schema the plugin got wrong stays the clauses' to judge).
        if let (Ok(_), Err(e)) = (&probe.config_schema, &config) {
            return Err(HarnessError::Usage(match &opts.plugin_config {
                Some(p) => format!("--plugin-config {}: {e}", p.display()),
                None => format!(
                    "the plugin needs a configuration (give the body of the agent's plugin block with --plugin-config FILE): {e}"
                ),
            }));
        }
        let empty_config = PluginConfigSource::Hcl(String::new())
            .encode(&probe.config_schema, probe.config_schema_nil);
        let available: Vec<String> = shapes.names(&Placeholders::default()).unwrap_or_default();
        for (key, reason) in probe::skips(clauses, selection, &probe, &available) {
            selection.skip(&key, reason);
        }
        let about = format!(
            "{} {} ({})",
            probe.name().unwrap_or("(no name)"),
            probe.version().unwrap_or("(no version)"),
            plugin.display(),
        );
        let subject = Subject {
            plugin: plugin.display().to_string(),
            version: probe.version().map(str::to_string),
            details: probe.details(&shapes, &available),
        };
        Ok(Prepared {
            config: DriverConfig {
                launch,
                timings,
                probe,
                config,
                empty_config,
                shapes,
            },
            subject,
            about,
            rerun_prefix: self.rerun_prefix(),
            jobs: None,
            secrets: Vec::new(),
        })
    }

    async fn finish(&self, run: &RunCtx<DriverConfig>) {
        // Whatever the clauses did, nothing of the run's tasks stays running.
        let left =
            crate::plugins::driver::taskconfig::kill_marked(&format!("{}/", run.run_id)).await;
        for p in &left {
            eprintln!(
                "{}",
                crate::console::shown(&format!(
                    "warning: a task process of this run was still running at its end: {p} (killed)"
                ))
            );
        }
    }
}
