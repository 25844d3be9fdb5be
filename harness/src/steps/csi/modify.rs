//! Steps of the modify feature.

use std::collections::HashMap;

use cucumber::{then, when};

use super::common::unknown_id;
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
