@csi @requires-controller
Feature: snapshots
  Nomad creates, lists and deletes snapshots (`nomad volume snapshot`) through the Controller
  service when the plugin advertises CREATE_DELETE_SNAPSHOT and LIST_SNAPSHOTS.

  Background:
    Given Nomad has found the plugin ready

  @CSI-SNAPSHOT-CREATE-NO-NAME @must @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME @reads-shared-volume
  Scenario: CreateSnapshot without a name is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, CreateSnapshot: name is REQUIRED. The level rests on the spec
    alone: Nomad never sends such a request (it fills or checks the field itself).

    Given a volume, shared by the clauses that only read it
    When the harness calls CreateSnapshot without a name
    Then the call fails with INVALID_ARGUMENT

  @CSI-SNAPSHOT-CREATE-NO-SOURCE @must @requires-CREATE_DELETE_SNAPSHOT
  Scenario: CreateSnapshot without a source volume is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, CreateSnapshot: source_volume_id is REQUIRED. The level rests
    on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls CreateSnapshot without a source volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-SNAPSHOT-CREATE @must @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot cuts a snapshot of a volume
    Basis: CSI spec v1.12, CreateSnapshot: the response's snapshot is REQUIRED, and its snapshot_id,
    source_volume_id and creation_time are REQUIRED; Nomad plugins/csi/client.go
    (ControllerCreateSnapshot) reports the ID, the source and the creation time to the user of
    `nomad volume snapshot create`. The level rests on the spec alone: Nomad only shows what the
    reply says.

    Given the plugin has created a volume
    When the harness creates a snapshot of the volume
    Then the call succeeds
    And the snapshot has an ID, the volume as its source and a creation time

  @CSI-SNAPSHOT-CREATE-IDEMPOTENT @must @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot with an existing name and the same source returns the same snapshot
    Basis: CSI spec v1.12, CreateSnapshot: the call MUST be idempotent, and a snapshot already cut
    and ready under the name MUST be answered with OK and that snapshot (one still being processed
    SHOULD be answered with OK and ready_to_use false). The level rests on the spec alone: Nomad
    sends CreateSnapshot once per `nomad volume snapshot create`, and any error fails it alike.

    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness creates a snapshot of the volume with the same name again
    Then the call succeeds
    And the response holds the same snapshot

  @CSI-SNAPSHOT-CREATE-NAME-CONFLICT @must @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot with an existing name and another source is refused
    Basis: CSI spec v1.12, CreateSnapshot Errors: a snapshot that exists under the name but for
    another source volume MUST get ALREADY_EXISTS. The level rests on the spec alone: Nomad sends
    CreateSnapshot once per `nomad volume snapshot create`, and any error fails it alike.

    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    And the plugin has created a second volume
    When the harness creates a snapshot with the same name of the second volume
    Then the call fails with ALREADY_EXISTS

  @CSI-SNAPSHOT-CREATE-LONG-NAME @should @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: CreateSnapshot accepts a name of the maximum length
    Basis: CSI spec v1.12, Size Limits and CreateSnapshot: strings SHALL NOT exceed 128 bytes and
    the name field describes any string within that limit (control characters aside) as allowed, but
    no RFC 2119 keyword obliges a plugin to accept one; Nomad nomad/csi_endpoint.go (CreateSnapshot)
    passes the user's snapshot name through. Kept at SHOULD.

    Given the plugin has created a volume
    When the harness creates a snapshot of the volume with a 128-character name
    Then the call succeeds

  @CSI-SNAPSHOT-DELETE-NO-ID @must @requires-CREATE_DELETE_SNAPSHOT
  Scenario: DeleteSnapshot without a snapshot ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, DeleteSnapshot: snapshot_id is REQUIRED. The level rests on
    the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls DeleteSnapshot without a snapshot ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-SNAPSHOT-DELETE-UNKNOWN @must @requires-CREATE_DELETE_SNAPSHOT
  Scenario: DeleteSnapshot of a snapshot that does not exist succeeds
    Basis: CSI spec v1.12, DeleteSnapshot: the call MUST be idempotent, and a snapshot that does not
    exist MUST be answered with OK; Nomad nomad/csi_endpoint.go (DeleteSnapshot): any error fails
    `nomad volume snapshot delete`.

    When the harness deletes a snapshot that does not exist
    Then the call succeeds

  @CSI-SNAPSHOT-LIST @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME @serial
  Scenario: ListSnapshots shows new snapshots
    Run alone, so that no other clause cuts or deletes a snapshot during the listing: the list must
    hold this clause's snapshot and every other snapshot the run cut and has not asked to delete,
    wherever the plugin puts them.

    Basis: CSI spec v1.12, ListSnapshots: the plugin SHALL return every snapshot on the storage
    system within the request's parameters, however it was created; Nomad nomad/csi_endpoint.go
    (ListSnapshots) lists them, unfiltered, for `nomad volume snapshot list`. The level rests on the
    spec alone: Nomad lists snapshots, unfiltered, only to show them (`nomad volume snapshot list`);
    no claim depends on the answer.

    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness lists every snapshot
    Then the list holds the snapshot

  @CSI-SNAPSHOT-LIST-BY-ID @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: ListSnapshots filtered by snapshot ID returns that snapshot only
    Basis: CSI spec v1.12, ListSnapshots: the plugin SHALL return the snapshots within the request's
    parameters, and a snapshot_id narrows the list to that one snapshot. The level rests on the spec
    alone: Nomad lists snapshots, unfiltered, only to show them (`nomad volume snapshot list`); no
    claim depends on the answer.

    Given the plugin has created a volume
    And the plugin has created 2 snapshots of the volume
    When the harness lists the snapshots with the first snapshot's ID
    Then the list holds exactly the first snapshot

  @CSI-SNAPSHOT-LIST-UNKNOWN-ID @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: ListSnapshots filtered by an unknown snapshot ID returns nothing
    A filter that matches nothing gives an empty list, even when other snapshots exist.

    Basis: CSI spec v1.12, ListSnapshots: the plugin SHALL return the snapshots within the request's
    parameters; a snapshot_id that matches none gives an empty list, and the spec defines no error
    for it. The level rests on the spec alone: Nomad lists snapshots, unfiltered, only to show them
    (`nomad volume snapshot list`); no claim depends on the answer.

    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness lists the snapshots with a snapshot ID that does not exist
    Then the call succeeds
    And the list is empty

  @CSI-SNAPSHOT-LIST-BY-SOURCE @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: ListSnapshots filtered by source volume returns that volume's snapshots only
    Basis: CSI spec v1.12, ListSnapshots: the plugin SHALL return the snapshots within the request's
    parameters, and a source_volume_id narrows the list to that volume's snapshots. The level rests
    on the spec alone: Nomad lists snapshots, unfiltered, only to show them (`nomad volume snapshot
    list`); no claim depends on the answer.

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

    Basis: CSI spec v1.12, ListSnapshots: the plugin SHALL return the snapshots within the request's
    parameters; a source_volume_id that matches none gives an empty list, and the spec defines no
    error for it. The level rests on the spec alone: Nomad lists snapshots, unfiltered, only to show
    them (`nomad volume snapshot list`); no claim depends on the answer.

    Given the plugin has created a volume
    And the plugin has created a snapshot of the volume
    When the harness lists the snapshots of a volume that does not exist
    Then the call succeeds
    And the list is empty

  @CSI-SNAPSHOT-LIST-PAGINATION @must @requires-LIST_SNAPSHOTS @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME @serial
  Scenario: ListSnapshots honours max_entries and next_token
    Basis: CSI spec v1.12, ListSnapshots: with a non-zero max_entries the plugin MUST NOT return
    more entries and MUST set next_token while more remain; the CO MAY see duplicates or gaps only
    while snapshots are created or deleted during the walk. The level rests on the spec alone: Nomad
    lists snapshots, unfiltered, only to show them (`nomad volume snapshot list`); no claim depends
    on the answer.

    Given the plugin has created a volume
    And the plugin has created 3 snapshots of the volume
    When the harness lists the snapshots one page of 1 at a time
    Then every page holds at most 1 entry
    And the pages together hold every snapshot once

  @CSI-SNAPSHOT-LIST-BAD-TOKEN @must @requires-LIST_SNAPSHOTS
  Scenario: ListSnapshots with an invalid starting token is refused
    Basis: CSI spec v1.12, ListSnapshots Errors: a starting_token that is not valid MUST get
    ABORTED. The level rests on the spec alone: Nomad lists snapshots, unfiltered, only to show them
    (`nomad volume snapshot list`); no claim depends on the answer.

    When the harness lists snapshots from an invalid starting token
    Then the call fails with ABORTED

  @CSI-SNAPSHOT-GET-NO-ID @must @requires-GET_SNAPSHOT
  Scenario: GetSnapshot without a snapshot ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, GetSnapshot: snapshot_id is REQUIRED. The level rests on the
    spec alone: Nomad never calls GetSnapshot.

    When the harness calls GetSnapshot without a snapshot ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-SNAPSHOT-GET @must @requires-GET_SNAPSHOT @requires-CREATE_DELETE_SNAPSHOT @requires-CREATE_DELETE_VOLUME
  Scenario: GetSnapshot returns the snapshot with the given ID
    Other snapshots exist beside it: the answer must be the one asked for.

    Basis: CSI spec v1.12, GetSnapshot: a plugin with GET_SNAPSHOT MUST implement it, and the
    REQUIRED snapshot of its reply is the one the request's snapshot_id names, with its REQUIRED
    source_volume_id and creation_time. The level rests on the spec alone: Nomad never calls
    GetSnapshot.

    Given the plugin has created a volume
    And the plugin has created 3 snapshots of the volume
    When the harness gets the second snapshot by its ID
    Then the call succeeds
    And the response holds the second snapshot, with the volume as its source and a creation time

  @CSI-SNAPSHOT-GET-UNKNOWN @must @requires-GET_SNAPSHOT
  Scenario: GetSnapshot of a snapshot that does not exist is refused
    Basis: CSI spec v1.12, GetSnapshot Errors: a snapshot that does not exist MUST get NOT_FOUND.
    The level rests on the spec alone: Nomad never calls GetSnapshot.

    When the harness gets a snapshot that does not exist
    Then the call fails with NOT_FOUND
