//! The harness never deletes what it did not create, even through a mount it cannot name, and
//! leaves no process behind. Each test here is one way a careless or hostile plugin (or the
//! machine's own mounts) once made the harness delete a user's files or leave a daemon running.
//! The mounting tests run in a mount namespace of their own (`unshare -m`), so nothing outside
//! them sees their mounts.

mod support;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use nomad_conform_reports::model::{RunRecord, Verdict};

const BIN: &str = env!("CARGO_BIN_EXE_nomad-conform");

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn executable(path: &Path, script: &str) {
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A directory of files nobody may delete.
fn canary(dir: &Path) -> PathBuf {
    let c = dir.join("canary");
    std::fs::create_dir_all(c.join("sub")).unwrap();
    std::fs::write(c.join("precious"), "x").unwrap();
    std::fs::write(c.join("sub/precious"), "x").unwrap();
    c
}

fn canary_intact(c: &Path) -> bool {
    c.join("precious").is_file() && c.join("sub/precious").is_file()
}

fn record(json: &Path, out: &Output) -> RunRecord {
    let t =
        std::fs::read_to_string(json).unwrap_or_else(|e| panic!("no record ({e}): {}", text(out)));
    serde_json::from_str(&t).unwrap()
}

/// A DHV plugin whose create bind-mounts the canary into its volume and whose delete refuses
/// (it forgot the mount). With a mount point anywhere on the machine whose name is not UTF-8,
/// the harness once read no mount at all, passed the clause and deleted the canary's files
/// through the mount when it removed its scratch directory.
#[test]
fn nothing_is_deleted_through_a_mount_beside_a_mount_point_that_is_not_utf8() {
    if !support::needs_root("bind mounts in a mount namespace") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let canary = canary(dir.path());
    let plugin = dir.path().join("plugin");
    executable(
        &plugin,
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             fingerprint) echo '{{\"version\":\"1.0.0\"}}';;\n\
             create) p=\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"; mkdir -p \"$p/data\" && \
             mount --bind '{}' \"$p/data\" && echo \"{{\\\"path\\\":\\\"$p\\\",\\\"bytes\\\":0}}\";;\n\
             delete) echo '{{\"error\":\"the volume is busy\"}}'; exit 1;;\nesac\n",
            canary.display()
        ),
    );
    // A mount point named with bytes that are not UTF-8.
    let mut odd = dir.path().as_os_str().as_bytes().to_vec();
    odd.extend_from_slice(b"/mnt-\xff\xfe");
    let odd = PathBuf::from(OsStr::from_bytes(&odd));
    let json = dir.path().join("run.json");
    let script = r#"mkdir "$1" && mount -t tmpfs odd "$1" && exec "$2" dhv "$3" --tags @DHV-CREATE-EXIT-ZERO --json "$4""#;
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(&odd)
        .arg(BIN)
        .arg(&plugin)
        .arg(&json)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        canary_intact(&canary),
        "the canary's files were deleted: {}",
        text(&out)
    );
    let record = record(&json, &out);
    let case = &record.cases[0];
    assert_eq!(case.verdict, Verdict::Leaked, "{case:?}\n{}", text(&out));
    let reason = case.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("data was still mounted"), "{reason}");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

/// DHV-CREATE-RESTORE-VANISHED makes a volume's path vanish as a reboot would: it unmounts
/// what is mounted there, then removes it. With eleven bind mounts of the canary stacked on
/// the path it once unmounted ten and removed the canary's files through the eleventh.
#[test]
fn a_vanishing_volume_is_never_removed_through_a_stacked_mount() {
    if !support::needs_root("bind mounts in a mount namespace") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let canary = canary(dir.path());
    let plugin = dir.path().join("plugin");
    executable(
        &plugin,
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             fingerprint) echo '{{\"version\":\"1.0.0\"}}';;\n\
             create) p=\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"; mkdir -p \"$p\"; \
             if ! mountpoint -q \"$p\"; then i=0; while [ $i -lt 11 ]; do \
             mount --bind '{}' \"$p\" || exit 1; i=$((i+1)); done; fi; \
             echo \"{{\\\"path\\\":\\\"$p\\\",\\\"bytes\\\":0}}\";;\n\
             delete) p=\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"; \
             while mountpoint -q \"$p\"; do umount \"$p\" || exit 1; done; rm -rf \"$p\";;\nesac\n",
            canary.display()
        ),
    );
    let json = dir.path().join("run.json");
    let script = r#"exec "$1" dhv "$2" --tags @DHV-CREATE-RESTORE-VANISHED --json "$3""#;
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", script, "sh"])
        .arg(BIN)
        .arg(&plugin)
        .arg(&json)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        canary_intact(&canary),
        "the canary's files were deleted: {}",
        text(&out)
    );
    let record = record(&json, &out);
    assert_eq!(record.cases.len(), 1, "{}", text(&out));
    assert_ne!(
        record.cases[0].verdict,
        Verdict::Skip,
        "{:?}",
        record.cases[0]
    );
}

