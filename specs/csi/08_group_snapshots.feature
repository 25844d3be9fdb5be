@csi @requires-group
Feature: group snapshots
  The GroupController service cuts snapshots of several volumes at one moment. Nomad does not
  call it yet; the CSI spec's rules for it apply to every plugin that offers it.

  Background:
    Given Nomad has found the plugin ready

  @CSI-GROUP-CAPABILITIES @must
  Scenario: GroupControllerGetCapabilities succeeds
    Basis: CSI spec v1.12, GroupControllerGetCapabilities: a plugin that implements the
    GroupController MUST implement it. The level rests on the spec alone: Nomad never calls the
    GroupController service.

    When the harness calls GroupControllerGetCapabilities
    Then the call succeeds

  @CSI-GROUP-CREATE-NO-NAME @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT @requires-CREATE_DELETE_VOLUME @reads-shared-volume
  Scenario: CreateVolumeGroupSnapshot without a name is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, CreateVolumeGroupSnapshot: name is REQUIRED. The level rests
    on the spec alone: Nomad never calls the GroupController service.

    Given a volume, shared by the clauses that only read it
    When the harness calls CreateVolumeGroupSnapshot without a name
    Then the call fails with INVALID_ARGUMENT

  @CSI-GROUP-CREATE-NO-SOURCES @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: CreateVolumeGroupSnapshot without source volumes is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, CreateVolumeGroupSnapshot: source_volume_ids is REQUIRED (a
    REQUIRED repeated field MUST hold at least one element). The level rests on the spec alone:
    Nomad never calls the GroupController service.

    When the harness calls CreateVolumeGroupSnapshot without source volume IDs
    Then the call fails with INVALID_ARGUMENT

  @CSI-GROUP-CREATE-IDEMPOTENT @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolumeGroupSnapshot cuts one snapshot per volume, and again returns the same group
    Basis: CSI spec v1.12, CreateVolumeGroupSnapshot: the call MUST be idempotent and the group
    snapshot MUST be created only once for one name, source list and parameters;
    VolumeGroupSnapshot: group_snapshot_id, snapshots and creation_time are REQUIRED, and Snapshot:
    inside a group, a member's group_snapshot_id MUST be the group's. The level rests on the spec
    alone: Nomad never calls the GroupController service.

    Given the plugin has created a volume
    And the plugin has created a second volume
    When the harness creates a group snapshot of both volumes twice with one name
    Then both calls succeed with the same group snapshot
    And the group snapshot holds one snapshot of each volume, none naming another group

  @CSI-GROUP-GET @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: GetVolumeGroupSnapshot returns the group snapshot with the given ID
    Basis: CSI spec v1.12, GetVolumeGroupSnapshot: a plugin with
    CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT MUST implement it, and the REQUIRED group_snapshot of
    its reply is the one asked for, with its REQUIRED snapshots. The level rests on the spec alone:
    Nomad never calls the GroupController service.

    Given the plugin has created a volume
    And the plugin has created a second volume
    And the plugin has created a group snapshot of both volumes
    And the plugin has created another group snapshot of the first volume
    When the harness gets the first group snapshot by its ID
    Then the call succeeds
    And the response holds the first group snapshot with its snapshots

  @CSI-GROUP-GET-NO-ID @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: GetVolumeGroupSnapshot without a group snapshot ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, GetVolumeGroupSnapshot: group_snapshot_id is REQUIRED. The
    level rests on the spec alone: Nomad never calls the GroupController service.

    When the harness calls GetVolumeGroupSnapshot without a group snapshot ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-GROUP-GET-UNKNOWN @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: GetVolumeGroupSnapshot of a group snapshot that does not exist is refused
    Basis: CSI spec v1.12, GetVolumeGroupSnapshot Errors: a group snapshot that does not exist MUST
    get NOT_FOUND. The level rests on the spec alone: Nomad never calls the GroupController service.

    When the harness gets a group snapshot that does not exist
    Then the call fails with NOT_FOUND

  @CSI-GROUP-DELETE-NO-ID @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: DeleteVolumeGroupSnapshot without a group snapshot ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, DeleteVolumeGroupSnapshot: group_snapshot_id is REQUIRED. The
    level rests on the spec alone: Nomad never calls the GroupController service.

    When the harness calls DeleteVolumeGroupSnapshot without a group snapshot ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-GROUP-DELETE-UNKNOWN @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
  Scenario: DeleteVolumeGroupSnapshot of a group snapshot that does not exist succeeds
    Basis: CSI spec v1.12, DeleteVolumeGroupSnapshot: the call MUST be idempotent, and a group
    snapshot that does not exist MUST be answered with OK. The level rests on the spec alone: Nomad
    never calls the GroupController service.

    When the harness deletes a group snapshot that does not exist
    Then the call succeeds

  @CSI-GROUP-DELETE @must @requires-group-CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: DeleteVolumeGroupSnapshot removes the group snapshot
    Basis: CSI spec v1.12, DeleteVolumeGroupSnapshot: a plugin with
    CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT MUST implement it, and it deletes the group with its
    snapshots; CSI spec v1.12, GetVolumeGroupSnapshot Errors: a group snapshot that does not exist
    MUST get NOT_FOUND. The level rests on the spec alone: Nomad never calls the GroupController
    service.

    Given the plugin has created a volume
    And the plugin has created a group snapshot of the volume
    When the harness deletes the group snapshot
    Then the call succeeds
    And getting the group snapshot fails with NOT_FOUND
