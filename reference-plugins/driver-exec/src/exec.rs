//! ExecTask: run a command in a task's context and return its output (Nomad's script checks).
//!
//! "The task's context" for a driver without isolation is the task's environment and its
//! task directory as working directory. With the chroot or image variant it is also the
//! task's mount namespace and root (working directory `/`); with dynamic-users, the task's
//! user and cgroup (`confine.rs`). The command runs in a process group of its own; at the
//! timeout the whole group is killed and the call fails with DEADLINE_EXCEEDED.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use nomad_conform_proto::nomad::drivers::{ExecTaskRequest, ExecTaskResponse};
use tonic::Status;

use crate::faults::Fault;
use crate::plugin::Plugin;
use crate::rpc;
use crate::tasks::Task;
use crate::variants::Variant;
use crate::{confine, isolation, process};

/// Whether exec is on (the no-exec variant turns it off, and Capabilities says so).
pub fn check_enabled(plugin: &Plugin) -> Result<(), Status> {
    if plugin.variants.has(Variant::NoExec) {
        return Err(Status::unimplemented(
            "this driver does not exec into tasks (no-exec variant)",
        ));
    }
    Ok(())
}

/// `argv` as a command in `task`'s environment and directory, and in whatever else confines
/// the task, without stdio set.
pub fn task_command(
    plugin: &Plugin,
    task: &Task,
    argv: &[String],
) -> Result<tokio::process::Command, Status> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| rpc::bad_request("the command is empty"))?;
    let entry = confine::for_exec(plugin, task)?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(&task.config.env)
        .current_dir(task_dir(task));
    if let Some(path) = isolation::missing_path(&plugin.variants, &task.config.env) {
        command.env("PATH", path);
    }
    entry.install_async(&mut command);
    Ok(command)
}

pub fn task_dir(task: &Task) -> PathBuf {
    PathBuf::from(&task.config.alloc_dir).join(&task.config.name)
}

pub async fn exec_task(
    plugin: &Plugin,
    request: ExecTaskRequest,
) -> Result<ExecTaskResponse, Status> {
    check_enabled(plugin)?;
    let task = plugin.task(&request.task_id)?;
    let timeout = request
        .timeout
        .and_then(|t| Duration::try_from(t).ok())
        .ok_or_else(|| rpc::bad_request("ExecTask needs a timeout"))?;
    let mut command = task_command(plugin, &task, &request.command)?;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = command
        .spawn()
        .map_err(|err| rpc::failed(format!("failed to run {:?}: {err}", request.command[0])))?;
    let group = child.id().map(|pid| Pid::from_raw(pid as i32));

    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(output) => output.map_err(|err| rpc::failed(format!("failed to run: {err}")))?,
        Err(_) => {
            if let Some(group) = group {
                let _ = killpg(group, Signal::SIGKILL);
            }
            return Err(Status::deadline_exceeded(format!(
                "the command did not finish within {:.3}s and was killed",
                timeout.as_secs_f64()
            )));
        }
    };
    let (stdout, stderr) = if plugin.faults.has(Fault::ExecNoOutput) {
        (Vec::new(), Vec::new())
    } else {
        (output.stdout, output.stderr)
    };
    Ok(ExecTaskResponse {
        stdout,
        stderr,
        result: Some(process::exit_result(output.status)),
    })
}
