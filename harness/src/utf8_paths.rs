//! Paths that must be text. Arguments are read as the OS gives them (`args_os`), so a path that
//! is not UTF-8 works wherever the harness only opens it (a report, a profile, a record). Some
//! paths become text on the way to the plugin (an environment variable, a JSON or gRPC field):
//! those are refused before the run, in one line that says where the path would go.

use std::path::Path;

use crate::error::HarnessError;

/// `path` as text, or a usage error: `what "PATH" is not UTF-8: because` (the path with its
/// bytes that are not UTF-8 escaped, as `\xFF`).
pub fn require<'a>(what: &str, path: &'a Path, because: &str) -> Result<&'a str, HarnessError> {
    path.to_str()
        .ok_or_else(|| HarnessError::Usage(format!("{what} {path:?} is not UTF-8: {because}")))
}
