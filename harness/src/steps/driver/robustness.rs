//! Steps of the robustness feature: task configurations made from the user's working `long`
//! shape by changing one field at a time, to the edge values of its type and then to values
//! generated from the driver's own schema for it. A configuration fails the clause when the
//! plugin process dies of it (or stops answering); a generated one is shrunk (within the
//! profile's shrink budget), and the configuration is printed as HCL.

use std::time::{Duration, Instant};

use cucumber::{then, when};
use std::collections::BTreeMap;

use nomad_conform_hclspec::{
    Number, SpecTree, Type, Value, config_strategy, config_to_hcl, encode_cty,
};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::tasks::Placeholders;
use super::{DriverWorld, StepResult};
use crate::plugins::driver::{DriverRpc, drivers};

/// Stop (SIGKILL), wait for and destroy the latest task, as the client ends a task.
/// What a StartTask that killed the plugin is reported as.
fn died_after_start(process: &crate::plugins::driver::PluginProcess, rpc: &DriverRpc) -> String {
    format!(
        "the plugin process died ({}) after StartTask answered {}",
        process
            .exit_status()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        rpc.outcome()
    )
}

async fn end_latest_task(w: &mut DriverWorld) -> StepResult {
    let i = w.tasks.len() - 1;
    let id = w.tasks[i].id.clone();
    let c = w.client()?;
    let req = drivers::StopTaskRequest {
        task_id: id.clone(),
        timeout: super::lifecycle::duration(Duration::from_millis(200)),
        signal: "SIGKILL".into(),
    };
    let (s, _) = c.stop_task(req, w.config().timings.task_call).await;
    w.record(&s);
    // Then as Nomad's client: the task's WaitTask comes back, then DestroyTask(force).
    if s.ok()
        && let Some(waiter) = &w.tasks[i].waiter
        && let Some(rpc) = waiter.answer(w.config().timings.rpc).await
    {
        w.record(&rpc);
    }
    let (d, _) = c
        .destroy_task(&id, true, w.config().timings.task_call)
        .await;
    w.record(&d);
    Ok(())
}

/// Start one generated task; returns why the plugin did not survive it, if it did not.
async fn survives(w: &mut DriverWorld, value: &Value) -> Result<Option<String>, String> {
    let alive = w.instances.current().is_some_and(|i| i.process.is_alive());
    if !alive {
        w.start_instance(false).await?;
    }
    let rpc = w
        .start_task_with("generated", Placeholders::default(), encode_cty(value))
        .await?;
    if rpc.ok() {
        end_latest_task(w).await?;
    }
    let inst = w.instance()?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    if !inst.process.is_alive() {
        return Ok(Some(died_after_start(&inst.process, &rpc)));
    }
    if rpc.timed_out {
        return Ok(Some(format!("StartTask got no answer: {}", rpc.outcome())));
    }
    w.last = vec![rpc];
    Ok(None)
}

/// The type of a field whose values are an attribute's (a Default around an Attr included).
fn field_type(spec: &SpecTree) -> Option<&Type> {
    match spec {
        SpecTree::Attr { ty, .. } => Some(ty),
        SpecTree::Default { primary, .. } => field_type(primary),
        _ => None,
    }
}

/// Whether a field may be left out (null): an optional attribute or block without a default
/// (Nomad fills a Default's value in, so it never sends null for one).
fn may_be_null(spec: &SpecTree) -> bool {
    match spec {
        SpecTree::Attr { required, .. }
        | SpecTree::Block { required, .. }
        | SpecTree::BlockAttrs { required, .. } => !required,
        _ => false,
    }
}

