//! What the four services share: the configuration, the fault and variant switches, the
//! persisted state, the volume directories and the per-volume locks.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use anyhow::bail;

use crate::controller::{DEFAULT_VOLUME_BYTES, admit};
use crate::faults::{Fault, Faults};
use crate::locks::Locks;
use crate::state::{AccessType, Store, Volume};
use crate::storage::Storage;
use crate::variants::Variants;

/// The name reported by GetPluginInfo: domain style, at most 63 characters.
pub const PLUGIN_NAME: &str = "hostpath.csi.nomad-conform.dev";

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
        })
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
