//! The singleton lock client suite (`nomad-conform lock`).

use nomad_conform_reports::model::RunRecord;

use crate::error::HarnessError;
use crate::run::SuiteOptions;

pub const KIND: &str = "lock";

/// What the user asked for, as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct LockOptions {
    pub client: Option<String>,
    pub sidecar: Option<String>,
    pub sentinel: String,
    pub path: String,
    pub nomad_addr: Option<String>,
    pub token: Option<String>,
    pub task_api: bool,
    pub kill_timeout: Option<String>,
    pub give_up: Option<String>,
    pub stop_on_client_after: Option<String>,
    pub clients: Option<usize>,
}

pub async fn run(_common: &SuiteOptions, _opts: &LockOptions) -> Result<RunRecord, HarnessError> {
    Err(HarnessError::Usage(
        "the lock suite is being built; it is not available in this build yet".into(),
    ))
}
