//! What the host brings to every load: its deadlines and the plugin API version it speaks
//! (Nomad's loader picks v0.1.0 from what the plugin offers).

use std::time::Duration;

use serde::Serialize;

use super::protocol::{DRIVER_API_VERSION, DRIVER_SHUTDOWN_TIMEOUT, KILL_GRACE};
use crate::goversion::GoVersion;

/// The host's deadlines (values come from the profile).
#[derive(Clone, Copy, Debug)]
pub struct HostTimings {
    /// Dialling the plugin's address.
    pub connect: Duration,
    /// Each unary RPC (Nomad sets none for most: this is how long the harness waits).
    pub rpc: Duration,
    /// StartTask, RecoverTask, StopTask (beyond its own timeout) and DestroyTask: Nomad sets no
    /// deadline on them, so the harness is patient (the profile's task_call_deadline).
    pub task_call: Duration,
    /// `Driver/Shutdown`'s context (Nomad: 2 s).
    pub driver_shutdown: Duration,
    /// go-plugin's wait for the process after closing the client (2 s).
    pub kill_grace: Duration,
}

impl Default for HostTimings {
    fn default() -> Self {
        HostTimings {
            connect: Duration::from_secs(10),
            rpc: Duration::from_secs(30),
            task_call: Duration::from_secs(300),
            driver_shutdown: DRIVER_SHUTDOWN_TIMEOUT,
            kill_grace: KILL_GRACE,
        }
    }
}

/// The API version Nomad's loader picks from `plugin_api_versions` (`selectApiVersion`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApiNegotiation {
    /// The plugin's own string for the first of its versions (highest first) equal to v0.1.0
    /// under go-version equality: `0.1.0` matches too. None: no overlap (Nomad skips the
    /// plugin with a warning) or an error.
    pub chosen: Option<String>,
    /// Why Nomad fails loading the plugin (empty list, a version that does not parse).
    pub error: Option<String>,
}

/// Nomad's `selectApiVersion` for a driver.
pub fn negotiate_api_version(versions: &[String]) -> ApiNegotiation {
    if versions.is_empty() {
        return ApiNegotiation {
            chosen: None,
            error: Some("plugin provided no compatible API versions".into()),
        };
    }
    let mut parsed = Vec::new();
    for v in versions {
        match GoVersion::parse(v) {
            Ok(p) => parsed.push(p),
            Err(e) => {
                return ApiNegotiation {
                    chosen: None,
                    error: Some(format!("plugin provided invalid versions: {e}")),
                };
            }
        }
    }
    // The first version the plugin names that equals the one Nomad speaks. Nomad sorts the
    // list highest first before it looks (with go-version's comparison, which is not a total
    // order for some prereleases: sorting by it can panic in Rust), but every version it could
    // pick compares equal to the supported one, so the plugin's own order gives one of them
    // (Go's sort is not stable either).
    let supported = GoVersion::parse(DRIVER_API_VERSION).expect("v0.1.0 is a version");
    let chosen = parsed
        .iter()
        .find(|p| p.compare(&supported).is_eq())
        .map(|p| p.original().to_owned());
    ApiNegotiation {
        chosen,
        error: None,
    }
}
