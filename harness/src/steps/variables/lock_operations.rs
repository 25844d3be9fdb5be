//! Steps of variable locks: acquire, renew, release, locked variables, expiry, and a restart
//! of the server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cucumber::{given, then, when};
use nomad_conform_variables::{ServerHandle, VariablesServer};
use serde_json::{Value, json};

use super::Target;
use super::setup::variable_target;
use super::{
    Extras, Hold, LOCK_ROOT, StepResult, VariablesWorld, fmt, go_duration, items, items_json,
    lock_id,
};
use crate::plugins::variables::{Call, Credential, Endpoint, Exchange, send};

/// What an acquire asks for.
#[derive(Clone, Debug, Default)]
struct Ask {
    items: Option<std::collections::BTreeMap<String, String>>,
    ttl: Option<Duration>,
    delay: Option<Duration>,
}

impl Ask {
    fn body(&self, path: &str) -> Value {
        let mut body = json!({ "Path": path });
        if let Some(items) = &self.items {
            body["Items"] = items_json(items);
        }
        if self.ttl.is_some() || self.delay.is_some() {
            let mut lock = serde_json::Map::new();
            if let Some(t) = self.ttl {
                lock.insert("TTL".into(), Value::String(go_duration(t)));
            }
            if let Some(d) = self.delay {
                lock.insert("LockDelay".into(), Value::String(go_duration(d)));
            }
            body["Lock"] = Value::Object(lock);
        }
        body
    }
}

impl VariablesWorld {
    fn numbers(&self) -> &nomad_conform_variables::Profile {
        &self.config().numbers
    }

    /// Acquire as "another client" or the harness (no lock ID), with the management token.
    async fn acquire(&mut self, path: &str, ask: &Ask, credential: Credential) -> usize {
        let body = ask.body(path);
        self.lock_op("lock-acquire", "default", path, body, credential)
            .await
    }

    /// The harness takes the lock and becomes "the holder"; anything but a granted lock
    /// blocks the clause on the acquire clause.
    async fn hold(&mut self, name: &str, ask: Ask) -> StepResult {
        let path = self.path(name);
        let i = self.acquire(&path, &ask, self.admin()).await;
        let e = self.exchange(i);
        match (e.status, lock_id(e)) {
            (Some(200), Some(id)) => {
                let hold = Hold {
                    path: path.clone(),
                    id,
                    sent: e.at,
                    answered: e.answered(),
                    ttl: ask.ttl.unwrap_or(self.numbers().lock_ttl_default),
                    delay: ask.delay.unwrap_or(self.numbers().lock_delay_default),
                };
                self.holds.insert(path, hold);
                Ok(())
            }
            _ => Err(self.blocked(
                LOCK_ROOT,
                &format!("the harness's lock-acquire on {path} answers 200 with a lock ID"),
                &e.outcome(),
            )),
        }
    }

    fn holder(&self, name: &str) -> Result<Hold, String> {
        let path = self.path(name);
        self.holds.get(&path).cloned().ok_or_else(|| {
            self.ctx()
                .harness_error(format!("the harness holds no lock on {path}"))
        })
    }

    async fn renew(&mut self, path: &str, id: &str, credential: Credential) -> usize {
        let body = json!({"Path": path, "Lock": {"ID": id}});
        self.lock_op("lock-renew", "default", path, body, credential)
            .await
    }

    async fn release(&mut self, path: &str, body: Value, credential: Credential) -> usize {
        self.lock_op("lock-release", "default", path, body, credential)
            .await
    }

