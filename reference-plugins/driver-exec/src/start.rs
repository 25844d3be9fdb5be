//! StartTask and RecoverTask: how a task comes to be known to the plugin.
//!
//! StartTask validates the task config first (so a bad one leaves nothing behind), then has a
//! supervisor start `command args...` with the task's environment, in the task directory
//! (`<alloc_dir>/<task name>`), writing to the FIFOs Nomad gave (`stdout_path`,
//! `stderr_path`). Its handle carries what RecoverTask needs to find the task again. (With the
//! invisible-tasks variant, `invisible.rs` hides the environment from the task's processes;
//! with chroot or image, `isolation.rs` gives the task a root of its own; with dynamic-users,
//! `users.rs` checks the task's user and cgroup; with slow-start, StartTask first waits
//! [`SLOW_START_SECS`] (or `--slow-start-secs`), as a driver pulling an image does.)
//!
//! RecoverTask rebuilds a task from that handle after a plugin restart: if the supervisor
//! recorded an exit, the task has exited (maybe while no plugin was running); if the
//! supervisor is still running, the task is adopted and watched; otherwise it is lost.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use nomad_conform_proto::nomad::drivers::{
    ExitResult, RecoverTaskRequest, StartTaskRequest, StartTaskResponse, TaskConfig,
};
use tonic::Status;

use crate::faults::Fault;
use crate::handle::{self, DriverState, HANDLE_VERSION};
use crate::invisible::{self, Hidden};
use crate::isolation;
use crate::plugin::Plugin;
use crate::process::{self, TaskProcesses};
use crate::rpc;
use crate::supervisor::{self, Launch};
use crate::taskconfig;
use crate::tasks::{self, Supervisor, Task};
use crate::variants::{Variant, Variants};
use crate::{crash, log, users};

/// The file in a task's state directory where its supervisor records the exit.
const STATUS_FILE: &str = "exit-status.json";

/// How long StartTask waits before it starts a task with the slow-start variant, unless
/// `--slow-start-secs` says otherwise: longer than the 30 s a client might expect a start to
/// take (nomad-1.10's RPC deadline). The fixture uses 15 s, past the fast profile's 10 s.
pub const SLOW_START_SECS: u64 = 45;

