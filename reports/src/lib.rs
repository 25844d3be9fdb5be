//! The run-record model of nomad-conform and the writers that render it.
//!
//! Writers are pure functions of a [`model::RunRecord`]: they never drive a plugin, so a record
//! saved as JSON can be rendered again later.

pub mod attention;
pub mod fleet;
pub mod html;
pub mod json;
pub mod junit;
pub mod merge;
pub mod model;
pub mod redact;
pub mod schema;
pub mod summary;
pub mod transcript;

use std::io::Write as _;
use std::path::Path;

/// Write `contents` to `path` through a temporary file in the same directory and a rename, so
/// that a reader never sees a half-written report.
pub fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
