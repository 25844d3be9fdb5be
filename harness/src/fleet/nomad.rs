//! The Nomad HTTP API calls of the fleet, over the project's one client ([`crate::nomad_api`]).
//! Facts from Nomad's source:
//!
//! - `GET /v1/job/:job_id/allocations?namespace=NS` (command/agent/job_endpoint.go,
//!   jobAllocations; nomad/job_endpoint.go, Job.Allocations): a JSON array of
//!   AllocListStub (nomad/structs/alloc.go), `[]` for a job that does not exist. Without
//!   `all=true` only allocations of the job's current incarnation are listed
//!   (nomad/state/state_store.go, AllocsByJob compares the job's CreateIndex); older versions
//!   of the same job are there, and we keep the newest allocation per node. Fields used: `ID`,
//!   `NodeID`, `NodeName`, `TaskGroup`, `ClientStatus` (pending, running, complete, failed,
//!   lost, unknown), `ClientDescription`, `JobVersion`, `CreateIndex`, `CreateTime` and
//!   `TaskStates` (name -> `State`, `Failed`, `Events[].DisplayMessage`). Needs read-job.
//! - `GET /v1/client/fs/ls/:alloc_id?path=P` (command/agent/fs_endpoint.go,
//!   DirectoryListRequest; api/fs.go, AllocFS.List): a JSON array of AllocFileInfo
//!   (`Name`, `IsDir`, `Size`, `FileMode`, `ModTime`), P relative to the allocation
//!   directory, whose `alloc/` is the task's `${NOMAD_ALLOC_DIR}`. An unknown allocation, a
//!   node Nomad cannot reach, or a missing path answer 404. Needs read-fs.
//! - `GET /v1/client/fs/cat/:alloc_id?path=P` (fs_endpoint.go, FileCatRequest; api/fs.go,
//!   AllocFS.Cat): the file's bytes as the body.
//!
//! - `GET /v1/plugin/csi/:plugin_id` (command/agent/csi_endpoint.go, CSIPluginSpecificRequest;
//!   api/csi.go, CSIPlugin): `Nodes` maps each node ID to the CSIInfo of the plugin's node
//!   instance there (nomad/structs/node.go: `AllocID`, `Healthy`, `HealthDescription`); a
//!   plugin Nomad does not know answers 404 "plugin not found". Needs read-plugin.
//!
//! Every request carries `X-Nomad-Token` when a token is given (api/api.go sets it from
//! NOMAD_TOKEN); errors come back as a status code with a plain-text body
//! (command/agent/http.go, CodedError).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::nomad_api::{ApiError, NomadApi, encode};

/// An allocation as `/v1/job/:job_id/allocations` lists it (the fields we use).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct AllocStub {
    #[serde(rename = "ID")]
    pub id: String,
    #[serde(rename = "NodeID", default)]
    pub node_id: String,
    #[serde(rename = "NodeName", default)]
    pub node_name: String,
    #[serde(rename = "TaskGroup", default)]
    pub task_group: String,
    #[serde(rename = "ClientStatus", default)]
    pub client_status: String,
    #[serde(rename = "ClientDescription", default)]
    pub client_description: String,
    #[serde(rename = "JobVersion", default)]
    pub job_version: u64,
    #[serde(rename = "CreateIndex", default)]
    pub create_index: u64,
    /// Unix nanoseconds.
    #[serde(rename = "CreateTime", default)]
    pub create_time: i64,
    #[serde(rename = "TaskStates", default)]
    pub task_states: Option<BTreeMap<String, TaskState>>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct TaskState {
    #[serde(rename = "State", default)]
    pub state: String,
    #[serde(rename = "Failed", default)]
    pub failed: bool,
    #[serde(rename = "Events", default)]
    pub events: Option<Vec<TaskEvent>>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct TaskEvent {
    #[serde(rename = "Type", default)]
    pub kind: String,
    #[serde(rename = "DisplayMessage", default)]
    pub display_message: String,
}

/// An entry of `/v1/client/fs/ls`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct FileInfo {
    #[serde(rename = "Name")]
    pub name: String,
    #[serde(rename = "IsDir", default)]
    pub is_dir: bool,
}

