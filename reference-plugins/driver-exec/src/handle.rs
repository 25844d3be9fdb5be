//! The task handle: what Nomad stores for a task and gives back to RecoverTask.
//!
//! `TaskHandle.version` belongs to the driver (Nomad reserves 0); this driver writes 1.
//! `config` is the TaskConfig as StartTask received it, and `driver_state` is this driver's
//! own, opaque to Nomad: MessagePack of [`DriverState`], with named fields so that a later
//! version can read it.

use std::path::PathBuf;

use nomad_conform_proto::nomad::drivers::{TaskConfig, TaskHandle, TaskState};
use serde::{Deserialize, Serialize};

use crate::faults::{Fault, Faults};
use crate::variants::{Variant, Variants};

/// The only handle version this driver writes and reads.
pub const HANDLE_VERSION: i32 = 1;

/// Everything needed to find a task again after a plugin restart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriverState {
    pub supervisor_pid: i32,
    pub task_pid: i32,
    /// When the task started, in nanoseconds since the Unix epoch.
    pub started_at_unix_nanos: i64,
    /// Where the supervisor writes the exit status.
    pub status_file: PathBuf,
}

impl DriverState {
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec_named(self).expect("a plain struct always encodes")
    }

    pub fn decode(bytes: &[u8]) -> Result<DriverState, String> {
        rmp_serde::from_slice(bytes).map_err(|err| format!("driver_state is not ours: {err}"))
    }
}

/// The handle StartTask returns for a task that is now running.
pub fn for_started_task(
    config: &TaskConfig,
    state: &DriverState,
    faults: &Faults,
    variants: &Variants,
) -> TaskHandle {
    let mut config = config.clone();
    if faults.has(Fault::HandleWrongId) {
        config.id.push_str("-wrong");
    }
    // handle-state-unset: Nomad never reads the handle's state, and its drivers leave it unset.
    let task_state = if variants.has(Variant::HandleStateUnset) {
        TaskState::Unknown
    } else {
        TaskState::Running
    };
    TaskHandle {
        version: HANDLE_VERSION,
        config: Some(config),
        state: task_state as i32,
        driver_state: state.encode(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> DriverState {
        DriverState {
            supervisor_pid: 10,
            task_pid: 11,
            started_at_unix_nanos: 1_700_000_000_000_000_000,
            status_file: PathBuf::from("/tmp/x/status.json"),
        }
    }

    #[test]
    fn driver_state_round_trips_as_a_named_map() {
        let bytes = state().encode();
        assert_eq!(DriverState::decode(&bytes).unwrap(), state());
        let value = rmpv::decode::read_value(&mut bytes.as_slice()).unwrap();
        let keys: Vec<&str> = value
            .as_map()
            .unwrap()
            .iter()
            .filter_map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "supervisor_pid",
                "task_pid",
                "started_at_unix_nanos",
                "status_file"
            ]
        );
        assert!(DriverState::decode(b"\x01").is_err());
    }

    #[test]
    fn the_handle_echoes_the_config() {
        let config = TaskConfig {
            id: "a/b/c".into(),
            name: "b".into(),
            ..Default::default()
        };
        let none = Variants::default();
        let handle = for_started_task(&config, &state(), &Faults::default(), &none);
        assert_eq!(handle.config.as_ref(), Some(&config));
        assert_eq!(handle.version, 1);
        assert_eq!(handle.state, TaskState::Running as i32);
        let wrong_id = Faults::new([Fault::HandleWrongId]);
        let wrong = for_started_task(&config, &state(), &wrong_id, &none);
        assert_ne!(wrong.config.unwrap().id, config.id);
        let unset = Variants::new([Variant::HandleStateUnset]);
        let handle = for_started_task(&config, &state(), &Faults::default(), &unset);
        assert_eq!(handle.state, TaskState::Unknown as i32);
    }
}