    /// A client that keeps trying to acquire `path` until it gets the lock or `until`.
    fn keep_trying(&self, path: &str, until: Instant) -> tokio::task::JoinHandle<Vec<Exchange>> {
        let endpoint = self.endpoint();
        let registry = self.registry().clone();
        let credential = self.admin();
        let poll = self.config().timing.poll;
        let timeout = self.config().timing.request_timeout;
        let path = path.to_string();
        let body = json!({"Path": path}).to_string();
        tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let attempt = registry
                    .unless_stopped(async {
                        let call = Call {
                            operation: "lock-acquire",
                            method: "PUT",
                            target: variable_target(&path, "default", Some("lock-acquire")),
                            body: Some(body.clone()),
                            credential: credential.clone(),
                        };
                        let e = send(&endpoint, call, timeout).await;
                        if e.status == Some(200)
                            && let Some(id) = lock_id(&e)
                        {
                            registry.lock_id(&endpoint, "default", &path, &id);
                        }
                        e
                    })
                    .await;
                let Some(e) = attempt else { break };
                let done = e.status == Some(200);
                out.push(e);
                if done || Instant::now() >= until {
                    break;
                }
                tokio::time::sleep(poll).await;
            }
            out
        })
    }

    /// The background client's attempts, recorded; the index of its successful one.
    async fn background_attempts(&mut self) -> Result<(Vec<usize>, Option<usize>), String> {
        let Some(task) = self.background.take() else {
            return Err(self
                .ctx()
                .harness_error("no client was trying to acquire the lock"));
        };
        let attempts = task.await.map_err(|e| {
            self.ctx()
                .harness_error(format!("the trying client failed: {e}"))
        })?;
        let mut indexes = Vec::new();
        let mut success = None;
        for e in attempts {
            let ok = e.status == Some(200);
            let i = self.keep(e);
            indexes.push(i);
            if ok {
                success = Some(i);
            }
        }
        Ok((indexes, success))
    }
}

async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
}

#[given(expr = "the harness holds the lock on {string}")]
async fn holds_lock(w: &mut VariablesWorld, name: String) -> StepResult {
    w.hold(&name, Ask::default()).await
}

#[given(expr = "the harness holds the lock on {string} with items {string}")]
async fn holds_lock_with_items(w: &mut VariablesWorld, name: String, text: String) -> StepResult {
    let ask = Ask {
        items: Some(items(&text)),
        ..Ask::default()
    };
    w.hold(&name, ask).await
}

#[given(
    regex = r#"^the harness holds the lock on "([^"]*)" with the minimum TTL and a (short|long) lock delay$"#
)]
async fn holds_lock_timed(w: &mut VariablesWorld, name: String, delay: String) -> StepResult {
    let ttl = w.numbers().lock_ttl_min;
    let ask = Ask {
        items: None,
        ttl: Some(ttl),
        delay: Some(if delay == "short" { ttl / 10 } else { ttl * 2 }),
    };
    w.hold(&name, ask).await
}

#[when(expr = "the harness acquires the lock on {string} without items")]
async fn harness_acquires(w: &mut VariablesWorld, name: String) {
    let path = w.path(&name);
    w.acquire(&path, &Ask::default(), w.admin()).await;
}

#[when(
    regex = r#"^the harness acquires the lock on "([^"]*)" with (a TTL just below the minimum|a TTL just above the maximum|the minimum TTL|the maximum TTL)$"#
)]
async fn harness_acquires_ttl(w: &mut VariablesWorld, name: String, which: String) {
    let n = w.numbers().clone();
    let ttl = match which.as_str() {
        "a TTL just below the minimum" => n.lock_ttl_min * 9 / 10,
        "a TTL just above the maximum" => n.lock_ttl_max + n.lock_ttl_min,
        "the minimum TTL" => n.lock_ttl_min,
        _ => n.lock_ttl_max,
    };
    let path = w.path(&name);
    let ask = Ask {
        ttl: Some(ttl),
        ..Ask::default()
    };
    w.acquire(&path, &ask, w.admin()).await;
}

#[when(expr = "another client acquires the lock on {string}")]
async fn other_acquires(w: &mut VariablesWorld, name: String) {
    let path = w.path(&name);
    w.acquire(&path, &Ask::default(), w.admin()).await;
}

#[when(expr = "another client acquires the lock on {string} at 80% of the TTL")]
async fn other_acquires_later(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    sleep_until(hold.sent + hold.ttl * 8 / 10).await;
    w.acquire(&hold.path, &Ask::default(), w.admin()).await;
    Ok(())
}

#[when(expr = "the holder renews the lock on {string}")]
async fn holder_renews(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    w.renew(&hold.path, &hold.id, w.admin()).await;
    Ok(())
}

#[when(expr = "another client renews the lock on {string} with a made-up lock ID")]
async fn other_renews(w: &mut VariablesWorld, name: String) {
    let path = w.path(&name);
    let id = uuid::Uuid::new_v4().to_string();
    w.renew(&path, &id, w.admin()).await;
}

#[when(expr = "the holder releases the lock on {string}")]
async fn holder_releases(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    let body = json!({"Lock": {"ID": hold.id}});
    w.release(&hold.path, body, w.admin()).await;
    Ok(())
}

