//! The parts of Nomad's ACL and namespace APIs a tool needs to set up a Variables test: ACL
//! policies, ACL tokens and namespaces, over HTTP, with a management token.
//!
//! Source: `command/agent/acl_endpoint.go`, `nomad/acl_endpoint.go`,
//! `command/agent/namespace_endpoint.go` (upstream Nomad):
//! - every ACL endpoint answers 400 "ACL support disabled" when ACLs are off; writes and
//!   reads of policies and tokens need a management token (403 "Permission denied"); an
//!   unknown token gets 403 "ACL token not found";
//! - `PUT|POST /v1/acl/policy/<name>` takes `{"Name", "Description", "Rules"}` (`Name` must
//!   equal the path: 400), reads `Rules` as HCL ([`crate::rules`]) and refuses an invalid
//!   policy with 400 "policy 0 invalid: 1 error occurred:\n\t* failed to parse rules: ..."; it answers 200 with no body and `X-Nomad-Index`;
//!   `GET` answers the policy or 404 "ACL policy not found"; `DELETE` answers 200;
//! - `PUT|POST /v1/acl/token` takes `{"Name", "Type", "Policies"}`: a client token needs a
//!   policy, a management token takes none (400 "token 0 invalid: ..."); it answers the token
//!   with a new `AccessorID` and `SecretID`; `GET|DELETE /v1/acl/token/<accessor>`; `GET
//!   /v1/acl/token/self` answers the caller's token (the anonymous token without one);
//! - a policy named `anonymous` applies to requests without a token, as in Nomad;
//! - `PUT|POST /v1/namespace/<name>` and `DELETE` (management when ACLs are on); `default`
//!   cannot be deleted, nor a namespace that still holds variables. Variables themselves do
//!   not need their namespace to exist on this server.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::PoisonError;

use axum::http::Method;
use serde_json::{Value, json};

use crate::acl::{Token, TokenKind};
use crate::engine::{Engine, lock};
use crate::faults::Fault;

/// Policies' texts, tokens' names and accessors, and namespaces.
#[derive(Debug)]
pub(crate) struct AdminState {
    namespaces: BTreeSet<String>,
    /// By accessor ID.
    tokens: BTreeMap<String, TokenInfo>,
    /// By policy name.
    policies: BTreeMap<String, PolicyInfo>,
}

impl Default for AdminState {
    fn default() -> Self {
        Self {
            namespaces: std::iter::once("default".to_string()).collect(),
            tokens: BTreeMap::new(),
            policies: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug)]
struct TokenInfo {
    secret: String,
    name: String,
    index: u64,
}

#[derive(Clone, Debug)]
struct PolicyInfo {
    description: String,
    rules: String,
    create_index: u64,
    modify_index: u64,
}

/// An answer of the admin API.
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    Json(u16, Value),
    Text(u16, String),
    /// No body; the raft index for `X-Nomad-Index`.
    Written(u64),
}

fn text(status: u16, message: impl Into<String>) -> Answer {
    Answer::Text(status, message.into())
}

/// A top-level field of a JSON object, matched case-insensitively as Go does.
fn field<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body.as_object()?
        .iter()
        .rev()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

