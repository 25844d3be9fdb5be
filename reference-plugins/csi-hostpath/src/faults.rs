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
    UnpublishNeedsSecrets,
    TopologyElsewhere,
    ReadonlyBesideWriterWritable,
    ProbeFailsAfterStart,
    NodeUnknownInternal,
    ValidateConfirmsFirstOnly,
    UnpublishKeepsAttachment,
    ListDropsLastVolume,
    CreateAcceptsBadRange,
    NoControllerService,
}

impl Fault {
    /// Every fault, in the order `--help` lists them.
    pub fn all() -> impl Iterator<Item = Fault> {
        TABLE.iter().map(|(f, _, _)| *f)
    }

    fn entry(self) -> &'static (Fault, &'static str, &'static str) {
        TABLE
            .iter()
            .find(|(f, _, _)| *f == self)
            .expect("every fault has a row in TABLE")
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        self.entry().1
    }

    /// One line: what the plugin does wrong with this fault switched on.
    pub fn rule(self) -> &'static str {
        self.entry().2
    }
}

/// Each fault's command-line name and the rule it breaks, in the order `--help` lists them:
/// the one place a fault is described.
const TABLE: &[(Fault, &str, &str)] = &[
    (
        Fault::EmptyPluginName,
        "empty-plugin-name",
        "GetPluginInfo returns an empty name",
    ),
    (
        Fault::SlowPluginInfo,
        "slow-plugin-info",
        "GetPluginInfo sleeps 1.5 s before answering (beyond Nomad's 1 s at registration)",
    ),
    (
        Fault::PluginCapabilitiesError,
        "plugin-capabilities-error",
        "GetPluginCapabilities fails with INTERNAL",
    ),
    (
        Fault::EmptyNodeId,
        "empty-node-id",
        "NodeGetInfo returns an empty node_id",
    ),
    (
        Fault::ProbeNotReady,
        "probe-not-ready",
        "Probe answers ready=false, forever",
    ),
    (
        Fault::ProbeError,
        "probe-error",
        "Probe fails with FAILED_PRECONDITION",
    ),
    (
        Fault::SlowProbe,
        "slow-probe",
        "Probe sleeps 6 s before answering (beyond Nomad's 5 s timeout)",
    ),
    (
        Fault::ControllerCapabilitiesError,
        "controller-capabilities-error",
        "ControllerGetCapabilities fails with INTERNAL",
    ),
    (
        Fault::NodeCapabilitiesError,
        "node-capabilities-error",
        "NodeGetCapabilities fails with INTERNAL",
    ),
    (
        Fault::SkipRequiredFieldChecks,
        "skip-required-field-checks",
        "no required field is checked: a call missing one goes on without it instead of \
                 failing with INVALID_ARGUMENT",
    ),
    (
        Fault::CreateNotIdempotent,
        "create-not-idempotent",
        "CreateVolume with an existing name makes another volume with a new id",
    ),
    (
        Fault::CreateIgnoresCapacityConflict,
        "create-ignores-capacity-conflict",
        "CreateVolume with an existing name and an incompatible capacity returns OK \
                 instead of ALREADY_EXISTS",
    ),
    (
        Fault::CreateAcceptsMissingName,
        "create-accepts-missing-name",
        "CreateVolume without a name succeeds instead of INVALID_ARGUMENT",
    ),
    (
        Fault::CreateRaces,
        "create-races",
        "CreateVolume takes no per-name lock and pauses, so concurrent calls with one \
                 name make several volumes",
    ),
    (
        Fault::CreateEmptyId,
        "create-empty-id",
        "CreateVolume answers OK with an empty volume_id (and keeps no volume)",
    ),
    (
        Fault::CreateIgnoresCapacity,
        "create-ignores-capacity",
        "CreateVolume answers a capacity_bytes of half the required_bytes (the volume \
                 itself gets what was asked)",
    ),
    (
        Fault::CreateIgnoresContentSource,
        "create-ignores-content-source",
        "CreateVolume ignores volume_content_source: it makes an empty volume, answers \
                 no content_source, and a missing source is not NOT_FOUND",
    ),
    (
        Fault::CreateRejectsMutable,
        "create-rejects-mutable",
        "CreateVolume refuses supported mutable_parameters with INVALID_ARGUMENT",
    ),
    (
        Fault::CreateAcceptsUnknownMutable,
        "create-accepts-unknown-mutable",
        "CreateVolume accepts mutable_parameters it does not support instead of \
                 INVALID_ARGUMENT (and records them)",
    ),
    (
        Fault::DeleteUnknownNotFound,
        "delete-unknown-not-found",
        "DeleteVolume of an unknown id returns NOT_FOUND instead of OK",
    ),
    (
        Fault::DeleteInUseOk,
        "delete-in-use-ok",
        "DeleteVolume deletes a published or staged volume instead of FAILED_PRECONDITION",
    ),
    (
        Fault::DeleteKeepsVolume,
        "delete-keeps-volume",
        "DeleteVolume answers OK but keeps the volume (it is still listed)",
    ),
    (
        Fault::PublishUnknownVolumeOk,
        "publish-unknown-volume-ok",
        "ControllerPublishVolume of an unknown volume returns OK instead of NOT_FOUND",
    ),
    (
        Fault::PublishUnknownNodeOk,
        "publish-unknown-node-ok",
        "ControllerPublishVolume to an unknown node returns OK instead of NOT_FOUND",
    ),
    (
        Fault::PublishIncompatibleOk,
        "publish-incompatible-ok",
        "ControllerPublishVolume again with another capability or readonly returns OK \
                 instead of ALREADY_EXISTS",
    ),
    (
        Fault::PublishLimitWrongCode,
        "publish-limit-wrong-code",
        "ControllerPublishVolume beyond --max-volumes-per-node fails with INTERNAL \
                 instead of RESOURCE_EXHAUSTED",
    ),
    (
        Fault::PublishLimitTooEarly,
        "publish-limit-too-early",
        "ControllerPublishVolume refuses (RESOURCE_EXHAUSTED) once \
                 --max-volumes-per-node minus one volumes are published to the node",
    ),
    (
        Fault::PublishContextChanges,
        "publish-context-changes",
        "ControllerPublishVolume answers every call, retries too, with a new \
                 publish_context",
    ),
    (
        Fault::ControllerUnpublishNotIdempotent,
        "controller-unpublish-not-idempotent",
        "ControllerUnpublishVolume of a volume that is not published returns INTERNAL",
    ),
    (
        Fault::ValidateAcceptsMissingCapabilities,
        "validate-accepts-missing-capabilities",
        "ValidateVolumeCapabilities without capabilities confirms instead of \
                 INVALID_ARGUMENT",
    ),
    (
        Fault::ValidateUnknownOk,
        "validate-unknown-ok",
        "ValidateVolumeCapabilities of an unknown volume confirms instead of NOT_FOUND",
    ),
    (
        Fault::ValidateConfirmsOther,
        "validate-confirms-other",
        "ValidateVolumeCapabilities confirms another access mode than the one asked \
                 for (MULTI_NODE_READER_ONLY for SINGLE_NODE_WRITER, and so on)",
    ),
    (
        Fault::ListIgnoresMaxEntries,
        "list-ignores-max-entries",
        "ListVolumes and ListSnapshots return every entry whatever max_entries says",
    ),
    (
        Fault::ListBadTokenOk,
        "list-bad-token-ok",
        "ListVolumes and ListSnapshots restart from the beginning on a starting_token \
                 they never issued instead of ABORTED",
    ),
    (
        Fault::GetCapacityNegative,
        "get-capacity-negative",
        "GetCapacity reports an available_capacity of -1",
    ),
    (
        Fault::StageNotIdempotent,
        "stage-not-idempotent",
        "NodeStageVolume repeated with the same arguments returns ALREADY_EXISTS",
    ),
    (
        Fault::StageMissingPathOk,
        "stage-missing-path-ok",
        "NodeStageVolume without staging_target_path returns OK instead of \
                 INVALID_ARGUMENT",
    ),
    (
        Fault::UnstageNotIdempotent,
        "unstage-not-idempotent",
        "NodeUnstageVolume of a volume that is not staged there returns INTERNAL",
    ),
    (
        Fault::NodePublishNotIdempotent,
        "node-publish-not-idempotent",
        "NodePublishVolume repeated with the same arguments returns ALREADY_EXISTS",
    ),
    (
        Fault::NodePublishWithoutStageOk,
        "node-publish-without-stage-ok",
        "NodePublishVolume without staging_target_path succeeds instead of \
                 FAILED_PRECONDITION, although STAGE_UNSTAGE_VOLUME is advertised",
    ),
    (
        Fault::NodePublishIgnoresReadonly,
        "node-publish-ignores-readonly",
        "NodePublishVolume with readonly=true leaves the target writable",
    ),
    (
        Fault::NodePublishNoMount,
        "node-publish-no-mount",
        "NodePublishVolume creates the target directory but mounts nothing on it",
    ),
    (
        Fault::NodeUnpublishNotIdempotent,
        "node-unpublish-not-idempotent",
        "NodeUnpublishVolume of a target that is not published returns INTERNAL",
    ),
    (
        Fault::NodeUnpublishKeepsMount,
        "node-unpublish-keeps-mount",
        "NodeUnpublishVolume returns OK but leaves the bind mount and the target dir",
    ),
    (
        Fault::SnapshotNotIdempotent,
        "snapshot-not-idempotent",
        "CreateSnapshot with an existing name and source makes another snapshot",
    ),
    (
        Fault::SnapshotDeleteUnknownNotFound,
        "snapshot-delete-unknown-not-found",
        "DeleteSnapshot of an unknown id returns NOT_FOUND instead of OK",
    ),
    (
        Fault::SnapshotNoCreationTime,
        "snapshot-no-creation-time",
        "CreateSnapshot answers a snapshot without creation_time",
    ),
    (
        Fault::ListSnapshotsIgnoresFilter,
        "list-snapshots-ignores-filter",
        "ListSnapshots ignores the snapshot_id and source_volume_id filters",
    ),
    (
        Fault::ListSnapshotsEmpty,
        "list-snapshots-empty",
        "ListSnapshots answers an empty list, whatever snapshots exist",
    ),
    (
        Fault::GetSnapshotUnknownOk,
        "get-snapshot-unknown-ok",
        "GetSnapshot of an unknown id answers OK with an empty snapshot (only the \
                 asked-for id) instead of NOT_FOUND",
    ),
    (
        Fault::GetSnapshotWrong,
        "get-snapshot-wrong",
        "GetSnapshot of an existing snapshot answers another one (the first other \
                 snapshot by id)",
    ),
    (
        Fault::GroupCapabilitiesError,
        "group-capabilities-error",
        "GroupControllerGetCapabilities fails with INTERNAL",
    ),
    (
        Fault::GroupSnapshotAcceptsMissingName,
        "group-snapshot-accepts-missing-name",
        "CreateVolumeGroupSnapshot without a name succeeds instead of INVALID_ARGUMENT",
    ),
    (
        Fault::GroupSnapshotNotIdempotent,
        "group-snapshot-not-idempotent",
        "CreateVolumeGroupSnapshot with an existing name and the same sources cuts \
                 another group",
    ),
    (
        Fault::GroupDeleteUnknownNotFound,
        "group-delete-unknown-not-found",
        "DeleteVolumeGroupSnapshot of an unknown id returns NOT_FOUND instead of OK",
    ),
    (
        Fault::GroupGetUnknownOk,
        "group-get-unknown-ok",
        "GetVolumeGroupSnapshot of an unknown id answers OK with an empty group instead \
                 of NOT_FOUND",
    ),
    (
        Fault::GroupGetNoSnapshots,
        "group-get-no-snapshots",
        "GetVolumeGroupSnapshot answers the group without its member snapshots",
    ),
    (
        Fault::GroupDeleteKeeps,
        "group-delete-keeps",
        "DeleteVolumeGroupSnapshot answers OK but keeps the group and its snapshots",
    ),
    (
        Fault::ExpandUnknownOk,
        "expand-unknown-ok",
        "ControllerExpandVolume of an unknown volume returns OK instead of NOT_FOUND",
    ),
    (
        Fault::ExpandShrinks,
        "expand-shrinks",
        "ControllerExpandVolume to a smaller size shrinks the volume instead of \
                 leaving it as it is",
    ),
    (
        Fault::ExpandIgnoresSize,
        "expand-ignores-size",
        "ControllerExpandVolume does not grow the volume and answers OK with its old \
                 capacity",
    ),
    (
        Fault::NodeExpandUnknownOk,
        "node-expand-unknown-ok",
        "NodeExpandVolume of an unknown volume returns OK instead of NOT_FOUND",
    ),
    (
        Fault::ModifyUnknownOk,
        "modify-unknown-ok",
        "ControllerModifyVolume of an unknown volume returns OK instead of NOT_FOUND",
    ),
    (
        Fault::ModifyRejectsAll,
        "modify-rejects-all",
        "ControllerModifyVolume refuses every change to an existing volume with \
                 INVALID_ARGUMENT, supported parameters too",
    ),
    (
        Fault::ModifyAcceptsUnknown,
        "modify-accepts-unknown",
        "ControllerModifyVolume accepts mutable parameters it does not support instead \
                 of INVALID_ARGUMENT",
    ),
    (
        Fault::StatsUnknownOk,
        "stats-unknown-ok",
        "NodeGetVolumeStats of an unknown volume returns zeros instead of NOT_FOUND",
    ),
    (
        Fault::StatsIgnoresPath,
        "stats-ignores-path",
        "NodeGetVolumeStats of a volume at a path where it is neither staged nor \
                 published reports the volume's usage instead of NOT_FOUND",
    ),
    (
        Fault::StatsNegative,
        "stats-negative",
        "NodeGetVolumeStats reports -1 available bytes",
    ),
    (
        Fault::BlockUnsupported,
        "block-unsupported",
        "the plugin does not do block volumes: CreateVolume with a block capability \
                 fails with INVALID_ARGUMENT (and GetCapacity reports 0 for one)",
    ),
    (
        Fault::BlockPublishNotDevice,
        "block-publish-not-device",
        "NodePublishVolume of a block volume bind-mounts the image file onto the target \
                 instead of the loop device: the target is a regular file, not a block device",
    ),
    (
        Fault::BlockStageWipes,
        "block-stage-wipes",
        "NodeStageVolume of a block volume recreates the image empty whenever it \
                 attaches a loop device, so data is gone at the next claim after an unstage",
    ),
    (
        Fault::BlockIgnoresReadonly,
        "block-ignores-readonly",
        "a read-only NodePublishVolume of a block volume binds the shared writable loop \
                 device, so writes through the target succeed",
    ),
    (
        Fault::BlockKeepsDevice,
        "block-keeps-device",
        "NodeUnpublishVolume, NodeUnstageVolume and DeleteVolume of a block volume never \
                 detach its loop devices: they stay attached after the release and the delete",
    ),
    (
        Fault::ErrorDetails,
        "error-details",
        "every error carries non-empty status details",
    ),
    (
        Fault::ForgetState,
        "forget-state",
        "state is neither loaded at start nor saved, so a restart forgets every \
                 volume, snapshot and publication",
    ),
    (
        Fault::UnpublishNeedsSecrets,
        "unpublish-needs-secrets",
        "ControllerUnpublishVolume refuses a request without the plugin's secret (INVALID_ARGUMENT), though Nomad never sends secrets on it; use with the needs-secrets variant",
    ),
    (
        Fault::TopologyElsewhere,
        "topology-elsewhere",
        "the plugin reports topology (VOLUME_ACCESSIBILITY_CONSTRAINTS, a node segment in NodeGetInfo), but CreateVolume answers volumes accessible only from another node's segment",
    ),
    (
        Fault::ReadonlyBesideWriterWritable,
        "readonly-beside-writer-writable",
        "a read-only NodePublishVolume of a volume that already has a writable publication on the node is left writable",
    ),
    (
        Fault::ProbeFailsAfterStart,
        "probe-fails-after-start",
        "Probe reports ready once (Nomad registers the plugin), then fails with FAILED_PRECONDITION on every later call",
    ),
    (
        Fault::NodeUnknownInternal,
        "node-unknown-internal",
        "NodeStageVolume, NodeUnstageVolume and NodeUnpublishVolume of a volume that does not exist fail with INTERNAL instead of NOT_FOUND",
    ),
    (
        Fault::ValidateConfirmsFirstOnly,
        "validate-confirms-first-only",
        "ValidateVolumeCapabilities asked about several capabilities confirms only the first",
    ),
    (
        Fault::UnpublishKeepsAttachment,
        "unpublish-keeps-attachment",
        "ControllerUnpublishVolume answers OK but the node's attachment is never freed: it still counts against --max-volumes-per-node",
    ),
    (
        Fault::ListDropsLastVolume,
        "list-drops-last-volume",
        "ListVolumes leaves out the last volume (by ID) of the whole listing",
    ),
    (
        Fault::CreateAcceptsBadRange,
        "create-accepts-bad-range",
        "CreateVolume with limit_bytes below required_bytes creates a volume of required_bytes instead of refusing",
    ),
    (
        Fault::NoControllerService,
        "no-controller-service",
        "GetPluginCapabilities advertises neither CONTROLLER_SERVICE nor GROUP_CONTROLLER_SERVICE, though both are served: run as a monolith, the plugin cannot create or attach volumes under Nomad",
    ),
];

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Fault::all().find(|f| f.name() == name).ok_or_else(|| {
            let known: Vec<&str> = Fault::all().map(|f| f.name()).collect();
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
    for fault in Fault::all() {
        text.push_str(&format!("  {:<40} {}\n", fault.name(), fault.rule()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_is_listed_once_and_round_trips() {
        let unique: BTreeSet<Fault> = Fault::all().collect();
        assert_eq!(unique.len(), TABLE.len(), "a fault has two rows");
        for fault in Fault::all() {
            assert_eq!(fault.name().parse::<Fault>(), Ok(fault));
            assert!(!fault.rule().is_empty());
        }
    }

    #[test]
    fn the_readme_documents_every_fault() {
        let readme = include_str!("../README.md");
        for fault in Fault::all() {
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
