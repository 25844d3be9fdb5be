//! End-to-end tests of csi-hostpath: the real binary on a unix socket, driven through the
//! generated tonic clients the way Nomad drives a CSI plugin.
//!
//! Tests that mount need root (see `support::can_mount`); the others run anywhere.

mod support;

use std::fs;
use std::io::ErrorKind;
use std::process::Command;
use std::time::{Duration, Instant};

use nomad_conform_proto::csi::v1::VolumeGroupSnapshot;
use nomad_conform_proto::csi::v1::controller_client::ControllerClient;
use nomad_conform_proto::csi::v1::controller_service_capability::rpc::Type as ControllerRpc;
use nomad_conform_proto::csi::v1::group_controller_service_capability::rpc::Type as GroupRpc;
use nomad_conform_proto::csi::v1::node_service_capability::rpc::Type as NodeRpc;
use nomad_conform_proto::csi::v1::plugin_capability::{self, service, volume_expansion};
use nomad_conform_proto::csi::v1::volume_capability::access_mode::Mode;
use nomad_conform_proto::csi::v1::volume_content_source::{SnapshotSource, Type, VolumeSource};
use nomad_conform_proto::csi::v1::volume_usage::Unit;
use nomad_conform_proto::csi::v1::{
    CapacityRange, ControllerExpandVolumeRequest, ControllerGetCapabilitiesRequest,
    ControllerGetVolumeRequest, ControllerModifyVolumeRequest, ControllerUnpublishVolumeRequest,
    CreateSnapshotRequest, CreateVolumeGroupSnapshotRequest, DeleteSnapshotRequest,
    DeleteVolumeGroupSnapshotRequest, DeleteVolumeRequest, GetCapacityRequest,
    GetPluginCapabilitiesRequest, GetPluginInfoRequest, GetSnapshotRequest,
    GetVolumeGroupSnapshotRequest, GroupControllerGetCapabilitiesRequest, ListSnapshotsRequest,
    ListVolumesRequest, NodeExpandVolumeRequest, NodeGetCapabilitiesRequest, NodeGetInfoRequest,
    NodeGetVolumeStatsRequest, NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest, ProbeRequest,
    ValidateVolumeCapabilitiesRequest, VolumeContentSource, controller_service_capability,
    group_controller_service_capability, node_service_capability,
};
use support::*;
use tonic::Code;
use tonic::transport::Channel;

#[tokio::test]
async fn identity_capabilities_and_node_info() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--max-volumes-per-node", "3"]).await;
    let mut identity = plugin.identity();

    let info = identity
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .expect("info")
        .into_inner();
    assert_eq!(info.name, "hostpath.csi.nomad-conform.dev");
    assert!(info.name.len() <= 63);
    assert_eq!(info.vendor_version, env!("CARGO_PKG_VERSION"));

    let caps = identity
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .expect("capabilities")
        .into_inner()
        .capabilities;
    let has_controller = caps.iter().any(|c| {
        matches!(&c.r#type, Some(plugin_capability::Type::Service(s))
            if s.r#type == service::Type::ControllerService as i32)
    });
    let has_group_controller = caps.iter().any(|c| {
        matches!(&c.r#type, Some(plugin_capability::Type::Service(s))
            if s.r#type == service::Type::GroupControllerService as i32)
    });
    let has_online_expansion = caps.iter().any(|c| {
        matches!(&c.r#type, Some(plugin_capability::Type::VolumeExpansion(e))
            if e.r#type == volume_expansion::Type::Online as i32)
    });
    assert!(
        has_controller && has_group_controller && has_online_expansion,
        "{caps:?}"
    );

    let group_caps: Vec<i32> = plugin
        .group_controller()
        .group_controller_get_capabilities(GroupControllerGetCapabilitiesRequest {})
        .await
        .expect("group controller capabilities")
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| {
            c.r#type
                .map(|group_controller_service_capability::Type::Rpc(rpc)| rpc.r#type)
        })
        .collect();
    assert_eq!(
        group_caps,
        [GroupRpc::CreateDeleteGetVolumeGroupSnapshot as i32]
    );

    let probe = identity
        .probe(ProbeRequest {})
        .await
        .expect("probe")
        .into_inner();
    assert_eq!(probe.ready, Some(true));

    let controller_caps: Vec<i32> = plugin
        .controller()
        .controller_get_capabilities(ControllerGetCapabilitiesRequest {})
        .await
        .expect("controller capabilities")
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| {
            c.r#type
                .map(|controller_service_capability::Type::Rpc(rpc)| rpc.r#type)
        })
        .collect();
    for wanted in [
        ControllerRpc::CreateDeleteVolume,
        ControllerRpc::PublishUnpublishVolume,
        ControllerRpc::ListVolumes,
        ControllerRpc::ListVolumesPublishedNodes,
        ControllerRpc::GetCapacity,
        ControllerRpc::CreateDeleteSnapshot,
        ControllerRpc::ListSnapshots,
        ControllerRpc::CloneVolume,
        ControllerRpc::ExpandVolume,
        ControllerRpc::ModifyVolume,
        ControllerRpc::GetVolume,
        ControllerRpc::GetSnapshot,
    ] {
        assert!(
            controller_caps.contains(&(wanted as i32)),
            "{wanted:?} missing"
        );
    }

    let mut node = plugin.node();
    let node_caps: Vec<i32> = node
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .expect("node capabilities")
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| {
            c.r#type
                .map(|node_service_capability::Type::Rpc(rpc)| rpc.r#type)
        })
        .collect();
    let expected = [
        NodeRpc::StageUnstageVolume,
        NodeRpc::GetVolumeStats,
        NodeRpc::ExpandVolume,
    ];
    assert_eq!(node_caps, expected.map(|t| t as i32));

    let info = node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .expect("node info")
        .into_inner();
    assert_eq!(info.node_id, NODE_ID);
    assert_eq!(info.max_volumes_per_node, 3);
    assert!(info.accessible_topology.is_none());
}

#[tokio::test]
async fn create_delete_validate_and_capacity() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mut controller = plugin.controller();

    let total = controller
        .get_capacity(GetCapacityRequest::default())
        .await
        .expect("capacity")
        .into_inner()
        .available_capacity;
    assert_eq!(total, 100 * GIB);

    let first = controller
        .create_volume(create_request("data", Mode::SingleNodeWriter, 10 * MIB))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume");
    assert_eq!(first.capacity_bytes, 10 * MIB);
    assert!(scratch.volume_dir(&first.volume_id).is_dir());

    // A retry gets the same volume; an incompatible one with the same name does not.
    let again = controller
        .create_volume(create_request("data", Mode::SingleNodeWriter, 10 * MIB))
        .await
        .expect("create again")
        .into_inner()
        .volume
        .expect("volume");
    assert_eq!(again, first);
    let conflict = controller
        .create_volume(create_request("data", Mode::SingleNodeWriter, 20 * MIB))
        .await;
    assert_eq!(code_of(conflict), Code::AlreadyExists);

    // Required fields and unsupported capabilities.
    let nameless = controller
        .create_volume(create_request("", Mode::SingleNodeWriter, 0))
        .await;
    assert_eq!(code_of(nameless), Code::InvalidArgument);
    let mut no_caps = create_request("no-caps", Mode::SingleNodeWriter, 0);
    no_caps.volume_capabilities.clear();
    assert_eq!(
        code_of(controller.create_volume(no_caps).await),
        Code::InvalidArgument
    );
    // One volume cannot be both a block device and a directory.
    let mut mixed = create_request("mixed", Mode::SingleNodeWriter, 0);
    mixed
        .volume_capabilities
        .push(block_capability(Mode::SingleNodeWriter));
    assert_eq!(
        code_of(controller.create_volume(mixed).await),
        Code::InvalidArgument
    );
    let mut upside_down = create_request("range", Mode::SingleNodeWriter, 0);
    upside_down.capacity_range = Some(CapacityRange {
        required_bytes: 10,
        limit_bytes: 5,
    });
    assert_eq!(
        code_of(controller.create_volume(upside_down).await),
        Code::InvalidArgument
    );
    let huge = create_request("huge", Mode::SingleNodeWriter, 101 * GIB);
    assert_eq!(
        code_of(controller.create_volume(huge).await),
        Code::OutOfRange
    );

    // Without a capacity_range a volume gets the default 1 GiB, and capacity is booked.
    let default = controller
        .create_volume(create_request("default", Mode::MultiNodeMultiWriter, 0))
        .await
        .expect("create default")
        .into_inner()
        .volume
        .expect("volume");
    assert_eq!(default.capacity_bytes, GIB);
    let available = controller
        .get_capacity(GetCapacityRequest::default())
        .await
        .expect("capacity")
        .into_inner()
        .available_capacity;
    assert_eq!(available, 100 * GIB - GIB - 10 * MIB);

    // ValidateVolumeCapabilities.
    let validate = |id: &str, caps| ValidateVolumeCapabilitiesRequest {
        volume_id: id.into(),
        volume_capabilities: caps,
        ..Default::default()
    };
    let confirmed = controller
        .validate_volume_capabilities(validate(
            &first.volume_id,
            vec![mount_capability(Mode::SingleNodeWriter)],
        ))
        .await
        .expect("validate")
        .into_inner();
    assert_eq!(
        confirmed.confirmed.expect("confirmed").volume_capabilities,
        vec![mount_capability(Mode::SingleNodeWriter)]
    );
    let refused = controller
        .validate_volume_capabilities(validate(
            &first.volume_id,
            vec![block_capability(Mode::SingleNodeWriter)],
        ))
        .await
        .expect("validate block")
        .into_inner();
    assert!(
        refused.confirmed.is_none() && !refused.message.is_empty(),
        "{refused:?}"
    );
    let unknown = controller
        .validate_volume_capabilities(validate(
            "nope",
            vec![mount_capability(Mode::SingleNodeWriter)],
        ))
        .await;
    assert_eq!(code_of(unknown), Code::NotFound);
    let empty = controller
        .validate_volume_capabilities(validate(&first.volume_id, vec![]))
        .await;
    assert_eq!(code_of(empty), Code::InvalidArgument);

    // ControllerGetVolume.
    let got = controller
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: first.volume_id.clone(),
        })
        .await
        .expect("get volume")
        .into_inner();
    assert_eq!(got.volume.as_ref(), Some(&first));
    let missing = controller
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: "nope".into(),
        })
        .await;
    assert_eq!(code_of(missing), Code::NotFound);

    // DeleteVolume: gone afterwards, and deleting again (or anything unknown) is OK.
    let delete = |id: &str| DeleteVolumeRequest {
        volume_id: id.into(),
        ..Default::default()
    };
    controller
        .delete_volume(delete(&first.volume_id))
        .await
        .expect("delete");
    assert!(!scratch.volume_dir(&first.volume_id).exists());
    controller
        .delete_volume(delete(&first.volume_id))
        .await
        .expect("delete again");
    controller
        .delete_volume(delete("never-existed"))
        .await
        .expect("delete unknown");
    assert_eq!(
        code_of(controller.delete_volume(delete("")).await),
        Code::InvalidArgument
    );
}

