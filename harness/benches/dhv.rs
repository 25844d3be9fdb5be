//! Performance targets of the DHV suite, printed as ratios (at most 1 means within target):
//!
//! 1. the whole suite against the reference `mkdir` plugin completes in under 3 s;
//! 2. the harness's overhead per plugin call is at most 2 ms above a bare fork/exec of the same
//!    plugin;
//! 3. memory (issue 15): a plugin printing 50 MB within `--capture-limit 64MiB`, with the JSON,
//!    HTML and JUnit reports written, peaks under 200 MB of RSS, and a normal run (the suite
//!    against reference `mkdir`, `--profile fast`, the three reports) under 64 MB. The 50 MB case
//!    is measured three times: output the reports quote as an excerpt (stdout that is not JSON),
//!    output a failure quotes whole (stdout that is one JSON string), whose failure text the
//!    steps build in several copies, both on one clause; and a plugin whose every create prints
//!    50 MB on stdout and 50 MB on stderr at once, on eight create clauses run together at the
//!    default `--jobs` (8); what a call keeps past 256 KiB is in an unnamed temporary file, not
//!    in memory. Peak RSS is wait4(2)'s, shared with the other benches
//!    (`common/mod.rs`).
//!
//! Run with `bench/dhv.sh` (or `cargo bench -p nomad-conform --bench dhv`). Not a test: timings
//! depend on the machine, so nothing here asserts.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nomad_conform::process::{ExecSpec, run};

mod common;
use common::{NORMAL_RSS_TARGET, print_rss};

const SUITE_TARGET: Duration = Duration::from_secs(3);
const CALL_OVERHEAD_TARGET: Duration = Duration::from_millis(2);
/// Peak RSS targets, in bytes (MB as the issue counts them).
const FLOOD_RSS_TARGET: f64 = 200e6;
/// What the flooding plugin prints.
const FLOOD_BYTES: u64 = 50 << 20;
/// The clauses the two-stream flood runs at once (each calls create at least once, PARALLEL
/// several times at once; the default `--jobs` of 8 runs them all together).
const FLOOD_CLAUSES: [&str; 8] = [
    "DHV-CREATE-SINGLE-JSON",
    "DHV-CREATE-PATH",
    "DHV-CREATE-BYTES",
    "DHV-CREATE-EXIT-ZERO",
    "DHV-CREATE-CAPACITY",
    "DHV-CREATE-IDEMPOTENT",
    "DHV-CREATE-PARALLEL",
    "DHV-CREATE-UPDATE",
];

fn mkdir_plugin() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../reference-plugins/dhv/mkdir")
        .canonicalize()
        .expect("reference plugin")
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn suite_wall(runs: usize) -> Duration {
    let plugin = mkdir_plugin();
    let times = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
                .arg("dhv")
                .arg(&plugin)
                .output()
                .expect("run the suite");
            assert_eq!(out.status.code(), Some(0), "the reference plugin must pass");
            t.elapsed()
        })
        .collect();
    median(times)
}

fn per_call(calls: usize) -> (Duration, Duration) {
    let plugin = mkdir_plugin();
    let env = vec![("DHV_OPERATION".to_string(), "fingerprint".to_string())];
    let bare: Vec<Duration> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            let out = Command::new(&plugin)
                .arg("fingerprint")
                .env_clear()
                .envs(env.iter().cloned())
                .output()
                .expect("bare exec");
            assert!(out.status.success());
            t.elapsed()
        })
        .collect();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let spec = ExecSpec {
        program: plugin.clone(),
        args: vec!["fingerprint".into()],
        env: env.clone(),
        inherit_env: false,
        cwd: None,
        deadline: Duration::from_secs(5),
        capture_limit: 1 << 20,
        linger_grace: Duration::from_millis(250),
        settle: Duration::from_millis(250),
        file_size_limit: None,
        // As every plugin call of a run: the free space of its filesystems is watched.
        disk_watch: nomad_conform::disk_guard::DiskWatch::new(&[std::env::temp_dir()]),
        alone: false,
    };
    let harness: Vec<Duration> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            let out = rt.block_on(run(&spec));
            assert!(out.succeeded());
            t.elapsed()
        })
        .collect();
    (median(bare), median(harness))
}

