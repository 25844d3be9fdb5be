//! The tasks this plugin knows, kept in memory only.
//!
//! Nomad keeps each task's handle and gives it back through RecoverTask after a plugin
//! restart, so the driver needs no state on disk beyond what its supervisors write (the exit
//! status files). A [`Task`] is created by StartTask or RecoverTask and forgotten by
//! DestroyTask.
//!
//! Each running task has a watcher that waits for its supervisor to exit, reads the exit
//! status the supervisor recorded, and publishes it on a `watch` channel: every WaitTask,
//! however many and whenever they come, reads that one channel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use nomad_conform_proto::nomad::drivers::{ExitResult, TaskConfig};
use tokio::sync::watch;

use crate::events::Events;
use crate::handle::DriverState;
use crate::process::{self, TaskProcesses};
use crate::supervisor;

/// How often the watcher of a recovered task looks at its supervisor.
const ADOPTED_POLL: Duration = Duration::from_millis(100);

/// How a task ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Exit {
    pub result: ExitResult,
    pub completed_at: SystemTime,
    /// Set when the exit status is unknown (the supervisor died without recording it).
    pub error: Option<String>,
}

/// How the plugin learns that a supervisor has exited.
pub enum Supervisor {
    /// Started by this plugin process: waiting for the child also reaps it.
    Child(tokio::process::Child),
    /// Found again by RecoverTask: not our child, so we poll.
    Adopted(i32),
}

pub struct Task {
    /// The TaskConfig StartTask received (or the handle's, after RecoverTask).
    pub config: TaskConfig,
    pub state: DriverState,
    pub started_at: SystemTime,
    pub processes: TaskProcesses,
    exit: watch::Receiver<Option<Exit>>,
    /// WaitTask calls made while the task ran (for the wait-single-waiter fault).
    running_waiters: AtomicUsize,
}

impl Task {
    /// A running task, with a watcher that records its exit.
    pub fn running(
        config: TaskConfig,
        state: DriverState,
        processes: TaskProcesses,
        supervisor: Supervisor,
        events: Events,
    ) -> Arc<Task> {
        let (sender, exit) = watch::channel(None);
        let task = Arc::new(Task {
            started_at: supervisor::from_unix_nanos(state.started_at_unix_nanos),
            config,
            state,
            processes,
            exit,
            running_waiters: AtomicUsize::new(0),
        });
        let status_file = task.state.status_file.clone();
        let config = task.config.clone();
        tokio::spawn(async move {
            let exit = watch_exit(supervisor, &status_file).await;
            events.emit(&config, describe(&exit), &[]);
            let _ = sender.send(Some(exit));
        });
        task
    }

    /// A task that had already exited when it was recovered.
    pub fn exited(
        config: TaskConfig,
        state: DriverState,
        processes: TaskProcesses,
        exit: Exit,
    ) -> Arc<Task> {
        let (_, receiver) = watch::channel(Some(exit));
        Arc::new(Task {
            started_at: supervisor::from_unix_nanos(state.started_at_unix_nanos),
            config,
            state,
            processes,
            exit: receiver,
            running_waiters: AtomicUsize::new(0),
        })
    }

    /// How the task ended, or None while it runs.
    pub fn exit(&self) -> Option<Exit> {
        self.exit.borrow().clone()
    }

    /// Waits until the task has ended.
    pub async fn wait(&self) -> Exit {
        let mut exit = self.exit.clone();
        match exit.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone().expect("waited for Some"),
            // The watcher always sends before it ends; this is only for completeness.
            Err(_) => Exit {
                result: ExitResult::default(),
                completed_at: SystemTime::now(),
                error: Some("the task's watcher ended without an exit status".into()),
            },
        }
    }

    /// Learns of the task's end through two pollers in a row, as nomad-driver-lxc does (its
    /// monitor, waitTillStopped, looks every 2 s; its WaitTask looks at the monitor every 2 s):
    /// the end is seen on the first tick after it, and reported one tick later.
    pub async fn poll_exit(&self, period: Duration) -> Exit {
        loop {
            tokio::time::sleep(period).await;
            if let Some(exit) = self.exit() {
                tokio::time::sleep(period).await;
                return exit;
            }
        }
    }

    /// Counts a WaitTask made while the task runs; returns how many came before it.
    pub fn count_running_waiter(&self) -> usize {
        self.running_waiters.fetch_add(1, Ordering::SeqCst)
    }
}

/// Waits for the supervisor to exit, then reads what it recorded.
async fn watch_exit(supervisor: Supervisor, status_file: &std::path::Path) -> Exit {
    match supervisor {
        Supervisor::Child(mut child) => {
            let _ = child.wait().await;
        }
        Supervisor::Adopted(pid) => {
            while process::is_running(pid) && supervisor::read_exit(status_file).is_none() {
                tokio::time::sleep(ADOPTED_POLL).await;
            }
        }
    }
    exit_from_status_file(status_file).unwrap_or_else(|| Exit {
        result: ExitResult {
            exit_code: -1,
            ..Default::default()
        },
        completed_at: SystemTime::now(),
        error: Some("the task's supervisor exited without recording an exit status".into()),
    })
}

/// The exit the status file records, if it records one.
pub fn exit_from_status_file(status_file: &std::path::Path) -> Option<Exit> {
    match supervisor::read_exit(status_file)? {
        Ok(record) => Some(Exit {
            result: ExitResult {
                exit_code: record.exit_code,
                signal: record.signal,
                oom_killed: false,
            },
            completed_at: supervisor::from_unix_nanos(record.completed_at_unix_nanos),
            error: None,
        }),
        Err(error) => Some(Exit {
            result: ExitResult {
                exit_code: -1,
                ..Default::default()
            },
            completed_at: SystemTime::now(),
            error: Some(error),
        }),
    }
}

/// The TaskEvents message for an exit.
fn describe(exit: &Exit) -> String {
    match (&exit.error, exit.result.signal) {
        (Some(error), _) => format!("Task exit status unknown: {error}"),
        (None, 0) => format!("Task exited with code {}", exit.result.exit_code),
        (None, signal) => format!(
            "Task killed by signal {signal} (exit code {})",
            exit.result.exit_code
        ),
    }
}

/// Every task the plugin knows, by id.
#[derive(Default)]
pub struct TaskTable {
    tasks: Mutex<HashMap<String, Arc<Task>>>,
}

impl TaskTable {
    pub fn get(&self, id: &str) -> Option<Arc<Task>> {
        self.lock().get(id).cloned()
    }

    pub fn contains(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    pub fn insert(&self, task: Arc<Task>) {
        self.lock().insert(task.config.id.clone(), task);
    }

    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    pub fn all(&self) -> Vec<Arc<Task>> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Task>>> {
        // A panic while holding the lock leaves the map itself intact.
        self.tasks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
