//! The node's attachment budget: a plugin that reports `max_volumes_per_node = N` is never
//! driven past N volumes attached to the node at once, however many clauses run together.
//!
//! Nomad's scheduler places at most N volumes on a node (`NodeGetInfo`, fed to the scheduler's
//! per-node limit), so a plugin may refuse the N+1-th ControllerPublishVolume (or stage) with
//! RESOURCE_EXHAUSTED. Clauses that attach volumes draw on one budget of N attachments: a
//! clause takes one attachment the first time it publishes or stages a volume, and holds it
//! until its cleanup has unpublished everything (the hold is registered in the clause's ledger
//! before the publish's own undo, so it is released after it). A clause that needs more than one
//! attachment says so with a tag and takes them all before it starts (`@attaches-all` for the
//! clause that fills the node), so no clause ever waits while holding: no deadlock, and the
//! verdicts do not depend on `--jobs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ledger::{Resource, TeardownOutcome};

/// The budget of one run.
#[derive(Debug)]
pub struct AttachmentBudget {
    limit: u32,
    slots: Arc<Semaphore>,
}

/// How many attachments a clause declares it needs up front, from its tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Declared {
    /// Nothing up front: one attachment is taken at the first publish or stage.
    Lazy,
    /// This many before the clause starts.
    Count(u32),
    /// The whole node.
    All,
}

impl Declared {
    /// From a clause's tags (without `@`): `attaches-all`, `attaches-2`, ...
    pub fn from_tags<'a>(tags: impl IntoIterator<Item = &'a String>) -> Declared {
        for t in tags {
            match t.strip_prefix("attaches-") {
                Some("all") => return Declared::All,
                Some(n) => {
                    if let Ok(n) = n.parse::<u32>() {
                        return Declared::Count(n);
                    }
                }
                None => {}
            }
        }
        Declared::Lazy
    }
}

impl AttachmentBudget {
    /// A budget of `max_volumes_per_node`; none when the node sets no limit (0 or less).
    pub fn for_limit(max_volumes_per_node: i64) -> Option<AttachmentBudget> {
        let limit = u32::try_from(max_volumes_per_node)
            .ok()
            .filter(|n| *n > 0)?;
        Some(AttachmentBudget {
            limit,
            slots: Arc::new(Semaphore::new(limit as usize)),
        })
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Wait for `n` attachments (at most the limit); returns the hold and how long it waited.
    pub async fn take(&self, n: u32) -> (Hold, Duration) {
        let n = n.clamp(1, self.limit);
        let started = Instant::now();
        let permit = self
            .slots
            .clone()
            .acquire_many_owned(n)
            .await
            .expect("the budget's semaphore is never closed");
        (
            Hold {
                count: n,
                permit: Some(permit),
            },
            started.elapsed(),
        )
    }
}

/// Attachments a clause holds; given back when its ledger reaches it (after the clause's
/// publications were undone).
#[derive(Debug)]
pub struct Hold {
    count: u32,
    permit: Option<OwnedSemaphorePermit>,
}

impl Hold {
    pub fn count(&self) -> u32 {
        self.count
    }
}

impl Resource for Hold {
    fn describe(&self) -> String {
        format!("{} of the node's attachments", self.count)
    }

    fn teardown(mut self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        drop(self.permit.take());
        Box::pin(async { TeardownOutcome::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_limit_no_budget() {
        assert!(AttachmentBudget::for_limit(0).is_none());
        assert!(AttachmentBudget::for_limit(-3).is_none());
        assert_eq!(AttachmentBudget::for_limit(3).unwrap().limit(), 3);
    }

    #[test]
    fn declared_from_tags() {
        let tags = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(Declared::from_tags(&tags(&["must"])), Declared::Lazy);
        assert_eq!(Declared::from_tags(&tags(&["attaches-all"])), Declared::All);
        assert_eq!(
            Declared::from_tags(&tags(&["must", "attaches-2"])),
            Declared::Count(2)
        );
    }

    #[tokio::test]
    async fn never_more_than_the_limit_at_once() {
        let budget = Arc::new(AttachmentBudget::for_limit(3).unwrap());
        let held = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let most = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let mut tasks = Vec::new();
        for i in 0..12u32 {
            let (budget, held, most) = (budget.clone(), held.clone(), most.clone());
            tasks.push(tokio::spawn(async move {
                let n = if i % 5 == 0 { 3 } else { 1 };
                let (hold, _) = budget.take(n).await;
                let now = held.fetch_add(hold.count(), std::sync::atomic::Ordering::SeqCst)
                    + hold.count();
                most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                held.fetch_sub(hold.count(), std::sync::atomic::Ordering::SeqCst);
                Box::new(hold).teardown().await;
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 3);
    }
}
