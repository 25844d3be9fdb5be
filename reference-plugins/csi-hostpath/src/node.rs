//! The Node service: staging and publishing volumes on this host with bind mounts.
//!
//! For mount volumes, NodeStageVolume bind-mounts `<state-dir>/volumes/<id>` onto the staging
//! path (once per volume per node), and NodePublishVolume bind-mounts the staging path onto
//! each workload's target path, read-only when asked. Block volumes are staged on a loop
//! device and published by bind-mounting the device node onto a file; that part is in
//! `node/block.rs`. Every stage and publish is recorded with its arguments, so a retry is
//! recognised (OK), a conflicting call is refused (ALREADY_EXISTS), and a mount (or loop
//! device) lost to a reboot is made again when the CO retries.
//!
//! Calls for one volume run one after the other (they hold the volume's lock), as Nomad's own
//! client does.

mod block;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::sys::statvfs::statvfs;
use nomad_conform_proto::csi::v1::node_server::Node;
use nomad_conform_proto::csi::v1::node_service_capability::rpc::Type as RpcType;
use nomad_conform_proto::csi::v1::node_service_capability::{self, Rpc};
use nomad_conform_proto::csi::v1::volume_usage::Unit;
use nomad_conform_proto::csi::v1::{
    NodeExpandVolumeRequest, NodeExpandVolumeResponse, NodeGetCapabilitiesRequest,
    NodeGetCapabilitiesResponse, NodeGetInfoRequest, NodeGetInfoResponse,
    NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse, NodePublishVolumeRequest,
    NodePublishVolumeResponse, NodeServiceCapability, NodeStageVolumeRequest,
    NodeStageVolumeResponse, NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse,
    NodeUnstageVolumeRequest, NodeUnstageVolumeResponse, VolumeUsage,
};
use tonic::{Request, Response, Status};

use crate::faults::Fault;
use crate::locks::LockKey;
use crate::mounts;
use crate::plugin::Plugin;
use crate::rpc;
use crate::state::{AccessType, NodePublication, Staging, Volume};

pub struct NodeService {
    plugin: Arc<Plugin>,
}

impl NodeService {
    pub fn new(plugin: Arc<Plugin>) -> Self {
        NodeService { plugin }
    }

    /// The volume, or NOT_FOUND.
    fn volume(&self, id: &str) -> Result<Volume, Status> {
        self.plugin
            .store
            .read(|s| s.volumes.get(id).cloned())
            .ok_or_else(|| Status::not_found(format!("volume {id:?} does not exist")))
    }

    async fn handle_stage(
        &self,
        req: NodeStageVolumeRequest,
    ) -> Result<NodeStageVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        let path = req.staging_target_path.as_str();
        rpc::require(faults, id, "volume_id")?;
        if path.is_empty() && faults.has(Fault::StageMissingPathOk) {
            return Ok(NodeStageVolumeResponse {});
        }
        rpc::require(faults, path, "staging_target_path")?;
        let capability =
            rpc::required_capability(faults, &req.volume_capability, "volume_capability")?;
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;
        let volume = self.volume(id)?;
        // A capability of the other access type: the spec's NodeStageVolume table, "Exceeds
        // capabilities" (capabilities not supported by the volume), 9 FAILED_PRECONDITION.
        if let Some(message) = rpc::access_type_mismatch(id, volume.access_type, &capability) {
            return Err(Status::failed_precondition(message));
        }
        let volume_dir = plugin.storage.volume_dir(id);

