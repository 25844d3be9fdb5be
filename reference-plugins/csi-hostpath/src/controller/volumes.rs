//! Volumes: CreateVolume (empty, from a snapshot or a clone; directories or block images),
//! DeleteVolume, ListVolumes, ControllerGetVolume and GetCapacity.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use nomad_conform_proto::csi::v1::{
    self as csi, ControllerGetVolumeRequest, ControllerGetVolumeResponse, CreateVolumeRequest,
    CreateVolumeResponse, DeleteVolumeRequest, DeleteVolumeResponse, GetCapacityRequest,
    GetCapacityResponse, ListVolumesRequest, ListVolumesResponse, VolumeContentSource,
    controller_get_volume_response, list_volumes_response, volume_content_source,
};
use tonic::Status;
use uuid::Uuid;

use super::{
    ControllerService, DEFAULT_VOLUME_BYTES, MAX_SIZE_1GIB, MIN_SIZE_1GIB, RACE_WINDOW,
    SECTOR_BYTES, TOTAL_CAPACITY_BYTES, admit, check_mutable_parameters, sorted, volume_message,
};
use crate::faults::{Fault, Faults};
use crate::locks::LockKey;
use crate::plugin::TOPOLOGY_KEY;
use crate::state::{AccessType, ContentSource, State, Volume};
use crate::variants::Variant;
use crate::{loop_device, rpc};

impl ControllerService {
    pub(super) async fn handle_create_volume(
        &self,
        req: CreateVolumeRequest,
    ) -> Result<CreateVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        // register-only: volumes are made outside the CO and registered with it.
        if plugin.variants.has(Variant::RegisterOnly) {
            return Err(Status::unimplemented(
                "CreateVolume: this plugin does not create volumes (no CREATE_DELETE_VOLUME)",
            ));
        }
        let name = if req.name.is_empty() && faults.has(Fault::CreateAcceptsMissingName) {
            format!("unnamed-{}", Uuid::new_v4())
        } else {
            rpc::require(faults, &req.name, "name")?;
            req.name.clone()
        };
        rpc::require_field(
            faults,
            !req.volume_capabilities.is_empty(),
            "volume_capabilities (at least one capability)",
        )?;
        let capabilities = req
            .volume_capabilities
            .iter()
            .map(rpc::parse_capability)
            .collect::<Result<Vec<_>, _>>()?;
        let access_type = rpc::requested_access_type(&capabilities)?;
        // block-unsupported: a plugin that only does mount volumes.
        if access_type == AccessType::Block && faults.has(Fault::BlockUnsupported) {
            return Err(Status::invalid_argument(
                "block volumes are not supported: use the mount access type \
                 (block-unsupported fault)",
            ));
        }
        plugin.needs_secrets(&req.secrets, "CreateVolume")?;
        let mut range = req.capacity_range;
        if let Some(r) = range.as_mut()
            && r.limit_bytes > 0
            && r.limit_bytes < r.required_bytes
        {
            // create-accepts-bad-range: the limit below the required size is dropped.
            if faults.has(Fault::CreateAcceptsBadRange) {
                r.limit_bytes = 0;
            // bad-range-out-of-range: the spec's "Unsupported capacity_range", 11 OUT_OF_RANGE,
            // rather than the general INVALID_ARGUMENT.
            } else if plugin.variants.has(Variant::BadRangeOutOfRange) {
                return Err(Status::out_of_range(format!(
                    "no volume is at least {} bytes and at most {} bytes",
                    r.required_bytes, r.limit_bytes
                )));
            }
        }
        let (required, limit) = rpc::capacity_bounds(range.as_ref())?;
        // min-size-1gib: the spec's CreateVolume table, "Unsupported capacity_range", 11
        // OUT_OF_RANGE, with the minimum in the message.
        if plugin.variants.has(Variant::MinSize1Gib)
            && (required > 0 && required < MIN_SIZE_1GIB || limit > 0 && limit < MIN_SIZE_1GIB)
        {
            return Err(Status::out_of_range(format!(
                "volumes are at least {MIN_SIZE_1GIB} bytes (1 GiB); the requested range \
                 (required_bytes {required}, limit_bytes {limit}) is below that minimum"
            )));
        }
        super::above_maximum(plugin, required)?;
        // topology: a volume can only be made where this node is; a requisite that leaves it
        // out cannot be met (the spec's table: 8 RESOURCE_EXHAUSTED).
        if plugin.variants.has(Variant::Topology)
            && let Some(requirement) = &req.accessibility_requirements
            && !requirement.requisite.is_empty()
            && !requirement.requisite.iter().any(|t| {
                t.segments
                    .iter()
                    .all(|(k, v)| k == TOPOLOGY_KEY && *v == plugin.config.node_id)
            })
        {
            return Err(Status::resource_exhausted(format!(
                "volumes can only be made accessible from {TOPOLOGY_KEY}={:?}, which the \
                 requisite topologies leave out",
                plugin.config.node_id
            )));
        }
        // Mutable parameters follow ControllerModifyVolume's rule and become the volume's
        // first ones. (create-accepts-unknown-mutable: any key and any value go through.)
        if !faults.has(Fault::CreateAcceptsUnknownMutable) {
            check_mutable_parameters(&req.mutable_parameters)?;
        }
        // create-rejects-mutable: supported ones are refused too.
        if faults.has(Fault::CreateRejectsMutable) && !req.mutable_parameters.is_empty() {
            return Err(Status::invalid_argument(
                "mutable_parameters are not accepted at creation (create-rejects-mutable fault)",
            ));
        }
        // create-ignores-content-source: every volume starts empty, whatever was asked.
        let source = if faults.has(Fault::CreateIgnoresContentSource) {
            None
        } else {
            content_source(faults, req.volume_content_source.as_ref())?
        };
        let parameters = sorted(&req.parameters);

