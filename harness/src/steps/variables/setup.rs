//! What a scenario makes on the server, and how it is undone.
//!
//! Everything is registered *before* the request that makes it, so a write whose answer was
//! lost is still undone. At the end of the scenario, whatever its verdict, the ledger entry
//! [`Cleanup`] releases every lock the scenario got (with the lock IDs it was given), deletes
//! its variables, then its ACL tokens, policies and namespaces, and stops a server the
//! scenario started for itself. Only what the scenario registered is touched: on a real
//! Nomad the harness never deletes anything it did not create (every name it makes carries
//! the scenario's unique token).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use nomad_conform_variables::ServerHandle;
use serde_json::json;

use crate::ledger::{Resource, TeardownOutcome};
use crate::plugins::variables::{Call, Credential, Endpoint, encode_path, encode_query, send};

#[derive(Debug)]
struct MadeVariable {
    endpoint: Endpoint,
    namespace: String,
    path: String,
    lock_ids: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Made {
    variables: Vec<MadeVariable>,
    tokens: Vec<(Endpoint, String)>,
    policies: Vec<(Endpoint, String)>,
    namespaces: Vec<(Endpoint, String)>,
    servers: Vec<(Endpoint, Arc<ServerHandle>)>,
}

/// The scenario's register of what it made.
#[derive(Clone, Debug)]
pub struct Registry {
    made: Arc<Mutex<Made>>,
    /// True once cleanup has begun: background work of the scenario stops (its attempts
    /// hold the read side while they run, cleanup takes the write side).
    stopped: Arc<tokio::sync::RwLock<bool>>,
    /// The management token (or none, without ACLs).
    admin: Credential,
    timeout: Duration,
}

impl Registry {
    pub fn new(admin: Credential, timeout: Duration) -> Registry {
        Registry {
            made: Arc::default(),
            stopped: Arc::default(),
            admin,
            timeout,
        }
    }

    fn edit(&self, f: impl FnOnce(&mut Made)) {
        if let Ok(mut made) = self.made.lock() {
            f(&mut made);
        }
    }

    /// A variable the scenario is about to write (once per namespace and path).
    pub fn variable(&self, endpoint: &Endpoint, namespace: &str, path: &str) {
        self.edit(|m| {
            if !m
                .variables
                .iter()
                .any(|v| v.endpoint == *endpoint && v.namespace == namespace && v.path == path)
            {
                m.variables.push(MadeVariable {
                    endpoint: endpoint.clone(),
                    namespace: namespace.to_string(),
                    path: path.to_string(),
                    lock_ids: BTreeSet::new(),
                });
            }
        });
    }

    /// A lock ID the server gave the scenario for a variable.
    pub fn lock_id(&self, endpoint: &Endpoint, namespace: &str, path: &str, id: &str) {
        self.variable(endpoint, namespace, path);
        self.edit(|m| {
            if let Some(v) = m
                .variables
                .iter_mut()
                .find(|v| v.endpoint == *endpoint && v.namespace == namespace && v.path == path)
            {
                v.lock_ids.insert(id.to_string());
            }
        });
    }

    pub fn policy(&self, endpoint: &Endpoint, name: &str) {
        self.edit(|m| m.policies.push((endpoint.clone(), name.to_string())));
    }

    pub fn token(&self, endpoint: &Endpoint, accessor: &str) {
        self.edit(|m| m.tokens.push((endpoint.clone(), accessor.to_string())));
    }

    pub fn namespace(&self, endpoint: &Endpoint, name: &str) {
        self.edit(|m| m.namespaces.push((endpoint.clone(), name.to_string())));
    }

    /// A server the scenario started for itself: stopped last, and nothing on it is deleted.
    pub fn server(&self, endpoint: &Endpoint, server: Arc<ServerHandle>) {
        self.edit(|m| m.servers.push((endpoint.clone(), server)));
    }

    /// Runs `work` unless cleanup has begun (then `None`); cleanup waits for it to end.
    pub async fn unless_stopped<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        let stopped = self.stopped.read().await;
        if *stopped {
            return None;
        }
        Some(work.await)
    }

