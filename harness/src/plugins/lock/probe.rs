//! The probe: a stand-in for the protected process, and the listener that watches probes.
//!
//! `nomad-conform probe --socket PATH --label L` (a hidden subcommand) is what a lock client
//! under test runs instead of its real workload. It connects to the harness's unix socket and
//! writes newline-delimited JSON: `{"event":"start","label":L,"pid":P}`, then
//! `{"event":"beat"}` every 50 ms, and `{"event":"exit","code":C}` when it stops on its own
//! terms: 143 on SIGTERM, 130 on SIGINT, or N after `--run-for D` with `--exit-code N`. A probe
//! killed outright (SIGKILL) sends nothing more: the harness sees its connection close. A probe
//! that cannot reach the harness still runs (a client under test must not break because of the
//! harness), with a warning on stderr.
//!
//! [`ProbeListener`] accepts any number of probe connections and turns them into
//! [`ProbeInterval`]s: when each probe started, when it ended (its connection closed, which is
//! when the process died, whatever killed it), with which exit code, if any. Times are taken as
//! the messages arrive, so they are good to about 10 ms.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often a probe reports that it is alive.
pub const BEAT: Duration = Duration::from_millis(50);
/// Longest line a listener reads (longer ones are counted as bad and skipped).
const MAX_LINE: usize = 4096;
/// Most connections a listener keeps.
const MAX_CONNECTIONS: usize = 10_000;
/// Most beat times kept per connection (later beats are only counted).
const MAX_BEAT_TIMES: usize = 10_000;

/// Failures of the probe machinery.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("failed to listen for probes on {path}: {source}")]
    Listen {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to find the harness's own executable (the probe runs it): {0}")]
    CurrentExe(#[source] std::io::Error),
}

/// `nomad-conform probe`: the protected process a lock client under test runs (hidden; the
/// harness writes its command line).
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// The harness's unix socket to report to.
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// The client this probe belongs to.
    #[arg(long, value_name = "LABEL")]
    pub label: String,
    /// Exit with this code after --run-for.
    #[arg(long, value_name = "N", requires = "run_for")]
    pub exit_code: Option<u8>,
    /// Exit by itself after this long (e.g. 1500ms, 2s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub run_for: Option<Duration>,
}

/// The body of `nomad-conform probe`: runs until a signal or `--run-for`, returns the exit code.
pub fn run(args: &ProbeArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nomad-conform probe: error: failed to start the async runtime: {e}");
            return 3;
        }
    };
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        // Registered first: from here on SIGTERM and SIGINT are reported, not fatal.
        let mut term = signal(SignalKind::terminate()).ok();
        let mut int = signal(SignalKind::interrupt()).ok();
        let stop = async move {
            tokio::select! {
                _ = recv(&mut term) => 143,
                _ = recv(&mut int) => 130,
            }
        };
        let exit_after = args
            .run_for
            .map(|d| (d, i32::from(args.exit_code.unwrap_or(0))));
        probe_loop(&args.socket, &args.label, exit_after, stop).await
    })
}

async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
    if let Some(s) = s.as_mut()
        && s.recv().await.is_some()
    {
        return;
    }
    std::future::pending().await
}

/// Reports to the harness; keeps running (with one warning) when the harness is gone.
struct Reporter {
    stream: Option<UnixStream>,
    socket: PathBuf,
}

impl Reporter {
    async fn connect(socket: &Path) -> Reporter {
        let stream =
            match tokio::time::timeout(Duration::from_secs(1), UnixStream::connect(socket)).await {
                Ok(Ok(s)) => Some(s),
                Ok(Err(e)) => {
                    warn(socket, &e.to_string());
                    None
                }
                Err(_) => {
                    warn(socket, "no answer within 1s");
                    None
                }
            };
        Reporter {
            stream,
            socket: socket.to_path_buf(),
        }
    }