        let staging = Staging {
            volume_id: id.to_string(),
            staging_target_path: path.to_string(),
            capability,
            loop_device: None,
        };
        let (at_path, elsewhere) = plugin.store.read(|s| {
            let elsewhere = s
                .stagings
                .values()
                .find(|other| other.volume_id == id && other.staging_target_path != path)
                .cloned();
            (s.stagings.get(path).cloned(), elsewhere)
        });
        if let Some(existing) = at_path {
            if existing.volume_id != id {
                return Err(Status::already_exists(format!(
                    "staging path {path:?} already holds volume {:?}",
                    existing.volume_id
                )));
            }
            if existing.capability != staging.capability {
                return Err(Status::already_exists(format!(
                    "volume {id:?} is already staged at {path:?} with another capability"
                )));
            }
            if faults.has(Fault::StageNotIdempotent) {
                return Err(Status::already_exists(format!(
                    "volume {id:?} is already staged at {path:?}"
                )));
            }
            // A retry. The mount (or loop device) may have been lost (a reboot): make sure it
            // is there.
            return match volume.access_type {
                AccessType::Mount => ensure_bind(&volume_dir, Path::new(path), &volume_dir, false),
                AccessType::Block => self.stage_block(&volume, existing),
            }
            .map(|()| NodeStageVolumeResponse {});
        }
        if let Some(other) = elsewhere
            && !(staging
                .capability
                .access_mode
                .allows_several_paths_on_a_node()
                && other
                    .capability
                    .access_mode
                    .allows_several_paths_on_a_node())
        {
            return Err(Status::failed_precondition(format!(
                "volume {id:?} is already staged at {:?} on this node, and its access mode \
                 allows one staging path per node",
                other.staging_target_path
            )));
        }

