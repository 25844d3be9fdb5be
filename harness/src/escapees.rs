//! Processes that leave their plugin's process group, and the zombies the harness must reap.
//!
//! A plugin's descendant can call setsid(2) (`setsid cmd &`, a daemonizing helper) and so leave
//! the process group the harness kills. To still find it, the harness makes itself a child
//! subreaper (PR_SET_CHILD_SUBREAPER): when such a process's parent exits it is reparented to
//! the harness instead of init. After a plugin call, an escapee is a live child of the harness
//! in a session of its own whose environment holds every variable the call was given (so that
//! calls running at the same time are told apart by their `DHV_*` values).
//!
//! Being a subreaper also means the harness inherits the zombies of what it kills; they are
//! reaped here, by PID, never with a wildcard wait that would take a status tokio waits for.

use std::collections::BTreeSet;
use std::sync::Once;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpid, getsid};

use crate::procfs::{ProcInfo, ProcStat as Stat, cmdline, proc_stat as stat};

/// How long reaping waits for killed processes to die.
const REAP_WITHIN: Duration = Duration::from_millis(500);

static SUBREAPER: Once = Once::new();

/// Makes the harness the child subreaper of everything it starts from now on. Idempotent.
pub fn become_subreaper() {
    SUBREAPER.call_once(|| {
        // Without it (an old kernel), escapees go to init and are simply not seen.
        let _ = nix::sys::prctl::set_child_subreaper(true);
    });
}

/// The harness's own children (zombies included), with their stat. Each thread's
/// `/proc/self/task/TID/children` lists them cheaply (this runs after every plugin call);
/// without that file (a kernel built without it) every process is looked at.
fn children() -> Vec<(i32, Stat)> {
    let mut pids = Vec::new();
    let mut listed = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
                listed = true;
                pids.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                );
            }
        }
    }
    if !listed && let Ok(dir) = std::fs::read_dir("/proc") {
        pids.extend(
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()),
        );
    }
    let me = getpid().as_raw();
    pids.sort_unstable();
    pids.dedup();
    pids.into_iter()
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .filter(|(_, s)| s.ppid == me)
        .collect()
}

/// Whether the process's initial environment holds every pair of `env`.
fn has_env(pid: i32, env: &[(String, String)]) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let have: BTreeSet<&[u8]> = raw.split(|b| *b == 0).collect();
    env.iter().all(|(k, v)| {
        let pair = format!("{k}={v}");
        have.contains(pair.as_bytes())
    })
}

/// Live children of the harness in a session other than its own: whatever left a process group
/// the harness started and was orphaned to it, whoever started it.
pub fn detached() -> Vec<ProcInfo> {
    let Ok(my_session) = getsid(None) else {
        return Vec::new();
    };
    children()
        .into_iter()
        .filter(|(_, s)| !s.zombie && s.session != my_session.as_raw())
        .map(|(pid, _)| ProcInfo {
            pid,
            cmdline: cmdline(pid),
        })
        .collect()
}

/// The PIDs of [`detached`].
pub fn detached_pids() -> BTreeSet<i32> {
    detached().into_iter().map(|p| p.pid).collect()
}

/// Live children of the harness that left its session and carry `env`: processes a plugin call
/// with that environment started and that escaped its process group.
pub fn find(env: &[(String, String)]) -> Vec<ProcInfo> {
    let Ok(my_session) = getsid(None) else {
        return Vec::new();
    };
    children()
        .into_iter()
        .filter(|(pid, s)| !s.zombie && s.session != my_session.as_raw() && has_env(*pid, env))
        .map(|(pid, _)| ProcInfo {
            pid,
            cmdline: cmdline(pid),
        })
        .collect()
}

/// What a clause's processes may leave running detached, swept when the clause ends: every
/// escapee carrying `env` is killed and named in the clause's notes (the Nomad client kills a
/// task's whole cgroup when it stops it, so under Nomad it would not have outlived the task).
#[derive(Debug)]
pub struct Sweep {
    pub env: Vec<(String, String)>,
    /// Who started them, for the note.
    pub what: String,
}

impl crate::ledger::Resource for Sweep {
    fn describe(&self) -> String {
        format!("processes {} left detached", self.what)
    }

