//! The server side of the Variables API: Apply (set, cas, delete, lock-acquire,
//! lock-release), Read, List and RenewLock, as `nomad/variables_endpoint.go` does them.
//!
//! Source: contract B.2/B.3/C, corrected where Nomad's Go source (read at the commit the
//! contract cites) says otherwise: lock-release's state errors ("variable doesn't exist",
//! "variable doesn't hold a lock") are plain errors and answer 500, not 404/409. Order of
//! checks in Apply: namespace from the body if set, else
//! the request; ACL (`write`, or `destroy` for deletes; 403 "Permission denied"); then
//! canonicalize and validate (400, with Nomad's doubly wrapped `RPC Error:: 400,` texts);
//! then the state operation, which always consumes a raft index. Responses: the written
//! metadata plus the request's items, with `Lock` shown only to its holder or management; a
//! conflict shows namespace and path only for placeholders, the stored variable if the caller
//! may `read` it, and only metadata otherwise. Read and List honour the workload claim and
//! strip `Lock` for non-management callers. Renew checks `write`, then the variable, the lock,
//! the ID, and the leader's timer, and writes nothing to state.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use serde_json::Value;

use crate::acl::{AclConfig, Caller, Capability};
use crate::clock::Clock;
use crate::faults::{Fault, Faults};
use crate::history::{History, LockEventKind};
use crate::locks::LockTimers;
use crate::profile::{Profile, nanos};
use crate::store::{Conflict, StateError, StateResult, Store};
use crate::validate::{self, SIZE_LIMIT, WILDCARD_NAMESPACE, multierror, validate_lock};
use crate::wire::{RequestVariable, Variable, VariableLock, VariableMetadata};
use crate::wire::{metadata_json, variable_json};

/// An HTTP error answer: status and plain-text body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HttpError {
    pub status: u16,
    pub message: String,
}

impl HttpError {
    pub(crate) fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    fn denied() -> Self {
        Self::new(403, "Permission denied")
    }

    /// A 400 whose text keeps one `RPC Error:: 400,` prefix (coded twice in Nomad).
    fn wrapped(message: &str) -> Self {
        Self::new(400, format!("RPC Error:: 400,{message}"))
    }
}

/// The variable operations of Apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Set,
    Cas(u64),
    Delete,
    DeleteCas(u64),
    LockAcquire,
    LockRelease,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Set => "set",
            Op::Cas(_) => "cas",
            Op::Delete => "delete",
            Op::DeleteCas(_) => "delete-cas",
            Op::LockAcquire => "lock-acquire",
            Op::LockRelease => "lock-release",
        }
    }
}

/// A successful Apply: either the output (with the raft index) or a conflict.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ApplyOutcome {
    Output { body: Option<Value>, index: u64 },
    Conflict { body: Value, modify_index: u64 },
}

/// State plus the leader's in-memory timers, under one lock.
#[derive(Debug, Default)]
pub(crate) struct Core {
    pub store: Store,
    pub timers: LockTimers,
}

/// Everything the HTTP layer and the handle share.
#[derive(Debug)]
pub(crate) struct Engine {
    pub profile: Profile,
    pub clock: Arc<dyn Clock>,
    pub core: Mutex<Core>,
    pub acl: RwLock<AclConfig>,
    pub history: Mutex<History>,
    /// Misbehaviours for the conformance suite's own tests (none on a reference server).
    pub faults: Faults,
    /// What the ACL and namespace APIs keep beside the ACL configuration.
    pub admin: Mutex<crate::admin::AdminState>,
}