#[when(expr = "the holder releases the lock on {string} without its lock ID")]
async fn holder_releases_without_id(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    let body = json!({"Path": hold.path});
    w.release(&hold.path, body, w.admin()).await;
    Ok(())
}

#[when(expr = "the holder releases the lock on {string} with its lock ID and empty items")]
async fn holder_releases_with_items(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    let body = json!({"Lock": {"ID": hold.id}, "Items": {}});
    w.release(&hold.path, body, w.admin()).await;
    Ok(())
}

#[when(expr = "another client releases the lock on {string} with a made-up lock ID")]
async fn other_releases(w: &mut VariablesWorld, name: String) {
    let path = w.path(&name);
    let body = json!({"Lock": {"ID": uuid::Uuid::new_v4().to_string()}});
    w.release(&path, body, w.admin()).await;
}

#[when(expr = "the holder writes {string} with {string} and its lock ID")]
async fn holder_writes(w: &mut VariablesWorld, name: String, text: String) -> StepResult {
    let hold = w.holder(&name)?;
    let with = Extras {
        lock_id: Some(hold.id.clone()),
        cas: None,
    };
    w.write("default", &hold.path, Some(&items(&text)), with, w.admin())
        .await;
    Ok(())
}

#[when(expr = "the holder renews the lock on {string} every half TTL for three TTLs")]
async fn holder_keeps_renewing(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    w.renews.clear();
    w.foreign.clear();
    for k in 1..=6u32 {
        sleep_until(hold.answered + hold.ttl * k / 2).await;
        let i = w.renew(&hold.path, &hold.id, w.admin()).await;
        w.renews.push(i);
        if k >= 5 {
            let i = w.acquire(&hold.path, &Ask::default(), w.admin()).await;
            w.foreign.push(i);
        }
    }
    Ok(())
}

#[when(expr = "another client keeps trying to acquire the lock on {string}")]
async fn other_keeps_trying(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    let until = hold.sent + hold.ttl * 2 + hold.delay + w.config().timing.tolerance;
    w.background = Some(w.keep_trying(&hold.path, until));
    Ok(())
}

#[when(expr = "the holder renews the lock on {string} once the lock delay has begun")]
async fn holder_renews_late(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    sleep_until(hold.answered + hold.ttl * 2 + hold.delay / 2).await;
    w.renew(&hold.path, &hold.id, w.admin()).await;
    Ok(())
}

#[given("a server of the scenario's own")]
async fn own_server(w: &mut VariablesWorld) -> StepResult {
    let template = match &w.config().target {
        Target::Reference { template, .. } => (**template).clone(),
        Target::Nomad { .. } => {
            return Err(w
                .ctx()
                .skip("the clause restarts its server, which only the reference server allows"));
        }
    };
    let server: Arc<ServerHandle> = match VariablesServer::start(template).await {
        Ok(s) => Arc::new(s),
        Err(e) => {
            return Err(w
                .ctx()
                .harness_error(format!("failed to start a reference server: {e}")));
        }
    };
    let Some(endpoint) = Endpoint::of_server(&server) else {
        return Err(w
            .ctx()
            .harness_error("the reference server has no TCP address"));
    };
    w.registry().server(&endpoint, server.clone());
    w.own = Some((endpoint, server));
    Ok(())
}

#[when("the server restarts")]
async fn server_restarts(w: &mut VariablesWorld) -> StepResult {
    let Some((_, server)) = &w.own else {
        return Err(w
            .ctx()
            .harness_error("the scenario has no server of its own"));
    };
    server.restart().await.map_err(|e| {
        w.ctx()
            .harness_error(format!("failed to restart the server: {e}"))
    })
}

#[then("the answer is 200 with a lock ID")]
async fn answer_lock_id(w: &mut VariablesWorld) -> StepResult {
    let e = w.last()?;
    if e.status == Some(200) && lock_id(e).is_some() {
        return Ok(());
    }
    Err(w.fail(
        &format!("{} answers 200 with Lock.ID set", e.request_line()),
        &e.outcome(),
    ))
}

