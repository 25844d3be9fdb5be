@csi @requires-node
Feature: node
  The Node service mounts volumes on the client: NodeStageVolume once per volume and node into
  Nomad's staging directory, NodePublishVolume once per allocation into its per-allocation
  target, and the reverse when allocations stop.

  Background:
    Given Nomad has found the plugin ready

  @CSI-NODE-CAPABILITIES @must
  Scenario: NodeGetCapabilities succeeds
    Nomad asks for the node's capabilities on every fingerprint, and latches STAGE_UNSTAGE_VOLUME
    from the first successful answer.

    Basis: CSI spec v1.12, NodeGetCapabilities: a Node Plugin MUST implement it; Nomad
    client/pluginmanager/csimanager/fingerprint.go (buildNodeFingerprint): an error marks the node
    plugin unhealthy for that round, and until a first success Nomad creates no volume manager, so
    no volume can be mounted on the node.

    When the harness calls NodeGetCapabilities
    Then the call succeeds

  @CSI-NODE-INFO @must
  Scenario: NodeGetInfo names the node
    node_id is REQUIRED (at most 256 bytes): Nomad refuses an empty one and sends it to the
    controller in every ControllerPublishVolume. max_volumes_per_node must not be negative, and
    accessible_topology requires the VOLUME_ACCESSIBILITY_CONSTRAINTS capability.

    Basis: CSI spec v1.12, NodeGetInfo: node_id is REQUIRED and SHALL NOT exceed 256 bytes,
    max_volumes_per_node MUST NOT be negative, and a plugin returning accessible_topology MUST also
    set VOLUME_ACCESSIBILITY_CONSTRAINTS; Nomad plugins/csi/client.go (NodeGetInfo), called for
    every node plugin: an empty node_id fails the fingerprint (fingerprint.go,
    buildBasicFingerprint), so the node plugin never becomes healthy, and a negative limit makes
    scheduler/feasible/feasible.go (CSIVolumeChecker.isFeasible) reject every volume on the node.
    Nomad asks NodeGetInfo once, on the first fingerprint that succeeds, and keeps its answer.

    When the harness calls NodeGetInfo
    Then the call succeeds
    And the node ID is not empty and at most 256 bytes long
    And max_volumes_per_node is not negative
    And a topology is reported only with the VOLUME_ACCESSIBILITY_CONSTRAINTS capability

  @CSI-NODE-STAGE-NO-VOLUME-ID @must @requires-node-STAGE_UNSTAGE_VOLUME
  Scenario: NodeStageVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeStageVolume: volume_id is REQUIRED. The level rests on the
    spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls NodeStageVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STAGE-NO-PATH @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-volume
  Scenario: NodeStageVolume without a staging path is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeStageVolume: staging_target_path is REQUIRED. The level
    rests on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given the plugin has created a volume
    And the volume is published to the node
    When the harness calls NodeStageVolume without a staging target path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STAGE-NO-CAPABILITY @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-volume
  Scenario: NodeStageVolume without a volume capability is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeStageVolume: volume_capability is REQUIRED. The level
    rests on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given the plugin has created a volume
    And the volume is published to the node
    When the harness calls NodeStageVolume without a volume capability
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STAGE-IDEMPOTENT @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-volume
  Scenario: NodeStageVolume is idempotent
    Staging a volume again at the same path with the same capability succeeds.

    Basis: CSI spec v1.12, NodeStageVolume: the call MUST be idempotent, and a volume already staged
    at the path with an identical capability MUST get OK; Nomad
    client/pluginmanager/csimanager/volume.go (stageVolume): Nomad stages again for every claim
    unless the staging directory is already a mount point, and a refused stage fails the allocation.

    Given the plugin has created a volume
    And the volume is published to the node
    And the plugin has staged the volume
    When the harness stages the volume again
    Then the call succeeds

  @CSI-NODE-UNSTAGE-NO-VOLUME-ID @must @requires-node-STAGE_UNSTAGE_VOLUME
  Scenario: NodeUnstageVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeUnstageVolume: volume_id is REQUIRED. The level rests on
    the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls NodeUnstageVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-UNSTAGE-NO-PATH @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-volume @reads-shared-volume
  Scenario: NodeUnstageVolume without a staging path is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeUnstageVolume: staging_target_path is REQUIRED. The level
    rests on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given a volume, shared by the clauses that only read it
    When the harness calls NodeUnstageVolume without a staging target path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-UNSTAGE-IDEMPOTENT @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-volume @reads-shared-volume
  Scenario: NodeUnstageVolume of a volume that is not staged succeeds
    OK, or NOT_FOUND, which Nomad takes as done.

    Basis: CSI spec v1.12, NodeUnstageVolume: the call MUST be idempotent, and a volume not staged
    at the path gets OK; Nomad plugins/csi/client.go (NodeUnstageVolume) ignores NOT_FOUND as
    already done, while client/pluginmanager/csimanager/volume.go (unmountVolumeImpl) fails the
    unmount on any other error, which client/allocrunner/csi_hook.go (unmountWithRetry) retries
    for up to 24 hours.

    Given a volume, shared by the clauses that only read it
    When the harness unstages the volume
    Then the call succeeds or fails with NOT_FOUND

  @CSI-NODE-STAGE-UNKNOWN @should @requires-node-STAGE_UNSTAGE_VOLUME
  Scenario: NodeStageVolume of a volume that does not exist is refused with NOT_FOUND
    The spec's code for a volume that does not exist is NOT_FOUND. A SHOULD: Nomad fails the claim
    on any error here, and never sends this request to a plugin whose controller publishes (the
    controller's NOT_FOUND comes first), so the answer changes only the words an operator reads.

    Basis: CSI spec v1.12, NodeStageVolume Errors: "Volume does not exist", 5 NOT_FOUND; Nomad
    plugins/csi/client.go (NodeStageVolume) only rewords NOT_FOUND ("volume could not be found")
    and client/allocrunner/csi_hook.go (Prerun) fails the allocation on any error, so nothing in
    Nomad depends on the code.

    When the harness stages a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-NODE-UNSTAGE-UNKNOWN @must @requires-node-STAGE_UNSTAGE_VOLUME
  Scenario: NodeUnstageVolume of a volume that does not exist succeeds or reports NOT_FOUND
    A release whose volume is already gone (deleted out of band, or forgotten by the plugin) must
    get OK or NOT_FOUND, both of which Nomad takes as done.

    Basis: CSI spec v1.12, NodeUnstageVolume Errors: "Volume does not exist", 5 NOT_FOUND, and
    NodeUnstageVolume: a volume not staged gets OK; Nomad plugins/csi/client.go
    (NodeUnstageVolume) ignores NOT_FOUND as already done, while
    client/pluginmanager/csimanager/volume.go (unstageVolume, unmountVolumeImpl) fails the release
    on any other error, which client/allocrunner/csi_hook.go (unmountWithRetry) retries for up to
    24 hours, keeping the claim.

    When the harness unstages a volume that does not exist
    Then the call succeeds or fails with NOT_FOUND

  @CSI-NODE-PUBLISH-NO-VOLUME-ID @must
  Scenario: NodePublishVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodePublishVolume: volume_id is REQUIRED. The level rests on
    the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls NodePublishVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-PUBLISH-NO-TARGET @must @requires-volume
  Scenario: NodePublishVolume without a target path is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodePublishVolume: target_path is REQUIRED. The level rests on
    the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    When the harness calls NodePublishVolume without a target path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-PUBLISH-NO-CAPABILITY @must @requires-volume
  Scenario: NodePublishVolume without a volume capability is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodePublishVolume: volume_capability is REQUIRED. The level
    rests on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    When the harness calls NodePublishVolume without a volume capability
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-PUBLISH-NEEDS-STAGING @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-volume
  Scenario: NodePublishVolume without a staging path is refused when the plugin stages
    A plugin that advertises STAGE_UNSTAGE_VOLUME must refuse a publish with an empty
    staging_target_path: the NodePublishVolume error table names FAILED_PRECONDITION, and since the
    field must be set for such a plugin, INVALID_ARGUMENT (a missing required field) is as correct.
    Nomad always sends the staging path to such a plugin.

    Basis: CSI spec v1.12, NodePublishVolume Errors: a plugin with STAGE_UNSTAGE_VOLUME that gets no
    staging_target_path MUST return FAILED_PRECONDITION; CSI spec v1.12, NodePublishVolume and Error
    Scheme: the field MUST be set for such a plugin and a missing required field MUST get
    INVALID_ARGUMENT, so either code is a correct refusal. The level rests on the spec alone: Nomad
    always sends the staging path to a node plugin that stages.

    Given the plugin has created a volume
    And the volume is published to the node
    And the plugin has staged the volume
    When the harness publishes the volume for an allocation without a staging path
    Then the call fails with FAILED_PRECONDITION or INVALID_ARGUMENT

  @CSI-NODE-PUBLISH-MOUNTS @must @requires-volume
  Scenario: NodePublishVolume makes the volume writable at the target path
    Nomad bind-mounts the target path into the allocation's tasks: after NodePublishVolume it must
    hold the volume, writable, and a file written there must be there again at a new target after
    NodeUnpublishVolume and a new NodePublishVolume. What the staging path shows is left to the
    plugin.

    Basis: CSI spec v1.12, NodePublishVolume: for a mount access type the SP SHALL place the mounted
    directory at target_path and MUST ensure the CO can use the volume as the capability and
    readonly=false describe; CSI spec v1.12, Volume: the volume_id SHALL be what the CO uses in
    later calls to refer to this volume, so a new publish presents the same storage; Nomad
    client/pluginmanager/csimanager/volume.go (publishVolume) and
    client/allocrunner/taskrunner/volume_hook.go (prepareCSIVolumes): the host target path is
    bind-mounted into the tasks as their volume.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    When the harness publishes the volume for an allocation
    Then the call succeeds
    And a file can be written at the target path
    When the harness unpublishes the volume for the allocation
    And the harness publishes the volume for another allocation
    Then the call succeeds
    And the new target path holds the file written at the first

  @CSI-NODE-PUBLISH-IDEMPOTENT @must @requires-volume
  Scenario: NodePublishVolume is idempotent
    Basis: CSI spec v1.12, NodePublishVolume: the call MUST be idempotent, and a volume already
    published at the target path with a compatible capability and readonly flag MUST get OK. The
    level rests on the spec alone: Nomad does not publish again at a target that is already a mount
    point (client/pluginmanager/csimanager/volume.go, publishVolume).

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness publishes the volume for the same allocation again
    Then the call succeeds

  @CSI-NODE-PUBLISH-READONLY @must @requires-volume
  Scenario: a read-only publish is read-only
    A task that claims a volume read-only must not be able to write to it. The claim is made as
    Nomad makes a read claim: ControllerPublishVolume with readonly = true, NodeStageVolume at its
    own ro- staging path, NodePublishVolume with readonly = true.

    Basis: CSI spec v1.12, NodePublishVolume: readonly is REQUIRED and, when true, the SP MUST
    publish the volume read-only; Nomad nomad/csi_endpoint.go (Claim) sends readonly = true in
    ControllerPublishVolume for a read claim (even to a plugin without PUBLISH_READONLY, which may
    refuse it: then the clause is skipped), client/pluginmanager/csimanager/volume.go stages it at
    the claim's ro- usage path, and client/allocrunner/taskrunner/volume_hook.go
    (prepareCSIVolumes) also bind-mounts a read claim read-only into the tasks, so for file-system
    volumes the level rests on the spec, not on a Nomad failure.

    Given the plugin has created a volume
    And the volume is published to the node read-only
    And the volume is staged for the node read-only
    When the harness publishes the volume read-only for an allocation
    Then the call succeeds
    And the target path refuses writes

  @CSI-NODE-PUBLISH-SECOND-TARGET @should @requires-volume
  Scenario: a single-node-writer volume cannot be published at a second target
    A volume with a non-MULTI_NODE access mode published at one target path and requested at a
    different one should get FAILED_PRECONDITION: the spec's table of second-publish answers is a
    SHOULD, and Nomad never asks for this.

    Basis: CSI spec v1.12, NodePublishVolume: the table of answers to a second NodePublishVolume of
    a volume on the same node says the plugin SHOULD return FAILED_PRECONDITION for a non-MULTI_NODE
    access mode at another target path; Nomad nomad/structs/csi.go (claimRead, claimWrite) refuses a
    second claim of a single-node-writer volume, so it never sends this publish and does not depend
    on the refusal.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness publishes the volume for a second allocation
    Then the call fails with FAILED_PRECONDITION

  @CSI-NODE-UNPUBLISH-NO-VOLUME-ID @must
  Scenario: NodeUnpublishVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeUnpublishVolume: volume_id is REQUIRED. The level rests on
    the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls NodeUnpublishVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-UNPUBLISH-NO-TARGET @must @requires-volume @reads-shared-volume
  Scenario: NodeUnpublishVolume without a target path is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeUnpublishVolume: target_path is REQUIRED. The level rests
    on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given a volume, shared by the clauses that only read it
    When the harness calls NodeUnpublishVolume without a target path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-UNPUBLISH-REMOVES-TARGET @must @requires-volume
  Scenario: NodeUnpublishVolume unmounts and removes the target
    The plugin must undo what NodePublishVolume did: nothing stays mounted at the target path
    and the target it created is gone.

    Basis: CSI spec v1.12, NodeUnpublishVolume: the call MUST undo the work of NodePublishVolume,
    and the SP MUST delete the file or directory it created at target_path; Nomad
    client/pluginmanager/csimanager/volume.go (unpublishVolume) then removes the host target itself,
    which fails while it is still mounted, and client/allocrunner/csi_hook.go (unmountWithRetry)
    retries the unmount for up to 24 hours without unstaging.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness unpublishes the volume for the allocation
    Then the call succeeds
    And the target path is no longer mounted
    And the target path is gone

  @CSI-NODE-UNPUBLISH-IDEMPOTENT @must @requires-volume @reads-shared-volume
  Scenario: NodeUnpublishVolume of a target that is not published succeeds
    NodeUnpublishVolume MUST be idempotent: Nomad calls it again after any failure. OK, or
    NOT_FOUND (a node plugin that keeps no record of the volume cannot tell it from one that does
    not exist), which Nomad takes as done.

    Basis: CSI spec v1.12, NodeUnpublishVolume: the call MUST be idempotent; Nomad
    plugins/csi/client.go (NodeUnpublishVolume): NOT_FOUND is ignored as already done, any other
    error fails the unmount, which client/allocrunner/csi_hook.go (unmountWithRetry) retries for up
    to 24 hours.

    Given a volume, shared by the clauses that only read it
    When the harness unpublishes the volume for an allocation
    Then the call succeeds or fails with NOT_FOUND

  @CSI-NODE-UNPUBLISH-UNKNOWN @must
  Scenario: NodeUnpublishVolume of a volume that does not exist succeeds or reports NOT_FOUND
    A release whose volume is already gone (deleted out of band, or forgotten by the plugin), at a
    target path that no longer exists, must get OK or NOT_FOUND, both of which Nomad takes as done.

    Basis: CSI spec v1.12, NodeUnpublishVolume Errors: "Volume does not exist", 5 NOT_FOUND;
    Nomad plugins/csi/client.go (NodeUnpublishVolume) ignores NOT_FOUND as already done, while
    client/pluginmanager/csimanager/volume.go (unpublishVolume) returns any other error when the
    host target path is already gone, and client/allocrunner/csi_hook.go (unmountWithRetry)
    retries the release for up to 24 hours instead of treating it as done.

    When the harness unpublishes a volume that does not exist
    Then the call succeeds or fails with NOT_FOUND

  @CSI-NODE-STATS-NO-VOLUME-ID @must @requires-node-GET_VOLUME_STATS
  Scenario: NodeGetVolumeStats without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeGetVolumeStats: volume_id is REQUIRED. The level rests on
    the spec alone: Nomad never calls NodeGetVolumeStats.

    When the harness calls NodeGetVolumeStats without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STATS-NO-PATH @must @requires-node-GET_VOLUME_STATS @requires-volume @reads-shared-publication
  Scenario: NodeGetVolumeStats without a volume path is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeGetVolumeStats: volume_path is REQUIRED. The level rests
    on the spec alone: Nomad never calls NodeGetVolumeStats.

    Given a volume published for an allocation, shared by the clauses that only read it
    When the harness calls NodeGetVolumeStats without a volume path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STATS-UNKNOWN-VOLUME @must @requires-node-GET_VOLUME_STATS
  Scenario: NodeGetVolumeStats of a volume that does not exist is refused
    Basis: CSI spec v1.12, NodeGetVolumeStats Errors: a volume that does not exist on the given
    volume_path MUST get NOT_FOUND. The level rests on the spec alone: Nomad never calls
    NodeGetVolumeStats.

    When the harness asks for the stats of a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-NODE-STATS-WRONG-PATH @must @requires-node-GET_VOLUME_STATS @requires-volume @reads-shared-publication
  Scenario: NodeGetVolumeStats of a volume at a path where it is not published is refused
    The volume exists and is published, but not at the path asked about: NOT_FOUND, not the
    usage of whatever lives at that path.

    Basis: CSI spec v1.12, NodeGetVolumeStats Errors: a volume that does not exist on the given
    volume_path MUST get NOT_FOUND, even when it is published elsewhere. The level rests on the spec
    alone: Nomad never calls NodeGetVolumeStats.

    Given a volume published for an allocation, shared by the clauses that only read it
    When the harness asks for the stats of the volume at a path where it is not published
    Then the call fails with NOT_FOUND

  @CSI-NODE-STATS @must @requires-node-GET_VOLUME_STATS @requires-volume @reads-shared-publication
  Scenario: NodeGetVolumeStats reports usage of a published volume
    Basis: CSI spec v1.12, NodeGetVolumeStats: a plugin with GET_VOLUME_STATS MUST implement it;
    usage is OPTIONAL, but in each VolumeUsage total and unit are REQUIRED and available, total and
    used MUST NOT be negative. The level rests on the spec alone: Nomad never calls
    NodeGetVolumeStats.

    Given a volume published for an allocation, shared by the clauses that only read it
    When the harness asks for the stats of the volume at its target path
    Then the call succeeds
    And every usage entry has a unit and a total, and nothing negative
