//! The variant switches, each exercised over gRPC: the plugin behaves in the other way the
//! CSI spec allows, and stays right. Next to them, the faults that pair with a variant (the
//! wrong ways of doing what the variant does rightly). `loop-at-create` is in `block.rs`,
//! with the other loop device tests.
//!
//! Tests that mount need root (see `support::can_mount`); the others run anywhere.

mod support;

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use nomad_conform_proto::csi::v1::controller_client::ControllerClient;
use nomad_conform_proto::csi::v1::node_service_capability::{self, rpc::Type as NodeRpc};
use nomad_conform_proto::csi::v1::plugin_capability::{self, service};
use nomad_conform_proto::csi::v1::volume_capability::access_mode::Mode;
use nomad_conform_proto::csi::v1::volume_usage::Unit;
use nomad_conform_proto::csi::v1::{
    CapacityRange, ControllerGetCapabilitiesRequest, ControllerUnpublishVolumeRequest,
    CreateSnapshotRequest, GetPluginCapabilitiesRequest, GroupControllerGetCapabilitiesRequest,
    ListSnapshotsRequest, ListVolumesRequest, NodeExpandVolumeRequest, NodeGetCapabilitiesRequest,
    NodeGetInfoRequest, NodeGetVolumeStatsRequest, NodeUnpublishVolumeRequest,
    NodeUnstageVolumeRequest, ValidateVolumeCapabilitiesRequest,
};
use support::*;
use tonic::Code;
use tonic::transport::Channel;

async fn create(controller: &mut ControllerClient<Channel>, name: &str, mode: Mode) -> String {
    controller
        .create_volume(create_request(name, mode, MIB))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id
}

fn unpublish_request(id: &str, target: &Path) -> NodeUnpublishVolumeRequest {
    NodeUnpublishVolumeRequest {
        volume_id: id.into(),
        target_path: target.display().to_string(),
    }
}

fn unstage_request(id: &str, staging: &Path) -> NodeUnstageVolumeRequest {
    NodeUnstageVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
    }
}

