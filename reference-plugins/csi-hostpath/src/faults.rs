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
    EmptyNodeId,
    ProbeNotReady,
    ProbeError,
    SlowProbe,
    CreateNotIdempotent,
    CreateIgnoresCapacityConflict,
    CreateAcceptsMissingName,
    CreateRaces,
    DeleteUnknownNotFound,
    DeleteInUseOk,
    PublishUnknownVolumeOk,
    PublishUnknownNodeOk,
    PublishIncompatibleOk,
    PublishIgnoresMaxVolumes,
    ControllerUnpublishNotIdempotent,
    ValidateAcceptsMissingCapabilities,
    ValidateUnknownOk,
    ListIgnoresMaxEntries,
    ListBadTokenOk,
    StageNotIdempotent,
    StageMissingPathOk,
    UnstageNotIdempotent,
    NodePublishNotIdempotent,
    NodePublishWithoutStageOk,
    NodePublishSecondTargetOk,
    NodePublishIgnoresReadonly,
    NodeUnpublishNotIdempotent,
    NodeUnpublishKeepsMount,
    SnapshotNotIdempotent,
    SnapshotDeleteUnknownNotFound,
    ListSnapshotsIgnoresFilter,
    ExpandUnknownOk,
    ExpandShrinks,
    ModifyUnknownOk,
    StatsUnknownOk,
    ErrorDetails,
    ForgetState,
}

