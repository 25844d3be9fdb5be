//! Steps of the base feature: PluginInfo, ConfigSchema, SetConfig and Init as Nomad's loader
//! calls them, in its three launches.

use cucumber::{given, then, when};
use tonic::Code;

use super::{DriverWorld, StepResult, launch_root};
use crate::plugins::driver::{
    LoadError, assess_plugin_info, base, fingerprint_launch, nomad_config, validation_launch,
};

/// A failed load launch blocks the clause on the launch clause that judges it.
fn load_error(w: &DriverWorld, e: &LoadError) -> String {
    let root = match e {
        LoadError::Launch(l) => launch_root(l),
        LoadError::Connect { .. } => "DRIVER-LAUNCH-ADDRESS",
    };
    w.precondition(
        root,
        "the plugin launches and the harness connects",
        &e.to_string(),
        &[],
    )
}

#[when("Nomad fingerprints the plugin in a launch of its own")]
async fn fingerprints(w: &mut DriverWorld) -> StepResult {
    w.blocked_on_first_launch()?;
    let spec = w.spec().clone();
    let timings = w.config().timings;
    let f = fingerprint_launch(&spec, &timings)
        .await
        .map_err(|e| load_error(w, &e))?;
    for r in f.records() {
        w.record(r);
    }
    w.last = f.records().into_iter().cloned().collect();
    Ok(())
}

fn call<'a>(
    w: &'a DriverWorld,
    method: &str,
) -> Result<&'a crate::plugins::driver::DriverRpc, String> {
    w.last
        .iter()
        .find(|c| c.method == method)
        .ok_or_else(|| w.ctx().harness_error(format!("no {method} call was made")))
}

