//! The "storage backend": mount volumes are directories under `<state-dir>/volumes/<id>`
//! and their snapshots plain recursive copies under `<state-dir>/snapshots/<id>`. Block
//! volumes are sparse image files, `<state-dir>/volumes/<id>.img`, exactly as long as their
//! capacity; their snapshots are sparse copies, `<state-dir>/snapshots/<id>.img`.
//!
//! Paths are only ever built from ids this plugin generated and recorded, never straight from
//! a request, so a request cannot point the plugin outside the state directory.
//!
//! Copies and removals can take a while, so the async wrappers run them on tokio's blocking
//! pool instead of stalling the gRPC workers.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, symlink};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::unistd::{Whence, lseek};

use crate::state::AccessType;

#[derive(Clone, Debug)]
pub struct Storage {
    volumes: PathBuf,
    snapshots: PathBuf,
}

impl Storage {
    /// Creates the `volumes/` and `snapshots/` directories if needed. `state_dir` must exist;
    /// it is made absolute and free of symbolic links, because the kernel names a loop
    /// device's backing file that way and block volumes are recognised by that name.
    pub fn open(state_dir: &Path) -> io::Result<Storage> {
        let state_dir = fs::canonicalize(state_dir)?;
        let storage = Storage {
            volumes: state_dir.join("volumes"),
            snapshots: state_dir.join("snapshots"),
        };
        fs::create_dir_all(&storage.volumes)?;
        fs::create_dir_all(&storage.snapshots)?;
        Ok(storage)
    }

    pub fn volume_dir(&self, volume_id: &str) -> PathBuf {
        self.volumes.join(volume_id)
    }

    pub fn snapshot_dir(&self, snapshot_id: &str) -> PathBuf {
        self.snapshots.join(snapshot_id)
    }

    /// A block volume's image file.
    pub fn volume_image(&self, volume_id: &str) -> PathBuf {
        self.volumes.join(format!("{volume_id}.img"))
    }

    /// Where a volume of this access type keeps its data: a directory or an image.
    pub fn volume_path(&self, volume_id: &str, access: AccessType) -> PathBuf {
        match access {
            AccessType::Mount => self.volume_dir(volume_id),
            AccessType::Block => self.volume_image(volume_id),
        }
    }

    /// Where a snapshot of a volume of this access type keeps its copy.
    pub fn snapshot_path(&self, snapshot_id: &str, access: AccessType) -> PathBuf {
        match access {
            AccessType::Mount => self.snapshot_dir(snapshot_id),
            AccessType::Block => self.snapshots.join(format!("{snapshot_id}.img")),
        }
    }

    /// Makes `dest` (which must not exist) the data of a new volume or snapshot: for mount,
    /// as [`Storage::populate`]; for block, an image of `size_bytes`, empty or holding a copy
    /// of the image `source` (which must not be longer).
    pub async fn make(
        &self,
        access: AccessType,
        dest: PathBuf,
        source: Option<PathBuf>,
        size_bytes: i64,
    ) -> io::Result<()> {
        match access {
            AccessType::Mount => self.populate(dest, source).await,
            AccessType::Block => {
                let size = u64::try_from(size_bytes).map_err(io::Error::other)?;
                blocking(move || {
                    let result = make_image(&dest, source.as_deref(), size);
                    if result.is_err() {
                        let _ = fs::remove_file(&dest);
                    }
                    result
                })
                .await
            }
        }
    }

    /// Makes `dest` (which must not exist) an empty directory, or a copy of `source`.
    pub async fn populate(&self, dest: PathBuf, source: Option<PathBuf>) -> io::Result<()> {
        blocking(move || match source {
            None => fs::create_dir(&dest),
            Some(source) => {
                let result = copy_tree(&source, &dest);
                if result.is_err() {
                    // Leave no half-made copy behind; the copy error is the one to report.
                    let _ = fs::remove_dir_all(&dest);
                }
                result
            }
        })
        .await
    }

    /// Removes a volume or snapshot: a directory and everything in it, or an image file;
    /// absent is fine.
    pub async fn remove(&self, path: PathBuf) -> io::Result<()> {
        blocking(move || {
            let removed = match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => fs::remove_dir_all(&path),
                Ok(_) => fs::remove_file(&path),
                Err(err) => Err(err),
            };
            match removed {
                Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
                other => other,
            }
        })
        .await
    }
}

/// Sets the length of an image: what ControllerExpandVolume does to a block volume. Growing
/// adds a hole, so it is quick whatever the size.
pub fn resize_image(image: &Path, size_bytes: i64) -> io::Result<()> {
    let size = u64::try_from(size_bytes).map_err(io::Error::other)?;
    let file = OpenOptions::new().write(true).open(image)?;
    file.set_len(size)?;
    file.sync_all()
}

/// Replaces an image with a new, empty one of the same length (the block-stage-wipes fault).
pub fn recreate_image(image: &Path) -> io::Result<()> {
    let size = fs::metadata(image)?.len();
    fs::remove_file(image)?;
    make_image(image, None, size)
}

