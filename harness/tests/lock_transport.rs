//! The lock suite's transport end to end: the reference Variables server, a fault-injecting
//! proxy in front of it, the probe listener, a shim client running the real
//! `nomad-conform probe`, and the checker over what was recorded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use nomad_conform::nomad_api::{Target, Upstream};
use nomad_conform::plugins::lock::proxy_faults::{Fault, Operation, PartitionMode};
use nomad_conform::plugins::lock::{
    ApiAddr, ClientOptions, ClientSpec, Outcome, ProbeCommand, ProbeListener, Proxy, ProxyConfig,
    RunningClient,
};
use nomad_conform::steps::lock::checker::{
    ViolationKind, holder_intervals, lock_owners, overlaps, runs_without_lock, violations,
};
use nomad_conform_reports::model::{ExitStatus, Request, Response};
use nomad_conform_variables::{LockEventKind, Profile, ServerConfig, VariablesServer};
use tokio::net::TcpStream;

const PATH: &str = "app/lock";

fn probe_command() -> ProbeCommand {
    ProbeCommand::binary(env!("CARGO_BIN_EXE_nomad-conform"))
}

/// One HTTP/1.1 request with hyper; (status, body) or why it failed.
async fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = hyper::Request::builder()
        .method(method)
        .uri(target)
        .header("host", addr.to_string())
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

fn lock_id(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["Lock"]["ID"].as_str().unwrap_or_default().to_string()
}

async fn acquire(addr: SocketAddr) -> (u16, String) {
    send(
        addr,
        "PUT",
        &format!("/v1/var/{PATH}?lock-acquire="),
        r#"{"Path":"app/lock","Items":null,"Lock":{"TTL":"5s","LockDelay":"1s"}}"#,
    )
    .await
    .expect("acquire answered")
}

