//! Steps of ACLs: policies and tokens made with Nomad's ACL API, a workload identity on the
//! reference server, and what a token can and cannot do.

use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use nomad_conform_variables::{Token, WorkloadClaim};
use serde_json::{Value, json};

use super::Target;
use super::setup::{policy_call, policy_rules, token_call};
use super::{Extras, POLICY_ROOT, ScenarioToken, StepResult, VariablesWorld, items, lock_id};
use crate::plugins::variables::{Call, Credential};

impl VariablesWorld {
    /// Make a policy with `rules` (paths in the specs' names) and a client token with it,
    /// known as `label`; anything but success blocks the clause on the policy clause.
    async fn make_token(&mut self, label: &str, rules: Vec<(String, Vec<String>)>) -> StepResult {
        let rules: Vec<(String, Vec<String>)> = rules
            .into_iter()
            .map(|(name, caps)| (self.path(&name), caps))
            .collect();
        let grants = rules
            .iter()
            .map(|(p, c)| format!("{} on {p}", c.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        let name = self.made_name(label);
        let endpoint = self.endpoint();
        self.registry().policy(&endpoint, &name);
        let description = format!("nomad-conform {} ({label})", self.ctx().clause.id);
        let hcl = policy_rules("default", &rules);
        let i = self
            .send(policy_call(&name, &hcl, &description, self.admin()))
            .await;
        let e = self.exchange(i);
        if e.status != Some(200) {
            return Err(self.blocked(
                POLICY_ROOT,
                &format!("the ACL policy {name} ({grants}) is accepted with 200"),
                &e.outcome(),
            ));
        }
        let i = self.send(token_call(&name, &name, self.admin())).await;
        let e = self.exchange(i);
        let v = e.json().unwrap_or(Value::Null);
        let field = |f: &str| v.get(f).and_then(Value::as_str).map(str::to_string);
        let (Some(200), Some(accessor), Some(secret)) =
            (e.status, field("AccessorID"), field("SecretID"))
        else {
            return Err(self.blocked(
                POLICY_ROOT,
                &format!("a client token with the ACL policy {name} is made (200 with AccessorID and SecretID)"),
                &e.outcome(),
            ));
        };
        self.registry().token(&endpoint, &accessor);
        self.ctx().run.store.add_secret(&secret);
        self.tokens.insert(
            label.to_string(),
            ScenarioToken {
                credential: Credential::scenario(label, &secret),
                grants,
            },
        );
        Ok(())
    }
}

fn capabilities(text: &str) -> Vec<String> {
    text.split(',')
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

#[given(expr = "a token {string} with {string} on {string}")]
async fn token_with(
    w: &mut VariablesWorld,
    label: String,
    caps: String,
    name: String,
) -> StepResult {
    w.make_token(&label, vec![(name, capabilities(&caps))])
        .await
}

#[given(expr = "a token {string} with these rules:")]
async fn token_with_rules(w: &mut VariablesWorld, label: String, step: &Step) -> StepResult {
    let Some(table) = &step.table else {
        return Err(w
            .ctx()
            .harness_error("the step needs a table of path rules"));
    };
    let rules = table
        .rows
        .iter()
        .skip(1) // | path | capabilities |
        .filter_map(|r| match r.as_slice() {
            [path, caps, ..] => Some((path.clone(), capabilities(caps))),
            _ => None,
        })
        .collect();
    w.make_token(&label, rules).await
}

#[given(regex = r#"^a workload identity "([^"]*)" for job JOB, group "([^"]*)", task "([^"]*)"$"#)]
async fn workload_identity(
    w: &mut VariablesWorld,
    label: String,
    group: String,
    task: String,
) -> StepResult {
    let Target::Reference { server, .. } = &w.config().target else {
        return Err(w.ctx().skip(
            "a workload identity token needs the reference server (Nomad makes one only for a running allocation)",
        ));
    };
    let server = server.clone();
    let secret = uuid::Uuid::new_v4().to_string();
    let claim = WorkloadClaim {
        namespace: "default".into(),
        job: w.job(),
        group: group.clone(),
        task: task.clone(),
    };
    server.upsert_token(Token::workload(&secret, claim, &[]));
    let credential = Credential::scenario(&label, &secret);
    // Learn its accessor, so that cleanup removes it as any other token.
    let i = w
        .send(Call {
            operation: "acl-token",
            method: "GET",
            target: "/v1/acl/token/self".into(),
            body: None,
            credential: credential.clone(),
        })
        .await;
    match w.exchange(i).json().and_then(|v| {
        v.get("AccessorID")
            .and_then(Value::as_str)
            .map(str::to_string)
    }) {
        Some(accessor) => {
            let endpoint = w.endpoint();
            w.registry().token(&endpoint, &accessor);
        }
        None => server.remove_token(&secret),
    }
    w.tokens.insert(
        label,
        ScenarioToken {
            credential,
            grants: format!(
                "a workload identity of job {}, group {group}, task {task}, in namespace default, with no policy",
                w.job()
            ),
        },
    );
    Ok(())
}

#[when(expr = "the harness creates a policy with {string} on {string}")]
async fn creates_policy(w: &mut VariablesWorld, caps: String, name: String) {
    let rules = policy_rules("default", &[(w.path(&name), capabilities(&caps))]);
    w.create_policy(rules).await;
}

#[then(
    regex = r#"^(the token "[^"]*"|a request without a token|a request with an unknown token) (can|cannot) (read|write|delete|list|lock) "([^"]*)"$"#
)]
async fn token_can(
    w: &mut VariablesWorld,
    who: String,
    can: String,
    op: String,
    name: String,
) -> StepResult {
    let (credential, whom) = match who.as_str() {
        "a request without a token" => (Credential::anonymous(), who.clone()),
        "a request with an unknown token" => (
            Credential::made_up(&uuid::Uuid::new_v4().to_string()),
            who.clone(),
        ),
        _ => {
            let label = who.trim_start_matches("the token \"").trim_end_matches('"');
            let Some(t) = w.tokens.get(label) else {
                return Err(w
                    .ctx()
                    .harness_error(format!("no token {label:?} was made")));
            };
            (t.credential.clone(), format!("{who} ({})", t.grants))
        }
    };
    let path = w.path(&name);
    let may = can == "can";
    let (verb, allowed): (&str, Vec<u16>) = match op.as_str() {
        "read" => ("read", vec![200]),
        "write" => ("write", vec![200]),
        "delete" => ("delete", vec![204]),
        "list" => ("list", vec![200]),
        _ => ("lock", vec![200]),
    };
    let expected = format!(
        "{whom} {} {verb} {path}: {}",
        if may { "may" } else { "may not" },
        match (op.as_str(), may) {
            ("list", true) => "a list answers 200 and shows it".to_string(),
            ("list", false) => "a list does not show it".to_string(),
            ("lock", true) => "lock-acquire, lock-renew and lock-release answer 200".to_string(),
            (_, true) => format!("the request answers {}", allowed[0]),
            (_, false) => "the request answers 403".to_string(),
        }
    );
    let seen: Result<(), String> = match op.as_str() {
        "read" => {
            let i = w.read("default", &path, credential).await;
            status_is(w, i, if may { allowed[0] } else { 403 })
        }
        "write" => {
            let text = items("written-by=nomad-conform");
            let i = w
                .write("default", &path, Some(&text), Extras::default(), credential)
                .await;
            status_is(w, i, if may { allowed[0] } else { 403 })
        }
        "delete" => {
            let i = w.delete("default", &path, None, credential).await;
            status_is(w, i, if may { allowed[0] } else { 403 })
        }
        "list" => {
            let i = w.list(&path, credential).await;
            let e = w.exchange(i);
            let listed = e.status == Some(200)
                && e.json()
                    .and_then(|v| v.as_array().cloned())
                    .is_some_and(|l| {
                        l.iter()
                            .any(|m| m.get("Path").and_then(Value::as_str) == Some(path.as_str()))
                    });
            match (may, listed, e.status) {
                (true, true, _) | (false, false, Some(200 | 403)) => Ok(()),
                _ => Err(e.summary()),
            }
        }
        _ => {
            let body = json!({"Path": path});
            let i = w
                .lock_op("lock-acquire", "default", &path, body, credential.clone())
                .await;
            let e = w.exchange(i).clone();
            match (may, e.status, lock_id(&e)) {
                (false, Some(403), _) => Ok(()),
                (true, Some(200), Some(id)) => {
                    let lock = json!({"Path": path, "Lock": {"ID": id}});
                    let r = w
                        .lock_op(
                            "lock-renew",
                            "default",
                            &path,
                            lock.clone(),
                            credential.clone(),
                        )
                        .await;
                    let r = w.exchange(r).clone();
                    let l = w
                        .lock_op(
                            "lock-release",
                            "default",
                            &path,
                            json!({"Lock": {"ID": id}}),
                            credential,
                        )
                        .await;
                    let l = w.exchange(l).clone();
                    if r.status == Some(200) && l.status == Some(200) {
                        Ok(())
                    } else {
                        Err(format!("{}\n{}\n{}", e.summary(), r.summary(), l.summary()))
                    }
                }
                _ => Err(e.summary()),
            }
        }
    };
    seen.map_err(|seen| w.fail(&expected, &seen))
}

fn status_is(w: &VariablesWorld, i: usize, want: u16) -> Result<(), String> {
    let e = w.exchange(i);
    if e.status == Some(want) {
        Ok(())
    } else {
        Err(e.summary())
    }
}

#[then(expr = "the token {string} cannot renew or release the lock on {string}")]
async fn token_cannot_renew_or_release(
    w: &mut VariablesWorld,
    label: String,
    name: String,
) -> StepResult {
    let Some(t) = w.tokens.get(&label).cloned() else {
        return Err(w
            .ctx()
            .harness_error(format!("no token {label:?} was made")));
    };
    let path = w.path(&name);
    let Some(id) = w.holds.get(&path).map(|h| h.id.clone()) else {
        return Err(w
            .ctx()
            .harness_error(format!("the harness holds no lock on {path}")));
    };
    let renew = json!({"Path": path, "Lock": {"ID": id}});
    let r = w
        .lock_op("lock-renew", "default", &path, renew, t.credential.clone())
        .await;
    let release = json!({"Lock": {"ID": id}});
    let l = w
        .lock_op(
            "lock-release",
            "default",
            &path,
            release,
            t.credential.clone(),
        )
        .await;
    let (r, l) = (w.exchange(r).clone(), w.exchange(l).clone());
    if r.status == Some(403) && l.status == Some(403) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "the token \"{label}\" ({}) may not renew or release the lock the harness holds on {path}, even with its lock ID: lock-renew and lock-release answer 403",
            t.grants
        ),
        &format!("{}\n{}", r.summary(), l.summary()),
    ))
}