#[tokio::test]
async fn concurrent_creates_with_one_name_make_one_volume() {
    async fn create_concurrently(plugin: &Plugin) -> Vec<String> {
        let calls = (0..6).map(|_| {
            let mut controller = plugin.controller();
            async move {
                controller
                    .create_volume(create_request("shared", Mode::SingleNodeWriter, 0))
                    .await
                    .expect("create")
                    .into_inner()
                    .volume
                    .expect("volume")
                    .volume_id
            }
        });
        let ids = spawn_all(calls).await;
        let listed = plugin
            .controller()
            .list_volumes(ListVolumesRequest::default())
            .await
            .expect("list")
            .into_inner()
            .entries;
        assert_eq!(ids.len(), 6);
        listed
            .into_iter()
            .filter_map(|e| e.volume.map(|v| v.volume_id))
            .collect()
    }

    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    assert_eq!(create_concurrently(&plugin).await.len(), 1);
    drop(plugin);

    let racy_scratch = Scratch::new();
    let racy = Plugin::start(&racy_scratch, &["--fault", "create-races"]).await;
    assert!(
        create_concurrently(&racy).await.len() > 1,
        "create-races should make duplicates"
    );
}

/// Runs futures concurrently as tasks and collects their results in order.
async fn spawn_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn controller_publish_rules() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &["--max-volumes-per-node", "1"]).await;
    let mut controller = plugin.controller();
    let create = |name: &str| create_request(name, Mode::SingleNodeWriter, 0);
    let a = controller
        .create_volume(create("a"))
        .await
        .expect("a")
        .into_inner()
        .volume
        .expect("a");
    let b = controller
        .create_volume(create("b"))
        .await
        .expect("b")
        .into_inner()
        .volume
        .expect("b");

    let unknown_volume = controller_publish("nope", Mode::SingleNodeWriter, false);
    assert_eq!(
        code_of(controller.controller_publish_volume(unknown_volume).await),
        Code::NotFound
    );
    let mut unknown_node = controller_publish(&a.volume_id, Mode::SingleNodeWriter, false);
    unknown_node.node_id = "node-elsewhere".into();
    assert_eq!(
        code_of(controller.controller_publish_volume(unknown_node).await),
        Code::NotFound
    );
    let mut no_capability = controller_publish(&a.volume_id, Mode::SingleNodeWriter, false);
    no_capability.volume_capability = None;
    assert_eq!(
        code_of(controller.controller_publish_volume(no_capability).await),
        Code::InvalidArgument
    );

    let published = controller
        .controller_publish_volume(controller_publish(
            &a.volume_id,
            Mode::SingleNodeWriter,
            false,
        ))
        .await
        .expect("publish")
        .into_inner();
    assert!(!published.publish_context.is_empty());
    controller
        .controller_publish_volume(controller_publish(
            &a.volume_id,
            Mode::SingleNodeWriter,
            false,
        ))
        .await
        .expect("publish again is idempotent");
    let readonly_now = controller
        .controller_publish_volume(controller_publish(
            &a.volume_id,
            Mode::SingleNodeWriter,
            true,
        ))
        .await;
    assert_eq!(code_of(readonly_now), Code::AlreadyExists);
    let over_limit = controller
        .controller_publish_volume(controller_publish(
            &b.volume_id,
            Mode::SingleNodeWriter,
            false,
        ))
        .await;
    assert_eq!(code_of(over_limit), Code::ResourceExhausted);

    let listed = controller
        .list_volumes(ListVolumesRequest::default())
        .await
        .expect("list")
        .into_inner()
        .entries;
    let nodes_of = |id: &str| {
        listed
            .iter()
            .find(|e| e.volume.as_ref().is_some_and(|v| v.volume_id == id))
            .and_then(|e| e.status.clone())
            .map(|s| s.published_node_ids)
            .expect("listed")
    };
    assert_eq!(nodes_of(&a.volume_id), vec![NODE_ID.to_string()]);
    assert!(nodes_of(&b.volume_id).is_empty());

    let delete = DeleteVolumeRequest {
        volume_id: a.volume_id.clone(),
        ..Default::default()
    };
    assert_eq!(
        code_of(controller.delete_volume(delete.clone()).await),
        Code::FailedPrecondition
    );

    let unpublish = |id: &str| ControllerUnpublishVolumeRequest {
        volume_id: id.into(),
        node_id: NODE_ID.into(),
        ..Default::default()
    };
    controller
        .controller_unpublish_volume(unpublish(&a.volume_id))
        .await
        .expect("unpublish");
    controller
        .controller_unpublish_volume(unpublish(&a.volume_id))
        .await
        .expect("again: OK");
    controller
        .controller_unpublish_volume(unpublish("nope"))
        .await
        .expect("unknown: OK");
    controller
        .delete_volume(delete)
        .await
        .expect("delete after unpublish");
}

