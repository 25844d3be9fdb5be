//! Fleet certification on Nomad: `nomad-conform fleet collect`.
//!
//! The conform-fleet job (deploy/nomad/conform-fleet.nomad.hcl) runs nomad-conform on every
//! client node and leaves its run records in each allocation's `${NOMAD_ALLOC_DIR}/conform/`.
//! The collector lists the job's allocations, keeps the newest one per node, reads that
//! node's records through the client filesystem API ([`nomad`]) and builds one
//! [`FleetRecord`]; the reports crate renders it. A node whose allocation failed, was lost,
//! or left no record is kept with what Nomad says about it, never dropped.

pub mod nomad;

use std::time::Duration;

use chrono::Utc;
use futures::StreamExt as _;
use nomad_conform_reports::fleet::{
    Allocation, FLEET_SCHEMA_VERSION, FleetNode, FleetRecord, NodeProblem, NodeProblemKind,
    NodeRecord, TaskSummary,
};
use nomad_conform_reports::model::HarnessInfo;

use crate::error::{HarnessError, exit};
use crate::nomad_api::{ApiError, ApiSettings, NomadApi};
use nomad::AllocStub;

pub mod csi_node;

/// Nodes read at the same time.
const PARALLEL_NODES: usize = 8;

/// What `fleet collect` was asked for.
#[derive(Clone, Debug)]
pub struct CollectOptions {
    pub job: String,
    /// The Nomad API: address, TLS, token, namespace (default `default`), region.
    pub api: ApiSettings,
    /// The records' directory inside each allocation, as the fs API names it.
    pub records_dir: String,
    pub timeout: Duration,
    /// The CSI plugin the job tested on each node, whose health per node is shown.
    pub csi_plugin: Option<String>,
}

impl CollectOptions {
    fn api(&self) -> NomadApi {
        NomadApi::new(&self.api, "default", self.timeout)
    }

    /// What the report must warn about how it was read (certificates not verified).
    fn warnings(&self) -> Vec<String> {
        self.api
            .target
            .tls
            .as_ref()
            .and_then(|t| t.warning())
            .into_iter()
            .collect()
    }
}

