//! ACLs over HTTP: capabilities per operation, matching order, workload identities, policy
//! changes while running, lock visibility, conflict redaction, and the Task API socket
//! (contract C.1–C.3, B.3 "Lock visibility", B.6).

mod support;

use nomad_conform_variables::{
    AclConfig, Capability::*, Listen, Policy, Profile, ServerConfig, Token, VariablesServer,
    WorkloadClaim,
};
use support::{Client, items_body, start};

const ROOT: &str = "root-secret";

fn acl_with(policies: Vec<Policy>, tokens: Vec<Token>) -> AclConfig {
    let mut acl = AclConfig::enabled().with_token(Token::management(ROOT));
    for policy in policies {
        acl = acl.with_policy(policy);
    }
    for token in tokens {
        acl = acl.with_token(token);
    }
    acl
}

#[tokio::test]
async fn capability_per_operation_table() {
    let policy = Policy::new("p")
        .path("default", "w", &[Write])
        .path("default", "r", &[Read])
        .path("default", "l", &[List])
        .path("default", "d", &[Destroy])
        .path("default", "rw", &[Read, Write])
        .path("default", "x", &[Read, Write, Deny]);
    let (_server, client) = start(
        Profile::fast(),
        acl_with(vec![policy], vec![Token::client("user", &["p"])]),
    )
    .await;
    let root = client.with_token(ROOT);
    for path in ["w", "r", "l", "d", "rw", "x"] {
        assert_eq!(
            root.put(&format!("/v1/var/{path}"), &items_body(&[("k", "v")]))
                .await
                .status,
            200
        );
    }
    let user = client.with_token("user");
    let set = items_body(&[("k", "new")]);
    // (method, uri, body, expected status)
    let table: Vec<(&str, String, Option<String>, u16)> = vec![
        ("PUT", "/v1/var/w".into(), Some(set.clone()), 200),
        ("GET", "/v1/var/w".into(), None, 403), // write implies no read
        ("DELETE", "/v1/var/w".into(), None, 403),
        ("GET", "/v1/var/r".into(), None, 200),
        ("PUT", "/v1/var/r".into(), Some(set.clone()), 403),
        ("GET", "/v1/var/l".into(), None, 403),
        ("DELETE", "/v1/var/d".into(), None, 204),
        ("PUT", "/v1/var/d".into(), Some(set.clone()), 403),
        ("GET", "/v1/var/x".into(), None, 403), // deny reduces the rule to deny
        ("PUT", "/v1/var/x".into(), Some(set.clone()), 403),
        ("GET", "/v1/var/unruled".into(), None, 403),
        (
            "PUT",
            "/v1/var/w?lock-acquire".into(),
            Some("{}".into()),
            200,
        ),
        (
            "PUT",
            "/v1/var/r?lock-acquire".into(),
            Some("{}".into()),
            403,
        ),
        (
            "PUT",
            "/v1/var/r?lock-renew".into(),
            Some(r#"{"Lock":{"ID":"x"}}"#.into()),
            403,
        ),
        (
            "PUT",
            "/v1/var/r?lock-release".into(),
            Some(r#"{"Lock":{"ID":"x"}}"#.into()),
            403,
        ),
        // ACL is checked before validation
        (
            "PUT",
            "/v1/var/unruled?lock-acquire".into(),
            Some(r#"{"Lock":{"TTL":"1ms"}}"#.into()),
            403,
        ),
    ];
    for (method, uri, body, status) in table {
        let resp = user.send(method, &uri, body.as_deref(), &[]).await;
        assert_eq!(resp.status, status, "{method} {uri}: {}", resp.body);
        if status == 403 {
            assert_eq!(resp.body, "Permission denied");
        }
    }
    // List needs `list` per item: read implies it, write and destroy do not.
    let listed: Vec<String> = user
        .get("/v1/vars")
        .await
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["Path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, ["l", "r", "rw"]);
}

#[tokio::test]
async fn matching_order_exact_then_closest_glob() {
    let policy = Policy::new("p")
        .path("default", "*", &[List])
        .path("default", "foo/*", &[Write])
        .path("default", "foo/bar", &[Read])
        .path("default", "system/*", &[Deny])
        .path("default", "*/baz", &[Read])
        .path("default", "*/qux/baz", &[Read]);
    let (_server, client) = start(
        Profile::fast(),
        acl_with(vec![policy], vec![Token::client("user", &["p"])]),
    )
    .await;
    let root = client.with_token(ROOT);
    for path in ["foo/bar", "foo/baz", "system/x", "other", "foo/qux/baz"] {
        root.put(&format!("/v1/var/{path}"), &items_body(&[("k", "v")]))
            .await;
    }
    let user = client.with_token("user");
    let set = items_body(&[("k", "v2")]);
    let table = [
        // the exact rule wins and is not merged with globs
        ("GET", "/v1/var/foo/bar", 200),
        ("PUT", "/v1/var/foo/bar", 403),
        // `foo/*` (diff 3) beats `*/baz` (diff 3) on the tie: greatest key, prefix over suffix
        ("PUT", "/v1/var/foo/baz", 200),
        ("GET", "/v1/var/foo/baz", 403),
        // `*/qux/baz` (diff 3) is closer than `foo/*` and `*/baz` (diff 7)
        ("GET", "/v1/var/foo/qux/baz", 200),
        ("PUT", "/v1/var/foo/qux/baz", 403),
        ("GET", "/v1/var/system/x", 403),
        ("GET", "/v1/var/other", 403), // list only
    ];
    for (method, uri, status) in table {
        let body = (method == "PUT").then_some(set.as_str());
        let resp = user.send(method, uri, body, &[]).await;
        assert_eq!(resp.status, status, "{method} {uri}: {}", resp.body);
    }
    let listed: Vec<String> = user
        .get("/v1/vars")
        .await
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["Path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, ["foo/bar", "foo/qux/baz", "other"]);
}

#[tokio::test]
async fn workload_identity_gets_read_on_its_own_paths_only() {
    let claim = WorkloadClaim {
        namespace: "prod".into(),
        job: "example".into(),
        group: "web".into(),
        task: "httpd".into(),
    };
    // The singleton guide's policy: write on the lock path, attached to the job.
    let lock_policy =
        Policy::new("example-lock").path("prod", "nomad/jobs/example/lock", &[Write, Read, List]);
    let deny_jobs = Policy::new("deny-jobs")
        .path("*", "nomad/jobs", &[List])
        .path("*", "nomad/jobs/*", &[Deny]);
    let (_server, client) = start(
        Profile::fast(),
        acl_with(
            vec![lock_policy, deny_jobs],
            vec![Token::workload("wi", claim, &["example-lock", "deny-jobs"])],
        ),
    )
    .await;
    let root = client.with_token(ROOT);
    for uri in [
        "/v1/var/nomad/jobs/example?namespace=prod",
        "/v1/var/nomad/jobs/example/web/httpd?namespace=prod",
        "/v1/var/nomad/jobs/example/other?namespace=prod",
        "/v1/var/nomad/jobs/example?namespace=dev",
    ] {
        assert_eq!(root.put(uri, &items_body(&[("k", "v")])).await.status, 200);
    }
    let wi = client.with_token("wi");
    let table = [
        ("GET", "/v1/var/nomad/jobs/example?namespace=prod", 200),
        (
            "GET",
            "/v1/var/nomad/jobs/example/web/httpd?namespace=prod",
            200,
        ),
        ("GET", "/v1/var/nomad/jobs/example/web?namespace=prod", 404), // allowed, absent
        ("GET", "/v1/var/nomad/jobs?namespace=prod", 404),
        (
            "GET",
            "/v1/var/nomad/jobs/example/other?namespace=prod",
            403,
        ), // sub-path: glob deny
        ("GET", "/v1/var/nomad/jobs/example?namespace=dev", 403), // other namespace
        ("PUT", "/v1/var/nomad/jobs/example?namespace=prod", 403), // the claim never grants write
        (
            "PUT",
            "/v1/var/nomad/jobs/example/lock?lock-acquire&namespace=prod",
            200,
        ),
    ];
    for (method, uri, status) in table {
        let body = (method == "PUT").then_some("{\"Items\":{\"k\":\"v\"}}");
        let resp = wi.send(method, uri, body, &[]).await;
        assert_eq!(resp.status, status, "{method} {uri}: {}", resp.body);
    }
    let listed: Vec<String> = wi
        .get("/v1/vars?namespace=prod")
        .await
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["Path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        listed,
        [
            "nomad/jobs/example",
            "nomad/jobs/example/lock",
            "nomad/jobs/example/web/httpd"
        ]
    );
}

#[tokio::test]
async fn workload_identity_without_a_policy_cannot_lock_its_own_paths() {
    let claim = WorkloadClaim {
        namespace: "default".into(),
        job: "example".into(),
        group: "web".into(),
        task: "httpd".into(),
    };
    let (_server, client) = start(
        Profile::fast(),
        acl_with(vec![], vec![Token::workload("wi", claim, &[])]),
    )
    .await;
    let root = client.with_token(ROOT);
    let held = root
        .put("/v1/var/nomad/jobs/example/web/httpd?lock-acquire", "{}")
        .await;
    assert_eq!(held.status, 200, "{}", held.body);
    let id = held.lock_id();
    let wi = client.with_token("wi");
    // Reads of its own paths work; no lock operation does, on any of them.
    assert_eq!(
        wi.get("/v1/var/nomad/jobs/example/web/httpd").await.status,
        200
    );
    for path in [
        "nomad/jobs",
        "nomad/jobs/example",
        "nomad/jobs/example/web",
        "nomad/jobs/example/web/httpd",
    ] {
        let resp = wi.put(&format!("/v1/var/{path}?lock-acquire"), "{}").await;
        assert_eq!(
            (resp.status, resp.body.as_str()),
            (403, "Permission denied"),
            "{path}"
        );
    }
    let path = "nomad/jobs/example/web/httpd";
    assert_eq!(wi.renew(path, &id).await.status, 403);
    let release = wi.release(path, &id).await;
    assert_eq!((release.status, release.index()), (403, Some(0)));
    assert_eq!(root.renew(path, &id).await.status, 200);
}

#[tokio::test]
async fn unknown_tokens_are_refused_and_anonymous_uses_its_policy() {
    let mut acl = acl_with(
        vec![Policy::new("anon").path("default", "public/*", &[Read])],
        vec![],
    );
    acl.anonymous_policies = vec!["anon".into()];
    let (_server, client) = start(Profile::fast(), acl).await;
    client
        .with_token(ROOT)
        .put("/v1/var/public/a", &items_body(&[("k", "v")]))
        .await;
    assert_eq!(
        client.get("/v1/var/public/a").await.status,
        200,
        "anonymous read"
    );
    assert_eq!(
        client
            .put("/v1/var/public/a", &items_body(&[("k", "v")]))
            .await
            .status,
        403
    );
    let stranger = client.with_token("who-is-this");
    for (method, uri, body) in [
        ("GET", "/v1/var/public/a", None),
        ("GET", "/v1/vars", None),
        ("PUT", "/v1/var/public/a?lock-renew", Some("{}")),
        ("PUT", "/v1/var/public/a?lock-acquire", Some("{}")),
        ("DELETE", "/v1/var/public/a", None),
    ] {
        let resp = stranger.send(method, uri, body, &[]).await;
        assert_eq!(
            (resp.status, resp.body.as_str()),
            (403, "Permission denied"),
            "{method} {uri}"
        );
    }
    // Authorization: Bearer is accepted like X-Nomad-Token.
    let bearer = client
        .send(
            "PUT",
            "/v1/var/b",
            Some(&items_body(&[("k", "v")])),
            &[("Authorization", &format!("Bearer {ROOT}"))],
        )
        .await;
    assert_eq!(bearer.status, 200);
}

#[tokio::test]
async fn policy_changes_apply_to_the_next_request() {
    let writer = Policy::new("lock").path("default", "svc/lock", &[Write]);
    let (server, client) = start(
        Profile::fast(),
        acl_with(
            vec![writer.clone()],
            vec![Token::client("holder", &["lock"])],
        ),
    )
    .await;
    let holder = client.with_token("holder");
    let acquired = holder.acquire("svc/lock", "10s", "").await;
    assert_eq!(acquired.status, 200);
    assert_eq!(acquired.lock_id().len(), 36, "the holder sees its own lock");
    let id = acquired.lock_id();
    assert_eq!(holder.renew("svc/lock", &id).await.status, 200);

    server
        .upsert_policy(Policy::new("lock").path("default", "svc/lock", &[Read]))
        .unwrap();
    assert_eq!(holder.renew("svc/lock", &id).await.status, 403);
    server.upsert_policy(writer).unwrap();
    assert_eq!(holder.renew("svc/lock", &id).await.status, 200);
    server.remove_token("holder");
    assert_eq!(holder.renew("svc/lock", &id).await.status, 403);
    server.upsert_token(Token::client("holder", &["lock"]));
    server.remove_policy("lock");
    assert_eq!(holder.renew("svc/lock", &id).await.status, 403);
    server.set_acl(AclConfig::disabled()).unwrap();
    assert_eq!(holder.renew("svc/lock", &id).await.status, 200);
    // Invalid policies are refused with Nomad's parse rules.
    let err = server
        .upsert_policy(Policy::new("bad").path("default", "/leading", &[Read]))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("failed to accept ACL policy"),
        "{err}"
    );
    assert!(
        server
            .set_acl(acl_with(
                vec![Policy::new("b").path("no spaces", "x", &[Read])],
                vec![]
            ))
            .is_err()
    );
}

#[tokio::test]
async fn locks_are_hidden_from_non_management_readers() {
    let policy = Policy::new("p").path("default", "l", &[Read, Write]);
    let (_server, client) = start(
        Profile::fast(),
        acl_with(vec![policy], vec![Token::client("user", &["p"])]),
    )
    .await;
    let root = client.with_token(ROOT);
    let user = client.with_token("user");
    let id = root.acquire("l", "10s", "").await.lock_id();
    assert_eq!(root.get("/v1/var/l").await.lock_id(), id);
    assert!(user.get("/v1/var/l").await.json().get("Lock").is_none());
    assert!(user.get("/v1/vars").await.json()[0].get("Lock").is_none());
    assert_eq!(
        root.get("/v1/vars").await.json()[0]["Lock"]["ID"],
        id.as_str()
    );
    // Renew answers always carry the lock.
    assert_eq!(user.renew("l", &id).await.lock_id(), id);
}

#[tokio::test]
async fn conflicts_are_redacted_without_read() {
    let policy =
        Policy::new("p")
            .path("default", "locked", &[Write])
            .path("default", "data", &[Write]);
    let (_server, client) = start(
        Profile::fast(),
        acl_with(vec![policy], vec![Token::client("writer", &["p"])]),
    )
    .await;
    let root = client.with_token(ROOT);
    let writer = client.with_token("writer");
    root.acquire("locked", "10s", "").await;
    // Release with a wrong ID and no read: the conflict carries an empty Lock.
    let resp = writer.release("locked", "wrong").await;
    assert_eq!(resp.status, 409);
    assert_eq!(
        resp.json()["Lock"],
        serde_json::json!({"ID": "", "TTL": "", "LockDelay": ""})
    );
    // With read (management) the placeholder has no Lock.
    assert!(
        root.release("locked", "wrong")
            .await
            .json()
            .get("Lock")
            .is_none()
    );
    // A cas conflict without read shows metadata but no items.
    root.put("/v1/var/data", &items_body(&[("secret", "s")]))
        .await;
    let resp = writer
        .put("/v1/var/data?cas=0", &items_body(&[("k", "v")]))
        .await;
    assert_eq!(resp.status, 409);
    assert!(resp.json().get("Items").is_none());
    assert!(resp.json()["ModifyIndex"].as_u64().unwrap() > 0);
    let resp = root
        .put("/v1/var/data?cas=0", &items_body(&[("k", "v")]))
        .await;
    assert_eq!(resp.json()["Items"]["secret"], "s");
}

#[tokio::test]
async fn task_api_socket_always_requires_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("api.sock");
    // ACLs off: any token passes, none is refused.
    let server = VariablesServer::start(
        ServerConfig::new(Listen::TaskApi(socket.clone())).with_profile(Profile::fast()),
    )
    .await
    .unwrap();
    assert_eq!(server.socket_path(), Some(socket.as_path()));
    assert_eq!(server.nomad_addr(), format!("unix://{}", socket.display()));
    let client = Client::of(&server);
    let resp = client.get("/v1/vars").await;
    assert_eq!((resp.status, resp.body.as_str()), (401, "Unauthorized"));
    assert_eq!(
        client.with_token("anything").get("/v1/vars").await.status,
        200
    );
    assert_eq!(
        client
            .with_token("anything")
            .acquire("nomad/jobs/j/lock", "1s", "")
            .await
            .status,
        200
    );
    assert_eq!(server.requests()[0].listener, "task-api");

    // ACLs on: unknown tokens get 403 "Forbidden" before any handler; known tokens pass.
    let claim = WorkloadClaim {
        namespace: "default".into(),
        job: "j".into(),
        group: "g".into(),
        task: "t".into(),
    };
    server
        .set_acl(acl_with(vec![], vec![Token::workload("wi", claim, &[])]))
        .unwrap();
    let resp = client
        .with_token("stranger")
        .get("/v1/var/nomad/jobs/j")
        .await;
    assert_eq!((resp.status, resp.body.as_str()), (403, "Forbidden"));
    assert_eq!(client.get("/v1/var/nomad/jobs/j").await.status, 401);
    assert_eq!(
        client
            .with_token("wi")
            .get("/v1/var/nomad/jobs/j")
            .await
            .status,
        404
    );
    assert_eq!(
        client
            .with_token("wi")
            .get("/v1/var/nomad/jobs/j/lock")
            .await
            .status,
        403
    );
    // The socket survives a restart and is removed at shutdown.
    server.restart().await.unwrap();
    assert_eq!(
        client
            .with_token("wi")
            .get("/v1/var/nomad/jobs/j")
            .await
            .status,
        404
    );
    server.shutdown().await.unwrap();
    assert!(!socket.exists());
}

#[tokio::test]
async fn plain_unix_socket_behaves_like_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nomad.sock");
    let server = VariablesServer::start(
        ServerConfig::new(Listen::Unix(socket)).with_profile(Profile::fast()),
    )
    .await
    .unwrap();
    let client = Client::of(&server);
    assert_eq!(
        client
            .put("/v1/var/u", &items_body(&[("k", "v")]))
            .await
            .status,
        200
    );
    assert_eq!(client.get("/v1/var/u").await.status, 200);
    assert_eq!(server.requests()[0].listener, "unix");
}
