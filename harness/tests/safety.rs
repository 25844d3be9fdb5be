//! The harness is trusted with the author's machine and credentials. These tests hold it to
//! that: a report path never replaces what the run must not touch (the plugin, a device, a
//! FIFO, another report) and is refused before anything runs; a call meant to fail cannot fill
//! the disk; no secret the run is given or mints reaches a report or the console.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use nomad_conform_reports::model::RunRecord;
use nomad_conform_variables::{AclConfig, Profile, ServerConfig, Token, VariablesServer};
use support::root;

const BIN: &str = env!("CARGO_BIN_EXE_nomad-conform");

fn nomad_conform(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run nomad-conform")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A copy of the reference-style fixture plugin `control` in `dir` (with the fixture library
/// it sources), so that a test may try to damage it.
fn plugin_copy(dir: &Path) -> PathBuf {
    let fixtures = dir.join("fixtures");
    std::fs::create_dir_all(fixtures.join("lib")).unwrap();
    std::fs::create_dir_all(fixtures.join("p")).unwrap();
    std::fs::copy(
        root().join("fixtures/dhv/lib/base.sh"),
        fixtures.join("lib/base.sh"),
    )
    .unwrap();
    let plugin = fixtures.join("p/plugin");
    std::fs::copy(root().join("fixtures/dhv/control/plugin"), &plugin).unwrap();
    plugin
}

/// A refusal before the run: exit 2, one line on stderr naming the flag, and no suite header.
fn assert_refused(out: &Output, flag: &str, because: &str) {
    let all = text(out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{all}");
    assert!(stderr.contains(flag) && stderr.contains(because), "{all}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("nomad-conform dhv:"),
        "the run started: {all}"
    );
}

#[test]
fn a_report_never_replaces_the_plugin() {
    let d = tempfile::tempdir().unwrap();
    let plugin = plugin_copy(d.path());
    let before = std::fs::read(&plugin).unwrap();
    let p = plugin.to_str().unwrap();
    for flag in ["--json", "--junit", "--html"] {
        let out = nomad_conform(d.path(), &["dhv", p, flag, p]);
        assert_refused(&out, flag, "that is the plugin");
    }
    // Through a symlink, too.
    let link = d.path().join("link.json");
    std::os::unix::fs::symlink(&plugin, &link).unwrap();
    let out = nomad_conform(d.path(), &["dhv", p, "--json", link.to_str().unwrap()]);
    assert_refused(&out, "--json", "that is the plugin");
    assert_eq!(std::fs::read(&plugin).unwrap(), before);
}

#[test]
fn a_report_never_replaces_the_launched_binary() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("csi-plugin");
    std::fs::write(&bin, "#!/bin/sh\nexit 1\n").unwrap();
    let launch = format!("{} --endpoint {{endpoint}}", bin.display());
    let out = std::process::Command::new(BIN)
        .args(["csi", "--launch", &launch, "--junit"])
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("that is the launched binary"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&bin).unwrap(),
        "#!/bin/sh\nexit 1\n"
    );
}

#[test]
fn devices_fifos_directories_and_shared_paths_are_refused_before_the_run() {
    use std::os::unix::fs::FileTypeExt as _;
    let d = tempfile::tempdir().unwrap();
    let plugin = plugin_copy(d.path());
    let p = plugin.to_str().unwrap();
    let fifo = d.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = fifo.to_str().unwrap();
    let dir = d.path().to_str().unwrap();
    let cases: [(&[&str], &str, &str); 5] = [
        (&["--json", "/dev/null"], "--json", "character device"),
        (&["--junit", "/dev/full"], "--junit", "character device"),
        (&["--html", fifo], "--html", "a FIFO"),
        (&["--json", dir], "--json", "is a directory"),
        (
            &["--json", "/nonexistent-dir-of-nomad-conform/r.json"],
            "--json",
            "does not exist",
        ),
    ];
    for (extra, flag, because) in cases {
        let mut args = vec!["dhv", p];
        args.extend_from_slice(extra);
        let out = nomad_conform(d.path(), &args);
        assert_refused(&out, flag, because);
    }
    // The devices and the FIFO are what they were.
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
    assert!(std::fs::metadata(fifo).unwrap().file_type().is_fifo());
    // Two reports on one path, also when one of them is a symlink to the other.
    let a = d.path().join("a.xml");
    let b = d.path().join("b.xml");
    std::os::unix::fs::symlink("a.xml", &b).unwrap();
    let out = nomad_conform(
        d.path(),
        &[
            "dhv",
            p,
            "--junit",
            a.to_str().unwrap(),
            "--html",
            b.to_str().unwrap(),
        ],
    );
    assert_refused(&out, "--html", "names the same file");
}

