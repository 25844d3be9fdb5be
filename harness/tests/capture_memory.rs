//! A plugin that prints 1 GiB must not grow the harness's memory beyond the capture limit.
//! Alone in its own test binary, so that the peak RSS of this process's children is the
//! harness's.

use std::os::unix::fs::PermissionsExt as _;

#[test]
fn one_gib_of_output_keeps_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("flood");
    std::fs::write(
        &plugin,
        "#!/bin/sh\ncase \"$1\" in\n\
         fingerprint) echo '{\"version\":\"1.0.0\"}';;\n\
         create) head -c 1073741824 /dev/zero;;\n\
         *) exit 0;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .arg("dhv")
        .arg(&plugin)
        .args([
            "--tags",
            "@DHV-CREATE-SINGLE-JSON",
            "--capture-limit",
            "1MiB",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("stdout is 1073741824 bytes, more than the capture limit"),
        "{stdout}"
    );
    let usage =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    let peak_mib = usage.max_rss() / 1024;
    assert!(
        peak_mib < 128,
        "peak RSS of the harness was {peak_mib} MiB while the plugin printed 1 GiB"
    );
}
