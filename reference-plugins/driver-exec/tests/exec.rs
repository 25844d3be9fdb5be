//! ExecTask and ExecTaskStreaming inside a running task, with and without a tty (the cases
//! of Nomad's ExecTaskStreamingConformanceTests that matter for a driver without isolation).

mod support;

use std::time::{Duration, Instant};

use nomad_conform_proto::nomad::drivers::exec_task_streaming_request::{Setup, TerminalSize};
use nomad_conform_proto::nomad::drivers::{
    ExecTaskRequest, ExecTaskStreamingIoOperation, ExecTaskStreamingRequest,
    ExecTaskStreamingResponse,
};
use support::*;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Streaming};

/// A running task to exec into.
async fn running_task() -> (support::Setup, String) {
    let mut setup = support::Setup::new(&[]).await;
    let task = setup.scratch.task("shell", &["sleep", "60"]);
    setup.clients.start(&task).await;
    (setup, task.id())
}

struct Session {
    requests: mpsc::Sender<ExecTaskStreamingRequest>,
    responses: Streaming<ExecTaskStreamingResponse>,
}

#[derive(Debug, Default)]
struct Outcome {
    stdout: String,
    stderr: String,
    exit_code: Option<i32>,
    /// Whether stdout/stderr close came before `exited`, and `exited` was last.
    closed_before_exit: bool,
    /// Time from the start to the first stdout data.
    first_stdout_after: Option<Duration>,
}

