//! ControllerExpandVolume (volumes only grow) and ControllerModifyVolume (the `tier`
//! mutable parameter).

use nomad_conform_proto::csi::v1::{
    ControllerExpandVolumeRequest, ControllerExpandVolumeResponse, ControllerModifyVolumeRequest,
    ControllerModifyVolumeResponse,
};
use tonic::Status;

use super::volumes::whole_sectors;
use super::{ControllerService, TOTAL_CAPACITY_BYTES, check_mutable_parameters, sorted};
use crate::faults::Fault;
use crate::locks::LockKey;
use crate::state::{AccessType, State};
use crate::{rpc, storage};

impl ControllerService {
    pub(super) async fn handle_expand(
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
        // max-size-1gib: growing past the maximum is "Unsupported capacity".
        super::above_maximum(plugin, wanted)?;
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

    pub(super) async fn handle_modify(
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
}
