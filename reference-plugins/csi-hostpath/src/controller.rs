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
//!
//! This file holds the service itself, its capabilities and what the calls share; the calls
//! are in `controller/`: `volumes.rs` (create, delete, list, get, capacity), `publish.rs`
//! (ControllerPublish/Unpublish, ValidateVolumeCapabilities), `snapshots.rs` and `resize.rs`
//! (expansion and modification).

mod publish;
mod resize;
mod snapshots;
mod volumes;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nomad_conform_proto::csi::v1::controller_server::Controller;
use nomad_conform_proto::csi::v1::controller_service_capability::rpc::Type as RpcType;
use nomad_conform_proto::csi::v1::controller_service_capability::{self, Rpc};
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
    ValidateVolumeCapabilitiesResponse, VolumeContentSource,
};
use tonic::{Request, Response, Status};

use crate::faults::Fault;
use crate::plugin::Plugin;
use crate::rpc;
use crate::state::{ContentSource, Snapshot, State, Volume};
use crate::variants::Variant;

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
}

/// Volumes are at least this big under the min-size-1gib variant.
pub const MIN_SIZE_1GIB: i64 = 1 << 30;

/// Volumes are at most this big under the max-size-1gib variant.
pub const MAX_SIZE_1GIB: i64 = 1 << 30;

/// max-size-1gib: the spec's answer to a size above the plugin's maximum, 11 OUT_OF_RANGE
/// ("Unsupported capacity_range" for CreateVolume, "Unsupported capacity" for
/// ControllerExpandVolume), with the maximum in the message.
pub fn above_maximum(plugin: &Plugin, required: i64) -> Result<(), Status> {
    if plugin.variants.has(Variant::MaxSize1Gib) && required > MAX_SIZE_1GIB {
        return Err(Status::out_of_range(format!(
            "volumes are at most {MAX_SIZE_1GIB} bytes (1 GiB); {required} bytes were required"
        )));
    }
    Ok(())
}

/// The controller RPCs this plugin implements. VOLUME_CONDITION is not among them; neither is
/// SINGLE_NODE_MULTI_WRITER (see `rpc::parse_capability`). register-only: no
/// CREATE_DELETE_VOLUME (nor CLONE_VOLUME, which creates); capacity-unknown: no EXPAND_VOLUME; no-publish-readonly: no
/// PUBLISH_READONLY.
fn controller_capabilities(plugin: &Plugin) -> Vec<ControllerServiceCapability> {
    let register_only = plugin.variants.has(Variant::RegisterOnly);
    let capacity_unknown = plugin.variants.has(Variant::CapacityUnknown);
    let no_publish_readonly = plugin.variants.has(Variant::NoPublishReadonly);
    [
        RpcType::CreateDeleteVolume,
        RpcType::PublishUnpublishVolume,
        RpcType::PublishReadonly,
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
    .filter(|rpc| {
        !(register_only && matches!(rpc, RpcType::CreateDeleteVolume | RpcType::CloneVolume)
            || capacity_unknown && *rpc == RpcType::ExpandVolume
            || no_publish_readonly && *rpc == RpcType::PublishReadonly)
    })
    .map(|rpc| ControllerServiceCapability {
        r#type: Some(controller_service_capability::Type::Rpc(Rpc {
            r#type: rpc as i32,
        })),
    })
    .collect()
}

/// RESOURCE_EXHAUSTED unless `capacity` more bytes are still available.
pub fn admit(state: &State, capacity: i64) -> Result<(), Status> {
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
                capabilities: controller_capabilities(&self.plugin),
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
    fn only_known_mutable_parameters_pass() {
        let params = |k: &str, v: &str| HashMap::from([(k.to_string(), v.to_string())]);
        assert!(check_mutable_parameters(&params("tier", "fast")).is_ok());
        assert!(check_mutable_parameters(&params("tier", "gold")).is_err());
        assert!(check_mutable_parameters(&params("colour", "blue")).is_err());
        assert!(check_mutable_parameters(&HashMap::new()).is_ok());
    }
}
