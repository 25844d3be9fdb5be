//! What a driver clause leaves when it ends: every task it started is destroyed with force on
//! the plugin instance still running (as Nomad does after a task exits, with Nomad's patience:
//! no deadline but the harness's safety cap, the profile's task_call_deadline; a slow answer
//! is noted, never a leak), every instance is shut down as Nomad
//! shuts plugins down, and any process still carrying a task's marker is killed.
//!
//! Leaks are judged two ways, because containers and VMs hide their processes: a task process
//! left in /proc after a DestroyTask(force) that succeeded, and a task the driver itself still
//! reports running afterwards (InspectTask says RUNNING, or WaitTask does not come back while
//! the driver does not call the task unknown), or a DestroyTask that never answered.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use super::Instance;
use crate::ledger::{Resource, TeardownOutcome};
use crate::plugins::driver::taskconfig::{kill_marked, marked_processes};
use crate::plugins::driver::taskhost::{Cgroups, cgroup_members, destroy_cgroup, unmount_under};
use crate::plugins::driver::{HostTimings, shutdown_like_nomad};
use crate::recorder::CaseHandle;

#[derive(Debug, Default)]
struct Inner {
    instances: Vec<Arc<Instance>>,
    /// (task ID, marker) of every task a StartTask was sent for.
    tasks: Vec<(String, String)>,
    /// The cgroups the harness made for them.
    cgroups: Vec<std::path::PathBuf>,
}

/// The clause's plugin instances (the current one last) and tasks, shared by the World and
/// its cleanup.
#[derive(Clone, Debug, Default)]
pub struct Instances {
    inner: Arc<Mutex<Inner>>,
}

impl Instances {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn push(&self, i: Arc<Instance>) {
        self.lock().instances.push(i);
    }

    pub fn current(&self) -> Option<Arc<Instance>> {
        self.lock().instances.last().cloned()
    }

    pub fn track_task(&self, id: &str, marker: &str) {
        self.lock().tasks.push((id.to_string(), marker.to_string()));
    }

    pub fn track_cgroup(&self, cgroup: Option<std::path::PathBuf>) {
        if let Some(c) = cgroup
            && !self.lock().cgroups.contains(&c)
        {
            self.lock().cgroups.push(c);
        }
    }

    /// The ledger entry that undoes all of it; `alloc_dirs` is where the clause builds its
    /// tasks' allocation directories.
    pub fn cleanup(
        &self,
        timings: HostTimings,
        rpc: Duration,
        case: CaseHandle,
        alloc_dirs: std::path::PathBuf,
        cgroups: Cgroups,
    ) -> Cleanup {
        Cleanup {
            instances: self.clone(),
            timings,
            rpc,
            case,
            alloc_dirs,
            cgroups,
        }
    }
}

/// Registered first in a driver clause's ledger, so it runs last.
pub struct Cleanup {
    instances: Instances,
    timings: HostTimings,
    rpc: Duration,
    case: CaseHandle,
    alloc_dirs: std::path::PathBuf,
    cgroups: Cgroups,
}

impl Cleanup {
    fn push_event(&self, rpc: &crate::plugins::driver::DriverRpc) {
        crate::recorder::lock(&self.case)
            .events
            .push(rpc.event(0, None));
    }

    /// A task the driver still runs is ended as Nomad's client ends one: StopTask (the task's
    /// kill_timeout, here 1 s, and no kill signal), then its WaitTask, then DestroyTask(force)
    /// (task_runner.go: handleKill, then clearDriverHandle). Nomad calls DestroyTask(force) on a
    /// running task only on its restore path; a driver that gives such a task a grace of its
    /// own (nomad-driver-lxc waits a minute) is judged for it by DRIVER-DESTROY-PROMPT, not
    /// made to wait it out in every clause's cleanup. Nothing here is judged.
    async fn stop_if_running(&self, inst: &Instance, id: &str) {
        let (inspect, _) = inst.client.inspect_task(id, self.rpc).await;
        if !super::lifecycle::task_running(&inspect) {
            return;
        }
        let req = crate::plugins::driver::drivers::StopTaskRequest {
            task_id: id.to_string(),
            timeout: super::lifecycle::duration(Duration::from_secs(1)),
            signal: String::new(),
        };
        let (stop, _) = inst.client.stop_task(req, self.timings.task_call).await;
        self.push_event(&stop);
        if stop.ok() {
            let (wait, _) = inst.client.wait_task(id, self.rpc).await;
            self.push_event(&wait);
        }
    }

