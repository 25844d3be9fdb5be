//! Block volumes end to end: the real plugin on a unix socket, real loop devices and real bind
//! mounts. A published block volume's target must be a block device backed by the volume's
//! image; data must survive a release; a read-only claim must not write; a release must
//! leave no loop device, mount or image behind.
//!
//! These tests need root and /dev/loop-control (see [`can_use_loop_devices`]). Every test
//! holds a [`Scratch`], whose drop unmounts what is left under it and detaches every loop
//! device attached to a file under it, so a failed test leaves nothing behind either.
//!
//! The tests run one at a time (see [`serial`]): run together, they make each other fail
//! for reasons that are not what they test. One test's plugin detaching a loop device can
//! fail another's scan of the loop devices, or its attach (the test at the end shows the plugin
//! copes with that now, but the timing it adds is not what the others test); and a plugin
//! started while another test has a target open
//! inherits that descriptor until it execs, so the other test's unpublish finds its target
//! busy.

mod support;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use nomad_conform_proto::csi::v1::volume_capability::access_mode::Mode;
use nomad_conform_proto::csi::v1::volume_usage::Unit;
use nomad_conform_proto::csi::v1::{
    CapacityRange, ControllerExpandVolumeRequest, ControllerUnpublishVolumeRequest,
    DeleteVolumeRequest, GetCapacityRequest, NodeExpandVolumeRequest, NodeGetVolumeStatsRequest,
    NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest, Volume,
};
use support::*;
use tonic::Code;

/// One block, the unit written and read back through a target.
const BLOCK: usize = 4096;

/// Held for the whole of each test, so that they run one at a time (see the module docs).
/// A tokio mutex, because it is held across awaits, and one that no panic poisons.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for the other tests to finish. Take it first, so that it is released last, after
/// the scratch directory's cleanup.
async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// Whether loop devices can be used here: root (as for any mount test) and the loop
/// driver's control device. Like [`can_mount`], a skip in CI is a failure instead.
fn can_use_loop_devices() -> bool {
    if !can_mount() {
        return false;
    }
    if Path::new("/dev/loop-control").exists() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("block volume tests need /dev/loop-control, and CI is set");
    }
    eprintln!("skipping: block volume tests need /dev/loop-control");
    false
}

/// 4 KiB that no other seed gives, and never all zeros (an empty image reads as zeros).
fn pattern(seed: u8) -> Vec<u8> {
    (0..BLOCK)
        .map(|i| {
            let i = u8::try_from(i % 251).expect("< 251");
            i.wrapping_mul(7).wrapping_add(seed) | 1
        })
        .collect()
}

/// Writes `data` at `offset` into the device (or file) at `path` and syncs it, so that it
/// has reached the image when this returns.
fn write_at(path: &Path, offset: u64, data: &[u8]) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.write_all_at(data, offset)?;
    file.sync_all()
}

/// `len` bytes at `offset` of the device (or file) at `path`, read through a new descriptor.
fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let mut buffer = vec![0u8; len];
    File::open(path)
        .and_then(|f| f.read_exact_at(&mut buffer, offset))
        .unwrap_or_else(|err| panic!("read {} at {offset}: {err}", path.display()));
    buffer
}

fn is_block_device(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device())
}

/// Whether the kernel has the loop device read-only (`/sys/block/loopN/ro`).
fn loop_is_read_only(device: &Path) -> bool {
    let name = device.file_name().expect("device name");
    let ro = Path::new("/sys/block").join(name).join("ro");
    fs::read_to_string(&ro)
        .unwrap_or_else(|err| panic!("read {}: {err}", ro.display()))
        .trim()
        == "1"
}

/// The loop devices attached to files under the scratch directory, without their files.
fn loops_of(scratch: &Scratch) -> Vec<PathBuf> {
    loops_backed_under(scratch.path())
        .into_iter()
        .map(|(device, _)| device)
        .collect()
}

/// The image the loop device at `target` is attached to, or why it is not one.
fn backing_image_of(scratch: &Scratch, target: &Path) -> PathBuf {
    let device = loop_device_of(target)
        .unwrap_or_else(|| panic!("{} is not a loop device", target.display()));
    loops_backed_under(scratch.path())
        .into_iter()
        .find(|(d, _)| *d == device)
        .map(|(_, image)| image)
        .unwrap_or_else(|| {
            panic!(
                "{} at {} is not attached to a file under the scratch directory",
                device.display(),
                target.display()
            )
        })
}

