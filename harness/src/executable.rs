//! Whether a file is a program this machine can run, checked before a run so that a plugin or
//! client that cannot start is one line and exit 2, not a failure of every clause: it exists,
//! is not a directory, has an execute bit the harness may use, and, when it is an ELF binary,
//! was built for this machine (or for one the kernel runs through binfmt_misc, as
//! qemu-user-static registers). Every kind checks the program it runs through here.

use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// Why a file cannot be run. Its text follows the file's name: "PATH is not executable...".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unrunnable {
    Missing,
    Directory,
    /// Some other error reading it (permission denied on a directory on the way, ...).
    Unreadable(String),
    NotExecutable,
    /// An ELF binary for another machine.
    ForeignMachine {
        built_for: String,
    },
}

impl std::fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unrunnable::Missing => write!(f, "does not exist"),
            Unrunnable::Directory => write!(f, "is a directory, not a program"),
            Unrunnable::Unreadable(e) => write!(f, "cannot be read: {e}"),
            Unrunnable::NotExecutable => write!(f, "is not executable (chmod +x)"),
            Unrunnable::ForeignMachine { built_for } => write!(
                f,
                "is a binary for {built_for}, and this machine is {}: it cannot run here",
                std::env::consts::ARCH
            ),
        }
    }
}

/// Check that `path` is a program this machine can run (see the module's text).
pub fn check(path: &Path) -> Result<(), Unrunnable> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Unrunnable::Missing,
        _ => Unrunnable::Unreadable(e.to_string()),
    })?;
    if meta.is_dir() {
        return Err(Unrunnable::Directory);
    }
    if meta.permissions().mode() & 0o111 == 0
        || nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_err()
    {
        return Err(Unrunnable::NotExecutable);
    }
    let mut header = Vec::with_capacity(HEADER);
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(HEADER as u64).read_to_end(&mut header);
    }
    match elf_machine(&header) {
        Some(m) if !NATIVE.contains(&m) && !binfmt_runs(&header) => {
            Err(Unrunnable::ForeignMachine {
                built_for: machine_name(m),
            })
        }
        _ => Ok(()),
    }
}

/// Check the program a command line runs (its first word, looked up on PATH when it has no
/// slash); the error is one phrase naming it: `the program "x" does not exist (not found on
/// PATH)`, `/bin/x is not executable (chmod +x)`.
pub fn check_program(name: &str) -> Result<(), String> {
    let missing = || {
        format!(
            "the program {name:?} does not exist{}",
            if name.contains('/') {
                ""
            } else {
                " (not found on PATH)"
            }
        )
    };
    let path = crate::report::program_path(name).ok_or_else(missing)?;
    check(&path).map_err(|why| match why {
        Unrunnable::Missing => missing(),
        other => format!("{} {other}", path.display()),
    })
}

/// Bytes of a file's start read: an ELF header, and what binfmt_misc entries match against.
const HEADER: usize = 128;

/// ELF e_machine values this machine runs natively.
#[cfg(target_arch = "x86_64")]
const NATIVE: &[u16] = &[62, 3];
#[cfg(target_arch = "aarch64")]
const NATIVE: &[u16] = &[183, 40];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const NATIVE: &[u16] = &[];

/// The e_machine of an ELF header, in the file's own byte order; `None` when `header` is not
/// ELF (a script, say), or on a machine whose own value this module does not know.
fn elf_machine(header: &[u8]) -> Option<u16> {
    if NATIVE.is_empty() || header.len() < 20 || !header.starts_with(b"\x7fELF") {
        return None;
    }
    let bytes = [header[18], header[19]];
    match header[5] {
        1 => Some(u16::from_le_bytes(bytes)),
        2 => Some(u16::from_be_bytes(bytes)),
        _ => None,
    }
}

fn machine_name(m: u16) -> String {
    match m {
        2 => "sparc".into(),
        3 => "x86 (i386)".into(),
        8 => "mips".into(),
        20 => "powerpc".into(),
        21 => "powerpc64".into(),
        22 => "s390x".into(),
        40 => "arm".into(),
        43 => "sparc64".into(),
        62 => "x86_64".into(),
        183 => "aarch64".into(),
        243 => "riscv".into(),
        258 => "loongarch".into(),
        other => format!("ELF machine {other}"),
    }
}

