//! Step definitions of the Variables server suite, and the World they share.
//!
//! Steps reach the server only through [`VariablesWorld::send`], which records every exchange
//! in the case, and register what they make (variables, lock IDs, ACL policies and tokens,
//! namespaces) in the scenario's [`Registry`] before they make it, so the ledger can undo it.
//! Variable names in the specs are relative to the scenario's own prefix
//! (`conform/<token>/...`); names under `nomad/` are absolute, with `JOB` standing for the
//! scenario's job name. Failure messages say what the clause requires, what the server
//! answered, and how to repeat every request of the scenario with `curl`.

mod acl;
mod basics;
mod config;
mod lock_operations;
pub mod setup;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nomad_conform_variables::ServerHandle;
use serde_json::Value;

use crate::plugins::variables::{Call, Credential, Endpoint, Exchange, send};
use crate::world::{ScenarioCtx, SuiteWorld};
use setup::{Cleanup, Registry, variable_target};

pub use config::{Acl, Target, Timing, VariablesConfig};

/// The outcome of a step: `Err` carries the whole failure message.
pub type StepResult = Result<(), String>;

/// The clause every clause that writes a variable first rests on.
pub const WRITE_ROOT: &str = "VARIABLES-SET-CREATE";
/// The clause every clause that takes a lock first rests on.
pub const LOCK_ROOT: &str = "VARIABLES-ACQUIRE-GRANTS";
/// The clause every ACL clause that makes a policy rests on.
pub const POLICY_ROOT: &str = "VARIABLES-ACL-POLICY-CHECKED";

/// How many requests a failure message repeats at most.
const REPRODUCE_LIMIT: usize = 14;

/// What a successful write answered.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    pub create_index: u64,
    pub modify_index: u64,
}

/// A lock the harness (as "the holder") got.
#[derive(Clone, Debug)]
pub struct Hold {
    pub path: String,
    pub id: String,
    /// When the acquire was sent and answered.
    pub sent: Instant,
    pub answered: Instant,
    pub ttl: Duration,
    pub delay: Duration,
}

/// A token the scenario made, and what its policy says (for messages).
#[derive(Clone, Debug)]
pub struct ScenarioToken {
    pub credential: Credential,
    pub grants: String,
}

#[derive(Debug, Default, cucumber::World)]
pub struct VariablesWorld {
    ctx: Option<ScenarioCtx<VariablesConfig>>,
    registry: Option<Registry>,
    /// A server the scenario started for itself.
    own: Option<(Endpoint, Arc<ServerHandle>)>,
    /// Every exchange of the scenario, in order.
    exchanges: Vec<Exchange>,
    /// The exchange the next Then step judges (an index into `exchanges`).
    last: Option<usize>,
    /// The exchanges of the latest When step that made several.
    batch: Vec<usize>,
    /// The namespace and path of the latest variable request.
    subject: Option<(String, String)>,
    /// Successful writes by (namespace, path), oldest first.
    writes: BTreeMap<(String, String), Vec<Written>>,
    /// Locks the harness holds, by path.
    holds: BTreeMap<String, Hold>,
    /// Lock IDs "the other client" got, by path.
    others: BTreeMap<String, String>,
    tokens: BTreeMap<String, ScenarioToken>,
    /// The scenario's own namespace ("that namespace").
    namespace: Option<String>,
    /// Counts names made up in the scenario (policies).
    made_names: usize,
    /// Renews and other clients' acquires of a timed When step.
    renews: Vec<usize>,
    foreign: Vec<usize>,
    /// A client that keeps trying to acquire in the background.
    background: Option<tokio::task::JoinHandle<Vec<Exchange>>>,
}

impl SuiteWorld for VariablesWorld {
    type Config = VariablesConfig;

    fn attach(&mut self, ctx: ScenarioCtx<VariablesConfig>) {
        let config = &ctx.run.config;
        let registry = Registry::new(config.admin.clone(), config.timing.request_timeout);
        ctx.ledger.track(Cleanup(registry.clone()));
        self.registry = Some(registry);
        self.ctx = Some(ctx);
    }

