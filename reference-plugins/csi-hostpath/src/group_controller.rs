//! The GroupController service: volume group snapshots, one snapshot per source volume, cut
//! in one call.
//!
//! A group is recorded in the state with the ids of its member snapshots; the members are
//! ordinary snapshots (directories or images under `<state-dir>/snapshots`) whose `group_snapshot_id`
//! names the group. GetSnapshot and ListSnapshots show them, a volume can be restored from
//! them, and DeleteSnapshot refuses them: they are deleted with their group.
//!
//! CreateVolumeGroupSnapshot holds the name's lock and then every source volume's lock, so the
//! sources cannot be deleted or changed by another call while they are copied. The copies are
//! made one after the other; writes a workload makes to the directories meanwhile are not
//! ordered across volumes (a directory cannot be frozen), so the spec's write-order
//! consistency holds only for volumes nobody writes to during the call.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use nomad_conform_proto::csi::v1::group_controller_server::GroupController;
use nomad_conform_proto::csi::v1::group_controller_service_capability::rpc::Type as RpcType;
use nomad_conform_proto::csi::v1::group_controller_service_capability::{self, Rpc};
use nomad_conform_proto::csi::v1::{
    CreateVolumeGroupSnapshotRequest, CreateVolumeGroupSnapshotResponse,
    DeleteVolumeGroupSnapshotRequest, DeleteVolumeGroupSnapshotResponse,
    GetVolumeGroupSnapshotRequest, GetVolumeGroupSnapshotResponse,
    GroupControllerGetCapabilitiesRequest, GroupControllerGetCapabilitiesResponse,
    GroupControllerServiceCapability, VolumeGroupSnapshot,
};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::controller::{now, snapshot_message, sorted};
use crate::faults::Fault;
use crate::locks::LockKey;
use crate::plugin::Plugin;
use crate::rpc;
use crate::state::{AccessType, GroupSnapshot, Snapshot};

pub struct GroupControllerService {
    plugin: Arc<Plugin>,
}

impl GroupControllerService {
    pub fn new(plugin: Arc<Plugin>) -> Self {
        GroupControllerService { plugin }
    }

    async fn handle_create(
        &self,
        req: CreateVolumeGroupSnapshotRequest,
    ) -> Result<CreateVolumeGroupSnapshotResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let name = if req.name.is_empty() && faults.has(Fault::GroupSnapshotAcceptsMissingName) {
            format!("unnamed-{}", Uuid::new_v4())
        } else {
            rpc::require(faults, &req.name, "name")?;
            req.name.clone()
        };
        rpc::require_field(
            faults,
            !req.source_volume_ids.is_empty(),
            "source_volume_ids (at least one volume)",
        )?;
        let mut seen = BTreeSet::new();
        for id in &req.source_volume_ids {
            if id.is_empty() {
                return Err(Status::invalid_argument(
                    "source_volume_ids holds an empty volume id",
                ));
            }
            if !seen.insert(id.as_str()) {
                return Err(Status::invalid_argument(format!(
                    "source_volume_ids lists volume {id:?} more than once"
                )));
            }
        }
        let parameters = sorted(&req.parameters);
        let _name_lock = plugin.locks.lock(LockKey::GroupSnapshotName(&name)).await;

        // A group with this name exists: a retry gets it back if it asks for the same thing.
        // The sources are compared as a set; their order does not matter.
        if !faults.has(Fault::GroupSnapshotNotIdempotent)
            && let Some((existing, message)) = plugin.store.read(|s| {
                let group = s.group_snapshot_by_name(&name)?;
                Some((group.clone(), group_message(group, &s.snapshots)))
            })
        {
            let same_sources = existing.source_volume_ids.iter().collect::<BTreeSet<_>>()
                == req.source_volume_ids.iter().collect::<BTreeSet<_>>();
            if !same_sources {
                return Err(Status::already_exists(format!(
                    "group snapshot named {name:?} already exists (id {}) for other volumes: {}",
                    existing.id,
                    existing.source_volume_ids.join(", ")
                )));
            }
            if existing.parameters != parameters {
                return Err(Status::already_exists(format!(
                    "group snapshot named {name:?} already exists (id {}) with other parameters",
                    existing.id
                )));
            }
            return Ok(CreateVolumeGroupSnapshotResponse {
                group_snapshot: Some(message),
            });
        }

