//! Processes: signal names, exit statuses, and what `/proc` says about a task's processes.
//!
//! A task runs in a session of its own (made by its supervisor), as the leader of a process
//! group of its own: the group's id is the task's pid, and everything the task forks stays in
//! that group unless it moves itself. Signals for the task go to the whole group; a forced
//! destroy also kills whatever else is left in the session.

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::str::FromStr as _;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use nomad_conform_proto::nomad::drivers::ExitResult;

/// Exit codes of processes killed by a signal are reported as 128 + the signal number (what a
/// shell reports, and what Nomad's executors report), with the signal itself alongside.
const EXIT_SIGNAL_BASE: i32 = 128;

/// A signal by name: `SIGTERM`, or `TERM`. None for a name that is no signal.
pub fn parse_signal(name: &str) -> Option<Signal> {
    let name = name.trim();
    let full = if name.starts_with("SIG") {
        name.to_string()
    } else {
        format!("SIG{name}")
    };
    Signal::from_str(&full).ok()
}

/// The exit result of a process that has ended.
pub fn exit_result(status: ExitStatus) -> ExitResult {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitResult {
            exit_code: code,
            signal: 0,
            oom_killed: false,
        },
        (None, Some(signal)) => ExitResult {
            exit_code: EXIT_SIGNAL_BASE + signal,
            signal,
            oom_killed: false,
        },
        (None, None) => ExitResult {
            exit_code: -1,
            signal: 0,
            oom_killed: false,
        },
    }
}

/// The processes of one task, for signalling and sweeping.
#[derive(Clone, Copy, Debug)]
pub struct TaskProcesses {
    /// The task's main process, leader of its process group.
    pub task_pid: i32,
    /// The supervisor: leader of the session, never signalled here.
    pub supervisor_pid: i32,
    /// False only with the tasks-die-with-plugin fault: then the task shares the plugin's
    /// group and session, and only its main process may be signalled.
    pub own_session: bool,
}

impl TaskProcesses {
    /// Sends `signal` to the task's process group (its main process without a group of its
    /// own). A group that is already gone is not an error.
    pub fn signal(&self, signal: Signal) -> nix::Result<()> {
        let sent = if self.own_session {
            killpg(Pid::from_raw(self.task_pid), signal)
        } else {
            kill(Pid::from_raw(self.task_pid), signal)
        };
        match sent {
            Err(nix::errno::Errno::ESRCH) => Ok(()),
            other => other,
        }
    }

    /// SIGKILL to the main process only (the destroy-leaves-children fault).
    pub fn kill_main(&self) {
        let _ = kill(Pid::from_raw(self.task_pid), Signal::SIGKILL);
    }

    /// SIGKILL to the task's group and to every other process left in its session, except
    /// the supervisor (which then records the exit and ends by itself).
    pub fn kill_everything(&self) {
        let _ = self.signal(Signal::SIGKILL);
        if !self.own_session {
            return;
        }
        for process in all_processes() {
            if process.session == self.supervisor_pid && process.pid != self.supervisor_pid {
                let _ = kill(Pid::from_raw(process.pid), Signal::SIGKILL);
            }
        }
    }

    /// The live processes of the task: its group, or just its main process.
    pub fn members(&self) -> Vec<ProcStat> {
        all_processes()
            .into_iter()
            .filter(|p| {
                if self.own_session {
                    p.group == self.task_pid
                } else {
                    p.pid == self.task_pid
                }
            })
            .filter(|p| !p.is_dead())
            .collect()
    }
}

/// What `/proc/<pid>/stat` says about one process.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcStat {
    pub pid: i32,
    pub state: char,
    pub group: i32,
    pub session: i32,
    /// CPU time in user and kernel mode, in clock ticks.
    pub user_ticks: u64,
    pub system_ticks: u64,
    /// Resident set size in pages.
    pub rss_pages: u64,
}

impl ProcStat {
    /// A zombie or dead process: it has exited and only waits to be reaped.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }

    /// Parses one `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and
    /// may contain anything, so the fields are counted from the last `)`.
    pub fn parse(line: &str) -> Option<ProcStat> {
        let (head, tail) = line.rsplit_once(')')?;
        let pid = head.split_once(" (")?.0.trim().parse().ok()?;
        // Up to field 24 only, split on ASCII blanks: the line has some fifty fields, and the
        // plugin reads every process's stat each time it looks for a task's processes.
        let fields: Vec<&str> = tail.split_ascii_whitespace().take(22).collect();
        // fields[0] is field 3 of stat(5).
        let field = |n: usize| fields.get(n - 3).copied();
        Some(ProcStat {
            pid,
            state: field(3)?.chars().next()?,
            group: field(5)?.parse().ok()?,
            session: field(6)?.parse().ok()?,
            user_ticks: field(14)?.parse().ok()?,
            system_ticks: field(15)?.parse().ok()?,
            rss_pages: field(24)?.parse().ok()?,
        })
    }
}

/// One process's stat, if it exists.
pub fn stat(pid: i32) -> Option<ProcStat> {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .as_deref()
        .and_then(ProcStat::parse)
}

/// Whether `pid` is a process that has not exited (zombies count as exited).
pub fn is_running(pid: i32) -> bool {
    stat(pid).is_some_and(|p| !p.is_dead())
}

/// The arguments of a process, from `/proc/<pid>/cmdline`.
pub fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .filter(|arg| !arg.is_empty())
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every process `/proc` lists (those that vanish while it is read are skipped).
pub fn all_processes() -> Vec<ProcStat> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_parse_with_or_without_the_prefix() {
        assert_eq!(parse_signal("SIGTERM"), Some(Signal::SIGTERM));
        assert_eq!(parse_signal("HUP"), Some(Signal::SIGHUP));
        assert_eq!(parse_signal("SIGBOGUS"), None);
        assert_eq!(parse_signal(""), None);
    }

    #[test]
    fn exit_results_follow_the_shell_convention() {
        let exited = ExitStatus::from_raw(3 << 8);
        assert_eq!(exit_result(exited).exit_code, 3);
        let killed = ExitStatus::from_raw(9);
        let result = exit_result(killed);
        assert_eq!((result.exit_code, result.signal), (137, 9));
    }

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        let line = "4242 (a) b (c)) S 1 4242 4240 0 -1 4194560 100 0 0 0 \
                    7 3 0 0 20 0 1 0 12345 1000000 250 18446744073709551615";
        let stat = ProcStat::parse(line).unwrap();
        assert_eq!(stat.pid, 4242);
        assert_eq!(stat.state, 'S');
        assert_eq!((stat.group, stat.session), (4242, 4240));
        assert_eq!((stat.user_ticks, stat.system_ticks), (7, 3));
        assert_eq!(stat.rss_pages, 250);
    }

    #[test]
    fn this_process_is_running_and_listed() {
        let me = std::process::id() as i32;
        assert!(is_running(me));
        assert!(all_processes().iter().any(|p| p.pid == me));
        assert!(!cmdline(me).is_empty());
    }
}