impl Fault {
    /// Every fault, in the order `--help` lists them.
    pub const ALL: &'static [Fault] = &[
        Fault::EmptyPluginName,
        Fault::EmptyNodeId,
        Fault::ProbeNotReady,
        Fault::ProbeError,
        Fault::SlowProbe,
        Fault::CreateNotIdempotent,
        Fault::CreateIgnoresCapacityConflict,
        Fault::CreateAcceptsMissingName,
        Fault::CreateRaces,
        Fault::DeleteUnknownNotFound,
        Fault::DeleteInUseOk,
        Fault::PublishUnknownVolumeOk,
        Fault::PublishUnknownNodeOk,
        Fault::PublishIncompatibleOk,
        Fault::PublishIgnoresMaxVolumes,
        Fault::ControllerUnpublishNotIdempotent,
        Fault::ValidateAcceptsMissingCapabilities,
        Fault::ValidateUnknownOk,
        Fault::ListIgnoresMaxEntries,
        Fault::ListBadTokenOk,
        Fault::StageNotIdempotent,
        Fault::StageMissingPathOk,
        Fault::UnstageNotIdempotent,
        Fault::NodePublishNotIdempotent,
        Fault::NodePublishWithoutStageOk,
        Fault::NodePublishSecondTargetOk,
        Fault::NodePublishIgnoresReadonly,
        Fault::NodeUnpublishNotIdempotent,
        Fault::NodeUnpublishKeepsMount,
        Fault::SnapshotNotIdempotent,
        Fault::SnapshotDeleteUnknownNotFound,
        Fault::ListSnapshotsIgnoresFilter,
        Fault::ExpandUnknownOk,
        Fault::ExpandShrinks,
        Fault::ModifyUnknownOk,
        Fault::StatsUnknownOk,
        Fault::ErrorDetails,
        Fault::ForgetState,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fault::EmptyPluginName => "empty-plugin-name",
            Fault::EmptyNodeId => "empty-node-id",
            Fault::ProbeNotReady => "probe-not-ready",
            Fault::ProbeError => "probe-error",
            Fault::SlowProbe => "slow-probe",
            Fault::CreateNotIdempotent => "create-not-idempotent",
            Fault::CreateIgnoresCapacityConflict => "create-ignores-capacity-conflict",
            Fault::CreateAcceptsMissingName => "create-accepts-missing-name",
            Fault::CreateRaces => "create-races",
            Fault::DeleteUnknownNotFound => "delete-unknown-not-found",
            Fault::DeleteInUseOk => "delete-in-use-ok",
            Fault::PublishUnknownVolumeOk => "publish-unknown-volume-ok",
            Fault::PublishUnknownNodeOk => "publish-unknown-node-ok",
            Fault::PublishIncompatibleOk => "publish-incompatible-ok",
            Fault::PublishIgnoresMaxVolumes => "publish-ignores-max-volumes",
            Fault::ControllerUnpublishNotIdempotent => "controller-unpublish-not-idempotent",
            Fault::ValidateAcceptsMissingCapabilities => "validate-accepts-missing-capabilities",
            Fault::ValidateUnknownOk => "validate-unknown-ok",
            Fault::ListIgnoresMaxEntries => "list-ignores-max-entries",
            Fault::ListBadTokenOk => "list-bad-token-ok",
            Fault::StageNotIdempotent => "stage-not-idempotent",
            Fault::StageMissingPathOk => "stage-missing-path-ok",
            Fault::UnstageNotIdempotent => "unstage-not-idempotent",
            Fault::NodePublishNotIdempotent => "node-publish-not-idempotent",
            Fault::NodePublishWithoutStageOk => "node-publish-without-stage-ok",
            Fault::NodePublishSecondTargetOk => "node-publish-second-target-ok",
            Fault::NodePublishIgnoresReadonly => "node-publish-ignores-readonly",
            Fault::NodeUnpublishNotIdempotent => "node-unpublish-not-idempotent",
            Fault::NodeUnpublishKeepsMount => "node-unpublish-keeps-mount",
            Fault::SnapshotNotIdempotent => "snapshot-not-idempotent",
            Fault::SnapshotDeleteUnknownNotFound => "snapshot-delete-unknown-not-found",
            Fault::ListSnapshotsIgnoresFilter => "list-snapshots-ignores-filter",
            Fault::ExpandUnknownOk => "expand-unknown-ok",
            Fault::ExpandShrinks => "expand-shrinks",
            Fault::ModifyUnknownOk => "modify-unknown-ok",
            Fault::StatsUnknownOk => "stats-unknown-ok",
            Fault::ErrorDetails => "error-details",
            Fault::ForgetState => "forget-state",
        }
    }

    /// One line: what the plugin does wrong with this fault switched on.
    pub fn rule(self) -> &'static str {
        match self {
            Fault::EmptyPluginName => "GetPluginInfo returns an empty name",
            Fault::EmptyNodeId => "NodeGetInfo returns an empty node_id",
            Fault::ProbeNotReady => "Probe answers ready=false, forever",
            Fault::ProbeError => "Probe fails with FAILED_PRECONDITION",
            Fault::SlowProbe => "Probe sleeps 6 s before answering (beyond Nomad's 5 s timeout)",
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
            Fault::DeleteUnknownNotFound => {
                "DeleteVolume of an unknown id returns NOT_FOUND instead of OK"
            }
            Fault::DeleteInUseOk => {
                "DeleteVolume deletes a published or staged volume instead of FAILED_PRECONDITION"
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
            Fault::PublishIgnoresMaxVolumes => {
                "ControllerPublishVolume beyond --max-volumes-per-node returns OK instead of \
                 RESOURCE_EXHAUSTED"
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
            Fault::ListIgnoresMaxEntries => {
                "ListVolumes and ListSnapshots return every entry whatever max_entries says"
            }
            Fault::ListBadTokenOk => {
                "ListVolumes and ListSnapshots restart from the beginning on a starting_token \
                 they never issued instead of ABORTED"
            }
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
            Fault::NodePublishSecondTargetOk => {
                "NodePublishVolume to a second target of a single-node volume succeeds \
                 instead of FAILED_PRECONDITION"
            }
            Fault::NodePublishIgnoresReadonly => {
                "NodePublishVolume with readonly=true leaves the target writable"
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
            Fault::ListSnapshotsIgnoresFilter => {
                "ListSnapshots ignores the snapshot_id and source_volume_id filters"
            }
            Fault::ExpandUnknownOk => {
                "ControllerExpandVolume of an unknown volume returns OK instead of NOT_FOUND"
            }
            Fault::ExpandShrinks => {
                "ControllerExpandVolume to a smaller size shrinks the volume instead of \
                 leaving it as it is"
            }
            Fault::ModifyUnknownOk => {
                "ControllerModifyVolume of an unknown volume returns OK instead of NOT_FOUND"
            }
            Fault::StatsUnknownOk => {
                "NodeGetVolumeStats of an unknown volume or path returns zeros instead of \
                 NOT_FOUND"
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