#[tokio::test]
async fn stage_publish_unpublish_unstage_with_real_bind_mounts() {
    if !can_mount() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let mode = Mode::SingleNodeWriter;
    let volume = controller
        .create_volume(create_request("mounted", mode, 0))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume");
    let id = volume.volume_id.clone();
    controller
        .controller_publish_volume(controller_publish(&id, mode, false))
        .await
        .expect("controller publish");
    fs::write(scratch.volume_dir(&id).join("hello.txt"), "from the volume").expect("seed file");

    // Stage: the plugin creates the staging dir if the CO did not.
    let staging = scratch.co_path("staging");
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("stage");
    assert!(is_mount_point(&staging));
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("stage again");
    let other_mode = stage_request(&id, &staging, Mode::SingleNodeReaderOnly);
    assert_eq!(
        code_of(node.node_stage_volume(other_mode).await),
        Code::AlreadyExists
    );
    let mut unknown = stage_request("nope", &staging, mode);
    assert_eq!(
        code_of(node.node_stage_volume(unknown.clone()).await),
        Code::NotFound
    );
    unknown.staging_target_path.clear();
    assert_eq!(
        code_of(node.node_stage_volume(unknown).await),
        Code::InvalidArgument
    );

    // Publish needs a staged volume.
    let target = scratch.co_path("target-1");
    let mut unstaged = publish_request(&id, &staging, &target, mode, false);
    unstaged.staging_target_path.clear();
    assert_eq!(
        code_of(node.node_publish_volume(unstaged).await),
        Code::FailedPrecondition
    );
    let elsewhere = publish_request(&id, &scratch.co_path("not-staged"), &target, mode, false);
    assert_eq!(
        code_of(node.node_publish_volume(elsewhere).await),
        Code::FailedPrecondition
    );

    node.node_publish_volume(publish_request(&id, &staging, &target, mode, false))
        .await
        .expect("publish");
    assert!(is_mount_point(&target));
    assert_eq!(
        fs::read_to_string(target.join("hello.txt")).expect("read"),
        "from the volume"
    );
    fs::write(target.join("back.txt"), "from the workload").expect("write through target");
    assert_eq!(
        fs::read_to_string(scratch.volume_dir(&id).join("back.txt")).expect("read back"),
        "from the workload"
    );
    node.node_publish_volume(publish_request(&id, &staging, &target, mode, false))
        .await
        .expect("publish again");
    let now_readonly = publish_request(&id, &staging, &target, mode, true);
    assert_eq!(
        code_of(node.node_publish_volume(now_readonly).await),
        Code::AlreadyExists
    );
    let second = publish_request(&id, &staging, &scratch.co_path("target-2"), mode, false);
    assert_eq!(
        code_of(node.node_publish_volume(second).await),
        Code::FailedPrecondition
    );

    // Stats and expansion while published.
    let stats = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            ..Default::default()
        })
        .await
        .expect("stats")
        .into_inner();
    let units: Vec<i32> = stats.usage.iter().map(|u| u.unit).collect();
    assert_eq!(units, [Unit::Bytes as i32, Unit::Inodes as i32]);
    assert!(
        stats
            .usage
            .iter()
            .all(|u| u.total > 0 && u.used >= 0 && u.available >= 0)
    );
    let stats_elsewhere = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: scratch.co_path("nowhere").display().to_string(),
            ..Default::default()
        })
        .await;
    assert_eq!(code_of(stats_elsewhere), Code::NotFound);
    // A directory that exists but is not the volume's is no better.
    let unrelated = scratch.co_path("unrelated");
    fs::create_dir(&unrelated).expect("unrelated dir");
    let stats_unrelated = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: unrelated.display().to_string(),
            ..Default::default()
        })
        .await;
    assert_eq!(code_of(stats_unrelated), Code::NotFound);
    node.node_get_volume_stats(NodeGetVolumeStatsRequest {
        volume_id: id.clone(),
        volume_path: staging.display().to_string(),
        ..Default::default()
    })
    .await
    .expect("stats at the staging path");
    let expanded = controller
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .expect("expand")
        .into_inner();
    assert_eq!(expanded.capacity_bytes, 2 * GIB);
    assert!(expanded.node_expansion_required);
    let node_expanded = node
        .node_expand_volume(NodeExpandVolumeRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            capacity_range: Some(CapacityRange {
                required_bytes: 2 * GIB,
                limit_bytes: 0,
            }),
            staging_target_path: staging.display().to_string(),
            ..Default::default()
        })
        .await
        .expect("node expand")
        .into_inner();
    assert_eq!(node_expanded.capacity_bytes, 2 * GIB);

    // Deleting a volume in use is refused.
    let delete = DeleteVolumeRequest {
        volume_id: id.clone(),
        ..Default::default()
    };
    assert_eq!(
        code_of(controller.delete_volume(delete.clone()).await),
        Code::FailedPrecondition
    );

    // Tear down in Nomad's order, each step twice (idempotency).
    let unpublish = NodeUnpublishVolumeRequest {
        volume_id: id.clone(),
        target_path: target.display().to_string(),
    };
    node.node_unpublish_volume(unpublish.clone())
        .await
        .expect("unpublish");
    assert!(!is_mount_point(&target));
    assert!(
        !target.exists(),
        "the plugin removes the target dir it made"
    );
    node.node_unpublish_volume(unpublish)
        .await
        .expect("unpublish again");
    let unknown_unpublish = NodeUnpublishVolumeRequest {
        volume_id: "nope".into(),
        target_path: target.display().to_string(),
    };
    assert_eq!(
        code_of(node.node_unpublish_volume(unknown_unpublish).await),
        Code::NotFound
    );

    let unstage = NodeUnstageVolumeRequest {
        volume_id: id.clone(),
        staging_target_path: staging.display().to_string(),
    };
    node.node_unstage_volume(unstage.clone())
        .await
        .expect("unstage");
    assert!(!is_mount_point(&staging));
    node.node_unstage_volume(unstage)
        .await
        .expect("unstage again");

    assert_eq!(
        code_of(controller.delete_volume(delete.clone()).await),
        Code::FailedPrecondition
    );
    controller
        .controller_unpublish_volume(ControllerUnpublishVolumeRequest {
            volume_id: id.clone(),
            node_id: NODE_ID.into(),
            ..Default::default()
        })
        .await
        .expect("controller unpublish");
    controller.delete_volume(delete).await.expect("delete");
    assert!(mounts_under(scratch.path()).is_empty());
}

