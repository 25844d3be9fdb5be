//! The CSI suite: connect to (or launch) the plugin, probe its capabilities once, skip what it
//! does not advertise or what its plugin type does not serve; the run itself is
//! [`crate::run::run_suite`]'s.
//!
//! Modules: `probe` (Nomad's first fingerprint), `skips` (which clauses cannot be judged, and
//! why). The node's attachment budget and the volumes a node-only run claims are the steps'.

pub mod probe;
pub mod skips;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nomad_conform_reports::model::Subject;

use crate::clauses::ClauseSet;
use crate::cli::{CsiArgs, PluginType};
use crate::command_line::CommandLine;
use crate::error::HarnessError;
use crate::plugins::csi::launch::Launcher;
use crate::plugins::csi::{Connection, preflight, socket_path};
use crate::run::{Prepared, RunStart, Selection, Suite, SuiteOptions};
use crate::steps::csi::budget::AttachmentBudget;
use crate::steps::csi::ready::Readiness;
use crate::steps::csi::shared::Shares;
use crate::steps::csi::{CsiConfig, CsiWorld, volumes};
use crate::world::RunCtx;

pub const KIND: &str = "csi";
/// Nomad dials the plugin socket with a 1-second timeout.
const DIAL_TIMEOUT: Duration = Duration::from_secs(1);

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

/// The CSI suite run with these command-line arguments.
pub struct CsiSuite<'a> {
    pub args: &'a CsiArgs,
    pub common: &'a SuiteOptions,
}

impl CsiSuite<'_> {
    /// The plugin type the run treats the plugin as.
    pub fn plugin_type(&self) -> PluginType {
        let args = self.args;
        match args.plugin_type {
            Some(t) => t,
            None if args.controller_endpoint.is_some() && args.endpoint.is_none() => {
                PluginType::Controller
            }
            None => PluginType::Monolith,
        }
    }

    fn validate(&self) -> Result<(), HarnessError> {
        let usage = |m: &str| Err(HarnessError::Usage(m.into()));
        let plugin_type = self.plugin_type();
        let args = self.args;
        match (&args.endpoint, &args.controller_endpoint, &args.launch) {
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
        // The launched program runs without a shell: its command line must split, and its
        // program must be one this machine can run.
        if let Some(launch) = &args.launch {
            let words =
                crate::shell::split_words("--launch", launch).map_err(HarnessError::Usage)?;
            if let Some(program) = words.first() {
                crate::executable::check_program(program)
                    .map_err(|why| HarnessError::Usage(format!("--launch: {why}")))?;
            }
        }
        if args.idempotency_count == 0 {
            return usage("--idempotency-count must be at least 1");
        }
        match plugin_type {
            PluginType::Node if args.controller_endpoint.is_some() => usage(
                "--plugin-type node: a node plugin has no controller endpoint (drop --controller-endpoint)",
            ),
            PluginType::Controller
                if args.endpoint.is_some() && args.controller_endpoint.is_some() =>
            {
                usage(
                    "--plugin-type controller takes one socket: --controller-endpoint (or --endpoint), not both",
                )
            }
            PluginType::Monolith
                if args.controller_endpoint.is_some() && args.endpoint.is_none() =>
            {
                usage(
                    "--controller-endpoint alone runs a controller plugin: add --endpoint for the node plugin, or use --plugin-type controller",
                )
            }
            PluginType::Node | PluginType::Controller | PluginType::Monolith => {
                if args.node_id.is_some() && plugin_type != PluginType::Controller {
                    return usage(
                        "--node-id is for controller-only runs (--plugin-type controller): otherwise the node plugin's NodeGetInfo gives it",
                    );
                }
                Ok(())
            }
        }
    }

    fn rerun_prefix(&self) -> CommandLine {
        let (args, common) = (self.args, self.common);
        let mut line = CommandLine::new(&["nomad-conform", KIND]);
        let mut flag = |name: &str, value: Option<String>| {
            line.flag(name, value.as_deref());
        };
        flag("--endpoint", args.endpoint.clone());
        flag("--controller-endpoint", args.controller_endpoint.clone());
        flag("--launch", args.launch.clone());
        flag(
            "--plugin-type",
            args.plugin_type.map(|t| t.as_str().to_string()),
        );
        for v in &args.volumes {
            flag("--volume", Some(v.clone()));
        }
        flag("--node-id", args.node_id.clone());
        flag("--test-volume-size", args.test_volume_size.clone());
        flag("--mount-fs-type", args.mount_fs_type.clone());
        for f in &args.mount_flags {
            flag("--mount-flags", Some(f.clone()));
        }
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        flag("--volume-parameters", path(&args.volume_parameters));
        flag("--snapshot-parameters", path(&args.snapshot_parameters));
        flag("--secrets", path(&args.secrets));
        flag("--mutable-parameters", args.mutable_parameters.clone());
        flag("--mount-dir", path(&args.mount_dir));
        flag(
            "--profile",
            common.profile.as_ref().map(|p| p.display().to_string()),
        );
        flag(
            "--specs",
            common.specs.as_ref().map(|p| p.display().to_string()),
        );
        line
    }
}

