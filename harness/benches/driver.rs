//! The task driver suite against the reference driver driver-exec (release builds), and the
//! go-plugin host's cost per call. Run with `bench/driver.sh`. Nothing here asserts: timings
//! depend on the machine.
//!
//! 1. The whole suite's wall time under the fast profile (median of 3 runs, target 10 s) and
//!    under nomad-1.10 (one run, target 40 s: one fingerprint period of 35 s is the long pole,
//!    and every other clause runs beside it), with each run's five slowest clauses and the wait
//!    each one is made of.
//!    Peak RSS of a normal run (the largest of the 3 fast runs; the nomad-1.10 run's too) against
//!    64 MB.
//! 2. The host's overhead per unary RPC: PluginInfo through the harness's client (deadline,
//!    recording of request and response) against a bare tonic call over the same socket,
//!    against a 0.2 ms target.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use nomad_conform::plugins::driver::{self, LaunchSpec, PluginAddress};
use nomad_conform_proto::nomad::base::PluginInfoRequest;
use nomad_conform_proto::nomad::base::base_plugin_client::BasePluginClient;
use nomad_conform_reports::model::RunRecord;
use tonic::transport::{Endpoint, Uri};

mod common;

const TARGET_FAST: Duration = Duration::from_secs(10);
const TARGET_DEFAULT: Duration = Duration::from_secs(40);
const TARGET_OVERHEAD_MS: f64 = 0.2;
const CALLS: u32 = 2000;

/// What a clause's time is made of: the profile's waits it sits out (or the tasks' own time).
fn wait_of(clause: &str, profile: &str) -> &'static str {
    let fast = profile == "fast";
    match clause {
        "DRIVER-FINGERPRINT-STREAM-OPEN" => {
            if fast {
                "watches the stream for one fingerprint period (3 s)"
            } else {
                "watches the stream for one fingerprint period (35 s: Nomad's built-in drivers resend every 30 s)"
            }
        }
        "DRIVER-FINGERPRINT-PERIODIC" => {
            "waits for a second fingerprint, at most one fingerprint period"
        }
        "DRIVER-STATS" => "collects for three stats intervals and a half",
        "DRIVER-REATTACH" => "the agent stays away 1 s, then a fingerprint on the reopened stream",
        "DRIVER-EXEC-STREAMING-NOTTY-STREAMING" | "DRIVER-EXEC-STREAMING-TTY-STREAMING" => {
            "the command prints a line a second for 3 s (Nomad's exec conformance case)"
        }
        "DRIVER-STOP-ESCALATES" => "the task's 1 s kill timeout, then the escalation",
        "DRIVER-STOP-SIGNAL" | "DRIVER-STOP-DEFAULT-SIGNAL" => "the stop of a task",
        "DRIVER-LAUNCH-STDERR-HCLOG" => "a task started and stopped",
        _ => {
            "the task shapes' own time (the exit and output shapes run about a second) and the plugin's answers"
        }
    }
}

fn driver_exec() -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("driver-exec");
    assert!(
        bin.is_file(),
        "build it first: cargo build --release -p driver-exec"
    );
    bin
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn suite(json: &Path, profile: &str) -> common::Measured {
    let out = common::run(
        Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
            .arg("-q")
            .arg("driver")
            .arg(driver_exec())
            .args(["--profile", profile])
            .args(["--task-command", "command = {command}\nargs = {args}"])
            .arg("--plugin-config")
            .arg(root().join("fixtures/driver/plugin.hcl"))
            .arg("--json")
            .arg(json),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "the reference driver must pass: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// Print a run's five slowest clauses with the wait each is made of.
fn slowest(json: &Path, profile: &str) {
    let record: RunRecord =
        serde_json::from_str(&std::fs::read_to_string(json).expect("record")).expect("record");
    let mut cases: Vec<(u64, &str)> = record
        .cases
        .iter()
        .map(|c| (c.duration_ms, c.clause.as_str()))
        .collect();
    cases.sort_unstable_by(|a, b| b.cmp(a));
    println!("  five slowest of {} clauses:", record.cases.len());
    for (ms, id) in cases.iter().take(5) {
        println!(
            "    {id:42} {:6.2}s  {}",
            *ms as f64 / 1000.0,
            wait_of(id, profile)
        );
    }
}

async fn overhead() -> (f64, f64) {
    let spec = LaunchSpec::new(driver_exec(), Vec::new());
    let process = driver::launch(&spec).await.expect("driver-exec launches");
    let client = driver::connect(&process.handshake, Duration::from_secs(5))
        .await
        .expect("connects");
    let Some(PluginAddress::Unix(path)) = process.handshake.address.clone() else {
        panic!("driver-exec listens on a unix socket")
    };
    let channel = Endpoint::from_static("http://unused")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        }))
        .await
        .expect("bare tonic connects");
    let mut bare = BasePluginClient::new(channel);
    // Warm both up.
    for _ in 0..100 {
        let _ = client.plugin_info(Duration::from_secs(5)).await;
        let _ = bare.plugin_info(PluginInfoRequest {}).await;
    }
    let t = Instant::now();
    for _ in 0..CALLS {
        bare.plugin_info(PluginInfoRequest {})
            .await
            .expect("bare call");
    }
    let bare_ms = t.elapsed().as_secs_f64() * 1000.0 / f64::from(CALLS);
    let t = Instant::now();
    for _ in 0..CALLS {
        let (rpc, _) = client.plugin_info(Duration::from_secs(5)).await;
        assert!(rpc.ok(), "{}", rpc.summary());
    }
    let host_ms = t.elapsed().as_secs_f64() * 1000.0 / f64::from(CALLS);
    client.close();
    process.kill_now().await;
    (bare_ms, host_ms)
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut runs = Vec::new();
    let mut peak_rss: f64 = 0.0;
    for i in 0..3 {
        let run = suite(&dir.path().join(format!("fast{i}.json")), "fast");
        peak_rss = peak_rss.max(run.peak_rss);
        runs.push(run.took);
    }
    let mut sorted = runs.clone();
    sorted.sort();
    let median = sorted[1];
    let median_run = runs.iter().position(|r| *r == median).unwrap_or(0);
    println!(
        "driver suite, fast profile: median {:.2}s of 3 runs (target {:.0}s): ratio {:.2}",
        median.as_secs_f64(),
        TARGET_FAST.as_secs_f64(),
        median.as_secs_f64() / TARGET_FAST.as_secs_f64()
    );
    slowest(&dir.path().join(format!("fast{median_run}.json")), "fast");
    common::print_rss(
        "normal run (fast profile, the largest of the 3 runs)",
        peak_rss,
        common::NORMAL_RSS_TARGET,
    );
    let json = dir.path().join("default.json");
    let default = suite(&json, "nomad-1.10");
    let full = default.took;
    println!(
        "driver suite, nomad-1.10 profile: {:.2}s (target {:.0}s): ratio {:.2}",
        full.as_secs_f64(),
        TARGET_DEFAULT.as_secs_f64(),
        full.as_secs_f64() / TARGET_DEFAULT.as_secs_f64()
    );
    slowest(&json, "nomad-1.10");
    common::print_rss(
        "nomad-1.10 profile run",
        default.peak_rss,
        common::NORMAL_RSS_TARGET,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (bare_ms, host_ms) = rt.block_on(overhead());
    let over = (host_ms - bare_ms).max(0.0);
    println!(
        "per unary RPC: bare tonic {bare_ms:.3} ms, through the host {host_ms:.3} ms: overhead {over:.3} ms (target {TARGET_OVERHEAD_MS} ms): ratio {:.2}",
        over / TARGET_OVERHEAD_MS
    );
}
