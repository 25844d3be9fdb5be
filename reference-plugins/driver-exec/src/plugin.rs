//! What every service of the plugin shares.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::Notify;

use crate::config::PluginConfig;
use crate::events::Events;
use crate::faults::Faults;
use crate::rpc;
use crate::tasks::{Task, TaskTable};
use crate::variants::Variants;

/// The name Nomad knows the driver by (`driver = "exec-reference"` in a job).
pub const PLUGIN_NAME: &str = "exec-reference";
/// The plugin API versions this driver speaks; Nomad supports only v0.1.0 for drivers.
pub const PLUGIN_API_VERSIONS: &[&str] = &["v0.1.0"];

pub struct Plugin {
    pub faults: Faults,
    pub variants: Variants,
    /// How long StartTask waits with the slow-start variant (`--slow-start-secs`).
    pub slow_start: std::time::Duration,
    /// Where supervisors write exit status files (one directory per task).
    pub state_dir: PathBuf,
    /// The last config SetConfig accepted; the defaults until then.
    pub config: RwLock<PluginConfig>,
    pub tasks: TaskTable,
    pub events: Events,
    /// Notified by GRPCController/Shutdown: stop serving and exit.
    pub shutdown: Notify,
    /// Driver/Init calls so far (for the second-init-fails fault).
    init_calls: AtomicUsize,
}

impl Plugin {
    pub fn new(
        faults: Faults,
        variants: Variants,
        slow_start: std::time::Duration,
        state_dir: PathBuf,
    ) -> Arc<Plugin> {
        Arc::new(Plugin {
            events: Events::new(&faults),
            faults,
            variants,
            slow_start,
            state_dir,
            config: RwLock::new(PluginConfig::default()),
            tasks: TaskTable::default(),
            shutdown: Notify::new(),
            init_calls: AtomicUsize::new(0),
        })
    }

    pub fn config(&self) -> PluginConfig {
        self.config
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    pub fn set_config(&self, config: PluginConfig) {
        *self
            .config
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = config;
    }

    /// Counts a Driver/Init call; returns how many came before it.
    pub fn count_init(&self) -> usize {
        self.init_calls.fetch_add(1, Ordering::SeqCst)
    }

    /// The task with this id, or the "task not found" error.
    pub fn task(&self, id: &str) -> Result<Arc<Task>, tonic::Status> {
        self.tasks
            .get(id)
            .ok_or_else(|| rpc::task_not_found(&self.variants))
    }
}