#[then("PluginInfo says DRIVER, a name, a valid plugin version and API version v0.1.0")]
async fn plugin_info(w: &mut DriverWorld) -> StepResult {
    let rpc = call(w, "PluginInfo")?;
    let info = rpc.response.as_ref().filter(|_| rpc.ok()).map(|r| {
        let s = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
        base::PluginInfoResponse {
            r#type: r.get("type").and_then(|v| v.as_i64()).unwrap_or(0) as i32,
            plugin_api_versions: r
                .get("plugin_api_versions")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            plugin_version: s("plugin_version"),
            name: s("name"),
        }
    });
    let Some(info) = info else {
        return Err(w.fail("PluginInfo succeeds", &rpc.summary(), &[rpc]));
    };
    let a = assess_plugin_info(&info);
    let mut problems = Vec::new();
    if !a.type_known || info.r#type != base::PluginType::Driver as i32 {
        problems.push(format!(
            "type is {} (DRIVER is {})",
            info.r#type,
            base::PluginType::Driver as i32
        ));
    }
    if info.name.is_empty() {
        problems.push("the name is empty".into());
    }
    if let Some(e) = &a.version_error {
        problems.push(format!("plugin_version {:?}: {e}", info.plugin_version));
    }
    if let Some(e) = &a.api.error {
        problems.push(e.clone());
    } else if a.api.chosen.is_none() {
        problems.push(format!(
            "plugin_api_versions {:?} has no version equal to v0.1.0: Nomad skips the plugin",
            info.plugin_api_versions
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(w.fail(
        "PluginInfo: type DRIVER, a name, a plugin_version hashicorp/go-version parses, and v0.1.0 among plugin_api_versions",
        &problems.join("; "),
        &[rpc],
    ))
}

#[then("the plugin configuration schema converts")]
async fn config_schema_converts(w: &mut DriverWorld) -> StepResult {
    let rpc = match call(w, "ConfigSchema") {
        Ok(r) => r,
        Err(_) => {
            let info = call(w, "PluginInfo")?;
            return Err(w.precondition(
                "DRIVER-BASE-PLUGIN-INFO",
                "Nomad goes on to ConfigSchema after PluginInfo",
                &info.summary(),
                &[info],
            ));
        }
    };
    if !rpc.ok() {
        return Err(w.fail("ConfigSchema succeeds", &rpc.summary(), &[rpc]));
    }
    match &w.config().probe.config_schema {
        Ok(_) => Ok(()),
        Err(e) => Err(w.fail("a schema Nomad's hclspecutils.Convert accepts", e, &[rpc])),
    }
}

#[when("Nomad validates the plugin configuration in a launch of its own")]
async fn validates(w: &mut DriverWorld) -> StepResult {
    let bytes = w.config_bytes(false)?;
    if w.config().probe.config_schema_nil {
        crate::recorder::lock(&w.ctx().case).notes.push(
            "no validation launch: the plugin declares no ConfigSchema, so Nomad's loader validates nothing (helper/pluginutils/loader/init.go, validatePluginConfig) and the long-lived instance gets empty msgpack_config bytes".into(),
        );
        return Ok(());
    }
    w.blocked_on_first_launch()?;
    let spec = w.spec().clone();
    let timings = w.config().timings;
    let api = w.config().probe.api_version.clone();
    let v = validation_launch(&spec, bytes, &api, &timings)
        .await
        .map_err(|e| load_error(w, &e))?;
    for rpc in &v.set_configs {
        w.record(rpc);
    }
    w.last = v.set_configs;
    Ok(())
}

#[when("Nomad starts the plugin's long-lived instance with that configuration")]
async fn instance_with_config(w: &mut DriverWorld) -> StepResult {
    let bytes = w.config_bytes(false)?;
    set_config_on_instance(w, bytes).await
}

#[when("Nomad starts the plugin's long-lived instance with an empty configuration")]
async fn instance_with_empty(w: &mut DriverWorld) -> StepResult {
    let bytes = w.config_bytes(true)?;
    set_config_on_instance(w, bytes).await
}

#[when("the harness sends the configuration as plain msgpack")]
async fn plain(w: &mut DriverWorld) -> StepResult {
    let bytes = match &w.config().config {
        Ok(c) => c.plain.clone(),
        Err(_) => return w.config_bytes(false).map(|_| ()),
    };
    set_config_on_instance(w, bytes).await
}

async fn set_config_on_instance(w: &mut DriverWorld, bytes: Vec<u8>) -> StepResult {
    let inst = w.launch_and_connect().await?;
    let req = base::SetConfigRequest {
        msgpack_config: bytes,
        nomad_config: Some(nomad_config()),
        plugin_api_version: w.config().probe.api_version.clone(),
    };
    let (rpc, _) = inst.client.set_config(req, w.config().timings.rpc).await;
    w.record(&rpc);
    w.last.push(rpc);
    Ok(())
}

#[then("both SetConfig calls succeed")]
async fn both_succeed(w: &mut DriverWorld) -> StepResult {
    set_configs_ok(
        w,
        "SetConfig in the validation launch (no nomad_config) and in the long-lived instance (with nomad_config) both succeed",
    )
}

#[then("SetConfig succeeds")]
async fn set_config_ok(w: &mut DriverWorld) -> StepResult {
    set_configs_ok(w, "SetConfig succeeds")
}

fn set_configs_ok(w: &DriverWorld, expected: &str) -> StepResult {
    w.last_call()?;
    match w.last.iter().find(|c| c.method == "SetConfig" && !c.ok()) {
        None => Ok(()),
        Some(bad) => Err(w.fail(expected, &bad.summary(), &[bad])),
    }
}

#[when("Nomad starts the plugin's long-lived instance")]
async fn starts_instance(w: &mut DriverWorld) -> StepResult {
    let bytes = w.config_bytes(false)?;
    set_config_on_instance(w, bytes).await?;
    let set = w.last_call()?.clone();
    if !set.ok() {
        return Err(w.precondition(
            "DRIVER-BASE-SET-CONFIG",
            "SetConfig succeeds",
            &set.summary(),
            &[&set],
        ));
    }
    let inst = w.instance()?;
    let (rpc, _) = inst.client.init(w.config().timings.rpc).await;
    w.record(&rpc);
    w.last = vec![rpc];
    Ok(())
}

#[then("Init succeeds or is UNIMPLEMENTED")]
async fn init_ok(w: &mut DriverWorld) -> StepResult {
    let rpc = w.last_call()?;
    if rpc.ok() || rpc.code == Code::Unimplemented {
        return Ok(());
    }
    Err(w.fail(
        "Init succeeds, or answers UNIMPLEMENTED (Nomad takes that as success)",
        &rpc.summary(),
        &[rpc],
    ))
}

#[given("the plugin is running as Nomad's long-lived instance")]
async fn running(w: &mut DriverWorld) -> StepResult {
    w.start_instance(false).await.map(|_| ())
}