/// A new image file of `size` bytes: sparse, or a sparse copy of `source`.
fn make_image(dest: &Path, source: Option<&Path>, size: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).create_new(true).open(dest)?;
    if let Some(source) = source {
        copy_data(&File::open(source)?, &file)?;
    }
    file.set_len(size)?;
    file.sync_all()
}

/// Copies the data regions of `from` into `to` at the same offsets, skipping holes
/// (SEEK_DATA/SEEK_HOLE), so copying a mostly empty 1 GiB image writes only what it holds.
/// File systems without hole support report the whole file as data, which is still right.
fn copy_data(from: &File, to: &File) -> io::Result<()> {
    let len = from.metadata()?.len();
    let mut buffer = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    while offset < len {
        let start = match lseek(from, to_off(offset)?, Whence::SeekData) {
            Ok(start) => from_off(start)?,
            // Nothing but a hole after `offset`.
            Err(Errno::ENXIO) => break,
            Err(err) => return Err(err.into()),
        };
        let end = from_off(lseek(from, to_off(start)?, Whence::SeekHole)?)?.min(len);
        let mut at = start;
        while at < end {
            let want = usize::try_from(end - at).map_or(buffer.len(), |n| n.min(buffer.len()));
            let read = from.read_at(&mut buffer[..want], at)?;
            if read == 0 {
                break; // The source shrank meanwhile.
            }
            to.write_all_at(&buffer[..read], at)?;
            at += read as u64;
        }
        offset = end.max(start + 1);
    }
    Ok(())
}

fn to_off(n: u64) -> io::Result<i64> {
    i64::try_from(n).map_err(io::Error::other)
}

fn from_off(n: i64) -> io::Result<u64> {
    u64::try_from(n).map_err(io::Error::other)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(io::Error::other)?
}

/// Copies a directory tree: directories, regular files (with their permission bits) and
/// symbolic links (as links). Anything else (sockets, devices, fifos) is skipped, and so are
/// directories on another file system than `source` (something mounted inside the volume).
pub fn copy_tree(source: &Path, dest: &Path) -> io::Result<()> {
    let device = fs::metadata(source)?.dev();
    copy_dir(source, dest, device)
}

fn copy_dir(source: &Path, dest: &Path, device: u64) -> io::Result<()> {
    fs::create_dir(dest)?;
    fs::set_permissions(dest, fs::metadata(source)?.permissions())?;
    for entry in fs::read_dir(source)? {
        let entry = entry?;
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let meta = fs::symlink_metadata(&from)?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            symlink(fs::read_link(&from)?, &to)?;
        } else if kind.is_dir() {
            if meta.dev() == device {
                copy_dir(&from, &to, device)?;
            }
        } else if kind.is_file() {
            fs::copy(&from, &to)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_tree_copies_files_dirs_and_links() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("src");
        fs::create_dir_all(src.join("sub")).expect("mkdir");
        fs::write(src.join("a.txt"), "alpha").expect("write");
        fs::write(src.join("sub/b.txt"), "beta").expect("write");
        symlink("a.txt", src.join("link")).expect("symlink");

        let dest = dir.path().join("dest");
        copy_tree(&src, &dest).expect("copy");
        assert_eq!(
            fs::read_to_string(dest.join("a.txt")).expect("read"),
            "alpha"
        );
        assert_eq!(
            fs::read_to_string(dest.join("sub/b.txt")).expect("read"),
            "beta"
        );
        assert_eq!(
            fs::read_link(dest.join("link")).expect("link"),
            Path::new("a.txt")
        );
    }

    #[test]
    fn images_are_sparse_copies_of_the_right_length() {
        let dir = tempfile::tempdir().expect("tempdir");
        let source = dir.path().join("source.img");
        make_image(&source, None, 8 << 20).expect("make");
        assert_eq!(fs::metadata(&source).expect("stat").len(), 8 << 20);
        let file = OpenOptions::new().write(true).open(&source).expect("open");
        file.write_all_at(b"start", 0).expect("write");
        file.write_all_at(b"middle", 5 << 20).expect("write");
        drop(file);

        // A copy may be larger than its source (a volume restored into more capacity).
        let copy = dir.path().join("copy.img");
        make_image(&copy, Some(&source), 16 << 20).expect("copy");
        let copied = fs::read(&copy).expect("read");
        assert_eq!(copied.len(), 16 << 20);
        assert_eq!(&copied[..5], b"start");
        assert_eq!(&copied[5 << 20..(5 << 20) + 6], b"middle");
        assert!(copied[(5 << 20) + 6..].iter().all(|b| *b == 0));
        // Holes stay holes: far less than 16 MiB is allocated.
        let allocated = fs::metadata(&copy).expect("stat").blocks() * 512;
        assert!(allocated < 4 << 20, "{allocated} bytes allocated");

        resize_image(&copy, 32 << 20).expect("grow");
        assert_eq!(fs::metadata(&copy).expect("stat").len(), 32 << 20);
        recreate_image(&copy).expect("recreate");
        let wiped = fs::read(&copy).expect("read");
        assert_eq!(wiped.len(), 32 << 20);
        assert!(wiped.iter().all(|b| *b == 0));
    }
}
