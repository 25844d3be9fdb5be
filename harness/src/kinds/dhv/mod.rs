//! The dynamic host volume suite: validate the user's options, probe the plugin's version; the
//! run itself is [`crate::run::run_suite`]'s. [`plugin_dir`] runs it for every plugin of a
//! directory.

pub mod plugin_dir;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nomad_conform_reports::model::Subject;

use crate::clauses::ClauseSet;
use crate::cli::DhvArgs;
use crate::command_line::CommandLine;
use crate::error::HarnessError;
use crate::plugins::dhv::response::{VersionField, version_field};
use crate::plugins::dhv::{EnvPolicy, Parameters, Plugin, fingerprint_env};
use crate::profile::Profile;
use crate::run::{Prepared, RunStart, Selection, Suite, SuiteOptions};
use crate::sizes::parse_bytes;
use crate::steps::dhv::{DhvConfig, DhvWorld};

pub const KIND: &str = "dhv";

/// The least `--capture-limit`: enough for any answer a plugin means to give.
const MIN_CAPTURE_LIMIT: i64 = 1 << 10;
/// The most `--capture-limit`: each call (each of up to `--jobs` at once) may hold this much
/// of the plugin's output (in a temporary file past [`crate::capture::SPILL_AT`]).
const MAX_CAPTURE_LIMIT: i64 = 1 << 30;

/// Check that `path` names an executable file; return its absolute path, with symlinks kept:
/// Nomad runs `filepath.Join(<plugin_dir>, <name>)` (client/hostvolumemanager/
/// host_volume_plugin.go), so argv[0] and DHV_PLUGIN_DIR are the configured directory's even
/// when the plugin is a symlink to a file elsewhere (a plugin reading its configuration from
/// beside itself, as the docs suggest, reads it there).
pub fn check_plugin(path: &Path) -> Result<PathBuf, HarnessError> {
    use crate::executable::Unrunnable;
    let shown = path.display();
    crate::executable::check(path).map_err(|why| {
        HarnessError::Usage(match why {
            Unrunnable::Missing => format!("plugin {shown}: no such file"),
            Unrunnable::Directory => format!("plugin {shown} is a directory, not an executable"),
            Unrunnable::NotExecutable => format!(
                "plugin {shown} is not executable (Nomad only lists files with an execute bit; try chmod +x)"
            ),
            other => format!("plugin {shown} {other}"),
        })
    })?;
    let absolute = std::path::absolute(path)
        .map_err(|e| HarnessError::Usage(format!("plugin {shown}: {}", io_reason(&e))))?;
    let absolute = crate::plugins::dhv::paths::lexically_clean(&absolute);
    crate::utf8_paths::require(
        "plugin",
        &absolute,
        "Nomad names a host volume plugin by its file name (plugin_id, a JSON string) and gives \
         it its directory as DHV_PLUGIN_DIR",
    )?;
    Ok(absolute)
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

fn parameters(flag: &str, json: &str) -> Result<Parameters, HarnessError> {
    Parameters::parse(json).map_err(|e| HarnessError::Usage(format!("{flag}: {e}")))
}

/// The DHV suite run against `plugin` with these command-line arguments.
pub struct DhvSuite<'a> {
    pub args: &'a DhvArgs,
    /// The plugin: the one argument, or one plugin of `--plugin-dir`.
    pub plugin: &'a Path,
    pub common: &'a SuiteOptions,
}

