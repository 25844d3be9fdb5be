//! Block volumes on the node: an image file shown to workloads as a block device.
//!
//! - NodeStageVolume attaches the image to a loop device and records the device with the
//!   stage. A volume has one such device on this node, shared by its stages and its writable
//!   publications. The staging directory is left empty: nothing is mounted there.
//! - NodePublishVolume creates `target_path` as an empty file and bind-mounts the device node
//!   onto it, so the target is the device. A read-only publish gets a second loop device of
//!   its own, attached read-only: a read-only bind mount would not do, because the kernel lets
//!   a device node on a read-only mount be opened for writing.
//! - NodeUnpublishVolume unmounts the target, removes the file and detaches the publication's
//!   own device; NodeUnstageVolume detaches the shared one. A device is detached only once
//!   no stage or publication record names it any more.
//!
//! Loop devices outlive the plugin, and their paths are in state.json, so a restarted plugin
//! goes on using them. A recorded device that is no longer attached to the image (after a
//! reboot) is replaced by a new one when the CO retries the stage or publishes.
//!
//! A volume made under the loop-at-create variant got its writable device at CreateVolume
//! and records it itself (`Volume::loop_device`). Its stages and writable publications use
//! that device, and never detach it: DeleteVolume does. Only a lost one (a reboot) is
//! replaced here, and the volume then records the new one.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use nomad_conform_proto::csi::v1::NodeGetVolumeStatsResponse;
use nomad_conform_proto::csi::v1::volume_usage::Unit;
use tonic::Status;

use super::stats::usage;
use super::{NodeService, unmount_volume};
use crate::faults::Fault;
use crate::state::{NodePublication, Staging, State, Volume};
use crate::{loop_device, mounts, rpc, storage};

impl NodeService {
    /// Stages a block volume: makes sure the stage has a loop device attached to the image
    /// and records it. Also a retry's repair, for a device lost to a reboot.
    pub(super) fn stage_block(&self, volume: &Volume, staging: Staging) -> Result<(), Status> {
        // Nothing goes into the staging directory, but it is created if the CO did not, as
        // for mount volumes (so NodeGetVolumeStats finds the path).
        let path = &staging.staging_target_path;
        fs::create_dir_all(path).map_err(|err| rpc::internal(&format!("create {path:?}"), err))?;
        self.stage_device(volume, staging, true).map(|_| ())
    }

    /// The loop device of a stage: the one it names if that is still attached to the image,
    /// otherwise the volume's shared device (see [`NodeService::shared_device`]). The stage
    /// is saved with it if that changes the record. `staging_call` says whether this is
    /// NodeStageVolume (rather than a publish repairing its stage).
    fn stage_device(
        &self,
        volume: &Volume,
        mut staging: Staging,
        staging_call: bool,
    ) -> Result<PathBuf, Status> {
        let plugin = &*self.plugin;
        let image = plugin.storage.volume_image(&volume.id);
        let path = staging.staging_target_path.clone();
        let recorded = plugin.store.read(|s| s.stagings.get(&path).cloned());
        let (device, attached_now) = match &staging.loop_device {
            Some(device) if attached(Path::new(device), &image, false)? => {
                (PathBuf::from(device), false)
            }
            _ => self.shared_device(volume, &image, staging_call)?,
        };
        staging.loop_device = Some(device.display().to_string());
        if recorded.as_ref() == Some(&staging) {
            return Ok(device);
        }
        let saved = plugin.store.update(|s| {
            s.stagings.insert(path, staging);
            Ok(())
        });
        if let Err(status) = saved {
            if attached_now {
                let _ = loop_device::detach(&device);
            }
            return Err(status);
        }
        Ok(device)
    }

    /// The volume's writable loop device, and whether it was attached just now: the device
    /// another stage of the volume uses, else one still attached to the image without a
    /// record (kept by a publication whose stage is gone, or left by a plugin that died
    /// before saving), else a newly attached one.
    fn shared_device(
        &self,
        volume: &Volume,
        image: &Path,
        staging_call: bool,
    ) -> Result<(PathBuf, bool), Status> {
        let plugin = &*self.plugin;
        // loop-at-create: the volume's own device, whatever the stages record.
        if let Some(own) = plugin.store.read(|s| own_device(s, &volume.id)) {
            return self.volume_device(volume, image, &own).map(|d| (d, false));
        }
        let recorded: Vec<String> = plugin.store.read(|s| {
            s.stagings
                .values()
                .filter(|st| st.volume_id == volume.id)
                .filter_map(|st| st.loop_device.clone())
                .collect()
        });
        for device in recorded {
            if attached(Path::new(&device), image, false)? {
                return Ok((PathBuf::from(device), false));
            }
        }
        let leftovers = loop_device::attached_to(image)
            .map_err(|err| rpc::internal("list the loop devices", err))?;
        for device in leftovers {
            if attached(&device, image, false)? {
                return Ok((device, false));
            }
        }
        // block-stage-wipes: every new device starts from an empty image.
        if staging_call && plugin.faults.has(Fault::BlockStageWipes) {
            storage::recreate_image(image)
                .map_err(|err| rpc::internal(&format!("recreate {}", image.display()), err))?;
        }
        let device = loop_device::attach(image, false).map_err(|err| {
            rpc::internal(&format!("attach {} to a loop device", image.display()), err)
        })?;
        Ok((device, true))
    }

