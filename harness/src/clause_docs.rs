//! The clause reference, written from the compiled specs (`nomad-conform list KIND --format
//! markdown`): docs/clauses/<kind>.md is exactly this output, and a test fails when they differ,
//! so a renamed clause or a changed level cannot leave the documentation behind.

use std::fmt::Write as _;

use crate::clauses::ClauseSet;

/// What a suite judges, for the page's heading.
fn subject(kind: &str) -> &'static str {
    match kind {
        "dhv" => "dynamic host volume plugins",
        "csi" => "CSI plugins",
        "driver" => "task driver plugins",
        "lock" => "singleton lock clients",
        "variables" => "a Variables server",
        _ => "plugins",
    }
}

/// A table cell: pipes escaped, on one line.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The markdown page of `kind`'s clauses: a table (ID, level, title), then each clause with
/// what it requires, its basis and where its scenario is.
pub fn markdown(kind: &str, clauses: &ClauseSet) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# The {kind} clauses");
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "What `nomad-conform {kind}` checks of {}: {} clauses, each a scenario of `specs/{kind}/`.",
        subject(kind),
        clauses.len()
    );
    let _ = writeln!(
        out,
        "This page is written by `nomad-conform list {kind} --format markdown`; do not edit it by hand."
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "| ID | level | title |");
    let _ = writeln!(out, "| --- | --- | --- |");
    for c in clauses.iter() {
        let _ = writeln!(
            out,
            "| [{}](#{}) | {} | {} |",
            c.id,
            c.id.to_ascii_lowercase(),
            c.level.as_str(),
            cell(&c.title)
        );
    }
    for c in clauses.iter() {
        let _ = writeln!(out);
        let _ = writeln!(out, "## {}", c.id);
        let _ = writeln!(out);
        let _ = writeln!(out, "**{}**: {}", c.level.as_str(), c.title);
        if !c.text.is_empty() {
            let _ = writeln!(out);
            let _ = writeln!(out, "{}", c.text);
        }
        if let Some(basis) = &c.basis {
            let _ = writeln!(out);
            let _ = writeln!(out, "Basis: {basis}");
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "Scenario: `{}:{}`", c.key.file, c.key.line);
    }
    out
}