/// Locks a mutex even if a panicking thread poisoned it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    pub(crate) fn new(profile: Profile, clock: Arc<dyn Clock>, acl: AclConfig) -> Self {
        Self {
            profile,
            clock,
            core: Mutex::new(Core::default()),
            acl: RwLock::new(acl),
            history: Mutex::new(History::default()),
            faults: Faults::none(),
            admin: Mutex::new(crate::admin::AdminState::default()),
        }
    }

    /// Whether the server runs with `fault`.
    pub(crate) fn has(&self, fault: Fault) -> bool {
        self.faults.has(fault)
    }

    /// Resolves a token; `None` for an unknown token with ACLs on.
    pub(crate) fn caller(&self, secret: &str) -> Option<Caller> {
        let acl = self.acl.read().unwrap_or_else(PoisonError::into_inner);
        if self.has(Fault::AnonymousManagement)
            && acl.enabled
            && (secret.is_empty() || !acl.knows(secret))
        {
            return Some(Caller::all());
        }
        acl.resolve(secret, &self.faults)
    }

    pub(crate) fn record(&self, namespace: &str, path: &str, kind: LockEventKind) {
        let (at, wall) = (self.clock.now(), self.clock.wall());
        lock(&self.history).push_event(at, wall, namespace, path, kind);
    }

    /// Nomad's `Variables.Apply`.
    pub(crate) fn apply(
        self: &Arc<Self>,
        op: Op,
        mut var: RequestVariable,
        request_namespace: &str,
        caller: &Caller,
    ) -> Result<ApplyOutcome, HttpError> {
        // nomad/variables_endpoint.go (Apply): a non-empty Namespace in the body wins over
        // `?namespace=` for every operation, lock-acquire and lock-release included.
        let query_only =
            matches!(op, Op::LockAcquire | Op::LockRelease) && self.has(Fault::LockQueryNamespace);
        if var.metadata.namespace.is_empty() || self.has(Fault::NamespaceIgnored) || query_only {
            var.metadata.namespace = request_namespace.to_string();
        }
        let namespace = var.metadata.namespace.clone();
        let path = var.metadata.path.clone();
        let needed = match op {
            Op::Delete | Op::DeleteCas(_) if self.has(Fault::DestroyNeedsWrite) => {
                Capability::Write
            }
            Op::Delete | Op::DeleteCas(_) => Capability::Destroy,
            Op::LockAcquire | Op::LockRelease if self.has(Fault::LockNeedsRead) => Capability::Read,
            _ => Capability::Write,
        };
        // nomad/variables_endpoint.go (hasOperationPermissions) passes no workload claim: a
        // workload identity's implicit read and list never count for writes or locks.
        let workload_lock = matches!(op, Op::LockAcquire | Op::LockRelease)
            && self.has(Fault::WorkloadLocks)
            && caller.workload_owns(&namespace, &path);
        if !caller.allows(&namespace, &path, needed, false) && !workload_lock {
            return Err(HttpError::denied());
        }
        self.canonicalize_and_validate(op, &mut var)?;
        let can_read = caller.allows(&namespace, &path, Capability::Read, false);
        let request_lock = var.metadata.lock.clone();
        let mut items = var.items.clone().unwrap_or_default();
        let now = self.clock.unix_nanos();
        let stored = Variable {
            metadata: VariableMetadata {
                create_time: now,
                modify_time: now,
                ..var.metadata.clone()
            },
            items: items.clone(),
        };

        let mut core = lock(&self.core);
        let index = core.store.next_index();
        let held = core
            .store
            .get(&namespace, &path)
            .and_then(|v| v.metadata.lock.clone());
        let request_id = request_lock.as_ref().map(|l| l.id.clone());
        let mut stored = stored;
        self.fault_before_write(&mut core, op, &mut stored, &mut items, held.as_ref());
        let result = match op {
            Op::Set => core.store.set(index, stored),
            Op::Cas(_) | Op::DeleteCas(_) if self.has(Fault::CasIgnored) => match op {
                Op::Cas(_) => core.store.set(index, stored),
                _ => core.store.delete(index, &namespace, &path),
            },
            Op::Cas(cas) => core.store.set_cas(index, stored, cas),
            Op::Delete if self.has(Fault::DeleteKeeps) => StateResult::Ok(None),
            Op::Delete => core.store.delete(index, &namespace, &path),
            Op::DeleteCas(cas) => core.store.delete_cas(index, &namespace, &path, cas),
            // VarLockAcquire overwrites the variable, items included: an acquire without
            // items leaves it without any.
            Op::LockAcquire => core.store.lock_acquire(index, stored),
            Op::LockRelease if self.has(Fault::ReleaseKeepsLock) => {
                match core.store.get(&namespace, &path) {
                    Some(v) if v.metadata.lock.is_some() => {
                        let mut meta = v.metadata.clone();
                        meta.lock = None;
                        StateResult::Ok(Some(meta))
                    }
                    _ => core
                        .store
                        .lock_release(index, &namespace, &path, request_id.as_deref()),
                }
            }
            Op::LockRelease if self.has(Fault::ReleaseIgnoresId) => {
                core.store.lock_release(index, &namespace, &path, None)
            }
            Op::LockRelease => {
                core.store
                    .lock_release(index, &namespace, &path, request_id.as_deref())
            }
        };

        match result {
            StateResult::Ok(written) => {
                self.after_write(
                    &mut core,
                    op,
                    &namespace,
                    &path,
                    request_lock.as_ref(),
                    held.as_ref(),
                );
                let body = written.map(|mut meta| {
                    let owner =
                        matches!((&request_lock, &meta.lock), (Some(r), Some(s)) if r.id == s.id);
                    if !(owner || caller.is_management()) {
                        meta.lock = None;
                    }
                    variable_json(&meta, &items)
                });
                Ok(ApplyOutcome::Output { body, index })
            }
            StateResult::Error(err) => {
                // nomad/state/state_store_variables.go (VarLockRelease) answers these two with
                // plain errors.New values; nomad/variables_endpoint.go (Apply,
                // makeVariablesApplyResponse) returns them as they are, and command/agent/
                // http.go (wrap) answers an error without an "RPC Error:: N," prefix or a
                // permission suffix with 500 and the raw text. (The coded 404/409 errors of the
                // same names in variables_endpoint.go serve RenewLock only.)
                let status = match err {
                    StateError::VariableMissing if self.has(Fault::ReleaseErrorsCoded) => 404,
                    StateError::LockMissing if self.has(Fault::ReleaseErrorsCoded) => 409,
                    _ => 500,
                };
                self.record(
                    &namespace,
                    &path,
                    LockEventKind::ReleaseRefused {
                        lock_id: request_id.unwrap_or_default(),
                        status,
                        reason: err.message().to_string(),
                    },
                );
                drop(core);
                Err(HttpError::new(status, err.message()))
            }
            StateResult::Conflict(conflict) => {
                // History is written under the state lock so its order is the state's order.
                self.record_conflict(
                    op,
                    &namespace,
                    &path,
                    request_id,
                    held.as_ref(),
                    conflict.placeholder,
                );
                drop(core);
                let modify_index = conflict.variable.metadata.modify_index;
                Ok(ApplyOutcome::Conflict {
                    body: conflict_body(conflict, can_read),
                    modify_index,
                })
            }
        }
    }

    /// Timers and history after a successful write.
    fn after_write(
        self: &Arc<Self>,
        core: &mut Core,
        op: Op,
        namespace: &str,
        path: &str,
        request_lock: Option<&VariableLock>,
        held: Option<&VariableLock>,
    ) {
        let Some(lock) = request_lock else { return };
        let kind = match op {
            Op::LockAcquire => {
                if self.has(Fault::ReacquireResetsTimer) {
                    self.remove_ttl_timer(core, &lock.id);
                }
                // nomad/locks.go (CreateVariableLockTTLTimer): a timer already running for
                // this lock ID (a re-acquire by the holder) is left as it is.
                let timer_started = self.create_ttl_timer(core, namespace, path, lock);
                LockEventKind::Acquired {
                    lock_id: lock.id.clone(),
                    ttl: lock.ttl(),
                    lock_delay: lock.lock_delay(),
                    reacquired: held.is_some_and(|h| h.id == lock.id),
                    timer_started,
                }
            }
            Op::LockRelease => {
                self.remove_ttl_timer(core, &lock.id);
                LockEventKind::Released {
                    lock_id: lock.id.clone(),
                }
            }
            Op::Set | Op::Cas(_) => LockEventKind::LockWrittenBySet {
                lock_id: lock.id.clone(),
                timer_running: core.timers.has_ttl(&lock.id),
            },
            Op::Delete | Op::DeleteCas(_) => return,
        };
        self.record(namespace, path, kind);
    }

    fn record_conflict(
        &self,
        op: Op,
        namespace: &str,
        path: &str,
        request_id: Option<String>,
        held: Option<&VariableLock>,
        placeholder: bool,
    ) {
        let held_id = held.map(|l| l.id.clone()).unwrap_or_default();
        let kind = match op {
            Op::LockAcquire => LockEventKind::AcquireConflict {
                requested_lock_id: request_id,
                held_lock_id: held_id,
            },
            Op::LockRelease => LockEventKind::ReleaseRefused {
                lock_id: request_id.unwrap_or_default(),
                status: 409,
                reason: "lock held under another ID".to_string(),
            },
            // Lock refusals answer with a placeholder; cas mismatches with the stored variable.
            _ if held.is_some() && placeholder => LockEventKind::WriteRefused {
                operation: op.name().to_string(),
                held_lock_id: held_id,
            },
            _ => return,
        };
        self.record(namespace, path, kind);
    }

    /// `canonicalizeAndValidate`.
    fn canonicalize_and_validate(
        &self,
        op: Op,
        var: &mut RequestVariable,
    ) -> Result<(), HttpError> {
        let profile = &self.profile;
        match op {
            Op::LockAcquire => {
                let lock = var.metadata.lock.get_or_insert_with(VariableLock::default);
                canonicalize_lock(lock, profile, self.has(Fault::DefaultTtlMin));
                if var.metadata.namespace == "*" {
                    return Err(HttpError::wrapped(&multierror(&[WILDCARD_NAMESPACE])));
                }
                let items = var.items.clone().unwrap_or_default();
                if validate::items_size(&items) > profile.max_variable_size {
                    return Err(HttpError::wrapped(SIZE_LIMIT));
                }
                self.check_path(&var.metadata.path)?;
                self.check_lock(lock)
            }
            Op::Set | Op::Cas(_) => {
                if let Some(lock) = &var.metadata.lock
                    && (lock.ttl_nanos != 0 || lock.lock_delay_nanos != 0)
                {
                    return Err(HttpError::wrapped(
                        "RPC Error:: 400,variable should not contain lock definition",
                    ));
                }
                // A Lock with the ID only (the holder's write) is canonicalized like any lock
                // (nomad/structs/variables.go, VariableLock.Canonicalize): the stored TTL and
                // lock delay become the defaults, whatever the acquire asked for. The leader's
                // timer is not touched (Apply starts and stops timers for lock-acquire and
                // lock-release only), so the lock still lapses on the acquire's numbers and a
                // later renew restarts the timer on the stored TTL.
                if let Some(lock) = var.metadata.lock.as_mut() {
                    canonicalize_lock(lock, profile, self.has(Fault::DefaultTtlMin));
                }
                if var.metadata.namespace == "*" {
                    return Err(HttpError::wrapped(WILDCARD_NAMESPACE));
                }
                let items = var.items.clone().unwrap_or_default();
                if items.is_empty() && !self.has(Fault::EmptyItemsAccepted) {
                    return Err(HttpError::wrapped("empty variables are invalid"));
                }
                if validate::items_size(&items) > profile.max_variable_size {
                    return Err(HttpError::wrapped(SIZE_LIMIT));
                }
                self.check_path(&var.metadata.path)?;
                match &var.metadata.lock {
                    Some(lock) => self.check_lock(lock),
                    None => Ok(()),
                }
            }
            Op::Delete | Op::DeleteCas(_) => {
                if var.metadata.path.is_empty() {
                    return Err(HttpError::wrapped("delete requires a Path"));
                }
                Ok(())
            }
            Op::LockRelease => {
                if var.metadata.lock.as_ref().is_none_or(|l| l.id.is_empty()) {
                    return Err(HttpError::wrapped("missing lock information"));
                }
                if var.items.is_some() {
                    return Err(HttpError::wrapped(
                        "lock release operation doesn't take variable items",
                    ));
                }
                validate::validate_path(&var.metadata.path).map_err(|m| HttpError::new(400, m))
            }
        }
    }

    /// `ValidatePath`, unless the `path-unchecked` fault is on.
    fn check_path(&self, path: &str) -> Result<(), HttpError> {
        if self.has(Fault::PathUnchecked) {
            return Ok(());
        }
        validate::validate_path(path).map_err(|m| HttpError::wrapped(&m))
    }

    /// `VariableLock.Validate`; the `ttl-unchecked` fault keeps only the sign check.
    fn check_lock(&self, lock: &VariableLock) -> Result<(), HttpError> {
        if self.has(Fault::TtlUnchecked) {
            let unbounded = Profile {
                lock_ttl_min: std::time::Duration::ZERO,
                lock_ttl_max: std::time::Duration::MAX,
                ..self.profile.clone()
            };
            return validate_lock(lock, &unbounded).map_err(|m| HttpError::wrapped(&m));
        }
        validate_lock(lock, &self.profile).map_err(|m| HttpError::wrapped(&m))
    }

    /// What the write faults change before the state operation: merged items, a lock taken
    /// over, a lock ignored by a plain write or delete.
    fn fault_before_write(
        &self,
        core: &mut Core,
        op: Op,
        stored: &mut Variable,
        items: &mut std::collections::BTreeMap<String, String>,
        held: Option<&VariableLock>,
    ) {
        if self.faults.is_empty() {
            return;
        }
        let (namespace, path) = (
            stored.metadata.namespace.clone(),
            stored.metadata.path.clone(),
        );
        let request_id = stored.metadata.lock.as_ref().map(|l| l.id.clone());
        match op {
            Op::Set | Op::Cas(_) if self.has(Fault::SetMergesItems) => {
                if let Some(existing) = core.store.get(&namespace, &path) {
                    let mut merged = existing.items.clone();
                    merged.extend(stored.items.clone());
                    stored.items = merged.clone();
                    *items = merged;
                }
            }
            Op::LockAcquire if self.has(Fault::AcquireKeepsItems) && stored.items.is_empty() => {
                if let Some(existing) = core.store.get(&namespace, &path) {
                    stored.items = existing.items.clone();
                    *items = existing.items.clone();
                }
            }
            _ => {}
        }
        let Some(held) = held else { return };
        if matches!(op, Op::Set | Op::Cas(_))
            && !foreign_id(request_id.as_deref(), held)
            && self.has(Fault::SetKeepsLockNumbers)
        {
            stored.metadata.lock = Some(held.clone());
        }
        let foreign = foreign_id(request_id.as_deref(), held);
        let clear = match op {
            Op::LockAcquire => foreign && self.has(Fault::AcquireSteals),
            Op::Delete | Op::DeleteCas(_) => self.has(Fault::LockedWritable),
            Op::Set | Op::Cas(_) if foreign && self.has(Fault::LockedWritable) => {
                // Written as if the request carried the held lock.
                stored.metadata.lock = Some(held.clone());
                false
            }
            _ => false,
        };
        if clear {
            let index = core.store.next_index();
            core.store.lock_release(index, &namespace, &path, None);
        }
    }

    /// Nomad's `Variables.Read`: the variable (if any) and the index to report.
    pub(crate) fn read(
        &self,
        namespace: &str,
        path: &str,
        caller: &Caller,
    ) -> Result<(Option<Value>, u64), HttpError> {
        if !caller.allows(namespace, path, Capability::Read, true) {
            return Err(HttpError::denied());
        }
        let core = lock(&self.core);
        Ok(match core.store.get(namespace, path) {
            Some(var) if var.metadata.lock.is_some() && self.has(Fault::LockedUnreadable) => {
                return Err(HttpError::new(409, "variable is locked"));
            }
            Some(var) => {
                let mut meta = var.metadata.clone();
                if !caller.is_management() {
                    meta.lock = None;
                }
                let items = if self.has(Fault::ReadDropsItems) {
                    Default::default()
                } else {
                    var.items.clone()
                };
                (Some(variable_json(&meta, &items)), meta.modify_index)
            }
            None => (None, core.store.table_index()),
        })
    }

    /// Nomad's `Variables.List` (namespace `*` lists every namespace).
    pub(crate) fn list(&self, namespace: &str, prefix: &str, caller: &Caller) -> (Value, u64) {
        let core = lock(&self.core);
        let items = core
            .store
            .all()
            .filter(|v| namespace == "*" || v.metadata.namespace == namespace)
            .filter(|v| v.metadata.path.starts_with(prefix) || self.has(Fault::ListIgnoresPrefix))
            .filter(|v| {
                caller.allows(
                    &v.metadata.namespace,
                    &v.metadata.path,
                    Capability::List,
                    true,
                )
            })
            .map(|v| {
                let mut meta = v.metadata.clone();
                if !caller.is_management() {
                    meta.lock = None;
                }
                Value::Object(metadata_json(&meta))
            })
            .collect();
        (Value::Array(items), core.store.table_index())
    }

    /// Nomad's `Variables.RenewLock` (nomad/variables_endpoint.go): resets the leader's timer,
    /// writes nothing. The namespace is the request's (`?namespace=`) only: the renew request
    /// has no namespace of its own. Its errors are the endpoint's coded ones: 404 "variable
    /// doesn't exist", 409 "variable doesn't hold a lock" (never locked, released, or cleared
    /// by a lapse's delay), 409 "attempting to modify locked variable" (another lock ID, or the
    /// leader's timer gone: the lock is in its delay).
    pub(crate) fn renew(
        self: &Arc<Self>,
        namespace: &str,
        path: &str,
        lock_id: &str,
        caller: &Caller,
    ) -> Result<Value, HttpError> {
        let needed = if self.has(Fault::LockNeedsRead) {
            Capability::Read
        } else {
            Capability::Write
        };
        let workload_lock = self.has(Fault::WorkloadLocks) && caller.workload_owns(namespace, path);
        if !caller.allows(namespace, path, needed, false) && !workload_lock {
            return Err(HttpError::denied());
        }
        if lock_id.is_empty() {
            return Err(HttpError::new(500, multierror(&["missing lock ID"])));
        }
        let mut core = lock(&self.core);
        let outcome = match core.store.get(namespace, path).cloned() {
            None => Err(HttpError::new(404, "variable doesn't exist")),
            Some(var) => match &var.metadata.lock {
                None if self.has(Fault::RenewRevivesReleased)
                    && self.released(namespace, path, lock_id) =>
                {
                    Ok(self.revive(&mut core, var, lock_id))
                }
                None => Err(HttpError::new(409, "variable doesn't hold a lock")),
                Some(_) if self.has(Fault::RenewRefused) => {
                    Err(HttpError::new(409, "attempting to modify locked variable"))
                }
                Some(held) if held.id != lock_id && !self.has(Fault::RenewIgnoresId) => {
                    Err(HttpError::new(409, "attempting to modify locked variable"))
                }
                Some(held) => {
                    if self.renew_ttl_timer(&mut core, held) {
                        Ok(Value::Object(metadata_json(&var.metadata)))
                    } else {
                        Err(HttpError::new(409, "attempting to modify locked variable"))
                    }
                }
            },
        };
        let kind = match &outcome {
            Ok(_) => LockEventKind::Renewed {
                lock_id: lock_id.to_string(),
            },
            Err(err) => LockEventKind::RenewRefused {
                lock_id: lock_id.to_string(),
                status: err.status,
                reason: err.message.clone(),
            },
        };
        self.record(namespace, path, kind);
        drop(core);
        outcome
    }

    /// Whether the holder of `lock_id` released it on this variable (the
    /// `renew-revives-released` fault).
    fn released(&self, namespace: &str, path: &str, lock_id: &str) -> bool {
        lock(&self.history).events().iter().any(|e| {
            e.namespace == namespace
                && e.path == path
                && matches!(&e.kind, LockEventKind::Released { lock_id: id } if id == lock_id)
        })
    }

    /// Locks `var` again under `lock_id` with the default numbers and a new timer (the
    /// `renew-revives-released` fault); answers what a renew answers.
    fn revive(self: &Arc<Self>, core: &mut Core, mut var: Variable, lock_id: &str) -> Value {
        let mut revived = VariableLock {
            id: lock_id.to_string(),
            ..VariableLock::default()
        };
        canonicalize_lock(&mut revived, &self.profile, false);
        var.metadata.lock = Some(revived.clone());
        let index = core.store.next_index();
        let written = match core.store.set(index, var) {
            StateResult::Ok(Some(meta)) => meta,
            _ => VariableMetadata::default(),
        };
        let (namespace, path) = (written.namespace.clone(), written.path.clone());
        self.create_ttl_timer(core, &namespace, &path, &revived);
        Value::Object(metadata_json(&written))
    }
}

