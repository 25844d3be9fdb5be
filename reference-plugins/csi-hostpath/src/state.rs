//! Everything the plugin remembers, persisted in `<state-dir>/state.json`.
//!
//! CSI calls are retried and the plugin may be restarted at any time (Nomad restarts plugin
//! tasks, a node reboots), so idempotency needs memory: which volumes exist under which name,
//! where each one is published and staged, and with which arguments. All of it lives in one
//! [`State`], changed only through [`Store::update`], which writes the whole file atomically
//! (temporary file, rename) before the change becomes visible. A change whose file cannot be
//! written is rolled back, so memory and disk never disagree.
//!
//! The file is not fsynced: a plugin that is killed at any point leaves the old file or the new
//! one, and the kernel writes both out on a clean shutdown; only a power loss could lose the
//! last changes, which a test plugin need not survive. (Two fsyncs per change were a third of
//! the time the plugin took to answer the CSI suite.)

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use tonic::Status;

/// The whole persisted state. Maps are keyed by id or path and ordered, so listings and the
/// file itself are deterministic.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    /// Volumes by id.
    pub volumes: BTreeMap<String, Volume>,
    /// Snapshots by id, group members included.
    pub snapshots: BTreeMap<String, Snapshot>,
    /// Volume group snapshots by id. Their member snapshots are in `snapshots`.
    pub group_snapshots: BTreeMap<String, GroupSnapshot>,
    /// ControllerPublishVolume results: which volume is attached to which node.
    pub controller_publications: Vec<ControllerPublication>,
    /// NodeStageVolume results, by staging_target_path.
    pub stagings: BTreeMap<String, Staging>,
    /// NodePublishVolume results, by target_path.
    pub node_publications: BTreeMap<String, NodePublication>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub id: String,
    /// The CreateVolume name; unique among volumes (the idempotency key).
    pub name: String,
    /// Bookkeeping for a directory, which has no size of its own; for a block volume, also
    /// the length of its image file.
    pub capacity_bytes: i64,
    pub parameters: BTreeMap<String, String>,
    pub mutable_parameters: BTreeMap<String, String>,
    pub content_source: Option<ContentSource>,
    /// A directory (mount) or an image file handed out as a loop device (block). Fixed at
    /// creation. Absent in state saved before block volumes existed: mount.
    #[serde(default)]
    pub access_type: AccessType,
    /// Block volumes made under the loop-at-create variant: the writable loop device
    /// (`/dev/loopN`) attached to the image at CreateVolume. The volume keeps it until
    /// DeleteVolume; its stages and writable publications use it. Recorded because it
    /// outlives the plugin process. Absent otherwise: then each stage attaches one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_device: Option<String>,
}

/// How a volume is consumed: the CSI access types.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessType {
    /// A directory, bind-mounted (`volumes/<id>/`).
    #[default]
    Mount,
    /// An image file attached to a loop device, whose node is bind-mounted onto the target
    /// (`volumes/<id>.img`).
    Block,
}

impl AccessType {
    pub fn name(self) -> &'static str {
        match self {
            AccessType::Mount => "mount",
            AccessType::Block => "block",
        }
    }
}

/// Where a volume's initial contents came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentSource {
    Snapshot(String),
    Volume(String),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub id: String,
    /// The CreateSnapshot name; unique among snapshots.
    pub name: String,
    pub source_volume_id: String,
    /// The source volume's capacity when the snapshot was cut: a volume restored from it
    /// must be at least this large.
    pub size_bytes: i64,
    /// Creation time as seconds and nanoseconds since the Unix epoch.
    pub created_seconds: i64,
    pub created_nanos: i32,
    /// The group snapshot this snapshot was cut for; empty for a snapshot of its own. A
    /// member is deleted with its group, never alone.
    #[serde(default)]
    pub group_snapshot_id: String,
    /// The source volume's access type: a directory copy or an image copy. Only a volume of
    /// the same access type can be restored from it.
    #[serde(default)]
    pub access_type: AccessType,
}

/// A CreateVolumeGroupSnapshot result: one snapshot per source volume, cut together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSnapshot {
    pub id: String,
    /// The CreateVolumeGroupSnapshot name; unique among groups (the idempotency key).
    pub name: String,
    /// The source volumes, in the order of the request.
    pub source_volume_ids: Vec<String>,
    /// The member snapshots, one per source volume and in the same order.
    pub snapshot_ids: Vec<String>,
    pub parameters: BTreeMap<String, String>,
    /// Creation time as seconds and nanoseconds since the Unix epoch (the members have the
    /// same).
    pub created_seconds: i64,
    pub created_nanos: i32,
}