    /// The loop device a loop-at-create volume got at CreateVolume (`recorded`), if it is
    /// still attached to the image. Otherwise (a reboot) a writable device still attached to
    /// it without a record, or a newly attached one, becomes the volume's and is recorded
    /// with it. Either way the device is the volume's: it is not detached when the call that
    /// needed it fails.
    fn volume_device(
        &self,
        volume: &Volume,
        image: &Path,
        recorded: &str,
    ) -> Result<PathBuf, Status> {
        let plugin = &*self.plugin;
        if attached(Path::new(recorded), image, false)? {
            return Ok(PathBuf::from(recorded));
        }
        let leftovers = loop_device::attached_to(image)
            .map_err(|err| rpc::internal("list the loop devices", err))?;
        let mut found = None;
        for device in leftovers {
            if attached(&device, image, false)? {
                found = Some(device);
                break;
            }
        }
        let (device, attached_now) = match found {
            Some(device) => (device, false),
            None => {
                let device = loop_device::attach(image, false).map_err(|err| {
                    rpc::internal(&format!("attach {} to a loop device", image.display()), err)
                })?;
                (device, true)
            }
        };
        let saved = plugin.store.update(|s| {
            if let Some(v) = s.volumes.get_mut(&volume.id) {
                v.loop_device = Some(device.display().to_string());
            }
            Ok(())
        });
        if let Err(status) = saved {
            if attached_now {
                let _ = loop_device::detach(&device);
            }
            return Err(status);
        }
        Ok(device)
    }

    /// Publishes a block volume at `publication.target_path` and records it. `retry` says
    /// the publication is already recorded (then it carries the devices it had).
    pub(super) fn publish_block(
        &self,
        volume: &Volume,
        mut publication: NodePublication,
        read_only: bool,
        retry: bool,
    ) -> Result<(), Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let image = plugin.storage.volume_image(&volume.id);
        let target = PathBuf::from(&publication.target_path);
        let before = publication.clone();

        // The stage's device, attached again if it was lost. There is no stage only under
        // node-publish-without-stage-ok.
        let stage = plugin
            .store
            .read(|s| s.stagings.get(&publication.staging_target_path).cloned());
        let staged = match stage {
            Some(stage) => Some(self.stage_device(volume, stage, false)?),
            None => None,
        };
        // What is bound onto the target, whether the publication owns it, and whether it was
        // attached by this call.
        let (source, owned, attached_now) = if faults.has(Fault::BlockPublishNotDevice) {
            // block-publish-not-device: the image file itself, so the target is a regular file.
            (image.clone(), false, false)
        } else if read_only && !faults.has(Fault::BlockIgnoresReadonly) {
            // A read-only device of its own (block-ignores-readonly skips this and binds the
            // writable shared device).
            let kept = before
                .loop_device
                .as_ref()
                .filter(|_| before.owns_loop_device)
                .map(PathBuf::from);
            match kept {
                Some(device) if attached(&device, &image, true)? => (device, true, false),
                _ => {
                    let device = loop_device::attach(&image, true).map_err(|err| {
                        rpc::internal(
                            &format!("attach {} read-only to a loop device", image.display()),
                            err,
                        )
                    })?;
                    (device, true, true)
                }
            }
        } else if let Some(device) = staged {
            (device, false, false)
        } else {
            let (device, attached_now) = self.shared_device(volume, &image, false)?;
            (device, false, attached_now)
        };
        publication.loop_device = (source != image).then(|| source.display().to_string());
        publication.owns_loop_device = owned;