    fn scenario(&self) -> Option<&ScenarioCtx<VariablesConfig>> {
        self.ctx.as_ref()
    }
}

impl VariablesWorld {
    pub fn ctx(&self) -> &ScenarioCtx<VariablesConfig> {
        self.ctx
            .as_ref()
            .expect("the before hook attaches a scenario context")
    }

    pub fn config(&self) -> &VariablesConfig {
        &self.ctx().run.config
    }

    pub fn registry(&self) -> &Registry {
        self.registry
            .as_ref()
            .expect("the before hook attaches a registry")
    }

    /// The server this scenario talks to.
    pub fn endpoint(&self) -> Endpoint {
        match &self.own {
            Some((e, _)) => e.clone(),
            None => self.config().endpoint.clone(),
        }
    }

    pub fn admin(&self) -> Credential {
        self.config().admin.clone()
    }

    /// `conform/<token>`: every relative name lives below it.
    pub fn prefix(&self) -> String {
        format!("conform/{}", self.ctx().token)
    }

    /// The scenario's job name (`JOB` in the specs).
    pub fn job(&self) -> String {
        format!("conform-{}", self.ctx().token)
    }

    /// The full path of a name in the specs.
    pub fn path(&self, name: &str) -> String {
        if name == "nomad" || name.starts_with("nomad/") {
            return name.replace("JOB", &self.job());
        }
        match name.strip_prefix('/') {
            Some(rest) => format!("/{}/{rest}", self.prefix()),
            None => format!("{}/{name}", self.prefix()),
        }
    }

    /// "that namespace", or a harness error when the scenario made none.
    pub fn that_namespace(&self) -> Result<String, String> {
        self.namespace.clone().ok_or_else(|| {
            self.ctx()
                .harness_error("the scenario has no namespace of its own")
        })
    }

    /// Send `call` to the scenario's server and record the exchange; returns its index.
    pub async fn send(&mut self, call: Call) -> usize {
        let endpoint = self.endpoint();
        let e = send(&endpoint, call, self.config().timing.request_timeout).await;
        self.keep(e)
    }

    /// Record an exchange made elsewhere (a background client); returns its index.
    pub fn keep(&mut self, e: Exchange) -> usize {
        let ctx = self.ctx();
        let start = crate::recorder::lock(&ctx.case).started;
        ctx.record(e.event(start));
        self.exchanges.push(e);
        self.exchanges.len() - 1
    }

    pub fn exchange(&self, i: usize) -> &Exchange {
        &self.exchanges[i]
    }

    /// The exchange the Then steps judge.
    pub fn last(&self) -> Result<&Exchange, String> {
        self.last.map(|i| &self.exchanges[i]).ok_or_else(|| {
            self.ctx()
                .harness_error("no request has been made to judge")
        })
    }

    /// A request on a variable: registers it first (a write may create it), remembers it as
    /// the subject, and makes it the answer the next Then step judges.
    pub async fn variable_call(&mut self, req: VarRequest) -> usize {
        if req.method != "GET" {
            let endpoint = self.endpoint();
            self.registry()
                .variable(&endpoint, &req.namespace, &req.path);
        }
        self.subject = Some((req.namespace.clone(), req.path.clone()));
        let i = self
            .send(Call {
                operation: req.operation,
                method: req.method,
                target: variable_target(&req.path, &req.namespace, req.query.as_deref()),
                body: req.body.map(|b| b.to_string()),
                credential: req.credential,
            })
            .await;
        self.last = Some(i);
        i
    }

    /// GET the variable.
    pub async fn read(&mut self, namespace: &str, path: &str, credential: Credential) -> usize {
        self.variable_call(VarRequest {
            operation: "read",
            method: "GET",
            namespace: namespace.into(),
            path: path.into(),
            query: None,
            body: None,
            credential,
        })
        .await
    }

