//! Snapshots: CreateSnapshot (a recursive copy, or a sparse image copy), DeleteSnapshot,
//! GetSnapshot and ListSnapshots. Group members are listed and answered here too.

use nomad_conform_proto::csi::v1::{
    self as csi, CreateSnapshotRequest, CreateSnapshotResponse, DeleteSnapshotRequest,
    DeleteSnapshotResponse, GetSnapshotRequest, GetSnapshotResponse, ListSnapshotsRequest,
    ListSnapshotsResponse, list_snapshots_response,
};
use tonic::Status;
use uuid::Uuid;

use super::{ControllerService, now, snapshot_message};
use crate::faults::Fault;
use crate::locks::LockKey;
use crate::rpc;
use crate::state::Snapshot;

impl ControllerService {
    pub(super) async fn handle_create_snapshot(
        &self,
        req: CreateSnapshotRequest,
    ) -> Result<CreateSnapshotResponse, Status> {
        let plugin = &*self.plugin;
        let source = req.source_volume_id.as_str();
        rpc::require(&plugin.faults, source, "source_volume_id")?;
        rpc::require(&plugin.faults, &req.name, "name")?;
        let _name_lock = plugin.locks.lock(LockKey::SnapshotName(&req.name)).await;

        if !plugin.faults.has(Fault::SnapshotNotIdempotent)
            && let Some(existing) = plugin
                .store
                .read(|s| s.snapshot_by_name(&req.name).cloned())
        {
            if existing.source_volume_id != source {
                return Err(Status::already_exists(format!(
                    "snapshot named {:?} already exists (id {}) for volume {:?}",
                    existing.name, existing.id, existing.source_volume_id
                )));
            }
            return Ok(self.snapshot_created(&existing));
        }

        let _volume_lock = plugin.locks.lock(LockKey::Volume(source)).await;
        let volume = plugin
            .store
            .read(|s| s.volumes.get(source).cloned())
            .ok_or_else(|| Status::not_found(format!("source volume {source:?} does not exist")))?;
        let (created_seconds, created_nanos) = now();
        let snapshot = Snapshot {
            id: Uuid::new_v4().to_string(),
            name: req.name.clone(),
            source_volume_id: source.to_string(),
            size_bytes: volume.capacity_bytes,
            created_seconds,
            created_nanos,
            group_snapshot_id: String::new(),
            access_type: volume.access_type,
        };
        let dir = plugin
            .storage
            .snapshot_path(&snapshot.id, volume.access_type);
        let source_path = plugin.storage.volume_path(source, volume.access_type);
        plugin
            .storage
            .make(
                volume.access_type,
                dir.clone(),
                Some(source_path),
                volume.capacity_bytes,
            )
            .await
            .map_err(|err| rpc::internal("copy the volume into the snapshot", err))?;
        let saved = plugin.store.update(|s| {
            s.snapshots.insert(snapshot.id.clone(), snapshot.clone());
            Ok(())
        });
        if let Err(status) = saved {
            let _ = plugin.storage.remove(dir).await;
            return Err(status);
        }
        Ok(self.snapshot_created(&snapshot))
    }

    /// CreateSnapshot's answer for a snapshot it cut or found.
    fn snapshot_created(&self, snapshot: &Snapshot) -> CreateSnapshotResponse {
        let mut message = snapshot_message(snapshot);
        if self.plugin.faults.has(Fault::SnapshotNoCreationTime) {
            message.creation_time = None;
        }
        CreateSnapshotResponse {
            snapshot: Some(message),
        }
    }