async fn exec(clients: &mut Clients, task_id: &str, script: &str, tty: bool) -> Session {
    let (requests, receiver) = mpsc::channel(16);
    requests
        .send(ExecTaskStreamingRequest {
            setup: Some(Setup {
                task_id: task_id.to_string(),
                command: vec!["/bin/sh".into(), "-c".into(), script.into()],
                tty,
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let responses = clients
        .driver
        .exec_task_streaming(ReceiverStream::new(receiver))
        .await
        .expect("ExecTaskStreaming")
        .into_inner();
    Session {
        requests,
        responses,
    }
}

impl Session {
    async fn stdin(&self, data: &[u8], close: bool) {
        self.requests
            .send(ExecTaskStreamingRequest {
                stdin: Some(ExecTaskStreamingIoOperation {
                    data: data.to_vec(),
                    close,
                }),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    async fn resize(&self, height: i32, width: i32) {
        self.requests
            .send(ExecTaskStreamingRequest {
                tty_size: Some(TerminalSize { height, width }),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    /// Reads the stream to its end.
    async fn finish(mut self) -> Outcome {
        let started = Instant::now();
        let mut outcome = Outcome::default();
        let (mut stdout_closed, mut stderr_closed) = (false, false);
        let mut after_exit = 0;
        while let Some(message) = within(15, "the exec stream", self.responses.message())
            .await
            .expect("stream")
        {
            if outcome.exit_code.is_some() {
                after_exit += 1;
            }
            if let Some(stdout) = message.stdout {
                if !stdout.data.is_empty() && outcome.first_stdout_after.is_none() {
                    outcome.first_stdout_after = Some(started.elapsed());
                }
                outcome
                    .stdout
                    .push_str(&String::from_utf8_lossy(&stdout.data));
                stdout_closed |= stdout.close;
            }
            if let Some(stderr) = message.stderr {
                outcome
                    .stderr
                    .push_str(&String::from_utf8_lossy(&stderr.data));
                stderr_closed |= stderr.close;
            }
            if message.exited {
                outcome.exit_code = Some(message.result.expect("a result").exit_code);
                outcome.closed_before_exit = stdout_closed && stderr_closed;
            }
        }
        assert_eq!(after_exit, 0, "messages after `exited`");
        drop(self.requests);
        outcome
    }
}

#[tokio::test]
async fn exec_task_runs_in_the_task_directory_and_environment() {
    let (mut setup, id) = running_task().await;
    let response = within(
        10,
        "ExecTask",
        setup.driver().exec_task(ExecTaskRequest {
            task_id: id.clone(),
            command: vec![
                "/bin/sh".into(),
                "-c".into(),
                "pwd; echo \"$NOMAD_TASK_NAME\"; echo oops >&2; exit 4".into(),
            ],
            timeout: Some(duration(5.0)),
        }),
    )
    .await
    .expect("ExecTask")
    .into_inner();
    let task_dir = setup
        .scratch
        .path()
        .join("00000000-aaaa-bbbb-cccc-dddddddddddd/shell");
    assert_eq!(
        String::from_utf8_lossy(&response.stdout),
        format!("{}\nshell\n", task_dir.display())
    );
    assert_eq!(String::from_utf8_lossy(&response.stderr), "oops\n");
    assert_eq!(response.result.expect("result").exit_code, 4);

    let started = Instant::now();
    let timed_out = setup
        .driver()
        .exec_task(ExecTaskRequest {
            task_id: id,
            command: vec!["sleep".into(), "5".into()],
            timeout: Some(duration(0.3)),
        })
        .await
        .expect_err("a command past its timeout");
    assert_eq!(timed_out.code(), Code::DeadlineExceeded);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn streaming_without_tty_separates_stdout_and_stderr() {
    let (mut setup, id) = running_task().await;
    let script = "echo hello stdout; echo hello stderr >&2; exit 43";
    let outcome = exec(&mut setup.clients, &id, script, false)
        .await
        .finish()
        .await;
    assert_eq!(outcome.stdout, "hello stdout\n");
    assert_eq!(outcome.stderr, "hello stderr\n");
    assert_eq!(outcome.exit_code, Some(43));
    assert!(outcome.closed_before_exit, "{outcome:?}");

    let outcome = exec(&mut setup.clients, &id, "stty size", false)
        .await
        .finish()
        .await;
    assert!(
        outcome.stderr.contains("Inappropriate ioctl for device"),
        "{outcome:?}"
    );
    assert_eq!(outcome.exit_code, Some(1));
}

#[tokio::test]
async fn streaming_sends_output_as_it_comes() {
    let (mut setup, id) = running_task().await;
    let script = "for n in 1 2 3; do echo $n; sleep 0.6; done";
    let outcome = exec(&mut setup.clients, &id, script, false)
        .await
        .finish()
        .await;
    assert_eq!(outcome.stdout, "1\n2\n3\n");
    let first = outcome.first_stdout_after.expect("stdout data");
    assert!(
        first < Duration::from_millis(800),
        "first output after {first:?}"
    );
}

#[tokio::test]
async fn streaming_stdin_data_and_close_reach_the_command() {
    let (mut setup, id) = running_task().await;
    let session = exec(
        &mut setup.clients,
        &id,
        "echo hello from command; cat",
        false,
    )
    .await;
    session.stdin(b"hello from stdin\n", false).await;
    session.stdin(b"", true).await;
    let outcome = session.finish().await;
    assert_eq!(outcome.stdout, "hello from command\nhello from stdin\n");
    assert_eq!(outcome.exit_code, Some(0));
}

#[tokio::test]
async fn streaming_with_tty_merges_output_into_the_terminal() {
    let (mut setup, id) = running_task().await;
    let script = "echo hello stdout; echo hello stderr >&2; exit 43";
    let outcome = exec(&mut setup.clients, &id, script, true)
        .await
        .finish()
        .await;
    assert_eq!(outcome.stdout, "hello stdout\r\nhello stderr\r\n");
    assert_eq!(outcome.stderr, "");
    assert_eq!(outcome.exit_code, Some(43));
}

#[tokio::test]
async fn streaming_with_tty_applies_the_last_resize() {
    let (mut setup, id) = running_task().await;
    let session = exec(&mut setup.clients, &id, "sleep 1; stty size", true).await;
    session.resize(50, 40).await;
    session.resize(100, 100).await;
    let outcome = session.finish().await;
    assert_eq!(outcome.stdout, "100 100\r\n");
    assert_eq!(outcome.exit_code, Some(0));
}

#[tokio::test]
async fn streaming_with_tty_echoes_stdin() {
    let (mut setup, id) = running_task().await;
    let session = exec(&mut setup.clients, &id, "head -n1", true).await;
    session.stdin(b"hello from stdin\n", false).await;
    let outcome = session.finish().await;
    assert_eq!(outcome.stdout, "hello from stdin\r\nhello from stdin\r\n");
    assert_eq!(outcome.exit_code, Some(0));
}

#[tokio::test]
async fn streaming_ends_when_the_main_process_exits_not_its_children() {
    let (mut setup, id) = running_task().await;
    let script = "(( sleep 3; echo from background ) & ); echo from main; exec sleep 1";
    let started = Instant::now();
    let outcome = exec(&mut setup.clients, &id, script, true)
        .await
        .finish()
        .await;
    let took = started.elapsed();
    assert_eq!(outcome.stdout, "from main\r\n");
    assert_eq!(outcome.exit_code, Some(0));
    assert!(
        took < Duration::from_millis(2500),
        "the stream ended after {took:?}"
    );
}

#[tokio::test]
async fn streaming_needs_setup_first() {
    let (mut setup, _id) = running_task().await;
    let first = ExecTaskStreamingRequest {
        tty_size: Some(TerminalSize {
            height: 1,
            width: 1,
        }),
        ..Default::default()
    };
    let status = setup
        .driver()
        .exec_task_streaming(tokio_stream::iter(vec![first]))
        .await
        .expect_err("a first message without setup");
    assert!(status.message().contains("setup"), "{}", status.message());
}
