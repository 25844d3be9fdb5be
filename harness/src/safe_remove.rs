//! Removing a tree the harness made, and nothing beyond it.
//!
//! `std::fs::remove_dir_all` does not follow symlinks, but it does walk into a mount: a plugin
//! that bind-mounts a directory into its volume and forgets to unmount it would have every file
//! of that directory deleted through the mount. Here each directory is opened relative to its
//! parent with `O_NOFOLLOW` (a directory swapped for a symlink during the walk is not entered)
//! and asked with `statx(2)` which mount it is on: one that is the root of a mount, or on
//! another mount or device than the tree's top, is left in place, with everything above it,
//! and reported. This is `rm --one-file-system`, judged per directory rather than from the
//! mount table, so that it holds even when the table cannot be read.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;

use nix::dir::Dir;
use nix::fcntl::{OFlag, openat};
use nix::libc;
use nix::sys::stat::Mode;
use nix::unistd::{UnlinkatFlags, unlinkat};

use crate::mounts::{mount_id_of, shown, statx_at};

/// Deeper than this, a tree is left in place (and said so) rather than walked further.
const MAX_DEPTH: usize = 512;

/// Remove `path` and everything beneath it that is on the same mount, never following a
/// symlink and never crossing into another mount. Returns one line for each thing left in
/// place (a mount point, a removal that failed); empty when all of it is gone. A path that
/// does not exist is nothing to do; a symlink or a file at `path` is removed itself.
pub fn remove_tree(path: &Path) -> Vec<String> {
    let mut left = Vec::new();
    let Some(name) = c_path(path, &mut left) else {
        return left;
    };
    let top = match statx_at(libc::AT_FDCWD, &name, libc::AT_SYMLINK_NOFOLLOW) {
        Ok(sx) => sx,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return left,
        Err(e) => {
            left.push(format!(
                "cannot look at {}: {e}; left in place",
                shown(path)
            ));
            return left;
        }
    };
    if !is_dir(&top) {
        if let Err(e) = unlinkat(
            nix::fcntl::AT_FDCWD,
            name.as_c_str(),
            UnlinkatFlags::NoRemoveDir,
        ) && e != nix::errno::Errno::ENOENT
        {
            left.push(format!("failed to remove {}: {e}", shown(path)));
        }
        return left;
    }
    if is_mount_root(&top) {
        left.push(format!(
            "{} is a mount point: left in place, with what is on it",
            shown(path)
        ));
        return left;
    }
    let Some(mount) = mount_of(&top, path, &mut left) else {
        return left;
    };
    let fd = match openat(
        nix::fcntl::AT_FDCWD,
        name.as_c_str(),
        dir_flags(),
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(e) => {
            left.push(format!("cannot open {}: {e}; left in place", shown(path)));
            return left;
        }
    };
    let same = Same {
        mount,
        dev: (top.stx_dev_major, top.stx_dev_minor),
    };
    let mut walk = Walk {
        same,
        left: Vec::new(),
    };
    let emptied = walk.empty(fd, path, 0);
    left.append(&mut walk.left);
    if emptied
        && let Err(e) = unlinkat(
            nix::fcntl::AT_FDCWD,
            name.as_c_str(),
            UnlinkatFlags::RemoveDir,
        )
        && e != nix::errno::Errno::ENOENT
    {
        left.push(format!("failed to remove {}: {e}", shown(path)));
    }
    left
}

/// What every directory of the tree must share with its top to be walked into.
struct Same {
    mount: u64,
    dev: (u32, u32),
}

struct Walk {
    same: Same,
    left: Vec<String>,
}

impl Walk {
    /// Remove everything in the directory open at `fd` (named `path` in messages). True when it
    /// is empty now.
    fn empty(&mut self, fd: OwnedFd, path: &Path, depth: usize) -> bool {
        let mut dir = match Dir::from_fd(fd) {
            Ok(d) => d,
            Err(e) => {
                self.left
                    .push(format!("cannot read {}: {e}; left in place", shown(path)));
                return false;
            }
        };
        // Every name first, then the removals: a directory is not changed while it is read.
        let names: Vec<CString> = dir
            .iter()
            .flatten()
            .map(|e| e.file_name().to_owned())
            .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
            .collect();
        let mut emptied = true;
        for name in names {
            let child = path.join(std::ffi::OsStr::from_bytes(name.as_bytes()));
            if !self.remove_entry(&dir, &name, &child, depth) {
                emptied = false;
            }
        }
        emptied
    }

