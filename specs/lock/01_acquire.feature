@lock
Feature: acquire
  A singleton lock client takes a Nomad Variables lock before it starts the protected process,
  waits with backoff while another allocation holds the lock, and fails after a configurable
  window. Source: Nomad's guide "Configure singleton deployments" (its Overview and the
  lock-acquire pseudo-code) and Nomad's lock API (command/agent/variable_endpoint.go).

  @LOCK-STARTS @must
  Scenario: with the lock free, the client acquires it and starts the protected process
    Every other clause starts from a client that holds the lock with its protected process
    running; a client that never gets there is judged here.

    Basis: Nomad guide, Configure singleton deployments (Overview): the allocation obtains the
    lock, then runs the singleton process; a client that never starts it leaves the job down
    although nobody else holds the lock.

    Given a Variables server
    When the client starts
    Then the client acquires the lock and starts the protected process in time

  @LOCK-NO-START-BEFORE-ACQUIRE @must
  Scenario: the protected process starts only after a successful acquire
    The harness holds every acquire answer back for a while, so a client that starts early
    shows it.

    Basis: Nomad guide, Configure singleton deployments (Overview): "If the allocation cannot
    obtain the lock, then it must not start whatever process or operation you intend to be a
    singleton."

    Given a Variables server
    And acquire answers are delayed by 150 ms
    When the client starts
    Then the protected process started only after a successful acquire was answered

  @LOCK-NO-START-WHILE-HELD @must
  Scenario: the protected process does not start while another allocation holds the lock
    Basis: Nomad guide, Configure singleton deployments (Overview): "it must not start" without
    the lock; Nomad answers lock-acquire with 409 while another lock ID holds the variable
    (nomad/state/state_store_variables.go).

    Given a Variables server
    And another holder has the lock
    When the client starts
    And the other holder keeps the lock for a while and then releases it
    Then the protected process did not start while the other holder had the lock
    And the client acquires the lock and starts the protected process in time

  @LOCK-ACQUIRE-BACKOFF @should
  Scenario: a waiting client retries the acquire with backoff
    The other holder keeps the lock for the profile's hold_for, and on, up to twice that, until
    the client's first run has retried or ended, so that where the release falls does not
    decide whether a retry is seen. Each run of the client is judged on its own (a restart is
    the restart policy's pacing, not the client's); a client that never retried within one run
    is skipped, saying so.

    Basis: Nomad guide, Configure singleton deployments (lock-acquire pseudo-code): "On conflict
    or failure: retry with backoff and timeout." Every attempt is a request to the servers; the
    profile's max_acquire_rate bounds them.

    Given a Variables server
    And another holder has the lock
    When the client starts
    And the other holder keeps the lock for a while and then releases it
    Then the client's acquire attempts came no faster than the profile allows

  @LOCK-GIVES-UP @must @requires-give-up
  Scenario: a client that cannot get the lock gives up after its window and fails
    Basis: Nomad guide, Configure singleton deployments (Overview): "After a configurable window
    without obtaining the lock, the allocation must fail"; and the pseudo-code: "Once out of
    attempts, exit the process with error code."

    Given a Variables server
    And another holder has the lock
    When the client starts
    Then the client exits non-zero within its give-up window, without starting the protected process

  @LOCK-REQUESTS-WELL-FORMED @must
  Scenario: every lock request is one Nomad accepts
    Basis: Nomad command/agent/variable_endpoint.go and nomad/structs/variables.go: exactly one
    of lock-acquire, lock-renew, lock-release; no cas with a lock flag; a TTL between the
    server's bounds; a release with Lock.ID and without Items. Anything else is answered 400 (or
    500 for a renew without its lock ID) and the operation does not happen: the lock is not
    taken, kept or given back.

    Given a Variables server
    When the client starts
    And the client has run until its protected process runs, or for the start time
    And the client is stopped as Nomad stops a task
    Then every lock request of the client was one Nomad accepts