/// A short directory for unix sockets (paths are limited to about 107 bytes).
fn short_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("nclt")
        .tempdir_in("/tmp")
        .expect("temp dir")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shim_client_runs_the_probe_and_its_interval_is_recorded() {
    let dir = short_dir();
    let server = VariablesServer::start(ServerConfig::localhost().with_profile(Profile::fast()))
        .await
        .expect("server");
    let proxy = Proxy::start(ProxyConfig::new(
        "a",
        Target::plain(Upstream::of_server(&server)),
    ))
    .await
    .expect("proxy");
    let listener = ProbeListener::bind(&dir.path().join("p.sock"))
        .await
        .expect("listener");
    let opts = ClientOptions::new(
        "a",
        ApiAddr::parse(&proxy.nomad_addr()).expect("addr"),
        PATH,
        listener.socket_path(),
        probe_command(),
    );
    let spec = ClientSpec::Shim {
        command: "{protected} & sleep 1; kill $!; wait".into(),
    };
    let client = RunningClient::start(&spec, &opts).await.expect("client");
    let status = client.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(
        status,
        Some(ExitStatus::Exited { code: 0 }),
        "{:#?}",
        client.tasks()
    );

    let probe = listener
        .wait_ended("a", Duration::from_secs(5))
        .await
        .unwrap_or_else(|| panic!("no ended probe: {:?}", listener.connections()));
    let end = probe.end.expect("end");
    let ran = end - probe.start;
    // The shim kills it a second after starting it; the interval starts when the probe has
    // connected, which on a loaded machine (a debug build's start) took 850 ms once.
    assert!(
        ran >= Duration::from_millis(50) && ran < Duration::from_secs(3),
        "{ran:?}"
    );
    assert_eq!(probe.exit, Some(143), "SIGTERM is reported as 143");
    assert!(!probe.killed);
    assert!(probe.beats >= 5, "{probe:?}");
    assert!(probe.start >= client.started());
    assert!(end <= client.exited_at().expect("exited") + Duration::from_millis(100));
    // The probe got the client's environment and said which process it was.
    assert_ne!(probe.pid, 0);
    assert_ne!(probe.pid as i32, client.pid());
    assert!(
        client
            .env()
            .iter()
            .any(|(k, v)| k == "NOMAD_ADDR" && *v == proxy.nomad_addr()),
        "{:?}",
        client.env()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_probe_counts_as_killed() {
    let dir = short_dir();
    let listener = ProbeListener::bind(&dir.path().join("p.sock"))
        .await
        .expect("listener");
    let argv = probe_command().argv(listener.socket_path(), "k", None);
    let mut child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .kill_on_drop(true)
        .spawn()
        .expect("probe");
    listener
        .wait_started("k", Duration::from_secs(5))
        .await
        .expect("started");
    child.start_kill().expect("kill");
    let _ = child.wait().await;
    let i = listener
        .wait_ended("k", Duration::from_secs(5))
        .await
        .expect("ended");
    assert!(i.killed, "{i:?}");
    assert_eq!(i.exit, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_records_forwards_injects_and_partitions() {
    let server = VariablesServer::start(ServerConfig::localhost().with_profile(Profile::fast()))
        .await
        .expect("server");
    let proxy = Proxy::start(
        ProxyConfig::new("a", Target::plain(Upstream::of_server(&server)))
            .with_token(Some("s3cret".into())),
    )
    .await
    .expect("proxy");
    let addr = proxy.addr().expect("tcp");

    let (status, body) = acquire(addr).await;
    assert_eq!(status, 200, "{body}");
    let id = lock_id(&body);
    assert_eq!(id.len(), 36, "{body}");
    let renew_body = format!(r#"{{"Lock":{{"ID":"{id}"}}}}"#);
    let renew = format!("/v1/var/{PATH}?lock-renew=");
    assert_eq!(send(addr, "PUT", &renew, &renew_body).await.unwrap().0, 200);

    // An injected 503 is answered by the proxy; the server never sees it.
    let seen_before = server.requests().len();
    proxy.inject_next(&[Operation::Renew], Fault::status(503).unwrap(), 1);
    let (status, text) = send(addr, "PUT", &renew, &renew_body).await.unwrap();
    assert_eq!((status, text.as_str()), (503, "No cluster leader"));
    assert_eq!(server.requests().len(), seen_before);
    // The rule is used up: the next renew goes through.
    assert_eq!(send(addr, "PUT", &renew, &renew_body).await.unwrap().0, 200);
    assert_eq!(server.requests().len(), seen_before + 1);

    // A refusing partition: connections are refused for the window, then accepted again.
    proxy.partition_for(PartitionMode::Refuse, Duration::from_millis(600));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let refused = TcpStream::connect(addr).await.map(|_| ()).unwrap_err();
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{refused}"
    );
    assert!(send(addr, "PUT", &renew, &renew_body).await.is_err());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        send(addr, "PUT", &renew, &renew_body)
            .await
            .expect("healed")
            .0,
        200
    );
    let windows = proxy.partitions();
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0].mode, PartitionMode::Refuse);

    // What was recorded, and what a report gets from it.
    let records = proxy.records();
    let ops: Vec<(Operation, Option<u16>)> =
        records.iter().map(|r| (r.operation, r.status)).collect();
    assert_eq!(
        ops,
        vec![
            (Operation::Acquire, Some(200)),
            (Operation::Renew, Some(200)),
            (Operation::Renew, Some(503)),
            (Operation::Renew, Some(200)),
            (Operation::Renew, Some(200)),
        ]
    );
    assert!(records.iter().all(|r| r.client == "a"));
    assert_eq!(records[0].lock_id.as_deref(), Some(id.as_str()));
    assert_eq!(records[2].outcome, Outcome::Injected);
    assert_eq!(
        lock_owners(&records).get(&id).map(String::as_str),
        Some("a")
    );
    // The proxy added its token: the server's log says a token came.
    assert!(server.requests().iter().all(|r| r.token_sent));
    let t0 = records[0].at;
    let event = records[1].event(t0);
    assert_eq!(event.operation, "lock-renew");
    assert!(matches!(&event.request, Request::Http { path, .. } if path == &renew));
    assert!(matches!(event.response, Response::Http { status: 200, .. }));
    let curl = event.reproduce.expect("reproduce");
    assert!(
        curl.contains(&format!("http://{}{renew}", server.addr().unwrap())),
        "{curl}"
    );
    assert!(
        curl.contains("$NOMAD_TOKEN") && !curl.contains("s3cret"),
        "{curl}"
    );
}

/// Two clients, the first loses its lock to the harness and the second takes it while the
/// first's protected process still runs: the checker finds both the overlap and the run
/// without a lock; with the first process ended in time it finds neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_finds_an_overlap_in_a_two_client_history() {
    let server = VariablesServer::start(ServerConfig::localhost().with_profile(Profile::fast()))
        .await
        .expect("server");
    let a = Proxy::start(ProxyConfig::new(
        "a",
        Target::plain(Upstream::of_server(&server)),
    ))
    .await
    .expect("proxy a");
    let b = Proxy::start(ProxyConfig::new(
        "b",
        Target::plain(Upstream::of_server(&server)),
    ))
    .await
    .expect("proxy b");
    let t0 = Instant::now();
    let (status, body) = acquire(a.addr().unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let id_a = lock_id(&body);
    // b is refused while a holds the lock.
    assert_eq!(acquire(b.addr().unwrap()).await.0, 409);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        server.force_release("default", PATH).as_deref(),
        Some(id_a.as_str())
    );
    let (status, body) = acquire(b.addr().unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let id_b = lock_id(&body);
    // a's renew now conflicts.
    let renew = send(
        a.addr().unwrap(),
        "PUT",
        &format!("/v1/var/{PATH}?lock-renew="),
        &format!(r#"{{"Lock":{{"ID":"{id_a}"}}}}"#),
    )
    .await
    .unwrap();
    assert_eq!(renew.0, 409, "{}", renew.1);

    let history = server.history();
    assert!(
        history.iter().any(
            |e| matches!(&e.kind, LockEventKind::ForcedRelease { lock_id } if *lock_id == id_a)
        )
    );
    let mut exchanges = a.records();
    exchanges.extend(b.records());
    let holds = holder_intervals(&history, &lock_owners(&exchanges));
    assert_eq!(holds.len(), 2, "{holds:#?}");
    assert_eq!(holds[0].client.as_deref(), Some("a"));
    assert_eq!(holds[1].client.as_deref(), Some("b"));
    let until = Instant::now() + Duration::from_secs(1);

    // Synthetic probes on the real holds: a's process runs 400 ms past the forced release,
    // b's starts as b acquires.
    let forced = holds[0].end.expect("a's hold ended");
    let probe =
        |label: &str, start: Instant, end: Instant| nomad_conform::plugins::lock::ProbeInterval {
            label: label.into(),
            pid: 1,
            start,
            end: Some(end),
            exit: Some(0),
            killed: false,
            beats: 0,
            max_gap: None,
        };
    let late = vec![
        probe(
            "a",
            holds[0].start + Duration::from_millis(5),
            forced + Duration::from_millis(400),
        ),
        probe("b", holds[1].start + Duration::from_millis(5), until),
    ];
    let tol = Duration::from_millis(50);
    let found = violations(&late, &holds, tol, tol, t0, until);
    let kinds: Vec<(ViolationKind, Vec<String>)> =
        found.iter().map(|v| (v.kind, v.clients.clone())).collect();
    assert!(
        kinds.contains(&(ViolationKind::Overlap, vec!["a".into(), "b".into()])),
        "{found:#?}"
    );
    assert!(
        kinds.contains(&(ViolationKind::RanWithoutLock, vec!["a".into()])),
        "{found:#?}"
    );
    assert!(found.iter().all(|v| v.window.end_ms > v.window.start_ms));

    // a's process ended with its lock: nothing to report.
    let in_time = vec![
        probe("a", holds[0].start + Duration::from_millis(5), forced),
        probe("b", holds[1].start + Duration::from_millis(5), until),
    ];
    assert!(overlaps(&in_time, tol, t0, until).is_empty());
    assert!(runs_without_lock(&in_time, &holds, tol, t0, until).is_empty());
    assert_ne!(id_a, id_b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_sockets_on_both_sides() {
    use nomad_conform::plugins::lock::Listen;
    let dir = short_dir();
    let server = VariablesServer::start(
        ServerConfig::new(nomad_conform_variables::Listen::Unix(
            dir.path().join("s.sock"),
        ))
        .with_profile(Profile::fast()),
    )
    .await
    .expect("server");
    let upstream = Upstream::of_server(&server);
    assert_eq!(upstream, Upstream::Unix(dir.path().join("s.sock")));
    let proxy = Proxy::start(
        ProxyConfig::new("u", Target::plain(upstream))
            .with_listen(Listen::Unix(dir.path().join("p.sock"))),
    )
    .await
    .expect("proxy");
    let stream = tokio::net::UnixStream::connect(proxy.socket_path().expect("unix"))
        .await
        .expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = hyper::Request::builder()
        .method("PUT")
        .uri(format!("/v1/var/{PATH}?lock-acquire"))
        .header("host", "localhost")
        .body(Full::new(Bytes::from_static(
            b"{\"Lock\":{\"TTL\":\"2s\"}}",
        )))
        .expect("request");
    let resp = sender.send_request(req).await.expect("answer");
    assert_eq!(resp.status().as_u16(), 200);
    let records = proxy.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].lock_id.as_ref().map(String::len), Some(36));
    let curl = records[0].reproduce();
    assert!(curl.contains("--unix-socket"), "{curl}");
}