    /// Remove one entry of the open directory `dir`. True when it is gone.
    fn remove_entry(&mut self, dir: &Dir, name: &CStr, path: &Path, depth: usize) -> bool {
        let sx = match statx_at(dir.as_raw_fd(), name, libc::AT_SYMLINK_NOFOLLOW) {
            Ok(sx) => sx,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
            Err(e) => {
                self.left.push(format!(
                    "cannot look at {}: {e}; left in place",
                    shown(path)
                ));
                return false;
            }
        };
        if !is_dir(&sx) {
            return self.unlink(dir, name, path, UnlinkatFlags::NoRemoveDir);
        }
        if is_mount_root(&sx)
            || mount_id_of(&sx).is_ok_and(|m| m != self.same.mount)
            || (sx.stx_dev_major, sx.stx_dev_minor) != self.same.dev
        {
            self.left.push(format!(
                "{} is a mount point: left in place, with what is on it",
                shown(path)
            ));
            return false;
        }
        if depth >= MAX_DEPTH {
            self.left.push(format!(
                "{} lies more than {MAX_DEPTH} directories deep: left in place",
                shown(path)
            ));
            return false;
        }
        let fd = match openat(dir.as_fd(), name, dir_flags(), Mode::empty()) {
            Ok(fd) => fd,
            // Swapped for something else since it was looked at: not entered.
            Err(e) => {
                self.left
                    .push(format!("cannot open {}: {e}; left in place", shown(path)));
                return false;
            }
        };
        // The directory opened must be the one looked at, on the same mount.
        match statx_at(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH) {
            Ok(opened)
                if opened.stx_ino == sx.stx_ino
                    && (opened.stx_dev_major, opened.stx_dev_minor) == self.same.dev
                    && !is_mount_root(&opened) => {}
            _ => {
                self.left.push(format!(
                    "{} changed while it was being removed: left in place",
                    shown(path)
                ));
                return false;
            }
        }
        if !self.empty(fd, path, depth + 1) {
            return false;
        }
        self.unlink(dir, name, path, UnlinkatFlags::RemoveDir)
    }

    fn unlink(&mut self, dir: &Dir, name: &CStr, path: &Path, how: UnlinkatFlags) -> bool {
        match unlinkat(dir.as_fd(), name, how) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => true,
            Err(e) => {
                self.left
                    .push(format!("failed to remove {}: {e}", shown(path)));
                false
            }
        }
    }
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

fn is_dir(sx: &libc::statx) -> bool {
    u32::from(sx.stx_mode) & libc::S_IFMT == libc::S_IFDIR
}

fn is_mount_root(sx: &libc::statx) -> bool {
    let bit = libc::STATX_ATTR_MOUNT_ROOT as u64;
    sx.stx_attributes_mask & bit != 0 && sx.stx_attributes & bit != 0
}

/// The mount ID of the tree's top. Without one from the kernel (before Linux 5.8), the tree is
/// judged by its device and by the mount table, which must then be readable.
fn mount_of(top: &libc::statx, path: &Path, left: &mut Vec<String>) -> Option<u64> {
    match mount_id_of(top) {
        Ok(id) => Some(id),
        Err(_) => match crate::mounts::under(path) {
            Ok(mounts) if mounts.is_empty() => Some(0),
            Ok(mounts) => {
                left.extend(mounts.iter().map(|m| {
                    format!(
                        "{} is a mount point: left in place, with the tree above it",
                        shown(m)
                    )
                }));
                None
            }
            Err(e) => {
                left.push(format!(
                    "{} left in place: the kernel gives no mount IDs and the mount table cannot be read ({e})",
                    shown(path)
                ));
                None
            }
        },
    }
}

fn c_path(path: &Path, left: &mut Vec<String>) -> Option<CString> {
    match CString::new(path.as_os_str().as_bytes()) {
        Ok(c) => Some(c),
        Err(_) => {
            left.push(format!("{}: a NUL byte in the path", shown(path)));
            None
        }
    }
}

/// [`remove_tree`] as an `io::Result`: an error naming everything left in place.
pub fn remove_tree_or_err(path: &Path) -> io::Result<()> {
    let left = remove_tree(path);
    if left.is_empty() {
        Ok(())
    } else {
        Err(io::Error::other(left.join("; ")))
    }
}

