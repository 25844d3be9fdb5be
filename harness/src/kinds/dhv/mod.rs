//! The dynamic host volume suite: validate the user's options, probe the plugin's version, run.
//! [`plugin_dir`] runs it for every plugin of a directory.

pub mod plugin_dir;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use nomad_conform_reports::model::{RunRecord, Subject};

use crate::error::HarnessError;
use crate::plugins::dhv::response::{VersionField, version_field};
use crate::plugins::dhv::{EnvPolicy, Parameters, Plugin, fingerprint_env, quote};
use crate::profile::Profile;
use crate::recorder::RunStore;
use crate::run::{RunMeta, SuiteOptions, execute, finish_record, load_suite};
use crate::steps::dhv::DhvWorld;
use crate::world::RunCtx;

pub const KIND: &str = "dhv";

/// What the user asked for, as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct DhvOptions {
    pub plugin: PathBuf,
    pub volumes_dir: Option<PathBuf>,
    pub parameters: Option<String>,
    pub failing_parameters: Option<String>,
    pub capacity_min: Option<String>,
    pub capacity_max: Option<String>,
    pub inherit_env: bool,
    pub capture_limit: usize,
    pub property_cases: u32,
}

/// What the steps of a DHV run read.
#[derive(Debug)]
pub struct DhvConfig {
    pub plugin: Arc<Plugin>,
    /// DHV_PARAMETERS of every volume the suite creates (unless a clause varies it).
    pub parameters: Parameters,
    /// Parameters the plugin is known to refuse, to provoke a failed create.
    pub failing_parameters: Option<Parameters>,
    /// DHV_CAPACITY_MIN_BYTES / DHV_CAPACITY_MAX_BYTES; `None` sends 0 and 0 as Nomad does.
    pub capacity: Option<(i64, i64)>,
    pub property_cases: u32,
}

/// Check that `path` names an executable file; return its absolute path.
pub fn check_plugin(path: &Path) -> Result<PathBuf, HarnessError> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| HarnessError::Usage(format!("plugin {shown}: {}", io_reason(&e))))?;
    if meta.is_dir() {
        return Err(HarnessError::Usage(format!(
            "plugin {shown} is a directory, not an executable"
        )));
    }
    if meta.permissions().mode() & 0o111 == 0
        || nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_err()
    {
        return Err(HarnessError::Usage(format!(
            "plugin {shown} is not executable (Nomad only lists files with an execute bit; try chmod +x)"
        )));
    }
    path.canonicalize()
        .map_err(|e| HarnessError::Usage(format!("plugin {shown}: {}", io_reason(&e))))
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// A byte count as Nomad's CLI reads one ("50MB" is 50,000,000; "50MiB" is 52,428,800),
/// within int64.
pub fn parse_bytes(flag: &str, s: &str) -> Result<i64, HarnessError> {
    let n = s
        .trim()
        .parse::<bytesize::ByteSize>()
        .map_err(|e| HarnessError::Usage(format!("{flag} {s:?} is not a size: {e}")))?
        .as_u64();
    i64::try_from(n)
        .ok()
        .filter(|n| *n < i64::MAX)
        .ok_or_else(|| HarnessError::Usage(format!("{flag} {s:?} is larger than int64")))
}

fn parameters(flag: &str, json: &str) -> Result<Parameters, HarnessError> {
    Parameters::parse(json).map_err(|e| HarnessError::Usage(format!("{flag}: {e}")))
}

impl DhvOptions {
    /// Validate everything the user gave, before anything runs.
    pub fn config(&self, profile: &Profile) -> Result<DhvConfig, HarnessError> {
        let path = check_plugin(&self.plugin)?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        let params = match &self.parameters {
            Some(j) => parameters("--parameters", j)?,
            None => Parameters::Null,
        };
        let failing = self
            .failing_parameters
            .as_deref()
            .map(|j| parameters("--failing-parameters", j))
            .transpose()?;
        let min = self
            .capacity_min
            .as_deref()
            .map(|s| parse_bytes("--capacity-min", s))
            .transpose()?;
        let max = self
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
        if self.capture_limit < 1024 {
            return Err(HarnessError::Usage(
                "--capture-limit must be at least 1024 bytes".into(),
            ));
        }
        Ok(DhvConfig {
            plugin: Arc::new(Plugin {
                path,
                dir,
                inherit_env: self.inherit_env,
                capture_limit: self.capture_limit,
                output_close_grace: profile.harness.output_close_grace,
                stray_settle: profile.harness.stray_settle,
            }),
            parameters: params,
            failing_parameters: failing,
            capacity,
            property_cases: self.property_cases,
        })
    }

