//! A fleet report: what the conform-fleet job found on every client node of a Nomad cluster,
//! collected by `nomad-conform fleet collect`: the model here, its writers beside it (`html`,
//! `junit`, `text`), as the run record's model and writers are laid out.
//!
//! The [`FleetRecord`] holds, per node, the allocation that ran there and the run records it
//! left, or why there are none. Writers are pure functions of it, like the run-record writers:
//! they never drive a plugin nor ask Nomad anything.
//!
//! Problems come first everywhere: the table node × plugin × verdict starts with nodes without
//! a record, then plugins that are not conformant, incomplete runs, warnings, and ends with the
//! conformant ones; the node sections follow the same order, and each plugin lists what needs
//! attention with [`crate::attention`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::{Assessment, HarnessInfo, RunRecord};

mod html;
mod junit;
mod text;

pub use html::render_html;
pub use junit::render_junit;
pub use text::render_text;

/// Bumped whenever a field changes meaning or disappears.
pub const FLEET_SCHEMA_VERSION: u32 = 1;

/// Everything one collection found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetRecord {
    pub schema_version: u32,
    /// The job whose allocations were read, and its namespace.
    pub job: String,
    pub namespace: String,
    /// The Nomad API the records were read through.
    pub nomad_addr: String,
    pub collected_at: DateTime<Utc>,
    pub harness: HarnessInfo,
    /// What the reader must know about how the records were read (TLS certificates not
    /// verified, ...), one sentence each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// One entry per node (and task group) with an allocation of the job, by node name.
    pub nodes: Vec<FleetNode>,
}

/// One node: the newest allocation of the job there, its records, its problems.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetNode {
    pub node_id: String,
    pub node_name: String,
    pub allocation: Allocation,
    /// The run records read from the allocation, by file name.
    pub records: Vec<NodeRecord>,
    /// Why the node's answer is missing or partial. Empty when the records say it all.
    pub problems: Vec<NodeProblem>,
}

/// What Nomad says about the allocation (fields of its AllocListStub).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub id: String,
    pub task_group: String,
    /// pending, running, complete, failed, lost or unknown.
    pub client_status: String,
    pub client_description: String,
    pub job_version: u64,
    pub create_index: u64,
    pub tasks: Vec<TaskSummary>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSummary {
    pub name: String,
    /// pending, running or dead.
    pub state: String,
    pub failed: bool,
    /// The display message of its last event, e.g. "Exit Code: 2".
    pub last_event: Option<String>,
}

/// A run record found in an allocation's records directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Its path in the allocation directory, e.g. `alloc/conform/dhv/mkdir.json`.
    pub file: String,
    pub record: RunRecord,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeProblem {
    pub kind: NodeProblemKind,
    /// What happened, in a sentence or two (Nomad's own words quoted).
    pub message: String,
}

/// Why a node has no (complete) answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeProblemKind {
    /// The allocation ended (complete or failed) and left no record.
    NoRecord,
    /// The allocation is lost or unknown: its node is down or disconnected.
    Lost,
    /// The allocation has not finished (pending or running): its records may be partial.
    NotFinished,
    /// Nomad answered an error, or nothing, when asked for the node's records.
    Unreadable,
    /// A file in the records directory is not a run record.
    BadRecord,
}

impl NodeProblemKind {
    /// A short verdict for the table.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeProblemKind::NoRecord => "no record",
            NodeProblemKind::Lost => "lost",
            NodeProblemKind::NotFinished => "not finished",
            NodeProblemKind::Unreadable => "unreadable",
            NodeProblemKind::BadRecord => "bad record",
        }
    }

    /// Whether JUnit shows it as an `<error>` (nothing judged) rather than a `<failure>` (the
    /// node did not deliver).
    pub fn is_error(self) -> bool {
        matches!(
            self,
            NodeProblemKind::NotFinished | NodeProblemKind::Unreadable | NodeProblemKind::BadRecord
        )
    }
}

/// How a table row reads; the order is the table's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowStatus {
    /// The node has no record or could not be read.
    NodeProblem,
    NotConformant,
    Incomplete,
    Warnings,
    Conformant,
}

