//! Per-key locks that serialise operations on one volume, snapshot or name.
//!
//! The spec lets a plugin answer a second concurrent call for the same volume with ABORTED;
//! this plugin waits instead: calls that change a volume take its lock and run one after the
//! other, so a retried or duplicated call simply sees the first one's result. Calls on
//! different volumes run in parallel. Reads (List*, Get*, Validate*) take no lock.
//!
//! Lock order, to rule out deadlocks: a name or group lock before an id lock; a call that
//! needs several id locks (a group snapshot's volumes or members) takes them all at once with
//! [`Locks::lock_all`], in sorted order, and every other call holds at most one id lock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// What a lock protects.
#[derive(Clone, Copy, Debug)]
pub enum LockKey<'a> {
    /// A CreateVolume name: creating it must happen once.
    VolumeName(&'a str),
    /// An existing volume.
    Volume(&'a str),
    /// A CreateSnapshot name.
    SnapshotName(&'a str),
    /// An existing snapshot.
    Snapshot(&'a str),
    /// A CreateVolumeGroupSnapshot name.
    GroupSnapshotName(&'a str),
    /// An existing group snapshot.
    GroupSnapshot(&'a str),
}

impl LockKey<'_> {
    fn to_key(self) -> String {
        match self {
            LockKey::VolumeName(name) => format!("volume-name/{name}"),
            LockKey::Volume(id) => format!("volume/{id}"),
            LockKey::SnapshotName(name) => format!("snapshot-name/{name}"),
            LockKey::Snapshot(id) => format!("snapshot/{id}"),
            LockKey::GroupSnapshotName(name) => format!("group-snapshot-name/{name}"),
            LockKey::GroupSnapshot(id) => format!("group-snapshot/{id}"),
        }
    }
}

#[derive(Default)]
pub struct Locks {
    entries: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
}

/// Holds a key's lock until dropped.
pub struct LockGuard<'a> {
    locks: &'a Locks,
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Locks {
    /// Waits until no other call holds `key`, then holds it until the guard is dropped.
    pub async fn lock(&self, key: LockKey<'_>) -> LockGuard<'_> {
        let key = key.to_key();
        let mutex = {
            let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(entries.entry(key.clone()).or_default())
        };
        let guard = mutex.lock_owned().await;
        LockGuard {
            locks: self,
            key,
            guard: Some(guard),
        }
    }

    /// Locks several keys of one kind, in sorted order (so two such calls cannot wait for
    /// each other), each key once. Dropping the vector releases them.
    pub async fn lock_all<'k>(
        &self,
        ids: &'k [String],
        key: impl Fn(&'k str) -> LockKey<'k>,
    ) -> Vec<LockGuard<'_>> {
        let mut sorted: Vec<&str> = ids.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut guards = Vec::with_capacity(sorted.len());
        for id in sorted {
            guards.push(self.lock(key(id)).await);
        }
        guards
    }
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        // Forget the entry once nobody holds or waits for it, so the map does not grow with
        // every name ever used. Holders and waiters own a clone of the Arc, and clones are only
        // made under the map's lock, so a count of 1 (the map's own) means nobody else.
        let mut entries = self
            .locks
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if entries
            .get(&self.key)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            entries.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn one_key_is_held_by_one_caller_at_a_time() {
        let locks = Arc::new(Locks::default());
        let first = locks.lock(LockKey::Volume("a")).await;
        // Another key is free.
        drop(locks.lock(LockKey::Volume("b")).await);
        // The same key waits.
        let waiter = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                let _held = locks.lock(LockKey::Volume("a")).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        drop(first);
        waiter.await.expect("waiter finishes");
        assert!(locks.entries.lock().expect("not poisoned").is_empty());
    }

    #[tokio::test]
    async fn lock_all_takes_each_key_once_and_releases_them() {
        let locks = Locks::default();
        let ids = ["b".to_string(), "a".to_string(), "b".to_string()];
        let held = locks.lock_all(&ids, LockKey::Volume).await;
        assert_eq!(held.len(), 2);
        drop(held);
        assert!(locks.entries.lock().expect("not poisoned").is_empty());
    }
}
