//! The suite's transport: one HTTP/1.1 exchange with a Variables server (Nomad's agent API or
//! the reference server), on a fresh connection, recorded whole so that a failure can show it
//! and repeat it with `curl`. Nothing here judges.

use std::time::{Duration, Instant};

use nomad_conform_reports::model::{OpEvent, Request as EvRequest, Response as EvResponse};

use crate::nomad_api::{ApiSettings, Target, Upstream};
use crate::shell::quote;

/// Longest body kept in a record or shown in a message.
const EXCERPT: usize = 4096;

/// Where the Variables API listens: the reference server's TCP address, or an agent's
/// `http://` or `https://` address with its TLS and region.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub target: Target,
    /// Sent as `region=` on every request (the nomad CLI's -region).
    pub region: Option<String>,
    /// curl's TLS flags for reproduce lines (`--cacert ...`).
    pub curl_tls: Vec<String>,
}

/// Two endpoints are the same API when they have the same address and region.
impl PartialEq for Endpoint {
    fn eq(&self, other: &Endpoint) -> bool {
        self.target.base == other.target.base && self.region == other.region
    }
}

impl Eq for Endpoint {}

impl Endpoint {
    /// An agent's API; a unix socket is refused (the suite's reproduce lines are `curl URL`).
    pub fn of_settings(api: &ApiSettings) -> Result<Endpoint, String> {
        if let Upstream::Unix(_) = api.target.upstream {
            return Err(format!(
                "{}: expected http://HOST:PORT or https://HOST:PORT",
                api.addr
            ));
        }
        Ok(Endpoint {
            target: api.target.clone(),
            region: api.region.clone(),
            curl_tls: api.curl_flags(),
        })
    }

    /// The reference server's TCP address.
    pub fn of_server(server: &nomad_conform_variables::ServerHandle) -> Option<Endpoint> {
        server.addr().map(|a| Endpoint {
            target: Target::plain(Upstream::Tcp(a)),
            region: None,
            curl_tls: Vec::new(),
        })
    }

    /// `http://host:port` or `https://host:port`
    pub fn base(&self) -> String {
        self.target.base.clone()
    }

    /// `target` with this endpoint's region added.
    fn with_region(&self, target: &str) -> String {
        match &self.region {
            None => target.to_string(),
            Some(r) => {
                let sep = if target.contains('?') { '&' } else { '?' };
                format!("{target}{sep}region={}", encode_query(r))
            }
        }
    }
}

/// The token a request carries, and how a reproduce line writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub secret: Option<String>,
    /// What `curl -H "X-Nomad-Token: ..."` shows: `$NOMAD_TOKEN`, `$TOKEN_READER`, or a
    /// made-up value as is.
    pub shown_as: String,
}

impl Credential {
    /// No token at all (the anonymous token when ACLs are on).
    pub fn anonymous() -> Credential {
        Credential {
            secret: None,
            shown_as: String::new(),
        }
    }

    /// The management token of the run (none when the server runs without ACLs and none
    /// was given).
    pub fn management(secret: Option<&str>) -> Credential {
        if let Some(s) = secret {
            crate::secrets::register(s);
        }
        Credential {
            secret: secret.map(str::to_string),
            shown_as: "$NOMAD_TOKEN".into(),
        }
    }

    /// A token the scenario made, shown as `$TOKEN_<LABEL>`.
    pub fn scenario(label: &str, secret: &str) -> Credential {
        let var: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        crate::secrets::register(secret);
        Credential {
            secret: Some(secret.to_string()),
            shown_as: format!("$TOKEN_{var}"),
        }
    }

    /// A token the server does not know, shown as it is.
    pub fn made_up(secret: &str) -> Credential {
        Credential {
            secret: Some(secret.to_string()),
            shown_as: secret.to_string(),
        }
    }
}

