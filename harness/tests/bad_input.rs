//! Bad input is answered up front, in one line, with exit 2 (the user's input) or 3 (nothing
//! could be tested): a CSI endpoint that is missing, not a socket, refused, or not gRPC; a
//! driver configuration that is not HCL or does not fit the plugin; a lock client that does not
//! exist; counts that are zero or negative; parameters that are not JSON. And proptest's own
//! lines never reach the console.

mod support;

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Output};

use support::{root, workspace_bin};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

/// Exit `code`, and stderr's first line says `what` (stdout holds no run).
fn refused(out: &Output, code: i32, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains(what), "expected {what:?} in:\n{stderr}");
    assert!(
        !stdout.contains("verdict"),
        "nothing should have run:\n{stdout}"
    );
}

fn endpoint(p: &Path) -> String {
    format!("unix://{}", p.display())
}

/// A listener on `path` that answers every connection with `answer` (or nothing).
fn listener(path: &Path, answer: Option<&'static [u8]>) {
    let l = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                let _ = c.read(&mut buf);
                match answer {
                    Some(a) => {
                        let _ = c.write_all(a);
                    }
                    None => std::thread::sleep(std::time::Duration::from_secs(30)),
                }
            });
        }
    });
}

#[test]
fn a_csi_endpoint_that_is_not_grpc_is_said_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.sock");
    refused(
        &run(&["csi", "--endpoint", &endpoint(&missing)]),
        2,
        "no such socket",
    );
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    refused(
        &run(&["csi", "--endpoint", &endpoint(&file)]),
        2,
        "not a socket",
    );
    let stale = dir.path().join("stale.sock");
    drop(UnixListener::bind(&stale).unwrap());
    refused(
        &run(&["csi", "--endpoint", &endpoint(&stale)]),
        3,
        "connection refused",
    );
    let http = dir.path().join("http.sock");
    listener(
        &http,
        Some(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"),
    );
    refused(
        &run(&["csi", "--endpoint", &endpoint(&http)]),
        3,
        "does not speak gRPC: it answers HTTP/1",
    );
    let garbage = dir.path().join("garbage.sock");
    listener(&garbage, Some(b"hello there, this is no protocol\n"));
    refused(
        &run(&["csi", "--endpoint", &endpoint(&garbage)]),
        3,
        "does not speak gRPC",
    );
    let silent = dir.path().join("silent.sock");
    listener(&silent, None);
    refused(
        &run(&["csi", "--endpoint", &endpoint(&silent)]),
        3,
        "answered nothing to HTTP/2 within 5.00s",
    );
}

#[test]
fn a_driver_configuration_that_is_wrong_is_said_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = workspace_bin("driver-exec");
    let bad_hcl = dir.path().join("bad.hcl");
    std::fs::write(&bad_hcl, "volumes { enabled = \n").unwrap();
    refused(
        &run(&[
            "driver",
            plugin.to_str().unwrap(),
            "--plugin-config",
            bad_hcl.to_str().unwrap(),
        ]),
        2,
        "is not HCL",
    );
    let bad_json = dir.path().join("bad.json");
    std::fs::write(&bad_json, "{\"a\": ").unwrap();
    refused(
        &run(&[
            "driver",
            plugin.to_str().unwrap(),
            "--plugin-config",
            bad_json.to_str().unwrap(),
        ]),
        2,
        "is not JSON",
    );
    // Valid HCL, but an attribute driver-exec's ConfigSchema does not have.
    let unfit = dir.path().join("unfit.hcl");
    std::fs::write(&unfit, "no_such_attribute = true\n").unwrap();
    refused(
        &run(&[
            "driver",
            plugin.to_str().unwrap(),
            "--plugin-config",
            unfit.to_str().unwrap(),
            "--task-command",
            "command = {command}\nargs = {args}",
        ]),
        2,
        "--plugin-config",
    );
    // A task shape that drops the placeholder the harness checks the task against.
    let tasks = dir.path().join("tasks.hcl");
    std::fs::write(
        &tasks,
        "shape \"exit\" {\n  config {\n    command = \"/bin/sh\"\n    args = [\"-c\", \"exit 3\"]\n  }\n}\n",
    )
    .unwrap();
    refused(
        &run(&[
            "driver",
            plugin.to_str().unwrap(),
            "--tasks",
            tasks.to_str().unwrap(),
        ]),
        2,
        "never uses {code}",
    );
}

