//! The run-record model of nomad-conform and the writers that render it.
//!
//! Writers are pure functions of a [`model::RunRecord`]: they never drive a plugin, so a record
//! saved as JSON can be rendered again later.

pub mod attention;
pub mod compare;
pub mod fleet;
pub mod html;
pub mod json;
pub mod junit;
pub mod merge;
pub mod model;
pub mod output;
pub mod redact;
pub mod schema;
pub mod secret_forms;
pub mod summary;
pub mod text;
pub mod transcript;

use std::path::Path;

/// Write a report to `path` safely (see [`output::write_report`]): through symlinks, only over
/// a regular file, through a temporary file and a rename.
pub fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    output::write_report(path, contents).map_err(std::io::Error::other)
}
