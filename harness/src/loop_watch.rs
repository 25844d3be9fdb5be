//! A clause's watch over the loop devices behind its block volumes: a cleanup entry of the
//! ledger that, once the clause's own cleanup has run, reports a device still attached to the
//! same file. It sits above both the ledger and the loop device helpers it uses.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::ledger::{Resource, TeardownOutcome};
use crate::loop_devices::{Attached, DETACH_GRACE, still_attached_after};

/// Loop devices seen behind a scenario's block volumes, checked once the scenario's cleanup
/// has run: one still attached to the same file is a leak (the plugin's unstage, unpublish
/// and delete all ran, and the device still pins the image).
#[derive(Clone, Debug, Default)]
pub struct LoopWatch {
    pub seen: Arc<Mutex<Vec<Attached>>>,
}

impl LoopWatch {
    pub fn note(&self, attached: Attached) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if !seen.contains(&attached) {
            seen.push(attached);
        }
    }

    pub fn seen(&self) -> Vec<Attached> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Resource for LoopWatch {
    fn describe(&self) -> String {
        "loop devices behind block volumes".into()
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        Box::pin(async move {
            let left = still_attached_after(&self.seen(), DETACH_GRACE).await;
            TeardownOutcome {
                leaked: left
                    .iter()
                    .map(|a| format!("{a} is still attached after the scenario's cleanup"))
                    .collect(),
                ..TeardownOutcome::default()
            }
        })
    }
}