/// The paths of a tree, for tests: everything under `dir`, relative to it.
#[cfg(test)]
fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_a_tree_and_never_follows_a_symlink() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("s");
        std::fs::create_dir_all(dir.join("a/b/c")).unwrap();
        std::fs::write(dir.join("a/b/c/f"), "x").unwrap();
        std::fs::write(dir.join("a/\u{e9}\u{ff}"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join("a/link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("keep"), dir.join("file-link")).unwrap();
        assert_eq!(remove_tree(&dir), Vec::<String>::new());
        assert!(!dir.exists());
        assert_eq!(listing(outside.path()), vec![PathBuf::from("keep")]);
        // Gone already: nothing to do.
        assert!(remove_tree(&dir).is_empty());
    }

    #[test]
    fn a_symlink_at_the_top_is_removed_not_followed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        let base = tempfile::tempdir().unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        assert!(remove_tree(&link).is_empty());
        assert!(std::fs::symlink_metadata(&link).is_err());
        assert!(outside.path().join("keep").exists());
    }

    #[test]
    fn a_very_deep_tree_is_left_and_said_not_a_crash() {
        let base = tempfile::tempdir().unwrap();
        let top = base.path().join("t");
        std::fs::create_dir(&top).unwrap();
        // Made relative to each level: a path this long is over PATH_MAX.
        let mut fd = openat(nix::fcntl::AT_FDCWD, &top, dir_flags(), Mode::empty()).unwrap();
        for _ in 0..(MAX_DEPTH + 5) {
            nix::sys::stat::mkdirat(fd.as_fd(), "d", Mode::from_bits_truncate(0o755)).unwrap();
            fd = openat(fd.as_fd(), "d", dir_flags(), Mode::empty()).unwrap();
        }
        drop(fd);
        let left = remove_tree(&top);
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(left[0].contains("deep"), "{left:?}");
    }

    /// The variable that makes `remove_tree_in_a_namespace` act.
    const CHILD: &str = "NOMAD_CONFORM_TEST_REMOVE_TREE";

    /// A bind mount of a canary below the tree: the tree goes, the canary's files stay. Root
    /// only; the mount is made in a mount namespace of a child of its own (this test binary,
    /// running the ignored test below), so nothing outside it sees the mount.
    #[test]
    fn never_removes_through_a_mount() {
        if !nix::unistd::Uid::effective().is_root() {
            eprintln!("skipping: needs root to mount");
            return;
        }
        let canary = tempfile::tempdir().unwrap();
        std::fs::create_dir(canary.path().join("sub")).unwrap();
        std::fs::write(canary.path().join("sub/precious"), "x").unwrap();
        let base = tempfile::tempdir().unwrap();
        let tree = base.path().join("tree");
        for m in ["vol/a/mnt", "vol/b/mnt"] {
            std::fs::create_dir_all(tree.join(m)).unwrap();
        }
        std::fs::write(tree.join("vol/own"), "x").unwrap();
        let script = r#"mount --bind "$1" "$2/vol/a/mnt" && mount --bind "$1" "$2/vol/b/mnt" &&
            mount --bind "$1" "$2/vol/b/mnt" && exec "$3" --exact --ignored --nocapture \
            safe_remove::tests::remove_tree_in_a_namespace"#;
        let out = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
            .arg(canary.path())
            .arg(&tree)
            .arg(std::env::current_exe().unwrap())
            .env(CHILD, &tree)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("LEFT 2"), "{text}");
        assert_eq!(
            listing(canary.path()),
            vec![PathBuf::from("sub"), PathBuf::from("sub/precious")]
        );
        // Outside the namespace the mount points were never mounts: what was left is empty.
        assert!(!tree.join("vol/own").exists(), "{text}");
    }

    #[test]
    #[ignore = "run by never_removes_through_a_mount, in a mount namespace"]
    fn remove_tree_in_a_namespace() {
        let tree = PathBuf::from(std::env::var_os(CHILD).expect("run by its parent test"));
        let left = remove_tree(&tree);
        println!("LEFT {}", left.len());
        for l in &left {
            println!("{l}");
        }
        assert!(left.iter().all(|l| l.contains("mount point")), "{left:?}");
    }
}