// The calls, as Nomad makes them, expecting success.

async fn create(plugin: &Plugin, name: &str, mode: Mode, bytes: i64) -> Volume {
    plugin
        .controller()
        .create_volume(create_block_request(name, mode, bytes))
        .await
        .expect("create a block volume")
        .into_inner()
        .volume
        .expect("volume")
}

async fn controller_publish(plugin: &Plugin, id: &str, mode: Mode) {
    plugin
        .controller()
        .controller_publish_volume(controller_publish_block(id, mode, false))
        .await
        .expect("controller publish");
}

async fn controller_unpublish(plugin: &Plugin, id: &str) {
    plugin
        .controller()
        .controller_unpublish_volume(ControllerUnpublishVolumeRequest {
            volume_id: id.into(),
            node_id: NODE_ID.into(),
            ..Default::default()
        })
        .await
        .expect("controller unpublish");
}

async fn stage(plugin: &Plugin, id: &str, staging: &Path, mode: Mode) {
    plugin
        .node()
        .node_stage_volume(stage_block_request(id, staging, mode))
        .await
        .expect("stage");
}

async fn unstage(plugin: &Plugin, id: &str, staging: &Path) {
    plugin
        .node()
        .node_unstage_volume(NodeUnstageVolumeRequest {
            volume_id: id.into(),
            staging_target_path: staging.display().to_string(),
        })
        .await
        .expect("unstage");
}

async fn publish(
    plugin: &Plugin,
    id: &str,
    staging: &Path,
    target: &Path,
    mode: Mode,
    readonly: bool,
) {
    plugin
        .node()
        .node_publish_volume(publish_block_request(id, staging, target, mode, readonly))
        .await
        .unwrap_or_else(|err| panic!("publish at {}: {err:?}", target.display()));
}

async fn unpublish(plugin: &Plugin, id: &str, target: &Path) {
    plugin
        .node()
        .node_unpublish_volume(NodeUnpublishVolumeRequest {
            volume_id: id.into(),
            target_path: target.display().to_string(),
        })
        .await
        .unwrap_or_else(|err| panic!("unpublish {}: {err:?}", target.display()));
}

async fn delete(plugin: &Plugin, id: &str) {
    plugin
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: id.into(),
            ..Default::default()
        })
        .await
        .expect("delete");
}

fn stats_request(id: &str, path: &Path) -> NodeGetVolumeStatsRequest {
    NodeGetVolumeStatsRequest {
        volume_id: id.into(),
        volume_path: path.display().to_string(),
        ..Default::default()
    }
}

#[tokio::test]
async fn publish_makes_the_target_a_device_that_holds_data() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mode = Mode::SingleNodeWriter;
    // Not a whole number of sectors: the device must still be at least this large.
    let required = 4 * MIB + 1000;
    let volume = create(&plugin, "device", mode, required).await;
    let id = volume.volume_id.as_str();
    assert!(volume.capacity_bytes >= required, "{volume:?}");
    let image = scratch.volume_image(id);
    assert_eq!(
        fs::metadata(&image).expect("the image exists").len(),
        u64::try_from(volume.capacity_bytes).expect("capacity")
    );
    assert!(loops_of(&scratch).is_empty(), "nothing attached before");

    controller_publish(&plugin, id, mode).await;
    let staging = scratch.co_path("staging");
    stage(&plugin, id, &staging, mode).await;
    assert!(staging.is_dir() && !is_mount_point(&staging));
    let staged = loops_of(&scratch);
    assert_eq!(staged.len(), 1, "one loop device once staged: {staged:?}");

    let target = scratch.co_path("target");
    publish(&plugin, id, &staging, &target, mode, false).await;
    assert!(is_mount_point(&target));
    assert!(
        is_block_device(&target),
        "the target of a block volume is a block device"
    );
    assert_eq!(backing_image_of(&scratch, &target), image);
    assert_eq!(
        loops_of(&scratch),
        staged,
        "a writable publish uses the stage's device"
    );
    let size = size_of(&target);
    assert!(
        size >= u64::try_from(volume.capacity_bytes).expect("capacity"),
        "the device has {size} bytes, the volume {}",
        volume.capacity_bytes
    );

    // A retry of each call attaches nothing new.
    stage(&plugin, id, &staging, mode).await;
    publish(&plugin, id, &staging, &target, mode, false).await;
    assert_eq!(loops_of(&scratch), staged, "retries attach no new device");

    // A mount capability does not fit a block volume.
    let as_mount = publish_request(id, &staging, &scratch.co_path("dir"), mode, false);
    assert_eq!(
        code_of(plugin.node().node_publish_volume(as_mount).await),
        Code::FailedPrecondition
    );

    // Written through the target: read back through it, and present in the image.
    let data = pattern(1);
    let offset = 2 * MIB as u64 + BLOCK as u64;
    write_at(&target, offset, &data).expect("write through the target");
    assert_eq!(read_at(&target, offset, BLOCK), data);
    assert_eq!(read_at(&image, offset, BLOCK), data, "the image holds it");
    // The device reaches the capacity answered: its last sector is there and writable.
    let tail = u64::try_from(volume.capacity_bytes).expect("capacity") - 512;
    let sector = &pattern(2)[..512];
    write_at(&target, tail, sector).expect("write the last sector of the capacity");
    assert_eq!(read_at(&image, tail, 512), sector);
}

