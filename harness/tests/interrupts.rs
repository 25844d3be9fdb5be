//! Ctrl-C twice in the middle of a run, for every kind: the second Ctrl-C stops the harness
//! waiting for the plugin, yet the run still ends with no process of its own running, no mount,
//! no scratch directory, and reports that say it was interrupted; no clause of an interrupted
//! run is failed or leaked on the plugin's account.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::{root, workspace_bin};

/// Processes whose command line, working directory or root is under `dir`.
fn processes_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let me = std::process::id().to_string();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.parse::<u32>().is_err() || name == me {
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
        let inside = ["cwd", "root"]
            .iter()
            .any(|l| std::fs::read_link(e.path().join(l)).is_ok_and(|p| p.starts_with(dir)));
        if inside || cmd.contains(&dir.display().to_string()) {
            found.push(format!("{name}: {cmd}"));
        }
    }
    found
}

/// Mount points under `dir`.
fn mounts_under(dir: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| Path::new(m).starts_with(dir))
        .map(str::to_string)
        .collect()
}

/// Runs `args` with TMPDIR (where every run makes its scratch directory) in a directory of
/// its own; once `started` is printed on stdout, waits `after`, sends SIGINT twice 300 ms
/// apart, and checks what is left. Returns the run record.
fn ctrl_c_twice(args: &[String], started: &str, after: Duration) -> serde_json::Value {
    ctrl_c_twice_at(args, started, after, When::MidRun)
}

/// Where the run is when the first Ctrl-C comes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    /// Preparing (probing the plugin): nothing to wait for.
    Preparing,
    /// Clauses under way: the first Ctrl-C says what is cleaned up; the second says the harness
    /// stops waiting if it came before the cleanup was done.
    MidRun,
    /// Clauses under way and their cleanup waits on the plugin: the second Ctrl-C must stop it.
    CleanupHangs,
}