        if volume.access_type == AccessType::Block {
            return self
                .stage_block(&volume, staging)
                .map(|()| NodeStageVolumeResponse {});
        }
        ensure_bind(&volume_dir, Path::new(path), &volume_dir, false)?;
        let saved = plugin.store.update(|s| {
            s.stagings.insert(path.to_string(), staging);
            Ok(())
        });
        if let Err(status) = saved {
            let _ = unmount_volume(Path::new(path), &volume_dir);
            return Err(status);
        }
        Ok(NodeStageVolumeResponse {})
    }

    async fn handle_unstage(
        &self,
        req: NodeUnstageVolumeRequest,
    ) -> Result<NodeUnstageVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let id = req.volume_id.as_str();
        let path = req.staging_target_path.as_str();
        rpc::require(&plugin.faults, id, "volume_id")?;
        rpc::require(&plugin.faults, path, "staging_target_path")?;
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;
        let volume = self.volume(id)?;
        let volume_dir = plugin.storage.volume_dir(id);

        let recorded = plugin.store.read(|s| {
            s.stagings
                .get(path)
                .filter(|st| st.volume_id == id)
                .cloned()
        });
        let mounted = match volume.access_type {
            AccessType::Mount => mounts::is_bind_of(Path::new(path), &volume_dir)
                .map_err(|err| rpc::internal(&format!("inspect {path:?}"), err))?,
            // Nothing is mounted at a block volume's staging path.
            AccessType::Block => false,
        };
        if recorded.is_none() && !mounted {
            // Not staged there: nothing to undo.
            if plugin.faults.has(Fault::UnstageNotIdempotent) {
                return Err(Status::internal(format!(
                    "volume {id:?} is not staged at {path:?}"
                )));
            }
            return Ok(NodeUnstageVolumeResponse {});
        }
        match volume.access_type {
            AccessType::Mount => unmount_volume(Path::new(path), &volume_dir)?,
            // The loop device goes once no other stage or publication uses it.
            AccessType::Block => {
                if let Some(device) = recorded.as_ref().and_then(|st| st.loop_device.as_deref()) {
                    self.release_device(&volume, device, Some(path), None)?;
                }
            }
        }
        // The CO made the staging directory and removes it; only the record goes here.
        if recorded.is_some() {
            plugin.store.update(|s| {
                s.stagings.remove(path);
                Ok(())
            })?;
        }
        Ok(NodeUnstageVolumeResponse {})
    }

    async fn handle_publish(
        &self,
        req: NodePublishVolumeRequest,
    ) -> Result<NodePublishVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        let target = req.target_path.as_str();
        let staging_path = req.staging_target_path.as_str();
        rpc::require(faults, id, "volume_id")?;
        rpc::require(faults, target, "target_path")?;
        let capability =
            rpc::required_capability(faults, &req.volume_capability, "volume_capability")?;
        if staging_path.is_empty() && !faults.has(Fault::NodePublishWithoutStageOk) {
            return Err(Status::failed_precondition(
                "staging_target_path is required: this plugin advertises STAGE_UNSTAGE_VOLUME, \
                 so a volume must be staged before it is published",
            ));
        }
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;
        let volume = self.volume(id)?;
        // A capability of the other access type: the spec's NodePublishVolume table, "Exceeds
        // capabilities" (capabilities not supported by the volume), 9 FAILED_PRECONDITION.
        if let Some(message) = rpc::access_type_mismatch(id, volume.access_type, &capability) {
            return Err(Status::failed_precondition(message));
        }
        let volume_dir = plugin.storage.volume_dir(id);

        // Publishing binds the staging path; without one (only under the fault above), the
        // volume directory itself. (Block volumes bind a device instead; see node/block.rs.)
        let source = if staging_path.is_empty() {
            volume_dir.clone()
        } else {
            let staged = plugin.store.read(|s| {
                s.stagings
                    .get(staging_path)
                    .is_some_and(|st| st.volume_id == id)
            });
            if !staged {
                return Err(Status::failed_precondition(format!(
                    "volume {id:?} is not staged at {staging_path:?}; call NodeStageVolume first"
                )));
            }
            PathBuf::from(staging_path)
        };
        let publication = NodePublication {
            volume_id: id.to_string(),
            target_path: target.to_string(),
            staging_target_path: staging_path.to_string(),
            capability,
            readonly: req.readonly,
            loop_device: None,
            owns_loop_device: false,
        };
        // Reader-only access modes are published read-only whatever `readonly` says.
        let read_only = (req.readonly || publication.capability.access_mode.is_reader_only())
            && !faults.has(Fault::NodePublishIgnoresReadonly);

        let (at_target, elsewhere) = plugin.store.read(|s| {
            let elsewhere = s
                .node_publications
                .values()
                .find(|p| p.volume_id == id && p.target_path != target)
                .cloned();
            (s.node_publications.get(target).cloned(), elsewhere)
        });
        if let Some(existing) = at_target {
            if !existing.same_request(&publication) {
                return Err(Status::already_exists(format!(
                    "target {target:?} is already published (volume {:?}) with other arguments",
                    existing.volume_id
                )));
            }
            if faults.has(Fault::NodePublishNotIdempotent) {
                return Err(Status::already_exists(format!(
                    "volume {id:?} is already published at {target:?}"
                )));
            }
            // A retry. The mount may have been lost (a reboot): make sure it is there.
            if volume.access_type == AccessType::Block {
                return self
                    .publish_block(&volume, existing, read_only, true)
                    .map(|()| NodePublishVolumeResponse {});
            }
            return self
                .mount_target(&source, Path::new(target), &volume_dir, read_only)
                .map(|()| NodePublishVolumeResponse {});
        }
        if let Some(other) = elsewhere {
            // A second target on this node: only for modes that allow several (the spec's
            // second-publish matrix), and then only with the same capability.
            let several_allowed = publication
                .capability
                .access_mode
                .allows_several_paths_on_a_node()
                && other
                    .capability
                    .access_mode
                    .allows_several_paths_on_a_node();
            if !several_allowed && !faults.has(Fault::NodePublishSecondTargetOk) {
                return Err(Status::failed_precondition(format!(
                    "volume {id:?} is already published at {:?} on this node, and its access \
                     mode allows one target per node",
                    other.target_path
                )));
            }
            if other.capability != publication.capability {
                return Err(Status::failed_precondition(format!(
                    "volume {id:?} is already published at {:?} with another capability",
                    other.target_path
                )));
            }
        }

        if volume.access_type == AccessType::Block {
            return self
                .publish_block(&volume, publication, read_only, false)
                .map(|()| NodePublishVolumeResponse {});
        }
        self.mount_target(&source, Path::new(target), &volume_dir, read_only)?;
        let saved = plugin.store.update(|s| {
            s.node_publications.insert(target.to_string(), publication);
            Ok(())
        });
        if let Err(status) = saved {
            let _ = unmount_volume(Path::new(target), &volume_dir);
            return Err(status);
        }
        Ok(NodePublishVolumeResponse {})
    }

    /// Makes a publish target show the volume: [`ensure_bind`] of the staging path (or, without
    /// one, the volume directory) onto `target`.
    fn mount_target(
        &self,
        source: &Path,
        target: &Path,
        volume_dir: &Path,
        read_only: bool,
    ) -> Result<(), Status> {
        // node-publish-no-mount: an empty directory where the volume should be.
        if self.plugin.faults.has(Fault::NodePublishNoMount) {
            return std::fs::create_dir_all(target)
                .map_err(|err| rpc::internal(&format!("create {}", target.display()), err));
        }
        ensure_bind(source, target, volume_dir, read_only)
    }

    async fn handle_unpublish(
        &self,
        req: NodeUnpublishVolumeRequest,
    ) -> Result<NodeUnpublishVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        let target = req.target_path.as_str();
        rpc::require(faults, id, "volume_id")?;
        rpc::require(faults, target, "target_path")?;
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;
        let volume = self.volume(id)?;
        let volume_dir = plugin.storage.volume_dir(id);

        let recorded = plugin.store.read(|s| {
            s.node_publications
                .get(target)
                .filter(|p| p.volume_id == id)
                .cloned()
        });
        let mounted = match volume.access_type {
            AccessType::Mount => mounts::is_bind_of(Path::new(target), &volume_dir)
                .map_err(|err| rpc::internal(&format!("inspect {target:?}"), err))?,
            AccessType::Block => self
                .bound_at(&volume, Path::new(target), recorded.as_ref())?
                .is_some(),
        };
        if recorded.is_none() && !mounted {
            // Not published there: nothing to undo.
            if faults.has(Fault::NodeUnpublishNotIdempotent) {
                return Err(Status::internal(format!(
                    "volume {id:?} is not published at {target:?}"
                )));
            }
            return Ok(NodeUnpublishVolumeResponse {});
        }
        // node-unpublish-keeps-mount: forget the publication but leave the mount behind.
        let keep = faults.has(Fault::NodeUnpublishKeepsMount);
        match volume.access_type {
            _ if keep => {}
            // The device's file, and the devices nothing else needs.
            AccessType::Block => {
                self.unpublish_block(&volume, Path::new(target), recorded.as_ref())?;
            }
            AccessType::Mount => {
                unmount_volume(Path::new(target), &volume_dir)?;
                // The plugin made the target directory in NodePublishVolume, so it removes it.
                match std::fs::remove_dir(target) {
                    Ok(()) => {}
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => {
                        return Err(rpc::internal(
                            &format!("remove the target directory {target:?}"),
                            err,
                        ));
                    }
                }
            }
        }
        if recorded.is_some() {
            plugin.store.update(|s| {
                s.node_publications.remove(target);
                Ok(())
            })?;
        }
        Ok(NodeUnpublishVolumeResponse {})
    }

    fn handle_stats(
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

    fn handle_node_expand(
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
        if required > volume.capacity_bytes {
            return Err(Status::out_of_range(format!(
                "volume {id:?} has {} bytes; ControllerExpandVolume must grow it to {required} first",
                volume.capacity_bytes
            )));
        }
        let capacity_bytes = match volume.access_type {
            AccessType::Mount => volume.capacity_bytes,
            AccessType::Block => self.expand_block(&volume, Path::new(path))?,
        };
        Ok(NodeExpandVolumeResponse { capacity_bytes })
    }

    fn node_info(&self) -> NodeGetInfoResponse {
        let config = &self.plugin.config;
        let node_id = if self.plugin.faults.has(Fault::EmptyNodeId) {
            ""
        } else {
            config.node_id.as_str()
        };
        NodeGetInfoResponse {
            node_id: node_id.to_string(),
            max_volumes_per_node: config.max_volumes_per_node,
            accessible_topology: None,
        }
    }
}

