@driver
Feature: observation
  What Nomad learns about a running task: resource usage on the TaskStats stream, events on the
  TaskEvents stream, and the task's output through the log FIFOs Nomad's logmon reads. What the
  task sees: the environment and the directories Nomad gave it.

  @DRIVER-STATS @must @shape-long
  Scenario: TaskStats streams usage at the requested interval
    The harness reads the stream as Nomad's stats hook does: a stream that ends is opened again
    one interval later, so a driver may send one message per stream or many; what counts is
    that usage keeps coming, each message with a timestamp and no negative numbers.

    Basis: Nomad client/allocrunner/taskrunner/stats_hook.go opens TaskStats with the client's
    collection interval (1 s by default) when the agent publishes allocation metrics (telemetry
    publish_allocation_metrics, on in -dev agents), reopens it one interval after it closes, and
    feeds the allocation's resource metrics from it; a driver whose stream goes quiet leaves
    them empty.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness collects the task's stats for three intervals
    Then at least two stats messages arrived, with a timestamp and no negative usage

  @DRIVER-STATS-ENDS @should @shape-exit
  Scenario: the TaskStats stream ends when the task is gone
    Basis: the driver interface (plugins/drivers/driver.go, TaskStats) has the channel closed
    when the task exits. Nomad's stats hook cancels the stream itself once the task has exited
    (stats_hook.go, Exited), so nothing leaks in Nomad; a stream that never ends only shows a
    driver that does not notice its task is gone. A stream refused, ended without a message, or
    ended while InspectTask still calls the task running (a driver may end a stream at any time;
    Nomad opens another) shows nothing of this: the clause is skipped, saying which.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that exits with code 3
    When the harness collects the task's stats until it exits
    Then the stats stream ends after the task exited

  @DRIVER-EVENTS-IDS @must @shape-long
  Scenario: task events name their allocation and task
    Every event about the task carries the task's own alloc_id and task_name (not merely some).

    Basis: Nomad client/pluginmanager/drivermanager/instance.go (handleEvent) routes each event
    by alloc_id and task_name to that task's runner, and drops it ("no handler registered for
    event") when none matches: an event naming another allocation or task is lost, or shown on
    the wrong task.

    Given the plugin is running as Nomad's long-lived instance
    And Nomad has opened the TaskEvents stream
    And the harness has started a long task
    When the harness stops the task with no kill signal and a 1 s timeout
    Then every task event received carries the task's alloc_id and task_name

  @DRIVER-LOGS @must @shape-output @requires-log-collection
  Scenario: the task's stdout and stderr reach the FIFOs Nomad gave it
    Unless the driver's capabilities disable log collection, Nomad's logmon reads the task's
    output from the stdout_path and stderr_path FIFOs.

    Basis: Nomad client/allocrunner/taskrunner/logmon_hook.go creates the FIFOs and
    task_runner.go (buildTaskConfig) passes them as stdout_path and stderr_path; output not
    written there never reaches `nomad alloc logs`.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that writes known lines to stdout and stderr
    When the task has exited
    Then its stdout FIFO carried its stdout lines and its stderr FIFO its stderr lines

  @DRIVER-TASK-ENV @must @shape-output @requires-log-collection
  Scenario: the task sees the environment Nomad gave it
    Basis: Nomad client/taskenv/env.go builds the task's environment (NOMAD_* variables, the
    job's env block) and task_runner.go passes it in TaskConfig.env; a task without it cannot find
    its allocation, ports or secrets.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that writes known lines to stdout and stderr
    When the task has exited
    Then the task saw the environment it was given

  @DRIVER-TASK-DIRS @must @shape-output
  Scenario: the task can use the allocation and task directories it was given
    NOMAD_ALLOC_DIR, NOMAD_TASK_DIR and NOMAD_SECRETS_DIR name directories the task can write.

    Basis: Nomad client/allocdir builds the directories and client/taskenv/env.go names them in
    the environment; jobs rely on local/, secrets/ and alloc/data to exist and be writable.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that writes known lines to stdout and stderr
    When the task has exited
    Then the task wrote a file into each of its directories
