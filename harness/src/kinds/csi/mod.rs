//! The CSI suite: connect to (or launch) the plugin, probe its capabilities once, skip what it
//! does not advertise or what its plugin type does not serve, run.
//!
//! Modules: `probe` (Nomad's first fingerprint), `skips` (which clauses cannot be judged, and
//! why), `budget` (the node's attachment budget), `volumes` (volumes a node-only run claims).

pub mod budget;
pub mod probe;
pub mod skips;
pub mod volumes;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use nomad_conform_reports::model::{RunRecord, Subject};

use crate::cli::PluginType;
use crate::error::HarnessError;
use crate::plugins::csi::launch::Launcher;
use crate::plugins::csi::{Connection, socket_path};
use crate::plugins::dhv::quote;
use crate::profile::Profile;
use crate::recorder::RunStore;
use crate::run::{RunMeta, SuiteOptions, execute, finish_record, load_suite};
use crate::steps::csi::CsiWorld;
use crate::world::RunCtx;

pub const KIND: &str = "csi";
/// Nomad dials the plugin socket with a 1-second timeout.
const DIAL_TIMEOUT: Duration = Duration::from_secs(1);

/// What the user asked for, as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct CsiOptions {
    pub endpoint: Option<String>,
    pub controller_endpoint: Option<String>,
    pub launch: Option<String>,
    /// `--plugin-type`; `None`: monolith, or controller with only `--controller-endpoint`.
    pub plugin_type: Option<PluginType>,
    /// `--volume ID[,CONTEXT]`: what a node-only run claims.
    pub volumes: Vec<String>,
    /// `--node-id`: where a controller-only run publishes.
    pub node_id: Option<String>,
    pub mount_dir: Option<PathBuf>,
    pub test_volume_size: Option<String>,
    pub volume_parameters: Option<PathBuf>,
    pub snapshot_parameters: Option<PathBuf>,
    pub secrets: Option<PathBuf>,
    pub mutable_parameters: Option<String>,
    pub idempotency_count: u32,
}

pub use probe::Capabilities;

/// What the steps of a CSI run read.
#[derive(Debug)]
pub struct CsiConfig {
    pub controller: Arc<Connection>,
    pub node: Arc<Connection>,
    pub launcher: Option<Arc<Launcher>>,
    pub caps: Capabilities,
    pub plugin_type: PluginType,
    /// The node ID Nomad would send to the controller: from the node plugin's NodeGetInfo, or
    /// `--node-id` for a controller-only run. Empty when unknown.
    pub node_id: String,
    /// Whether the node service was probed, so an empty `node_id` is the plugin's answer.
    pub node_probed: bool,
    pub max_volumes_per_node: i64,
    /// The node's attachment budget (none when the node sets no limit).
    pub attachments: Option<budget::AttachmentBudget>,
    /// What a node-only run claims instead of creating volumes.
    pub user_volumes: Option<volumes::VolumePool>,
    pub volume_size: i64,
    pub volume_parameters: HashMap<String, String>,
    pub snapshot_parameters: HashMap<String, String>,
    pub secrets: HashMap<String, String>,
    pub mutable_parameters: Option<HashMap<String, String>>,
    pub idempotency_count: u32,
    /// Where Nomad's staging and per-allocation directories are made (stage_publish_base_dir);
    /// `None`: in each clause's scratch directory.
    pub mount_dir: Option<PathBuf>,
}

/// A JSON object of strings from a file.
fn string_map(flag: &str, path: &Path) -> Result<HashMap<String, String>, HarnessError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| HarnessError::Usage(format!("{flag} {}: {e}", path.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        HarnessError::Usage(format!(
            "{flag} {}: expected a JSON object of strings: {e}",
            path.display()
        ))
    })
}

impl CsiOptions {
    /// The plugin type the run treats the plugin as.
    pub fn plugin_type(&self) -> PluginType {
        match self.plugin_type {
            Some(t) => t,
            None if self.controller_endpoint.is_some() && self.endpoint.is_none() => {
                PluginType::Controller
            }
            None => PluginType::Monolith,
        }
    }

