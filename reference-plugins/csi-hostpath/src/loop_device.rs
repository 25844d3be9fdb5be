//! Loop devices: how a block volume's image file becomes a block device (`/dev/loopN`).
//!
//! Attaching asks `/dev/loop-control` for a free device (LOOP_CTL_GET_FREE) and gives that
//! device the open image (LOOP_SET_FD). Devices are attached without LO_FLAGS_AUTOCLEAR: they
//! must outlive the plugin process, so a restarted plugin still finds them (their paths are
//! kept in state.json), and they are detached only when asked (LOOP_CLR_FD). A device attached
//! through a read-only file descriptor is read-only for as long as it is attached: the kernel
//! sets LO_FLAGS_READ_ONLY itself, and LOOP_SET_STATUS64 cannot clear it.
//!
//! What a device is attached to, and how, is read back from sysfs (`/sys/block/loopN/`):
//! `loop/backing_file` (absent while the device is free), `loop/autoclear`, `ro` and `size`.
//!
//! Everything here blocks only briefly (a few ioctls and sysfs reads), so the node service
//! calls it directly.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::stat::{Mode, SFlag, makedev, mknod};

/// Hands out free loop devices, creating new ones when all are in use.
const CONTROL: &str = "/dev/loop-control";

// The loop ioctls (linux/loop.h). They predate the _IO encoding, hence the "bad" macros.
nix::ioctl_none_bad!(loop_ctl_get_free, 0x4C82);
nix::ioctl_write_int_bad!(loop_set_fd, 0x4C00);
nix::ioctl_none_bad!(loop_clr_fd, 0x4C01);
nix::ioctl_none_bad!(loop_set_capacity, 0x4C07);

/// How often attaching asks for another free device when another process took the one it
/// was given; between attempts it waits a little longer each time (1 ms, 2 ms, ... at most
/// 10 ms), so that a neighbour busy attaching and detaching gets out of the way.
const ATTACH_ATTEMPTS: u64 = 40;

/// Attaches `image` to a free loop device and returns the device's path. With `read_only`,
/// the image is opened read-only and so is the device: opening it for writing, or writing
/// to it, fails.
pub fn attach(image: &Path, read_only: bool) -> io::Result<PathBuf> {
    let control = OpenOptions::new().read(true).write(true).open(CONTROL)?;
    let backing = OpenOptions::new()
        .read(true)
        .write(!read_only)
        .open(image)?;
    for attempt in 0..ATTACH_ATTEMPTS {
        if attempt > 0 {
            sleep(Duration::from_millis(attempt.min(10)));
        }
        // SAFETY: the descriptor is open for the whole call, and LOOP_CTL_GET_FREE takes no
        // argument.
        let number = unsafe { loop_ctl_get_free(control.as_raw_fd()) }?;
        let device = PathBuf::from(format!("/dev/loop{number}"));
        ensure_node(&device)?;
        let opened = match OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(&device)
        {
            Ok(opened) => opened,
            // Another process took the device and is detaching it (ENXIO), or removed it
            // (ENOENT, ENODEV) between the two calls: ask for another.
            Err(err) if vanished(&err) || err.raw_os_error() == Some(Errno::ENXIO as i32) => {
                continue;
            }
            Err(err) => return Err(err),
        };
        // SAFETY: both descriptors are open for the whole call; LOOP_SET_FD takes the backing
        // file's descriptor as its integer argument.
        match unsafe { loop_set_fd(opened.as_raw_fd(), backing.as_raw_fd()) } {
            Ok(_) => {}
            // Another process attached this device between the two calls: ask again.
            Err(Errno::EBUSY) => continue,
            Err(err) => return Err(err.into()),
        }
        drop(opened);
        if read_only && !is_read_only(&device)? {
            let _ = detach(&device);
            return Err(io::Error::other(format!(
                "{} did not become read-only",
                device.display()
            )));
        }
        return Ok(device);
    }
    Err(io::Error::other(format!(
        "no free loop device after {ATTACH_ATTEMPTS} attempts: others kept taking them"
    )))
}

