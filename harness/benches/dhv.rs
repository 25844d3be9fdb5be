//! Performance targets of the DHV suite, printed as ratios (at most 1 means within target):
//!
//! 1. the whole suite against the reference `mkdir` plugin completes in under 3 s;
//! 2. the harness's overhead per plugin call is at most 2 ms above a bare fork/exec of the same
//!    plugin.
//!
//! Run with `bench/dhv.sh` (or `cargo bench -p nomad-conform --bench dhv`). Not a test: timings
//! depend on the machine, so nothing here asserts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nomad_conform::process::{ExecSpec, run};

const SUITE_TARGET: Duration = Duration::from_secs(3);
const CALL_OVERHEAD_TARGET: Duration = Duration::from_millis(2);

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
}
