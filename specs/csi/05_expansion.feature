@csi
Feature: expansion
  `nomad volume create` with a larger capacity on an existing volume expands it: Nomad calls
  ControllerExpandVolume (without a capability for a volume never claimed, whose modes it does
  not know), and NodeExpandVolume for each claim only when the controller advertises
  EXPAND_VOLUME and answers node_expansion_required; NOT_FOUND from NodeExpandVolume counts as
  done.

  Background:
    Given Nomad has found the plugin ready

  @CSI-EXPAND-CONTROLLER-NO-ID @must @requires-EXPAND_VOLUME
  Scenario: ControllerExpandVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ControllerExpandVolume: volume_id is REQUIRED. The level rests
    on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls ControllerExpandVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-EXPAND-CONTROLLER-NO-CAPACITY @must @requires-EXPAND_VOLUME @requires-CREATE_DELETE_VOLUME @reads-shared-volume
  Scenario: ControllerExpandVolume without a capacity range is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ControllerExpandVolume: capacity_range is REQUIRED. The level
    rests on the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given a volume, shared by the clauses that only read it
    When the harness calls ControllerExpandVolume without a capacity range
    Then the call fails with INVALID_ARGUMENT

  @CSI-EXPAND-CONTROLLER-UNKNOWN @must @requires-EXPAND_VOLUME
  Scenario: ControllerExpandVolume of a volume that does not exist is refused
    Basis: CSI spec v1.12, ControllerExpandVolume Errors and Error Scheme: a volume that does not
    exist MUST get NOT_FOUND (each RPC's listed codes are ones the plugin MUST return). The level
    rests on the spec alone: Nomad expands only volumes registered with it, and any error fails the
    expansion alike.

    When the harness expands a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-EXPAND-CONTROLLER @must @requires-EXPAND_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerExpandVolume grows a volume
    The volume is asked to grow to twice its size. A plugin that refuses that as OUT_OF_RANGE
    (the spec's "Unsupported capacity", as a plugin with a maximum volume size answers) is asked
    for one MiB more; one that refuses that too is skipped, with the reason.

    Basis: CSI spec v1.12, ControllerExpandVolume: a plugin with EXPAND_VOLUME MUST implement it,
    and the REQUIRED capacity_bytes reports the size after expansion, which MUST be at least
    required_bytes (CapacityRange); Nomad nomad/csi_endpoint.go (expandVolume) sends no
    volume_capability for a volume never claimed, records capacity_bytes as the volume's capacity,
    and an error fails the expanding `nomad volume create`.

    Given the plugin has created a volume
    When the harness expands the volume to twice its size
    Then the call succeeds
    And the reported capacity is at least the requested size

  @CSI-EXPAND-CONTROLLER-IDEMPOTENT @should @requires-EXPAND_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerExpandVolume to a size the volume already has succeeds
    A volume already at least as large as requested SHOULD give OK, without shrinking.

    Basis: CSI spec v1.12, ControllerExpandVolume: the call MUST be idempotent, and a volume already
    at least as large as requested SHOULD get OK; Nomad nomad/csi_endpoint.go (expandVolume) does
    not call the plugin when the volume is already large enough, so it does not depend on this.

    Given the plugin has created a volume
    And the plugin has expanded the volume to twice its size
    When the harness expands the volume to its original size
    Then the call succeeds
    And the reported capacity is at least the size it was expanded to

  @CSI-EXPAND-NODE-NO-ID @must @requires-node-EXPAND_VOLUME
  Scenario: NodeExpandVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeExpandVolume: volume_id is REQUIRED. The level rests on
    the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    When the harness calls NodeExpandVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-EXPAND-NODE-NO-PATH @must @requires-node-EXPAND_VOLUME @requires-volume @reads-shared-publication
  Scenario: NodeExpandVolume without a volume path is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, NodeExpandVolume: volume_path is REQUIRED. The level rests on
    the spec alone: Nomad never sends such a request (it fills or checks the field itself).

    Given a volume published for an allocation, shared by the clauses that only read it
    When the harness calls NodeExpandVolume without a volume path
    Then the call fails with INVALID_ARGUMENT

  @CSI-EXPAND-NODE-UNKNOWN @must @requires-node-EXPAND_VOLUME
  Scenario: NodeExpandVolume of a volume that does not exist is refused
    Basis: CSI spec v1.12, NodeExpandVolume Errors and Error Scheme: a volume that does not exist
    MUST get NOT_FOUND (each RPC's listed codes are ones the plugin MUST return). The level rests on
    the spec alone: Nomad calls NodeExpandVolume only for the claims of a volume it expanded, and
    plugins/csi/client.go (NodeExpandVolume) ignores NOT_FOUND anyway.

    When the harness expands a volume that does not exist on the node
    Then the call fails with NOT_FOUND

  @CSI-EXPAND-NODE @must @requires-node-EXPAND_VOLUME @requires-volume
  Scenario: NodeExpandVolume after publishing
    Nomad calls NodeExpandVolume with the per-allocation target path as volume_path, after
    ControllerExpandVolume of the claimed volume (with the claim's capability) answered
    node_expansion_required.

    Basis: CSI spec v1.12, NodeExpandVolume: a plugin with node EXPAND_VOLUME MUST implement it for
    volumes already node-published or node-staged (one whose filesystem cannot grow while published
    MUST answer FAILED_PRECONDITION instead); Nomad nomad/csi_endpoint.go (expandVolume,
    nodeExpandVolume) and client/pluginmanager/csimanager/volume.go (expandVolumeImpl): only after
    a ControllerExpandVolume that answers node_expansion_required does Nomad call it, for every
    claim, with the per-allocation target path as volume_path; plugins/csi/client.go
    (NodeExpandVolume) ignores NOT_FOUND, and any other error fails the expansion. A controller
    without EXPAND_VOLUME, or one that does not ask for it, is never followed by NodeExpandVolume:
    the clause is skipped then (a node-only run takes the controller elsewhere to have asked).

    Given the plugin has created a volume
    And the volume is published to the node
    And the volume is staged for the node
    And the plugin has published the volume for an allocation
    When the harness expands the published volume on the node
    Then the call succeeds, or fails with FAILED_PRECONDITION without online expansion
