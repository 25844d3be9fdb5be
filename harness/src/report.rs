//! Writing the report files a run was asked for.

use std::path::Path;

use nomad_conform_reports::model::RunRecord;
use nomad_conform_reports::{html, json, junit, write_atomically};

use crate::error::HarnessError;

pub fn write_junit(record: &RunRecord, path: &Path) -> Result<(), HarnessError> {
    let xml = junit::render(record).map_err(|e| HarnessError::Internal(e.to_string()))?;
    write_atomically(path, &xml).map_err(|e| {
        HarnessError::Internal(format!(
            "failed to write JUnit report {}: {e}",
            path.display()
        ))
    })
}

pub fn write_json(record: &RunRecord, path: &Path) -> Result<(), HarnessError> {
    let text = json::render(record)
        .map_err(|e| HarnessError::Internal(format!("failed to serialise the record: {e}")))?;
    write_atomically(path, &text).map_err(|e| {
        HarnessError::Internal(format!(
            "failed to write JSON report {}: {e}",
            path.display()
        ))
    })
}

pub fn write_html(record: &RunRecord, path: &Path) -> Result<(), HarnessError> {
    let page = html::render(record).map_err(|e| HarnessError::Internal(e.to_string()))?;
    write_atomically(path, &page).map_err(|e| {
        HarnessError::Internal(format!(
            "failed to write HTML report {}: {e}",
            path.display()
        ))
    })
}
