//! NodeGetVolumeStats and NodeExpandVolume: what a volume uses, and growing it on the node.
//!
//! Both take a path where the volume is staged or published on this node; any other path is
//! NOT_FOUND. Block volumes are answered by `block.rs` (a device's size; refreshing loop
//! devices after the image grew).

use std::path::{Path, PathBuf};

use nix::sys::statvfs::statvfs;
use nomad_conform_proto::csi::v1::volume_usage::Unit;
use nomad_conform_proto::csi::v1::{
    NodeExpandVolumeRequest, NodeExpandVolumeResponse, NodeGetVolumeStatsRequest,
    NodeGetVolumeStatsResponse, VolumeUsage,
};
use tonic::Status;

use super::NodeService;
use crate::controller::SECTOR_BYTES;
use crate::faults::Fault;
use crate::state::{AccessType, Volume};
use crate::variants::Variant;
use crate::{rpc, storage};

impl NodeService {
    pub(super) fn handle_stats(
        &self,
        req: NodeGetVolumeStatsRequest,
    ) -> Result<NodeGetVolumeStatsResponse, Status> {
        let plugin = &*self.plugin;
        let id = req.volume_id.as_str();
        let path = req.volume_path.as_str();
        rpc::require(&plugin.faults, id, "volume_id")?;
        rpc::require(&plugin.faults, path, "volume_path")?;
        let (volume, known_path) = plugin
            .store
            .read(|s| (s.volumes.get(id).cloned(), s.is_volume_path(id, path)));
        let Some(volume) = volume else {
            // stats-unknown-ok: zeros for a volume that is not there.
            if plugin.faults.has(Fault::StatsUnknownOk) {
                return Ok(NodeGetVolumeStatsResponse {
                    usage: vec![usage(Unit::Bytes, 0, 0, 0), usage(Unit::Inodes, 0, 0, 0)],
                    volume_condition: None,
                });
            }
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        };
        // The volume exists but is not staged or published at this path (or the path is
        // gone): the spec's "volume does not exist on the specified path", NOT_FOUND.
        // (stats-ignores-path: report the volume directory's usage instead.)
        let measured = if known_path && Path::new(path).exists() {
            PathBuf::from(path)
        } else if plugin.faults.has(Fault::StatsIgnoresPath) {
            plugin.storage.volume_path(id, volume.access_type)
        } else {
            return Err(Status::not_found(format!(
                "volume {id:?} is not staged or published at {path:?}"
            )));
        };
        if volume.access_type == AccessType::Block {
            return self.block_stats(&volume, &measured);
        }
        // stage-without-mount: nothing is mounted at a staging path, so the volume is
        // measured at its directory (which every bind mount of it would show).
        let staging_path = plugin
            .store
            .read(|s| s.stagings.get(path).is_some_and(|st| st.volume_id == id));
        let measured = if staging_path && plugin.variants.has(Variant::StageWithoutMount) {
            plugin.storage.volume_dir(id)
        } else {
            measured
        };

        let stats = statvfs(&measured)
            .map_err(|err| rpc::internal(&format!("statvfs {}", measured.display()), err))?;
        let fragment = stats.fragment_size();
        let bytes = |blocks: u64| blocks.saturating_mul(fragment);
        let (blocks, free, available) = (
            stats.blocks(),
            stats.blocks_free(),
            stats.blocks_available(),
        );
        let (files, files_free, files_available) =
            (stats.files(), stats.files_free(), stats.files_available());
        let mut bytes_usage = usage(
            Unit::Bytes,
            bytes(available),
            bytes(blocks),
            bytes(blocks.saturating_sub(free)),
        );
        // stats-negative: available bytes as a bad subtraction would make them.
        if plugin.faults.has(Fault::StatsNegative) {
            bytes_usage.available = -1;
        }
        Ok(NodeGetVolumeStatsResponse {
            usage: vec![
                bytes_usage,
                usage(
                    Unit::Inodes,
                    files_available,
                    files,
                    files.saturating_sub(files_free),
                ),
            ],
            volume_condition: None,
        })
    }