/// A volume path that is a symlink to a directory of the user's: the harness's marker file
/// is never written there (the clauses that need it are skipped, with the reason), and the
/// user's directory holds exactly what it held.
#[test]
fn no_marker_is_written_through_a_symlinked_volume_path() {
    let dir = tempfile::tempdir().unwrap();
    let canary = canary(dir.path());
    let plugin = dir.path().join("plugin");
    executable(
        &plugin,
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             fingerprint) echo '{{\"version\":\"1.0.0\"}}';;\n\
             create) p=\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"; mkdir -p \"$DHV_VOLUMES_DIR\"; \
             [ -L \"$p\" ] || ln -s '{}' \"$p\"; echo \"{{\\\"path\\\":\\\"$p\\\",\\\"bytes\\\":0}}\";;\n\
             delete) rm -f \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\";;\nesac\n",
            canary.display()
        ),
    );
    let json = dir.path().join("run.json");
    let out = std::process::Command::new(BIN)
        .current_dir(dir.path())
        .args(["dhv"])
        .arg(&plugin)
        .args(["--json"])
        .arg(&json)
        .output()
        .unwrap();
    let record = record(&json, &out);
    let mut left: Vec<String> = std::fs::read_dir(&canary)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["precious", "sub"], "{}", text(&out));
    assert!(canary_intact(&canary));
    let skipped: Vec<&str> = record
        .cases
        .iter()
        .filter(|c| {
            c.verdict == Verdict::Skip
                && c.reason
                    .as_deref()
                    .is_some_and(|r| r.contains("resolves to") && r.contains("writes nothing"))
        })
        .map(|c| c.clause.as_str())
        .collect();
    assert!(!skipped.is_empty(), "{:#?}", record.cases);
}

/// Processes whose command line holds `marker`.
fn running_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker))
        .collect()
}

/// A create that starts a helper in a session of its own, which starts a grandchild in a
/// session of its own, both with a fresh environment and their stdio closed. Killing the
/// helper at the end of the run orphans the grandchild; the run once did not look again, and
/// the grandchild outlived it.
#[test]
fn a_daemon_two_sessions_deep_does_not_survive_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // Unique to this run: a leftover of an earlier run is not this one's.
    let tag = std::process::id() % 10000;
    let (child, grandchild) = (format!("4321.1{tag:04}"), format!("4321.2{tag:04}"));
    let plugin = dir.path().join("plugin");
    executable(
        &plugin,
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             fingerprint) echo '{{\"version\":\"1.0.0\"}}';;\n\
             create) (cd / && env -i /usr/bin/setsid /bin/sh -c \
             '/usr/bin/setsid /bin/sleep {grandchild} </dev/null >/dev/null 2>&1 & exec /bin/sleep {child}' \
             </dev/null >/dev/null 2>&1 &); \
             mkdir -p \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"; \
             echo \"{{\\\"path\\\":\\\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\\\",\\\"bytes\\\":0}}\";;\n\
             delete) rm -rf \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\";;\nesac\n"
        ),
    );
    let out = std::process::Command::new(BIN)
        .current_dir(dir.path())
        .arg("dhv")
        .arg(&plugin)
        .args(["--tags", "@DHV-CREATE-EXIT-ZERO"])
        .output()
        .unwrap();
    // Killed processes may take a moment to be gone from /proc once reparented to init.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let still = || {
        let mut l = running_with(&child);
        l.extend(running_with(&grandchild));
        l
    };
    let mut left = still();
    while !left.is_empty() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(50));
        left = still();
    }
    for marker in [&child, &grandchild] {
        let _ = std::process::Command::new("pkill")
            .args(["-f", marker])
            .status();
    }
    assert!(left.is_empty(), "still running: {left:?}\n{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&child) && stderr.contains(&grandchild),
        "{}",
        text(&out)
    );
}

/// A lock client that leaves a daemon behind (`(cd / && setsid sleep ... &)`) before it runs
/// the reference client: the lock suite now runs as a subreaper too, finds the daemon when the
/// clause ends, kills it and says so in the clause's notes.
#[test]
fn a_lock_client_s_daemon_does_not_survive_its_clause() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("4321.3{:04}", std::process::id() % 10000);
    // The client goes on only once the daemon is in its own session (a flag file it writes
    // after setsid): on a loaded machine it could otherwise still be in the client's process
    // group when the clause ends, and go with it, unnamed.
    let flag = dir.path().join("detached");
    let client = format!(
        "sh -c '(cd / && setsid sh -c \"touch {flag}; exec sleep {marker}\" </dev/null >/dev/null 2>&1 &); while [ ! -e {flag} ]; do sleep 0.01; done; exec \"$0\" \"$@\"' {} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms -- {{protected}}",
        support::workspace_bin("lock-sidecar").display(),
        flag = flag.display()
    );
    let json = dir.path().join("run.json");
    let out = std::process::Command::new(BIN)
        .current_dir(dir.path())
        .args(["lock", "--client", &client, "--profile", "fast"])
        .args(["--tags", "@LOCK-STARTS", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let left = running_with(&marker);
    let _ = std::process::Command::new("pkill")
        .args(["-f", &marker])
        .status();
    assert!(left.is_empty(), "still running: {left:?}\n{}", text(&out));
    let record = record(&json, &out);
    let case = &record.cases[0];
    assert!(
        case.notes
            .iter()
            .any(|n| n.contains(&marker) && n.contains("killed")),
        "{:?}\n{}",
        case.notes,
        text(&out)
    );
}