    /// What the driver says of task `id` after it was destroyed, when it says the task still
    /// runs: InspectTask answers RUNNING, or, when InspectTask tells neither that the task is
    /// unknown nor that it exited, a WaitTask that does not come back within the profile's
    /// rpc_deadline (the harness's "soon": Nomad asks nothing after DestroyTask).
    async fn still_running(&self, inst: &Instance, id: &str) -> Option<String> {
        let (inspect, _) = inst.client.inspect_task(id, self.rpc).await;
        let running = super::lifecycle::task_running(&inspect);
        let unknown = super::lifecycle::task_unknown(&inspect);
        let exited = inspect.ok()
            && !running
            && inspect
                .response
                .as_ref()
                .and_then(|r| r.pointer("/task/state"))
                .and_then(|s| s.as_i64())
                == Some(crate::plugins::driver::drivers::TaskState::Exited as i64);
        if !running && (unknown || exited) {
            return None;
        }
        let (wait, _) = inst.client.wait_task(id, self.rpc).await;
        let verdict = if running {
            Some(format!(
                "InspectTask says RUNNING; WaitTask {}",
                wait_text(&wait, self.rpc)
            ))
        } else if wait.timed_out {
            Some(format!(
                "WaitTask did not come back within {} and InspectTask answered {}",
                crate::fmt_duration(self.rpc),
                inspect.outcome()
            ))
        } else {
            None
        };
        if verdict.is_some() {
            self.push_event(&inspect);
            self.push_event(&wait);
        }
        verdict
    }
}

fn wait_text(wait: &crate::plugins::driver::DriverRpc, within: Duration) -> String {
    if wait.timed_out {
        format!("did not come back within {}", crate::fmt_duration(within))
    } else {
        format!("answered {}", wait.outcome())
    }
}

impl Resource for Cleanup {
    fn describe(&self) -> String {
        "the clause's plugin instances and tasks".into()
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        Box::pin(async move {
            let (instances, tasks, cgroups) = {
                let i = self.instances.lock();
                (i.instances.clone(), i.tasks.clone(), i.cgroups.clone())
            };
            let mut out = TeardownOutcome::default();
            let live = instances
                .iter()
                .rev()
                .find(|i| i.process.is_alive())
                .cloned();
            let mut destroyed = Vec::new();
            if let Some(inst) = &live {
                for (id, marker) in &tasks {
                    self.stop_if_running(inst, id).await;
                    let (rpc, _) = inst
                        .client
                        .destroy_task(id, true, self.timings.task_call)
                        .await;
                    self.push_event(&rpc);
                    if rpc.timed_out {
                        out.leaked.push(format!(
                            "task {id}: the cleanup's DestroyTask(force) did not answer within {} (the harness's safety cap, the profile's task_call_deadline; Nomad's client waits for it without a deadline)",
                            crate::fmt_duration(self.timings.task_call)
                        ));
                        continue;
                    }
                    if rpc.duration > self.rpc {
                        out.notes.push(format!(
                            "cleanup: DestroyTask(force) of task {id} took {}",
                            crate::fmt_duration(rpc.duration)
                        ));
                    }
                    if rpc.ok() {
                        destroyed.push(marker.clone());
                    }
                    if let Some(why) = self.still_running(inst, id).await {
                        out.leaked.push(format!(
                            "task {id}: after DestroyTask(force) ({}) the driver still runs it: {why}",
                            rpc.outcome()
                        ));
                    }
                }
            }
            // What DestroyTask(force) accepted must be gone (a moment for the kernel).
            for marker in &destroyed {
                let mut left = marked_processes(marker);
                for _ in 0..40 {
                    if left.is_empty() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    left = marked_processes(marker);
                }
                for p in left {
                    out.leaked.push(format!(
                        "task process {p} was still running after DestroyTask(force) succeeded (the harness killed it)"
                    ));
                }
            }
            for inst in &instances {
                if inst.process.is_alive() {
                    shutdown_like_nomad(&inst.client, &inst.process, &self.timings).await;
                }
                inst.client.close();
                inst.process.kill_now().await;
            }
            // A task's own cgroup (cgroup v2) shows what the driver left in it, whatever the
            // processes' environment; then the client's last-resort kill and removal.
            for cg in &cgroups {
                let left = cgroup_members(&self.cgroups, cg);
                if !left.is_empty() && !destroyed.is_empty() {
                    out.leaked.push(format!(
                        "processes {left:?} were still in the task's cgroup {} after DestroyTask(force) (the harness killed them through cgroup.kill, as Nomad's client does)",
                        cg.display()
                    ));
                }
                destroy_cgroup(&self.cgroups, cg);
            }
            // Whatever still runs in the clause's allocation directories (a task whose
            // environment the harness cannot read included) is ended too; after a
            // DestroyTask(force) that succeeded it is the driver's leak.
            let stray = crate::process::processes_in(&self.alloc_dirs);
            for p in &stray {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(p.pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            if !stray.is_empty() && !destroyed.is_empty() {
                out.leaked.push(format!(
                    "still running in the tasks' allocation directories after every plugin was shut down (the harness killed them): {}",
                    stray
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            // The client's own mounts of the task directories (tmpfs secrets, a chroot's
            // binds), and whatever a driver left mounted there.
            unmount_under(&self.alloc_dirs);
            for (_, marker) in &tasks {
                let killed = kill_marked(marker).await;
                if !killed.is_empty() && !destroyed.contains(marker) {
                    out.notes.push(format!(
                        "no running plugin could destroy task {marker}; the harness killed its processes: {}",
                        killed
                            .iter()
                            .map(|p| p.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
            out
        })
    }
}
