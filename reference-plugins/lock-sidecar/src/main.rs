//! lock-sidecar: the reference singleton lock client of nomad-conform.
//!
//! It holds a Nomad Variables lock around a protected process, as Nomad's "singleton
//! deployments" guide describes: as a shim wrapping the command ([`shim`]) or as the group's
//! leader task signalling the application through a sentinel file ([`sidecar`]). The timing
//! rules live in [`lease`], the HTTP calls in [`api`], the process handling in [`child`], the
//! deliberate rule violations for the suite's fixtures in [`faults`]. See README.md.

/// One log line on stderr: `lock-sidecar: <event>`.
#[macro_export]
macro_rules! event {
    ($($arg:tt)*) => {
        eprintln!("lock-sidecar: {}", format_args!($($arg)*))
    };
}

mod api;
mod child;
mod cli;
mod duration;
mod env;
mod faults;
mod lease;
mod shim;
mod sidecar;
mod signals;

use std::process::ExitCode;

use clap::Parser as _;

use crate::api::Api;
use crate::cli::{Cli, Mode};
use crate::duration::human;
use crate::env::NomadEnv;
use crate::faults::Switches;
use crate::lease::AcquireSettings;

/// What every part of a run needs.
#[derive(Debug)]
pub struct Context {
    /// Calls for the lock's variable.
    pub api: Api,
    /// TTL, delay, give-up and backoff of acquires.
    pub acquire: AcquireSettings,
    /// Faults and variants in force.
    pub switches: Switches,
    /// Log every renew.
    pub verbose: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mode = match cli.mode() {
        Ok(mode) => mode,
        Err(why) => {
            event!("{why}");
            return ExitCode::from(2);
        }
    };
    let env = match NomadEnv::from_process() {
        Ok(env) => env,
        Err(err) => {
            event!("{err}");
            return ExitCode::from(2);
        }
    };
    let switches = Switches::new(&cli.faults, &cli.variants);
    let ctx = Context {
        api: Api::new(&env, &cli.path).with_faults(&switches),
        acquire: AcquireSettings {
            ttl: cli.ttl,
            delay: cli.delay,
            give_up: Some(cli.give_up),
            max_backoff: cli.max_backoff,
        },
        switches,
        verbose: cli.verbose,
    };
    // One thread: the protected process's parent-death signal follows the thread that forked it.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            event!("failed to start the runtime: {err}");
            return ExitCode::from(3);
        }
    };
    let code = runtime.block_on(async {
        let mut signals = match signals::Signals::install() {
            Ok(signals) => signals.with_faults(&ctx.switches, ctx.api.in_flight()),
            Err(err) => {
                event!("failed to install signal handlers: {err}");
                return 3;
            }
        };
        let what = match &mode {
            Mode::Shim(argv) => format!("shim for `{}`", shim::display(argv)),
            Mode::Sidecar(file) => format!("sidecar with sentinel {}", file.display()),
        };
        event!(
            "{what}: lock {} in namespace {} at {} (ttl {}, delay {}, give up after {}){}",
            ctx.api.path(),
            ctx.api.namespace(),
            env.endpoint,
            human(cli.ttl),
            human(cli.delay),
            human(cli.give_up),
            ctx.switches
                .describe()
                .map(|s| format!("; {s}"))
                .unwrap_or_default()
        );
        match &mode {
            Mode::Shim(argv) => shim::run(&ctx, argv, &mut signals).await,
            Mode::Sidecar(file) => sidecar::run(&ctx, file, &mut signals).await,
        }
    });
    ExitCode::from(code)
}