impl Suite for CsiSuite<'_> {
    const KIND: &'static str = KIND;
    type World = CsiWorld;

    async fn prepare(
        &self,
        start: &RunStart,
        clauses: &ClauseSet,
        selection: &mut Selection,
    ) -> Result<Prepared<CsiConfig>, HarnessError> {
        let opts = self.args;
        let profile = &start.profile;
        if let Some(l) = &opts.launch {
            crate::secrets::register_from_command(l);
        }
        self.validate()?;
        let input = Input::read(opts)?;
        let plugin_type = self.plugin_type();
        let reached = reach(start, opts, plugin_type, &input).await?;
        let readiness = reached.wait_ready(start, plugin_type).await;
        let Reached {
            launcher,
            node_socket,
            node,
            controller,
            split,
        } = reached;
        let probe = probe::probe(&controller, &node, profile, plugin_type, split).await;
        let node_id = opts
            .node_id
            .clone()
            .unwrap_or_else(|| probe.node_id.clone());
        // Volumes to claim instead of creating them: for node-only runs, and for plugins whose
        // controller cannot create (registered volumes).
        if !input.user_volumes.is_empty()
            && plugin_type != PluginType::Node
            && probe.caps.controller.contains("CREATE_DELETE_VOLUME")
        {
            stop(&launcher).await;
            return Err(HarnessError::Usage(
                "--volume is for node-only runs and for plugins that cannot create volumes: this controller advertises CREATE_DELETE_VOLUME, so the suite creates its own".into(),
            ));
        }
        let facts = skips::RunFacts {
            plugin_type,
            plugin_type_given: opts.plugin_type.is_some(),
            launched: launcher.is_some(),
            mutable_parameters: input.mutable_parameters.is_some(),
            user_volumes: !input.user_volumes.is_empty(),
            node_id_known: !node_id.is_empty() || probe.node_probed,
        };
        // A plugin that never became ready is never registered: what the capability probe then
        // saw is no reason to skip anything, and every clause that needs a registered plugin is
        // Blocked by CSI-IDENTITY-PROBE-READY-IN-TIME instead.
        let mut skipped_for_controller = 0;
        if readiness.ready() {
            for (key, reason) in skips::skips(clauses, selection, &probe, facts) {
                if reason.contains("CONTROLLER_SERVICE") {
                    skipped_for_controller += 1;
                }
                selection.skip(&key, reason);
            }
        }
        let assumed = assumed_type(opts, plugin_type, &probe, skipped_for_controller);
        if let Some(a) = &assumed {
            eprintln!("warning: {a}");
        }
        let about = format!(
            "{} {} at {}",
            if probe.name.is_empty() {
                "(no name)"
            } else {
                &probe.name
            },
            probe.version.as_deref().unwrap_or("(no version)"),
            node_socket.display(),
        );
        let mut subject = subject(
            opts,
            &node_socket,
            &probe,
            plugin_type,
            &launcher,
            &readiness,
        );
        if let Some(a) = assumed {
            subject.details.insert(
                "plugin_type".into(),
                format!("{} (assumed: no --plugin-type given)", plugin_type.as_str()),
            );
            subject.details.insert("plugin_type_assumed".into(), a);
        }
        let Input {
            volume_size,
            volume_parameters,
            snapshot_parameters,
            secrets,
            mutable_parameters,
            user_volumes,
            ..
        } = input;
        Ok(Prepared {
            secrets: secrets.values().cloned().collect(),
            config: CsiConfig {
                controller,
                node,
                launcher,
                caps: probe.caps.clone(),
                plugin_type,
                plugin_type_given: opts.plugin_type.is_some(),
                node_id,
                node_probed: probe.node_probed,
                max_volumes_per_node: probe.max_volumes,
                node_topology: probe.node_topology.clone(),
                readiness,
                attachments: AttachmentBudget::for_limit(probe.max_volumes),
                user_volumes: (!user_volumes.is_empty())
                    .then(|| volumes::VolumePool::new(user_volumes)),
                volume_size,
                mount_fs_type: opts.mount_fs_type.clone().unwrap_or_default(),
                mount_flags: opts.mount_flags.clone(),
                volume_parameters,
                snapshot_parameters,
                secrets,
                mutable_parameters,
                idempotency_count: opts.idempotency_count,
                mount_dir: opts.mount_dir.clone(),
                shares: Shares::for_selection(clauses, selection),
                known_volumes: Default::default(),
                known_snapshots: Default::default(),
                judged: selection
                    .run
                    .iter()
                    .filter_map(|k| clauses.get(k).map(|c| c.id.clone()))
                    .collect(),
            },
            subject,
            about,
            rerun_prefix: self.rerun_prefix(),
            jobs: None,
        })
    }

    async fn finish(&self, run: &RunCtx<CsiConfig>) {
        // What the readers share, if the last of them never got to undo it (an interrupted
        // run), while a launched plugin still runs to answer; a second interrupt stops waiting.
        let interrupts = crate::run::Interrupts::get();
        tokio::select! {
            _ = run.config.shares.undo() => {}
            _ = interrupts.at_least(2) => {}
        }
        if let Some(l) = &run.config.launcher {
            l.stop().await;
            for p in l.escaped() {
                eprintln!(
                    "{}",
                    crate::console::shown(&format!(
                        "warning: the plugin left {p} running in a session of its own (setsid); the harness killed it"
                    ))
                );
            }
        }
    }
}

