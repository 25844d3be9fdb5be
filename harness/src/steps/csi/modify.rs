//! Steps of the modify feature.

use std::collections::HashMap;

use cucumber::{then, when};

use super::common::unknown_id;
use super::requests::{self, Mode};
use super::{CsiWorld, StepResult, rpc};
use crate::plugins::csi::{Rpc, pb};

async fn modify(w: &mut CsiWorld, id: &str, params: HashMap<String, String>) -> Rpc {
    let req = pb::ControllerModifyVolumeRequest {
        volume_id: id.to_string(),
        secrets: w.secrets(),
        mutable_parameters: params,
    };
    rpc!(
        w,
        controller,
        controller,
        "Controller",
        "ControllerModifyVolume",
        controller_modify_volume,
        req
    )
    .0
}

#[when("the harness modifies a volume that does not exist")]
async fn modifies_unknown(w: &mut CsiWorld) {
    let id = unknown_id(w, "volume");
    let params = w.config().mutable_parameters.clone().unwrap_or_default();
    let rpc = modify(w, &id, params).await;
    w.last = vec![rpc];
}

#[when("the harness modifies the volume with an unsupported mutable parameter")]
async fn modifies_unsupported(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    let params = HashMap::from([("nomad-conform-unsupported".to_string(), "1".to_string())]);
    let rpc = modify(w, &id, params).await;
    w.last = vec![rpc];
    Ok(())
}

#[when("the harness modifies the volume with the configured mutable parameters twice")]
async fn modifies_twice(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    let params = w.config().mutable_parameters.clone().unwrap_or_default();
    let a = modify(w, &id, params.clone()).await;
    let b = modify(w, &id, params).await;
    w.last = vec![a, b];
    Ok(())
}

#[then("both calls succeed")]
async fn both_succeed(w: &mut CsiWorld) -> StepResult {
    for rpc in &w.last {
        if !rpc.ok() {
            return Err(w.fail(
                "ControllerModifyVolume succeeds, and again with the same parameters",
                &rpc.summary(),
                &[rpc],
            ));
        }
    }
    w.last_call().map(|_| ())
}

/// CreateVolume with `mutable` as its mutable parameters.
async fn create_with(w: &mut CsiWorld, name: &str, mutable: HashMap<String, String>) -> Rpc {
    w.create_sized(
        |w| {
            let mut req = requests::create_volume(w, name, Mode::SingleNodeWriter);
            req.mutable_parameters = mutable.clone();
            req
        },
        Mode::SingleNodeWriter,
    )
    .await
}

#[when("the harness creates a volume with the configured mutable parameters twice")]
async fn creates_mutable_twice(w: &mut CsiWorld) {
    let params = w.config().mutable_parameters.clone().unwrap_or_default();
    let name = w.unique_name("vol");
    let a = create_with(w, &name, params.clone()).await;
    let b = create_with(w, &name, params).await;
    w.last = vec![a, b];
}

fn volume_id(rpc: &Rpc) -> &str {
    rpc.response
        .as_ref()
        .and_then(|r| r.pointer("/volume/volume_id"))
        .and_then(|v| v.as_str())
        .unwrap_or_default()
}

#[then("both calls return the same volume")]
async fn same_volume(w: &mut CsiWorld) -> StepResult {
    let [a, b] = w.last.as_slice() else {
        return Err(w.ctx().harness_error("expected two calls"));
    };
    for rpc in [a, b] {
        if !rpc.ok() {
            return Err(w.fail(
                "CreateVolume with the configured mutable parameters succeeds, and again with the same name",
                &rpc.summary(),
                &[rpc],
            ));
        }
    }
    if !volume_id(a).is_empty() && volume_id(a) == volume_id(b) {
        return Ok(());
    }
    Err(w.fail(
        "the second CreateVolume returns the volume the first made (same name, same mutable parameters)",
        &format!(
            "first volume_id {:?}, second {:?}",
            volume_id(a),
            volume_id(b)
        ),
        &[a, b],
    ))
}

#[then("ControllerModifyVolume with the configured mutable parameters succeeds on it")]
async fn modify_created(w: &mut CsiWorld) -> StepResult {
    let id = w.vol(0)?.id.clone();
    let params = w.config().mutable_parameters.clone().unwrap_or_default();
    let rpc = modify(w, &id, params).await;
    if rpc.ok() {
        return Ok(());
    }
    Err(w.fail(
        "ControllerModifyVolume with the parameters the volume was created with succeeds",
        &rpc.summary(),
        &[&rpc],
    ))
}

#[when("the harness creates a volume with an unsupported mutable parameter")]
async fn creates_unsupported(w: &mut CsiWorld) {
    let name = w.unique_name("vol");
    let params = HashMap::from([("nomad-conform-unsupported".to_string(), "1".to_string())]);
    let rpc = create_with(w, &name, params).await;
    w.last = vec![rpc];
}
