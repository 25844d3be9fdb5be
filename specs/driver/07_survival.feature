@driver
Feature: survival
  A driver plugin's lifetime is not the agent's, and its tasks' lifetime is not the plugin's:
  Nomad relaunches a plugin that died and recovers the tasks it started from the handles it
  stored, and after an agent restart it reattaches to the plugin still running.

  @DRIVER-SURVIVE-PLUGIN-KILL @must @shape-long
  Scenario: tasks keep running when the plugin process is killed
    Basis: Nomad docs (Task Drivers: "a driver plugin is long-lived and its lifetime is not bound
    to the Nomad client") and client/allocrunner/taskrunner/task_runner.go (Restore, WaitTask
    "plugin is shut down" handling): Nomad relaunches the plugin and recovers running tasks; a
    task that died with the plugin is restarted by its restart policy, interrupting the workload.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the plugin process is killed
    Then the task is still running

  @DRIVER-RECOVER @must @shape-long
  Scenario: RecoverTask restores a running task from its handle after a relaunch
    Inspect, Wait and Stop work again on the recovered task.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (restoreHandle) calls RecoverTask
    with the stored handle on the relaunched plugin and destroys the task if it fails.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the plugin process is killed
    And Nomad relaunches the plugin and recovers the task from its handle
    Then RecoverTask succeeds
    And the recovered task can be inspected, stopped and waited for

  @DRIVER-RECOVER-EXITED @should @shape-exit
  Scenario: a task that exited while the plugin was down reports its exit after recovery
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (Restore) waits on a recovered task
    for its exit result; an unknown or wrong code misleads the restart policy.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    When the plugin process is killed
    And the task has exited while the plugin was down
    And Nomad relaunches the plugin and recovers the task from its handle
    Then WaitTask returns exit code 3

  @DRIVER-REATTACH @must @shape-long
  Scenario: an agent restart reattaches to the running plugin and keeps every task
    Basis: Nomad client/pluginmanager/drivermanager/instance.go (dispense with the stored reattach
    config): after an agent restart Nomad connects again to the same plugin process and calls
    PluginInfo; tasks must still be known (InspectTask) without RecoverTask.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness drops its connection and reattaches to the plugin
    Then PluginInfo answers again
    And the task is still known and running

  @DRIVER-RECOVERABLE-ERROR @should
  Scenario: a failed StartTask says whether it is worth retrying
    Basis: Nomad plugins/drivers/client.go (StartTask) reads a RecoverableError from the status
    details to decide between a restart and failing the task for good
    (client/allocrunner/taskrunner/task_runner.go, runDriver); without it every error is final.

    Given the plugin is running as Nomad's long-lived instance
    When the harness starts a task whose configuration breaks the schema
    Then the error carries a RecoverableError detail