/// Whether a request's lock ID is not the held one (Nomad's `isLocked` for a held lock).
fn foreign_id(request_id: Option<&str>, held: &VariableLock) -> bool {
    request_id != Some(held.id.as_str())
}

/// `VariableLock.Canonicalize`: new ID, default delay, default TTL (the shortest one with the
/// `default-ttl-min` fault).
fn canonicalize_lock(lock: &mut VariableLock, profile: &Profile, default_ttl_min: bool) {
    if lock.id.is_empty() {
        lock.id = uuid::Uuid::new_v4().to_string();
    }
    if lock.lock_delay_nanos == 0 {
        lock.lock_delay_nanos = nanos(profile.lock_delay_default);
    }
    if lock.ttl_nanos == 0 {
        lock.ttl_nanos = nanos(if default_ttl_min {
            profile.lock_ttl_min
        } else {
            profile.lock_ttl_default
        });
    }
}

/// The body of a 409 (`makeVariablesApplyResponse`).
fn conflict_body(conflict: Conflict, can_read: bool) -> Value {
    let Conflict {
        variable,
        placeholder,
    } = conflict;
    if !can_read {
        Value::Object(metadata_json(&variable.metadata))
    } else if placeholder {
        let meta = VariableMetadata {
            namespace: variable.metadata.namespace,
            path: variable.metadata.path,
            ..Default::default()
        };
        Value::Object(metadata_json(&meta))
    } else {
        variable_json(&variable.metadata, &variable.items)
    }
}
