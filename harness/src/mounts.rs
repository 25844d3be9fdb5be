//! The mount table, read as the kernel writes it: bytes, not text.
//!
//! `/proc/self/mountinfo` gives each mount point as raw bytes with space, tab, newline and
//! backslash written as `\ooo`; a path need not be UTF-8 (any user can mount a tmpfs or a FUSE
//! filesystem at such a path). Reading it as a `String` fails on one such line, and a failure
//! taken as "no mounts" made every run blind to every mount: a forgotten bind mount in a volume
//! then had its files deleted through it. Here a table that cannot be read or parsed is an
//! error the caller must handle, never an empty table.
//!
//! A second source needs no table at all: `statx(2)` says of a path whether it is the root of a
//! mount (`STATX_ATTR_MOUNT_ROOT`) and which mount it is on (`STATX_MNT_ID`). The removal in
//! [`crate::safe_remove`] judges by that, so that it holds even on a table it could not read.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use nix::libc;

/// Where the table is read from.
const MOUNTINFO: &str = "/proc/self/mountinfo";

/// The mount points of this process's mount namespace, in the table's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountTable {
    points: Vec<PathBuf>,
}

impl MountTable {
    /// This process's mount table. An error when it cannot be read or one of its lines cannot
    /// be parsed: nothing may be concluded about mounts then.
    pub fn read() -> io::Result<MountTable> {
        let bytes = std::fs::read(MOUNTINFO)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot read {MOUNTINFO}: {e}")))?;
        MountTable::parse(&bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{MOUNTINFO}: {e}")))
    }

    /// Parse mountinfo bytes. Every line must have the fifth field (the mount point), and the
    /// table must not be empty (a namespace always has its root).
    pub fn parse(bytes: &[u8]) -> Result<MountTable, String> {
        let mut points = Vec::new();
        for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let field = line
                .split(|b| *b == b' ')
                .nth(4)
                .filter(|f| f.starts_with(b"/"))
                .ok_or_else(|| format!("line {} has no mount point field", n + 1))?;
            points.push(PathBuf::from(OsString::from_vec(unescape(field))));
        }
        if points.is_empty() {
            return Err("the table lists no mount at all".into());
        }
        Ok(MountTable { points })
    }

    /// Every mount point, in the table's order.
    pub fn points(&self) -> &[PathBuf] {
        &self.points
    }

    /// Mount points strictly below `dir`, deepest first, each once.
    pub fn under(&self, dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = self
            .points
            .iter()
            .filter(|m| m.as_path() != dir && m.starts_with(dir))
            .cloned()
            .collect();
        found.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
        found.dedup();
        found
    }

    /// Whether `path` (as given) is a mount point.
    pub fn contains(&self, path: &Path) -> bool {
        self.points.iter().any(|m| m == path)
    }
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal; every other byte is as
/// it is in the path.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = |b: &u8| (b'0'..=b'7').contains(b);
        if field[i] == b'\\' && i + 3 < field.len() && field[i + 1..i + 4].iter().all(octal) {
            let v = u32::from(field[i + 1] - b'0') * 64
                + u32::from(field[i + 2] - b'0') * 8
                + u32::from(field[i + 3] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(field[i]);
            i += 1;
        }
    }
    out
}

/// Mount points strictly below `dir`, deepest first (see [`MountTable::under`]).
pub fn under(dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(MountTable::read()?.under(dir))
}

/// Whether `path` is a mount point: the root of a mount by `statx`, or listed in the table
/// (under its name as given or as resolved). An error when neither can tell.
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    match statx_of(path, libc::AT_SYMLINK_NOFOLLOW) {
        Ok(sx) if sx.stx_attributes_mask & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0 => {
            return Ok(sx.stx_attributes & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0);
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        _ => {}
    }
    let table = MountTable::read()?;
    let resolved = std::fs::canonicalize(path).ok();
    Ok(table.contains(path) || resolved.is_some_and(|r| table.contains(&r)))
}

/// The ID of the mount `path` is on (not following a final symlink), from `statx`.
pub fn mount_id(path: &Path) -> io::Result<u64> {
    let sx = statx_of(path, libc::AT_SYMLINK_NOFOLLOW)?;
    mount_id_of(&sx)
}

