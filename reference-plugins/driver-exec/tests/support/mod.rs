//! Test support: the plugin as a real child process launched the way Nomad's go-plugin host
//! launches it, tonic clients on the socket it announces, allocation directories with real
//! FIFOs, and guards that leave nothing running.
//!
//! Cleanup: the plugin runs in a process group of its own, killed on drop. Tasks run in
//! sessions of their own (that is the point), so the scratch directory's guard kills every
//! process whose environment carries this scratch's marker or whose working directory lies
//! inside it.

#![allow(dead_code)] // Each test binary uses a different part of this module.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use nomad_conform_proto::goplugin::grpc_broker_client::GrpcBrokerClient;
use nomad_conform_proto::goplugin::grpc_controller_client::GrpcControllerClient;
use nomad_conform_proto::goplugin::grpc_stdio_client::GrpcStdioClient;
use nomad_conform_proto::grpc::health::v1::health_client::HealthClient;
use nomad_conform_proto::nomad::base::base_plugin_client::BasePluginClient;
use nomad_conform_proto::nomad::drivers::driver_client::DriverClient;
use nomad_conform_proto::nomad::drivers::{
    ExitResult, StartTaskRequest, TaskConfig, TaskHandle, WaitTaskRequest,
};
use rmpv::Value;
use tonic::transport::{Channel, Endpoint};

pub const COOKIE_KEY: &str = "NOMAD_PLUGIN_MAGIC_COOKIE";
pub const COOKIE_VALUE: &str = "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255";
/// Marks the processes of one scratch directory's tasks.
pub const MARKER_VAR: &str = "DRIVER_EXEC_TEST";
/// Go's zero time, as `completed_at` of a running task.
pub const GO_ZERO_SECONDS: i64 = -62_135_596_800;

const BINARY: &str = env!("CARGO_BIN_EXE_driver-exec");
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Fails the test if `future` takes longer than `seconds`.
pub async fn within<T>(seconds: u64, what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(seconds), future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {seconds} s"))
}

/// A short scratch directory under /tmp (socket paths must stay under 108 bytes).
pub struct Scratch {
    dir: tempfile::TempDir,
    tasks: AtomicUsize,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("dx")
            .tempdir_in("/tmp")
            .expect("scratch dir");
        Scratch {
            dir,
            tasks: AtomicUsize::new(0),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }

    pub fn marker(&self) -> String {
        self.path().display().to_string()
    }

    /// Builds an allocation directory for a task named `name` running `argv`, with FIFOs for
    /// its output (cty-style config: every attribute, nil where unset).
    pub fn task(&self, name: &str, argv: &[&str]) -> TaskFixture {
        let (command, args) = argv.split_first().expect("a command");
        let args = Value::Array(args.iter().map(|a| Value::from(*a)).collect());
        self.task_with_config(
            name,
            cty_config(&[("args", args), ("command", (*command).into())]),
        )
    }