/// The edge values of a type, simplest first: empty, then one plain element.
fn edges(ty: &Type) -> Vec<Value> {
    match ty {
        Type::String => vec![Value::string(""), Value::string("data")],
        Type::Number => vec![
            Value::Number(Number::zero()),
            Value::Number(Number::from_i64(-1)),
        ],
        Type::Bool => vec![Value::Bool(false), Value::Bool(true)],
        Type::List(inner) => std::iter::once(Value::List(Vec::new()))
            .chain(edges(inner).into_iter().map(|v| Value::List(vec![v])))
            .collect(),
        Type::Set(inner) => std::iter::once(Value::Set(Vec::new()))
            .chain(edges(inner).into_iter().map(|v| Value::Set(vec![v])))
            .collect(),
        Type::Map(inner) => std::iter::once(Value::Map(BTreeMap::new()))
            .chain(
                edges(inner)
                    .into_iter()
                    .take(1)
                    .map(|v| Value::Map(BTreeMap::from([("data".to_string(), v)]))),
            )
            .collect(),
        Type::Object(_) | Type::Tuple(_) | Type::Any => Vec::new(),
    }
}

/// `base` with field `name` set to `value`.
fn with_field(base: &Value, name: &str, value: Value) -> Value {
    let mut out = base.clone();
    if let Value::Object(m) = &mut out {
        m.insert(name.to_string(), value);
    }
    out
}

/// One configuration that killed the plugin: the whole configuration as HCL, and which field
/// was varied from the user's shape.
fn killed(spec: &SpecTree, config: &Value, field: &str, why: &str) -> String {
    format!(
        "the user's long task shape with only `{field}` changed kills the plugin:\n{}\n{why}",
        config_block(&config_to_hcl(spec, config)),
    )
}