/// Makes `target` a bind mount of `source` that shows `volume_dir`, read-only if asked.
/// Already so: nothing to do. Creates `target` if needed (the CO creates only its parent).
fn ensure_bind(
    source: &Path,
    target: &Path,
    volume_dir: &Path,
    read_only: bool,
) -> Result<(), Status> {
    let shown =
        |what: &str, err: io::Error| rpc::internal(&format!("{what} {}", target.display()), err);
    if mounts::is_bind_of(target, volume_dir).map_err(|err| shown("inspect", err))? {
        let writable = !mounts::is_read_only(target).map_err(|err| shown("inspect", err))?;
        if read_only && writable {
            mounts::remount_read_only(target).map_err(|err| shown("remount read-only", err))?;
        }
        return Ok(());
    }
    if mounts::is_mount_point(target).map_err(|err| shown("inspect", err))? {
        return Err(Status::failed_precondition(format!(
            "{} is already a mount point of something else",
            target.display()
        )));
    }
    std::fs::create_dir_all(target).map_err(|err| shown("create", err))?;
    mounts::bind(source, target).map_err(|err| {
        rpc::internal(
            &format!("bind-mount {} onto {}", source.display(), target.display()),
            err,
        )
    })?;
    if read_only && let Err(err) = mounts::remount_read_only(target) {
        let _ = mounts::unmount(target);
        return Err(shown("remount read-only", err));
    }
    Ok(())
}

