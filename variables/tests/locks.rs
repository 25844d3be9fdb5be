//! Locks over HTTP: acquire/renew/release answers, TTL bounds, conflicts, locked variables,
//! expiry after 2 × TTL plus the lock delay, and restarts losing timers (contract B.2, B.3).
//! Timed tests use the fast profile (TTL from 1s) and short explicit delays.

mod support;

use std::time::{Duration, Instant};

use nomad_conform_variables::{
    AclConfig, Fault, LockEventKind, Profile, ServerConfig, VariablesServer,
};
use serde_json::json;
use support::{Client, items_body, start, start_fast};

fn kinds(server: &nomad_conform_variables::ServerHandle) -> Vec<LockEventKind> {
    server.history().into_iter().map(|e| e.kind).collect()
}

#[tokio::test]
async fn acquire_fills_defaults_and_returns_the_lock() {
    for (profile, default) in [(Profile::nomad(), "15s"), (Profile::fast(), "1.5s")] {
        let (server, client) = start(profile, AclConfig::disabled()).await;
        // The Go client's body (contract D): durations as strings, Items null.
        let resp = client.acquire("lock/a", "", "").await;
        assert_eq!(resp.status, 200, "{}", resp.body);
        let body = resp.json();
        assert_eq!(body["Lock"]["TTL"], default);
        assert_eq!(body["Lock"]["LockDelay"], default);
        let id = resp.lock_id();
        assert_eq!(id.len(), 36, "a UUID lock ID: {id}");
        assert!(body.get("Items").is_none());
        assert_eq!(resp.index(), body["ModifyIndex"].as_u64());
        // With ACLs off the caller counts as management and sees the lock on read.
        assert_eq!(client.get("/v1/var/lock/a").await.lock_id(), id);
        assert!(matches!(
            &kinds(&server)[..],
            [LockEventKind::Acquired { lock_id, reacquired: false, timer_started: true, .. }] if *lock_id == id
        ));
        assert_eq!(server.timers().len(), 1);
    }
}

#[tokio::test]
async fn ttl_and_delay_bounds_table() {
    let (_server, client) = start(Profile::nomad(), AclConfig::disabled()).await;
    let one =
        "RPC Error:: 400,1 error occurred:\n\t* TTL must be between 10 seconds and 24 hours\n\n";
    let negative = "RPC Error:: 400,2 errors occurred:\n\t* Lock delay and TTL must be positive\n\t* TTL must be between 10 seconds and 24 hours\n\n";
    let table: [(&str, &str, u16, Option<&str>); 10] = [
        ("9s", "", 400, Some(one)),
        ("9999ms", "", 400, Some(one)),
        ("10s", "", 200, None),
        ("24h", "", 200, None),
        ("24h0m1s", "", 400, Some(one)),
        ("-1s", "", 400, Some(negative)),
        ("15s", "-1s", 400, None),
        // lock delay has no bound other than >= 0
        ("15s", "1ns", 200, None),
        ("15s", "1000h", 200, None),
        ("15", "", 400, None),
    ];
    for (i, (ttl, delay, status, text)) in table.into_iter().enumerate() {
        let resp = client.acquire(&format!("bounds/{i}"), ttl, delay).await;
        assert_eq!(
            resp.status, status,
            "ttl={ttl} delay={delay}: {}",
            resp.body
        );
        if let Some(text) = text {
            assert_eq!(resp.body, text);
        }
        if status == 200 {
            assert_eq!(
                resp.json()["Lock"]["TTL"],
                if ttl == "24h" { "24h0m0s" } else { ttl }
            );
        }
    }
    // Numbers are nanoseconds.
    let resp = client
        .put(
            "/v1/var/bounds/n?lock-acquire",
            r#"{"Lock":{"TTL":12000000000,"LockDelay":500000000}}"#,
        )
        .await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.json()["Lock"],
        json!({"ID": resp.lock_id(), "TTL": "12s", "LockDelay": "500ms"})
    );
    // No Lock object at all: defaults.
    let resp = client.put("/v1/var/bounds/none?lock-acquire", "{}").await;
    assert_eq!(resp.json()["Lock"]["TTL"], "15s");
    // Invalid path and wildcard namespace for acquire.
    let resp = client.acquire("bad.path", "10s", "").await;
    assert_eq!(
        (resp.status, resp.body.as_str()),
        (400, "RPC Error:: 400,invalid path \"bad.path\"")
    );
    assert_eq!(resp.index(), Some(0));
    let resp = client.put("/v1/var/w?lock-acquire&namespace=*", "{}").await;
    assert_eq!(resp.status, 400);
    assert!(resp.body.contains("can not target wildcard"));
}

