//! csi-hostpath: the reference CSI plugin of nomad-conform.
//!
//! A monolith plugin (Identity, Controller, GroupController and Node on one unix socket) whose
//! volumes are directories on this host, or for the block access type image files attached to
//! loop devices. It is meant to be read: each service is one module, every rule of the CSI
//! spec it follows is implemented in one visible place, `--fault NAME` switches break one
//! rule at a time so the conformance suite can prove its checks fail, and `--variant NAME`
//! switches take another path the spec allows, so the suite can prove it still passes.
//!
//! Modules: `identity`, `controller`, `group_controller` and `node` are the four gRPC
//! services; `state` is the persisted memory (state.json); `storage` the volume and snapshot
//! directories and images; `mounts` the bind mounts; `loop_device` the loop devices of block
//! volumes; `locks` the per-volume serialisation; `rpc` shared request/answer helpers;
//! `faults` the fault switches; `variants` the variant switches; `page_tokens` the listings'
//! page tokens; `plugin` what the services share.
//!
//! This file: the command line, and serving gRPC on the socket until SIGTERM or SIGINT.

mod controller;
mod faults;
mod group_controller;
mod identity;
mod locks;
mod loop_device;
mod mounts;
mod node;
mod page_tokens;
mod plugin;
mod rpc;
mod state;
mod storage;
mod variants;

use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use nomad_conform_proto::csi::v1::controller_server::ControllerServer;
use nomad_conform_proto::csi::v1::group_controller_server::GroupControllerServer;
use nomad_conform_proto::csi::v1::identity_server::IdentityServer;
use nomad_conform_proto::csi::v1::node_server::NodeServer;
use tokio::net::UnixListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Server;

use crate::controller::ControllerService;
use crate::faults::{Fault, Faults};
use crate::group_controller::GroupControllerService;
use crate::identity::IdentityService;
use crate::node::NodeService;
use crate::plugin::{Config, PLUGIN_NAME, Plugin};
use crate::variants::{Variant, Variants};

/// How long calls in flight may take to finish after SIGTERM. Nomad's default kill_timeout
/// is 5 s, after which it sends SIGKILL.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Longest unix socket path the kernel accepts (sun_path is 108 bytes with the final NUL).
const MAX_SOCKET_PATH: usize = 107;

/// Reference CSI plugin: host directories (and image files as block devices) as volumes.
#[derive(Debug, Parser)]
#[command(name = "csi-hostpath", version, after_long_help = switches_help())]
struct Cli {
    /// Where to serve gRPC: unix:///absolute/path (Nomad passes it as CSI_ENDPOINT)
    #[arg(long, env = "CSI_ENDPOINT", value_name = "unix:///PATH", value_parser = parse_endpoint)]
    endpoint: PathBuf,

    /// This node's id: reported by NodeGetInfo, the only node ControllerPublishVolume accepts
    #[arg(long, value_name = "ID", value_parser = parse_node_id)]
    node_id: String,

    /// Directory for state.json, volumes/ and snapshots/ (created if missing)
    #[arg(long, value_name = "DIR")]
    state_dir: PathBuf,

    /// Most volumes ControllerPublishVolume attaches to the node; 0 means no limit
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    max_volumes_per_node: i64,

    /// Break one CSI rule on purpose (repeatable); see the list below
    #[arg(long = "fault", value_name = "NAME", value_parser = parse_fault)]
    faults: Vec<Fault>,

    /// Behave in another way CSI allows (repeatable); see the list below
    #[arg(long = "variant", value_name = "NAME", value_parser = parse_variant)]
    variants: Vec<Variant>,

    /// Make sure a 1 GiB mount volume with this id (and name) exists at start-up, as if a
    /// controller instance had created it (repeatable; for node-only runs)
    #[arg(long = "preset-volume", value_name = "NAME", value_parser = parse_preset_volume)]
    preset_volumes: Vec<String>,
}

/// The fault and variant lists for `--help`.
fn switches_help() -> String {
    format!("{}\n{}", faults::help_text(), variants::help_text())
}

fn parse_endpoint(endpoint: &str) -> Result<PathBuf, String> {
    let path = endpoint
        .strip_prefix("unix://")
        .ok_or_else(|| format!("{endpoint:?} is not a unix:///PATH endpoint"))?;
    if !path.starts_with('/') {
        return Err(format!(
            "{endpoint:?} must name an absolute path (unix:///PATH)"
        ));
    }
    if path.len() > MAX_SOCKET_PATH {
        return Err(format!(
            "socket path is {} bytes, longer than the {MAX_SOCKET_PATH} a unix socket allows",
            path.len()
        ));
    }
    Ok(PathBuf::from(path))
}

fn parse_node_id(id: &str) -> Result<String, String> {
    if id.is_empty() {
        return Err("the node id must not be empty".into());
    }
    if id.len() > 256 {
        return Err(format!(
            "the node id is {} bytes; CSI allows at most 256",
            id.len()
        ));
    }
    Ok(id.to_string())
}

fn parse_fault(name: &str) -> Result<Fault, String> {
    name.parse()
}

fn parse_variant(name: &str) -> Result<Variant, String> {
    name.parse()
}

