//! The Variables server suite against the reference server: every clause passes, through the
//! server `nomad-conform variables` starts itself and through `--nomad-addr` (which also shows
//! that a run leaves nothing behind on the server); every clause fails on at least one broken
//! server (a reference server with one fault switch on), found by the suite as it would find
//! it on a real cluster. A fixture's `fail` names every clause the suite judges failed on its
//! broken server (a clause that only leaks, because the broken server will not give a lock
//! back, is not named).

use std::collections::BTreeSet;

use futures::StreamExt as _;
use nomad_conform::console::Output;
use nomad_conform::run::SuiteOptions;
use nomad_conform_reports::model::{RunRecord, Verdict};
use nomad_conform_variables::{
    AclConfig, Fault, Profile, ServerConfig, ServerHandle, Token, VariablesServer,
};

const BIN: &str = env!("CARGO_BIN_EXE_nomad-conform");

#[path = "tls_pki/mod.rs"]
mod tls_pki;

/// The clauses that need the reference server (`@requires-reference-server`).
const REFERENCE_ONLY: &[&str] = &[
    "VARIABLES-ACL-WORKLOAD",
    "VARIABLES-ACL-WORKLOAD-LOCK",
    "VARIABLES-RESTART-KEEPS-LOCK",
];

/// A fixture of fixtures/variables: a broken server (one fault switch of the reference
/// server) and the clauses the suite must fail on it, or a variant and what it skips.
#[derive(serde::Deserialize)]
struct Expect {
    description: String,
    #[serde(default)]
    faults: Vec<String>,
    #[serde(default)]
    fail: Vec<String>,
    #[serde(default)]
    skip: Vec<String>,
}

fn fixture(name: &str) -> Expect {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/variables")
        .join(name)
        .join("expect.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each broken server of fixtures/variables, and the clauses the suite must fail on it.
fn broken() -> Vec<(Fault, Vec<String>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/variables");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.contains("variant"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| {
            let e = fixture(n);
            assert_eq!(e.faults.len(), 1, "{n}: one fault switch per fixture");
            assert!(!e.description.is_empty(), "{n}: say what the server breaks");
            let fault: Fault = e.faults[0].parse().unwrap_or_else(|e| panic!("{n}: {e:?}"));
            (fault, e.fail)
        })
        .collect()
}

#[test]
fn every_fault_switch_has_a_fixture() {
    let covered: BTreeSet<String> = broken().iter().map(|(f, _)| f.name().to_string()).collect();
    for f in Fault::ALL {
        assert!(
            covered.contains(f.name()),
            "no fixture turns on {}",
            f.name()
        );
    }
}

/// A reference server with the fast numbers, ACLs on and `token` as its management token.
async fn server(token: &str, fault: Option<Fault>) -> ServerHandle {
    let mut config = ServerConfig::localhost()
        .with_profile(Profile::fast())
        .with_acl(AclConfig::enabled().with_token(Token::management(token)));
    if let Some(f) = fault {
        config = config.with_fault(f);
    }
    VariablesServer::start(config)
        .await
        .expect("start a server")
}

struct Run {
    code: Option<i32>,
    record: RunRecord,
    json: String,
    output: String,
}

/// `nomad-conform <args> --seed 7 --json <tmp>`, and its record.
async fn nomad_conform(args: &[&str]) -> Run {
    nomad_conform_with(args, &[]).await
}

/// [`nomad_conform`] with the nomad CLI's variables cleared and `vars` set.
async fn nomad_conform_with(args: &[&str], vars: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let mut cmd = tokio::process::Command::new(BIN);
    for k in tls_pki::NOMAD_CLI_VARS {
        cmd.env_remove(k);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd
        .args(args)
        .args(["--seed", "7", "--json"])
        .arg(&json)
        .output()
        .await
        .expect("run nomad-conform");
    let output = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text =
        std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("no JSON record ({e})\n{output}"));
    Run {
        code: out.status.code(),
        record: serde_json::from_str(&text).unwrap(),
        json: text,
        output,
    }
}

/// Every case whose verdict is not `want`, with its reason.
fn not(record: &RunRecord, want: Verdict, except: &[&str]) -> Vec<String> {
    record
        .cases
        .iter()
        .filter(|c| !except.contains(&c.clause.as_str()) && c.verdict != want)
        .map(|c| {
            format!(
                "{}: {}\n    {}",
                c.clause,
                c.verdict.as_str(),
                c.reason.as_deref().unwrap_or("").replace('\n', "\n    ")
            )
        })
        .collect()
}