#[tokio::test]
async fn conflict_renew_and_release_answers() {
    let (server, client) = start_fast().await;
    let held = client.acquire("l", "10s", "1s").await;
    let id = held.lock_id();

    // Another acquirer: 409 with namespace and path only, no index header, and the content
    // type Go sniffs (the status is written before wrap sets application/json).
    let other = client.acquire("l", "10s", "1s").await;
    assert_eq!(other.status, 409);
    assert_eq!(
        other.json(),
        json!({"Namespace":"default","Path":"l","CreateIndex":0,"CreateTime":0,"ModifyIndex":0,"ModifyTime":0})
    );
    assert_eq!(other.index(), None);
    assert_eq!(
        other.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(held.header("content-type"), Some("application/json"));
    assert_eq!(
        client
            .acquire_as("l", "not-the-id", "10s", "1s")
            .await
            .status,
        409
    );

    // Renew answers.
    let renew_table: [(&str, &str, u16, &str); 4] = [
        ("l", "wrong", 409, "attempting to modify locked variable"),
        ("missing", &id, 404, "variable doesn't exist"),
        ("l", "", 500, "1 error occurred:\n\t* missing lock ID\n\n"),
        ("l", &id, 200, ""),
    ];
    for (path, lock_id, status, text) in renew_table {
        let resp = client.renew(path, lock_id).await;
        assert_eq!(resp.status, status, "renew {path} {lock_id}: {}", resp.body);
        assert_eq!(resp.index(), None, "renew never sets X-Nomad-Index");
        if status == 200 {
            let body = resp.json();
            assert_eq!(body["Lock"]["ID"], id.as_str());
            assert!(body.get("Items").is_none());
        } else {
            assert_eq!(resp.body, text);
        }
    }
    client
        .put("/v1/var/plain", &items_body(&[("k", "v")]))
        .await;
    let resp = client.renew("plain", &id).await;
    assert_eq!(
        (resp.status, resp.body.as_str()),
        (409, "variable doesn't hold a lock")
    );

    // Release answers.
    let wrong = client.release("l", "wrong").await;
    assert_eq!(wrong.status, 409);
    assert_eq!(wrong.index(), None);
    assert_eq!(wrong.json()["Path"], "l");
    assert!(
        wrong.json().get("Lock").is_none(),
        "a reader gets namespace and path only"
    );
    let with_items = client
        .put(
            "/v1/var/l?lock-release",
            &format!(r#"{{"Items":{{}},"Lock":{{"ID":"{id}"}}}}"#),
        )
        .await;
    assert_eq!(
        (with_items.status, with_items.body.as_str()),
        (
            400,
            "RPC Error:: 400,lock release operation doesn't take variable items"
        )
    );
    let no_id = client
        .put("/v1/var/l?lock-release", r#"{"Items":null}"#)
        .await;
    assert_eq!(
        (no_id.status, no_id.body.as_str()),
        (400, "RPC Error:: 400,missing lock information")
    );
    let released = client.release("l", &id).await;
    assert_eq!(released.status, 200, "{}", released.body);
    let body = released.json();
    assert!(body.get("Lock").is_none());
    assert!(body.get("Items").is_none());
    assert!(released.index().unwrap() > held.index().unwrap());
    assert!(server.timers().is_empty(), "release stops the timer");
    assert_eq!(client.get("/v1/var/l").await.json().get("Lock"), None);
    // The state store's plain errors: 500, with X-Nomad-Index 0, any lock ID.
    let again = client.release("l", &id).await;
    assert_eq!(
        (again.status, again.body.as_str(), again.index()),
        (500, "variable doesn't hold a lock", Some(0))
    );
    assert_eq!(
        again.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(client.release("l", "any-other-id").await.status, 500);
    let missing = client.release("missing", &id).await;
    assert_eq!(
        (missing.status, missing.body.as_str(), missing.index()),
        (500, "variable doesn't exist", Some(0))
    );
    // The renew after the release: the coded 409.
    let renew = client.renew("l", &id).await;
    assert_eq!(
        (renew.status, renew.body.as_str()),
        (409, "variable doesn't hold a lock")
    );
    // After release anyone may acquire.
    assert_eq!(client.acquire("l", "10s", "1s").await.status, 200);

    let kinds = kinds(&server);
    assert!(kinds.iter().any(
        |k| matches!(k, LockEventKind::AcquireConflict { held_lock_id, .. } if *held_lock_id == id)
    ));
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, LockEventKind::RenewRefused { status: 404, .. }))
    );
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, LockEventKind::Released { lock_id } if *lock_id == id))
    );
}