/// A preset volume's id becomes a directory name under `<state-dir>/volumes`, so it is kept
/// to characters that cannot leave that directory.
fn parse_preset_volume(id: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if id.is_empty() || id.len() > 128 || id.starts_with('.') || !id.chars().all(allowed) {
        return Err(format!(
            "preset volume {id:?} must be 1 to 128 letters, digits, '-', '_' or '.', not \
             starting with '.'"
        ));
    }
    Ok(id.to_string())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) if !err.use_stderr() => {
            // --help and --version: print and exit 0.
            let _ = err.print();
            return ExitCode::SUCCESS;
        }
        Err(err) => {
            eprintln!("csi-hostpath: {}", one_line(&err.to_string()));
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("csi-hostpath: failed to start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("csi-hostpath: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// clap's message up to its first blank line, on one line: "error: ..." without the usage.
fn one_line(message: &str) -> String {
    let text: Vec<&str> = message
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    text.join(" ").trim_start_matches("error: ").to_string()
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let faults = Faults::new(cli.faults);
    let variants = Variants::new(cli.variants);
    let config = Config {
        node_id: cli.node_id,
        max_volumes_per_node: cli.max_volumes_per_node,
        state_dir: cli.state_dir,
    };
    let plugin =
        Plugin::open(config, faults, variants).context("failed to open the state directory")?;
    for id in &cli.preset_volumes {
        plugin
            .preset_volume(id)
            .with_context(|| format!("failed to preset volume {id:?}"))?;
    }
    let plugin = Arc::new(plugin);
    let shutdown = shutdown_signal()?;

    let socket = cli.endpoint;
    remove_stale_socket(&socket)?;
    let listener = UnixListener::bind(&socket)
        .with_context(|| format!("failed to listen on {}", socket.display()))?;
    eprintln!(
        "{PLUGIN_NAME} {} serving on unix://{} (node {:?}, state in {}, faults: {}, \
         variants: {})",
        env!("CARGO_PKG_VERSION"),
        socket.display(),
        plugin.config.node_id,
        plugin.config.state_dir.display(),
        plugin.faults,
        plugin.variants,
    );

    // Serve until a signal, then stop accepting calls and give the ones in flight (and
    // clients' connections) a grace period to finish before exiting regardless.
    let identity = IdentityServer::new(IdentityService::new(Arc::clone(&plugin)));
    // node-only: the plugin instance of a split deployment that runs on every node. The
    // Controller and GroupController services are not registered, so their RPCs get
    // UNIMPLEMENTED from gRPC itself; Identity still advertises them (see identity.rs).
    let serves_controller = !plugin.variants.has(Variant::NodeOnly);
    // slow-start: while the plugin is still starting, every call of these services is
    // UNAVAILABLE (Identity answers Probe with ready=false, see identity.rs).
    let gate = {
        let plugin = Arc::clone(&plugin);
        move |request: tonic::Request<()>| plugin.not_started().map(|()| request)
    };
    let controller = serves_controller.then(|| {
        ControllerServer::with_interceptor(
            ControllerService::new(Arc::clone(&plugin)),
            gate.clone(),
        )
    });
    let group_controller = serves_controller.then(|| {
        GroupControllerServer::with_interceptor(
            GroupControllerService::new(Arc::clone(&plugin)),
            gate.clone(),
        )
    });
    let node = NodeServer::with_interceptor(NodeService::new(Arc::clone(&plugin)), gate);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = Server::builder()
        .add_service(identity)
        .add_optional_service(controller)
        .add_optional_service(group_controller)
        .add_service(node)
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
            let _ = stopped.await;
        });
    tokio::pin!(server);
    let served = tokio::select! {
        result = &mut server => result,
        () = shutdown => {
            let _ = stop.send(());
            match tokio::time::timeout(SHUTDOWN_GRACE, &mut server).await {
                Ok(result) => result,
                Err(_) => {
                    eprintln!(
                        "csi-hostpath: connections still open after {} s, stopping anyway",
                        SHUTDOWN_GRACE.as_secs()
                    );
                    Ok(())
                }
            }
        }
    };

    // The socket goes whether serving ended well or not.
    if let Err(err) = std::fs::remove_file(&socket)
        && err.kind() != ErrorKind::NotFound
    {
        eprintln!("csi-hostpath: failed to remove {}: {err}", socket.display());
    }
    served.context("failed to serve gRPC")?;
    eprintln!("csi-hostpath: stopped");
    Ok(())
}

/// A socket left by an earlier run that died is removed; anything else at that path is not
/// ours to delete.
fn remove_stale_socket(path: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path)
            .with_context(|| format!("failed to remove the stale socket {}", path.display())),
        Ok(_) => bail!(
            "refusing to replace {}: it exists and is not a socket",
            path.display()
        ),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err).with_context(|| format!("failed to inspect {}", path.display())),
    }
}

/// Installs the SIGTERM (how Nomad stops tasks) and SIGINT (Ctrl-C) handlers now, so no
/// signal is missed, and returns a future that resolves on the first of them.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    let mut terminate = signal(SignalKind::terminate()).context("failed to handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("failed to handle SIGINT")?;
    Ok(async move {
        let name = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        eprintln!("csi-hostpath: {name} received, stopping");
    })
}
