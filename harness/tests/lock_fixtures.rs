//! Runs the lock client suite against the reference client lock-sidecar, correct, with each
//! fault switch of fixtures/lock, and with each variant, and checks every verdict exactly.
//!
//! A fixture's `expect.toml` names the switches, the pattern (`shim`, the default, or
//! `sidecar`) and extra harness arguments. Every run uses the command lines the lock guide (docs/guides/lock.md) gives.

mod support;

use std::path::PathBuf;

use support::{Expect, fixture_dirs, root, run_and_check, unproven_must_clauses};

fn lock_sidecar() -> PathBuf {
    support::workspace_bin("lock-sidecar")
}

/// The client's timing on the fast profile: TTL and lock delay 1 s, give up after 2 s.
const CLIENT_FLAGS: &str = "--path {path} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms";

/// CLIENT_FLAGS with a fixture's `plugin_args` (flag and value pairs) in place of the flags
/// they name, or after them.
fn client_flags(plugin_args: &[String]) -> String {
    let mut flags: Vec<String> = CLIENT_FLAGS.split(' ').map(String::from).collect();
    for pair in plugin_args.chunks(2) {
        match flags.iter().position(|f| *f == pair[0]) {
            Some(i) if pair.len() == 2 => flags[i + 1] = pair[1].clone(),
            _ => flags.extend(pair.iter().cloned()),
        }
    }
    flags.join(" ")
}

fn args(expect: &Expect) -> Vec<String> {
    let switches: Vec<String> = expect
        .faults
        .iter()
        .map(|f| format!("--fault {f}"))
        .chain(expect.variants.iter().map(|v| format!("--variant {v}")))
        .collect();
    let bin = lock_sidecar().display().to_string();
    let mut client = format!("{bin} {}", client_flags(&expect.plugin_args));
    for s in &switches {
        client.push(' ');
        client.push_str(s);
    }
    let mut args = vec!["lock".to_string()];
    if expect.pattern.as_deref() == Some("sidecar") {
        args.extend([
            "--sidecar".into(),
            format!("{client} --sentinel {{sentinel}}"),
        ]);
    } else {
        args.extend(["--client".into(), format!("{client} -- {{protected}}")]);
    }
    args.extend(
        [
            "--give-up",
            "2s",
            "--stop-on-client-after",
            "1s",
            "--profile",
            "fast",
        ]
        .map(String::from),
    );
    // run_and_check adds the fixture's own `args`.
    args
}

#[test]
fn reference_lock_sidecar_passes_every_clause() {
    let expect = Expect {
        description: "reference lock-sidecar (shim)".into(),
        ..Expect::default()
    };
    let dir = root().join("reference-plugins/lock-sidecar");
    run_and_check(&dir, &args(&expect), &expect, "lock-sidecar");
}

/// The campaign clause: 22 s of a fixture run's 25 s on the fast profile.
const CAMPAIGN: &str = "LOCK-SINGLETON";

fn fixture(name: &str) {
    let dir = root().join("fixtures/lock").join(name);
    let mut expect = Expect::load(&dir);
    // A fault fixture that does not name the campaign clause leaves it out: the campaign is
    // judged on the reference and every variant (which must pass it), on the faults that name
    // it, and by the two campaign tests below. Running it in every other fault fixture cost
    // a minute of each test run for verdicts no fixture states.
    let names_campaign = [&expect.fail, &expect.skip, &expect.blocked]
        .iter()
        .any(|l| l.iter().any(|c| c == CAMPAIGN));
    let own_tags = expect.args.iter().any(|a| a == "--tags");
    if !name.starts_with("variant-") && !names_campaign && !own_tags {
        expect
            .args
            .extend(["--tags".into(), format!("not @{CAMPAIGN}")]);
    }
    run_and_check(&dir, &args(&expect), &expect, name);
}

/// One test per fixture directory; `every_fixture_is_listed` keeps this list complete.
macro_rules! fixtures {
    ($($name:ident => $dir:literal),* $(,)?) => {
        const LISTED: &[&str] = &[$($dir),*];
        $(
            #[test]
            fn $name() {
                fixture($dir);
            }
        )*
    };
}

