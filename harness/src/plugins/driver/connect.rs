//! Connecting to a plugin as go-plugin's gRPC host does (A.5): plaintext HTTP/2 (no AutoMTLS)
//! over the announced unix socket or TCP address, dialled by a custom dialer with the target
//! `unused` (so `:authority` is `unused`), message sizes up to `math.MaxInt32`; then the
//! broker stream and one stdio stream, whose failures do not fail the connection.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper_util::rt::TokioIo;
use nomad_conform_proto::goplugin::{ConnInfo, grpc_controller_client::GrpcControllerClient};
use nomad_conform_proto::grpc::health::v1::health_client::HealthClient;
use nomad_conform_proto::nomad::base::base_plugin_client::BasePluginClient;
use nomad_conform_proto::nomad::drivers::driver_client::DriverClient;
use nomad_conform_reports::model::Excerpt;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tonic::transport::{Channel, Endpoint, Uri};

use super::closable::Closer;
use super::handshake::{Handshake, PluginAddress};
use super::side_streams::{self, SideStream, StdioCapture};
use crate::process::Capture;

/// The largest message either side may send (Go's `math.MaxInt32`).
const MAX_MESSAGE: usize = i32::MAX as usize;
/// Bytes kept of each GRPCStdio channel.
const STDIO_LIMIT: usize = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("failed to connect: the handshake gives no address to dial ({why})")]
    NoAddress { why: String },
    #[error("failed to connect to {address}: no connection within {}", crate::fmt_duration(*timeout))]
    Timeout {
        address: PluginAddress,
        timeout: Duration,
    },
    #[error("failed to connect to {address}: {message}")]
    Dial {
        address: PluginAddress,
        message: String,
    },
}

/// What is known about one connection.
#[derive(Clone, Debug, Serialize)]
pub struct ConnectionFacts {
    pub address: PluginAddress,
    /// The `:authority` of every request (`unused`, as go-plugin's host sends).
    pub authority: &'static str,
    /// How long the dial took.
    pub connected_after: Duration,
}

/// An open connection to a plugin; cheap to clone (all clones share the connection).
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    channel: Channel,
    closer: Arc<Closer>,
    facts: ConnectionFacts,
    opened: Instant,
    broker: watch::Receiver<SideStream>,
    stdio: watch::Receiver<SideStream>,
    stdio_out: Arc<Mutex<StdioCapture>>,
    broker_tx: Mutex<Option<mpsc::Sender<ConnInfo>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Dial the handshake's address within `timeout`, then open the broker and stdio streams.
pub async fn connect(handshake: &Handshake, timeout: Duration) -> Result<Client, ConnectError> {
    let Some(address) = handshake.address.clone() else {
        let why = if handshake.violations.is_empty() {
            "no address".to_owned()
        } else {
            let v: Vec<String> = handshake.violations.iter().map(|v| v.to_string()).collect();
            v.join("; ")
        };
        return Err(ConnectError::NoAddress { why });
    };
    let closer = Closer::new();
    let dial_closer = closer.clone();
    let dial_address = address.clone();
    let connector = tower::service_fn(move |_: Uri| {
        let address = dial_address.clone();
        let closer = dial_closer.clone();
        async move {
            if closer.is_closed() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the harness closed this connection",
                ));
            }
            let io: Box<dyn Io> = match &address {
                PluginAddress::Unix(path) => Box::new(UnixStream::connect(path).await?),
                PluginAddress::Tcp(sa) => Box::new(TcpStream::connect(sa).await?),
            };
            Ok::<_, std::io::Error>(TokioIo::new(closer.wrap(io)))
        }
    });
    let started = Instant::now();
    let endpoint = Endpoint::from_static("http://unused");
    let channel =
        match tokio::time::timeout(timeout, endpoint.connect_with_connector(connector)).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => {
                return Err(ConnectError::Dial {
                    address,
                    message: error_chain(&e),
                });
            }
            Err(_) => return Err(ConnectError::Timeout { address, timeout }),
        };
    let facts = ConnectionFacts {
        address,
        authority: "unused",
        connected_after: started.elapsed(),
    };
    let stdio_out = Arc::new(Mutex::new(StdioCapture {
        stdout: Capture::new(STDIO_LIMIT),
        stderr: Capture::new(STDIO_LIMIT),
        invalid: 0,
    }));
    let (broker_tx, broker, broker_task) = side_streams::start_broker(channel.clone());
    let (stdio, stdio_task) = side_streams::start_stdio(channel.clone(), stdio_out.clone());
    Ok(Client {
        inner: Arc::new(Inner {
            channel,
            closer,
            facts,
            opened: Instant::now(),
            broker,
            stdio,
            stdio_out,
            broker_tx: Mutex::new(Some(broker_tx)),
            tasks: Mutex::new(vec![broker_task, stdio_task]),
        }),
    })
}

/// An error with its causes, `a: b: c`.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = cause.source();
    }
    s
}

impl Client {
    /// The underlying channel (every stub below is built on a clone of it).
    pub fn channel(&self) -> Channel {
        self.inner.channel.clone()
    }

    /// `BasePlugin` (PluginInfo, ConfigSchema, SetConfig).
    pub fn base(&self) -> BasePluginClient<Channel> {
        BasePluginClient::new(self.channel())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// `Driver`.
    pub fn driver(&self) -> DriverClient<Channel> {
        DriverClient::new(self.channel())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// go-plugin's `GRPCController` (Shutdown).
    pub fn controller(&self) -> GrpcControllerClient<Channel> {
        GrpcControllerClient::new(self.channel())
    }

    /// `grpc.health.v1.Health` (go-plugin's Ping; Nomad's driver loader never pings).
    pub fn health(&self) -> HealthClient<Channel> {
        HealthClient::new(self.channel())
    }

    pub fn facts(&self) -> &ConnectionFacts {
        &self.inner.facts
    }

    /// When the connection was made.
    pub fn opened(&self) -> Instant {
        self.inner.opened
    }

    /// What became of `GRPCBroker/StartStream` so far.
    pub fn broker_stream(&self) -> SideStream {
        self.inner.broker.borrow().clone()
    }

    /// What became of `GRPCStdio/StreamStdio` so far.
    pub fn stdio_stream(&self) -> SideStream {
        self.inner.stdio.borrow().clone()
    }

    /// Wait at most `within` for the plugin to answer both side streams; their states then.
    pub async fn wait_side_streams(&self, within: Duration) -> (SideStream, SideStream) {
        let mut broker = self.inner.broker.clone();
        let mut stdio = self.inner.stdio.clone();
        let _ = tokio::time::timeout(within, async {
            let _ = broker.wait_for(SideStream::answered).await;
            let _ = stdio.wait_for(SideStream::answered).await;
        })
        .await;
        (self.broker_stream(), self.stdio_stream())
    }

    /// What the plugin sent over GRPCStdio: (stdout, stderr), each cut to `max` bytes.
    pub fn stdio_output(&self, max: usize) -> (Excerpt, Excerpt) {
        let c = self
            .inner
            .stdio_out
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        (c.stdout.excerpt(max), c.stderr.excerpt(max))
    }

    /// Close the connection without any RPC (what an agent that dies does; go-plugin's
    /// `Close` does this after `GRPCController/Shutdown`): the broker stream is ended, every
    /// socket of the channel closed, and calls on any clone fail from now on.
    pub fn close(&self) {
        self.inner.close();
    }

    pub fn is_closed(&self) -> bool {
        self.inner.closer.is_closed()
    }
}

impl Inner {
    fn close(&self) {
        self.broker_tx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            t.abort();
        }
        self.closer.close();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.close();
    }
}