        let _volume_locks = plugin
            .locks
            .lock_all(&req.source_volume_ids, LockKey::Volume)
            .await;
        let sources: Vec<(i64, AccessType)> = plugin.store.read(|s| {
            req.source_volume_ids
                .iter()
                .map(|id| {
                    s.volumes
                        .get(id)
                        .map(|v| (v.capacity_bytes, v.access_type))
                        .ok_or_else(|| {
                            Status::not_found(format!("source volume {id:?} does not exist"))
                        })
                })
                .collect::<Result<_, _>>()
        })?;

        let (created_seconds, created_nanos) = now();
        let group_id = Uuid::new_v4().to_string();
        let snapshots: Vec<Snapshot> = req
            .source_volume_ids
            .iter()
            .zip(sources)
            .map(|(volume_id, (size_bytes, access_type))| Snapshot {
                id: Uuid::new_v4().to_string(),
                name: format!("{name}/{volume_id}"),
                source_volume_id: volume_id.clone(),
                size_bytes,
                created_seconds,
                created_nanos,
                group_snapshot_id: group_id.clone(),
                access_type,
            })
            .collect();
        let group = GroupSnapshot {
            id: group_id,
            name,
            source_volume_ids: req.source_volume_ids.clone(),
            snapshot_ids: snapshots.iter().map(|s| s.id.clone()).collect(),
            parameters,
            created_seconds,
            created_nanos,
        };