impl DhvSuite<'_> {
    /// Validate everything the user gave, before anything runs.
    pub fn config(&self, profile: &Profile) -> Result<DhvConfig, HarnessError> {
        let args = self.args;
        let path = check_plugin(self.plugin)?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        let params = match &args.parameters {
            Some(j) => parameters("--parameters", j)?,
            None => Parameters::Null,
        };
        let failing = args
            .failing_parameters
            .as_deref()
            .map(|j| parameters("--failing-parameters", j))
            .transpose()?;
        let min = args
            .capacity_min
            .as_deref()
            .map(|s| parse_bytes("--capacity-min", s))
            .transpose()?;
        let max = args
            .capacity_max
            .as_deref()
            .map(|s| parse_bytes("--capacity-max", s))
            .transpose()?;
        let capacity = match (min, max) {
            (None, None) => None,
            (min, max) => {
                let (min, max) = (min.unwrap_or(0), max.unwrap_or(0));
                if max < min {
                    return Err(HarnessError::Usage(format!(
                        "--capacity-max ({max}) must be at least --capacity-min ({min}): Nomad refuses such a volume"
                    )));
                }
                Some((min, max))
            }
        };
        let capture_limit = parse_bytes("--capture-limit", &args.capture_limit)?;
        if !(MIN_CAPTURE_LIMIT..=MAX_CAPTURE_LIMIT).contains(&capture_limit) {
            return Err(HarnessError::Usage(format!(
                "--capture-limit {:?} is {capture_limit} bytes: it must be from 1KiB ({MIN_CAPTURE_LIMIT}) to 1GiB ({MAX_CAPTURE_LIMIT}), what every call may cost the harness's memory",
                args.capture_limit
            )));
        }
        let capture_limit = usize::try_from(capture_limit).unwrap_or(usize::MAX);
        Ok(DhvConfig {
            plugin: Arc::new(Plugin {
                path,
                dir,
                inherit_env: args.inherit_env,
                capture_limit,
                output_close_grace: profile.harness.output_close_grace,
                stray_settle: profile.harness.stray_settle,
                agent: Some(PathBuf::from("/proc/self/exe")),
                reports_dir: std::env::temp_dir(),
                gate: Default::default(),
                calls: Default::default(),
            }),
            parameters: params,
            failing_parameters: failing,
            capacity,
            property_cases: args.property_cases,
        })
    }

    /// The command that reruns the suite against the same plugin with the same inputs
    /// (parameters holding a secret are read from a variable: see [`CommandLine`]).
    fn rerun_prefix(&self, plugin: &Path) -> CommandLine {
        let (args, common) = (self.args, self.common);
        let mut line = CommandLine::new(&["nomad-conform", KIND, &plugin.display().to_string()]);
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        line.flag("--parameters", args.parameters.as_deref())
            .flag("--failing-parameters", args.failing_parameters.as_deref())
            .flag("--capacity-min", args.capacity_min.as_deref())
            .flag("--capacity-max", args.capacity_max.as_deref())
            .flag("--volumes-dir", path(&args.volumes_dir).as_deref())
            .flag("--profile", path(&common.profile).as_deref())
            .flag("--specs", path(&common.specs).as_deref());
        if args.inherit_env {
            line.word("--inherit-env");
        }
        line
    }
}

impl Suite for DhvSuite<'_> {
    const KIND: &'static str = KIND;
    type World = DhvWorld;

    fn scratch_parent(&self) -> Result<PathBuf, HarnessError> {
        let dir = match &self.args.volumes_dir {
            Some(d) if d.is_dir() => d.clone(),
            Some(d) => {
                return Err(HarnessError::Usage(format!(
                    "--volumes-dir {} is not a directory",
                    d.display()
                )));
            }
            None => std::env::temp_dir(),
        };
        let what = match &self.args.volumes_dir {
            Some(_) => "--volumes-dir",
            None => "the temporary directory (TMPDIR)",
        };
        crate::utf8_paths::require(
            what,
            &dir,
            "the volumes directories made in it are given to the plugin as DHV_VOLUMES_DIR",
        )?;
        Ok(dir)
    }

    async fn prepare(
        &self,
        start: &RunStart,
        _clauses: &ClauseSet,
        _selection: &mut Selection,
    ) -> Result<Prepared<DhvConfig>, HarnessError> {
        let mut config = self.config(&start.profile)?;
        // The stand-in for the agent writes its report of each call into the run's directory.
        let reports = start.scratch.join("agent");
        std::fs::create_dir_all(&reports).map_err(|e| {
            HarnessError::Internal(format!("cannot create {}: {e}", reports.display()))
        })?;
        if let Some(p) = Arc::get_mut(&mut config.plugin) {
            p.reports_dir = reports;
        }
        let version = probe_version(&config.plugin, &start.profile, &start.scratch).await;
        let secrets: Vec<String> = std::iter::once(&config.parameters)
            .chain(config.failing_parameters.as_ref())
            .flat_map(|p| p.secret_values())
            .map(str::to_string)
            .collect();
        // Before any command line is written: the rerun line names them by a variable.
        secrets.iter().for_each(|s| crate::secrets::register(s));
        let plugin_path = config.plugin.path.display().to_string();
        Ok(Prepared {
            about: format!(
                "{plugin_path} (version {})",
                version.as_deref().unwrap_or("unknown")
            ),
            subject: Subject {
                plugin: plugin_path,
                version,
                details: Default::default(),
            },
            rerun_prefix: self.rerun_prefix(&config.plugin.path),
            config,
            jobs: None,
            secrets,
        })
    }
}

