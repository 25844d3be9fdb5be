@driver
Feature: survival
  A driver plugin's lifetime is not the agent's, and its tasks' lifetime is not the plugin's:
  Nomad relaunches a plugin that died and recovers the tasks it started from the handles it
  stored, and after an agent restart it reattaches to the plugin still running.

  @DRIVER-SURVIVE-PLUGIN-KILL @must @shape-long
  Scenario: tasks keep running when the plugin process is killed
    Where the harness sees the task's processes it checks them; where it cannot (a VM, a
    runtime that hides them), it asks the driver: relaunched, the plugin recovers the task and
    its WaitTask does not return.

    Basis: Nomad docs (Task Drivers: "a driver plugin is long-lived and its lifetime is not bound
    to the Nomad client") and client/allocrunner/taskrunner/task_runner.go (Restore, WaitTask
    "plugin is shut down" handling): Nomad relaunches the plugin and recovers running tasks; a
    task that died with the plugin is restarted by its restart policy, interrupting the workload.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the plugin process is killed
    Then the task is still running

  @DRIVER-RECOVER @must @shape-long
  Scenario: RecoverTask restores running tasks from their handles after a relaunch
    Two tasks, recovered by the relaunched plugin: one from the handle as StartTask returned it
    (what the task runner holds after a plugin crash), one from the handle as Nomad stores it
    (what it reads back after an agent restart: the task config without msgpack_driver_config).
    Judged through the driver's own answers, whatever the harness can see of the tasks: each
    recovered task is still running (its WaitTask does not return), StopTask stops it and
    WaitTask then returns; InspectTask is extra evidence.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (restoreHandle) calls RecoverTask
    with the task's handle on the relaunched plugin and destroys the task if it fails; the
    client's state store keeps the handle through Nomad's TaskConfig, whose raw driver config is
    an unexported field and is not stored (plugins/drivers/driver.go), so a driver that decodes
    its task configuration in RecoverTask loses every task after an agent restart.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started two long tasks
    When the plugin process is killed
    And Nomad relaunches the plugin and recovers the first task from the handle it holds and the second from the handle it stored
    Then RecoverTask succeeds with either handle
    And the recovered tasks can be stopped and waited for

  @DRIVER-RECOVER-EXITED @should @shape-exit
  Scenario: a task that exited while the plugin was down reports its exit after recovery
    Where the harness cannot see the task's processes, it waits 3 s for the exit shape (about a
    second) and asks the relaunched driver: a task InspectTask still calls running did not exit
    while the plugin was down, and the clause is skipped, saying so.

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
    The sequence of a client restart: the agent connects again to the plugin still running,
    calls PluginInfo (not SetConfig), Init again, reopens the Fingerprint and TaskEvents streams,
    then recovers every stored handle on that same plugin and waits on the task.

    Basis: Nomad client/pluginmanager/drivermanager/instance.go (dispense with the stored
    reattach config, then Init; fingerprint and handleEvents reopen the streams) and
    client/allocrunner/taskrunner/task_runner.go (Restore, restoreHandle: RecoverTask with the
    stored handle, and DestroyTask(force) of the running task when it fails; then WaitTask). A
    driver whose second Init fails is killed; one whose RecoverTask refuses a task it already
    runs, or needs the raw driver config Nomad did not store, has its tasks destroyed.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the agent restarts and reattaches to the plugin as Nomad does
    Then PluginInfo and Init answer again, and the Fingerprint stream opens
    And RecoverTask of the stored handle succeeds on the same plugin
    And the task is still running after the reattach

  @DRIVER-RECOVERABLE-ERROR @should
  Scenario: a StartTask that can never succeed is not marked worth retrying
    A plain error, or a RecoverableError detail with recoverable = false, is right for a task
    configuration that cannot be decoded (it is what Nomad's raw_exec answers); marking it
    recoverable is not.

    Basis: Nomad plugins/drivers/client.go (StartTask) reads a RecoverableError from the status
    details, and client/allocrunner/taskrunner/task_runner.go (runDriver, then the restart
    tracker) restarts a task whose error is recoverable and fails it at once otherwise: a
    configuration that can never work, marked recoverable, is restarted again and again until
    the restart policy gives up, for nothing.

    Given the plugin is running as Nomad's long-lived instance
    When the harness starts a task whose configuration breaks the schema
    Then the error is not marked recoverable