fn controller_unpublish(id: &str) -> ControllerUnpublishVolumeRequest {
    ControllerUnpublishVolumeRequest {
        volume_id: id.into(),
        node_id: NODE_ID.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn variant_publish_from_backing_store_binds_the_volume_directory() {
    if !can_mount() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--variant", "publish-from-backing-store"]).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let mode = Mode::SingleNodeWriter;
    let id = create(&mut controller, "backed", mode).await;
    fs::write(scratch.volume_dir(&id).join("data.txt"), "backing").expect("write");

    // STAGE_UNSTAGE_VOLUME is still advertised, and the stage still mounts.
    let capabilities = node
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .expect("capabilities")
        .into_inner()
        .capabilities;
    let stages = node_service_capability::Type::Rpc(node_service_capability::Rpc {
        r#type: NodeRpc::StageUnstageVolume as i32,
    });
    assert!(
        capabilities
            .iter()
            .any(|c| c.r#type.as_ref() == Some(&stages)),
        "{capabilities:?}"
    );
    let staging = scratch.co_path("staging");
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("stage");
    assert!(is_mount_point(&staging), "staging still bind-mounts");

    // The stage is still required.
    let unstaged = publish_request(
        &id,
        &scratch.co_path("elsewhere"),
        &scratch.co_path("t0"),
        mode,
        false,
    );
    assert_eq!(
        code_of(node.node_publish_volume(unstaged).await),
        Code::FailedPrecondition
    );

    // Take the staging mount away behind the plugin's back: a publish of the staging path
    // would show an empty directory, one of the backing store still shows the volume.
    nix::mount::umount2(&staging, nix::mount::MntFlags::MNT_DETACH).expect("unmount staging");
    let target = scratch.co_path("target");
    node.node_publish_volume(publish_request(&id, &staging, &target, mode, false))
        .await
        .expect("publish");
    assert!(is_mount_point(&target));
    assert_eq!(
        fs::read_to_string(target.join("data.txt")).expect("the volume's data"),
        "backing"
    );
    fs::write(target.join("back.txt"), "through the target").expect("writable");
    assert!(scratch.volume_dir(&id).join("back.txt").is_file());
    // A retry is recognised.
    node.node_publish_volume(publish_request(&id, &staging, &target, mode, false))
        .await
        .expect("publish again");

    node.node_unpublish_volume(unpublish_request(&id, &target))
        .await
        .expect("unpublish");
    assert!(!is_mount_point(&target));
    node.node_unstage_volume(unstage_request(&id, &staging))
        .await
        .expect("unstage");
    assert!(mounts_under(scratch.path()).is_empty());
}

#[tokio::test]
async fn variant_stage_without_mount_records_the_stage_only() {
    if !can_mount() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--variant", "stage-without-mount"]).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let mode = Mode::SingleNodeWriter;
    let id = create(&mut controller, "unmounted", mode).await;
    fs::write(scratch.volume_dir(&id).join("data.txt"), "kept").expect("write");

    let staging = scratch.co_path("staging");
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("stage");
    assert!(staging.is_dir(), "the staging path exists");
    assert!(!is_mount_point(&staging), "nothing is mounted at it");
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("a retried stage is OK");
    assert!(!is_mount_point(&staging));
    let stagings = &scratch.saved_state()["stagings"];
    assert!(
        stagings.get(staging.display().to_string()).is_some(),
        "the stage is recorded: {stagings}"
    );

    // Stats at the staging path measure the volume.
    let stats = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: staging.display().to_string(),
            ..Default::default()
        })
        .await
        .expect("stats at the staging path")
        .into_inner();
    assert!(
        stats
            .usage
            .iter()
            .any(|u| u.unit == Unit::Bytes as i32 && u.total > 0 && u.available >= 0),
        "{stats:?}"
    );

    let target = scratch.co_path("target");
    node.node_publish_volume(publish_request(&id, &staging, &target, mode, false))
        .await
        .expect("publish");
    assert!(is_mount_point(&target));
    assert_eq!(
        fs::read_to_string(target.join("data.txt")).expect("the volume's data"),
        "kept"
    );
    fs::write(target.join("new.txt"), "written").expect("writable target");
    assert!(scratch.volume_dir(&id).join("new.txt").is_file());

    node.node_unpublish_volume(unpublish_request(&id, &target))
        .await
        .expect("unpublish");
    node.node_unstage_volume(unstage_request(&id, &staging))
        .await
        .expect("unstage");
    node.node_unstage_volume(unstage_request(&id, &staging))
        .await
        .expect("unstage again: OK");
    assert!(
        scratch.saved_state()["stagings"]
            .as_object()
            .is_some_and(|m| m.is_empty()),
        "the record is gone"
    );
    assert!(mounts_under(scratch.path()).is_empty());
}

#[tokio::test]
async fn variant_second_target_allowed_publishes_a_single_node_volume_twice() {
    if !can_mount() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--variant", "second-target-allowed"]).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let mode = Mode::SingleNodeWriter;
    let id = create(&mut controller, "twice", mode).await;
    let staging = scratch.co_path("staging");
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("stage");
    let (first, second) = (scratch.co_path("first"), scratch.co_path("second"));
    for target in [&first, &second] {
        node.node_publish_volume(publish_request(&id, &staging, target, mode, false))
            .await
            .unwrap_or_else(|err| panic!("publish at {}: {err:?}", target.display()));
        assert!(is_mount_point(target));
    }
    fs::write(first.join("a.txt"), "one volume").expect("write");
    assert_eq!(
        fs::read_to_string(second.join("a.txt")).expect("the same volume"),
        "one volume"
    );
    // Another capability is still refused.
    let other = publish_request(
        &id,
        &staging,
        &scratch.co_path("third"),
        Mode::SingleNodeReaderOnly,
        true,
    );
    assert_eq!(
        code_of(node.node_publish_volume(other).await),
        Code::FailedPrecondition
    );
    for target in [&first, &second] {
        node.node_unpublish_volume(unpublish_request(&id, target))
            .await
            .expect("unpublish");
    }
    node.node_unstage_volume(unstage_request(&id, &staging))
        .await
        .expect("unstage");
    assert!(mounts_under(scratch.path()).is_empty());
}

/// Every page of ListVolumes with `max_entries` 2: the ids and the tokens handed out.
async fn list_all_volumes(
    controller: &mut ControllerClient<Channel>,
) -> (Vec<String>, Vec<String>) {
    let (mut ids, mut tokens) = (Vec::new(), Vec::new());
    let mut token = String::new();
    loop {
        let page = controller
            .list_volumes(ListVolumesRequest {
                max_entries: 2,
                starting_token: token.clone(),
            })
            .await
            .expect("page")
            .into_inner();
        ids.extend(
            page.entries
                .into_iter()
                .filter_map(|e| e.volume.map(|v| v.volume_id)),
        );
        if page.next_token.is_empty() {
            return (ids, tokens);
        }
        token = page.next_token;
        tokens.push(token.clone());
    }
}

#[tokio::test]
async fn variant_opaque_page_tokens_pages_with_its_own_tokens() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--variant", "opaque-page-tokens"]).await;
    let mut controller = plugin.controller();
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(create(&mut controller, &format!("v{i}"), Mode::SingleNodeWriter).await);
    }
    let (mut seen, tokens) = list_all_volumes(&mut controller).await;
    seen.sort();
    created.sort();
    assert_eq!(seen, created);
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    let base64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    for token in &tokens {
        assert!(!token.starts_with("n1."), "not the default format: {token}");
        assert!(token.chars().all(base64url), "{token}");
    }

    // Tokens it did not issue: a forged one (one character changed), the default format's,
    // and garbage.
    let forged = {
        let mut chars: Vec<char> = tokens[0].chars().collect();
        chars[1] = if chars[1] == 'A' { 'B' } else { 'A' };
        chars.into_iter().collect::<String>()
    };
    let hex_of_first: String = created[0].bytes().map(|b| format!("{b:02x}")).collect();
    for bad in [forged, format!("n1.{hex_of_first}"), "not-a-token".into()] {
        let request = ListVolumesRequest {
            max_entries: 2,
            starting_token: bad.clone(),
        };
        assert_eq!(
            code_of(controller.list_volumes(request).await),
            Code::Aborted,
            "{bad}"
        );
    }

    // ListSnapshots too.
    for (i, source) in created.iter().take(3).enumerate() {
        controller
            .create_snapshot(CreateSnapshotRequest {
                source_volume_id: source.clone(),
                name: format!("s{i}"),
                ..Default::default()
            })
            .await
            .expect("snapshot");
    }
    let first = controller
        .list_snapshots(ListSnapshotsRequest {
            max_entries: 2,
            ..Default::default()
        })
        .await
        .expect("first page")
        .into_inner();
    assert_eq!(first.entries.len(), 2);
    assert!(!first.next_token.is_empty() && !first.next_token.starts_with("n1."));
    let rest = controller
        .list_snapshots(ListSnapshotsRequest {
            max_entries: 2,
            starting_token: first.next_token.clone(),
            ..Default::default()
        })
        .await
        .expect("second page")
        .into_inner();
    assert_eq!((rest.entries.len(), rest.next_token.as_str()), (1, ""));
    let forged = ListSnapshotsRequest {
        starting_token: format!("{}A", first.next_token),
        ..Default::default()
    };
    assert_eq!(
        code_of(controller.list_snapshots(forged).await),
        Code::Aborted
    );

    // The default plugin does not take them either.
    assert!(plugin.stop().await.success());
    let default = Plugin::start(&scratch, &[]).await;
    let request = ListVolumesRequest {
        max_entries: 2,
        starting_token: tokens[0].clone(),
    };
    assert_eq!(
        code_of(default.controller().list_volumes(request).await),
        Code::Aborted
    );
}

