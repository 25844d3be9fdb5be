@csi @requires-group
Feature: group snapshots
  The GroupController service cuts snapshots of several volumes at one moment. Nomad does not
  call it yet; the CSI spec's rules for it apply to every plugin that offers it.

  @CSI-GROUP-CAPABILITIES @must
  Scenario: GroupControllerGetCapabilities lists known capabilities
    When the harness calls GroupControllerGetCapabilities
    Then the call succeeds
    And every group controller capability is one the CSI spec defines

  @CSI-GROUP-CREATE-NO-NAME @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolumeGroupSnapshot without a name is refused
    Given the plugin has created a volume
    When the harness calls CreateVolumeGroupSnapshot without a name
    Then the call fails with INVALID_ARGUMENT

  @CSI-GROUP-CREATE-NO-SOURCES @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: CreateVolumeGroupSnapshot without source volumes is refused
    When the harness calls CreateVolumeGroupSnapshot without source volume IDs
    Then the call fails with INVALID_ARGUMENT

  @CSI-GROUP-CREATE-IDEMPOTENT @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolumeGroupSnapshot cuts one snapshot per volume, and again returns the same group
    Given the plugin has created a volume
    And the plugin has created a second volume
    When the harness creates a group snapshot of both volumes twice with one name
    Then both calls succeed with the same group snapshot
    And the group snapshot holds one snapshot of each volume, each naming the group

  @CSI-GROUP-GET @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: GetVolumeGroupSnapshot returns the group snapshot with the given ID
    Given the plugin has created a volume
    And the plugin has created a second volume
    And the plugin has created a group snapshot of both volumes
    And the plugin has created another group snapshot of the first volume
    When the harness gets the first group snapshot by its ID
    Then the call succeeds
    And the response holds the first group snapshot with its snapshots

  @CSI-GROUP-GET-NO-ID @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: GetVolumeGroupSnapshot without a group snapshot ID is refused
    When the harness calls GetVolumeGroupSnapshot without a group snapshot ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-GROUP-GET-UNKNOWN @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: GetVolumeGroupSnapshot of a group snapshot that does not exist is refused
    When the harness gets a group snapshot that does not exist
    Then the call fails with NOT_FOUND

  @CSI-GROUP-DELETE-NO-ID @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: DeleteVolumeGroupSnapshot without a group snapshot ID is refused
    When the harness calls DeleteVolumeGroupSnapshot without a group snapshot ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-GROUP-DELETE-UNKNOWN @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: DeleteVolumeGroupSnapshot of a group snapshot that does not exist succeeds
    When the harness deletes a group snapshot that does not exist
    Then the call succeeds

  @CSI-GROUP-DELETE @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: DeleteVolumeGroupSnapshot removes the group snapshot
    Given the plugin has created a volume
    And the plugin has created a group snapshot of the volume
    When the harness deletes the group snapshot
    Then the call succeeds
    And getting the group snapshot fails with NOT_FOUND
