//! Fault switches: deliberate, named violations of exactly one CSI rule each.
//!
//! A conformance harness is only trustworthy if its checks can fail. Each `--fault NAME` makes
//! this otherwise correct plugin break one rule, so the harness's own tests can show that the
//! matching clause notices. The enum and its parsing live here; every fault is checked at the
//! one place in the plugin where the rule it breaks is implemented (search for its variant).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One deliberate rule violation. See [`Fault::rule`] for what each one breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    EmptyPluginName,
    SlowPluginInfo,
    PluginCapabilitiesError,
    EmptyNodeId,
    ProbeNotReady,
    ProbeError,
    SlowProbe,
    ControllerCapabilitiesError,
    NodeCapabilitiesError,
    SkipRequiredFieldChecks,
    CreateNotIdempotent,
    CreateIgnoresCapacityConflict,
    CreateAcceptsMissingName,
    CreateRaces,
    CreateEmptyId,
    CreateIgnoresCapacity,
    CreateIgnoresContentSource,
    CreateRejectsMutable,
    CreateAcceptsUnknownMutable,
    DeleteUnknownNotFound,
    DeleteInUseOk,
    DeleteKeepsVolume,
    PublishUnknownVolumeOk,
    PublishUnknownNodeOk,
    PublishIncompatibleOk,
    PublishLimitWrongCode,
    PublishLimitTooEarly,
    PublishContextChanges,
    ControllerUnpublishNotIdempotent,
    ValidateAcceptsMissingCapabilities,
    ValidateUnknownOk,
    ValidateConfirmsOther,
    ListIgnoresMaxEntries,
    ListBadTokenOk,
    GetCapacityNegative,
    StageNotIdempotent,
    StageMissingPathOk,
    UnstageNotIdempotent,
    NodePublishNotIdempotent,
    NodePublishWithoutStageOk,
    NodePublishIgnoresReadonly,
    NodePublishNoMount,
    NodeUnpublishNotIdempotent,
    NodeUnpublishKeepsMount,
    SnapshotNotIdempotent,
    SnapshotDeleteUnknownNotFound,
    SnapshotNoCreationTime,
    ListSnapshotsIgnoresFilter,
    ListSnapshotsEmpty,
    GetSnapshotUnknownOk,
    GetSnapshotWrong,
    GroupCapabilitiesError,
    GroupSnapshotAcceptsMissingName,
    GroupSnapshotNotIdempotent,
    GroupDeleteUnknownNotFound,
    GroupGetUnknownOk,
    GroupGetNoSnapshots,
    GroupDeleteKeeps,
    ExpandUnknownOk,
    ExpandShrinks,
    ExpandIgnoresSize,
    NodeExpandUnknownOk,
    ModifyUnknownOk,
    ModifyRejectsAll,
    ModifyAcceptsUnknown,
    StatsUnknownOk,
    StatsIgnoresPath,
    StatsNegative,
    BlockUnsupported,
    BlockPublishNotDevice,
    BlockStageWipes,
    BlockIgnoresReadonly,
    BlockKeepsDevice,
    ErrorDetails,
    ForgetState,
}

