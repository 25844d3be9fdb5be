//! `nomad-conform lock --nomad-addr https://...`: the lock suite's fault-injecting proxy
//! forwards each client's plain requests to an agent over TLS and mutual TLS (the reference
//! Variables server serving TLS, with a CA and certificates the test makes), with the nomad
//! CLI's variables alone and with the flags; an agent that refuses the run is one line and
//! exit 3 before any clause.

use std::path::Path;
use std::process::{Command, Output};

use nomad_conform_reports::model::{RunRecord, Verdict};
use nomad_conform_variables::{
    AclConfig, LockEventKind, Profile, ServerConfig, Token, VariablesServer,
};

mod support;
#[path = "tls_pki/mod.rs"]
mod tls_pki;

const BIN: &str = env!("CARGO_BIN_EXE_nomad-conform");

fn client() -> String {
    format!(
        "{} --path {{path}} --ttl 1s --delay 1s --give-up 2s --max-backoff 500ms -- {{protected}}",
        support::workspace_bin("lock-sidecar").display()
    )
}

fn lock(args: &[&str], vars: &[(&str, &str)], json: &Path) -> Output {
    let mut cmd = Command::new(BIN);
    for k in tls_pki::NOMAD_CLI_VARS {
        cmd.env_remove(k);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.args([
        "lock",
        "--client",
        &client(),
        "--profile",
        "fast",
        "--seed",
        "7",
    ])
    .args(["--tags", "@LOCK-STARTS", "--json"])
    .arg(json)
    .args(args)
    .output()
    .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_reaches_a_mutual_tls_agent_from_variables_and_from_flags() {
    let pki = tls_pki::Pki::new();
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_tls(pki.server_config(true)),
    )
    .await
    .unwrap();
    let addr = server.nomad_addr();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let p = |p: &Path| p.display().to_string();
    let (ca, cert, key) = (p(&pki.ca), p(&pki.client_cert), p(&pki.client_key));

    // The nomad CLI's variables alone, beside --nomad-addr.
    let o = tokio::task::spawn_blocking({
        let (addr, ca, cert, key, json) = (
            addr.clone(),
            ca.clone(),
            cert.clone(),
            key.clone(),
            json.clone(),
        );
        move || {
            lock(
                &["--nomad-addr", &addr],
                &[
                    ("NOMAD_CACERT", &ca),
                    ("NOMAD_CLIENT_CERT", &cert),
                    ("NOMAD_CLIENT_KEY", &key),
                    ("NOMAD_REGION", "global"),
                ],
                &json,
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let record: RunRecord = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let case = record
        .cases
        .iter()
        .find(|c| c.clause == "LOCK-STARTS")
        .unwrap();
    assert_eq!(case.verdict, Verdict::Pass, "{}", text(&o));
    let details = &record.subject.details;
    assert!(details["server"].contains(&addr), "{details:?}");
    assert!(
        details["TLS"].contains(&format!("client certificate {cert}")),
        "{details:?}"
    );
    assert_eq!(details["region"], "global");
    // The client's lock went through the proxy and TLS to the server.
    let acquired = server
        .history()
        .iter()
        .filter(|e| matches!(e.kind, LockEventKind::Acquired { .. }))
        .count();
    assert!(acquired >= 1, "{:?}", server.history());

    // The flags.
    let o = tokio::task::spawn_blocking({
        let (addr, json) = (addr.clone(), json.clone());
        move || {
            lock(
                &[
                    "--nomad-addr",
                    &addr,
                    "--ca-cert",
                    &ca,
                    "--client-cert",
                    &cert,
                    "--client-key",
                    &key,
                    "--tls-server-name",
                    "server.global.nomad",
                    // A variable of its own: the first run's lock may still be in its delay.
                    "--path",
                    "nomad/jobs/conform/lock-flags",
                ],
                &[],
                &json,
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // No client certificate: one line, exit 3, before any clause.
    let o = tokio::task::spawn_blocking({
        let (addr, ca, json) = (addr.clone(), p(&pki.ca), dir.path().join("none.json"));
        move || lock(&["--nomad-addr", &addr, "--ca-cert", &ca], &[], &json)
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("nomad-conform: error: failed to reach Nomad at https://")
            && stderr.contains("requires a client certificate"),
        "{stderr}"
    );
    assert!(!dir.path().join("none.json").exists());
    server.shutdown().await.unwrap();
}

/// An agent with `tls { http = true }` and ACLs, no client certificates: the CA directory and
/// the token from the nomad CLI's variables alone; the token reaches the clients and never the
/// console or the record; without verification the report says so; a name the certificate does
/// not have is one line and exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_reaches_a_tls_agent_with_a_token_and_says_when_nothing_is_verified() {
    let pki = tls_pki::Pki::new();
    let token = "lock-tls-mgmt-9c1d2e3f";
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_acl(AclConfig::enabled().with_token(Token::management(token)))
            .with_tls(pki.server_config(false)),
    )
    .await
    .unwrap();
    let addr = server.nomad_addr();
    let dir = tempfile::tempdir().unwrap();
    let ca_dir = pki.ca_dir.display().to_string();

    let run = |args: Vec<String>, vars: Vec<(&'static str, String)>, json: std::path::PathBuf| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let o = lock(&args, &vars, &json);
            let record = std::fs::read_to_string(&json).unwrap_or_default();
            (o, record)
        })
    };

    // NOMAD_CAPATH and NOMAD_TOKEN, as a shell set up for `nomad` has them.
    let json = dir.path().join("capath.json");
    let (o, record_text) = run(
        vec!["--nomad-addr".into(), addr.clone()],
        vec![
            ("NOMAD_CAPATH", ca_dir.clone()),
            ("NOMAD_TOKEN", token.into()),
        ],
        json,
    )
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let record: RunRecord = serde_json::from_str(&record_text).unwrap();
    assert!(
        record
            .cases
            .iter()
            .any(|c| c.clause == "LOCK-STARTS" && c.verdict == Verdict::Pass),
        "{}",
        text(&o)
    );
    let details = &record.subject.details;
    assert!(
        details["TLS"].contains(&format!("CA {ca_dir}"))
            && details["TLS"].contains("no client certificate"),
        "{details:?}"
    );
    assert!(!details.contains_key("warning"), "{details:?}");
    // The clients' requests carried the token (ACLs are on: without it nothing is granted).
    assert!(
        server
            .history()
            .iter()
            .any(|e| matches!(e.kind, LockEventKind::Acquired { .. })),
        "{:?}",
        server.history()
    );
    assert!(!record_text.contains(token), "the token is in the record");
    assert!(!text(&o).contains(token), "the token is on the console");

    // Without verification: it works, and the console and the report say so.
    let json = dir.path().join("skip.json");
    let (o, record_text) = run(
        vec![
            "--nomad-addr".into(),
            addr.clone(),
            "--tls-skip-verify".into(),
            "--path".into(),
            "nomad/jobs/conform/lock-skip".into(),
        ],
        vec![("NOMAD_TOKEN", token.into())],
        json,
    )
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("warning: TLS certificate verification is off"),
        "{}",
        text(&o)
    );
    let record: RunRecord = serde_json::from_str(&record_text).unwrap();
    let details = &record.subject.details;
    assert!(
        details
            .get("warning")
            .is_some_and(|w| w.contains("verification is off")),
        "{details:?}"
    );
    assert!(record.command_line.iter().any(|a| a == "--tls-skip-verify"));

    // A name the server's certificate does not have: one line, exit 3, no record.
    let json = dir.path().join("name.json");
    let (o, record_text) = run(
        vec![
            "--nomad-addr".into(),
            addr.clone(),
            "--ca-path".into(),
            ca_dir.clone(),
            "--tls-server-name".into(),
            "nomad.example".into(),
        ],
        vec![("NOMAD_TOKEN", token.into())],
        json,
    )
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("is not valid for the name \"nomad.example\""),
        "{stderr}"
    );
    assert!(record_text.is_empty());
    assert!(!stderr.contains(token));
    server.shutdown().await.unwrap();
}

#[test]
fn tls_settings_without_nomad_addr_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The shell's NOMAD_ADDR never points the lock suite at a cluster; our TLS flags without
    // --nomad-addr are a usage error.
    let o = lock(
        &["--ca-cert", "/etc/nomad.d/ca.pem"],
        &[("NOMAD_ADDR", "https://prod.example:4646")],
        &dir.path().join("r.json"),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--ca-cert goes with --nomad-addr"),
        "{stderr}"
    );
}