        // A device recorded before but replaced now may still be bound at the target.
        let stale = before.loop_device.as_ref().map(PathBuf::from);
        let undo = |detach: bool| {
            if detach {
                let _ = loop_device::detach(&source);
            }
        };
        if let Err(status) = self.bind_device(&source, &target, read_only, stale.as_deref()) {
            undo(attached_now);
            return Err(status);
        }
        if retry && publication == before {
            return Ok(());
        }
        let saved = plugin.store.update(|s| {
            s.node_publications
                .insert(publication.target_path.clone(), publication.clone());
            Ok(())
        });
        if let Err(status) = saved {
            if !retry {
                let _ = unmount_volume(&target, &source);
                let _ = fs::remove_file(&target);
            }
            undo(attached_now);
            return Err(status);
        }
        Ok(())
    }

    /// Makes `target` a bind mount of the device node (or image) `source`, read-only if
    /// asked; already so, nothing to do. `target` is created as an empty file if needed.
    /// Something else mounted there is FAILED_PRECONDITION, except `stale`, an earlier device
    /// of this publication, which is unmounted first.
    fn bind_device(
        &self,
        source: &Path,
        target: &Path,
        read_only: bool,
        stale: Option<&Path>,
    ) -> Result<(), Status> {
        let shown = |what: &str, err: io::Error| {
            rpc::internal(&format!("{what} {}", target.display()), err)
        };
        // node-publish-no-mount: an empty file where the device should be.
        if self.plugin.faults.has(Fault::NodePublishNoMount) {
            return make_target_file(target);
        }
        if let Some(stale) = stale
            && stale != source
            && mounts::is_bind_of(target, stale).map_err(|err| shown("inspect", err))?
        {
            unmount_volume(target, stale)?;
        }
        if mounts::is_bind_of(target, source).map_err(|err| shown("inspect", err))? {
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
        make_target_file(target)?;
        mounts::bind(source, target).map_err(|err| {
            rpc::internal(
                &format!("bind-mount {} onto {}", source.display(), target.display()),
                err,
            )
        })?;
        // The read-only mount is for show (mountinfo says "ro"); the read-only loop device is
        // what refuses writes.
        if read_only && let Err(err) = mounts::remount_read_only(target) {
            let _ = mounts::unmount(target);
            return Err(shown("remount read-only", err));
        }
        Ok(())
    }

    /// What is bind-mounted at `target` and shows this volume: a loop device attached to its
    /// image (or the one `recorded` names, even if it was detached since), or the image
    /// itself. `None` if nothing of the volume's is mounted there.
    pub(super) fn bound_at(
        &self,
        volume: &Volume,
        target: &Path,
        recorded: Option<&NodePublication>,
    ) -> Result<Option<PathBuf>, Status> {
        let failed = |err: io::Error| rpc::internal(&format!("inspect {}", target.display()), err);
        if !mounts::is_mount_point(target).map_err(failed)? {
            return Ok(None);
        }
        let image = self.plugin.storage.volume_image(&volume.id);
        let meta = fs::metadata(target).map_err(failed)?;
        if meta.file_type().is_block_device() {
            let Some(device) = loop_device::device_with_number(meta.rdev()).map_err(failed)? else {
                return Ok(None);
            };
            let named = recorded
                .and_then(|p| p.loop_device.as_deref())
                .map(Path::new);
            let backing = loop_device::backing_file(&device).map_err(failed)?;
            let ours = named == Some(device.as_path()) || backing.as_deref() == Some(&image);
            return Ok(ours.then_some(device));
        }
        let same_as_image =
            fs::metadata(&image).is_ok_and(|i| i.dev() == meta.dev() && i.ino() == meta.ino());
        Ok(same_as_image.then_some(image))
    }

    /// Undoes a block publish: unmounts the target, removes the file the plugin made, and
    /// detaches the devices no record needs once this publication's is gone. The caller
    /// removes the record.
    pub(super) fn unpublish_block(
        &self,
        volume: &Volume,
        target: &Path,
        recorded: Option<&NodePublication>,
    ) -> Result<(), Status> {
        if let Some(source) = self.bound_at(volume, target, recorded)? {
            unmount_volume(target, &source)?;
        }
        match fs::symlink_metadata(target) {
            Ok(meta) if !meta.is_dir() => fs::remove_file(target),
            // Not the plugin's: an empty directory is the CO's to remove.
            Ok(_) => Ok(()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err),
        }
        .map_err(|err| rpc::internal(&format!("remove the target {}", target.display()), err))?;
        if let Some(device) = recorded.and_then(|p| p.loop_device.as_deref()) {
            let path = target.display().to_string();
            self.release_device(volume, device, None, Some(&path))?;
        }
        Ok(())
    }

    /// Detaches `device` unless a record other than the stage at `except_staging` and the
    /// publication at `except_target` (those being undone) still names it, and as long as it
    /// is still attached to this volume's image (after a reboot the number may be another
    /// file's).
    pub(super) fn release_device(
        &self,
        volume: &Volume,
        device: &str,
        except_staging: Option<&str>,
        except_target: Option<&str>,
    ) -> Result<(), Status> {
        let plugin = &*self.plugin;
        // block-keeps-device: never detach. (Nor the device a loop-at-create volume got at
        // CreateVolume: it stays until DeleteVolume.)
        if plugin.faults.has(Fault::BlockKeepsDevice)
            || plugin.store.read(|s| {
                own_device(s, &volume.id).as_deref() == Some(device)
                    || s.loop_device_in_use(&volume.id, device, except_staging, except_target)
            })
        {
            return Ok(());
        }
        let image = plugin.storage.volume_image(&volume.id);
        let failed = |err: io::Error| rpc::internal(&format!("detach {device}"), err);
        if loop_device::backing_file(Path::new(device))
            .map_err(failed)?
            .as_deref()
            == Some(image.as_path())
        {
            loop_device::detach(Path::new(device)).map_err(failed)?;
        }
        Ok(())
    }

    /// NodeGetVolumeStats of a block volume at `path` (a staging path, a target, or the
    /// image under stats-ignores-path): the size of the device there, in bytes. Used and
    /// available mean nothing for a raw device and are 0.
    pub(super) fn block_stats(
        &self,
        volume: &Volume,
        path: &Path,
    ) -> Result<NodeGetVolumeStatsResponse, Status> {
        let size = self.size_at(volume, path)?;
        let mut bytes = usage(Unit::Bytes, 0, size, 0);
        // stats-negative: available bytes as a bad subtraction would make them.
        if self.plugin.faults.has(Fault::StatsNegative) {
            bytes.available = -1;
        }
        Ok(NodeGetVolumeStatsResponse {
            usage: vec![bytes],
            volume_condition: None,
        })
    }

    /// NodeExpandVolume of a block volume: every loop device attached to its image learns
    /// the image's new length. Answers the size of the device at `path`.
    pub(super) fn expand_block(&self, volume: &Volume, path: &Path) -> Result<i64, Status> {
        let image = self.plugin.storage.volume_image(&volume.id);
        let devices = loop_device::attached_to(&image)
            .map_err(|err| rpc::internal("list the loop devices", err))?;
        for device in devices {
            loop_device::refresh_capacity(&device).map_err(|err| {
                rpc::internal(
                    &format!("refresh the capacity of {}", device.display()),
                    err,
                )
            })?;
        }
        let size = self.size_at(volume, path)?;
        Ok(i64::try_from(size).unwrap_or(i64::MAX))
    }

    /// The size of the volume's device recorded at `path` (a stage or a publication); the
    /// image's length where no attached device is (the image itself is published, or the
    /// device was lost).
    fn size_at(&self, volume: &Volume, path: &Path) -> Result<u64, Status> {
        let image = self.plugin.storage.volume_image(&volume.id);
        let key = path.display().to_string();
        let device = self.plugin.store.read(|s| {
            s.stagings
                .get(&key)
                .and_then(|st| st.loop_device.clone())
                .or_else(|| {
                    s.node_publications
                        .get(&key)
                        .and_then(|p| p.loop_device.clone())
                })
        });
        let failed = |err: io::Error| rpc::internal(&format!("measure {}", path.display()), err);
        if let Some(device) = device.map(PathBuf::from) {
            let read_only = loop_device::is_read_only(&device).map_err(failed)?;
            if attached(&device, &image, read_only)? {
                return loop_device::size_bytes(&device).map_err(failed);
            }
        }
        fs::metadata(&image).map(|m| m.len()).map_err(failed)
    }
}