/// Detaches a loop device. A device that is not attached, or whose node is gone, is fine.
///
/// If another process still has the device open, the kernel finishes the detach when it
/// closes it; this waits a moment for that and then returns anyway.
pub fn detach(device: &Path) -> io::Result<()> {
    let opened = match File::open(device) {
        Ok(opened) => opened,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    // SAFETY: the descriptor is open for the whole call, and LOOP_CLR_FD takes no argument.
    match unsafe { loop_clr_fd(opened.as_raw_fd()) } {
        Ok(_) => {}
        // ENXIO: nothing is attached.
        Err(Errno::ENXIO) => return Ok(()),
        Err(err) => return Err(err.into()),
    }
    // The detach happens when the last descriptor closes; ours is usually the last.
    drop(opened);
    for _ in 0..50 {
        if backing_file(device)?.is_none() {
            break;
        }
        sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Makes the device see its image's current length (after the image grew).
pub fn refresh_capacity(device: &Path) -> io::Result<()> {
    let opened = File::open(device)?;
    // SAFETY: the descriptor is open for the whole call, and LOOP_SET_CAPACITY takes no
    // argument.
    unsafe { loop_set_capacity(opened.as_raw_fd()) }?;
    Ok(())
}

/// The file a loop device is attached to; `None` when it is free (or does not exist).
pub fn backing_file(device: &Path) -> io::Result<Option<PathBuf>> {
    match fs::read_to_string(sys_dir(device)?.join("loop/backing_file")) {
        Ok(text) => Ok(parse_backing_file(&text)),
        Err(err) if vanished(&err) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Whether `device` is attached to `image` for good (no autoclear pending, so it will not
/// vanish when its last user closes it), and read-only exactly if `read_only`.
pub fn is_attached_to(device: &Path, image: &Path, read_only: bool) -> io::Result<bool> {
    if backing_file(device)?.as_deref() != Some(image) {
        return Ok(false);
    }
    let autoclear = read_attribute(device, "loop/autoclear")?;
    Ok(autoclear.as_deref() == Some("0") && is_read_only(device)? == read_only)
}

/// Every loop device attached to `image`, in device order.
pub fn attached_to(image: &Path) -> io::Result<Vec<PathBuf>> {
    let mut devices = Vec::new();
    for entry in fs::read_dir("/sys/block")? {
        let name = entry?.file_name();
        let Some(name) = name.to_str().filter(|n| is_loop_name(n)) else {
            continue;
        };
        let device = Path::new("/dev").join(name);
        if backing_file(&device)?.as_deref() == Some(image) {
            devices.push(device);
        }
    }
    devices.sort_by_key(|d| loop_number(d));
    Ok(devices)
}

/// The size of a loop device in bytes (0 while it is free).
pub fn size_bytes(device: &Path) -> io::Result<u64> {
    let sectors = read_attribute(device, "size")?.unwrap_or_default();
    let sectors: u64 = sectors.parse().map_err(|err| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("size of {}: {sectors:?}: {err}", device.display()),
        )
    })?;
    // sysfs counts 512-byte sectors, whatever the device's block size.
    Ok(sectors.saturating_mul(512))
}

/// Whether a loop device is read-only.
pub fn is_read_only(device: &Path) -> io::Result<bool> {
    Ok(read_attribute(device, "ro")?.as_deref() == Some("1"))
}

/// The loop device whose node has device number `rdev` (what a bind-mounted device node
/// reports in `st_rdev`), if it is a loop device.
pub fn device_with_number(rdev: u64) -> io::Result<Option<PathBuf>> {
    let (major, minor) = (nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev));
    let link = match fs::read_link(format!("/sys/dev/block/{major}:{minor}")) {
        Ok(link) => link,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    Ok(link
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| is_loop_name(n))
        .map(|n| Path::new("/dev").join(n)))
}

/// Creates `/dev/loopN` if the device exists but its node does not, as in a container
/// whose /dev is not devtmpfs. The numbers come from sysfs.
fn ensure_node(device: &Path) -> io::Result<()> {
    match fs::metadata(device) {
        Ok(meta) if meta.file_type().is_block_device() => return Ok(()),
        Ok(_) => {
            return Err(io::Error::other(format!(
                "{} exists and is not a block device",
                device.display()
            )));
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let numbers = read_attribute(device, "dev")?.unwrap_or_default();
    let (major, minor) = parse_dev(&numbers).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("device numbers of {}: {numbers:?}", device.display()),
        )
    })?;
    match mknod(
        device,
        SFlag::S_IFBLK,
        Mode::from_bits_truncate(0o660),
        makedev(major, minor),
    ) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// `/sys/block/loopN` for `/dev/loopN`; anything else is not a loop device.
fn sys_dir(device: &Path) -> io::Result<PathBuf> {
    device
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| is_loop_name(n) && device.parent() == Some(Path::new("/dev")))
        .map(|n| Path::new("/sys/block").join(n))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a loop device", device.display()),
            )
        })
}

