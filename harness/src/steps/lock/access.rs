//! The access clauses (specs/lock/04_access.feature): a refusal (403) is final and clear, and
//! the client uses the allocation's token and namespace.

use std::time::Duration;

use cucumber::{given, then};

use super::acquire::{CLIENT, answers, failed};
use super::scene::Scene;
use super::{LockWorld, StepResult, fmt, lock_ops};
use crate::plugins::lock::{Exchange, Fault, Operation};

#[given(
    regex = r#"^a Variables server with ACLs, where the client's token may write the lock in namespace "([a-z0-9-]+)"$"#
)]
async fn server_acl(w: &mut LockWorld, namespace: String) -> StepResult {
    let scene = Scene::build(w.ctx(), Some(&namespace)).await?;
    w.scene = Some(scene);
    Ok(())
}

#[given("the server refuses the client's lock requests with 403")]
async fn refuses_403(w: &mut LockWorld) -> StepResult {
    let task_api = w.config().task_api;
    let p = w.scene_mut()?.proxy(CLIENT, task_api).await?;
    p.inject_until_cleared(
        &Operation::LOCK,
        Fault::status(403).map_err(|e| e.to_string())?,
    );
    Ok(())
}

/// How long a refused client may take to exit: the profile's refusal window, or its give-up
/// window when that is longer.
fn refusal_window(w: &LockWorld) -> Duration {
    let p = w.lock_profile();
    let give_up = w.config().give_up.map(|g| g + p.stop_within);
    give_up.map_or(p.refusal_within, |g| g.max(p.refusal_within))
}

#[then(
    "the client exits non-zero within the refusal window, without starting the protected process"
)]
async fn refused(w: &mut LockWorld) -> StepResult {
    let within = refusal_window(w);
    let scene = w.scene()?;
    let client = w.client(CLIENT)?;
    let status = client.wait_exit(within).await;
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let expected = format!(
        "a client whose lock requests are refused with 403 never starts the protected process and exits non-zero within {}",
        fmt(within)
    );
    let r = if !scene.probes_of(CLIENT).is_empty() {
        Err(w.fail(
            &expected,
            "the protected process started",
            &ops[..ops.len().min(1)],
        ))
    } else {
        match status {
            Some(s) if failed(&s) => Ok(()),
            Some(s) => Err(w.fail(&expected, &format!("the client ended with {s}"), &[])),
            None => Err(w.fail(
                &expected,
                &format!(
                    "the client was still running after {} ({} requests: {})",
                    fmt(within),
                    ops.len(),
                    answers(&ops)
                ),
                &ops[..ops.len().min(1)],
            )),
        }
    };
    w.record_scene();
    r
}

#[then("the client made few attempts and its output names the refusal")]
async fn refusal_prompt(w: &mut LockWorld) -> StepResult {
    let within = refusal_window(w);
    let max = w.lock_profile().refusal_max_attempts;
    let scene = w.scene()?;
    let client = w.client(CLIENT)?;
    client.wait_exit(within).await;
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let output: String = client
        .tasks()
        .iter()
        .map(|t| format!("{}\n{}", t.stdout.text, t.stderr.text))
        .collect();
    let lower = output.to_ascii_lowercase();
    let named = ["403", "permission", "denied", "forbidden", "acl"]
        .iter()
        .any(|k| lower.contains(k));
    let r = if ops.len() > max {
        Err(w.fail(
            &format!("a refusal is final: at most {max} attempts"),
            &format!("{} attempts: {}", ops.len(), answers(&ops)),
            &ops[..1],
        ))
    } else if !named {
        Err(w.fail(
            "the client's output says its request was refused (403, permission denied), so the operator knows to fix the ACL policy",
            &format!(
                "its output does not: {:?}",
                output.trim().chars().take(400).collect::<String>()
            ),
            &ops[..ops.len().min(1)],
        ))
    } else {
        Ok(())
    };
    w.record_scene();
    r
}

#[then("every request of the client carried its token and named its namespace")]
async fn token_namespace(w: &mut LockWorld) -> StepResult {
    let scene = w.scene()?;
    let ns = scene.namespace.clone().unwrap_or_default();
    let ex = scene.exchanges();
    let ops = lock_ops(&ex, CLIENT);
    let names_ns = |e: &Exchange| {
        e.query.split('&').any(|p| p == format!("namespace={ns}"))
            || serde_json::from_str::<serde_json::Value>(&e.request_body)
                .ok()
                .and_then(|v| v.get("Namespace").and_then(|n| n.as_str()).map(|n| n == ns))
                .unwrap_or(false)
    };
    let bad = ops.iter().find(|e| !e.token_sent || !names_ns(e));
    let r = match (ops.is_empty(), bad) {
        (true, _) => Err(w.fail(
            "the client uses NOMAD_TOKEN and NOMAD_NAMESPACE from its environment",
            "the client sent no lock request",
            &[],
        )),
        (false, None) => Ok(()),
        (false, Some(e)) => Err(w.fail(
            &format!(
                "every lock request carries NOMAD_TOKEN (X-Nomad-Token, or Authorization: Bearer) and names NOMAD_NAMESPACE ({ns}) in ?namespace= or the body's Namespace"
            ),
            &format!(
                "{} {} {}{}",
                e.method,
                e.target(),
                if e.token_sent { "carried the token" } else { "carried no token" },
                if names_ns(e) { "" } else { " and did not name the namespace" }
            ),
            &[e],
        )),
    };
    w.record_scene();
    r
}
