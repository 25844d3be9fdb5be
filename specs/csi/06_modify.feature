@csi @requires-controller
Feature: modify
  ControllerModifyVolume changes a volume's mutable parameters.

  @CSI-MODIFY-NO-ID @must @requires-MODIFY_VOLUME
  Scenario: ControllerModifyVolume without a volume ID is refused
    When the harness calls ControllerModifyVolume without a volume ID
    Then the call fails with INVALID_ARGUMENT

  @CSI-MODIFY-UNKNOWN @must @requires-MODIFY_VOLUME
  Scenario: ControllerModifyVolume of a volume that does not exist is refused
    When the harness modifies a volume that does not exist
    Then the call fails with NOT_FOUND

  @CSI-MODIFY-UNSUPPORTED @must @requires-MODIFY_VOLUME @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerModifyVolume with parameters the plugin does not support is refused
    Mutable parameters the plugin does not support are INVALID_ARGUMENT.

    Given the plugin has created a volume
    When the harness modifies the volume with an unsupported mutable parameter
    Then the call fails with INVALID_ARGUMENT

  @CSI-MODIFY @must @requires-MODIFY_VOLUME @requires-mutable-parameters @requires-CREATE_DELETE_VOLUME
  Scenario: ControllerModifyVolume applies supported mutable parameters
    With the mutable parameters given by --mutable-parameters, the call succeeds and is
    idempotent.

    Given the plugin has created a volume
    When the harness modifies the volume with the configured mutable parameters twice
    Then both calls succeed

  @CSI-MODIFY-CREATE-MUTABLE @must @requires-MODIFY_VOLUME @requires-mutable-parameters @requires-CREATE_DELETE_VOLUME
  Scenario: CreateVolume accepts supported mutable parameters, idempotently
    A volume created with mutable parameters (--mutable-parameters) can be created again with
    the same name and parameters, which returns the same volume, and modified with them.

    When the harness creates a volume with the configured mutable parameters twice
    Then both calls return the same volume
    And ControllerModifyVolume with the configured mutable parameters succeeds on it

  @CSI-MODIFY-CREATE-UNSUPPORTED @should @requires-MODIFY_VOLUME
  Scenario: CreateVolume with mutable parameters the plugin does not support is refused
    The plugin validates mutable parameters at creation as it does when modifying.

    When the harness creates a volume with an unsupported mutable parameter
    Then the call fails with INVALID_ARGUMENT
