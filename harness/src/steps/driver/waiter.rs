//! Nomad's waiter. The client's task runner calls WaitTask as soon as StartTask (or
//! RecoverTask) returns, and keeps that call open until the task exits. The harness does the
//! same, so that every clause that needs a task's exit learns it the way Nomad does, from a
//! call made while the task was still running; only the clauses about WaitTask itself make
//! calls of their own (late, or several at once).

use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::plugins::driver::{Client, DriverRpc};

/// How long the waiter's call may stay open: longer than any clause.
const OPEN_FOR: Duration = Duration::from_secs(3600);

#[derive(Clone, Debug)]
pub struct Waiter {
    answer: watch::Receiver<Option<DriverRpc>>,
    started: Instant,
}

impl Waiter {
    /// Make the WaitTask call now, in the background.
    pub fn start(client: Client, task_id: String) -> Waiter {
        let (tx, answer) = watch::channel(None);
        tokio::spawn(async move {
            let (rpc, _) = client.wait_task(&task_id, OPEN_FOR).await;
            let _ = tx.send(Some(rpc));
        });
        Waiter {
            answer,
            started: Instant::now(),
        }
    }

    /// The call's answer, waiting up to `within` for it; None when it has not come.
    pub async fn answer(&self, within: Duration) -> Option<DriverRpc> {
        let mut rx = self.answer.clone();
        let got = tokio::time::timeout(within, rx.wait_for(Option::is_some)).await;
        match got {
            Ok(Ok(v)) => v.clone(),
            _ => None,
        }
    }

    /// Whether the call has been answered (the task ended, or the call failed).
    pub fn finished(&self) -> bool {
        self.answer.borrow().is_some()
    }

    /// How long the call has been open.
    pub fn open_for(&self) -> Duration {
        self.started.elapsed()
    }
}