#[tokio::test]
async fn release_errors_coded_fault_answers_404_and_409() {
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_fault(Fault::ReleaseErrorsCoded),
    )
    .await
    .unwrap();
    let client = Client::of(&server);
    let missing = client.release("missing", "x").await;
    assert_eq!(
        (missing.status, missing.body.as_str()),
        (404, "variable doesn't exist")
    );
    client
        .put("/v1/var/plain", &items_body(&[("k", "v")]))
        .await;
    let resp = client.release("plain", "x").await;
    assert_eq!(
        (resp.status, resp.body.as_str()),
        (409, "variable doesn't hold a lock")
    );
}

#[tokio::test]
async fn release_after_a_lapse_answers_500() {
    let (server, client) = start_fast().await;
    let id = client.acquire("lapse", "1s", "100ms").await.lock_id();
    // 2 × TTL + delay = 2.1s; the lock is cleared by then.
    tokio::time::sleep(Duration::from_millis(2_400)).await;
    assert!(
        server
            .variable("default", "lapse")
            .unwrap()
            .metadata
            .lock
            .is_none()
    );
    let resp = client.release("lapse", &id).await;
    assert_eq!(
        (resp.status, resp.body.as_str(), resp.index()),
        (500, "variable doesn't hold a lock", Some(0))
    );
    assert!(kinds(&server).iter().any(|k| matches!(
        k,
        LockEventKind::ReleaseRefused { status: 500, reason, .. } if reason == "variable doesn't hold a lock"
    )));
}