    async fn send(&mut self, msg: serde_json::Value) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        let mut line = msg.to_string();
        line.push('\n');
        let write = tokio::time::timeout(
            Duration::from_millis(200),
            stream.write_all(line.as_bytes()),
        );
        let failed = match write.await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("the harness stopped reading".to_string()),
        };
        if let Some(why) = failed {
            warn(&self.socket, &why);
            self.stream = None;
        }
    }

    async fn close(&mut self) {
        if let Some(mut s) = self.stream.take() {
            let _ = tokio::time::timeout(Duration::from_millis(200), s.shutdown()).await;
        }
    }
}

fn warn(socket: &Path, why: &str) {
    eprintln!(
        "nomad-conform probe: warning: failed to report to the harness at {}: {why}; running without reporting",
        socket.display()
    );
}

/// What a probe does, with the stop signal as a future (so it can be tested in-process):
/// report start, beat until `stop` yields an exit code or `exit_after` (length, code) passes,
/// report the exit, return the code.
pub async fn probe_loop(
    socket: &Path,
    label: &str,
    exit_after: Option<(Duration, i32)>,
    stop: impl Future<Output = i32>,
) -> i32 {
    let mut reporter = Reporter::connect(socket).await;
    reporter
        .send(json!({"event": "start", "label": label, "pid": std::process::id()}))
        .await;
    let mut beat = tokio::time::interval(BEAT);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    beat.tick().await;
    let deadline = exit_after.map(|(d, _)| tokio::time::Instant::now() + d);
    let own_exit = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stop, own_exit);
    let code = loop {
        tokio::select! {
            code = &mut stop => break code,
            _ = &mut own_exit => break exit_after.map_or(0, |(_, c)| c),
            _ = beat.tick() => reporter.send(json!({"event": "beat"})).await,
        }
    };
    reporter.send(json!({"event": "exit", "code": code})).await;
    reporter.close().await;
    code
}

/// How to start a probe: the program and the arguments before `--socket`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl ProbeCommand {
    /// This very binary: `<current_exe> probe`.
    pub fn current_exe() -> Result<ProbeCommand, ProbeError> {
        Ok(ProbeCommand {
            program: std::env::current_exe().map_err(ProbeError::CurrentExe)?,
            args: vec!["probe".to_string()],
        })
    }

    /// Another `nomad-conform` binary (tests use the one cargo built).
    pub fn binary(program: impl Into<PathBuf>) -> ProbeCommand {
        ProbeCommand {
            program: program.into(),
            args: vec!["probe".to_string()],
        }
    }

    /// The full argv of a probe reporting to `socket` as `label`; with `exit_after` = (D, N)
    /// it exits by itself with N after D.
    pub fn argv(
        &self,
        socket: &Path,
        label: &str,
        exit_after: Option<(Duration, u8)>,
    ) -> Vec<String> {
        let mut argv = vec![self.program.display().to_string()];
        argv.extend(self.args.iter().cloned());
        argv.extend([
            "--socket".to_string(),
            socket.display().to_string(),
            "--label".to_string(),
            label.to_string(),
        ]);
        if let Some((d, code)) = exit_after {
            argv.extend([
                "--run-for".to_string(),
                format!("{}ms", d.as_millis()),
                "--exit-code".to_string(),
                code.to_string(),
            ]);
        }
        argv
    }

    /// [`ProbeCommand::argv`] as one shell-quoted command line.
    pub fn shell_line(
        &self,
        socket: &Path,
        label: &str,
        exit_after: Option<(Duration, u8)>,
    ) -> String {
        self.argv(socket, label, exit_after)
            .iter()
            .map(|a| crate::shell::quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Everything one probe connection told the listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeConnection {
    pub accepted: Instant,
    pub label: Option<String>,
    pub pid: Option<u32>,
    /// When the start message arrived.
    pub start: Option<Instant>,
    pub beats: u64,
    /// Arrival times of the first 10 000 beats.
    pub beat_times: Vec<Instant>,
    /// Longest silence between two messages while the connection was open.
    pub max_gap: Option<Duration>,
    last_message: Option<Instant>,
    pub exit: Option<i32>,
    pub exit_at: Option<Instant>,
    /// When the connection closed: the process is gone.
    pub closed: Option<Instant>,
    /// Lines that were not probe messages (or too long).
    pub bad_lines: u64,
}

impl ProbeConnection {
    fn new(accepted: Instant) -> ProbeConnection {
        ProbeConnection {
            accepted,
            label: None,
            pid: None,
            start: None,
            beats: 0,
            beat_times: Vec::new(),
            max_gap: None,
            last_message: None,
            exit: None,
            exit_at: None,
            closed: None,
            bad_lines: 0,
        }
    }

    fn message(&mut self, line: &[u8], at: Instant) {
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) else {
            self.bad_lines += 1;
            return;
        };
        if let Some(last) = self.last_message {
            let gap = at.saturating_duration_since(last);
            self.max_gap = Some(self.max_gap.map_or(gap, |g| g.max(gap)));
        }
        self.last_message = Some(at);
        match v.get("event").and_then(|e| e.as_str()) {
            Some("start") if self.start.is_none() => {
                self.start = Some(at);
                self.label = v.get("label").and_then(|l| l.as_str()).map(str::to_string);
                self.pid = v
                    .get("pid")
                    .and_then(|p| p.as_u64())
                    .and_then(|p| u32::try_from(p).ok());
            }
            Some("beat") => {
                self.beats += 1;
                if self.beat_times.len() < MAX_BEAT_TIMES {
                    self.beat_times.push(at);
                }
            }
            Some("exit") if self.exit.is_none() => {
                self.exit = v
                    .get("code")
                    .and_then(|c| c.as_i64())
                    .and_then(|c| i32::try_from(c).ok());
                self.exit_at = Some(at);
            }
            _ => self.bad_lines += 1,
        }
    }

    /// The interval, once the probe said who it is.
    pub fn interval(&self) -> Option<ProbeInterval> {
        Some(ProbeInterval {
            label: self.label.clone()?,
            pid: self.pid.unwrap_or(0),
            start: self.start?,
            end: self.closed,
            exit: self.exit,
            killed: self.closed.is_some() && self.exit.is_none(),
            beats: self.beats,
            max_gap: self.max_gap,
        })
    }
}

/// When one probe ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeInterval {
    pub label: String,
    pub pid: u32,
    pub start: Instant,
    /// When its connection closed (`None`: still running).
    pub end: Option<Instant>,
    /// The code it reported on its way out (`None`: it was killed, or is still running).
    pub exit: Option<i32>,
    /// It ended without reporting an exit (SIGKILL, a crash).
    pub killed: bool,
    pub beats: u64,
    /// Longest silence between its messages (a stopped process beats no more).
    pub max_gap: Option<Duration>,
}