/// The newest allocation of each node and task group (the highest CreateIndex; Nomad's Raft
/// index only grows), sorted by node name, then node ID and group. Older allocations on a
/// node are earlier runs of the job, not what the node says now.
pub fn newest_per_node(allocs: Vec<AllocStub>) -> Vec<AllocStub> {
    let mut newest: BTreeMap<(String, String), AllocStub> = BTreeMap::new();
    for a in allocs {
        let key = (a.node_id.clone(), a.task_group.clone());
        let newer = match newest.get(&key) {
            None => true,
            Some(old) => {
                (a.create_index, a.create_time, &a.id)
                    > (old.create_index, old.create_time, &old.id)
            }
        };
        if newer {
            newest.insert(key, a);
        }
    }
    let mut out: Vec<AllocStub> = newest.into_values().collect();
    out.sort_by(|a, b| {
        (&a.node_name, &a.node_id, &a.task_group).cmp(&(&b.node_name, &b.node_id, &b.task_group))
    });
    out
}

/// A CSI plugin as `/v1/plugin/csi/:plugin_id` answers it (the fields we use).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct CsiPlugin {
    #[serde(rename = "ID", default)]
    pub id: String,
    /// Node ID -> the node plugin instance there (one per node).
    #[serde(rename = "Nodes", default)]
    pub nodes: Option<BTreeMap<String, CsiInfo>>,
}

/// CSIInfo (nomad/structs/node.go): one instance of a plugin, as its node fingerprints it.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct CsiInfo {
    #[serde(rename = "AllocID", default)]
    pub alloc_id: String,
    #[serde(rename = "Healthy", default)]
    pub healthy: bool,
    #[serde(rename = "HealthDescription", default)]
    pub health_description: String,
}

impl CsiPlugin {
    /// The node plugin instance on `node_id`: `Ok` when it is healthy, else why not.
    pub fn healthy_on(&self, node_id: &str) -> Result<&CsiInfo, String> {
        match self.nodes.as_ref().and_then(|n| n.get(node_id)) {
            None => Err(format!(
                "CSI plugin {:?} has no node plugin allocation on this node",
                self.id
            )),
            Some(i) if !i.healthy => Err(format!(
                "CSI plugin {:?} has no healthy allocation on this node: allocation {} is unhealthy{}",
                self.id,
                i.alloc_id,
                if i.health_description.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", i.health_description)
                }
            )),
            Some(i) => Ok(i),
        }
    }
}

/// The fleet's calls, on the project's Nomad API client.
impl NomadApi {
    /// `GET /v1/job/:job_id/allocations`.
    pub async fn job_allocations(&self, job: &str) -> Result<Vec<AllocStub>, ApiError> {
        let body = self
            .get(&format!("/v1/job/{}/allocations", encode(job)), &[])
            .await?;
        serde_json::from_str(&body).map_err(|e| ApiError::BadAnswer(e.to_string()))
    }

    /// `GET /v1/client/fs/ls/:alloc_id?path=`.
    pub async fn list_dir(&self, alloc: &str, path: &str) -> Result<Vec<FileInfo>, ApiError> {
        let body = self
            .get(
                &format!("/v1/client/fs/ls/{}", encode(alloc)),
                &[("path", path)],
            )
            .await?;
        let files: Option<Vec<FileInfo>> =
            serde_json::from_str(&body).map_err(|e| ApiError::BadAnswer(e.to_string()))?;
        Ok(files.unwrap_or_default())
    }

    /// `GET /v1/client/fs/cat/:alloc_id?path=`.
    pub async fn cat(&self, alloc: &str, path: &str) -> Result<String, ApiError> {
        self.get(
            &format!("/v1/client/fs/cat/{}", encode(alloc)),
            &[("path", path)],
        )
        .await
    }