    fn validate(&self) -> Result<(), HarnessError> {
        let usage = |m: &str| Err(HarnessError::Usage(m.into()));
        let plugin_type = self.plugin_type();
        match (&self.endpoint, &self.controller_endpoint, &self.launch) {
            (None, None, None) => {
                return usage(
                    "give the plugin's socket with --endpoint unix:///PATH (or --controller-endpoint for a controller plugin), or a command to start it with --launch",
                );
            }
            (Some(_), _, Some(_)) => return usage("--endpoint and --launch exclude each other"),
            (_, Some(_), Some(_)) => {
                return usage("--controller-endpoint goes with --endpoint, not --launch");
            }
            _ => {}
        }
        if self.idempotency_count == 0 {
            return usage("--idempotency-count must be at least 1");
        }
        match plugin_type {
            PluginType::Node if self.controller_endpoint.is_some() => usage(
                "--plugin-type node: a node plugin has no controller endpoint (drop --controller-endpoint)",
            ),
            PluginType::Controller
                if self.endpoint.is_some() && self.controller_endpoint.is_some() =>
            {
                usage(
                    "--plugin-type controller takes one socket: --controller-endpoint (or --endpoint), not both",
                )
            }
            PluginType::Monolith
                if self.controller_endpoint.is_some() && self.endpoint.is_none() =>
            {
                usage(
                    "--controller-endpoint alone runs a controller plugin: add --endpoint for the node plugin, or use --plugin-type controller",
                )
            }
            PluginType::Node | PluginType::Controller | PluginType::Monolith => {
                if !self.volumes.is_empty() && plugin_type != PluginType::Node {
                    return usage(
                        "--volume is for node-only runs (--plugin-type node): for controller and monolith plugins the suite creates its own volumes",
                    );
                }
                if self.node_id.is_some() && plugin_type != PluginType::Controller {
                    return usage(
                        "--node-id is for controller-only runs (--plugin-type controller): otherwise the node plugin's NodeGetInfo gives it",
                    );
                }
                Ok(())
            }
        }
    }

    fn rerun_prefix(&self, common: &SuiteOptions) -> String {
        let mut parts = vec!["nomad-conform".to_string(), KIND.into()];
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                parts.push(name.into());
                parts.push(quote(&v));
            }
        };
        flag("--endpoint", self.endpoint.clone());
        flag("--controller-endpoint", self.controller_endpoint.clone());
        flag("--launch", self.launch.clone());
        flag(
            "--plugin-type",
            self.plugin_type.map(|t| t.as_str().to_string()),
        );
        for v in &self.volumes {
            flag("--volume", Some(v.clone()));
        }
        flag("--node-id", self.node_id.clone());
        flag("--test-volume-size", self.test_volume_size.clone());
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        flag("--volume-parameters", path(&self.volume_parameters));
        flag("--snapshot-parameters", path(&self.snapshot_parameters));
        flag("--secrets", path(&self.secrets));
        flag("--mutable-parameters", self.mutable_parameters.clone());
        flag("--mount-dir", path(&self.mount_dir));
        flag("--profile", common.profile.clone());
        flag(
            "--specs",
            common.specs.as_ref().map(|p| p.display().to_string()),
        );
        parts.join(" ")
    }
}