#[tokio::test]
async fn multi_node_volumes_take_second_targets_and_readonly_is_enforced() {
    if !can_mount() {
        return;
    }
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let mode = Mode::MultiNodeMultiWriter;
    let id = controller
        .create_volume(create_request("shared", mode, 0))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id;
    let staging = scratch.co_path("staging");
    fs::create_dir(&staging).expect("the CO makes the staging dir");
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("stage");

    let writer = scratch.co_path("writer");
    let reader = scratch.co_path("reader");
    node.node_publish_volume(publish_request(&id, &staging, &writer, mode, false))
        .await
        .expect("publish writer");
    node.node_publish_volume(publish_request(&id, &staging, &reader, mode, true))
        .await
        .expect("publish reader (a second target is fine for MULTI_NODE)");

    fs::write(writer.join("w.txt"), "written").expect("writable target");
    assert_eq!(
        fs::read_to_string(reader.join("w.txt")).expect("visible"),
        "written"
    );
    let err = fs::write(reader.join("r.txt"), "nope").expect_err("read-only target");
    assert_eq!(err.kind(), ErrorKind::ReadOnlyFilesystem, "{err}");
    let options = mount_options(&reader).expect("reader mounted");
    assert!(options.split(',').any(|o| o == "ro"), "{options}");
    assert!(!scratch.volume_dir(&id).join("r.txt").exists());

    // Another capability on a second target is refused even for MULTI_NODE modes.
    let other = publish_request(
        &id,
        &staging,
        &scratch.co_path("third"),
        Mode::MultiNodeReaderOnly,
        true,
    );
    assert_eq!(
        code_of(node.node_publish_volume(other).await),
        Code::FailedPrecondition
    );

    for target in [&writer, &reader] {
        node.node_unpublish_volume(NodeUnpublishVolumeRequest {
            volume_id: id.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .expect("unpublish");
    }
    node.node_unstage_volume(NodeUnstageVolumeRequest {
        volume_id: id.clone(),
        staging_target_path: staging.display().to_string(),
    })
    .await
    .expect("unstage");
    assert!(
        staging.is_dir(),
        "the staging dir belongs to the CO and stays"
    );
    assert!(mounts_under(scratch.path()).is_empty());
}

#[tokio::test]
async fn snapshots_and_clones_copy_data() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mut controller = plugin.controller();
    let source = controller
        .create_volume(create_request("source", Mode::SingleNodeWriter, 5 * MIB))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume");
    let other = controller
        .create_volume(create_request("other", Mode::SingleNodeWriter, 0))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume");
    fs::write(scratch.volume_dir(&source.volume_id).join("data.txt"), "v1").expect("seed");

    let request = |name: &str, volume: &str| CreateSnapshotRequest {
        name: name.into(),
        source_volume_id: volume.into(),
        ..Default::default()
    };
    let snapshot = controller
        .create_snapshot(request("snap", &source.volume_id))
        .await
        .expect("snapshot")
        .into_inner()
        .snapshot
        .expect("snapshot");
    assert!(snapshot.ready_to_use && snapshot.creation_time.is_some());
    assert_eq!(snapshot.size_bytes, 5 * MIB);
    assert_eq!(snapshot.source_volume_id, source.volume_id);
    let again = controller
        .create_snapshot(request("snap", &source.volume_id))
        .await
        .expect("snapshot again")
        .into_inner()
        .snapshot
        .expect("snapshot");
    assert_eq!(again, snapshot);
    let clash = controller
        .create_snapshot(request("snap", &other.volume_id))
        .await;
    assert_eq!(code_of(clash), Code::AlreadyExists);
    let orphan = controller.create_snapshot(request("orphan", "nope")).await;
    assert_eq!(code_of(orphan), Code::NotFound);

    // The snapshot is a copy: later writes to the volume do not change it.
    fs::write(scratch.volume_dir(&source.volume_id).join("data.txt"), "v2").expect("rewrite");

    let list = |snapshot_id: &str, source_volume_id: &str| ListSnapshotsRequest {
        snapshot_id: snapshot_id.into(),
        source_volume_id: source_volume_id.into(),
        ..Default::default()
    };
    let count = |reply: tonic::Response<nomad_conform_proto::csi::v1::ListSnapshotsResponse>| {
        reply.into_inner().entries.len()
    };
    assert_eq!(
        count(controller.list_snapshots(list("", "")).await.expect("all")),
        1
    );
    assert_eq!(
        count(
            controller
                .list_snapshots(list(&snapshot.snapshot_id, ""))
                .await
                .expect("id")
        ),
        1
    );
    assert_eq!(
        count(
            controller
                .list_snapshots(list("nope", ""))
                .await
                .expect("unknown id")
        ),
        0
    );
    assert_eq!(
        count(
            controller
                .list_snapshots(list("", &source.volume_id))
                .await
                .expect("by source")
        ),
        1
    );
    assert_eq!(
        count(
            controller
                .list_snapshots(list("", "nope"))
                .await
                .expect("unknown source")
        ),
        0
    );

    // Restore from the snapshot, and clone the volume.
    let mut from_snapshot = create_request("restored", Mode::SingleNodeWriter, 0);
    from_snapshot.volume_content_source = Some(VolumeContentSource {
        r#type: Some(Type::Snapshot(SnapshotSource {
            snapshot_id: snapshot.snapshot_id.clone(),
        })),
    });
    let restored = controller
        .create_volume(from_snapshot)
        .await
        .expect("restore")
        .into_inner()
        .volume
        .expect("volume");
    assert_eq!(
        fs::read_to_string(scratch.volume_dir(&restored.volume_id).join("data.txt")).expect("read"),
        "v1"
    );
    assert!(restored.content_source.is_some());
    let mut from_volume = create_request("clone", Mode::SingleNodeWriter, 0);
    from_volume.volume_content_source = Some(VolumeContentSource {
        r#type: Some(Type::Volume(VolumeSource {
            volume_id: source.volume_id.clone(),
        })),
    });
    let clone = controller
        .create_volume(from_volume)
        .await
        .expect("clone")
        .into_inner()
        .volume
        .expect("volume");
    assert_eq!(
        fs::read_to_string(scratch.volume_dir(&clone.volume_id).join("data.txt")).expect("read"),
        "v2"
    );
    let mut from_nothing = create_request("ghost", Mode::SingleNodeWriter, 0);
    from_nothing.volume_content_source = Some(VolumeContentSource {
        r#type: Some(Type::Snapshot(SnapshotSource {
            snapshot_id: "nope".into(),
        })),
    });
    assert_eq!(
        code_of(controller.create_volume(from_nothing).await),
        Code::NotFound
    );

    let delete = |id: &str| DeleteSnapshotRequest {
        snapshot_id: id.into(),
        ..Default::default()
    };
    controller
        .delete_snapshot(delete(&snapshot.snapshot_id))
        .await
        .expect("delete snapshot");
    controller
        .delete_snapshot(delete(&snapshot.snapshot_id))
        .await
        .expect("again: OK");
    assert_eq!(
        count(controller.list_snapshots(list("", "")).await.expect("all")),
        0
    );
}

#[tokio::test]
async fn listings_paginate_and_refuse_foreign_tokens() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mut controller = plugin.controller();
    let mut created = Vec::new();
    for i in 0..5 {
        let volume = controller
            .create_volume(create_request(
                &format!("v{i}"),
                Mode::SingleNodeWriter,
                MIB,
            ))
            .await
            .expect("create")
            .into_inner()
            .volume
            .expect("volume");
        created.push(volume.volume_id);
    }

    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = controller
            .list_volumes(ListVolumesRequest {
                max_entries: 2,
                starting_token: token.clone(),
            })
            .await
            .expect("page")
            .into_inner();
        assert!(page.entries.len() <= 2);
        seen.extend(
            page.entries
                .into_iter()
                .filter_map(|e| e.volume.map(|v| v.volume_id)),
        );
        pages += 1;
        if page.next_token.is_empty() {
            break;
        }
        token = page.next_token;
    }
    assert_eq!(pages, 3);
    seen.sort();
    created.sort();
    assert_eq!(seen, created);

    let bad = ListVolumesRequest {
        max_entries: 2,
        starting_token: "not-a-token".into(),
    };
    assert_eq!(code_of(controller.list_volumes(bad).await), Code::Aborted);
    let negative = ListVolumesRequest {
        max_entries: -1,
        starting_token: String::new(),
    };
    assert_eq!(
        code_of(controller.list_volumes(negative).await),
        Code::InvalidArgument
    );
    let bad_snapshots = ListSnapshotsRequest {
        starting_token: "not-a-token".into(),
        ..Default::default()
    };
    assert_eq!(
        code_of(controller.list_snapshots(bad_snapshots).await),
        Code::Aborted
    );
}

