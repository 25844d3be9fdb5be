@lock
Feature: release
  A lock holder releases the lock when it is done and when Nomad stops it, passes the
  protected process's outcome on, and stops the protected process on the task's kill signal.
  Source: Nomad's guide "Configure singleton deployments" and how Nomad stops a task
  (kill_signal, default SIGINT, then SIGKILL after kill_timeout).

  @LOCK-RELEASE-ON-EXIT @should @shim-only
  Scenario: the lock is released when the protected process exits
    Basis: Nomad guide, Configure singleton deployments: stopping the allocation "releases the
    lock or allows its TTL to expire"; without a release the replacement waits 2 × TTL plus
    the lock delay (nomad/locks.go).

    Given a Variables server
    And the protected process exits by itself with code 0 after a second
    When the client starts
    And the protected process exits
    Then the client released the lock
    And the client exits 0

  @LOCK-EXIT-STATUS @should @shim-only
  Scenario: a failing protected process makes the client exit non-zero
    Any non-zero code will do (`nomad var lock` exits 1 for every failure).

    Basis: Nomad's restart policy reads the task's exit status: a shim that exits 0 for a
    failed protected process makes Nomad treat the failure as success.

    Given a Variables server
    And the protected process exits by itself with code 3 after a second
    When the client starts
    And the protected process exits
    Then the client exits non-zero

  @LOCK-SIGTERM @must
  Scenario: SIGTERM stops the protected process before the lock is given back
    For a sidecar, Nomad stops the leader task first and the application after it, so the
    application is only required to stop within its kill timeout.

    Basis: Nomad guide (Overview): "The process that sets and refreshes the lock must have its
    lifecycle tied to the main task." Nomad stops a task with its kill_signal and SIGKILLs it
    after kill_timeout; a protected process that outlives its lock's release runs beside the
    next holder.

    Given a Variables server
    When the client starts
    And Nomad stops the task with SIGTERM
    Then the protected process stopped within the kill timeout, never running while the lock was free

  @LOCK-SIGTERM-HUNG @must
  Scenario: SIGTERM while a renew hangs still stops the protected process at once
    The harness sends the kill signal while the client waits on a renew the server never
    answers. Only the shim pattern is judged; in the sidecar pattern Nomad stops the application
    after the leader task whatever the leader does. How long the client itself takes to exit
    is noted, not judged: Nomad SIGKILLs it at the kill timeout.

    Basis: the guide requires the locking process's lifecycle to be tied to the protected
    process's; Nomad stops a task with its kill_signal and SIGKILLs it after kill_timeout
    (client/allocrunner/taskrunner/task_runner.go, killTask). A client that waits for its hung
    request before it acts on the signal gives its protected process no graceful stop at all:
    it runs on until the SIGKILL (and one started apart from the client's process group
    outlives even that).

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And the server stops answering the client's requests
    And Nomad stops the task with SIGTERM while a renew hangs
    Then the protected process stopped within the kill timeout

  @LOCK-SIGKILL-NO-ORPHAN @should @shim-only
  Scenario: a client killed with SIGKILL leaves no protected process running
    The harness kills the client's main process with SIGKILL and then, as a driver cleaning up
    a task does, whatever is left in the client's process group; a protected process the client
    started in a group of its own must end too.

    Basis: Nomad SIGKILLs a task still running at its kill_timeout
    (client/allocrunner/taskrunner/task_runner.go, killTask), and the kernel's OOM killer can do
    the same at any time. Where the driver kills a task by its process group (raw_exec without
    cgroups), a protected process that left the client's group runs on with no one renewing its
    lock: once the lock passes to another allocation, there are two copies. Drivers that kill
    the task's cgroup take it anyway, hence SHOULD.

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And the client is killed with SIGKILL
    Then the protected process ended soon after its client

  @LOCK-SIGINT @must
  Scenario: SIGINT, Nomad's default kill signal, stops the protected process too
    Basis: Nomad's task kill_signal defaults to SIGINT (jobspec task block); the guide ties the
    protected process's lifecycle to the locking task's.

    Given a Variables server
    When the client starts
    And Nomad stops the task with SIGINT
    Then the protected process stopped within the kill timeout, never running while the lock was free

  @LOCK-SIGNAL-RELEASES @should
  Scenario: a client stopped by Nomad releases its lock
    Basis: Nomad guide: stopping the allocation "releases the lock or allows its TTL to
    expire"; releasing lets the replacement start at once instead of after 2 × TTL plus the
    lock delay.

    Given a Variables server
    When the client starts
    And Nomad stops the task with SIGTERM
    Then the client released the lock after the signal
