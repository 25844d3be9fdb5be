//! Volumes a node-only run claims: a node plugin cannot create volumes, so the user names
//! existing ones (`--volume ID[,CONTEXT]`), as `nomad volume register` does with its `external_id`
//! and `context`. Each clause that needs a volume takes one from the pool for as long as it runs
//! (a single-node-writer volume can be published at one target on the node at a time), and gives
//! it back once its cleanup has unpublished and unstaged it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ledger::{Resource, TeardownOutcome};

/// An existing volume, as registered with Nomad.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserVolume {
    pub id: String,
    pub context: HashMap<String, String>,
}

/// Parse `ID` or `ID,{"key":"value"}`.
pub fn parse_volume(arg: &str) -> Result<UserVolume, String> {
    let (id, context) = match arg.split_once(',') {
        Some((id, json)) => {
            let context: HashMap<String, String> = serde_json::from_str(json).map_err(|e| {
                format!("--volume {arg:?}: the context after the comma must be a JSON object of strings: {e}")
            })?;
            (id, context)
        }
        None => (arg, HashMap::new()),
    };
    let id = id.trim();
    if id.is_empty() {
        return Err(format!(
            "--volume {arg:?}: the volume ID is empty (ID[,CONTEXT-JSON])"
        ));
    }
    Ok(UserVolume {
        id: id.to_string(),
        context,
    })
}

/// The run's volumes, lent to one clause at a time.
#[derive(Debug)]
pub struct VolumePool {
    free: Arc<Mutex<Vec<UserVolume>>>,
    available: Arc<Semaphore>,
}

impl VolumePool {
    pub fn new(volumes: Vec<UserVolume>) -> VolumePool {
        VolumePool {
            available: Arc::new(Semaphore::new(volumes.len())),
            free: Arc::new(Mutex::new(volumes)),
        }
    }

    /// Wait for a free volume; the lease returns it to the pool when torn down.
    pub async fn lease(&self) -> Lease {
        let permit = self
            .available
            .clone()
            .acquire_owned()
            .await
            .expect("the pool's semaphore is never closed");
        let volume = self
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .expect("a permit means a free volume");
        Lease {
            volume,
            pool: self.free.clone(),
            permit: Some(permit),
        }
    }
}

/// One volume lent to a clause.
#[derive(Debug)]
pub struct Lease {
    pub volume: UserVolume,
    pool: Arc<Mutex<Vec<UserVolume>>>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Resource for Lease {
    fn describe(&self) -> String {
        format!("the loan of volume {:?}", self.volume.id)
    }

    fn teardown(mut self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        self.pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.volume.clone());
        drop(self.permit.take());
        Box::pin(async { TeardownOutcome::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_arguments() {
        assert_eq!(
            parse_volume("vol-1").unwrap(),
            UserVolume {
                id: "vol-1".into(),
                context: HashMap::new()
            }
        );
        let v = parse_volume(r#"vol-2,{"server":"10.0.0.2","share":"/a,b"}"#).unwrap();
        assert_eq!(v.id, "vol-2");
        assert_eq!(v.context["share"], "/a,b");
        assert!(parse_volume(",{}").unwrap_err().contains("empty"));
        assert!(parse_volume("v,[1]").unwrap_err().contains("JSON object"));
    }

    #[tokio::test]
    async fn one_clause_at_a_time_per_volume() {
        let pool = Arc::new(VolumePool::new(vec![parse_volume("only").unwrap()]));
        let first = pool.lease().await;
        let p = pool.clone();
        let second = tokio::spawn(async move { p.lease().await.volume.id });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!second.is_finished(), "the volume was lent twice");
        Box::new(first).teardown().await;
        assert_eq!(second.await.unwrap(), "only");
    }
}
