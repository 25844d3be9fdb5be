//! Running lock-sidecar against the reference Variables server, and watching what happens.
//!
//! - Every lock-sidecar runs in its own process group with a clean environment (PATH plus the
//!   NOMAD_* variables a test gives); its stderr goes to a file, so a protected process that
//!   inherits it can never block a read.
//! - [`Run`]'s drop SIGKILLs lock-sidecar's group and the protected process's group (found
//!   through the pid file the test commands write), so nothing is left running, whatever fails.
//! - Times are compared on one clock: the server runs in the test process and records
//!   `std::time::Instant`s.

#![allow(dead_code)]

pub mod scripted;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use nomad_conform_variables::{
    AclConfig, LockEventKind, Profile, RequestRecord, ServerConfig, ServerHandle, VariablesServer,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The lock TTL every test uses (the fast profile's minimum).
pub const TTL: Duration = Duration::from_secs(1);

/// A protected command that records its pid and runs until stopped.
pub const LONG_RUNNING: &str = r#"echo $$ > "$PROTECTED_PIDFILE"; exec sleep 30"#;

/// A server on the fast profile (1 s minimum TTL) on loopback TCP.
pub async fn fast_server() -> Arc<ServerHandle> {
    fast_server_with(ServerConfig::localhost()).await
}

/// A server on the fast profile with `config`'s listener and ACLs.
pub async fn fast_server_with(config: ServerConfig) -> Arc<ServerHandle> {
    Arc::new(
        VariablesServer::start(config.with_profile(Profile::fast()))
            .await
            .expect("start the reference server"),
    )
}

/// [`fast_server_with`] on a listener with ACLs.
pub fn acl_config(listen: nomad_conform_variables::Listen, acl: AclConfig) -> ServerConfig {
    ServerConfig::new(listen).with_acl(acl)
}

/// A short scratch directory (unix socket paths must stay short).
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("lks")
        .tempdir_in("/tmp")
        .expect("scratch dir")
}

/// How to start one lock-sidecar.
pub struct Launch<'a> {
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
    pub dir: &'a Path,
    pub name: &'a str,
}

impl<'a> Launch<'a> {
    /// lock-sidecar talking to `server` (NOMAD_ADDR), with `args`.
    pub fn new(server: &ServerHandle, dir: &'a Path, args: &[&str]) -> Self {
        Self::at(&server.nomad_addr(), dir, args)
    }

