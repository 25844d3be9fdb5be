@csi
Feature: node
  The Node service mounts volumes on the client: NodeStageVolume once per volume and node into
  Nomad's staging directory, NodePublishVolume once per allocation into its per-allocation
  target, and the reverse when allocations stop.

  @CSI-NODE-CAPABILITIES @must
  Scenario: NodeGetCapabilities succeeds
    Nomad asks for the node's capabilities on every fingerprint, and latches STAGE_UNSTAGE_VOLUME
    from the first successful answer.

    When the harness calls NodeGetCapabilities
    Then the call succeeds

  @CSI-NODE-INFO @must
  Scenario: NodeGetInfo names the node
    node_id is REQUIRED (at most 256 bytes): Nomad refuses an empty one and sends it to the
    controller in every ControllerPublishVolume. max_volumes_per_node must not be negative, and
    accessible_topology requires the VOLUME_ACCESSIBILITY_CONSTRAINTS capability.

    When the harness calls NodeGetInfo
    Then the call succeeds
    And the node ID is not empty and at most 256 bytes long
    And max_volumes_per_node is not negative
    And a topology is reported only with the VOLUME_ACCESSIBILITY_CONSTRAINTS capability

  @CSI-NODE-STAGE-NO-VOLUME-ID @must @requires-node-STAGE_UNSTAGE_VOLUME
  Scenario: NodeStageVolume without a volume ID is refused
    When the harness calls NodeStageVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STAGE-NO-PATH @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: NodeStageVolume without a staging path is refused
    Given the plugin has created a volume
    When the harness calls NodeStageVolume without a staging target path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STAGE-NO-CAPABILITY @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: NodeStageVolume without a volume capability is refused
    Given the plugin has created a volume
    When the harness calls NodeStageVolume without a volume capability
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STAGE-IDEMPOTENT @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: NodeStageVolume is idempotent
    Staging a volume again at the same path with the same capability succeeds.

    Given the plugin has created a volume
    And the volume is published to the node
    And the plugin has staged the volume
    When the harness stages the volume again
    Then the call succeeds

  @CSI-NODE-UNSTAGE-NO-VOLUME-ID @must @requires-node-STAGE_UNSTAGE_VOLUME
  Scenario: NodeUnstageVolume without a volume ID is refused
    When the harness calls NodeUnstageVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-UNSTAGE-NO-PATH @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: NodeUnstageVolume without a staging path is refused
    Given the plugin has created a volume
    When the harness calls NodeUnstageVolume without a staging target path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-UNSTAGE-IDEMPOTENT @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: NodeUnstageVolume of a volume that is not staged succeeds
    Given the plugin has created a volume
    When the harness unstages the volume
    Then the call succeeds

  @CSI-NODE-PUBLISH-NO-VOLUME-ID @must
  Scenario: NodePublishVolume without a volume ID is refused
    When the harness calls NodePublishVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-PUBLISH-NO-TARGET @must @requires-CREATE_DELETE_VOLUME
  Scenario: NodePublishVolume without a target path is refused
    Given the plugin has created a volume
    When the harness calls NodePublishVolume without a target path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-PUBLISH-NO-CAPABILITY @must @requires-CREATE_DELETE_VOLUME
  Scenario: NodePublishVolume without a volume capability is refused
    Given the plugin has created a volume
    When the harness calls NodePublishVolume without a volume capability
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-PUBLISH-NEEDS-STAGING @must @requires-node-STAGE_UNSTAGE_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: NodePublishVolume without a staging path is refused when the plugin stages
    A plugin that advertises STAGE_UNSTAGE_VOLUME must refuse a publish with an empty
    staging_target_path with FAILED_PRECONDITION.

    Given the plugin has created a volume
    And the volume is published to the node
    And the plugin has staged the volume
    When the harness publishes the volume for an allocation without a staging path
    Then the call fails with FAILED_PRECONDITION

  @CSI-NODE-PUBLISH-MOUNTS @must @requires-CREATE_DELETE_VOLUME
  Scenario: NodePublishVolume mounts the volume at the target path
    Nomad bind-mounts the target path into the allocation's tasks: it must be a mount showing
    the volume's data.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    When the harness publishes the volume for an allocation
    Then the call succeeds
    And the target path is a mount point
    And a file written at the target path is kept by the volume

  @CSI-NODE-PUBLISH-IDEMPOTENT @must @requires-CREATE_DELETE_VOLUME
  Scenario: NodePublishVolume is idempotent
    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness publishes the volume for the same allocation again
    Then the call succeeds

  @CSI-NODE-PUBLISH-READONLY @should @requires-CREATE_DELETE_VOLUME
  Scenario: a read-only publish is read-only
    A task that claims a volume read-only must not be able to write to it.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    When the harness publishes the volume read-only for an allocation
    Then the call succeeds
    And the target path refuses writes

  @CSI-NODE-PUBLISH-SECOND-TARGET @must @requires-CREATE_DELETE_VOLUME
  Scenario: a single-node-writer volume cannot be published at a second target
    A volume with a non-MULTI_NODE access mode published at one target path and requested at a
    different one is FAILED_PRECONDITION.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness publishes the volume for a second allocation
    Then the call fails with FAILED_PRECONDITION

  @CSI-NODE-UNPUBLISH-NO-VOLUME-ID @must
  Scenario: NodeUnpublishVolume without a volume ID is refused
    When the harness calls NodeUnpublishVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-UNPUBLISH-NO-TARGET @must @requires-CREATE_DELETE_VOLUME
  Scenario: NodeUnpublishVolume without a target path is refused
    Given the plugin has created a volume
    When the harness calls NodeUnpublishVolume without a target path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-UNPUBLISH-REMOVES-TARGET @must @requires-CREATE_DELETE_VOLUME
  Scenario: NodeUnpublishVolume unmounts and removes the target
    The plugin must undo what NodePublishVolume did: nothing stays mounted at the target path
    and the target it created is gone.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness unpublishes the volume for the allocation
    Then the call succeeds
    And the target path is no longer mounted
    And the target path is gone

  @CSI-NODE-UNPUBLISH-IDEMPOTENT @must @requires-CREATE_DELETE_VOLUME
  Scenario: NodeUnpublishVolume of a target that is not published succeeds
    NodeUnpublishVolume MUST be idempotent: Nomad calls it again after any failure.

    Given the plugin has created a volume
    When the harness unpublishes the volume for an allocation
    Then the call succeeds

  @CSI-NODE-STATS-NO-VOLUME-ID @must @requires-node-GET_VOLUME_STATS
  Scenario: NodeGetVolumeStats without a volume ID is refused
    When the harness calls NodeGetVolumeStats without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STATS-NO-PATH @must @requires-node-GET_VOLUME_STATS @requires-CREATE_DELETE_VOLUME
  Scenario: NodeGetVolumeStats without a volume path is refused
    Given the plugin has created a volume
    When the harness calls NodeGetVolumeStats without a volume path
    Then the call fails with INVALID_ARGUMENT

  @CSI-NODE-STATS-UNKNOWN-VOLUME @must @requires-node-GET_VOLUME_STATS
  Scenario: NodeGetVolumeStats of a volume that does not exist is refused
    When the harness asks for the stats of a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-NODE-STATS-WRONG-PATH @must @requires-node-GET_VOLUME_STATS @requires-CREATE_DELETE_VOLUME
  Scenario: NodeGetVolumeStats of a volume at a path where it is not published is refused
    The volume exists and is published, but not at the path asked about: NOT_FOUND, not the
    usage of whatever lives at that path.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness asks for the stats of the volume at a path where it is not published
    Then the call fails with NOT_FOUND

  @CSI-NODE-STATS @must @requires-node-GET_VOLUME_STATS @requires-CREATE_DELETE_VOLUME
  Scenario: NodeGetVolumeStats reports usage of a published volume
    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness asks for the stats of the volume at its target path
    Then the call succeeds
    And the usage has a total and is not negative
