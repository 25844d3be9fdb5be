//! One HTTP exchange as the proxy saw it, and how it goes into a report: an
//! [`OpEvent`] with a `curl` command that repeats it against the upstream.

use std::time::{Duration, Instant, SystemTime};

use nomad_conform_reports::model::{OpEvent, Request, Response};
use serde::Serialize;

use super::proxy_faults::{Fault, FaultSource, Operation, RuleId};
use crate::nomad_api::Upstream;

/// Bytes of a request or response body kept in a record.
pub const BODY_EXCERPT: usize = 4096;

/// How an exchange ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Outcome {
    /// Forwarded; the upstream's answer went back to the client.
    Forwarded,
    /// The proxy answered an injected status without forwarding.
    Injected,
    /// The proxy dropped the connection without answering (injected reset).
    Reset,
    /// The upstream could not be reached or did not answer; the client's connection was dropped
    /// (as if it had talked to the unreachable server itself).
    UpstreamFailed { error: String },
    /// The connection closed before an answer: the client gave up (its timeout), or a refusing
    /// partition cut it.
    Interrupted,
}

/// The fault applied to an exchange.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AppliedFault {
    pub source: FaultSource,
    /// The rule that applied, if a step's rule did.
    pub rule: Option<RuleId>,
    /// `status 503`, `latency 200ms`, `partition (hang) 1.20s`.
    pub description: String,
    /// The fault itself (`None` for a hang partition).
    pub fault: Option<Fault>,
}

/// One request through the proxy.
#[derive(Clone, Debug, Serialize)]
pub struct Exchange {
    /// Position in this proxy's record, from 0.
    pub seq: u64,
    /// The label of the client this proxy serves.
    pub client: String,
    /// When the request arrived (monotonic).
    #[serde(skip)]
    pub at: Instant,
    /// When the request arrived (wall clock).
    pub wall: SystemTime,
    /// From arrival to the end of the answer (or of the connection).
    pub duration: Duration,
    pub operation: Operation,
    pub method: String,
    /// URL path as sent.
    pub path: String,
    /// Raw query string (empty if none).
    pub query: String,
    /// Whether the client sent `X-Nomad-Token` (the token itself is never recorded).
    pub token_sent: bool,
    /// The request body as text, cut at 4 KiB.
    pub request_body: String,
    pub request_bytes: usize,
    /// The status the client got (`None` if it got no answer).
    pub status: Option<u16>,
    /// The response body as text, cut at 4 KiB.
    pub response_body: String,
    pub response_bytes: usize,
    pub fault: Option<AppliedFault>,
    pub outcome: Outcome,
    /// The lock ID involved: the ID a successful acquire returned (`Lock.ID` of the response),
    /// else the `Lock.ID` the request carried (renew, release, a re-acquire).
    pub lock_id: Option<String>,
    /// Where the proxy forwards to (for the reproduce command).
    pub upstream: Upstream,
    /// The upstream speaks TLS (`https://`).
    pub https: bool,
    /// curl's TLS flags for the upstream (`--cacert ...`), for the reproduce command.
    #[serde(skip)]
    pub curl_tls: Vec<String>,
    /// Whether the proxy adds a token of its own when the client sends none.
    pub proxy_adds_token: bool,
}