#[tokio::test]
async fn locked_variables_refuse_writes_and_deletes() {
    let (server, client) = start_fast().await;
    let held = client
        .put(
            "/v1/var/guarded?lock-acquire",
            r#"{"Items":{"k":"v"},"Lock":{"TTL":"10s"}}"#,
        )
        .await;
    assert_eq!(
        held.json()["Items"]["k"],
        "v",
        "acquire returns the items sent"
    );
    let id = held.lock_id();
    let placeholder = json!({"Namespace":"default","Path":"guarded","CreateIndex":0,"CreateTime":0,"ModifyIndex":0,"ModifyTime":0});

    let set = client
        .put("/v1/var/guarded", &items_body(&[("k", "x")]))
        .await;
    assert_eq!((set.status, set.json()), (409, placeholder.clone()));
    assert_eq!(set.index(), Some(0));
    let set_other = client
        .put(
            "/v1/var/guarded",
            r#"{"Items":{"k":"x"},"Lock":{"ID":"other"}}"#,
        )
        .await;
    assert_eq!(set_other.status, 409);
    let delete = client.delete("/v1/var/guarded").await;
    assert_eq!((delete.status, delete.json()), (409, placeholder.clone()));
    let modify_index = held.json()["ModifyIndex"].as_u64().unwrap();
    let cas = client
        .put(
            &format!("/v1/var/guarded?cas={modify_index}"),
            &items_body(&[("k", "x")]),
        )
        .await;
    assert_eq!(cas.status, 409);
    // A cas mismatch reports the stored variable, lock included, to a reader.
    let cas0 = client
        .put("/v1/var/guarded?cas=0", &items_body(&[("k", "x")]))
        .await;
    assert_eq!(cas0.status, 409);
    assert_eq!(cas0.lock_id(), id);
    assert_eq!(
        server.variable("default", "guarded").unwrap().items["k"],
        "v"
    );

    // The holder may write with its lock ID; the response shows the lock to its holder. The
    // leader's timer is left as it is (only acquire and release touch timers).
    let deadline = server.timers()[0].deadline;
    let owner = client
        .put(
            "/v1/var/guarded",
            &format!(r#"{{"Items":{{"k":"by-holder"}},"Lock":{{"ID":"{id}"}}}}"#),
        )
        .await;
    assert_eq!(owner.status, 200, "{}", owner.body);
    assert_eq!(owner.lock_id(), id);
    assert_eq!(
        (
            &owner.json()["Lock"]["TTL"],
            &owner.json()["Lock"]["LockDelay"]
        ),
        (&json!("1.5s"), &json!("1.5s")),
        "a set rewrites TTL and delay to the (scaled) defaults"
    );
    assert_eq!(server.timers().len(), 1);
    assert_eq!(
        server.timers()[0].deadline,
        deadline,
        "the write leaves the timer"
    );
    // Echoing the acquire answer's Lock (TTL and delay set) is refused.
    let echoed = client
        .put(
            "/v1/var/guarded",
            &format!(
                r#"{{"Items":{{"k":"x"}},"Lock":{{"ID":"{id}","TTL":"10s","LockDelay":"1.5s"}}}}"#
            ),
        )
        .await;
    assert_eq!(
        (echoed.status, echoed.body.as_str(), echoed.index()),
        (
            400,
            "RPC Error:: 400,RPC Error:: 400,variable should not contain lock definition",
            Some(0)
        )
    );
    // Still nobody else may delete.
    assert_eq!(client.delete("/v1/var/guarded").await.status, 409);
    assert_eq!(client.release("guarded", &id).await.status, 200);
    assert_eq!(
        client.get("/v1/var/guarded").await.json()["Items"]["k"],
        "by-holder"
    );
    assert_eq!(client.delete("/v1/var/guarded").await.status, 204);

    let refused: Vec<String> = kinds(&server)
        .into_iter()
        .filter_map(|k| match k {
            LockEventKind::WriteRefused { operation, .. } => Some(operation),
            _ => None,
        })
        .collect();
    assert_eq!(refused, ["set", "set", "delete", "cas", "delete"]);
}

#[tokio::test]
async fn acquire_replaces_items_of_an_unlocked_variable() {
    let (_server, client) = start_fast().await;
    client
        .put("/v1/var/items", &items_body(&[("a", "1"), ("b", "2")]))
        .await;
    let id = client.acquire("items", "10s", "").await.lock_id();
    assert!(
        client
            .get("/v1/var/items")
            .await
            .json()
            .get("Items")
            .is_none(),
        "Items null erases them"
    );
    client.release("items", &id).await;
    client
        .put("/v1/var/items?lock-acquire", r#"{"Items":{"c":"3"}}"#)
        .await;
    assert_eq!(
        client.get("/v1/var/items").await.json()["Items"],
        json!({"c": "3"})
    );
}

#[tokio::test]
async fn expires_after_twice_the_ttl_then_the_lock_delay() {
    let (server, client) = start_fast().await;
    let start = Instant::now();
    let id = client.acquire("exp", "1s", "800ms").await.lock_id();
    let timer = server.timers().pop().unwrap();
    let remaining = timer.deadline.saturating_duration_since(Instant::now());
    assert!(
        remaining > Duration::from_millis(1_800) && remaining <= Duration::from_secs(2),
        "{remaining:?}"
    );

    // Past one TTL but before two: still held.
    tokio::time::sleep(Duration::from_millis(1_500).saturating_sub(start.elapsed())).await;
    assert_eq!(client.acquire("exp", "1s", "").await.status, 409);
    // Past 2 × TTL: the timer fired; the lock stays for the delay; renew and others fail.
    tokio::time::sleep(Duration::from_millis(2_300).saturating_sub(start.elapsed())).await;
    let renew = client.renew("exp", &id).await;
    assert_eq!(
        (renew.status, renew.body.as_str()),
        (409, "attempting to modify locked variable")
    );
    assert_eq!(client.acquire("exp", "1s", "").await.status, 409);
    assert!(
        server
            .variable("default", "exp")
            .unwrap()
            .metadata
            .lock
            .is_some()
    );
    assert!(server.timers().iter().all(|t| t.in_delay));
    // After the delay the lock is gone and a new acquirer wins.
    tokio::time::sleep(Duration::from_millis(3_300).saturating_sub(start.elapsed())).await;
    assert!(
        server
            .variable("default", "exp")
            .unwrap()
            .metadata
            .lock
            .is_none()
    );
    assert_eq!(client.acquire("exp", "1s", "").await.status, 200);

    let history = server.history();
    let at =
        |pred: &dyn Fn(&LockEventKind) -> bool| history.iter().find(|e| pred(&e.kind)).unwrap().at;
    let acquired = at(&|k| matches!(k, LockEventKind::Acquired { lock_id, .. } if *lock_id == id));
    let expired = at(&|k| matches!(k, LockEventKind::TtlExpired { .. }));
    let cleared = at(
        &|k| matches!(k, LockEventKind::Invalidated { cleared_lock_id: Some(c), .. } if *c == id),
    );
    let ttl_span = expired - acquired;
    assert!(
        ttl_span >= Duration::from_secs(2) && ttl_span < Duration::from_millis(2_300),
        "{ttl_span:?}"
    );
    let delay_span = cleared - expired;
    assert!(
        delay_span >= Duration::from_millis(800) && delay_span < Duration::from_millis(1_100),
        "{delay_span:?}"
    );
}

#[tokio::test]
async fn renewing_keeps_the_lock_past_twice_the_ttl() {
    let (server, client) = start_fast().await;
    let id = client.acquire("kept", "1s", "100ms").await.lock_id();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(700)).await; // 0.7 × TTL, like the Go leaser
        assert_eq!(client.renew("kept", &id).await.status, 200);
    }
    assert_eq!(client.acquire("kept", "1s", "").await.status, 409);
    let renewed = kinds(&server)
        .iter()
        .filter(|k| matches!(k, LockEventKind::Renewed { .. }))
        .count();
    assert_eq!(renewed, 4);
    assert!(
        !kinds(&server)
            .iter()
            .any(|k| matches!(k, LockEventKind::TtlExpired { .. }))
    );
}