#[test]
fn a_lock_client_that_does_not_exist_is_said_before_the_run() {
    refused(
        &run(&["lock", "--client", "/no/such/lock-client -- {protected}"]),
        2,
        "does not exist",
    );
    refused(
        &run(&[
            "lock",
            "--client",
            "no-such-lock-client-anywhere {protected}",
        ]),
        2,
        "not found on PATH",
    );
}

#[test]
fn counts_are_checked_as_numbers() {
    let plugin = root().join("reference-plugins/dhv/mkdir");
    let plugin = plugin.to_str().unwrap();
    for (flag, value) in [
        ("--jobs", "0"),
        ("--jobs", "-1"),
        ("--property-cases", "-3"),
    ] {
        let out = run(&["dhv", plugin, flag, value]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(
            stderr.contains("is not a whole number of at least 1"),
            "{flag} {value}: {stderr}"
        );
        assert!(!stderr.contains("unexpected argument"), "{stderr}");
    }
    let out = run(&["dhv", plugin, "--seed", "-5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not a whole number from 0"), "{stderr}");
}

#[test]
fn mutable_parameters_that_are_not_json_say_so() {
    refused(
        &run(&[
            "csi",
            "--endpoint",
            "unix:///nonexistent/csi.sock",
            "--mutable-parameters",
            "{tier: fast",
        ]),
        2,
        "--mutable-parameters \"{tier: fast\" is not JSON",
    );
    refused(
        &run(&[
            "csi",
            "--endpoint",
            "unix:///nonexistent/csi.sock",
            "--mutable-parameters",
            "[1, 2]",
        ]),
        2,
        "expected a JSON object of strings",
    );
}

/// A plugin whose every generated volume fails the property (its delete leaves the path) and
/// whose every call takes a while: shrinking runs out of its budget, and proptest, left to
/// itself, would print that to stderr.
#[test]
fn shrinking_out_of_budget_prints_nothing_of_proptest() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("keeps-path");
    std::fs::write(
        &plugin,
        "#!/bin/sh\ncase \"$1\" in\n\
         fingerprint) echo '{\"version\":\"1.0.0\"}';;\n\
         create) sleep 0.4; mkdir -p \"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\"; \
         echo \"{\\\"path\\\":\\\"$DHV_VOLUMES_DIR/$DHV_VOLUME_ID\\\",\\\"bytes\\\":0}\";;\n\
         delete) exit 0;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(&[
        "dhv",
        plugin.to_str().unwrap(),
        "--tags",
        "@DHV-GENERAL-GENERATED-INPUTS",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("DHV-GENERAL-GENERATED-INPUTS"), "{stdout}");
    assert!(!stderr.contains("proptest"), "{stderr}");
    assert!(!stdout.contains("proptest:"), "{stdout}");
}

/// Exit `code` with exactly one line on stderr that says `what`, and no run on stdout.
fn refused_in_one_line(out: &Output, code: i32, what: &str) {
    refused(out, code, what);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A path whose name is not UTF-8 (the byte 0xFF) in `dir`.
fn not_utf8(dir: &Path, stem: &str, ext: &str) -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt as _;
    let mut name = stem.as_bytes().to_vec();
    name.push(0xff);
    name.extend_from_slice(ext.as_bytes());
    dir.join(std::ffi::OsStr::from_bytes(&name))
}