#[then("the answer's lock has the default TTL and the default lock delay")]
async fn answer_lock_defaults(w: &mut VariablesWorld) -> StepResult {
    let e = w.last()?;
    let n = w.numbers();
    let lock = e.json().and_then(|v| v.get("Lock").cloned());
    let duration = |field: &str| {
        lock.as_ref()
            .and_then(|l| l.get(field))
            .and_then(Value::as_str)
            .and_then(|t| nomad_conform_variables::parse_go_duration(t).ok())
            .and_then(|n| u64::try_from(n).ok())
            .map(Duration::from_nanos)
    };
    let (ttl, delay) = (duration("TTL"), duration("LockDelay"));
    if e.status == Some(200)
        && ttl == Some(n.lock_ttl_default)
        && delay == Some(n.lock_delay_default)
    {
        return Ok(());
    }
    let shown = |d: Option<Duration>| d.map_or("absent".to_string(), fmt);
    Err(w.fail(
        &format!(
            "{} answers 200 with Lock.TTL {} and Lock.LockDelay {} (the {} defaults)",
            e.request_line(),
            go_duration(n.lock_ttl_default),
            go_duration(n.lock_delay_default),
            n.name
        ),
        &format!(
            "TTL {}, LockDelay {}\nanswer: {}",
            shown(ttl),
            shown(delay),
            e.outcome()
        ),
    ))
}

#[then("the answer is 200 with the lock ID held")]
async fn answer_lock_held(w: &mut VariablesWorld) -> StepResult {
    let e = w.last()?;
    let held = w
        .subject
        .as_ref()
        .and_then(|(_, p)| w.holds.get(p))
        .map(|h| h.id.clone());
    if e.status == Some(200) && lock_id(e).is_some() && lock_id(e) == held {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "{} answers 200 with the held lock (Lock.ID {})",
            e.request_line(),
            held.unwrap_or_default()
        ),
        &e.outcome(),
    ))
}

#[then(expr = "the holder can still renew the lock on {string}")]
async fn holder_can_renew(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    let i = w.renew(&hold.path, &hold.id, w.admin()).await;
    let e = w.exchange(i);
    if e.status == Some(200) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "the lock on {} is still held under the holder's ID: its renew answers 200",
            hold.path
        ),
        &e.summary(),
    ))
}

#[then(expr = "the holder can release the lock on {string}")]
async fn holder_can_release(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    let i = w
        .release(&hold.path, json!({"Lock": {"ID": hold.id}}), w.admin())
        .await;
    let e = w.exchange(i);
    if e.status == Some(200) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "the holder's release of the lock on {} answers 200",
            hold.path
        ),
        &e.summary(),
    ))
}

#[then(regex = r#"^another client (can|cannot) acquire the lock on "([^"]*)"$"#)]
async fn other_can_acquire(w: &mut VariablesWorld, can: String, name: String) -> StepResult {
    let path = w.path(&name);
    let i = w.acquire(&path, &Ask::default(), w.admin()).await;
    let e = w.exchange(i).clone();
    let got = e.status == Some(200) && lock_id(&e).is_some();
    if got {
        // Give it back at once; cleanup would otherwise find it held.
        if let Some(id) = lock_id(&e) {
            w.release(&path, json!({"Lock": {"ID": id}}), w.admin())
                .await;
        }
    }
    match (can.as_str(), got) {
        ("can", true) => Ok(()),
        ("cannot", false) if e.status == Some(409) => Ok(()),
        ("can", false) => Err(w.fail(
            &format!(
                "the lock on {path} is free: another client's acquire answers 200 with a lock ID"
            ),
            &e.summary(),
        )),
        _ => Err(w.fail(
            &format!("the lock on {path} is held: another client's acquire answers 409"),
            &e.summary(),
        )),
    }
}

#[then("every renew answered 200")]
async fn every_renew_200(w: &mut VariablesWorld) -> StepResult {
    let wrong: Vec<String> = w
        .renews
        .iter()
        .map(|i| w.exchange(*i))
        .filter(|e| e.status != Some(200))
        .map(|e| {
            format!(
                "{} (after {})",
                e.summary(),
                fmt(e.at.saturating_duration_since(w.exchanges[0].at))
            )
        })
        .collect();
    if wrong.is_empty() && !w.renews.is_empty() {
        return Ok(());
    }
    let seen = if w.renews.is_empty() {
        "no renew was made".to_string()
    } else {
        wrong.join("\n")
    };
    Err(w.fail(
        "every renew by the holder, each half a TTL after the last, answers 200",
        &seen,
    ))
}

