//! The Controller service: provisioning (directories under `<state-dir>/volumes`, or image
//! files for block volumes), attachment bookkeeping, snapshots, clones, expansion and
//! modification.
//!
//! Group snapshots are the GroupController service's (`group_controller.rs`); their members
//! are ordinary snapshots here, except that DeleteSnapshot refuses them.
//!
//! Capacity is bookkeeping: a directory has no size, so each volume records the capacity it
//! was given, and the plugin pretends to have [`TOTAL_CAPACITY_BYTES`] to hand out. A block
//! volume's image is exactly that long, but sparse: it takes room only for what is written.
//!
//! Calls that change a volume hold that volume's lock (see `locks.rs`); CreateVolume and
//! CreateSnapshot hold a lock on the requested name, so concurrent calls with one name make
//! one volume or snapshot, and all of them get it back.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nomad_conform_proto::csi::v1::controller_server::Controller;
use nomad_conform_proto::csi::v1::controller_service_capability::rpc::Type as RpcType;
use nomad_conform_proto::csi::v1::controller_service_capability::{self, Rpc};
use nomad_conform_proto::csi::v1::validate_volume_capabilities_response::Confirmed;
use nomad_conform_proto::csi::v1::volume_content_source::{self, SnapshotSource, VolumeSource};
use nomad_conform_proto::csi::v1::{
    self as csi, ControllerExpandVolumeRequest, ControllerExpandVolumeResponse,
    ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse,
    ControllerGetVolumeRequest, ControllerGetVolumeResponse, ControllerModifyVolumeRequest,
    ControllerModifyVolumeResponse, ControllerPublishVolumeRequest,
    ControllerPublishVolumeResponse, ControllerServiceCapability, ControllerUnpublishVolumeRequest,
    ControllerUnpublishVolumeResponse, CreateSnapshotRequest, CreateSnapshotResponse,
    CreateVolumeRequest, CreateVolumeResponse, DeleteSnapshotRequest, DeleteSnapshotResponse,
    DeleteVolumeRequest, DeleteVolumeResponse, GetCapacityRequest, GetCapacityResponse,
    GetSnapshotRequest, GetSnapshotResponse, ListSnapshotsRequest, ListSnapshotsResponse,
    ListVolumesRequest, ListVolumesResponse, ValidateVolumeCapabilitiesRequest,
    ValidateVolumeCapabilitiesResponse, VolumeContentSource, controller_get_volume_response,
    list_snapshots_response, list_volumes_response,
};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use crate::faults::{Fault, Faults};
use crate::locks::LockKey;
use crate::plugin::Plugin;
use crate::state::{AccessType, ContentSource, ControllerPublication, Snapshot, State, Volume};
use crate::{loop_device, rpc, storage};

/// Capacity of a volume created without a capacity_range: 1 GiB.
pub const DEFAULT_VOLUME_BYTES: i64 = 1 << 30;

/// What the plugin pretends to have: 100 GiB, minus what existing volumes were given.
/// Snapshots are not counted.
pub const TOTAL_CAPACITY_BYTES: i64 = 100 << 30;

/// The mutable parameters CreateVolume and ControllerModifyVolume accept, with their allowed
/// values. Anything else is INVALID_ARGUMENT. (Ordinary `parameters` are opaque: any are
/// accepted and recorded.)
pub const MUTABLE_PARAMETERS: &[(&str, &[&str])] = &[("tier", &["standard", "fast"])];

/// Loop devices count 512-byte sectors, so a block volume's capacity is a whole number of
/// them: otherwise its device would be smaller than the capacity answered.
pub const SECTOR_BYTES: i64 = 512;

/// How long the create-races fault waits between looking a name up and recording it.
const RACE_WINDOW: Duration = Duration::from_millis(300);

pub struct ControllerService {
    plugin: Arc<Plugin>,
}

impl ControllerService {
    pub fn new(plugin: Arc<Plugin>) -> Self {
        ControllerService { plugin }
    }

