//! Requests as Nomad builds them, and the "without X" variants the validation clauses send.

use super::{CsiWorld, Vol};
use crate::plugins::csi::pb;
use pb::volume_capability::access_mode::Mode as PbMode;

/// How the suite's volumes are attached and accessed: Nomad's `attachment_mode` and
/// `access_mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    SingleNodeWriter,
    MultiNodeMultiWriter,
    /// One writer and any number of readers: what a read claim beside a write claim needs.
    MultiNodeSingleWriter,
    /// `attachment_mode = "block-device"`, single-node-writer.
    BlockSingleNodeWriter,
}

impl Mode {
    fn pb(self) -> PbMode {
        match self {
            Mode::SingleNodeWriter | Mode::BlockSingleNodeWriter => PbMode::SingleNodeWriter,
            Mode::MultiNodeMultiWriter => PbMode::MultiNodeMultiWriter,
            Mode::MultiNodeSingleWriter => PbMode::MultiNodeSingleWriter,
        }
    }

    pub fn is_block(self) -> bool {
        self == Mode::BlockSingleNodeWriter
    }

    /// What a plugin that refuses this mode does not support, for skip reasons.
    pub fn describe(self) -> String {
        if self.is_block() {
            format!(
                "block volumes ({} with a block access type)",
                self.pb().as_str_name()
            )
        } else {
            format!("the {} access mode", self.pb().as_str_name())
        }
    }

    /// A few words for messages: `single-node-writer file-system`.
    pub fn describe_short(self) -> &'static str {
        match self {
            Mode::SingleNodeWriter => "single-node-writer file-system",
            Mode::MultiNodeMultiWriter => "multi-node-multi-writer file-system",
            Mode::MultiNodeSingleWriter => "multi-node-single-writer file-system",
            Mode::BlockSingleNodeWriter => "single-node-writer block",
        }
    }

    /// Nomad's `<usage>` path element: `rw-file-system-single-node-writer`.
    pub fn usage(self, readonly: bool) -> String {
        let (attachment, access) = match self {
            Mode::SingleNodeWriter => ("file-system", "single-node-writer"),
            Mode::MultiNodeMultiWriter => ("file-system", "multi-node-multi-writer"),
            Mode::MultiNodeSingleWriter => ("file-system", "multi-node-single-writer"),
            Mode::BlockSingleNodeWriter => ("block-device", "single-node-writer"),
        };
        format!(
            "{}-{attachment}-{access}",
            if readonly { "ro" } else { "rw" }
        )
    }

    /// The capability Nomad sends with no mount options: a mount with no fs_type and no flags
    /// for `attachment_mode = "file-system"`, an empty block for `"block-device"`.
    pub fn capability(self) -> pb::VolumeCapability {
        self.capability_with("", &[])
    }

    /// The capability Nomad sends (plugins/csi/plugin.go, VolumeCapabilityFromStructs): for
    /// a file-system volume a mount with the volume's mount_options (fs_type and
    /// mount_flags; volume_mount_group never), for a block volume an empty block.
    pub fn capability_with(self, fs_type: &str, flags: &[String]) -> pb::VolumeCapability {
        let access_type = if self.is_block() {
            pb::volume_capability::AccessType::Block(pb::volume_capability::BlockVolume::default())
        } else {
            pb::volume_capability::AccessType::Mount(pb::volume_capability::MountVolume {
                fs_type: fs_type.to_string(),
                mount_flags: flags.to_vec(),
                volume_mount_group: String::new(),
            })
        };
        pb::VolumeCapability {
            access_type: Some(access_type),
            access_mode: Some(pb::volume_capability::AccessMode {
                mode: self.pb() as i32,
            }),
        }
    }
}

pub fn capacity(bytes: i64) -> Option<pb::CapacityRange> {
    Some(pb::CapacityRange {
        required_bytes: bytes,
        limit_bytes: 0,
    })
}

/// CreateVolume as Nomad sends it (client/structs/csi.go, ToCSIRequest): the capacity range
/// (none when the clause fell back to the plugin's own size), the capability with the mount
/// options, the parameters and secrets, and an accessibility_requirements that is always
/// present, empty unless the volume specification names topologies.
pub fn create_volume(w: &CsiWorld, name: &str, mode: Mode) -> pb::CreateVolumeRequest {
    pb::CreateVolumeRequest {
        name: name.to_string(),
        capacity_range: w.capacity_range(),
        volume_capabilities: vec![w.cap(mode)],
        parameters: w.config().volume_parameters.clone(),
        secrets: w.secrets(),
        accessibility_requirements: Some(pb::TopologyRequirement::default()),
        ..Default::default()
    }
}

/// GetCapacity for a single-node-writer volume with the run's volume parameters: the
/// capability and parameters the clause's CreateVolume calls send.
pub fn get_capacity(w: &CsiWorld) -> pb::GetCapacityRequest {
    pb::GetCapacityRequest {
        volume_capabilities: vec![w.cap(Mode::SingleNodeWriter)],
        parameters: w.config().volume_parameters.clone(),
        ..Default::default()
    }
}