    /// Like [`Scratch::task`] with any driver config bytes.
    pub fn task_with_config(&self, name: &str, driver_config: Vec<u8>) -> TaskFixture {
        let n = self.tasks.fetch_add(1, Ordering::SeqCst);
        let alloc_id = format!("0000000{n}-aaaa-bbbb-cccc-dddddddddddd");
        let alloc_dir = self.path().join(&alloc_id);
        let task_dir = alloc_dir.join(name);
        for dir in [
            alloc_dir.join("alloc/logs"),
            alloc_dir.join("alloc/data"),
            task_dir.join("local"),
            task_dir.join("secrets"),
        ] {
            std::fs::create_dir_all(dir).expect("alloc dir");
        }
        let stdout = alloc_dir.join(format!("alloc/logs/.{name}.stdout.fifo"));
        let stderr = alloc_dir.join(format!("alloc/logs/.{name}.stderr.fifo"));
        for fifo in [&stdout, &stderr] {
            nix::unistd::mkfifo(fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
                .expect("mkfifo");
        }
        let env = HashMap::from([
            (
                "PATH".to_string(),
                "/usr/local/bin:/usr/bin:/bin".to_string(),
            ),
            (MARKER_VAR.to_string(), self.marker()),
            (
                "NOMAD_TASK_DIR".to_string(),
                task_dir.join("local").display().to_string(),
            ),
            (
                "NOMAD_ALLOC_DIR".to_string(),
                alloc_dir.join("alloc").display().to_string(),
            ),
            ("NOMAD_TASK_NAME".to_string(), name.to_string()),
        ]);
        let config = TaskConfig {
            id: format!("{alloc_id}/{name}/{:08x}", 0x1234_0000 + n),
            name: name.to_string(),
            msgpack_driver_config: driver_config,
            env,
            alloc_dir: alloc_dir.display().to_string(),
            stdout_path: stdout.display().to_string(),
            stderr_path: stderr.display().to_string(),
            task_group_name: "group".to_string(),
            job_name: "job".to_string(),
            job_id: "job".to_string(),
            alloc_id,
            namespace: "default".to_string(),
            node_name: "node".to_string(),
            node_id: "node-id".to_string(),
            ..Default::default()
        };
        TaskFixture {
            config,
            stdout: FifoReader::open(&stdout),
            stderr: FifoReader::open(&stderr),
            task_dir,
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        kill_processes_of(self.path(), &self.marker());
    }
}

/// SIGKILLs every process whose environment has `MARKER_VAR=<marker>` or whose working
/// directory is under `dir`, until none is left.
pub fn kill_processes_of(dir: &Path, marker: &str) {
    let me = std::process::id() as i32;
    for _ in 0..20 {
        let found = processes_of(dir, marker);
        let found: Vec<i32> = found.into_iter().filter(|pid| *pid != me).collect();
        if found.is_empty() {
            return;
        }
        for pid in found {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Live processes (not zombies) that belong to a scratch directory.
pub fn processes_of(dir: &Path, marker: &str) -> Vec<i32> {
    let entry = format!("{MARKER_VAR}={marker}");
    live_pids()
        .into_iter()
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let marked = env.split(|b| *b == 0).any(|e| e == entry.as_bytes());
            let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
            marked || cwd.starts_with(dir)
        })
        .collect()
}

/// Every pid whose process is not a zombie.
pub fn live_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| stat_field(*pid, 3).is_some_and(|state| state != "Z" && state != "X"))
        .collect()
}

/// Field `n` (1-based, as in proc(5)) of /proc/<pid>/stat, from field 3 on.
pub fn stat_field(pid: i32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, tail) = stat.rsplit_once(')')?;
    tail.split_whitespace().nth(n - 3).map(str::to_string)
}

/// Live processes whose session id is `sid` or whose process group is `pgid`.
pub fn processes_in_session_or_group(sid: i32, pgid: i32) -> Vec<i32> {
    live_pids()
        .into_iter()
        .filter(|pid| {
            stat_field(*pid, 6).is_some_and(|s| s == sid.to_string())
                || stat_field(*pid, 5).is_some_and(|g| g == pgid.to_string())
        })
        .collect()
}

pub fn is_alive(pid: i32) -> bool {
    stat_field(pid, 3).is_some_and(|state| state != "Z" && state != "X")
}