    pub(super) fn handle_node_expand(
        &self,
        req: NodeExpandVolumeRequest,
    ) -> Result<NodeExpandVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let id = req.volume_id.as_str();
        let path = req.volume_path.as_str();
        rpc::require(&plugin.faults, id, "volume_id")?;
        rpc::require(&plugin.faults, path, "volume_path")?;
        let (required, _limit) = rpc::capacity_bounds(req.capacity_range.as_ref())?;
        let capability = req
            .volume_capability
            .as_ref()
            .map(rpc::parse_capability)
            .transpose()?;
        let (volume, known_path) = plugin
            .store
            .read(|s| (s.volumes.get(id).cloned(), s.is_volume_path(id, path)));
        let Some(volume) = volume else {
            // node-expand-unknown-ok: confirm whatever was asked for.
            if plugin.faults.has(Fault::NodeExpandUnknownOk) {
                return Ok(NodeExpandVolumeResponse {
                    capacity_bytes: required,
                });
            }
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        };
        // The spec's NodeExpandVolume table: "Exceeds capabilities", 3 INVALID_ARGUMENT.
        if let Some(message) = capability
            .as_ref()
            .and_then(|c| rpc::access_type_mismatch(id, volume.access_type, c))
        {
            return Err(Status::invalid_argument(message));
        }
        if !known_path {
            return Err(Status::not_found(format!(
                "volume {id:?} is not staged or published at {path:?}"
            )));
        }
        // The node side cannot go beyond what the controller gave the volume. A directory has
        // nothing to resize, so it only confirms the controller's bookkeeping; a block
        // volume's loop devices are told that their image grew.
        let mut volume = volume;
        if required > volume.capacity_bytes {
            // node-only: this instance has no controller to have grown the volume; in a split
            // deployment the controller instance did, and the CO calls NodeExpandVolume only
            // after its ControllerExpandVolume succeeded. So the node takes the size it is
            // given over, as the controller instance's bookkeeping would have it.
            if !plugin.variants.has(Variant::NodeOnly) {
                return Err(Status::out_of_range(format!(
                    "volume {id:?} has {} bytes; ControllerExpandVolume must grow it to \
                     {required} first",
                    volume.capacity_bytes
                )));
            }
            volume.capacity_bytes = self.take_over_capacity(&volume, required)?;
        }
        let capacity_bytes = match volume.access_type {
            AccessType::Mount => volume.capacity_bytes,
            AccessType::Block => self.expand_block(&volume, Path::new(path))?,
        };
        Ok(NodeExpandVolumeResponse { capacity_bytes })
    }

    /// node-only: records `required` bytes (whole sectors for a block volume, whose image
    /// grows to it) as the volume's capacity, as the controller instance would have; the new
    /// capacity.
    fn take_over_capacity(&self, volume: &Volume, required: i64) -> Result<i64, Status> {
        let plugin = &*self.plugin;
        let capacity = match volume.access_type {
            AccessType::Mount => required,
            AccessType::Block => {
                let capacity =
                    required.saturating_add(SECTOR_BYTES - 1) / SECTOR_BYTES * SECTOR_BYTES;
                let image = plugin.storage.volume_image(&volume.id);
                storage::resize_image(&image, capacity)
                    .map_err(|err| rpc::internal("resize the volume image", err))?;
                capacity
            }
        };
        plugin.store.update(|s| {
            if let Some(v) = s.volumes.get_mut(&volume.id) {
                v.capacity_bytes = v.capacity_bytes.max(capacity);
            }
            Ok(())
        })?;
        Ok(capacity)
    }
}

pub(super) fn usage(unit: Unit, available: u64, total: u64, used: u64) -> VolumeUsage {
    let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    VolumeUsage {
        available: signed(available),
        total: signed(total),
        used: signed(used),
        unit: unit as i32,
    }
}