fn ctrl_c_twice_at(
    args: &[String],
    started: &str,
    after: Duration,
    when: When,
) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().canonicalize().unwrap();
    let json = tmp_path.join("run.json");
    let scratch_parent = tmp_path.join("t");
    std::fs::create_dir_all(&scratch_parent).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(args)
        .arg("--json")
        .arg(&json)
        .env("TMPDIR", &scratch_parent)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read stdout on a thread until the marker shows.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let until = Instant::now() + Duration::from_secs(120);
    while !seen.contains(started) {
        assert!(
            Instant::now() < until,
            "the run never printed {started:?}: {seen}"
        );
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.push_str(&line);
            seen.push('\n');
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be interrupted: {seen}"
        );
    }
    std::thread::sleep(after);
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let _ = kill(pid, Signal::SIGINT);
    let until = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < until,
            "the run did not end after two Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
        seen.push_str(&line);
        seen.push('\n');
    }
    let mut stderr = String::new();
    use std::io::Read as _;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "stdout:\n{seen}\nstderr:\n{stderr}"
    );
    match when {
        When::Preparing => assert!(stderr.contains("interrupted while preparing"), "{stderr}"),
        When::MidRun => assert!(
            stderr.contains("cleaning up") && stderr.contains("Press Ctrl-C again"),
            "the first Ctrl-C says what is cleaned up: {stderr}"
        ),
        When::CleanupHangs => assert!(
            stderr.contains("Press Ctrl-C again") && stderr.contains("second interrupt"),
            "the second Ctrl-C stops the wait for the plugin: {stderr}"
        ),
    }
    // Whatever ran for the run is gone, its mounts and directories too.
    let until = Instant::now() + Duration::from_secs(3);
    let left = loop {
        let left = processes_under(&tmp_path);
        if left.is_empty() || Instant::now() > until {
            break left;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        left.is_empty(),
        "processes left: {left:?}\nstderr:\n{stderr}"
    );
    assert!(mounts_under(&tmp_path).is_empty(), "mounts left");
    let dirs: Vec<_> = std::fs::read_dir(&scratch_parent)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(dirs.is_empty(), "scratch left: {dirs:?}\nstderr:\n{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("a partial report")).unwrap();
    assert_eq!(record["interrupted"], true);
    if when == When::CleanupHangs {
        assert!(
            record["cases"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["verdict"] == "interrupted"),
            "the clauses under way are interrupted: {}",
            record["cases"]
        );
    }
    // Nothing an interrupt cut short is blamed on the plugin.
    for case in record["cases"].as_array().unwrap() {
        let verdict = case["verdict"].as_str().unwrap();
        let reason = case["reason"].as_str().unwrap_or_default();
        if verdict == "interrupted" || reason.contains("interrupted") {
            assert!(
                !matches!(verdict, "fail" | "leaked" | "timed-out" | "blocked"),
                "{} was cut short by the interrupt but says {verdict}: {reason}",
                case["clause"]
            );
        }
    }
    record
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn dhv_ctrl_c_twice_while_a_delete_hangs() {
    // The reference mkdir plugin, slowed down: creates take a second, deletes a minute, so
    // that the first Ctrl-C finds volumes to delete and the cleanup waits on the plugin.
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("slow-mkdir");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\ncase \"$1\" in create) sleep 1;; delete) sleep 60;; esac\nexec {} \"$@\"\n",
            root().join("reference-plugins/dhv/mkdir").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    ctrl_c_twice_at(
        &s(&[
            "dhv",
            plugin.to_str().unwrap(),
            "--jobs",
            "4",
            "--tags",
            "@DHV-DELETE-EXIT-ZERO or @DHV-DELETE-REMOVES-PATH or @DHV-DELETE-IDEMPOTENT",
        ]),
        "nomad-conform dhv:",
        Duration::from_millis(2500),
        When::CleanupHangs,
    );
}

#[test]
fn driver_ctrl_c_twice() {
    let plugin = workspace_bin("driver-exec");
    let config = root().join("fixtures/driver/plugin.hcl");
    ctrl_c_twice(
        &s(&[
            "driver",
            plugin.to_str().unwrap(),
            "--task-command",
            "command = {command}\nargs = {args}",
            "--plugin-config",
            config.to_str().unwrap(),
        ]),
        "nomad-conform driver:",
        Duration::from_secs(3),
    );
}

#[test]
fn driver_ctrl_c_twice_while_it_is_probed() {
    let plugin = workspace_bin("driver-exec");
    let config = root().join("fixtures/driver/plugin.hcl");
    // The probe starts a task before the header is printed: interrupt it at once.
    let record = ctrl_c_twice_at(
        &s(&[
            "driver",
            plugin.to_str().unwrap(),
            "--task-command",
            "command = {command}\nargs = {args}",
            "--plugin-config",
            config.to_str().unwrap(),
            "--plugin-args",
            "--variant slow-start",
        ]),
        "",
        Duration::from_secs(2),
        When::Preparing,
    );
    let cases = record["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    assert!(cases.iter().all(|c| c["verdict"] == "skip"), "{cases:?}");
}

#[test]
fn lock_ctrl_c_twice() {
    let client = format!(
        "{} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms -- {{protected}}",
        workspace_bin("lock-sidecar").display()
    );
    ctrl_c_twice(
        &s(&[
            "lock",
            "--client",
            &client,
            "--give-up",
            "2s",
            "--stop-on-client-after",
            "1s",
            "--profile",
            "fast",
        ]),
        "nomad-conform lock:",
        Duration::from_secs(3),
    );
}

#[test]
fn variables_ctrl_c_twice() {
    ctrl_c_twice(
        &s(&["variables", "--profile", "fast"]),
        "nomad-conform variables:",
        Duration::from_secs(2),
    );
}

#[test]
fn csi_ctrl_c_twice_blames_nothing_on_the_plugin() {
    if !support::needs_root("the CSI interrupt test (csi-hostpath bind-mounts)") {
        return;
    }
    let launch = format!(
        "{} --endpoint {{endpoint}} --node-id node-1 --state-dir {{state_dir}} --max-volumes-per-node 16",
        workspace_bin("csi-hostpath").display()
    );
    // Several interrupt points: early (volumes being created) and later, as soon as the claim
    // clause has passed (others published and staged), which a fixed delay cannot promise on
    // a fast machine: the whole run takes about a second.
    for (started, after) in [
        ("nomad-conform csi:", Duration::from_millis(300)),
        ("CSI-NOMAD-CLAIM ", Duration::ZERO),
    ] {
        ctrl_c_twice(
            &s(&["csi", "--launch", &launch, "--jobs", "2"]),
            started,
            after,
        );
    }
}
