//! The three HTTP calls of a lock client: `lock-acquire`, `lock-renew`, `lock-release`.
//!
//! Wire facts (contract B.2, D): `PUT /v1/var/<path>?lock-<op>&namespace=<ns>`, token in
//! `X-Nomad-Token` (variant bearer-token: `Authorization: Bearer`), a Variable-shaped JSON body, never `cas`. Acquire sends the TTL and lock
//! delay as Go duration strings and no `Items` (which would replace the variable's items);
//! renew and release send only the lock ID; release must carry **no** `Items` key at all (even
//! `{}` is a 400). Renew ignores the body namespace on the server, so the namespace always
//! travels in the query; the body repeats it for acquire and release, where it takes precedence.
//!
//! Each call opens one connection (TCP or unix socket), sends one request and closes: a lock
//! client talks to the server once per TTL/2, so a pool buys nothing, and a pooled connection
//! would outlive a server restart and turn the next renew into a spurious error. Every call is
//! bounded by the caller's timeout, connect included (fault `no-request-timeout` drops the
//! bound). Every clone of an [`Api`] counts the requests in flight in one [`InFlight`], which
//! fault `deadlock-on-sigterm` makes a caught signal wait for. This module judges nothing:
//! statuses are handed to [`crate::lease`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HOST};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::watch;

use crate::duration;
use crate::env::{Endpoint, NomadEnv};

/// The lock operations, spelled as the query flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Acquire,
    Renew,
    Release,
}

impl Op {
    /// `lock-acquire`, ...
    pub fn flag(self) -> &'static str {
        match self {
            Self::Acquire => "lock-acquire",
            Self::Renew => "lock-renew",
            Self::Release => "lock-release",
        }
    }
}

/// What the server answered.
#[derive(Clone, Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body text.
    pub body: String,
}

impl Answer {
    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The server's message on one line, for logs.
    pub fn message(&self) -> String {
        let text = self.body.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.is_empty() {
            format!("HTTP {}", self.status)
        } else {
            text
        }
    }
}

