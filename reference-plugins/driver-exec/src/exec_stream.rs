//! ExecTaskStreaming: an interactive command in a task's context (`nomad alloc exec`).
//!
//! The protocol (contracts/task-drivers.md B.4, C.1):
//! - the first client message carries `setup` (task id, argv, tty); anything else first is an
//!   error;
//! - later client messages carry `tty_size` (applied to the pty), `stdin{data}`, or
//!   `stdin{close}` (end of input); a message with none of them is a heartbeat;
//! - the plugin sends `stdout{data}` and `stderr{data}` as output appears (with a tty, stderr
//!   is the terminal too, so everything comes as stdout), then `stdout{close}` and
//!   `stderr{close}`, then `{exited, result}`, and ends the stream.
//!
//! The stream ends when the command's main process exits. Background processes it left
//! behind may hold its output open; the plugin sends what is already there (it reads until
//! nothing more comes for [`DRAIN_IDLE`]) and does not wait for them.

use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use nomad_conform_proto::nomad::drivers::{
    ExecTaskStreamingIoOperation, ExecTaskStreamingRequest, ExecTaskStreamingResponse,
};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::{mpsc, watch};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::exec;
use crate::faults::{Fault, Faults};
use crate::plugin::Plugin;
use crate::process;
use crate::pty::{self, PtyMaster};
use crate::rpc;
use crate::tasks::Task;

/// After the main process exited, output is read until none comes for this long.
const DRAIN_IDLE: Duration = Duration::from_millis(100);
/// End-of-transmission: what "end of input" is on a terminal (Ctrl-D).
const EOT: u8 = 0x04;

pub type ExecStream = Pin<Box<dyn Stream<Item = Result<ExecTaskStreamingResponse, Status>> + Send>>;
type Sender = mpsc::Sender<Result<ExecTaskStreamingResponse, Status>>;
type Reader = Box<dyn AsyncRead + Unpin + Send>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

pub async fn start(
    plugin: Arc<Plugin>,
    mut requests: Streaming<ExecTaskStreamingRequest>,
) -> Result<ExecStream, Status> {
    exec::check_enabled(&plugin)?;
    let first = requests
        .message()
        .await?
        .ok_or_else(|| rpc::bad_request("the stream ended before its setup message"))?;
    let setup = first
        .setup
        .clone()
        .ok_or_else(|| rpc::bad_request("first message should always be setup"))?;
    let task = plugin.task(&setup.task_id)?;
    let tty = setup.tty && !plugin.faults.has(Fault::ExecStreamNoPty);
    let mut session = Session::spawn(&plugin, &task, &setup.command, tty)?;
    // Whatever else the first message carries counts too.
    session.input.apply(first).await;

    let (sender, receiver) = mpsc::channel(16);
    tokio::spawn(run(session, requests, sender, plugin.faults.clone()));
    Ok(Box::pin(ReceiverStream::new(receiver)))
}

/// A running command and its ends of the pipes or pty.
struct Session {
    child: tokio::process::Child,
    /// Leader of the command's process group.
    pid: i32,
    stdout: Reader,
    /// None with a tty: stderr is the terminal.
    stderr: Option<Reader>,
    input: Input,
}

/// Where client messages go.
struct Input {
    stdin: Option<Writer>,
    pty: Option<PtyMaster>,
    faults: Faults,
}

