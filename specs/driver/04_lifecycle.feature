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
    The handle carries a config whose id is the task's ID; its driver_state and version are the
    driver's own, given back to it as they were.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (runDriver) stores the handle
    StartTask returned, and after a restore (restoreHandle) addresses the task by the id in the
    handle's config: a handle without a config, or naming another task, loses or mixes up the
    task after an agent restart. The client never reads the handle's state (Nomad's own drivers
    leave it unset), so it is not judged.

    Given the plugin is running as Nomad's long-lived instance
    When the harness starts a long task
    Then the call succeeds
    And the handle names the task and carries the task's configuration

  @DRIVER-START-BAD-CONFIG @should
  Scenario: StartTask with a configuration that breaks the schema fails and starts nothing
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (runDriver) decodes the job's task
    configuration against TaskConfigSchema before StartTask and fails the task itself when it
    does not fit, so Nomad never sends such a configuration; other hosts, or a schema and a
    decoder that disagree, can. A failed StartTask leaves no handle, so Nomad would never stop
    or destroy whatever the plugin started anyway.

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
  Scenario: WaitTask returns again after the task exited
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (Restore, handleTaskExitResult)
    calls WaitTask again after every agent restart and plugin relaunch, for exited tasks too,
    and sets no deadline on it; a WaitTask that never returns keeps the task running in Nomad's
    view forever. Nomad has no number for "soon": the call must come back within the profile's
    RPC deadline (rpc_deadline, 30 s in nomad-1.10), so a driver that polls its runtime passes.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    And the task has exited
    When the harness waits for the task again
    Then WaitTask returns exit code 3

  @DRIVER-WAIT-CONCURRENT @must @shape-exit
  Scenario: two WaitTask calls at the same time both return
    Basis: Nomad plugins/drivers/client.go (WaitTask) may be called by the task runner and the
    restore path at once; the driver interface requires every waiter to get the result.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    When the harness waits for the task twice at the same time
    Then both WaitTask calls return exit code 3

  @DRIVER-STOP-SIGNAL @must @requires-send-signals @shape-trap
  Scenario: StopTask delivers the kill signal first
    A task that exits with its own code on SIGTERM gets the chance to: StopTask(signal SIGTERM),
    as for a job that sets kill_signal = "SIGTERM", must send it, not kill the task outright. A
    driver whose Capabilities say send_signals = false cannot deliver signals and stops tasks its
    own way: the clause is skipped.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (killTask) sends the task's
    kill_signal with kill_timeout, so that a task can shut down cleanly; the driver interface
    (plugins/drivers/driver.go, StopTask) says the signal is sent first and the task killed only
    after the timeout.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that traps SIGTERM
    When the harness stops the task with SIGTERM and a 5 s timeout
    Then the task exits with its own code for SIGTERM

  @DRIVER-STOP-ESCALATES @must @shape-stubborn
  Scenario: StopTask kills a task that ignores the signal once the timeout passes
    The job sets kill_signal = "SIGTERM" and kill_timeout = 1 s; the task ignores SIGTERM. Once
    StopTask has answered, the task must go: the WaitTask Nomad made when the task started
    comes back, however long after the timeout (a driver that polls its runtime is slow, not
    wrong: DRIVER-STOP-PROMPT judges how long), and no process of the task is left where the
    harness can see them. The harness waits up to its safety cap (the profile's
    task_call_deadline, not a Nomad number); only a task still running then fails.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (handleKill, killTask) sends one
    StopTask with the task's kill_signal and kill_timeout and then only waits on WaitTask, with
    no deadline (plugins/drivers/client.go, WaitTask: the task runner's context only): the
    escalation to a kill after the timeout is the driver's (plugins/drivers/driver.go,
    StopTask). A driver that never escalates leaves the task running, and the allocation stuck
    in its stop, for as long as the task cares to live.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that ignores SIGTERM
    When the harness stops the task with SIGTERM and a 1 s timeout
    Then the task is gone after the timeout
    And no process of that task is running

  @DRIVER-STOP-PROMPT @should @shape-stubborn
  Scenario: a stopped task is gone soon after the timeout
    The job sets kill_signal = "SIGTERM" and kill_timeout = 1 s; the task ignores SIGTERM. The
    WaitTask Nomad made when the task started should come back within the profile's
    rpc_deadline (30 s in nomad-1.10, the same "soon" as DRIVER-WAIT-AGAIN; not a Nomad number)
    of the timeout: a driver that notices the end on a poll of a few seconds passes. The
    measured time is in the record.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (handleKill) waits on WaitTask
    after StopTask without a deadline, so a slow driver breaks nothing at once; but the
    allocation's stop, a rolling update's next step and `nomad alloc stop` wait with it, and
    kill_timeout is the operator's bound on how long a stop takes.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that ignores SIGTERM
    When the harness stops the task with SIGTERM and a 1 s timeout
    Then the task is gone soon after the timeout

  @DRIVER-STOP-DEFAULT-SIGNAL @must @shape-long
  Scenario: StopTask with no kill signal stops the task
    A job that sets no kill_signal gets StopTask with an empty signal; the driver chooses (Nomad's
    own executor sends SIGINT).

    Basis: Nomad client/allocrunner/taskrunner/driver_handle.go (Kill) sends the task's
    kill_signal as it is, and neither api.Task nor structs.Task (Canonicalize) gives it a
    default: most jobs stop with signal "". A driver that refuses it fails every stop, and Nomad
    retries it up to five times (task_runner.go, killTask) before recording a task it could not
    kill.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness stops the task with no kill signal and a 1 s timeout
    Then the call succeeds
    And the task is gone after the timeout

  @DRIVER-STOP-EXITED @should @shape-exit
  Scenario: StopTask of a task that already exited succeeds
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (killTask) retries a failing
    StopTask up to 5 times with a growing backoff, delaying the allocation's stop.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    And the task has exited
    When the harness stops the task with no kill signal and a 1 s timeout
    Then the call succeeds

  @DRIVER-DESTROY-FORCE @must @shape-stubborn
  Scenario: DestroyTask(force) kills a running task and everything it started
    DestroyTask and the WaitTask after it are waited for up to the harness's safety cap (the
    profile's task_call_deadline, not a Nomad number): a slow answer passes here and is judged
    by DRIVER-DESTROY-PROMPT. The task fails the clause when it is seen running after
    DestroyTask answered: its processes, where the harness sees them, or InspectTask RUNNING.

    Basis: Nomad client/allocrunner/taskrunner/task_runner_getters.go (clearDriverHandle) and the
    restore path (task_runner.go, restoreHandle) call DestroyTask with force=true, with no
    deadline (plugins/drivers/client.go), and ignore its error; beyond it only the client's
    cgroup kill remains (wrangler_hook.go), which reaches only what the driver put in the
    task's cgroup.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that ignores SIGTERM
    When the harness destroys the task with force
    Then the call succeeds
    And no process of that task is running

  @DRIVER-DESTROY-PROMPT @should @shape-stubborn
  Scenario: DestroyTask(force) of a running task answers soon
    The task ignores SIGTERM. DestroyTask(force) should answer within the profile's
    rpc_deadline (30 s in nomad-1.10, the harness's "soon"; not a Nomad number); the measured
    time is in the record. A driver that first gives the task a fixed grace of its own (a
    minute, say) answers only after it.

    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (restoreHandle) calls
    DestroyTask(force) when RecoverTask fails and waits for it, without a deadline, before the
    task runs again; task_runner_getters.go (clearDriverHandle) calls it at the end of every
    task runner, whose end waits for it. plugins/drivers/proto/driver.proto: "Force destroys
    the task even if it is still in a running state".

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that ignores SIGTERM
    When the harness destroys the task with force
    Then DestroyTask answered soon

  @DRIVER-DESTROY-FORGETS @must @shape-exit
  Scenario: after DestroyTask the task is unknown
    WaitTask of a destroyed task fails, with any error: Nomad's Go drivers answer UNKNOWN "task
    not found for given id", others NOT_FOUND or words of their own, and Nomad's client cannot
    tell one error from another over gRPC. It must not answer the task's result, hang or break
    the connection. InspectTask's answer is recorded as extra evidence.

    Basis: plugins/drivers/driver.go (DestroyTask: "cleans up and frees all resources associated
    with a task"): Nomad's client calls it once per finished task (task_runner.go,
    clearDriverHandle) and never asks again, so a driver that keeps destroyed tasks keeps every
    task the node ever ran.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    And the task has exited
    When the harness destroys the task with force
    And the harness waits for the destroyed task and inspects it
    Then WaitTask fails with task not found

  @DRIVER-INSPECT-TIMESTAMPS @should @shape-long
  Scenario: InspectTask carries started_at and completed_at and the right state
    Basis: Nomad's client never calls InspectTask (only its driver test harness,
    plugins/drivers/testutils, does); for those callers plugins/drivers/utils.go
    (taskStatusFromProto) fails on a missing started_at or completed_at ("timestamp: nil
    Timestamp"), and a running task reports state running.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness inspects the task
    Then the status has started_at, completed_at and state running

  @DRIVER-UNKNOWN-TASK @must
  Scenario: calls about a task that does not exist never hang
    Any answer will do: an error (Nomad's Go drivers answer UNKNOWN "task not found for given
    id") or even OK, because the client ignores DestroyTask's error and cannot tell a not-found
    error from another over gRPC.

    Basis: Nomad plugins/drivers/client.go sets no deadline on WaitTask, StopTask or DestroyTask:
    one that hangs on a task the driver does not know (after a plugin relaunch that lost it)
    blocks the task runner for good (task_runner.go, handleKill and restoreHandle).

    Given the plugin is running as Nomad's long-lived instance
    When the harness waits, inspects, stops and destroys a task that does not exist
    Then every call comes back within its deadline

  @DRIVER-TASKS-INDEPENDENT @must @shape-long
  Scenario: several tasks run independently
    Stopping one task leaves the other running: its WaitTask has not returned. InspectTask and
    the processes the harness sees, where it sees them, are extra evidence.

    Basis: Nomad runs every task of every allocation on the node through the same long-lived
    plugin instance (client/pluginmanager/drivermanager/instance.go), and learns that a task
    ended only from its WaitTask (task_runner.go, Run).

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started two long tasks
    When the harness stops the first task with no kill signal and a 1 s timeout
    Then the second task is still running