        // create-races: without the name lock, concurrent creates with one name all see "no
        // such volume" and each make their own.
        let _name_lock = if faults.has(Fault::CreateRaces) {
            None
        } else {
            Some(plugin.locks.lock(LockKey::VolumeName(&name)).await)
        };

        // A volume with this name exists: a retry gets it back if it matches the request.
        if !faults.has(Fault::CreateNotIdempotent)
            && let Some(existing) = plugin.store.read(|s| s.volume_by_name(&name).cloned())
        {
            self.check_same_request(
                &existing,
                required,
                limit,
                &parameters,
                source.as_ref(),
                access_type,
            )?;
            return Ok(self.created(&existing, required));
        }

        // Hold the source's lock so it cannot be deleted halfway through the copy.
        let (_source_lock, source_path, source_bytes, source_access) = match &source {
            None => (None, None, 0, access_type),
            Some(ContentSource::Snapshot(id)) => {
                let lock = plugin.locks.lock(LockKey::Snapshot(id)).await;
                let snapshot = plugin
                    .store
                    .read(|s| s.snapshots.get(id).cloned())
                    .ok_or_else(|| {
                        Status::not_found(format!("source snapshot {id:?} does not exist"))
                    })?;
                (
                    Some(lock),
                    Some(plugin.storage.snapshot_path(id, snapshot.access_type)),
                    snapshot.size_bytes,
                    snapshot.access_type,
                )
            }
            Some(ContentSource::Volume(id)) => {
                let lock = plugin.locks.lock(LockKey::Volume(id)).await;
                let volume = plugin
                    .store
                    .read(|s| s.volumes.get(id).cloned())
                    .ok_or_else(|| {
                        Status::not_found(format!("source volume {id:?} does not exist"))
                    })?;
                (
                    Some(lock),
                    Some(plugin.storage.volume_path(id, volume.access_type)),
                    volume.capacity_bytes,
                    volume.access_type,
                )
            }
        };
        // A directory cannot become an image or the other way round. The spec's CreateVolume
        // table: "Source incompatible or not supported", 3 INVALID_ARGUMENT.
        if source_access != access_type {
            return Err(Status::invalid_argument(format!(
                "the content source is a {} volume's data and cannot fill a {} volume",
                source_access.name(),
                access_type.name()
            )));
        }
        let mut capacity = choose_capacity(required, limit, source_bytes)?;
        if access_type == AccessType::Block {
            capacity = whole_sectors(capacity, required, limit)?;
        }
        plugin.store.read(|s| admit(s, capacity))?;

