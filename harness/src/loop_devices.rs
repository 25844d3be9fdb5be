//! Loop devices, as far as the harness needs to see them: which file a device is attached to
//! (from `/sys/block/loopN/loop/backing_file`), which loop device a device node stands for, and
//! detaching the ones attached to files in the harness's own scratch directories.
//!
//! Plugins that serve block volumes from image files (CSI plugins, DHV plugins formatting an
//! image) attach loop devices. One left attached after its volume is gone keeps the image's
//! space and a device number until reboot, and nothing in Nomad notices.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

// LOOP_CLR_FD (linux/loop.h) predates the _IO encoding, hence the "bad" macro.
nix::ioctl_none_bad!(loop_clr_fd, 0x4C01);

/// A loop device and the file it is attached to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    pub device: PathBuf,
    pub backing: PathBuf,
}

impl std::fmt::Display for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (attached to {})",
            self.device.display(),
            self.backing.display()
        )
    }
}

/// The file loop device `name` (`loop3`) is attached to; `None` when it is free or unknown.
/// The kernel appends ` (deleted)` when the file was unlinked; that suffix is kept.
fn backing_of(name: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let text = text.trim_end_matches('\n');
    (!text.is_empty()).then(|| PathBuf::from(text))
}

/// Every loop device attached now, in device-name order.
pub fn all_attached() -> Vec<Attached> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut found: Vec<Attached> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            if !name.starts_with("loop") {
                return None;
            }
            Some(Attached {
                backing: backing_of(&name)?,
                device: Path::new("/dev").join(&name),
            })
        })
        .collect();
    found.sort_by(|a, b| a.device.cmp(&b.device));
    found
}

/// Loop devices attached to a file under `dir` (an unlinked file included).
pub fn attached_under(dir: &Path) -> Vec<Attached> {
    all_attached()
        .into_iter()
        .filter(|a| a.backing.starts_with(dir))
        .collect()
}

/// If `path` is a loop device's node (a block volume's target, say), that device and its file.
pub fn loop_behind(path: &Path) -> Option<Attached> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let (major, minor) = (
        nix::sys::stat::major(meta.rdev()),
        nix::sys::stat::minor(meta.rdev()),
    );
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let name = link.file_name()?.to_str()?.to_owned();
    Some(Attached {
        backing: backing_of(&name)?,
        device: Path::new("/dev").join(name),
    })
}

/// Whether `device` is still attached to the same file as when it was seen.
pub fn still_attached(seen: &Attached) -> bool {
    let Some(name) = seen.device.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    match backing_of(name) {
        // An unlinked backing file reads as "<path> (deleted)".
        Some(now) => {
            now == seen.backing
                || now.as_os_str() == format!("{} (deleted)", seen.backing.display()).as_str()
        }
        None => false,
    }
}

/// How long a loop device may take to finish detaching once what held it is undone before it
/// counts as left behind: the harness's allowance for the kernel and udev, no contract number
/// (a device really left attached costs a failing clause this long).
pub const DETACH_GRACE: Duration = Duration::from_secs(1);

/// Those of `seen` still attached to the same file after waiting up to `within` for them to
/// go: a detach finishes only when the last opener (udev, a probe) closes the device.
pub async fn still_attached_after(seen: &[Attached], within: Duration) -> Vec<Attached> {
    let until = tokio::time::Instant::now() + within;
    loop {
        let left: Vec<Attached> = seen.iter().filter(|a| still_attached(a)).cloned().collect();
        if left.is_empty() || tokio::time::Instant::now() >= until {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`still_attached_after`] for code that may block (the ledger's directory removal runs on
/// the blocking pool).
pub fn still_attached_after_blocking(seen: Vec<Attached>, within: Duration) -> Vec<Attached> {
    let until = std::time::Instant::now() + within;
    let mut left = seen;
    loop {
        left.retain(still_attached);
        if left.is_empty() || std::time::Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Detaches a loop device. The kernel finishes when the last opener closes it.
pub fn detach(device: &Path) -> std::io::Result<()> {
    let file = File::open(device)?;
    // SAFETY: the descriptor stays open for the whole call; LOOP_CLR_FD takes no argument.
    unsafe { loop_clr_fd(file.as_raw_fd()) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_not_a_loop_device() {
        assert_eq!(loop_behind(Path::new("/")), None);
        assert_eq!(loop_behind(Path::new("/nonexistent/nomad-conform")), None);
    }

    #[test]
    fn nothing_is_attached_under_a_fresh_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(attached_under(dir.path()).is_empty());
    }

    #[test]
    fn a_device_never_seen_attached_is_not_still_attached() {
        let seen = Attached {
            device: PathBuf::from("/dev/loop-nomad-conform-none"),
            backing: PathBuf::from("/nonexistent"),
        };
        assert!(!still_attached(&seen));
    }
}