    /// `GET /v1/plugin/csi/:plugin_id` (needs read-plugin; 404 "plugin not found").
    pub async fn csi_plugin(&self, id: &str) -> Result<CsiPlugin, ApiError> {
        let body = self
            .get(&format!("/v1/plugin/csi/{}", encode(id)), &[])
            .await?;
        serde_json::from_str(&body).map_err(|e| ApiError::BadAnswer(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(id: &str, node: &str, group: &str, index: u64) -> AllocStub {
        AllocStub {
            id: id.into(),
            node_id: format!("{node}-id"),
            node_name: node.into(),
            task_group: group.into(),
            client_status: "complete".into(),
            create_index: index,
            ..AllocStub::default()
        }
    }

    #[test]
    fn keeps_the_newest_allocation_of_each_node() {
        let picked = newest_per_node(vec![
            alloc("b-old", "b", "conform", 10),
            alloc("a-new", "a", "conform", 30),
            alloc("b-new", "b", "conform", 25),
            alloc("a-old", "a", "conform", 12),
            alloc("b-middle", "b", "conform", 20),
        ]);
        let ids: Vec<&str> = picked.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["a-new", "b-new"]);
    }

    #[test]
    fn newest_is_by_create_index_then_time_and_per_task_group() {
        let mut first = alloc("x1", "n", "conform", 5);
        first.create_time = 200;
        let mut second = alloc("x2", "n", "conform", 5);
        second.create_time = 100;
        let other_group = alloc("y", "n", "other", 1);
        let picked = newest_per_node(vec![second, other_group, first]);
        let ids: Vec<&str> = picked.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["x1", "y"]);
        // Two nodes with one name (a node replaced under the same host name) stay apart.
        let mut twin = alloc("z", "n", "conform", 1);
        twin.node_id = "other-id".into();
        assert_eq!(
            newest_per_node(vec![twin, alloc("w", "n", "conform", 9)]).len(),
            2
        );
        assert!(newest_per_node(Vec::new()).is_empty());
    }

    #[test]
    fn reads_nomads_allocation_stubs() {
        let body = r#"[{"ID":"a1","EvalID":"e","Name":"conform-fleet.conform[0]","NodeID":"n1",
            "NodeName":"client-1","JobID":"conform-fleet","JobType":"sysbatch","JobVersion":2,
            "TaskGroup":"conform","DesiredStatus":"run","ClientStatus":"failed",
            "ClientDescription":"Failed tasks","TaskStates":{"dhv":{"State":"dead","Failed":true,
            "Events":[{"Type":"Terminated","DisplayMessage":"Exit Code: 1"}]}},
            "CreateIndex":41,"ModifyIndex":52,"CreateTime":1700000000000000000,"ModifyTime":1}]"#;
        let allocs: Vec<AllocStub> = serde_json::from_str(body).unwrap();
        assert_eq!(allocs[0].node_name, "client-1");
        assert_eq!(allocs[0].create_index, 41);
        let t = &allocs[0].task_states.as_ref().unwrap()["dhv"];
        assert!(t.failed);
        assert_eq!(
            t.events.as_ref().unwrap()[0].display_message,
            "Exit Code: 1"
        );
        let pending: Vec<AllocStub> =
            serde_json::from_str(r#"[{"ID":"a2","TaskStates":null}]"#).unwrap();
        assert!(pending[0].task_states.is_none());
    }

    #[test]
    fn csi_plugin_health_per_node() {
        let body = r#"{"ID":"hostpath","Provider":"csi-hostpath","ControllerRequired":false,
            "Controllers":{},"Nodes":{"n1":{"PluginID":"hostpath","AllocID":"a1","Healthy":true,
            "HealthDescription":"healthy","UpdateTime":"2025-01-01T00:00:00Z"},
            "n2":{"PluginID":"hostpath","AllocID":"a2","Healthy":false,
            "HealthDescription":"failed fingerprinting"}},"Allocations":[],"NodesHealthy":1,
            "NodesExpected":2}"#;
        let p: CsiPlugin = serde_json::from_str(body).unwrap();
        assert_eq!(p.healthy_on("n1").unwrap().alloc_id, "a1");
        let e = p.healthy_on("n2").unwrap_err();
        assert!(
            e.contains("no healthy allocation")
                && e.contains("a2 is unhealthy (failed fingerprinting)"),
            "{e}"
        );
        assert!(
            p.healthy_on("n3")
                .unwrap_err()
                .contains("no node plugin allocation")
        );
    }
}
