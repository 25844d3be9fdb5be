//! The harness's own calls to the Variables API: one request on a fresh connection ([`call`],
//! also the transport of the Variables server suite), and what "another holder" of a lock does
//! (acquire, renew, release), sent through a proxy of its own so that its exchanges are recorded
//! beside the clients' and its lock ID is attributed to it.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use serde_json::json;

use super::exchange::lock_id_in;
use super::proxy::{Upstream, connect};

/// Largest answer read (a list of a busy cluster's variables stays far below).
const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// Status and body of one answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The `X-Nomad-Index` header, when there is one.
    pub index: Option<u64>,
    pub body: String,
}

/// One request on a new connection, bounded by `timeout`.
pub async fn call(
    upstream: &Upstream,
    method: &str,
    path_and_query: &str,
    token: Option<&str>,
    body: Option<String>,
    timeout: Duration,
) -> Result<Answer, String> {
    let exchange = async {
        let mut sender = connect(upstream).await?;
        let mut req = Request::builder()
            .method(method)
            .uri(path_and_query)
            .header("host", upstream.host_header());
        if let Some(t) = token {
            crate::secrets::register(t);
            req = req.header("x-nomad-token", t);
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| format!("failed to build the request: {e}"))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = resp.status().as_u16();
        let index = resp
            .headers()
            .get("x-nomad-index")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let bytes = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| format!("failed to read the answer: {e}"))?
            .to_bytes();
        // Tokens' secrets in an answer (the ACL API's SecretID) are redacted everywhere.
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) {
            crate::secrets::register_from_json(&v);
        }
        Ok(Answer {
            status,
            index,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("no answer within {}", crate::fmt_duration(timeout)))?
}

/// `/v1/var/<path>?<flag>[&namespace=<ns>]`
pub fn lock_target(path: &str, flag: &str, namespace: Option<&str>) -> String {
    let mut t = format!("/v1/var/{}?{flag}", path.trim_start_matches('/'));
    if let Some(ns) = namespace {
        t.push_str("&namespace=");
        t.push_str(ns);
    }
    t
}

/// Go's duration text, as Nomad's API reads it.
pub fn go_duration(d: Duration) -> String {
    nomad_conform_variables::format_go_duration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// A holder of the lock other than the client under test.
#[derive(Clone, Debug)]
pub struct Holder {
    pub upstream: Upstream,
    pub path: String,
    pub namespace: Option<String>,
    pub token: Option<String>,
    pub timeout: Duration,
}

impl Holder {
    /// Acquire with `ttl` and `delay`; the lock ID when granted.
    pub async fn acquire(&self, ttl: Duration, delay: Duration) -> Result<String, String> {
        let body = json!({
            "Path": self.path,
            "Lock": {
                "TTL": go_duration(ttl),
                "LockDelay": go_duration(delay),
            }
        });
        let a = self.send("lock-acquire", body).await?;
        match (a.status, lock_id_in(a.body.as_bytes())) {
            (200, Some(id)) => Ok(id),
            (status, _) => Err(format!("lock-acquire answered {status}: {}", a.body)),
        }
    }

    /// Renew; Ok when the server answered 200.
    pub async fn renew(&self, id: &str) -> Result<(), String> {
        let a = self
            .send("lock-renew", json!({"Path": self.path, "Lock": {"ID": id}}))
            .await?;
        match a.status {
            200 => Ok(()),
            status => Err(format!("lock-renew answered {status}: {}", a.body)),
        }
    }

    /// Release; Ok when the server answered 200.
    pub async fn release(&self, id: &str) -> Result<(), String> {
        let a = self
            .send(
                "lock-release",
                json!({"Path": self.path, "Lock": {"ID": id}}),
            )
            .await?;
        match a.status {
            200 => Ok(()),
            status => Err(format!("lock-release answered {status}: {}", a.body)),
        }
    }

    async fn send(&self, flag: &str, body: serde_json::Value) -> Result<Answer, String> {
        call(
            &self.upstream,
            "PUT",
            &lock_target(&self.path, flag, self.namespace.as_deref()),
            self.token.as_deref(),
            Some(body.to_string()),
            self.timeout,
        )
        .await
    }
}
