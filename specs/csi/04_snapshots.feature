@csi @requires-controller
Feature: snapshots
  Nomad creates, lists and deletes snapshots (`nomad volume snapshot`) through the Controller
  service when the plugin advertises CREATE_DELETE_SNAPSHOT and LIST_SNAPSHOTS.

  @CSI-SNAPSHOT-CREATE-NO-NAME @must @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot without a name is refused
    Given the plugin has created a volume
    When the harness calls CreateSnapshot without a name
    Then the call fails with INVALID_ARGUMENT

  @CSI-SNAPSHOT-CREATE-NO-SOURCE @must @requires-CREATE_DELETE_SNAPSHOT
  Scenario: CreateSnapshot without a source volume is refused
    When the harness calls CreateSnapshot without a source volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-SNAPSHOT-CREATE @must @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot cuts a snapshot of a volume
    Given the plugin has created a volume
    When the harness creates a snapshot of the volume
    Then the call succeeds
    And the snapshot has an ID, the volume as its source and a creation time

  @CSI-SNAPSHOT-CREATE-IDEMPOTENT @must @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot with an existing name and the same source returns the same snapshot
    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness creates a snapshot of the volume with the same name again
    Then the call succeeds
    And the response holds the same snapshot

  @CSI-SNAPSHOT-CREATE-NAME-CONFLICT @must @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot with an existing name and another source is refused
    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    And the plugin has created a second volume
    When the harness creates a snapshot with the same name of the second volume
    Then the call fails with ALREADY_EXISTS

  @CSI-SNAPSHOT-CREATE-LONG-NAME @should @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot accepts a name of the maximum length
    Given the plugin has created a volume
    When the harness creates a snapshot of the volume with a 128-character name
    Then the call succeeds

  @CSI-SNAPSHOT-DELETE-NO-ID @must @requires-CREATE_DELETE_SNAPSHOT
  Scenario: DeleteSnapshot without a snapshot ID is refused
    When the harness calls DeleteSnapshot without a snapshot ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-SNAPSHOT-DELETE-UNKNOWN @must @requires-CREATE_DELETE_SNAPSHOT
  Scenario: DeleteSnapshot of a snapshot that does not exist succeeds
    When the harness deletes a snapshot that does not exist
    Then the call succeeds

  @CSI-SNAPSHOT-LIST @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: ListSnapshots shows new snapshots
    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness lists every snapshot
    Then the list holds the snapshot

  @CSI-SNAPSHOT-LIST-BY-ID @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: ListSnapshots filtered by snapshot ID returns that snapshot only
    Given the plugin has created a volume
    And the plugin has created 2 snapshots of the volume
    When the harness lists the snapshots with the first snapshot's ID
    Then the list holds exactly the first snapshot

  @CSI-SNAPSHOT-LIST-UNKNOWN-ID @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: ListSnapshots filtered by an unknown snapshot ID returns nothing
    A filter that matches nothing gives an empty list, even when other snapshots exist.

    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness lists the snapshots with a snapshot ID that does not exist
    Then the call succeeds
    And the list is empty

  @CSI-SNAPSHOT-LIST-BY-SOURCE @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: ListSnapshots filtered by source volume returns that volume's snapshots only
    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    And the plugin has created a second volume
    And the plugin has created a snapshot of the second volume
    When the harness lists the snapshots of the first volume
    Then every listed snapshot has the first volume as its source
    And the list holds the first snapshot

  @CSI-SNAPSHOT-LIST-UNKNOWN-SOURCE @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: ListSnapshots filtered by an unknown source volume returns nothing
    A filter that matches nothing gives an empty list, even when other snapshots exist.

    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness lists the snapshots of a volume that does not exist
    Then the call succeeds
    And the list is empty

  @CSI-SNAPSHOT-LIST-PAGINATION @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME @serial
  Scenario: ListSnapshots honours max_entries and next_token
    Given the plugin has created a volume
    And the plugin has created 3 snapshots of the volume
    When the harness lists the snapshots one page of 1 at a time
    Then every page holds at most 1 entry
    And the pages together hold every snapshot once

  @CSI-SNAPSHOT-LIST-BAD-TOKEN @must @requires-LIST_SNAPSHOTS
  Scenario: ListSnapshots with an invalid starting token is refused
    When the harness lists snapshots from an invalid starting token
    Then the call fails with ABORTED

  @CSI-SNAPSHOT-GET-NO-ID @must @requires-GET_SNAPSHOT
  Scenario: GetSnapshot without a snapshot ID is refused
    When the harness calls GetSnapshot without a snapshot ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-SNAPSHOT-GET @must @requires-GET_SNAPSHOT @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: GetSnapshot returns the snapshot with the given ID
    Other snapshots exist beside it: the answer must be the one asked for.

    Given the plugin has created a volume
    And the plugin has created 3 snapshots of the volume
    When the harness gets the second snapshot by its ID
    Then the call succeeds
    And the response holds the second snapshot, with the volume as its source and a creation time

  @CSI-SNAPSHOT-GET-UNKNOWN @must @requires-GET_SNAPSHOT
  Scenario: GetSnapshot of a snapshot that does not exist is refused
    When the harness gets a snapshot that does not exist
    Then the call fails with NOT_FOUND