/// The suite's clauses with their level (`MUST`, `SHOULD`).
fn clauses() -> Vec<(String, String)> {
    let out = std::process::Command::new(BIN)
        .args(["list", "variables"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect()
}

fn must_clauses() -> BTreeSet<String> {
    clauses()
        .into_iter()
        .filter(|(_, level)| level == "MUST")
        .map(|(id, _)| id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_passes_every_clause() {
    let run = nomad_conform(&["variables", "--profile", "fast"]).await;
    let wrong = not(&run.record, Verdict::Pass, &[]);
    assert!(
        wrong.is_empty(),
        "clauses that do not pass on the reference server:\n{}\n{}",
        wrong.join("\n"),
        run.output
    );
    assert_eq!(run.record.cases.len(), clauses().len());
    assert_eq!(run.code, Some(0), "{}", run.output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_nomad_addr_every_clause_passes_and_nothing_is_left_behind() {
    let token = "mgmt-3f1d6a0c-7c55";
    let server = server(token, None).await;
    let addr = server.nomad_addr();
    let run = nomad_conform(&[
        "variables",
        "--nomad-addr",
        &addr,
        "--token",
        token,
        "--profile",
        "fast",
    ])
    .await;
    let wrong = not(&run.record, Verdict::Pass, REFERENCE_ONLY);
    assert!(
        wrong.is_empty(),
        "clauses that do not pass through --nomad-addr:\n{}\n{}",
        wrong.join("\n"),
        run.output
    );
    for id in REFERENCE_ONLY {
        let case = run.record.cases.iter().find(|c| c.clause == *id).unwrap();
        assert_eq!(case.verdict, Verdict::Skip, "{id}");
        let reason = case.reason.as_deref().unwrap_or_default();
        assert!(reason.contains("reference Variables server"), "{reason}");
    }
    assert_eq!(run.code, Some(0), "{}", run.output);
    // What the scenarios made is gone again: variables, policies, tokens.
    let left: Vec<String> = server
        .variables()
        .iter()
        .map(|v| format!("{}/{}", v.metadata.namespace, v.metadata.path))
        .collect();
    assert!(left.is_empty(), "variables left behind: {left:?}");
    let acl = server.acl();
    assert!(acl.policies.is_empty(), "policies left: {:?}", acl.policies);
    assert_eq!(acl.tokens.len(), 1, "tokens left: {:?}", acl.tokens);
    // The management token never reaches the record.
    assert!(!run.json.contains(token), "the token is in the record");
    server.shutdown().await.unwrap();
}

/// The reference server over mutual TLS (an agent with `tls { http = true,
/// verify_https_client = true }`), with a CA and certificates the test makes: every clause
/// passes through `--nomad-addr https://` with the nomad CLI's variables alone, and with the
/// flags; a run without a client certificate is one line and exit 3 before any clause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_mutual_tls_every_clause_passes_from_the_nomad_cli_variables() {
    let pki = tls_pki::Pki::new();
    let token = "mgmt-tls-5b7e1f0a";
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_acl(AclConfig::enabled().with_token(Token::management(token)))
            .with_tls(pki.server_config(true)),
    )
    .await
    .unwrap();
    let addr = server.nomad_addr();
    assert!(addr.starts_with("https://127.0.0.1:"), "{addr}");
    let p = |p: &std::path::Path| p.display().to_string();
    let (ca, cert, key) = (p(&pki.ca), p(&pki.client_cert), p(&pki.client_key));
    let run = nomad_conform_with(
        &["variables", "--nomad-addr", &addr, "--profile", "fast"],
        &[
            ("NOMAD_CACERT", &ca),
            ("NOMAD_CLIENT_CERT", &cert),
            ("NOMAD_CLIENT_KEY", &key),
            ("NOMAD_TOKEN", token),
        ],
    )
    .await;
    let wrong = not(&run.record, Verdict::Pass, REFERENCE_ONLY);
    assert!(wrong.is_empty(), "{}\n{}", wrong.join("\n"), run.output);
    assert_eq!(run.code, Some(0), "{}", run.output);
    let tls = &run.record.subject.details["TLS"];
    assert!(
        tls.contains(&format!("CA {ca}")) && tls.contains(&format!("client certificate {cert}")),
        "{tls}"
    );
    assert!(!run.json.contains(token), "the token is in the record");
    let key_line = std::fs::read_to_string(&pki.client_key).unwrap();
    let key_line = key_line.lines().nth(1).unwrap();
    assert!(!run.json.contains(key_line) && !run.output.contains(key_line));

    // The flags, one clause.
    let run = nomad_conform_with(
        &[
            "variables",
            "--nomad-addr",
            &addr,
            "--profile",
            "fast",
            "--token",
            token,
            "--ca-cert",
            &ca,
            "--client-cert",
            &cert,
            "--client-key",
            &key,
            "--tags",
            "@VARIABLES-SET-CREATE",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.output);
    assert!(
        run.record.cases.iter().any(|c| c.verdict == Verdict::Pass),
        "{}",
        run.output
    );

    assert!(!run.json.contains(token) && !run.output.contains(token));

    // Without verification (NOMAD_SKIP_VERIFY, as the nomad CLI reads it): it works, and the
    // console and the report's subject say that certificates were not verified.
    let run = nomad_conform_with(
        &[
            "variables",
            "--nomad-addr",
            &addr,
            "--profile",
            "fast",
            "--tags",
            "@VARIABLES-SET-CREATE",
        ],
        &[
            ("NOMAD_SKIP_VERIFY", "true"),
            ("NOMAD_CLIENT_CERT", &cert),
            ("NOMAD_CLIENT_KEY", &key),
            ("NOMAD_TOKEN", token),
        ],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.output);
    assert!(
        run.output
            .contains("warning: TLS certificate verification is off"),
        "{}",
        run.output
    );
    let details = &run.record.subject.details;
    assert!(
        details
            .get("warning")
            .is_some_and(|w| w.contains("verification is off")),
        "{details:?}"
    );
    assert!(
        details["TLS"].contains("not verified (--tls-skip-verify)"),
        "{details:?}"
    );

    // Without the client certificate: the server cannot be used.
    let mut cmd = tokio::process::Command::new(BIN);
    for k in tls_pki::NOMAD_CLI_VARS {
        cmd.env_remove(k);
    }
    let out = cmd
        .args([
            "variables",
            "--nomad-addr",
            &addr,
            "--ca-cert",
            &ca,
            "--token",
            token,
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("requires a client certificate"), "{stderr}");
    assert!(!stderr.contains(token), "{stderr}");
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_acls_the_acl_clauses_are_skipped_with_the_reason() {
    let server = VariablesServer::start(ServerConfig::localhost().with_profile(Profile::fast()))
        .await
        .unwrap();
    let addr = server.nomad_addr();
    let run = nomad_conform(&[
        "variables",
        "--nomad-addr",
        &addr,
        "--profile",
        "fast",
        "--tags",
        "@acl or @VARIABLES-SET-CREATE",
    ])
    .await;
    let skip = fixture("variant-acls-off").skip;
    let acl: Vec<_> = run
        .record
        .cases
        .iter()
        .filter(|c| c.clause.starts_with("VARIABLES-ACL-"))
        .collect();
    assert_eq!(acl.len(), 14);
    assert_eq!(
        acl.iter()
            .map(|c| c.clause.clone())
            .collect::<BTreeSet<_>>(),
        skip.iter().cloned().collect::<BTreeSet<_>>(),
        "fixtures/variables/variant-acls-off names the clauses a server without ACLs skips"
    );
    for case in acl {
        assert_eq!(case.verdict, Verdict::Skip, "{}", case.clause);
        let reason = case.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("ACLs are off") || reason.contains("reference Variables server"),
            "{}: {reason}",
            case.clause
        );
    }
    let created = run
        .record
        .cases
        .iter()
        .find(|c| c.clause == "VARIABLES-SET-CREATE")
        .unwrap();
    assert_eq!(created.verdict, Verdict::Pass, "{}", run.output);
    server.shutdown().await.unwrap();
}

/// SHOULD clauses are proven too: each is named by a broken server's fixture (the runs of
/// `every_must_clause_fails_on_a_broken_server` check that it fails there).
#[test]
fn every_should_clause_fails_on_a_broken_server_too() {
    let named: BTreeSet<String> = broken()
        .iter()
        .flat_map(|(_, ids)| ids.iter().cloned())
        .collect();
    let unproven: Vec<String> = clauses()
        .into_iter()
        .filter(|(id, level)| level == "SHOULD" && !named.contains(id))
        .map(|(id, _)| id)
        .collect();
    assert!(
        unproven.is_empty(),
        "SHOULD clauses no broken server fails: {unproven:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_must_clause_fails_on_a_broken_server() {
    let broken = broken();
    let named: BTreeSet<String> = broken
        .iter()
        .flat_map(|(_, ids)| ids.iter().cloned())
        .collect();
    let unproven: Vec<String> = must_clauses().difference(&named).cloned().collect();
    assert!(
        unproven.is_empty(),
        "MUST clauses no broken server fails: {unproven:?}"
    );

    // Through --nomad-addr, as against a real cluster, several at a time; strict, so that a
    // broken server failing SHOULD clauses only still fails the run (exit status 1).
    let cases = broken
        .iter()
        .filter(|(_, ids)| !ids.iter().any(|id| REFERENCE_ONLY.contains(&id.as_str())));
    let problems: Vec<String> = futures::stream::iter(cases)
        .map(|(fault, ids)| async move {
            let token = "broken-server-management";
            let server = server(token, Some(*fault)).await;
            let tags: Vec<String> = ids.iter().map(|id| format!("@{id}")).collect();
            let run = nomad_conform(&[
                "variables",
                "--nomad-addr",
                &server.nomad_addr(),
                "--token",
                token,
                "--profile",
                "fast",
                "--tags",
                &tags.join(" or "),
                "--strict",
            ])
            .await;
            server.shutdown().await.unwrap();
            check(*fault, ids, &run.record, run.code, &run.output)
        })
        .buffer_unordered(6)
        .flat_map(futures::stream::iter)
        .collect()
        .await;

    // The clauses that need the reference server: the suite starts the broken server itself.
    let mut problems = problems;
    for (fault, ids) in broken
        .iter()
        .filter(|(_, ids)| ids.iter().any(|id| REFERENCE_ONLY.contains(&id.as_str())))
    {
        let tags: Vec<String> = ids.iter().map(|id| format!("@{id}")).collect();
        let common = SuiteOptions {
            tags: Some(tags.join(" or ")),
            jobs: 2,
            seed: Some(7),
            strict: true,
            output: Output {
                quiet: true,
                verbose: false,
            },
            ..SuiteOptions::default()
        };
        let config = ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_fault(*fault);
        let record = nomad_conform::kinds::variables::run_reference(&common, config)
            .await
            .expect("run the suite in-process");
        problems.extend(check(*fault, ids, &record, None, ""));
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The named clauses failed (and, from the binary, the exit status says so).
fn check(
    fault: Fault,
    ids: &[String],
    record: &RunRecord,
    code: Option<i32>,
    output: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for id in ids {
        match record.cases.iter().find(|c| &c.clause == id) {
            None => problems.push(format!("{fault}: {id} did not run\n{output}")),
            Some(c) if !c.verdict.is_failure() => problems.push(format!(
                "{fault}: {id} is {}, not a failure\n    {}",
                c.verdict.as_str(),
                c.reason.as_deref().unwrap_or("").replace('\n', "\n    ")
            )),
            Some(c) => {
                let reason = c.reason.as_deref().unwrap_or_default();
                if !reason.contains("expected:") || !reason.contains("curl ") {
                    problems.push(format!(
                        "{fault}: {id}'s failure does not say what was expected and how to repeat it:\n    {reason}"
                    ));
                }
            }
        }
    }
    if code.is_some() && code != Some(1) {
        problems.push(format!(
            "{fault}: exit status {code:?}, expected 1\n{output}"
        ));
    }
    problems
}

#[test]
fn list_names_every_clause_with_its_basis() {
    let out = std::process::Command::new(BIN)
        .args(["list", "variables", "--format", "json"])
        .output()
        .unwrap();
    let clauses: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        (45..=60).contains(&clauses.len()),
        "{} clauses",
        clauses.len()
    );
    for c in &clauses {
        let id = c["id"].as_str().unwrap();
        let basis = c["basis"].as_str().unwrap_or_default();
        assert!(basis.starts_with("Nomad "), "{id}: basis {basis:?}");
        assert!(
            !c["text"].as_str().unwrap_or_default().contains("Basis:"),
            "{id}"
        );
    }
}

/// API settings the variables suite cannot use are refused before anything runs (exit 2, one
/// line): a namespace (its scenarios choose their own), TLS without --nomad-addr (the shell's
/// NOMAD_ADDR never points it at a cluster), a TLS flag for a plain address.
#[test]
fn api_settings_it_cannot_use_are_usage_errors() {
    for (args, needle) in [
        (
            vec!["--nomad-addr", "http://127.0.0.1:1", "--namespace", "prod"],
            "--namespace is not for the variables suite",
        ),
        (
            vec!["--ca-cert", "/etc/nomad.d/ca.pem"],
            "--ca-cert goes with --nomad-addr",
        ),
        (
            vec!["--nomad-addr", "http://127.0.0.1:1", "--tls-skip-verify"],
            "--tls-skip-verify is for an https:// address",
        ),
    ] {
        let mut cmd = std::process::Command::new(BIN);
        for k in tls_pki::NOMAD_CLI_VARS {
            cmd.env_remove(k);
        }
        let out = cmd
            .arg("variables")
            .args(&args)
            .env("NOMAD_ADDR", "https://prod.example:4646")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
}
