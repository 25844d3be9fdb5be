//! The fleet's HTML report: one self-contained page, its header and styles shared with the run
//! report's through `templates/head.html`.

use minijinja::{Environment, Value, context};
use serde::Serialize;

use super::{Allocation, FleetRecord, FleetReportError, RowStatus};
use crate::attention::{Problem, needs_attention};

const TEMPLATE: &str = include_str!("../../templates/fleet.html");

#[derive(Serialize)]
struct RowView {
    node: String,
    node_id: String,
    node_anchor: String,
    anchor: String,
    plugin: String,
    kind: String,
    status: &'static str,
    verdict: String,
    detail: String,
    allocation: String,
}

#[derive(Serialize)]
struct NodeView {
    name: String,
    id: String,
    anchor: String,
    status: &'static str,
    allocation: Allocation,
    problems: Vec<ProblemView>,
    plugins: Vec<PluginView>,
}

#[derive(Serialize)]
struct ProblemView {
    verdict: &'static str,
    message: String,
}

#[derive(Serialize)]
struct PluginView {
    anchor: String,
    name: String,
    kind: String,
    path: String,
    version: Option<String>,
    file: String,
    status: &'static str,
    verdict: String,
    counts: String,
    run: String,
    interrupted: bool,
    entries: Vec<EntryView>,
}

#[derive(Serialize)]
struct EntryView {
    label: &'static str,
    status: &'static str,
    level: &'static str,
    id: String,
    title: String,
    reason: String,
    blocked_by: Option<String>,
    rerun: Option<String>,
    /// "blocks N clauses: ..." when this failure blocked others (folded beneath it).
    blocks: String,
}

fn problem_class(p: Problem) -> &'static str {
    match p {
        Problem::Failed | Problem::TimedOut | Problem::Leaked => "fail",
        Problem::Blocked => "blocked",
        Problem::Error => "error",
        Problem::Warning | Problem::Fixed => "warn",
        Problem::Known => "known",
    }
}

fn anchor(node_index: usize, record_index: Option<usize>) -> String {
    match record_index {
        Some(r) => format!("node-{node_index}-plugin-{r}"),
        None => format!("node-{node_index}"),
    }
}

fn allocation_line(a: &Allocation) -> String {
    let short: String = a.id.chars().take(8).collect();
    format!("{short} {}", a.client_status)
}

/// The fleet as one self-contained HTML page: the table node × plugin × verdict first,
/// problems at its top, then a section per node with each plugin's clauses that need
/// attention and their rerun lines.
pub fn render_html(fleet: &FleetRecord) -> Result<String, FleetReportError> {
    let rows: Vec<RowView> = fleet
        .rows()
        .iter()
        .map(|r| RowView {
            node: r.node.name().to_string(),
            node_id: r.node.node_id.clone(),
            node_anchor: anchor(r.node_index, None),
            anchor: anchor(r.node_index, r.record_index),
            plugin: r.plugin.clone(),
            kind: r.kind.clone(),
            status: r.status.class(),
            verdict: r.verdict.clone(),
            detail: r.detail.clone(),
            allocation: allocation_line(&r.node.allocation),
        })
        .collect();
    let nodes: Vec<NodeView> = fleet
        .nodes_in_order()
        .into_iter()
        .map(|(i, n)| NodeView {
            name: n.name().to_string(),
            id: n.node_id.clone(),
            anchor: anchor(i, None),
            status: n.worst().class(),
            allocation: n.allocation.clone(),
            problems: n
                .problems
                .iter()
                .map(|p| ProblemView {
                    verdict: p.kind.as_str(),
                    message: p.message.clone(),
                })
                .collect(),
            plugins: n
                .rows(i)
                .iter()
                .filter_map(|r| r.record_index.map(|ri| (r, &n.records[ri])))
                .map(|(r, nr)| {
                    let rec = &nr.record;
                    PluginView {
                        anchor: anchor(i, r.record_index),
                        name: r.plugin.clone(),
                        kind: rec.kind.clone(),
                        path: rec.subject.plugin.clone(),
                        version: rec.subject.version.clone(),
                        file: nr.file.clone(),
                        status: r.status.class(),
                        verdict: r.verdict.clone(),
                        counts: r.detail.clone(),
                        run: format!(
                            "profile {}, seed {}, run {}",
                            rec.profile.name, rec.seed, rec.run_id
                        ),
                        interrupted: rec.interrupted,
                        entries: needs_attention(rec)
                            .iter()
                            .map(|e| EntryView {
                                label: e.problem.label(),
                                status: problem_class(e.problem),
                                level: e.case.level.as_str(),
                                id: e.case.clause.clone(),
                                title: e.case.title.clone(),
                                reason: e.reason.clone(),
                                blocked_by: e.case.blocked_by.clone(),
                                rerun: e.rerun(),
                                blocks: [e.same_line(), e.blocks_line(8)]
                                    .into_iter()
                                    .filter(|l| !l.is_empty())
                                    .collect::<Vec<_>>()
                                    .join("; "),
                            })
                            .collect(),
                    }
                })
                .collect(),
        })
        .collect();
    let all = fleet.rows();
    let count = |s: RowStatus| all.iter().filter(|r| r.status == s).count();
    let mut jinja = Environment::new();
    jinja.add_template("fleet.html", TEMPLATE)?;
    jinja.add_template("styles.html", crate::html::STYLES_TEMPLATE)?;
    let tmpl = jinja.get_template("fleet.html")?;
    Ok(tmpl.render(context! {
        job => fleet.job.clone(),
        namespace => fleet.namespace.clone(),
        nomad_addr => fleet.nomad_addr.clone(),
        warnings => fleet.warnings.clone(),
        collected_at => fleet.collected_at.to_rfc3339(),
        verdict => fleet.verdict(),
        verdict_class => fleet.verdict_class(),
        node_count => fleet.nodes.len(),
        plugin_runs => all.iter().filter(|r| r.record_index.is_some()).count(),
        counts => Value::from(minijinja::value::Serde(&[
            ("fail", "nodes without a record", count(RowStatus::NodeProblem)),
            ("fail", "not conformant", count(RowStatus::NotConformant)),
            ("error", "incomplete", count(RowStatus::Incomplete)),
            ("warn", "with warnings", count(RowStatus::Warnings)),
            ("pass", "conformant", count(RowStatus::Conformant)),
        ])),
        rows => Value::from(minijinja::value::Serde(&rows)),
        nodes => Value::from(minijinja::value::Serde(&nodes)),
        generated => format!("{} {}", fleet.harness.name, fleet.harness.version),
    })?)
}
