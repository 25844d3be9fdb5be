//! Test support: a scratch directory that unmounts whatever is left under it (and detaches
//! loop devices attached to files in it), the plugin as a real child process on a unix
//! socket, and short builders for CSI requests.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use nomad_conform_proto::csi::v1::controller_client::ControllerClient;
use nomad_conform_proto::csi::v1::group_controller_client::GroupControllerClient;
use nomad_conform_proto::csi::v1::identity_client::IdentityClient;
use nomad_conform_proto::csi::v1::node_client::NodeClient;
use nomad_conform_proto::csi::v1::volume_capability::access_mode::Mode;
use nomad_conform_proto::csi::v1::volume_capability::{
    AccessMode, AccessType, BlockVolume, MountVolume,
};
use nomad_conform_proto::csi::v1::{
    CapacityRange, ControllerPublishVolumeRequest, CreateVolumeRequest, NodePublishVolumeRequest,
    NodeStageVolumeRequest, VolumeCapability,
};
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status};

pub const NODE_ID: &str = "node-1";
pub const GIB: i64 = 1 << 30;
pub const MIB: i64 = 1 << 20;

/// Whether this process may mount. Mount tests need root: without it they are skipped
/// locally, but in CI (CI set) a skip would hide a broken suite, so they fail instead.
pub fn can_mount() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("mount tests need root, and CI is set: run the tests as root");
    }
    eprintln!("skipping: mount tests need root");
    false
}

/// A short directory under /tmp (socket paths must stay under 108 bytes). On drop it unmounts
/// everything mounted beneath it, deepest first, before the files are removed, so a failed
/// test leaves no mounts behind.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("chp")
            .tempdir_in("/tmp")
            .expect("scratch dir");
        Scratch { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.path().join("csi.sock")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }

    pub fn volume_dir(&self, volume_id: &str) -> PathBuf {
        self.state_dir().join("volumes").join(volume_id)
    }

    pub fn snapshot_dir(&self, snapshot_id: &str) -> PathBuf {
        self.state_dir().join("snapshots").join(snapshot_id)
    }

    /// A block volume's image file.
    pub fn volume_image(&self, volume_id: &str) -> PathBuf {
        self.state_dir()
            .join("volumes")
            .join(format!("{volume_id}.img"))
    }

    /// The plugin's state.json as JSON.
    pub fn saved_state(&self) -> serde_json::Value {
        let text = fs::read_to_string(self.state_dir().join("state.json")).expect("state.json");
        serde_json::from_str(&text).expect("state.json is JSON")
    }

    /// A path for the CO side (staging or target) whose parent exists, as Nomad leaves it.
    pub fn co_path(&self, name: &str) -> PathBuf {
        let parent = self.path().join("co");
        fs::create_dir_all(&parent).expect("co dir");
        parent.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        for _ in 0..8 {
            let mut leftover = mounts_under(self.path());
            if leftover.is_empty() {
                break;
            }
            leftover.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
            for mount in leftover {
                if let Err(err) = nix::mount::umount2(&mount, nix::mount::MntFlags::MNT_DETACH) {
                    eprintln!("cleanup: failed to unmount {}: {err}", mount.display());
                }
            }
        }
        for (device, _) in loops_backed_under(self.path()) {
            if let Err(err) = detach_loop(&device) {
                eprintln!("cleanup: failed to detach {}: {err}", device.display());
            }
        }
    }
}

/// Every loop device attached to a file under `dir`, with that file, as
/// /sys/block/loop*/loop/backing_file says.
pub fn loops_backed_under(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir("/sys/block") else {
        return found;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let Ok(text) = fs::read_to_string(entry.path().join("loop/backing_file")) else {
            continue; // Not attached.
        };
        let backing = PathBuf::from(text.trim_end_matches('\n'));
        if backing.starts_with(dir) {
            found.push((Path::new("/dev").join(name), backing));
        }
    }
    found.sort();
    found
}

/// [`loops_backed_under`], waiting up to 2 s for it to become empty: a detach finishes when
/// the last opener (say, a udev probe) closes the device.
pub fn wait_for_no_loops_under(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let found = loops_backed_under(dir);
        if found.is_empty() || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

nix::ioctl_none_bad!(loop_clr_fd, 0x4C01);

/// Detaches a loop device, as a reboot would lose it.
pub fn detach_loop(device: &Path) -> std::io::Result<()> {
    let file = fs::File::open(device)?;
    // SAFETY: the descriptor is open for the whole call; LOOP_CLR_FD takes no argument.
    unsafe { loop_clr_fd(std::os::fd::AsRawFd::as_raw_fd(&file)) }?;
    Ok(())
}

/// The loop device whose node `path` is (a published block volume's target), if it is one.
pub fn loop_device_of(path: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = fs::metadata(path).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let rdev = meta.rdev();
    let (major, minor) = (nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev));
    let link = fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    Some(Path::new("/dev").join(link.file_name()?))
}

/// The size of the block device or file at `path`, by seeking to its end.
pub fn size_of(path: &Path) -> u64 {
    use std::io::{Seek, SeekFrom};
    fs::File::open(path)
        .and_then(|mut f| f.seek(SeekFrom::End(0)))
        .unwrap_or_else(|err| panic!("size of {}: {err}", path.display()))
}

/// One line of /proc/self/mountinfo that matters here.
pub struct MountEntry {
    pub mount_point: PathBuf,
    pub options: String,
}

pub fn mount_table() -> Vec<MountEntry> {
    let table = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    table
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            Some(MountEntry {
                mount_point: PathBuf::from(fields.get(4)?),
                options: fields.get(5)?.to_string(),
            })
        })
        .collect()
}

pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    mount_table()
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| p.starts_with(dir))
        .collect()
}

pub fn is_mount_point(path: &Path) -> bool {
    mount_table().iter().any(|m| m.mount_point == path)
}

/// The options of the topmost mount at `path`, e.g. "ro,relatime".
pub fn mount_options(path: &Path) -> Option<String> {
    mount_table()
        .into_iter()
        .rev()
        .find(|m| m.mount_point == path)
        .map(|m| m.options)
}

/// The plugin binary running on a scratch socket. Killed on drop if still running; its
/// stderr goes to `<scratch>/plugin.log` and is printed when a test fails.
pub struct Plugin {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
    pub channel: Channel,
}

impl Plugin {
    pub async fn start(scratch: &Scratch, extra_args: &[&str]) -> Plugin {
        let socket = scratch.socket();
        let log = scratch.path().join("plugin.log");
        let log_file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_csi-hostpath"))
            .arg(format!("--endpoint=unix://{}", socket.display()))
            .arg(format!("--node-id={NODE_ID}"))
            .arg(format!("--state-dir={}", scratch.state_dir().display()))
            .args(extra_args)
            .env_remove("CSI_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start csi-hostpath");
        let channel = connect(&socket).await;
        Plugin {
            child,
            socket,
            log,
            channel,
        }
    }

    pub fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel.clone())
    }

    pub fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(self.channel.clone())
    }

    pub fn group_controller(&self) -> GroupControllerClient<Channel> {
        GroupControllerClient::new(self.channel.clone())
    }

    pub fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel.clone())
    }

    /// Stops the plugin as Nomad does (SIGTERM) and returns how it exited. Async so that the
    /// client's connection keeps being served while the plugin shuts down gracefully.
    pub async fn stop(mut self) -> ExitStatus {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        kill(pid, Signal::SIGTERM).expect("SIGTERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "plugin did not stop within 10 s of SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking()
            && let Ok(log) = fs::read_to_string(&self.log)
        {
            eprintln!("--- csi-hostpath log ---\n{log}--- end of log ---");
        }
    }
}

/// Connects as Nomad does: plaintext gRPC over the unix socket, retrying until it is up.
async fn connect(socket: &Path) -> Channel {
    let endpoint =
        Endpoint::from_shared(format!("unix://{}", socket.display())).expect("endpoint uri");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match endpoint.connect().await {
            Ok(channel) => return channel,
            Err(err) if Instant::now() < deadline => {
                let _ = err;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Err(err) => panic!("could not connect to {}: {err}", socket.display()),
        }
    }
}

/// The code of a failed call; panics if it succeeded.
pub fn code_of<T: std::fmt::Debug>(result: Result<T, Status>) -> Code {
    match result {
        Ok(reply) => panic!("expected an error, got {reply:?}"),
        Err(status) => {
            assert!(
                !status.message().is_empty(),
                "error without a message: {status:?}"
            );
            status.code()
        }
    }
}

pub fn mount_capability(mode: Mode) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume {
            fs_type: "ext4".into(),
            ..Default::default()
        })),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    }
}

pub fn block_capability(mode: Mode) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    }
}

pub fn create_request(name: &str, mode: Mode, required_bytes: i64) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: (required_bytes > 0).then_some(CapacityRange {
            required_bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![mount_capability(mode)],
        parameters: HashMap::new(),
        ..Default::default()
    }
}

/// A CreateVolume request for a block volume.
pub fn create_block_request(name: &str, mode: Mode, required_bytes: i64) -> CreateVolumeRequest {
    CreateVolumeRequest {
        volume_capabilities: vec![block_capability(mode)],
        ..create_request(name, mode, required_bytes)
    }
}

pub fn controller_publish(
    volume_id: &str,
    mode: Mode,
    readonly: bool,
) -> ControllerPublishVolumeRequest {
    ControllerPublishVolumeRequest {
        volume_id: volume_id.into(),
        node_id: NODE_ID.into(),
        volume_capability: Some(mount_capability(mode)),
        readonly,
        ..Default::default()
    }
}

pub fn controller_publish_block(
    volume_id: &str,
    mode: Mode,
    readonly: bool,
) -> ControllerPublishVolumeRequest {
    ControllerPublishVolumeRequest {
        volume_capability: Some(block_capability(mode)),
        ..controller_publish(volume_id, mode, readonly)
    }
}

pub fn stage_block_request(volume_id: &str, staging: &Path, mode: Mode) -> NodeStageVolumeRequest {
    NodeStageVolumeRequest {
        volume_capability: Some(block_capability(mode)),
        ..stage_request(volume_id, staging, mode)
    }
}

pub fn publish_block_request(
    volume_id: &str,
    staging: &Path,
    target: &Path,
    mode: Mode,
    readonly: bool,
) -> NodePublishVolumeRequest {
    NodePublishVolumeRequest {
        volume_capability: Some(block_capability(mode)),
        ..publish_request(volume_id, staging, target, mode, readonly)
    }
}

pub fn stage_request(volume_id: &str, staging: &Path, mode: Mode) -> NodeStageVolumeRequest {
    NodeStageVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(mount_capability(mode)),
        ..Default::default()
    }
}

pub fn publish_request(
    volume_id: &str,
    staging: &Path,
    target: &Path,
    mode: Mode,
    readonly: bool,
) -> NodePublishVolumeRequest {
    NodePublishVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(mount_capability(mode)),
        readonly,
        ..Default::default()
    }
}