pub async fn start_task(
    plugin: &Plugin,
    request: StartTaskRequest,
) -> Result<StartTaskResponse, Status> {
    let faults = &plugin.faults;
    let variants = &plugin.variants;
    if faults.has(Fault::PanicsInStart) {
        crash::panic_in_start_task(crash::NIL_DEREFERENCE);
    }
    let config = request
        .task
        .ok_or_else(|| rpc::bad_request("StartTask without a task"))?;
    if config.id.is_empty() {
        return Err(rpc::bad_request("StartTask with an empty task id"));
    }
    if plugin.tasks.contains(&config.id) {
        return Err(rpc::start_error(
            variants,
            format!("task with id {:?} is already started", config.id),
        ));
    }
    let spec = taskconfig::decode(&config.msgpack_driver_config, faults).map_err(|why| {
        if faults.has(Fault::BadConfigLeavesProcess) {
            start_stray_process(&config);
        }
        // bad-config-recoverable: a config that cannot be decoded never will be, yet it
        // is marked worth retrying.
        let recoverable = faults.has(Fault::BadConfigRecoverable);
        rpc::start_error_marked(variants, format!("invalid task config: {why}"), recoverable)
    })?;
    if faults.has(Fault::CrashesOnEmptyArgs) && spec.args.as_ref().is_some_and(Vec::is_empty) {
        crash::panic_in_start_task("args is an empty list (crashes-on-empty-args fault)");
    }
    let task_dir = Path::new(&config.alloc_dir).join(&config.name);
    if config.alloc_dir.is_empty() || !task_dir.is_dir() {
        return Err(rpc::start_error(
            variants,
            format!("task directory {} does not exist", task_dir.display()),
        ));
    }
    // healthy-but-start-fails: the runtime the fingerprint did not look for is missing.
    if faults.has(Fault::HealthyButStartFails) {
        return Err(rpc::start_error(
            variants,
            "failed to start task: runtime binary /usr/bin/firecracker does not exist",
        ));
    }
    // dynamic-users: a plain error, as a Go driver's fmt.Errorf reaches Nomad.
    let user = users::of_task(variants, &config).map_err(rpc::failed)?;
    let delay = start_delay(variants, plugin.slow_start);
    if !delay.is_zero() {
        log::info(
            "pulling the task's image (slow-start variant)",
            &[
                ("task_id", config.id.clone()),
                ("delay", format!("{}s", delay.as_secs())),
            ],
        );
        tokio::time::sleep(delay).await;
    }

    let status_file = prepare_state_dir(&plugin.state_dir, &config.id)
        .map_err(|why| rpc::start_error(variants, why))?;
    let task_state_dir = status_file.parent().unwrap_or(&plugin.state_dir);
    // chroot, image: the task's root.
    let isolation = isolation::of(variants).map(|isolation| {
        (
            isolation,
            isolation::root(isolation, &task_dir, task_state_dir),
        )
    });
    if let Some((isolation, root)) = &isolation {
        isolation::prepare(*isolation, root).map_err(|why| {
            remove_task_state(&status_file);
            rpc::start_error(variants, why)
        })?;
    }
    let env = task_env(&config, plugin);
    // invisible-tasks: the task's processes start with PATH only.
    let Hidden { argv, env } = if variants.has(Variant::InvisibleTasks) {
        invisible::hide(spec.argv(), &env, task_state_dir).map_err(|why| {
            remove_task_state(&status_file);
            rpc::start_error(variants, why)
        })?
    } else {
        Hidden {
            argv: spec.argv(),
            env,
        }
    };
    let (stdout, stderr) = if faults.has(Fault::LogsDropped) {
        (PathBuf::from("/dev/null"), PathBuf::from("/dev/null"))
    } else {
        (
            PathBuf::from(&config.stdout_path),
            PathBuf::from(&config.stderr_path),
        )
    };
    let own_session = !faults.has(Fault::TasksDieWithPlugin);
    let started = supervisor::launch(Launch {
        argv: &argv,
        env: &env,
        task_dir: &task_dir,
        stdout: &stdout,
        stderr: &stderr,
        status_file: &status_file,
        same_session: !own_session,
        isolation: isolation
            .as_ref()
            .map(|(isolation, root)| (*isolation, root.as_path())),
        alloc_dir: Path::new(&config.alloc_dir),
        user: user.as_ref(),
    })
    .await
    .map_err(|why| {
        // Nothing was started: leave nothing behind either.
        remove_task_state(&status_file);
        rpc::start_error(variants, why)
    })?;

    let state = DriverState {
        supervisor_pid: started.supervisor_pid,
        task_pid: started.task_pid,
        started_at_unix_nanos: supervisor::unix_nanos(SystemTime::now()),
        status_file,
    };
    let processes = TaskProcesses {
        task_pid: started.task_pid,
        supervisor_pid: started.supervisor_pid,
        own_session,
    };
    let handle = handle::for_started_task(&config, &state, faults, variants);
    let task = Task::running(
        config,
        state,
        processes,
        Supervisor::Child(started.child),
        plugin.events.clone(),
    );
    plugin.events.emit(
        &task.config,
        format!(
            "Task started by the exec-reference driver (pid {})",
            started.task_pid
        ),
        &[("pid", started.task_pid.to_string())],
    );
    log::info(
        "task started",
        &[
            ("task_id", task.config.id.clone()),
            ("pid", started.task_pid.to_string()),
        ],
    );
    plugin.tasks.insert(task);
    // crashes-on-empty-argument: reached only once a task has really started, as
    // nomad-driver-lxc's mountVolumes indexes a volume's "src:dst" parts after Create.
    if faults.has(Fault::CrashesOnEmptyArgument)
        && spec
            .args
            .as_ref()
            .is_some_and(|a| a.iter().any(String::is_empty))
    {
        crash::panic_in_start_task(
            "runtime error: index out of range [1] with length 1 (crashes-on-empty-argument fault)",
        );
    }
    Ok(StartTaskResponse {
        handle: Some(handle),
        ..Default::default()
    })
}