        // create-empty-id: answer as if a volume had been made, with no id, and keep nothing
        // (a volume nobody can name could never be deleted).
        if faults.has(Fault::CreateEmptyId) {
            let volume = Volume {
                id: String::new(),
                name,
                capacity_bytes: capacity,
                parameters,
                mutable_parameters: sorted(&req.mutable_parameters),
                content_source: source,
                access_type,
                loop_device: None,
            };
            return Ok(self.created(&volume, required));
        }

        if faults.has(Fault::CreateRaces) {
            tokio::time::sleep(RACE_WINDOW).await;
        }

        let mut volume = Volume {
            id: Uuid::new_v4().to_string(),
            name,
            capacity_bytes: capacity,
            parameters,
            mutable_parameters: sorted(&req.mutable_parameters),
            content_source: source,
            access_type,
            loop_device: None,
        };
        let dir = plugin.storage.volume_path(&volume.id, access_type);
        plugin
            .storage
            .make(access_type, dir.clone(), source_path, capacity)
            .await
            .map_err(|err| rpc::internal(&format!("create {}", dir.display()), err))?;
        // loop-at-create: a block volume gets its writable loop device now, for its whole
        // life, rather than at each NodeStageVolume. It is recorded with the volume; the node
        // service uses it (node/block.rs) and DeleteVolume detaches it.
        if access_type == AccessType::Block && plugin.variants.has(Variant::LoopAtCreate) {
            match loop_device::attach(&dir, false) {
                Ok(device) => volume.loop_device = Some(device.display().to_string()),
                Err(err) => {
                    let _ = plugin.storage.remove(dir.clone()).await;
                    return Err(rpc::internal(
                        &format!("attach {} to a loop device", dir.display()),
                        err,
                    ));
                }
            }
        }
        let saved = plugin.store.update(|s| {
            admit(s, capacity)?;
            s.volumes.insert(volume.id.clone(), volume.clone());
            Ok(())
        });
        if let Err(status) = saved {
            // Best effort: the error that matters is the one we return.
            if let Some(device) = &volume.loop_device {
                let _ = loop_device::detach(Path::new(device));
            }
            let _ = plugin.storage.remove(dir).await;
            return Err(status);
        }
        Ok(self.created(&volume, required))
    }

    /// CreateVolume's answer for a volume it made or found, for a request of `required` bytes.
    fn created(&self, volume: &Volume, required: i64) -> CreateVolumeResponse {
        let mut message = self.message(volume);
        // create-ignores-capacity: report half of what was asked for.
        if self.plugin.faults.has(Fault::CreateIgnoresCapacity) && required > 0 {
            message.capacity_bytes = required / 2;
        }
        CreateVolumeResponse {
            volume: Some(message),
        }
    }

    /// How a volume is answered (CreateVolume, ListVolumes, ControllerGetVolume):
    /// capacity-unknown reports capacity 0; the topology variant the node it can be reached
    /// from, and the topology-elsewhere fault another one.
    fn message(&self, volume: &Volume) -> csi::Volume {
        let plugin = &*self.plugin;
        let mut message = volume_message(volume);
        if plugin.variants.has(Variant::CapacityUnknown) {
            message.capacity_bytes = 0;
        }
        if plugin.reports_topology() {
            let node = if plugin.faults.has(Fault::TopologyElsewhere) {
                format!("{}-elsewhere", plugin.config.node_id)
            } else {
                plugin.config.node_id.clone()
            };
            message.accessible_topology = vec![csi::Topology {
                segments: HashMap::from([(TOPOLOGY_KEY.to_string(), node)]),
            }];
        }
        message
    }

    /// Whether a CreateVolume retry asks for what `existing` is: ALREADY_EXISTS if not.
    fn check_same_request(
        &self,
        existing: &Volume,
        required: i64,
        limit: i64,
        parameters: &BTreeMap<String, String>,
        source: Option<&ContentSource>,
        access_type: AccessType,
    ) -> Result<(), Status> {
        if existing.access_type != access_type {
            return Err(Status::already_exists(format!(
                "volume named {:?} already exists (id {}) as a {} volume, not {}",
                existing.name,
                existing.id,
                existing.access_type.name(),
                access_type.name()
            )));
        }
        let capacity = existing.capacity_bytes;
        // capacity-unknown: the plugin cannot tell a volume's size, so any range matches.
        let fits = (required == 0 || capacity >= required) && (limit == 0 || capacity <= limit)
            || self.plugin.variants.has(Variant::CapacityUnknown);
        if !fits && !self.plugin.faults.has(Fault::CreateIgnoresCapacityConflict) {
            return Err(Status::already_exists(format!(
                "volume named {:?} already exists (id {}) with {capacity} bytes, outside the \
                 requested range (required_bytes {required}, limit_bytes {limit})",
                existing.name, existing.id
            )));
        }
        if existing.parameters != *parameters {
            return Err(Status::already_exists(format!(
                "volume named {:?} already exists (id {}) with other parameters",
                existing.name, existing.id
            )));
        }
        if existing.content_source.as_ref() != source {
            return Err(Status::already_exists(format!(
                "volume named {:?} already exists (id {}) with another content source",
                existing.name, existing.id
            )));
        }
        Ok(())
    }

    pub(super) async fn handle_delete_volume(
        &self,
        req: DeleteVolumeRequest,
    ) -> Result<DeleteVolumeResponse, Status> {
        let plugin = &*self.plugin;
        if plugin.variants.has(Variant::RegisterOnly) {
            return Err(Status::unimplemented(
                "DeleteVolume: this plugin does not delete volumes (no CREATE_DELETE_VOLUME)",
            ));
        }
        let id = req.volume_id.as_str();
        rpc::require(&plugin.faults, id, "volume_id")?;
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;

        let (volume, in_use) = plugin
            .store
            .read(|s| (s.volumes.get(id).cloned(), s.in_use_reason(id)));
        let Some(volume) = volume else {
            // Deleting what is not there is success: the caller's goal is already reached.
            if plugin.faults.has(Fault::DeleteUnknownNotFound) {
                return Err(Status::not_found(format!("volume {id:?} does not exist")));
            }
            return Ok(DeleteVolumeResponse {});
        };
        if let Some(reason) = in_use
            && !plugin.faults.has(Fault::DeleteInUseOk)
        {
            return Err(Status::failed_precondition(format!(
                "volume {id:?} cannot be deleted: {reason}"
            )));
        }
        // delete-keeps-volume: say it is done, do nothing.
        if plugin.faults.has(Fault::DeleteKeepsVolume) {
            return Ok(DeleteVolumeResponse {});
        }
        let path = plugin.storage.volume_path(id, volume.access_type);
        // A block volume's loop devices go with it, the one it got at CreateVolume under
        // loop-at-create among them.
        if volume.access_type == AccessType::Block {
            self.detach_leftover_devices(&path)?;
        }
        plugin
            .storage
            .remove(path.clone())
            .await
            .map_err(|err| rpc::internal(&format!("remove {}", path.display()), err))?;
        plugin.store.update(|s| {
            s.volumes.remove(id);
            Ok(())
        })?;
        Ok(DeleteVolumeResponse {})
    }

    /// Detaches loop devices still attached to a block volume's image that no stage or
    /// publication records: the device a loop-at-create volume got at CreateVolume (the
    /// volume records it, not a stage), and devices left by a node call that failed halfway
    /// or by a plugin that died between attaching and saving. Devices a stage or publication
    /// records stay (they are only there when the delete-in-use-ok fault deletes a volume in
    /// use).
    fn detach_leftover_devices(&self, image: &Path) -> Result<(), Status> {
        // block-keeps-device: never detach.
        if self.plugin.faults.has(Fault::BlockKeepsDevice) {
            return Ok(());
        }
        let recorded = self.plugin.store.read(State::recorded_loop_devices);
        let attached = loop_device::attached_to(image)
            .map_err(|err| rpc::internal("list the loop devices", err))?;
        for device in attached {
            if recorded.iter().any(|r| Path::new(r) == device) {
                continue;
            }
            loop_device::detach(&device).map_err(|err| {
                rpc::internal(&format!("detach the leftover {}", device.display()), err)
            })?;
        }
        Ok(())
    }

    pub(super) fn handle_list_volumes(
        &self,
        req: ListVolumesRequest,
    ) -> Result<ListVolumesResponse, Status> {
        let plugin = &*self.plugin;
        let items = plugin.store.read(|s| {
            s.volumes
                .values()
                .map(|v| {
                    let entry = list_volumes_response::Entry {
                        volume: Some(self.message(v)),
                        status: Some(list_volumes_response::VolumeStatus {
                            published_node_ids: s.published_node_ids(&v.id),
                            volume_condition: None,
                        }),
                    };
                    (v.id.clone(), entry)
                })
                .collect::<Vec<_>>()
        });
        // list-drops-last-volume: the last volume (by ID) is never listed.
        let mut items = items;
        if plugin.faults.has(Fault::ListDropsLastVolume) {
            items.pop();
        }
        let (entries, next_token) = rpc::page(
            &plugin.faults,
            &plugin.variants,
            items,
            req.max_entries,
            &req.starting_token,
        )?;
        Ok(ListVolumesResponse {
            entries,
            next_token,
        })
    }

    pub(super) fn handle_get_capacity(&self, req: GetCapacityRequest) -> GetCapacityResponse {
        // Capacity for capabilities this plugin cannot serve is zero (block ones too, under
        // block-unsupported).
        let block_unsupported = self.plugin.faults.has(Fault::BlockUnsupported);
        let supported = req
            .volume_capabilities
            .iter()
            .all(|c| match rpc::parse_capability(c) {
                Ok(capability) => {
                    !(block_unsupported && capability.access_type == AccessType::Block)
                }
                Err(_) => false,
            });
        let available = if supported {
            self.plugin
                .store
                .read(|s| (TOTAL_CAPACITY_BYTES - s.allocated_bytes()).max(0))
        } else {
            0
        };
        if self.plugin.faults.has(Fault::GetCapacityNegative) {
            return GetCapacityResponse {
                available_capacity: -1,
                maximum_volume_size: Some(available),
                minimum_volume_size: None,
            };
        }
        let maximum = if self.plugin.variants.has(Variant::MaxSize1Gib) {
            available.min(MAX_SIZE_1GIB)
        } else {
            available
        };
        GetCapacityResponse {
            available_capacity: available,
            maximum_volume_size: Some(maximum),
            minimum_volume_size: self
                .plugin
                .variants
                .has(Variant::MinSize1Gib)
                .then_some(MIN_SIZE_1GIB),
        }
    }

    pub(super) fn handle_get_volume(
        &self,
        req: ControllerGetVolumeRequest,
    ) -> Result<ControllerGetVolumeResponse, Status> {
        let id = req.volume_id.as_str();
        rpc::require(&self.plugin.faults, id, "volume_id")?;
        self.plugin
            .store
            .read(|s| {
                let volume = s.volumes.get(id)?;
                Some(ControllerGetVolumeResponse {
                    volume: Some(self.message(volume)),
                    status: Some(controller_get_volume_response::VolumeStatus {
                        published_node_ids: s.published_node_ids(id),
                        volume_condition: None,
                    }),
                })
            })
            .ok_or_else(|| Status::not_found(format!("volume {id:?} does not exist")))
    }
}