async fn probe_version(plugin: &Plugin, profile: &Profile, scratch: &Path) -> Option<String> {
    let cwd = scratch.join("probe");
    std::fs::create_dir_all(&cwd).ok()?;
    let call = plugin
        .invoke(
            "fingerprint",
            "fingerprint",
            fingerprint_env(),
            EnvPolicy::Configured,
            &cwd,
            profile.dhv.fingerprint_kill_deadline(),
        )
        .await;
    let _ = crate::safe_remove::remove_tree(&cwd);
    match version_field(&call.stdout_json().ok()?) {
        VersionField::Present(v) if call.succeeded() => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn plugin_checks() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        assert!(
            check_plugin(&f)
                .unwrap_err()
                .to_string()
                .contains("not executable")
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check_plugin(&f).unwrap().is_absolute());
        // A symlink is run as the link, in the directory it lies in, as Nomad runs it.
        let sub = dir.path().join("impl");
        std::fs::create_dir(&sub).unwrap();
        std::fs::rename(&f, sub.join("p")).unwrap();
        std::os::unix::fs::symlink("impl/p", &f).unwrap();
        let linked = check_plugin(&dir.path().join("./impl/../p")).unwrap();
        assert_eq!(
            linked,
            crate::plugins::dhv::paths::lexically_clean(&std::path::absolute(&f).unwrap())
        );
        assert_eq!(linked.file_name().unwrap(), "p");
        assert!(
            check_plugin(dir.path())
                .unwrap_err()
                .to_string()
                .contains("directory")
        );
        assert!(
            check_plugin(&dir.path().join("nope"))
                .unwrap_err()
                .to_string()
                .contains("no such file")
        );
    }

    #[test]
    fn options_are_validated() {
        use clap::Parser as _;
        let profile = Profile::load(None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        let common = SuiteOptions::default();
        let config = |extra: &[&str]| {
            let mut argv = vec!["nomad-conform", "dhv", f.to_str().unwrap()];
            argv.extend_from_slice(extra);
            let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
            let crate::cli::Command::Dhv(args) = cli.command else {
                unreachable!()
            };
            DhvSuite {
                args: &args,
                plugin: &f,
                common: &common,
            }
            .config(&profile)
        };
        assert!(config(&[]).is_ok());
        assert!(
            config(&["--parameters", "{"])
                .unwrap_err()
                .to_string()
                .contains("--parameters")
        );
        assert!(
            config(&["--capacity-min", "2MB", "--capacity-max", "1MB"])
                .unwrap_err()
                .to_string()
                .contains("at least")
        );
        assert_eq!(
            config(&["--capacity-max", "1MB"]).unwrap().capacity,
            Some((0, 1_000_000))
        );
        for limit in ["100", "0", "1EiB", "1025MiB"] {
            let e = config(&["--capture-limit", limit]).unwrap_err().to_string();
            assert!(e.contains("from 1KiB (1024) to 1GiB"), "{limit}: {e}");
        }
        assert!(config(&["--capture-limit", "1GiB"]).is_ok());
    }
}