    fn teardown(
        self: Box<Self>,
    ) -> futures::future::BoxFuture<'static, crate::ledger::TeardownOutcome> {
        Box::pin(async move {
            let mut outcome = crate::ledger::TeardownOutcome::default();
            // Killing one can orphan its children into a session of their own: look again.
            for _ in 0..SWEEP_ROUNDS {
                let found = find(&self.env);
                if found.is_empty() {
                    break;
                }
                kill(&found).await;
                for p in found {
                    let line = format!(
                        "{} left {p} running in a session of its own; the harness killed it",
                        self.what
                    );
                    eprintln!("warning: {}", crate::secrets::redact(&line));
                    outcome.notes.push(line);
                }
            }
            outcome
        })
    }
}

/// How many times a sweep looks again after killing what it found.
const SWEEP_ROUNDS: usize = 20;

/// Kills each escapee's process group (it leads one after setsid) and reaps what dies.
pub async fn kill(found: &[ProcInfo]) {
    let groups: Vec<i32> = found.iter().map(|p| p.pid).collect();
    for g in &groups {
        let _ = killpg(Pid::from_raw(*g), Signal::SIGKILL);
    }
    reap(
        |s| groups.contains(&s.pgrp) || groups.contains(&s.session),
        None,
    )
    .await;
}

/// Reaps the harness's children in process group `pgid` (killed members of a plugin's group,
/// reparented to the harness), except `pgid` itself, whose status tokio collects.
pub async fn reap_group(pgid: i32) {
    reap(|s| s.pgrp == pgid, Some(pgid)).await;
}

/// Waits (briefly) for the harness's children matching `which` to die, reaping each zombie.
async fn reap(which: impl Fn(&Stat) -> bool, except: Option<i32>) {
    let until = Instant::now() + REAP_WITHIN;
    loop {
        let left: Vec<(i32, Stat)> = children()
            .into_iter()
            .filter(|(pid, s)| Some(*pid) != except && which(s))
            .collect();
        if left.is_empty() || Instant::now() > until {
            return;
        }
        for (pid, s) in &left {
            if s.zombie {
                let _ = waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG));
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every live child of the harness once a run has stopped everything it started: a daemon that
/// fully detached (setsid, double fork, stdio on /dev/null, a fresh environment) is still a
/// child of the harness, its subreaper, and is found here whatever it did to hide.
///
/// Only children outside the harness's own process group count: everything a run starts gets a
/// group of its own, while a process the harness's caller started beside it (a test running
/// several runs in one process) shares the caller's group.
pub fn leftovers() -> Vec<ProcInfo> {
    let mine = nix::unistd::getpgrp().as_raw();
    children()
        .into_iter()
        .filter(|(_, s)| !s.zombie && s.pgrp != mine)
        .map(|(pid, _)| ProcInfo {
            pid,
            cmdline: cmdline(pid),
        })
        .collect()
}

/// [`leftovers`] and every live descendant of theirs, wherever it went (its own session,
/// its own group), so that one round of killing reaches a whole tree.
pub fn leftovers_and_descendants() -> Vec<ProcInfo> {
    let mut found = leftovers();
    let mut pids: BTreeSet<i32> = found.iter().map(|p| p.pid).collect();
    if pids.is_empty() {
        return found;
    }
    let all: Vec<(i32, Stat)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .filter(|(_, s)| !s.zombie)
        .collect();
    loop {
        let more: Vec<i32> = all
            .iter()
            .filter(|(pid, s)| pids.contains(&s.ppid) && !pids.contains(pid))
            .map(|(pid, _)| *pid)
            .collect();
        if more.is_empty() {
            break;
        }
        for pid in more {
            pids.insert(pid);
            found.push(ProcInfo {
                pid,
                cmdline: cmdline(pid),
            });
        }
    }
    found
}

/// Kills each leftover (its process group and session with it) and reaps what dies.
pub async fn kill_leftovers(found: &[ProcInfo]) {
    let pids: Vec<i32> = found.iter().map(|p| p.pid).collect();
    for p in &pids {
        let pid = Pid::from_raw(*p);
        // Its whole group, unless that is the harness's own.
        if let Some(s) = stat(*p)
            && s.pgrp > 1
            && s.pgrp != nix::unistd::getpgrp().as_raw()
        {
            let _ = killpg(Pid::from_raw(s.pgrp), Signal::SIGKILL);
        }
        let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
    }
    reap(
        |s| pids.contains(&s.pgrp) || pids.contains(&s.session),
        None,
    )
    .await;
    for p in &pids {
        let _ = waitpid(Pid::from_raw(*p), Some(WaitPidFlag::WNOHANG));
    }
}