/// Arguments are read as the OS gives them: a report or profile path that is not UTF-8 simply
/// works, and a path that would have to become text on its way to the plugin (the DHV plugin's
/// own, DHV_VOLUMES_DIR) is refused in one line. None of it panics (before, `std::env::args`
/// did, with exit 101 and a backtrace).
#[test]
fn paths_that_are_not_utf8_work_or_are_refused_in_one_line() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let reference = root().join("reference-plugins/dhv/mkdir");
    let profile = not_utf8(dir.path(), "profile", ".toml");
    std::fs::write(&profile, "name = \"mine\"\n").unwrap();
    let reports = [
        ("--json", not_utf8(dir.path(), "run", ".json")),
        ("--junit", not_utf8(dir.path(), "run", ".xml")),
        ("--html", not_utf8(dir.path(), "run", ".html")),
    ];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nomad-conform"));
    cmd.arg("dhv")
        .arg(&reference)
        .args(["--tags", "@DHV-FINGERPRINT-EXIT-ZERO", "--profile"])
        .arg(&profile);
    for (flag, path) in &reports {
        cmd.arg(flag).arg(path);
    }
    let out = cmd.current_dir(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for (flag, path) in &reports {
        assert!(path.is_file(), "{flag} was not written: {stderr}");
    }
    let json = std::fs::read_to_string(&reports[0].1).unwrap();
    assert!(json.contains("\"mine\""), "the profile was not read");

    let plugin = not_utf8(dir.path(), "plugin", "");
    std::fs::copy(&reference, &plugin).unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .arg("dhv")
        .arg(&plugin)
        .output()
        .unwrap();
    refused_in_one_line(&out, 2, "is not UTF-8: Nomad names a host volume plugin");
    let volumes = not_utf8(dir.path(), "volumes", "");
    std::fs::create_dir(&volumes).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .arg("dhv")
        .arg(&reference)
        .arg("--volumes-dir")
        .arg(&volumes)
        .output()
        .unwrap();
    refused_in_one_line(&out, 2, "--volumes-dir");
    refused(&out, 2, "is not UTF-8");
}