/// One request to send.
#[derive(Clone, Debug)]
pub struct Call {
    /// The operation as the suite names it: `set`, `read`, `lock-acquire`, `acl-policy`, ...
    pub operation: &'static str,
    pub method: &'static str,
    /// Path and query, already encoded (`/v1/var/a?namespace=x`).
    pub target: String,
    pub body: Option<String>,
    pub credential: Credential,
}

/// One request and what came back.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub operation: &'static str,
    pub method: &'static str,
    pub target: String,
    pub request_body: Option<String>,
    pub credential: Credential,
    /// `http://host:port` the request went to.
    pub base: String,
    /// curl's TLS flags for that address.
    pub curl_tls: Vec<String>,
    /// `None` when no answer came (the failure is in `error`).
    pub status: Option<u16>,
    /// The `X-Nomad-Index` header.
    pub index: Option<u64>,
    pub body: String,
    pub error: Option<String>,
    pub at: Instant,
    pub duration: Duration,
}

impl Exchange {
    /// The answer as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// When the answer came (or the attempt ended).
    pub fn answered(&self) -> Instant {
        self.at + self.duration
    }

    /// `PUT /v1/var/a?lock-acquire`
    pub fn request_line(&self) -> String {
        format!("{} {}", self.method, self.target)
    }

    /// `409 {"Namespace":...}` or `no answer: connection refused`, on one line, cut.
    pub fn outcome(&self) -> String {
        match (self.status, &self.error) {
            (Some(status), _) => {
                let body = excerpt(self.body.trim(), 300).replace('\n', "\\n");
                if body.is_empty() {
                    format!("{status} (no body)")
                } else {
                    format!("{status} {body}")
                }
            }
            (None, Some(e)) => format!("no answer: {e}"),
            (None, None) => "no answer".into(),
        }
    }

    /// `PUT /v1/var/a?lock-acquire answered 409 {...}`
    pub fn summary(&self) -> String {
        format!("{} answered {}", self.request_line(), self.outcome())
    }

    /// The `curl` command that sends the same request again.
    pub fn curl(&self) -> String {
        let mut cmd = format!("curl -sS -i -X {}", self.method);
        for flag in &self.curl_tls {
            cmd.push(' ');
            cmd.push_str(flag);
        }
        if !self.credential.shown_as.is_empty() {
            if self.credential.shown_as.starts_with('$') {
                cmd.push_str(&format!(
                    " -H \"X-Nomad-Token: {}\"",
                    self.credential.shown_as
                ));
            } else {
                cmd.push_str(&format!(
                    " -H {}",
                    quote(&format!("X-Nomad-Token: {}", self.credential.shown_as))
                ));
            }
        }
        if let Some(body) = &self.request_body {
            cmd.push_str(&format!(" --data-binary {}", quote(body)));
        }
        cmd.push(' ');
        cmd.push_str(&quote(&format!("{}{}", self.base, self.target)));
        cmd
    }

    /// The exchange as a report event; `case_start` is when the case began.
    pub fn event(&self, case_start: Instant) -> OpEvent {
        let value = |text: &str| -> Option<serde_json::Value> {
            if text.is_empty() {
                return None;
            }
            Some(
                serde_json::from_str(text)
                    .unwrap_or_else(|_| serde_json::Value::String(excerpt(text, EXCERPT))),
            )
        };
        let mut notes = Vec::new();
        if let Some(e) = &self.error {
            notes.push(format!("no answer: {e}"));
        }
        if let Some(i) = self.index {
            notes.push(format!("X-Nomad-Index: {i}"));
        }
        OpEvent {
            operation: self.operation.to_string(),
            started_ms: self.at.saturating_duration_since(case_start).as_millis() as u64,
            duration_ms: self.duration.as_secs_f64() * 1000.0,
            deadline_ms: None,
            request: EvRequest::Http {
                method: self.method.to_string(),
                path: self.target.clone(),
                body: self.request_body.as_deref().and_then(value),
            },
            response: EvResponse::Http {
                status: self.status.unwrap_or(0),
                body: value(&self.body),
            },
            reproduce: Some(self.curl()),
            notes,
        }
    }
}