impl Session {
    fn spawn(plugin: &Plugin, task: &Task, argv: &[String], tty: bool) -> Result<Session, Status> {
        let faults = &plugin.faults;
        let mut command = exec::task_command(plugin, task, argv)?;
        let failed =
            |err: std::io::Error| rpc::failed(format!("failed to run {:?}: {err}", argv[0]));
        if tty {
            let pty::Pty { master, terminal } = pty::open().map_err(failed)?;
            let stdio = || terminal.try_clone().map(Stdio::from).map_err(failed);
            command.stdin(stdio()?).stdout(stdio()?).stderr(stdio()?);
            if faults.has(Fault::ExecStreamWaitsChildren) {
                // The fault: a session of its own but no controlling terminal, so the kernel
                // does not hang up the command's orphans when it exits, and they keep the
                // terminal open for as long as they live.
                // SAFETY: only setsid, async-signal-safe, runs in the forked child.
                unsafe { command.pre_exec(|| nix::unistd::setsid().map(drop).map_err(Into::into)) };
            } else {
                // SAFETY: only async-signal-safe calls (setsid, ioctl) run in the forked child.
                unsafe { command.pre_exec(pty::become_session_leader_of_terminal) };
            }
            let child = command.spawn().map_err(failed)?;
            // Our copies of the terminal side go now, so that the output ends (EIO) once the
            // command's processes have closed it.
            drop(command);
            drop(terminal);
            Ok(Session {
                pid: child.id().unwrap_or_default() as i32,
                child,
                stdout: Box::new(master.clone()),
                stderr: None,
                input: Input {
                    stdin: Some(Box::new(master.clone())),
                    pty: Some(master),
                    faults: faults.clone(),
                },
            })
        } else {
            command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0);
            let mut child = command.spawn().map_err(failed)?;
            let stdin = child.stdin.take().map(|w| Box::new(w) as Writer);
            let stdout = Box::new(child.stdout.take().expect("piped")) as Reader;
            let stderr = Box::new(child.stderr.take().expect("piped")) as Reader;
            Ok(Session {
                pid: child.id().unwrap_or_default() as i32,
                child,
                stdout,
                stderr: Some(stderr),
                input: Input {
                    stdin,
                    pty: None,
                    faults: faults.clone(),
                },
            })
        }
    }
}

async fn run(
    session: Session,
    mut requests: Streaming<ExecTaskStreamingRequest>,
    sender: Sender,
    faults: Faults,
) {
    let Session {
        mut child,
        pid,
        stdout,
        stderr,
        mut input,
    } = session;
    let (exited, exited_seen) = watch::channel(false);
    let output = Output {
        sender: sender.clone(),
        exited: exited_seen,
        buffered: faults.has(Fault::ExecStreamBuffers),
        until_end: faults.has(Fault::ExecStreamWaitsChildren),
    };
    let stdout_pump = tokio::spawn(output.clone().pump(stdout, Channel::Stdout, false));
    let stderr_pump = stderr.map(|reader| {
        let discard = faults.has(Fault::ExecStreamNoStderr);
        tokio::spawn(output.clone().pump(reader, Channel::Stderr, discard))
    });
    let forward_input = tokio::spawn(async move {
        loop {
            match requests.message().await {
                Ok(Some(message)) => input.apply(message).await,
                // The client sent its last message: without a terminal that ends the input
                // too (a terminal stays as it is: the user may just have nothing to type).
                Ok(None) => {
                    if input.pty.is_none() {
                        input.end_input().await;
                    }
                    break;
                }
                Err(_) => break,
            }
        }
    });

    let status = tokio::select! {
        status = child.wait() => status,
        () = sender.closed() => {
            // The client went away: nobody will see the output.
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            forward_input.abort();
            let _ = child.wait().await;
            return;
        }
    };
    let _ = exited.send(true);
    let stdout_data = stdout_pump.await.unwrap_or_default();
    let stderr_data = match stderr_pump {
        Some(pump) => pump.await.unwrap_or_default(),
        None => Vec::new(),
    };
    forward_input.abort();

    let mut result = match status {
        Ok(status) => process::exit_result(status),
        Err(_) => process::exit_result(std::process::ExitStatus::default()),
    };
    if faults.has(Fault::ExecStreamNoExitCode) {
        result.exit_code = 0;
    }
    let mut last = Vec::new();
    if !stdout_data.is_empty() {
        last.push(Channel::Stdout.message(data(stdout_data)));
    }
    if !stderr_data.is_empty() {
        last.push(Channel::Stderr.message(data(stderr_data)));
    }
    last.push(Channel::Stdout.message(close()));
    last.push(Channel::Stderr.message(close()));
    last.push(ExecTaskStreamingResponse {
        exited: true,
        result: Some(result),
        ..Default::default()
    });
    for message in last {
        if sender.send(Ok(message)).await.is_err() {
            return;
        }
    }
    // Dropping the sender ends the stream.
}