impl VariablesWorld {
    /// `PUT /v1/acl/policy/<made-up name>` with `rules`; the answer is the one judged next.
    async fn create_policy(&mut self, rules: String) {
        let policy = self.made_name("policy");
        let endpoint = self.endpoint();
        self.registry().policy(&endpoint, &policy);
        let description = format!("nomad-conform {}", self.ctx().clause.id);
        let i = self
            .send(policy_call(&policy, &rules, &description, self.admin()))
            .await;
        self.last = Some(i);
    }
}

#[when("the harness creates a policy with unknown top-level keys and a repeated agent block")]
async fn creates_policy_unknown_keys(w: &mut VariablesWorld) {
    let valid = policy_rules("default", &[(w.path("app/*"), vec!["read".into()])]);
    let rules = format!(
        "{valid}agent {{\n  policy = \"read\"\n}}\nagent {{\n  policy = \"read\"\n}}\nbogus = \"x\"\nzeta {{\n}}\n"
    );
    w.create_policy(rules).await;
}

#[when(
    "the harness creates a policy with unknown keys inside its namespace, variables and path blocks"
)]
async fn creates_policy_nested_unknown_keys(w: &mut VariablesWorld) {
    let path = serde_json::Value::String(w.path("app/*")).to_string();
    let rules = format!(
        "namespace \"default\" {{\n  bogus = \"x\"\n  variables {{\n    bogus = \"y\"\n    path {path} {{\n      capabilities = [\"read\"]\n      bogus        = \"z\"\n    }}\n  }}\n}}\n"
    );
    w.create_policy(rules).await;
}
