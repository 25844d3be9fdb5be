//! The CSI suite against the reference plugin csi-hostpath (release builds) on a node that takes
//! at most 3 volumes: the median wall time of the whole suite over several runs, its five
//! slowest clauses, and how long clauses waited for the node's attachment budget; as a ratio
//! against csi-sanity's time on the same plugin when `CSI_SANITY` names a csi-sanity binary,
//! otherwise against 1.0 s (about what csi-sanity takes). Also the share of a serial run spent
//! inside the plugin. Run with `bench/csi.sh`; needs root (mounts). Nothing here asserts:
//! timings depend on the machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nomad_conform_reports::model::RunRecord;

/// The node's volume limit the suite runs against.
const LIMIT: &str = "3";

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

fn run(jobs: &str, json: &Path) -> Duration {
    let launch = format!(
        "{} --endpoint {{endpoint}} --node-id bench-node --state-dir {{state_dir}} --max-volumes-per-node {LIMIT}",
        csi_hostpath().display()
    );
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .args(["-q", "csi", "--launch", &launch, "--jobs", jobs])
        .args(["--mutable-parameters", r#"{"tier":"fast"}"#])
        .arg("--json")
        .arg(json)
        .output()
        .expect("run the suite");
    let took = t.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the reference plugin must pass: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    took
}

fn record(json: &Path) -> RunRecord {
    serde_json::from_str(&std::fs::read_to_string(json).expect("record")).expect("record")
}

/// `850ms`, `1.25s`, `2m3s`-free durations as the harness prints them, in milliseconds.
fn parse_ms(s: &str) -> f64 {
    if let Some(ms) = s.strip_suffix("ms") {
        ms.parse().unwrap_or(0.0)
    } else if let Some(sec) = s.strip_suffix('s') {
        sec.parse::<f64>().unwrap_or(0.0) * 1000.0
    } else {
        0.0
    }
}

/// Milliseconds the run's clauses waited for the node's attachment budget (their notes say so).
fn budget_wait_ms(record: &RunRecord) -> f64 {
    record
        .cases
        .iter()
        .flat_map(|c| &c.notes)
        .filter_map(|n| {
            let rest = n.strip_prefix("waited ")?;
            let (d, tail) = rest.split_once(' ')?;
            tail.contains("attachments").then(|| parse_ms(d))
        })
        .sum()
}

/// csi-sanity's wall time against csi-hostpath, when `CSI_SANITY` names its binary.
fn csi_sanity_time() -> Option<Duration> {
    let sanity = std::env::var_os("CSI_SANITY")?;
    let dir = tempfile::Builder::new()
        .prefix("ncb")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let socket = dir.path().join("csi.sock");
    let endpoint = format!("unix://{}", socket.display());
    let mut plugin = Command::new(csi_hostpath())
        .args([
            "--endpoint",
            &endpoint,
            "--node-id",
            "bench-node",
            "--state-dir",
        ])
        .arg(dir.path().join("state"))
        .args(["--max-volumes-per-node", LIMIT])
        .spawn()
        .expect("start csi-hostpath");
    let until = Instant::now() + Duration::from_secs(10);
    while !socket.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    let status = Command::new(&sanity)
        .arg(format!("--csi.endpoint={endpoint}"))
        .arg(format!(
            "--csi.mountdir={}",
            dir.path().join("mnt").display()
        ))
        .arg(format!(
            "--csi.stagingdir={}",
            dir.path().join("stage").display()
        ))
        .status();
    let took = t.elapsed();
    let _ = plugin.kill();
    let _ = plugin.wait();
    match status {
        Ok(_) => Some(took),
        Err(e) => {
            eprintln!("could not run CSI_SANITY: {e}");
            None
        }
    }
}

fn main() {
    let runs = 5;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut timed: Vec<(Duration, PathBuf)> = (0..runs)
        .map(|i| {
            let json = dir.path().join(format!("run{i}.json"));
            (run("8", &json), json)
        })
        .collect();
    timed.sort_by_key(|(t, _)| *t);
    let (median, median_json) = &timed[runs / 2];
    let rec = record(median_json);
    let (baseline, against) = match csi_sanity_time() {
        Some(t) => (t.as_secs_f64(), "csi-sanity on the same plugin"),
        None => (
            1.0,
            "1.0 s (set CSI_SANITY to a csi-sanity binary to measure it)",
        ),
    };
    println!(
        "CSI suite ({} clauses) against csi-hostpath with max_volumes_per_node {LIMIT}: median {:.2} s over {runs} runs at --jobs 8 (min {:.2} s, max {:.2} s); against {against} ({baseline:.2} s) -> ratio {:.2}",
        rec.cases.len(),
        median.as_secs_f64(),
        timed[0].0.as_secs_f64(),
        timed[runs - 1].0.as_secs_f64(),
        median.as_secs_f64() / baseline
    );
    let mut slowest: Vec<_> = rec.cases.iter().collect();
    slowest.sort_by_key(|c| std::cmp::Reverse(c.duration_ms));
    println!("five slowest clauses:");
    for c in slowest.iter().take(5) {
        println!("  {:>6} ms  {}", c.duration_ms, c.clause);
    }
    let waited = budget_wait_ms(&rec);
    let clause_time: f64 = rec.cases.iter().map(|c| c.duration_ms as f64).sum();
    println!(
        "clauses waited {:.0} ms in all for the node's attachment budget ({:.1}% of clause time)",
        waited,
        100.0 * waited / clause_time.max(1.0)
    );
    let json = dir.path().join("serial.json");
    run("1", &json);
    let serial = record(&json);
    let in_plugin: f64 = serial
        .cases
        .iter()
        .flat_map(|c| &c.events)
        .map(|e| e.duration_ms)
        .sum();
    let total: f64 = serial.cases.iter().map(|c| c.duration_ms as f64).sum();
    println!(
        "serial run: {:.0} ms in clauses, {:.0} ms of it inside the plugin's calls -> plugin {:.0}%, harness {:.0}%",
        total,
        in_plugin,
        100.0 * in_plugin / total.max(1.0),
        100.0 * (1.0 - in_plugin / total.max(1.0))
    );
}
