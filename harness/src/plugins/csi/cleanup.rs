//! Undoing what a CSI scenario made: each volume, snapshot, controller publication, stage and
//! node publish is registered in the scenario's ledger and undone newest first with the CSI
//! "negation" call (NodeUnpublish before NodeUnstage before ControllerUnpublish before
//! DeleteVolume; a group snapshot before its volumes). NOT_FOUND counts as clean.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use tonic::Code;

use super::{Connection, Rpc, call, pb};
use crate::ledger::{Resource, TeardownOutcome};
use crate::recorder::{CaseHandle, lock};

/// What the undo calls need.
#[derive(Debug)]
pub struct UndoContext {
    pub controller: Arc<Connection>,
    pub node: Arc<Connection>,
    pub secrets: HashMap<String, String>,
    pub deadline: Duration,
    pub case: CaseHandle,
    /// The run's record of what exists: a delete sent here is noted in it first.
    pub known_volumes: Arc<super::known::Known>,
    pub known_snapshots: Arc<super::known::Known>,
}

/// One thing to undo.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Undo {
    DeleteVolume {
        volume_id: String,
    },
    DeleteSnapshot {
        snapshot_id: String,
    },
    DeleteGroupSnapshot {
        group_snapshot_id: String,
        snapshot_ids: Vec<String>,
    },
    ControllerUnpublish {
        volume_id: String,
        node_id: String,
    },
    NodeUnstage {
        volume_id: String,
        staging_path: String,
    },
    NodeUnpublish {
        volume_id: String,
        target_path: String,
    },
}

impl std::fmt::Display for Undo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Undo::DeleteVolume { volume_id } => write!(f, "volume {volume_id:?}"),
            Undo::DeleteSnapshot { snapshot_id } => write!(f, "snapshot {snapshot_id:?}"),
            Undo::DeleteGroupSnapshot {
                group_snapshot_id, ..
            } => write!(f, "group snapshot {group_snapshot_id:?}"),
            Undo::ControllerUnpublish { volume_id, node_id } => {
                write!(f, "publication of volume {volume_id:?} to node {node_id:?}")
            }
            Undo::NodeUnstage {
                volume_id,
                staging_path,
            } => write!(f, "stage of volume {volume_id:?} at {staging_path}"),
            Undo::NodeUnpublish {
                volume_id,
                target_path,
            } => write!(f, "publish of volume {volume_id:?} at {target_path}"),
        }
    }
}

/// A registered undo; `done` is set when a step already undid it.
pub struct Pending {
    pub undo: Undo,
    pub done: Arc<AtomicBool>,
    pub ctx: Arc<UndoContext>,
}

impl Pending {
    async fn run(&self) -> Rpc {
        let c = &self.ctx;
        let d = c.deadline;
        match &self.undo {
            Undo::DeleteVolume { volume_id } => {
                c.known_volumes.deleting(volume_id);
                let req = pb::DeleteVolumeRequest {
                    volume_id: volume_id.clone(),
                    secrets: c.secrets.clone(),
                };
                let mut cl = c.controller.controller();
                call("Controller", "DeleteVolume", req, d, |r| async move {
                    cl.delete_volume(r).await
                })
                .await
                .0
            }
            Undo::DeleteSnapshot { snapshot_id } => {
                c.known_snapshots.deleting(snapshot_id);
                let req = pb::DeleteSnapshotRequest {
                    snapshot_id: snapshot_id.clone(),
                    secrets: c.secrets.clone(),
                };
                let mut cl = c.controller.controller();
                call("Controller", "DeleteSnapshot", req, d, |r| async move {
                    cl.delete_snapshot(r).await
                })
                .await
                .0
            }
            Undo::DeleteGroupSnapshot {
                group_snapshot_id,
                snapshot_ids,
            } => {
                for id in snapshot_ids {
                    c.known_snapshots.deleting(id);
                }
                let req = pb::DeleteVolumeGroupSnapshotRequest {
                    group_snapshot_id: group_snapshot_id.clone(),
                    snapshot_ids: snapshot_ids.clone(),
                    secrets: c.secrets.clone(),
                };
                let mut cl = c.controller.group();
                call(
                    "GroupController",
                    "DeleteVolumeGroupSnapshot",
                    req,
                    d,
                    |r| async move { cl.delete_volume_group_snapshot(r).await },
                )
                .await
                .0
            }
            Undo::ControllerUnpublish { volume_id, node_id } => {
                let req = pb::ControllerUnpublishVolumeRequest {
                    volume_id: volume_id.clone(),
                    node_id: node_id.clone(),
                    secrets: c.secrets.clone(),
                };
                let mut cl = c.controller.controller();
                call(
                    "Controller",
                    "ControllerUnpublishVolume",
                    req,
                    d,
                    |r| async move { cl.controller_unpublish_volume(r).await },
                )
                .await
                .0
            }
            Undo::NodeUnstage {
                volume_id,
                staging_path,
            } => {
                let req = pb::NodeUnstageVolumeRequest {
                    volume_id: volume_id.clone(),
                    staging_target_path: staging_path.clone(),
                };
                let mut cl = c.node.node();
                call("Node", "NodeUnstageVolume", req, d, |r| async move {
                    cl.node_unstage_volume(r).await
                })
                .await
                .0
            }
            Undo::NodeUnpublish {
                volume_id,
                target_path,
            } => {
                let req = pb::NodeUnpublishVolumeRequest {
                    volume_id: volume_id.clone(),
                    target_path: target_path.clone(),
                };
                let mut cl = c.node.node();
                call("Node", "NodeUnpublishVolume", req, d, |r| async move {
                    cl.node_unpublish_volume(r).await
                })
                .await
                .0
            }
        }
    }
}

impl Resource for Pending {
    fn describe(&self) -> String {
        self.undo.to_string()
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        Box::pin(async move {
            if self.done.load(Ordering::SeqCst) {
                return TeardownOutcome::default();
            }
            let rpc = self.run().await;
            let socket = match &self.undo {
                Undo::NodeUnstage { .. } | Undo::NodeUnpublish { .. } => &self.ctx.node.socket,
                _ => &self.ctx.controller.socket,
            };
            {
                let mut state = lock(&self.ctx.case);
                let offset = rpc
                    .started
                    .saturating_duration_since(state.started)
                    .as_millis() as u64;
                let mut ev = rpc.event(offset, socket);
                ev.operation = format!("{} (cleanup)", ev.operation);
                state.events.push(ev);
            }
            match rpc.code {
                Code::Ok | Code::NotFound => TeardownOutcome::default(),
                _ => TeardownOutcome::leak(format!(
                    "cleanup of the {} failed: {}\n    reproduce: {}",
                    self.undo,
                    rpc.outcome(),
                    rpc.reproduce(socket)
                )),
            }
        })
    }
}