fixtures! {
    deadlock_on_sigterm => "deadlock-on-sigterm",
    ignores_conflict => "ignores-conflict",
    ignores_namespace => "ignores-namespace",
    ignores_sigint => "ignores-sigint",
    ignores_sigterm => "ignores-sigterm",
    keeps_child => "keeps-child",
    malformed_release => "malformed-release",
    never_gives_up => "never-gives-up",
    never_releases => "never-releases",
    no_parent_death_signal => "no-parent-death-signal",
    no_request_timeout => "no-request-timeout",
    panics_on_late_409 => "panics-on-late-409",
    panics_on_sigterm => "panics-on-sigterm",
    renews_late => "renews-late",
    retries_forever_403 => "retries-forever-403",
    retries_release_forever => "retries-release-forever",
    sidecar_keeps_child => "sidecar-keeps-child",
    starts_before_acquire => "starts-before-acquire",
    ttl_as_number => "ttl-as-number",
    variant_bearer_token => "variant-bearer-token",
    variant_empty_cas => "variant-empty-cas",
    variant_exit_1 => "variant-exit-1",
    variant_exit_on_conflict => "variant-exit-on-conflict",
    variant_kill_child_on_signal => "variant-kill-child-on-signal",
    variant_long_ttl => "variant-long-ttl",
    variant_release_until_freed => "variant-release-until-freed",
    variant_renew_0_7 => "variant-renew-0.7",
    variant_renew_third => "variant-renew-third",
    variant_retries_for_ttl => "variant-retries-for-ttl",
    variant_same_group => "variant-same-group",
    variant_sidecar => "variant-sidecar",
    variant_task_api => "variant-task-api",
    variant_trusts_grace => "variant-trusts-grace",
    variant_very_long_ttl => "variant-very-long-ttl",
}

#[test]
fn every_fixture_is_listed() {
    let dirs = fixture_dirs("lock");
    let listed: std::collections::BTreeSet<String> = LISTED.iter().map(|s| s.to_string()).collect();
    assert_eq!(dirs, listed, "fixtures/lock and this file's list differ");
}

#[test]
fn every_must_clause_is_failed_by_some_fixture() {
    let missing = unproven_must_clauses("lock", LISTED);
    assert!(missing.is_empty(), "no fixture fails: {missing:?}");
}