/// A tag expression nested thousands deep overflowed the parser's stack (exit 134); it is
/// refused in one line, and one as deep as allowed still runs.
#[test]
fn a_tag_expression_nested_too_deep_is_refused() {
    let plugin = root().join("reference-plugins/dhv/mkdir");
    let plugin = plugin.to_str().unwrap();
    let parens = format!("{}@must{}", "(".repeat(16_000), ")".repeat(16_000));
    let nots = format!("{}@must", "not ".repeat(16_000));
    for expr in [parens, nots] {
        refused_in_one_line(
            &run(&["dhv", plugin, "--tags", &expr]),
            2,
            "nests 16000 levels of parentheses and `not`, more than the 64 allowed",
        );
    }
    let deepest = format!(
        "{}@DHV-FINGERPRINT-EXIT-ZERO{}",
        "(".repeat(64),
        ")".repeat(64)
    );
    let out = run(&["dhv", plugin, "--tags", &deepest]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A volume size of 0 gave the reference plugin two false MUST failures (an empty capacity
/// range), and one of a byte a third (the block clauses write 4 KiB through the device).
#[test]
fn a_test_volume_size_below_one_block_is_refused() {
    let launch = format!(
        "{} --endpoint {{endpoint}} --node-id n1 --state-dir {{state_dir}}",
        workspace_bin("csi-hostpath").display()
    );
    for size in ["0", "1", "4095B"] {
        refused_in_one_line(
            &run(&["csi", "--launch", &launch, "--test-volume-size", size]),
            2,
            "must hold at least 4096 bytes",
        );
    }
}

/// A command line no shell could split (an unbalanced quote) is refused in one line, for a
/// lock client as for --launch and --plugin-args (before, the lock suite ran it and every
/// clause failed with a shell syntax error).
#[test]
fn a_command_line_with_an_unbalanced_quote_is_refused() {
    refused_in_one_line(
        &run(&["lock", "--client", "sh -c 'echo {protected}"]),
        2,
        "--client \"sh -c 'echo {protected}\": not a shell-quoted command line (an unbalanced quote",
    );
    refused_in_one_line(
        &run(&["lock", "--sidecar", "lock-sidecar --path \"{path}"]),
        2,
        "--sidecar",
    );
    refused_in_one_line(
        &run(&["csi", "--launch", "csi-plugin --endpoint '{endpoint}"]),
        2,
        "--launch \"csi-plugin --endpoint '{endpoint}\": not a shell-quoted command line",
    );
    refused_in_one_line(
        &run(&[
            "driver",
            workspace_bin("driver-exec").to_str().unwrap(),
            "--plugin-args",
            "-v '",
        ]),
        2,
        "--plugin-args \"-v '\": not a shell-quoted command line",
    );
}

/// `lock --token` without --nomad-addr was silently ignored: it is refused as every other API
/// flag (and as `variables --token`) is.
#[test]
fn a_lock_token_without_nomad_addr_is_refused() {
    let client = format!(
        "{} --path {{path}} -- {{protected}}",
        workspace_bin("lock-sidecar").display()
    );
    for suite in [
        vec!["lock", "--client", &client, "--token", "s3cret-77"],
        vec!["variables", "--token", "s3cret-77"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
            .args(&suite)
            .env_remove("NOMAD_CONFORM_NOMAD_ADDR")
            .env("NOMAD_ADDR", "http://127.0.0.1:1")
            .output()
            .unwrap();
        refused_in_one_line(&out, 2, "--token goes with --nomad-addr");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("s3cret-77"));
    }
}

/// A driver plugin without the execute bit, or built for another machine, was run (and every
/// clause failed or was blocked): both are refused in one line.
#[test]
fn a_driver_that_cannot_run_here_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("driver-noexec");
    std::fs::copy(workspace_bin("driver-exec"), &plain).unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    refused_in_one_line(
        &run(&["driver", plain.to_str().unwrap()]),
        2,
        "is not executable (chmod +x)",
    );
    // The same binary with another machine in its ELF header (e_machine, at byte 18).
    let (machine, name): (u16, &str) = if cfg!(target_arch = "x86_64") {
        (183, "aarch64")
    } else {
        (62, "x86_64")
    };
    let foreign = dir.path().join("driver-foreign");
    let mut bytes = std::fs::read(workspace_bin("driver-exec")).unwrap();
    bytes[18..20].copy_from_slice(&machine.to_le_bytes());
    std::fs::write(&foreign, bytes).unwrap();
    std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o755)).unwrap();
    let runs_through_binfmt = std::fs::read_dir("/proc/sys/fs/binfmt_misc")
        .map(|d| d.count() > 2)
        .unwrap_or(false);
    if !runs_through_binfmt {
        refused_in_one_line(
            &run(&["driver", foreign.to_str().unwrap()]),
            2,
            &format!("is a binary for {name}"),
        );
    }
}

/// A deadline of 0 in a profile (a --profile file, or the profile the settings name) and a
/// capture limit of 0 or above 1 GiB (1 EiB removed the bound) are refused in one line.
#[test]
fn zero_deadlines_and_unbounded_capture_limits_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = root().join("reference-plugins/dhv/mkdir");
    let plugin = plugin.to_str().unwrap();
    let profile = dir.path().join("p.toml");
    std::fs::write(&profile, "[dhv]\ncreate_deadline = \"0s\"\n").unwrap();
    refused_in_one_line(
        &run(&["dhv", plugin, "--profile", profile.to_str().unwrap()]),
        2,
        "[dhv] create_deadline is 0s: a deadline must be longer than zero",
    );
    let lock_profile = dir.path().join("lock.toml");
    std::fs::write(&lock_profile, "[lock]\nstart_within = \"0ms\"\n").unwrap();
    std::fs::write(
        dir.path().join("nomad-conform.toml"),
        format!("[dhv]\nprofile = {:?}\n", lock_profile.to_str().unwrap()),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(["dhv", plugin])
        .current_dir(dir.path())
        .env_remove("NOMAD_CONFORM_PROFILE")
        .output()
        .unwrap();
    refused_in_one_line(&out, 2, "[lock] start_within is 0s");
    for limit in ["0", "1EiB", "2GiB"] {
        refused_in_one_line(
            &run(&["dhv", plugin, "--capture-limit", limit]),
            2,
            "it must be from 1KiB (1024) to 1GiB",
        );
    }
}
