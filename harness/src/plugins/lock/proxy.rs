//! A fault-injecting HTTP/1.1 proxy between one lock client and a Variables API (the reference
//! server, over TCP or its unix socket, or a real Nomad agent at `http://` or `https://`: the
//! client speaks plain HTTP to the proxy, the proxy forwards through the project's Nomad API
//! client, [`crate::nomad_api`], in TLS when the agent wants it).
//!
//! One proxy is started per client, with the client's label, so every recorded [`Exchange`]
//! knows whose it is. Each request is classified ([`Operation`]), run through the fault plan
//! (partitions, a step's rules, a seeded campaign: see [`super::faults`]) and, unless a fault
//! answers it, forwarded on a fresh upstream connection. The proxy never judges: it forwards,
//! injects and records.
//!
//! Transparency choices: hop-by-hop headers are dropped and `Host` is set to the upstream's; a
//! configured token is added as `X-Nomad-Token` only when the client sent none; when the
//! upstream cannot be reached (a restarting server) the client's connection is dropped without
//! an answer, as a client talking to that server directly would see it.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UnixListener, UnixStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::exchange::{AppliedFault, Exchange, Outcome, excerpt, lock_id_in};
use super::proxy_faults::{
    Campaign, Decision, Fault, FaultAction, FaultError, FaultPlan, FaultRule, FaultSource,
    Operation, PartitionMode, PartitionWindow, PlannedPartition, RuleId,
};

/// Failures of the proxy.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("failed to listen on {addr}: {source}")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Fault(#[from] FaultError),
}

/// Where the proxy listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address; port 0 picks a free port.
    Tcp(SocketAddr),
    /// A unix socket path (a stale socket file there is replaced).
    Unix(PathBuf),
}

impl Listen {
    /// Port 0 on a loopback address of this proxy's own ([`private_loopback`]).
    pub fn localhost() -> Listen {
        Listen::Tcp(SocketAddr::from((private_loopback(), 0)))
    }
}

/// A random address of 127.0.0.0/8 (Linux answers all of it on the loopback interface), for
/// one proxy. A port is free again while a refusing partition has the proxy stop listening,
/// and once a proxy has shut down; on 127.0.0.1, another proxy of this run, or of another run
/// on the machine, could be given it, and a client still sending to the old proxy would then
/// be recorded as that proxy's client (seen once: another run's client's lock-release counted
/// as an attempt by a client that never releases). On an address of its own, a proxy only
/// ever hears its own client. Falls back to 127.0.0.1 where the address cannot be bound.
pub fn private_loopback() -> Ipv4Addr {
    use std::hash::{BuildHasher as _, Hasher as _};
    // std's randomly keyed hasher (new keys per call): no seed, and no verdict depends on it.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    let n = h.finish();
    // Each byte from 1 to 254: never a network or broadcast-looking address, never 127.0.0.1.
    let byte = |i: u32| ((n >> (8 * i)) % 254) as u8 + 1;
    Ipv4Addr::new(127, byte(0), byte(1), byte(2))
}

/// Whether `addr` is a [`private_loopback`] address with port 0 (it falls back to 127.0.0.1).
fn is_private_loopback(addr: &Bound) -> bool {
    matches!(addr, Bound::Tcp(SocketAddr::V4(a))
        if a.ip().is_loopback() && *a.ip() != Ipv4Addr::LOCALHOST && a.port() == 0)
}

// Where the proxy forwards to: the project's Nomad API client's target (plain, unix or TLS),
// see [`crate::nomad_api`].
use crate::nomad_api::{CallError, Target};

/// Everything [`Proxy::start`] needs.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// The client this proxy serves; every exchange carries it.
    pub label: String,
    pub listen: Listen,
    pub upstream: Target,
    /// Sent as `X-Nomad-Token` when the client sends none.
    pub token: Option<String>,
    /// Most exchanges kept (later ones are counted, not kept).
    pub max_records: usize,
    /// Longest wait for the upstream's whole answer.
    pub upstream_timeout: Duration,
    /// Largest request or response body passed through.
    pub max_body: usize,
}