/// The mount ID `statx` gave, or an error when the kernel gave none.
pub fn mount_id_of(sx: &libc::statx) -> io::Result<u64> {
    if sx.stx_mask & libc::STATX_MNT_ID != 0 {
        Ok(sx.stx_mnt_id)
    } else {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel gives no mount ID (statx STATX_MNT_ID, Linux 5.8)",
        ))
    }
}

/// `statx(2)` of `path` relative to the working directory, with `flags`.
fn statx_of(path: &Path, flags: libc::c_int) -> io::Result<libc::statx> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
    statx_at(libc::AT_FDCWD, &c, flags)
}

/// `statx(2)` of `name` relative to the directory `dirfd`, asking for the basic fields and the
/// mount ID.
pub fn statx_at(
    dirfd: libc::c_int,
    name: &std::ffi::CStr,
    flags: libc::c_int,
) -> io::Result<libc::statx> {
    // SAFETY: a zeroed statx is a valid value of that plain C struct; the kernel writes only
    // into it, and `name` is a NUL-terminated string that outlives the call.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::statx(
            dirfd,
            name.as_ptr(),
            flags | libc::AT_STATX_DONT_SYNC,
            libc::STATX_BASIC_STATS | libc::STATX_MNT_ID,
            &mut sx,
        )
    };
    if rc == 0 {
        Ok(sx)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A path for a message: its bytes shown as Rust shows them when they are not UTF-8.
pub fn shown(path: &Path) -> String {
    match path.to_str() {
        Some(s) => s.to_string(),
        None => format!("{:?}", path.as_os_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(p: &Path) -> &[u8] {
        p.as_os_str().as_bytes()
    }

    #[test]
    fn a_path_that_is_not_utf8_is_read_as_bytes() {
        let table = MountTable::parse(
            b"22 1 8:1 / / rw - ext4 /dev/vda rw\n\
              30 22 0:5 / /tmp/a\\040b rw - tmpfs t rw\n\
              31 22 0:6 / /tmp/\xff\xfe rw - tmpfs t rw\n\
              32 22 0:7 / /tmp/w/vol/sub rw - tmpfs t rw\n",
        )
        .unwrap();
        assert_eq!(table.points().len(), 4);
        assert_eq!(bytes(&table.points()[1]), b"/tmp/a b");
        assert_eq!(bytes(&table.points()[2]), b"/tmp/\xff\xfe");
        assert_eq!(
            table.under(Path::new("/tmp/w")),
            vec![PathBuf::from("/tmp/w/vol/sub")]
        );
        // Component-wise: /tmp/wx is not under /tmp/w.
        assert!(table.under(Path::new("/tmp/w/vol/sub")).is_empty());
        assert!(table.contains(Path::new("/tmp/a b")));
    }

    #[test]
    fn octal_escapes() {
        assert_eq!(unescape(br"/a\040b\134c\011d\012e"), b"/a b\\c\td\ne");
        assert_eq!(unescape(br"/plain"), b"/plain");
        assert_eq!(unescape(br"/end\04"), br"/end\04");
        assert_eq!(unescape(br"/not\08x"), br"/not\08x");
    }

    #[test]
    fn a_table_that_cannot_be_parsed_is_an_error_never_no_mounts() {
        assert!(MountTable::parse(b"").is_err());
        assert!(MountTable::parse(b"22 1 8:1\n").is_err());
        assert!(MountTable::parse(b"22 1 8:1 / / rw\n22 1 x\n").is_err());
    }

    #[test]
    fn this_machine_s_table_reads() {
        let table = MountTable::read().unwrap();
        assert!(table.contains(Path::new("/")));
        assert!(is_mount_point(Path::new("/")).unwrap());
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_mount_point(dir.path()).unwrap());
        assert!(!is_mount_point(&dir.path().join("missing")).unwrap());
        assert_eq!(
            mount_id(dir.path()).unwrap(),
            mount_id(&dir.path().join(".")).unwrap()
        );
    }
}
