//! The shim pattern against the reference server (fast profile, TTL 1 s): what goes on the
//! wire, when, and what happens to the protected process when the lock is kept, lost, or
//! cannot be had.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nomad_conform_variables::{
    AclConfig, Capability, Listen, LockEventKind, Policy, ServerConfig, Token, WorkloadClaim,
};
use serde_json::json;
use support::scripted::{Renew, ScriptedServer};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_renew_release_on_the_wire_and_status_passed_through() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/wire",
            "--ttl",
            "1s",
            "--delay",
            "1s",
            "--",
            "sh",
            "-c",
            "sleep 1.8; exit 7",
        ],
    )
    .spawn();
    assert_eq!(
        run.exit_code(Duration::from_secs(6)).await,
        7,
        "{}",
        run.stderr()
    );

    let acquires = requests(&server, "locks/wire", "lock-acquire");
    assert_eq!(acquires.len(), 1);
    let acquire = &acquires[0];
    assert_eq!(acquire.method, "PUT");
    assert_eq!(acquire.status, 200, "{}", acquire.response_body);
    assert!(!acquire.query.contains("cas"), "{}", acquire.query);
    assert!(has_flag(&acquire.query, "namespace"), "{}", acquire.query);
    assert!(!acquire.token_sent, "no NOMAD_TOKEN, no token header");
    assert_eq!(
        body(acquire),
        json!({"Path": "locks/wire", "Namespace": "default", "Lock": {"TTL": "1s", "LockDelay": "1s"}})
    );
    let id = acquired(&server, "locks/wire", Duration::ZERO).await;

    let renews = requests(&server, "locks/wire", "lock-renew");
    assert!(renews.len() >= 3, "{} renews in 1.8 s", renews.len());
    for renew in &renews {
        assert_eq!(renew.status, 200);
        assert_eq!(
            body(renew),
            json!({"Path": "locks/wire", "Namespace": "default", "Lock": {"ID": id}})
        );
    }

    // Renew period ≈ TTL/2, from the acquire on.
    let mut times = vec![acquire.at];
    times.extend(renews.iter().map(|r| r.at));
    let gaps = gaps(&times);
    for gap in &gaps {
        assert!(
            *gap >= Duration::from_millis(420) && *gap <= Duration::from_millis(650),
            "renew gaps should be about TTL/2: {gaps:?}"
        );
    }

    // Released once, after the command exited, without Items.
    let releases = requests(&server, "locks/wire", "lock-release");
    assert_eq!(releases.len(), 1);
    let release = &releases[0];
    assert_eq!(release.status, 200, "{}", release.response_body);
    assert_eq!(
        body(release),
        json!({"Path": "locks/wire", "Namespace": "default", "Lock": {"ID": id}})
    );
    assert!(release.at >= acquire.at + Duration::from_millis(1800));
    assert!(release.at > renews.last().unwrap().at);
    assert_eq!(holder(&server, "locks/wire"), None);
    let stderr = run.stderr();
    assert!(
        stderr.contains(&format!("acquired lock {id} on locks/wire (ttl 1s)")),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("released lock {id}")), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_by_a_signal_exits_128_plus_signal_and_releases() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/sig",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            "kill -9 $$",
        ],
    )
    .spawn();
    assert_eq!(run.exit_code(Duration::from_secs(5)).await, 137);
    let id = acquired(&server, "locks/sig", Duration::ZERO).await;
    assert!(released(&server, &id));
    assert!(
        run.stderr().contains("was killed by SIGKILL"),
        "{}",
        run.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_cannot_start_exits_127_and_releases() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/nocmd",
            "--ttl",
            "1s",
            "--",
            "/no/such/command",
        ],
    )
    .spawn();
    assert_eq!(run.exit_code(Duration::from_secs(5)).await, 127);
    let id = acquired(&server, "locks/nocmd", Duration::ZERO).await;
    assert!(released(&server, &id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_backs_off_and_gives_up() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let first = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/one",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let first_id = acquired(&server, "locks/one", Duration::from_secs(3)).await;
    first.wait_protected(Duration::from_secs(3)).await;

    let marker = dir.path().join("second-ran");
    let started = Instant::now();
    let mut second = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/one",
            "--ttl",
            "1s",
            "--give-up",
            "2500ms",
            "--max-backoff",
            "1s",
            "--",
            "sh",
            "-c",
            &format!("touch {}", marker.display()),
        ],
    )
    .named("second")
    .spawn();
    assert_eq!(second.exit_code(Duration::from_secs(6)).await, 1);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_millis(4500),
        "gave up after {took:?}"
    );
    assert!(!marker.exists(), "the second command ran without the lock");
    let stderr = second.stderr();
    assert!(stderr.contains("gave up after"), "{stderr}");
    assert!(stderr.contains("held by another holder"), "{stderr}");

    // The second's acquires are the 409s: retried, at most 4 a second, with jitter.
    let conflicts: Vec<Instant> = requests(&server, "locks/one", "lock-acquire")
        .into_iter()
        .filter(|r| r.status == 409)
        .map(|r| r.at)
        .collect();
    assert!(conflicts.len() >= 3, "{} attempts", conflicts.len());
    for window in conflicts.windows(5) {
        assert!(
            window[4] - window[0] >= Duration::from_secs(1),
            "more than 4 acquires within a second: {:?}",
            gaps(&conflicts)
        );
    }
    for gap in gaps(&conflicts) {
        assert!(gap >= Duration::from_millis(240), "{:?}", gaps(&conflicts));
    }
    // The holder was never disturbed.
    assert_eq!(
        holder(&server, "locks/one").as_deref(),
        Some(first_id.as_str())
    );
    drop(first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renew_conflict_stops_the_protected_process_at_once() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/conflict",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let id = acquired(&server, "locks/conflict", Duration::from_secs(3)).await;
    let pid = run.wait_protected(Duration::from_secs(3)).await;

    assert_eq!(
        server.force_release("default", "locks/conflict"),
        Some(id.clone())
    );
    let (status, other) = acquire_as_other(&server, "locks/conflict", "10s").await;
    assert_eq!(status, 200);
    let taken = Instant::now();

    let died = death_of(pid, Duration::from_secs(3)).await;
    // The next renew comes within TTL/2; the stop is immediate (sleep dies on SIGTERM).
    assert!(
        died - taken < Duration::from_millis(800),
        "stopped {:?} after the lock was taken",
        died - taken
    );
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 1);
    let renews = requests(&server, "locks/conflict", "lock-renew");
    assert_eq!(renews.last().map(|r| r.status), Some(409));
    assert!(
        run.stderr().contains("renew conflict: lock lost"),
        "{}",
        run.stderr()
    );
    // The other holder keeps its lock.
    assert_eq!(holder(&server, "locks/conflict"), Some(other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_renews_stop_the_protected_process_before_the_ttl_lapses() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/down",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let id = acquired(&server, "locks/down", Duration::from_secs(3)).await;
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    eventually(Duration::from_secs(3), "two renews", || {
        renewed_at(&server, &id).len() >= 2
    })
    .await;

    let restarting = {
        let server = server.clone();
        tokio::spawn(async move { server.restart_with_downtime(Duration::from_secs(3)).await })
    };
    let died = death_of(pid, Duration::from_secs(3)).await;
    let last_renew = *renewed_at(&server, &id).last().unwrap();
    let lease_end = last_renew + TTL;
    assert!(
        died < lease_end,
        "the protected process died {:?} after the TTL lapsed",
        died - lease_end
    );
    // It did try to renew first: not stopped before the renew was due.
    assert!(
        died >= last_renew + TTL / 2,
        "stopped {:?} after the last renew, before renewing was even due",
        died - last_renew
    );
    assert_eq!(run.exit_code(Duration::from_secs(4)).await, 1);
    let stderr = run.stderr();
    assert!(stderr.contains("the lock's TTL would lapse"), "{stderr}");
    assert!(stderr.contains("could not release lock"), "{stderr}");
    restarting.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_exits_2_at_once_with_a_clear_message() {
    let _serial = serial().await;
    let acl = AclConfig::enabled()
        .with_policy(Policy::new("read-only").path("default", "locks/*", &[Capability::Read]))
        .with_token(Token::client("reader", &["read-only"]));
    let server = fast_server_with(acl_config(Listen::localhost(), acl)).await;
    let dir = scratch();
    let marker = dir.path().join("ran");
    let started = Instant::now();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/acl",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            &format!("touch {}", marker.display()),
        ],
    )
    .env("NOMAD_TOKEN", "reader")
    .spawn();
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 2);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let acquires = requests(&server, "locks/acl", "lock-acquire");
    assert_eq!(acquires.len(), 1, "403 must not be retried");
    assert_eq!(acquires[0].status, 403);
    assert!(acquires[0].token_sent);
    assert!(!marker.exists());
    let stderr = run.stderr();
    assert!(
        stderr.contains(
            "the token is not allowed to write locks/acl in namespace default: grant it write on the path"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_the_server_refuses_exits_2_with_its_message() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &["--path", "locks/bad", "--ttl", "500ms", "--", "true"],
    )
    .spawn();
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 2);
    assert_eq!(requests(&server, "locks/bad", "lock-acquire").len(), 1);
    assert!(
        run.stderr()
            .contains("TTL must be between 10 seconds and 24 hours"),
        "{}",
        run.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_is_forwarded_and_the_lock_released_after_the_command_exits() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let marker = dir.path().join("got-term");
    // The command takes 300 ms to shut down after SIGTERM.
    let script = format!(
        r#"echo $$ > "$PROTECTED_PIDFILE"; trap 'sleep 0.3; echo term > {}; exit 0' TERM; while :; do sleep 0.05; done"#,
        marker.display()
    );
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/term",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .spawn();
    let id = acquired(&server, "locks/term", Duration::from_secs(3)).await;
    run.wait_protected(Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = Instant::now();
    run.signal(Signal::SIGTERM);
    assert_eq!(
        run.exit_code(Duration::from_secs(3)).await,
        0,
        "{}",
        run.stderr()
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap().trim(), "term");
    let releases = requests(&server, "locks/term", "lock-release");
    assert_eq!(releases.len(), 1);
    assert_eq!(releases[0].status, 200);
    assert!(
        releases[0].at >= sent + Duration::from_millis(300),
        "released {:?} after SIGTERM, before the command had exited",
        releases[0].at - sent
    );
    assert!(released(&server, &id));
    assert!(
        run.stderr().contains("forwarding SIGTERM"),
        "{}",
        run.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_lock_sidecar_kills_the_protected_process() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/orphan",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    // SIGKILL to lock-sidecar alone, not to the protected process's group.
    run.signal(Signal::SIGKILL);
    death_of(pid, Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_task_api_socket_in_nomad_unix_addr_wins() {
    let _serial = serial().await;
    let dir = scratch();
    let socket = dir.path().join("api.sock");
    let claim = WorkloadClaim {
        namespace: "prod".into(),
        job: "example".into(),
        group: "group".into(),
        task: "lock".into(),
    };
    let acl = AclConfig::enabled()
        .with_policy(Policy::new("example-lock").path(
            "prod",
            "nomad/jobs/example/lock",
            &[Capability::Write, Capability::Read, Capability::List],
        ))
        .with_token(Token::workload("wi-token", claim, &["example-lock"]));
    let server = fast_server_with(acl_config(Listen::TaskApi(socket.clone()), acl)).await;
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "nomad/jobs/example/lock",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            "sleep 0.7",
        ],
    )
    // NOMAD_ADDR points nowhere: the Task API socket must be used instead.
    .env("NOMAD_ADDR", "http://127.0.0.1:1")
    .env("NOMAD_UNIX_ADDR", &format!("unix://{}", socket.display()))
    .env("NOMAD_TOKEN", "wi-token")
    .env("NOMAD_NAMESPACE", "prod")
    .spawn();
    assert_eq!(
        run.exit_code(Duration::from_secs(5)).await,
        0,
        "{}",
        run.stderr()
    );
    let all = server.requests();
    assert!(all.len() >= 3, "{} requests", all.len());
    for request in &all {
        assert_eq!(request.listener, "task-api");
        assert!(request.token_sent);
        assert!(
            request.query.contains("namespace=prod"),
            "{}",
            request.query
        );
        assert_eq!(
            request.status, 200,
            "{} {}",
            request.query, request.response_body
        );
    }
    assert!(
        server
            .history()
            .iter()
            .any(|e| e.namespace == "prod" && matches!(e.kind, LockEventKind::Released { .. }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_nomad_addr_is_used() {
    let _serial = serial().await;
    let dir = scratch();
    let socket = dir.path().join("agent.sock");
    let server = fast_server_with(ServerConfig::new(Listen::Unix(socket))).await;
    let mut run = Launch::new(
        &server,
        dir.path(),
        &["--path", "locks/unix", "--ttl", "1s", "--", "true"],
    )
    .spawn();
    assert_eq!(
        run.exit_code(Duration::from_secs(5)).await,
        0,
        "{}",
        run.stderr()
    );
    let listeners: Vec<&str> = server.requests().iter().map(|r| r.listener).collect();
    assert_eq!(listeners, ["unix", "unix"], "acquire and release");
}

/// An acquire answered late, but within half the TTL, is taken: abandoning it would leave the
/// lock held under an ID the client never saw, and every retry answered 409 until it expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_answered_within_half_the_ttl_is_taken() {
    let _serial = serial().await;
    let server = ScriptedServer::start(&[], Renew::OK).await;
    server.answer_acquires_after(Duration::from_millis(400));
    let dir = scratch();
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "locks/slow",
            "--ttl",
            "1s",
            "--give-up",
            "2s",
            "--",
            "sh",
            "-c",
            "exit 3",
        ],
    )
    .spawn();
    assert_eq!(
        run.exit_code(Duration::from_secs(5)).await,
        3,
        "{}",
        run.stderr()
    );
    assert_eq!(server.seen("lock-acquire").len(), 1, "{}", run.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_renew_is_cut_off_and_the_process_stopped_before_the_lease_ends() {
    let _serial = serial().await;
    let server = ScriptedServer::start(&[], Renew::Hang).await;
    let dir = scratch();
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "locks/hang",
            "--ttl",
            "1s",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let acquired_at = server
        .wait_for("lock-acquire", 1, Duration::from_secs(3))
        .await;
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    let died = death_of(pid, Duration::from_secs(3)).await;
    assert!(
        died < acquired_at + TTL,
        "the protected process died {:?} after the acquire",
        died - acquired_at
    );
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 1);
    assert!(
        run.stderr().contains("the lock's TTL would lapse"),
        "{}",
        run.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_hung_renew_is_acted_on_at_once() {
    let _serial = serial().await;
    let server = ScriptedServer::start(&[], Renew::Hang).await;
    let dir = scratch();
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "locks/hang-term",
            "--ttl",
            "3s",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    server
        .wait_for("lock-renew", 1, Duration::from_secs(3))
        .await;
    let sent = Instant::now();
    run.signal(Signal::SIGTERM);
    let died = death_of(pid, Duration::from_secs(3)).await;
    assert!(
        died - sent < Duration::from_millis(300),
        "{:?}",
        died - sent
    );
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 143);
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "exited {:?} after SIGTERM",
        sent.elapsed()
    );
    assert_eq!(server.seen("lock-release").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_renew_conflict_stops_the_protected_process_too() {
    let _serial = serial().await;
    let late = Duration::from_millis(750);
    let server = ScriptedServer::start(&[Renew::conflict_after(late)], Renew::OK).await;
    let dir = scratch();
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "locks/late",
            "--ttl",
            "3s",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    let renew_at = server
        .wait_for("lock-renew", 1, Duration::from_secs(3))
        .await;
    let died = death_of(pid, Duration::from_secs(3)).await;
    assert!(
        died >= renew_at + late - Duration::from_millis(50)
            && died < renew_at + late + Duration::from_millis(500),
        "{:?} after the renew",
        died - renew_at
    );
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 1);
    let stderr = run.stderr();
    assert!(stderr.contains("renew conflict: lock lost"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