impl Input {
    async fn apply(&mut self, message: ExecTaskStreamingRequest) {
        if let Some(size) = message.tty_size
            && let Some(pty) = &self.pty
            && !self.faults.has(Fault::ExecStreamIgnoresResize)
        {
            let rows = u16::try_from(size.height).unwrap_or(0);
            let columns = u16::try_from(size.width).unwrap_or(0);
            let _ = pty.resize(rows, columns);
        }
        if let Some(stdin) = message.stdin {
            if !stdin.data.is_empty()
                && let Some(writer) = &mut self.stdin
            {
                // A command that stopped reading is no reason to end the session.
                let _ = writer.write_all(&stdin.data).await;
                let _ = writer.flush().await;
            }
            if stdin.close {
                self.end_input().await;
            }
        }
        // A repeated setup, or an empty heartbeat: nothing to do.
    }

    /// End of input: a pipe is closed; a terminal stays open (it is also the output) and gets
    /// Ctrl-D, which ends a line-reading command's input as typing it would.
    async fn end_input(&mut self) {
        if self.faults.has(Fault::ExecStreamIgnoresStdinClose) {
            return;
        }
        if self.pty.is_none() {
            self.stdin = None;
        } else if let Some(writer) = &mut self.stdin {
            let _ = writer.write_all(&[EOT]).await;
        }
    }
}

#[derive(Clone, Copy)]
enum Channel {
    Stdout,
    Stderr,
}

impl Channel {
    fn message(self, operation: ExecTaskStreamingIoOperation) -> ExecTaskStreamingResponse {
        match self {
            Channel::Stdout => ExecTaskStreamingResponse {
                stdout: Some(operation),
                ..Default::default()
            },
            Channel::Stderr => ExecTaskStreamingResponse {
                stderr: Some(operation),
                ..Default::default()
            },
        }
    }
}

fn data(data: Vec<u8>) -> ExecTaskStreamingIoOperation {
    ExecTaskStreamingIoOperation { data, close: false }
}

fn close() -> ExecTaskStreamingIoOperation {
    ExecTaskStreamingIoOperation {
        data: Vec::new(),
        close: true,
    }
}

/// Copies one output of the command to the client.
#[derive(Clone)]
struct Output {
    sender: Sender,
    exited: watch::Receiver<bool>,
    /// The exec-stream-buffers fault: keep everything and return it at the end.
    buffered: bool,
    /// The exec-stream-waits-children fault: read to the very end, however long it takes.
    until_end: bool,
}

impl Output {
    /// Reads `reader` until its end or, once the main process has exited, until it is idle
    /// for [`DRAIN_IDLE`]; returns what it kept (only when buffered).
    async fn pump(mut self, mut reader: Reader, channel: Channel, discard: bool) -> Vec<u8> {
        let mut buffer = vec![0u8; 8192];
        let mut kept = Vec::new();
        let mut draining = false;
        loop {
            let read = if draining && !self.until_end {
                match tokio::time::timeout(DRAIN_IDLE, reader.read(&mut buffer)).await {
                    Ok(read) => read,
                    Err(_idle) => break,
                }
            } else if draining {
                reader.read(&mut buffer).await
            } else {
                tokio::select! {
                    read = reader.read(&mut buffer) => read,
                    _ = self.exited.changed() => {
                        draining = true;
                        continue;
                    }
                }
            };
            let n = match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if discard {
                continue;
            }
            if self.buffered {
                kept.extend_from_slice(&buffer[..n]);
            } else if self
                .sender
                .send(Ok(channel.message(data(buffer[..n].to_vec()))))
                .await
                .is_err()
            {
                break;
            }
        }
        kept
    }
}
