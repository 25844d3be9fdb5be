//! The Node service: staging and publishing volumes on this host with bind mounts.
//!
//! For mount volumes, NodeStageVolume bind-mounts `<state-dir>/volumes/<id>` onto the staging
//! path (once per volume per node), and NodePublishVolume bind-mounts the staging path onto
//! each workload's target path, read-only when asked. Block volumes are staged on a loop
//! device and published by bind-mounting the device node onto a file; that part is in
//! `node/block.rs`. Every stage and publish is recorded with its arguments, so a retry is
//! recognised (OK), a conflicting call is refused (ALREADY_EXISTS), and a mount (or loop
//! device) lost to a reboot is made again when the CO retries. NodeGetVolumeStats and
//! NodeExpandVolume are in `node/stats.rs`.
//!
//! Calls for one volume run one after the other (they hold the volume's lock), as Nomad's own
//! client does.

mod block;
mod stats;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nomad_conform_proto::csi::v1::node_server::Node;
use nomad_conform_proto::csi::v1::node_service_capability::rpc::Type as RpcType;
use nomad_conform_proto::csi::v1::node_service_capability::{self, Rpc};
use nomad_conform_proto::csi::v1::{
    NodeExpandVolumeRequest, NodeExpandVolumeResponse, NodeGetCapabilitiesRequest,
    NodeGetCapabilitiesResponse, NodeGetInfoRequest, NodeGetInfoResponse,
    NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse, NodePublishVolumeRequest,
    NodePublishVolumeResponse, NodeServiceCapability, NodeStageVolumeRequest,
    NodeStageVolumeResponse, NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse,
    NodeUnstageVolumeRequest, NodeUnstageVolumeResponse, Topology,
};
use tonic::{Request, Response, Status};

use crate::faults::Fault;
use crate::locks::LockKey;
use crate::mounts;
use crate::plugin::{Plugin, TOPOLOGY_KEY};
use crate::rpc;
use crate::state::{AccessType, NodePublication, Staging, Volume};
use crate::variants::Variant;

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

    /// The volume a stage, unstage or unpublish names, or NOT_FOUND (node-unknown-internal:
    /// INTERNAL, which Nomad does not take as done on a release).
    fn named_volume(&self, id: &str) -> Result<Volume, Status> {
        self.volume(id).map_err(|status| {
            if self.plugin.faults.has(Fault::NodeUnknownInternal) {
                Status::internal(format!(
                    "failed to look up volume {id:?} (node-unknown-internal fault)"
                ))
            } else {
                status
            }
        })
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
        plugin.needs_secrets(&req.secrets, "NodeStageVolume")?;
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;
        let volume = self.named_volume(id)?;
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
                AccessType::Mount => self.stage_mount(&volume_dir, Path::new(path)),
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
        self.stage_mount(&volume_dir, Path::new(path))?;
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
        // release-unknown-ok: a volume this node does not know is not staged or published here
        // either: nothing to undo.
        if plugin.variants.has(Variant::ReleaseUnknownOk) && self.volume(id).is_err() {
            return Ok(Default::default());
        }
        let volume = self.named_volume(id)?;
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
            // release-not-found: NOT_FOUND, which Nomad counts as done, instead of OK.
            if plugin.variants.has(Variant::ReleaseNotFound) {
                return Err(Status::not_found(format!(
                    "volume {id:?} is not staged at {path:?}"
                )));
            }
            return Ok(NodeUnstageVolumeResponse {});
        }
        match volume.access_type {
            // (Under stage-without-mount nothing is mounted there: this finds nothing to do,
            // and only the record goes.)
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
        plugin.needs_secrets(&req.secrets, "NodePublishVolume")?;
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
        // publish-from-backing-store, and stage-without-mount (whose staging path shows
        // nothing): the volume directory too, though the stage is still required.
        let from_backing_store = plugin.variants.has(Variant::PublishFromBackingStore)
            || plugin.variants.has(Variant::StageWithoutMount);
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
            if from_backing_store {
                volume_dir.clone()
            } else {
                PathBuf::from(staging_path)
            }
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
        // (readonly-beside-writer-writable: not when the volume already has a writable target
        // on this node.)
        let beside_writer = faults.has(Fault::ReadonlyBesideWriterWritable)
            && plugin.store.read(|s| {
                s.node_publications
                    .values()
                    .any(|p| p.volume_id == id && p.target_path != target && !p.readonly)
            });
        let read_only = (req.readonly || publication.capability.access_mode.is_reader_only())
            && !faults.has(Fault::NodePublishIgnoresReadonly)
            && !beside_writer;

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
            // (second-target-allowed: for the single-node modes the matrix only says SHOULD
            // fail, so a plugin may publish the volume at another target on the same node.)
            let several_allowed = publication
                .capability
                .access_mode
                .allows_several_paths_on_a_node()
                && other
                    .capability
                    .access_mode
                    .allows_several_paths_on_a_node();
            if !several_allowed && !plugin.variants.has(Variant::SecondTargetAllowed) {
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

    /// Makes a mount volume's staging path ready: [`ensure_bind`] of the volume directory
    /// onto it (also a retry's repair, for a mount lost to a reboot).
    fn stage_mount(&self, volume_dir: &Path, path: &Path) -> Result<(), Status> {
        // stage-without-mount: the stage is only a record, and NodePublishVolume binds the
        // volume directory itself. The path is still created if the CO did not, so that
        // NodeGetVolumeStats finds it.
        if self.plugin.variants.has(Variant::StageWithoutMount) {
            return std::fs::create_dir_all(path)
                .map_err(|err| rpc::internal(&format!("create {}", path.display()), err));
        }
        ensure_bind(volume_dir, path, volume_dir, false)
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
        // release-unknown-ok: a volume this node does not know is not staged or published here
        // either: nothing to undo.
        if plugin.variants.has(Variant::ReleaseUnknownOk) && self.volume(id).is_err() {
            return Ok(Default::default());
        }
        let volume = self.named_volume(id)?;
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
            // release-not-found: NOT_FOUND, which Nomad counts as done, instead of OK.
            if plugin.variants.has(Variant::ReleaseNotFound) {
                return Err(Status::not_found(format!(
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

    fn node_info(&self) -> NodeGetInfoResponse {
        let config = &self.plugin.config;
        let node_id = if self.plugin.faults.has(Fault::EmptyNodeId) {
            ""
        } else {
            config.node_id.as_str()
        };
        // topology: the node is where its own volumes can be reached from.
        let accessible_topology = self.plugin.reports_topology().then(|| Topology {
            segments: std::collections::HashMap::from([(
                TOPOLOGY_KEY.to_string(),
                config.node_id.clone(),
            )]),
        });
        NodeGetInfoResponse {
            node_id: node_id.to_string(),
            max_volumes_per_node: config.max_volumes_per_node,
            accessible_topology,
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

fn node_capabilities(plugin: &Plugin) -> Vec<NodeServiceCapability> {
    // capacity-unknown: nothing to grow.
    let expands = !plugin.variants.has(Variant::CapacityUnknown);
    [
        RpcType::StageUnstageVolume,
        RpcType::GetVolumeStats,
        RpcType::ExpandVolume,
    ]
    .into_iter()
    .filter(|rpc| expands || *rpc != RpcType::ExpandVolume)
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
                capabilities: node_capabilities(&self.plugin),
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
