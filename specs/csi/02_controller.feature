@csi @requires-controller
Feature: controller
  The Controller service creates and deletes volumes and attaches them to nodes. Nomad calls it
  from the client that runs the controller plugin, with a 2-minute context per call.

  Background:
    Given Nomad has found the plugin ready

  @CSI-CONTROLLER-CAPABILITIES @must
  Scenario: ControllerGetCapabilities succeeds
    Nomad asks for the controller's capabilities on every fingerprint.

    Basis: CSI spec v1.12, ControllerGetCapabilities: a Controller Plugin MUST implement it; Nomad
    client/pluginmanager/csimanager/fingerprint.go (buildControllerFingerprint): an error marks the
    controller unhealthy, and nomad/csi_endpoint.go (pluginValidateVolume) then refuses `nomad
    volume create` and `nomad volume register` ("no healthy controllers").

    When the harness calls ControllerGetCapabilities
    Then the call succeeds

  @CSI-CONTROLLER-CREATE-NO-NAME @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume without a name is refused
    The name is REQUIRED; a missing required field is INVALID_ARGUMENT.

    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, CreateVolume: name is REQUIRED. The level rests on the spec
    alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls CreateVolume without a name
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-CREATE-NO-CAPABILITIES @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume without volume capabilities is refused
    volume_capabilities is REQUIRED; a missing required field is INVALID_ARGUMENT.

    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, CreateVolume: volume_capabilities is REQUIRED (a REQUIRED
    repeated field MUST hold at least one element). The level rests on the spec alone: Nomad never
    sends such a request (it fills or checks the field itself).

    When the harness calls CreateVolume without volume capabilities
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-CREATE @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume makes a volume
    The response carries the volume, with a non-empty volume_id that Nomad stores as the
    volume's external ID.

    Basis: CSI spec v1.12, CreateVolume: the response's volume is REQUIRED, and its volume_id is
    REQUIRED and MUST identify the volume; Nomad nomad/csi_endpoint.go (createVolume): the ID
    becomes the volume's external ID, sent in every later call (with an empty one,
    nomad/structs/csi.go (RemoteID) falls back to Nomad's own volume ID, which the plugin does not
    know).

    When the harness creates a volume
    Then the call succeeds
    And the response holds a volume with a non-empty ID

  @CSI-CONTROLLER-CREATE-CAPACITY @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume honours the capacity range
    A volume created with a capacity range has a capacity of at least required_bytes and, when
    a limit is set, at most limit_bytes. A plugin may have its own minimum (or maximum) volume
    size and answer OUT_OF_RANGE outside it: then the range starts at a size it accepts
    (GetCapacity's minimum_volume_size, or a size its error names), and the clause is skipped when
    no such size can be found. A capacity_bytes of 0 means unknown: nothing to judge, skipped.

    Basis: CSI spec v1.12, CreateVolume and CapacityRange: a capacity_range that is given MUST
    always be honoured: the volume MUST be at least required_bytes and MUST not be bigger than
    limit_bytes; a capacity_bytes of 0 means unknown; CreateVolume Errors: a capacity_range the
    plugin does not support gets 11 OUT_OF_RANGE, which is not a failure. Nomad
    nomad/csi_endpoint.go (createVolume) records capacity_bytes as the volume's capacity; the level
    rests on the spec alone.

    When the harness creates a volume with a capacity range
    Then the call succeeds
    And the volume's capacity lies within the requested range

  @CSI-CONTROLLER-CREATE-BAD-RANGE @should @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume with limit_bytes below required_bytes is refused
    No volume is at least required_bytes and at most a smaller limit_bytes: the plugin should
    refuse, with INVALID_ARGUMENT or OUT_OF_RANGE, rather than make a volume that breaks one bound.
    A SHOULD: Nomad refuses such a range itself and never sends it.

    Basis: CSI spec v1.12, CapacityRange: the volume MUST be at least required_bytes and MUST NOT
    be bigger than limit_bytes, so no answer but a refusal keeps both; CreateVolume Errors:
    "Unsupported capacity_range", 11 OUT_OF_RANGE, and Error Scheme: an invalid field, 3
    INVALID_ARGUMENT. Nomad plugins/csi/plugin.go (ControllerCreateVolumeRequest.Validate, called
    by plugins/csi/client.go ControllerCreateVolume) refuses "LimitBytes cannot be less than
    RequiredBytes" before any call, so only other callers ever send it.

    When the harness creates a volume with limit_bytes below required_bytes
    Then the call fails with INVALID_ARGUMENT or OUT_OF_RANGE

  @CSI-CONTROLLER-CREATE-IDEMPOTENT @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume with an existing name and the same capacity returns the same volume
    CreateVolume must be idempotent: the CO retries it after any failure or timeout.

    Basis: CSI spec v1.12, CreateVolume: the call MUST be idempotent, and a volume that already
    exists under the name and is compatible with the request MUST be answered with OK and that
    volume. The level rests on the spec alone: Nomad sends CreateVolume once per request
    (plugins/csi/client.go passes gRPC retry options, but its connection installs no retry
    interceptor, so they retry nothing), so a repeated CreateVolume reaches the plugin only when the
    operator repeats `nomad volume create` or another CO retries.

    Given the plugin has created a volume
    When the harness creates a volume with the same name and capacity again
    Then the call succeeds
    And the response holds the same volume

  @CSI-CONTROLLER-CREATE-NAME-CONFLICT @must @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume with an existing name and an incompatible capacity is refused
    A volume with the same name that is not compatible with the request is ALREADY_EXISTS. The
    request asks for exactly twice the volume's size; after OUT_OF_RANGE (a size outside the
    plugin's limits) for one MiB more, then for half. A plugin whose first CreateVolume answered
    capacity_bytes 0 (unknown, as for a share on a file server) cannot tell a conflict by size,
    nor can one that refuses all three sizes: the clause is skipped then, with the reason.

    Basis: CSI spec v1.12, CreateVolume Errors: a volume that exists under the name but is
    incompatible with the requested capacity_range MUST get ALREADY_EXISTS (the table's codes are
    ones the plugin MUST return). The level rests on the spec alone: any error fails `nomad volume
    create` alike, whatever its code. An OK instead hands the operator a volume of the wrong size
    without a word.

    Given the plugin has created a volume
    When the harness creates a volume with the same name and an incompatible capacity
    Then the call fails with ALREADY_EXISTS

  @CSI-CONTROLLER-CREATE-LONG-NAME @should @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume accepts a name of the maximum length
    Strings may be up to 128 bytes long.

    Basis: CSI spec v1.12, Size Limits and CreateVolume: strings SHALL NOT exceed 128 bytes and the
    name field describes any string within that limit (control characters aside) as allowed, but no
    RFC 2119 keyword obliges a plugin to accept one, and the Error Scheme lets it refuse a field
    value it does not allow; Nomad nomad/csi_endpoint.go (createVolume) passes the user's volume
    name through unchecked. Kept at SHOULD.

    When the harness creates a volume with a 128-character name
    Then the call succeeds

  @CSI-CONTROLLER-CREATE-FROM-SNAPSHOT @must @requires-CREATE_DELETE_VOLUME @requires-CREATE_DELETE_SNAPSHOT @attaches-2
  Scenario: CreateVolume from a snapshot
    A volume_content_source naming an existing snapshot creates a volume from it, holding the
    snapshot's data (looked at through a claim when the plugin has both services).

    Basis: CSI spec v1.12, CreateVolume (VolumeContentSource): a plugin with CREATE_DELETE_SNAPSHOT
    is REQUIRED to support creating a volume from a snapshot (the overview's MAY is overridden by
    this field rule), while the reply's content_source is OPTIONAL; Nomad nomad/csi_endpoint.go
    (createVolume) sends the snapshot_id of the volume specification and does not read
    content_source. The level rests on the spec alone: Nomad notices nothing, and the operator gets
    a volume without the snapshot's data.

    Given the plugin has created a volume
    And a file is written into the volume, when the plugin has both services
    And the plugin has created a snapshot of the volume
    When the harness creates a volume from the snapshot
    Then the call succeeds
    And the volume's content source, if set, is the snapshot
    And the new volume holds the file, when the plugin has both services

  @CSI-CONTROLLER-CREATE-FROM-MISSING-SNAPSHOT @must @requires-CREATE_DELETE_VOLUME @requires-CREATE_DELETE_SNAPSHOT
  Scenario: CreateVolume from a snapshot that does not exist is refused
    A content source that does not exist is NOT_FOUND.

    Basis: CSI spec v1.12, CreateVolume Errors: a volume_content_source that does not exist MUST get
    NOT_FOUND. The level rests on the spec alone: any error fails `nomad volume create` alike,
    whatever its code.

    When the harness creates a volume from a snapshot that does not exist
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-CREATE-FROM-VOLUME @must @requires-CREATE_DELETE_VOLUME @requires-CLONE_VOLUME @attaches-2
  Scenario: CreateVolume from another volume
    A volume_content_source naming an existing volume clones it, data included (looked at through
    a claim when the plugin has both services).

    Basis: CSI spec v1.12, CreateVolume (VolumeContentSource): a plugin reporting CLONE_VOLUME MUST
    support creating a volume from another volume, while the reply's content_source is OPTIONAL;
    Nomad nomad/csi_endpoint.go (createVolume) sends the clone_id of the volume specification and
    does not read content_source. The level rests on the spec alone: Nomad notices nothing, and the
    operator gets a volume without the source volume's data.

    Given the plugin has created a volume
    And a file is written into the volume, when the plugin has both services
    When the harness creates a volume from that volume
    Then the call succeeds
    And the volume's content source, if set, is the first volume
    And the new volume holds the file, when the plugin has both services

  @CSI-CONTROLLER-CREATE-FROM-MISSING-VOLUME @must @requires-CREATE_DELETE_VOLUME @requires-CLONE_VOLUME
  Scenario: CreateVolume from a volume that does not exist is refused
    A content source that does not exist is NOT_FOUND.

    Basis: CSI spec v1.12, CreateVolume Errors: a volume_content_source that does not exist MUST get
    NOT_FOUND. The level rests on the spec alone: any error fails `nomad volume create` alike,
    whatever its code.

    When the harness creates a volume from a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-DELETE-NO-ID @must @requires-CREATE_DELETE_VOLUME
  Scenario: DeleteVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, DeleteVolume: volume_id is REQUIRED. The level rests on the
    spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls DeleteVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-DELETE-UNKNOWN @must @requires-CREATE_DELETE_VOLUME
  Scenario: DeleteVolume of a volume that does not exist succeeds
    A volume that is already gone counts as deleted: DeleteVolume must be idempotent.

    Basis: CSI spec v1.12, DeleteVolume: the call MUST be idempotent, and a volume that does not
    exist (or whose artifacts are gone) MUST be answered with OK; Nomad nomad/csi_endpoint.go
    (Delete, deleteVolume): any error fails `nomad volume delete` and the volume stays registered.

    When the harness deletes a volume that does not exist
    Then the call succeeds

  @CSI-CONTROLLER-DELETE @must @requires-CREATE_DELETE_VOLUME
  Scenario: DeleteVolume deletes a volume
    Basis: CSI spec v1.12, DeleteVolume: a plugin with CREATE_DELETE_VOLUME MUST implement it, and
    ListVolumes: the plugin SHALL list the volumes it knows about, which a deleted one no longer is;
    Nomad nomad/csi_endpoint.go (Delete): the volume is deregistered only after DeleteVolume
    succeeds.

    Given the plugin has created a volume
    When the harness deletes the volume
    Then the call succeeds
    And the volume is no longer listed

  @CSI-CONTROLLER-VALIDATE-NO-ID @must
  Scenario: ValidateVolumeCapabilities without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ValidateVolumeCapabilities: volume_id is REQUIRED. The level
    rests on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls ValidateVolumeCapabilities without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-VALIDATE-NO-CAPABILITIES @must @requires-volume @reads-shared-volume
  Scenario: ValidateVolumeCapabilities without capabilities is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ValidateVolumeCapabilities: volume_capabilities is REQUIRED (a
    REQUIRED repeated field MUST hold at least one element). The level rests on the spec alone:
    Nomad never sends such a request (it fills or checks the field itself).

    Given a volume, shared by the clauses that only read it
    When the harness calls ValidateVolumeCapabilities without volume capabilities
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-VALIDATE @must @requires-volume @reads-shared-volume
  Scenario: ValidateVolumeCapabilities confirms every capability asked for, or none
    Nomad calls it when a volume is registered, with every capability block of the volume
    specification in one request. The harness asks with two, as a specification of a volume that
    one allocation writes and others read has them: the volume's own capability and its
    reader-only twin (single-node-reader-only, or multi-node-reader-only for a multi-node volume),
    with the same access type and mount options. A plugin may confirm none of them (with a
    message); when it confirms, each one asked for must be among the confirmed ones (its access
    mode, block or mount, fs_type, and every mount flag). A plugin that confirms only the first
    breaks `nomad volume register`.

    Basis: CSI spec v1.12, ValidateVolumeCapabilities: a Controller Plugin MUST implement it, and
    SHALL set confirmed only if every requested capability is supported (confirmed itself is
    OPTIONAL); Nomad nomad/csi_endpoint.go (controllerValidateVolume) sends the volume's
    RequestedCapabilities, every capability block, in one request (client/structs/csi.go,
    ClientCSIControllerValidateVolumeRequest.ToCSIRequest), an error fails `nomad volume
    register`, and plugins/csi/client.go (ControllerValidateCapabilities, compareCapabilities)
    accepts a reply without confirmed and otherwise needs each requested capability matched by one
    confirmed capability, failing when none matches and one differs.

    Given a volume, shared by the clauses that only read it
    When the harness validates the volume's capabilities, all of them at once
    Then the call succeeds
    And any confirmed capabilities are the ones asked for

  @CSI-CONTROLLER-VALIDATE-UNKNOWN @must
  Scenario: ValidateVolumeCapabilities of a volume that does not exist is refused
    Basis: CSI spec v1.12, ValidateVolumeCapabilities Errors: a volume that does not exist MUST get
    NOT_FOUND. The level rests on the spec alone: an OK lets `nomad volume register` register a
    volume that does not exist, and the first claim of it fails instead.

    When the harness validates the capabilities of a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-PUBLISH-NO-VOLUME-ID @must @requires-PUBLISH_UNPUBLISH_VOLUME
  Scenario: ControllerPublishVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ControllerPublishVolume: volume_id is REQUIRED. The level
    rests on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls ControllerPublishVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-PUBLISH-NO-NODE-ID @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-volume
  Scenario: ControllerPublishVolume without a node ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ControllerPublishVolume: node_id is REQUIRED. The level rests
    on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given the plugin has created a volume
    When the harness calls ControllerPublishVolume without a node ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-PUBLISH-NO-CAPABILITY @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-volume
  Scenario: ControllerPublishVolume without a volume capability is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ControllerPublishVolume: volume_capability is REQUIRED. The
    level rests on the spec alone: Nomad never sends such a request (it fills or checks the field
    itself).

    Given the plugin has created a volume
    When the harness calls ControllerPublishVolume without a volume capability
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-PUBLISH-UNKNOWN-VOLUME @must @requires-PUBLISH_UNPUBLISH_VOLUME
  Scenario: ControllerPublishVolume of a volume that does not exist is refused
    Basis: CSI spec v1.12, ControllerPublishVolume Errors: a volume that does not exist MUST get
    NOT_FOUND. The level rests on the spec alone: Nomad publishes only volumes registered with it,
    to nodes whose plugin reported their ID, and fails the claim on any error alike.

    When the harness publishes a volume that does not exist to the node
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-PUBLISH-UNKNOWN-NODE @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-volume
  Scenario: ControllerPublishVolume to a node that does not exist is refused
    Basis: CSI spec v1.12, ControllerPublishVolume Errors: a node that does not exist MUST get
    NOT_FOUND. The level rests on the spec alone: Nomad publishes only volumes registered with it,
    to nodes whose plugin reported their ID, and fails the claim on any error alike.

    Given the plugin has created a volume
    When the harness publishes the volume to a node that does not exist
    Then the call fails with NOT_FOUND

  @CSI-CONTROLLER-PUBLISH-IDEMPOTENT @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-volume
  Scenario: ControllerPublishVolume is idempotent
    Publishing a volume again to the same node with the same capability succeeds with the same
    publish context.

    Basis: CSI spec v1.12, ControllerPublishVolume: the call MUST be idempotent, a volume already
    published to the node with a compatible capability and readonly flag MUST get OK, and
    publish_context SHALL NOT be mutable and SHALL be safe for the CO to cache; Nomad
    nomad/csi_endpoint.go (Claim, controllerPublishVolume) publishes again for every new claim and
    hands that claim's publish_context to NodeStageVolume and NodePublishVolume.

    Given the plugin has created a volume
    And the plugin has published the volume to the node
    When the harness publishes the volume to the node again
    Then the call succeeds
    And the publish context is the same as the first time

  @CSI-CONTROLLER-PUBLISH-INCOMPATIBLE @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-volume
  Scenario: ControllerPublishVolume again with an incompatible capability is refused
    A volume already published to the node with another read-only setting is ALREADY_EXISTS. A
    plugin without the PUBLISH_READONLY capability may instead refuse readonly=true as an invalid
    argument (the CO must not send it to such a plugin).

    Basis: CSI spec v1.12, ControllerPublishVolume Errors: a volume already published to the node
    but incompatible with the requested volume_capability or readonly flag MUST get ALREADY_EXISTS.
    The level rests on the spec alone: Nomad fails the claim on any error alike, whatever its code.

    Given the plugin has created a volume
    And the plugin has published the volume to the node
    When the harness publishes the volume to the node again read-only
    Then the call fails with ALREADY_EXISTS, or INVALID_ARGUMENT without PUBLISH_READONLY

  @CSI-CONTROLLER-UNPUBLISH-NO-VOLUME-ID @must @requires-PUBLISH_UNPUBLISH_VOLUME
  Scenario: ControllerUnpublishVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ControllerUnpublishVolume: volume_id is REQUIRED (node_id is
    OPTIONAL). The level rests on the spec alone: Nomad never sends such a request (it fills or
    checks the field itself).

    When the harness calls ControllerUnpublishVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-CONTROLLER-UNPUBLISH-IDEMPOTENT @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-volume
  Scenario: ControllerUnpublishVolume of a volume that is not published succeeds
    A volume that is not attached counts as unpublished: OK, or NOT_FOUND, which Nomad takes as
    done.

    Basis: CSI spec v1.12, ControllerUnpublishVolume: the call MUST be idempotent, and a volume not
    attached to the node gets OK; Nomad plugins/csi/client.go (ControllerUnpublishVolume) ignores
    NOT_FOUND as already done, so a plugin answering NOT_FOUND for what it no longer knows breaks
    nothing, while nomad/csi_endpoint.go (controllerUnpublishVolume) keeps the claim on any other
    error, so the volume can be neither claimed again nor deleted.

    Given the plugin has created a volume
    When the harness unpublishes the volume from the node
    Then the call succeeds or fails with NOT_FOUND

  @CSI-CONTROLLER-UNPUBLISH-FREES @must @requires-PUBLISH_UNPUBLISH_VOLUME @requires-CREATE_DELETE_VOLUME @requires-max-volumes @attaches-all
  Scenario: ControllerUnpublishVolume frees the node's attachment
    Holding every attachment of the node, so that nothing else is attached meanwhile, the harness
    publishes one volume to the node and unpublishes it again, one time more than the node's
    max_volumes_per_node. Every call must succeed: a volume that was unpublished no longer counts
    against the node's limit. (It creates its volume: a clause holding the whole node cannot wait
    for one of --volume, which a clause waiting for the node may hold.)

    Basis: CSI spec v1.12, ControllerUnpublishVolume: it is the reverse operation of
    ControllerPublishVolume, and NodeGetInfo: max_volumes_per_node is how many volumes the
    controller can publish to the node, so a refusal with RESOURCE_EXHAUSTED while one volume at a
    time is published counts attachments that were undone; Nomad
    scheduler/feasible/feasible.go (CSIVolumeChecker.isFeasible) counts a node's volumes from its
    own claims, so after releases it keeps placing claims on the node, and each
    ControllerPublishVolume the plugin refuses fails its allocation in
    client/allocrunner/csi_hook.go (Prerun), for as long as the plugin runs.

    Given the plugin has created a volume
    When the harness publishes the volume to the node and unpublishes it, once more than the node's limit
    Then every publish and unpublish succeeds

  @CSI-CONTROLLER-LIST @must @requires-LIST_VOLUMES @requires-CREATE_DELETE_VOLUME @serial
  Scenario: ListVolumes shows new volumes and not deleted ones
    Run alone, so that no other clause makes or deletes a volume during the listing: the list must
    hold this clause's volume and every other volume the run made and has not asked to delete,
    wherever the plugin puts them on its pages; after the delete it must not hold the deleted one.

    Basis: CSI spec v1.12, ListVolumes: the plugin SHALL return every volume it knows about, and a
    deleted volume is no longer one. The level rests on the spec alone: Nomad lists a plugin's
    volumes only to show them to the operator (nomad/csi_endpoint.go, ListExternal); no claim
    depends on the answer.

    Given the plugin has created a volume
    When the harness lists every volume
    Then the list holds the volume
    When the harness deletes the volume
    And the harness lists every volume
    Then the list does not hold the volume

  @CSI-CONTROLLER-LIST-PAGINATION @must @requires-LIST_VOLUMES @requires-CREATE_DELETE_VOLUME @serial
  Scenario: ListVolumes honours max_entries and next_token
    Basis: CSI spec v1.12, ListVolumes: with a non-zero max_entries the plugin MUST NOT return more
    entries and MUST set next_token while more remain; the CO MAY see duplicates or gaps only while
    volumes are created or deleted during the walk. The level rests on the spec alone: Nomad lists a
    plugin's volumes only to show them to the operator (nomad/csi_endpoint.go, ListExternal); no
    claim depends on the answer.

    Given the plugin has created 3 volumes
    When the harness lists the volumes one page of 1 at a time
    Then every page holds at most 1 entry
    And the pages together hold every volume once

  @CSI-CONTROLLER-LIST-BAD-TOKEN @must @requires-LIST_VOLUMES
  Scenario: ListVolumes with an invalid starting token is refused
    An invalid starting_token is ABORTED.

    Basis: CSI spec v1.12, ListVolumes Errors: a starting_token that is not valid MUST get ABORTED.
    The level rests on the spec alone: Nomad lists a plugin's volumes only to show them to the
    operator (nomad/csi_endpoint.go, ListExternal); no claim depends on the answer.

    When the harness lists volumes from an invalid starting token
    Then the call fails with ABORTED

  @CSI-CONTROLLER-GET-CAPACITY @must @requires-GET_CAPACITY
  Scenario: GetCapacity succeeds
    Basis: CSI spec v1.12, GetCapacity: a plugin with GET_CAPACITY MUST implement it, and
    available_capacity MUST NOT be negative. The level rests on the spec alone: Nomad never calls
    GetCapacity.

    When the harness calls GetCapacity
    Then the call succeeds
    And the available capacity is not negative

  @CSI-CONTROLLER-ERROR-DETAILS @must @requires-CREATE_DELETE_VOLUME
  Scenario: error statuses carry no details
    The status of a failed call MUST have an empty details list, and its message must say what
    went wrong.

    Basis: CSI spec v1.12, Error Scheme: a status that is not OK MUST carry a human-readable
    message, and its details MUST be empty. The level rests on the spec alone: Nomad reads only an
    error's code and message.

    When the harness calls CreateVolume without a name
    Then the call fails with INVALID_ARGUMENT
    And the error has a message and no details