#[tokio::test]
async fn expansion_and_modification() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mut controller = plugin.controller();
    let id = controller
        .create_volume(create_request("grow", Mode::SingleNodeWriter, GIB))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id;
    let expand = |id: &str, bytes: i64| ControllerExpandVolumeRequest {
        volume_id: id.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        ..Default::default()
    };
    let grown = controller
        .controller_expand_volume(expand(&id, 3 * GIB))
        .await
        .expect("grow");
    let grown = grown.into_inner();
    assert_eq!(grown.capacity_bytes, 3 * GIB);
    assert!(!grown.node_expansion_required, "not mounted anywhere");
    let smaller = controller
        .controller_expand_volume(expand(&id, GIB))
        .await
        .expect("no shrink");
    assert_eq!(smaller.into_inner().capacity_bytes, 3 * GIB);
    let unknown = controller
        .controller_expand_volume(expand("nope", GIB))
        .await;
    assert_eq!(code_of(unknown), Code::NotFound);
    let no_range = ControllerExpandVolumeRequest {
        volume_id: id.clone(),
        ..Default::default()
    };
    assert_eq!(
        code_of(controller.controller_expand_volume(no_range).await),
        Code::InvalidArgument
    );
    let available = controller
        .get_capacity(GetCapacityRequest::default())
        .await
        .expect("capacity")
        .into_inner()
        .available_capacity;
    assert_eq!(available, 97 * GIB);

    let modify = |id: &str, key: &str, value: &str| ControllerModifyVolumeRequest {
        volume_id: id.into(),
        mutable_parameters: [(key.to_string(), value.to_string())].into(),
        ..Default::default()
    };
    controller
        .controller_modify_volume(modify(&id, "tier", "fast"))
        .await
        .expect("modify");
    controller
        .controller_modify_volume(modify(&id, "tier", "fast"))
        .await
        .expect("idempotent");
    let unknown_key = controller
        .controller_modify_volume(modify(&id, "colour", "blue"))
        .await;
    assert_eq!(code_of(unknown_key), Code::InvalidArgument);
    let unknown_volume = controller
        .controller_modify_volume(modify("nope", "tier", "fast"))
        .await;
    assert_eq!(code_of(unknown_volume), Code::NotFound);
    let empty = ControllerModifyVolumeRequest {
        volume_id: id.clone(),
        ..Default::default()
    };
    assert_eq!(
        code_of(controller.controller_modify_volume(empty).await),
        Code::InvalidArgument
    );
}

#[tokio::test]
async fn state_survives_a_restart() {
    let mounting = can_mount();
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let mode = Mode::SingleNodeWriter;
    let id = controller
        .create_volume(create_request("durable", mode, 0))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id;
    controller
        .controller_publish_volume(controller_publish(&id, mode, false))
        .await
        .expect("controller publish");
    let (staging, target) = (scratch.co_path("staging"), scratch.co_path("target"));
    if mounting {
        node.node_stage_volume(stage_request(&id, &staging, mode))
            .await
            .expect("stage");
        node.node_publish_volume(publish_request(&id, &staging, &target, mode, false))
            .await
            .expect("publish");
    }

    let socket = plugin.socket().to_path_buf();
    let status = plugin.stop().await;
    assert!(
        status.success(),
        "SIGTERM should stop the plugin cleanly: {status}"
    );
    assert!(
        !socket.exists(),
        "the plugin removes its socket when it stops"
    );

    let plugin = Plugin::start(&scratch, &[]).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let listed = controller
        .list_volumes(ListVolumesRequest::default())
        .await
        .expect("list")
        .into_inner()
        .entries;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].volume.as_ref().map(|v| v.volume_id.as_str()),
        Some(id.as_str())
    );
    assert_eq!(
        listed[0]
            .status
            .as_ref()
            .map(|s| s.published_node_ids.clone()),
        Some(vec![NODE_ID.to_string()])
    );
    controller
        .controller_publish_volume(controller_publish(&id, mode, false))
        .await
        .expect("the publication is remembered: a retry is OK");
    let incompatible = controller
        .controller_publish_volume(controller_publish(&id, mode, true))
        .await;
    assert_eq!(code_of(incompatible), Code::AlreadyExists);
    if mounting {
        node.node_publish_volume(publish_request(&id, &staging, &target, mode, false))
            .await
            .expect("the node publication is remembered: a retry is OK");
        node.node_unpublish_volume(NodeUnpublishVolumeRequest {
            volume_id: id.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .expect("unpublish after restart");
        node.node_unstage_volume(NodeUnstageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
        })
        .await
        .expect("unstage after restart");
        assert!(mounts_under(scratch.path()).is_empty());
    }
    let delete = DeleteVolumeRequest {
        volume_id: id.clone(),
        ..Default::default()
    };
    assert_eq!(
        code_of(controller.delete_volume(delete).await),
        Code::FailedPrecondition
    );
}

#[tokio::test]
async fn stops_soon_after_sigterm_even_with_a_silent_client() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    // A client that connects and never speaks keeps graceful shutdown waiting; the plugin
    // gives up after its grace period (3 s), well before Nomad's SIGKILL (5 s by default).
    let _silent = std::os::unix::net::UnixStream::connect(scratch.socket()).expect("connect");
    let started = Instant::now();
    assert!(plugin.stop().await.success());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(!scratch.socket().exists());
}