#[tokio::test]
async fn data_survives_a_full_release_and_a_new_claim() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mode = Mode::SingleNodeWriter;
    let id = create(&plugin, "durable", mode, 8 * MIB).await.volume_id;
    let data = pattern(3);
    let offset = 3 * MIB as u64;

    controller_publish(&plugin, &id, mode).await;
    let (staging, target) = (scratch.co_path("staging-1"), scratch.co_path("target-1"));
    stage(&plugin, &id, &staging, mode).await;
    publish(&plugin, &id, &staging, &target, mode, false).await;
    write_at(&target, offset, &data).expect("write through the target");
    unpublish(&plugin, &id, &target).await;
    unstage(&plugin, &id, &staging).await;
    controller_unpublish(&plugin, &id).await;
    // Really released: what comes back next is read from the image by a new device.
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
    assert!(mounts_under(scratch.path()).is_empty());

    controller_publish(&plugin, &id, mode).await;
    let (staging, target) = (scratch.co_path("staging-2"), scratch.co_path("target-2"));
    stage(&plugin, &id, &staging, mode).await;
    publish(&plugin, &id, &staging, &target, mode, false).await;
    assert!(is_block_device(&target));
    assert_eq!(
        read_at(&target, offset, BLOCK),
        data,
        "the data written in the first claim"
    );
    unpublish(&plugin, &id, &target).await;
    unstage(&plugin, &id, &staging).await;
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
}

#[tokio::test]
async fn read_only_publish_refuses_writes_while_a_writer_still_writes() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    // A mode that allows several targets on one node.
    let mode = Mode::MultiNodeMultiWriter;
    let id = create(&plugin, "shared", mode, 8 * MIB).await.volume_id;
    let image = scratch.volume_image(&id);
    controller_publish(&plugin, &id, mode).await;
    let staging = scratch.co_path("staging");
    stage(&plugin, &id, &staging, mode).await;

    let writer = scratch.co_path("writer");
    publish(&plugin, &id, &staging, &writer, mode, false).await;
    let first = pattern(4);
    write_at(&writer, 0, &first).expect("write through the writer");

    let reader = scratch.co_path("reader");
    publish(&plugin, &id, &staging, &reader, mode, true).await;
    assert!(is_block_device(&reader));
    assert_eq!(backing_image_of(&scratch, &reader), image);
    let reader_device = loop_device_of(&reader).expect("a loop device");
    let writer_device = loop_device_of(&writer).expect("a loop device");
    assert_ne!(
        reader_device, writer_device,
        "a read-only publish has a device of its own"
    );
    assert!(loop_is_read_only(&reader_device));
    assert!(!loop_is_read_only(&writer_device));
    assert_eq!(
        read_at(&reader, 0, BLOCK),
        first,
        "the reader reads the data"
    );

    // Neither opening for writing nor writing gets anything into the volume.
    let refused = write_at(&reader, 0, &pattern(5));
    assert!(refused.is_err(), "a read-only target took a write");
    assert_eq!(read_at(&image, 0, BLOCK), first, "the image is unchanged");

    // The writer still writes.
    let second = pattern(6);
    write_at(&writer, BLOCK as u64, &second).expect("the writer still writes");
    assert_eq!(read_at(&writer, BLOCK as u64, BLOCK), second);
    assert_eq!(read_at(&image, BLOCK as u64, BLOCK), second);

    // Unpublishing the reader detaches its own device and leaves the writer's alone.
    unpublish(&plugin, &id, &reader).await;
    let left = wait_for_no_loops_under(scratch.path());
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].0, writer_device);
    let third = pattern(7);
    write_at(&writer, 0, &third).expect("the writer writes after the reader left");
    assert_eq!(read_at(&image, 0, BLOCK), third);

    unpublish(&plugin, &id, &writer).await;
    unstage(&plugin, &id, &staging).await;
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
}