/// ControllerPublishVolume of `vol` to the node, as Nomad sends it (never with an empty node
/// ID: see [`CsiWorld::publish_node_id`]).
pub fn controller_publish(
    w: &CsiWorld,
    vol: &Vol,
    readonly: bool,
) -> Result<pb::ControllerPublishVolumeRequest, String> {
    Ok(pb::ControllerPublishVolumeRequest {
        volume_id: vol.id.clone(),
        node_id: w.publish_node_id()?,
        volume_capability: Some(w.cap(vol.mode)),
        readonly,
        secrets: w.secrets(),
        volume_context: volume_context(vol),
    })
}

/// ControllerUnpublishVolume as Nomad sends it: the volume and the node, and no secrets (the
/// server puts the volume's secrets into its request to the client, whose ToCSIRequest in
/// client/structs/csi.go copies only the two IDs).
pub fn controller_unpublish(
    w: &CsiWorld,
    volume_id: &str,
) -> Result<pb::ControllerUnpublishVolumeRequest, String> {
    Ok(pb::ControllerUnpublishVolumeRequest {
        volume_id: volume_id.to_string(),
        node_id: w.publish_node_id()?,
        secrets: Default::default(),
    })
}

pub fn volume_context(vol: &Vol) -> std::collections::HashMap<String, String> {
    vol.volume
        .as_ref()
        .and_then(|v| v.get("volume_context"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default()
}

pub fn node_stage(
    w: &CsiWorld,
    vol: &Vol,
    staging: &str,
    publish_context: std::collections::HashMap<String, String>,
) -> pb::NodeStageVolumeRequest {
    pb::NodeStageVolumeRequest {
        volume_id: vol.id.clone(),
        publish_context,
        staging_target_path: staging.to_string(),
        volume_capability: Some(w.cap(vol.mode)),
        secrets: w.secrets(),
        volume_context: volume_context(vol),
    }
}

pub fn node_publish(
    w: &CsiWorld,
    vol: &Vol,
    staging: &str,
    target: &str,
    readonly: bool,
    publish_context: std::collections::HashMap<String, String>,
) -> pb::NodePublishVolumeRequest {
    pb::NodePublishVolumeRequest {
        volume_id: vol.id.clone(),
        publish_context,
        staging_target_path: staging.to_string(),
        target_path: target.to_string(),
        volume_capability: Some(w.cap(vol.mode)),
        readonly,
        secrets: w.secrets(),
        volume_context: volume_context(vol),
    }
}

/// NodeUnstageVolume of `volume_id` at `staging` (Nomad sends nothing else).
pub fn node_unstage(volume_id: &str, staging: &std::path::Path) -> pb::NodeUnstageVolumeRequest {
    pb::NodeUnstageVolumeRequest {
        volume_id: volume_id.to_string(),
        staging_target_path: staging.display().to_string(),
    }
}

/// NodeUnpublishVolume of `volume_id` at `target` (Nomad sends nothing else).
pub fn node_unpublish(volume_id: &str, target: &std::path::Path) -> pb::NodeUnpublishVolumeRequest {
    pb::NodeUnpublishVolumeRequest {
        volume_id: volume_id.to_string(),
        target_path: target.display().to_string(),
    }
}

/// NodeGetVolumeStats of `volume_id` published at `path`, with its staging path when the
/// plugin stages (empty otherwise).
pub fn volume_stats(
    volume_id: &str,
    path: &std::path::Path,
    staging: &str,
) -> pb::NodeGetVolumeStatsRequest {
    pb::NodeGetVolumeStatsRequest {
        volume_id: volume_id.to_string(),
        volume_path: path.display().to_string(),
        staging_target_path: staging.to_string(),
    }
}

/// The field a "without X" step leaves out, by method.
pub fn known_omission(method: &str, field: &str) -> bool {
    matches!(
        (method, field),
        ("CreateVolume", "name" | "volume capabilities")
            | ("DeleteVolume", "volume ID")
            | (
                "ValidateVolumeCapabilities",
                "volume ID" | "volume capabilities"
            )
            | (
                "ControllerPublishVolume",
                "volume ID" | "node ID" | "volume capability"
            )
            | ("ControllerUnpublishVolume", "volume ID")
            | (
                "NodeStageVolume",
                "volume ID" | "staging target path" | "volume capability"
            )
            | ("NodeUnstageVolume", "volume ID" | "staging target path")
            | (
                "NodePublishVolume",
                "volume ID" | "target path" | "volume capability"
            )
            | ("NodeUnpublishVolume", "volume ID" | "target path")
            | ("NodeGetVolumeStats", "volume ID" | "volume path")
            | ("CreateSnapshot", "name" | "source volume ID")
            | ("DeleteSnapshot", "snapshot ID")
            | ("ControllerExpandVolume", "volume ID" | "capacity range")
            | ("NodeExpandVolume", "volume ID" | "volume path")
            | ("ControllerModifyVolume", "volume ID")
            | ("GetSnapshot", "snapshot ID")
            | ("CreateVolumeGroupSnapshot", "name" | "source volume IDs")
            | (
                "GetVolumeGroupSnapshot" | "DeleteVolumeGroupSnapshot",
                "group snapshot ID"
            )
    )
}
