//! Keeping a plugin from filling the machine's disks.
//!
//! To make a create fail, the DHV suite asks for a capacity no storage has (4 EiB). A plugin that
//! honours the request by writing it (the Nomad docs' mkfs example and the demo plugin in Nomad's
//! repository `dd` the whole size) would fill the disk of the author's CI runner before it
//! failed. So calls meant to fail run with a file-size limit ([`FAILING_CALL_FILE_SIZE`],
//! RLIMIT_FSIZE: a write past it fails with EFBIG, and the writing process gets SIGXFSZ), and
//! every plugin call watches the free space of the filesystems it writes to ([`DiskWatch`]): a
//! call that drives one below its floor is stopped, and the record says so.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest file a call meant to fail may write: a few tens of MiB, far below any disk and
/// far above what a plugin needs before it notices that it cannot provide the capacity.
pub const FAILING_CALL_FILE_SIZE: u64 = 32 << 20;

/// How often a running call's filesystems are looked at.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// The free space a filesystem keeps whatever a plugin writes: 1 GiB or 5 % of its size, the
/// larger, but never more than half of what was free when the call started (a nearly full
/// disk still lets a call write something).
fn floor(size: u64, free_at_start: u64) -> u64 {
    (1u64 << 30).max(size / 20).min(free_at_start / 2)
}

#[derive(Clone, Debug)]
struct Watched {
    path: PathBuf,
    floor: u64,
}

/// The filesystems of a call's directories, each with its floor.
#[derive(Clone, Debug, Default)]
pub struct DiskWatch {
    watched: Vec<Watched>,
}

/// Size and free bytes (for unprivileged users) of the filesystem holding `path`.
fn space(path: &Path) -> Option<(u64, u64)> {
    let s = nix::sys::statvfs::statvfs(path).ok()?;
    let unit = s.fragment_size().max(1) as u64;
    Some((s.blocks() as u64 * unit, s.blocks_available() as u64 * unit))
}

impl DiskWatch {
    /// Watch the filesystems of `paths` (one entry per filesystem; paths that do not exist are
    /// left out).
    pub fn new(paths: &[PathBuf]) -> DiskWatch {
        let mut watched: Vec<Watched> = Vec::new();
        let mut fsids = Vec::new();
        for p in paths {
            let Ok(s) = nix::sys::statvfs::statvfs(p.as_path()) else {
                continue;
            };
            if fsids.contains(&s.filesystem_id()) {
                continue;
            }
            fsids.push(s.filesystem_id());
            if let Some((size, free)) = space(p) {
                watched.push(Watched {
                    path: p.clone(),
                    floor: floor(size, free),
                });
            }
        }
        DiskWatch { watched }
    }

    pub fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// Why the call must stop now, if a filesystem fell below its floor.
    pub fn check(&self) -> Option<String> {
        self.watched.iter().find_map(|w| {
            let (_, free) = space(&w.path)?;
            (free < w.floor).then(|| {
                format!(
                    "the filesystem of {} fell to {} free, below the {} the harness keeps free; \
                     the call was stopped so that the plugin does not fill the disk",
                    w.path.display(),
                    bytesize::ByteSize::b(free).display().iec(),
                    bytesize::ByteSize::b(w.floor).display().iec()
                )
            })
        })
    }

    /// For tests: a floor of `bytes` below the current free space of `path`'s filesystem.
    pub fn with_budget(path: &Path, bytes: u64) -> DiskWatch {
        let free = space(path).map(|(_, f)| f).unwrap_or(0);
        DiskWatch {
            watched: vec![Watched {
                path: path.to_path_buf(),
                floor: free.saturating_sub(bytes),
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors() {
        const G: u64 = 1 << 30;
        assert_eq!(floor(250 * G, 80 * G), 12_500 * G / 1000);
        assert_eq!(floor(10 * G, 8 * G), G);
        assert_eq!(floor(10 * G, G), G / 2);
    }

    #[test]
    fn a_watch_trips_below_its_floor() {
        let d = tempfile::tempdir().unwrap();
        let w = DiskWatch::new(&[d.path().to_path_buf(), d.path().join("missing")]);
        assert_eq!(w.watched.len(), 1);
        assert!(w.check().is_none());
        let tight = DiskWatch::with_budget(d.path(), 1 << 20);
        let f = d.path().join("f");
        std::fs::write(&f, vec![1u8; 64 << 20]).unwrap();
        std::fs::File::open(&f).unwrap().sync_all().unwrap();
        let why = tight
            .check()
            .expect("64 MiB written against a 1 MiB budget");
        assert!(why.contains("was stopped"), "{why}");
    }
}