/// Every fault switch of lock-sidecar has a fixture that turns it on.
#[test]
fn every_fault_switch_has_a_fixture() {
    // clap lists the possible values when one is wrong.
    let out = std::process::Command::new(lock_sidecar())
        .args(["--path", "x", "--fault", "no-such-fault", "--", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let values = err
        .split("[possible values: ")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .unwrap_or_else(|| panic!("no fault list in: {err}"));
    let mut used = std::collections::BTreeSet::new();
    for dir in LISTED {
        used.extend(Expect::load(&root().join("fixtures/lock").join(dir)).faults);
    }
    for fault in values.split(',').map(str::trim) {
        assert!(used.contains(fault), "no fixture turns on --fault {fault}");
    }
}

/// The campaign finds the client that keeps its protected process after losing the lock,
/// and the report carries the timeline, the overlapping window and the seed.
#[test]
fn keeps_child_campaign_draws_the_timeline() {
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("run.json");
    let expect = Expect {
        faults: vec!["keeps-child".into()],
        ..Expect::default()
    };
    let mut a = args(&expect);
    a.extend([
        "--tags".into(),
        "@LOCK-SINGLETON".into(),
        "--seed".into(),
        "11".into(),
    ]);
    let (status, record) = run_with_record(&a, &json, None);
    assert_eq!(status.status.code(), Some(1), "{status:?}");
    let case = record["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["clause"] == "LOCK-SINGLETON")
        .expect("the case");
    let reason = case["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("violation"), "{reason}");
    assert!(reason.contains("seed 11"), "{reason}");
    assert!(reason.contains("unreachable"), "{reason}");
    let svg = case["attachments"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["media_type"] == "image/svg+xml")
        .unwrap_or_else(|| panic!("no SVG attachment: {case}"));
    assert!(
        svg["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("<svg"),
        "{svg}"
    );
}

/// LOCK-SINGLETON's verdict on a client that keeps its protected process after a renew
/// conflict does not depend on the seed: the campaign's scheduled faults expose it on every
/// run, and the reference client passes on every run. Ten seeds each, five runs at a time.
/// (Named to sort first: libtest starts tests in name order, and this one takes 90 s.)
#[test]
fn campaign_verdict_does_not_depend_on_the_seed() {
    let runs: Vec<(bool, u64)> = [false, true]
        .into_iter()
        .flat_map(|faulty| (1..=10).map(move |seed| (faulty, seed)))
        .collect();
    let mut problems = Vec::new();
    for batch in runs.chunks(5) {
        let handles: Vec<_> = batch
            .iter()
            .map(|&(faulty, seed)| {
                std::thread::spawn(move || {
                    let dir = tempfile::tempdir().unwrap();
                    let json = dir.path().join("run.json");
                    let expect = Expect {
                        faults: if faulty {
                            vec!["ignores-conflict".into()]
                        } else {
                            Vec::new()
                        },
                        ..Expect::default()
                    };
                    let mut a = args(&expect);
                    a.extend(
                        ["--tags", "@LOCK-SINGLETON", "--clients", "2", "--seed"].map(String::from),
                    );
                    a.push(seed.to_string());
                    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
                        .args(&a)
                        .arg("--json")
                        .arg(&json)
                        .output()
                        .unwrap();
                    let record: serde_json::Value =
                        serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
                            .unwrap_or_default();
                    let case = record["cases"]
                        .as_array()
                        .and_then(|cs| cs.iter().find(|c| c["clause"] == "LOCK-SINGLETON"))
                        .cloned()
                        .unwrap_or_default();
                    (
                        faulty,
                        seed,
                        case["verdict"].as_str().unwrap_or("none").to_string(),
                        case["reason"].as_str().unwrap_or_default().to_string(),
                        String::from_utf8_lossy(&out.stderr).into_owned(),
                    )
                })
            })
            .collect();
        for h in handles {
            let (faulty, seed, verdict, reason, stderr) = h.join().unwrap();
            let ok = if faulty {
                verdict == "fail" && reason.contains("exposed by the scheduled fault")
            } else {
                verdict == "pass"
            };
            if !ok {
                problems.push(format!(
                    "{} seed {seed}: {verdict}\n{reason}\n{stderr}",
                    if faulty {
                        "ignores-conflict"
                    } else {
                        "reference"
                    }
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// LOCK-ACQUIRE-BACKOFF gets the same verdict on every run of one seed: the other holder keeps
/// the lock until the client's first run has retried (or ended), so where a fixed hold ended
/// against a client slow to start under load no longer decides between pass and skip. Five
/// runs of the reference client at once (the load is part of the test), seed 7.
#[test]
fn acquire_backoff_verdict_is_the_same_on_every_run() {
    let handles: Vec<_> = (0..5)
        .map(|_| {
            std::thread::spawn(|| {
                let dir = tempfile::tempdir().unwrap();
                let json = dir.path().join("run.json");
                let mut a = args(&Expect::default());
                a.extend(["--tags", "@LOCK-ACQUIRE-BACKOFF", "--seed", "7"].map(String::from));
                let (_, record) = run_with_record(&a, &json, None);
                record["cases"][0]["verdict"]
                    .as_str()
                    .unwrap_or("none")
                    .to_string()
            })
        })
        .collect();
    let verdicts: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(verdicts.iter().all(|v| v == "pass"), "{verdicts:?}");
}

/// A client named by a relative path is found from the directory nomad-conform runs in, though
/// the client itself runs in its task directory (it ended every clause in "No such file").
#[test]
fn a_client_named_by_a_relative_path_is_found_from_the_invoking_directory() {
    let bin = lock_sidecar();
    let dir = bin.parent().unwrap().parent().unwrap();
    let relative = bin.strip_prefix(dir).unwrap();
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("run.json");
    let client = format!("{} {CLIENT_FLAGS} -- {{protected}}", relative.display());
    let args = [
        "lock",
        "--client",
        &client,
        "--give-up",
        "2s",
        "--profile",
        "fast",
        "--tags",
        "@LOCK-EXIT-STATUS",
    ]
    .map(String::from);
    let (run, record) = run_with_record(&args, &json, Some(dir));
    assert_eq!(run.status.code(), Some(0), "{run:?}");
    assert_eq!(record["cases"][0]["verdict"], "pass", "{record}");
}

/// Runs nomad-conform with `args` and `--json json` (from `cwd` if given); its output and the
/// run's JSON record.
fn run_with_record(
    args: &[String],
    json: &std::path::Path,
    cwd: Option<&std::path::Path>,
) -> (std::process::Output, serde_json::Value) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"));
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let output = command.args(args).arg("--json").arg(json).output().unwrap();
    let text = std::fs::read_to_string(json)
        .unwrap_or_else(|e| panic!("no JSON record ({e}): {output:?}"));
    (output, serde_json::from_str(&text).unwrap())
}