#[tokio::test]
async fn release_leaves_no_loop_device_mount_or_image() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mode = Mode::MultiNodeMultiWriter;
    let id = create(&plugin, "released", mode, 4 * MIB).await.volume_id;
    let image = scratch.volume_image(&id);
    controller_publish(&plugin, &id, mode).await;
    let staging = scratch.co_path("staging");
    stage(&plugin, &id, &staging, mode).await;
    let (writer, reader) = (scratch.co_path("writer"), scratch.co_path("reader"));
    publish(&plugin, &id, &staging, &writer, mode, false).await;
    publish(&plugin, &id, &staging, &reader, mode, true).await;
    write_at(&writer, 0, &pattern(8)).expect("write");
    assert_eq!(loops_of(&scratch).len(), 2, "the stage's and the reader's");

    // Deleting a volume in use is refused, and keeps the image.
    let in_use = plugin
        .controller()
        .delete_volume(DeleteVolumeRequest {
            volume_id: id.clone(),
            ..Default::default()
        })
        .await;
    assert_eq!(code_of(in_use), Code::FailedPrecondition);
    assert!(image.is_file());

    for target in [&writer, &reader] {
        unpublish(&plugin, &id, target).await;
        assert!(!is_mount_point(target), "{}", target.display());
        assert!(
            !target.exists(),
            "the plugin removes the target file it made: {}",
            target.display()
        );
        // Idempotent.
        unpublish(&plugin, &id, target).await;
    }
    unstage(&plugin, &id, &staging).await;
    unstage(&plugin, &id, &staging).await;
    assert!(
        staging.is_dir(),
        "the staging dir belongs to the CO and stays"
    );
    controller_unpublish(&plugin, &id).await;
    delete(&plugin, &id).await;

    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
    assert!(!image.exists(), "the image is deleted with the volume");
    assert_eq!(mounts_under(scratch.path()), Vec::<PathBuf>::new());
    let state = scratch.saved_state();
    for key in ["volumes", "stagings", "node_publications"] {
        assert!(
            state[key].as_object().is_some_and(|m| m.is_empty()),
            "{key}: {}",
            state[key]
        );
    }
}

#[tokio::test]
async fn stats_report_the_device_size_in_bytes() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mode = Mode::SingleNodeWriter;
    let volume = create(&plugin, "measured", mode, 6 * MIB + 512).await;
    let id = volume.volume_id.as_str();
    let staging = scratch.co_path("staging");
    let target = scratch.co_path("target");
    stage(&plugin, id, &staging, mode).await;
    publish(&plugin, id, &staging, &target, mode, false).await;

    let device_size = i64::try_from(size_of(&target)).expect("size");
    for path in [&target, &staging] {
        let usage = plugin
            .node()
            .node_get_volume_stats(stats_request(id, path))
            .await
            .unwrap_or_else(|err| panic!("stats at {}: {err:?}", path.display()))
            .into_inner()
            .usage;
        let units: Vec<i32> = usage.iter().map(|u| u.unit).collect();
        assert_eq!(
            units,
            [Unit::Bytes as i32],
            "bytes only, no inodes, at {}: {usage:?}",
            path.display()
        );
        let bytes = &usage[0];
        assert!(
            bytes.total >= volume.capacity_bytes,
            "total {} < capacity {} at {}",
            bytes.total,
            volume.capacity_bytes,
            path.display()
        );
        assert_eq!(bytes.total, device_size, "at {}", path.display());
        assert!(bytes.used >= 0 && bytes.available >= 0, "{bytes:?}");
    }

    // A path where the volume is not is NOT_FOUND, even an existing file.
    let elsewhere = scratch.co_path("elsewhere");
    fs::write(&elsewhere, "").expect("a file");
    assert_eq!(
        code_of(
            plugin
                .node()
                .node_get_volume_stats(stats_request(id, &elsewhere))
                .await
        ),
        Code::NotFound
    );

    unpublish(&plugin, id, &target).await;
    unstage(&plugin, id, &staging).await;
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
}