fn field_text(body: &Value, name: &str) -> String {
    field(body, name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Names of policies and namespaces: `^[a-zA-Z0-9-]{1,128}$`.
fn valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Who is asking, for the admin API.
enum Who {
    Management,
    Other,
}

impl Engine {
    /// Answers an ACL or namespace API request; `None` if `path` is none of theirs.
    pub(crate) fn admin(
        &self,
        method: &Method,
        path: &str,
        token: &str,
        body: &[u8],
    ) -> Option<Answer> {
        if let Some(rest) = path.strip_prefix("/v1/acl/") {
            return Some(self.acl_api(method, rest, token, body));
        }
        if path == "/v1/namespaces" || path.starts_with("/v1/namespace/") {
            return Some(self.namespace_api(method, path, token, body));
        }
        None
    }

    fn who(&self, token: &str) -> Result<Who, Answer> {
        let acl = self.acl.read().unwrap_or_else(PoisonError::into_inner);
        if !acl.enabled {
            return Ok(Who::Management);
        }
        if !token.is_empty() && !acl.knows(token) && !self.has(Fault::AnonymousManagement) {
            return Err(text(403, "ACL token not found"));
        }
        drop(acl);
        match self.caller(token) {
            Some(caller) if caller.is_management() => Ok(Who::Management),
            Some(_) => Ok(Who::Other),
            None => Err(text(403, "ACL token not found")),
        }
    }

    fn management(&self, token: &str) -> Result<(), Answer> {
        match self.who(token)? {
            Who::Management => Ok(()),
            Who::Other => Err(text(403, "Permission denied")),
        }
    }

    fn decode(body: &[u8]) -> Result<Value, Answer> {
        let value: Value = serde_json::Deserializer::from_slice(body)
            .into_iter::<Value>()
            .next()
            .unwrap_or(Ok(Value::Null))
            .map_err(|e| text(400, e.to_string()))?;
        if value.is_object() {
            Ok(value)
        } else {
            Err(text(400, "expected a JSON object"))
        }
    }

    fn next_index(&self) -> u64 {
        lock(&self.core).store.next_index()
    }

    fn acl_api(&self, method: &Method, rest: &str, token: &str, body: &[u8]) -> Answer {
        if !self
            .acl
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .enabled
        {
            return text(400, "ACL support disabled");
        }
        let result = match (method, rest) {
            (&Method::GET, "policies") => self.list_policies(token),
            (_, "policies") => Err(text(405, "Invalid method")),
            (_, "token") if matches!(*method, Method::PUT | Method::POST) => {
                self.create_token(token, body)
            }
            (_, "token") => Err(text(405, "Invalid method")),
            (&Method::GET, "token/self") => self.token_self(token),
            (_, "token/self") => Err(text(405, "Invalid method")),
            (_, r) if r.starts_with("token/") => {
                self.token_by_accessor(method, &r["token/".len()..], token)
            }
            (_, r) if r.starts_with("policy/") => {
                self.policy(method, &r["policy/".len()..], token, body)
            }
            _ => Err(text(404, "404 page not found\n")),
        };
        result.unwrap_or_else(|answer| answer)
    }

    fn list_policies(&self, token: &str) -> Result<Answer, Answer> {
        self.management(token)?;
        let admin = lock(&self.admin);
        let list: Vec<Value> = admin
            .policies
            .iter()
            .map(|(name, p)| {
                json!({
                    "Name": name,
                    "Description": p.description,
                    "CreateIndex": p.create_index,
                    "ModifyIndex": p.modify_index,
                })
            })
            .collect();
        Ok(Answer::Json(200, Value::Array(list)))
    }

    fn policy(
        &self,
        method: &Method,
        name: &str,
        token: &str,
        body: &[u8],
    ) -> Result<Answer, Answer> {
        if name.is_empty() {
            return Err(text(400, "Missing Policy Name"));
        }
        self.management(token)?;
        match *method {
            Method::GET => {
                let admin = lock(&self.admin);
                let p = admin
                    .policies
                    .get(name)
                    .ok_or_else(|| text(404, "ACL policy not found"))?;
                Ok(Answer::Json(
                    200,
                    json!({
                        "Name": name,
                        "Description": p.description,
                        "Rules": p.rules,
                        "CreateIndex": p.create_index,
                        "ModifyIndex": p.modify_index,
                    }),
                ))
            }
            Method::PUT | Method::POST => self.upsert_policy(name, body),
            Method::DELETE => {
                let index = self.next_index();
                lock(&self.admin).policies.remove(name);
                let mut acl = self.acl.write().unwrap_or_else(PoisonError::into_inner);
                acl.policies.retain(|p| p.name != name);
                if name == "anonymous" {
                    acl.anonymous_policies.retain(|p| p != name);
                }
                Ok(Answer::Written(index))
            }
            _ => Err(text(405, "Invalid method")),
        }
    }

    fn upsert_policy(&self, name: &str, body: &[u8]) -> Result<Answer, Answer> {
        let body = Self::decode(body)?;
        if field_text(&body, "Name") != name {
            return Err(text(400, "ACL policy name does not match request path"));
        }
        // nomad/structs/acl.go (ACLPolicy.Validate) gathers its errors in a multierror: the
        // name, then the rules parsed by acl/policy.go (Parse, strict); nomad/acl_endpoint.go
        // (UpsertPolicies) refuses with 400 "policy 0 invalid: <the multierror>".
        let strict = crate::rules::Strictness {
            rules: !self.has(Fault::PolicyUnchecked),
            keys: !self.has(Fault::PolicyKeysUnchecked),
        };
        let rules = field_text(&body, "Rules");
        let mut errors: Vec<String> = Vec::new();
        if !valid_name(name) {
            errors.push(format!("invalid name '{name}'"));
        }
        let parsed = crate::rules::parse(name, &rules, strict)
            .map_err(|e| errors.push(format!("failed to parse rules: {e}")));
        let policy = match parsed {
            Ok(policy) if errors.is_empty() => policy,
            _ => {
                let listed: Vec<&str> = errors.iter().map(String::as_str).collect();
                return Err(text(
                    400,
                    format!("policy 0 invalid: {}", crate::validate::multierror(&listed)),
                ));
            }
        };
        let index = self.next_index();
        {
            let mut admin = lock(&self.admin);
            let create_index = admin.policies.get(name).map_or(index, |p| p.create_index);
            admin.policies.insert(
                name.to_string(),
                PolicyInfo {
                    description: field_text(&body, "Description"),
                    rules,
                    create_index,
                    modify_index: index,
                },
            );
        }
        let mut acl = self.acl.write().unwrap_or_else(PoisonError::into_inner);
        acl.upsert_policy(policy);
        if name == "anonymous" && !acl.anonymous_policies.iter().any(|p| p == name) {
            acl.anonymous_policies.push(name.to_string());
        }
        Ok(Answer::Written(index))
    }

    fn create_token(&self, token: &str, body: &[u8]) -> Result<Answer, Answer> {
        self.management(token)?;
        let body = Self::decode(body)?;
        let kind = field_text(&body, "Type");
        let policies: Vec<String> = field(&body, "Policies")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let invalid = |why: &str| text(400, format!("token 0 invalid: {why}"));
        let secret = uuid::Uuid::new_v4().to_string();
        let new = match kind.as_str() {
            "client" if policies.is_empty() => {
                return Err(invalid("client token missing policies or roles"));
            }
            "client" => {
                let names: Vec<&str> = policies.iter().map(String::as_str).collect();
                Token::client(&secret, &names)
            }
            "management" if !policies.is_empty() => {
                return Err(invalid(
                    "management token cannot be associated with policies or roles",
                ));
            }
            "management" => Token::management(&secret),
            _ => return Err(invalid("token type must be client or management")),
        };
        let index = self.next_index();
        let accessor = uuid::Uuid::new_v4().to_string();
        lock(&self.admin).tokens.insert(
            accessor.clone(),
            TokenInfo {
                secret: secret.clone(),
                name: field_text(&body, "Name"),
                index,
            },
        );
        let json = token_json(&accessor, &new, &field_text(&body, "Name"), index);
        self.acl
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .upsert_token(new);
        Ok(Answer::Json(200, json))
    }

    fn token_self(&self, token: &str) -> Result<Answer, Answer> {
        if token.is_empty() {
            return Ok(Answer::Json(
                200,
                json!({
                    "AccessorID": "anonymous",
                    "SecretID": "anonymous",
                    "Name": "Anonymous Token",
                    "Type": "client",
                    "Policies": ["anonymous"],
                    "Global": false,
                }),
            ));
        }
        let acl = self.acl.read().unwrap_or_else(PoisonError::into_inner);
        let Some(found) = acl.tokens.iter().find(|t| t.secret_id == token).cloned() else {
            return Err(text(403, "ACL token not found"));
        };
        drop(acl);
        let mut admin = lock(&self.admin);
        let existing = admin
            .tokens
            .iter()
            .find(|(_, t)| t.secret == token)
            .map(|(a, t)| (a.clone(), t.clone()));
        let (accessor, info) = match existing {
            Some(pair) => pair,
            None => {
                // A token given to the server directly: make up its accessor once.
                let accessor = uuid::Uuid::new_v4().to_string();
                let info = TokenInfo {
                    secret: token.to_string(),
                    name: String::new(),
                    index: 1,
                };
                admin.tokens.insert(accessor.clone(), info.clone());
                (accessor, info)
            }
        };
        Ok(Answer::Json(
            200,
            token_json(&accessor, &found, &info.name, info.index),
        ))
    }

    fn token_by_accessor(
        &self,
        method: &Method,
        accessor: &str,
        token: &str,
    ) -> Result<Answer, Answer> {
        if accessor.is_empty() {
            return Err(text(400, "Missing Token Accessor"));
        }
        self.management(token)?;
        let info = lock(&self.admin).tokens.get(accessor).cloned();
        match *method {
            Method::GET => {
                let info = info.ok_or_else(|| text(404, "ACL token not found"))?;
                let acl = self.acl.read().unwrap_or_else(PoisonError::into_inner);
                let found = acl
                    .tokens
                    .iter()
                    .find(|t| t.secret_id == info.secret)
                    .cloned()
                    .ok_or_else(|| text(404, "ACL token not found"))?;
                Ok(Answer::Json(
                    200,
                    token_json(accessor, &found, &info.name, info.index),
                ))
            }
            Method::DELETE => {
                let info = info.ok_or_else(|| {
                    text(500, format!("Cannot delete nonexistent tokens: {accessor}"))
                })?;
                let index = self.next_index();
                lock(&self.admin).tokens.remove(accessor);
                self.acl
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .tokens
                    .retain(|t| t.secret_id != info.secret);
                Ok(Answer::Written(index))
            }
            _ => Err(text(405, "Invalid method")),
        }
    }

    fn namespace_api(&self, method: &Method, path: &str, token: &str, body: &[u8]) -> Answer {
        let result = if path == "/v1/namespaces" {
            if *method == Method::GET {
                self.who(token).map(|_| {
                    let admin = lock(&self.admin);
                    let list = admin
                        .namespaces
                        .iter()
                        .map(|n| json!({"Name": n, "Description": ""}))
                        .collect();
                    Answer::Json(200, Value::Array(list))
                })
            } else {
                Err(text(405, "Invalid method"))
            }
        } else {
            let name = &path["/v1/namespace/".len()..];
            self.namespace(method, name, token, body)
        };
        result.unwrap_or_else(|answer| answer)
    }

    fn namespace(
        &self,
        method: &Method,
        name: &str,
        token: &str,
        body: &[u8],
    ) -> Result<Answer, Answer> {
        if name.is_empty() {
            return Err(text(400, "Missing Namespace Name"));
        }
        match *method {
            Method::GET => {
                self.who(token)?;
                if lock(&self.admin).namespaces.contains(name) {
                    Ok(Answer::Json(200, json!({"Name": name, "Description": ""})))
                } else {
                    Err(text(404, "Namespace not found"))
                }
            }
            Method::PUT | Method::POST => {
                self.management(token)?;
                let body = Self::decode(body)?;
                if field_text(&body, "Name") != name {
                    return Err(text(400, "Namespace name does not match request path"));
                }
                if !valid_name(name) {
                    return Err(text(400, format!("invalid name \"{name}\"")));
                }
                let index = self.next_index();
                lock(&self.admin).namespaces.insert(name.to_string());
                Ok(Answer::Written(index))
            }
            Method::DELETE => {
                self.management(token)?;
                if name == "default" {
                    return Err(text(400, "default namespace can not be deleted"));
                }
                let holds_variables = lock(&self.core)
                    .store
                    .all()
                    .any(|v| v.metadata.namespace == name);
                if holds_variables {
                    return Err(text(
                        500,
                        format!(
                            "namespace {name:?} contains at least one variable. All variables in namespace must be deleted before it can be deleted"
                        ),
                    ));
                }
                let index = self.next_index();
                lock(&self.admin).namespaces.remove(name);
                Ok(Answer::Written(index))
            }
            _ => Err(text(405, "Invalid method")),
        }
    }
}

fn token_json(accessor: &str, token: &Token, name: &str, index: u64) -> Value {
    let (kind, policies) = match &token.kind {
        TokenKind::Management => ("management", Value::Null),
        TokenKind::Client { policies } | TokenKind::Workload { policies, .. } => {
            ("client", json!(policies))
        }
    };
    json!({
        "AccessorID": accessor,
        "SecretID": token.secret_id,
        "Name": name,
        "Type": kind,
        "Policies": policies,
        "Roles": [],
        "Global": false,
        "CreateIndex": index,
        "ModifyIndex": index,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::acl::{AclConfig, Capability};
    use crate::clock::TokioClock;
    use crate::profile::Profile;

    fn engine(acl: AclConfig) -> Engine {
        Engine::new(Profile::fast(), Arc::new(TokioClock::new()), acl)
    }

    fn root() -> AclConfig {
        AclConfig::enabled().with_token(Token::management("root"))
    }

    fn put(e: &Engine, path: &str, token: &str, body: Value) -> Answer {
        e.admin(&Method::PUT, path, token, body.to_string().as_bytes())
            .unwrap()
    }

    const RULES: &str =
        r#"namespace "default" { variables { path "app/*" { capabilities = ["read"] } } }"#;

    #[test]
    fn policies_and_tokens_grant_what_the_rules_say() {
        let e = engine(root());
        let body = json!({"Name": "reader", "Rules": RULES});
        assert!(matches!(
            put(&e, "/v1/acl/policy/reader", "root", body),
            Answer::Written(_)
        ));
        let Answer::Json(200, token) = put(
            &e,
            "/v1/acl/token",
            "root",
            json!({"Name": "t", "Type": "client", "Policies": ["reader"]}),
        ) else {
            panic!("token not created");
        };
        let secret = token["SecretID"].as_str().unwrap();
        let caller = e.caller(secret).unwrap();
        assert!(caller.allows("default", "app/x", Capability::Read, false));
        assert!(!caller.allows("default", "app/x", Capability::Write, false));
        let Some(Answer::Json(200, me)) = e.admin(&Method::GET, "/v1/acl/token/self", secret, b"")
        else {
            panic!("no self");
        };
        assert_eq!(me["AccessorID"], token["AccessorID"]);
        assert_eq!(me["Type"], "client");
        // only management may write policies; the token is gone once deleted
        assert_eq!(
            put(
                &e,
                "/v1/acl/policy/x",
                secret,
                json!({"Name": "x", "Rules": RULES})
            ),
            text(403, "Permission denied")
        );
        let accessor = token["AccessorID"].as_str().unwrap();
        let path = format!("/v1/acl/token/{accessor}");
        assert!(matches!(
            e.admin(&Method::DELETE, &path, "root", b"").unwrap(),
            Answer::Written(_)
        ));
        assert!(e.caller(secret).is_none());
    }

    #[test]
    fn invalid_policies_and_disabled_acls_are_refused() {
        let e = engine(root());
        let slash =
            r#"namespace "default" { variables { path "/a" { capabilities = ["read"] } } }"#;
        let sudo = r#"namespace "default" { variables { path "a" { capabilities = ["sudo"] } } }"#;
        for rules in [slash, sudo, "namespace {"] {
            let Answer::Text(400, message) = put(
                &e,
                "/v1/acl/policy/p",
                "root",
                json!({"Name": "p", "Rules": rules}),
            ) else {
                panic!("{rules} accepted");
            };
            assert!(message.starts_with("policy 0 invalid"), "{message}");
        }
        // Nomad's texts: the rules' error in ACLPolicy.Validate's multierror.
        let unknown = format!("{RULES}\nbogus = 1\nagent {{}}\nagent {{}}");
        assert_eq!(
            put(
                &e,
                "/v1/acl/policy/p",
                "root",
                json!({"Name": "p", "Rules": unknown})
            ),
            text(
                400,
                "policy 0 invalid: 1 error occurred:\n\t* failed to parse rules: Invalid or duplicate policy keys: agent, bogus\n\n"
            )
        );
        assert_eq!(
            put(
                &e,
                "/v1/acl/policy/p",
                "root",
                json!({"Name": "p", "Rules": sudo})
            ),
            text(
                400,
                "policy 0 invalid: 1 error occurred:\n\t* failed to parse rules: Invalid variable capability 'sudo' in namespace default\n\n"
            )
        );
        let nested = r#"namespace "default" { bogus = 1 variables { bogus = 2 path "a" { capabilities = ["read"] bogus = 3 } } }"#;
        assert!(matches!(
            put(
                &e,
                "/v1/acl/policy/p",
                "root",
                json!({"Name": "p", "Rules": nested})
            ),
            Answer::Written(_)
        ));
        assert_eq!(
            put(
                &e,
                "/v1/acl/policy/p",
                "root",
                json!({"Name": "q", "Rules": RULES})
            ),
            text(400, "ACL policy name does not match request path")
        );
        assert_eq!(
            put(
                &e,
                "/v1/acl/policy/p",
                "nobody",
                json!({"Name": "p", "Rules": RULES})
            ),
            text(403, "ACL token not found")
        );
        let off = engine(AclConfig::disabled());
        assert_eq!(
            off.admin(&Method::GET, "/v1/acl/token/self", "", b""),
            Some(text(400, "ACL support disabled"))
        );
        assert_eq!(off.admin(&Method::GET, "/v1/var/x", "", b""), None);
    }

    #[test]
    fn namespaces_come_and_go() {
        let e = engine(root());
        assert!(matches!(
            put(&e, "/v1/namespace/ns1", "root", json!({"Name": "ns1"})),
            Answer::Written(_)
        ));
        assert!(matches!(
            e.admin(&Method::GET, "/v1/namespace/ns1", "root", b""),
            Some(Answer::Json(200, _))
        ));
        assert!(matches!(
            e.admin(&Method::DELETE, "/v1/namespace/default", "root", b""),
            Some(Answer::Text(400, _))
        ));
        assert!(matches!(
            e.admin(&Method::DELETE, "/v1/namespace/ns1", "root", b""),
            Some(Answer::Written(_))
        ));
        assert!(matches!(
            e.admin(&Method::GET, "/v1/namespace/ns1", "root", b""),
            Some(Answer::Text(404, _))
        ));
    }
}