/// Run the CSI suite. Returns the record; writing reports is the caller's business.
pub async fn run(common: &SuiteOptions, opts: &CsiOptions) -> Result<RunRecord, HarnessError> {
    let started_at = Utc::now();
    opts.validate()?;
    let profile = Profile::load(common.profile.as_deref())?;
    let (features, clauses, mut selection) = load_suite(KIND, common)?;
    let volume_size = match &opts.test_volume_size {
        Some(s) => crate::kinds::dhv::parse_bytes("--test-volume-size", s)?,
        None => 1 << 30,
    };
    let volume_parameters = opts
        .volume_parameters
        .as_deref()
        .map(|p| string_map("--volume-parameters", p))
        .transpose()?
        .unwrap_or_default();
    let snapshot_parameters = opts
        .snapshot_parameters
        .as_deref()
        .map(|p| string_map("--snapshot-parameters", p))
        .transpose()?
        .unwrap_or_default();
    let secrets = opts
        .secrets
        .as_deref()
        .map(|p| string_map("--secrets", p))
        .transpose()?
        .unwrap_or_default();
    let mutable_parameters = opts
        .mutable_parameters
        .as_deref()
        .map(|j| {
            serde_json::from_str::<HashMap<String, String>>(j).map_err(|e| {
                HarnessError::Usage(format!(
                    "--mutable-parameters: expected a JSON object of strings: {e}"
                ))
            })
        })
        .transpose()?;
    if let Some(d) = &opts.mount_dir
        && !d.is_dir()
    {
        return Err(HarnessError::Usage(format!(
            "--mount-dir {} is not a directory",
            d.display()
        )));
    }
    let endpoint = opts
        .endpoint
        .as_deref()
        .map(socket_path)
        .transpose()
        .map_err(HarnessError::Usage)?;
    let controller_endpoint = opts
        .controller_endpoint
        .as_deref()
        .map(socket_path)
        .transpose()
        .map_err(HarnessError::Usage)?;

    let plugin_type = opts.plugin_type();
    let user_volumes = opts
        .volumes
        .iter()
        .map(|v| volumes::parse_volume(v))
        .collect::<Result<Vec<_>, _>>()
        .map_err(HarnessError::Usage)?;
    if let Some(id) = &opts.node_id
        && (id.is_empty() || id.len() > 256)
    {
        return Err(HarnessError::Usage(
            "--node-id must be 1 to 256 bytes long (the CSI spec's limit for node_id)".into(),
        ));
    }

    let run_id = crate::run::new_run_id();
    let seed = crate::run::seed_or_random(common.seed);
    let scratch_base = crate::run::make_scratch_base(&std::env::temp_dir(), &run_id)?;

    // Launch the plugin, or find it. A controller plugin given only --controller-endpoint is
    // reached on that socket.
    let endpoint = endpoint.or_else(|| {
        (plugin_type == PluginType::Controller)
            .then(|| controller_endpoint.clone())
            .flatten()
    });
    let controller_endpoint = controller_endpoint.filter(|c| Some(c) != endpoint.as_ref());
    let (launcher, node_socket) = match (&opts.launch, endpoint) {
        (Some(cmd), _) => {
            let dir = scratch_base.join("plugin");
            let state = dir.join("state");
            std::fs::create_dir_all(&state).map_err(|e| {
                HarnessError::Internal(format!("failed to create {}: {e}", state.display()))
            })?;
            let socket = dir.join("csi.sock");
            let l = Launcher::new(cmd, &socket, &state).map_err(HarnessError::Usage)?;
            if let Err(e) = l.start(profile.harness.launch_timeout).await {
                let _ = crate::ledger::remove_scratch(&scratch_base);
                return Err(HarnessError::Internal(format!(
                    "failed to start the plugin: {e}"
                )));
            }
            (Some(Arc::new(l)), socket)
        }
        (None, Some(socket)) => (None, socket),
        (None, None) => {
            return Err(HarnessError::Usage("no --endpoint and no --launch".into()));
        }
    };
    let stop = |launcher: &Option<Arc<Launcher>>| {
        let l = launcher.clone();
        async move {
            if let Some(l) = l {
                l.stop().await;
            }
        }
    };
    let node = match Connection::open(&node_socket, DIAL_TIMEOUT).await {
        Ok(c) => Arc::new(c),
        Err(e) => {
            stop(&launcher).await;
            let _ = crate::ledger::remove_scratch(&scratch_base);
            return Err(HarnessError::Internal(format!(
                "cannot reach the plugin: {e}"
            )));
        }
    };
    let controller = match &controller_endpoint {
        Some(s) => match Connection::open(s, DIAL_TIMEOUT).await {
            Ok(c) => Arc::new(c),
            Err(e) => {
                return Err(HarnessError::Internal(format!(
                    "cannot reach the controller plugin: {e}"
                )));
            }
        },
        None => node.clone(),
    };

    let probe = probe::probe(
        &controller,
        &node,
        &profile,
        plugin_type,
        controller_endpoint.is_some(),
    )
    .await;
    let node_id = match (&opts.node_id, plugin_type) {
        (Some(id), _) => id.clone(),
        (None, _) => probe.node_id.clone(),
    };
    let facts = skips::RunFacts {
        plugin_type,
        launched: launcher.is_some(),
        mutable_parameters: mutable_parameters.is_some(),
        user_volumes: !user_volumes.is_empty(),
        node_id_known: !node_id.is_empty() || probe.node_probed,
    };
    for (key, reason) in skips::skips(&clauses, &selection, &probe, facts) {
        selection.skip(&key, reason);
    }
    let store = RunStore::new(clauses, opts.rerun_prefix(common), seed);
    for v in secrets.values() {
        store.add_secret(v);
    }
    let header = format!(
        "nomad-conform {KIND}: {} {} at {}, profile {}, seed {seed}, run {run_id}{}",
        if probe.name.is_empty() {
            "(no name)"
        } else {
            &probe.name
        },
        probe.version.as_deref().unwrap_or("(no version)"),
        node_socket.display(),
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
    let mut details = probe.details(plugin_type);
    if let Some(b) = budget::AttachmentBudget::for_limit(probe.max_volumes) {
        details.insert(
            "attachment_budget".into(),
            format!(
                "at most {} volumes attached to the node at once, across all clauses",
                b.limit()
            ),
        );
    }
    if let Some(l) = &launcher {
        details.insert("launched".into(), l.command_line());
    }
    let subject = Subject {
        plugin: match &opts.launch {
            Some(cmd) => cmd.clone(),
            None => format!("unix://{}", node_socket.display()),
        },
        version: probe.version.clone(),
        details,
    };
    let ctx = Arc::new(RunCtx {
        run_id,
        seed,
        profile,
        config: CsiConfig {
            controller,
            node,
            launcher: launcher.clone(),
            caps: probe.caps.clone(),
            plugin_type,
            node_id,
            node_probed: probe.node_probed,
            max_volumes_per_node: probe.max_volumes,
            attachments: budget::AttachmentBudget::for_limit(probe.max_volumes),
            user_volumes: (!user_volumes.is_empty())
                .then(|| volumes::VolumePool::new(user_volumes)),
            volume_size,
            volume_parameters,
            snapshot_parameters,
            secrets,
            mutable_parameters,
            idempotency_count: opts.idempotency_count,
            mount_dir: opts.mount_dir.clone(),
        },
        scratch_base: scratch_base.clone(),
        store,
    });
    let interrupted =
        execute::<CsiWorld>(ctx.clone(), features, &selection, common.jobs.max(1)).await;
    progress.finish();
    stop(&launcher).await;
    for p in launcher.iter().flat_map(|l| l.escaped()) {
        eprintln!(
            "warning: the plugin left {p} running in a session of its own (setsid); the harness killed it"
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