/// The capacity a new volume gets: `required_bytes` if set, else the default (capped by
/// `limit_bytes`), and never less than its content source.
pub(super) fn choose_capacity(required: i64, limit: i64, source_bytes: i64) -> Result<i64, Status> {
    let mut capacity = match (required, limit) {
        (0, 0) => DEFAULT_VOLUME_BYTES,
        (0, limit) => DEFAULT_VOLUME_BYTES.min(limit),
        (required, _) => required,
    };
    if capacity < source_bytes {
        if limit > 0 && limit < source_bytes {
            return Err(Status::out_of_range(format!(
                "the content source holds {source_bytes} bytes, more than limit_bytes {limit}"
            )));
        }
        capacity = source_bytes;
    }
    if capacity > TOTAL_CAPACITY_BYTES {
        return Err(Status::out_of_range(format!(
            "volumes can be at most {TOTAL_CAPACITY_BYTES} bytes, {capacity} were requested"
        )));
    }
    Ok(capacity)
}

/// A block volume's capacity: `capacity` rounded up to whole sectors, or down if that would
/// pass `limit` (as long as it still holds `required`). OUT_OF_RANGE if no whole number of
/// sectors fits the requested range.
pub(super) fn whole_sectors(capacity: i64, required: i64, limit: i64) -> Result<i64, Status> {
    let up = capacity
        .checked_add(SECTOR_BYTES - 1)
        .map(|n| n / SECTOR_BYTES * SECTOR_BYTES)
        .unwrap_or(i64::MAX / SECTOR_BYTES * SECTOR_BYTES);
    if limit == 0 || up <= limit {
        return Ok(up);
    }
    let down = limit / SECTOR_BYTES * SECTOR_BYTES;
    if down > 0 && down >= required {
        return Ok(down);
    }
    Err(Status::out_of_range(format!(
        "a block volume is a whole number of {SECTOR_BYTES}-byte sectors, and none lies \
         between required_bytes {required} and limit_bytes {limit}"
    )))
}

