//! Bind mounts, and the questions the node service asks about them.
//!
//! Staging bind-mounts a volume directory onto the staging path; publishing bind-mounts the
//! staging path onto the target path (both then show the same directory). Whether a path is a
//! mount point comes from /proc/self/mountinfo; whether that mount shows a given volume is
//! answered by comparing device and inode numbers, which a bind mount shares with its source.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sys::statvfs::{FsFlags, statvfs};

/// Bind-mounts `source` onto `target` (both directories that exist).
pub fn bind(source: &Path, target: &Path) -> io::Result<()> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(io::Error::from)
}

/// Makes the bind mount at `target` read-only. Only this mount point changes, not its source.
/// The mount's other per-mount flags (nosuid, nodev, noexec, atime handling) are kept: a
/// remount replaces all of them, and clearing a flag can be refused inside a container.
pub fn remount_read_only(target: &Path) -> io::Result<()> {
    let current = statvfs(target)?.flags();
    let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    for (have, keep) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if current.contains(have) {
            flags |= keep;
        }
    }
    mount(None::<&str>, target, None::<&str>, flags, None::<&str>).map_err(io::Error::from)
}

/// Whether the file system at `path` is mounted read-only.
pub fn is_read_only(path: &Path) -> io::Result<bool> {
    Ok(statvfs(path)?.flags().contains(FsFlags::ST_RDONLY))
}

/// Unmounts whatever is mounted at `target` (no lazy detach: a busy mount is an error the
/// caller should see). EBUSY is retried for a moment first: a process forking on the host
/// holds copies of its descriptors until it execs, which can briefly include one on the
/// target.
pub fn unmount(target: &Path) -> io::Result<()> {
    let mut waited = 0;
    loop {
        match umount2(target, MntFlags::UMOUNT_NOFOLLOW) {
            Err(nix::errno::Errno::EBUSY) if waited < 20 => {
                std::thread::sleep(std::time::Duration::from_millis(10));
                waited += 1;
            }
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Whether `path` is a mount point that shows the directory `dir`: a bind mount of `dir`
/// (or of another bind mount of it).
pub fn is_bind_of(path: &Path, dir: &Path) -> io::Result<bool> {
    Ok(is_mount_point(path)? && same_directory(path, dir)?)
}

/// Whether `path` is a mount point. A path that does not exist is not.
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    let path = match fs::canonicalize(path) {
        Ok(path) => path,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err),
    };
    Ok(mount_points()?.contains(&path))
}

/// Whether two paths are the same directory (same device and inode).
fn same_directory(a: &Path, b: &Path) -> io::Result<bool> {
    let (a, b) = (fs::metadata(a)?, fs::metadata(b)?);
    Ok(a.dev() == b.dev() && a.ino() == b.ino())
}

/// Every mount point in this process's mount namespace, in mount order.
pub fn mount_points() -> io::Result<Vec<PathBuf>> {
    let table = fs::read_to_string("/proc/self/mountinfo")?;
    // Each line: id, parent id, major:minor, root, mount point, options, ...
    Ok(table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
        .collect())
}

/// mountinfo writes space, tab, newline and backslash in paths as `\` and three octal digits.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(digits)) => {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescapes_mountinfo_paths() {
        assert_eq!(unescape("/mnt/with\\040space"), "/mnt/with space");
        assert_eq!(unescape("/a\\134b"), "/a\\b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/trailing\\"), "/trailing\\");
    }

    #[test]
    fn root_is_a_mount_point_and_a_missing_path_is_not() {
        assert!(is_mount_point(Path::new("/")).expect("mountinfo"));
        assert!(!is_mount_point(Path::new("/no/such/path/anywhere")).expect("mountinfo"));
    }
}
