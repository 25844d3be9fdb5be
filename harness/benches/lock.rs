//! The lock client suite against the reference client lock-sidecar (release builds), and how
//! precisely the harness times a protected process. Run with `bench/lock.sh`. Nothing here
//! asserts: timings depend on the machine.
//!
//! 1. The whole lock suite on the fast profile (shim pattern), median of 3 runs, against a 30 s
//!    target.
//! 2. Peak RSS of a normal run (the largest of those 3), against 64 MB.
//! 3. Probe-interval resolution: probes that end at a moment the bench knows (SIGKILL sent by
//!    the bench, `waitpid` returning) against the end the listener recorded (the probe's
//!    connection closing); the 95th percentile of the error against a 10 ms target. The
//!    singleton checker judges overlaps from these intervals, so this is its resolution.
//! 4. The whole lock suite on the default profile (Nomad's own numbers: TTLs from 10 s), one
//!    run (it takes minutes), against a 120 s target, with its five slowest clauses and its
//!    peak RSS. The client asks for a 10 s TTL, as the README's example does, and a 10 s lock
//!    delay, 20 s give-up and 5 s longest backoff (the fast profile's times ten).
//! 5. The fault fixture `ignores-conflict` (the Go LockLeaser's handling of a renew 409: keep
//!    the protected process and acquire again), run as harness/tests/lock_fixtures.rs runs it
//!    (whole suite, fast profile) on seeds 1 to 5: whether LOCK-SINGLETON failed on each, read
//!    from the JSON report, and how many seeds of 5 caught it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nomad_conform::plugins::lock::{ProbeCommand, ProbeListener};

mod common;

const TARGET_SUITE: Duration = Duration::from_secs(30);
const TARGET_DEFAULT: Duration = Duration::from_secs(120);
/// The LockLeaser-style fault fixture, and the seeds it runs on.
const FAULT_FIXTURE: &str = "ignores-conflict";
const FAULT_SEEDS: [u64; 5] = [1, 2, 3, 4, 5];
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

/// How a run drives the reference client: its timing flags and the harness's matching ones.
struct Timing {
    /// `--profile` (None: the default profile, Nomad's own numbers).
    profile: Option<&'static str>,
    /// The client's flags before its fault switches (`{path}` is the lock's variable).
    client: &'static str,
    /// The client's give-up window and the group's stop_on_client_after, as the harness is told.
    give_up: &'static str,
    stop_on_client_after: &'static str,
}

/// The fast profile (TTLs from 1 s), as harness/tests/lock_fixtures.rs and scripts/run-reference
/// run the client.
const FAST: Timing = Timing {
    profile: Some("fast"),
    client: "--path {path} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms",
    give_up: "2s",
    stop_on_client_after: "1s",
};

/// The default profile (Nomad's numbers, TTLs from 10 s): the client asks for the 10 s TTL of
/// the README's example (`nomad var lock -ttl 10s`), and every other time of the fast profile's
/// command line is ten times longer, as the profile's are.
const DEFAULT: Timing = Timing {
    profile: None,
    client: "--path {path} --ttl 10s --delay 10s --give-up 20s --max-backoff 5s",
    give_up: "20s",
    stop_on_client_after: "10s",
};

