//! What the CSI suite's steps read: the connections to the plugin, what its probe learned, the
//! node's attachment budget and the inputs the user gave.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use super::{budget, volumes};
use crate::cli::PluginType;
use crate::plugins::csi::Connection;
use crate::plugins::csi::known::Known;
use crate::plugins::csi::launch::Launcher;

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
    pub plugin_type: PluginType,
    /// Whether the user said which type the plugin is (`--plugin-type`), or the run assumed it.
    pub plugin_type_given: bool,
    /// The node ID Nomad would send to the controller: from the node plugin's NodeGetInfo, or
    /// `--node-id` for a controller-only run. Empty when unknown.
    pub node_id: String,
    /// Whether the node service was probed, so an empty `node_id` is the plugin's answer.
    pub node_probed: bool,
    pub max_volumes_per_node: i64,
    /// NodeGetInfo's accessible_topology segments (none when the node reports none).
    pub node_topology: Option<HashMap<String, String>>,
    /// What Nomad's start-up probes saw: whether and when the plugin reported ready.
    pub readiness: super::ready::Readiness,
    /// The node's attachment budget (none when the node sets no limit).
    pub attachments: Option<budget::AttachmentBudget>,
    /// What a node-only run, or a run of a plugin that cannot create volumes (register-only),
    /// claims instead of creating volumes.
    pub user_volumes: Option<volumes::VolumePool>,
    pub volume_size: i64,
    /// `--mount-fs-type` and `--mount-flags`: the volume specification's mount_options, sent in
    /// the mount capabilities Nomad sends them in.
    pub mount_fs_type: String,
    pub mount_flags: Vec<String>,
    pub volume_parameters: HashMap<String, String>,
    pub snapshot_parameters: HashMap<String, String>,
    pub secrets: HashMap<String, String>,
    pub mutable_parameters: Option<HashMap<String, String>>,
    pub idempotency_count: u32,
    /// Where Nomad's staging and per-allocation directories are made (stage_publish_base_dir);
    /// `None`: in each clause's scratch directory.
    pub mount_dir: Option<PathBuf>,
    /// The volumes the clauses that only read one share (shared.rs).
    pub shares: super::shared::Shares,
    /// Every volume and snapshot the run's calls made, and which of them a call has tried to
    /// delete: what a listing must show, whichever clause made it.
    pub known_volumes: Arc<Known>,
    pub known_snapshots: Arc<Known>,
    /// The IDs of the clauses this run judges (selected and not skipped): a precondition names
    /// only one of them as its root cause.
    pub judged: BTreeSet<String>,
}
