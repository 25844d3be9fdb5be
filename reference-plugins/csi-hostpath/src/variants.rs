//! Variant switches: behaviours the CSI spec (and Nomad) allow that this plugin does not
//! show by default.
//!
//! A fault proves that a check can fail; a variant proves that it does not fail a plugin that
//! is right in a different way. Each `--variant NAME` makes the plugin take another allowed
//! path, so the harness's own tests can show that the suite still passes it. The enum and its
//! parsing live here; every variant is checked at the one place in the plugin where the
//! behaviour it changes is implemented (search for its name).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One allowed way of doing things differently. See [`Variant::behaviour`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    PublishFromBackingStore,
    StageWithoutMount,
    LoopAtCreate,
    SecondTargetAllowed,
    OpaquePageTokens,
    ReleaseNotFound,
    NodeOnly,
    ValidateWithoutConfirmed,
    IgnoresMaxVolumes,
    MinSize1Gib,
    MaxSize1Gib,
    CapacityUnknown,
    NeedsSecrets,
    SlowStart,
    Topology,
    RegisterOnly,
    NoPublishReadonly,
    ReleaseUnknownOk,
    BadRangeOutOfRange,
}

impl Variant {
    /// Every variant, in the order `--help` lists them.
    pub const ALL: &'static [Variant] = &[
        Variant::PublishFromBackingStore,
        Variant::StageWithoutMount,
        Variant::LoopAtCreate,
        Variant::SecondTargetAllowed,
        Variant::OpaquePageTokens,
        Variant::ReleaseNotFound,
        Variant::NodeOnly,
        Variant::ValidateWithoutConfirmed,
        Variant::IgnoresMaxVolumes,
        Variant::MinSize1Gib,
        Variant::MaxSize1Gib,
        Variant::CapacityUnknown,
        Variant::NeedsSecrets,
        Variant::SlowStart,
        Variant::Topology,
        Variant::RegisterOnly,
        Variant::NoPublishReadonly,
        Variant::ReleaseUnknownOk,
        Variant::BadRangeOutOfRange,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Variant::PublishFromBackingStore => "publish-from-backing-store",
            Variant::StageWithoutMount => "stage-without-mount",
            Variant::LoopAtCreate => "loop-at-create",
            Variant::SecondTargetAllowed => "second-target-allowed",
            Variant::OpaquePageTokens => "opaque-page-tokens",
            Variant::ReleaseNotFound => "release-not-found",
            Variant::NodeOnly => "node-only",
            Variant::ValidateWithoutConfirmed => "validate-without-confirmed",
            Variant::IgnoresMaxVolumes => "ignores-max-volumes",
            Variant::MinSize1Gib => "min-size-1gib",
            Variant::MaxSize1Gib => "max-size-1gib",
            Variant::CapacityUnknown => "capacity-unknown",
            Variant::NeedsSecrets => "needs-secrets",
            Variant::SlowStart => "slow-start",
            Variant::Topology => "topology",
            Variant::RegisterOnly => "register-only",
            Variant::NoPublishReadonly => "no-publish-readonly",
            Variant::ReleaseUnknownOk => "release-unknown-ok",
            Variant::BadRangeOutOfRange => "bad-range-out-of-range",
        }
    }

    /// What the plugin does differently, in one line.
    pub fn behaviour(self) -> &'static str {
        match self {
            Variant::PublishFromBackingStore => {
                "NodePublishVolume of a mount volume bind-mounts the volume's own directory \
                 onto the target instead of the staging path (staging still mounts and is \
                 still required)"
            }
            Variant::StageWithoutMount => {
                "NodeStageVolume of a mount volume only records the stage, mounting nothing; \
                 NodePublishVolume binds the volume's directory, NodeUnstageVolume forgets \
                 the record"
            }
            Variant::LoopAtCreate => {
                "a block volume gets its loop device at CreateVolume and keeps it until \
                 DeleteVolume; stage and publish use it and attach or detach no writable one"
            }
            Variant::SecondTargetAllowed => {
                "NodePublishVolume of a single-node volume at a second target on the node is \
                 OK (the spec's SHOULD), not FAILED_PRECONDITION"
            }
            Variant::OpaquePageTokens => {
                "ListVolumes and ListSnapshots hand out next_tokens of another opaque format \
                 (base64url, version byte, last id, checksum); others are ABORTED"
            }
            Variant::ReleaseNotFound => {
                "NodeUnpublishVolume, NodeUnstageVolume and ControllerUnpublishVolume of \
                 what is not published, staged or attached answer NOT_FOUND, not OK"
            }
            Variant::NodeOnly => {
                "only Identity and Node are served (Controller and GroupController RPCs are \
                 UNIMPLEMENTED), but CONTROLLER_SERVICE is still advertised"
            }
            Variant::ValidateWithoutConfirmed => {
                "ValidateVolumeCapabilities answers OK without the optional confirmed field"
            }
            Variant::IgnoresMaxVolumes => {
                "ControllerPublishVolume publishes beyond --max-volumes-per-node (Nomad's \
                 scheduler enforces the limit itself)"
            }
            Variant::MinSize1Gib => {
                "volumes are at least 1 GiB: CreateVolume asking for less (or a limit below it) is OUT_OF_RANGE, with the minimum in the message; GetCapacity reports it as minimum_volume_size"
            }
            Variant::MaxSize1Gib => {
                "volumes are at most 1 GiB: CreateVolume requiring more, or ControllerExpandVolume asking for more, is OUT_OF_RANGE with the maximum in the message; GetCapacity reports it as maximum_volume_size"
            }
            Variant::CapacityUnknown => {
                "volumes report capacity_bytes 0 (unknown, like a share on a file server), any capacity range matches an existing name, and expansion is not offered"
            }
            Variant::NeedsSecrets => {
                "CreateVolume, ControllerPublishVolume, NodeStageVolume and NodePublishVolume need the secret csi-hostpath-token (INVALID_ARGUMENT without it); ControllerUnpublishVolume needs none, as Nomad sends none"
            }
            Variant::SlowStart => {
                "for its first 3 s the plugin is still starting: Probe answers ready=false and every other call UNAVAILABLE"
            }
            Variant::Topology => {
                "the plugin reports topology: VOLUME_ACCESSIBILITY_CONSTRAINTS, NodeGetInfo's accessible_topology names the node, and volumes are accessible from that node (a requisite elsewhere is RESOURCE_EXHAUSTED)"
            }
            Variant::RegisterOnly => {
                "no CREATE_DELETE_VOLUME (CreateVolume and DeleteVolume are UNIMPLEMENTED): volumes exist beforehand (--preset-volume) and are registered, then published through the controller"
            }
            Variant::NoPublishReadonly => {
                "no PUBLISH_READONLY: a ControllerPublishVolume with readonly = true for a volume already published read-write to the node is ALREADY_EXISTS (incompatible readonly flag), as kubernetes-csi's hostpath driver answers it"
            }
            Variant::ReleaseUnknownOk => {
                "NodeUnstageVolume and NodeUnpublishVolume of a volume that does not exist answer OK (nothing of it is staged or published there), not NOT_FOUND"
            }
            Variant::BadRangeOutOfRange => {
                "CreateVolume with limit_bytes below required_bytes is OUT_OF_RANGE (the spec's \"Unsupported capacity_range\"), not INVALID_ARGUMENT"
            }
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Variant::ALL
            .iter()
            .copied()
            .find(|v| v.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Variant::ALL.iter().map(|v| v.name()).collect();
                format!(
                    "unknown variant '{name}'; known variants: {}",
                    known.join(", ")
                )
            })
    }
}