impl Exchange {
    /// The client got a 2xx answer.
    pub fn succeeded(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// `path?query`.
    pub fn target(&self) -> String {
        if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query)
        }
    }

    fn scheme(&self) -> &'static str {
        if self.https { "https" } else { "http" }
    }

    /// A `curl` command that sends the same request straight to the upstream. The token is
    /// written as `$NOMAD_TOKEN` (set it before running); a body cut at 4 KiB stays cut.
    pub fn reproduce(&self) -> String {
        let q = crate::shell::quote;
        let mut cmd = String::from("curl -sS -i");
        let url = match &self.upstream {
            Upstream::Unix(path) => {
                cmd.push_str(&format!(
                    " --unix-socket {}",
                    q(&path.display().to_string())
                ));
                format!("http://localhost{}", self.target())
            }
            Upstream::Tcp(addr) => format!("{}://{addr}{}", self.scheme(), self.target()),
            Upstream::Http { authority } => {
                format!("{}://{authority}{}", self.scheme(), self.target())
            }
        };
        for flag in &self.curl_tls {
            cmd.push(' ');
            cmd.push_str(flag);
        }
        cmd.push_str(&format!(" -X {}", q(&self.method)));
        if self.token_sent || self.proxy_adds_token {
            cmd.push_str(" -H \"X-Nomad-Token: $NOMAD_TOKEN\"");
        }
        if self.request_bytes > 0 {
            cmd.push_str(&format!(" --data-binary {}", q(&self.request_body)));
        }
        cmd.push(' ');
        cmd.push_str(&q(&url));
        cmd
    }

    /// The exchange as a report event; `case_start` is the instant the case's times count from.
    pub fn event(&self, case_start: Instant) -> OpEvent {
        let mut notes = vec![format!("client {}", self.client)];
        if let Some(f) = &self.fault {
            let by = match f.source {
                FaultSource::Step => "the step",
                FaultSource::Campaign => "the campaign",
            };
            notes.push(format!("fault injected by {by}: {}", f.description));
        }
        match &self.outcome {
            Outcome::Forwarded | Outcome::Injected => {}
            Outcome::Reset => {
                notes.push("the proxy dropped the connection without an answer".into())
            }
            Outcome::UpstreamFailed { error } => notes.push(format!(
                "the upstream did not answer ({error}); the client's connection was dropped"
            )),
            Outcome::Interrupted => notes.push("the connection closed before an answer".into()),
        }
        if self.request_bytes > BODY_EXCERPT {
            notes.push(format!(
                "request body cut at 4 KiB of {} bytes",
                self.request_bytes
            ));
        }
        if self.response_bytes > BODY_EXCERPT {
            notes.push(format!(
                "response body cut at 4 KiB of {} bytes",
                self.response_bytes
            ));
        }
        OpEvent {
            operation: self.operation.as_str().to_string(),
            started_ms: self.at.saturating_duration_since(case_start).as_millis() as u64,
            duration_ms: self.duration.as_secs_f64() * 1000.0,
            deadline_ms: None,
            request: Request::Http {
                method: self.method.clone(),
                path: self.target(),
                body: body_value(&self.request_body, self.request_bytes),
            },
            response: Response::Http {
                // 0: no answer at all.
                status: self.status.unwrap_or(0),
                body: body_value(&self.response_body, self.response_bytes),
            },
            reproduce: Some(self.reproduce()),
            notes,
        }
    }
}

/// JSON when the body parses as JSON, else the text; nothing for an empty body.
fn body_value(text: &str, bytes: usize) -> Option<serde_json::Value> {
    if bytes == 0 {
        return None;
    }
    Some(serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string())))
}

/// Body bytes as text for a record, cut at 4 KiB on a character boundary.
pub fn excerpt(bytes: &[u8]) -> String {
    let mut cut = &bytes[..bytes.len().min(BODY_EXCERPT)];
    // A character split by the cut is left out rather than shown as a replacement character.
    if bytes.len() > BODY_EXCERPT
        && let Err(e) = std::str::from_utf8(cut)
        && e.error_len().is_none()
    {
        cut = &cut[..e.valid_up_to()];
    }
    String::from_utf8_lossy(cut).into_owned()
}

/// `Lock.ID` of a JSON body (keys matched case-insensitively, as Go decodes them); `None`
/// when absent, empty or not JSON.
pub fn lock_id_in(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let lock = field(&v, "lock")?;
    let id = field(lock, "id")?.as_str()?;
    (!id.is_empty()).then(|| id.to_string())
}

