//! A plugin's output costs the harness the capture limit at most, and what it captures is held
//! once: a plugin that prints 1 GiB must not grow the harness's memory beyond the capture limit,
//! and one whose 50 MiB fit the limit must not cost more than those 50 MiB on top of what a
//! normal run takes, whatever reports are written. In a test binary of their own, so that the
//! peak RSS of this process's children is the harness's; the tests run their harness one at a
//! time (see [`run_measured`]).

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Output};
use std::sync::Mutex;

/// The peak RSS of this process's children so far, in MiB.
fn children_peak_mib() -> i64 {
    let usage =
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN).unwrap();
    usage.max_rss() / 1024
}

/// What RUSAGE_CHILDREN tells of one harness's peak RSS, in MiB.
enum Peak {
    /// The harness was the largest child so far: this was its peak.
    Exactly(i64),
    /// An earlier child was larger (its test judged that one): this one's was at most this.
    AtMost(i64),
}

impl Peak {
    /// Fails with `what` when the harness's peak was not under `bound` MiB.
    #[track_caller]
    fn assert_under(&self, bound: i64, what: &str) {
        match *self {
            Peak::Exactly(peak) => assert!(
                peak < bound,
                "peak RSS of the harness was {peak} MiB {what} (it must stay under {bound} MiB)"
            ),
            Peak::AtMost(peak) if peak >= bound => eprintln!(
                "an earlier harness of this binary peaked at {peak} MiB, above this one: \
                 its test judges it"
            ),
            Peak::AtMost(_) => {}
        }
    }
}

/// Runs `command` (a harness) while no other test of this binary runs one, and returns its
/// output and what RUSAGE_CHILDREN says of its peak: the largest child's peak so far, so a
/// harness is measured exactly unless an earlier one was larger.
fn run_measured(command: &mut Command) -> (Output, Peak) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let before = children_peak_mib();
    let out = command.output().unwrap();
    let after = children_peak_mib();
    let peak = if after > before {
        Peak::Exactly(after)
    } else {
        Peak::AtMost(after)
    };
    (out, peak)
}

/// A DHV plugin whose create prints `create`'s output.
fn plugin(dir: &std::path::Path, create: &str) -> std::path::PathBuf {
    let plugin = dir.join("flood");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             fingerprint) echo '{{\"version\":\"1.0.0\"}}';;\n\
             create) {create};;\n\
             *) exit 0;;\nesac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    plugin
}

/// 50 MiB of stdout, all of it within `--capture-limit 64MiB`, and all three reports written:
/// the output is held once, in its capture (no copy to decode it, none for the reports, which
/// quote an excerpt of it and are streamed to their files). The peak stays under the output
/// plus 64 MiB, what a normal run may take (and so well under the 200 MB the issue allows).
/// Holding the output twice, as the harness did, passes that by some 50 MiB.
#[test]
fn fifty_mib_of_captured_output_are_held_once() {
    const OUTPUT_MIB: i64 = 50;
    const NORMAL_RUN_MIB: i64 = 64;
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(
        dir.path(),
        &format!("head -c {} /dev/zero | tr '\\0' a", OUTPUT_MIB << 20),
    );
    let (json, html, junit) = (
        dir.path().join("run.json"),
        dir.path().join("run.html"),
        dir.path().join("run.xml"),
    );
    let (out, peak) = run_measured(
        Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
            .arg("dhv")
            .arg(&plugin)
            .args([
                "--tags",
                "@DHV-CREATE-SINGLE-JSON",
                "--capture-limit",
                "64MiB",
            ])
            .arg("--json")
            .arg(&json)
            .arg("--html")
            .arg(&html)
            .arg("--junit")
            .arg(&junit),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Not JSON: the clause fails, on the whole of stdout, which the harness could read.
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("stdout is not exactly one JSON value"),
        "{stdout}"
    );
    let record = std::fs::read_to_string(&json).unwrap();
    assert!(
        record.contains(&format!("\"total_bytes\": {}", OUTPUT_MIB << 20)),
        "the record does not count the output"
    );
    assert!(std::fs::metadata(&html).unwrap().len() > 0);
    assert!(std::fs::metadata(&junit).unwrap().len() > 0);
    // The output once plus a normal run.
    peak.assert_under(
        OUTPUT_MIB + NORMAL_RUN_MIB,
        &format!("with {OUTPUT_MIB} MiB of output captured and three reports written"),
    );
}

#[test]
fn one_gib_of_output_keeps_memory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = plugin(dir.path(), "head -c 1073741824 /dev/zero");
    let (out, peak) = run_measured(
        Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
            .arg("dhv")
            .arg(&plugin)
            .args([
                "--tags",
                "@DHV-CREATE-SINGLE-JSON",
                "--capture-limit",
                "1MiB",
            ]),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("stdout is 1073741824 bytes, more than the capture limit"),
        "{stdout}"
    );
    peak.assert_under(128, "while the plugin printed 1 GiB");
}