        // Copy every volume; if one copy fails, remove the others: no member is left behind
        // without its group.
        let mut made = Vec::new();
        for snapshot in &snapshots {
            let access = snapshot.access_type;
            let dir = plugin.storage.snapshot_path(&snapshot.id, access);
            let source = plugin
                .storage
                .volume_path(&snapshot.source_volume_id, access);
            let copied = plugin
                .storage
                .make(access, dir.clone(), Some(source), snapshot.size_bytes)
                .await;
            if let Err(err) = copied {
                self.remove_dirs(made).await;
                return Err(rpc::internal(
                    &format!(
                        "copy volume {:?} into the group snapshot",
                        snapshot.source_volume_id
                    ),
                    err,
                ));
            }
            made.push(dir);
        }
        let saved = plugin.store.update(|s| {
            for snapshot in &snapshots {
                s.snapshots.insert(snapshot.id.clone(), snapshot.clone());
            }
            s.group_snapshots.insert(group.id.clone(), group.clone());
            Ok(())
        });
        if let Err(status) = saved {
            self.remove_dirs(made).await;
            return Err(status);
        }
        let by_id = snapshots.into_iter().map(|s| (s.id.clone(), s)).collect();
        Ok(CreateVolumeGroupSnapshotResponse {
            group_snapshot: Some(group_message(&group, &by_id)),
        })
    }

    /// Best effort: the error that matters is the one the caller returns.
    async fn remove_dirs(&self, dirs: Vec<std::path::PathBuf>) {
        for dir in dirs {
            let _ = self.plugin.storage.remove(dir).await;
        }
    }

    fn handle_get(
        &self,
        req: GetVolumeGroupSnapshotRequest,
    ) -> Result<GetVolumeGroupSnapshotResponse, Status> {
        let faults = &self.plugin.faults;
        let id = req.group_snapshot_id.as_str();
        rpc::require(faults, id, "group_snapshot_id")?;
        let found = self.plugin.store.read(|s| {
            let group = s.group_snapshots.get(id)?;
            Some((group.clone(), group_message(group, &s.snapshots)))
        });
        let Some((group, message)) = found else {
            // group-get-unknown-ok: a group that is nothing but the id asked for.
            if faults.has(Fault::GroupGetUnknownOk) {
                return Ok(GetVolumeGroupSnapshotResponse {
                    group_snapshot: Some(VolumeGroupSnapshot {
                        group_snapshot_id: id.to_string(),
                        ..Default::default()
                    }),
                });
            }
            return Err(Status::not_found(format!(
                "group snapshot {id:?} does not exist"
            )));
        };
        check_snapshot_ids(&group, &req.snapshot_ids)?;
        let mut message = message;
        if faults.has(Fault::GroupGetNoSnapshots) {
            message.snapshots.clear();
        }
        Ok(GetVolumeGroupSnapshotResponse {
            group_snapshot: Some(message),
        })
    }

    async fn handle_delete(
        &self,
        req: DeleteVolumeGroupSnapshotRequest,
    ) -> Result<DeleteVolumeGroupSnapshotResponse, Status> {
        let plugin = &*self.plugin;
        let id = req.group_snapshot_id.as_str();
        rpc::require(&plugin.faults, id, "group_snapshot_id")?;
        let _lock = plugin.locks.lock(LockKey::GroupSnapshot(id)).await;

        let Some(group) = plugin.store.read(|s| s.group_snapshots.get(id).cloned()) else {
            // Deleting what is not there is success: the caller's goal is already reached.
            if plugin.faults.has(Fault::GroupDeleteUnknownNotFound) {
                return Err(Status::not_found(format!(
                    "group snapshot {id:?} does not exist"
                )));
            }
            return Ok(DeleteVolumeGroupSnapshotResponse {});
        };
        check_snapshot_ids(&group, &req.snapshot_ids)?;
        if plugin.faults.has(Fault::GroupDeleteKeeps) {
            return Ok(DeleteVolumeGroupSnapshotResponse {});
        }
        // The members' locks: no volume is being restored from one while it goes.
        let _member_locks = plugin
            .locks
            .lock_all(&group.snapshot_ids, LockKey::Snapshot)
            .await;
        for snapshot_id in &group.snapshot_ids {
            let access = plugin.store.read(|s| {
                s.snapshots
                    .get(snapshot_id)
                    .map_or(AccessType::Mount, |snapshot| snapshot.access_type)
            });
            plugin
                .storage
                .remove(plugin.storage.snapshot_path(snapshot_id, access))
                .await
                .map_err(|err| rpc::internal("remove a member snapshot's copy", err))?;
        }
        plugin.store.update(|s| {
            for snapshot_id in &group.snapshot_ids {
                s.snapshots.remove(snapshot_id);
            }
            s.group_snapshots.remove(id);
            Ok(())
        })?;
        Ok(DeleteVolumeGroupSnapshotResponse {})
    }
}

/// GetVolumeGroupSnapshot and DeleteVolumeGroupSnapshot may list the group's snapshots. This
/// plugin does not need the list, so an empty one is accepted; a list that is not exactly the
/// group's members (in any order) is the spec's "snapshot list mismatch": INVALID_ARGUMENT.
fn check_snapshot_ids(group: &GroupSnapshot, snapshot_ids: &[String]) -> Result<(), Status> {
    if snapshot_ids.is_empty() {
        return Ok(());
    }
    let given: BTreeSet<&String> = snapshot_ids.iter().collect();
    let members: BTreeSet<&String> = group.snapshot_ids.iter().collect();
    if given != members {
        return Err(Status::invalid_argument(format!(
            "snapshot_ids do not match group snapshot {:?}, whose snapshots are: {}",
            group.id,
            group.snapshot_ids.join(", ")
        )));
    }
    Ok(())
}