#[tokio::test]
async fn expansion_grows_the_device_at_the_target() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mode = Mode::MultiNodeMultiWriter;
    let id = create(&plugin, "growing", mode, 8 * MIB).await.volume_id;
    let staging = scratch.co_path("staging");
    let (writer, reader) = (scratch.co_path("writer"), scratch.co_path("reader"));
    stage(&plugin, &id, &staging, mode).await;
    publish(&plugin, &id, &staging, &writer, mode, false).await;
    publish(&plugin, &id, &staging, &reader, mode, true).await;
    let data = pattern(9);
    write_at(&writer, 0, &data).expect("write before growing");

    let new_size = 24 * MIB;
    let range = Some(CapacityRange {
        required_bytes: new_size,
        limit_bytes: 0,
    });
    let expanded = plugin
        .controller()
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: range,
            volume_capability: Some(block_capability(mode)),
            ..Default::default()
        })
        .await
        .expect("controller expand")
        .into_inner();
    assert_eq!(expanded.capacity_bytes, new_size);
    assert!(
        expanded.node_expansion_required,
        "a loop device learns its new size only on the node"
    );
    assert_eq!(
        fs::metadata(scratch.volume_image(&id))
            .expect("image")
            .len(),
        u64::try_from(new_size).expect("size")
    );

    let node_expanded = plugin
        .node()
        .node_expand_volume(NodeExpandVolumeRequest {
            volume_id: id.clone(),
            volume_path: writer.display().to_string(),
            capacity_range: range,
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(block_capability(mode)),
            ..Default::default()
        })
        .await
        .expect("node expand")
        .into_inner();
    assert!(
        node_expanded.capacity_bytes >= new_size,
        "{node_expanded:?}"
    );
    let new_size = u64::try_from(new_size).expect("size");
    assert!(size_of(&writer) >= new_size, "{}", size_of(&writer));
    assert!(
        size_of(&reader) >= new_size,
        "the read-only target's device grows too: {}",
        size_of(&reader)
    );

    // The new room is usable and the old data is where it was.
    let beyond = 20 * MIB as u64;
    write_at(&writer, beyond, &pattern(10)).expect("write past the old end");
    assert_eq!(read_at(&writer, beyond, BLOCK), pattern(10));
    assert_eq!(read_at(&writer, 0, BLOCK), data);

    for target in [&writer, &reader] {
        unpublish(&plugin, &id, target).await;
    }
    unstage(&plugin, &id, &staging).await;
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
}

#[tokio::test]
async fn unpublish_and_unstage_work_after_a_plugin_restart() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mode = Mode::MultiNodeMultiWriter;
    let id = create(&plugin, "restarted", mode, 4 * MIB).await.volume_id;
    controller_publish(&plugin, &id, mode).await;
    let staging = scratch.co_path("staging");
    let (writer, reader) = (scratch.co_path("writer"), scratch.co_path("reader"));
    stage(&plugin, &id, &staging, mode).await;
    publish(&plugin, &id, &staging, &writer, mode, false).await;
    publish(&plugin, &id, &staging, &reader, mode, true).await;
    let data = pattern(11);
    write_at(&writer, 0, &data).expect("write");
    let attached = loops_of(&scratch);
    assert_eq!(attached.len(), 2, "{attached:?}");

    // Killed, as a crash would (no chance to clean up), and started on the same state.
    drop(plugin);
    let plugin = Plugin::start(&scratch, &[]).await;
    assert_eq!(
        loops_of(&scratch),
        attached,
        "loop devices outlive the plugin"
    );
    assert_eq!(read_at(&writer, 0, BLOCK), data);

    // The CO's retries are recognised and attach nothing new.
    stage(&plugin, &id, &staging, mode).await;
    publish(&plugin, &id, &staging, &writer, mode, false).await;
    publish(&plugin, &id, &staging, &reader, mode, true).await;
    assert_eq!(loops_of(&scratch), attached, "retries after a restart");

    for target in [&writer, &reader] {
        unpublish(&plugin, &id, target).await;
        assert!(!is_mount_point(target) && !target.exists());
    }
    unstage(&plugin, &id, &staging).await;
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
    assert!(mounts_under(scratch.path()).is_empty());
    controller_unpublish(&plugin, &id).await;
    delete(&plugin, &id).await;
    assert!(!scratch.volume_image(&id).exists());
}

