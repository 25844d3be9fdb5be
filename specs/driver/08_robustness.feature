@driver
Feature: robustness
  Jobs carry whatever task configuration their authors write, within the driver's schema.

  @DRIVER-GENERATED-CONFIGS @must
  Scenario: any task configuration within the schema is started or refused, and never kills the plugin
    Configurations generated from the driver's own TaskConfigSchema (property-based, shrunk to the
    smallest failing one, printed as HCL) are each either started (then stopped and destroyed) or
    refused with an error; the plugin process stays up.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (runDriver) sends any configuration
    the job's HCL decodes to against TaskConfigSchema; a plugin that dies of one takes every task
    on the node through a relaunch and recovery.

    Given the plugin is running as Nomad's long-lived instance
    When the harness starts tasks with generated configurations within the schema
    Then every one was started or refused, and the plugin is still running
