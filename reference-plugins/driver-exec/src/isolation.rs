//! The chroot and image variants: tasks in a root filesystem of their own.
//!
//! - chroot (fs_isolation CHROOT): Nomad's client builds the task's root itself, in the task
//!   directory `<alloc_dir>/<task name>`: its `chroot_env` (host `/bin`, `/etc`, `/lib`,
//!   `/usr`, ...), the shared `alloc/`, and `local/`, `secrets/`, `tmp/`. It makes neither
//!   `/dev` nor `/proc`: the driver mounts those.
//! - image (fs_isolation IMAGE): the client builds nothing; the driver brings the root, as a
//!   container runtime does from an image. Here the "image" is the host's own system: in the
//!   directory `rootfs` of the task's state directory, a tmpfs holds read-only recursive
//!   bind mounts of the host's `/usr`, `/etc`, `/lib`, `/lib64`, `/bin`, `/sbin` (recreated
//!   as symlinks where they are symlinks on the host, as on merged-/usr systems), `/dev`, a
//!   fresh `/proc`, a tmpfs `/tmp`, and the task's directories at `/alloc`, `/local` and
//!   `/secrets`, read-write.
//!
//! Either way the task's supervisor, before it forks the task, moves into a mount namespace of
//! its own (`unshare(CLONE_NEWNS)`) and makes every mount in it a slave of the host's, so that
//! no mount made there propagates back to the host (unmounts on the host still reach it).
//! It mounts what the root needs there (for chroot: the host's `/dev`, recursively, at
//! `<root>/dev`, and a new proc at `<root>/proc`, making those two directories if they are
//! missing); the task then chroots into the root and changes to `/` (`confine.rs`). The log
//! FIFOs are host paths: the supervisor, which never chroots, opens them. Commands exec'd in
//! the task join the same namespace (`setns` on `/proc/<task pid>/ns/mnt`) and chroot into the
//! same root.
//!
//! The namespace, with every mount in it, goes away with the last process in it, so nothing
//! is ever unmounted. On the host, an image root is an empty directory, removed by DestroyTask
//! (with `rmdir`, never recursively).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::CloneFlags;
use nomad_conform_proto::nomad::drivers::driver_capabilities::FsIsolation;

use crate::faults::Fault;
use crate::plugin::Plugin;
use crate::variants::{Variant, Variants};

/// A task's filesystem isolation, as the plugin tells its supervisor (`--isolation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Isolation {
    /// The root is the task directory the client built.
    Chroot,
    /// The root is built by the driver.
    Image,
}

/// The directory in a task's state directory that an image root is mounted at.
pub const ROOTFS_DIR: &str = "rootfs";

/// The host directories an image root gets, read-only, at the same place.
const IMAGE_HOST_DIRS: &[&str] = &["usr", "etc", "lib", "lib64", "bin", "sbin"];

/// PATH for an image task whose env has none.
const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The PATH a task (or exec) with the image variant gets when its env has none: Nomad gives
/// image drivers no agent environment, and an image's config would give one.
pub fn missing_path(variants: &Variants, env: &HashMap<String, String>) -> Option<&'static str> {
    (of(variants) == Some(Isolation::Image) && !env.contains_key("PATH")).then_some(IMAGE_PATH)
}

/// The isolation the variants ask for; None: tasks see the host's filesystem.
pub fn of(variants: &Variants) -> Option<Isolation> {
    if variants.has(Variant::Chroot) {
        Some(Isolation::Chroot)
    } else if variants.has(Variant::Image) {
        Some(Isolation::Image)
    } else {
        None
    }
}

/// Capabilities.fs_isolation.
pub fn fs_isolation(plugin: &Plugin) -> FsIsolation {
    // claims-chroot: the fault claims an isolation the driver does not give.
    if plugin.faults.has(Fault::ClaimsChroot) {
        return FsIsolation::Chroot;
    }
    match of(&plugin.variants) {
        Some(Isolation::Chroot) => FsIsolation::Chroot,
        Some(Isolation::Image) => FsIsolation::Image,
        None => FsIsolation::None,
    }
}

/// The task's root: its task directory (chroot), or `rootfs` in its state directory (image).
pub fn root(isolation: Isolation, task_dir: &Path, task_state_dir: &Path) -> PathBuf {
    match isolation {
        Isolation::Chroot => task_dir.to_path_buf(),
        Isolation::Image => task_state_dir.join(ROOTFS_DIR),
    }
}