impl Fault {
    /// Every fault, in the order `--help` lists them.
    pub const ALL: &'static [Fault] = &[
        Fault::EmptyPluginName,
        Fault::SlowPluginInfo,
        Fault::PluginCapabilitiesError,
        Fault::EmptyNodeId,
        Fault::ProbeNotReady,
        Fault::ProbeError,
        Fault::SlowProbe,
        Fault::ControllerCapabilitiesError,
        Fault::NodeCapabilitiesError,
        Fault::SkipRequiredFieldChecks,
        Fault::CreateNotIdempotent,
        Fault::CreateIgnoresCapacityConflict,
        Fault::CreateAcceptsMissingName,
        Fault::CreateRaces,
        Fault::CreateEmptyId,
        Fault::CreateIgnoresCapacity,
        Fault::CreateIgnoresContentSource,
        Fault::CreateRejectsMutable,
        Fault::CreateAcceptsUnknownMutable,
        Fault::DeleteUnknownNotFound,
        Fault::DeleteInUseOk,
        Fault::DeleteKeepsVolume,
        Fault::PublishUnknownVolumeOk,
        Fault::PublishUnknownNodeOk,
        Fault::PublishIncompatibleOk,
        Fault::PublishLimitWrongCode,
        Fault::PublishLimitTooEarly,
        Fault::PublishContextChanges,
        Fault::ControllerUnpublishNotIdempotent,
        Fault::ValidateAcceptsMissingCapabilities,
        Fault::ValidateUnknownOk,
        Fault::ValidateConfirmsOther,
        Fault::ListIgnoresMaxEntries,
        Fault::ListBadTokenOk,
        Fault::GetCapacityNegative,
        Fault::StageNotIdempotent,
        Fault::StageMissingPathOk,
        Fault::UnstageNotIdempotent,
        Fault::NodePublishNotIdempotent,
        Fault::NodePublishWithoutStageOk,
        Fault::NodePublishIgnoresReadonly,
        Fault::NodePublishNoMount,
        Fault::NodeUnpublishNotIdempotent,
        Fault::NodeUnpublishKeepsMount,
        Fault::SnapshotNotIdempotent,
        Fault::SnapshotDeleteUnknownNotFound,
        Fault::SnapshotNoCreationTime,
        Fault::ListSnapshotsIgnoresFilter,
        Fault::ListSnapshotsEmpty,
        Fault::GetSnapshotUnknownOk,
        Fault::GetSnapshotWrong,
        Fault::GroupCapabilitiesError,
        Fault::GroupSnapshotAcceptsMissingName,
        Fault::GroupSnapshotNotIdempotent,
        Fault::GroupDeleteUnknownNotFound,
        Fault::GroupGetUnknownOk,
        Fault::GroupGetNoSnapshots,
        Fault::GroupDeleteKeeps,
        Fault::ExpandUnknownOk,
        Fault::ExpandShrinks,
        Fault::ExpandIgnoresSize,
        Fault::NodeExpandUnknownOk,
        Fault::ModifyUnknownOk,
        Fault::ModifyRejectsAll,
        Fault::ModifyAcceptsUnknown,
        Fault::StatsUnknownOk,
        Fault::StatsIgnoresPath,
        Fault::StatsNegative,
        Fault::BlockUnsupported,
        Fault::BlockPublishNotDevice,
        Fault::BlockStageWipes,
        Fault::BlockIgnoresReadonly,
        Fault::BlockKeepsDevice,
        Fault::ErrorDetails,
        Fault::ForgetState,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fault::EmptyPluginName => "empty-plugin-name",
            Fault::SlowPluginInfo => "slow-plugin-info",
            Fault::PluginCapabilitiesError => "plugin-capabilities-error",
            Fault::EmptyNodeId => "empty-node-id",
            Fault::ProbeNotReady => "probe-not-ready",
            Fault::ProbeError => "probe-error",
            Fault::SlowProbe => "slow-probe",
            Fault::ControllerCapabilitiesError => "controller-capabilities-error",
            Fault::NodeCapabilitiesError => "node-capabilities-error",
            Fault::SkipRequiredFieldChecks => "skip-required-field-checks",
            Fault::CreateNotIdempotent => "create-not-idempotent",
            Fault::CreateIgnoresCapacityConflict => "create-ignores-capacity-conflict",
            Fault::CreateAcceptsMissingName => "create-accepts-missing-name",
            Fault::CreateRaces => "create-races",
            Fault::CreateEmptyId => "create-empty-id",
            Fault::CreateIgnoresCapacity => "create-ignores-capacity",
            Fault::CreateIgnoresContentSource => "create-ignores-content-source",
            Fault::CreateRejectsMutable => "create-rejects-mutable",
            Fault::CreateAcceptsUnknownMutable => "create-accepts-unknown-mutable",
            Fault::DeleteUnknownNotFound => "delete-unknown-not-found",
            Fault::DeleteInUseOk => "delete-in-use-ok",
            Fault::DeleteKeepsVolume => "delete-keeps-volume",
            Fault::PublishUnknownVolumeOk => "publish-unknown-volume-ok",
            Fault::PublishUnknownNodeOk => "publish-unknown-node-ok",
            Fault::PublishIncompatibleOk => "publish-incompatible-ok",
            Fault::PublishLimitWrongCode => "publish-limit-wrong-code",
            Fault::PublishLimitTooEarly => "publish-limit-too-early",
            Fault::PublishContextChanges => "publish-context-changes",
            Fault::ControllerUnpublishNotIdempotent => "controller-unpublish-not-idempotent",
            Fault::ValidateAcceptsMissingCapabilities => "validate-accepts-missing-capabilities",
            Fault::ValidateUnknownOk => "validate-unknown-ok",
            Fault::ValidateConfirmsOther => "validate-confirms-other",
            Fault::ListIgnoresMaxEntries => "list-ignores-max-entries",
            Fault::ListBadTokenOk => "list-bad-token-ok",
            Fault::GetCapacityNegative => "get-capacity-negative",
            Fault::StageNotIdempotent => "stage-not-idempotent",
            Fault::StageMissingPathOk => "stage-missing-path-ok",
            Fault::UnstageNotIdempotent => "unstage-not-idempotent",
            Fault::NodePublishNotIdempotent => "node-publish-not-idempotent",
            Fault::NodePublishWithoutStageOk => "node-publish-without-stage-ok",
            Fault::NodePublishIgnoresReadonly => "node-publish-ignores-readonly",
            Fault::NodePublishNoMount => "node-publish-no-mount",
            Fault::NodeUnpublishNotIdempotent => "node-unpublish-not-idempotent",
            Fault::NodeUnpublishKeepsMount => "node-unpublish-keeps-mount",
            Fault::SnapshotNotIdempotent => "snapshot-not-idempotent",
            Fault::SnapshotDeleteUnknownNotFound => "snapshot-delete-unknown-not-found",
            Fault::SnapshotNoCreationTime => "snapshot-no-creation-time",
            Fault::ListSnapshotsIgnoresFilter => "list-snapshots-ignores-filter",
            Fault::ListSnapshotsEmpty => "list-snapshots-empty",
            Fault::GetSnapshotUnknownOk => "get-snapshot-unknown-ok",
            Fault::GetSnapshotWrong => "get-snapshot-wrong",
            Fault::GroupCapabilitiesError => "group-capabilities-error",
            Fault::GroupSnapshotAcceptsMissingName => "group-snapshot-accepts-missing-name",
            Fault::GroupSnapshotNotIdempotent => "group-snapshot-not-idempotent",
            Fault::GroupDeleteUnknownNotFound => "group-delete-unknown-not-found",
            Fault::GroupGetUnknownOk => "group-get-unknown-ok",
            Fault::GroupGetNoSnapshots => "group-get-no-snapshots",
            Fault::GroupDeleteKeeps => "group-delete-keeps",
            Fault::ExpandUnknownOk => "expand-unknown-ok",
            Fault::ExpandShrinks => "expand-shrinks",
            Fault::ExpandIgnoresSize => "expand-ignores-size",
            Fault::NodeExpandUnknownOk => "node-expand-unknown-ok",
            Fault::ModifyUnknownOk => "modify-unknown-ok",
            Fault::ModifyRejectsAll => "modify-rejects-all",
            Fault::ModifyAcceptsUnknown => "modify-accepts-unknown",
            Fault::StatsUnknownOk => "stats-unknown-ok",
            Fault::StatsIgnoresPath => "stats-ignores-path",
            Fault::StatsNegative => "stats-negative",
            Fault::BlockUnsupported => "block-unsupported",
            Fault::BlockPublishNotDevice => "block-publish-not-device",
            Fault::BlockStageWipes => "block-stage-wipes",
            Fault::BlockIgnoresReadonly => "block-ignores-readonly",
            Fault::BlockKeepsDevice => "block-keeps-device",
            Fault::ErrorDetails => "error-details",
            Fault::ForgetState => "forget-state",
        }
    }

    /// One line: what the plugin does wrong with this fault switched on.
    pub fn rule(self) -> &'static str {
        match self {
            Fault::EmptyPluginName => "GetPluginInfo returns an empty name",
            Fault::SlowPluginInfo => {
                "GetPluginInfo sleeps 1.5 s before answering (beyond Nomad's 1 s at registration)"
            }
            Fault::PluginCapabilitiesError => "GetPluginCapabilities fails with INTERNAL",
            Fault::EmptyNodeId => "NodeGetInfo returns an empty node_id",
            Fault::ProbeNotReady => "Probe answers ready=false, forever",
            Fault::ProbeError => "Probe fails with FAILED_PRECONDITION",
            Fault::SlowProbe => "Probe sleeps 6 s before answering (beyond Nomad's 5 s timeout)",
            Fault::ControllerCapabilitiesError => "ControllerGetCapabilities fails with INTERNAL",
            Fault::NodeCapabilitiesError => "NodeGetCapabilities fails with INTERNAL",
            Fault::SkipRequiredFieldChecks => {
                "no required field is checked: a call missing one goes on without it instead of \
                 failing with INVALID_ARGUMENT"
            }
            Fault::CreateNotIdempotent => {
                "CreateVolume with an existing name makes another volume with a new id"
            }
            Fault::CreateIgnoresCapacityConflict => {
                "CreateVolume with an existing name and an incompatible capacity returns OK \
                 instead of ALREADY_EXISTS"
            }
            Fault::CreateAcceptsMissingName => {
                "CreateVolume without a name succeeds instead of INVALID_ARGUMENT"
            }
            Fault::CreateRaces => {
                "CreateVolume takes no per-name lock and pauses, so concurrent calls with one \
                 name make several volumes"
            }
            Fault::CreateEmptyId => {
                "CreateVolume answers OK with an empty volume_id (and keeps no volume)"
            }
            Fault::CreateIgnoresCapacity => {
                "CreateVolume answers a capacity_bytes of half the required_bytes (the volume \
                 itself gets what was asked)"
            }
            Fault::CreateIgnoresContentSource => {
                "CreateVolume ignores volume_content_source: it makes an empty volume, answers \
                 no content_source, and a missing source is not NOT_FOUND"
            }
            Fault::CreateRejectsMutable => {
                "CreateVolume refuses supported mutable_parameters with INVALID_ARGUMENT"
            }
            Fault::CreateAcceptsUnknownMutable => {
                "CreateVolume accepts mutable_parameters it does not support instead of \
                 INVALID_ARGUMENT (and records them)"
            }
            Fault::DeleteUnknownNotFound => {
                "DeleteVolume of an unknown id returns NOT_FOUND instead of OK"
            }
            Fault::DeleteInUseOk => {
                "DeleteVolume deletes a published or staged volume instead of FAILED_PRECONDITION"
            }
            Fault::DeleteKeepsVolume => {
                "DeleteVolume answers OK but keeps the volume (it is still listed)"
            }
            Fault::PublishUnknownVolumeOk => {
                "ControllerPublishVolume of an unknown volume returns OK instead of NOT_FOUND"
            }
            Fault::PublishUnknownNodeOk => {
                "ControllerPublishVolume to an unknown node returns OK instead of NOT_FOUND"
            }
            Fault::PublishIncompatibleOk => {
                "ControllerPublishVolume again with another capability or readonly returns OK \
                 instead of ALREADY_EXISTS"
            }
            Fault::PublishLimitWrongCode => {
                "ControllerPublishVolume beyond --max-volumes-per-node fails with INTERNAL \
                 instead of RESOURCE_EXHAUSTED"
            }
            Fault::PublishLimitTooEarly => {
                "ControllerPublishVolume refuses (RESOURCE_EXHAUSTED) once \
                 --max-volumes-per-node minus one volumes are published to the node"
            }
            Fault::PublishContextChanges => {
                "ControllerPublishVolume answers every call, retries too, with a new \
                 publish_context"
            }
            Fault::ControllerUnpublishNotIdempotent => {
                "ControllerUnpublishVolume of a volume that is not published returns INTERNAL"
            }
            Fault::ValidateAcceptsMissingCapabilities => {
                "ValidateVolumeCapabilities without capabilities confirms instead of \
                 INVALID_ARGUMENT"
            }
            Fault::ValidateUnknownOk => {
                "ValidateVolumeCapabilities of an unknown volume confirms instead of NOT_FOUND"
            }
            Fault::ValidateConfirmsOther => {
                "ValidateVolumeCapabilities confirms another access mode than the one asked \
                 for (MULTI_NODE_READER_ONLY for SINGLE_NODE_WRITER, and so on)"
            }
            Fault::ListIgnoresMaxEntries => {
                "ListVolumes and ListSnapshots return every entry whatever max_entries says"
            }
            Fault::ListBadTokenOk => {
                "ListVolumes and ListSnapshots restart from the beginning on a starting_token \
                 they never issued instead of ABORTED"
            }
            Fault::GetCapacityNegative => "GetCapacity reports an available_capacity of -1",
            Fault::StageNotIdempotent => {
                "NodeStageVolume repeated with the same arguments returns ALREADY_EXISTS"
            }
            Fault::StageMissingPathOk => {
                "NodeStageVolume without staging_target_path returns OK instead of \
                 INVALID_ARGUMENT"
            }
            Fault::UnstageNotIdempotent => {
                "NodeUnstageVolume of a volume that is not staged there returns INTERNAL"
            }
            Fault::NodePublishNotIdempotent => {
                "NodePublishVolume repeated with the same arguments returns ALREADY_EXISTS"
            }
            Fault::NodePublishWithoutStageOk => {
                "NodePublishVolume without staging_target_path succeeds instead of \
                 FAILED_PRECONDITION, although STAGE_UNSTAGE_VOLUME is advertised"
            }
            Fault::NodePublishIgnoresReadonly => {
                "NodePublishVolume with readonly=true leaves the target writable"
            }
            Fault::NodePublishNoMount => {
                "NodePublishVolume creates the target directory but mounts nothing on it"
            }
            Fault::NodeUnpublishNotIdempotent => {
                "NodeUnpublishVolume of a target that is not published returns INTERNAL"
            }
            Fault::NodeUnpublishKeepsMount => {
                "NodeUnpublishVolume returns OK but leaves the bind mount and the target dir"
            }
            Fault::SnapshotNotIdempotent => {
                "CreateSnapshot with an existing name and source makes another snapshot"
            }
            Fault::SnapshotDeleteUnknownNotFound => {
                "DeleteSnapshot of an unknown id returns NOT_FOUND instead of OK"
            }
            Fault::SnapshotNoCreationTime => {
                "CreateSnapshot answers a snapshot without creation_time"
            }
            Fault::ListSnapshotsIgnoresFilter => {
                "ListSnapshots ignores the snapshot_id and source_volume_id filters"
            }
            Fault::ListSnapshotsEmpty => {
                "ListSnapshots answers an empty list, whatever snapshots exist"
            }
            Fault::GetSnapshotUnknownOk => {
                "GetSnapshot of an unknown id answers OK with an empty snapshot (only the \
                 asked-for id) instead of NOT_FOUND"
            }
            Fault::GetSnapshotWrong => {
                "GetSnapshot of an existing snapshot answers another one (the first other \
                 snapshot by id)"
            }
            Fault::GroupCapabilitiesError => "GroupControllerGetCapabilities fails with INTERNAL",
            Fault::GroupSnapshotAcceptsMissingName => {
                "CreateVolumeGroupSnapshot without a name succeeds instead of INVALID_ARGUMENT"
            }
            Fault::GroupSnapshotNotIdempotent => {
                "CreateVolumeGroupSnapshot with an existing name and the same sources cuts \
                 another group"
            }
            Fault::GroupDeleteUnknownNotFound => {
                "DeleteVolumeGroupSnapshot of an unknown id returns NOT_FOUND instead of OK"
            }
            Fault::GroupGetUnknownOk => {
                "GetVolumeGroupSnapshot of an unknown id answers OK with an empty group instead \
                 of NOT_FOUND"
            }
            Fault::GroupGetNoSnapshots => {
                "GetVolumeGroupSnapshot answers the group without its member snapshots"
            }
            Fault::GroupDeleteKeeps => {
                "DeleteVolumeGroupSnapshot answers OK but keeps the group and its snapshots"
            }
            Fault::ExpandUnknownOk => {
                "ControllerExpandVolume of an unknown volume returns OK instead of NOT_FOUND"
            }
            Fault::ExpandShrinks => {
                "ControllerExpandVolume to a smaller size shrinks the volume instead of \
                 leaving it as it is"
            }
            Fault::ExpandIgnoresSize => {
                "ControllerExpandVolume does not grow the volume and answers OK with its old \
                 capacity"
            }
            Fault::NodeExpandUnknownOk => {
                "NodeExpandVolume of an unknown volume returns OK instead of NOT_FOUND"
            }
            Fault::ModifyUnknownOk => {
                "ControllerModifyVolume of an unknown volume returns OK instead of NOT_FOUND"
            }
            Fault::ModifyRejectsAll => {
                "ControllerModifyVolume refuses every change to an existing volume with \
                 INVALID_ARGUMENT, supported parameters too"
            }
            Fault::ModifyAcceptsUnknown => {
                "ControllerModifyVolume accepts mutable parameters it does not support instead \
                 of INVALID_ARGUMENT"
            }
            Fault::StatsUnknownOk => {
                "NodeGetVolumeStats of an unknown volume returns zeros instead of NOT_FOUND"
            }
            Fault::StatsIgnoresPath => {
                "NodeGetVolumeStats of a volume at a path where it is neither staged nor \
                 published reports the volume's usage instead of NOT_FOUND"
            }
            Fault::StatsNegative => "NodeGetVolumeStats reports -1 available bytes",
            Fault::BlockUnsupported => {
                "the plugin does not do block volumes: CreateVolume with a block capability \
                 fails with INVALID_ARGUMENT (and GetCapacity reports 0 for one)"
            }
            Fault::BlockPublishNotDevice => {
                "NodePublishVolume of a block volume bind-mounts the image file onto the target \
                 instead of the loop device: the target is a regular file, not a block device"
            }
            Fault::BlockStageWipes => {
                "NodeStageVolume of a block volume recreates the image empty whenever it \
                 attaches a loop device, so data is gone at the next claim after an unstage"
            }
            Fault::BlockIgnoresReadonly => {
                "a read-only NodePublishVolume of a block volume binds the shared writable loop \
                 device, so writes through the target succeed"
            }
            Fault::BlockKeepsDevice => {
                "NodeUnpublishVolume, NodeUnstageVolume and DeleteVolume of a block volume never \
                 detach its loop devices: they stay attached after the release and the delete"
            }
            Fault::ErrorDetails => "every error carries non-empty status details",
            Fault::ForgetState => {
                "state is neither loaded at start nor saved, so a restart forgets every \
                 volume, snapshot and publication"
            }
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Fault::ALL
            .iter()
            .copied()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                format!("unknown fault '{name}'; known faults: {}", known.join(", "))
            })
    }
}

