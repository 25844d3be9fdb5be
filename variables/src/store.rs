//! The replicated state: variables by (namespace, path) and the raft index.
//!
//! This is what survives a restart (contract B.3: state is raft-replicated; only the leader's
//! timers are in memory). Every write operation takes a new raft index first, as a raft log
//! entry does, even when the state machine then answers with a conflict or an error.
//! Semantics follow `nomad/state/state_store_variables.go` as the contract describes it:
//! - set refuses a locked variable unless the request carries the held lock ID (409 with a
//!   body of namespace and path only);
//! - cas compares `ModifyIndex` first (0 = create only), then behaves as set;
//! - delete of a missing variable succeeds; delete of a locked variable is refused;
//! - lock-acquire writes the request as is (items included) unless someone else holds a lock;
//! - lock-release keeps items, clears the lock and bumps `ModifyIndex` (not `ModifyTime`);
//!   with no request lock (the leader's delayed invalidation) it clears any holder's lock.

use std::collections::BTreeMap;

use crate::wire::{Variable, VariableLock, VariableMetadata};

/// Result of one state operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StateResult {
    /// Applied; the written metadata, if the operation writes one.
    Ok(Option<VariableMetadata>),
    /// Refused with a conflicting variable.
    Conflict(Conflict),
    /// Refused with a state error.
    Error(StateError),
}

/// The variable a conflict reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub variable: Variable,
    /// A placeholder (namespace and path only, never stored); Nomad then never shows items.
    pub placeholder: bool,
}

/// Errors of the lock-release state operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StateError {
    VariableMissing,
    LockMissing,
}

impl StateError {
    pub(crate) fn message(self) -> &'static str {
        match self {
            Self::VariableMissing => "variable doesn't exist",
            Self::LockMissing => "variable doesn't hold a lock",
        }
    }
}

/// Variables plus indexes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    variables: BTreeMap<(String, String), Variable>,
    last_index: u64,
    table_index: u64,
}

fn placeholder(namespace: &str, path: &str, lock: Option<VariableLock>) -> StateResult {
    StateResult::Conflict(Conflict {
        variable: Variable {
            metadata: VariableMetadata {
                namespace: namespace.to_string(),
                path: path.to_string(),
                lock,
                ..Default::default()
            },
            items: BTreeMap::new(),
        },
        placeholder: true,
    })
}

fn existing_conflict(variable: &Variable) -> StateResult {
    StateResult::Conflict(Conflict {
        variable: variable.clone(),
        placeholder: false,
    })
}

/// Nomad's `isLocked`: a held lock blocks a request without the same lock ID.
fn blocks(held: Option<&VariableLock>, request: Option<&VariableLock>) -> bool {
    match (held, request) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(held), Some(request)) => held.id != request.id,
    }
}

fn key(namespace: &str, path: &str) -> (String, String) {
    (namespace.to_string(), path.to_string())
}

impl Store {
    /// Takes the next raft index.
    pub(crate) fn next_index(&mut self) -> u64 {
        self.last_index += 1;
        self.last_index
    }

    /// Index of the last change to the variables table (at least 1, as Nomad reports it).
    pub(crate) fn table_index(&self) -> u64 {
        self.table_index.max(1)
    }

    pub(crate) fn get(&self, namespace: &str, path: &str) -> Option<&Variable> {
        self.variables.get(&key(namespace, path))
    }

