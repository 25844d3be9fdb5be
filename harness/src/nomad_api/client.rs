//! One HTTP/1.1 exchange with a Nomad API on a fresh connection: over TCP or a unix socket,
//! in TLS for `https://`. The harness's own calls ([`call`]) and the lock suite's proxy
//! (which forwards a client's request) both go through [`exchange`], so a TLS problem reads
//! the same wherever it is met: [`CallError::Tls`], one sentence naming the cause.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use hyper::http::response::Parts;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

use super::address::{Address, Upstream};
use super::tls::{TlsClient, explain, rustls_error};

/// Largest answer [`call`] reads (a list of a busy cluster's variables stays far below).
pub const MAX_ANSWER: usize = 4 * 1024 * 1024;

/// What Go's net/http answers a plain request on a TLS port (net/http/server.go).
const GO_PLAIN_ON_TLS: &str = "Client sent an HTTP request to an HTTPS server";

/// Where requests go: an address and, for `https://`, the TLS client.
#[derive(Clone, Debug)]
pub struct Target {
    pub upstream: Upstream,
    pub tls: Option<TlsClient>,
    /// `http://host:port`, `https://host:port` or `unix:///path`, for messages.
    pub base: String,
}

impl Target {
    /// A plain target (the reference server, a proxy of the harness's own).
    pub fn plain(upstream: Upstream) -> Target {
        let base = Address {
            upstream: upstream.clone(),
            https: false,
            host: String::new(),
        }
        .base();
        Target {
            upstream,
            tls: None,
            base,
        }
    }
}

/// Why an exchange got no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallError {
    /// No connection (refused, no such host, no socket).
    Connect(String),
    /// TLS failed, or one end spoke TLS and the other did not: which, in a sentence.
    Tls(String),
    /// Connected, and no whole answer came (in time).
    NoAnswer(String),
}

impl CallError {
    /// A TLS problem or a connection that could not be made: the server could not be used.
    pub fn is_tls(&self) -> bool {
        matches!(self, CallError::Tls(_))
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Connect(s) | CallError::Tls(s) | CallError::NoAnswer(s) => f.write_str(s),
        }
    }
}

/// Status and body of one answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// The `X-Nomad-Index` header, when there is one.
    pub index: Option<u64>,
    pub body: String,
}

/// One request on a new connection, bounded by `timeout`. A token goes as `X-Nomad-Token`
/// and is registered as a secret; secrets in the answer (an ACL token's `SecretID`) too.
pub async fn call(
    target: &Target,
    method: &str,
    path_and_query: &str,
    token: Option<&str>,
    body: Option<String>,
    timeout: Duration,
) -> Result<Answer, CallError> {
    let mut req = Request::builder()
        .method(method)
        .uri(path_and_query)
        .header("host", target.upstream.host_header());
    if let Some(t) = token {
        crate::secrets::register(t);
        req = req.header("x-nomad-token", t);
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| CallError::NoAnswer(format!("failed to build the request: {e}")))?;
    let (parts, bytes) =
        match tokio::time::timeout(timeout, exchange(target, req, MAX_ANSWER)).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(CallError::NoAnswer(format!(
                    "no answer from {} within {}",
                    target.base,
                    crate::fmt_duration(timeout)
                )));
            }
        };
    let index = parts
        .headers
        .get("x-nomad-index")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&bytes) {
        crate::secrets::register_from_json(&v);
    }
    Ok(Answer {
        status: parts.status.as_u16(),
        index,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// Sends `req` to `target` on a new connection; the answer's head and whole body (at most
/// `max_body` bytes). Not bounded in time: callers put their own timeout around it.
pub async fn exchange(
    target: &Target,
    req: Request<Full<Bytes>>,
    max_body: usize,
) -> Result<(Parts, Bytes), CallError> {
    let (mut sender, first) = connect(target).await?;
    let resp = match sender.send_request(req).await {
        Ok(r) => r,
        Err(e) => return Err(failed(target, &e, &first, "no answer")),
    };
    let (parts, body) = resp.into_parts();
    let bytes = Limited::new(body, max_body)
        .collect()
        .await
        .map_err(|e| match rustls_error(&*e) {
            Some(r) => CallError::Tls(explain(r, &target.base, client_cert(target))),
            None => {
                CallError::NoAnswer(format!("failed to read the answer of {}: {e}", target.base))
            }
        })?
        .to_bytes();
    if target.tls.is_none()
        && parts.status.as_u16() == 400
        && String::from_utf8_lossy(&bytes).contains(GO_PLAIN_ON_TLS)
    {
        return Err(speaks_tls(target));
    }
    Ok((parts, bytes))
}

fn client_cert(target: &Target) -> bool {
    target.tls.as_ref().is_some_and(|t| t.client_cert.is_some())
}

fn speaks_tls(target: &Target) -> CallError {
    CallError::Tls(format!(
        "{} speaks TLS, and this run spoke plain HTTP to it: write the address with https://",
        target.base
    ))
}

fn plain_answer(target: &Target) -> CallError {
    CallError::Tls(format!(
        "{} does not speak TLS (it answered the TLS handshake in plain HTTP): write the address with http://",
        target.base
    ))
}

/// The error of a failed exchange, told apart by what the server sent first.
fn failed(
    target: &Target,
    err: &(dyn std::error::Error + 'static),
    first: &FirstBytes,
    what: &str,
) -> CallError {
    let seen = first.get();
    if target.tls.is_none() && looks_like_tls(&seen) {
        return speaks_tls(target);
    }
    if target.tls.is_some() && seen.starts_with(b"HTTP/") {
        return plain_answer(target);
    }
    if let Some(r) = rustls_error(err) {
        return CallError::Tls(explain(r, &target.base, client_cert(target)));
    }
    if target.tls.is_some() && seen.is_empty() && is_eof(err) {
        return CallError::Tls(format!(
            "{} closed the connection during the TLS handshake without a word: is it a plain http:// port?",
            target.base
        ));
    }
    CallError::NoAnswer(format!("{what} from {}: {}", target.base, chain(err)))
}

fn is_eof(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::UnexpectedEof
        {
            return true;
        }
        cur = e.source();
    }
    false
}

/// `err` and its causes on one line.
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = e.source();
    }
    out.replace('\n', " ")
}