    pub(super) async fn handle_delete_snapshot(
        &self,
        req: DeleteSnapshotRequest,
    ) -> Result<DeleteSnapshotResponse, Status> {
        let plugin = &*self.plugin;
        let id = req.snapshot_id.as_str();
        rpc::require(&plugin.faults, id, "snapshot_id")?;
        let _lock = plugin.locks.lock(LockKey::Snapshot(id)).await;

        let Some(snapshot) = plugin.store.read(|s| s.snapshots.get(id).cloned()) else {
            if plugin.faults.has(Fault::SnapshotDeleteUnknownNotFound) {
                return Err(Status::not_found(format!("snapshot {id:?} does not exist")));
            }
            return Ok(DeleteSnapshotResponse {});
        };
        // A group's member goes with its group. The spec's DeleteSnapshot table gives
        // "Snapshot is part of a group" the code 3 INVALID_ARGUMENT (the caller must call
        // DeleteVolumeGroupSnapshot instead; retrying cannot help).
        if !snapshot.group_snapshot_id.is_empty() {
            return Err(Status::invalid_argument(format!(
                "snapshot {id:?} is part of group snapshot {:?} and cannot be deleted alone; \
                 use DeleteVolumeGroupSnapshot",
                snapshot.group_snapshot_id
            )));
        }
        plugin
            .storage
            .remove(plugin.storage.snapshot_path(id, snapshot.access_type))
            .await
            .map_err(|err| rpc::internal("remove the snapshot's copy", err))?;
        plugin.store.update(|s| {
            s.snapshots.remove(id);
            Ok(())
        })?;
        Ok(DeleteSnapshotResponse {})
    }

    pub(super) fn handle_get_snapshot(
        &self,
        req: GetSnapshotRequest,
    ) -> Result<GetSnapshotResponse, Status> {
        let faults = &self.plugin.faults;
        let id = req.snapshot_id.as_str();
        rpc::require(faults, id, "snapshot_id")?;
        let found = self.plugin.store.read(|s| {
            let asked = s.snapshots.get(id)?;
            // get-snapshot-wrong: the first other snapshot, if there is one.
            if faults.has(Fault::GetSnapshotWrong)
                && let Some(other) = s.snapshots.values().find(|other| other.id != id)
            {
                return Some(other.clone());
            }
            Some(asked.clone())
        });
        match found {
            Some(snapshot) => Ok(GetSnapshotResponse {
                snapshot: Some(snapshot_message(&snapshot)),
            }),
            // get-snapshot-unknown-ok: a snapshot that is nothing but the id asked for.
            None if faults.has(Fault::GetSnapshotUnknownOk) => Ok(GetSnapshotResponse {
                snapshot: Some(csi::Snapshot {
                    snapshot_id: id.to_string(),
                    ..Default::default()
                }),
            }),
            None => Err(Status::not_found(format!("snapshot {id:?} does not exist"))),
        }
    }

    pub(super) fn handle_list_snapshots(
        &self,
        req: ListSnapshotsRequest,
    ) -> Result<ListSnapshotsResponse, Status> {
        let plugin = &*self.plugin;
        let ignore_filters = plugin.faults.has(Fault::ListSnapshotsIgnoresFilter);
        // Filters that match nothing give an empty list, not an error.
        let wanted = |s: &Snapshot| {
            ignore_filters
                || ((req.snapshot_id.is_empty() || s.id == req.snapshot_id)
                    && (req.source_volume_id.is_empty()
                        || s.source_volume_id == req.source_volume_id))
        };
        // list-snapshots-empty: as if there were none.
        let hide_all = plugin.faults.has(Fault::ListSnapshotsEmpty);
        let items = plugin.store.read(|s| {
            s.snapshots
                .values()
                .filter(|snap| !hide_all && wanted(snap))
                .map(|snap| {
                    let entry = list_snapshots_response::Entry {
                        snapshot: Some(snapshot_message(snap)),
                    };
                    (snap.id.clone(), entry)
                })
                .collect()
        });
        let (entries, next_token) = rpc::page(
            &plugin.faults,
            &plugin.variants,
            items,
            req.max_entries,
            &req.starting_token,
        )?;
        Ok(ListSnapshotsResponse {
            entries,
            next_token,
        })
    }
}
