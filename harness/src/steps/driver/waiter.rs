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
    /// Make the WaitTask call now, in the background, and return once it has been handed to the
    /// connection: its first poll has queued the request on the channel, so a call the clause
    /// makes next (a signal that ends the task) goes out after it, as in Nomad, where WaitTask
    /// is open long before anything can end the task. A spawned call that a busy machine had
    /// not polled yet would reach the plugin after the task's exit, and a plugin whose late
    /// WaitTask never answers would then fail the clause by luck.
    pub async fn start(client: Client, task_id: String) -> Waiter {
        let (tx, answer) = watch::channel(None);
        let (issued_tx, issued) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let mut call = std::pin::pin!(client.wait_task(&task_id, OPEN_FOR));
            let mut issued_tx = Some(issued_tx);
            let (rpc, _) = std::future::poll_fn(|cx| {
                let polled = call.as_mut().poll(cx);
                if let Some(t) = issued_tx.take() {
                    let _ = t.send(());
                }
                polled
            })
            .await;
            let _ = tx.send(Some(rpc));
        });
        let _ = issued.await;
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