    /// All variables in (namespace, path) order.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Variable> {
        self.variables.values()
    }

    /// `varSetTxn`: `variable` carries the request lock (if any) and the write time in both
    /// `create_time` and `modify_time`.
    pub(crate) fn set(&mut self, index: u64, mut variable: Variable) -> StateResult {
        let meta = &mut variable.metadata;
        if let Some(existing) = self.variables.get(&key(&meta.namespace, &meta.path)) {
            if blocks(existing.metadata.lock.as_ref(), meta.lock.as_ref()) {
                return placeholder(&meta.namespace, &meta.path, None);
            }
            meta.create_index = existing.metadata.create_index;
            meta.create_time = existing.metadata.create_time;
        } else {
            meta.create_index = index;
        }
        meta.modify_index = index;
        let written = meta.clone();
        self.variables
            .insert(key(&written.namespace, &written.path), variable);
        self.table_index = index;
        StateResult::Ok(Some(written))
    }

    /// `varSetCASTxn`: `cas` is the expected `ModifyIndex` (0 = must not exist).
    pub(crate) fn set_cas(&mut self, index: u64, variable: Variable, cas: u64) -> StateResult {
        let meta = &variable.metadata;
        match self.variables.get(&key(&meta.namespace, &meta.path)) {
            Some(existing) if cas == 0 || cas != existing.metadata.modify_index => {
                existing_conflict(existing)
            }
            None if cas != 0 => placeholder(&meta.namespace, &meta.path, None),
            _ => self.set(index, variable),
        }
    }

    /// `svDeleteTxn`; deleting over HTTP never carries a lock ID.
    pub(crate) fn delete(&mut self, index: u64, namespace: &str, path: &str) -> StateResult {
        let Some(existing) = self.variables.get(&key(namespace, path)) else {
            return StateResult::Ok(None);
        };
        if existing.metadata.lock.is_some() {
            return placeholder(namespace, path, None);
        }
        self.variables.remove(&key(namespace, path));
        self.table_index = index;
        StateResult::Ok(None)
    }

    /// `svDeleteCASTxn`.
    pub(crate) fn delete_cas(
        &mut self,
        index: u64,
        namespace: &str,
        path: &str,
        cas: u64,
    ) -> StateResult {
        match self.variables.get(&key(namespace, path)) {
            None if cas == 0 => StateResult::Ok(None),
            None => placeholder(namespace, path, None),
            Some(existing) if cas == 0 || cas != existing.metadata.modify_index => {
                existing_conflict(existing)
            }
            Some(_) => self.delete(index, namespace, path),
        }
    }

    /// `VarLockAcquire`: writes the whole request (items included) unless another lock is held.
    pub(crate) fn lock_acquire(&mut self, index: u64, variable: Variable) -> StateResult {
        self.set(index, variable)
    }

    /// `VarLockRelease`. `request_lock_id` is `None` for the leader's invalidation, which
    /// clears whichever lock is held.
    pub(crate) fn lock_release(
        &mut self,
        index: u64,
        namespace: &str,
        path: &str,
        request_lock_id: Option<&str>,
    ) -> StateResult {
        let Some(existing) = self.variables.get_mut(&key(namespace, path)) else {
            return StateResult::Error(StateError::VariableMissing);
        };
        let held = match &existing.metadata.lock {
            Some(lock) if !lock.id.is_empty() => lock.id.clone(),
            _ => return StateResult::Error(StateError::LockMissing),
        };
        if let Some(requested) = request_lock_id
            && requested != held
        {
            return placeholder(namespace, path, Some(VariableLock::default()));
        }
        existing.metadata.lock = None;
        existing.metadata.modify_index = index;
        self.table_index = index;
        StateResult::Ok(Some(existing.metadata.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(path: &str, lock: Option<&str>, items: &[(&str, &str)]) -> Variable {
        Variable {
            metadata: VariableMetadata {
                namespace: "default".into(),
                path: path.into(),
                lock: lock.map(|id| VariableLock {
                    id: id.into(),
                    ttl_nanos: 15,
                    lock_delay_nanos: 15,
                }),
                create_time: 7,
                modify_time: 7,
                ..Default::default()
            },
            items: items
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn is_placeholder_conflict(result: &StateResult) -> bool {
        matches!(result, StateResult::Conflict(c) if c.placeholder)
    }

    #[test]
    fn indexes_advance_even_on_conflict() {
        let mut store = Store::default();
        let i1 = store.next_index();
        assert!(matches!(
            store.set(i1, var("a", None, &[("k", "v")])),
            StateResult::Ok(Some(_))
        ));
        let i2 = store.next_index();
        assert!(matches!(
            store.set_cas(i2, var("a", None, &[("k", "v")]), 0),
            StateResult::Conflict(_)
        ));
        let i3 = store.next_index();
        assert_eq!((i1, i2, i3), (1, 2, 3));
        assert_eq!(
            store.table_index(),
            1,
            "a conflict does not touch the table"
        );
    }

    #[test]
    fn locked_variables_refuse_writes_and_deletes() {
        let mut store = Store::default();
        let idx = store.next_index();
        store.lock_acquire(idx, var("l", Some("id-1"), &[("k", "v")]));
        let idx = store.next_index();
        assert!(is_placeholder_conflict(
            &store.set(idx, var("l", None, &[("k", "x")]))
        ));
        assert!(is_placeholder_conflict(
            &store.set(idx, var("l", Some("other"), &[("k", "x")]))
        ));
        assert!(is_placeholder_conflict(&store.delete(idx, "default", "l")));
        assert!(is_placeholder_conflict(
            &store.lock_acquire(idx, var("l", Some("id-2"), &[]))
        ));
        // The holder may write.
        assert!(matches!(
            store.set(idx, var("l", Some("id-1"), &[("k", "x")])),
            StateResult::Ok(Some(_))
        ));
        assert_eq!(store.get("default", "l").unwrap().items["k"], "x");
    }

    #[test]
    fn cas_table() {
        let mut store = Store::default();
        let idx = store.next_index();
        store.set(idx, var("c", None, &[("k", "v")]));
        let current = store.get("default", "c").unwrap().metadata.modify_index;
        let idx = store.next_index();
        // wrong index: conflict with the stored variable, not a placeholder
        let r = store.set_cas(idx, var("c", None, &[("k", "x")]), current + 5);
        assert!(
            matches!(&r, StateResult::Conflict(c) if !c.placeholder && c.variable.items["k"] == "v")
        );
        // cas on a missing variable: placeholder conflict
        assert!(is_placeholder_conflict(&store.set_cas(
            idx,
            var("missing", None, &[("k", "x")]),
            3
        )));
        // delete cas=0 on a missing variable succeeds
        assert_eq!(
            store.delete_cas(idx, "default", "missing", 0),
            StateResult::Ok(None)
        );
        // right index wins
        let idx = store.next_index();
        assert!(matches!(
            store.set_cas(idx, var("c", None, &[("k", "x")]), current),
            StateResult::Ok(Some(_))
        ));
        assert_eq!(store.get("default", "c").unwrap().metadata.create_index, 1);
    }

    #[test]
    fn release_keeps_items_and_bumps_index_only() {
        let mut store = Store::default();
        let idx = store.next_index();
        store.lock_acquire(idx, var("r", Some("id"), &[("k", "v")]));
        let idx = store.next_index();
        assert!(matches!(
            store.lock_release(idx, "default", "r", Some("wrong")),
            StateResult::Conflict(c) if c.placeholder && c.variable.metadata.lock == Some(VariableLock::default())
        ));
        let r = store.lock_release(idx, "default", "r", Some("id"));
        let StateResult::Ok(Some(meta)) = r else {
            panic!("release failed: {r:?}")
        };
        assert_eq!(meta.lock, None);
        assert_eq!(meta.modify_index, idx);
        assert_eq!(meta.modify_time, 7);
        assert_eq!(store.get("default", "r").unwrap().items["k"], "v");
        assert_eq!(
            store.lock_release(idx, "default", "r", Some("id")),
            StateResult::Error(StateError::LockMissing)
        );
        assert_eq!(
            store.lock_release(idx, "default", "nope", None),
            StateResult::Error(StateError::VariableMissing)
        );
    }

    #[test]
    fn invalidation_clears_any_holder() {
        let mut store = Store::default();
        let idx = store.next_index();
        store.lock_acquire(idx, var("i", Some("newer-holder"), &[]));
        let idx = store.next_index();
        assert!(matches!(
            store.lock_release(idx, "default", "i", None),
            StateResult::Ok(Some(_))
        ));
        assert_eq!(store.get("default", "i").unwrap().metadata.lock, None);
    }
}
