//! Entering a task's confinement: the last steps a task's process (forked by its supervisor)
//! and every command exec'd in the task (forked by the plugin) take between fork and exec.
//!
//! Each step is there only when a variant asks for it, in this order:
//! 1. join the task's cgroup (dynamic-users): write our pid into the cgroup's `cgroup.procs`
//!    (or v1 `tasks`) file, opened before the fork, while we are still root;
//! 2. join the task's mount namespace (execs with the chroot or image variant; the task's own
//!    process is born in it, since its supervisor made it before forking): `setns` on
//!    `/proc/<task pid>/ns/mnt`, opened before the fork;
//! 3. `chroot` into the task's root, then `chdir("/")` (chroot and image);
//! 4. become the task's dynamic workload user (dynamic-users): `setgroups([])`, `setgid(N)`,
//!    `setuid(N)`.
//!
//! Everything is opened or built before the fork, so that between fork and exec only plain
//! system calls run, which neither allocate nor take locks: the plugin that forks execs is
//! multi-threaded. A step that fails makes the spawn fail with its errno.

use std::ffi::CString;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use nix::sched::CloneFlags;
use nix::unistd::{Gid, Uid};
use tonic::Status;

use crate::plugin::Plugin;
use crate::tasks::Task;
use crate::{exec, isolation, process, rpc, users};

/// What a process does between fork and exec to enter its task's confinement; nothing by
/// default.
#[derive(Debug, Default)]
pub struct Entry {
    /// An open `cgroup.procs` (or `tasks`) file of the cgroup to join.
    pub cgroup: Option<File>,
    /// The task's mount namespace (`/proc/<pid>/ns/mnt`), to join.
    pub namespace: Option<OwnedFd>,
    /// The root to chroot into.
    pub root: Option<CString>,
    /// The uid and gid to become.
    pub user: Option<u32>,
}

impl Entry {
    /// Runs the steps in `command`'s child (the supervisor's task).
    pub fn install(self, command: &mut std::process::Command) {
        if self.is_empty() {
            return;
        }
        // SAFETY: `enter` makes only system calls that neither allocate nor lock.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(command, move || self.enter());
        }
    }

    /// Runs the steps in `command`'s child (an exec in the task).
    pub fn install_async(self, command: &mut tokio::process::Command) {
        if self.is_empty() {
            return;
        }
        // SAFETY: `enter` makes only system calls that neither allocate nor lock.
        unsafe {
            command.pre_exec(move || self.enter());
        }
    }

    fn is_empty(&self) -> bool {
        self.cgroup.is_none()
            && self.namespace.is_none()
            && self.root.is_none()
            && self.user.is_none()
    }

    /// The steps, in the child.
    fn enter(&self) -> std::io::Result<()> {
        if let Some(cgroup) = &self.cgroup {
            join_cgroup(cgroup)?;
        }
        if let Some(namespace) = &self.namespace {
            nix::sched::setns(namespace, CloneFlags::CLONE_NEWNS)?;
        }
        if let Some(root) = &self.root {
            nix::unistd::chroot(root.as_c_str())?;
            nix::unistd::chdir(c"/")?;
        }
        if let Some(id) = self.user {
            nix::unistd::setgroups(&[])?;
            nix::unistd::setgid(Gid::from_raw(id))?;
            nix::unistd::setuid(Uid::from_raw(id))?;
        }
        Ok(())
    }
}

/// Writes this process's pid, in decimal, to an open `cgroup.procs` or `tasks` file (one
/// write: the kernel takes a pid per write), without allocating.
fn join_cgroup(file: &File) -> std::io::Result<()> {
    let mut digits = [0u8; 10];
    let mut pid = std::process::id();
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    let mut file = file;
    file.write_all(&digits[start..])
}

/// A path as the C string `chroot` takes.
pub fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("the path {} contains a NUL byte", path.display()))
}

/// How a command exec'd in `task` enters it: its mount namespace and root (chroot, image), its
/// cgroup and user (dynamic-users). Nothing for the default driver.
pub fn for_exec(plugin: &Plugin, task: &Task) -> Result<Entry, Status> {
    let mut entry = Entry::default();
    if let Some(isolation) = isolation::of(&plugin.variants) {
        let pid = task.processes.task_pid;
        if task.exit().is_some() || !process::is_running(pid) {
            return Err(rpc::failed(
                "the task is not running: its root filesystem is gone with it",
            ));
        }
        let namespace = File::open(format!("/proc/{pid}/ns/mnt")).map_err(|err| {
            rpc::failed(format!(
                "failed to open the task's mount namespace (pid {pid}): {err}"
            ))
        })?;
        let task_state_dir = task.state.status_file.parent().unwrap_or(Path::new("/"));
        let root = isolation::root(isolation, &exec::task_dir(task), task_state_dir);
        entry.namespace = Some(namespace.into());
        entry.root = Some(c_path(&root).map_err(rpc::failed)?);
    }
    if let Some(user) = users::of_task(&plugin.variants, &task.config).map_err(rpc::failed)? {
        entry.cgroup = Some(users::open_cgroup(&user.cgroup).map_err(rpc::failed)?);
        entry.user = Some(user.id);
    }
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;
    use std::process::{Command, Stdio};

    use super::*;

    #[test]
    fn the_child_writes_its_own_pid_to_the_cgroup_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cgroup.procs");
        std::fs::write(&path, b"").unwrap();
        let entry = Entry {
            cgroup: Some(File::options().write(true).open(&path).unwrap()),
            ..Default::default()
        };
        let mut command = Command::new("/bin/sh");
        command
            .args(["-c", "echo $$"])
            .stdout(Stdio::piped())
            .stdin(Stdio::null());
        entry.install(&mut command);
        let mut child = command.spawn().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(child.wait().unwrap().success());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), out.trim());
        assert_eq!(out.trim(), child.id().to_string());
    }

    #[test]
    fn an_empty_entry_changes_nothing() {
        let mut command = Command::new("/bin/true");
        Entry::default().install(&mut command);
        assert!(command.status().unwrap().success());
    }

    #[test]
    fn paths_with_nul_bytes_are_refused() {
        assert!(c_path(Path::new("/a/b")).is_ok());
        let bad = std::ffi::OsStr::from_bytes(b"/a\0b");
        assert!(c_path(Path::new(bad)).unwrap_err().contains("NUL"));
    }
}
