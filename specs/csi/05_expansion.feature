@csi
Feature: expansion
  `nomad volume create` with a larger capacity on an existing volume expands it: Nomad calls
  ControllerExpandVolume, and NodeExpandVolume on the node when the controller says it is
  needed.

  @CSI-EXPAND-CONTROLLER-NO-ID @must @requires-EXPAND_VOLUME
  Scenario: ControllerExpandVolume without a volume ID is refused
    When the harness calls ControllerExpandVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-EXPAND-CONTROLLER-NO-CAPACITY @must @requires-EXPAND_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerExpandVolume without a capacity range is refused
    Given the plugin has created a volume
    When the harness calls ControllerExpandVolume without a capacity range
    Then the call fails with INVALID_ARGUMENT

  @CSI-EXPAND-CONTROLLER-UNKNOWN @must @requires-EXPAND_VOLUME
  Scenario: ControllerExpandVolume of a volume that does not exist is refused
    When the harness expands a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-EXPAND-CONTROLLER @must @requires-EXPAND_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerExpandVolume grows a volume
    Given the plugin has created a volume
    When the harness expands the volume to twice its size
    Then the call succeeds
    And the reported capacity is at least the requested size

  @CSI-EXPAND-CONTROLLER-IDEMPOTENT @should @requires-EXPAND_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerExpandVolume to a size the volume already has succeeds
    A volume already at least as large as requested SHOULD give OK, without shrinking.

    Given the plugin has created a volume
    And the plugin has expanded the volume to twice its size
    When the harness expands the volume to its original size
    Then the call succeeds
    And the reported capacity is at least twice the original size

  @CSI-EXPAND-NODE-NO-ID @must @requires-node-EXPAND_VOLUME
  Scenario: NodeExpandVolume without a volume ID is refused
    When the harness calls NodeExpandVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-EXPAND-NODE-NO-PATH @must @requires-node-EXPAND_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: NodeExpandVolume without a volume path is refused
    Given the plugin has created a volume
    When the harness calls NodeExpandVolume without a volume path
    Then the call fails with INVALID_ARGUMENT

  @CSI-EXPAND-NODE-UNKNOWN @must @requires-node-EXPAND_VOLUME
  Scenario: NodeExpandVolume of a volume that does not exist is refused
    When the harness expands a volume that does not exist on the node
    Then the call fails with NOT_FOUND

  @CSI-EXPAND-NODE @must @requires-node-EXPAND_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: NodeExpandVolume after publishing
    Nomad calls NodeExpandVolume with the per-allocation target path as volume_path.

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness expands the published volume on the node
    Then the call succeeds