/// A volume capability, validated and reduced to what this plugin supports (see
/// `rpc::parse_capability`). The mount fields are empty for block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// Absent in state saved before block volumes existed: mount.
    #[serde(default)]
    pub access_type: AccessType,
    pub access_mode: AccessMode,
    pub fs_type: String,
    pub mount_flags: Vec<String>,
    pub volume_mount_group: String,
}

/// The CSI access modes (UNKNOWN is rejected before it gets here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AccessMode {
    SingleNodeWriter,
    SingleNodeReaderOnly,
    MultiNodeReaderOnly,
    MultiNodeSingleWriter,
    MultiNodeMultiWriter,
    SingleNodeSingleWriter,
    SingleNodeMultiWriter,
}

impl AccessMode {
    /// Whether the volume may be published to several nodes at once.
    pub fn is_multi_node(self) -> bool {
        matches!(
            self,
            AccessMode::MultiNodeReaderOnly
                | AccessMode::MultiNodeSingleWriter
                | AccessMode::MultiNodeMultiWriter
        )
    }

    /// Whether one node may stage or publish the volume at more than one path: the MULTI_NODE
    /// modes and SINGLE_NODE_MULTI_WRITER (the second-publish matrix of the spec).
    pub fn allows_several_paths_on_a_node(self) -> bool {
        self.is_multi_node() || self == AccessMode::SingleNodeMultiWriter
    }

