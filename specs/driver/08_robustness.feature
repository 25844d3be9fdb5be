@driver
Feature: robustness
  Jobs carry whatever task configuration their authors write, within the driver's schema.

  @DRIVER-GENERATED-CONFIGS @must @shape-long
  Scenario: any task configuration within the schema is started or refused, and never kills the plugin
    Configurations are made from the run's working long shape by changing one field at a time:
    first to the edge values of its type (left out where it may be, empty, one plain element:
    "data", ["data"], {data = ...}), then to values generated from the driver's own
    TaskConfigSchema for that field (property-based with the run's seed, shrunk to the smallest
    that fails). Each is either started (then stopped and destroyed) or refused with an error;
    the plugin process stays up. A configuration made up whole would fail on its first wrong
    field (a command or template that does not exist) and never reach the others.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (runDriver) sends any configuration
    the job's HCL decodes to against TaskConfigSchema; a plugin that dies of one takes every task
    on the node through a relaunch and recovery.

    Given the plugin is running as Nomad's long-lived instance
    When the harness starts tasks with generated configurations within the schema
    Then every one was started or refused, and the plugin is still running