/// One run of the lock suite (shim pattern) against lock-sidecar with `timing`, the client's
/// fault switches `faults` and the harness's `extra` arguments; the JSON report goes to `json`.
fn suite(json: &Path, timing: &Timing, faults: &[&str], extra: &[&str]) -> common::Measured {
    let mut client = format!("{} {}", lock_sidecar().display(), timing.client);
    for f in faults {
        client.push_str(" --fault ");
        client.push_str(f);
    }
    client.push_str(" -- {protected}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nomad-conform"));
    cmd.args(["lock", "--client", &client, "--give-up", timing.give_up])
        .args(["--stop-on-client-after", timing.stop_on_client_after]);
    if let Some(profile) = timing.profile {
        cmd.args(["--profile", profile]);
    }
    cmd.args(extra).arg("--json").arg(json);
    let out = common::run(&mut cmd);
    if faults.is_empty() && !out.status.success() {
        eprintln!(
            "warning: the suite did not pass: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    out
}

/// The run's JSON report.
fn report(json: &Path) -> serde_json::Value {
    std::fs::read_to_string(json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// How many clauses the report has, and how many of them passed.
fn clauses(json: &Path) -> (usize, usize) {
    let cases = report(json)["cases"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let passed = cases.iter().filter(|c| c["verdict"] == "pass").count();
    (cases.len(), passed)
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
    let fast: Vec<common::Measured> = (0..3)
        .map(|i| suite(&dir.path().join(format!("run{i}.json")), &FAST, &[], &[]))
        .collect();
    let mut runs: Vec<Duration> = fast.iter().map(|m| m.took).collect();
    runs.sort();
    let median = runs[1];
    let (total, passed) = clauses(&dir.path().join("run0.json"));
    println!(
        "lock suite (fast profile, shim, {total} clauses, {passed} passed): median {:.2} s of 3 runs; target {} s; ratio {:.2}",
        median.as_secs_f64(),
        TARGET_SUITE.as_secs(),
        median.as_secs_f64() / TARGET_SUITE.as_secs_f64()
    );
    let peak = fast.iter().map(|m| m.peak_rss).fold(0.0, f64::max);
    common::print_rss(
        "normal run (fast profile, the largest of the 3 runs)",
        peak,
        common::NORMAL_RSS_TARGET,
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

    let json = dir.path().join("default.json");
    let default = suite(&json, &DEFAULT, &[], &[]);
    let (total, passed) = clauses(&json);
    println!(
        "lock suite (default profile: Nomad's numbers; client TTL 10 s, lock delay 10 s; shim, {total} clauses, {passed} passed): {:.1} s, one run (a run takes minutes); target {} s; ratio {:.2}",
        default.took.as_secs_f64(),
        TARGET_DEFAULT.as_secs(),
        default.took.as_secs_f64() / TARGET_DEFAULT.as_secs_f64()
    );
    slowest(&json);
    common::print_rss(
        "default profile run",
        default.peak_rss,
        common::NORMAL_RSS_TARGET,
    );

    // The Go LockLeaser's behaviour (fixtures/lock/ignores-conflict: after a renew 409 it keeps
    // the protected process and acquires again), run as that fixture's test runs it: the whole
    // suite on the fast profile. LOCK-SINGLETON must fail whatever the seed.
    let mut caught = 0;
    for seed in FAULT_SEEDS {
        let json = dir.path().join(format!("fault{seed}.json"));
        let seed_arg = seed.to_string();
        let run = suite(
            &json,
            &FAST,
            &[FAULT_FIXTURE],
            &["--seed", seed_arg.as_str()],
        );
        let record = report(&json);
        let case = record["cases"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["clause"] == "LOCK-SINGLETON"))
            .cloned()
            .unwrap_or_default();
        let verdict = case["verdict"].as_str().unwrap_or("none (no such case)");
        if verdict == "fail" {
            caught += 1;
        }
        let reason = case["reason"].as_str().unwrap_or_default();
        println!(
            "{FAULT_FIXTURE} seed {seed}: LOCK-SINGLETON {verdict}{} ({:.1} s, exit {:?}){}",
            if verdict == "fail" {
                " (caught)"
            } else {
                " (MISSED)"
            },
            run.took.as_secs_f64(),
            run.status.code(),
            reason
                .lines()
                .next()
                .map(|l| format!(": {}", l.chars().take(140).collect::<String>()))
                .unwrap_or_default()
        );
    }
    println!(
        "{FAULT_FIXTURE} (the Go LockLeaser's conflict handling): {caught}/{} seeds caught by LOCK-SINGLETON",
        FAULT_SEEDS.len()
    );
}

/// The five slowest clauses of a run.
fn slowest(json: &Path) {
    let mut cases: Vec<(u64, String)> = report(json)["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["duration_ms"].as_u64().unwrap_or(0),
                c["clause"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    cases.sort_unstable_by(|a, b| b.cmp(a));
    for (ms, clause) in cases.iter().take(5) {
        println!("    {clause:32} {:7.1} s", *ms as f64 / 1000.0);
    }
}