    async fn handle_create_volume(
        &self,
        req: CreateVolumeRequest,
    ) -> Result<CreateVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
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
        let (required, limit) = rpc::capacity_bounds(req.capacity_range.as_ref())?;
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
            };
            return Ok(self.created(&volume, required));
        }

        if faults.has(Fault::CreateRaces) {
            tokio::time::sleep(RACE_WINDOW).await;
        }

        let volume = Volume {
            id: Uuid::new_v4().to_string(),
            name,
            capacity_bytes: capacity,
            parameters,
            mutable_parameters: sorted(&req.mutable_parameters),
            content_source: source,
            access_type,
        };
        let dir = plugin.storage.volume_path(&volume.id, access_type);
        plugin
            .storage
            .make(access_type, dir.clone(), source_path, capacity)
            .await
            .map_err(|err| rpc::internal(&format!("create {}", dir.display()), err))?;
        let saved = plugin.store.update(|s| {
            admit(s, capacity)?;
            s.volumes.insert(volume.id.clone(), volume.clone());
            Ok(())
        });
        if let Err(status) = saved {
            // Best effort: the error that matters is the one we return.
            let _ = plugin.storage.remove(dir).await;
            return Err(status);
        }
        Ok(self.created(&volume, required))
    }

    /// CreateVolume's answer for a volume it made or found, for a request of `required` bytes.
    fn created(&self, volume: &Volume, required: i64) -> CreateVolumeResponse {
        let mut message = volume_message(volume);
        // create-ignores-capacity: report half of what was asked for.
        if self.plugin.faults.has(Fault::CreateIgnoresCapacity) && required > 0 {
            message.capacity_bytes = required / 2;
        }
        CreateVolumeResponse {
            volume: Some(message),
        }
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
        let fits = (required == 0 || capacity >= required) && (limit == 0 || capacity <= limit);
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

    async fn handle_delete_volume(
        &self,
        req: DeleteVolumeRequest,
    ) -> Result<DeleteVolumeResponse, Status> {
        let plugin = &*self.plugin;
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
    /// publication records: left by a node call that failed halfway or by a plugin that died
    /// between attaching and saving. Recorded devices stay (they are only there when the
    /// delete-in-use-ok fault deletes a volume in use).
    fn detach_leftover_devices(&self, image: &std::path::Path) -> Result<(), Status> {
        // block-keeps-device: never detach.
        if self.plugin.faults.has(Fault::BlockKeepsDevice) {
            return Ok(());
        }
        let recorded = self.plugin.store.read(State::recorded_loop_devices);
        let attached = loop_device::attached_to(image)
            .map_err(|err| rpc::internal("list the loop devices", err))?;
        for device in attached {
            if recorded.iter().any(|r| std::path::Path::new(r) == device) {
                continue;
            }
            loop_device::detach(&device).map_err(|err| {
                rpc::internal(&format!("detach the leftover {}", device.display()), err)
            })?;
        }
        Ok(())
    }

    async fn handle_publish(
        &self,
        req: ControllerPublishVolumeRequest,
    ) -> Result<ControllerPublishVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        let node = req.node_id.as_str();
        rpc::require(faults, id, "volume_id")?;
        rpc::require(faults, node, "node_id")?;
        let capability =
            rpc::required_capability(faults, &req.volume_capability, "volume_capability")?;
        let mut reply = ControllerPublishVolumeResponse {
            publish_context: HashMap::from([
                ("node_id".to_string(), node.to_string()),
                ("readonly".to_string(), req.readonly.to_string()),
            ]),
        };
        // publish-context-changes: a fresh attachment id in every answer, so a retry's
        // publish_context differs from the first one.
        if faults.has(Fault::PublishContextChanges) {
            reply
                .publish_context
                .insert("attachment_id".to_string(), Uuid::new_v4().to_string());
        }
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;

        let Some(volume) = plugin.store.read(|s| s.volumes.get(id).cloned()) else {
            if faults.has(Fault::PublishUnknownVolumeOk) {
                return Ok(reply);
            }
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        };
        // A capability of the other access type. The ControllerPublishVolume table has no row
        // for it, so the general one applies: "Invalid or unsupported field in the request",
        // 3 INVALID_ARGUMENT.
        if let Some(message) = rpc::access_type_mismatch(id, volume.access_type, &capability) {
            return Err(Status::invalid_argument(message));
        }
        if node != plugin.config.node_id && !faults.has(Fault::PublishUnknownNodeOk) {
            return Err(Status::not_found(format!(
                "node {node:?} does not exist: this plugin serves node {:?}",
                plugin.config.node_id
            )));
        }
        let publication = ControllerPublication {
            volume_id: id.to_string(),
            node_id: node.to_string(),
            capability,
            readonly: req.readonly,
        };
        let max = plugin.config.max_volumes_per_node;
        plugin.store.update(|s| {
            let publications = &mut s.controller_publications;
            if let Some(existing) = publications
                .iter_mut()
                .find(|p| p.volume_id == id && p.node_id == node)
            {
                if *existing == publication {
                    return Ok(()); // A retry: already done.
                }
                if !faults.has(Fault::PublishIncompatibleOk) {
                    return Err(Status::already_exists(format!(
                        "volume {id:?} is already published to node {node:?} with another \
                         capability or readonly flag"
                    )));
                }
                *existing = publication;
                return Ok(());
            }
            let single_node = !publication.capability.access_mode.is_multi_node();
            if let Some(other) = publications.iter().find(|p| {
                p.volume_id == id && (single_node || !p.capability.access_mode.is_multi_node())
            }) {
                return Err(Status::failed_precondition(format!(
                    "volume {id:?} is already published to node {:?} and its access mode \
                     allows only one node",
                    other.node_id
                )));
            }
            let on_node = publications.iter().filter(|p| p.node_id == node).count();
            if max > 0
                && i64::try_from(on_node).unwrap_or(i64::MAX) >= max
                && !faults.has(Fault::PublishIgnoresMaxVolumes)
            {
                return Err(Status::resource_exhausted(format!(
                    "node {node:?} already has {on_node} published volumes, its maximum"
                )));
            }
            publications.push(publication);
            Ok(())
        })?;
        Ok(reply)
    }

    async fn handle_unpublish(
        &self,
        req: ControllerUnpublishVolumeRequest,
    ) -> Result<ControllerUnpublishVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let id = req.volume_id.as_str();
        let node = req.node_id.as_str();
        rpc::require(&plugin.faults, id, "volume_id")?;
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;

        // An empty node_id means every node. An unknown volume or node is simply not
        // published, which is what the caller wants: OK.
        let matches =
            |p: &ControllerPublication| p.volume_id == id && (node.is_empty() || p.node_id == node);
        let published = plugin
            .store
            .read(|s| s.controller_publications.iter().any(matches));
        if !published {
            if plugin.faults.has(Fault::ControllerUnpublishNotIdempotent) {
                return Err(Status::internal(format!(
                    "volume {id:?} is not published to node {node:?}"
                )));
            }
            return Ok(ControllerUnpublishVolumeResponse {});
        }
        plugin.store.update(|s| {
            s.controller_publications.retain(|p| !matches(p));
            Ok(())
        })?;
        Ok(ControllerUnpublishVolumeResponse {})
    }

    fn handle_validate(
        &self,
        req: ValidateVolumeCapabilitiesRequest,
    ) -> Result<ValidateVolumeCapabilitiesResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        rpc::require(faults, id, "volume_id")?;
        if !faults.has(Fault::ValidateAcceptsMissingCapabilities) {
            rpc::require_field(
                faults,
                !req.volume_capabilities.is_empty(),
                "volume_capabilities (at least one capability)",
            )?;
        }
        let volume = plugin.store.read(|s| s.volumes.get(id).cloned());
        if volume.is_none() && !faults.has(Fault::ValidateUnknownOk) {
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        }

        // Confirm only if everything asked for is supported; otherwise say why not.
        let mut problems: Vec<String> = req
            .volume_capabilities
            .iter()
            .filter_map(|c| match rpc::parse_capability(c) {
                Err(status) => Some(status.message().to_string()),
                // A block volume is only ever a device, a mount volume only a directory.
                Ok(capability) => volume
                    .as_ref()
                    .and_then(|v| rpc::access_type_mismatch(id, v.access_type, &capability)),
            })
            .collect();
        if let Some(volume) = &volume
            && !req.parameters.is_empty()
            && sorted(&req.parameters) != volume.parameters
        {
            problems.push("parameters differ from those the volume was created with".into());
        }
        if let Err(status) = check_mutable_parameters(&req.mutable_parameters) {
            problems.push(status.message().to_string());
        }
        if faults.has(Fault::ValidateNotConfirmed) {
            problems.push("nothing is confirmed (validate-not-confirmed fault)".into());
        }
        if !problems.is_empty() {
            return Ok(ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: problems.join("; "),
            });
        }
        Ok(ValidateVolumeCapabilitiesResponse {
            confirmed: Some(Confirmed {
                volume_context: req.volume_context,
                volume_capabilities: req.volume_capabilities,
                parameters: req.parameters,
                mutable_parameters: req.mutable_parameters,
            }),
            message: String::new(),
        })
    }

    fn handle_list_volumes(&self, req: ListVolumesRequest) -> Result<ListVolumesResponse, Status> {
        let plugin = &*self.plugin;
        let items = plugin.store.read(|s| {
            s.volumes
                .values()
                .map(|v| {
                    let entry = list_volumes_response::Entry {
                        volume: Some(volume_message(v)),
                        status: Some(list_volumes_response::VolumeStatus {
                            published_node_ids: s.published_node_ids(&v.id),
                            volume_condition: None,
                        }),
                    };
                    (v.id.clone(), entry)
                })
                .collect()
        });
        let (entries, next_token) =
            rpc::page(&plugin.faults, items, req.max_entries, &req.starting_token)?;
        Ok(ListVolumesResponse {
            entries,
            next_token,
        })
    }

    fn handle_get_capacity(&self, req: GetCapacityRequest) -> GetCapacityResponse {
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
        GetCapacityResponse {
            available_capacity: available,
            maximum_volume_size: Some(available),
            minimum_volume_size: None,
        }
    }

    async fn handle_create_snapshot(
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

    async fn handle_delete_snapshot(
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

    fn handle_get_snapshot(&self, req: GetSnapshotRequest) -> Result<GetSnapshotResponse, Status> {
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

    fn handle_list_snapshots(
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
        let (entries, next_token) =
            rpc::page(&plugin.faults, items, req.max_entries, &req.starting_token)?;
        Ok(ListSnapshotsResponse {
            entries,
            next_token,
        })
    }

    async fn handle_expand(
        &self,
        req: ControllerExpandVolumeRequest,
    ) -> Result<ControllerExpandVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        rpc::require(faults, id, "volume_id")?;
        rpc::require_field(faults, req.capacity_range.is_some(), "capacity_range")?;
        let (required, limit) = rpc::capacity_bounds(req.capacity_range.as_ref())?;
        rpc::require_field(
            faults,
            required > 0 || limit > 0,
            "capacity_range.required_bytes or capacity_range.limit_bytes",
        )?;
        let capability = req
            .volume_capability
            .as_ref()
            .map(rpc::parse_capability)
            .transpose()?;
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;

        let wanted = if required > 0 { required } else { limit };
        let Some(volume) = plugin.store.read(|s| s.volumes.get(id).cloned()) else {
            if faults.has(Fault::ExpandUnknownOk) {
                return Ok(ControllerExpandVolumeResponse {
                    capacity_bytes: wanted,
                    node_expansion_required: false,
                });
            }
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        };
        // The spec's ControllerExpandVolume table: "Exceeds capabilities", 3 INVALID_ARGUMENT.
        if let Some(message) = capability
            .as_ref()
            .and_then(|c| rpc::access_type_mismatch(id, volume.access_type, c))
        {
            return Err(Status::invalid_argument(message));
        }
        let current = volume.capacity_bytes;
        // Volumes only grow: a request the volume already satisfies changes nothing.
        // (expand-shrinks follows a smaller request down instead.)
        // (expand-ignores-size leaves it as it is, whatever was asked.)
        let new_capacity = if faults.has(Fault::ExpandIgnoresSize) {
            current
        } else if wanted > current || faults.has(Fault::ExpandShrinks) {
            match volume.access_type {
                AccessType::Mount => wanted,
                AccessType::Block => whole_sectors(wanted, required, limit)?,
            }
        } else {
            current
        };
        if new_capacity != current {
            // A block volume's image follows its capacity. It is resized first and put back
            // if the new capacity cannot be recorded.
            let image =
                (volume.access_type == AccessType::Block).then(|| plugin.storage.volume_image(id));
            let resize = |bytes: i64| match &image {
                Some(image) => storage::resize_image(image, bytes),
                None => Ok(()),
            };
            let fits = |s: &State| {
                let others = s.allocated_bytes() - current;
                if new_capacity > TOTAL_CAPACITY_BYTES - others {
                    return Err(Status::out_of_range(format!(
                        "cannot grow volume {id:?} to {new_capacity} bytes: only {} bytes are \
                         available",
                        TOTAL_CAPACITY_BYTES - others
                    )));
                }
                Ok(())
            };
            plugin.store.read(fits)?;
            resize(new_capacity).map_err(|err| rpc::internal("resize the volume image", err))?;
            let saved = plugin.store.update(|s| {
                fits(s)?;
                if let Some(v) = s.volumes.get_mut(id) {
                    v.capacity_bytes = new_capacity;
                }
                Ok(())
            });
            if let Err(status) = saved {
                let _ = resize(current);
                return Err(status);
            }
        }
        // A volume in use on the node gets a NodeExpandVolume too, on every answer, so that a
        // retried call still tells the CO to do it. A block volume always does: its loop
        // devices only see the new size once NodeExpandVolume refreshes them.
        let node_expansion_required =
            volume.access_type == AccessType::Block || plugin.store.read(|s| s.is_used_on_node(id));
        Ok(ControllerExpandVolumeResponse {
            capacity_bytes: new_capacity,
            node_expansion_required,
        })
    }

    async fn handle_modify(
        &self,
        req: ControllerModifyVolumeRequest,
    ) -> Result<ControllerModifyVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        rpc::require(faults, id, "volume_id")?;
        rpc::require_field(
            faults,
            !req.mutable_parameters.is_empty(),
            "mutable_parameters (at least one parameter)",
        )?;
        // modify-accepts-unknown: any key and any value go through.
        if !faults.has(Fault::ModifyAcceptsUnknown) {
            check_mutable_parameters(&req.mutable_parameters)?;
        }
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;

        if !plugin.store.read(|s| s.volumes.contains_key(id)) {
            if faults.has(Fault::ModifyUnknownOk) {
                return Ok(ControllerModifyVolumeResponse {});
            }
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        }
        if faults.has(Fault::ModifyRejectsAll) {
            return Err(Status::invalid_argument(format!(
                "volume {id:?} cannot be modified (modify-rejects-all fault)"
            )));
        }
        plugin.store.update(|s| {
            if let Some(volume) = s.volumes.get_mut(id) {
                volume
                    .mutable_parameters
                    .extend(sorted(&req.mutable_parameters));
            }
            Ok(())
        })?;
        Ok(ControllerModifyVolumeResponse {})
    }

    fn handle_get_volume(
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
                    volume: Some(volume_message(volume)),
                    status: Some(controller_get_volume_response::VolumeStatus {
                        published_node_ids: s.published_node_ids(id),
                        volume_condition: None,
                    }),
                })
            })
            .ok_or_else(|| Status::not_found(format!("volume {id:?} does not exist")))
    }
}