/// Polls `condition` every 20 ms for up to `seconds`.
pub fn eventually(seconds: u64, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A msgpack map as go-cty writes it: the pairs as given (callers list every attribute,
/// sorted, nil where unset).
pub fn cty_config(pairs: &[(&str, Value)]) -> Vec<u8> {
    msgpack_map(pairs)
}

pub fn msgpack_map(pairs: &[(&str, Value)]) -> Vec<u8> {
    let map = Value::Map(
        pairs
            .iter()
            .map(|(k, v)| (Value::from(*k), v.clone()))
            .collect(),
    );
    let mut bytes = Vec::new();
    rmpv::encode::write_value(&mut bytes, &map).expect("encodes");
    bytes
}

/// A task's allocation directory and the readers of its log FIFOs.
pub struct TaskFixture {
    pub config: TaskConfig,
    pub stdout: FifoReader,
    pub stderr: FifoReader,
    pub task_dir: PathBuf,
}

impl TaskFixture {
    pub fn id(&self) -> String {
        self.config.id.clone()
    }

    pub fn start_request(&self) -> StartTaskRequest {
        StartTaskRequest {
            task: Some(self.config.clone()),
        }
    }
}

/// Reads a FIFO in a thread, as logmon does: opens it (which waits for the writer), then
/// collects everything until every writer closed it. Lines are also passed on as they come.
pub struct FifoReader {
    done: mpsc::Receiver<Vec<u8>>,
    lines: mpsc::Receiver<String>,
}

impl FifoReader {
    pub fn open(path: &Path) -> FifoReader {
        let path = path.to_path_buf();
        let (done_tx, done) = mpsc::channel();
        let (lines_tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let Ok(file) = File::open(&path) else {
                return;
            };
            let mut reader = BufReader::new(file);
            let mut all = Vec::new();
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        all.extend_from_slice(&line);
                        let _ = lines_tx.send(String::from_utf8_lossy(&line).into_owned());
                    }
                }
            }
            let _ = done_tx.send(all);
        });
        FifoReader { done, lines }
    }

    /// Everything written, once the writers closed the FIFO.
    pub fn all(&self, seconds: u64) -> String {
        let bytes = self
            .done
            .recv_timeout(Duration::from_secs(seconds))
            .unwrap_or_else(|_| panic!("the FIFO was not closed within {seconds} s"));
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The next line.
    pub fn line(&self, seconds: u64) -> String {
        self.try_line(seconds)
            .unwrap_or_else(|| panic!("no line on the FIFO within {seconds} s"))
    }

    /// The next line, if one comes within `seconds`.
    pub fn try_line(&self, seconds: u64) -> Option<String> {
        self.lines.recv_timeout(Duration::from_secs(seconds)).ok()
    }
}

/// The plugin process, launched as Nomad's go-plugin host launches it.
pub struct PluginProcess {
    child: Child,
    pub handshake: String,
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_ended: Arc<std::sync::atomic::AtomicBool>,
    stdout_rest: Arc<Mutex<Vec<String>>>,
}

/// How to launch a plugin.
pub struct LaunchOptions {
    pub args: Vec<String>,
    pub cookie: bool,
    pub env: Vec<(String, String)>,
}

impl LaunchOptions {
    pub fn new(args: &[&str]) -> LaunchOptions {
        LaunchOptions {
            args: args.iter().map(|a| a.to_string()).collect(),
            cookie: true,
            env: Vec::new(),
        }
    }
}

impl PluginProcess {
    /// Launches with the cookie and the given arguments, waits for the handshake line.
    pub fn launch(scratch: &Scratch, args: &[&str]) -> PluginProcess {
        PluginProcess::launch_with(scratch, LaunchOptions::new(args))
    }

