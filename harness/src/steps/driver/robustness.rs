//! Steps of the robustness feature: task configurations generated from the driver's own
//! schema. A configuration fails the clause when the plugin process dies of it (or stops
//! answering); the first such configuration is shrunk (within the profile's shrink budget) and
//! printed as HCL.

use std::time::{Duration, Instant};

use cucumber::{then, when};
use nomad_conform_hclspec::{SpecTree, Value, config_strategy, config_to_hcl, encode_cty};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::tasks::Placeholders;
use super::{DriverWorld, StepResult};
use crate::plugins::driver::{DriverRpc, drivers};

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
        let i = w.tasks.len() - 1;
        let id = w.tasks[i].id.clone();
        let c = w.client()?;
        let req = drivers::StopTaskRequest {
            task_id: id.clone(),
            timeout: super::lifecycle::duration(Duration::from_millis(200)),
            signal: "SIGKILL".into(),
        };
        let (s, _) = c.stop_task(req, w.config().timings.task_call).await;
        let (d, _) = c
            .destroy_task(&id, true, w.config().timings.task_call)
            .await;
        w.record(&s);
        w.record(&d);
    }
    let inst = w.instance()?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    if !inst.process.is_alive() {
        return Ok(Some(format!(
            "the plugin process died ({}) after StartTask answered {}",
            inst.process
                .exit_status()
                .map(|s| s.to_string())
                .unwrap_or_default(),
            rpc.outcome()
        )));
    }
    if rpc.timed_out {
        return Ok(Some(format!("StartTask got no answer: {}", rpc.outcome())));
    }
    w.last = vec![rpc];
    Ok(None)
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
    let cases = w.driver_profile().generated_cases;
    let budget = w.ctx().run.profile.harness.shrink_budget;
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&w.ctx().seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    );
    let strategy = config_strategy(&spec);
    for _ in 0..cases {
        let mut tree = strategy.new_tree(&mut runner).map_err(|e| {
            w.ctx()
                .harness_error(format!("cannot generate a configuration: {e}"))
        })?;
        let Some(why) = survives(w, &tree.current()).await? else {
            continue;
        };
        // Shrink: simpler configurations while they still kill the plugin, for a while.
        let mut best = (tree.current(), why);
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
            match survives(w, &tree.current()).await? {
                Some(why) => {
                    best = (tree.current(), why);
                    failed = true;
                }
                None => failed = false,
            }
        }
        w.generated = Some(Err(format!(
            "the smallest configuration found that the plugin does not survive:\n{}\n{}",
            config_block(&config_to_hcl(&spec, &best.0)),
            best.1
        )));
        return Ok(());
    }
    w.generated = Some(Ok(cases));
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