impl ProxyConfig {
    /// Listening on port 0 of an address of its own in 127.0.0.0/8, no token, 100 000 records,
    /// 60 s upstream timeout, 16 MiB bodies.
    pub fn new(label: &str, upstream: Target) -> ProxyConfig {
        ProxyConfig {
            label: label.to_string(),
            listen: Listen::localhost(),
            upstream,
            token: None,
            max_records: 100_000,
            upstream_timeout: Duration::from_secs(60),
            max_body: 16 * 1024 * 1024,
        }
    }

    pub fn with_listen(mut self, listen: Listen) -> ProxyConfig {
        self.listen = listen;
        self
    }

    pub fn with_token(mut self, token: Option<String>) -> ProxyConfig {
        self.token = token;
        self
    }
}

/// Something that went wrong in the proxy itself (not in an exchange).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProxyNote {
    #[serde(skip)]
    pub at: Instant,
    pub message: String,
}

const MAX_NOTES: usize = 100;

struct Inner {
    config: ProxyConfig,
    plan: Mutex<FaultPlan>,
    /// Bumped whenever the partition windows change.
    changed: watch::Sender<u64>,
    /// Bumped to cut every open connection.
    cut: watch::Sender<u64>,
    seq: AtomicU64,
    records: Mutex<Vec<Exchange>>,
    dropped: AtomicU64,
    notes: Mutex<Vec<ProxyNote>>,
    /// Requests received and not finished: (seq, operation, arrival).
    pending: Mutex<Vec<(u64, Operation, Instant)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    fn plan(&self) -> MutexGuard<'_, FaultPlan> {
        lock(&self.plan)
    }

    fn bump(tx: &watch::Sender<u64>) {
        tx.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn note(&self, message: String) {
        let mut notes = lock(&self.notes);
        if notes.len() < MAX_NOTES {
            notes.push(ProxyNote {
                at: Instant::now(),
                message,
            });
        }
    }

    fn push(&self, exchange: Exchange) {
        let mut records = lock(&self.records);
        if records.len() < self.config.max_records {
            records.push(exchange);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The address the proxy ended up listening on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Bound {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Conn> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, _)| Conn::Tcp(s)),
            Listener::Unix(l) => l.accept().await.map(|(s, _)| Conn::Unix(s)),
        }
    }
}

fn bind_tcp(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // Rebinding the same port after a refusing partition.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(path)?,
        Ok(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a file that is not a socket is in the way",
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    UnixListener::bind(path)
}

fn bind(addr: &Bound) -> std::io::Result<(Listener, Bound)> {
    match addr {
        Bound::Tcp(a) => {
            let l = bind_tcp(*a)?;
            let local = l.local_addr()?;
            Ok((Listener::Tcp(l), Bound::Tcp(local)))
        }
        Bound::Unix(p) => Ok((Listener::Unix(bind_unix(p)?), Bound::Unix(p.clone()))),
    }
}

/// A running proxy. Dropping it stops listening and cuts every connection.
pub struct Proxy {
    inner: Arc<Inner>,
    bound: Bound,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("label", &self.inner.config.label)
            .field("bound", &self.bound)
            .field("upstream", &self.inner.config.upstream)
            .finish()
    }
}