/// The loop device a loop-at-create volume records as its own in state.json.
fn recorded_device(scratch: &Scratch, id: &str) -> PathBuf {
    let state = scratch.saved_state();
    let device = state["volumes"][id]["loop_device"]
        .as_str()
        .unwrap_or_else(|| panic!("volume {id} records no loop device: {state}"));
    PathBuf::from(device)
}

#[tokio::test]
async fn variant_loop_at_create_keeps_one_device_from_create_to_delete() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let args = ["--variant", "loop-at-create"];
    let plugin = Plugin::start(&scratch, &args).await;
    let mode = Mode::MultiNodeMultiWriter;
    let volume = create(&plugin, "early", mode, 4 * MIB).await;
    let id = volume.volume_id.as_str();
    let image = scratch.volume_image(id);

    // Attached right after CreateVolume, and recorded with the volume.
    let at_create = loops_backed_under(scratch.path());
    assert_eq!(
        at_create.len(),
        1,
        "one device after CreateVolume: {at_create:?}"
    );
    let (device, backing) = at_create[0].clone();
    let only_device = vec![device.clone()];
    assert_eq!(backing, image);
    assert!(!loop_is_read_only(&device));
    assert_eq!(recorded_device(&scratch, id), device);
    // A retried create attaches nothing new.
    assert_eq!(create(&plugin, "early", mode, 4 * MIB).await, volume);
    assert_eq!(loops_of(&scratch), only_device);

    // Stage and a writable publish use it; a read-only publish adds its own, read-only.
    controller_publish(&plugin, id, mode).await;
    let staging = scratch.co_path("staging");
    stage(&plugin, id, &staging, mode).await;
    assert_eq!(loops_of(&scratch), only_device, "the stage attaches none");
    let (writer, reader) = (scratch.co_path("writer"), scratch.co_path("reader"));
    publish(&plugin, id, &staging, &writer, mode, false).await;
    assert_eq!(loop_device_of(&writer), Some(device.clone()));
    let data = pattern(21);
    write_at(&writer, 0, &data).expect("write through the writer");
    publish(&plugin, id, &staging, &reader, mode, true).await;
    let reader_device = loop_device_of(&reader).expect("a loop device");
    assert_ne!(reader_device, device);
    assert!(loop_is_read_only(&reader_device));
    assert!(write_at(&reader, 0, &pattern(22)).is_err(), "read-only");
    assert_eq!(read_at(&reader, 0, BLOCK), data);

    // The release detaches the reader's device only.
    for target in [&reader, &writer] {
        unpublish(&plugin, id, target).await;
    }
    unstage(&plugin, id, &staging).await;
    assert_eq!(loops_of(&scratch), only_device, "kept after the release");
    controller_unpublish(&plugin, id).await;

    // A restart finds the same device; one lost (as in a reboot) is attached again at the
    // next stage, and the volume records the new one.
    drop(plugin);
    let plugin = Plugin::start(&scratch, &args).await;
    assert_eq!(loops_of(&scratch), only_device);
    detach_loop(&device).expect("lose the device");
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
    controller_publish(&plugin, id, mode).await;
    stage(&plugin, id, &staging, mode).await;
    let again = loops_of(&scratch);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(recorded_device(&scratch, id), again[0]);
    publish(&plugin, id, &staging, &writer, mode, false).await;
    assert_eq!(loop_device_of(&writer).as_ref(), again.first());
    assert_eq!(read_at(&writer, 0, BLOCK), data, "the data is still there");
    unpublish(&plugin, id, &writer).await;
    unstage(&plugin, id, &staging).await;
    controller_unpublish(&plugin, id).await;
    assert_eq!(loops_of(&scratch), again);

    // DeleteVolume detaches it.
    delete(&plugin, id).await;
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
    assert!(!image.exists());
    assert!(mounts_under(scratch.path()).is_empty());
}

