//! The fleet's console summary.

use super::{FleetRecord, NodeProblemKind};

/// The console summary: the table, problems first, then one line with the totals.
pub fn render_text(fleet: &FleetRecord) -> String {
    let rows = fleet.rows();
    let node_w = rows
        .iter()
        .map(|r| r.node.name().chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let plugin_w = rows
        .iter()
        .map(|r| r.kind.len() + r.plugin.chars().count() + 1)
        .max()
        .unwrap_or(6)
        .max(6);
    let verdict_w = rows
        .iter()
        .map(|r| r.verdict.len())
        .max()
        .unwrap_or(7)
        .max(7);
    let mut out = format!(
        "{:<node_w$}  {:<plugin_w$}  {:<verdict_w$}  details\n",
        "node", "plugin", "verdict"
    );
    for r in &rows {
        let plugin = if r.kind.is_empty() {
            "-".to_string()
        } else {
            format!("{} {}", r.kind, r.plugin)
        };
        let detail = r.detail.lines().next().unwrap_or("");
        out.push_str(&format!(
            "{:<node_w$}  {:<plugin_w$}  {:<verdict_w$}  {detail}\n",
            r.node.name(),
            plugin,
            r.verdict
        ));
    }
    for w in &fleet.warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    let plugins = rows.iter().filter(|r| r.record_index.is_some()).count();
    let failing = rows
        .iter()
        .filter(|r| r.record_index.is_some() && !r.status.is_ok())
        .count();
    let without = fleet
        .nodes
        .iter()
        .filter(|n| {
            n.problems
                .iter()
                .any(|p| p.kind != NodeProblemKind::BadRecord)
        })
        .count();
    out.push_str(&format!(
        "fleet {} ({}): {}; {} node{}, {} plugin run{}, {} not conformant, {} node{} without a \
         complete record",
        fleet.job,
        fleet.namespace,
        fleet.verdict(),
        fleet.nodes.len(),
        plural(fleet.nodes.len()),
        plugins,
        plural(plugins),
        failing,
        without,
        plural(without),
    ));
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
