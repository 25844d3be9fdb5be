//! The two streams a go-plugin host opens on every new connection (A.5): `GRPCBroker/
//! StartStream`, kept open and otherwise unused by Nomad, and `GRPCStdio/StreamStdio`, whose
//! data (the plugin's stdout and stderr after the handshake) is drained into a capture. A Go
//! host ignores a broker failure and tolerates UNIMPLEMENTED (go-plugin before 1.3, or a
//! non-Go plugin) and UNAVAILABLE for stdio; here each outcome is only recorded.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use nomad_conform_proto::goplugin::{
    ConnInfo, grpc_broker_client::GrpcBrokerClient, grpc_stdio_client::GrpcStdioClient,
};
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::process::Capture;

/// What became of a side stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SideStream {
    /// Asked for, no answer yet (a Go server answers a stream when it first sends on it).
    Pending,
    /// The plugin answered: the stream is open; `messages` received so far.
    Open { after_ms: u64, messages: u64 },
    /// The plugin ended the stream with OK.
    Ended { messages: u64 },
    /// The plugin refused or ended it with a status (UNIMPLEMENTED when it lacks the service).
    Failed { code: String, message: String },
}

impl SideStream {
    /// Whether the plugin has answered (anything but [`SideStream::Pending`]).
    pub fn answered(&self) -> bool {
        !matches!(self, SideStream::Pending)
    }

    /// The status code of a failed stream.
    pub fn code(&self) -> Option<&str> {
        match self {
            SideStream::Failed { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether a Go host carries on normally after this (for stdio: anything but a failure
    /// other than UNIMPLEMENTED or UNAVAILABLE; the broker's failures are always ignored).
    pub fn tolerated_for_stdio(&self) -> bool {
        !matches!(self, SideStream::Failed { code, .. } if code != "UNIMPLEMENTED" && code != "UNAVAILABLE")
    }
}

/// What came over GRPCStdio.
#[derive(Debug)]
pub struct StdioCapture {
    pub stdout: Capture,
    pub stderr: Capture,
    /// Messages whose channel was neither STDOUT nor STDERR.
    pub invalid: u64,
}

fn failed(status: &tonic::Status) -> SideStream {
    SideStream::Failed {
        code: crate::plugins::grpc::code_name(status.code()).into(),
        message: status.message().into(),
    }
}

fn open(since: Instant, messages: u64) -> SideStream {
    SideStream::Open {
        after_ms: since.elapsed().as_millis() as u64,
        messages,
    }
}

/// Open the broker stream; the returned sender keeps our half open until dropped.
pub(crate) fn start_broker(
    channel: Channel,
) -> (
    mpsc::Sender<ConnInfo>,
    watch::Receiver<SideStream>,
    JoinHandle<()>,
) {
    let (tx, rx) = mpsc::channel::<ConnInfo>(1);
    let (state_tx, state_rx) = watch::channel(SideStream::Pending);
    let outbound =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let task = tokio::spawn(async move {
        let since = Instant::now();
        let mut client = GrpcBrokerClient::new(channel);
        let mut stream = match client.start_stream(outbound).await {
            Ok(resp) => resp.into_inner(),
            Err(st) => {
                let _ = state_tx.send(failed(&st));
                return;
            }
        };
        let mut messages = 0;
        let _ = state_tx.send(open(since, messages));
        loop {
            match stream.message().await {
                Ok(Some(_)) => {
                    messages += 1;
                    let _ = state_tx.send(open(since, messages));
                }
                Ok(None) => {
                    let _ = state_tx.send(SideStream::Ended { messages });
                    return;
                }
                Err(st) => {
                    let _ = state_tx.send(failed(&st));
                    return;
                }
            }
        }
    });
    (tx, state_rx, task)
}

/// Call StreamStdio once and drain it into `into`.
pub(crate) fn start_stdio(
    channel: Channel,
    into: Arc<Mutex<StdioCapture>>,
) -> (watch::Receiver<SideStream>, JoinHandle<()>) {
    let (state_tx, state_rx) = watch::channel(SideStream::Pending);
    let task = tokio::spawn(async move {
        let since = Instant::now();
        let mut client = GrpcStdioClient::new(channel).max_decoding_message_size(i32::MAX as usize);
        let mut stream = match client.stream_stdio(()).await {
            Ok(resp) => resp.into_inner(),
            Err(st) => {
                let _ = state_tx.send(failed(&st));
                return;
            }
        };
        let mut messages = 0;
        let _ = state_tx.send(open(since, messages));
        loop {
            match stream.message().await {
                Ok(Some(data)) => {
                    messages += 1;
                    {
                        let mut c = into.lock().unwrap_or_else(|p| p.into_inner());
                        match data.channel {
                            1 => c.stdout.push(&data.data),
                            2 => c.stderr.push(&data.data),
                            _ => c.invalid += 1,
                        }
                    }
                    let _ = state_tx.send(open(since, messages));
                }
                Ok(None) => {
                    let _ = state_tx.send(SideStream::Ended { messages });
                    return;
                }
                Err(st) => {
                    let _ = state_tx.send(failed(&st));
                    return;
                }
            }
        }
    });
    (state_rx, task)
}
