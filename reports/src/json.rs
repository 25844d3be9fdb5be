//! The run record as JSON: the machine-readable report, and the input of `report` re-rendering.

use crate::model::{RunRecord, SCHEMA_VERSION};

pub fn render(record: &RunRecord) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(record)?;
    text.push('\n');
    Ok(text)
}

/// [`render`], streamed into `out` as it is serialised (the same bytes).
pub fn write(record: &RunRecord, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, record)?;
    out.write_all(b"\n")
}

#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not a nomad-conform run record: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "written with run-record schema {found}, this nomad-conform reads schema {SCHEMA_VERSION}: use a matching version"
    )]
    Version { found: u64 },
}

/// Read a record, refusing one written with another schema version.
pub fn parse(text: &str) -> Result<RunRecord, ParseError> {
    let value: serde_json::Value = serde_json::from_str(text)?;
    let found = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if found != u64::from(SCHEMA_VERSION) {
        return Err(ParseError::Version { found });
    }
    Ok(serde_json::from_value(value)?)
}