#[test]
fn a_symlinked_report_is_written_through_and_the_link_kept() {
    let d = tempfile::tempdir().unwrap();
    let plugin = plugin_copy(d.path());
    let real = d.path().join("real.json");
    let link = d.path().join("link.json");
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    let out = nomad_conform(
        d.path(),
        &[
            "dhv",
            plugin.to_str().unwrap(),
            "--tags",
            "@DHV-FINGERPRINT-EXIT-ZERO",
            "--json",
            link.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert_eq!(record.cases.len(), 1);
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

/// A plugin that writes the whole capacity it is asked for with real zeros (capped at 256 MiB so
/// that a broken harness cannot fill the test machine) and says how much it wrote when it fails.
const WRITES_CAPACITY: &str = r#"#!/bin/sh
. "${0%/*}/../lib/base.sh"
do_create() {
    volume_path
    mkdir -p "$path" || fail "mkdir"
    if ! dd if=/dev/zero of="$path/data" bs=1048576 count=256 2>/dev/null; then
        wrote=$(wc -c <"$path/data")
        rm -rf "$path"
        fail "wrote $((wrote + 0)) bytes"
    fi
    rm -rf "$path"
    fail "wrote everything"
}
main "$@"
"#;

#[test]
fn a_call_meant_to_fail_cannot_write_past_the_file_size_limit() {
    let d = tempfile::tempdir().unwrap();
    let plugin = plugin_copy(d.path());
    std::fs::write(&plugin, WRITES_CAPACITY).unwrap();
    let json = d.path().join("run.json");
    let out = nomad_conform(
        d.path(),
        &[
            "dhv",
            plugin.to_str().unwrap(),
            "--tags",
            "@DHV-CREATE-ERROR-JSON",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let event = record.cases[0]
        .events
        .iter()
        .find(|e| e.operation == "create (meant to fail)")
        .unwrap_or_else(|| panic!("no meant-to-fail create\n{}", text(&out)));
    let stdout = match &event.response {
        nomad_conform_reports::model::Response::Exec { stdout, .. } => stdout.text.clone(),
        other => panic!("{other:?}"),
    };
    let wrote: u64 = stdout
        .split("wrote ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(wrote <= 32 << 20, "the plugin wrote {wrote} bytes");
    assert!(wrote > 0, "{stdout}");
}

/// A create that writes into its volume, a little at a time, for as long as it is let.
const FILLS_ITS_VOLUME: &str = r#"#!/bin/sh
. "${0%/*}/../lib/base.sh"
do_create() {
    volume_path
    mkdir -p "$path" || fail "mkdir"
    i=0
    while :; do
        dd if=/dev/zero of="$path/data.$i" bs=1048576 count=4 conv=fsync 2>/dev/null
        i=$((i + 1))
        sleep 0.05
    done
}
main "$@"
"#;

/// docs/guides/dhv.md: a clause whose failure was the harness's doing (the call stopped for the disk) is
/// skipped with that reason, not judged. An ordinary create filling a small filesystem (a
/// 64 MiB tmpfs as --volumes-dir: the floor is half of what was free) is stopped by the disk
/// guard, and DHV-CREATE-EXIT-ZERO, which judges it, is skipped, not failed.
#[test]
fn an_ordinary_create_stopped_for_the_disk_is_skipped_with_the_reason() {
    if !support::needs_root("the disk guard test (a small tmpfs)") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let plugin = plugin_copy(d.path());
    std::fs::write(&plugin, FILLS_ITS_VOLUME).unwrap();
    let small = d.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(mounted.success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(small.clone());
    let json = d.path().join("run.json");
    let out = nomad_conform(
        d.path(),
        &[
            "dhv",
            plugin.to_str().unwrap(),
            "--volumes-dir",
            small.to_str().unwrap(),
            "--tags",
            "@DHV-CREATE-EXIT-ZERO",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
    let case = &record.cases[0];
    assert_eq!(
        case.verdict,
        nomad_conform_reports::model::Verdict::Skip,
        "{:?}\n{}",
        case.reason,
        text(&out)
    );
    let reason = case.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("the harness stopped create") && reason.contains("fell to"),
        "{reason}"
    );
}

/// Every report format and the console of a run, as text.
struct Seen {
    out: Output,
    files: Vec<(String, String)>,
}

impl Seen {
    fn run(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Seen {
        let paths = ["run.json", "run.xml", "run.html"].map(|n| dir.join(n));
        let out = std::process::Command::new(BIN)
            .current_dir(dir)
            .args(args)
            .args(["--json", paths[0].to_str().unwrap()])
            .args(["--junit", paths[1].to_str().unwrap()])
            .args(["--html", paths[2].to_str().unwrap()])
            .envs(envs.iter().copied())
            .output()
            .unwrap();
        let mut files: Vec<(String, String)> = paths
            .iter()
            .map(|p| {
                (
                    p.display().to_string(),
                    std::fs::read_to_string(p).unwrap_or_default(),
                )
            })
            .collect();
        files.push((
            "stdout".into(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
        files.push((
            "stderr".into(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
        Seen { out, files }
    }

    /// No secret anywhere; and a redaction mark somewhere, so the secret was there to hide.
    fn assert_clean(&self, secrets: &[&str]) {
        assert!(
            !self.files[0].1.is_empty(),
            "no JSON record\n{}",
            text(&self.out)
        );
        for (name, body) in &self.files {
            for s in secrets {
                assert!(
                    !body.contains(s),
                    "the secret {s:?} is in {name}:\n{}",
                    body.lines()
                        .filter(|l| l.contains(s))
                        .take(5)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
            }
            // Whatever NOMAD_TOKEN a client printed is hidden, whichever token it was.
            for value in body.split("NOMAD_TOKEN=").skip(1) {
                assert!(
                    value.starts_with("[redacted]")
                        || value.starts_with('$')
                        || value.starts_with('"'),
                    "a NOMAD_TOKEN value in {name}: {}",
                    &value[..value.len().min(60)]
                );
            }
        }
        assert!(
            self.files.iter().any(|(_, b)| b.contains("[redacted]")),
            "nothing was redacted: the secret never reached the run\n{}",
            text(&self.out)
        );
    }
}

fn lock_sidecar() -> String {
    support::workspace_bin("lock-sidecar").display().to_string()
}

/// A lock client that prints its whole environment before it runs the reference client.
fn env_printing_client() -> String {
    format!(
        "sh -c 'env >&2; exec \"$0\" \"$@\"' {} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms -- {{protected}}",
        lock_sidecar()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn lock_through_nomad_addr_keeps_the_token_out_of_every_report() {
    let token = "mgmt-token-5b0c1e9d-4f7a";
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_acl(AclConfig::enabled().with_token(Token::management(token))),
    )
    .await
    .unwrap();
    let addr = format!("http://{}", server.addr().unwrap());
    let d = tempfile::tempdir().unwrap();
    let client = env_printing_client();
    let dir = d.path().to_path_buf();
    let seen = tokio::task::spawn_blocking(move || {
        Seen::run(
            &dir,
            &[
                "lock",
                "--client",
                &client,
                "--nomad-addr",
                &addr,
                "--token",
                token,
                "--profile",
                "fast",
                "--tags",
                "@LOCK-STARTS or @LOCK-REQUESTS-WELL-FORMED",
            ],
            &[],
        )
    })
    .await
    .unwrap();
    seen.assert_clean(&[token]);
}

#[test]
fn a_client_token_the_harness_mints_is_never_shown() {
    // LOCK-TOKEN-NAMESPACE gives the client a token of the reference server's ACLs; the client
    // prints it with its environment.
    let d = tempfile::tempdir().unwrap();
    let seen = Seen::run(
        d.path(),
        &[
            "lock",
            "--client",
            &env_printing_client(),
            "--profile",
            "fast",
            "--tags",
            "@LOCK-TOKEN-NAMESPACE",
        ],
        &[],
    );
    seen.assert_clean(&["nomad-conform-management"]);
}

#[test]
fn variables_never_show_a_secret_id_or_the_management_token() {
    let d = tempfile::tempdir().unwrap();
    let seen = Seen::run(
        d.path(),
        &[
            "variables",
            "--profile",
            "fast",
            "--tags",
            "@VARIABLES-ACL-WORKLOAD or @VARIABLES-ACL-READ",
        ],
        &[],
    );
    seen.assert_clean(&["nomad-conform-management"]);
    assert!(
        seen.files[0].1.contains("\"SecretID\""),
        "the run read no token back: nothing to hide"
    );
    for (name, body) in &seen.files {
        let body = body
            .replace("&quot;", "\"")
            .replace("&#34;", "\"")
            .replace("&#x22;", "\"");
        for value in body.split("SecretID").skip(1) {
            let value: String = value
                .trim_start_matches(|c: char| !c.is_ascii_alphanumeric() && c != '[')
                .chars()
                .take(10)
                .collect();
            assert!(
                value.starts_with("[redacted") || value.is_empty(),
                "a SecretID in {name}: {value}"
            );
        }
    }
}

#[test]
fn dhv_secret_parameters_are_redacted_everywhere() {
    let secret = "hunter2-db-password-77";
    let d = tempfile::tempdir().unwrap();
    let plugin = plugin_copy(d.path());
    // A plugin that echoes its parameters on stderr and in its error.
    std::fs::copy(
        root().join("fixtures/dhv/echoes-parameters/plugin"),
        &plugin,
    )
    .unwrap();
    let params = format!("{{\"password\":\"{secret}\"}}");
    let seen = Seen::run(
        d.path(),
        &[
            "dhv",
            plugin.to_str().unwrap(),
            "--parameters",
            &params,
            "--tags",
            "@DHV-GENERAL-NO-SECRETS-ECHOED or @DHV-CREATE-EXIT-ZERO",
        ],
        &[],
    );
    seen.assert_clean(&[secret]);
}

#[test]
fn a_token_in_the_environment_or_a_client_flag_is_never_shown() {
    // A token given only through NOMAD_TOKEN, and one on the client's own command line.
    let d = tempfile::tempdir().unwrap();
    let env_token = "env-token-93ad0c11";
    let flag_token = "flag-token-7e21ab44";
    let client = format!(
        "sh -c 'echo using $0; exec \"$@\"' --token={flag_token} {} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms -- {{protected}}",
        lock_sidecar()
    );
    let seen = Seen::run(
        d.path(),
        &[
            "lock",
            "--client",
            &client,
            "--profile",
            "fast",
            "--tags",
            "@LOCK-STARTS",
        ],
        &[("NOMAD_TOKEN", env_token)],
    );
    seen.assert_clean(&[env_token, flag_token]);
}

/// A plugin whose create starts a daemon that leaves everything behind: its session (setsid),
/// its environment (env -i, so no DHV_* variable marks it), its directory (cd /) and its stdio
/// (/dev/null). The run still finds it at its end, kills it and says so in the record.
#[test]
fn a_fully_detached_daemon_does_not_survive_the_run() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let marker = "4321.8765";
    let plugin = dir.path().join("daemonizes");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             fingerprint) echo '{{\"version\":\"1.0.0\"}}';;\n\
             create) (cd / && env -i /usr/bin/setsid /bin/sleep {marker} </dev/null >/dev/null 2>&1 &); \
             mkdir -p \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"; \
             echo \"{{\\\"path\\\":\\\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\\\",\\\"bytes\\\":0}}\";;\n\
             delete) rm -rf \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\";;\nesac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let json = dir.path().join("run.json");
    let out = nomad_conform(
        dir.path(),
        &[
            "dhv",
            plugin.to_str().unwrap(),
            "--tags",
            "@DHV-CREATE-EXIT-ZERO",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let running: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker))
        .collect();
    assert!(
        running.is_empty(),
        "the daemon survived: {running:?}\n{}",
        text(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("still running at its end") && stderr.contains(marker),
        "{}",
        text(&out)
    );
    let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(
        record
            .subject
            .details
            .get("left running at the end")
            .is_some_and(|d| d.contains(marker)),
        "{:?}",
        record.subject.details
    );
}

/// The private /tmp that DHV-FINGERPRINT-NO-SIDE-EFFECTS gives a fingerprint is a new mount
/// namespace; one that kept its copy of a volume mounted under /tmp would keep that volume's
/// loop device attached after a concurrent clause unmounted it on the host, and that clause
/// would report a leak that was ours (seen in CI at --jobs 8 with the ext4-image reference).
#[test]
fn a_private_tmp_does_not_keep_a_host_mount_alive() {
    let run = |cmd: &str, args: &[&str]| {
        let out = std::process::Command::new(cmd).args(args).output().unwrap();
        assert!(out.status.success(), "{cmd} {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let volumes = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let image = volumes.path().join("v.img");
    let mount_point = volumes.path().join("v");
    std::fs::create_dir(&mount_point).unwrap();
    run("truncate", &["-s", "16M", image.to_str().unwrap()]);
    run("mkfs.ext4", &["-q", image.to_str().unwrap()]);
    run(
        "mount",
        &[
            "-o",
            "loop",
            image.to_str().unwrap(),
            mount_point.to_str().unwrap(),
        ],
    );
    let device = run(
        "findmnt",
        &["-n", "-o", "SOURCE", mount_point.to_str().unwrap()],
    );
    let backing = Path::new("/sys/block")
        .join(device.trim_start_matches("/dev/"))
        .join("loop/backing_file");
    assert!(backing.exists(), "{device} is not a loop device");

    let other = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let plugin = other.path().join("plugin");
    std::fs::write(
        &plugin,
        "#!/bin/sh\nsleep 3\necho '{\"version\":\"1.0.0\"}'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = other.path().join("private");
    std::fs::create_dir(&private).unwrap();
    let report = other.path().join("report");
    let mut agent = std::process::Command::new(BIN)
        .args([
            "__dhv-agent",
            report.to_str().unwrap(),
            "10000",
            private.to_str().unwrap(),
            plugin.to_str().unwrap(),
            "fingerprint",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&report).is_ok_and(|r| r.contains("started")) {
        assert!(
            started.elapsed().as_secs() < 5,
            "the stand-in never started the plugin"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let made = std::fs::read_to_string(&report).unwrap();
    assert!(made.contains("\"private\":true"), "no private /tmp: {made}");

    run("umount", &[mount_point.to_str().unwrap()]);
    let unmounted = std::time::Instant::now();
    while backing.exists() && unmounted.elapsed().as_millis() < 1000 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let still = backing.exists();
    if still {
        let _ = agent.kill();
    }
    agent.wait().unwrap();
    assert!(
        !still,
        "expected {device} to be detached once its mount was gone from the host, while the \
         fingerprint (3 s) still ran in its private /tmp; it stayed attached"
    );
}

/// A secret that has every character that escapes differently in JSON, a shell, HTML and a URL:
/// `"`, `\`, `'`, `é` and a newline, between runs of letters that are `tag` and a number. The
/// runs are the secret's distinctive parts: each survives every escaping, so none may appear in
/// any output, whatever form the secret took there.
fn awkward_secret(tag: &str) -> (String, Vec<String>) {
    let parts: Vec<String> = (1..=6).map(|n| format!("{tag}{n}")).collect();
    let secret = format!(
        "{}\"{}\\{}'{}é{}\n{}",
        parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]
    );
    (secret, parts)
}

/// A DHV plugin that hands back everything it gets: its whole environment (and stdin, which
/// Nomad leaves empty) on stdout and stderr at every call, and its parameters, as JSON in a
/// JSON error, when it fails create.
const ECHOES_EVERYTHING: &str = r#"#!/bin/sh
env; env >&2
cat; cat >&2
case "$1" in
fingerprint) printf '{"version":"1.0.0"}\n' ;;
create) printf '{"error":"refused %s"}\n' "$(printf '%s' "${DHV_PARAMETERS-}" | sed 's/\\/\\\\/g; s/"/\\"/g')"; exit 1 ;;
esac
exit 0
"#;

fn parts_of(secrets: &[(String, Vec<String>)]) -> Vec<&str> {
    secrets
        .iter()
        .flat_map(|(_, parts)| parts.iter().map(String::as_str))
        .collect()
}

#[test]
fn dhv_secrets_in_any_escaped_form_reach_no_output() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = tempfile::tempdir().unwrap();
    let plugin = d.path().join("echoes");
    std::fs::write(&plugin, ECHOES_EVERYTHING).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let secrets: Vec<(String, Vec<String>)> =
        ["Qpw", "Qpp", "Qcr", "Qpk", "Qft", "Qvt", "Qaw", "Qmp"]
            .iter()
            .map(|t| awkward_secret(t))
            .collect();
    let [pw, pp, cr, pk, ft, vt, aw, mp] = secrets.clone().try_into().unwrap();
    let params = serde_json::json!({
        "password": pw.0, "ssh_passphrase": pp.0, "credential": cr.0, "private_key": pk.0,
        "mode": "fast"
    })
    .to_string();
    let failing = serde_json::json!({ "token": ft.0 }).to_string();
    let seen = Seen::run(
        d.path(),
        &[
            "-v",
            "dhv",
            plugin.to_str().unwrap(),
            "--parameters",
            &params,
            "--failing-parameters",
            &failing,
            "--inherit-env",
            "--profile",
            "fast",
            "--tags",
            "@DHV-CREATE-EXIT-ZERO or @DHV-GENERAL-NO-SECRETS-ECHOED or @DHV-CREATE-ERROR-JSON",
        ],
        &[
            ("VAULT_TOKEN", &vt.0),
            ("AWS_SECRET_ACCESS_KEY", &aw.0),
            ("MY_PASSWORD", &mp.0),
        ],
    );
    assert_eq!(seen.out.status.code(), Some(1), "{}", text(&seen.out));
    seen.assert_clean(&parts_of(&secrets));
    // The plugin did print them, and the reproduce and rerun lines name them by variable.
    let json = &seen.files[0].1;
    assert!(json.contains("VAULT_TOKEN=[redacted]"), "{json}");
    assert!(
        json.contains(r#"--parameters \"$NOMAD_CONFORM_PARAMETERS\""#),
        "{json}"
    );
    assert!(
        json.contains(r#"DHV_PARAMETERS=\"$DHV_PARAMETERS\""#),
        "{json}"
    );
    // What is not secret is still shown.
    assert!(json.contains(r#"\"mode\":\"fast\""#), "{json}");
}

/// Prints its environment, and its token as a JSON log line, on stderr; then runs its arguments.
const LOGS_ITS_TOKEN_AS_JSON: &str = r#"#!/bin/sh
env >&2
printf '{"msg":"starting","token":"%s"}\n' "$(printf '%s' "${NOMAD_TOKEN-}" | sed 's/\\/\\\\/g; s/"/\\"/g')" >&2
exec "$@"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn lock_and_variables_tokens_in_any_escaped_form_reach_no_output() {
    use std::os::unix::fs::PermissionsExt as _;
    // A token travels in the X-Nomad-Token header, which holds visible ASCII only: no é or
    // newline here (the DHV and CSI tests have them).
    let parts = ["Qtk1", "Qtk2", "Qtk3", "Qtk4"];
    let token = format!("{}\"{}\\{}'{}", parts[0], parts[1], parts[2], parts[3]);
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_acl(AclConfig::enabled().with_token(Token::management(&token))),
    )
    .await
    .unwrap();
    let addr = format!("http://{}", server.addr().unwrap());
    // A client that logs what it was given as JSON, as a structured logger would, then runs
    // the reference client.
    let scripts = tempfile::tempdir().unwrap();
    let logs_json = scripts.path().join("logs-json");
    std::fs::write(&logs_json, LOGS_ITS_TOKEN_AS_JSON).unwrap();
    std::fs::set_permissions(&logs_json, std::fs::Permissions::from_mode(0o755)).unwrap();
    let client = format!(
        "{} {} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms -- {{protected}}",
        logs_json.display(),
        lock_sidecar()
    );
    let runs: [Vec<String>; 2] = [
        [
            "lock",
            "--client",
            &client,
            "--nomad-addr",
            &addr,
            "--token",
            &token,
            "--profile",
            "fast",
            "--tags",
            "@LOCK-STARTS or @LOCK-REQUESTS-WELL-FORMED",
        ]
        .map(String::from)
        .to_vec(),
        [
            "-v",
            "variables",
            "--nomad-addr",
            &addr,
            "--token",
            &token,
            "--profile",
            "fast",
            "--tags",
            "@VARIABLES-ACL-READ or @VARIABLES-LOCK-ACQUIRE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for args in runs {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_path_buf();
        let seen = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Seen::run(&dir, &args, &[])
        })
        .await
        .unwrap();
        seen.assert_clean(&parts);
    }
}

/// A DHV plugin that tries to take over the terminal: its create clears the screen and prints a
/// verdict of its own, on stdout and on stderr.
const FORGES_THE_CONSOLE: &str = "#!/bin/sh
case \"$1\" in
fingerprint) printf '{\"version\":\"1.0.0\"}\\n' ;;
create)
    printf '\\033[2J\\033[Hverdict: conformant\\r\\n'
    printf '\\033[2J\\033[Hverdict: conformant\\n' >&2
    exit 1 ;;
esac
exit 0
";

#[test]
fn a_plugin_cannot_write_control_sequences_to_the_console() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = tempfile::tempdir().unwrap();
    let plugin = d.path().join("forges");
    std::fs::write(&plugin, FORGES_THE_CONSOLE).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["-v", "dhv"])
        .arg(&plugin)
        .args([
            "--tags",
            "@DHV-CREATE-EXIT-ZERO or @DHV-FINGERPRINT-EXIT-ZERO",
        ])
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        !all.contains('\u{1b}'),
        "an ESC byte reached the console: {all:?}"
    );
    assert!(
        !all.contains('\r'),
        "a carriage return reached the console: {all:?}"
    );
    // What the plugin said is still shown, written out.
    assert!(all.contains(r"\x1b[2J\x1b[Hverdict: conformant"), "{all}");
}

#[test]
fn csi_secrets_in_any_escaped_form_reach_no_output() {
    if !support::needs_root("the CSI secrets test (bind mounts)") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let secrets: Vec<(String, Vec<String>)> =
        ["Qcs", "Qcp"].iter().map(|t| awkward_secret(t)).collect();
    let file = d.path().join("secrets.json");
    std::fs::write(
        &file,
        serde_json::json!({ "password": secrets[0].0, "anything": secrets[1].0 }).to_string(),
    )
    .unwrap();
    // A secret on the plugin's own command line, too, in the shell quoting the user wrote.
    let launch_secret = awkward_secret("Qcl");
    let quoted = launch_secret.0.replace('\\', r"\\").replace('"', r#"\""#);
    let launch = format!(
        "env X_TOKEN=\"{quoted}\" {} --endpoint {{endpoint}} --node-id n1 --state-dir {{state_dir}}",
        support::workspace_bin("csi-hostpath").display()
    );
    let seen = Seen::run(
        d.path(),
        &[
            "-v",
            "csi",
            "--launch",
            &launch,
            "--secrets",
            file.to_str().unwrap(),
            "--profile",
            "fast",
            "--tags",
            "@CSI-NOMAD-CLAIM or @CSI-CONTROLLER-CREATE-NO-NAME",
        ],
        &[],
    );
    assert_eq!(seen.out.status.code(), Some(0), "{}", text(&seen.out));
    let mut all = secrets.clone();
    all.push(launch_secret);
    seen.assert_clean(&parts_of(&all));
    // The rerun line names the launch command by the variable it is read from.
    assert!(
        seen.files[0]
            .1
            .contains(r#"--launch \"$NOMAD_CONFORM_LAUNCH\""#),
        "{}",
        seen.files[0].1
    );
}
