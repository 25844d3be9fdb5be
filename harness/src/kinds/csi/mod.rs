//! The CSI suite: connect to (or launch) the plugin, probe its capabilities once, skip what it
//! does not advertise, run.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use nomad_conform_reports::model::{RunRecord, Subject};

use crate::error::HarnessError;
use crate::plugins::csi::launch::Launcher;
use crate::plugins::csi::{Connection, call, pb, socket_path};
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
    pub mount_dir: Option<PathBuf>,
    pub test_volume_size: Option<String>,
    pub volume_parameters: Option<PathBuf>,
    pub snapshot_parameters: Option<PathBuf>,
    pub secrets: Option<PathBuf>,
    pub mutable_parameters: Option<String>,
    pub idempotency_count: u32,
}

/// The capabilities the plugin advertised, by enum name.
#[derive(Clone, Debug, Default)]
pub struct Capabilities {
    pub plugin: BTreeSet<String>,
    pub controller: BTreeSet<String>,
    pub node: BTreeSet<String>,
    /// GroupController RPC capabilities (only asked for when the plugin offers the service).
    pub group: BTreeSet<String>,
}

/// What the steps of a CSI run read.
#[derive(Debug)]
pub struct CsiConfig {
    pub controller: Arc<Connection>,
    pub node: Arc<Connection>,
    pub launcher: Option<Arc<Launcher>>,
    pub caps: Capabilities,
    /// From NodeGetInfo: the node ID Nomad would send to the controller.
    pub node_id: String,
    pub max_volumes_per_node: i64,
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
    fn validate(&self) -> Result<(), HarnessError> {
        match (&self.endpoint, &self.launch) {
            (None, None) => Err(HarnessError::Usage(
                "give the plugin's socket with --endpoint unix:///PATH, or a command to start it with --launch".into(),
            )),
            (Some(_), Some(_)) => Err(HarnessError::Usage(
                "--endpoint and --launch exclude each other".into(),
            )),
            _ if self.controller_endpoint.is_some() && self.launch.is_some() => Err(
                HarnessError::Usage("--controller-endpoint goes with --endpoint, not --launch".into()),
            ),
            _ if self.idempotency_count == 0 => Err(HarnessError::Usage(
                "--idempotency-count must be at least 1".into(),
            )),
            _ => Ok(()),
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

    let run_id = crate::run::new_run_id();
    let seed = crate::run::seed_or_random(common.seed);
    let scratch_base = crate::run::make_scratch_base(&std::env::temp_dir(), &run_id)?;

    // Launch the plugin, or find it.
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

    let probe = probe(&controller, &node, &profile, controller_endpoint.is_some()).await;
    for (key, reason) in skips(
        &clauses,
        &selection,
        &probe,
        launcher.is_some(),
        mutable_parameters.is_some(),
    ) {
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
    let mut details = probe.details();
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
            node_id: probe.node_id.clone(),
            max_volumes_per_node: probe.max_volumes,
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

/// What the capability probe learned.
#[derive(Debug, Default)]
struct Probe {
    name: String,
    version: Option<String>,
    caps: Capabilities,
    node_id: String,
    max_volumes: i64,
    /// Calls that failed, by method: scenarios needing what they would have told are skipped.
    failures: Vec<String>,
}

impl Probe {
    fn details(&self) -> std::collections::BTreeMap<String, String> {
        let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        let mut d = std::collections::BTreeMap::new();
        d.insert("name".into(), self.name.clone());
        d.insert("capabilities".into(), join(&self.caps.plugin));
        d.insert(
            "controller_capabilities".into(),
            join(&self.caps.controller),
        );
        d.insert("node_capabilities".into(), join(&self.caps.node));
        if !self.caps.group.is_empty() {
            d.insert(
                "group_controller_capabilities".into(),
                join(&self.caps.group),
            );
        }
        d.insert("node_id".into(), self.node_id.clone());
        d.insert("max_volumes_per_node".into(), self.max_volumes.to_string());
        if !self.failures.is_empty() {
            d.insert("probe_failures".into(), self.failures.join("; "));
        }
        d
    }
}

/// Ask the plugin once what it is and what it can do (Nomad's first fingerprint).
async fn probe(
    controller: &Connection,
    node: &Connection,
    profile: &Profile,
    separate_controller: bool,
) -> Probe {
    let d = profile.csi.rpc_deadline.min(Duration::from_secs(10));
    let mut p = Probe::default();
    let mut id = node.identity();
    let (rpc, info) = call(
        "Identity",
        "GetPluginInfo",
        pb::GetPluginInfoRequest {},
        d,
        |r| async move { id.get_plugin_info(r).await },
    )
    .await;
    match info {
        Some(i) => {
            p.name = i.name;
            p.version = (!i.vendor_version.is_empty()).then_some(i.vendor_version);
        }
        None => p.failures.push(format!("GetPluginInfo: {}", rpc.outcome())),
    }
    let mut id = node.identity();
    let (rpc, caps) = call(
        "Identity",
        "GetPluginCapabilities",
        pb::GetPluginCapabilitiesRequest {},
        d,
        |r| async move { id.get_plugin_capabilities(r).await },
    )
    .await;
    match caps {
        Some(c) => {
            for cap in c.capabilities {
                if let Some(pb::plugin_capability::Type::Service(s)) = cap.r#type {
                    p.caps.plugin.insert(s.r#type().as_str_name().to_string());
                }
            }
        }
        None => p
            .failures
            .push(format!("GetPluginCapabilities: {}", rpc.outcome())),
    }
    if separate_controller {
        p.caps.plugin.insert("CONTROLLER_SERVICE".into());
    }
    if p.caps.plugin.contains("CONTROLLER_SERVICE") {
        let mut cl = controller.controller();
        let (rpc, caps) = call(
            "Controller",
            "ControllerGetCapabilities",
            pb::ControllerGetCapabilitiesRequest {},
            d,
            |r| async move { cl.controller_get_capabilities(r).await },
        )
        .await;
        match caps {
            Some(c) => {
                for cap in c.capabilities {
                    if let Some(pb::controller_service_capability::Type::Rpc(r)) = cap.r#type {
                        p.caps
                            .controller
                            .insert(r.r#type().as_str_name().to_string());
                    }
                }
            }
            None => p
                .failures
                .push(format!("ControllerGetCapabilities: {}", rpc.outcome())),
        }
    }
    if p.caps.plugin.contains("GROUP_CONTROLLER_SERVICE") {
        let mut cl = controller.group();
        let (rpc, caps) = call(
            "GroupController",
            "GroupControllerGetCapabilities",
            pb::GroupControllerGetCapabilitiesRequest {},
            d,
            |r| async move { cl.group_controller_get_capabilities(r).await },
        )
        .await;
        match caps {
            Some(c) => {
                for cap in c.capabilities {
                    if let Some(pb::group_controller_service_capability::Type::Rpc(r)) = cap.r#type
                    {
                        p.caps.group.insert(r.r#type().as_str_name().to_string());
                    }
                }
            }
            None => p
                .failures
                .push(format!("GroupControllerGetCapabilities: {}", rpc.outcome())),
        }
    }
    let mut nd = node.node();
    let (rpc, caps) = call(
        "Node",
        "NodeGetCapabilities",
        pb::NodeGetCapabilitiesRequest {},
        d,
        |r| async move { nd.node_get_capabilities(r).await },
    )
    .await;
    match caps {
        Some(c) => {
            for cap in c.capabilities {
                if let Some(pb::node_service_capability::Type::Rpc(r)) = cap.r#type {
                    p.caps.node.insert(r.r#type().as_str_name().to_string());
                }
            }
        }
        None => p
            .failures
            .push(format!("NodeGetCapabilities: {}", rpc.outcome())),
    }
    let mut nd = node.node();
    let (rpc, info) = call(
        "Node",
        "NodeGetInfo",
        pb::NodeGetInfoRequest {},
        d,
        |r| async move { nd.node_get_info(r).await },
    )
    .await;
    match info {
        Some(i) => {
            p.node_id = i.node_id;
            p.max_volumes = i.max_volumes_per_node;
        }
        None => p.failures.push(format!("NodeGetInfo: {}", rpc.outcome())),
    }
    p
}

/// Scenarios whose `@requires-...` tags the plugin does not satisfy, with the reason.
fn skips(
    clauses: &crate::clauses::ClauseSet,
    selection: &crate::run::Selection,
    probe: &Probe,
    launched: bool,
    mutable: bool,
) -> Vec<(crate::clauses::CaseKey, String)> {
    let mut out = Vec::new();
    for key in &selection.run {
        let Some(clause) = clauses.get(key) else {
            continue;
        };
        let reason = clause.tags.iter().find_map(|t| {
            let need = t.strip_prefix("requires-")?;
            let missing = |what: String| Some(format!("the plugin does not advertise {what}"));
            match need {
                "controller" if !probe.caps.plugin.contains("CONTROLLER_SERVICE") => {
                    missing("the CONTROLLER_SERVICE plugin capability".into())
                }
                "launch" if !launched => Some(
                    "needs a plugin the harness launched itself (--launch), to restart it".into(),
                ),
                "max-volumes" if probe.max_volumes <= 0 => {
                    Some("the node reports no max_volumes_per_node limit".into())
                }
                "mutable-parameters" if !mutable => Some(
                    "needs mutable parameters the plugin supports: pass --mutable-parameters JSON"
                        .into(),
                ),
                "group" if !probe.caps.plugin.contains("GROUP_CONTROLLER_SERVICE") => {
                    missing("the GROUP_CONTROLLER_SERVICE plugin capability".into())
                }
                "multi-writer" | "controller" | "group" | "launch" | "max-volumes"
                | "mutable-parameters" => None,
                n if n.starts_with("group-") => {
                    let cap = &n["group-".len()..];
                    (!probe.caps.group.contains(cap)).then(|| {
                        format!(
                            "the plugin does not advertise the group controller capability {cap}"
                        )
                    })
                }
                n if n.starts_with("node-") => {
                    let cap = &n["node-".len()..];
                    (!probe.caps.node.contains(cap))
                        .then(|| format!("the plugin does not advertise the node capability {cap}"))
                }
                cap if !probe.caps.controller.contains(cap) => {
                    missing(format!("the controller capability {cap}"))
                }
                _ => None,
            }
        });
        if let Some(reason) = reason {
            let reason = if probe.failures.is_empty() {
                reason
            } else {
                format!("{reason} (probing failed: {})", probe.failures.join("; "))
            };
            out.push((key.clone(), reason));
        }
    }
    out
}
