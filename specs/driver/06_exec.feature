@driver
Feature: signals and exec
  When the driver's capabilities say so, Nomad sends signals to tasks (`nomad alloc signal`, a
  template change) and runs commands inside them (`nomad alloc exec`, script checks). The exec
  streaming cases are those of Nomad's own driver conformance suite
  (plugins/drivers/testutils, ExecTaskStreamingConformanceTests).

  @DRIVER-SIGNAL @must @requires-send-signals @shape-trap
  Scenario: SignalTask delivers a named signal
    Basis: Nomad client/allocrunner/taskrunner/lifecycle.go (Signal) sends the signal by name
    through SignalTask for `nomad alloc signal` and template changes (change_mode = "signal"),
    without looking at Capabilities; a driver whose Capabilities say send_signals = false
    declares it cannot, and the clause is skipped for it.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a task that traps SIGTERM
    When the harness signals the task with SIGUSR1
    Then the task exits with its own code for SIGUSR1

  @DRIVER-SIGNAL-UNKNOWN @should @requires-send-signals @shape-long
  Scenario: SignalTask with an unknown signal name is refused
    Basis: Nomad passes the name the user typed (`nomad alloc signal -s`); a driver that answers OK
    to a name it cannot deliver tells the user the signal was sent.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness signals the task with SIGNOTASIGNAL
    Then the call fails

  @DRIVER-EXEC @must @requires-exec @shape-long
  Scenario: ExecTask returns the command's output and exit code
    Basis: Nomad client/allocrunner/taskrunner/task_runner.go (ExecTask for script checks,
    interfaces.ScriptExecutor) reads stdout and the exit code to decide a check's status; the
    client does not look at Capabilities first, so a driver that says exec = false (and whose
    clause is skipped) fails such checks.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness runs "echo hello; echo oops >&2; exit 7" in the task
    Then ExecTask returns stdout "hello", stderr "oops" and exit code 7

  @DRIVER-EXEC-STREAMING-NOTTY-BASIC @must @requires-exec @shape-long
  Scenario: exec streaming without a tty passes stdout, stderr and the exit code
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (notty basic): stdout "hello stdout",
    stderr "hello stderr", exit code 43.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "echo hello stdout; echo hello stderr >&2; exit 43" in the task without a tty
    Then the stream gives stdout "hello stdout\n", stderr "hello stderr\n" and exit code 43

  @DRIVER-EXEC-STREAMING-NOTTY-STREAMING @must @requires-exec @shape-long
  Scenario: exec streaming without a tty streams output as it comes
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (notty streaming): the lines of a
    command that prints one a second arrive one by one, not all at the end.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "for n in 1 2 3; do echo $n; sleep 1; done" in the task without a tty
    Then the stream gives stdout "1\n2\n3\n" and exit code 0
    And the first line arrived at least a second before the last

  @DRIVER-EXEC-STREAMING-NOTTY-STTY @must @requires-exec @shape-long
  Scenario: exec streaming without a tty gives the command no terminal
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (notty stty): `stty size` fails with
    "Inappropriate ioctl for device" and exit code 1.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "stty size" in the task without a tty
    Then the stream's stderr says the input is not a terminal and the exit code is 1

  @DRIVER-EXEC-STREAMING-NOTTY-STDIN @must @requires-exec @shape-long
  Scenario: exec streaming without a tty passes stdin and its end
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (notty stdin) sends stdin "hello from
    stdin\n" and then a close; `nomad alloc exec` sends the close when its own input ends, so
    `echo data | nomad alloc exec ... cat` only returns when the close reaches the command as end
    of input. The harness runs `cat` (Nomad's test uses `head -n1`, which would end without it)
    and keeps its side of the stream open, as the CLI does.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "echo hello from command; cat" in the task without a tty, sending "hello from stdin" and closing stdin
    Then the stream gives stdout "hello from command\nhello from stdin\n" and exit code 0

  @DRIVER-EXEC-STREAMING-TTY-BASIC @must @requires-exec @shape-long
  Scenario: exec streaming with a tty merges output into the terminal
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (tty basic): both lines arrive on stdout
    with CRLF line ends, exit code 43.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "echo hello stdout; echo hello stderr >&2; exit 43" in the task with a tty
    Then the stream gives stdout "hello stdout\r\nhello stderr\r\n" and exit code 43

  @DRIVER-EXEC-STREAMING-TTY-STREAMING @must @requires-exec @shape-long
  Scenario: exec streaming with a tty streams output as it comes
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (tty streaming).

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "for n in 1 2 3; do echo $n; sleep 1; done" in the task with a tty
    Then the stream gives stdout "1\r\n2\r\n3\r\n" and exit code 0
    And the first line arrived at least a second before the last

  @DRIVER-EXEC-STREAMING-TTY-RESIZE @must @requires-exec @shape-long
  Scenario: exec streaming with a tty applies terminal resizes
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (tty stty): after sizes 50x40 then
    100x100, `stty size` prints "100 100".

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "sleep 1; stty size" in the task with a tty, resizing to 50x40 then 100x100
    Then the stream gives stdout "100 100\r\n" and exit code 0

  @DRIVER-EXEC-STREAMING-TTY-STDIN @must @requires-exec @shape-long
  Scenario: exec streaming with a tty passes stdin without a close
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (tty stdin): the terminal echoes the
    input and `head -n1` prints it again; no stdin close is sent.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "head -n1" in the task with a tty, sending "hello from stdin"
    Then the stream gives stdout "hello from stdin\r\nhello from stdin\r\n" and exit code 0

  @DRIVER-EXEC-STREAMING-TTY-CHILDREN @must @requires-exec @shape-long
  Scenario: exec streaming ends with the main process, not its orphans
    Basis: Nomad plugins/drivers/testutils/exec_testing.go (tty children): a background child that
    prints 3 s later is not waited for; the stream ends when the main process exits.

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams "(( sleep 3; echo from background ) & ); echo from main; exec sleep 1" in the task with a tty
    Then the stream gives stdout "from main\r\n" and exit code 0

  @DRIVER-EXEC-STREAMING-ISOLATION @must @requires-exec @shape-long
  Scenario: a file made inside the task is where the driver's isolation says
    With fs_isolation none, a file the command makes is on the host; with chroot or image
    isolation, it is not.

    Basis: Nomad plugins/drivers/testutils/exec_testing.go (isolation) checks the file against the
    driver's declared fs_isolation (Capabilities).

    Given the plugin is running as Nomad's long-lived instance
    And the harness has started a long task
    When the harness streams a command that makes a temporary file in the task
    Then the file is on the host exactly when the driver declares no filesystem isolation
