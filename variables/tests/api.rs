//! The Variables HTTP API without locks: request validation, set/read/delete, cas,
//! namespaces, list, and Nomad's headers (contract B.2, B.3 "cas semantics", C.4).

mod support;

use support::{Client, items_body, start_fast};

/// What a table row expects.
struct Row {
    method: &'static str,
    uri: &'static str,
    body: Option<String>,
    status: u16,
    /// Exact body text when `Some`.
    text: Option<&'static str>,
}

fn row(
    method: &'static str,
    uri: &'static str,
    body: Option<String>,
    status: u16,
    text: Option<&'static str>,
) -> Row {
    Row {
        method,
        uri,
        body,
        status,
        text,
    }
}

#[tokio::test]
async fn request_validation_table() {
    let (_server, client) = start_fast().await;
    let items = || Some(items_body(&[("k", "v")]));
    let big = format!("{{\"Items\":{{\"k\":\"{}\"}}}}", "x".repeat(65_536));
    let rows = [
        row("PUT", "/v1/var/a", None, 400, Some("Request body is empty")),
        row(
            "PUT",
            "/v1/var/a",
            Some("{}".into()),
            400,
            Some("variable missing required Items object"),
        ),
        row(
            "PUT",
            "/v1/var/a",
            Some(r#"{"Items":{}}"#.into()),
            400,
            Some("variable missing required Items object"),
        ),
        row(
            "PUT",
            "/v1/var/a",
            Some(r#"{"Items":null}"#.into()),
            400,
            Some("variable missing required Items object"),
        ),
        row(
            "PUT",
            "/v1/var/a",
            Some(r#"{"Items":{"k":1}}"#.into()),
            400,
            None,
        ),
        row("PUT", "/v1/var/a", Some("not json".into()), 400, None),
        row(
            "PUT",
            "/v1/var/a.b",
            items(),
            400,
            Some("RPC Error:: 400,invalid path \"a.b\""),
        ),
        row("PUT", "/v1/var/nomad", items(), 400, None),
        row("PUT", "/v1/var/nomad/other", items(), 400, None),
        row("PUT", "/v1/var/nomad/job-templates", items(), 400, None),
        row("PUT", "/v1/var/nomad/job-templates/t", items(), 200, None),
        row("PUT", "/v1/var/nomad/jobs/example", items(), 200, None),
        row(
            "PUT",
            "/v1/var/a?namespace=*",
            items(),
            400,
            Some("RPC Error:: 400,can not target wildcard (\"*\")namespace"),
        ),
        row(
            "PUT",
            "/v1/var/big",
            Some(big),
            400,
            Some("RPC Error:: 400,variables are limited to 64KiB in total size"),
        ),
        row(
            "PUT",
            "/v1/var/a",
            Some(r#"{"Items":{"k":"v"},"Lock":{"TTL":"15s"}}"#.into()),
            400,
            Some("RPC Error:: 400,RPC Error:: 400,variable should not contain lock definition"),
        ),
        row(
            "PUT",
            "/v1/var/a?cas=abc",
            items(),
            400,
            Some("can not parse cas: strconv.ParseUint: parsing \"abc\": invalid syntax"),
        ),
        row("PUT", "/v1/var/a?cas=-1", items(), 400, None),
        row(
            "PUT",
            "/v1/var/a?lock-acquire&lock-release",
            Some("{}".into()),
            400,
            Some("multiple lock operations"),
        ),
        row(
            "PUT",
            "/v1/var/a?lock-renew=&lock-acquire=",
            Some("{}".into()),
            400,
            Some("multiple lock operations"),
        ),
        row(
            "PUT",
            "/v1/var/a?lock-acquire&cas=1",
            Some("{}".into()),
            400,
            Some("CAS can't be used with lock operations"),
        ),
        row(
            "PUT",
            "/v1/var/a?lock-acquire",
            None,
            400,
            Some("Request body is empty"),
        ),
        row(
            "PUT",
            "/v1/var/",
            items(),
            400,
            Some("missing variable path"),
        ),
        row("GET", "/v1/var/", None, 400, Some("missing variable path")),
        row("PATCH", "/v1/var/a", items(), 400, Some("Invalid method")),
        row("POST", "/v1/vars", None, 405, Some("Invalid method")),
        row(
            "GET",
            "/v1/var/does/not/exist",
            None,
            404,
            Some("variable not found"),
        ),
        row("DELETE", "/v1/var/does/not/exist", None, 204, Some("")),
        row("GET", "/v1/nothing-here", None, 404, None),
    ];
    for r in rows {
        let resp = client.send(r.method, r.uri, r.body.as_deref(), &[]).await;
        assert_eq!(
            resp.status, r.status,
            "{} {}: {:?}",
            r.method, r.uri, resp.body
        );
        if let Some(text) = r.text {
            assert_eq!(resp.body, text, "{} {}", r.method, r.uri);
        }
        if r.status >= 400 && r.status != 404 {
            assert!(
                resp.header("content-type")
                    .unwrap_or("")
                    .starts_with("text/plain"),
                "{} {} errors are plain text",
                r.method,
                r.uri
            );
        }
    }
}

#[tokio::test]
async fn index_header_on_errors_follows_the_go_handlers() {
    let (_server, client) = start_fast().await;
    // Decode errors happen before the RPC: no index header.
    let resp = client.put("/v1/var/a", "{").await;
    assert_eq!((resp.status, resp.index()), (400, None));
    // Validation errors come back from the RPC: index 0.
    let resp = client.put("/v1/var/a.b", &items_body(&[("k", "v")])).await;
    assert_eq!((resp.status, resp.index()), (400, Some(0)));
    // POST is accepted like PUT.
    let resp = client
        .send("POST", "/v1/var/p", Some(&items_body(&[("k", "v")])), &[])
        .await;
    assert_eq!(resp.status, 200);
}

#[tokio::test]
async fn set_read_update_delete_roundtrip() {
    let (server, client) = start_fast().await;
    let created = client
        .put("/v1/var/app/config", &items_body(&[("user", "admin")]))
        .await;
    assert_eq!(created.status, 200);
    let body = created.json();
    assert_eq!(body["Namespace"], "default");
    assert_eq!(body["Path"], "app/config");
    assert_eq!(body["Items"]["user"], "admin");
    assert!(body.get("Lock").is_none());
    let first_index = body["ModifyIndex"].as_u64().unwrap();
    assert_eq!(body["CreateIndex"].as_u64(), Some(first_index));
    assert_eq!(created.index(), Some(first_index));
    assert!(body["CreateTime"].as_i64().unwrap() > 1_600_000_000_000_000_000);

    let read = client.get("/v1/var/app/config").await;
    assert_eq!(read.status, 200);
    assert_eq!(read.json()["Items"]["user"], "admin");
    assert_eq!(read.index(), Some(first_index));
    assert_eq!(read.header("x-nomad-knownleader"), Some("true"));
    assert_eq!(read.header("content-type"), Some("application/json"));

    let updated = client
        .put("/v1/var/app/config", &items_body(&[("user", "root")]))
        .await;
    let body = updated.json();
    assert_eq!(body["CreateIndex"].as_u64(), Some(first_index));
    assert!(body["ModifyIndex"].as_u64().unwrap() > first_index);

    let deleted = client.delete("/v1/var/app/config").await;
    assert_eq!(deleted.status, 204);
    assert_eq!(deleted.body, "");
    assert!(deleted.index().unwrap() > first_index);
    assert_eq!(client.get("/v1/var/app/config").await.status, 404);
    assert!(server.variable("default", "app/config").is_none());
}

#[tokio::test]
async fn cas_table() {
    let (_server, client) = start_fast().await;
    let items = items_body(&[("k", "v1")]);
    // cas=0 creates only if absent
    let created = client.put("/v1/var/c?cas=0", &items).await;
    assert_eq!(created.status, 200);
    let index = created.json()["ModifyIndex"].as_u64().unwrap();
    let again = client.put("/v1/var/c?cas=0", &items).await;
    assert_eq!(again.status, 409);
    assert_eq!(
        again.json()["Items"]["k"],
        "v1",
        "a reader sees the conflicting items"
    );
    assert_eq!(
        again.index(),
        Some(index),
        "index header is the conflict's ModifyIndex"
    );
    // wrong index
    let wrong = client
        .put(&format!("/v1/var/c?cas={}", index + 100), &items)
        .await;
    assert_eq!(wrong.status, 409);
    assert_eq!(wrong.json()["ModifyIndex"].as_u64(), Some(index));
    // cas on a missing variable: zero-value conflict with namespace and path only
    let missing = client.put("/v1/var/nope?cas=7", &items).await;
    assert_eq!(missing.status, 409);
    let body = missing.json();
    assert_eq!(body["Path"], "nope");
    assert_eq!(body["ModifyIndex"], 0);
    assert!(body.get("Items").is_none());
    assert_eq!(missing.index(), Some(0));
    // right index
    let ok = client
        .put(
            &format!("/v1/var/c?cas={index}"),
            &items_body(&[("k", "v2")]),
        )
        .await;
    assert_eq!(ok.status, 200);
    let index2 = ok.json()["ModifyIndex"].as_u64().unwrap();
    // delete cas
    assert_eq!(client.delete("/v1/var/nope?cas=0").await.status, 204);
    assert_eq!(client.delete("/v1/var/nope?cas=3").await.status, 409);
    assert_eq!(client.delete("/v1/var/c?cas=0").await.status, 409);
    assert_eq!(
        client
            .delete(&format!("/v1/var/c?cas={index}"))
            .await
            .status,
        409
    );
    assert_eq!(
        client
            .delete(&format!("/v1/var/c?cas={index2}"))
            .await
            .status,
        204
    );
    assert_eq!(client.get("/v1/var/c").await.status, 404);
}

#[tokio::test]
async fn namespaces_are_separate_and_body_namespace_wins() {
    let (server, client) = start_fast().await;
    assert_eq!(
        client
            .put("/v1/var/x", &items_body(&[("k", "default")]))
            .await
            .status,
        200
    );
    assert_eq!(
        client
            .put("/v1/var/x?namespace=ns1", &items_body(&[("k", "ns1")]))
            .await
            .status,
        200
    );
    assert_eq!(
        client.get("/v1/var/x").await.json()["Items"]["k"],
        "default"
    );
    let read = client.get("/v1/var/x?namespace=ns1").await;
    assert_eq!(read.json()["Items"]["k"], "ns1");
    assert_eq!(read.json()["Namespace"], "ns1");
    assert_eq!(client.get("/v1/var/x?namespace=ns2").await.status, 404);
    // A non-empty body namespace takes precedence over the query for writes.
    let body = r#"{"Namespace":"ns2","Items":{"k":"from-body"}}"#;
    let resp = client.put("/v1/var/y?namespace=ns1", body).await;
    assert_eq!(resp.json()["Namespace"], "ns2");
    assert!(server.variable("ns2", "y").is_some());
    assert!(server.variable("ns1", "y").is_none());
    // Deleting in one namespace leaves the other.
    assert_eq!(client.delete("/v1/var/x?namespace=ns1").await.status, 204);
    assert_eq!(client.get("/v1/var/x").await.status, 200);
}

#[tokio::test]
async fn list_filters_by_namespace_and_prefix() {
    let (_server, client) = start_fast().await;
    for (path, ns) in [
        ("app/a", "default"),
        ("app/b", "default"),
        ("other", "default"),
        ("app/c", "ns1"),
    ] {
        let uri = format!("/v1/var/{path}?namespace={ns}");
        assert_eq!(
            client.put(&uri, &items_body(&[("k", "v")])).await.status,
            200
        );
    }
    let paths = |resp: &support::Resp| -> Vec<String> {
        resp.json()
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                format!(
                    "{}:{}",
                    v["Namespace"].as_str().unwrap(),
                    v["Path"].as_str().unwrap()
                )
            })
            .collect()
    };
    let all_default = client.get("/v1/vars").await;
    assert_eq!(
        paths(&all_default),
        ["default:app/a", "default:app/b", "default:other"]
    );
    assert!(
        all_default.json()[0].get("Items").is_none(),
        "list returns metadata only"
    );
    assert!(all_default.index().unwrap() >= 4);
    assert_eq!(all_default.header("x-nomad-lastcontact"), Some("0"));
    assert_eq!(
        paths(&client.get("/v1/vars?prefix=app/").await),
        ["default:app/a", "default:app/b"]
    );
    assert_eq!(
        paths(&client.get("/v1/vars?namespace=*&prefix=app").await),
        ["default:app/a", "default:app/b", "ns1:app/c"]
    );
    assert_eq!(
        paths(&client.get("/v1/vars?namespace=empty").await),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn go_json_decoding_quirks_over_http() {
    let (_server, client) = start_fast().await;
    // Field names match case-insensitively; bytes after the first JSON value are ignored.
    let resp = client
        .put("/v1/var/q", r#"{"items":{"a":"b"}} trailing garbage"#)
        .await;
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(resp.json()["Items"]["a"], "b");
    // The URL path wins over the body path.
    let resp = client
        .put(
            "/v1/var/url-path",
            r#"{"Path":"body-path","Items":{"a":"b"}}"#,
        )
        .await;
    assert_eq!(resp.json()["Path"], "url-path");
}

#[tokio::test]
async fn non_canonical_paths_redirect_like_go_servemux() {
    let (_server, client) = start_fast().await;
    let resp = client.get("/v1/var/a//b?namespace=x").await;
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/v1/var/a/b?namespace=x"));
    let resp = client.put("/v1/var/./a", &items_body(&[("k", "v")])).await;
    assert_eq!(resp.status, 301);
    let resp = client.get("/v1/var").await;
    assert_eq!(
        (resp.status, resp.header("location")),
        (301, Some("/v1/var/"))
    );
    // An escaped slash decodes into the path.
    assert_eq!(
        client
            .put("/v1/var/a%2Fb", &items_body(&[("k", "v")]))
            .await
            .status,
        200
    );
    assert_eq!(client.get("/v1/var/a/b").await.status, 200);
}

#[tokio::test]
async fn request_log_records_every_exchange() {
    let (server, client) = start_fast().await;
    client
        .put(
            "/v1/var/logged?namespace=default",
            &items_body(&[("k", "v")]),
        )
        .await;
    client.get("/v1/var/missing").await;
    Client::of(&server)
        .with_token("secret")
        .get("/v1/vars")
        .await;
    let log = server.requests();
    assert_eq!(log.len(), 3);
    assert_eq!(
        (log[0].method.as_str(), log[0].path.as_str()),
        ("PUT", "/v1/var/logged")
    );
    assert_eq!(log[0].query, "namespace=default");
    assert_eq!(log[0].status, 200);
    assert!(log[0].request_body.contains("\"k\":\"v\""));
    assert!(log[0].response_body.contains("\"Path\":\"logged\""));
    assert_eq!(log[1].status, 404);
    assert!(!log[1].token_sent);
    assert!(log[2].token_sent);
    assert_eq!(log[2].listener, "tcp");
    assert!(log[0].at <= log[1].at && log[1].at <= log[2].at);
    assert_eq!(log.iter().map(|r| r.seq).collect::<Vec<_>>(), [0, 1, 2]);
}