#[then(expr = "another client could not acquire the lock on {string} meanwhile")]
async fn other_could_not(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    let wrong: Vec<String> = w
        .foreign
        .iter()
        .map(|i| w.exchange(*i))
        .filter(|e| e.status != Some(409))
        .map(|e| {
            format!(
                "{} at {} after the holder's acquire",
                e.summary(),
                fmt(e.at.saturating_duration_since(hold.sent))
            )
        })
        .collect();
    if wrong.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "the renewed lock on {} stays held: other clients' acquires at 2.5 and 3 TTLs ({}) answer 409",
            hold.path,
            fmt(hold.ttl)
        ),
        &wrong.join("\n"),
    ))
}

#[then("the other client gets the lock within twice the TTL and the lock delay")]
async fn other_gets_lock(w: &mut VariablesWorld) -> StepResult {
    let hold = w
        .holds
        .values()
        .next()
        .cloned()
        .ok_or_else(|| w.ctx().harness_error("the harness holds no lock"))?;
    let (attempts, success) = w.background_attempts().await?;
    let tolerance = w.config().timing.tolerance;
    let bound = hold.ttl * 2 + hold.delay + tolerance;
    let expected = format!(
        "the abandoned lock on {} (TTL {}, lock delay {}) is cleared: another client's acquire succeeds within 2 x TTL + lock delay + {} = {} of the holder's acquire being answered",
        hold.path,
        fmt(hold.ttl),
        fmt(hold.delay),
        fmt(tolerance),
        fmt(bound)
    );
    match success {
        Some(i) => {
            let after = w.exchange(i).at.saturating_duration_since(hold.answered);
            if after <= bound {
                return Ok(());
            }
            Err(w.fail(
                &expected,
                &format!("it got the lock only {} after", fmt(after)),
            ))
        }
        None => {
            let last = attempts.last().map(|i| w.exchange(*i).summary());
            Err(w.fail(
                &expected,
                &format!(
                    "{} attempts, none granted; the last: {}",
                    attempts.len(),
                    last.unwrap_or_else(|| "none".into())
                ),
            ))
        }
    }
}

#[then("the other client did not get the lock before the TTL and the lock delay had passed")]
async fn other_not_before_delay(w: &mut VariablesWorld) -> StepResult {
    let hold = w
        .holds
        .values()
        .next()
        .cloned()
        .ok_or_else(|| w.ctx().harness_error("the harness holds no lock"))?;
    let (_, success) = w.background_attempts().await?;
    let Some(i) = success else {
        return Ok(()); // never cleared: VARIABLES-EXPIRY-FREES judges that
    };
    let e = w.exchange(i);
    let after = e.answered().saturating_duration_since(hold.sent);
    if after >= hold.ttl + hold.delay {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "the lapsed lock on {} stays held for its lock delay: no other client gets it within TTL + lock delay = {} of the holder's acquire",
            hold.path,
            fmt(hold.ttl + hold.delay)
        ),
        &format!(
            "another client's acquire was answered 200 {} after the holder's acquire was sent",
            fmt(after)
        ),
    ))
}

impl VariablesWorld {
    /// Sleep until `after` past the holder's acquire being answered.
    async fn after_acquire(&self, hold: &Hold, after: Duration) {
        sleep_until(hold.answered + after).await;
    }

    /// A quarter of the shortest TTL: how far past a point of Nomad's numbers the harness
    /// looks, so that the server's timer has surely fired.
    fn margin(&self) -> Duration {
        self.config().timing.tolerance / 2
    }

    /// A lock-renew of `path` with `id`: `?namespace=` from `query_namespace`, and a body
    /// naming `body_namespace` if given.
    async fn renew_naming(
        &mut self,
        query_namespace: &str,
        body_namespace: Option<&str>,
        path: &str,
        id: &str,
    ) -> usize {
        let mut body = json!({"Path": path, "Lock": {"ID": id}});
        if let Some(ns) = body_namespace {
            body["Namespace"] = Value::String(ns.to_string());
        }
        self.lock_op("lock-renew", query_namespace, path, body, self.admin())
            .await
    }
}

#[when(expr = "the holder renews the lock on {string} just after twice the TTL")]
async fn holder_renews_after_lapse(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    w.after_acquire(&hold, hold.ttl * 2 + w.margin()).await;
    w.renew(&hold.path, &hold.id, w.admin()).await;
    Ok(())
}

#[when(expr = "the lock on {string} has lapsed into its lock delay")]
async fn lapsed_into_delay(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    w.after_acquire(&hold, hold.ttl * 2 + w.margin()).await;
    Ok(())
}