/// The variants switched on for this run; empty for the default plugin.
#[derive(Clone, Debug, Default)]
pub struct Variants(BTreeSet<Variant>);

impl Variants {
    pub fn new(variants: impl IntoIterator<Item = Variant>) -> Self {
        Variants(variants.into_iter().collect())
    }

    /// Whether `variant` is switched on.
    pub fn has(&self, variant: Variant) -> bool {
        self.0.contains(&variant)
    }
}

impl fmt::Display for Variants {
    /// The names, comma-separated; "none" for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.0.iter().map(|variant| variant.name()).collect();
        f.write_str(&names.join(", "))
    }
}

/// The variant list for `--help`.
pub fn help_text() -> String {
    let mut text =
        String::from("Variants (--variant NAME, repeatable), each a behaviour CSI allows:\n");
    for variant in Variant::ALL {
        text.push_str(&format!(
            "  {:<40} {}\n",
            variant.name(),
            variant.behaviour()
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_is_listed_once_and_round_trips() {
        let unique: BTreeSet<Variant> = Variant::ALL.iter().copied().collect();
        assert_eq!(unique.len(), Variant::ALL.len());
        for variant in Variant::ALL {
            assert_eq!(variant.name().parse::<Variant>(), Ok(*variant));
            assert!(!variant.behaviour().is_empty());
        }
    }

    #[test]
    fn the_readme_documents_every_variant() {
        let readme = include_str!("../README.md");
        for variant in Variant::ALL {
            assert!(
                readme.contains(&format!("| `{}` |", variant.name())),
                "{variant} undocumented"
            );
        }
    }

    #[test]
    fn no_variant_shares_a_name_with_a_fault() {
        for variant in Variant::ALL {
            assert!(variant.name().parse::<crate::faults::Fault>().is_err());
        }
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = "no-such-variant".parse::<Variant>().unwrap_err();
        assert!(err.contains("unknown variant 'no-such-variant'"), "{err}");
        assert!(
            err.contains("node-only") && err.contains("loop-at-create"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }
}
