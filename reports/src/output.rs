//! Writing a report file without harming what is at its path: the path is followed through
//! symlinks to what it names; only an absent path or a regular file is written, through a
//! temporary file in the same directory and a rename, so a reader never sees half a report and
//! a device, FIFO, socket or directory given by mistake is left alone.

use std::path::{Path, PathBuf};

/// Symlinks followed before giving up (the kernel's own limit is 40).
const MAX_LINKS: usize = 40;

/// Why a report cannot be written at a path.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{0} is a directory")]
    Directory(PathBuf),
    #[error("{path} is {what}, not a regular file; reports are only written to regular files")]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("the directory {0} does not exist")]
    NoDirectory(PathBuf),
    #[error("{0}: too many levels of symbolic links")]
    Loop(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The path a report given as `path` really lands on: symlinks at the last component followed
/// (a link to a missing file names that file), the directory resolved to an absolute path.
pub fn resolve(path: &Path) -> Result<PathBuf, OutputError> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let dir = match current.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Some(name) = current.file_name().map(|n| n.to_os_string()) else {
            // "/", "." or ".." as a report path: a directory.
            return Err(OutputError::Directory(current));
        };
        let dir = dir.canonicalize().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => OutputError::NoDirectory(dir.clone()),
            _ => OutputError::Io {
                path: dir.clone(),
                source: e,
            },
        })?;
        let full = dir.join(&name);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&full).map_err(|e| OutputError::Io {
                    path: full.clone(),
                    source: e,
                })?;
                current = dir.join(target);
            }
            _ => return Ok(full),
        }
    }
    Err(OutputError::Loop(path.to_path_buf()))
}

/// What is at `resolved` (already through [`resolve`]), if anything a report may not replace.
pub fn refuse_existing(resolved: &Path) -> Result<(), OutputError> {
    use std::os::unix::fs::FileTypeExt as _;
    let meta = match std::fs::metadata(resolved) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(OutputError::Io {
                path: resolved.to_path_buf(),
                source: e,
            });
        }
    };
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_dir() {
        return Err(OutputError::Directory(resolved.to_path_buf()));
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(OutputError::NotRegular {
        path: resolved.to_path_buf(),
        what,
    })
}

/// Write `contents` as the report at `path`: resolved through symlinks, refused unless absent
/// or a regular file, written to a new temporary file beside it and renamed over it.
pub fn write_report(path: &Path, contents: &str) -> Result<(), OutputError> {
    write_report_with(path, |w| w.write_all(contents.as_bytes()))
}

/// [`write_report`] for a report that `write` streams into the file as it renders it, through
/// a buffer: the report is never held in memory whole. When `write` fails, nothing is left at
/// `path` or beside it.
pub fn write_report_with(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), OutputError> {
    let target = resolve(path)?;
    refuse_existing(&target)?;
    let dir = target.parent().unwrap_or(Path::new("/"));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| OutputError::Io { path, source }
    };
    let (tmp, file) = new_temporary(dir, &name).map_err(io(dir))?;
    let mut out = std::io::BufWriter::with_capacity(WRITE_BUFFER, file);
    let written = write(&mut out)
        .and_then(|()| {
            out.into_inner()
                .map_err(std::io::IntoInnerError::into_error)
        })
        .and_then(|file| file.sync_all())
        .and_then(|()| {
            // Checked again just before the rename: something may have appeared meanwhile.
            refuse_existing(&target).map_err(std::io::Error::other)?;
            std::fs::rename(&tmp, &target)
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&target)(e));
    }
    Ok(())
}

/// The buffer between a streaming writer and the report file.
const WRITE_BUFFER: usize = 64 * 1024;

/// A file of our own beside the report (never an existing one: `create_new`).
fn new_temporary(dir: &Path, name: &str) -> std::io::Result<(PathBuf, std::fs::File)> {
    let mut n = 0u32;
    loop {
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Whether a report could be made in `resolved`'s directory: a temporary file is made and
/// removed again. Checked before a run so that an unwritable directory is said once, up front.
pub fn check_writable(resolved: &Path) -> Result<(), OutputError> {
    let dir = resolved.parent().unwrap_or(Path::new("/"));
    let (tmp, file) = new_temporary(dir, "nomad-conform-check").map_err(|e| OutputError::Io {
        path: dir.to_path_buf(),
        source: e,
    })?;
    drop(file);
    let _ = std::fs::remove_file(tmp);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_new_and_replaces_regular_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        write_report(&p, "one").unwrap();
        write_report(&p, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        // Nothing else is left in the directory.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_streamed_report_that_fails_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.html");
        write_report_with(&p, |w| w.write_all(b"<html>")).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "<html>");
        let e = write_report_with(&p, |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("render failed"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("render failed"), "{e}");
        // The earlier report is untouched and no temporary file is left.
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "<html>");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn writes_through_a_symlink_and_keeps_it() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real.xml");
        let link = d.path().join("link.xml");
        std::os::unix::fs::symlink("real.xml", &link).unwrap();
        write_report(&link, "x").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "x");
        assert_eq!(resolve(&link).unwrap(), real.canonicalize().unwrap());
    }

    #[test]
    fn refuses_devices_fifos_and_directories() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f");
        nix_mkfifo(&fifo);
        assert!(matches!(
            write_report(&fifo, "x"),
            Err(OutputError::NotRegular { what: "a FIFO", .. })
        ));
        assert!(matches!(
            write_report(Path::new("/dev/null"), "x"),
            Err(OutputError::NotRegular {
                what: "a character device",
                ..
            })
        ));
        assert!(matches!(
            write_report(d.path(), "x"),
            Err(OutputError::Directory(_))
        ));
        assert!(matches!(
            write_report(&d.path().join("no/such/dir/r.json"), "x"),
            Err(OutputError::NoDirectory(_))
        ));
        // A symlink loop is an error, not a hang.
        let a = d.path().join("a");
        let b = d.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(matches!(write_report(&a, "x"), Err(OutputError::Loop(_))));
    }

    fn nix_mkfifo(p: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(status.success());
    }
}
