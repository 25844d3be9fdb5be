//! What /proc says about processes: their command lines, group, parent and session, the
//! members of a process group, the processes working inside a directory, and which signals a
//! process catches. Every room that looks for processes (the runner, the sweep for escapees,
//! the transports) reads them through here.

use nix::sys::signal::killpg;
use nix::unistd::Pid;

/// A process seen in the plugin's process group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: i32,
    pub cmdline: String,
}

impl std::fmt::Display for ProcInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} ({})", self.pid, self.cmdline)
    }
}

/// Live (non-zombie) processes whose process group is `pgid`, found through /proc.
pub fn group_members(pgid: i32) -> Vec<ProcInfo> {
    if pgid <= 0 || killpg(Pid::from_raw(pgid), None).is_err() {
        return Vec::new();
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| proc_stat(*pid).is_some_and(|s| !s.zombie && s.pgrp == pgid))
        .map(|pid| ProcInfo {
            pid,
            cmdline: cmdline(pid),
        })
        .collect()
}

/// What /proc/PID/stat says about a process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProcStat {
    pub zombie: bool,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
}

pub(crate) fn proc_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
}

/// The fields of a /proc/PID/stat line the harness reads. Only the four fields after the
/// command name are split off: the runner reads the stat of every process on the machine
/// several times per clause, and the whole line has some fifty fields.
fn parse_stat(line: &[u8]) -> Option<ProcStat> {
    // The command name is in parentheses and may contain anything, ')' and spaces included.
    let close = line.iter().rposition(|b| *b == b')')?;
    let mut f = line[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    let state = f.next()?;
    let mut int = || -> Option<i32> { std::str::from_utf8(f.next()?).ok()?.trim().parse().ok() };
    Some(ProcStat {
        zombie: state == b"Z",
        ppid: int()?,
        pgrp: int()?,
        session: int()?,
    })
}

/// Live processes (not the harness) whose working directory or root directory lies inside
/// `dir`: what a run started there, whatever environment it carries (a task a driver runs in
/// the allocation directory the harness built, a chrooted one included).
pub fn processes_in(dir: &std::path::Path) -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        // The links first: they rule out almost every process, and cost less than the stat.
        .filter(|pid| {
            ["cwd", "root"].iter().any(|link| {
                std::fs::read_link(format!("/proc/{pid}/{link}"))
                    .is_ok_and(|p| p.starts_with(dir) && p != std::path::Path::new("/"))
            })
        })
        .filter(|pid| proc_stat(*pid).is_some_and(|s| !s.zombie))
        .map(|pid| ProcInfo {
            pid,
            cmdline: cmdline(pid),
        })
        .collect()
}

/// A process's command line, its arguments joined by spaces.
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .split('\0')
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Which signals a process catches and which it ignores (`SigCgt` and `SigIgn` of
/// /proc/PID/status: bit N-1 is signal N).
pub fn signal_dispositions(pid: i32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    Some((mask("SigCgt:")?, mask("SigIgn:")?))
}

/// The bit of `signal` in a /proc signal mask.
pub fn signal_bit(signal: nix::sys::signal::Signal) -> u64 {
    1u64 << (signal as i32 - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_command_name_with_parentheses_and_spaces() {
        let line = b"4242 (sh) -c (x) 1) Z 17 4242 99 0 -1 4194560 105 0 0 0 0 0 0 0 20 0 1 0\n";
        let s = parse_stat(line).unwrap();
        assert!(s.zombie);
        assert_eq!((s.ppid, s.pgrp, s.session), (17, 4242, 99));
        let me = proc_stat(std::process::id() as i32).unwrap();
        assert!(!me.zombie);
        assert_eq!(me.ppid, nix::unistd::getppid().as_raw());
        assert_eq!(me.pgrp, nix::unistd::getpgrp().as_raw());
        assert!(parse_stat(b"12 (no fields)").is_none());
    }

    #[test]
    fn dispositions_show_a_shell_trap_and_an_ignored_signal() {
        use nix::sys::signal::Signal;
        let mut child = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "trap 'exit 43' USR1; trap '' TERM; echo ready; while :; do sleep 0.1; done",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let (caught, ignored) = signal_dispositions(child.id() as i32).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_ne!(caught & signal_bit(Signal::SIGUSR1), 0, "{caught:x}");
        assert_ne!(ignored & signal_bit(Signal::SIGTERM), 0, "{ignored:x}");
        assert_eq!(caught & signal_bit(Signal::SIGTERM), 0, "{caught:x}");
    }
}
