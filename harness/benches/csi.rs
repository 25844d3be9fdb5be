//! The CSI suite against a plugin on a node that takes at most 3 volumes, beside csi-sanity on
//! the same plugin when `CSI_SANITY` names a csi-sanity binary. The plugin is the reference
//! csi-hostpath (release build) unless `CSI_PLUGIN` gives another's command line, with
//! `{endpoint}` and `{state_dir}` as `--launch` takes them and its own flag for the limit of 3
//! (kubernetes-csi's hostpath driver: `hostpathplugin --endpoint {endpoint} --nodeid bench-node
//! --statedir {state_dir} --attach-limit 3 -v 3`); `CSI_PLUGIN_MUTABLE=name=value` names a
//! mutable parameter it accepts. Without `CSI_SANITY` the reference plugin's ratio is against
//! 0.21 s, what csi-sanity from kubernetes-csi/csi-test of August 2024 took against it on 2 cores
//! with this bench. Prints:
//!
//! - the median wall time of each tool over five runs, interleaved (ours, csi-sanity, ours, ...)
//!   so that a machine getting busier weighs on both alike, and the ratio (target at most 1.0,
//!   goal 0.5);
//! - whether csi-sanity's baseline is clean: it is given the mutable parameters the plugin
//!   accepts, and its exit status is checked (a failing baseline is said, not hidden);
//! - each tool's calls, counted the same way for both from the plugin's own log (one line per
//!   call on its stderr: the reference plugin's `Method: OUTCOME`, or kubernetes-csi's
//!   `GRPC call: /csi.v1.Service/Method` at `-v 3`), and how many of them were NodePublishVolume and NodeUnpublishVolume
//!   (the mounts and unmounts that decide the time);
//! - five serial runs (`--jobs 1`), each figure their median: how much of the wall time the
//!   plugin spent answering (the sum of our calls' durations) and starting (until its first
//!   Probe said ready, at the run's start and in CSI-NOMAD-RESTART), and our own overhead, the
//!   rest, against its 10 % target, with its range over the runs;
//! - the floor on a plugin that answers one call at a time: its own time for our calls (the
//!   serial runs' median sum), against csi-sanity's run (the lowest ratio such a plugin allows), and
//!   how far our `--jobs 8` median is above it (target at most 10% above);
//! - our peak RSS (the largest of our five runs, wait4(2)'s) against 64 MB;
//! - the five slowest clauses and the time spent waiting for the node's attachment budget.
//!
//! Run with `bench/csi.sh`; needs root (mounts). Nothing here asserts: timings depend on the
//! machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nomad_conform_reports::model::RunRecord;

mod common;

/// The node's volume limit both tools run against (the reference plugin's flag; a plugin given
/// in `CSI_PLUGIN` carries its own).
const LIMIT: &str = "3";
/// Runs of each tool.
const RUNS: usize = 5;
/// A mutable parameter csi-hostpath accepts (controller.rs, MUTABLE_PARAMETERS).
const MUTABLE: (&str, &str) = ("tier", "fast");

/// The plugin both tools run against.
struct Plugin {
    /// Its command line, with `{endpoint}` and `{state_dir}`.
    launch: String,
    /// What the report calls it.
    name: String,
    /// A mutable parameter it accepts, given to both tools.
    mutable: Option<(String, String)>,
    /// Whether it is the reference plugin (the ratio then has a fallback baseline).
    reference: bool,
}

impl Plugin {
    fn from_env() -> Plugin {
        match std::env::var("CSI_PLUGIN") {
            Ok(launch) if !launch.trim().is_empty() => Plugin {
                name: launch
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                mutable: std::env::var("CSI_PLUGIN_MUTABLE").ok().and_then(|m| {
                    m.split_once('=')
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                }),
                launch,
                reference: false,
            },
            _ => Plugin {
                launch: format!(
                    "{} --endpoint {{endpoint}} --node-id bench-node --state-dir {{state_dir}} --max-volumes-per-node {LIMIT}",
                    csi_hostpath().display()
                ),
                name: "csi-hostpath".into(),
                mutable: Some((MUTABLE.0.into(), MUTABLE.1.into())),
                reference: true,
            },
        }
    }