/// The request never got an answer.
#[derive(Debug, Error)]
pub enum TransportError {
    #[error("could not connect to {endpoint}: {source}")]
    Connect {
        endpoint: String,
        source: std::io::Error,
    },
    #[error("no answer within {}", duration::human(*.0))]
    Timeout(Duration),
    #[error("HTTP exchange failed: {0}")]
    Http(#[from] hyper::Error),
    #[error("could not build the request: {0}")]
    Request(#[from] http::Error),
}

/// A client for one variable path.
#[derive(Clone, Debug)]
pub struct Api {
    endpoint: Endpoint,
    token: Option<String>,
    namespace: String,
    path: String,
    /// Fault ttl-as-number: durations go out as JSON numbers of seconds.
    ttl_as_number: bool,
    /// Whether requests are bounded by the caller's timeout (not with fault no-request-timeout).
    timeouts: bool,
    /// Variant bearer-token: the token goes in `Authorization: Bearer` instead.
    bearer: bool,
    /// Variant empty-cas: every query carries an empty `cas=`.
    empty_cas: bool,
    /// The requests in flight, shared by every clone.
    in_flight: InFlight,
}

impl Api {
    /// For `path` with the environment's address, token and namespace.
    pub fn new(env: &NomadEnv, path: &str) -> Self {
        Self {
            endpoint: env.endpoint.clone(),
            token: env.token.clone(),
            namespace: env.namespace.clone(),
            path: path.to_string(),
            ttl_as_number: false,
            timeouts: true,
            bearer: false,
            empty_cas: false,
            in_flight: InFlight::default(),
        }
    }

    /// The same calls, breaking the rules the switched-on faults name.
    pub fn with_faults(mut self, switches: &crate::faults::Switches) -> Self {
        use crate::faults::Fault;
        if switches.fault(Fault::IgnoresNamespace) {
            self.namespace = "default".to_string();
        }
        self.ttl_as_number = switches.fault(Fault::TtlAsNumber);
        self.timeouts = !switches.fault(Fault::NoRequestTimeout);
        self.bearer = switches.variant(crate::faults::Variant::BearerToken);
        self.empty_cas = switches.variant(crate::faults::Variant::EmptyCas);
        self
    }

    /// The requests in flight of this client and its clones.
    pub fn in_flight(&self) -> &InFlight {
        &self.in_flight
    }

    /// Variable path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `PUT ?lock-acquire` asking for `ttl` and `delay` (zero: the server's default).
    pub async fn acquire(
        &self,
        ttl: Duration,
        delay: Duration,
        timeout: Duration,
    ) -> Result<Answer, TransportError> {
        self.put(Op::Acquire, acquire_body(self, ttl, delay), timeout)
            .await
    }

    /// `PUT ?lock-renew` for lock `id`.
    pub async fn renew(&self, id: &str, timeout: Duration) -> Result<Answer, TransportError> {
        self.put(Op::Renew, id_body(self, id), timeout).await
    }

    /// `PUT ?lock-release` for lock `id`; `with_items` adds the `"Items": {}` that Nomad
    /// refuses (fault `malformed-release` only).
    pub async fn release(
        &self,
        id: &str,
        with_items: bool,
        timeout: Duration,
    ) -> Result<Answer, TransportError> {
        let mut body = id_body(self, id);
        if with_items {
            body["Items"] = json!({});
        }
        self.put(Op::Release, body, timeout).await
    }

    /// `/v1/var/<path>?<flag>&namespace=<ns>`.
    pub fn uri(&self, op: Op) -> String {
        format!(
            "/v1/var/{}?{}&namespace={}{}",
            encode(&self.path, true),
            op.flag(),
            encode(&self.namespace, false),
            if self.empty_cas { "&cas=" } else { "" }
        )
    }

    /// One request, bounded by `timeout` unless the switches say otherwise (see [`InFlight`]).
    async fn put(&self, op: Op, body: Value, timeout: Duration) -> Result<Answer, TransportError> {
        let _in_flight = self.in_flight.enter();
        let mut request = http::Request::builder()
            .method(http::Method::PUT)
            .uri(self.uri(op))
            .header(HOST, self.endpoint.authority())
            .header(CONTENT_TYPE, "application/json");
        match &self.token {
            Some(token) if self.bearer => {
                request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
            }
            Some(token) => request = request.header("X-Nomad-Token", token),
            None => {}
        }
        let request = request.body(Full::new(Bytes::from(body.to_string())))?;
        let exchange = async {
            match &self.endpoint {
                Endpoint::Tcp { host, port } => {
                    let stream = TcpStream::connect((host.as_str(), *port))
                        .await
                        .map_err(|source| self.connect_error(source))?;
                    send_on(stream, request).await
                }
                Endpoint::Unix(path) => {
                    let stream = UnixStream::connect(path)
                        .await
                        .map_err(|source| self.connect_error(source))?;
                    send_on(stream, request).await
                }
            }
        };
        if !self.timeouts {
            // Fault no-request-timeout: wait for the answer as long as it takes.
            return exchange.await;
        }
        tokio::pin!(exchange);
        tokio::select! {
            biased;
            answer = &mut exchange => answer,
            () = tokio::time::sleep(timeout) => {
                if self.in_flight.awaited() {
                    // A caught signal waits for this request (fault deadlock-on-sigterm).
                    exchange.await
                } else {
                    Err(TransportError::Timeout(timeout))
                }
            }
        }
    }

    fn connect_error(&self, source: std::io::Error) -> TransportError {
        TransportError::Connect {
            endpoint: self.endpoint.to_string(),
            source,
        }
    }
}

/// The lock requests in flight, counted across every clone of an [`Api`].
///
/// With fault `deadlock-on-sigterm` a caught SIGTERM or SIGINT waits in [`InFlight::finished`]
/// until no request is in flight ([`crate::signals`]); while it waits, a request's timeout no
/// longer ends the request, which waits for its answer, however long that takes. Without the
/// fault nothing waits here and the count changes nothing.
#[derive(Clone, Debug)]
pub struct InFlight(Arc<InFlightState>);

#[derive(Debug)]
struct InFlightState {
    /// How many requests are in flight.
    count: watch::Sender<usize>,
    /// Whether a caught signal waits for them.
    awaited: AtomicBool,
}

impl Default for InFlight {
    fn default() -> Self {
        Self(Arc::new(InFlightState {
            count: watch::Sender::new(0),
            awaited: AtomicBool::new(false),
        }))
    }
}

impl InFlight {
    /// Counts one request until the guard is dropped (answered, failed or cancelled).
    fn enter(&self) -> InFlightGuard {
        self.0.count.send_modify(|count| *count += 1);
        InFlightGuard(self.clone())
    }

    /// Whether a request is in flight now.
    pub fn busy(&self) -> bool {
        *self.0.count.borrow() > 0
    }

    /// Whether a caught signal waits for the requests in flight.
    fn awaited(&self) -> bool {
        self.0.awaited.load(Ordering::SeqCst)
    }

    /// Returns once no request is in flight. Until then the requests in flight wait for their
    /// answers whatever their timeouts; that stays so if this future is dropped before it is
    /// done (the signal is still pending), until a later call returns.
    pub async fn finished(&self) {
        let mut count = self.0.count.subscribe();
        self.0.awaited.store(true, Ordering::SeqCst);
        // The sender lives in `self`, so this only ends with a count of zero.
        let _ = count.wait_for(|count| *count == 0).await;
        self.0.awaited.store(false, Ordering::SeqCst);
    }
}

/// One request in flight.
struct InFlightGuard(InFlight);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.0.count.send_modify(|count| *count -= 1);
    }
}