/// A group as the GroupController calls answer it: its members in the order of the sources.
fn group_message(
    group: &GroupSnapshot,
    snapshots: &BTreeMap<String, Snapshot>,
) -> VolumeGroupSnapshot {
    VolumeGroupSnapshot {
        group_snapshot_id: group.id.clone(),
        snapshots: group
            .snapshot_ids
            .iter()
            .filter_map(|id| snapshots.get(id))
            .map(snapshot_message)
            .collect(),
        creation_time: Some(prost_types::Timestamp {
            seconds: group.created_seconds,
            nanos: group.created_nanos,
        }),
        // Every member is a finished copy when CreateVolumeGroupSnapshot returns.
        ready_to_use: true,
    }
}

fn group_capabilities() -> Vec<GroupControllerServiceCapability> {
    vec![GroupControllerServiceCapability {
        r#type: Some(group_controller_service_capability::Type::Rpc(Rpc {
            r#type: RpcType::CreateDeleteGetVolumeGroupSnapshot as i32,
        })),
    }]
}

#[tonic::async_trait]
impl GroupController for GroupControllerService {
    async fn group_controller_get_capabilities(
        &self,
        _request: Request<GroupControllerGetCapabilitiesRequest>,
    ) -> Result<Response<GroupControllerGetCapabilitiesResponse>, Status> {
        let result = if self.plugin.faults.has(Fault::GroupCapabilitiesError) {
            Err(Status::internal(
                "failed to list the group controller capabilities (group-capabilities-error \
                 fault)",
            ))
        } else {
            Ok(GroupControllerGetCapabilitiesResponse {
                capabilities: group_capabilities(),
            })
        };
        rpc::finish(
            &self.plugin.faults,
            "GroupControllerGetCapabilities",
            "",
            result,
        )
    }

    async fn create_volume_group_snapshot(
        &self,
        request: Request<CreateVolumeGroupSnapshotRequest>,
    ) -> Result<Response<CreateVolumeGroupSnapshotResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("name={:?} sources={:?}", req.name, req.source_volume_ids);
        let result = self.handle_create(req).await;
        rpc::finish(
            &self.plugin.faults,
            "CreateVolumeGroupSnapshot",
            &subject,
            result,
        )
    }

    async fn delete_volume_group_snapshot(
        &self,
        request: Request<DeleteVolumeGroupSnapshotRequest>,
    ) -> Result<Response<DeleteVolumeGroupSnapshotResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("group={:?}", req.group_snapshot_id);
        let result = self.handle_delete(req).await;
        rpc::finish(
            &self.plugin.faults,
            "DeleteVolumeGroupSnapshot",
            &subject,
            result,
        )
    }

    async fn get_volume_group_snapshot(
        &self,
        request: Request<GetVolumeGroupSnapshotRequest>,
    ) -> Result<Response<GetVolumeGroupSnapshotResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("group={:?}", req.group_snapshot_id);
        let result = self.handle_get(req);
        rpc::finish(
            &self.plugin.faults,
            "GetVolumeGroupSnapshot",
            &subject,
            result,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(members: &[&str]) -> GroupSnapshot {
        GroupSnapshot {
            id: "g".into(),
            name: "n".into(),
            source_volume_ids: Vec::new(),
            snapshot_ids: members.iter().map(|m| m.to_string()).collect(),
            parameters: BTreeMap::new(),
            created_seconds: 0,
            created_nanos: 0,
        }
    }

    #[test]
    fn snapshot_lists_must_match_when_given() {
        let g = group(&["a", "b"]);
        let ids = |ids: &[&str]| ids.iter().map(|i| i.to_string()).collect::<Vec<_>>();
        assert!(check_snapshot_ids(&g, &[]).is_ok());
        assert!(check_snapshot_ids(&g, &ids(&["b", "a"])).is_ok());
        for wrong in [&["a"][..], &["a", "b", "c"], &["a", "x"]] {
            assert_eq!(
                check_snapshot_ids(&g, &ids(wrong)).unwrap_err().code(),
                tonic::Code::InvalidArgument,
                "{wrong:?}"
            );
        }
    }
}
