//! Joining the records of the shards of one run (`--shard M/N`) into one record.

use std::collections::BTreeMap;

use crate::model::RunRecord;

#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge")]
    Empty,
    #[error("cannot merge a {other} run into a {first} run: merge records of one suite")]
    Kinds { first: String, other: String },
    #[error("clause {clause} is in both run {a} and run {b}: were those shards of one run?")]
    Duplicate {
        clause: String,
        a: String,
        b: String,
    },
}

/// One record holding every case of `records`, ordered by spec file and line.
pub fn merge(records: Vec<RunRecord>) -> Result<RunRecord, MergeError> {
    let mut iter = records.into_iter();
    let mut merged = iter.next().ok_or(MergeError::Empty)?;
    let mut owner: BTreeMap<String, String> = merged
        .cases
        .iter()
        .map(|c| (c.clause.clone(), merged.run_id.clone()))
        .collect();
    merged.merged_from = vec![merged.run_id.clone()];
    for r in iter {
        if r.kind != merged.kind {
            return Err(MergeError::Kinds {
                first: merged.kind.clone(),
                other: r.kind,
            });
        }
        for c in &r.cases {
            if let Some(a) = owner.insert(c.clause.clone(), r.run_id.clone()) {
                return Err(MergeError::Duplicate {
                    clause: c.clause.clone(),
                    a,
                    b: r.run_id.clone(),
                });
            }
        }
        merged.started_at = merged.started_at.min(r.started_at);
        merged.finished_at = merged.finished_at.max(r.finished_at);
        merged.interrupted |= r.interrupted;
        if merged.subject.version.is_none() {
            merged.subject.version = r.subject.version.clone();
        }
        merged.merged_from.push(r.run_id.clone());
        merged.cases.extend(r.cases);
    }
    merged
        .cases
        .sort_by(|a, b| (&a.spec_file, a.line).cmp(&(&b.spec_file, b.line)));
    merged.shard = None;
    merged.run_id = merged.merged_from.join("+");
    // Every shard's clauses are here now: a precondition whose clause passed in another shard
    // is settled (whether every shard was given is the caller's to check).
    merged.settle_preconditions(true);
    Ok(merged)
}