#[tokio::test]
async fn faults_break_their_rules() {
    let scratch = Scratch::new();
    let faults = [
        "empty-plugin-name",
        "probe-not-ready",
        "empty-node-id",
        "delete-unknown-not-found",
        "list-bad-token-ok",
        "error-details",
        "create-not-idempotent",
        "forget-state",
    ];
    let args: Vec<String> = faults.iter().map(|f| format!("--fault={f}")).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plugin = Plugin::start(&scratch, &args).await;
    let (mut identity, mut controller, mut node) =
        (plugin.identity(), plugin.controller(), plugin.node());

    let info = identity
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .expect("info");
    assert_eq!(info.into_inner().name, "");
    let probe = identity
        .probe(ProbeRequest {})
        .await
        .expect("probe")
        .into_inner();
    assert_eq!(probe.ready, Some(false));
    let node_info = node
        .node_get_info(NodeGetInfoRequest {})
        .await
        .expect("node info");
    assert_eq!(node_info.into_inner().node_id, "");

    let delete = DeleteVolumeRequest {
        volume_id: "nope".into(),
        ..Default::default()
    };
    let err = controller
        .delete_volume(delete)
        .await
        .expect_err("NOT_FOUND under the fault");
    assert_eq!(err.code(), Code::NotFound);
    assert!(
        !err.details().is_empty(),
        "error-details puts details on every error"
    );

    let bad = ListVolumesRequest {
        max_entries: 0,
        starting_token: "not-a-token".into(),
    };
    controller
        .list_volumes(bad)
        .await
        .expect("the bad token is accepted under the fault");

    let create = || create_request("twice", Mode::SingleNodeWriter, 0);
    let first = controller
        .create_volume(create())
        .await
        .expect("first")
        .into_inner();
    let second = controller
        .create_volume(create())
        .await
        .expect("second")
        .into_inner();
    assert_ne!(
        first.volume.map(|v| v.volume_id),
        second.volume.map(|v| v.volume_id),
        "create-not-idempotent makes a new volume for the same name"
    );

    // forget-state: nothing survives a restart.
    assert!(plugin.stop().await.success());
    assert!(!scratch.state_dir().join("state.json").exists());
    let plugin = Plugin::start(&scratch, &args).await;
    let listed = plugin
        .controller()
        .list_volumes(ListVolumesRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert!(listed.entries.is_empty());

    // A second plugin: probe-error and snapshot faults.
    let other_scratch = Scratch::new();
    let other = Plugin::start(
        &other_scratch,
        &[
            "--fault",
            "probe-error",
            "--fault",
            "snapshot-delete-unknown-not-found",
        ],
    )
    .await;
    assert_eq!(
        code_of(other.identity().probe(ProbeRequest {}).await),
        Code::FailedPrecondition
    );
    let delete = DeleteSnapshotRequest {
        snapshot_id: "nope".into(),
        ..Default::default()
    };
    assert_eq!(
        code_of(other.controller().delete_snapshot(delete).await),
        Code::NotFound
    );
    let err = other
        .controller()
        .delete_volume(DeleteVolumeRequest::default())
        .await;
    let err = err.expect_err("volume_id is required");
    assert!(
        err.details().is_empty(),
        "without error-details, details stay empty"
    );
}

#[tokio::test]
async fn node_faults_change_what_is_mounted() {
    if !can_mount() {
        return;
    }
    let scratch = Scratch::new();
    let faults = [
        "--fault=node-publish-ignores-readonly",
        "--fault=node-unpublish-keeps-mount",
    ];
    let plugin = Plugin::start(&scratch, &faults).await;
    let (mut controller, mut node) = (plugin.controller(), plugin.node());
    let mode = Mode::SingleNodeWriter;
    let id = controller
        .create_volume(create_request("faulty", mode, 0))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id;
    let (staging, target) = (scratch.co_path("staging"), scratch.co_path("target"));
    node.node_stage_volume(stage_request(&id, &staging, mode))
        .await
        .expect("stage");
    node.node_publish_volume(publish_request(&id, &staging, &target, mode, true))
        .await
        .expect("publish readonly");
    fs::write(target.join("oops.txt"), "writable").expect("the fault leaves the target writable");

    node.node_unpublish_volume(NodeUnpublishVolumeRequest {
        volume_id: id.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .expect("unpublish says OK");
    assert!(
        is_mount_point(&target),
        "the fault leaves the bind mount behind"
    );
    // Scratch's drop unmounts what the fault left.
}

#[test]
fn bad_command_lines_exit_2_with_one_line() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_csi-hostpath"))
            .args(args)
            .env_remove("CSI_ENDPOINT")
            .output()
            .expect("run csi-hostpath");
        (
            out.status.code(),
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

    let (code, stderr) = run(&[&base[..], &["--fault", "no-such-fault"]].concat());
    assert_eq!(code, Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("unknown fault 'no-such-fault'") && stderr.contains("probe-error"));

    let (code, stderr) = run(&["--node-id", "n"]);
    assert_eq!(code, Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--endpoint") && stderr.contains("--state-dir"),
        "{stderr}"
    );

    let (code, stderr) = run(&[
        "--endpoint",
        "tcp://127.0.0.1:1",
        "--node-id",
        "n",
        "--state-dir",
        "/tmp/x",
    ]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("unix://"), "{stderr}");

    let long = format!("unix:///tmp/{}", "s".repeat(120));
    let (code, _) = run(&[
        "--endpoint",
        &long,
        "--node-id",
        "n",
        "--state-dir",
        "/tmp/x",
    ]);
    assert_eq!(code, Some(2));

    let (code, stdout_or_err) = run(&["--help"]);
    assert_eq!(code, Some(0), "{stdout_or_err}");
}

#[test]
fn refuses_to_replace_a_file_that_is_not_a_socket() {
    let scratch = Scratch::new();
    fs::write(scratch.socket(), "not a socket").expect("file");
    let out = Command::new(env!("CARGO_BIN_EXE_csi-hostpath"))
        .arg(format!("--endpoint=unix://{}", scratch.socket().display()))
        .args(["--node-id", "n"])
        .arg(format!("--state-dir={}", scratch.state_dir().display()))
        .env_remove("CSI_ENDPOINT")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a socket"));
    assert_eq!(
        fs::read_to_string(scratch.socket()).expect("still there"),
        "not a socket"
    );
}

/// Creates a volume (named `name`, 1 MiB) holding `data.txt` with `contents`; its id.
async fn volume_with_data(
    controller: &mut ControllerClient<Channel>,
    scratch: &Scratch,
    name: &str,
    contents: &str,
) -> String {
    let id = controller
        .create_volume(create_request(name, Mode::SingleNodeWriter, MIB))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id;
    fs::write(scratch.volume_dir(&id).join("data.txt"), contents).expect("seed");
    id
}

fn create_group(name: &str, sources: &[&str]) -> CreateVolumeGroupSnapshotRequest {
    CreateVolumeGroupSnapshotRequest {
        name: name.into(),
        source_volume_ids: sources.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn get_group(id: &str, snapshot_ids: &[String]) -> GetVolumeGroupSnapshotRequest {
    GetVolumeGroupSnapshotRequest {
        group_snapshot_id: id.into(),
        snapshot_ids: snapshot_ids.to_vec(),
        ..Default::default()
    }
}

fn delete_group(id: &str, snapshot_ids: &[String]) -> DeleteVolumeGroupSnapshotRequest {
    DeleteVolumeGroupSnapshotRequest {
        group_snapshot_id: id.into(),
        snapshot_ids: snapshot_ids.to_vec(),
        ..Default::default()
    }
}

fn get_snapshot(id: &str) -> GetSnapshotRequest {
    GetSnapshotRequest {
        snapshot_id: id.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn get_snapshot_answers_the_snapshot_asked_for() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mut controller = plugin.controller();
    let volume = volume_with_data(&mut controller, &scratch, "source", "v1").await;
    let mut cut = Vec::new();
    for name in ["first", "second", "third"] {
        let snapshot = controller
            .create_snapshot(CreateSnapshotRequest {
                name: name.into(),
                source_volume_id: volume.clone(),
                ..Default::default()
            })
            .await
            .expect("snapshot")
            .into_inner()
            .snapshot
            .expect("snapshot");
        cut.push(snapshot);
    }
    for snapshot in &cut {
        let got = controller
            .get_snapshot(get_snapshot(&snapshot.snapshot_id))
            .await
            .expect("get snapshot")
            .into_inner()
            .snapshot
            .expect("snapshot");
        assert_eq!(&got, snapshot, "same answer as CreateSnapshot's");
        assert!(got.ready_to_use && got.creation_time.is_some() && got.size_bytes == MIB);
        assert!(got.group_snapshot_id.is_empty());
    }
    assert_eq!(
        code_of(controller.get_snapshot(get_snapshot("")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code_of(controller.get_snapshot(get_snapshot("nope")).await),
        Code::NotFound
    );
    controller
        .delete_snapshot(DeleteSnapshotRequest {
            snapshot_id: cut[1].snapshot_id.clone(),
            ..Default::default()
        })
        .await
        .expect("delete");
    assert_eq!(
        code_of(
            controller
                .get_snapshot(get_snapshot(&cut[1].snapshot_id))
                .await
        ),
        Code::NotFound
    );
}

#[tokio::test]
async fn group_snapshots_are_cut_got_and_deleted_together() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let (mut controller, mut groups) = (plugin.controller(), plugin.group_controller());
    let a = volume_with_data(&mut controller, &scratch, "a", "alpha").await;
    let b = volume_with_data(&mut controller, &scratch, "b", "beta").await;

    // Required fields, and sources that must exist.
    for bad in [
        create_group("", &[&a]),
        create_group("g", &[]),
        create_group("g", &[&a, ""]),
        create_group("g", &[&a, &a]),
    ] {
        assert_eq!(
            code_of(groups.create_volume_group_snapshot(bad.clone()).await),
            Code::InvalidArgument,
            "{bad:?}"
        );
    }
    assert_eq!(
        code_of(
            groups
                .create_volume_group_snapshot(create_group("g", &[&a, "nope"]))
                .await
        ),
        Code::NotFound
    );

    // One snapshot per source, in the order asked, each naming the group.
    let group = groups
        .create_volume_group_snapshot(create_group("g", &[&b, &a]))
        .await
        .expect("create group")
        .into_inner()
        .group_snapshot
        .expect("group");
    assert!(!group.group_snapshot_id.is_empty());
    assert!(group.ready_to_use && group.creation_time.is_some());
    let sources: Vec<&str> = group
        .snapshots
        .iter()
        .map(|s| s.source_volume_id.as_str())
        .collect();
    assert_eq!(sources, [b.as_str(), a.as_str()]);
    for snapshot in &group.snapshots {
        assert_eq!(snapshot.group_snapshot_id, group.group_snapshot_id);
        assert!(snapshot.ready_to_use && snapshot.creation_time.is_some());
        assert_eq!(snapshot.size_bytes, MIB);
    }
    let member_ids: Vec<String> = group
        .snapshots
        .iter()
        .map(|s| s.snapshot_id.clone())
        .collect();
    assert_eq!(
        fs::read_to_string(scratch.snapshot_dir(&member_ids[0]).join("data.txt")).expect("copy"),
        "beta"
    );
    assert_eq!(
        fs::read_to_string(scratch.snapshot_dir(&member_ids[1]).join("data.txt")).expect("copy"),
        "alpha"
    );

    // Idempotent by name and set of sources; other sources or parameters conflict.
    let again = groups
        .create_volume_group_snapshot(create_group("g", &[&a, &b]))
        .await
        .expect("create again")
        .into_inner()
        .group_snapshot
        .expect("group");
    assert_eq!(again, group);
    assert_eq!(
        code_of(
            groups
                .create_volume_group_snapshot(create_group("g", &[&a]))
                .await
        ),
        Code::AlreadyExists
    );
    let mut other_parameters = create_group("g", &[&a, &b]);
    other_parameters
        .parameters
        .insert("colour".into(), "blue".into());
    assert_eq!(
        code_of(groups.create_volume_group_snapshot(other_parameters).await),
        Code::AlreadyExists
    );
    // A volume may be in several groups.
    let second = groups
        .create_volume_group_snapshot(create_group("g2", &[&a]))
        .await
        .expect("another group")
        .into_inner()
        .group_snapshot
        .expect("group");
    assert_ne!(second.group_snapshot_id, group.group_snapshot_id);

    // Members are snapshots like any other, except that they go with their group.
    let member = controller
        .get_snapshot(get_snapshot(&member_ids[1]))
        .await
        .expect("get member")
        .into_inner()
        .snapshot
        .expect("snapshot");
    assert_eq!(member, group.snapshots[1]);
    let listed = controller
        .list_snapshots(ListSnapshotsRequest::default())
        .await
        .expect("list")
        .into_inner()
        .entries;
    assert_eq!(listed.len(), 3);
    let delete_member = controller
        .delete_snapshot(DeleteSnapshotRequest {
            snapshot_id: member_ids[0].clone(),
            ..Default::default()
        })
        .await
        .expect_err("a member cannot be deleted alone");
    assert_eq!(delete_member.code(), Code::InvalidArgument);
    assert!(
        delete_member.message().contains("part of group snapshot"),
        "{}",
        delete_member.message()
    );
    let mut restore = create_request("restored", Mode::SingleNodeWriter, 0);
    restore.volume_content_source = Some(VolumeContentSource {
        r#type: Some(Type::Snapshot(SnapshotSource {
            snapshot_id: member_ids[0].clone(),
        })),
    });
    let restored = controller
        .create_volume(restore)
        .await
        .expect("restore from a member")
        .into_inner()
        .volume
        .expect("volume");
    assert_eq!(
        fs::read_to_string(scratch.volume_dir(&restored.volume_id).join("data.txt"))
            .expect("restored"),
        "beta"
    );

    // Groups are remembered across a restart.
    assert!(plugin.stop().await.success());
    let groups_saved = scratch.saved_state()["group_snapshots"]
        .as_object()
        .map(|m| m.len());
    assert_eq!(groups_saved, Some(2));
    let plugin = Plugin::start(&scratch, &[]).await;
    let (mut controller, mut groups) = (plugin.controller(), plugin.group_controller());

    // GetVolumeGroupSnapshot: by id, with or without the right list of snapshots.
    let id = group.group_snapshot_id.clone();
    let got = groups
        .get_volume_group_snapshot(get_group(&id, &[]))
        .await
        .expect("get group")
        .into_inner()
        .group_snapshot
        .expect("group");
    assert_eq!(got, group);
    let reversed: Vec<String> = member_ids.iter().rev().cloned().collect();
    groups
        .get_volume_group_snapshot(get_group(&id, &reversed))
        .await
        .expect("the list may come in any order");
    for wrong in [
        vec![member_ids[0].clone()],
        vec![member_ids[0].clone(), "nope".into()],
        [member_ids.clone(), second_members(&second)].concat(),
    ] {
        assert_eq!(
            code_of(
                groups
                    .get_volume_group_snapshot(get_group(&id, &wrong))
                    .await
            ),
            Code::InvalidArgument,
            "{wrong:?}"
        );
        assert_eq!(
            code_of(
                groups
                    .delete_volume_group_snapshot(delete_group(&id, &wrong))
                    .await
            ),
            Code::InvalidArgument,
            "{wrong:?}"
        );
    }
    assert_eq!(
        code_of(groups.get_volume_group_snapshot(get_group("", &[])).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code_of(
            groups
                .get_volume_group_snapshot(get_group("nope", &[]))
                .await
        ),
        Code::NotFound
    );

    // DeleteVolumeGroupSnapshot takes the members with it; again, or unknown, is OK.
    groups
        .delete_volume_group_snapshot(delete_group(&id, &member_ids))
        .await
        .expect("delete group");
    for member in &member_ids {
        assert!(!scratch.snapshot_dir(member).exists());
        assert_eq!(
            code_of(controller.get_snapshot(get_snapshot(member)).await),
            Code::NotFound
        );
    }
    assert_eq!(
        code_of(groups.get_volume_group_snapshot(get_group(&id, &[])).await),
        Code::NotFound
    );
    groups
        .delete_volume_group_snapshot(delete_group(&id, &member_ids))
        .await
        .expect("delete again");
    groups
        .delete_volume_group_snapshot(delete_group("nope", &[]))
        .await
        .expect("delete unknown");
    assert_eq!(
        code_of(
            groups
                .delete_volume_group_snapshot(delete_group("", &[]))
                .await
        ),
        Code::InvalidArgument
    );
    let listed = controller
        .list_snapshots(ListSnapshotsRequest::default())
        .await
        .expect("list")
        .into_inner()
        .entries;
    assert_eq!(listed.len(), 1, "only the other group's snapshot is left");
    // With the group gone, its name can be used for other sources.
    groups
        .create_volume_group_snapshot(create_group("g", &[&a]))
        .await
        .expect("the name is free again");
}

fn second_members(group: &VolumeGroupSnapshot) -> Vec<String> {
    group
        .snapshots
        .iter()
        .map(|s| s.snapshot_id.clone())
        .collect()
}

#[tokio::test]
async fn create_volume_takes_supported_mutable_parameters() {
    let scratch = Scratch::new();
    let plugin = Plugin::start(&scratch, &[]).await;
    let mut controller = plugin.controller();
    let with_tier = |name: &str, key: &str, value: &str| {
        let mut request = create_request(name, Mode::SingleNodeWriter, 0);
        request.mutable_parameters = [(key.to_string(), value.to_string())].into();
        request
    };
    let volume = controller
        .create_volume(with_tier("tiered", "tier", "fast"))
        .await
        .expect("create with tier=fast")
        .into_inner()
        .volume
        .expect("volume");
    let saved = scratch.saved_state();
    assert_eq!(
        saved["volumes"][&volume.volume_id]["mutable_parameters"]["tier"], "fast",
        "the volume's first mutable parameters"
    );
    // Mutable parameters are not part of the idempotency key.
    for retry in [
        with_tier("tiered", "tier", "fast"),
        with_tier("tiered", "tier", "standard"),
        create_request("tiered", Mode::SingleNodeWriter, 0),
    ] {
        let again = controller
            .create_volume(retry)
            .await
            .expect("retry")
            .into_inner()
            .volume
            .expect("volume");
        assert_eq!(again, volume);
    }
    controller
        .controller_modify_volume(ControllerModifyVolumeRequest {
            volume_id: volume.volume_id.clone(),
            mutable_parameters: [("tier".to_string(), "standard".to_string())].into(),
            ..Default::default()
        })
        .await
        .expect("modify");

    for (key, value) in [("XXX_FakeKey", "XXX_FakeValue"), ("tier", "gold")] {
        assert_eq!(
            code_of(
                controller
                    .create_volume(with_tier("refused", key, value))
                    .await
            ),
            Code::InvalidArgument,
            "{key}={value}"
        );
    }
    let listed = controller
        .list_volumes(ListVolumesRequest::default())
        .await
        .expect("list")
        .into_inner()
        .entries;
    assert_eq!(listed.len(), 1, "refused creates make nothing");
}

#[tokio::test]
async fn stats_need_a_path_where_the_volume_is() {
    let scratch = Scratch::new();
    let faults = ["--fault=stats-unknown-ok"];
    let plugin = Plugin::start(&scratch, &faults).await;
    let mut controller = plugin.controller();
    let id = controller
        .create_volume(create_request("unmounted", Mode::SingleNodeWriter, 0))
        .await
        .expect("create")
        .into_inner()
        .volume
        .expect("volume")
        .volume_id;
    let elsewhere = scratch.co_path("elsewhere");
    fs::create_dir(&elsewhere).expect("an existing dir that is not the volume's");
    let stats = |volume_id: &str| NodeGetVolumeStatsRequest {
        volume_id: volume_id.into(),
        volume_path: elsewhere.display().to_string(),
        ..Default::default()
    };
    // stats-unknown-ok covers unknown volumes only: a wrong path is still NOT_FOUND.
    let zeros = plugin
        .node()
        .node_get_volume_stats(stats("nope"))
        .await
        .expect("stats-unknown-ok answers an unknown volume")
        .into_inner();
    assert!(zeros.usage.iter().all(|u| u.total == 0));
    assert_eq!(
        code_of(plugin.node().node_get_volume_stats(stats(&id)).await),
        Code::NotFound
    );
    drop(plugin);

    let faulty = Plugin::start(&scratch, &["--fault=stats-ignores-path"]).await;
    let mut node = faulty.node();
    let usage = node
        .node_get_volume_stats(stats(&id))
        .await
        .expect("stats-ignores-path answers a wrong path")
        .into_inner()
        .usage;
    assert!(
        !usage.is_empty() && usage.iter().all(|u| u.total > 0),
        "{usage:?}"
    );
    assert_eq!(
        code_of(node.node_get_volume_stats(stats("nope")).await),
        Code::NotFound,
        "an unknown volume is still NOT_FOUND"
    );
}

#[tokio::test]
async fn snapshot_group_and_mutable_faults_break_their_rules() {
    let scratch = Scratch::new();
    let faults = [
        "get-snapshot-unknown-ok",
        "get-snapshot-wrong",
        "group-capabilities-error",
        "group-snapshot-not-idempotent",
        "group-delete-unknown-not-found",
        "group-get-unknown-ok",
        "create-rejects-mutable",
    ];
    let args: Vec<String> = faults.iter().map(|f| format!("--fault={f}")).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plugin = Plugin::start(&scratch, &args).await;
    let (mut controller, mut groups) = (plugin.controller(), plugin.group_controller());

    let unknown = controller
        .get_snapshot(get_snapshot("nope"))
        .await
        .expect("get-snapshot-unknown-ok")
        .into_inner()
        .snapshot
        .expect("snapshot");
    assert_eq!(unknown.snapshot_id, "nope");
    assert!(unknown.source_volume_id.is_empty() && unknown.creation_time.is_none());

    let volume = volume_with_data(&mut controller, &scratch, "v", "data").await;
    let mut snapshot_ids = Vec::new();
    for name in ["s1", "s2"] {
        let id = controller
            .create_snapshot(CreateSnapshotRequest {
                name: name.into(),
                source_volume_id: volume.clone(),
                ..Default::default()
            })
            .await
            .expect("snapshot")
            .into_inner()
            .snapshot
            .expect("snapshot")
            .snapshot_id;
        snapshot_ids.push(id);
    }
    for asked in &snapshot_ids {
        let answered = controller
            .get_snapshot(get_snapshot(asked))
            .await
            .expect("get")
            .into_inner()
            .snapshot
            .expect("snapshot")
            .snapshot_id;
        assert_ne!(&answered, asked, "get-snapshot-wrong answers another one");
    }

    assert_eq!(
        code_of(
            groups
                .group_controller_get_capabilities(GroupControllerGetCapabilitiesRequest {})
                .await
        ),
        Code::Internal
    );
    let first = groups
        .create_volume_group_snapshot(create_group("g", &[&volume]))
        .await
        .expect("group")
        .into_inner()
        .group_snapshot
        .expect("group");
    let second = groups
        .create_volume_group_snapshot(create_group("g", &[&volume]))
        .await
        .expect("group again")
        .into_inner()
        .group_snapshot
        .expect("group");
    assert_ne!(
        first.group_snapshot_id, second.group_snapshot_id,
        "group-snapshot-not-idempotent cuts a new group"
    );
    assert_eq!(
        code_of(
            groups
                .delete_volume_group_snapshot(delete_group("nope", &[]))
                .await
        ),
        Code::NotFound
    );
    let ghost = groups
        .get_volume_group_snapshot(get_group("nope", &[]))
        .await
        .expect("group-get-unknown-ok")
        .into_inner()
        .group_snapshot
        .expect("group");
    assert_eq!(ghost.group_snapshot_id, "nope");
    assert!(ghost.snapshots.is_empty());

    let mut tiered = create_request("tiered", Mode::SingleNodeWriter, 0);
    tiered.mutable_parameters = [("tier".to_string(), "fast".to_string())].into();
    assert_eq!(
        code_of(controller.create_volume(tiered).await),
        Code::InvalidArgument
    );
    drop(plugin);

    let other_scratch = Scratch::new();
    let other = Plugin::start(
        &other_scratch,
        &[
            "--fault=create-accepts-unknown-mutable",
            "--fault=group-snapshot-accepts-missing-name",
        ],
    )
    .await;
    let mut controller = other.controller();
    let mut unknown_key = create_request("odd", Mode::SingleNodeWriter, 0);
    unknown_key.mutable_parameters = [("XXX_FakeKey".to_string(), "x".to_string())].into();
    controller
        .create_volume(unknown_key)
        .await
        .expect("create-accepts-unknown-mutable");
    let volume = volume_with_data(&mut controller, &other_scratch, "v", "data").await;
    other
        .group_controller()
        .create_volume_group_snapshot(create_group("", &[&volume]))
        .await
        .expect("group-snapshot-accepts-missing-name");
}