/// Read every node's records. `Err` (exit 3) when the job's allocations cannot be listed, or
/// when there are none: nothing could be judged.
pub async fn collect(opts: &CollectOptions) -> Result<FleetRecord, HarnessError> {
    let api = opts.api();
    let addr = &opts.api.addr;
    let allocs = api.job_allocations(&opts.job).await.map_err(|e| {
        let hint = match &e {
            ApiError::Unreachable(c) if !c.is_tls() => " (is --nomad-addr / NOMAD_ADDR right?)",
            ApiError::Status { status: 403, .. } => {
                " (the token needs read-job and read-fs on the namespace: --token / NOMAD_TOKEN)"
            }
            _ => "",
        };
        HarnessError::Internal(format!(
            "failed to list the allocations of job {:?} in namespace {:?} at {addr}: {e}{hint}",
            opts.job, api.namespace
        ))
    })?;
    if allocs.is_empty() {
        return Err(HarnessError::Internal(format!(
            "job {:?} in namespace {:?} has no allocations at {addr}: nothing to collect (was it \
             run? nomad job run deploy/nomad/conform-fleet.nomad.hcl)",
            opts.job, api.namespace
        )));
    }
    let plugin = match &opts.csi_plugin {
        None => None,
        Some(id) => Some(api.csi_plugin(id).await.map_err(|e| {
            let hint = match &e {
                ApiError::Status { status: 403, .. } => " (the token needs read-plugin)",
                ApiError::Status { status: 404, .. } => {
                    " (is the plugin's job running? nomad plugin status)"
                }
                _ => "",
            };
            HarnessError::Internal(format!(
                "failed to read CSI plugin {id:?} at {addr}: {e}{hint}"
            ))
        })?),
    };
    let picked = nomad::newest_per_node(allocs);
    eprintln!(
        "nomad-conform fleet: job {} ({}): reading the records of {} allocation{} at {addr}",
        opts.job,
        api.namespace,
        picked.len(),
        if picked.len() == 1 { "" } else { "s" },
    );
    let nodes: Vec<FleetNode> = futures::stream::iter(picked)
        .map(|a| read_node(&api, &opts.records_dir, plugin.as_ref(), a))
        .buffered(PARALLEL_NODES)
        .collect()
        .await;
    Ok(FleetRecord {
        schema_version: FLEET_SCHEMA_VERSION,
        job: opts.job.clone(),
        namespace: api.namespace.clone(),
        nomad_addr: opts.api.addr.clone(),
        warnings: opts.warnings(),
        collected_at: Utc::now(),
        harness: HarnessInfo {
            name: "nomad-conform".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        nodes,
    })
}

/// The exit status of a collection: 3 when Nomad answered an error or nothing for some node's
/// records (the report is incomplete for a reason of Nomad's, not the node's), else 1 when a
/// plugin is not conformant or a node has no (complete) record, else 0.
pub fn exit_code(fleet: &FleetRecord) -> i32 {
    let unreadable = fleet.nodes.iter().any(|n| {
        n.problems
            .iter()
            .any(|p| p.kind == NodeProblemKind::Unreadable)
    });
    if unreadable {
        exit::HARNESS
    } else if fleet.is_conformant() {
        exit::CONFORMANT
    } else {
        exit::NOT_CONFORMANT
    }
}

/// The task states of an allocation in a sentence: `dhv: dead, failed (Exit Code: 2)`.
fn tasks_of(a: &AllocStub) -> Vec<TaskSummary> {
    a.task_states
        .iter()
        .flatten()
        .map(|(name, t)| TaskSummary {
            name: name.clone(),
            state: t.state.clone(),
            failed: t.failed,
            last_event: t
                .events
                .iter()
                .flatten()
                .rev()
                .map(|e| {
                    if e.display_message.is_empty() {
                        e.kind.clone()
                    } else {
                        format!("{}: {}", e.kind, e.display_message)
                    }
                })
                .find(|m| !m.is_empty()),
        })
        .collect()
}

fn tasks_sentence(tasks: &[TaskSummary]) -> String {
    tasks
        .iter()
        .map(|t| {
            let mut s = format!("task {} {}", t.name, t.state);
            if t.failed {
                s.push_str(", failed");
            }
            if let Some(e) = &t.last_event {
                s.push_str(&format!(" ({e})"));
            }
            s
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The `.json` files in the records directory and the directories right below it.
async fn record_files(api: &NomadApi, alloc: &str, dir: &str) -> Result<Vec<String>, ApiError> {
    let dir = dir.trim_end_matches('/');
    let mut files = Vec::new();
    let mut entries = api.list_dir(alloc, dir).await?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        let path = format!("{dir}/{}", e.name);
        if e.is_dir {
            let mut inner = api.list_dir(alloc, &path).await?;
            inner.sort_by(|a, b| a.name.cmp(&b.name));
            files.extend(
                inner
                    .into_iter()
                    .filter(|f| !f.is_dir && f.name.ends_with(".json"))
                    .map(|f| format!("{path}/{}", f.name)),
            );
        } else if e.name.ends_with(".json") {
            files.push(path);
        }
    }
    Ok(files)
}

/// Everything about one node: its records, or why there are none.
async fn read_node(
    api: &NomadApi,
    records_dir: &str,
    plugin: Option<&nomad::CsiPlugin>,
    a: AllocStub,
) -> FleetNode {
    let tasks = tasks_of(&a);
    let mut records = Vec::new();
    let mut problems = Vec::new();
    let mut not_found: Option<String> = None;
    match record_files(api, &a.id, records_dir).await {
        Ok(files) => {
            for file in files {
                match api.cat(&a.id, &file).await {
                    Ok(text) => match nomad_conform_reports::json::parse(&text) {
                        Ok(record) => records.push(NodeRecord { file, record }),
                        Err(e) => problems.push(NodeProblem {
                            kind: NodeProblemKind::BadRecord,
                            message: format!("{file} is not a run record: {e}"),
                        }),
                    },
                    Err(e) if e.is_not_found() => problems.push(NodeProblem {
                        kind: NodeProblemKind::BadRecord,
                        message: format!("{file} was listed but could not be read: {e}"),
                    }),
                    Err(e) => problems.push(NodeProblem {
                        kind: NodeProblemKind::Unreadable,
                        message: format!("failed to read {file}: {e}"),
                    }),
                }
            }
        }
        Err(e) if e.is_not_found() => not_found = Some(e.to_string()),
        Err(e) => problems.push(NodeProblem {
            kind: NodeProblemKind::Unreadable,
            message: format!("failed to list {records_dir}: {e}"),
        }),
    }
    let status = a.client_status.as_str();
    let state = {
        let mut s = format!("the allocation is {status}");
        if !a.client_description.is_empty() {
            s.push_str(&format!(" ({})", a.client_description));
        }
        let t = tasks_sentence(&tasks);
        if !t.is_empty() {
            s.push_str(&format!("; {t}"));
        }
        s
    };
    let where_ = match &not_found {
        Some(e) => format!("no {records_dir} in it ({e})"),
        None => format!("no record in {records_dir}"),
    };
    let unreadable = problems
        .iter()
        .any(|p| p.kind == NodeProblemKind::Unreadable);
    if records.is_empty() && !unreadable {
        let (kind, message) = match status {
            "lost" | "unknown" => (
                NodeProblemKind::Lost,
                format!("{state}: its node is down or disconnected; {where_}"),
            ),
            "pending" | "running" => (
                NodeProblemKind::NotFinished,
                format!("{state}: it has not finished; {where_} yet"),
            ),
            _ => (NodeProblemKind::NoRecord, format!("{state}; {where_}")),
        };
        problems.insert(0, NodeProblem { kind, message });
    } else if matches!(status, "pending" | "running") {
        problems.insert(
            0,
            NodeProblem {
                kind: NodeProblemKind::NotFinished,
                message: format!("{state}: it has not finished; its records may be partial"),
            },
        );
    }
    // The CSI node plugin the job tested: a node where it has no healthy allocation had
    // nothing to test (the job's csi task says so and exits 3); the row says why.
    if let Some(p) = plugin
        && let Err(why) = p.healthy_on(&a.node_id)
    {
        problems.push(NodeProblem {
            kind: NodeProblemKind::NoRecord,
            message: format!("{why}: no CSI run on this node"),
        });
    }
    FleetNode {
        node_id: a.node_id.clone(),
        node_name: a.node_name.clone(),
        allocation: Allocation {
            id: a.id.clone(),
            task_group: a.task_group.clone(),
            client_status: a.client_status.clone(),
            client_description: a.client_description.clone(),
            job_version: a.job_version,
            create_index: a.create_index,
            tasks,
        },
        records,
        problems,
    }
}

/// `fleet collect`: collect, write the reports asked for, print the table; the exit status.
pub async fn run(
    opts: &CollectOptions,
    files: &crate::cli::ReportFiles,
    output: crate::console::Output,
) -> Result<i32, HarnessError> {
    use nomad_conform_reports::fleet::{render_html, render_json, render_junit, render_text};
    let fleet = collect(opts).await?;
    let mut first_error = None;
    let renders: [(&Option<std::path::PathBuf>, &str, Result<String, String>); 3] = [
        (
            &files.junit,
            "JUnit",
            render_junit(&fleet).map_err(|e| e.to_string()),
        ),
        (
            &files.html,
            "HTML",
            render_html(&fleet).map_err(|e| e.to_string()),
        ),
        (
            &files.json,
            "JSON",
            render_json(&fleet).map_err(|e| e.to_string()),
        ),
    ];
    for (path, what, text) in renders {
        let Some(path) = path else { continue };
        let written = text.and_then(|t| {
            nomad_conform_reports::write_atomically(path, &t).map_err(|e| e.to_string())
        });
        if let Err(e) = written {
            let e = HarnessError::Internal(format!(
                "failed to write the fleet {what} report {}: {e}",
                path.display()
            ));
            eprintln!(
                "{}",
                crate::console::shown(&format!("nomad-conform: error: {e}"))
            );
            first_error.get_or_insert(e);
        }
    }
    let text = crate::console::shown(&render_text(&fleet));
    if output.quiet {
        println!("{}", text.lines().last().unwrap_or(""));
    } else {
        println!("{text}");
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(exit_code(&fleet)),
    }
}
