//! The task driver suite against the reference driver driver-exec (release builds), and the
//! go-plugin host's cost per call. Run with `bench/driver.sh`. Nothing here asserts: timings
//! depend on the machine.
//!
//! 1. The suite (profile nomad-1.10, the plugin's fingerprint period at 1 s) without the clauses
//!    that wait out a time the contract sets (a stop timeout, a fingerprint period, a stream
//!    that must stay open: no harness can make those faster), median of 3 runs, against a 15 s
//!    target on 2 cores; then one run of the whole suite, with its five slowest clauses.
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

const TARGET_SUITE: Duration = Duration::from_secs(15);
const TARGET_OVERHEAD_MS: f64 = 0.2;
const CALLS: u32 = 2000;

/// Clauses whose time is a wait the contract sets.
const CONTRACT_WAITS: &[&str] = &[
    "DRIVER-STOP-ESCALATES",
    "DRIVER-FINGERPRINT-STREAM-OPEN",
    "DRIVER-FINGERPRINT-PERIODIC",
    "DRIVER-EXEC-STREAMING-NOTTY-STREAMING",
    "DRIVER-EXEC-STREAMING-TTY-STREAMING",
    "DRIVER-EXEC-STREAMING-TTY-CHILDREN",
    "DRIVER-REATTACH",
];

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

fn suite(json: &Path, without_waits: bool) -> Duration {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nomad-conform"));
    if without_waits {
        let tags: Vec<String> = CONTRACT_WAITS.iter().map(|c| format!("not @{c}")).collect();
        cmd.env("NOMAD_CONFORM_TAGS", tags.join(" and "));
    }
    let t = Instant::now();
    let out = cmd
        .arg("-q")
        .arg("driver")
        .arg(driver_exec())
        .args(["--task-command", "command = {command}\nargs = {args}"])
        .arg("--plugin-config")
        .arg(root().join("fixtures/driver/plugin.hcl"))
        .arg("--json")
        .arg(json)
        .output()
        .expect("run the suite");
    let took = t.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the reference driver must pass: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    took
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
    let mut counted = 0;
    for i in 0..3 {
        let json = dir.path().join(format!("run{i}.json"));
        runs.push(suite(&json, true));
        let r: RunRecord =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("record")).expect("record");
        counted = r.cases.len();
    }
    runs.sort();
    let median = runs[1];
    let json = dir.path().join("full.json");
    let full = suite(&json, false);
    let record: RunRecord =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("record")).expect("record");
    let mut cases: Vec<(u64, &str)> = record
        .cases
        .iter()
        .map(|c| (c.duration_ms, c.clause.as_str()))
        .collect();
    cases.sort_unstable_by(|a, b| b.cmp(a));
    println!(
        "driver suite without the contract's waits: {counted} clauses, median {:.2}s of 3 runs (target {:.0}s): ratio {:.2}",
        median.as_secs_f64(),
        TARGET_SUITE.as_secs_f64(),
        median.as_secs_f64() / TARGET_SUITE.as_secs_f64()
    );
    println!(
        "whole driver suite: {} clauses in {:.2}s; five slowest clauses:",
        record.cases.len(),
        full.as_secs_f64()
    );
    for (ms, id) in cases.iter().take(5) {
        let why = if CONTRACT_WAITS.contains(id) {
            " (a wait the contract sets)"
        } else {
            ""
        };
        println!("  {id:45} {:.2}s{why}", *ms as f64 / 1000.0);
    }
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