/// Plugin side, StartTask: makes the directory an image root is mounted at.
pub fn prepare(isolation: Isolation, root: &Path) -> Result<(), String> {
    match isolation {
        Isolation::Chroot => Ok(()),
        Isolation::Image => std::fs::create_dir_all(root)
            .map_err(|err| format!("failed to create {}: {err}", root.display())),
    }
}

/// Supervisor side, before it forks the task: a mount namespace of its own, slave to the
/// host's, with the task's root built in it.
pub fn build(
    isolation: Isolation,
    root: &Path,
    task_dir: &Path,
    alloc_dir: Option<&Path>,
) -> Result<(), String> {
    nix::sched::unshare(CloneFlags::CLONE_NEWNS)
        .map_err(|err| format!("failed to make a mount namespace for the task: {err}"))?;
    // Before anything is mounted: nothing made here may reach the host.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(|err| format!("failed to make the task's mounts private: {err}"))?;
    match isolation {
        Isolation::Chroot => {
            make_dir(&root.join("dev"))?;
            make_dir(&root.join("proc"))?;
            mount_dev_and_proc(root)
        }
        Isolation::Image => {
            let alloc_dir = alloc_dir.ok_or("an image root needs the allocation directory")?;
            build_image(root, task_dir, alloc_dir)
        }
    }
}

fn build_image(root: &Path, task_dir: &Path, alloc_dir: &Path) -> Result<(), String> {
    // A tmpfs under everything: what the task writes outside its mounts goes there, and the
    // directory stays empty on the host.
    mount_new(
        "tmpfs",
        root,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        "mode=0755",
    )?;
    for name in IMAGE_HOST_DIRS {
        let host = Path::new("/").join(name);
        let inside = root.join(name);
        let Ok(meta) = std::fs::symlink_metadata(&host) else {
            continue; // Not on this host: not in the image either.
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&host)
                .map_err(|err| format!("failed to read the symlink {}: {err}", host.display()))?;
            std::os::unix::fs::symlink(&target, &inside)
                .map_err(|err| format!("failed to create {}: {err}", inside.display()))?;
        } else if meta.is_dir() {
            make_dir(&inside)?;
            bind(&host, &inside, true)?;
        }
    }
    for name in ["dev", "proc", "tmp", "alloc", "local", "secrets"] {
        make_dir(&root.join(name))?;
    }
    mount_dev_and_proc(root)?;
    mount_new(
        "tmpfs",
        &root.join("tmp"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        "mode=1777",
    )?;
    bind(&alloc_dir.join("alloc"), &root.join("alloc"), false)?;
    bind(&task_dir.join("local"), &root.join("local"), false)?;
    bind(&task_dir.join("secrets"), &root.join("secrets"), false)
}

/// The host's `/dev`, recursively, at `<root>/dev`, and a new proc at `<root>/proc`.
fn mount_dev_and_proc(root: &Path) -> Result<(), String> {
    bind(Path::new("/dev"), &root.join("dev"), false)?;
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount_new("proc", &root.join("proc"), flags, "")
}

/// A new filesystem of type `fstype` at `target`.
fn mount_new(fstype: &str, target: &Path, flags: MsFlags, data: &str) -> Result<(), String> {
    let data = (!data.is_empty()).then_some(data);
    mount(Some(fstype), target, Some(fstype), flags, data)
        .map_err(|err| format!("failed to mount a {fstype} at {}: {err}", target.display()))
}

/// Binds `source` at `target`, recursively; read-only when asked, every mount of it (a bind
/// of the host's `/etc` may carry binds of `/etc/hosts` or `/etc/resolv.conf` that a
/// read-only top mount would leave writable).
fn bind(source: &Path, target: &Path, read_only: bool) -> Result<(), String> {
    let failed = |err: nix::Error| {
        format!(
            "failed to bind {} at {}: {err}",
            source.display(),
            target.display()
        )
    };
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(failed)?;
    if !read_only {
        return Ok(());
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|err| format!("failed to read /proc/self/mountinfo: {err}"))?;
    for point in mount_points_under(&mountinfo, target) {
        mount(
            None::<&str>,
            &point,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
            None::<&str>,
        )
        .map_err(|err| format!("failed to make {} read-only: {err}", point.display()))?;
    }
    Ok(())
}

/// The mount points at or under `dir` that a mountinfo text lists, in its order (parents
/// before what is mounted on them).
fn mount_points_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape_mountinfo(field)))
        .filter(|point| point.starts_with(dir))
        .collect()
}