/// A sysfs attribute of the device, trimmed; `None` if the device (or the attribute) does
/// not exist.
fn read_attribute(device: &Path, attribute: &str) -> io::Result<Option<String>> {
    match fs::read_to_string(sys_dir(device)?.join(attribute)) {
        Ok(text) => Ok(Some(text.trim().to_string())),
        Err(err) if vanished(&err) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Whether an error says the device (or its sysfs entry) is gone: not found, or ENODEV while
/// another process detaches or removes it. Either way it is not attached to anything here.
fn vanished(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(Errno::ENODEV as i32)
}

/// `loop` and a number: the kernel's name for a loop device.
fn is_loop_name(name: &str) -> bool {
    name.strip_prefix("loop")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn loop_number(device: &Path) -> u64 {
    device
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("loop"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// The contents of `loop/backing_file`: a path and a newline. The kernel appends
/// " (deleted)" when the file was removed; such a path names no file, and is kept as it is so
/// that it matches none.
fn parse_backing_file(text: &str) -> Option<PathBuf> {
    let path = text.strip_suffix('\n').unwrap_or(text);
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// `MAJOR:MINOR`, as in sysfs `dev` files.
fn parse_dev(text: &str) -> Option<(u64, u64)> {
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use std::io::{Seek, SeekFrom, Write};

    use super::*;

    #[test]
    fn names_and_sysfs_files_are_parsed() {
        assert!(is_loop_name("loop0") && is_loop_name("loop123"));
        assert!(!is_loop_name("loop") && !is_loop_name("loop-control"));
        assert!(!is_loop_name("sda") && !is_loop_name("loop1p1"));
        assert_eq!(
            sys_dir(Path::new("/dev/loop7")).expect("loop"),
            Path::new("/sys/block/loop7")
        );
        assert!(sys_dir(Path::new("/dev/sda")).is_err());
        assert!(sys_dir(Path::new("/tmp/loop7")).is_err());
        assert_eq!(loop_number(Path::new("/dev/loop12")), 12);
        assert_eq!(
            parse_backing_file("/state/volumes/v.img\n"),
            Some(PathBuf::from("/state/volumes/v.img"))
        );
        assert_eq!(
            parse_backing_file("/state/v.img (deleted)\n"),
            Some(PathBuf::from("/state/v.img (deleted)"))
        );
        assert_eq!(parse_backing_file("\n"), None);
        assert_eq!(parse_dev("7:3\n"), Some((7, 3)));
        assert_eq!(parse_dev("7"), None);
        assert_eq!(parse_dev("a:b"), None);
    }

    /// Root only (skipped otherwise): a real loop device, attached, written, grown and
    /// detached.
    #[test]
    fn attach_write_grow_and_detach() {
        if !nix::unistd::geteuid().is_root() || !Path::new(CONTROL).exists() {
            eprintln!("skipping: loop devices need root and {CONTROL}");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let image = fs::canonicalize(dir.path()).expect("path").join("disk.img");
        File::create(&image)
            .and_then(|f| f.set_len(1 << 20))
            .expect("image");

        let device = attach(&image, false).expect("attach");
        let _cleanup = Detach(device.clone(), image.clone());
        assert_eq!(
            backing_file(&device).expect("sysfs").as_deref(),
            Some(image.as_path())
        );
        assert!(is_attached_to(&device, &image, false).expect("sysfs"));
        assert!(!is_attached_to(&device, &image, true).expect("sysfs"));
        assert_eq!(attached_to(&image).expect("scan"), vec![device.clone()]);
        assert_eq!(size_bytes(&device).expect("size"), 1 << 20);
        let rdev = fs::metadata(&device)
            .map(|m| std::os::unix::fs::MetadataExt::rdev(&m))
            .expect("stat");
        assert_eq!(
            device_with_number(rdev).expect("sysfs").as_deref(),
            Some(device.as_path())
        );

        let mut writer = OpenOptions::new()
            .write(true)
            .open(&device)
            .expect("open rw");
        writer.write_all(b"through the device").expect("write");
        writer.sync_all().expect("sync");
        drop(writer);
        assert!(
            fs::read(&image)
                .expect("image")
                .starts_with(b"through the device")
        );

        // A read-only device on the same image refuses writers.
        let read_only = attach(&image, true).expect("attach read-only");
        let _cleanup_ro = Detach(read_only.clone(), image.clone());
        assert!(is_attached_to(&read_only, &image, true).expect("sysfs"));
        let refused = OpenOptions::new()
            .write(true)
            .open(&read_only)
            .and_then(|mut f| f.write_all(b"x").and_then(|()| f.sync_all()));
        assert!(refused.is_err(), "a read-only loop device took a write");

        // Growing the image and refreshing the device.
        File::options()
            .write(true)
            .open(&image)
            .and_then(|f| f.set_len(2 << 20))
            .expect("grow");
        refresh_capacity(&device).expect("refresh");
        assert_eq!(size_bytes(&device).expect("size"), 2 << 20);
        let end = File::open(&device)
            .and_then(|mut f| f.seek(SeekFrom::End(0)))
            .expect("seek");
        assert_eq!(end, 2 << 20);

        detach(&read_only).expect("detach read-only");
        detach(&device).expect("detach");
        assert_eq!(backing_file(&device).expect("sysfs"), None);
        assert!(attached_to(&image).expect("scan").is_empty());
        detach(&device).expect("detaching again is fine");
    }

    /// Detaches a device when a test ends, passing or not, if it is still attached to the
    /// test's image (and so not someone else's by now).
    struct Detach(PathBuf, PathBuf);

    impl Drop for Detach {
        fn drop(&mut self) {
            if backing_file(&self.0).ok().flatten().as_deref() == Some(self.1.as_path()) {
                let _ = detach(&self.0);
            }
        }
    }
}