/// Unmounts every mount of `volume_dir` (or, for block volumes, of a device node or image)
/// stacked at `target` (normally one).
fn unmount_volume(target: &Path, volume_dir: &Path) -> Result<(), Status> {
    let failed = |err: io::Error| rpc::internal(&format!("unmount {}", target.display()), err);
    // Bounded, in case something keeps remounting it.
    for _ in 0..8 {
        if !mounts::is_bind_of(target, volume_dir).map_err(failed)? {
            return Ok(());
        }
        mounts::unmount(target).map_err(failed)?;
    }
    Err(Status::internal(format!(
        "{} is still mounted after 8 unmounts",
        target.display()
    )))
}

fn usage(unit: Unit, available: u64, total: u64, used: u64) -> VolumeUsage {
    let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    VolumeUsage {
        available: signed(available),
        total: signed(total),
        used: signed(used),
        unit: unit as i32,
    }
}

fn node_capabilities() -> Vec<NodeServiceCapability> {
    [
        RpcType::StageUnstageVolume,
        RpcType::GetVolumeStats,
        RpcType::ExpandVolume,
    ]
    .into_iter()
    .map(|rpc| NodeServiceCapability {
        r#type: Some(node_service_capability::Type::Rpc(Rpc {
            r#type: rpc as i32,
        })),
    })
    .collect()
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!(
            "volume={:?} staging={:?}",
            req.volume_id, req.staging_target_path
        );
        let result = self.handle_stage(req).await;
        rpc::finish(&self.plugin.faults, "NodeStageVolume", &subject, result)
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!(
            "volume={:?} staging={:?}",
            req.volume_id, req.staging_target_path
        );
        let result = self.handle_unstage(req).await;
        rpc::finish(&self.plugin.faults, "NodeUnstageVolume", &subject, result)
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?} target={:?}", req.volume_id, req.target_path);
        let result = self.handle_publish(req).await;
        rpc::finish(&self.plugin.faults, "NodePublishVolume", &subject, result)
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?} target={:?}", req.volume_id, req.target_path);
        let result = self.handle_unpublish(req).await;
        rpc::finish(&self.plugin.faults, "NodeUnpublishVolume", &subject, result)
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?} path={:?}", req.volume_id, req.volume_path);
        let result = self.handle_stats(req);
        rpc::finish(&self.plugin.faults, "NodeGetVolumeStats", &subject, result)
    }

    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let req = request.into_inner();
        let subject = format!("volume={:?} path={:?}", req.volume_id, req.volume_path);
        let result = self.handle_node_expand(req);
        rpc::finish(&self.plugin.faults, "NodeExpandVolume", &subject, result)
    }

    async fn node_get_capabilities(
        &self,
        _request: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        let result = if self.plugin.faults.has(Fault::NodeCapabilitiesError) {
            Err(Status::internal(
                "failed to list the node capabilities (node-capabilities-error fault)",
            ))
        } else {
            Ok(NodeGetCapabilitiesResponse {
                capabilities: node_capabilities(),
            })
        };
        rpc::finish(&self.plugin.faults, "NodeGetCapabilities", "", result)
    }

    async fn node_get_info(
        &self,
        _request: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        rpc::finish(&self.plugin.faults, "NodeGetInfo", "", Ok(self.node_info()))
    }
}