/// A mountinfo path with its octal escapes (`\040` for a space, ...) decoded.
fn unescape_mountinfo(field: &str) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt as _;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|digits| bytes[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        match octal {
            Some(digits) => {
                let value = digits.iter().fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
                out.push(value as u8);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    std::ffi::OsString::from_vec(out)
}

/// Makes the directory `path` unless it is one already; anything else there (a symlink a
/// task left, say) is refused rather than mounted through.
fn make_dir(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "{} exists and is no directory: nothing is mounted there",
            path.display()
        )),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(path)
            .map_err(|err| format!("failed to create {}: {err}", path.display())),
        Err(err) => Err(format!("failed to look at {}: {err}", path.display())),
    }
}

/// DestroyTask: removes an image root's directory, if there is one. On the host it is empty
/// (everything in it was mounted in the task's namespace), so `rmdir` does, and nothing that
/// could be a mount is ever walked into.
pub fn remove_root(task_state_dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir(task_state_dir.join(ROOTFS_DIR)) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variants_choose_the_isolation() {
        assert_eq!(of(&Variants::default()), None);
        assert_eq!(
            of(&Variants::new([Variant::Chroot])),
            Some(Isolation::Chroot)
        );
        assert_eq!(of(&Variants::new([Variant::Image])), Some(Isolation::Image));
    }

    #[test]
    fn image_tasks_without_a_path_get_one() {
        let image = Variants::new([Variant::Image]);
        let empty = HashMap::new();
        assert_eq!(missing_path(&image, &empty), Some(IMAGE_PATH));
        assert_eq!(
            missing_path(&Variants::new([Variant::Chroot]), &empty),
            None
        );
        let with_path = HashMap::from([("PATH".to_string(), "/bin".to_string())]);
        assert_eq!(missing_path(&image, &with_path), None);
    }

    #[test]
    fn roots() {
        let (task_dir, state) = (Path::new("/a/alloc/web"), Path::new("/s/task"));
        assert_eq!(root(Isolation::Chroot, task_dir, state), task_dir);
        assert_eq!(
            root(Isolation::Image, task_dir, state),
            Path::new("/s/task/rootfs")
        );
    }

    #[test]
    fn mount_points_under_a_directory_come_from_mountinfo() {
        let mountinfo = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
30 22 0:5 / /s/t/rootfs rw - tmpfs tmpfs rw
31 30 8:1 /etc /s/t/rootfs/etc rw - ext4 /dev/sda1 rw
32 31 8:1 /h /s/t/rootfs/etc/hosts rw - ext4 /dev/sda1 rw
33 31 8:1 /x /s/t/rootfs/etc/a\\040b rw - ext4 /dev/sda1 rw
34 30 8:1 /usr /s/t/rootfs/usr rw - ext4 /dev/sda1 rw
35 22 8:1 /etc /s/t/rootfs/etcetera rw - ext4 /dev/sda1 rw
";
        assert_eq!(
            mount_points_under(mountinfo, Path::new("/s/t/rootfs/etc")),
            [
                PathBuf::from("/s/t/rootfs/etc"),
                PathBuf::from("/s/t/rootfs/etc/hosts"),
                PathBuf::from("/s/t/rootfs/etc/a b"),
            ]
        );
        assert_eq!(unescape_mountinfo(r"a\134b\0"), "a\\b\\0");
    }

    #[test]
    fn make_dir_refuses_what_is_not_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("dev");
        make_dir(&new).unwrap();
        make_dir(&new).unwrap();
        assert!(new.is_dir());
        let link = dir.path().join("proc");
        std::os::unix::fs::symlink("/etc", &link).unwrap();
        assert!(make_dir(&link).unwrap_err().contains("is no directory"));
    }

    #[test]
    fn removing_a_root_never_empties_it() {
        let dir = tempfile::tempdir().unwrap();
        remove_root(dir.path()).expect("no root: nothing to do");
        std::fs::create_dir(dir.path().join(ROOTFS_DIR)).unwrap();
        remove_root(dir.path()).unwrap();
        assert!(!dir.path().join(ROOTFS_DIR).exists());
        std::fs::create_dir(dir.path().join(ROOTFS_DIR)).unwrap();
        std::fs::write(dir.path().join(ROOTFS_DIR).join("kept"), b"").unwrap();
        assert!(remove_root(dir.path()).is_err());
        assert!(dir.path().join(ROOTFS_DIR).join("kept").exists());
    }
}
