//! What the dynamic host volume suite's steps read: the plugin and the inputs the user gave.

use std::sync::Arc;

use crate::plugins::dhv::{Parameters, Plugin};

/// What the steps of a DHV run read.
#[derive(Debug)]
pub struct DhvConfig {
    pub plugin: Arc<Plugin>,
    /// DHV_PARAMETERS of every volume the suite creates (unless a clause varies it).
    pub parameters: Parameters,
    /// Parameters the plugin is known to refuse, to provoke a failed create.
    pub failing_parameters: Option<Parameters>,
    /// DHV_CAPACITY_MIN_BYTES / DHV_CAPACITY_MAX_BYTES; `None` sends 0 and 0 as Nomad does.
    pub capacity: Option<(i64, i64)>,
    pub property_cases: u32,
}
