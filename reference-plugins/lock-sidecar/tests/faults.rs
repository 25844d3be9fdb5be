//! Every `--fault` breaks the rule it names, observably; every `--variant` behaves as it says
//! and still conforms. TTL 1 s on the reference server's fast profile.

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nomad_conform_variables::{AclConfig, Capability, Listen, Policy, Token};
use serde_json::json;
use support::scripted::{Renew, ScriptedServer};
use support::*;

/// Acquire then renew times (as the server saw the requests) for `path`.
fn lock_times(server: &nomad_conform_variables::ServerHandle, path: &str) -> Vec<Instant> {
    let mut times: Vec<Instant> = requests(server, path, "lock-acquire")
        .into_iter()
        .filter(|r| r.status == 200)
        .map(|r| r.at)
        .collect();
    times.extend(
        requests(server, path, "lock-renew")
            .into_iter()
            .filter(|r| r.status == 200)
            .map(|r| r.at),
    );
    times
}

/// Takes the lock away from lock-sidecar: the leader clears it and another holder acquires.
async fn take_lock(server: &nomad_conform_variables::ServerHandle, path: &str) -> Instant {
    assert!(server.force_release("default", path).is_some());
    let (status, _) = acquire_as_other(server, path, "10s").await;
    assert_eq!(status, 200);
    Instant::now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renews_late_renews_at_one_and_a_half_ttl() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "f/late",
            "--ttl",
            "1s",
            "--fault",
            "renews-late",
            "--",
            "sh",
            "-c",
            "sleep 1.9",
        ],
    )
    .spawn();
    assert_eq!(
        run.exit_code(Duration::from_secs(5)).await,
        0,
        "{}",
        run.stderr()
    );
    let gaps = gaps(&lock_times(&server, "f/late"));
    assert_eq!(gaps.len(), 1, "one renew in 1.9 s: {gaps:?}");
    assert!(
        gaps[0] >= Duration::from_millis(1400) && gaps[0] <= Duration::from_millis(1700),
        "{gaps:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignores_conflict_keeps_the_process_and_acquires_again() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "f/ignore",
            "--ttl",
            "1s",
            "--fault",
            "ignores-conflict",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    acquired(&server, "f/ignore", Duration::from_secs(3)).await;
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    let taken = take_lock(&server, "f/ignore").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(alive(pid), "the protected process was stopped");
    let reacquires = requests(&server, "f/ignore", "lock-acquire")
        .into_iter()
        .filter(|r| r.at > taken && r.status == 409)
        .count();
    assert!(reacquires >= 1, "no acquire attempts after the conflict");
    assert!(
        run.stderr().contains("fault ignores-conflict"),
        "{}",
        run.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_before_acquire_runs_the_process_without_the_lock() {
    let _serial = serial().await;
    let server = fast_server().await;
    let (status, other) = acquire_as_other(&server, "f/early", "10s").await;
    assert_eq!(status, 200);
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "f/early",
            "--ttl",
            "1s",
            "--give-up",
            "1s",
            "--fault",
            "starts-before-acquire",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let pid = run.wait_protected(Duration::from_secs(2)).await;
    assert!(alive(pid));
    assert_eq!(
        holder(&server, "f/early"),
        Some(other),
        "someone else holds the lock"
    );
    assert_eq!(run.exit_code(Duration::from_secs(4)).await, 1);
    assert!(!alive(pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_releases_leaves_the_lock_held() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "f/norelease",
            "--ttl",
            "1s",
            "--fault",
            "never-releases",
            "--",
            "sh",
            "-c",
            "sleep 0.2",
        ],
    )
    .spawn();
    assert_eq!(run.exit_code(Duration::from_secs(4)).await, 0);
    let id = acquired(&server, "f/norelease", Duration::ZERO).await;
    assert!(requests(&server, "f/norelease", "lock-release").is_empty());
    assert_eq!(holder(&server, "f/norelease"), Some(id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keeps_child_leaves_the_process_running_after_losing_the_lock() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "f/keep",
            "--ttl",
            "1s",
            "--fault",
            "keeps-child",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    acquired(&server, "f/keep", Duration::from_secs(3)).await;
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    take_lock(&server, "f/keep").await;
    eventually(Duration::from_secs(2), "a refused renew", || {
        requests(&server, "f/keep", "lock-renew")
            .iter()
            .any(|r| r.status == 409)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(alive(pid), "the protected process was stopped");
    assert!(!run.has_exited());
    // It stopped renewing, and exits 1 once the process ends on its own.
    let renews = requests(&server, "f/keep", "lock-renew");
    assert_eq!(renews.last().map(|r| r.status), Some(409));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_forever_403_keeps_asking_past_give_up() {
    let _serial = serial().await;
    let acl = AclConfig::enabled()
        .with_policy(Policy::new("read-only").path("default", "f/*", &[Capability::Read]))
        .with_token(Token::client("reader", &["read-only"]));
    let server = fast_server_with(acl_config(Listen::localhost(), acl)).await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "f/forbidden",
            "--ttl",
            "1s",
            "--give-up",
            "1s",
            "--max-backoff",
            "500ms",
            "--fault",
            "retries-forever-403",
            "--",
            "true",
        ],
    )
    .env("NOMAD_TOKEN", "reader")
    .spawn();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!run.has_exited(), "{}", run.stderr());
    let forbidden = requests(&server, "f/forbidden", "lock-acquire");
    assert!(forbidden.len() >= 4, "{} attempts", forbidden.len());
    assert!(forbidden.iter().all(|r| r.status == 403));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_release_sends_items_and_is_refused() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "f/items",
            "--ttl",
            "1s",
            "--fault",
            "malformed-release",
            "--",
            "sh",
            "-c",
            "sleep 0.2",
        ],
    )
    .spawn();
    assert_eq!(run.exit_code(Duration::from_secs(4)).await, 0);
    let id = acquired(&server, "f/items", Duration::ZERO).await;
    let releases = requests(&server, "f/items", "lock-release");
    assert_eq!(releases.len(), 1);
    assert_eq!(releases[0].status, 400);
    assert_eq!(body(&releases[0])["Items"], json!({}));
    assert_eq!(holder(&server, "f/items"), Some(id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignores_sigterm_does_not_forward_it() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "f/term",
            "--ttl",
            "1s",
            "--fault",
            "ignores-sigterm",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let id = acquired(&server, "f/term", Duration::from_secs(3)).await;
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    run.signal(Signal::SIGTERM);
    let renews_then = renewed_at(&server, &id).len();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(alive(pid), "SIGTERM reached the protected process");
    assert!(!run.has_exited());
    assert!(
        renewed_at(&server, &id).len() > renews_then,
        "renewing stopped"
    );
    // SIGINT is still forwarded.
    run.signal(Signal::SIGINT);
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 130);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variant_renew_0_7_renews_at_seven_tenths_and_conforms() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "v/renew",
            "--ttl",
            "1s",
            "--variant",
            "renew-0.7",
            "--",
            "sh",
            "-c",
            "sleep 2.3",
        ],
    )
    .spawn();
    assert_eq!(
        run.exit_code(Duration::from_secs(5)).await,
        0,
        "{}",
        run.stderr()
    );
    let gaps = gaps(&lock_times(&server, "v/renew"));
    assert!(gaps.len() >= 3, "{gaps:?}");
    let typical = median(gaps.clone());
    assert!(
        typical >= Duration::from_millis(640) && typical <= Duration::from_millis(850),
        "{gaps:?}"
    );
    // Still conforming: every renew within the TTL, and released at the end.
    assert!(gaps.iter().all(|g| *g < TTL), "{gaps:?}");
    let id = acquired(&server, "v/renew", Duration::ZERO).await;
    assert!(released(&server, &id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variant_exit_1_replaces_a_failing_status() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    for (index, (script, expected)) in [("exit 7", 1), ("exit 0", 0), ("kill -9 $$", 1)]
        .into_iter()
        .enumerate()
    {
        let path = format!("v/exit{index}");
        let mut run = Launch::new(
            &server,
            dir.path(),
            &[
                "--path",
                &path,
                "--ttl",
                "1s",
                "--variant",
                "exit-1",
                "--",
                "sh",
                "-c",
                script,
            ],
        )
        .spawn();
        assert_eq!(
            run.exit_code(Duration::from_secs(4)).await,
            expected,
            "{script}"
        );
        let id = acquired(&server, &path, Duration::ZERO).await;
        assert!(released(&server, &id), "{script}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variant_exit_on_conflict_exits_1_at_once_without_starting() {
    let _serial = serial().await;
    let server = fast_server().await;
    let (status, other) = acquire_as_other(&server, "v/held", "10s").await;
    assert_eq!(status, 200);
    let dir = scratch();
    let marker = dir.path().join("ran");
    let started = Instant::now();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "v/held",
            "--ttl",
            "1s",
            "--give-up",
            "10s",
            "--variant",
            "exit-on-conflict",
            "--",
            "sh",
            "-c",
            &format!("touch {}", marker.display()),
        ],
    )
    .spawn();
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 1);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "exited after {:?}",
        started.elapsed()
    );
    // The other holder's acquire and ours, refused once and not retried.
    let conflicts = |server: &nomad_conform_variables::ServerHandle| {
        let acquires = requests(server, "v/held", "lock-acquire");
        assert_eq!(acquires[0].status, 200);
        assert!(acquires[1..].iter().all(|r| r.status == 409));
        acquires.len() - 1
    };
    assert_eq!(conflicts(&server), 1, "a conflict must not be retried");
    assert!(!marker.exists(), "the command ran without the lock");
    assert!(
        run.stderr().contains("variant exit-on-conflict"),
        "{}",
        run.stderr()
    );

    // The sidecar does the same and never writes its sentinel.
    let sentinel = dir.path().join("ready");
    let mut sidecar = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "v/held",
            "--ttl",
            "1s",
            "--give-up",
            "10s",
            "--variant",
            "exit-on-conflict",
            "--sentinel",
            sentinel.to_str().unwrap(),
        ],
    )
    .named("sidecar")
    .spawn();
    assert_eq!(sidecar.exit_code(Duration::from_secs(3)).await, 1);
    assert!(!sentinel.exists());
    assert_eq!(conflicts(&server), 2);
    // The holder was never disturbed.
    assert_eq!(holder(&server, "v/held"), Some(other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variant_exit_on_conflict_retries_other_failures() {
    let _serial = serial().await;
    let dir = scratch();
    let started = Instant::now();
    // Nothing listens there: every acquire fails to connect, which is retried until --give-up.
    let mut run = Launch::at(
        "http://127.0.0.1:1",
        dir.path(),
        &[
            "--path",
            "v/unreachable",
            "--ttl",
            "1s",
            "--give-up",
            "1s",
            "--max-backoff",
            "300ms",
            "--variant",
            "exit-on-conflict",
            "--",
            "true",
        ],
    )
    .spawn();
    assert_eq!(run.exit_code(Duration::from_secs(4)).await, 1);
    assert!(started.elapsed() >= Duration::from_secs(1));
    let stderr = run.stderr();
    assert!(stderr.contains("gave up after"), "{stderr}");
    assert!(
        stderr.matches("not acquired").count() >= 2,
        "no retries: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variant_renew_third_renews_at_a_third_and_conforms() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "v/third",
            "--ttl",
            "1s",
            "--variant",
            "renew-third",
            "--",
            "sh",
            "-c",
            "sleep 2.3",
        ],
    )
    .spawn();
    assert_eq!(
        run.exit_code(Duration::from_secs(5)).await,
        0,
        "{}",
        run.stderr()
    );
    let gaps = gaps(&lock_times(&server, "v/third"));
    assert!(gaps.len() >= 5, "{gaps:?}");
    let typical = median(gaps.clone());
    assert!(
        typical >= Duration::from_millis(300) && typical <= Duration::from_millis(420),
        "{gaps:?}"
    );
    // Still conforming: every renew within the TTL, and released at the end.
    assert!(gaps.iter().all(|g| *g < TTL), "{gaps:?}");
    let id = acquired(&server, "v/third", Duration::ZERO).await;
    assert!(released(&server, &id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_timeout_keeps_the_process_past_its_lease_while_a_renew_hangs() {
    let _serial = serial().await;
    let server = ScriptedServer::start(&[], Renew::Hang).await;
    let dir = scratch();
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "f/hang",
            "--ttl",
            "1s",
            "--fault",
            "no-request-timeout",
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
    server
        .wait_for("lock-renew", 1, Duration::from_secs(3))
        .await;
    // Well past the lease (one TTL) and the server's own 2 × TTL.
    tokio::time::sleep_until((acquired_at + 2 * TTL + TTL / 2).into()).await;
    assert!(alive(pid), "the protected process was stopped");
    assert!(!run.has_exited(), "{}", run.stderr());
    // Still waiting on its first renew: no timeout, no retry.
    assert_eq!(server.seen("lock-renew").len(), 1);
    assert!(!run.stderr().contains("lapse"), "{}", run.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_on_sigterm_never_exits_while_a_renew_hangs() {
    let _serial = serial().await;
    let server = ScriptedServer::start(&[], Renew::Hang).await;
    let dir = scratch();
    // TTL 3 s: the renew sent at 1.5 s would time out after 0.9 s, time enough to signal.
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "f/deadlock",
            "--ttl",
            "3s",
            "--fault",
            "deadlock-on-sigterm",
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
    run.signal(Signal::SIGTERM);
    assert!(
        renew_at.elapsed() < Duration::from_millis(600),
        "SIGTERM came {:?} after the renew, maybe after its timeout",
        renew_at.elapsed()
    );
    // Past the renew's timeout, the stop deadline and the lease end.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(alive(pid), "the protected process was stopped");
    assert!(!run.has_exited(), "{}", run.stderr());
    let stderr = run.stderr();
    assert!(stderr.contains("fault deadlock-on-sigterm"), "{stderr}");
    assert!(!stderr.contains("forwarding SIGTERM"), "{stderr}");
    assert_eq!(server.seen("lock-renew").len(), 1);
    assert!(server.seen("lock-release").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_on_sigterm_acts_on_the_signal_once_the_renew_is_answered() {
    let _serial = serial().await;
    let answer_after = Duration::from_millis(700);
    let server = ScriptedServer::start(
        &[Renew::Answer {
            status: 200,
            after: answer_after,
        }],
        Renew::OK,
    )
    .await;
    let dir = scratch();
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "f/deadlock-ok",
            "--ttl",
            "3s",
            "--fault",
            "deadlock-on-sigterm",
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
    run.signal(Signal::SIGTERM);
    let died = death_of(pid, Duration::from_secs(3)).await;
    assert!(
        died >= renew_at + answer_after - Duration::from_millis(50),
        "stopped {:?} after the renew was sent, before it was answered",
        died - renew_at
    );
    // Then as by default: SIGTERM forwarded, the lock released, the command's status.
    assert_eq!(
        run.exit_code(Duration::from_secs(3)).await,
        143,
        "{}",
        run.stderr()
    );
    assert_eq!(server.seen("lock-release").len(), 1);
    assert!(
        run.stderr().contains("forwarding SIGTERM"),
        "{}",
        run.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_on_late_409_exits_101_and_leaves_the_process_running() {
    let _serial = serial().await;
    // TTL 3 s: late means more than 600 ms; the renew's own timeout is 900 ms.
    let server = ScriptedServer::start(
        &[Renew::conflict_after(Duration::from_millis(750))],
        Renew::OK,
    )
    .await;
    let dir = scratch();
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "f/panic",
            "--ttl",
            "3s",
            "--fault",
            "panics-on-late-409",
            "--",
            "sh",
            "-c",
            LONG_RUNNING,
        ],
    )
    .spawn();
    let pid = run.wait_protected(Duration::from_secs(3)).await;
    assert_eq!(run.exit_code(Duration::from_secs(5)).await, 101);
    let stderr = run.stderr();
    assert!(stderr.contains("send on closed channel"), "{stderr}");
    assert!(
        !stderr.contains("stopping the protected process"),
        "{stderr}"
    );
    // The orphan outlives lock-sidecar (no parent-death signal, no group kill).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alive(pid), "the protected process died with lock-sidecar");
    assert!(server.seen("lock-release").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_on_late_409_handles_a_quick_409_as_the_default() {
    let _serial = serial().await;
    let server = ScriptedServer::start(&[Renew::conflict_after(Duration::ZERO)], Renew::OK).await;
    let dir = scratch();
    let mut run = Launch::at(
        &server.nomad_addr(),
        dir.path(),
        &[
            "--path",
            "f/quick",
            "--ttl",
            "3s",
            "--fault",
            "panics-on-late-409",
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
        died - renew_at < Duration::from_millis(500),
        "{:?}",
        died - renew_at
    );
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 1);
    let stderr = run.stderr();
    assert!(stderr.contains("renew conflict: lock lost"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