#[tokio::test]
async fn fault_block_unsupported_refuses_block_volumes() {
    let _serial = serial().await;
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--fault=block-unsupported"]).await;
    let mut controller = plugin.controller();
    let mode = Mode::SingleNodeWriter;
    let refused = controller
        .create_volume(create_block_request("block", mode, 4 * MIB))
        .await;
    assert_eq!(code_of(refused), Code::InvalidArgument);
    controller
        .create_volume(create_request("mount", mode, 4 * MIB))
        .await
        .expect("mount volumes still work");
    let capacity = |capability| GetCapacityRequest {
        volume_capabilities: vec![capability],
        ..Default::default()
    };
    let for_block = controller
        .get_capacity(capacity(block_capability(mode)))
        .await
        .expect("capacity for block")
        .into_inner()
        .available_capacity;
    assert_eq!(for_block, 0);
    let for_mount = controller
        .get_capacity(capacity(mount_capability(mode)))
        .await
        .expect("capacity for mount")
        .into_inner()
        .available_capacity;
    assert!(for_mount > 0);
    let images: Vec<_> = fs::read_dir(scratch.state_dir().join("volumes"))
        .expect("volumes dir")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "img"))
        .collect();
    assert!(images.is_empty(), "no image was made: {images:?}");
}

#[tokio::test]
async fn fault_block_publish_not_device_binds_the_image_file() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--fault=block-publish-not-device"]).await;
    let mode = Mode::SingleNodeWriter;
    let id = create(&plugin, "not-a-device", mode, 4 * MIB)
        .await
        .volume_id;
    let (staging, target) = (scratch.co_path("staging"), scratch.co_path("target"));
    stage(&plugin, &id, &staging, mode).await;
    publish(&plugin, &id, &staging, &target, mode, false).await;
    assert!(is_mount_point(&target));
    let meta = fs::metadata(&target).expect("target");
    assert!(
        meta.file_type().is_file() && !meta.file_type().is_block_device(),
        "the fault publishes a regular file: {meta:?}"
    );
    assert_eq!(loop_device_of(&target), None);

    unpublish(&plugin, &id, &target).await;
    unstage(&plugin, &id, &staging).await;
    assert!(!is_mount_point(&target));
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
}

#[tokio::test]
async fn fault_block_stage_wipes_loses_data_at_the_next_claim() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--fault=block-stage-wipes"]).await;
    let mode = Mode::SingleNodeWriter;
    let id = create(&plugin, "wiped", mode, 4 * MIB).await.volume_id;
    let image = scratch.volume_image(&id);
    let (staging, target) = (scratch.co_path("staging"), scratch.co_path("target"));
    stage(&plugin, &id, &staging, mode).await;
    publish(&plugin, &id, &staging, &target, mode, false).await;
    let data = pattern(12);
    write_at(&target, 0, &data).expect("write");
    assert_eq!(read_at(&image, 0, BLOCK), data, "written while claimed");
    unpublish(&plugin, &id, &target).await;
    unstage(&plugin, &id, &staging).await;
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
    assert_eq!(read_at(&image, 0, BLOCK), data, "still there after release");

    stage(&plugin, &id, &staging, mode).await;
    publish(&plugin, &id, &staging, &target, mode, false).await;
    assert_eq!(
        read_at(&target, 0, BLOCK),
        vec![0u8; BLOCK],
        "the fault wipes the image at the new stage"
    );
    assert_eq!(read_at(&image, 0, BLOCK), vec![0u8; BLOCK]);
    unpublish(&plugin, &id, &target).await;
    unstage(&plugin, &id, &staging).await;
}