#[tokio::test]
async fn variant_release_not_found_answers_not_found_for_what_is_not_there() {
    if !can_mount() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--variant", "release-not-found"]).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let mode = Mode::SingleNodeWriter;
    let id = create(&mut controller, "released", mode).await;

    // ControllerUnpublishVolume: never published, an unknown volume, and a second time.
    assert_eq!(
        code_of(
            controller
                .controller_unpublish_volume(controller_unpublish(&id))
                .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code_of(
            controller
                .controller_unpublish_volume(controller_unpublish("nope"))
                .await
        ),
        Code::NotFound
    );
    controller
        .controller_publish_volume(controller_publish(&id, mode, false))
        .await
        .expect("publish");

    // The node calls: never there, there, and again.
    let (staging, target) = (scratch.co_path("staging"), scratch.co_path("target"));
    assert_eq!(
        code_of(
            node.node_unpublish_volume(unpublish_request(&id, &target))
                .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code_of(
            node.node_unstage_volume(unstage_request(&id, &staging))
                .await
        ),
        Code::NotFound
    );
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("stage");
    node.node_publish_volume(publish_request(&id, &staging, &target, mode, false))
        .await
        .expect("publish");
    node.node_unpublish_volume(unpublish_request(&id, &target))
        .await
        .expect("unpublish: OK");
    assert!(!is_mount_point(&target));
    assert_eq!(
        code_of(
            node.node_unpublish_volume(unpublish_request(&id, &target))
                .await
        ),
        Code::NotFound
    );
    node.node_unstage_volume(unstage_request(&id, &staging))
        .await
        .expect("unstage: OK");
    assert!(!is_mount_point(&staging));
    assert_eq!(
        code_of(
            node.node_unstage_volume(unstage_request(&id, &staging))
                .await
        ),
        Code::NotFound
    );
    controller
        .controller_unpublish_volume(controller_unpublish(&id))
        .await
        .expect("controller unpublish: OK");
    assert_eq!(
        code_of(
            controller
                .controller_unpublish_volume(controller_unpublish(&id))
                .await
        ),
        Code::NotFound
    );
    assert!(mounts_under(scratch.path()).is_empty());
}

#[tokio::test]
async fn variant_node_only_serves_the_node_with_preset_volumes() {
    if !can_mount() {
        return;
    }
    let scratch = Scratch::new();
    let args = [
        "--variant",
        "node-only",
        "--preset-volume",
        "vol-a",
        "--preset-volume",
        "vol-b",
    ];
    let plugin = Plugin::start(&scratch, &args).await;

    // CONTROLLER_SERVICE is advertised, yet the Controller service is not there.
    let capabilities = plugin
        .identity()
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .expect("plugin capabilities")
        .into_inner()
        .capabilities;
    let controller_service = plugin_capability::Type::Service(plugin_capability::Service {
        r#type: service::Type::ControllerService as i32,
    });
    assert!(
        capabilities
            .iter()
            .any(|c| c.r#type.as_ref() == Some(&controller_service)),
        "{capabilities:?}"
    );
    let mut controller = plugin.controller();
    let unimplemented = controller
        .controller_get_capabilities(ControllerGetCapabilitiesRequest {})
        .await
        .expect_err("no Controller service");
    assert_eq!(unimplemented.code(), Code::Unimplemented);
    let created = controller
        .create_volume(create_request("new", Mode::SingleNodeWriter, 0))
        .await
        .expect_err("no Controller service");
    assert_eq!(created.code(), Code::Unimplemented);
    let group = plugin
        .group_controller()
        .group_controller_get_capabilities(GroupControllerGetCapabilitiesRequest {})
        .await
        .expect_err("no GroupController service");
    assert_eq!(group.code(), Code::Unimplemented);

    // The Node service is.
    let mut node = plugin.node();
    let info = node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .expect("node info")
        .into_inner();
    assert_eq!(info.node_id, NODE_ID);

    // The preset volumes are there to stage and publish.
    let state = scratch.saved_state();
    for id in ["vol-a", "vol-b"] {
        let volume = &state["volumes"][id];
        assert_eq!(volume["name"], id, "{state}");
        assert_eq!(volume["capacity_bytes"], GIB, "{state}");
        assert!(scratch.volume_dir(id).is_dir());
    }
    let mode = Mode::SingleNodeWriter;
    for id in ["vol-a", "vol-b"] {
        let (staging, target) = (
            scratch.co_path(&format!("staging-{id}")),
            scratch.co_path(&format!("target-{id}")),
        );
        node.node_stage_volume(stage_request(id, &staging, mode))
            .await
            .expect("stage");
        node.node_publish_volume(publish_request(id, &staging, &target, mode, false))
            .await
            .expect("publish");
        fs::write(target.join("data.txt"), id).expect("write through the target");
        // No controller grew it here: the node takes the size the CO asks for over.
        let expanded = node
            .node_expand_volume(NodeExpandVolumeRequest {
                volume_id: id.into(),
                volume_path: target.display().to_string(),
                capacity_range: Some(CapacityRange {
                    required_bytes: 2 * GIB,
                    limit_bytes: 0,
                }),
                ..Default::default()
            })
            .await
            .expect("expand on the node")
            .into_inner();
        assert_eq!(expanded.capacity_bytes, 2 * GIB);
        node.node_unpublish_volume(unpublish_request(id, &target))
            .await
            .expect("unpublish");
        node.node_unstage_volume(unstage_request(id, &staging))
            .await
            .expect("unstage");
    }
    assert!(mounts_under(scratch.path()).is_empty());

    // A restart keeps the preset volumes as they are, data included.
    assert!(plugin.stop().await.success());
    let _plugin = Plugin::start(&scratch, &args).await;
    let state = scratch.saved_state();
    assert_eq!(
        state["volumes"].as_object().map(|v| v.len()),
        Some(2),
        "{state}"
    );
    assert_eq!(
        state["volumes"]["vol-a"]["capacity_bytes"],
        2 * GIB,
        "{state}"
    );
    assert_eq!(
        fs::read_to_string(scratch.volume_dir("vol-a").join("data.txt")).expect("kept"),
        "vol-a"
    );
}

fn validate_request(id: &str, mode: Mode) -> ValidateVolumeCapabilitiesRequest {
    ValidateVolumeCapabilitiesRequest {
        volume_id: id.into(),
        volume_capabilities: vec![mount_capability(mode)],
        parameters: HashMap::new(),
        ..Default::default()
    }
}

#[tokio::test]
async fn variant_validate_without_confirmed_and_fault_validate_confirms_other() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--variant", "validate-without-confirmed"]).await;
    let mut controller = plugin.controller();
    let mode = Mode::SingleNodeWriter;
    let id = create(&mut controller, "validated", mode).await;
    let reply = controller
        .validate_volume_capabilities(validate_request(&id, mode))
        .await
        .expect("validate")
        .into_inner();
    assert!(reply.confirmed.is_none(), "{reply:?}");
    assert!(reply.message.is_empty(), "{reply:?}");
    // What it cannot support is still refused, with a reason.
    let block = ValidateVolumeCapabilitiesRequest {
        volume_capabilities: vec![block_capability(mode)],
        ..validate_request(&id, mode)
    };
    let reply = controller
        .validate_volume_capabilities(block)
        .await
        .expect("validate block")
        .into_inner();
    assert!(
        reply.confirmed.is_none() && !reply.message.is_empty(),
        "{reply:?}"
    );
    assert_eq!(
        code_of(
            controller
                .validate_volume_capabilities(validate_request("nope", mode))
                .await
        ),
        Code::NotFound
    );

    // validate-confirms-other: confirmed, but not what was asked.
    let other_scratch = Scratch::new();
    let faulty = Plugin::start(&other_scratch, &["--fault", "validate-confirms-other"]).await;
    let mut controller = faulty.controller();
    let id = create(&mut controller, "misconfirmed", mode).await;
    let reply = controller
        .validate_volume_capabilities(validate_request(&id, mode))
        .await
        .expect("validate")
        .into_inner();
    let confirmed = reply.confirmed.expect("confirmed");
    let modes: Vec<i32> = confirmed
        .volume_capabilities
        .iter()
        .filter_map(|c| c.access_mode.as_ref().map(|m| m.mode))
        .collect();
    assert_eq!(modes, [Mode::MultiNodeReaderOnly as i32]);
}

#[tokio::test]
async fn variant_ignores_max_volumes_and_the_limit_faults() {
    // ignores-max-volumes: NodeGetInfo still reports the limit; ControllerPublishVolume goes
    // past it.
    let scratch = Scratch::new();
    let args = [
        "--max-volumes-per-node",
        "1",
        "--variant",
        "ignores-max-volumes",
    ];
    let plugin = Plugin::start(&scratch, &args).await;
    let info = plugin
        .node()
        .node_get_info(NodeGetInfoRequest {})
        .await
        .expect("node info")
        .into_inner();
    assert_eq!(info.max_volumes_per_node, 1);
    let mut controller = plugin.controller();
    let mode = Mode::SingleNodeWriter;
    for name in ["a", "b", "c"] {
        let id = create(&mut controller, name, mode).await;
        controller
            .controller_publish_volume(controller_publish(&id, mode, false))
            .await
            .unwrap_or_else(|err| panic!("publish {name} beyond the limit: {err:?}"));
    }
    let published = scratch.saved_state()["controller_publications"]
        .as_array()
        .map(Vec::len);
    assert_eq!(published, Some(3));

    // publish-limit-wrong-code: refused at the limit, with INTERNAL.
    let scratch = Scratch::new();
    let args = [
        "--max-volumes-per-node",
        "1",
        "--fault",
        "publish-limit-wrong-code",
    ];
    let plugin = Plugin::start(&scratch, &args).await;
    let mut controller = plugin.controller();
    let a = create(&mut controller, "a", mode).await;
    let b = create(&mut controller, "b", mode).await;
    controller
        .controller_publish_volume(controller_publish(&a, mode, false))
        .await
        .expect("the first fits");
    assert_eq!(
        code_of(
            controller
                .controller_publish_volume(controller_publish(&b, mode, false))
                .await
        ),
        Code::Internal
    );

    // publish-limit-too-early: refused one volume before the limit.
    let scratch = Scratch::new();
    let args = [
        "--max-volumes-per-node",
        "2",
        "--fault",
        "publish-limit-too-early",
    ];
    let plugin = Plugin::start(&scratch, &args).await;
    let mut controller = plugin.controller();
    let a = create(&mut controller, "a", mode).await;
    let b = create(&mut controller, "b", mode).await;
    controller
        .controller_publish_volume(controller_publish(&a, mode, false))
        .await
        .expect("the first fits");
    assert_eq!(
        code_of(
            controller
                .controller_publish_volume(controller_publish(&b, mode, false))
                .await
        ),
        Code::ResourceExhausted,
        "the second of two is refused"
    );
}

#[test]
fn variants_on_the_command_line() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_csi-hostpath"))
            .args(args)
            .env_remove("CSI_ENDPOINT")
            .output()
            .expect("run csi-hostpath");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let base = [
        "--endpoint",
        "unix:///tmp/x.sock",
        "--node-id",
        "n",
        "--state-dir",
        "/tmp/x",
    ];
    let (code, _, stderr) = run(&[&base[..], &["--variant", "no-such-variant"]].concat());
    assert_eq!(code, Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("unknown variant 'no-such-variant'") && stderr.contains("node-only"),
        "{stderr}"
    );
    for bad in ["../escape", "", ".hidden", "a/b"] {
        let (code, _, stderr) = run(&[&base[..], &["--preset-volume", bad]].concat());
        assert_eq!(code, Some(2), "{bad:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    // A removed fault is now unknown.
    let (code, _, _) = run(&[&base[..], &["--fault", "validate-not-confirmed"]].concat());
    assert_eq!(code, Some(2));

    // --help lists the variants after the faults.
    let (code, stdout, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    let faults = stdout.find("Faults (--fault NAME").expect("faults listed");
    let variants = stdout
        .find("Variants (--variant NAME")
        .expect("variants listed");
    assert!(faults < variants, "{stdout}");
    assert!(stdout[variants..].contains("stage-without-mount"));
}