    pub fn launch_with(scratch: &Scratch, options: LaunchOptions) -> PluginProcess {
        let mut child = PluginProcess::spawn(scratch, options);
        let stdout = child.stdout.take().expect("stdout piped");
        let (first_line, handshake) = mpsc::channel();
        let stdout_rest = Arc::new(Mutex::new(Vec::new()));
        let rest = Arc::clone(&stdout_rest);
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = first_line.send(line);
            }
            // Keep draining, as the host does.
            for line in lines.map_while(Result::ok) {
                rest.lock().unwrap().push(line);
            }
        });
        let (stderr, stderr_ended) = collect_lines(child.stderr.take().expect("stderr piped"));
        let handshake = handshake
            .recv_timeout(HANDSHAKE_TIMEOUT)
            .unwrap_or_else(|_| {
                let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
                panic!(
                    "no handshake within {HANDSHAKE_TIMEOUT:?}; stderr: {:?}",
                    stderr.lock().unwrap()
                )
            });
        PluginProcess {
            child,
            handshake: handshake.trim().to_string(),
            stderr,
            stderr_ended,
            stdout_rest,
        }
    }

    /// Starts the binary without waiting for anything.
    pub fn spawn(scratch: &Scratch, options: LaunchOptions) -> Child {
        let mut command = Command::new(BINARY);
        command
            .arg("--state-dir")
            .arg(scratch.state_dir())
            .args(&options.args)
            .env("PLUGIN_PROTOCOL_VERSIONS", "2")
            .env("PLUGIN_MIN_PORT", "10000")
            .env("PLUGIN_MAX_PORT", "25000")
            .env("PLUGIN_UNIX_SOCKET_DIR", scratch.path())
            .env_remove(COOKIE_KEY)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if options.cookie {
            command.env(COOKIE_KEY, COOKIE_VALUE);
        }
        for (key, value) in &options.env {
            command.env(key, value);
        }
        command.spawn().expect("the plugin binary starts")
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The handshake's fields.
    pub fn fields(&self) -> Vec<String> {
        self.handshake.split('|').map(str::to_string).collect()
    }

    /// The announced address (field 4).
    pub fn address(&self) -> String {
        self.fields().get(3).cloned().unwrap_or_default()
    }

    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Every stderr line, once the stream has ended (the plugin and its children exited),
    /// waiting up to `seconds` for that end.
    pub fn stderr_to_end(&self, seconds: u64) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        while !self.stderr_ended.load(std::sync::atomic::Ordering::SeqCst)
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stderr_lines()
    }

    pub fn stdout_after_handshake(&self) -> Vec<String> {
        self.stdout_rest.lock().unwrap().clone()
    }

    /// Connects tonic clients the way go-plugin does (unix: target "unused", custom dialer).
    pub async fn connect(&self) -> Clients {
        let fields = self.fields();
        let channel = match fields.get(2).map(String::as_str) {
            Some("tcp") => Endpoint::from_shared(format!("http://{}", self.address()))
                .expect("endpoint")
                .connect()
                .await
                .expect("connects over tcp"),
            _ => dial_unix(PathBuf::from(self.address()))
                .await
                .expect("connects to the announced socket"),
        };
        Clients::new(channel)
    }

    /// The exit status, if the process has exited within `seconds`.
    pub fn wait_exit(&mut self, seconds: u64) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL to the plugin's whole process group, as the harness does at a deadline.
    pub fn kill_group(&mut self) {
        let _ = killpg(Pid::from_raw(self.pid()), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        self.kill_group();
    }
}

type Lines = Arc<Mutex<Vec<String>>>;

/// Collects a stream's lines on a thread; the flag turns true at end of stream.
fn collect_lines(
    stream: impl std::io::Read + Send + 'static,
) -> (Lines, Arc<std::sync::atomic::AtomicBool>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sink = Arc::clone(&lines);
    let flag = Arc::clone(&ended);
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    (lines, ended)
}

/// Everything a child wrote to stderr, once it has exited.
pub fn read_all(mut stream: impl std::io::Read) -> String {
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text
}

pub async fn dial_unix(socket: PathBuf) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_static("http://unused")
        .connect_with_connector(tower::service_fn(move |_: http::Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
}

/// Every client a go-plugin host uses, on one connection.
#[derive(Clone)]
pub struct Clients {
    pub driver: DriverClient<Channel>,
    pub base: BasePluginClient<Channel>,
    pub health: HealthClient<Channel>,
    pub controller: GrpcControllerClient<Channel>,
    pub broker: GrpcBrokerClient<Channel>,
    pub stdio: GrpcStdioClient<Channel>,
}

impl Clients {
    pub fn new(channel: Channel) -> Clients {
        Clients {
            driver: DriverClient::new(channel.clone()),
            base: BasePluginClient::new(channel.clone()),
            health: HealthClient::new(channel.clone()),
            controller: GrpcControllerClient::new(channel.clone()),
            broker: GrpcBrokerClient::new(channel.clone()),
            stdio: GrpcStdioClient::new(channel),
        }
    }

    /// Starts a task; panics with the status if the plugin refuses.
    pub async fn start(&mut self, task: &TaskFixture) -> TaskHandle {
        let response = self
            .driver
            .start_task(task.start_request())
            .await
            .unwrap_or_else(|status| panic!("StartTask failed: {status:?}"));
        response.into_inner().handle.expect("a handle")
    }

    /// WaitTask, bounded.
    pub async fn wait(&mut self, id: &str, seconds: u64) -> ExitResult {
        let response = within(
            seconds,
            "WaitTask",
            self.driver.wait_task(WaitTaskRequest {
                task_id: id.to_string(),
            }),
        )
        .await
        .unwrap_or_else(|status| panic!("WaitTask failed: {status:?}"))
        .into_inner();
        assert_eq!(response.err, "", "WaitTask reported an error");
        response.result.expect("an exit result")
    }
}

/// A plugin with clients, and the scratch directory it works in.
pub struct Setup {
    pub plugin: PluginProcess,
    pub clients: Clients,
    pub scratch: Scratch,
}

impl Setup {
    pub async fn new(args: &[&str]) -> Setup {
        let scratch = Scratch::new();
        let plugin = PluginProcess::launch(&scratch, args);
        let clients = plugin.connect().await;
        Setup {
            plugin,
            clients,
            scratch,
        }
    }

    pub fn driver(&mut self) -> &mut DriverClient<Channel> {
        &mut self.clients.driver
    }
}

/// `google.rpc.Status`, to read `grpc-status-details-bin`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<prost_types::Any>,
}