    /// PUT items (`None`: `{}`), with the holder's lock ID and a cas index if given.
    pub async fn write(
        &mut self,
        namespace: &str,
        path: &str,
        items: Option<&BTreeMap<String, String>>,
        with: Extras,
        credential: Credential,
    ) -> usize {
        let mut body = serde_json::json!({
            "Items": items.map(items_json).unwrap_or_else(|| serde_json::json!({})),
        });
        if let Some(id) = &with.lock_id {
            body["Lock"] = serde_json::json!({"ID": id});
        }
        let i = self
            .variable_call(VarRequest {
                operation: if with.cas.is_some() { "cas" } else { "set" },
                method: "PUT",
                namespace: namespace.into(),
                path: path.into(),
                query: with.cas.map(|c| format!("cas={c}")),
                body: Some(body),
                credential,
            })
            .await;
        self.note_write(i);
        i
    }

    /// DELETE the variable, with a cas index if given.
    pub async fn delete(
        &mut self,
        namespace: &str,
        path: &str,
        cas: Option<u64>,
        credential: Credential,
    ) -> usize {
        self.variable_call(VarRequest {
            operation: if cas.is_some() {
                "delete-cas"
            } else {
                "delete"
            },
            method: "DELETE",
            namespace: namespace.into(),
            path: path.into(),
            query: cas.map(|c| format!("cas={c}")),
            body: None,
            credential,
        })
        .await
    }

    /// A lock operation (`lock-acquire`, `lock-renew`, `lock-release`) with `body`; a lock ID
    /// in a 200 answer is registered for cleanup.
    pub async fn lock_op(
        &mut self,
        flag: &'static str,
        namespace: &str,
        path: &str,
        body: Value,
        credential: Credential,
    ) -> usize {
        let i = self
            .variable_call(VarRequest {
                operation: flag,
                method: "PUT",
                namespace: namespace.into(),
                path: path.into(),
                query: Some(flag.to_string()),
                body: Some(body),
                credential,
            })
            .await;
        let e = &self.exchanges[i];
        if e.status == Some(200)
            && let Some(id) = lock_id(e)
        {
            self.note_lock(namespace, path, &id);
        }
        i
    }

    /// Remember a lock ID the server gave for `path`, for cleanup.
    pub fn note_lock(&self, namespace: &str, path: &str, id: &str) {
        let endpoint = self.endpoint();
        self.registry().lock_id(&endpoint, namespace, path, id);
    }

    /// Remember a successful write's indexes.
    pub fn note_write(&mut self, i: usize) {
        let e = &self.exchanges[i];
        if e.status != Some(200) {
            return;
        }
        let Some((ns, path)) = self.subject.clone() else {
            return;
        };
        if let Some(w) = written(e) {
            self.writes.entry((ns, path)).or_default().push(w);
        }
    }