#[when(expr = "the lock delay of {string} has ended")]
async fn delay_ended(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    let tolerance = w.config().timing.tolerance;
    w.after_acquire(&hold, hold.ttl * 2 + hold.delay + tolerance)
        .await;
    Ok(())
}

#[when(expr = "the holder acquires the lock on {string} again with its lock ID at the TTL")]
async fn holder_reacquires(w: &mut VariablesWorld, name: String) -> StepResult {
    let hold = w.holder(&name)?;
    sleep_until(hold.sent + hold.ttl).await;
    // What Nomad's Go client sends again: the lock its first acquire answered.
    let body = json!({
        "Path": hold.path,
        "Lock": {
            "ID": hold.id,
            "TTL": go_duration(hold.ttl),
            "LockDelay": go_duration(hold.delay),
        },
    });
    w.lock_op("lock-acquire", "default", &hold.path, body, w.admin())
        .await;
    Ok(())
}

#[when(expr = "another client takes the lock on {string}")]
async fn other_takes(w: &mut VariablesWorld, name: String) {
    let path = w.path(&name);
    let i = w.acquire(&path, &Ask::default(), w.admin()).await;
    let e = w.exchange(i);
    if e.status == Some(200)
        && let Some(id) = lock_id(e)
    {
        w.others.insert(path, id);
    }
}

#[when(expr = "the other client renews its lock on {string}")]
async fn other_renews_own(w: &mut VariablesWorld, name: String) -> StepResult {
    let path = w.path(&name);
    let Some(id) = w.others.get(&path).cloned() else {
        return Err(w
            .ctx()
            .harness_error(format!("no other client holds a lock on {path}")));
    };
    w.renew(&path, &id, w.admin()).await;
    Ok(())
}

#[when(expr = "the holder writes {string} with {string}, its lock ID, TTL and lock delay")]
async fn holder_writes_lock_numbers(
    w: &mut VariablesWorld,
    name: String,
    text: String,
) -> StepResult {
    let hold = w.holder(&name)?;
    // The acquire answer's Lock echoed whole.
    let body = json!({
        "Items": items_json(&items(&text)),
        "Lock": {
            "ID": hold.id,
            "TTL": go_duration(hold.ttl),
            "LockDelay": go_duration(hold.delay),
        },
    });
    let i = w
        .variable_call(super::VarRequest {
            operation: "set",
            method: "PUT",
            namespace: "default".into(),
            path: hold.path.clone(),
            query: None,
            body: Some(body),
            credential: w.admin(),
        })
        .await;
    w.note_write(i);
    Ok(())
}

#[then("the answer is 200 with the lock's TTL and lock delay reset to the defaults")]
async fn answer_lock_reset(w: &mut VariablesWorld) -> StepResult {
    let e = w.last()?;
    let n = w.numbers();
    let held = w
        .subject
        .as_ref()
        .and_then(|(_, p)| w.holds.get(p))
        .cloned();
    let lock = e.json().and_then(|v| v.get("Lock").cloned());
    let text = |field: &str| {
        lock.as_ref()
            .and_then(|l| l.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let duration = |field: &str| {
        text(field)
            .and_then(|t| nomad_conform_variables::parse_go_duration(&t).ok())
            .and_then(|n| u64::try_from(n).ok())
            .map(Duration::from_nanos)
    };
    let id_ok = held
        .as_ref()
        .is_some_and(|h| text("ID") == Some(h.id.clone()));
    if e.status == Some(200)
        && id_ok
        && duration("TTL") == Some(n.lock_ttl_default)
        && duration("LockDelay") == Some(n.lock_delay_default)
    {
        return Ok(());
    }
    let acquired = held
        .as_ref()
        .map(|h| format!("TTL {}, lock delay {}", fmt(h.ttl), fmt(h.delay)))
        .unwrap_or_default();
    Err(w.fail(
        &format!(
            "{} answers 200 with the held lock (Lock.ID {}), its TTL and lock delay set to the {} defaults {} and {} whatever the acquire asked for ({acquired})",
            e.request_line(),
            held.map(|h| h.id).unwrap_or_default(),
            n.name,
            go_duration(n.lock_ttl_default),
            go_duration(n.lock_delay_default),
        ),
        &e.outcome(),
    ))
}

#[then(expr = "the answer is 409 with the zero-value variable {string} and no X-Nomad-Index")]
async fn answer_zero_value(w: &mut VariablesWorld, name: String) -> StepResult {
    let e = w.last()?;
    let path = w.path(&name);
    let mut problems = Vec::new();
    if e.status != Some(409) {
        problems.push(format!(
            "status {}",
            e.status.map_or("none".into(), |s| s.to_string())
        ));
    }
    if let Some(i) = e.index {
        problems.push(format!("X-Nomad-Index: {i}"));
    }
    match e.json() {
        Some(Value::Object(v)) => {
            let text = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or_default();
            if text("Namespace") != "default" {
                problems.push(format!("Namespace {:?}", text("Namespace")));
            }
            if text("Path") != path {
                problems.push(format!("Path {:?}", text("Path")));
            }
            for f in ["CreateIndex", "CreateTime", "ModifyIndex", "ModifyTime"] {
                if v.get(f).and_then(Value::as_i64) != Some(0) {
                    problems.push(format!(
                        "{f} {}",
                        v.get(f).map_or("absent".into(), Value::to_string)
                    ));
                }
            }
            if v.get("Items").is_some_and(|i| !i.is_null()) {
                problems.push("Items shown".into());
            }
            if v.get("Lock").is_some_and(|l| !l.is_null()) {
                problems.push("Lock shown".into());
            }
        }
        _ => problems.push("the body is not a JSON object".into()),
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "{} answers 409 with the zero-value variable of {path} (Namespace default, its Path, CreateIndex, CreateTime, ModifyIndex and ModifyTime 0, no Lock, no Items) and no X-Nomad-Index header",
            e.request_line()
        ),
        &format!("{}\nanswer: {}", problems.join(", "), e.outcome()),
    ))
}

