//! driver-exec: the reference task driver plugin of nomad-conform.
//!
//! A raw_exec-like Nomad task driver (driver name `exec-reference`): it runs `command args...`
//! on the host, without isolation, as Nomad's go-plugin host expects a driver plugin to. It is
//! meant to be read: each part of the protocol is one module, every rule it follows is
//! implemented in one visible place, and `--fault NAME` switches break one rule at a time so
//! the conformance suite can prove its checks fail (`--variant NAME` switches change what the
//! contract leaves open).
//!
//! Modules, in the order a host meets them:
//! - `launch`: the go-plugin handshake (cookie, versions, listener, stdout line, SIGINT);
//!   `log`: hclog JSON on stderr; `server`: the gRPC server; `goplugin`: go-plugin's own
//!   services (health, broker, controller, stdio);
//! - `base`: BasePlugin (PluginInfo, ConfigSchema, SetConfig) with `config` (the plugin
//!   config), `hclspec` (schema builders) and `msgpack` (reading cty or plain msgpack maps);
//! - `driver`: the Driver service, delegating to `fingerprint`, `start` (StartTask,
//!   RecoverTask), `stop` (StopTask, DestroyTask, SignalTask), `stats`, `events`, `exec`,
//!   `exec_stream` and `pty`;
//! - `taskconfig`: the task's `config {}`; `supervisor`: the process between plugin and task;
//!   `tasks`: the in-memory task table; `handle`: the TaskHandle's driver_state; `process`:
//!   signals and `/proc`; `invisible`: tasks without their env (a variant); `isolation`:
//!   tasks in a root filesystem of their own (variants); `users`: tasks as dynamic workload
//!   users in their cgroup (a variant); `confine`: how a task's process and its execs enter
//!   those; `crash`: dying as a Go plugin panics (faults);
//! - `rpc`: error codes and call logging; `plugin`: what services share; `faults`,
//!   `variants`, `switches`: the switches.
//!
//! This file: the command line, and either serving (the default) or supervising one task
//! (the hidden `supervise` subcommand the plugin runs itself as).

mod base;
mod config;
mod confine;
mod crash;
mod driver;
mod events;
mod exec;
mod exec_stream;
mod faults;
mod fingerprint;
mod goplugin;
mod handle;
mod hclspec;
mod invisible;
mod isolation;
mod launch;
mod log;
mod msgpack;
mod plugin;
mod process;
mod pty;
mod rpc;
mod server;
mod start;
mod stats;
mod stop;
mod supervisor;
mod switches;
mod taskconfig;
mod tasks;
mod users;
mod variants;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::faults::{Fault, Faults};
use crate::launch::Listener;
use crate::plugin::Plugin;
use crate::variants::{Variant, Variants};

/// Reference Nomad task driver plugin (driver "exec-reference"): runs commands on the host.
///
/// Nomad starts it (with NOMAD_PLUGIN_MAGIC_COOKIE set) and talks to it over gRPC; `args` in
/// the agent's `plugin "driver-exec" { args = [...] }` block reach it as command-line
/// arguments.
#[derive(Debug, Parser)]
#[command(name = "driver-exec", version, after_long_help = switch_help())]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Directory for the tasks' exit status files (created if missing)
    #[arg(long, value_name = "DIR", default_value_os_t = default_state_dir())]
    state_dir: PathBuf,

    /// Break one rule on purpose (repeatable); see the list below
    #[arg(long = "fault", value_name = "NAME", value_parser = parse_fault)]
    faults: Vec<Fault>,

    /// Change what the contract leaves open (repeatable); see the list below
    #[arg(long = "variant", value_name = "NAME", value_parser = parse_variant)]
    variants: Vec<Variant>,

    /// With the slow-start variant, how many seconds StartTask waits before it starts a task
    #[arg(long, value_name = "N", default_value_t = start::SLOW_START_SECS)]
    slow_start_secs: u64,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Supervise one task (the plugin runs this itself)
    #[command(hide = true)]
    Supervise(supervisor::SuperviseArgs),
}

fn parse_fault(name: &str) -> Result<Fault, String> {
    name.parse()
}

fn parse_variant(name: &str) -> Result<Variant, String> {
    name.parse()
}

fn switch_help() -> String {
    format!("{}\n{}", faults::help_text(), variants::help_text())
}

fn default_state_dir() -> PathBuf {
    std::env::temp_dir().join("driver-exec-reference")
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
            let _ = err.print();
            return ExitCode::from(2);
        }
    };
    if let Some(Command::Supervise(args)) = cli.command {
        return supervisor::run(args);
    }

    let faults = Faults::new(cli.faults);
    let variants = Variants::new(cli.variants);
    if let Some(why) = variants::conflict(&variants) {
        // A bad command line, as clap's own errors are.
        eprintln!("error: {why}");
        return ExitCode::from(2);
    }
    log::init(&faults);
    if let Err(message) = launch::check_cookie(&faults) {
        eprintln!("{message}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            log::error(
                "failed to start the async runtime",
                &[("error", err.to_string())],
            );
            return ExitCode::FAILURE;
        }
    };
    let plugin = Plugin::new(
        faults,
        variants,
        std::time::Duration::from_secs(cli.slow_start_secs),
        cli.state_dir,
    );
    let result = runtime.block_on(run(plugin));
    // Connections and streams still open end with the process, as with Go's Server.Stop.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            log::error("plugin failed", &[("error", format!("{err:#}"))]);
            ExitCode::FAILURE
        }
    }
}

async fn run(plugin: std::sync::Arc<Plugin>) -> anyhow::Result<()> {
    launch::check_protocol_versions();
    std::fs::create_dir_all(&plugin.state_dir).with_context(|| {
        format!(
            "failed to create the state directory {}",
            plugin.state_dir.display()
        )
    })?;
    // late-sigint-handler: go-plugin's order (Serve prints the handshake, then calls
    // signal.Notify, then serves), with a second between the first two.
    let late = plugin.variants.has(Variant::LateSigintHandler);
    if late {
        launch::default_interrupts()?;
    } else {
        launch::ignore_interrupts(&plugin.faults)?;
    }
    let listener = Listener::open(&plugin.variants).await?;
    let socket = listener.socket().map(PathBuf::from);
    let handshake = listener.handshake_line(&plugin.faults);
    server::log_start(&plugin, &handshake);
    launch::announce(&handshake, &plugin.faults).await;
    if late {
        tokio::time::sleep(launch::LATE_SIGINT_HANDLER).await;
        launch::ignore_interrupts(&plugin.faults)?;
    }

    let served = server::serve(plugin, listener).await;
    if let Some(socket) = socket {
        let _ = std::fs::remove_file(socket);
    }
    log::info("plugin stopped", &[]);
    served
}