    /// The command that reruns the suite against the same plugin with the same inputs.
    fn rerun_prefix(&self, plugin: &Path, common: &SuiteOptions) -> String {
        let mut parts = vec![
            "nomad-conform".to_string(),
            KIND.into(),
            quote(&plugin.display().to_string()),
        ];
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                parts.push(name.into());
                parts.push(quote(&v));
            }
        };
        flag("--parameters", self.parameters.clone());
        flag("--failing-parameters", self.failing_parameters.clone());
        flag("--capacity-min", self.capacity_min.clone());
        flag("--capacity-max", self.capacity_max.clone());
        flag(
            "--volumes-dir",
            self.volumes_dir.as_ref().map(|p| p.display().to_string()),
        );
        flag("--profile", common.profile.clone());
        flag(
            "--specs",
            common.specs.as_ref().map(|p| p.display().to_string()),
        );
        if self.inherit_env {
            parts.push("--inherit-env".into());
        }
        parts.join(" ")
    }
}

/// Run the DHV suite. Returns the record; writing reports is the caller's business.
pub async fn run(common: &SuiteOptions, opts: &DhvOptions) -> Result<RunRecord, HarnessError> {
    let started_at = Utc::now();
    let profile = Profile::load(common.profile.as_deref())?;
    let config = opts.config(&profile)?;
    let (features, clauses, selection) = load_suite(KIND, common)?;

    let base = match &opts.volumes_dir {
        Some(d) if d.is_dir() => d.clone(),
        Some(d) => {
            return Err(HarnessError::Usage(format!(
                "--volumes-dir {} is not a directory",
                d.display()
            )));
        }
        None => std::env::temp_dir(),
    };
    let run_id = crate::run::new_run_id();
    let seed = crate::run::seed_or_random(common.seed);
    let scratch_base = crate::run::make_scratch_base(&base, &run_id)?;

    let version = probe_version(&config.plugin, &profile, &scratch_base).await;
    let store = RunStore::new(
        clauses,
        opts.rerun_prefix(&config.plugin.path, common),
        seed,
    );
    for params in std::iter::once(&config.parameters).chain(config.failing_parameters.as_ref()) {
        for value in params.secret_values() {
            store.add_secret(value);
        }
    }
    let plugin_path = config.plugin.path.display().to_string();
    let header = format!(
        "nomad-conform {KIND}: {plugin_path} (version {}), profile {}, seed {seed}, run {run_id}{}",
        version.as_deref().unwrap_or("unknown"),
        profile.name,
        common
            .shard
            .map(|s| format!(", shard {s}"))
            .unwrap_or_default()
    );
    let progress = crate::console::Progress::start(
        &store,
        &header,
        selection.run.len() + selection.skip.len(),
        common.output,
        common.strict,
    );
    let ctx = Arc::new(RunCtx {
        run_id,
        seed,
        profile,
        config,
        scratch_base: scratch_base.clone(),
        store,
    });
    let interrupted =
        execute::<DhvWorld>(ctx.clone(), features, &selection, common.jobs.max(1)).await;
    progress.finish();
    let cleanup = crate::ledger::remove_scratch(&scratch_base);
    for leak in &cleanup.leaked {
        eprintln!("warning: {leak}");
    }
    let meta = RunMeta {
        kind: KIND.into(),
        subject: Subject {
            plugin: plugin_path,
            version,
            details: Default::default(),
        },
        command_line: common.command_line.clone(),
        started_at,
        strict: common.strict,
        shard: common.shard,
    };
    Ok(finish_record(&ctx, meta, interrupted))
}

/// Fingerprint once, before the suite, to name the plugin's version in the report.
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
    let _ = std::fs::remove_dir_all(&cwd);
    match version_field(&call.stdout_json().ok()?) {
        VersionField::Present(v) if call.succeeded() => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_like_nomad() {
        assert_eq!(parse_bytes("f", "50MB").unwrap(), 50_000_000);
        assert_eq!(parse_bytes("f", "50MiB").unwrap(), 52_428_800);
        assert_eq!(parse_bytes("f", "100").unwrap(), 100);
        assert!(parse_bytes("f", "lots").is_err());
        assert!(
            parse_bytes("f", "20EiB")
                .unwrap_err()
                .to_string()
                .contains("int64")
        );
    }

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
        let profile = Profile::load(None).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        let base = DhvOptions {
            plugin: f,
            capture_limit: 1 << 20,
            ..Default::default()
        };
        assert!(base.config(&profile).is_ok());
        let bad = DhvOptions {
            parameters: Some("{".into()),
            ..base.clone()
        };
        assert!(
            bad.config(&profile)
                .unwrap_err()
                .to_string()
                .contains("--parameters")
        );
        let bad = DhvOptions {
            capacity_min: Some("2MB".into()),
            capacity_max: Some("1MB".into()),
            ..base.clone()
        };
        assert!(
            bad.config(&profile)
                .unwrap_err()
                .to_string()
                .contains("at least")
        );
        let only_max = DhvOptions {
            capacity_max: Some("1MB".into()),
            ..base.clone()
        };
        assert_eq!(
            only_max.config(&profile).unwrap().capacity,
            Some((0, 1_000_000))
        );
    }
}
