//! What the four services share: the configuration, the fault switches, the persisted
//! state, the volume directories and the per-volume locks.

use std::io;
use std::path::PathBuf;

use crate::faults::{Fault, Faults};
use crate::locks::Locks;
use crate::state::Store;
use crate::storage::Storage;

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
    pub store: Store,
    pub storage: Storage,
    pub locks: Locks,
}

impl Plugin {
    /// Opens (or creates) the state directory and loads the saved state.
    pub fn open(config: Config, faults: Faults) -> io::Result<Plugin> {
        std::fs::create_dir_all(&config.state_dir)?;
        // forget-state: a restarted plugin starts from nothing and saves nothing.
        let persist = !faults.has(Fault::ForgetState);
        let store = Store::open(&config.state_dir, persist)?;
        let storage = Storage::open(&config.state_dir)?;
        Ok(Plugin {
            config,
            faults,
            store,
            storage,
            locks: Locks::default(),
        })
    }
}
