@csi @requires-controller
Feature: modify
  ControllerModifyVolume changes a volume's mutable parameters.

  Background:
    Given Nomad has found the plugin ready

  @CSI-MODIFY-NO-ID @must @requires-MODIFY_VOLUME
  Scenario: ControllerModifyVolume without a volume ID is refused
    Basis: CSI spec v1.12, Error Scheme: a request missing a REQUIRED field MUST be refused with
    INVALID_ARGUMENT; CSI spec v1.12, ControllerModifyVolume: volume_id is REQUIRED. The level rests
    on the spec alone: Nomad never calls ControllerModifyVolume.

    When the harness calls ControllerModifyVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-MODIFY-UNKNOWN @must @requires-MODIFY_VOLUME @requires-mutable-parameters
  Scenario: ControllerModifyVolume of a volume that does not exist is refused
    Basis: CSI spec v1.12, ControllerModifyVolume Errors and Error Scheme: a volume that does not
    exist MUST get NOT_FOUND (each RPC's listed codes are ones the plugin MUST return). The level
    rests on the spec alone: Nomad never calls ControllerModifyVolume.

    When the harness modifies a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-MODIFY-UNSUPPORTED @must @requires-MODIFY_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerModifyVolume with parameters the plugin does not support is refused
    Mutable parameters the plugin does not support are INVALID_ARGUMENT.

    Basis: CSI spec v1.12, ControllerModifyVolume Errors and Error Scheme: mutable parameter keys or
    values the plugin does not support MUST get INVALID_ARGUMENT, and the SP MUST NOT have modified
    the volume. The level rests on the spec alone: Nomad never calls ControllerModifyVolume.

    Given the plugin has created a volume
    When the harness modifies the volume with an unsupported mutable parameter
    Then the call fails with INVALID_ARGUMENT

  @CSI-MODIFY @must @requires-MODIFY_VOLUME @requires-mutable-parameters @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerModifyVolume applies supported mutable parameters
    With the mutable parameters given by --mutable-parameters, the call succeeds and is
    idempotent.

    Basis: CSI spec v1.12, ControllerModifyVolume: a plugin with MODIFY_VOLUME MUST implement it,
    and the call MUST be idempotent. The level rests on the spec alone: Nomad never calls
    ControllerModifyVolume.

    Given the plugin has created a volume
    When the harness modifies the volume with the configured mutable parameters twice
    Then both calls succeed

  @CSI-MODIFY-CREATE-MUTABLE @must @requires-MODIFY_VOLUME @requires-mutable-parameters @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume accepts supported mutable parameters, idempotently
    A volume created with mutable parameters (--mutable-parameters) can be created again with
    the same name and parameters, which returns the same volume, and modified with them.

    Basis: CSI spec v1.12, CreateVolume: the call MUST be idempotent, and a volume that exists under
    the name and is compatible with the request, mutable_parameters included, MUST be answered with
    OK and that volume; CSI spec v1.12, ControllerModifyVolume: a plugin with MODIFY_VOLUME MUST
    implement it. The level rests on the spec alone: Nomad never calls ControllerModifyVolume and
    sends no mutable_parameters.

    When the harness creates a volume with the configured mutable parameters twice
    Then both calls return the same volume
    And ControllerModifyVolume with the configured mutable parameters succeeds on it

  @CSI-MODIFY-CREATE-UNSUPPORTED @should @requires-MODIFY_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume with mutable parameters the plugin does not support is refused
    The plugin validates mutable parameters at creation as it does when modifying.

    Basis: CSI spec v1.12, CreateVolume and Error Scheme: the plugin parses and validates
    mutable_parameters, and a field value it does not allow MUST get INVALID_ARGUMENT, but whether
    an unknown key is not allowed is left to the plugin (only the ControllerModifyVolume error table
    names invalid keys); Nomad never sends mutable_parameters. Kept at SHOULD.

    When the harness creates a volume with an unsupported mutable parameter
    Then the call fails with INVALID_ARGUMENT