    pub fn writes_of(&self, namespace: &str, path: &str) -> &[Written] {
        self.writes
            .get(&(namespace.to_string(), path.to_string()))
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// A name unique to the scenario for a policy, token or namespace.
    pub fn made_name(&mut self, what: &str) -> String {
        self.made_names += 1;
        format!("{}-{what}{}", self.ctx().token, self.made_names)
    }

    /// The reproduce lines: the scenario's requests as curl commands (the report adds the
    /// command that reruns the clause).
    pub fn reproduce(&self) -> Vec<String> {
        let mut out = Vec::new();
        let skip = self.exchanges.len().saturating_sub(REPRODUCE_LIMIT);
        if skip > 0 {
            out.push(format!(
                "# ({skip} earlier requests of the scenario not shown)"
            ));
        }
        out.extend(self.exchanges.iter().skip(skip).map(Exchange::curl));
        out
    }

    /// A failure text with the reproduce lines.
    pub fn fail(&self, expected: &str, seen: &str) -> String {
        crate::steps::failure_text(expected, seen, &self.reproduce())
    }

    /// A precondition failed: the server broke `root`, so this clause cannot be judged.
    pub fn blocked(&self, root: &str, expected: &str, seen: &str) -> String {
        let text = self.fail(&format!("precondition: {expected}"), seen);
        self.ctx().blocked(root, text)
    }

    /// Judge the latest answer's status and its plain-text body (`exact`: the whole body,
    /// else a part of it) and, if `index` is given, its X-Nomad-Index header.
    pub fn expect_text(
        &self,
        want: u16,
        text: &str,
        exact: bool,
        index: Option<u64>,
    ) -> StepResult {
        let e = self.last()?;
        let body = e.body.trim();
        let text_ok = if exact {
            body == text
        } else {
            body.contains(text)
        };
        let index_ok = index.is_none() || e.index == index;
        if e.status == Some(want) && text_ok && index_ok {
            return Ok(());
        }
        let mut expected = format!(
            "{} answers {want} with {} {text:?}",
            e.request_line(),
            if exact {
                "the text"
            } else {
                "a text containing"
            }
        );
        let mut seen = e.outcome();
        if let Some(i) = index {
            expected.push_str(&format!(" and X-Nomad-Index: {i}"));
            seen.push_str(&format!(
                "\nX-Nomad-Index: {}",
                e.index.map_or("absent".into(), |i| i.to_string())
            ));
        }
        Err(self.fail(&expected, &seen))
    }

    /// Judge the latest answer's status.
    pub fn expect_status(&self, want: u16) -> StepResult {
        let e = self.last()?;
        if e.status == Some(want) {
            return Ok(());
        }
        Err(self.fail(
            &format!("{} answers {want}", e.request_line()),
            &e.outcome(),
        ))
    }
}

/// One request on a variable.
#[derive(Debug)]
pub struct VarRequest {
    pub operation: &'static str,
    pub method: &'static str,
    pub namespace: String,
    pub path: String,
    /// The query without `?`: a lock flag, `cas=N`, `prefix=...`.
    pub query: Option<String>,
    pub body: Option<Value>,
    pub credential: Credential,
}

/// What a write carries beside its items.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    pub lock_id: Option<String>,
    pub cas: Option<u64>,
}

/// `k=v k2=v2` as items.
pub fn items(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Items as the JSON object Nomad takes.
pub fn items_json(items: &BTreeMap<String, String>) -> Value {
    Value::Object(
        items
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// `k=v k2=v2` from items (for messages).
pub fn items_text(items: &BTreeMap<String, String>) -> String {
    if items.is_empty() {
        return "no items".into();
    }
    items
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `Items` of an answer (`None` when absent or not strings).
pub fn items_of(v: &Value) -> Option<BTreeMap<String, String>> {
    v.get("Items")?
        .as_object()?
        .iter()
        .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
        .collect()
}

/// A numeric field of an answer.
pub fn number(v: &Value, field: &str) -> Option<u64> {
    v.get(field)?.as_u64()
}

/// The indexes a write answered.
pub fn written(e: &Exchange) -> Option<Written> {
    let v = e.json()?;
    Some(Written {
        create_index: number(&v, "CreateIndex")?,
        modify_index: number(&v, "ModifyIndex")?,
    })
}

/// The lock ID of an answer.
pub fn lock_id(e: &Exchange) -> Option<String> {
    e.json()?
        .get("Lock")?
        .get("ID")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// A Go duration as Nomad's API takes it.
pub fn go_duration(d: Duration) -> String {
    nomad_conform_variables::format_go_duration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// `1.5s`
pub fn fmt(d: Duration) -> String {
    crate::fmt_duration(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_texts() {
        let i = items("user=admin port=8080 x=a=b");
        assert_eq!(i["user"], "admin");
        assert_eq!(i["x"], "a=b");
        assert_eq!(items_text(&i), "port=8080 user=admin x=a=b");
        assert_eq!(items_text(&items("")), "no items");
        let v = serde_json::json!({"Items": {"a": "1"}, "ModifyIndex": 7});
        assert_eq!(items_of(&v).unwrap()["a"], "1");
        assert_eq!(number(&v, "ModifyIndex"), Some(7));
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
    }
}