#[when("the harness starts tasks with generated configurations within the schema")]
async fn generated(w: &mut DriverWorld) -> StepResult {
    let spec: SpecTree = match &w.config().probe.task_schema {
        Ok(s) => s.clone(),
        Err(e) => {
            return Err(w.precondition(
                "DRIVER-TASK-CONFIG-SCHEMA",
                "the driver's TaskConfigSchema converts",
                e,
                &[],
            ));
        }
    };
    let SpecTree::Object(fields) = &spec else {
        return Err(w.ctx().skip(
            "the driver's task schema is not an object of fields, so no field of a working configuration can be varied alone",
        ));
    };
    // Configurations start from the user's own working shape: one made up whole fails on its
    // first wrong field (a template that does not exist, a command not found) and never
    // reaches the others. Each case changes one field.
    let base = match w
        .config()
        .shapes
        .render("long", &Placeholders::default(), &spec)
    {
        Ok(Some((value, _))) => value,
        Ok(None) => {
            return Err(w.ctx().skip(
                "the run has no task configuration for the long shape, the working configuration whose fields are varied one at a time",
            ));
        }
        Err(e) => return Err(w.ctx().harness_error(e)),
    };
    // The shape itself first: a shape the driver refuses here blocks the clause (on
    // DRIVER-HEALTHY-STARTS, through start_task_with); one that kills the plugin fails it.
    let rpc = w
        .start_task_with("long", Placeholders::default(), encode_cty(&base))
        .await?;
    let inst = w.instance()?;
    if super::broken_connection(&rpc) || !inst.process.is_alive() {
        inst.process.wait_exit(Duration::from_millis(500)).await;
    }
    if !inst.process.is_alive() || rpc.timed_out {
        let why = if rpc.timed_out {
            format!("StartTask got no answer: {}", rpc.outcome())
        } else {
            died_after_start(&inst.process, &rpc)
        };
        w.last = vec![rpc];
        w.generated = Some(Err(format!(
            "the user's long task shape itself, unchanged, kills the plugin:\n{}\n{why}",
            config_block(&config_to_hcl(&spec, &base)),
        )));
        return Ok(());
    }
    if !rpc.ok() {
        return Err(w.precondition(
            "DRIVER-START-HANDLE",
            "StartTask of the long task shape succeeds (its fields are then varied one at a time)",
            &rpc.summary(),
            &[&rpc],
        ));
    }
    end_latest_task(w).await?;
    let names: Vec<String> = fields.keys().cloned().collect();
    let mut tried = 0u32;
    // Every field's edge values first (null where it may be left out, empty, one plain
    // element), each unlike the shape's own value.
    for name in &names {
        let field = &fields[name];
        if matches!(field, SpecTree::Literal { .. }) {
            continue;
        }
        let own = match &base {
            Value::Object(m) => m.get(name).cloned().unwrap_or(Value::Null),
            _ => Value::Null,
        };
        let mut values = Vec::new();
        if may_be_null(field) {
            values.push(Value::Null);
        }
        if let Some(ty) = field_type(field) {
            values.extend(edges(ty));
        }
        for v in values.into_iter().filter(|v| *v != own) {
            let config = with_field(&base, name, v);
            tried += 1;
            if let Some(why) = survives(w, &config).await? {
                w.generated = Some(Err(killed(&spec, &config, name, &why)));
                return Ok(());
            }
        }
    }
    // Then values generated from each field's own schema, a field chosen at random each time.
    let cases = w.driver_profile().generated_cases;
    let budget = w.ctx().run.profile.harness.shrink_budget;
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&w.ctx().seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    );
    let varied: Vec<&String> = names
        .iter()
        .filter(|n| !matches!(fields[*n], SpecTree::Literal { .. }))
        .collect();
    for _ in 0..cases {
        if varied.is_empty() {
            break;
        }
        let pick = (0..varied.len())
            .new_tree(&mut runner)
            .map(|t| t.current())
            .unwrap_or(0);
        let name = varied[pick].clone();
        let strategy = config_strategy(&fields[&name]);
        let mut tree = strategy.new_tree(&mut runner).map_err(|e| {
            w.ctx()
                .harness_error(format!("cannot generate a configuration: {e}"))
        })?;
        tried += 1;
        let Some(why) = survives(w, &with_field(&base, &name, tree.current())).await? else {
            continue;
        };
        // Shrink: simpler values of that field while they still kill the plugin, for a while.
        let mut best = (with_field(&base, &name, tree.current()), why);
        let until = Instant::now() + budget;
        let mut failed = true;
        while Instant::now() < until {
            let moved = if failed {
                tree.simplify()
            } else {
                tree.complicate()
            };
            if !moved {
                break;
            }
            let config = with_field(&base, &name, tree.current());
            match survives(w, &config).await? {
                Some(why) => {
                    best = (config, why);
                    failed = true;
                }
                None => failed = false,
            }
        }
        w.generated = Some(Err(killed(&spec, &best.0, &name, &best.1)));
        return Ok(());
    }
    w.generated = Some(Ok(tried));
    Ok(())
}

#[then("every one was started or refused, and the plugin is still running")]
async fn generated_ok(w: &mut DriverWorld) -> StepResult {
    match &w.generated {
        Some(Ok(_)) => Ok(()),
        Some(Err(e)) => {
            let calls: Vec<&DriverRpc> = w.last.iter().collect();
            Err(w.fail(
                "every configuration within the driver's own schema is started or refused with an error, and the plugin process lives on",
                e,
                &calls,
            ))
        }
        None => Err(w
            .ctx()
            .harness_error("no generated configuration was tried")),
    }
}

/// A task's `config` block around `body` (HCL), so that the smallest failing configuration is
/// never an empty line: an empty body, every optional attribute left out, says so.
fn config_block(body: &str) -> String {
    if body.trim().is_empty() {
        return "config {}  # every attribute left out: the plugin dies of an empty task config"
            .to_string();
    }
    let mut out = String::from("config {\n");
    for line in body.trim_end().lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::config_block;

    #[test]
    fn the_smallest_configuration_is_never_an_empty_line() {
        assert!(config_block("").starts_with("config {}  # every attribute left out"));
        assert!(config_block("\n").starts_with("config {}"));
        assert_eq!(
            config_block("command = \"x\"\nargs = []\n"),
            "config {\n  command = \"x\"\n  args = []\n}"
        );
    }
}