impl RowStatus {
    fn of(a: Assessment) -> RowStatus {
        match a {
            Assessment::NotConformant => RowStatus::NotConformant,
            Assessment::Incomplete => RowStatus::Incomplete,
            Assessment::ConformantWithWarnings | Assessment::KnownFailuresOnly => {
                RowStatus::Warnings
            }
            Assessment::Conformant => RowStatus::Conformant,
        }
    }

    /// The colour class of the reports (`fail`, `error`, `warn`, `pass`).
    pub fn class(self) -> &'static str {
        match self {
            RowStatus::NodeProblem | RowStatus::NotConformant => "fail",
            RowStatus::Incomplete => "error",
            RowStatus::Warnings => "warn",
            RowStatus::Conformant => "pass",
        }
    }

    pub fn is_ok(self) -> bool {
        matches!(self, RowStatus::Conformant | RowStatus::Warnings)
    }
}

/// One row of the table: a plugin on a node, or a node's problem.
#[derive(Clone, Debug)]
pub struct Row<'a> {
    pub node_index: usize,
    pub node: &'a FleetNode,
    /// The plugin's name (its ID in the plugin directory, or its endpoint), empty for a node
    /// problem.
    pub plugin: String,
    /// `dhv`, `csi`... (empty for a node problem).
    pub kind: String,
    pub status: RowStatus,
    /// `not conformant`, `no record`...
    pub verdict: String,
    /// The counts of the run, or the problem's message.
    pub detail: String,
    /// Where the row's record is in the node's list.
    pub record_index: Option<usize>,
}

/// The name of the plugin a record is about: its ID in Nomad's plugin directory when the run
/// knew it (`--plugin-dir`), else the file name of its path, else the endpoint as given.
pub fn plugin_name(record: &RunRecord) -> String {
    if let Some(id) = record.subject.details.get("plugin_id") {
        return id.clone();
    }
    let p = &record.subject.plugin;
    if (record.kind == "dhv" || record.kind == "driver")
        && let Some(name) = std::path::Path::new(p).file_name()
    {
        return name.to_string_lossy().into_owned();
    }
    p.clone()
}

/// The run's counts in one line, as the console summary's last line.
pub fn counts_line(record: &RunRecord) -> String {
    let t = record.tally();
    format!(
        "{} passed, {} failed ({} MUST, {} SHOULD), {} blocked, {} skipped, {} errors",
        t.passed,
        t.failed_must + t.failed_should,
        t.failed_must,
        t.failed_should,
        t.blocked,
        t.skipped,
        t.errors
    )
}

impl FleetNode {
    /// The node's name for people (its ID when Nomad gave no name).
    pub fn name(&self) -> &str {
        if self.node_name.is_empty() {
            &self.node_id
        } else {
            &self.node_name
        }
    }

    /// The node's rows, problems first.
    fn rows(&self, node_index: usize) -> Vec<Row<'_>> {
        let mut rows: Vec<Row<'_>> = self
            .problems
            .iter()
            .map(|p| Row {
                node_index,
                node: self,
                plugin: String::new(),
                kind: String::new(),
                status: RowStatus::NodeProblem,
                verdict: p.kind.as_str().to_string(),
                detail: p.message.clone(),
                record_index: None,
            })
            .collect();
        let mut plugins: Vec<Row<'_>> = self
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let a = r.record.assessment();
                Row {
                    node_index,
                    node: self,
                    plugin: plugin_name(&r.record),
                    kind: r.record.kind.clone(),
                    status: RowStatus::of(a),
                    verdict: a.as_str().to_string(),
                    detail: counts_line(&r.record),
                    record_index: Some(i),
                }
            })
            .collect();
        plugins.sort_by(|a, b| (a.status, &a.kind, &a.plugin).cmp(&(b.status, &b.kind, &b.plugin)));
        rows.extend(plugins);
        rows
    }

    /// The worst status of the node's rows.
    pub fn worst(&self) -> RowStatus {
        self.rows(0)
            .iter()
            .map(|r| r.status)
            .min()
            .unwrap_or(RowStatus::NodeProblem)
    }
}