/// `text` cut at `max` bytes on a character boundary, with `...` when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    let head = nomad_conform_reports::text::head(text, max);
    if head.len() == text.len() {
        return text.to_string();
    }
    format!("{head}...")
}

/// Percent-encodes a variable path for a URL (everything but unreserved characters and `/`).
pub fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes a query value.
pub fn encode_query(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Send `call` to `endpoint` on a new connection, within `timeout`.
pub async fn send(endpoint: &Endpoint, call: Call, timeout: Duration) -> Exchange {
    let at = Instant::now();
    let call = Call {
        target: endpoint.with_region(&call.target),
        ..call
    };
    let result = crate::nomad_api::call(
        &endpoint.target,
        call.method,
        &call.target,
        call.credential.secret.as_deref(),
        call.body.clone(),
        timeout,
    )
    .await;
    let duration = at.elapsed();
    let (status, index, body, error) = match result {
        Ok(a) => (Some(a.status), a.index, a.body, None),
        Err(e) => (None, None, String::new(), Some(e.to_string())),
    };
    Exchange {
        operation: call.operation,
        method: call.method,
        target: call.target,
        request_body: call.body,
        credential: call.credential,
        base: endpoint.base(),
        curl_tls: endpoint.curl_tls.clone(),
        status,
        index,
        body,
        error,
        at,
        duration,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_added_to_every_target() {
        let e = Endpoint {
            target: Target::plain(Upstream::Tcp("127.0.0.1:1".parse().unwrap())),
            region: Some("eu west".into()),
            curl_tls: vec!["--cacert /ca.pem".into()],
        };
        assert_eq!(e.with_region("/v1/var/a"), "/v1/var/a?region=eu%20west");
        assert_eq!(
            e.with_region("/v1/var/a?namespace=x"),
            "/v1/var/a?namespace=x&region=eu%20west"
        );
        assert_eq!(e.base(), "http://127.0.0.1:1");
    }

    #[test]
    fn curl_lines_repeat_the_request() {
        let e = Exchange {
            operation: "set",
            method: "PUT",
            target: "/v1/var/a?namespace=ns".into(),
            request_body: Some(r#"{"Items":{"k":"it's"}}"#.into()),
            credential: Credential::scenario("reader-1", "s3cr3t"),
            base: "http://127.0.0.1:1".into(),
            curl_tls: vec!["--cacert /etc/nomad.d/ca.pem".into()],
            status: Some(403),
            index: None,
            body: "Permission denied".into(),
            error: None,
            at: Instant::now(),
            duration: Duration::from_millis(2),
        };
        let curl = e.curl();
        assert!(
            curl.contains("-H \"X-Nomad-Token: $TOKEN_READER_1\""),
            "{curl}"
        );
        assert!(!curl.contains("s3cr3t"), "{curl}");
        assert!(curl.contains(" --cacert /etc/nomad.d/ca.pem "), "{curl}");
        assert!(
            curl.ends_with("'http://127.0.0.1:1/v1/var/a?namespace=ns'"),
            "{curl}"
        );
        assert_eq!(
            e.summary(),
            "PUT /v1/var/a?namespace=ns answered 403 Permission denied"
        );
        let anon = Exchange {
            credential: Credential::anonymous(),
            ..e.clone()
        };
        assert!(!anon.curl().contains("X-Nomad-Token"));
        let ev = e.event(e.at);
        assert_eq!(ev.operation, "set");
    }

    #[test]
    fn paths_are_encoded() {
        assert_eq!(encode_path("a b/c+d"), "a%20b/c%2Bd");
        assert_eq!(encode_path("a~b-c_d.e"), "a~b-c_d.e");
        assert_eq!(encode_query("a*b"), "a%2Ab");
    }
}
