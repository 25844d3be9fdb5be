@csi @requires-controller
Feature: controller
  The Controller service creates and deletes volumes and attaches them to nodes. Nomad calls it
  from the client that runs the controller plugin, with a 2-minute context per call.

  @CSI-CONTROLLER-CAPABILITIES @must
  Scenario: ControllerGetCapabilities succeeds
    Nomad asks for the controller's capabilities on every fingerprint.

    When the harness calls ControllerGetCapabilities
    Then the call succeeds

  @CSI-CONTROLLER-CREATE-NO-NAME @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume without a name is refused
    The name is REQUIRED; a missing required field is INVALID_ARGUMENT.

    When the harness calls CreateVolume without a name
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-CREATE-NO-CAPABILITIES @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume without volume capabilities is refused
    volume_capabilities is REQUIRED; a missing required field is INVALID_ARGUMENT.

    When the harness calls CreateVolume without volume capabilities
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-CREATE @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume makes a volume
    The response carries the volume, with a non-empty volume_id that Nomad stores as the
    volume's external ID.

    When the harness creates a volume
    Then the call succeeds
    And the response holds a volume with a non-empty ID

  @CSI-CONTROLLER-CREATE-CAPACITY @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume honours the capacity range
    A volume created with a capacity range has a capacity of at least required_bytes and, when
    a limit is set, at most limit_bytes (0 means unknown).

    When the harness creates a volume with a capacity range
    Then the call succeeds
    And the volume's capacity lies within the requested range

  @CSI-CONTROLLER-CREATE-IDEMPOTENT @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume with an existing name and the same capacity returns the same volume
    CreateVolume must be idempotent: the CO retries it after any failure or timeout.

    Given the plugin has created a volume
    When the harness creates a volume with the same name and capacity again
    Then the call succeeds
    And the response holds the same volume

  @CSI-CONTROLLER-CREATE-NAME-CONFLICT @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume with an existing name and an incompatible capacity is refused
    A volume with the same name that is not compatible with the request is ALREADY_EXISTS.

    Given the plugin has created a volume
    When the harness creates a volume with the same name and a larger capacity
    Then the call fails with ALREADY_EXISTS

  @CSI-CONTROLLER-CREATE-LONG-NAME @should @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume accepts a name of the maximum length
    Strings may be up to 128 bytes long.

    When the harness creates a volume with a 128-character name
    Then the call succeeds

  @CSI-CONTROLLER-CREATE-FROM-SNAPSHOT @must @requires-CREATE_DELETE_VOLUME @requires-CREATE_DELETE_SNAPSHOT
  Scenario: CreateVolume from a snapshot
    A volume_content_source naming an existing snapshot creates a volume from it.

    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness creates a volume from the snapshot
    Then the call succeeds
    And the volume's content source is the snapshot

  @CSI-CONTROLLER-CREATE-FROM-MISSING-SNAPSHOT @must @requires-CREATE_DELETE_VOLUME @requires-CREATE_DELETE_SNAPSHOT
  Scenario: CreateVolume from a snapshot that does not exist is refused
    A content source that does not exist is NOT_FOUND.

    When the harness creates a volume from a snapshot that does not exist
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-CREATE-FROM-VOLUME @must @requires-CREATE_DELETE_VOLUME @requires-CLONE_VOLUME
  Scenario: CreateVolume from another volume
    A volume_content_source naming an existing volume clones it.

    Given the plugin has created a volume
    When the harness creates a volume from that volume
    Then the call succeeds
    And the volume's content source is the first volume

  @CSI-CONTROLLER-CREATE-FROM-MISSING-VOLUME @must @requires-CREATE_DELETE_VOLUME @requires-CLONE_VOLUME
  Scenario: CreateVolume from a volume that does not exist is refused
    A content source that does not exist is NOT_FOUND.

    When the harness creates a volume from a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-DELETE-NO-ID @must @requires-CREATE_DELETE_VOLUME
  Scenario: DeleteVolume without a volume ID is refused
    When the harness calls DeleteVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-DELETE-UNKNOWN @must @requires-CREATE_DELETE_VOLUME
  Scenario: DeleteVolume of a volume that does not exist succeeds
    A volume that is already gone counts as deleted: DeleteVolume must be idempotent.

    When the harness deletes a volume that does not exist
    Then the call succeeds

  @CSI-CONTROLLER-DELETE @must @requires-CREATE_DELETE_VOLUME
  Scenario: DeleteVolume deletes a volume
    Given the plugin has created a volume
    When the harness deletes the volume
    Then the call succeeds
    And the volume is no longer listed

  @CSI-CONTROLLER-VALIDATE-NO-ID @must
  Scenario: ValidateVolumeCapabilities without a volume ID is refused
    When the harness calls ValidateVolumeCapabilities without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-VALIDATE-NO-CAPABILITIES @must @requires-CREATE_DELETE_VOLUME
  Scenario: ValidateVolumeCapabilities without capabilities is refused
    Given the plugin has created a volume
    When the harness calls ValidateVolumeCapabilities without volume capabilities
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-VALIDATE @must @requires-CREATE_DELETE_VOLUME
  Scenario: ValidateVolumeCapabilities confirms the capabilities a volume was created with
    Nomad calls it when a volume is registered and compares what is confirmed with what it asked.

    Given the plugin has created a volume
    When the harness validates the volume's own capabilities
    Then the call succeeds
    And the capabilities are confirmed

  @CSI-CONTROLLER-VALIDATE-UNKNOWN @must
  Scenario: ValidateVolumeCapabilities of a volume that does not exist is refused
    When the harness validates the capabilities of a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-PUBLISH-NO-VOLUME-ID @must @requires-PUBLISH_UNPUBLISH_VOLUME
  Scenario: ControllerPublishVolume without a volume ID is refused
    When the harness calls ControllerPublishVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-PUBLISH-NO-NODE-ID @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerPublishVolume without a node ID is refused
    Given the plugin has created a volume
    When the harness calls ControllerPublishVolume without a node ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-PUBLISH-NO-CAPABILITY @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerPublishVolume without a volume capability is refused
    Given the plugin has created a volume
    When the harness calls ControllerPublishVolume without a volume capability
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-PUBLISH-UNKNOWN-VOLUME @must @requires-PUBLISH_UNPUBLISH_VOLUME
  Scenario: ControllerPublishVolume of a volume that does not exist is refused
    When the harness publishes a volume that does not exist to the node
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-PUBLISH-UNKNOWN-NODE @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerPublishVolume to a node that does not exist is refused
    Given the plugin has created a volume
    When the harness publishes the volume to a node that does not exist
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-PUBLISH-IDEMPOTENT @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerPublishVolume is idempotent
    Publishing a volume again to the same node with the same capability succeeds with the same
    publish context.

    Given the plugin has created a volume
    And the plugin has published the volume to the node
    When the harness publishes the volume to the node again
    Then the call succeeds
    And the publish context is the same as the first time

  @CSI-CONTROLLER-PUBLISH-INCOMPATIBLE @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerPublishVolume again with an incompatible capability is refused
    A volume already published to the node with another read-only setting is ALREADY_EXISTS.

    Given the plugin has created a volume
    And the plugin has published the volume to the node
    When the harness publishes the volume to the node again read-only
    Then the call fails with ALREADY_EXISTS

  @CSI-CONTROLLER-UNPUBLISH-NO-VOLUME-ID @must @requires-PUBLISH_UNPUBLISH_VOLUME
  Scenario: ControllerUnpublishVolume without a volume ID is refused
    When the harness calls ControllerUnpublishVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-UNPUBLISH-IDEMPOTENT @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerUnpublishVolume of a volume that is not published succeeds
    A volume that is not attached counts as unpublished.

    Given the plugin has created a volume
    When the harness unpublishes the volume from the node
    Then the call succeeds

  @CSI-CONTROLLER-LIST @must @requires-LIST_VOLUMES @requires-CREATE_DELETE_VOLUME
  Scenario: ListVolumes shows new volumes and not deleted ones
    Given the plugin has created a volume
    When the harness lists every volume
    Then the list holds the volume
    When the harness deletes the volume
    And the harness lists every volume
    Then the list does not hold the volume

  @CSI-CONTROLLER-LIST-PAGINATION @must @requires-LIST_VOLUMES @requires-CREATE_DELETE_VOLUME @serial
  Scenario: ListVolumes honours max_entries and next_token
    Given the plugin has created 3 volumes
    When the harness lists the volumes one page of 1 at a time
    Then every page holds at most 1 entry
    And the pages together hold every volume once

  @CSI-CONTROLLER-LIST-BAD-TOKEN @must @requires-LIST_VOLUMES
  Scenario: ListVolumes with an invalid starting token is refused
    An invalid starting_token is ABORTED.

    When the harness lists volumes from an invalid starting token
    Then the call fails with ABORTED

  @CSI-CONTROLLER-GET-CAPACITY @must @requires-GET_CAPACITY
  Scenario: GetCapacity succeeds
    When the harness calls GetCapacity
    Then the call succeeds
    And the available capacity is not negative

  @CSI-CONTROLLER-ERROR-DETAILS @must @requires-CREATE_DELETE_VOLUME
  Scenario: error statuses carry no details
    The status of a failed call MUST have an empty details list, and its message must say what
    went wrong.

    When the harness calls CreateVolume without a name
    Then the call fails with INVALID_ARGUMENT
    And the error has a message and no details
