//! The run record as JSON: the machine-readable report, and the input of `report` re-rendering.

use crate::model::RunRecord;

pub fn render(record: &RunRecord) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(record)
}

pub fn parse(text: &str) -> Result<RunRecord, serde_json::Error> {
    serde_json::from_str(text)
}
