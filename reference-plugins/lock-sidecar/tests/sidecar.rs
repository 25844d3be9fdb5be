//! The sidecar pattern (`--sentinel FILE`) against the reference server (TTL 1 s): the sentinel
//! exists exactly while the lock is ours.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::*;

/// Polls every 5 ms until `file` exists (or not); returns when that was first seen.
async fn file_state(file: &Path, exists: bool, limit: Duration) -> Instant {
    let deadline = Instant::now() + limit;
    loop {
        if file.exists() == exists {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{} {} after {limit:?}",
            file.display(),
            if exists {
                "still missing"
            } else {
                "still there"
            }
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_appears_after_the_acquire_and_goes_on_a_renew_conflict() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let sentinel = dir.path().join("ready");
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/side",
            "--ttl",
            "1s",
            "--sentinel",
            sentinel.to_str().unwrap(),
        ],
    )
    .spawn();
    let appeared = file_state(&sentinel, true, Duration::from_secs(3)).await;
    let id = acquired(&server, "locks/side", Duration::ZERO).await;
    assert!(appeared >= acquired_at(&server, &id));
    // It names the lock, which only the acquire's answer could tell.
    assert_eq!(std::fs::read_to_string(&sentinel).unwrap().trim(), id);

    // Still there while renews succeed.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(sentinel.exists());
    assert!(
        !renewed_at(&server, &id).is_empty(),
        "renews succeeded meanwhile"
    );

    server.force_release("default", "locks/side");
    let (status, _) = acquire_as_other(&server, "locks/side", "10s").await;
    assert_eq!(status, 200);
    let taken = Instant::now();
    let gone = file_state(&sentinel, false, Duration::from_secs(2)).await;
    assert!(
        gone - taken < Duration::from_millis(800),
        "{:?}",
        gone - taken
    );
    assert_eq!(run.exit_code(Duration::from_secs(3)).await, 1);
    assert!(
        run.stderr().contains("renew conflict: lock lost"),
        "{}",
        run.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_removes_the_sentinel_releases_and_exits_0() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let sentinel = dir.path().join("ready");
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/sideterm",
            "--ttl",
            "1s",
            "--sentinel",
            sentinel.to_str().unwrap(),
        ],
    )
    .spawn();
    file_state(&sentinel, true, Duration::from_secs(3)).await;
    let id = acquired(&server, "locks/sideterm", Duration::ZERO).await;
    run.signal(Signal::SIGTERM);
    assert_eq!(
        run.exit_code(Duration::from_secs(3)).await,
        0,
        "{}",
        run.stderr()
    );
    assert!(!sentinel.exists());
    assert!(released(&server, &id));
    assert_eq!(holder(&server, "locks/sideterm"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_sentinel_is_removed_before_waiting_for_the_lock() {
    let _serial = serial().await;
    let server = fast_server().await;
    let (status, other) = acquire_as_other(&server, "locks/stale", "10s").await;
    assert_eq!(status, 200);
    let dir = scratch();
    let sentinel = dir.path().join("ready");
    std::fs::write(&sentinel, "left by an earlier run\n").unwrap();
    let started = Instant::now();
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/stale",
            "--ttl",
            "1s",
            "--give-up",
            "1s",
            "--sentinel",
            sentinel.to_str().unwrap(),
        ],
    )
    .spawn();
    let gone = file_state(&sentinel, false, Duration::from_secs(1)).await;
    assert!(gone - started < Duration::from_millis(500));
    assert_eq!(run.exit_code(Duration::from_secs(4)).await, 1);
    assert!(!sentinel.exists(), "no sentinel without the lock");
    assert_eq!(holder(&server, "locks/stale"), Some(other));
    assert!(run.stderr().contains("gave up after"), "{}", run.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_renews_remove_the_sentinel_before_the_ttl_lapses() {
    let _serial = serial().await;
    let server = fast_server().await;
    let dir = scratch();
    let sentinel = dir.path().join("ready");
    let mut run = Launch::new(
        &server,
        dir.path(),
        &[
            "--path",
            "locks/sidedown",
            "--ttl",
            "1s",
            "--sentinel",
            sentinel.to_str().unwrap(),
        ],
    )
    .spawn();
    file_state(&sentinel, true, Duration::from_secs(3)).await;
    let id = acquired(&server, "locks/sidedown", Duration::ZERO).await;
    eventually(Duration::from_secs(3), "a renew", || {
        !renewed_at(&server, &id).is_empty()
    })
    .await;
    let restarting = {
        let server = server.clone();
        tokio::spawn(async move { server.restart_with_downtime(Duration::from_secs(3)).await })
    };
    let gone = file_state(&sentinel, false, Duration::from_secs(2)).await;
    let last_renew = *renewed_at(&server, &id).last().unwrap();
    assert!(gone < last_renew + TTL, "{:?}", gone - last_renew);
    assert_eq!(run.exit_code(Duration::from_secs(4)).await, 1);
    restarting.abort();
}
