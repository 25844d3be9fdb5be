//! The CSI suite against the reference plugin csi-hostpath (release builds): the median wall
//! time of the whole suite over several runs, and the share of a serial run's time spent inside
//! the plugin (gRPC calls) versus in the harness. Run with `bench/csi.sh`; needs root (mounts).
//! Nothing here asserts: timings depend on the machine.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nomad_conform_reports::model::RunRecord;

fn csi_hostpath() -> PathBuf {
    let exe = std::env::current_exe().expect("bench path");
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join("csi-hostpath");
    assert!(
        bin.is_file(),
        "build it first: cargo build --release -p csi-hostpath"
    );
    bin
}

fn run(jobs: &str, json: Option<&std::path::Path>) -> Duration {
    let launch = format!(
        "{} --endpoint {{endpoint}} --node-id bench-node --state-dir {{state_dir}} --max-volumes-per-node 16",
        csi_hostpath().display()
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nomad-conform"));
    cmd.args(["-q", "csi", "--launch", &launch, "--jobs", jobs])
        .args(["--mutable-parameters", r#"{"tier":"fast"}"#]);
    if let Some(j) = json {
        cmd.arg("--json").arg(j);
    }
    let t = Instant::now();
    let out = cmd.output().expect("run the suite");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the reference plugin must pass: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    t.elapsed()
}

fn main() {
    let runs = 5;
    let mut times: Vec<Duration> = (0..runs).map(|_| run("8", None)).collect();
    times.sort();
    let median = times[runs / 2];
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("run.json");
    run("1", Some(&json));
    let record: RunRecord =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("record")).expect("record");
    println!(
        "CSI suite ({} clauses) against csi-hostpath: median {:.2} s over {runs} runs (min {:.2} s, max {:.2} s); csi-sanity takes about 1 s against the hostpath plugin -> ratio {:.2}",
        record.cases.len(),
        median.as_secs_f64(),
        times[0].as_secs_f64(),
        times[runs - 1].as_secs_f64(),
        median.as_secs_f64() / 1.0
    );
    let in_plugin: f64 = record
        .cases
        .iter()
        .flat_map(|c| &c.events)
        .map(|e| e.duration_ms)
        .sum();
    let total: f64 = record.cases.iter().map(|c| c.duration_ms as f64).sum();
    println!(
        "serial run: {:.0} ms in clauses, {:.0} ms of it inside the plugin's calls -> plugin {:.0}%, harness {:.0}%",
        total,
        in_plugin,
        100.0 * in_plugin / total.max(1.0),
        100.0 * (1.0 - in_plugin / total.max(1.0))
    );
}
