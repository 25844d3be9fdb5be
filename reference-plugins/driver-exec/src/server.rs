//! One tonic server with every service, on the listener the handshake announced, until the
//! host asks it to shut down.
//!
//! Like go-plugin's server, it keeps serving when the host's connection closes: after an agent
//! restart Nomad reattaches to the running plugin (the exit-on-disconnect fault breaks that).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nomad_conform_proto::goplugin::grpc_broker_server::GrpcBrokerServer;
use nomad_conform_proto::goplugin::grpc_controller_server::GrpcControllerServer;
use nomad_conform_proto::goplugin::grpc_stdio_server::GrpcStdioServer;
use nomad_conform_proto::grpc::health::v1::health_server::HealthServer;
use nomad_conform_proto::nomad::base::base_plugin_server::BasePluginServer;
use nomad_conform_proto::nomad::drivers::driver_server::DriverServer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tokio_stream::{Stream, StreamExt as _};
use tonic::transport::Server;
use tonic::transport::server::{Connected, Router};

use crate::base::BaseService;
use crate::driver::DriverService;
use crate::faults::Fault;
use crate::goplugin::{BrokerService, ControllerService, HealthService, StdioService};
use crate::launch::Listener;
use crate::log;
use crate::plugin::Plugin;
use crate::variants::Variant;

/// Time for the Shutdown answer to reach the host before the process exits.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(100);

/// Serves until GRPCController/Shutdown.
pub async fn serve(plugin: Arc<Plugin>, listener: Listener) -> anyhow::Result<()> {
    let router = routes(&plugin);
    let exit_on_disconnect = plugin.faults.has(Fault::ExitOnDisconnect);
    let served = async {
        match listener {
            Listener::Unix(listener, _) => {
                serve_on(
                    router,
                    UnixListenerStream::new(listener),
                    exit_on_disconnect,
                )
                .await
            }
            Listener::Tcp(listener, _) => {
                serve_on(router, TcpListenerStream::new(listener), exit_on_disconnect).await
            }
        }
    };
    tokio::select! {
        result = served => Ok(result?),
        () = plugin.shutdown.notified() => {
            // Go's grpc.Server.Stop closes every connection at once, open streams included;
            // exiting does the same.
            tokio::time::sleep(SHUTDOWN_GRACE).await;
            Ok(())
        }
    }
}

fn routes(plugin: &Arc<Plugin>) -> Router {
    let optional = !plugin.variants.has(Variant::NoStdioBroker);
    Server::builder()
        .add_service(HealthServer::new(HealthService))
        .add_service(GrpcControllerServer::new(ControllerService::new(
            Arc::clone(plugin),
        )))
        .add_optional_service(optional.then(|| GrpcBrokerServer::new(BrokerService)))
        .add_optional_service(optional.then(|| GrpcStdioServer::new(StdioService)))
        .add_service(BasePluginServer::new(BaseService::new(Arc::clone(plugin))))
        .add_service(DriverServer::new(DriverService::new(Arc::clone(plugin))))
}

async fn serve_on<S, IO>(
    router: Router,
    incoming: S,
    exit_on_disconnect: bool,
) -> Result<(), tonic::transport::Error>
where
    S: Stream<Item = std::io::Result<IO>> + Send + 'static,
    IO: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
{
    if exit_on_disconnect {
        let open = Arc::new(AtomicUsize::new(0));
        let tracked = incoming.map(move |conn| {
            conn.map(|io| {
                open.fetch_add(1, Ordering::SeqCst);
                tracked::Tracked {
                    inner: io,
                    open: Arc::clone(&open),
                }
            })
        });
        router.serve_with_incoming(tracked).await
    } else {
        router.serve_with_incoming(incoming).await
    }
}

/// The exit-on-disconnect fault: a connection that exits the process when the last one
/// closes.
mod tracked {
    use std::io;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tonic::transport::server::Connected;

    use crate::log;

    pub struct Tracked<IO> {
        pub inner: IO,
        pub open: Arc<AtomicUsize>,
    }

    impl<IO> Drop for Tracked<IO> {
        fn drop(&mut self) {
            if self.open.fetch_sub(1, Ordering::SeqCst) == 1 {
                log::info(
                    "the client's connection closed: exiting (exit-on-disconnect fault)",
                    &[],
                );
                std::process::exit(0);
            }
        }
    }

    impl<IO: Connected> Connected for Tracked<IO> {
        type ConnectInfo = IO::ConnectInfo;

        fn connect_info(&self) -> Self::ConnectInfo {
            self.inner.connect_info()
        }
    }

    impl<IO: AsyncRead + Unpin> AsyncRead for Tracked<IO> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_read(cx, buf)
        }
    }

    impl<IO: AsyncWrite + Unpin> AsyncWrite for Tracked<IO> {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.inner).poll_write(cx, data)
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }
}

/// Logs where the plugin serves.
pub fn log_start(plugin: &Plugin, handshake: &str) {
    log::info(
        "plugin serving",
        &[
            ("handshake", handshake.to_string()),
            ("faults", plugin.faults.to_string()),
            ("variants", plugin.variants.to_string()),
            ("state_dir", plugin.state_dir.display().to_string()),
        ],
    );
}
