//! What the harness promises about the host it runs on: it never deletes what it did not
//! create, leaves no plugin process behind, and writes its report even when interrupted.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
        {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(marker) {
            found.push(cmd);
        }
    }
    found
}

fn wait_until_gone(marker: &str) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let left = processes_with(marker);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A plugin whose create never finishes and leaves a grandchild that ignores SIGTERM.
fn hanging_plugin(dir: &Path, marker: &str) -> PathBuf {
    script(
        dir,
        "hangs",
        &format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             fingerprint) echo '{{\"version\":\"1.0.0\"}}';;\n\
             create) (trap '' TERM; sleep {marker}) & trap '' TERM; sleep {marker};;\n\
             delete) exit 0;;\n\
             *) exit 1;;\nesac\n"
        ),
    )
}

fn interrupt_with(signal: nix::sys::signal::Signal, marker: &str) {
    let dir = tempfile::tempdir().unwrap();
    let vols = tempfile::tempdir().unwrap();
    let plugin = hanging_plugin(dir.path(), marker);
    let junit = dir.path().join("partial.xml");
    let child = bin()
        .arg("dhv")
        .arg(&plugin)
        .arg("--volumes-dir")
        .arg(vols.path())
        .arg("--junit")
        .arg(&junit)
        .args([
            "--tags",
            "@DHV-CREATE-EXIT-ZERO or @DHV-FINGERPRINT-EXIT-ZERO or @DHV-DELETE-EXIT-ZERO",
        ])
        .args(["--jobs", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the plugin's create is running.
    let until = Instant::now() + Duration::from_secs(10);
    while processes_with(marker).len() < 2 {
        assert!(Instant::now() < until, "the plugin never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    assert!(stdout.contains("interrupted"), "{stdout}");

    let xml = std::fs::read_to_string(&junit).expect("a partial JUnit report");
    assert!(
        xml.contains(r#"<property name="interrupted" value="true"/>"#),
        "{xml}"
    );
    // The create clause was under way: an error saying so. The fingerprint clause finished.
    assert!(xml.contains("interrupted: the run was stopped"), "{xml}");
    assert!(
        xml.contains("DHV-FINGERPRINT-EXIT-ZERO") && xml.contains("DHV-DELETE-EXIT-ZERO"),
        "{xml}"
    );
    let left = wait_until_gone(marker);
    assert!(left.is_empty(), "plugin processes left: {left:?}");
    let leftovers: Vec<_> = std::fs::read_dir(vols.path()).unwrap().flatten().collect();
    assert!(leftovers.is_empty(), "scratch left behind: {leftovers:?}");
}

#[test]
fn sigint_writes_a_partial_report_and_cleans_up() {
    interrupt_with(nix::sys::signal::Signal::SIGINT, "1001.2345");
}

#[test]
fn sigterm_writes_a_partial_report_and_cleans_up() {
    interrupt_with(nix::sys::signal::Signal::SIGTERM, "1002.3456");
}

#[test]
fn grandchildren_ignoring_sigterm_do_not_survive_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let marker = "1003.4567";
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-plugins/dhv/mkdir");
    let plugin = script(
        dir.path(),
        "spawner",
        &format!(
            "#!/bin/sh\n(trap '' TERM; sleep {marker}) &\n(trap '' TERM; sleep {marker}) >/dev/null 2>&1 &\nexec {} \"$@\"\n",
            base.display()
        ),
    );
    // The helpers hold stdout past every deadline, which those clauses wait out as Nomad
    // does: short deadlines keep the run short.
    let profile = dir.path().join("profile.toml");
    std::fs::write(
        &profile,
        "name = \"short\"\n[dhv]\nfingerprint_documented_deadline = \"1s\"\ncreate_deadline = \"2s\"\ndelete_deadline = \"2s\"\n",
    )
    .unwrap();
    let out = bin()
        .arg("dhv")
        .arg(&plugin)
        .arg("--profile")
        .arg(&profile)
        .args(["--tags", "@DHV-GENERAL-OUTPUT-CLOSED-ON-EXIT or @DHV-GENERAL-OUTPUT-CLOSED-BY-DEADLINE or @DHV-GENERAL-NO-STRAY-PROCESS or @DHV-CREATE-IDEMPOTENT"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL    MUST   DHV-GENERAL-OUTPUT-CLOSED-BY-DEADLINE"),
        "{stdout}"
    );
    assert!(stdout.contains("held by pid"), "{stdout}");
    let left = wait_until_gone(marker);
    assert!(left.is_empty(), "plugin processes left: {left:?}");
}

#[test]
fn paths_the_harness_did_not_create_are_never_removed() {
    let dir = tempfile::tempdir().unwrap();
    let vols = tempfile::tempdir().unwrap();
    // Another volume's data, and the plugin's own directory: a broken plugin reports them as
    // the path of every volume. Neither may lose anything.
    let precious = vols.path().join("precious");
    std::fs::create_dir(&precious).unwrap();
    std::fs::write(precious.join("data"), "keep me").unwrap();
    let plugin = script(
        dir.path(),
        "liar",
        "#!/bin/sh\ncase \"$1\" in\n\
         fingerprint) echo '{\"version\":\"1.0.0\"}';;\n\
         create) printf '{\"path\":\"%s\",\"bytes\":0}' \"$PRECIOUS\";;\n\
         delete) exit 0;;\n\
         *) exit 1;;\nesac\n",
    );
    let root_before: Vec<_> = std::fs::read_dir("/")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    for target in [
        precious.display().to_string(),
        "/".into(),
        dir.path().display().to_string(),
    ] {
        let out = bin()
            .env("PRECIOUS", &target)
            .arg("dhv")
            .arg(&plugin)
            .arg("--inherit-env")
            .arg("--volumes-dir")
            .arg(vols.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stdout}");
        assert!(stdout.contains("DHV-CREATE-OWN-PATH"), "{stdout}");
        assert_eq!(
            std::fs::read_to_string(precious.join("data")).unwrap(),
            "keep me",
            "{target}"
        );
        assert!(plugin.exists(), "the plugin itself was removed ({target})");
    }
    let root_after: Vec<_> = std::fs::read_dir("/")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(root_before, root_after);
    let left: Vec<_> = std::fs::read_dir(vols.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("precious")]);
}
