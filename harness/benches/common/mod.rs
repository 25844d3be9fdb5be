//! What several benches share: running the harness as a child process and reading its peak RSS
//! (issue 34: every suite's normal run under 64 MB). Each bench includes it with `mod common;`
//! and reads the fields it needs, so a field one bench leaves unread is not dead code.
#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Peak RSS target of a normal run of any suite, in bytes (MB as the issue counts them).
pub const NORMAL_RSS_TARGET: f64 = 64e6;

/// One run of a child process, with what `Command::output` gives and its peak RSS.
pub struct Measured {
    /// From its start until it exited (wait4 returned).
    pub took: Duration,
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Its peak resident set size in bytes: wait4(2)'s `ru_maxrss`, which is the largest of the
    /// process's own and that of any descendant it waited for (the plugins and probes the
    /// harness starts and reaps). The bench's other children do not count.
    pub peak_rss: f64,
}

/// Runs `cmd` to its end (stdin from /dev/null, stdout and stderr captured) and measures it.
pub fn run(cmd: &mut Command) -> Measured {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    // Reaped below by wait4(2), which also gives its rusage (Child::wait would not).
    #[allow(clippy::zombie_processes)]
    let mut child = cmd.spawn().expect("start the child");
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let pid = child.id() as nix::libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value of that plain C struct, and wait4 writes
    // nothing but it and `status`.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not waited for yet (Child never waits on its own).
    let waited = loop {
        let w = unsafe { nix::libc::wait4(pid, &mut status, 0, &mut usage) };
        if w == -1 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break w;
    };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let took = started.elapsed();
    Measured {
        took,
        status: ExitStatus::from_raw(status),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
        peak_rss: usage.ru_maxrss as f64 * 1024.0,
    }
}

/// "peak RSS, WHAT: 21.3 MB; target 64 MB -> ratio 0.33".
pub fn print_rss(what: &str, peak: f64, target: f64) {
    println!(
        "peak RSS, {what}: {:.1} MB; target {:.0} MB -> ratio {:.2}",
        peak / 1e6,
        target / 1e6,
        peak / target
    );
}