/// Run the harness with `args` in `dir` and return its peak RSS in bytes (through wait4(2): the
/// bench's other children do not count; see [`common::run`]).
fn peak_rss(dir: &Path, args: &[&str]) -> f64 {
    common::run(
        Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
            .args(args)
            .current_dir(dir),
    )
    .peak_rss
}

/// Peak RSS of a run of the clauses `tags` selects (at the default `--jobs`) against a plugin whose
/// create runs `create` (which prints 50 MB), with `--capture-limit 64MiB` and the three reports.
fn flood_rss(tags: &str, create: &str) -> f64 {
    let dir = tempfile::tempdir().expect("temporary directory");
    let plugin = dir.path().join("flood");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n\
             fingerprint) echo '{{\"version\":\"1.0.0\"}}';;\n\
             create) {create};;\n*) exit 0;;\nesac\n"
        ),
    )
    .expect("write the plugin");
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755))
        .expect("make the plugin executable");
    peak_rss(
        dir.path(),
        &[
            "dhv",
            "./flood",
            "--tags",
            tags,
            "--capture-limit",
            "64MiB",
            "--json",
            "run.json",
            "--html",
            "run.html",
            "--junit",
            "run.xml",
        ],
    )
}

/// Peak RSS of the suite against reference `mkdir` with `--profile fast` and the three reports.
fn normal_rss() -> f64 {
    let dir = tempfile::tempdir().expect("temporary directory");
    let plugin = mkdir_plugin();
    peak_rss(
        dir.path(),
        &[
            "dhv",
            plugin.to_str().expect("a UTF-8 path"),
            "--profile",
            "fast",
            "--json",
            "run.json",
            "--html",
            "run.html",
            "--junit",
            "run.xml",
        ],
    )
}

fn main() {
    // `cargo bench` passes --bench; this benchmark takes no options.
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (bare, harness) = per_call(300);
    let overhead = harness.saturating_sub(bare);
    println!(
        "per call: bare fork/exec {:.2} ms, through the harness {:.2} ms: overhead {:.2} ms; target {:.0} ms -> ratio {:.2}",
        ms(bare),
        ms(harness),
        ms(overhead),
        ms(CALL_OVERHEAD_TARGET),
        overhead.as_secs_f64() / CALL_OVERHEAD_TARGET.as_secs_f64()
    );
    let runs = 5;
    let wall = suite_wall(runs);
    println!(
        "suite against reference mkdir: median {:.2} s over {runs} runs; target {:.0} s -> ratio {:.2}",
        wall.as_secs_f64(),
        SUITE_TARGET.as_secs_f64(),
        wall.as_secs_f64() / SUITE_TARGET.as_secs_f64()
    );
    print_rss(
        "reference mkdir, --profile fast, three reports",
        normal_rss(),
        NORMAL_RSS_TARGET,
    );
    let one = "@DHV-CREATE-SINGLE-JSON";
    print_rss(
        "50 MB of stdout, --capture-limit 64MiB, three reports",
        flood_rss(
            one,
            &format!("head -c {FLOOD_BYTES} /dev/zero | tr '\\0' a"),
        ),
        FLOOD_RSS_TARGET,
    );
    print_rss(
        "50 MB of stdout quoted whole in the failure (one JSON string)",
        flood_rss(
            one,
            &format!("printf '\"'; head -c {FLOOD_BYTES} /dev/zero | tr '\\0' a; printf '\"'"),
        ),
        FLOOD_RSS_TARGET,
    );
    print_rss(
        &format!(
            "50 MB of stdout and 50 MB of stderr from every create, {} clauses at the default --jobs, --capture-limit 64MiB, three reports",
            FLOOD_CLAUSES.len()
        ),
        flood_rss(
            &FLOOD_CLAUSES.map(|c| format!("@{c}")).join(" or "),
            &format!(
                "head -c {FLOOD_BYTES} /dev/zero | tr '\\0' e >&2 & head -c {FLOOD_BYTES} /dev/zero | tr '\\0' a; wait"
            ),
        ),
        FLOOD_RSS_TARGET,
    );
}
