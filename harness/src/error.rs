//! Errors that end a run before or around the suite, and the exit code each maps to.

/// Exit codes: 0 every MUST clause passed; 1 a MUST clause failed; 2 usage or configuration
/// error; 3 the harness itself failed or nothing could be tested; 130 interrupted.
pub mod exit {
    pub const CONFORMANT: i32 = 0;
    pub const NOT_CONFORMANT: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const HARNESS: i32 = 3;
    pub const INTERRUPTED: i32 = 130;
}

#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// Bad input from the user: flags, files, the plugin path. Exit 2.
    #[error("{0}")]
    Usage(String),
    /// The harness could not do its job (scratch space, report files). Exit 3.
    #[error("{0}")]
    Internal(String),
}

impl HarnessError {
    pub fn exit_code(&self) -> i32 {
        match self {
            HarnessError::Usage(_) => exit::USAGE,
            HarnessError::Internal(_) => exit::HARNESS,
        }
    }
}

impl From<crate::specs::SpecError> for HarnessError {
    fn from(e: crate::specs::SpecError) -> Self {
        HarnessError::Usage(e.to_string())
    }
}

impl From<crate::profile::ProfileError> for HarnessError {
    fn from(e: crate::profile::ProfileError) -> Self {
        HarnessError::Usage(e.to_string())
    }
}

/// The exit code a finished run maps to.
pub fn exit_code_for(record: &nomad_conform_reports::model::RunRecord) -> i32 {
    use nomad_conform_reports::model::Verdict;
    if record.interrupted {
        return exit::INTERRUPTED;
    }
    if record.cases.iter().any(|c| c.is_blocking(record.strict)) {
        return exit::NOT_CONFORMANT;
    }
    let judged = record
        .cases
        .iter()
        .any(|c| c.verdict == Verdict::Pass || c.verdict.is_failure());
    let errors = record.cases.iter().any(|c| c.verdict == Verdict::Error);
    // Clauses the node kept from being judged (a driver UNDETECTED here): not conformant on
    // the strength of the rest.
    let unjudged_here = record.cases.iter().any(|c| c.not_judged_on_this_node());
    if errors || !judged || unjudged_here {
        return exit::HARNESS;
    }
    exit::CONFORMANT
}