pub fn recover_task(plugin: &Plugin, request: RecoverTaskRequest) -> Result<(), Status> {
    let handle = request
        .handle
        .ok_or_else(|| rpc::bad_request("RecoverTask without a handle"))?;
    let config = handle
        .config
        .ok_or_else(|| rpc::bad_request("RecoverTask with a handle without config"))?;
    // Nomad sends only the handle; its config carries the id.
    if !request.task_id.is_empty() && request.task_id != config.id {
        return Err(rpc::bad_request(format!(
            "task_id {:?} differs from the handle's task id {:?}",
            request.task_id, config.id
        )));
    }
    if plugin.faults.has(Fault::RecoverFails) {
        return Err(rpc::failed("failed to recover task (recover-fails fault)"));
    }
    // recover-decodes-raw-config: re-reading the task config, which Nomad does not keep in
    // the handles it stores, so after an agent restart the field is empty. (Go's msgpack
    // decoder says EOF for no bytes; ours would take them for an empty map.)
    if plugin.faults.has(Fault::RecoverDecodesRawConfig) {
        let raw = &config.msgpack_driver_config;
        let decoded = if raw.is_empty() {
            Err("EOF".to_string())
        } else {
            taskconfig::decode(raw, &plugin.faults).map(|_| ())
        };
        decoded.map_err(|why| rpc::failed(format!("failed to decode driver config: {why}")))?;
    }
    if plugin.tasks.contains(&config.id) {
        // recover-refuses-known-task: Nomad recovers every task again when it reattaches to
        // this same plugin process after an agent restart.
        if plugin.faults.has(Fault::RecoverRefusesKnownTask) {
            return Err(rpc::failed("task already exists"));
        }
        return Ok(());
    }
    if handle.version != HANDLE_VERSION {
        return Err(rpc::failed(format!(
            "failed to recover task: handle version {} is not {HANDLE_VERSION}",
            handle.version
        )));
    }
    let state = DriverState::decode(&handle.driver_state)
        .map_err(|why| rpc::failed(format!("failed to recover task: {why}")))?;
    let processes = TaskProcesses {
        task_pid: state.task_pid,
        supervisor_pid: state.supervisor_pid,
        own_session: !plugin.faults.has(Fault::TasksDieWithPlugin),
    };

    let task = if let Some(mut exit) = tasks::exit_from_status_file(&state.status_file) {
        if plugin.faults.has(Fault::RecoverLosesExitCode) {
            exit.result = ExitResult::default();
        }
        Task::exited(config, state, processes, exit)
    } else if is_our_supervisor(&state) {
        Task::running(
            config,
            state.clone(),
            processes,
            Supervisor::Adopted(state.supervisor_pid),
            plugin.events.clone(),
        )
    } else {
        return Err(rpc::failed(format!(
            "failed to recover task: its supervisor (pid {}) is gone and recorded no exit \
             status in {}",
            state.supervisor_pid,
            state.status_file.display()
        )));
    };
    plugin.events.emit(
        &task.config,
        "Task recovered by a restarted exec-reference driver",
        &[],
    );
    log::info("task recovered", &[("task_id", task.config.id.clone())]);
    plugin.tasks.insert(task);
    Ok(())
}