/// When the user gave no `--plugin-type`: which type the run assumed, and what that cost, in
/// one sentence for the console and the top of every report.
fn assumed_type(
    opts: &CsiArgs,
    plugin_type: PluginType,
    probe: &probe::Probe,
    skipped_for_controller: usize,
) -> Option<String> {
    if opts.plugin_type.is_some() {
        return None;
    }
    let why = match plugin_type {
        PluginType::Controller => "--controller-endpoint alone",
        _ => "the default",
    };
    let mut text = format!(
        "no --plugin-type given: the plugin is judged as a {} plugin ({why}), as if its job's csi_plugin block said type = \"{}\"",
        plugin_type.as_str(),
        plugin_type.as_str()
    );
    if plugin_type == PluginType::Monolith && !probe.caps.plugin.contains("CONTROLLER_SERVICE") {
        text.push_str(&format!(
            "; it does not advertise CONTROLLER_SERVICE, so {skipped_for_controller} clauses that need the controller service were skipped and the run judged it as a node plugin would be judged. Say --plugin-type node (with --volume) for a node plugin, or --plugin-type monolith to hold it to a monolith's contract"
        ));
    }
    Some(text)
}

/// What the user gave, read and checked before anything starts (exit 2 on bad input).
struct Input {
    volume_size: i64,
    volume_parameters: HashMap<String, String>,
    snapshot_parameters: HashMap<String, String>,
    secrets: HashMap<String, String>,
    mutable_parameters: Option<HashMap<String, String>>,
    endpoint: Option<PathBuf>,
    controller_endpoint: Option<PathBuf>,
    user_volumes: Vec<volumes::UserVolume>,
}