impl Proxy {
    /// Binds the listener and starts proxying.
    pub async fn start(config: ProxyConfig) -> Result<Proxy, ProxyError> {
        let wanted = match &config.listen {
            Listen::Tcp(a) => Bound::Tcp(*a),
            Listen::Unix(p) => Bound::Unix(p.clone()),
        };
        let bound_first = match bind(&wanted) {
            Err(_) if is_private_loopback(&wanted) => {
                bind(&Bound::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))))
            }
            r => r,
        };
        let (listener, bound) = bound_first.map_err(|source| ProxyError::Listen {
            addr: match &wanted {
                Bound::Tcp(a) => a.to_string(),
                Bound::Unix(p) => p.display().to_string(),
            },
            source,
        })?;
        let inner = Arc::new(Inner {
            config,
            plan: Mutex::new(FaultPlan::default()),
            changed: watch::channel(0).0,
            cut: watch::channel(0).0,
            seq: AtomicU64::new(0),
            records: Mutex::new(Vec::new()),
            dropped: AtomicU64::new(0),
            notes: Mutex::new(Vec::new()),
            pending: Mutex::new(Vec::new()),
        });
        let accept = tokio::spawn(accept_loop(inner.clone(), listener, bound.clone()));
        Ok(Proxy {
            inner,
            bound,
            accept,
        })
    }

    pub fn label(&self) -> &str {
        &self.inner.config.label
    }

    pub fn upstream(&self) -> &Target {
        &self.inner.config.upstream
    }

    /// The TCP address (`None` on a unix socket).
    pub fn addr(&self) -> Option<SocketAddr> {
        match &self.bound {
            Bound::Tcp(a) => Some(*a),
            Bound::Unix(_) => None,
        }
    }

    /// The socket path (`None` on TCP).
    pub fn socket_path(&self) -> Option<&Path> {
        match &self.bound {
            Bound::Tcp(_) => None,
            Bound::Unix(p) => Some(p),
        }
    }

    /// `http://127.A.B.C:PORT` or `unix:///path`, for the client's environment.
    pub fn nomad_addr(&self) -> String {
        match &self.bound {
            Bound::Tcp(a) => format!("http://{a}"),
            Bound::Unix(p) => format!("unix://{}", p.display()),
        }
    }

    /// Adds a rule; rules apply in the order they were added.
    pub fn inject(&self, rule: FaultRule) -> RuleId {
        self.inner.plan().add_rule(rule)
    }

    /// `fault` for the next `n` requests of `ops` (every operation when empty).
    pub fn inject_next(&self, ops: &[Operation], fault: Fault, n: u32) -> RuleId {
        self.inject(FaultRule::new(fault).only(ops).next(n))
    }

    /// `fault` for every request of `ops` until cleared.
    pub fn inject_until_cleared(&self, ops: &[Operation], fault: Fault) -> RuleId {
        self.inject(FaultRule::new(fault).only(ops))
    }

    /// Removes one rule; false if it was gone (used up or cleared).
    pub fn clear_rule(&self, id: RuleId) -> bool {
        self.inner.plan().remove_rule(id)
    }

    /// Removes every rule (partitions and a campaign stay).
    pub fn clear_faults(&self) {
        self.inner.plan().clear_rules();
    }

    /// The rules still in force.
    pub fn rules(&self) -> Vec<(RuleId, FaultRule)> {
        self.inner.plan().rules()
    }

    /// A partition from now for `length`.
    pub fn partition_for(&self, mode: PartitionMode, length: Duration) {
        let now = Instant::now();
        self.add_window(PartitionWindow {
            start: now,
            end: Some(now + length),
            mode,
            source: FaultSource::Step,
        });
    }

    /// A partition from now until [`Proxy::heal`].
    pub fn partition_until_healed(&self, mode: PartitionMode) {
        self.add_window(PartitionWindow {
            start: Instant::now(),
            end: None,
            mode,
            source: FaultSource::Step,
        });
    }

    /// A partition at a given time window (it may lie in the future).
    pub fn partition_window(&self, mode: PartitionMode, start: Instant, end: Instant) {
        self.add_window(PartitionWindow {
            start,
            end: Some(end.max(start)),
            mode,
            source: FaultSource::Step,
        });
    }

    fn add_window(&self, w: PartitionWindow) {
        self.inner.plan().add_partition(w);
        Inner::bump(&self.inner.changed);
    }

    /// Ends every partition now (and drops planned ones, a campaign's included).
    pub fn heal(&self) {
        self.inner.plan().heal(Instant::now());
        Inner::bump(&self.inner.changed);
    }

    /// Requests of `op` received and not answered yet, with when each arrived (oldest first):
    /// what a client is waiting on right now (a renew held by a hang, say).
    pub fn pending(&self, op: Operation) -> Vec<Instant> {
        let mut v: Vec<Instant> = lock(&self.inner.pending)
            .iter()
            .filter(|(_, o, _)| *o == op)
            .map(|(_, _, at)| *at)
            .collect();
        v.sort();
        v
    }

    /// Every partition window so far (and planned), in the order they were set.
    pub fn partitions(&self) -> Vec<PartitionWindow> {
        self.inner.plan().partitions()
    }

    /// Starts a seeded campaign now (replacing a running one); returns its partitions.
    pub fn start_campaign(&self, campaign: Campaign) -> Result<Vec<PlannedPartition>, ProxyError> {
        let planned =
            self.inner
                .plan()
                .start_campaign(campaign, &self.inner.config.label, Instant::now())?;
        Inner::bump(&self.inner.changed);
        Ok(planned)
    }

    /// Stops the campaign (a partition it is in ends now).
    pub fn stop_campaign(&self) {
        self.inner.plan().stop_campaign(Instant::now());
        Inner::bump(&self.inner.changed);
    }

    /// Every exchange so far, in order of arrival.
    pub fn records(&self) -> Vec<Exchange> {
        let mut r = lock(&self.inner.records).clone();
        r.sort_by_key(|e| e.seq);
        r
    }

    /// Exchanges not kept because the record was full.
    pub fn dropped_records(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Problems of the proxy itself (failing to listen again after a partition, say).
    pub fn notes(&self) -> Vec<ProxyNote> {
        lock(&self.inner.notes).clone()
    }

    /// Stops listening and cuts every connection; the records stay readable.
    pub fn shutdown(&self) {
        self.accept.abort();
        Inner::bump(&self.inner.cut);
        if let Bound::Unix(p) = &self.bound {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

async fn accept_loop(inner: Arc<Inner>, listener: Listener, bound: Bound) {
    let mut listener = Some(listener);
    let mut changed = inner.changed.subscribe();
    loop {
        let now = Instant::now();
        let (window, next) = {
            let plan = inner.plan();
            (plan.partition_at(now), plan.next_change(now))
        };
        if window.is_some_and(|w| w.mode == PartitionMode::Refuse) {
            if listener.take().is_some() {
                // Stop listening (new connections are refused) and cut the open ones.
                Inner::bump(&inner.cut);
            }
            tokio::select! {
                _ = sleep_until(next) => {}
                r = changed.changed() => if r.is_err() { return },
            }
            continue;
        }
        let Some(l) = listener.as_ref() else {
            match bind(&bound) {
                Ok((l, _)) => listener = Some(l),
                Err(e) => {
                    inner.note(format!("failed to listen again after a partition: {e}"));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            continue;
        };
        tokio::select! {
            r = l.accept() => match r {
                Ok(conn) => {
                    let inner = inner.clone();
                    tokio::spawn(async move { serve(inner, conn).await });
                }
                Err(e) => {
                    inner.note(format!("failed to accept a connection: {e}"));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = sleep_until(next) => {}
            r = changed.changed() => if r.is_err() { return },
        }
    }
}

async fn serve(inner: Arc<Inner>, conn: Conn) {
    match conn {
        Conn::Tcp(mut s) => {
            if serve_io(inner, &mut s).await {
                // An abortive close: the client sees a reset, not a clean end.
                let _ = s.set_zero_linger();
            }
        }
        Conn::Unix(mut s) => {
            serve_io(inner, &mut s).await;
        }
    }
}

/// Serves one connection until it ends; true when the proxy cut it.
async fn serve_io<S: AsyncRead + AsyncWrite + Unpin>(inner: Arc<Inner>, stream: &mut S) -> bool {
    let kill = Arc::new(Notify::new());
    let mut cut = inner.cut.subscribe();
    let svc = {
        let (inner, kill) = (inner.clone(), kill.clone());
        hyper::service::service_fn(move |req| handle(inner.clone(), kill.clone(), req))
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(60));
    let conn = builder.serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = conn => false,
        _ = kill.notified() => true,
        _ = cut.changed() => true,
    }
}

/// An exchange being handled; recorded as interrupted if dropped unfinished (the client closed
/// the connection, or a partition cut it).
struct InFlight {
    inner: Arc<Inner>,
    exchange: Option<Exchange>,
}

impl InFlight {
    fn finish(mut self, status: Option<u16>, body: &[u8], outcome: Outcome) {
        if let Some(mut e) = self.exchange.take() {
            lock(&self.inner.pending).retain(|(s, _, _)| *s != e.seq);
            e.duration = e.at.elapsed();
            e.status = status;
            // A token's secret in an answer (the ACL API's SecretID) is never recorded.
            if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
                crate::secrets::register_from_json(&v);
            }
            e.response_body = excerpt(body);
            e.response_bytes = body.len();
            if e.operation == Operation::Acquire && status == Some(200) {
                e.lock_id = lock_id_in(body).or(e.lock_id);
            }
            e.outcome = outcome;
            self.inner.push(e);
        }
    }

    fn set_fault(&mut self, fault: AppliedFault) {
        if let Some(e) = self.exchange.as_mut() {
            e.fault = Some(fault);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(mut e) = self.exchange.take() {
            lock(&self.inner.pending).retain(|(s, _, _)| *s != e.seq);
            e.duration = e.at.elapsed();
            e.outcome = Outcome::Interrupted;
            self.inner.push(e);
        }
    }
}

type ProxyResponse = Response<Full<Bytes>>;

async fn handle(
    inner: Arc<Inner>,
    kill: Arc<Notify>,
    req: Request<Incoming>,
) -> Result<ProxyResponse, Infallible> {
    let at = Instant::now();
    let wall = SystemTime::now();
    let seq = inner.seq.fetch_add(1, Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    let method = parts.method.to_string();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or_default().to_string();
    let operation = Operation::classify(&method, &query);
    lock(&inner.pending).push((seq, operation, at));
    let mut flight = InFlight {
        inner: inner.clone(),
        exchange: Some(Exchange {
            seq,
            client: inner.config.label.clone(),
            at,
            wall,
            duration: Duration::ZERO,
            operation,
            method,
            path,
            query,
            token_sent: {
                // The token as Nomad reads it (command/agent/http.go, parseToken): X-Nomad-Token,
                // else an Authorization: Bearer header. It is never recorded, and redacted
                // wherever the client's output shows it.
                let token = nomad_conform_variables::request_token(&parts.headers);
                if !token.is_empty() {
                    crate::secrets::register(&token);
                }
                !token.is_empty()
            },
            request_body: String::new(),
            request_bytes: 0,
            status: None,
            response_body: String::new(),
            response_bytes: 0,
            fault: None,
            outcome: Outcome::Interrupted,
            lock_id: None,
            upstream: inner.config.upstream.upstream.clone(),
            https: inner.config.upstream.tls.is_some(),
            curl_tls: inner
                .config
                .upstream
                .tls
                .as_ref()
                .map(|t| t.curl_flags())
                .unwrap_or_default(),
            proxy_adds_token: inner.config.token.is_some(),
        }),
    };

    let body = match Limited::new(body, inner.config.max_body).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            // Too big, or the client went away while sending it.
            drop(flight);
            return cut(&kill).await;
        }
    };
    if let Some(e) = flight.exchange.as_mut() {
        e.request_body = excerpt(&body);
        e.request_bytes = body.len();
        if operation != Operation::Read {
            e.lock_id = lock_id_in(&body);
        }
    }

    let decision = inner.plan().decide(operation, at);
    match decision {
        Decision::Pass => {}
        Decision::Refuse { source } => {
            flight.set_fault(AppliedFault {
                source,
                rule: None,
                description: "partition (refuse)".into(),
                fault: None,
            });
            flight.finish(None, &[], Outcome::Reset);
            return cut(&kill).await;
        }
        Decision::Hang { until, source } => {
            flight.set_fault(AppliedFault {
                source,
                rule: None,
                description: "partition (hang)".into(),
                fault: None,
            });
            wait_out_hang(&inner, until).await;
            flight.set_fault(AppliedFault {
                source,
                rule: None,
                description: format!(
                    "partition (hang) held it {}",
                    crate::fmt_duration(at.elapsed())
                ),
                fault: None,
            });
        }
        Decision::Apply {
            fault,
            source,
            rule,
        } => {
            flight.set_fault(AppliedFault {
                source,
                rule,
                description: fault.describe(),
                fault: Some(fault),
            });
            if !fault.delay.is_zero() {
                tokio::time::sleep(fault.delay).await;
            }
            match fault.action {
                FaultAction::Forward => {}
                FaultAction::Status { status } => {
                    let text = nomad_like_body(status);
                    flight.finish(Some(status), text.as_bytes(), Outcome::Injected);
                    return plain(status, text);
                }
                FaultAction::Reset => {
                    flight.finish(None, &[], Outcome::Reset);
                    return cut(&kill).await;
                }
            }
        }
    }

    match forward(&inner, &parts, body).await {
        Ok((status, headers, body)) => {
            flight.finish(Some(status.as_u16()), &body, Outcome::Forwarded);
            let mut resp = Response::new(Full::new(body));
            *resp.status_mut() = status;
            for (name, value) in headers.iter() {
                if !is_hop_by_hop(name) && name != header::CONTENT_LENGTH {
                    resp.headers_mut().append(name.clone(), value.clone());
                }
            }
            Ok(resp)
        }
        Err(error) => {
            flight.finish(None, &[], Outcome::UpstreamFailed { error });
            cut(&kill).await
        }
    }
}

/// Has the connection dropped; never answers.
async fn cut(kill: &Notify) -> Result<ProxyResponse, Infallible> {
    kill.notify_one();
    std::future::pending().await
}

/// Waits until the hang partition in force ends (or is healed).
async fn wait_out_hang(inner: &Inner, until: Option<Instant>) {
    let mut changed = inner.changed.subscribe();
    let mut until = until;
    loop {
        tokio::select! {
            _ = sleep_until(until) => {}
            r = changed.changed() => if r.is_err() { return },
        }
        match inner.plan().partition_at(Instant::now()) {
            Some(w) if w.mode == PartitionMode::Hang => until = w.end,
            _ => return,
        }
    }
}

fn plain(status: u16, text: String) -> Result<ProxyResponse, Infallible> {
    let mut resp = Response::new(Full::new(Bytes::from(text)));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(resp)
}

/// A plain-text error body of the kind Nomad's agent writes for the status.
pub fn nomad_like_body(status: u16) -> String {
    match status {
        403 => "Permission denied".into(),
        404 => "variable not found".into(),
        409 => "attempting to modify locked variable".into(),
        429 => "rate limit exceeded (injected by nomad-conform)".into(),
        500 => "rpc error: internal error (injected by nomad-conform)".into(),
        502 => "bad gateway (injected by nomad-conform)".into(),
        503 => "No cluster leader".into(),
        504 => "timeout waiting for the leader (injected by nomad-conform)".into(),
        s => format!("error {s} (injected by nomad-conform)"),
    }
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// Sends the request upstream on a new connection; the whole answer, or why there is none.
async fn forward(
    inner: &Inner,
    parts: &hyper::http::request::Parts,
    body: Bytes,
) -> Result<(StatusCode, HeaderMap, Bytes), String> {
    let upstream = &inner.config.upstream;
    let target = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("/");
    let mut req = Request::builder()
        .method(parts.method.clone())
        .uri(target)
        .body(Full::new(body))
        .map_err(|e| format!("failed to build the upstream request: {e}"))?;
    let headers = req.headers_mut();
    for (name, value) in parts.headers.iter() {
        if !is_hop_by_hop(name) && name != header::HOST && name != header::CONTENT_LENGTH {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(host) = HeaderValue::from_str(&upstream.upstream.host_header()) {
        headers.insert(header::HOST, host);
    }
    if let Some(token) = &inner.config.token
        && nomad_conform_variables::request_token(headers).is_empty()
        && let Ok(v) = HeaderValue::from_str(token)
    {
        headers.insert(HeaderName::from_static("x-nomad-token"), v);
    }
    let exchange = crate::nomad_api::exchange(upstream, req, inner.config.max_body);
    match tokio::time::timeout(inner.config.upstream_timeout, exchange).await {
        Ok(Ok((rparts, bytes))) => Ok((rparts.status, rparts.headers, bytes)),
        Ok(Err(e @ CallError::Connect(_))) => Err(e.to_string()),
        Ok(Err(e)) => Err(format!("the upstream failed: {e}")),
        Err(_) => Err(format!(
            "no answer from the upstream within {}",
            crate::fmt_duration(inner.config.upstream_timeout)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nomad_api::Upstream;

    #[test]
    fn error_bodies_look_like_nomads() {
        assert_eq!(nomad_like_body(403), "Permission denied");
        assert_eq!(nomad_like_body(503), "No cluster leader");
        assert!(nomad_like_body(418).contains("418"));
    }

    async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String), String> {
        let (mut sender, _) =
            crate::nomad_api::client::connect(&Target::plain(Upstream::Tcp(addr)))
                .await
                .map_err(|e| e.to_string())?;
        let req = Request::builder()
            .method("PUT")
            .uri(path)
            .header("host", "x")
            .body(Full::new(Bytes::from_static(b"{\"Lock\":{\"ID\":\"L1\"}}")))
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// A tiny upstream that echoes the method, target and token it got.
    async fn echo_upstream() -> (SocketAddr, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let task = tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(|req: Request<Incoming>| async move {
                        let token = req
                            .headers()
                            .get("x-nomad-token")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or("-")
                            .to_string();
                        let text = format!("{} {} {}", req.method(), req.uri(), token);
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        (addr, task)
    }

    #[tokio::test]
    async fn each_proxy_listens_on_a_loopback_address_of_its_own() {
        let (up, _task) = echo_upstream().await;
        let start =
            |label: &str| Proxy::start(ProxyConfig::new(label, Target::plain(Upstream::Tcp(up))));
        let a = start("a").await.unwrap();
        let b = start("b").await.unwrap();
        let (at, bt) = (a.addr().unwrap(), b.addr().unwrap());
        assert!(at.ip().is_loopback() && bt.ip().is_loopback());
        assert_ne!(at.ip(), bt.ip(), "two proxies on one address");
        assert_ne!(at.ip(), std::net::IpAddr::V4(Ipv4Addr::LOCALHOST));
        let (status, _) = http_get(bt, "/v1/var/a?lock-release").await.unwrap();
        assert_eq!(status, 200);
        // A client of a proxy that has shut down reaches nobody, whatever port b was given.
        drop(a);
        assert!(http_get(at, "/v1/var/a?lock-release").await.is_err());
        let seen: Vec<Operation> = b.records().iter().map(|e| e.operation).collect();
        assert_eq!(seen, [Operation::Release]);
    }

    #[tokio::test]
    async fn forwards_records_and_injects() {
        let (up, _task) = echo_upstream().await;
        let proxy = Proxy::start(
            ProxyConfig::new("c1", Target::plain(Upstream::Tcp(up)))
                .with_token(Some("secret".into())),
        )
        .await
        .unwrap();
        let addr = proxy.addr().unwrap();
        let (status, body) = http_get(addr, "/v1/var/a?lock-renew").await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, "PUT /v1/var/a?lock-renew secret");

        proxy.inject_next(&[Operation::Renew], Fault::status(429).unwrap(), 1);
        let (status, body) = http_get(addr, "/v1/var/a?lock-renew").await.unwrap();
        assert_eq!(
            (status, body.as_str()),
            (429, nomad_like_body(429).as_str())
        );
        // Used up.
        assert_eq!(http_get(addr, "/v1/var/a?lock-renew").await.unwrap().0, 200);

        proxy.inject_next(&[], Fault::reset(), 1);
        assert!(http_get(addr, "/v1/var/a?lock-acquire").await.is_err());

        let records = proxy.records();
        assert_eq!(records.len(), 4, "{records:#?}");
        assert!(records.iter().all(|r| r.client == "c1"));
        assert_eq!(records[0].operation, Operation::Renew);
        assert_eq!(records[0].lock_id.as_deref(), Some("L1"));
        assert_eq!(records[0].outcome, Outcome::Forwarded);
        assert_eq!(records[1].status, Some(429));
        assert_eq!(records[1].outcome, Outcome::Injected);
        assert_eq!(records[3].operation, Operation::Acquire);
        assert_eq!(records[3].outcome, Outcome::Reset);
        assert_eq!(records[3].status, None);
        assert!(records[3].fault.is_some());
    }

    #[tokio::test]
    async fn latency_is_added() {
        let (up, _task) = echo_upstream().await;
        let proxy = Proxy::start(ProxyConfig::new("c", Target::plain(Upstream::Tcp(up))))
            .await
            .unwrap();
        proxy.inject_until_cleared(
            &[Operation::Acquire],
            Fault::latency(Duration::from_millis(150)),
        );
        let t = Instant::now();
        http_get(proxy.addr().unwrap(), "/v1/var/a?lock-acquire")
            .await
            .unwrap();
        assert!(t.elapsed() >= Duration::from_millis(150));
        proxy.clear_faults();
        let t = Instant::now();
        http_get(proxy.addr().unwrap(), "/v1/var/a?lock-acquire")
            .await
            .unwrap();
        assert!(t.elapsed() < Duration::from_millis(150));
    }

    #[tokio::test]
    async fn upstream_down_drops_the_connection() {
        // A port with nothing listening.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = l.local_addr().unwrap();
        drop(l);
        let proxy = Proxy::start(ProxyConfig::new("c", Target::plain(Upstream::Tcp(dead))))
            .await
            .unwrap();
        assert!(http_get(proxy.addr().unwrap(), "/v1/var/a").await.is_err());
        let r = proxy.records();
        assert!(
            matches!(&r[0].outcome, Outcome::UpstreamFailed { error } if error.contains("failed to connect")),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn hang_partition_holds_then_forwards() {
        let (up, _task) = echo_upstream().await;
        let proxy = Proxy::start(ProxyConfig::new("c", Target::plain(Upstream::Tcp(up))))
            .await
            .unwrap();
        proxy.partition_for(PartitionMode::Hang, Duration::from_millis(300));
        let t = Instant::now();
        let (status, _) = http_get(proxy.addr().unwrap(), "/v1/var/a?lock-renew")
            .await
            .unwrap();
        assert_eq!(status, 200);
        assert!(
            t.elapsed() >= Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
        let r = proxy.records();
        assert!(
            r[0].fault
                .as_ref()
                .is_some_and(|f| f.description.starts_with("partition (hang)")),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn a_client_giving_up_during_a_hang_is_recorded_as_interrupted() {
        let (up, _task) = echo_upstream().await;
        let proxy = Proxy::start(ProxyConfig::new("c", Target::plain(Upstream::Tcp(up))))
            .await
            .unwrap();
        proxy.partition_for(PartitionMode::Hang, Duration::from_millis(400));
        let r = tokio::time::timeout(
            Duration::from_millis(100),
            http_get(proxy.addr().unwrap(), "/v1/var/a?lock-renew"),
        )
        .await;
        assert!(r.is_err(), "the request hangs");
        tokio::time::sleep(Duration::from_millis(600)).await;
        let records = proxy.records();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0].outcome, Outcome::Interrupted, "{records:?}");
        assert!(
            records[0].duration < Duration::from_millis(350),
            "{records:?}"
        );
    }

    #[tokio::test]
    async fn unix_listener_and_refusing_partition() {
        let (up, _task) = echo_upstream().await;
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("p.sock");
        let proxy = Proxy::start(
            ProxyConfig::new("u", Target::plain(Upstream::Tcp(up)))
                .with_listen(Listen::Unix(sock.clone())),
        )
        .await
        .unwrap();
        assert_eq!(proxy.nomad_addr(), format!("unix://{}", sock.display()));
        assert!(UnixStream::connect(&sock).await.is_ok());
        proxy.partition_for(PartitionMode::Refuse, Duration::from_millis(300));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let e = UnixStream::connect(&sock).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{e}");
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(UnixStream::connect(&sock).await.is_ok(), "listening again");
    }
}