#[when(expr = "the harness acquires the lock on {string} naming that namespace in the body only")]
async fn acquire_body_namespace(w: &mut VariablesWorld, name: String) -> StepResult {
    let ns = w.that_namespace()?;
    let path = w.path(&name);
    let endpoint = w.endpoint();
    w.registry().variable(&endpoint, &ns, &path);
    let body = json!({"Namespace": ns, "Path": path});
    let i = w
        .lock_op("lock-acquire", "default", &path, body, w.admin())
        .await;
    let e = w.exchange(i).clone();
    if e.status == Some(200)
        && let Some(id) = lock_id(&e)
    {
        w.note_lock(&ns, &path, &id);
        let hold = Hold {
            path: path.clone(),
            id,
            sent: e.at,
            answered: e.answered(),
            ttl: w.numbers().lock_ttl_default,
            delay: w.numbers().lock_delay_default,
        };
        w.holds.insert(path, hold);
    }
    Ok(())
}

#[then("the answer is 200 with a lock ID in that namespace")]
async fn answer_lock_in_namespace(w: &mut VariablesWorld) -> StepResult {
    let ns = w.that_namespace()?;
    let e = w.last()?;
    let answered = e.json().and_then(|v| {
        v.get("Namespace")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    if e.status == Some(200) && lock_id(e).is_some() && answered.as_deref() == Some(ns.as_str()) {
        return Ok(());
    }
    Err(w.fail(
        &format!(
            "{} with Namespace {ns} in its body answers 200 with a lock ID on the variable in namespace {ns}",
            e.request_line()
        ),
        &e.outcome(),
    ))
}

#[when(expr = "the holder renews the lock on {string} naming that namespace in the body only")]
async fn holder_renews_body_namespace(w: &mut VariablesWorld, name: String) -> StepResult {
    let ns = w.that_namespace()?;
    let hold = w.holder(&name)?;
    w.renew_naming("default", Some(&ns), &hold.path, &hold.id)
        .await;
    Ok(())
}

#[when(expr = "the holder renews the lock on {string} in that namespace")]
async fn holder_renews_in_namespace(w: &mut VariablesWorld, name: String) -> StepResult {
    let ns = w.that_namespace()?;
    let hold = w.holder(&name)?;
    w.renew_naming(&ns, None, &hold.path, &hold.id).await;
    Ok(())
}

#[when(expr = "the holder releases the lock on {string} naming that namespace in the body only")]
async fn holder_releases_body_namespace(w: &mut VariablesWorld, name: String) -> StepResult {
    let ns = w.that_namespace()?;
    let hold = w.holder(&name)?;
    let body = json!({"Namespace": ns, "Lock": {"ID": hold.id}});
    w.release(&hold.path, body, w.admin()).await;
    Ok(())
}