fn field<'a>(v: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    v.as_object()?
        .iter()
        .rev()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A forwarded exchange for tests.
    pub(crate) fn exchange(client: &str, op: Operation, at: Instant, status: u16) -> Exchange {
        let query = match op {
            Operation::Acquire => "lock-acquire",
            Operation::Renew => "lock-renew",
            Operation::Release => "lock-release",
            _ => "",
        };
        Exchange {
            seq: 0,
            client: client.into(),
            at,
            wall: SystemTime::now(),
            duration: Duration::from_millis(2),
            operation: op,
            method: if op == Operation::Read { "GET" } else { "PUT" }.into(),
            path: "/v1/var/app/lock".into(),
            query: query.into(),
            token_sent: false,
            request_body: String::new(),
            request_bytes: 0,
            status: Some(status),
            response_body: String::new(),
            response_bytes: 0,
            fault: None,
            outcome: Outcome::Forwarded,
            lock_id: None,
            upstream: Upstream::Tcp("127.0.0.1:4646".parse().unwrap()),
            https: false,
            curl_tls: Vec::new(),
            proxy_adds_token: false,
        }
    }

    #[test]
    fn lock_ids_are_found_case_insensitively() {
        assert_eq!(
            lock_id_in(br#"{"Path":"a","Lock":{"TTL":"10s","ID":"abc"}}"#).as_deref(),
            Some("abc")
        );
        assert_eq!(lock_id_in(br#"{"lock":{"id":"x"}}"#).as_deref(), Some("x"));
        assert_eq!(lock_id_in(br#"{"Lock":{"ID":""}}"#), None);
        assert_eq!(lock_id_in(br#"{"Lock":null}"#), None);
        assert_eq!(lock_id_in(b"not json"), None);
    }

    #[test]
    fn reproduce_is_a_curl_against_the_upstream_with_the_token_redacted() {
        let mut e = exchange("a", Operation::Acquire, Instant::now(), 200);
        e.query = "lock-acquire=&namespace=prod".into();
        e.token_sent = true;
        e.request_body = r#"{"Lock":{"TTL":"10s"}}"#.into();
        e.request_bytes = e.request_body.len();
        let cmd = e.reproduce();
        assert!(cmd.starts_with("curl -sS -i -X PUT"), "{cmd}");
        assert!(cmd.contains("-H \"X-Nomad-Token: $NOMAD_TOKEN\""), "{cmd}");
        assert!(
            cmd.contains(r#"--data-binary '{"Lock":{"TTL":"10s"}}'"#),
            "{cmd}"
        );
        assert!(
            cmd.ends_with("'http://127.0.0.1:4646/v1/var/app/lock?lock-acquire=&namespace=prod'"),
            "{cmd}"
        );

        e.upstream = Upstream::Unix("/tmp/nomad api.sock".into());
        e.token_sent = false;
        let cmd = e.reproduce();
        assert!(cmd.contains("--unix-socket '/tmp/nomad api.sock'"), "{cmd}");
        assert!(!cmd.contains("NOMAD_TOKEN"), "{cmd}");
        assert!(cmd.contains("http://localhost/v1/var/app/lock"), "{cmd}");
    }

    #[test]
    fn event_carries_the_exchange() {
        let t0 = Instant::now();
        let mut e = exchange("b", Operation::Renew, t0 + Duration::from_millis(1500), 503);
        e.response_body = "No cluster leader".into();
        e.response_bytes = e.response_body.len();
        e.outcome = Outcome::Injected;
        e.fault = Some(AppliedFault {
            source: FaultSource::Step,
            rule: Some(RuleId(0)),
            description: "status 503".into(),
            fault: Fault::status(503).ok(),
        });
        let ev = e.event(t0);
        assert_eq!(ev.operation, "lock-renew");
        assert_eq!(ev.started_ms, 1500);
        assert_eq!(
            ev.request,
            Request::Http {
                method: "PUT".into(),
                path: "/v1/var/app/lock?lock-renew".into(),
                body: None
            }
        );
        assert_eq!(
            ev.response,
            Response::Http {
                status: 503,
                body: Some(serde_json::Value::String("No cluster leader".into()))
            }
        );
        assert!(
            ev.notes.iter().any(|n| n.contains("status 503")),
            "{:?}",
            ev.notes
        );
        assert!(ev.reproduce.unwrap().starts_with("curl"));
    }
}