/// The controller RPCs this plugin implements. VOLUME_CONDITION is not among them; neither is
/// SINGLE_NODE_MULTI_WRITER (see `rpc::parse_capability`).
fn controller_capabilities() -> Vec<ControllerServiceCapability> {
    [
        RpcType::CreateDeleteVolume,
        RpcType::PublishUnpublishVolume,
        RpcType::ListVolumes,
        RpcType::ListVolumesPublishedNodes,
        RpcType::GetCapacity,
        RpcType::CreateDeleteSnapshot,
        RpcType::ListSnapshots,
        RpcType::CloneVolume,
        RpcType::ExpandVolume,
        RpcType::ModifyVolume,
        RpcType::GetVolume,
        RpcType::GetSnapshot,
    ]
    .into_iter()
    .map(|rpc| ControllerServiceCapability {
        r#type: Some(controller_service_capability::Type::Rpc(Rpc {
            r#type: rpc as i32,
        })),
    })
    .collect()
}

/// The capacity a new volume gets: `required_bytes` if set, else the default (capped by
/// `limit_bytes`), and never less than its content source.
fn choose_capacity(required: i64, limit: i64, source_bytes: i64) -> Result<i64, Status> {
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
fn whole_sectors(capacity: i64, required: i64, limit: i64) -> Result<i64, Status> {
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

/// RESOURCE_EXHAUSTED unless `capacity` more bytes are still available.
fn admit(state: &State, capacity: i64) -> Result<(), Status> {
    let available = TOTAL_CAPACITY_BYTES - state.allocated_bytes();
    if capacity > available {
        return Err(Status::resource_exhausted(format!(
            "not enough capacity: {capacity} bytes requested, {available} available"
        )));
    }
    Ok(())
}

fn check_mutable_parameters(parameters: &HashMap<String, String>) -> Result<(), Status> {
    for (key, value) in sorted(parameters) {
        let Some((_, allowed)) = MUTABLE_PARAMETERS.iter().find(|(k, _)| *k == key) else {
            let known: Vec<&str> = MUTABLE_PARAMETERS.iter().map(|(k, _)| *k).collect();
            return Err(Status::invalid_argument(format!(
                "mutable parameter {key:?} is not supported (supported: {})",
                known.join(", ")
            )));
        };
        if !allowed.contains(&value.as_str()) {
            return Err(Status::invalid_argument(format!(
                "mutable parameter {key:?} must be one of {}, got {value:?}",
                allowed.join(", ")
            )));
        }
    }
    Ok(())
}

fn content_source(
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

pub fn sorted(map: &HashMap<String, String>) -> BTreeMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn volume_message(volume: &Volume) -> csi::Volume {
    let content_source = volume
        .content_source
        .as_ref()
        .map(|source| VolumeContentSource {
            r#type: Some(match source {
                ContentSource::Snapshot(id) => {
                    volume_content_source::Type::Snapshot(SnapshotSource {
                        snapshot_id: id.clone(),
                    })
                }
                ContentSource::Volume(id) => volume_content_source::Type::Volume(VolumeSource {
                    volume_id: id.clone(),
                }),
            }),
        });
    csi::Volume {
        capacity_bytes: volume.capacity_bytes,
        volume_id: volume.id.clone(),
        volume_context: HashMap::new(),
        content_source,
        accessible_topology: Vec::new(),
    }
}

/// A snapshot as CreateSnapshot, GetSnapshot, ListSnapshots and the group calls answer it.
pub fn snapshot_message(snapshot: &Snapshot) -> csi::Snapshot {
    csi::Snapshot {
        size_bytes: snapshot.size_bytes,
        snapshot_id: snapshot.id.clone(),
        source_volume_id: snapshot.source_volume_id.clone(),
        creation_time: Some(prost_types::Timestamp {
            seconds: snapshot.created_seconds,
            nanos: snapshot.created_nanos,
        }),
        // Copies are complete when CreateSnapshot returns.
        ready_to_use: true,
        group_snapshot_id: snapshot.group_snapshot_id.clone(),
    }
}

/// Now, as seconds and nanoseconds since the Unix epoch: a snapshot's creation time.
pub fn now() -> (i64, i32) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (
        i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
        i32::try_from(now.subsec_nanos()).unwrap_or(0),
    )
}

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("name={:?}", req.name);
        let result = self.handle_create_volume(req).await;
        rpc::finish(&self.plugin.faults, "CreateVolume", &subject, result)
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?}", req.volume_id);
        let result = self.handle_delete_volume(req).await;
        rpc::finish(&self.plugin.faults, "DeleteVolume", &subject, result)
    }

    async fn controller_publish_volume(
        &self,
        request: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?} node={:?}", req.volume_id, req.node_id);
        let result = self.handle_publish(req).await;
        rpc::finish(
            &self.plugin.faults,
            "ControllerPublishVolume",
            &subject,
            result,
        )
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?} node={:?}", req.volume_id, req.node_id);
        let result = self.handle_unpublish(req).await;
        rpc::finish(
            &self.plugin.faults,
            "ControllerUnpublishVolume",
            &subject,
            result,
        )
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?}", req.volume_id);
        let result = self.handle_validate(req);
        rpc::finish(
            &self.plugin.faults,
            "ValidateVolumeCapabilities",
            &subject,
            result,
        )
    }

    async fn list_volumes(
        &self,
        request: Request<ListVolumesRequest>,
    ) -> Result<Response<ListVolumesResponse>, Status> {
        let result = self.handle_list_volumes(request.into_inner());
        rpc::finish(&self.plugin.faults, "ListVolumes", "", result)
    }

    async fn get_capacity(
        &self,
        request: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        let reply = self.handle_get_capacity(request.into_inner());
        rpc::finish(&self.plugin.faults, "GetCapacity", "", Ok(reply))
    }

    async fn controller_get_capabilities(
        &self,
        _request: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        let result = if self.plugin.faults.has(Fault::ControllerCapabilitiesError) {
            Err(Status::internal(
                "failed to list the controller capabilities (controller-capabilities-error fault)",
            ))
        } else {
            Ok(ControllerGetCapabilitiesResponse {
                capabilities: controller_capabilities(),
            })
        };
        rpc::finish(&self.plugin.faults, "ControllerGetCapabilities", "", result)
    }

    async fn create_snapshot(
        &self,
        request: Request<CreateSnapshotRequest>,
    ) -> Result<Response<CreateSnapshotResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("name={:?} source={:?}", req.name, req.source_volume_id);
        let result = self.handle_create_snapshot(req).await;
        rpc::finish(&self.plugin.faults, "CreateSnapshot", &subject, result)
    }

    async fn delete_snapshot(
        &self,
        request: Request<DeleteSnapshotRequest>,
    ) -> Result<Response<DeleteSnapshotResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("snapshot={:?}", req.snapshot_id);
        let result = self.handle_delete_snapshot(req).await;
        rpc::finish(&self.plugin.faults, "DeleteSnapshot", &subject, result)
    }

    async fn list_snapshots(
        &self,
        request: Request<ListSnapshotsRequest>,
    ) -> Result<Response<ListSnapshotsResponse>, Status> {
        let result = self.handle_list_snapshots(request.into_inner());
        rpc::finish(&self.plugin.faults, "ListSnapshots", "", result)
    }

    async fn get_snapshot(
        &self,
        request: Request<GetSnapshotRequest>,
    ) -> Result<Response<GetSnapshotResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("snapshot={:?}", req.snapshot_id);
        let result = self.handle_get_snapshot(req);
        rpc::finish(&self.plugin.faults, "GetSnapshot", &subject, result)
    }

    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?}", req.volume_id);
        let result = self.handle_expand(req).await;
        rpc::finish(
            &self.plugin.faults,
            "ControllerExpandVolume",
            &subject,
            result,
        )
    }

    async fn controller_get_volume(
        &self,
        request: Request<ControllerGetVolumeRequest>,
    ) -> Result<Response<ControllerGetVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?}", req.volume_id);
        let result = self.handle_get_volume(req);
        rpc::finish(&self.plugin.faults, "ControllerGetVolume", &subject, result)
    }

    async fn controller_modify_volume(
        &self,
        request: Request<ControllerModifyVolumeRequest>,
    ) -> Result<Response<ControllerModifyVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?}", req.volume_id);
        let result = self.handle_modify(req).await;
        rpc::finish(
            &self.plugin.faults,
            "ControllerModifyVolume",
            &subject,
            result,
        )
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

    #[test]
    fn only_known_mutable_parameters_pass() {
        let params = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
        assert!(check_mutable_parameters(&params("tier", "fast")).is_ok());
        assert!(check_mutable_parameters(&params("tier", "gold")).is_err());
        assert!(check_mutable_parameters(&params("colour", "blue")).is_err());
        assert!(check_mutable_parameters(&HashMap::new()).is_ok());
    }
}
