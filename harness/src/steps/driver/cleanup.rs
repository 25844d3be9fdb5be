//! What a driver clause leaves when it ends: every task it started is destroyed with force on
//! the plugin instance still running (as Nomad does after a task exits), every instance is shut
//! down as Nomad shuts plugins down, and any process still carrying a task's marker is killed.
//! A task process left after a DestroyTask(force) that succeeded is a leak of the plugin's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use super::Instance;
use crate::ledger::{Resource, TeardownOutcome};
use crate::plugins::driver::taskconfig::{kill_marked, marked_processes};
use crate::plugins::driver::{HostTimings, shutdown_like_nomad};
use crate::recorder::CaseHandle;

#[derive(Debug, Default)]
struct Inner {
    instances: Vec<Arc<Instance>>,
    /// (task ID, marker) of every task a StartTask was sent for.
    tasks: Vec<(String, String)>,
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

    /// The ledger entry that undoes all of it.
    pub fn cleanup(&self, timings: HostTimings, rpc: Duration, case: CaseHandle) -> Cleanup {
        Cleanup {
            instances: self.clone(),
            timings,
            rpc,
            case,
        }
    }
}

/// Registered first in a driver clause's ledger, so it runs last.
pub struct Cleanup {
    instances: Instances,
    timings: HostTimings,
    rpc: Duration,
    case: CaseHandle,
}

impl Resource for Cleanup {
    fn describe(&self) -> String {
        "the clause's plugin instances and tasks".into()
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        Box::pin(async move {
            let (instances, tasks) = {
                let i = self.instances.lock();
                (i.instances.clone(), i.tasks.clone())
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
                    let (rpc, _) = inst.client.destroy_task(id, true, self.rpc).await;
                    if rpc.ok() {
                        destroyed.push(marker.clone());
                    }
                    crate::recorder::lock(&self.case)
                        .events
                        .push(rpc.event(0, None));
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