pub(super) fn content_source(
    faults: &Faults,
    source: Option<&VolumeContentSource>,
) -> Result<Option<ContentSource>, Status> {
    let Some(source) = source else {
        return Ok(None);
    };
    match &source.r#type {
        Some(volume_content_source::Type::Snapshot(s)) => {
            rpc::require(
                faults,
                &s.snapshot_id,
                "volume_content_source.snapshot.snapshot_id",
            )?;
            Ok(Some(ContentSource::Snapshot(s.snapshot_id.clone())))
        }
        Some(volume_content_source::Type::Volume(v)) => {
            rpc::require(
                faults,
                &v.volume_id,
                "volume_content_source.volume.volume_id",
            )?;
            Ok(Some(ContentSource::Volume(v.volume_id.clone())))
        }
        None => Err(Status::invalid_argument(
            "volume_content_source names neither a snapshot nor a volume",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_follows_the_range_and_the_source() {
        assert_eq!(
            choose_capacity(0, 0, 0).expect("default"),
            DEFAULT_VOLUME_BYTES
        );
        assert_eq!(choose_capacity(0, 4096, 0).expect("capped"), 4096);
        assert_eq!(choose_capacity(5000, 0, 0).expect("required"), 5000);
        assert_eq!(choose_capacity(100, 0, 7000).expect("source"), 7000);
        assert_eq!(
            choose_capacity(100, 1000, 7000).unwrap_err().code(),
            tonic::Code::OutOfRange
        );
        assert_eq!(
            choose_capacity(TOTAL_CAPACITY_BYTES + 1, 0, 0)
                .unwrap_err()
                .code(),
            tonic::Code::OutOfRange
        );
    }

    #[test]
    fn block_capacity_is_whole_sectors_within_the_range() {
        assert_eq!(whole_sectors(1024, 1024, 0).expect("exact"), 1024);
        assert_eq!(whole_sectors(1000, 1000, 0).expect("up"), 1024);
        assert_eq!(
            whole_sectors(1000, 1000, 1100).expect("up, under the limit"),
            1024
        );
        assert_eq!(
            whole_sectors(1030, 1000, 1030).expect("down to the limit"),
            1024
        );
        assert_eq!(
            whole_sectors(1030, 1030, 1030).unwrap_err().code(),
            tonic::Code::OutOfRange
        );
        assert_eq!(
            whole_sectors(100, 0, 100).unwrap_err().code(),
            tonic::Code::OutOfRange
        );
    }
}