    /// Its command line for one run, its stderr appended to `log`.
    fn shell(&self, endpoint: &str, state_dir: &str, log: &Path) -> String {
        format!(
            "exec {} 2>>{}",
            self.launch
                .replace("{endpoint}", endpoint)
                .replace("{state_dir}", state_dir),
            log.display()
        )
    }
}

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

/// The CSI methods the plugin answered, counted from its log: each call is one line, the
/// reference plugin's `Method[ subject]: OUTCOME` or kubernetes-csi's
/// `GRPC call: /csi.v1.Service/Method`.
fn calls_in_log(log: &Path) -> BTreeMap<String, usize> {
    let mut calls = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let method = if let Some((_, path)) = line.split_once("GRPC call: /csi.v1.") {
            path.trim().rsplit('/').next().unwrap_or_default()
        } else if let Some((head, _)) = line.split_once(": ") {
            head.split(' ').next().unwrap_or_default()
        } else {
            continue;
        };
        if method
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase())
            && method.chars().all(|c| c.is_ascii_alphanumeric())
        {
            *calls.entry(method.to_string()).or_insert(0) += 1;
        }
    }
    calls
}

/// One run of our suite; the plugin's log goes to `log`. Its wall time and peak RSS.
fn ours(plugin: &Plugin, jobs: &str, json: &Path, log: &Path) -> (Duration, f64) {
    let launch = format!("sh -c '{}'", plugin.shell("{endpoint}", "{state_dir}", log));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nomad-conform"));
    cmd.args(["-q", "csi", "--launch", &launch, "--jobs", jobs]);
    if let Some((k, v)) = &plugin.mutable {
        cmd.args(["--mutable-parameters", &format!(r#"{{"{k}":"{v}"}}"#)]);
    }
    let out = common::run(cmd.arg("--json").arg(json));
    // The reference plugin passes every clause; another plugin's verdicts are its own, but the
    // run must have reached its end (0 conformant, 1 not).
    let want: &[i32] = if plugin.reference { &[0] } else { &[0, 1] };
    assert!(
        out.status.code().is_some_and(|c| want.contains(&c)),
        "the suite did not finish against {}: {:?}\n{}{}",
        plugin.name,
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.took, out.peak_rss)
}

/// What one csi-sanity run did.
struct Sanity {
    took: Duration,
    exit: Option<i32>,
    /// Its summary line ("Ran 75 of 88 Specs ... FAIL! -- 72 Passed | 3 Failed ...").
    summary: String,
    log: PathBuf,
}

/// One run of csi-sanity against a fresh csi-hostpath.
fn sanity(plugin: &Plugin, bin: &std::ffi::OsStr, dir: &Path, i: usize) -> Sanity {
    let run = dir.join(format!("sanity{i}"));
    std::fs::create_dir_all(&run).expect("run dir");
    let socket = run.join("csi.sock");
    let endpoint = format!("unix://{}", socket.display());
    let log = run.join("plugin.log");
    let state = run.join("state");
    let mut server = Command::new("sh")
        .arg("-c")
        .arg(plugin.shell(&endpoint, &state.display().to_string(), &log))
        .spawn()
        .expect("start the plugin");
    let until = Instant::now() + Duration::from_secs(10);
    while !socket.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut args = vec![
        "--ginkgo.no-color".to_string(),
        format!("--csi.endpoint={endpoint}"),
        format!("--csi.mountdir={}", run.join("mnt").display()),
        format!("--csi.stagingdir={}", run.join("stage").display()),
    ];
    if let Some((k, v)) = &plugin.mutable {
        let mutable = run.join("mutable.yaml");
        std::fs::write(&mutable, format!("{k}: {v}\n")).expect("parameters");
        args.push(format!(
            "--csi.testvolumemutableparameters={}",
            mutable.display()
        ));
    }
    let t = Instant::now();
    let out = Command::new(bin).args(&args).stdin(Stdio::null()).output();
    let took = t.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    let out = out.expect("run CSI_SANITY");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut summary = text
        .lines()
        .rfind(|l| l.contains("Passed") && l.contains("Failed"))
        .unwrap_or("(no summary line)")
        .trim()
        .to_string();
    // The specs that failed, as its closing list names them ("[FAIL] Node Service ...").
    let failed: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("[FAIL]"))
        .collect();
    if !failed.is_empty() {
        summary = format!("{summary}; {}", failed.join("; "));
    }
    Sanity {
        took,
        exit: out.status.code(),
        summary,
        log,
    }
}

/// Milliseconds the run's calls took in the plugin. A shared volume's calls are copied into
/// every clause that reads it (marked `(shared)`): each counts once.
fn plugin_ms(record: &RunRecord) -> f64 {
    calls_ms(record, |_| true)
}

/// Milliseconds the run's calls whose method `pick` accepts took in the plugin.
fn calls_ms(record: &RunRecord, pick: impl Fn(&str) -> bool) -> f64 {
    let mut shared = std::collections::HashSet::new();
    record
        .cases
        .iter()
        .flat_map(|c| &c.events)
        .filter(|e| {
            !e.operation.ends_with("(shared)")
                || shared.insert((
                    e.operation.clone(),
                    e.started_ms,
                    serde_json::to_string(&e.request).unwrap_or_default(),
                ))
        })
        .filter(|e| pick(e.operation.split(' ').next().unwrap_or_default()))
        .map(|e| e.duration_ms)
        .sum()
}

/// Milliseconds the plugin took to restart in the serial run's CSI-NOMAD-RESTART: its step
/// "the plugin restarts" (stopping the plugin, starting it until its socket accepted, and the
/// Probes until it was ready), less those Probes, which the calls already count. Step durations
/// are whole milliseconds: this is within one.
fn restart_ms(record: &RunRecord) -> f64 {
    record
        .cases
        .iter()
        .map(|c| {
            let step: f64 = c
                .steps
                .iter()
                .filter(|s| s.text == "the plugin restarts")
                .map(|s| s.duration_ms as f64)
                .sum();
            if step == 0.0 {
                return 0.0;
            }
            let mut seen = std::collections::HashSet::new();
            let probes: f64 = c
                .events
                .iter()
                .filter(|e| e.operation == "Probe" && seen.insert(e.started_ms))
                .map(|e| e.duration_ms)
                .sum();
            (step - probes).max(0.0)
        })
        .sum()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn median_f(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What one serial run (`--jobs 1`) says of where its time went, in milliseconds.
struct Serial {
    wall_ms: f64,
    /// The sum of the plugin's answers to our calls.
    in_plugin: f64,
    /// The sum of the clauses' durations (each rounded to whole milliseconds: off by a few).
    clause_ms: f64,
    /// The plugin's process starting until its first Probe said ready.
    ready_ms: f64,
    /// That, and its restart in CSI-NOMAD-RESTART: the plugin's time too, not the harness's
    /// (csi-sanity's time does not count the plugin's start at all).
    starts_ms: f64,
    /// Of `in_plugin`, NodePublishVolume and NodeUnpublishVolume.
    mounts_ms: f64,
}

impl Serial {
    fn of(wall: Duration, serial: &RunRecord) -> Serial {
        let ready_ms = serial
            .subject
            .details
            .get("ready")
            .and_then(|r| r.strip_prefix("Probe reported ready after "))
            .and_then(|r| r.split_whitespace().next())
            .map(parse_ms)
            .unwrap_or(0.0);
        Serial {
            wall_ms: wall.as_secs_f64() * 1000.0,
            in_plugin: plugin_ms(serial),
            clause_ms: serial.cases.iter().map(|c| c.duration_ms as f64).sum(),
            ready_ms,
            starts_ms: ready_ms + restart_ms(serial),
            mounts_ms: calls_ms(serial, |m| {
                matches!(m, "NodePublishVolume" | "NodeUnpublishVolume")
            }),
        }
    }

    /// Our own time: neither the plugin's answers nor its starts.
    fn ours_ms(&self) -> f64 {
        (self.wall_ms - self.in_plugin - self.starts_ms).max(0.0)
    }

    fn share(&self) -> f64 {
        self.ours_ms() / self.wall_ms.max(1.0)
    }

    fn inside_clauses_ms(&self) -> f64 {
        self.clause_ms - self.in_plugin - (self.starts_ms - self.ready_ms)
    }

    fn outside_clauses_ms(&self) -> f64 {
        self.wall_ms - self.clause_ms - self.ready_ms
    }
}

fn record(json: &Path) -> RunRecord {
    serde_json::from_str(&std::fs::read_to_string(json).expect("record")).expect("record")
}

/// `850ms` and `1.25s`, as the harness prints durations, in milliseconds.
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

/// "512 calls (NodePublishVolume 37, NodeUnpublishVolume 36)".
fn call_line(calls: &BTreeMap<String, usize>) -> String {
    let n = |m: &str| calls.get(m).copied().unwrap_or(0);
    format!(
        "{} calls (NodePublishVolume {}, NodeUnpublishVolume {})",
        calls.values().sum::<usize>(),
        n("NodePublishVolume"),
        n("NodeUnpublishVolume")
    )
}

fn main() {
    let dir = tempfile::Builder::new()
        .prefix("ncb")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let plugin = Plugin::from_env();
    let sanity_bin = std::env::var_os("CSI_SANITY");
    let mut our_times = Vec::new();
    let mut our_rss: f64 = 0.0;
    let mut sanity_runs = Vec::new();
    for i in 0..RUNS {
        let log = dir.path().join(format!("ours{i}.log"));
        let (took, rss) = ours(&plugin, "8", &dir.path().join(format!("run{i}.json")), &log);
        our_times.push(took);
        our_rss = our_rss.max(rss);
        if let Some(bin) = &sanity_bin {
            sanity_runs.push(sanity(&plugin, bin, dir.path(), i));
        }
    }
    let our_median = median(our_times.clone());
    let rec = record(&dir.path().join("run0.json"));
    let our_calls = calls_in_log(&dir.path().join("ours0.log"));
    let passed = rec
        .cases
        .iter()
        .filter(|c| c.verdict == nomad_conform_reports::model::Verdict::Pass)
        .count();
    println!(
        "ours: CSI suite ({} clauses, {passed} passed) against {} on a node that takes {LIMIT} volumes, at --jobs 8: median {:.2} s over {RUNS} runs (min {:.2} s, max {:.2} s); {}",
        rec.cases.len(),
        plugin.name,
        our_median.as_secs_f64(),
        our_times.iter().min().unwrap().as_secs_f64(),
        our_times.iter().max().unwrap().as_secs_f64(),
        call_line(&our_calls)
    );
    let baseline = if sanity_runs.is_empty() {
        if !plugin.reference {
            println!("csi-sanity: not run (set CSI_SANITY to a csi-sanity binary): no ratio");
            None
        } else {
            println!(
                "csi-sanity: not run (set CSI_SANITY to a csi-sanity binary); the ratio below is against 0.21 s, what it took against this plugin on the machine this bench was first run on"
            );
            Some(0.21)
        }
    } else {
        let t = median(sanity_runs.iter().map(|s| s.took).collect());
        let first = &sanity_runs[0];
        let clean = sanity_runs.iter().all(|s| s.exit == Some(0));
        println!(
            "csi-sanity: median {:.2} s over {RUNS} runs, interleaved with ours; {}; baseline {}: {}",
            t.as_secs_f64(),
            call_line(&calls_in_log(&first.log)),
            if clean {
                "clean (exit 0 every run)".to_string()
            } else {
                format!(
                    "NOT clean (exit statuses {:?})",
                    sanity_runs.iter().map(|s| s.exit).collect::<Vec<_>>()
                )
            },
            first.summary
        );
        Some(t.as_secs_f64())
    };
    if let Some(baseline) = baseline {
        println!(
            "ratio ours / csi-sanity: {:.2} (target at most 1.0, goal 0.5)",
            our_median.as_secs_f64() / baseline
        );
    }

    // Where our time goes: serial runs, in which clause durations add up to the wall time. One
    // serial run is at the mercy of whatever else the machine does; each figure is the median
    // over RUNS of them, and the overhead's range is printed with it.
    let serials: Vec<Serial> = (0..RUNS)
        .map(|i| {
            let json = dir.path().join(format!("serial{i}.json"));
            let log = dir.path().join(format!("serial{i}.log"));
            let (wall, _) = ours(&plugin, "1", &json, &log);
            Serial::of(wall, &record(&json))
        })
        .collect();
    let pick = |f: fn(&Serial) -> f64| median_f(serials.iter().map(f).collect());
    let wall_ms = pick(|s| s.wall_ms);
    let in_plugin = pick(|s| s.in_plugin);
    let starts_ms = pick(|s| s.starts_ms);
    let ours_ms = pick(|s| s.ours_ms());
    let share = pick(|s| s.share());
    let (low, high) = serials
        .iter()
        .map(Serial::share)
        .fold((f64::MAX, 0.0_f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    println!(
        "serial run (--jobs 1), medians over {RUNS} runs: {:.0} ms wall, {:.0} ms of it inside the plugin's calls ({:.0}%) and {:.0} ms the plugin's process starting (at the run's start and its restart); our overhead {:.0} ms, {:.1}% of the wall (from {:.1}% to {:.1}% over the runs; target at most 10%: ratio {:.2})",
        wall_ms,
        in_plugin,
        100.0 * in_plugin / wall_ms.max(1.0),
        starts_ms,
        ours_ms,
        100.0 * share,
        100.0 * low,
        100.0 * high,
        share / 0.10
    );
    println!(
        "  of which: {:.0} ms inside clauses but outside the plugin's calls and its restart (the harness's checks and bookkeeping); {:.0} ms outside clauses and the plugin's start (the harness starting, the capability probe, stopping the plugin, reports)",
        pick(|s| s.inside_clauses_ms()),
        pick(|s| s.outside_clauses_ms()),
    );
    // A plugin that answers one call at a time (kubernetes-csi's hostpath driver holds one lock
    // over every call) cannot be driven faster than the sum of its answers, whatever --jobs:
    // that sum is the floor of our run on it, and its distance from our median is what our
    // scheduling and bookkeeping add on such a plugin (target at most 10% above).
    let mounts = pick(|s| s.mounts_ms);
    let our_ms = our_median.as_secs_f64() * 1000.0;
    let above = our_ms / in_plugin.max(1.0) - 1.0;
    // Below the floor, the plugin answered calls side by side: the floor is not this plugin's.
    let distance = if above < 0.0 {
        format!(
            "is {:.0}% below it: this plugin answers calls in parallel, and the floor does not apply",
            -100.0 * above
        )
    } else {
        format!(
            "is {:.0}% above it (target at most 10%: ratio {:.2})",
            100.0 * above,
            above / 0.10
        )
    };
    let with_starts = our_ms / (in_plugin + starts_ms).max(1.0) - 1.0;
    println!(
        "floor (a plugin that answers one call at a time): its own time for our calls, one after another, {:.0} ms ({:.0} ms of it publishing and unpublishing){}; our --jobs 8 median {:.0} ms {distance}; {:.0}% {} it and the plugin's process starting ({:.0} ms)",
        in_plugin,
        mounts,
        baseline
            .map(|b| format!(
                ", {:.2}x csi-sanity's whole run (the lowest ratio such a plugin allows)",
                in_plugin / 1000.0 / b
            ))
            .unwrap_or_default(),
        our_ms,
        100.0 * with_starts.abs(),
        if with_starts < 0.0 { "below" } else { "above" },
        starts_ms
    );
    let mut slowest: Vec<_> = rec.cases.iter().collect();
    slowest.sort_by_key(|c| std::cmp::Reverse(c.duration_ms));
    println!("five slowest clauses (--jobs 8):");
    for c in slowest.iter().take(5) {
        println!("  {:>6} ms  {}", c.duration_ms, c.clause);
    }
    common::print_rss(
        "normal run (--jobs 8, the largest of the runs above)",
        our_rss,
        common::NORMAL_RSS_TARGET,
    );
    let waited = budget_wait_ms(&rec);
    let clause_time: f64 = rec.cases.iter().map(|c| c.duration_ms as f64).sum();
    println!(
        "clauses waited {:.0} ms in all for the node's attachment budget ({:.1}% of clause time)",
        waited,
        100.0 * waited / clause_time.max(1.0)
    );
}