const BINFMT_MISC: &str = "/proc/sys/fs/binfmt_misc";

/// Whether an enabled binfmt_misc entry (a magic, at an offset, under a mask) matches the
/// file's first bytes: then the kernel runs it through that entry's interpreter.
fn binfmt_runs(header: &[u8]) -> bool {
    let dir = Path::new(BINFMT_MISC);
    if std::fs::read_to_string(dir.join("status")).is_ok_and(|s| s.trim() == "disabled") {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        name != "status"
            && name != "register"
            && std::fs::read_to_string(e.path()).is_ok_and(|text| binfmt_matches(&text, header))
    })
}

/// Whether the binfmt_misc entry `entry` (the text of its file) matches `header`.
fn binfmt_matches(entry: &str, header: &[u8]) -> bool {
    let mut enabled = false;
    let (mut offset, mut magic, mut mask) = (0usize, None, None);
    for line in entry.lines() {
        let line = line.trim();
        if line == "enabled" {
            enabled = true;
        } else if let Some(v) = line.strip_prefix("offset ") {
            offset = v.trim().parse().unwrap_or(usize::MAX);
        } else if let Some(v) = line.strip_prefix("magic ") {
            magic = crate::hex::decode(v.trim());
        } else if let Some(v) = line.strip_prefix("mask ") {
            mask = crate::hex::decode(v.trim());
        }
    }
    let Some(magic) = magic.filter(|m| !m.is_empty()) else {
        return false;
    };
    let Some(bytes) = offset
        .checked_add(magic.len())
        .and_then(|end| header.get(offset..end))
    else {
        return false;
    };
    enabled
        && magic.iter().zip(bytes).enumerate().all(|(i, (m, b))| {
            let k = mask
                .as_ref()
                .and_then(|k| k.get(i))
                .copied()
                .unwrap_or(0xff);
            m & k == b & k
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ELF header of `machine`, 64-bit little-endian.
    fn elf(machine: u16) -> Vec<u8> {
        let mut h = b"\x7fELF\x02\x01\x01".to_vec();
        h.resize(18, 0);
        h.extend(machine.to_le_bytes());
        h.resize(64, 0);
        h
    }

    #[test]
    fn the_machine_of_an_elf_header() {
        assert_eq!(elf_machine(&elf(183)), (!NATIVE.is_empty()).then_some(183));
        assert_eq!(elf_machine(b"#!/bin/sh\necho hi\n"), None);
        assert_eq!(elf_machine(b"\x7fELF"), None);
    }

    #[test]
    fn a_binfmt_entry_matches_by_magic_and_mask() {
        // qemu-aarch64's entry, as qemu-user-static registers it.
        let entry = "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n\
                     flags: POCF\noffset 0\n\
                     magic 7f454c460201010000000000000000000200b700\n\
                     mask ffffffffffffff00fffffffffffffffffeffffff\n";
        let mut exe = elf(183);
        exe[16] = 2; // ET_EXEC
        assert!(binfmt_matches(entry, &exe));
        assert!(!binfmt_matches(entry, &elf(62)));
        assert!(!binfmt_matches(&entry.replace("enabled", "disabled"), &exe));
    }

    #[test]
    fn what_cannot_run_says_why() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tempfile::tempdir().unwrap();
        assert_eq!(check(&d.path().join("none")), Err(Unrunnable::Missing));
        assert_eq!(check(d.path()), Err(Unrunnable::Directory));
        let script = d.path().join("s");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(check(&script), Err(Unrunnable::NotExecutable));
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(check(&script), Ok(()));
        if let Some(&other) = [183u16, 62].iter().find(|m| !NATIVE.contains(m))
            && !binfmt_runs(&elf(other))
        {
            let bin = d.path().join("b");
            std::fs::write(&bin, elf(other)).unwrap();
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
            let e = check(&bin).unwrap_err();
            assert!(matches!(e, Unrunnable::ForeignMachine { .. }), "{e}");
        }
    }
}