/// The acquire body: `{"Path", "Namespace", "Lock": {"TTL", "LockDelay"}}`, no `Items`.
pub fn acquire_body(api: &Api, ttl: Duration, delay: Duration) -> Value {
    if api.ttl_as_number {
        return json!({
            "Path": api.path,
            "Namespace": api.namespace,
            "Lock": {"TTL": ttl.as_secs(), "LockDelay": delay.as_secs()},
        });
    }
    json!({
        "Path": api.path,
        "Namespace": api.namespace,
        "Lock": {"TTL": duration::to_go(ttl), "LockDelay": duration::to_go(delay)},
    })
}

/// The renew and release body: `{"Path", "Namespace", "Lock": {"ID"}}`.
pub fn id_body(api: &Api, id: &str) -> Value {
    json!({"Path": api.path, "Namespace": api.namespace, "Lock": {"ID": id}})
}

/// One request on a fresh connection; the connection closes when this returns.
async fn send_on<S>(
    stream: S,
    request: http::Request<Full<Bytes>>,
) -> Result<Answer, TransportError>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let driver = AbortOnDrop(tokio::spawn(connection));
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    drop(driver);
    Ok(Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Stops the connection task when the exchange ends or is cancelled (timeout).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Percent-encodes everything but unreserved characters (and `/` in a path).
fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        let plain = byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'_' | b'.' | b'~')
            || (keep_slash && byte == b'/');
        if plain {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> Api {
        Api::new(
            &NomadEnv {
                endpoint: Endpoint::Tcp {
                    host: "127.0.0.1".into(),
                    port: 4646,
                },
                token: None,
                namespace: "prod team".into(),
            },
            "nomad/jobs/example/lock",
        )
    }

    #[test]
    fn uris_carry_one_flag_and_the_namespace() {
        assert_eq!(
            api().uri(Op::Acquire),
            "/v1/var/nomad/jobs/example/lock?lock-acquire&namespace=prod%20team"
        );
        assert_eq!(
            api().uri(Op::Release),
            "/v1/var/nomad/jobs/example/lock?lock-release&namespace=prod%20team"
        );
    }

    #[test]
    fn bodies() {
        let api = api();
        assert_eq!(
            acquire_body(&api, Duration::from_secs(15), Duration::from_millis(1500)),
            json!({"Path": "nomad/jobs/example/lock", "Namespace": "prod team",
                   "Lock": {"TTL": "15s", "LockDelay": "1500ms"}})
        );
        let release = id_body(&api, "abc");
        assert_eq!(
            release,
            json!({"Path": "nomad/jobs/example/lock", "Namespace": "prod team", "Lock": {"ID": "abc"}})
        );
        assert!(release.get("Items").is_none());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn in_flight_counts_until_the_last_request_ends() {
        let in_flight = InFlight::default();
        assert!(!in_flight.busy());
        in_flight.finished().await;
        let first = in_flight.enter();
        let second = in_flight.clone().enter();
        assert!(in_flight.busy());
        let waiter = in_flight.clone();
        let finished = tokio::spawn(async move { waiter.finished().await });
        tokio::task::yield_now().await;
        assert!(in_flight.awaited(), "a waiting signal lifts the timeouts");
        drop(first);
        tokio::task::yield_now().await;
        assert!(!finished.is_finished());
        drop(second);
        finished.await.unwrap();
        assert!(!in_flight.busy());
        assert!(!in_flight.awaited());
    }

    #[test]
    fn messages_fit_one_line() {
        let answer = Answer {
            status: 400,
            body: "RPC Error:: 400,1 error occurred:\n\t* TTL must be between 10 seconds and 24 hours\n\n"
                .into(),
        };
        assert_eq!(
            answer.message(),
            "RPC Error:: 400,1 error occurred: * TTL must be between 10 seconds and 24 hours"
        );
        assert_eq!(
            Answer {
                status: 502,
                body: String::new()
            }
            .message(),
            "HTTP 502"
        );
    }
}