impl Input {
    fn read(opts: &CsiArgs) -> Result<Input, HarnessError> {
        let volume_size = match &opts.test_volume_size {
            Some(s) => crate::sizes::parse_bytes("--test-volume-size", s)?,
            None => 1 << 30,
        };
        // 0 is no size at all (a capacity range of 0 and 0 is an unspecified one), and the
        // block clauses write one block through a volume's device.
        let floor = crate::steps::csi::block::BLOCK as i64;
        if volume_size < floor {
            return Err(HarnessError::Usage(format!(
                "--test-volume-size {:?} is {volume_size} bytes: the volumes must hold at least {floor} bytes, the block the block-volume clauses write through a volume's device",
                opts.test_volume_size.as_deref().unwrap_or_default()
            )));
        }
        let map = |flag: &str, p: &Option<PathBuf>| {
            p.as_deref()
                .map(|p| string_map(flag, p))
                .transpose()
                .map(Option::unwrap_or_default)
        };
        let mutable_parameters = opts
            .mutable_parameters
            .as_deref()
            .map(mutable_parameters)
            .transpose()?;
        if let Some(d) = &opts.mount_dir {
            if !d.is_dir() {
                return Err(HarnessError::Usage(format!(
                    "--mount-dir {} is not a directory",
                    d.display()
                )));
            }
            crate::utf8_paths::require(
                "--mount-dir",
                d,
                "the staging and target paths made in it are sent to the plugin as strings (staging_target_path, target_path)",
            )?;
        }
        let socket = |e: &Option<String>| {
            e.as_deref()
                .map(socket_path)
                .transpose()
                .map_err(HarnessError::Usage)
        };
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
        Ok(Input {
            volume_size,
            volume_parameters: map("--volume-parameters", &opts.volume_parameters)?,
            snapshot_parameters: map("--snapshot-parameters", &opts.snapshot_parameters)?,
            secrets: map("--secrets", &opts.secrets)?,
            mutable_parameters,
            endpoint: socket(&opts.endpoint)?,
            controller_endpoint: socket(&opts.controller_endpoint)?,
            user_volumes,
        })
    }
}

/// `--mutable-parameters`: a JSON object of strings.
fn mutable_parameters(j: &str) -> Result<HashMap<String, String>, HarnessError> {
    let value = serde_json::from_str::<serde_json::Value>(j)
        .map_err(|e| HarnessError::Usage(format!("--mutable-parameters {j:?} is not JSON: {e}")))?;
    serde_json::from_value::<HashMap<String, String>>(value).map_err(|_| {
        HarnessError::Usage(format!(
            "--mutable-parameters {j:?}: expected a JSON object of strings, like {{\"iops\": \"3000\"}}"
        ))
    })
}

/// The plugin, started or found, and connected.
struct Reached {
    launcher: Option<Arc<Launcher>>,
    node_socket: PathBuf,
    node: Arc<Connection>,
    /// The node connection again, unless the controller has a socket of its own.
    controller: Arc<Connection>,
    /// The controller is a plugin task of its own (`--controller-endpoint`).
    split: bool,
}

/// Stops a launched plugin (before an early return).
async fn stop(launcher: &Option<Arc<Launcher>>) {
    if let Some(l) = launcher {
        l.stop().await;
    }
}

