//! What the four services share: the configuration, the fault and variant switches, the
//! persisted state, the volume directories and the per-volume locks.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::controller::{DEFAULT_VOLUME_BYTES, admit};
use crate::faults::{Fault, Faults};
use crate::locks::Locks;
use crate::state::{AccessType, Store, Volume};
use crate::storage::Storage;
use crate::variants::{Variant, Variants};

/// The name reported by GetPluginInfo: domain style, at most 63 characters.
pub const PLUGIN_NAME: &str = "hostpath.csi.nomad-conform.dev";

/// The topology segment key of the topology variant (and the topology-elsewhere fault): the
/// node a volume can be reached from.
pub const TOPOLOGY_KEY: &str = "topology.hostpath.csi.nomad-conform.dev/node";

/// The secret the needs-secrets variant asks for, and its value.
pub const SECRET_KEY: &str = "csi-hostpath-token";
pub const SECRET_VALUE: &str = "let-me-in";

/// How long a slow-start plugin is still starting.
pub const SLOW_START: Duration = Duration::from_secs(3);

/// Settings from the command line.
#[derive(Clone, Debug)]
pub struct Config {
    /// This node's id, reported by NodeGetInfo and the only node ControllerPublishVolume
    /// knows.
    pub node_id: String,
    /// Reported by NodeGetInfo and enforced by ControllerPublishVolume; 0 means no limit.
    pub max_volumes_per_node: i64,
    pub state_dir: PathBuf,
}

pub struct Plugin {
    pub config: Config,
    pub faults: Faults,
    pub variants: Variants,
    pub store: Store,
    pub storage: Storage,
    pub locks: Locks,
    /// When the plugin started (slow-start counts from here).
    pub started: Instant,
    /// unpublish-keeps-attachment: attachments ControllerUnpublishVolume never freed.
    pub leaked_attachments: std::sync::atomic::AtomicI64,
}

impl Plugin {
    /// Opens (or creates) the state directory and loads the saved state.
    pub fn open(config: Config, faults: Faults, variants: Variants) -> io::Result<Plugin> {
        std::fs::create_dir_all(&config.state_dir)?;
        // forget-state: a restarted plugin starts from nothing and saves nothing.
        let persist = !faults.has(Fault::ForgetState);
        let store = Store::open(&config.state_dir, persist)?;
        let storage = Storage::open(&config.state_dir)?;
        Ok(Plugin {
            config,
            faults,
            variants,
            store,
            storage,
            locks: Locks::default(),
            started: Instant::now(),
            leaked_attachments: Default::default(),
        })
    }

    /// slow-start: whether the plugin is still starting (Probe says not ready, every other
    /// call is UNAVAILABLE).
    pub fn starting(&self) -> bool {
        self.variants.has(Variant::SlowStart) && self.started.elapsed() < SLOW_START
    }

    /// The answer to a call that is not Probe while the plugin is still starting.
    pub fn not_started(&self) -> Result<(), tonic::Status> {
        if self.starting() {
            return Err(tonic::Status::unavailable(
                "the plugin is still starting; Probe reports when it is ready (slow-start variant)",
            ));
        }
        Ok(())
    }

    /// needs-secrets: the calls that act on storage need the plugin's secret. INVALID_ARGUMENT
    /// without it (a required field), UNAUTHENTICATED with another value.
    pub fn check_secrets(
        &self,
        secrets: &std::collections::HashMap<String, String>,
        method: &str,
    ) -> Result<(), tonic::Status> {
        match secrets.get(SECRET_KEY) {
            Some(v) if v == SECRET_VALUE => Ok(()),
            Some(_) => Err(tonic::Status::unauthenticated(format!(
                "{method}: the secret {SECRET_KEY} is not valid"
            ))),
            None => Err(tonic::Status::invalid_argument(format!(
                "{method}: the secret {SECRET_KEY} is required"
            ))),
        }
    }

    /// needs-secrets: `check_secrets` where the variant asks for them.
    pub fn needs_secrets(
        &self,
        secrets: &std::collections::HashMap<String, String>,
        method: &str,
    ) -> Result<(), tonic::Status> {
        if self.variants.has(Variant::NeedsSecrets) {
            return self.check_secrets(secrets, method);
        }
        Ok(())
    }

    /// Whether the plugin reports topology (the topology variant, the topology-elsewhere
    /// fault).
    pub fn reports_topology(&self) -> bool {
        self.variants.has(Variant::Topology) || self.faults.has(Fault::TopologyElsewhere)
    }

    /// `--preset-volume`: makes sure a mount volume with this id exists, as if a controller
    /// instance (another process of a split deployment) had created it with the name `id`
    /// and no capacity_range (1 GiB). One that exists already is kept as it is, so a restart
    /// changes nothing. This is how a node-only plugin gets volumes to stage and publish.
    pub fn preset_volume(&self, id: &str) -> anyhow::Result<()> {
        let (existing, named) = self.store.read(|s| {
            (
                s.volumes.get(id).cloned(),
                s.volume_by_name(id).map(|v| v.id.clone()),
            )
        });
        if let Some(volume) = existing {
            if volume.access_type == AccessType::Mount {
                std::fs::create_dir_all(self.storage.volume_dir(id))?;
            }
            return Ok(());
        }
        if let Some(other) = named {
            bail!("the name {id:?} is already taken by volume {other:?}");
        }
        std::fs::create_dir_all(self.storage.volume_dir(id))?;
        let volume = Volume {
            id: id.to_string(),
            name: id.to_string(),
            capacity_bytes: DEFAULT_VOLUME_BYTES,
            parameters: BTreeMap::new(),
            mutable_parameters: BTreeMap::new(),
            content_source: None,
            access_type: AccessType::Mount,
            loop_device: None,
        };
        self.store.update(|s| {
            admit(s, volume.capacity_bytes)?;
            s.volumes.insert(volume.id.clone(), volume);
            Ok(())
        })?;
        Ok(())
    }
}
