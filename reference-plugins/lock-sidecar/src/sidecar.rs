//! The sidecar pattern: lock-sidecar is the group's `leader = true` task; the application is a
//! poststart sidecar task that waits for a sentinel file (for example in `/alloc`).
//!
//! - A sentinel left by an earlier run of this task is removed before anything else: a restarted
//!   application must not see it while the lock is not ours.
//! - Once the lock is held the sentinel is written (to a temporary name, then renamed, so the
//!   application never reads half a file); it holds the lock ID.
//! - On losing the lock (renew 409, renews failing until the stop deadline, renew refused) the
//!   sentinel is removed, one quick release is attempted, and lock-sidecar exits 1: the leader
//!   task dying makes Nomad stop the whole group, application included.
//! - On SIGTERM/SIGINT (Nomad stopping the group) the sentinel is removed, the lock released,
//!   and lock-sidecar exits 0. Nomad kills the leader before the other tasks, so the application
//!   may still run for its own kill time after the release; see the README.

use std::io;
use std::path::Path;

use crate::Context;
use crate::duration::human;
use crate::faults::Fault;
use crate::lease::{self, AcquireError, HeldLock};
use crate::signals::Signals;

/// Runs the sidecar; returns the exit code.
pub async fn run(ctx: &Context, sentinel: &Path, signals: &mut Signals) -> u8 {
    match remove_sentinel(sentinel) {
        Ok(true) => event!("removed stale sentinel {}", sentinel.display()),
        Ok(false) => {}
        Err(err) => {
            event!(
                "failed to remove stale sentinel {}: {err}",
                sentinel.display()
            );
            return 2;
        }
    }
    if ctx.switches.fault(Fault::StartsBeforeAcquire) {
        if let Err(err) = write_sentinel(sentinel, "not-locked") {
            event!("failed to create sentinel {}: {err}", sentinel.display());
            return 2;
        }
        event!(
            "created sentinel {} before acquiring the lock (fault starts-before-acquire)",
            sentinel.display()
        );
    }

    let acquired = {
        let acquire = lease::acquire(&ctx.api, &ctx.acquire, &ctx.switches);
        tokio::pin!(acquire);
        loop {
            tokio::select! {
                result = &mut acquire => break result,
                signal = signals.recv() => {
                    if ignored(ctx, signal) {
                        event!("ignoring {signal} (fault)");
                        continue;
                    }
                    event!("{signal} while waiting for the lock; exiting");
                    remove_logged(sentinel);
                    return 0;
                }
            }
        }
    };
    let lease = match acquired {
        Ok(lease) => lease,
        Err(err) => {
            event!("failed to acquire lock on {}: {err}", ctx.api.path());
            remove_logged(sentinel);
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
    let held = HeldLock::new(&lease.id);
    if let Err(err) = write_sentinel(sentinel, &lease.id) {
        event!("failed to create sentinel {}: {err}", sentinel.display());
        lease::release(
            &ctx.api,
            &lease.id,
            lease.ttl,
            ctx.acquire.delay,
            &ctx.switches,
        )
        .await;
        return 1;
    }
    event!("created sentinel {}", sentinel.display());

    let code = {
        let maintain = lease::maintain(
            &ctx.api,
            lease.clone(),
            &ctx.acquire,
            &ctx.switches,
            &held,
            ctx.verbose,
        );
        tokio::pin!(maintain);
        let mut lost = false;
        loop {
            tokio::select! {
                end = &mut maintain, if !lost => {
                    lost = true;
                    if ctx.switches.fault(Fault::KeepsChild) {
                        event!("{end}; keeping the sentinel (fault keeps-child)");
                        continue;
                    }
                    event!("{end}; removing the sentinel so the group stops");
                    remove_logged(sentinel);
                    break 1;
                }
                signal = signals.recv() => {
                    if ignored(ctx, signal) {
                        event!("ignoring {signal} (fault)");
                        continue;
                    }
                    event!("{signal}: removing the sentinel and releasing the lock");
                    remove_logged(sentinel);
                    break 0;
                }
            }
        }
    };
    if let Some(id) = held.id() {
        if code == 1 {
            // Lost: the application stops when this task exits; one quick attempt only.
            lease::release_once(&ctx.api, &id, lease.ttl, &ctx.switches).await;
        } else {
            lease::release(&ctx.api, &id, lease.ttl, ctx.acquire.delay, &ctx.switches).await;
        }
    }
    code
}

fn ignored(ctx: &Context, signal: nix::sys::signal::Signal) -> bool {
    (signal == nix::sys::signal::Signal::SIGTERM && ctx.switches.fault(Fault::IgnoresSigterm))
        || (signal == nix::sys::signal::Signal::SIGINT && ctx.switches.fault(Fault::IgnoresSigint))
}

/// Writes `content` to a temporary file beside `sentinel`, then renames it into place.
fn write_sentinel(sentinel: &Path, content: &str) -> io::Result<()> {
    let mut tmp = sentinel.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}", std::process::id()));
    std::fs::write(&tmp, format!("{content}\n"))?;
    std::fs::rename(&tmp, sentinel).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Removes the sentinel; true if it was there.
fn remove_sentinel(sentinel: &Path) -> io::Result<bool> {
    match std::fs::remove_file(sentinel) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err),
    }
}

fn remove_logged(sentinel: &Path) {
    match remove_sentinel(sentinel) {
        Ok(true) => event!("removed sentinel {}", sentinel.display()),
        Ok(false) => {}
        Err(err) => event!("failed to remove sentinel {}: {err}", sentinel.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_is_written_whole_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let sentinel = dir.path().join("ready");
        assert!(!remove_sentinel(&sentinel).unwrap());
        write_sentinel(&sentinel, "lock-id").unwrap();
        assert_eq!(std::fs::read_to_string(&sentinel).unwrap(), "lock-id\n");
        // Only the sentinel is left: the temporary file was renamed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(remove_sentinel(&sentinel).unwrap());
        assert!(!sentinel.exists());
    }
}