pub fn duration(seconds: f64) -> prost_types::Duration {
    prost_types::Duration::try_from(Duration::from_secs_f64(seconds)).expect("duration")
}

/// The `recoverable` flag of a StartTask error's RecoverableError detail; None without one.
pub fn recoverable_detail(status: &tonic::Status) -> Option<bool> {
    use prost::Message as _;
    let details = RpcStatus::decode(status.details()).ok()?;
    let detail = details.details.first()?;
    let error =
        nomad_conform_proto::nomad::structs::RecoverableError::decode(detail.value.as_slice())
            .ok()?;
    Some(error.recoverable)
}

/// The task's pid, from the handle's driver_state.
pub fn task_pid(handle: &TaskHandle) -> i32 {
    let state = rmpv::decode::read_value(&mut handle.driver_state.as_slice()).expect("msgpack");
    let pid = state
        .as_map()
        .expect("a map")
        .iter()
        .find(|(k, _)| k.as_str() == Some("task_pid"))
        .and_then(|(_, v)| v.as_i64())
        .expect("task_pid");
    pid as i32
}

/// Live processes whose environment has `NAME=value`.
pub fn processes_with_env(name: &str, value: &str) -> Vec<i32> {
    let entry = format!("{name}={value}");
    live_pids()
        .into_iter()
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            env.split(|b| *b == 0).any(|e| e == entry.as_bytes())
        })
        .collect()
}

/// The environment of a process, as `NAME=value` entries.
pub fn environ(pid: i32) -> Vec<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    env.split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect()
}

/// Builds a small root filesystem in `task_dir`, standing in for the chroot the client builds
/// from its chroot_env (it links or copies host files; the harness binds them; copies here
/// need no mounts to undo): the host's `programs` at `usr/bin` with `bin -> usr/bin`, the
/// shared libraries `ldd` names at the same paths, and `secrets/` and `tmp/`.
pub fn minimal_chroot(task_dir: &Path, programs: &[&str]) {
    let copy = |host: &Path| {
        let inside = task_dir.join(host.strip_prefix("/").expect("an absolute path"));
        std::fs::create_dir_all(inside.parent().expect("a parent")).expect("mkdir");
        // fs::copy follows symlinks (sh -> dash) and keeps the mode.
        std::fs::copy(host, &inside)
            .unwrap_or_else(|err| panic!("copying {}: {err}", host.display()));
    };
    for program in programs {
        let host = Path::new("/usr/bin").join(program);
        copy(&host);
        let output = Command::new("ldd").arg(&host).output().expect("ldd runs");
        for word in String::from_utf8_lossy(&output.stdout).split_whitespace() {
            if word.starts_with('/') {
                copy(Path::new(word));
            }
        }
    }
    if std::fs::symlink_metadata(task_dir.join("bin")).is_err() {
        std::os::unix::fs::symlink("usr/bin", task_dir.join("bin")).expect("bin symlink");
    }
    for dir in ["secrets", "tmp"] {
        std::fs::create_dir_all(task_dir.join(dir)).expect("mkdir");
    }
}

/// Mount points (as this process's mount namespace sees them) under `dir`.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .filter_map(|line| line.split(' ').nth(4).map(str::to_string))
        .filter(|point| Path::new(point).starts_with(dir))
        .collect()
}

/// A cgroup of its own for a test task, removed on drop: a real one when this process may
/// make one (root, with cgroup v2, hybrid v2 or the v1 pids hierarchy), else a plain
/// directory with an empty `cgroup.procs`, which the driver writes to all the same.
pub struct TestCgroup {
    pub path: PathBuf,
    /// The path `/proc/<pid>/cgroup` shows for members of a real cgroup.
    pub relative: Option<String>,
    _fake: Option<tempfile::TempDir>,
}