/// The faults switched on for this run; empty for the correct plugin.
#[derive(Clone, Debug, Default)]
pub struct Faults(BTreeSet<Fault>);

impl Faults {
    pub fn new(faults: impl IntoIterator<Item = Fault>) -> Self {
        Faults(faults.into_iter().collect())
    }

    /// Whether `fault` is switched on.
    pub fn has(&self, fault: Fault) -> bool {
        self.0.contains(&fault)
    }
}

impl fmt::Display for Faults {
    /// The names, comma-separated; "none" for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.0.iter().map(|fault| fault.name()).collect();
        f.write_str(&names.join(", "))
    }
}

/// The fault list for `--help`.
pub fn help_text() -> String {
    let mut text = String::from("Faults (--fault NAME, repeatable), each breaking one rule:\n");
    for fault in Fault::ALL {
        text.push_str(&format!("  {:<40} {}\n", fault.name(), fault.rule()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_is_listed_once_and_round_trips() {
        let unique: BTreeSet<Fault> = Fault::ALL.iter().copied().collect();
        assert_eq!(unique.len(), Fault::ALL.len());
        for fault in Fault::ALL {
            assert_eq!(fault.name().parse::<Fault>(), Ok(*fault));
            assert!(!fault.rule().is_empty());
        }
    }

    #[test]
    fn the_readme_documents_every_fault() {
        let readme = include_str!("../README.md");
        for fault in Fault::ALL {
            assert!(
                readme.contains(&format!("| `{}` |", fault.name())),
                "{fault} undocumented"
            );
        }
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = "no-such-fault".parse::<Fault>().unwrap_err();
        assert!(err.contains("unknown fault 'no-such-fault'"), "{err}");
        assert!(
            err.contains("probe-error") && err.contains("forget-state"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }
}
