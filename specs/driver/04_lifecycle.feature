@driver
Feature: lifecycle
  How the Nomad client runs a task: TaskConfigSchema and Capabilities, StartTask with a TaskConfig
  it builds (id, alloc directory, environment, resources, log FIFOs), WaitTask right away,
  StopTask with the task's kill_timeout and kill_signal, DestroyTask(force) once the task has
  exited, InspectTask when it needs the state. Tasks are given by shape (long, exit, output, trap,
  stubborn); a clause whose shape the run has no task configuration for is skipped.

  @DRIVER-TASK-CONFIG-SCHEMA @must
  Scenario: TaskConfigSchema returns a schema Nomad can convert
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (initDriver) calls TaskConfigSchema
    at the start of every task and converts it with hclspecutils.Convert; an error fails the task.

    Given the plugin is running as Nomad's long-lived instance
    When the harness asks for the task configuration schema
    Then the task configuration schema converts

  @DRIVER-CAPABILITIES @must
  Scenario: Capabilities answers
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (initDriver) calls Capabilities at
    the start of every task; an error fails the task.

    Given the plugin is running as Nomad's long-lived instance
    When the harness asks for the capabilities
    Then the call succeeds

  @DRIVER-START-HANDLE @must @shape-long
  Scenario: StartTask returns a handle for the task that Nomad can store and give back
    The handle's config.id is the task's ID, and its driver_state is what RecoverTask later gets.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (runDriver, setDriverHandle) stores
    the handle in the client's state and plugins/drivers/client.go (RecoverTask) sends it back
    verbatim; a handle naming another task recovers the wrong task after a restart.

    Given the plugin is running as Nomad's long-lived instance
    When the harness starts a long task
    Then the call succeeds
    And the handle names the task and carries the task's configuration

  @DRIVER-START-BAD-CONFIG @must
  Scenario: StartTask with a configuration that breaks the schema fails and starts nothing
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (runDriver): a failed StartTask
    leaves no handle, so Nomad will never stop or destroy whatever the plugin started anyway.

    Given the plugin is running as Nomad's long-lived instance
    When the harness starts a task whose configuration breaks the schema
    Then the call fails
    And no process of that task is running

  @DRIVER-WAIT-EXIT-CODE @must @shape-exit
  Scenario: WaitTask returns the task's exit code
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (handleTaskExitResult) reads
    ExitResult from WaitTask to apply the restart policy and report the task's exit.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    When the harness waits for the task
    Then WaitTask returns exit code 3

  @DRIVER-WAIT-AGAIN @must @shape-exit
  Scenario: WaitTask returns again at once after the task exited
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (Restore) calls WaitTask again after
    every agent restart, exited tasks included; a WaitTask that never returns keeps the task
    running in Nomad's view forever.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    And the task has exited
    When the harness waits for the task again
    Then WaitTask returns exit code 3 at once

  @DRIVER-WAIT-CONCURRENT @must @shape-exit
  Scenario: two WaitTask calls at the same time both return
    Basis: Nomad plugins/drivers/client.go (WaitTask) may be called by the task runner and the
    restore path at once; the driver interface requires every waiter to get the result.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    When the harness waits for the task twice at the same time
    Then both WaitTask calls return exit code 3

  @DRIVER-STOP-SIGNAL @must @shape-trap
  Scenario: StopTask delivers the kill signal first
    A task that exits with its own code on SIGTERM gets the chance to: StopTask(signal SIGTERM)
    must send it, not kill the task outright.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (killTask) sends the task's
    kill_signal with kill_timeout, so that a task can shut down cleanly; the driver interface
    says StopTask sends the signal and kills only after the timeout.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that traps SIGTERM
    When the harness stops the task with SIGTERM and a 5 s timeout
    Then the task exits with its own code for SIGTERM

  @DRIVER-STOP-ESCALATES @must @shape-stubborn
  Scenario: StopTask kills a task that ignores the signal once the timeout passes
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (killTask) relies on StopTask to
    kill after kill_timeout; a StopTask that returns with the task alive leaves it running after
    Nomad considers it stopped.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that ignores SIGTERM
    When the harness stops the task with SIGTERM and a 1 s timeout
    Then StopTask returns within the timeout plus a margin
    And no process of that task is running

  @DRIVER-STOP-EXITED @should @shape-exit
  Scenario: StopTask of a task that already exited succeeds
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (killTask) retries a failing
    StopTask up to 5 times with a growing backoff, delaying the allocation's stop.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    And the task has exited
    When the harness stops the task with SIGTERM and a 1 s timeout
    Then the call succeeds

  @DRIVER-DESTROY-FORCE @must @shape-stubborn
  Scenario: DestroyTask(force) kills a running task and everything it started
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (clearDriverHandle) and the restore
    path call DestroyTask with force=true; nothing else will ever kill what is left.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that ignores SIGTERM
    When the harness destroys the task with force
    Then the call succeeds
    And no process of that task is running

  @DRIVER-DESTROY-FORGETS @must @shape-exit
  Scenario: after DestroyTask the task is unknown
    Wait and Inspect of a destroyed task fail (Nomad's Go drivers answer UNKNOWN "task not found
    for given id"; NOT_FOUND is accepted too and recorded).

    Basis: Nomad plugins/drivers/driver.go (ErrTaskNotFound) and the driver interface: DestroyTask
    cleans up and removes the task from the driver's state.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    And the task has exited
    When the harness destroys the task with force
    And the harness inspects the task
    Then the call fails with task not found

  @DRIVER-INSPECT-TIMESTAMPS @must @shape-long
  Scenario: InspectTask carries started_at and completed_at and the right state
    Basis: Nomad plugins/drivers/utils.go (taskStatusFromProto) fails on a missing started_at or
    completed_at ("timestamp: nil Timestamp"); a running task reports state running.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness inspects the task
    Then the status has started_at, completed_at and state running

  @DRIVER-UNKNOWN-TASK @must
  Scenario: calls about a task that does not exist fail and never hang
    Basis: Nomad plugins/drivers/client.go: WaitTask, InspectTask, StopTask and DestroyTask of an
    unknown task must come back with an error; one that hangs blocks the task runner.

    Given the plugin is running as Nomad's long-lived instance
    When the harness waits, inspects, stops and destroys a task that does not exist
    Then every call fails within its deadline

  @DRIVER-TASKS-INDEPENDENT @must @shape-long
  Scenario: several tasks run independently
    Stopping one task leaves the other running.

    Basis: Nomad runs every task of every allocation on the node through the same long-lived
    plugin instance (client/pluginmanager/drivermanager/instance.go).

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started two long tasks
    When the harness stops the first task with SIGTERM and a 1 s timeout
    Then the second task is still running
