//! What "another holder" of a lock does (acquire, renew, release): the harness's own calls to
//! the Variables API, over the project's Nomad API client ([`crate::nomad_api::call`]), sent
//! through a proxy of its own so that its exchanges are recorded beside the clients' and its
//! lock ID is attributed to it.

use std::time::Duration;

use serde_json::json;

use super::exchange::lock_id_in;
use crate::nomad_api::{Answer, Target, call};

/// `/v1/var/<path>?<flag>[&namespace=<ns>][&region=<r>]`
pub fn lock_target(
    path: &str,
    flag: &str,
    namespace: Option<&str>,
    region: Option<&str>,
) -> String {
    let mut t = format!("/v1/var/{}?{flag}", path.trim_start_matches('/'));
    if let Some(ns) = namespace {
        t.push_str("&namespace=");
        t.push_str(&crate::nomad_api::encode(ns));
    }
    if let Some(r) = region {
        t.push_str("&region=");
        t.push_str(&crate::nomad_api::encode(r));
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
    pub upstream: Target,
    pub path: String,
    pub namespace: Option<String>,
    pub region: Option<String>,
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
            &lock_target(
                &self.path,
                flag,
                self.namespace.as_deref(),
                self.region.as_deref(),
            ),
            self.token.as_deref(),
            Some(body.to_string()),
            self.timeout,
        )
        .await
        .map_err(|e| e.to_string())
    }
}
