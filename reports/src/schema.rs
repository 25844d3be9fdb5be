//! The JSON Schema of the run record, generated from the model. The committed copy,
//! `reports/schema/run-record.v1.schema.json`, is what consumers read; a test keeps it equal
//! to the model (set UPDATE_SCHEMA=1 to rewrite it after a change).

use crate::model::RunRecord;

/// The schema as pretty JSON text, with a trailing newline.
pub fn run_record_schema() -> String {
    let schema = schemars::schema_for!(RunRecord);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMITTED: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/run-record.v1.schema.json"
    );

    #[test]
    fn committed_schema_matches_the_model() {
        let generated = run_record_schema();
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(COMMITTED, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
        assert!(
            committed == generated,
            "reports/schema/run-record.v1.schema.json is out of date: run the tests with UPDATE_SCHEMA=1, \
             and bump SCHEMA_VERSION if a field changed meaning or disappeared"
        );
    }
}