/// A TLS record's header: handshake (22) or alert (21), version 3.x.
fn looks_like_tls(b: &[u8]) -> bool {
    b.len() >= 2 && matches!(b[0], 0x15 | 0x16) && b[1] == 0x03
}

/// A new HTTP/1 connection to `target`, and what the server sent first on it.
pub async fn connect(
    target: &Target,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        FirstBytes,
    ),
    CallError,
> {
    let first = FirstBytes::default();
    let refused = |shown: &str, e: std::io::Error| {
        CallError::Connect(format!("failed to connect to {shown}: {e}"))
    };
    match &target.upstream {
        Upstream::Unix(path) => {
            let s = UnixStream::connect(path)
                .await
                .map_err(|e| refused(&path.display().to_string(), e))?;
            handshake(target, Sniff::new(s, &first), &first).await
        }
        Upstream::Tcp(addr) => {
            let s = TcpStream::connect(addr)
                .await
                .map_err(|e| refused(&addr.to_string(), e))?;
            handshake(target, Sniff::new(s, &first), &first).await
        }
        Upstream::Http { authority } => {
            let s = TcpStream::connect(authority.as_str())
                .await
                .map_err(|e| refused(authority, e))?;
            handshake(target, Sniff::new(s, &first), &first).await
        }
    }
}

async fn handshake<S>(
    target: &Target,
    stream: Sniff<S>,
    first: &FirstBytes,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        FirstBytes,
    ),
    CallError,
>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match &target.tls {
        None => http1(target, stream, first).await,
        Some(tls) => {
            let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
            match connector.connect(tls.server_name.clone(), stream).await {
                Ok(s) => http1(target, s, first).await,
                Err(e) => Err(failed(target, &e, first, "no TLS handshake")),
            }
        }
    }
}

async fn http1<S>(
    target: &Target,
    stream: S,
    first: &FirstBytes,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        FirstBytes,
    ),
    CallError,
>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| failed(target, &e, first, "failed to start HTTP"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((sender, first.clone()))
}

/// The first bytes the server sent on a connection (up to 8), to tell TLS from plain HTTP
/// when an exchange fails.
#[derive(Clone, Debug, Default)]
pub struct FirstBytes(Arc<Mutex<Vec<u8>>>);

impl FirstBytes {
    fn get(&self) -> Vec<u8> {
        self.0.lock().map(|b| b.clone()).unwrap_or_default()
    }
}

/// A stream that keeps the first bytes read from it in a [`FirstBytes`].
struct Sniff<S> {
    inner: S,
    first: FirstBytes,
}

impl<S> Sniff<S> {
    fn new(inner: S, first: &FirstBytes) -> Sniff<S> {
        Sniff {
            inner,
            first: first.clone(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Sniff<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r
            && let Ok(mut seen) = self.first.0.lock()
            && seen.len() < 8
        {
            let new = &buf.filled()[before..];
            let take = (8 - seen.len()).min(new.len());
            seen.extend_from_slice(&new[..take]);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Sniff<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_records_are_recognised() {
        assert!(looks_like_tls(&[0x15, 0x03, 0x03, 0x00, 0x02]));
        assert!(looks_like_tls(&[0x16, 0x03, 0x01]));
        assert!(!looks_like_tls(b"HTTP/1.1 400"));
        assert!(!looks_like_tls(&[]));
    }

    /// A server that reads whatever comes first and answers `reply`, then closes, as Go's
    /// net/http does to a request it cannot take.
    async fn answers_once(reply: &'static [u8]) -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            if let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(reply).await;
                let _ = s.shutdown().await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn plain_http_to_a_go_tls_port_says_so() {
        // net/http's answer to plain HTTP on a TLS listener (server.go).
        let addr = answers_once(
            b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n",
        )
        .await;
        let e = call(
            &Target::plain(Upstream::Tcp(addr)),
            "GET",
            "/v1/agent/self",
            None,
            None,
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, CallError::Tls(m) if m.contains("speaks TLS, and this run spoke plain HTTP")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn tls_to_a_go_plain_port_says_so() {
        // net/http's answer to a TLS ClientHello on a plain listener: a 400 in plain HTTP.
        let addr = answers_once(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request",
        )
        .await;
        let tls = super::super::tls::TlsSettings {
            skip_verify: true,
            ..Default::default()
        }
        .client("127.0.0.1")
        .unwrap();
        let target = Target {
            upstream: Upstream::Tcp(addr),
            tls: Some(tls),
            base: format!("https://{addr}"),
        };
        let e = call(
            &target,
            "GET",
            "/v1/agent/self",
            None,
            None,
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, CallError::Tls(m) if m.contains("does not speak TLS") && m.contains("http://")),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = l.local_addr().unwrap();
        drop(l);
        let e = call(
            &Target::plain(Upstream::Tcp(dead)),
            "GET",
            "/v1/agent/self",
            None,
            None,
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&e, CallError::Connect(m) if m.contains("failed to connect")),
            "{e:?}"
        );
    }
}
