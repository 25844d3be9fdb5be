//! The "storage backend": volumes are directories under `<state-dir>/volumes/<id>` and
//! snapshots are plain recursive copies under `<state-dir>/snapshots/<id>`.
//!
//! Paths are only ever built from ids this plugin generated and recorded, never straight from
//! a request, so a request cannot point the plugin outside the state directory.
//!
//! Copies and removals can take a while, so the async wrappers run them on tokio's blocking
//! pool instead of stalling the gRPC workers.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Storage {
    volumes: PathBuf,
    snapshots: PathBuf,
}

impl Storage {
    /// Creates the `volumes/` and `snapshots/` directories if needed.
    pub fn open(state_dir: &Path) -> io::Result<Storage> {
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

    /// Removes a volume or snapshot directory and everything in it; absent is fine.
    pub async fn remove(&self, dir: PathBuf) -> io::Result<()> {
        blocking(move || match fs::remove_dir_all(&dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        })
        .await
    }
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
}