impl FleetRecord {
    /// The nodes, problems first (then by name).
    pub fn nodes_in_order(&self) -> Vec<(usize, &FleetNode)> {
        let mut nodes: Vec<(usize, &FleetNode)> = self.nodes.iter().enumerate().collect();
        nodes.sort_by(|(_, a), (_, b)| (a.worst(), a.name()).cmp(&(b.worst(), b.name())));
        nodes
    }

    /// Every row of the table node × plugin × verdict, problems first.
    pub fn rows(&self) -> Vec<Row<'_>> {
        let mut rows: Vec<Row<'_>> = self
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.rows(i))
            .collect();
        rows.sort_by(|a, b| {
            (a.status, a.node.name(), &a.kind, &a.plugin).cmp(&(
                b.status,
                b.node.name(),
                &b.kind,
                &b.plugin,
            ))
        });
        rows
    }

    /// True when every node delivered and every plugin on it is conformant (warnings allowed,
    /// as for one run).
    pub fn is_conformant(&self) -> bool {
        !self.nodes.is_empty() && self.rows().iter().all(|r| r.status.is_ok())
    }

    /// The fleet in a word, for the badge and the console.
    pub fn verdict(&self) -> &'static str {
        let rows = self.rows();
        if self.nodes.is_empty() {
            "no nodes"
        } else if rows.iter().any(|r| r.status == RowStatus::NotConformant) {
            "not conformant"
        } else if rows.iter().any(|r| r.status == RowStatus::NodeProblem) {
            "incomplete: nodes without a record"
        } else if rows.iter().any(|r| r.status == RowStatus::Incomplete) {
            "incomplete"
        } else if rows.iter().any(|r| r.status == RowStatus::Warnings) {
            "conformant with warnings"
        } else {
            "conformant"
        }
    }

    fn verdict_class(&self) -> &'static str {
        match self.verdict() {
            "conformant" => "conformant",
            "conformant with warnings" => "conformantwithwarnings",
            "incomplete" | "no nodes" => "incomplete",
            _ => "notconformant",
        }
    }
}

/// The fleet as JSON (pretty, with a trailing newline).
pub fn render_json(fleet: &FleetRecord) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string_pretty(fleet)?;
    s.push('\n');
    Ok(s)
}