    /// Whether workloads may only read, whatever `readonly` says.
    pub fn is_reader_only(self) -> bool {
        matches!(
            self,
            AccessMode::SingleNodeReaderOnly | AccessMode::MultiNodeReaderOnly
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerPublication {
    pub volume_id: String,
    pub node_id: String,
    pub capability: Capability,
    pub readonly: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Staging {
    pub volume_id: String,
    pub staging_target_path: String,
    pub capability: Capability,
    /// Block volumes: the loop device (`/dev/loopN`) attached to the image for this stage.
    /// Several stages of one volume share one device. It outlives the plugin process, which
    /// is why it is recorded: a restarted plugin finds it here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_device: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePublication {
    pub volume_id: String,
    pub target_path: String,
    /// Empty only when published without staging (the node-publish-without-stage-ok fault).
    pub staging_target_path: String,
    pub capability: Capability,
    pub readonly: bool,
    /// Block volumes: the loop device bind-mounted onto the target (none when the image
    /// itself is, under the block-publish-not-device fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_device: Option<String>,
    /// Whether `loop_device` was attached for this publication alone (the read-only device
    /// of a read-only publish), and is detached when it is unpublished. Otherwise it is the
    /// stage's shared device.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owns_loop_device: bool,
}

impl NodePublication {
    /// Whether two publications were asked for with the same arguments (the devices the
    /// plugin chose do not count): a retry rather than a conflict.
    pub fn same_request(&self, other: &NodePublication) -> bool {
        self.volume_id == other.volume_id
            && self.target_path == other.target_path
            && self.staging_target_path == other.staging_target_path
            && self.capability == other.capability
            && self.readonly == other.readonly
    }
}

impl State {
    pub fn volume_by_name(&self, name: &str) -> Option<&Volume> {
        self.volumes.values().find(|v| v.name == name)
    }

    /// The snapshot CreateSnapshot made under this name. Group members are not among the
    /// candidates: their names are the plugin's, not a CreateSnapshot caller's.
    pub fn snapshot_by_name(&self, name: &str) -> Option<&Snapshot> {
        self.snapshots
            .values()
            .find(|s| s.group_snapshot_id.is_empty() && s.name == name)
    }

    pub fn group_snapshot_by_name(&self, name: &str) -> Option<&GroupSnapshot> {
        self.group_snapshots.values().find(|g| g.name == name)
    }

    /// Sum of the capacities of all volumes, for GetCapacity and admission.
    pub fn allocated_bytes(&self) -> i64 {
        self.volumes.values().map(|v| v.capacity_bytes).sum()
    }

    /// The nodes a volume is controller-published to, sorted.
    pub fn published_node_ids(&self, volume_id: &str) -> Vec<String> {
        let mut nodes: Vec<String> = self
            .controller_publications
            .iter()
            .filter(|p| p.volume_id == volume_id)
            .map(|p| p.node_id.clone())
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    /// Why a volume cannot be deleted right now, if it cannot.
    pub fn in_use_reason(&self, volume_id: &str) -> Option<String> {
        if let Some(p) = self
            .controller_publications
            .iter()
            .find(|p| p.volume_id == volume_id)
        {
            return Some(format!("it is still published to node {:?}", p.node_id));
        }
        if let Some(s) = self.stagings.values().find(|s| s.volume_id == volume_id) {
            return Some(format!("it is still staged at {:?}", s.staging_target_path));
        }
        if let Some(p) = self
            .node_publications
            .values()
            .find(|p| p.volume_id == volume_id)
        {
            return Some(format!("it is still published at {:?}", p.target_path));
        }
        None
    }

    /// Whether the volume is staged or published on this node: node-side expansion needed.
    pub fn is_used_on_node(&self, volume_id: &str) -> bool {
        self.stagings.values().any(|s| s.volume_id == volume_id)
            || self
                .node_publications
                .values()
                .any(|p| p.volume_id == volume_id)
    }

    /// Whether a stage or publication record of `volume_id`, other than the stage at
    /// `except_staging` and the publication at `except_target`, names this loop device: then it
    /// is still in use. Another volume's record naming the same device is stale: the kernel
    /// gave the number to this volume's image after that volume's device was detached (a
    /// detach finishes before its record goes, and a device the CO's cleanup detached leaves
    /// its record behind), and counting it would leave this volume's device attached.
    pub fn loop_device_in_use(
        &self,
        volume_id: &str,
        device: &str,
        except_staging: Option<&str>,
        except_target: Option<&str>,
    ) -> bool {
        let named = |d: &Option<String>| d.as_deref() == Some(device);
        self.stagings.iter().any(|(path, s)| {
            s.volume_id == volume_id
                && Some(path.as_str()) != except_staging
                && named(&s.loop_device)
        }) || self.node_publications.iter().any(|(path, p)| {
            p.volume_id == volume_id
                && Some(path.as_str()) != except_target
                && named(&p.loop_device)
        })
    }

    /// Every loop device a record names, for any volume.
    pub fn recorded_loop_devices(&self) -> Vec<String> {
        let stages = self.stagings.values().filter_map(|s| s.loop_device.clone());
        let publications = self
            .node_publications
            .values()
            .filter_map(|p| p.loop_device.clone());
        let mut devices: Vec<String> = stages.chain(publications).collect();
        devices.sort();
        devices.dedup();
        devices
    }

    /// Whether `path` is a staging or publish path of the volume on this node.
    pub fn is_volume_path(&self, volume_id: &str, path: &str) -> bool {
        self.stagings
            .get(path)
            .is_some_and(|s| s.volume_id == volume_id)
            || self
                .node_publications
                .get(path)
                .is_some_and(|p| p.volume_id == volume_id)
    }
}

/// The state plus the file it is kept in.
pub struct Store {
    /// `None` when state must not be persisted (the forget-state fault).
    file: Option<PathBuf>,
    state: Mutex<State>,
}

impl Store {
    pub const FILE_NAME: &'static str = "state.json";

    /// Loads `<state_dir>/state.json` (an absent file is an empty state). With `persist`
    /// false, nothing is loaded and nothing will be written.
    pub fn open(state_dir: &Path, persist: bool) -> io::Result<Store> {
        if !persist {
            return Ok(Store {
                file: None,
                state: Mutex::new(State::default()),
            });
        }
        let file = state_dir.join(Self::FILE_NAME);
        let state = match fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not valid plugin state: {err}", file.display()),
                )
            })?,
            Err(err) if err.kind() == io::ErrorKind::NotFound => State::default(),
            Err(err) => return Err(err),
        };
        Ok(Store {
            file: Some(file),
            state: Mutex::new(state),
        })
    }

    /// Runs `f` on the current state and returns what it returns. For reads only; the
    /// internal lock is held while `f` runs, so keep it short and never block in it.
    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.lock())
    }

    /// Applies `change` to a copy of the state; if it succeeds, saves the copy and makes it
    /// current. Either everything happens or nothing does: an error from `change` or from
    /// saving leaves the state as it was. The file is written while the lock is held, so
    /// saves never overtake each other; the file is small, so this is quick.
    pub fn update<R>(
        &self,
        change: impl FnOnce(&mut State) -> Result<R, Status>,
    ) -> Result<R, Status> {
        let mut current = self.lock();
        let mut next = current.clone();
        let result = change(&mut next)?;
        if let Some(file) = &self.file {
            write_atomically(file, &next).map_err(|err| {
                Status::internal(format!(
                    "failed to save plugin state to {}: {err}",
                    file.display()
                ))
            })?;
        }
        *current = next;
        Ok(result)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held cannot have left a half-made change behind
        // (changes are made on a copy), so a poisoned lock is still safe to use.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn write_atomically(file: &Path, state: &State) -> io::Result<()> {
    // Compact: the whole state is written on every change, and pretty-printing doubled the
    // plugin's share of a suite's time.
    let json = serde_json::to_vec(state).map_err(io::Error::other)?;
    let temporary = file.with_extension("json.tmp");
    let mut out = fs::File::create(&temporary)?;
    out.write_all(&json)?;
    out.write_all(b"\n")?;
    drop(out);
    fs::rename(&temporary, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(id: &str) -> Volume {
        Volume {
            id: id.into(),
            name: format!("name-{id}"),
            capacity_bytes: 10,
            parameters: BTreeMap::new(),
            mutable_parameters: BTreeMap::new(),
            content_source: None,
            access_type: AccessType::Mount,
            loop_device: None,
        }
    }

    #[test]
    fn updates_are_saved_and_loaded_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), true).expect("open");
        store
            .update(|s| {
                s.volumes.insert("a".into(), volume("a"));
                Ok(())
            })
            .expect("update");
        let again = Store::open(dir.path(), true).expect("reopen");
        assert_eq!(
            again.read(|s| s.volumes.get("a").cloned()),
            Some(volume("a"))
        );
        assert!(!dir.path().join("state.json.tmp").exists());
    }

    #[test]
    fn a_failed_change_leaves_the_state_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), true).expect("open");
        let result: Result<(), Status> = store.update(|s| {
            s.volumes.insert("a".into(), volume("a"));
            Err(Status::aborted("no"))
        });
        assert!(result.is_err());
        assert!(store.read(|s| s.volumes.is_empty()));
    }

    #[test]
    fn state_from_before_group_snapshots_still_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = r#"{"snapshots": {"s": {"id": "s", "name": "n", "source_volume_id": "v",
            "size_bytes": 1, "created_seconds": 2, "created_nanos": 3}}}"#;
        fs::write(dir.path().join(Store::FILE_NAME), old).expect("write");
        let store = Store::open(dir.path(), true).expect("open");
        let snapshot = store
            .read(|s| s.snapshots.get("s").cloned())
            .expect("loaded");
        assert!(snapshot.group_snapshot_id.is_empty());
        assert!(store.read(|s| s.group_snapshots.is_empty()));
    }

    #[test]
    fn without_persistence_nothing_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), false).expect("open");
        store
            .update(|s| {
                s.volumes.insert("a".into(), volume("a"));
                Ok(())
            })
            .expect("update");
        assert!(!dir.path().join(Store::FILE_NAME).exists());
    }

    #[test]
    fn another_volumes_record_of_a_device_number_does_not_keep_it_in_use() {
        let publication = |volume: &str, target: &str| NodePublication {
            volume_id: volume.into(),
            target_path: target.into(),
            staging_target_path: String::new(),
            capability: Capability {
                access_type: AccessType::Block,
                access_mode: AccessMode::SingleNodeReaderOnly,
                fs_type: String::new(),
                mount_flags: Vec::new(),
                volume_mount_group: String::new(),
            },
            readonly: true,
            loop_device: Some("/dev/loop0".into()),
            owns_loop_device: true,
        };
        let mut state = State::default();
        // Volume a's record outlived its device; the kernel gave loop0 to volume b since.
        for (volume, target) in [("a", "/t/a"), ("b", "/t/b")] {
            state
                .node_publications
                .insert(target.into(), publication(volume, target));
        }
        assert!(!state.loop_device_in_use("b", "/dev/loop0", None, Some("/t/b")));
        assert!(state.loop_device_in_use("b", "/dev/loop0", None, None));
        assert!(state.loop_device_in_use("a", "/dev/loop0", None, Some("/t/b")));
    }
}