/// The loop device a volume made under loop-at-create records as its own, if any.
fn own_device(state: &State, volume_id: &str) -> Option<String> {
    state.volumes.get(volume_id)?.loop_device.clone()
}

/// [`loop_device::is_attached_to`], as a gRPC error when sysfs cannot be read.
fn attached(device: &Path, image: &Path, read_only: bool) -> Result<bool, Status> {
    loop_device::is_attached_to(device, image, read_only)
        .map_err(|err| rpc::internal(&format!("inspect {}", device.display()), err))
}

/// Makes `target` an empty regular file for a device to be bind-mounted onto. An existing
/// file is used as it is; an empty directory (a CO that made the target as for a mount
/// volume) is replaced; anything else is FAILED_PRECONDITION.
fn make_target_file(target: &Path) -> Result<(), Status> {
    let failed =
        |err: io::Error| rpc::internal(&format!("create the target {}", target.display()), err);
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.is_file() => return Ok(()),
        Ok(meta) if meta.is_dir() => {
            fs::remove_dir(target).map_err(|err| {
                Status::failed_precondition(format!(
                    "{} is a directory that cannot be replaced by the device's file: {err}",
                    target.display()
                ))
            })?;
        }
        Ok(_) => {
            return Err(Status::failed_precondition(format!(
                "{} exists and is neither a file nor a directory",
                target.display()
            )));
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(failed(err)),
    }
    match OpenOptions::new().write(true).create_new(true).open(target) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(failed(err)),
    }
}