#[tokio::test]
async fn reacquire_with_own_id_does_not_reset_the_timer() {
    let (server, client) = start_fast().await;
    let id = client.acquire("re", "1s", "1s").await.lock_id();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let again = client.acquire_as("re", &id, "1s", "1s").await;
    assert_eq!(again.status, 200);
    assert_eq!(again.lock_id(), id);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    // 2.3s after the first acquire: the original timer fired although we re-acquired at 1.2s.
    assert_eq!(client.renew("re", &id).await.status, 409);
    assert!(kinds(&server).iter().any(|k| matches!(
        k,
        LockEventKind::Acquired {
            reacquired: true,
            timer_started: false,
            ..
        }
    )));
}

#[tokio::test]
async fn stale_invalidation_clears_a_newer_holder() {
    let (server, client) = start_fast().await;
    let first = client.acquire("race", "1s", "1s").await.lock_id();
    tokio::time::sleep(Duration::from_millis(2_300)).await; // in the lock delay (until 3s)
    // The old holder can still release during the delay.
    assert_eq!(client.release("race", &first).await.status, 200);
    let second = client.acquire("race", "1s", "1s").await;
    assert_eq!(second.status, 200);
    let second = second.lock_id();
    tokio::time::sleep(Duration::from_millis(1_000)).await; // the first lock's delay ends
    assert!(
        server
            .variable("default", "race")
            .unwrap()
            .metadata
            .lock
            .is_none()
    );
    let renew = client.renew("race", &second).await;
    assert_eq!(
        (renew.status, renew.body.as_str()),
        (409, "variable doesn't hold a lock")
    );
    assert!(kinds(&server).contains(&LockEventKind::Invalidated {
        expired_lock_id: first,
        cleared_lock_id: Some(second),
    }));
}

