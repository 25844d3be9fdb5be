//! Plugins start with the signal state the Nomad client gives them: nothing blocked, every
//! disposition the default.
//!
//! The client is a Go program, and Go's os/exec starts a child with the signal mask the runtime
//! had at start (empty for an agent) and every signal the runtime handles set back to its default
//! (syscall's forkAndExecInChild after runtime_AfterForkInChild). A child of the harness would
//! otherwise inherit what the harness set up for itself: the DHV agent stand-in blocks every
//! signal to take them from a queue, and Rust ignores SIGPIPE. A blocked SIGALRM never fires; a
//! helper with SIGTERM blocked does not stop when the plugin terminates it. Every plugin process
//! the harness starts runs [`reset_in_child`] between fork and exec.

use std::io;

use nix::libc;

/// Empty the signal mask and set every catchable signal's disposition to the default. Meant
/// for `pre_exec`: it calls only async-signal-safe functions (sigprocmask, sigaction) and
/// allocates nothing.
pub fn reset_in_child() -> io::Result<()> {
    // SAFETY: sigemptyset and sigprocmask are async-signal-safe and touch only what is passed;
    // rt_sigaction is given a zeroed kernel sigaction (handler SIG_DFL, no flags, empty mask),
    // which it only reads.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        // The kernel's call, not the C library's: glibc refuses the two real-time signals it
        // keeps for itself, which a parent may still have left ignored.
        let default = [0u64; 8];
        for sig in 1..=64 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                default.as_ptr(),
                std::ptr::null_mut::<u64>(),
                8usize,
            );
        }
    }
    Ok(())
}

/// Set [`reset_in_child`] to run in the child of `cmd` before it execs.
pub fn reset_on_spawn(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: reset_in_child is async-signal-safe (see above).
    unsafe {
        cmd.pre_exec(reset_in_child);
    }
}

/// [`reset_on_spawn`] for tokio's Command.
pub fn reset_on_tokio_spawn(cmd: &mut tokio::process::Command) {
    // SAFETY: reset_in_child is async-signal-safe (see above).
    unsafe {
        cmd.pre_exec(reset_in_child);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child started with the signal state the harness's own stand-in has (everything
    /// blocked, SIGPIPE ignored) reads an empty mask and no ignored signal in its status.
    #[test]
    fn a_child_starts_with_nothing_blocked_and_nothing_ignored() {
        let run = |reset: bool| {
            // Not a shell: a shell empties its own mask when it starts.
            let mut cmd = std::process::Command::new("grep");
            cmd.args(["-E", "^Sig(Blk|Ign):", "/proc/self/status"]);
            use std::os::unix::process::CommandExt as _;
            // SAFETY: only sigprocmask and sigaction, both async-signal-safe, in the child.
            unsafe {
                cmd.pre_exec(|| {
                    let mut all: libc::sigset_t = std::mem::zeroed();
                    libc::sigfillset(&mut all);
                    libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
                    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                    libc::signal(libc::SIGALRM, libc::SIG_IGN);
                    Ok(())
                });
            }
            if reset {
                reset_on_spawn(&mut cmd);
            }
            String::from_utf8(cmd.output().unwrap().stdout).unwrap()
        };
        let without = run(false);
        assert!(!without.contains("SigBlk:\t0000000000000000"), "{without}");
        assert!(!without.contains("SigIgn:\t0000000000000000"), "{without}");
        let with = run(true);
        assert!(with.contains("SigBlk:\t0000000000000000"), "{with}");
        assert!(with.contains("SigIgn:\t0000000000000000"), "{with}");
    }
}