impl ProbeInterval {
    /// Whether it was running at `at`.
    pub fn running_at(&self, at: Instant) -> bool {
        self.start <= at && self.end.is_none_or(|e| at < e)
    }
}

#[derive(Debug, Default)]
struct ListenerState {
    conns: Vec<ProbeConnection>,
    refused: u64,
}

/// Accepts probe connections on a unix socket and records them. Dropping it stops listening
/// and removes the socket file.
pub struct ProbeListener {
    path: PathBuf,
    state: Arc<Mutex<ListenerState>>,
    changed: watch::Sender<u64>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for ProbeListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeListener")
            .field("path", &self.path)
            .finish()
    }
}

fn lock(m: &Mutex<ListenerState>) -> MutexGuard<'_, ListenerState> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ProbeListener {
    /// Listens at `path` (keep it short: unix socket paths are limited to about 107 bytes); a
    /// stale socket file there is replaced.
    pub async fn bind(path: &Path) -> Result<ProbeListener, ProbeError> {
        let err = |source| ProbeError::Listen {
            path: path.to_path_buf(),
            source,
        };
        use std::os::unix::fs::FileTypeExt;
        if let Ok(m) = std::fs::symlink_metadata(path)
            && m.file_type().is_socket()
        {
            std::fs::remove_file(path).map_err(err)?;
        }
        let listener = UnixListener::bind(path).map_err(err)?;
        let state = Arc::new(Mutex::new(ListenerState::default()));
        let changed = watch::channel(0u64).0;
        let task = tokio::spawn(accept_loop(listener, state.clone(), changed.clone()));
        Ok(ProbeListener {
            path: path.to_path_buf(),
            state,
            changed,
            task,
        })
    }

    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// Every connection so far, in order of arrival.
    pub fn connections(&self) -> Vec<ProbeConnection> {
        lock(&self.state).conns.clone()
    }

    /// Connections not kept because too many came.
    pub fn refused(&self) -> u64 {
        lock(&self.state).refused
    }

    /// The interval of every probe that said who it is, by start time.
    pub fn intervals(&self) -> Vec<ProbeInterval> {
        let mut v: Vec<ProbeInterval> = lock(&self.state)
            .conns
            .iter()
            .filter_map(ProbeConnection::interval)
            .collect();
        v.sort_by_key(|i| i.start);
        v
    }

    /// Waits until `pred` holds for the intervals, at most `timeout`; the intervals then (or
    /// `None` on timeout).
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&[ProbeInterval]) -> bool,
    ) -> Option<Vec<ProbeInterval>> {
        let mut rx = self.changed.subscribe();
        let until = tokio::time::Instant::now() + timeout;
        loop {
            let now = self.intervals();
            if pred(&now) {
                return Some(now);
            }
            match tokio::time::timeout_at(until, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => {
                    let now = self.intervals();
                    return pred(&now).then_some(now);
                }
            }
        }
    }

    /// The first probe of `label` once it started.
    pub async fn wait_started(&self, label: &str, timeout: Duration) -> Option<ProbeInterval> {
        let found = self
            .wait_for(timeout, |v| v.iter().any(|i| i.label == label))
            .await?;
        found.into_iter().find(|i| i.label == label)
    }

    /// The first probe of `label` once it ended.
    pub async fn wait_ended(&self, label: &str, timeout: Duration) -> Option<ProbeInterval> {
        let found = self
            .wait_for(timeout, |v| {
                v.iter().any(|i| i.label == label && i.end.is_some())
            })
            .await?;
        found
            .into_iter()
            .find(|i| i.label == label && i.end.is_some())
    }
}

