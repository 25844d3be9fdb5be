//! A scripted lock server, for what the reference server does not do on cue: renews that hang
//! (the request is read, the connection stays open, no answer ever comes) and renews answered
//! late. It speaks just enough HTTP/1.1 for lock-sidecar: one request per connection, answered
//! with `Connection: close`.
//!
//! - `lock-acquire` is answered 200 with lock ID [`LOCK_ID`] and the TTL the request asked for
//!   (nothing is checked: any TTL goes, so tests may pick the one their timing needs), at once
//!   or after the time [`ScriptedServer::answer_acquires_after`] sets.
//! - The n-th `lock-renew` follows the n-th entry of the script, every later one the `then`
//!   entry.
//! - `lock-release` is answered 200.
//!
//! Each request is recorded (operation and arrival time, on the test process's clock) when it
//! has been read in full, before it is answered.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The lock ID every acquire gets.
pub const LOCK_ID: &str = "scripted-lock";

/// How one renew is answered.
#[derive(Clone, Copy, Debug)]
pub enum Renew {
    /// `status` after `after` (200 renews, 409 is a conflict).
    Answer { status: u16, after: Duration },
    /// Never: the connection stays open.
    Hang,
}

impl Renew {
    /// 200 at once.
    pub const OK: Self = Self::Answer {
        status: 200,
        after: Duration::ZERO,
    };

    /// 409 after `after`.
    pub fn conflict_after(after: Duration) -> Self {
        Self::Answer { status: 409, after }
    }
}

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// `lock-acquire`, `lock-renew`, `lock-release` (or `other`).
    pub op: &'static str,
    /// When it had been read.
    pub at: Instant,
}

#[derive(Debug)]
struct Script {
    renews: VecDeque<Renew>,
    then: Renew,
    seen: Vec<Seen>,
    /// How long every `lock-acquire` waits for its 200.
    acquire_after: Duration,
}

/// A running scripted server; stops accepting when dropped.
pub struct ScriptedServer {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    accept: tokio::task::JoinHandle<()>,
}

impl ScriptedServer {
    /// Listens on loopback; renews follow `renews`, then `then`.
    pub async fn start(renews: &[Renew], then: Renew) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let script = Arc::new(Mutex::new(Script {
            renews: renews.iter().copied().collect(),
            then,
            seen: Vec::new(),
            acquire_after: Duration::ZERO,
        }));
        let shared = script.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        Self {
            addr,
            script,
            accept,
        }
    }

    /// Every `lock-acquire` from now on is answered 200 only after `after`.
    pub fn answer_acquires_after(&self, after: Duration) {
        self.script.lock().unwrap().acquire_after = after;
    }

    /// `NOMAD_ADDR` for lock-sidecar.
    pub fn nomad_addr(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Arrival times of the requests for `op` so far.
    pub fn seen(&self, op: &str) -> Vec<Instant> {
        self.script
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| s.op == op)
            .map(|s| s.at)
            .collect()
    }

    /// Waits until `count` requests for `op` arrived; returns when the last of them did.
    pub async fn wait_for(&self, op: &str, count: usize, limit: Duration) -> Instant {
        let deadline = Instant::now() + limit;
        loop {
            let seen = self.seen(op);
            if seen.len() >= count {
                return seen[count - 1];
            }
            assert!(
                Instant::now() < deadline,
                "{} {op} requests within {limit:?}, expected {count}",
                seen.len()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn serve(mut stream: TcpStream, script: Arc<Mutex<Script>>) {
    let Some((query, body)) = read_request(&mut stream).await else {
        return;
    };
    let op = ["lock-acquire", "lock-renew", "lock-release"]
        .into_iter()
        .find(|flag| super::has_flag(&query, flag))
        .unwrap_or("other");
    let answer = {
        let mut script = script.lock().unwrap();
        script.seen.push(Seen {
            op,
            at: Instant::now(),
        });
        match op {
            "lock-renew" => {
                let then = script.then;
                script.renews.pop_front().unwrap_or(then)
            }
            "other" => Renew::Answer {
                status: 404,
                after: Duration::ZERO,
            },
            "lock-acquire" => Renew::Answer {
                status: 200,
                after: script.acquire_after,
            },
            _ => Renew::OK,
        }
    };
    let (status, after) = match answer {
        Renew::Answer { status, after } => (status, after),
        Renew::Hang => {
            // Hold the connection open, unanswered, until the client gives up on it.
            let mut rest = [0u8; 64];
            while matches!(stream.read(&mut rest).await, Ok(n) if n > 0) {}
            return;
        }
    };
    tokio::time::sleep(after).await;
    let ttl = body["Lock"]["TTL"].as_str().unwrap_or("15s").to_string();
    let reply = match status {
        200 => json!({"Path": body["Path"], "Lock": {"ID": LOCK_ID, "TTL": ttl}}).to_string(),
        409 => "attempting to modify locked variable".to_string(),
        _ => String::new(),
    };
    let response = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        if status == 200 { "OK" } else { "Scripted" },
        reply.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Reads one request; returns its query string and JSON body.
async fn read_request(stream: &mut TcpStream) -> Option<(String, Value)> {
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0);
    while raw.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&chunk[..n]);
    }
    let target = head.split_whitespace().nth(1)?.to_string();
    let query = target
        .split_once('?')
        .map(|(_, q)| q.to_string())
        .unwrap_or_default();
    let body = serde_json::from_slice(&raw[head_end..head_end + length]).unwrap_or_default();
    Some((query, body))
}
