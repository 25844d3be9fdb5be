//! The shim pattern: `lock-sidecar --path P -- command args...` in place of the task's command.
//!
//! Order of events, and why:
//! 1. acquire (retrying conflicts until --give-up); the command does not exist before this;
//! 2. start the command in its own process group; renew every TTL/2 while it runs;
//! 3. renew 409: the lock is someone else's now, so stop the command at once (SIGTERM to its
//!    group, SIGKILL after the grace) and exit 1; renews keep failing otherwise: stop the command
//!    before the lease ends, try to release, exit 1;
//! 4. the command exits: kill what it left in its group, release, exit with its status;
//! 5. SIGTERM/SIGINT: forwarded to the command's group; renewing goes on until it has exited,
//!    then step 4.

use nix::sys::signal::Signal;

use crate::Context;
use crate::child::{self, Protected};
use crate::duration::human;
use crate::faults::{Fault, Variant};
use crate::lease::{self, AcquireError, HeldLock, LeaseEnd, Timing};
use crate::signals::Signals;

enum Outcome {
    /// The lock was lost and the command stopped.
    Lost(std::io::Result<std::process::ExitStatus>),
    /// The command exited; `lost` when the lock had been lost before (fault keeps-child).
    Exited {
        status: std::io::Result<std::process::ExitStatus>,
        lost: bool,
    },
}

/// Runs the shim; returns the exit code.
pub async fn run(ctx: &Context, argv: &[String], signals: &mut Signals) -> u8 {
    let command = display(argv);
    let mut early = None;
    if ctx.switches.fault(Fault::StartsBeforeAcquire) {
        match Protected::spawn(argv, &ctx.switches) {
            Ok(child) => {
                event!(
                    "started the protected process {} before acquiring the lock (fault starts-before-acquire): {command}",
                    child.pid()
                );
                early = Some(child);
            }
            Err(err) => {
                event!("failed to start {command}: {err}");
                return child::spawn_failure_code(&err);
            }
        }
    }

    let acquired = {
        let acquire = lease::acquire(&ctx.api, &ctx.acquire, &ctx.switches);
        tokio::pin!(acquire);
        loop {
            tokio::select! {
                result = &mut acquire => break result,
                status = wait_early(&mut early) => {
                    event!(
                        "protected process {} before the lock was acquired",
                        describe_wait(&status)
                    );
                    return exit_code(ctx, &status);
                }
                signal = signals.recv() => {
                    if let Some(child) = &early {
                        forward(ctx, child, signal);
                    } else if ignored(ctx, signal) {
                        event!("ignoring SIGTERM (fault ignores-sigterm)");
                    } else {
                        event!("{signal} while waiting for the lock; exiting without starting {command}");
                        return 128 + signal as u8;
                    }
                }
            }
        }
    };

    let lease = match acquired {
        Ok(lease) => lease,
        Err(err) => {
            event!("failed to acquire lock on {}: {err}", ctx.api.path());
            if let Some(mut child) = early {
                let grace = Timing::new(ctx.acquire.ttl, &ctx.switches).stop_grace;
                let status = child.stop(grace).await;
                child.kill_leftovers();
                event!(
                    "stopped the protected process: it {}",
                    describe_wait(&status)
                );
            }
            return match err {
                AcquireError::GaveUp { .. } | AcquireError::HeldElsewhere { .. } => 1,
                _ => 2,
            };
        }
    };
    event!(
        "acquired lock {} on {} (ttl {})",
        lease.id,
        ctx.api.path(),
        human(lease.ttl)
    );
    let timing = Timing::new(lease.ttl, &ctx.switches);
    let held = HeldLock::new(&lease.id);

    let mut child = match early {
        Some(child) => child,
        None => match Protected::spawn(argv, &ctx.switches) {
            Ok(child) => {
                event!("started the protected process {}: {command}", child.pid());
                child
            }
            Err(err) => {
                event!("failed to start {command}: {err}");
                lease::release(
                    &ctx.api,
                    &lease.id,
                    lease.ttl,
                    ctx.acquire.delay,
                    &ctx.switches,
                )
                .await;
                return child::spawn_failure_code(&err);
            }
        },
    };

    let outcome = {
        let maintain = lease::maintain(
            &ctx.api,
            lease.clone(),
            &ctx.acquire,
            &ctx.switches,
            &held,
            ctx.verbose,
        );
        tokio::pin!(maintain);
        let mut lost: Option<LeaseEnd> = None;
        loop {
            tokio::select! {
                end = &mut maintain, if lost.is_none() => {
                    if ctx.switches.fault(Fault::KeepsChild) {
                        event!("{end}; keeping the protected process running (fault keeps-child)");
                        lost = Some(end);
                        continue;
                    }
                    event!("{end}; stopping the protected process {}", child.pid());
                    break Outcome::Lost(child.stop(timing.stop_grace).await);
                }
                status = child.wait() => break Outcome::Exited { status, lost: lost.is_some() },
                signal = signals.recv() => forward(ctx, &child, signal),
            }
        }
    };

    let (status, lost) = match outcome {
        Outcome::Lost(status) => (status, true),
        Outcome::Exited { status, lost } => (status, lost),
    };
    event!(
        "protected process {} {}",
        child.pid(),
        describe_wait(&status)
    );
    if child.kill_leftovers() {
        event!("killed what the protected process left in its process group");
    }
    if let Some(id) = held.id() {
        lease::release(&ctx.api, &id, lease.ttl, ctx.acquire.delay, &ctx.switches).await;
    }
    if lost { 1 } else { exit_code(ctx, &status) }
}

async fn wait_early(early: &mut Option<Protected>) -> std::io::Result<std::process::ExitStatus> {
    match early {
        Some(child) => child.wait().await,
        None => std::future::pending().await,
    }
}

fn ignored(ctx: &Context, signal: Signal) -> bool {
    (signal == Signal::SIGTERM && ctx.switches.fault(Fault::IgnoresSigterm))
        || (signal == Signal::SIGINT && ctx.switches.fault(Fault::IgnoresSigint))
}

fn forward(ctx: &Context, child: &Protected, signal: Signal) {
    if ignored(ctx, signal) {
        event!("not forwarding {signal} to the protected process (fault)");
        return;
    }
    if ctx.switches.variant(Variant::KillChildOnSignal) {
        event!(
            "{signal}: killing the protected process {} (variant kill-child-on-signal)",
            child.pid()
        );
        let _ = child.signal_group(Signal::SIGKILL);
        return;
    }
    event!(
        "forwarding {signal} to the protected process {}",
        child.pid()
    );
    let _ = child.signal_group(signal);
}

fn describe_wait(status: &std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(status) => child::describe(*status),
        Err(err) => format!("could not be waited for: {err}"),
    }
}

fn exit_code(ctx: &Context, status: &std::io::Result<std::process::ExitStatus>) -> u8 {
    let code = match status {
        Ok(status) => child::exit_code(*status),
        Err(_) => 1,
    };
    if code != 0 && ctx.switches.variant(Variant::Exit1) {
        1
    } else {
        code
    }
}

/// The command as a shell would read it back.
pub fn display(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}