impl Drop for ProbeListener {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn accept_loop(
    listener: UnixListener,
    state: Arc<Mutex<ListenerState>>,
    changed: watch::Sender<u64>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            r = listener.accept() => {
                let Ok((stream, _)) = r else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let index = {
                    let mut st = lock(&state);
                    if st.conns.len() >= MAX_CONNECTIONS {
                        st.refused += 1;
                        continue;
                    }
                    st.conns.push(ProbeConnection::new(Instant::now()));
                    st.conns.len() - 1
                };
                conns.spawn(read_probe(stream, index, state.clone(), changed.clone()));
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn read_probe(
    mut stream: UnixStream,
    index: usize,
    state: Arc<Mutex<ListenerState>>,
    changed: watch::Sender<u64>,
) {
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 1024];
    let mut skipping = false;
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let at = Instant::now();
        let mut st = lock(&state);
        let Some(conn) = st.conns.get_mut(index) else {
            return;
        };
        for &b in &chunk[..n] {
            if b == b'\n' {
                if !skipping && !buf.is_empty() {
                    conn.message(&buf, at);
                }
                skipping = false;
                buf.clear();
            } else if !skipping {
                buf.push(b);
                if buf.len() > MAX_LINE {
                    conn.bad_lines += 1;
                    skipping = true;
                    buf.clear();
                }
            }
        }
        drop(st);
        changed.send_modify(|v| *v = v.wrapping_add(1));
    }
    if let Some(conn) = lock(&state).conns.get_mut(index) {
        conn.closed = Some(Instant::now());
    }
    changed.send_modify(|v| *v = v.wrapping_add(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("probe.sock")
    }

    #[tokio::test]
    async fn listener_records_start_beats_exit_and_end() {
        let dir = tempfile::tempdir().unwrap();
        let listener = ProbeListener::bind(&sock(&dir)).await.unwrap();
        let path = listener.socket_path().to_path_buf();
        let (tx, rx) = tokio::sync::oneshot::channel::<i32>();
        let probe = tokio::spawn(async move {
            probe_loop(&path, "a", None, async { rx.await.unwrap_or(1) }).await
        });
        let started = listener
            .wait_started("a", Duration::from_secs(5))
            .await
            .expect("started");
        assert_eq!(started.pid, std::process::id());
        assert!(started.end.is_none());
        tokio::time::sleep(Duration::from_millis(220)).await;
        tx.send(143).unwrap();
        assert_eq!(probe.await.unwrap(), 143);
        let ended = listener
            .wait_ended("a", Duration::from_secs(5))
            .await
            .expect("ended");
        assert_eq!(ended.exit, Some(143));
        assert!(!ended.killed);
        assert!(ended.beats >= 2, "{ended:?}");
        let lasted = ended.end.unwrap() - ended.start;
        assert!(lasted >= Duration::from_millis(200), "{lasted:?}");
    }

    #[tokio::test]
    async fn run_for_exits_with_the_given_code() {
        let dir = tempfile::tempdir().unwrap();
        let listener = ProbeListener::bind(&sock(&dir)).await.unwrap();
        let code = probe_loop(
            listener.socket_path(),
            "b",
            Some((Duration::from_millis(120), 7)),
            std::future::pending(),
        )
        .await;
        assert_eq!(code, 7);
        let i = listener
            .wait_ended("b", Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(i.exit, Some(7));
    }

    #[tokio::test]
    async fn a_connection_closed_without_exit_counts_as_killed() {
        let dir = tempfile::tempdir().unwrap();
        let listener = ProbeListener::bind(&sock(&dir)).await.unwrap();
        let mut s = UnixStream::connect(listener.socket_path()).await.unwrap();
        s.write_all(b"{\"event\":\"start\",\"label\":\"k\",\"pid\":42}\n{\"event\":\"beat\"}\n")
            .await
            .unwrap();
        // A garbage line and an overlong one are counted, not fatal.
        s.write_all(b"nonsense\n").await.unwrap();
        s.write_all(&vec![b'x'; MAX_LINE + 10]).await.unwrap();
        s.write_all(b"\n{\"event\":\"beat\"}\n").await.unwrap();
        listener
            .wait_for(Duration::from_secs(5), |v| v.iter().any(|i| i.beats == 2))
            .await
            .expect("two beats");
        drop(s);
        let i = listener
            .wait_ended("k", Duration::from_secs(5))
            .await
            .unwrap();
        assert!(i.killed);
        assert_eq!(i.exit, None);
        assert_eq!(i.pid, 42);
        assert_eq!(listener.connections()[0].bad_lines, 2);
    }

    #[tokio::test]
    async fn a_probe_without_harness_still_runs() {
        let dir = tempfile::tempdir().unwrap();
        let code = probe_loop(
            &dir.path().join("nobody.sock"),
            "x",
            Some((Duration::from_millis(60), 0)),
            std::future::pending(),
        )
        .await;
        assert_eq!(code, 0);
    }

    #[test]
    fn command_lines_are_quoted() {
        let cmd = ProbeCommand::binary("/opt/my bin/nomad-conform");
        let line = cmd.shell_line(
            Path::new("/tmp/p.sock"),
            "client 1",
            Some((Duration::from_millis(1500), 3)),
        );
        assert_eq!(
            line,
            "'/opt/my bin/nomad-conform' probe --socket /tmp/p.sock --label 'client 1' --run-for 1500ms --exit-code 3"
        );
    }

    #[test]
    fn probe_args_parse() {
        use clap::Parser;
        #[derive(Parser)]
        struct P {
            #[command(flatten)]
            a: ProbeArgs,
        }
        let p = P::try_parse_from([
            "p",
            "--socket",
            "/s",
            "--label",
            "l",
            "--run-for",
            "2s",
            "--exit-code",
            "4",
        ])
        .unwrap();
        assert_eq!(p.a.run_for, Some(Duration::from_secs(2)));
        assert_eq!(p.a.exit_code, Some(4));
        assert!(
            P::try_parse_from(["p", "--socket", "/s", "--label", "l", "--exit-code", "4"]).is_err()
        );
        assert!(
            P::try_parse_from([
                "p",
                "--socket",
                "/s",
                "--label",
                "l",
                "--run-for",
                "1s",
                "--exit-code",
                "300"
            ])
            .is_err()
        );
    }
}
