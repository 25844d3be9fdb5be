//! The Variables server suite (`nomad-conform variables`): Nomad's Variables, lock and ACL
//! rules checked against a server, the reference one by default or a real Nomad agent.

use nomad_conform_reports::model::RunRecord;

use crate::error::HarnessError;
use crate::run::SuiteOptions;

pub const KIND: &str = "variables";

/// What the user asked for, as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct VariablesOptions {
    pub nomad_addr: Option<String>,
    pub token: Option<String>,
}

pub async fn run(
    _common: &SuiteOptions,
    _opts: &VariablesOptions,
) -> Result<RunRecord, HarnessError> {
    Err(HarnessError::Usage(
        "the variables suite is being built; it is not available in this build yet".into(),
    ))
}
