//! `Driver/ExecTaskStreaming`, as Nomad's client drives it (B.4): the first message carries
//! `setup`, later ones `tty_size` or `stdin{data}` / `stdin{close}`; the plugin answers with
//! stdout/stderr data, their close markers, and a final `{exited, result}` before EOF. The
//! messages sent are recorded with their times, the answers collected by a [`StreamHandle`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nomad_conform_reports::model::{OpEvent, Request};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::connect::Client;
use super::launch_spec::LaunchSpec;
use super::protocol::Service;
use super::protojson;
use super::reproduce::reproduce_script;
use super::streams::StreamHandle;
use nomad_conform_proto::nomad::drivers::{
    self, ExecTaskStreamingIoOperation, ExecTaskStreamingRequest, ExecTaskStreamingResponse,
    exec_task_streaming_request::{Setup, TerminalSize},
};

/// One exec session.
#[derive(Debug)]
pub struct ExecSession {
    /// The plugin's answers.
    pub stream: StreamHandle<ExecTaskStreamingResponse>,
    input: Mutex<Option<mpsc::UnboundedSender<ExecTaskStreamingRequest>>>,
    sent: Arc<Mutex<Vec<(Duration, Value)>>>,
}

/// The answers put together (from the kept messages: see `complete`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_closed: bool,
    pub stderr_closed: bool,
    /// The `result` of the message with `exited=true`, if one came.
    pub exited: Option<drivers::ExitResult>,
    /// Whether every message was kept (else the output has a gap).
    pub complete: bool,
}

impl Client {
    /// Start `Driver/ExecTaskStreaming` with `setup` as the first message; wait at most
    /// `first_within` for the first answer (zero: do not wait). Keeps at most `limit` answers.
    pub async fn exec_streaming(
        &self,
        setup: Setup,
        first_within: Duration,
        limit: usize,
    ) -> ExecSession {
        let (tx, rx) = mpsc::unbounded_channel::<ExecTaskStreamingRequest>();
        let first = ExecTaskStreamingRequest {
            setup: Some(setup),
            ..Default::default()
        };
        let sent = Arc::new(Mutex::new(vec![(
            Duration::ZERO,
            protojson::record(&first),
        )]));
        let _ = tx.send(first.clone());
        let outbound =
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
        let mut c = self.driver();
        let stream = StreamHandle::spawn(
            Service::Driver,
            "ExecTaskStreaming",
            protojson::record(&first),
            limit,
            async move { c.exec_task_streaming(outbound).await },
        );
        if !first_within.is_zero() {
            stream.wait_first(first_within).await;
        }
        ExecSession {
            stream,
            input: Mutex::new(Some(tx)),
            sent,
        }
    }
}

impl ExecSession {
    /// Send one more message; false once the input was ended or the stream is gone.
    pub fn send(&self, req: ExecTaskStreamingRequest) -> bool {
        let json = protojson::record(&req);
        let input = self.input.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = input.as_ref() else {
            return false;
        };
        let ok = tx.send(req).is_ok();
        if ok {
            self.sent
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((self.stream.opened.elapsed(), json));
        }
        ok
    }

    /// `stdin{data}`.
    pub fn stdin(&self, data: &[u8]) -> bool {
        self.send(ExecTaskStreamingRequest {
            stdin: Some(ExecTaskStreamingIoOperation {
                data: data.to_vec(),
                close: false,
            }),
            ..Default::default()
        })
    }

    /// `stdin{close=true}`.
    pub fn close_stdin(&self) -> bool {
        self.send(ExecTaskStreamingRequest {
            stdin: Some(ExecTaskStreamingIoOperation {
                data: Vec::new(),
                close: true,
            }),
            ..Default::default()
        })
    }

    /// `tty_size{height, width}`.
    pub fn resize(&self, height: i32, width: i32) -> bool {
        self.send(ExecTaskStreamingRequest {
            tty_size: Some(TerminalSize { height, width }),
            ..Default::default()
        })
    }

    /// End the request stream (half-close).
    pub fn end_input(&self) {
        self.input.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// The messages sent, with their times since the stream was opened.
    pub fn sent(&self) -> Vec<(Duration, Value)> {
        self.sent.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The answers put together.
    pub fn output(&self) -> ExecOutput {
        let messages = self.stream.messages();
        let mut out = ExecOutput {
            complete: messages.len() as u64 == self.stream.received(),
            ..Default::default()
        };
        for a in messages {
            let m = a.message;
            if let Some(op) = m.stdout {
                out.stdout.extend_from_slice(&op.data);
                out.stdout_closed |= op.close;
            }
            if let Some(op) = m.stderr {
                out.stderr.extend_from_slice(&op.data);
                out.stderr_closed |= op.close;
            }
            if m.exited {
                out.exited = Some(m.result.unwrap_or_default());
            }
        }
        out
    }

    /// The session as one [`OpEvent`]: the request lists every message sent, the response
    /// the answers (at most `max`) as [`StreamHandle::event`] does.
    pub fn event(&self, offset_ms: u64, launch: Option<&LaunchSpec>, max: usize) -> OpEvent {
        let sent = self.sent();
        let mut ev = self.stream.event(offset_ms, None, max);
        ev.request = Request::Grpc {
            method: Service::Driver.path("ExecTaskStreaming"),
            request: json!({"sent": sent.iter().map(|(at, m)| json!({"at_ms": at.as_millis() as u64, "message": m})).collect::<Vec<_>>()}),
        };
        ev.reproduce = launch.map(|l| {
            let messages: Vec<String> = sent
                .iter()
                .map(|(_, m)| protojson::protobuf_json(m).to_string())
                .collect();
            reproduce_script(
                l,
                Service::Driver,
                "ExecTaskStreaming",
                &messages.join("\n"),
            )
        });
        ev
    }
}