    /// lock-sidecar with NOMAD_ADDR `addr` (a scripted server, or nothing listening).
    pub fn at(addr: &str, dir: &'a Path, args: &[&str]) -> Self {
        Self {
            env: vec![("NOMAD_ADDR".to_string(), addr.to_string())],
            args: args.iter().map(|a| a.to_string()).collect(),
            dir,
            name: "main",
        }
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Names this run (for its files), when a test starts several.
    pub fn named(mut self, name: &'a str) -> Self {
        self.name = name;
        self
    }

    /// Starts it.
    pub fn spawn(self) -> Run {
        let stderr_path = self.dir.join(format!("{}.stderr", self.name));
        let pidfile = self.dir.join(format!("{}.pid", self.name));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_lock-sidecar"));
        command
            .args(&self.args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PROTECTED_PIDFILE", &pidfile)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0)
            .kill_on_drop(true);
        let child = command.spawn().expect("spawn lock-sidecar");
        let pid = child.id().expect("pid") as i32;
        Run {
            child,
            pid,
            stderr_path,
            pidfile,
            started: Instant::now(),
        }
    }
}

/// A running (or finished) lock-sidecar.
pub struct Run {
    child: tokio::process::Child,
    pub pid: i32,
    pub stderr_path: PathBuf,
    /// Where [`LONG_RUNNING`] and the other test commands write their pid.
    pub pidfile: PathBuf,
    pub started: Instant,
}

impl Run {
    /// Waits for the exit code; panics (with stderr) if it takes longer than `limit`.
    pub async fn exit_code(&mut self, limit: Duration) -> i32 {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => {
                let status = status.expect("wait");
                status.code().unwrap_or_else(|| {
                    panic!("lock-sidecar was killed: {status:?}\n{}", self.stderr())
                })
            }
            Err(_) => panic!(
                "lock-sidecar still running after {limit:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// Whether lock-sidecar has exited.
    pub fn has_exited(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_some()
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Sends a signal to lock-sidecar itself.
    pub fn signal(&self, signal: Signal) {
        nix::sys::signal::kill(Pid::from_raw(self.pid), signal).expect("signal lock-sidecar");
    }

    /// The protected process's pid, once it wrote it.
    pub fn protected_pid(&self) -> Option<i32> {
        std::fs::read_to_string(&self.pidfile)
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Waits until the protected process wrote its pid.
    pub async fn wait_protected(&self, limit: Duration) -> i32 {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(pid) = self.protected_pid() {
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "the protected process did not start within {limit:?}; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.pid), Signal::SIGKILL);
        if let Some(pid) = self.protected_pid() {
            // The protected process leads its own group.
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Whether `pid` is a live process (a zombie counts as dead).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Polls every 5 ms until `pid` is dead; returns when it was first seen dead.
pub async fn death_of(pid: i32, limit: Duration) -> Instant {
    let deadline = Instant::now() + limit;
    loop {
        if !alive(pid) {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} still alive after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls until `check` holds.
pub async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits for the first successful acquire on `path`; returns its lock ID.
pub async fn acquired(server: &ServerHandle, path: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let found = server.history().into_iter().find_map(|e| match e.kind {
            LockEventKind::Acquired { lock_id, .. } if e.path == path => Some(lock_id),
            _ => None,
        });
        if let Some(id) = found {
            return id;
        }
        assert!(
            Instant::now() < deadline,
            "no acquire on {path} within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Requests for one lock operation (`lock-acquire`, `lock-renew`, `lock-release`) on `path`.
pub fn requests(server: &ServerHandle, path: &str, flag: &str) -> Vec<RequestRecord> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path == format!("/v1/var/{path}") && has_flag(&r.query, flag))
        .collect()
}

/// Whether a raw query string has `flag` as a key.
pub fn has_flag(query: &str, flag: &str) -> bool {
    query
        .split('&')
        .any(|pair| pair.split('=').next() == Some(flag))
}

/// Request body as JSON.
pub fn body(record: &RequestRecord) -> Value {
    serde_json::from_str(&record.request_body)
        .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", record.request_body))
}

/// Gaps between consecutive times.
pub fn gaps(times: &[Instant]) -> Vec<Duration> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

/// Acquires `path` as another holder over plain HTTP; returns the status and lock ID.
pub async fn acquire_as_other(server: &ServerHandle, path: &str, ttl: &str) -> (u16, String) {
    let addr = server.addr().expect("a TCP server");
    let body = format!(r#"{{"Path":"{path}","Lock":{{"TTL":"{ttl}","LockDelay":"1s"}}}}"#);
    let request = format!(
        "PUT /v1/var/{path}?lock-acquire HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.expect("read");
    let status: u16 = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let json = raw
        .split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str::<Value>(body).ok())
        .unwrap_or_default();
    let id = json["Lock"]["ID"].as_str().unwrap_or_default().to_string();
    (status, id)
}

/// The lock ID the server holds on `path` (default namespace).
pub fn holder(server: &ServerHandle, path: &str) -> Option<String> {
    holder_in(server, "default", path)
}

/// The lock ID the server holds on `path` in `namespace`.
pub fn holder_in(server: &ServerHandle, namespace: &str, path: &str) -> Option<String> {
    server
        .variable(namespace, path)
        .and_then(|v| v.metadata.lock.map(|l| l.id))
        .filter(|id| !id.is_empty())
}

/// Successful renews of `lock_id` as the server recorded them.
pub fn renewed_at(server: &ServerHandle, lock_id: &str) -> Vec<Instant> {
    server
        .history()
        .into_iter()
        .filter(|e| matches!(&e.kind, LockEventKind::Renewed { lock_id: id } if id == lock_id))
        .map(|e| e.at)
        .collect()
}

/// When `lock_id` was acquired.
pub fn acquired_at(server: &ServerHandle, lock_id: &str) -> Instant {
    server
        .history()
        .into_iter()
        .find(|e| matches!(&e.kind, LockEventKind::Acquired { lock_id: id, .. } if id == lock_id))
        .map(|e| e.at)
        .expect("an acquire event")
}

/// Whether `lock_id` was released by lock-release.
pub fn released(server: &ServerHandle, lock_id: &str) -> bool {
    server
        .history()
        .into_iter()
        .any(|e| matches!(&e.kind, LockEventKind::Released { lock_id: id } if id == lock_id))
}

/// Median of durations (panics on none).
pub fn median(mut values: Vec<Duration>) -> Duration {
    assert!(!values.is_empty(), "no values");
    values.sort();
    values[values.len() / 2]
}

/// One timing test at a time in a test binary: each runs a client with a TTL of 1 s against a
/// fast server and judges it to within a tenth of that, which two cores shared with three other
/// tests (scripts/test runs four at a time) cannot promise. Hold the guard for the whole test.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}
