//! The lock client suite against the reference client lock-sidecar (release builds), and how
//! precisely the harness times a protected process. Run with `bench/lock.sh`. Nothing here
//! asserts: timings depend on the machine.
//!
//! 1. The whole lock suite on the fast profile (shim pattern), median of 3 runs, against a 30 s
//!    target.
//! 2. Probe-interval resolution: probes that end at a moment the bench knows (SIGKILL sent by
//!    the bench, `waitpid` returning) against the end the listener recorded (the probe's
//!    connection closing); the 95th percentile of the error against a 10 ms target. The
//!    singleton checker judges overlaps from these intervals, so this is its resolution.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nomad_conform::plugins::lock::{ProbeCommand, ProbeListener};

const TARGET_SUITE: Duration = Duration::from_secs(30);
const TARGET_RESOLUTION_MS: f64 = 10.0;
const PROBES: usize = 40;

fn lock_sidecar() -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("lock-sidecar");
    assert!(
        bin.is_file(),
        "build it first: cargo build --release -p lock-sidecar"
    );
    bin
}

fn suite(json: &Path) -> Duration {
    let client = format!(
        "{} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms -- {{protected}}",
        lock_sidecar().display()
    );
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(["lock", "--client", &client, "--give-up", "2s"])
        .args([
            "--stop-on-client-after",
            "1s",
            "--profile",
            "fast",
            "--json",
        ])
        .arg(json)
        .output()
        .expect("nomad-conform runs");
    let took = started.elapsed();
    if !out.status.success() {
        eprintln!(
            "warning: the suite did not pass: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    took
}

async fn resolution() -> Vec<f64> {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = ProbeListener::bind(&dir.path().join("p.sock"))
        .await
        .expect("listen");
    let probe = ProbeCommand::binary(env!("CARGO_BIN_EXE_nomad-conform"));
    let mut errors = Vec::new();
    for i in 0..PROBES {
        let label = format!("p{i}");
        let argv = probe.argv(listener.socket_path(), &label, None);
        let mut child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .spawn()
            .expect("probe starts");
        listener
            .wait_started(&label, Duration::from_secs(5))
            .await
            .expect("probe reports");
        tokio::time::sleep(Duration::from_millis(60)).await;
        child.start_kill().expect("kill");
        let _ = child.wait().await;
        let reaped = Instant::now();
        let seen = listener
            .wait_ended(&label, Duration::from_secs(5))
            .await
            .and_then(|p| p.end)
            .expect("probe end recorded");
        let err = if seen > reaped {
            seen.duration_since(reaped)
        } else {
            reaped.duration_since(seen)
        };
        errors.push(err.as_secs_f64() * 1000.0);
    }
    errors.sort_by(|a, b| a.total_cmp(b));
    errors
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut runs: Vec<Duration> = (0..3)
        .map(|i| suite(&dir.path().join(format!("run{i}.json"))))
        .collect();
    runs.sort();
    let median = runs[1];
    let clauses = std::fs::read_to_string(dir.path().join("run0.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["cases"].as_array().map(|c| c.len()))
        .unwrap_or(0);
    println!(
        "lock suite (fast profile, shim, {clauses} clauses): median {:.2} s of 3 runs; target {} s; ratio {:.2}",
        median.as_secs_f64(),
        TARGET_SUITE.as_secs(),
        median.as_secs_f64() / TARGET_SUITE.as_secs_f64()
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let errors = rt.block_on(resolution());
    let p95 = errors[(errors.len() * 95 / 100).min(errors.len() - 1)];
    println!(
        "probe-interval resolution: p95 error {:.2} ms, max {:.2} ms over {} probes; target {} ms; ratio {:.2}",
        p95,
        errors[errors.len() - 1],
        errors.len(),
        TARGET_RESOLUTION_MS,
        p95 / TARGET_RESOLUTION_MS
    );
}