#[tokio::test]
async fn restart_keeps_variables_and_rebuilds_timers() {
    let (server, client) = start_fast().await;
    let addr = server.addr().unwrap();
    client.put("/v1/var/kept", &items_body(&[("k", "v")])).await;
    let id = client.acquire("delayed", "1s", "1500ms").await.lock_id();
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    assert_eq!(
        client.renew("delayed", &id).await.status,
        409,
        "in the lock delay"
    );

    server.restart().await.unwrap();
    assert_eq!(server.addr(), Some(addr), "same address after restart");
    assert_eq!(client.get("/v1/var/kept").await.json()["Items"]["k"], "v");
    // The pending invalidation was lost and a fresh 2 × TTL timer exists: renew works again.
    let renew = client.renew("delayed", &id).await;
    assert_eq!(renew.status, 200, "{}", renew.body);
    let timers = server.timers();
    assert_eq!(timers.len(), 1);
    assert!(!timers[0].in_delay);
    let kinds = kinds(&server);
    assert!(kinds.contains(&LockEventKind::TimersLost {
        lock_ids: vec![id.clone()]
    }));
    assert!(kinds.contains(&LockEventKind::TimerRestored {
        lock_id: id.clone()
    }));
    // Still held after the old delay would have ended.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        server
            .variable("default", "delayed")
            .unwrap()
            .metadata
            .lock
            .map(|l| l.id),
        Some(id)
    );
}

#[tokio::test]
async fn restart_gives_a_timer_to_a_lock_written_by_set() {
    let (server, client) = start_fast().await;
    // A plain set carrying a lock ID stores a lock without any leader timer.
    let resp = client
        .put(
            "/v1/var/odd",
            r#"{"Items":{"k":"v"},"Lock":{"ID":"handmade"}}"#,
        )
        .await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(
        client.renew("odd", "handmade").await.status,
        409,
        "no timer to renew"
    );
    assert!(kinds(&server).contains(&LockEventKind::LockWrittenBySet {
        lock_id: "handmade".into(),
        timer_running: false
    }));
    server.restart().await.unwrap();
    assert_eq!(client.renew("odd", "handmade").await.status, 200);
}

#[tokio::test]
async fn downtime_refuses_connections_and_shutdown_is_final() {
    let (server, client) = start_fast().await;
    let addr = server.addr().unwrap();
    let server = std::sync::Arc::new(server);
    let restarting = {
        let server = server.clone();
        tokio::spawn(async move {
            server
                .restart_with_downtime(Duration::from_millis(400))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "down during the restart"
    );
    restarting.await.unwrap().unwrap();
    assert_eq!(client.get("/v1/vars").await.status, 200);
    server.shutdown().await.unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    assert!(server.restart().await.is_err());
}

#[tokio::test]
async fn force_release_is_recorded() {
    let (server, client) = start_fast().await;
    let id = client.acquire("forced", "10s", "").await.lock_id();
    assert_eq!(server.force_release("default", "forced"), Some(id.clone()));
    assert_eq!(server.force_release("default", "forced"), None);
    assert!(server.timers().is_empty());
    assert_eq!(client.renew("forced", &id).await.status, 409);
    let events = server.history();
    let forced = events
        .iter()
        .find(|e| matches!(e.kind, LockEventKind::ForcedRelease { .. }))
        .unwrap();
    assert_eq!(forced.lock_id(), Some(id.as_str()));
    assert_eq!(
        (forced.namespace.as_str(), forced.path.as_str()),
        ("default", "forced")
    );
}

#[tokio::test]
async fn locks_are_per_namespace_and_renew_ignores_the_body_namespace() {
    let (_server, client) = start_fast().await;
    let a = client
        .put("/v1/var/n?lock-acquire&namespace=ns1", "{}")
        .await
        .lock_id();
    let b = client
        .put("/v1/var/n?lock-acquire&namespace=ns2", "{}")
        .await;
    assert_eq!(b.status, 200, "same path, other namespace");
    // Renew takes the namespace from the query only.
    let body = format!(r#"{{"Namespace":"ns1","Lock":{{"ID":"{a}"}}}}"#);
    assert_eq!(client.put("/v1/var/n?lock-renew", &body).await.status, 404);
    assert_eq!(
        client
            .put("/v1/var/n?lock-renew&namespace=ns1", &body)
            .await
            .status,
        200
    );
    // Release takes a non-empty body namespace over the query.
    let body = format!(r#"{{"Namespace":"ns1","Lock":{{"ID":"{a}"}}}}"#);
    assert_eq!(
        client
            .put("/v1/var/n?lock-release&namespace=ns2", &body)
            .await
            .status,
        200
    );
}