    async fn undo(self) -> TeardownOutcome {
        *self.stopped.write().await = true;
        let made = match self.made.lock() {
            Ok(mut m) => std::mem::take(&mut *m),
            Err(_) => return TeardownOutcome::default(),
        };
        let own: Vec<&Endpoint> = made.servers.iter().map(|(e, _)| e).collect();
        let mut outcome = TeardownOutcome::default();
        let admin = || self.admin.clone();
        for v in made.variables.iter().rev() {
            if own.contains(&&v.endpoint) {
                continue;
            }
            for id in &v.lock_ids {
                // A lock this scenario holds, or held: a refusal only means it is gone.
                let _ = send(
                    &v.endpoint,
                    release_call(&v.namespace, &v.path, id, admin()),
                    self.timeout,
                )
                .await;
            }
            let e = send(
                &v.endpoint,
                Call {
                    operation: "delete",
                    method: "DELETE",
                    target: variable_target(&v.path, &v.namespace, None),
                    body: None,
                    credential: admin(),
                },
                self.timeout,
            )
            .await;
            if !matches!(e.status, Some(200 | 204 | 404)) {
                outcome.leaked.push(format!(
                    "variable {} in namespace {} at {}: {}",
                    v.path,
                    v.namespace,
                    v.endpoint.base(),
                    e.summary()
                ));
            }
        }
        let deletions =
            made.tokens
                .iter()
                .rev()
                .map(|(e, a)| (e, "acl-token", format!("/v1/acl/token/{a}"), "ACL token"))
                .chain(
                    made.policies.iter().rev().map(|(e, n)| {
                        (e, "acl-policy", format!("/v1/acl/policy/{n}"), "ACL policy")
                    }),
                )
                .chain(
                    made.namespaces
                        .iter()
                        .rev()
                        .map(|(e, n)| (e, "namespace", format!("/v1/namespace/{n}"), "namespace")),
                );
        for (endpoint, operation, target, what) in deletions {
            if own.contains(&endpoint) {
                continue;
            }
            let e = send(
                endpoint,
                Call {
                    operation,
                    method: "DELETE",
                    target: target.clone(),
                    body: None,
                    credential: admin(),
                },
                self.timeout,
            )
            .await;
            if !matches!(e.status, Some(200 | 204 | 404)) {
                outcome.leaked.push(format!(
                    "{what} {} at {}: {}",
                    target.rsplit('/').next().unwrap_or_default(),
                    endpoint.base(),
                    e.summary()
                ));
            }
        }
        for (_, server) in made.servers {
            if let Err(e) = server.shutdown().await {
                outcome.notes.push(format!(
                    "the scenario's own server did not stop cleanly: {e}"
                ));
            }
        }
        outcome
    }
}

/// The ledger entry that undoes what a scenario made.
#[derive(Debug)]
pub struct Cleanup(pub Registry);

impl Resource for Cleanup {
    fn describe(&self) -> String {
        "the variables, locks, ACL policies, tokens and namespaces the scenario made".into()
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        Box::pin(self.0.undo())
    }
}

/// `/v1/var/<path>[?flag][&namespace=..]`: the namespace is named only when it is not
/// `default`, as Nomad's own client does.
pub fn variable_target(path: &str, namespace: &str, flag: Option<&str>) -> String {
    let mut query: Vec<String> = Vec::new();
    if let Some(f) = flag {
        query.push(f.to_string());
    }
    if namespace != "default" {
        query.push(format!("namespace={}", encode_query(namespace)));
    }
    let mut target = format!("/v1/var/{}", encode_path(path));
    if !query.is_empty() {
        target.push('?');
        target.push_str(&query.join("&"));
    }
    target
}

/// A lock-release with the lock ID only, as Nomad's Go client sends it.
pub fn release_call(namespace: &str, path: &str, id: &str, credential: Credential) -> Call {
    Call {
        operation: "lock-release",
        method: "PUT",
        target: variable_target(path, namespace, Some("lock-release")),
        body: Some(json!({"Lock": {"ID": id}}).to_string()),
        credential,
    }
}

/// A policy's rules in Nomad's HCL: one namespace, its variables path rules.
pub fn policy_rules(namespace: &str, rules: &[(String, Vec<String>)]) -> String {
    let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let mut out = format!("namespace {} {{\n  variables {{\n", q(namespace));
    for (path, caps) in rules {
        let caps: Vec<String> = caps.iter().map(|c| q(c)).collect();
        out.push_str(&format!(
            "    path {} {{\n      capabilities = [{}]\n    }}\n",
            q(path),
            caps.join(", ")
        ));
    }
    out.push_str("  }\n}\n");
    out
}

/// `PUT /v1/acl/policy/<name>`.
pub fn policy_call(name: &str, rules: &str, description: &str, admin: Credential) -> Call {
    Call {
        operation: "acl-policy",
        method: "PUT",
        target: format!("/v1/acl/policy/{name}"),
        body: Some(json!({"Name": name, "Description": description, "Rules": rules}).to_string()),
        credential: admin,
    }
}

/// `PUT /v1/acl/token` for a client token with one policy.
pub fn token_call(name: &str, policy: &str, admin: Credential) -> Call {
    Call {
        operation: "acl-token",
        method: "PUT",
        target: "/v1/acl/token".into(),
        body: Some(
            json!({"Name": name, "Type": "client", "Policies": [policy], "Global": false})
                .to_string(),
        ),
        credential: admin,
    }
}

/// `PUT /v1/namespace/<name>`.
pub fn namespace_call(name: &str, admin: Credential) -> Call {
    Call {
        operation: "namespace",
        method: "PUT",
        target: format!("/v1/namespace/{name}"),
        body: Some(
            json!({"Name": name, "Description": "made by nomad-conform for one scenario"})
                .to_string(),
        ),
        credential: admin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        assert_eq!(variable_target("a/b", "default", None), "/v1/var/a/b");
        assert_eq!(
            variable_target("a b", "ns-1", Some("lock-acquire")),
            "/v1/var/a%20b?lock-acquire&namespace=ns-1"
        );
    }

    #[test]
    fn rules_are_hcl_nomad_reads() {
        let rules = policy_rules(
            "default",
            &[
                ("conform/x/*".into(), vec!["read".into()]),
                ("conform/x/y".into(), vec!["read".into(), "deny".into()]),
            ],
        );
        assert_eq!(
            rules,
            "namespace \"default\" {\n  variables {\n    path \"conform/x/*\" {\n      capabilities = [\"read\"]\n    }\n    path \"conform/x/y\" {\n      capabilities = [\"read\", \"deny\"]\n    }\n  }\n}\n"
        );
    }
}