/// How long StartTask waits before it starts the task: `slow_start` with the slow-start
/// variant (the image pull), else not at all.
fn start_delay(variants: &Variants, slow_start: Duration) -> Duration {
    if variants.has(Variant::SlowStart) {
        slow_start
    } else {
        Duration::ZERO
    }
}

/// The task's environment: Nomad's, unchanged (its NOMAD_* variables already describe the
/// task directory, the alloc directory, ports, ...). With the image variant, a PATH if Nomad
/// gave none (it gives image drivers no agent environment), as an image's config would.
fn task_env(config: &TaskConfig, plugin: &Plugin) -> HashMap<String, String> {
    if plugin.faults.has(Fault::EnvDropped) {
        return HashMap::new();
    }
    let mut env = config.env.clone();
    if plugin.faults.has(Fault::TaskDirEnvWrong) {
        env.insert("NOMAD_TASK_DIR".into(), config.alloc_dir.clone());
    }
    if let Some(path) = isolation::missing_path(&plugin.variants, &env) {
        env.insert("PATH".into(), path.into());
    }
    env
}

/// `<state dir>/<task id, made a file name>/`, created, without a stale status file; returns
/// the status file's path.
fn prepare_state_dir(state_dir: &Path, task_id: &str) -> Result<PathBuf, String> {
    let name: String = task_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = state_dir.join(name);
    std::fs::create_dir_all(&dir)
        .map_err(|err| format!("failed to create {}: {err}", dir.display()))?;
    let status_file = dir.join(STATUS_FILE);
    match std::fs::remove_file(&status_file) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(format!(
            "failed to remove the stale {}: {err}",
            status_file.display()
        )),
        _ => Ok(status_file),
    }
}

/// Removes what StartTask wrote into a task's state directory (the status file and, with the
/// invisible-tasks variant, the env file; with the image variant, the root's directory, empty
/// on the host), then the directory if that left it empty. Nothing else: the path may have
/// come back from a handle.
pub fn remove_task_state(status_file: &Path) {
    let Some(dir) = status_file.parent() else {
        return;
    };
    if let Err(err) = isolation::remove_root(dir) {
        log::warn(
            "failed to remove the task's root directory",
            &[
                (
                    "path",
                    dir.join(isolation::ROOTFS_DIR).display().to_string(),
                ),
                ("error", err.to_string()),
            ],
        );
    }
    for file in [status_file.to_path_buf(), dir.join(invisible::ENV_FILE)] {
        if let Err(err) = std::fs::remove_file(&file)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            log::warn(
                "failed to remove a task state file",
                &[
                    ("path", file.display().to_string()),
                    ("error", err.to_string()),
                ],
            );
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Whether the handle's supervisor still runs, and is really ours: a pid can be reused, so
/// its command line must name the same status file.
fn is_our_supervisor(state: &DriverState) -> bool {
    if !process::is_running(state.supervisor_pid) {
        return false;
    }
    let args = process::cmdline(state.supervisor_pid);
    let status_file = state.status_file.to_string_lossy();
    args.iter().any(|a| a == "supervise") && args.iter().any(|a| *a == status_file)
}

/// The bad-config-leaves-process fault: a process started for a config that is then refused,
/// in a group of its own, never cleaned up.
fn start_stray_process(config: &TaskConfig) {
    let mut command = std::process::Command::new("/bin/sh");
    command
        .args(["-c", "exec sleep 3600"])
        .env_clear()
        .envs(&config.env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let _ = command.spawn();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_waits_only_with_the_variant() {
        let slow = Duration::from_secs(SLOW_START_SECS);
        assert!(slow >= Duration::from_secs(45));
        assert_eq!(
            start_delay(&Variants::new([Variant::SlowStart]), slow),
            slow
        );
        assert_eq!(start_delay(&Variants::default(), slow), Duration::ZERO);
        assert_eq!(
            start_delay(
                &Variants::new([Variant::Image, Variant::DynamicUsers]),
                slow
            ),
            Duration::ZERO
        );
    }
}