/// Launch the plugin or find it, check that gRPC listens on each socket (one line before any
/// clause when not), and connect. A controller plugin given only `--controller-endpoint` is
/// reached on that socket.
async fn reach(
    start: &RunStart,
    opts: &CsiArgs,
    plugin_type: PluginType,
    input: &Input,
) -> Result<Reached, HarnessError> {
    let endpoint = input.endpoint.clone().or_else(|| {
        (plugin_type == PluginType::Controller)
            .then(|| input.controller_endpoint.clone())
            .flatten()
    });
    let controller_endpoint = input
        .controller_endpoint
        .clone()
        .filter(|c| Some(c) != endpoint.as_ref());
    let (launcher, node_socket) = match (&opts.launch, endpoint) {
        (Some(cmd), _) => {
            let dir = start.scratch.join("plugin");
            let state = dir.join("state");
            std::fs::create_dir_all(&state).map_err(|e| {
                HarnessError::Internal(format!("failed to create {}: {e}", state.display()))
            })?;
            let socket = dir.join("csi.sock");
            let l = Launcher::new(cmd, &socket, &state).map_err(HarnessError::Usage)?;
            // Nomad waits for a CSI plugin's socket as long as its health_timeout
            // (plugin_supervisor_hook.go): a plugin slower than the harness's own launch
            // timeout but within that is not refused.
            let wait = start
                .profile
                .harness
                .launch_timeout
                .max(start.profile.csi.health_timeout);
            if let Err(e) = l.start(wait).await {
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
    for socket in std::iter::once(&node_socket).chain(controller_endpoint.as_ref()) {
        if let Err(e) = preflight::check(socket, preflight::ANSWER_WITHIN).await {
            stop(&launcher).await;
            return Err(match e {
                preflight::NotGrpc::Path(m) => HarnessError::Usage(m),
                preflight::NotGrpc::Listener(m) => HarnessError::Internal(m),
            });
        }
    }
    let node = match Connection::open(&node_socket, DIAL_TIMEOUT).await {
        Ok(c) => Arc::new(c),
        Err(e) => {
            stop(&launcher).await;
            return Err(HarnessError::Internal(format!(
                "cannot reach the plugin: {e}"
            )));
        }
    };
    let controller = match &controller_endpoint {
        Some(s) => match Connection::open(s, DIAL_TIMEOUT).await {
            Ok(c) => Arc::new(c),
            Err(e) => {
                stop(&launcher).await;
                return Err(HarnessError::Internal(format!(
                    "cannot reach the controller plugin: {e}"
                )));
            }
        },
        None => node.clone(),
    };
    Ok(Reached {
        launcher,
        node_socket,
        node,
        controller,
        split: controller_endpoint.is_some(),
    })
}

impl Reached {
    /// Nomad calls nothing but Probe until the plugin reports ready, counting its health
    /// timeout from the plugin's start; a split plugin's controller is a task of its own,
    /// which Nomad waits for too.
    async fn wait_ready(&self, start: &RunStart, plugin_type: PluginType) -> Readiness {
        let csi = &start.profile.csi;
        let (started, counted_from) = match &self.launcher {
            Some(l) => (l.started_at(), "the plugin's start"),
            None => (std::time::Instant::now(), "the harness's first contact"),
        };
        let identity = if plugin_type == PluginType::Controller {
            &self.controller
        } else {
            &self.node
        };
        let wait = |conn| {
            crate::steps::csi::ready::wait_ready(
                conn,
                started,
                counted_from,
                csi.probe_deadline,
                csi.health_timeout,
            )
        };
        let readiness = wait(identity).await;
        if plugin_type == PluginType::Monolith && self.split {
            readiness.and(wait(&self.controller).await)
        } else {
            readiness
        }
    }
}

/// The run's subject: the plugin as given, its version, and what the probe and the wait for
/// readiness found.
fn subject(
    opts: &CsiArgs,
    node_socket: &Path,
    probe: &probe::Probe,
    plugin_type: PluginType,
    launcher: &Option<Arc<Launcher>>,
    readiness: &Readiness,
) -> Subject {
    let mut details = probe.details(plugin_type);
    if let Some(b) = AttachmentBudget::for_limit(probe.max_volumes) {
        details.insert(
            "attachment_budget".into(),
            format!(
                "at most {} volumes attached to the node at once, across all clauses",
                b.limit()
            ),
        );
    }
    if let Some(l) = launcher {
        details.insert("launched".into(), l.command_line());
    }
    details.insert(
        "ready".into(),
        match readiness.ready_after {
            Some(t) => format!(
                "Probe reported ready after {} (from {})",
                crate::fmt_duration(t),
                readiness.counted_from
            ),
            None => readiness.why_not(),
        },
    );
    Subject {
        plugin: match &opts.launch {
            Some(cmd) => cmd.clone(),
            None => format!("unix://{}", node_socket.display()),
        },
        version: probe.version.clone(),
        details,
    }
}