#[tokio::test]
async fn fault_block_ignores_readonly_lets_a_read_only_target_write() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--fault=block-ignores-readonly"]).await;
    let mode = Mode::SingleNodeWriter;
    let id = create(&plugin, "leaky", mode, 4 * MIB).await.volume_id;
    let image = scratch.volume_image(&id);
    let (staging, target) = (scratch.co_path("staging"), scratch.co_path("target"));
    stage(&plugin, &id, &staging, mode).await;
    let staged = loops_of(&scratch);
    publish(&plugin, &id, &staging, &target, mode, true).await;
    assert!(is_block_device(&target));
    assert_eq!(
        loops_of(&scratch),
        staged,
        "the stage's writable device is bound, not a read-only one"
    );
    let data = pattern(13);
    write_at(&target, 0, &data).expect("the fault lets a read-only target write");
    assert_eq!(read_at(&image, 0, BLOCK), data);

    unpublish(&plugin, &id, &target).await;
    unstage(&plugin, &id, &staging).await;
    assert_eq!(wait_for_no_loops_under(scratch.path()), []);
}

// The loop ioctls (linux/loop.h), for a neighbour that uses loop devices of its own.
nix::ioctl_none_bad!(loop_ctl_get_free, 0x4C82);
nix::ioctl_write_int_bad!(loop_set_fd, 0x4C00);
nix::ioctl_none_bad!(loop_clr_fd, 0x4C01);

/// Another process's use of loop devices, as on a host where other software uses them:
/// a thread attaching an image of its own to a free loop device and detaching it again, as
/// fast as it can. It only ever detaches the devices it attached. Stopped on drop.
struct Neighbour {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Neighbour {
    fn start(image: PathBuf) -> Neighbour {
        File::create(&image)
            .and_then(|f| f.set_len(MIB as u64))
            .expect("the neighbour's image");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let control = OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/loop-control")
                .expect("loop-control");
            let backing = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&image)
                .expect("image");
            while !stopped.load(Ordering::Relaxed) {
                // SAFETY: the descriptor is open for the whole call; no argument.
                let Ok(number) = (unsafe { loop_ctl_get_free(control.as_raw_fd()) }) else {
                    continue;
                };
                let Ok(device) = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(format!("/dev/loop{number}"))
                else {
                    continue;
                };
                // SAFETY: both descriptors are open for the whole call.
                if unsafe { loop_set_fd(device.as_raw_fd(), backing.as_raw_fd()) }.is_err() {
                    continue; // Someone else took it.
                }
                // SAFETY: the descriptor is open for the whole call; no argument. The device
                // is the one attached just now.
                let _ = unsafe { loop_clr_fd(device.as_raw_fd()) };
                // A real neighbour (another plugin, losetup) pauses between devices; one that
                // never does would starve any other process asking for a free device.
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        });
        Neighbour {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Other software on the host attaching and detaching loop devices must not make the
/// plugin's node calls fail. Two ways it once did (src/loop_device.rs):
/// - `attach` opens the device that LOOP_CTL_GET_FREE named; if another process attached
///   and is detaching it meanwhile, the open fails with ENXIO: it must ask for another.
/// - `attached_to` reads every loop device's `loop/backing_file`; for a device being
///   detached that read fails with ENODEV (the sysfs group is going away), which means
///   "not attached", not an error.
#[tokio::test]
async fn node_calls_survive_a_neighbour_using_loop_devices() {
    let _serial = serial().await;
    if !can_use_loop_devices() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mode = Mode::SingleNodeWriter;
    let id = create(&plugin, "neighbourly", mode, MIB).await.volume_id;
    let staging = scratch.co_path("staging");
    let neighbour = Neighbour::start(scratch.path().join("neighbour.img"));

    let mut failures = Vec::new();
    for _ in 0..100 {
        let staged = plugin
            .node()
            .node_stage_volume(stage_block_request(&id, &staging, mode))
            .await;
        if let Err(status) = staged {
            failures.push(format!("NodeStageVolume: {}", status.message()));
            continue;
        }
        let expanded = plugin
            .node()
            .node_expand_volume(NodeExpandVolumeRequest {
                volume_id: id.clone(),
                volume_path: staging.display().to_string(),
                ..Default::default()
            })
            .await;
        if let Err(status) = expanded {
            failures.push(format!("NodeExpandVolume: {}", status.message()));
        }
        unstage(&plugin, &id, &staging).await;
    }
    drop(neighbour);
    assert!(
        failures.is_empty(),
        "{} of 200 stage and expand calls failed, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
}