impl TestCgroup {
    pub fn new() -> TestCgroup {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "driver-exec-test-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::SeqCst)
        );
        let root = Path::new("/sys/fs/cgroup");
        let hierarchies = [
            (root.to_path_buf(), "cgroup.controllers"),
            (root.join("unified"), "cgroup.controllers"),
            (root.join("pids"), "tasks"),
        ];
        for (hierarchy, marker) in hierarchies {
            if !hierarchy.join(marker).exists() {
                continue;
            }
            let path = hierarchy.join(&name);
            if std::fs::create_dir(&path).is_ok() {
                return TestCgroup {
                    path,
                    relative: Some(format!("/{name}")),
                    _fake: None,
                };
            }
        }
        let fake = tempfile::tempdir().expect("a fake cgroup");
        std::fs::write(fake.path().join("cgroup.procs"), b"").expect("cgroup.procs");
        TestCgroup {
            path: fake.path().to_path_buf(),
            relative: None,
            _fake: Some(fake),
        }
    }

    /// Whether `pid` is in this cgroup; None when it is not a real one.
    pub fn holds(&self, pid: i32) -> Option<bool> {
        let relative = self.relative.as_ref()?;
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        Some(
            cgroups
                .lines()
                .any(|line| line.rsplit(':').next() == Some(relative.as_str())),
        )
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        if self.relative.is_none() {
            return;
        }
        // Its processes are being killed: rmdir succeeds once they are gone.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// ExecTask of `/bin/sh -c script`: (stdout, stderr, exit code); panics if the call fails.
pub async fn exec_script(
    clients: &mut Clients,
    task_id: &str,
    script: &str,
) -> (String, String, i32) {
    use nomad_conform_proto::nomad::drivers::ExecTaskRequest;
    let response = clients
        .driver
        .exec_task(ExecTaskRequest {
            task_id: task_id.to_string(),
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            timeout: Some(duration(10.0)),
        })
        .await
        .unwrap_or_else(|status| panic!("ExecTask failed: {status:?}"))
        .into_inner();
    (
        String::from_utf8_lossy(&response.stdout).into_owned(),
        String::from_utf8_lossy(&response.stderr).into_owned(),
        response.result.expect("a result").exit_code,
    )
}

/// ExecTaskStreaming of `/bin/sh -c script` without input: (stdout, exit code).
pub async fn exec_stream_script(
    clients: &mut Clients,
    task_id: &str,
    script: &str,
    tty: bool,
) -> (String, i32) {
    use nomad_conform_proto::nomad::drivers::ExecTaskStreamingRequest;
    use nomad_conform_proto::nomad::drivers::exec_task_streaming_request::Setup as ExecSetup;
    let first = ExecTaskStreamingRequest {
        setup: Some(ExecSetup {
            task_id: task_id.to_string(),
            command: vec!["/bin/sh".into(), "-c".into(), script.into()],
            tty,
        }),
        ..Default::default()
    };
    // The client keeps its side open, as `nomad alloc exec` does while the command runs.
    let (_keep, rest) = tokio::sync::mpsc::channel::<ExecTaskStreamingRequest>(1);
    let requests = tokio_stream::StreamExt::chain(
        tokio_stream::iter(vec![first]),
        tokio_stream::wrappers::ReceiverStream::new(rest),
    );
    let mut responses = clients
        .driver
        .exec_task_streaming(requests)
        .await
        .unwrap_or_else(|status| panic!("ExecTaskStreaming failed: {status:?}"))
        .into_inner();
    let mut stdout = Vec::new();
    let mut exit_code = None;
    while let Some(message) = within(10, "the exec stream", responses.message())
        .await
        .expect("the stream")
    {
        if let Some(out) = message.stdout {
            stdout.extend(out.data);
        }
        if message.exited {
            exit_code = message.result.map(|r| r.exit_code);
        }
    }
    (
        String::from_utf8_lossy(&stdout).into_owned(),
        exit_code.expect("an exit result"),
    )
}