#[derive(Debug, thiserror::Error)]
pub enum FleetReportError {
    #[error("failed to render the fleet HTML report: {0}")]
    Html(#[from] minijinja::Error),
    #[error(transparent)]
    Junit(#[from] crate::junit::JunitError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Case, Environment, Level, ProfileInfo, Subject, Verdict};

    fn record(plugin: &str, verdicts: &[Verdict]) -> RunRecord {
        let case = |(i, v): (usize, &Verdict)| Case {
            clause: format!("DHV-X-{i}"),
            level: Level::Must,
            title: format!("clause {i}"),
            text: String::new(),
            basis: None,
            kind: "dhv".into(),
            operation: "create".into(),
            spec_file: "specs/dhv/02_create.feature".into(),
            line: i as u32,
            verdict: *v,
            reason: (*v != Verdict::Pass).then(|| "seen: exit status 1".to_string()),
            blocked_by: None,
            rerun: Some(format!("nomad-conform dhv {plugin} --tags @DHV-X-{i}")),
            duration_ms: 1,
            steps: Vec::new(),
            events: Vec::new(),
            notes: Vec::new(),
            attachments: Vec::new(),
            known: None,
        };
        RunRecord {
            schema_version: crate::model::SCHEMA_VERSION,
            run_id: "r1".into(),
            kind: "dhv".into(),
            harness: HarnessInfo {
                name: "nomad-conform".into(),
                version: "0".into(),
            },
            subject: Subject {
                plugin: plugin.into(),
                version: Some("1".into()),
                details: Default::default(),
            },
            profile: ProfileInfo {
                name: "nomad-1.10".into(),
                nomad_versions: "x".into(),
            },
            seed: 1,
            command_line: Vec::new(),
            started_at: Utc::now(),
            finished_at: Utc::now(),
            interrupted: false,
            strict: false,
            environment: Environment::default(),
            shard: None,
            merged_from: Vec::new(),
            cases: verdicts.iter().enumerate().map(case).collect(),
        }
    }

    fn node(name: &str, records: Vec<RunRecord>, problems: Vec<NodeProblem>) -> FleetNode {
        FleetNode {
            node_id: format!("{name}-id"),
            node_name: name.into(),
            allocation: Allocation {
                id: format!("{name}-alloc"),
                client_status: "complete".into(),
                ..Allocation::default()
            },
            records: records
                .into_iter()
                .map(|r| NodeRecord {
                    file: "alloc/conform/dhv/x.json".into(),
                    record: r,
                })
                .collect(),
            problems,
        }
    }

    fn fleet(nodes: Vec<FleetNode>) -> FleetRecord {
        FleetRecord {
            schema_version: FLEET_SCHEMA_VERSION,
            job: "conform-fleet".into(),
            namespace: "default".into(),
            nomad_addr: "http://127.0.0.1:4646".into(),
            warnings: Vec::new(),
            collected_at: Utc::now(),
            harness: HarnessInfo {
                name: "nomad-conform".into(),
                version: "0".into(),
            },
            nodes,
        }
    }

    #[test]
    fn problems_come_first() {
        use Verdict::*;
        let f = fleet(vec![
            node("a-good", vec![record("/p/mkdir", &[Pass])], vec![]),
            node(
                "b-bad",
                vec![
                    record("/p/mkdir", &[Pass]),
                    record("/p/broken", &[Pass, Fail]),
                ],
                vec![],
            ),
            node(
                "c-gone",
                vec![],
                vec![NodeProblem {
                    kind: NodeProblemKind::Lost,
                    message: "node down".into(),
                }],
            ),
        ]);
        let rows: Vec<(String, String, String)> = f
            .rows()
            .iter()
            .map(|r| {
                (
                    r.node.name().to_string(),
                    r.plugin.clone(),
                    r.verdict.clone(),
                )
            })
            .collect();
        let want = [
            ("c-gone", "", "lost"),
            ("b-bad", "broken", "not conformant"),
            ("a-good", "mkdir", "conformant"),
            ("b-bad", "mkdir", "conformant"),
        ];
        assert_eq!(
            rows,
            want.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        );
        let order: Vec<&str> = f.nodes_in_order().iter().map(|(_, n)| n.name()).collect();
        assert_eq!(order, ["c-gone", "b-bad", "a-good"]);
        assert!(!f.is_conformant());
        assert_eq!(f.verdict(), "not conformant");
        let gone = fleet(vec![f.nodes[0].clone(), f.nodes[2].clone()]);
        assert_eq!(gone.verdict(), "incomplete: nodes without a record");
        let good = fleet(vec![node("a", vec![record("/p/mkdir", &[Pass])], vec![])]);
        assert!(good.is_conformant());
        assert!(!fleet(vec![]).is_conformant());

        let html = render_html(&f).unwrap();
        let table = &html[html.find("<table").unwrap()..html.find("</table>").unwrap()];
        assert_eq!(table.matches("<tr class=\"row").count(), 4, "{table}");
        assert!(table.find("c-gone").unwrap() < table.find("a-good").unwrap());
        assert!(html.contains("nomad-conform dhv &#x2f;p&#x2f;broken --tags @DHV-X-1"));
        let text = render_text(&f);
        assert!(text.lines().nth(1).unwrap().starts_with("c-gone"), "{text}");
    }

    #[test]
    fn plugin_names() {
        let mut r = record("/opt/plugins/ext4-image", &[]);
        assert_eq!(plugin_name(&r), "ext4-image");
        r.subject.details.insert("plugin_id".into(), "ext4".into());
        assert_eq!(plugin_name(&r), "ext4");
        let mut c = record("unix:///run/csi.sock", &[]);
        c.kind = "csi".into();
        assert_eq!(plugin_name(&c), "unix:///run/csi.sock");
    }
}
