@lock
Feature: renew
  A lock holder renews before its TTL lapses and about every half TTL, stops the protected
  process when a renew conflicts, retries renews that fail, and stops the protected process
  before the lock can pass to another holder when renews keep failing. Source: Nomad's guide
  "Configure singleton deployments" (the lock-renew pseudo-code) and Nomad's lock rules
  (nomad/locks.go: the leader's timer runs 2 × TTL, then the lock delay).

  @LOCK-RENEW-BEFORE-TTL @must
  Scenario: every renew comes within the TTL of the last successful one
    Basis: Nomad's lock API promises a lock only until its TTL after the last renew (the
    leader's 2 × TTL timer in nomad/locks.go is a grace period, not a promise); a holder that
    renews later keeps its process running on a lock the server may already give away.

    The harness watches the client hold its lock for two and a half of the TTLs the server
    granted it (at least the profile's hold_for, at most four times it). A client that held it
    for less than its TTL without a renew shows nothing here: the clause is skipped, saying so.

    Given a Variables server
    When the client starts
    And the client keeps the lock for a while
    Then every renew was sent within the TTL of the previous successful acquire or renew

  @LOCK-RENEW-HALF-TTL @should
  Scenario: renews come about every half TTL
    Accepted: a median period between TTL/10 and 3/4 TTL (Nomad's Go LockLeaser renews at
    0.7 × TTL). Watched as in LOCK-RENEW-BEFORE-TTL; fewer than two renews in less than two TTLs
    cannot be measured, and the clause is skipped, saying so.

    Basis: Nomad guide, Configure singleton deployments (lock-acquire pseudo-code): "On
    success: start heartbeat every 1/2 TTL"; the other half leaves time to retry a failed renew.

    Given a Variables server
    When the client starts
    And the client keeps the lock for a while
    Then renews came about every half TTL

  @LOCK-CONFLICT-STOPS @must
  Scenario: a renew conflict stops the protected process
    Basis: Nomad guide (lock-renew pseudo-code): "On conflict: exit the process with error
    code". Nomad answers a renew 409 when the lock ID no longer holds the variable
    (nomad/variables_endpoint.go RenewLock): another allocation may hold it now, so a protected
    process still running is a second copy.

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And the next renew is answered 409
    Then the protected process stopped soon after the conflict

  @LOCK-CONFLICT-EXIT @should
  Scenario: after a renew conflict the client exits with an error code
    Basis: Nomad guide (lock-renew pseudo-code): "On conflict: exit the process with error
    code"; Nomad's restart and reschedule policies read exit 0 as success (a batch job is then
    complete and not run again).

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And the next renew is answered 409
    Then the client exits non-zero after the conflict

  @LOCK-RENEW-RETRIES @should
  Scenario: a renew that fails is retried and the lock kept
    Basis: Nomad guide (lock-renew pseudo-code): "On failure: retry with backoff up to TTL."
    A server error says nothing about the lock, which the server still keeps for the holder.

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And the next renew fails with 503
    Then the client keeps the lock: a later renew succeeds and the protected process runs on

  @LOCK-LAPSE-STOPS @must
  Scenario: when renews keep failing, the protected process stops before the lock can pass on
    Basis: Nomad nomad/locks.go: after the last renew the leader keeps the lock 2 × TTL, then
    the lock delay, then clears it and another allocation can acquire it; a protected process
    still running then is a second copy.

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And every renew and release fails with 503 from now on
    Then the protected process stopped before the server could give the lock to another

  @LOCK-HANG-STOPS @must
  Scenario: when renews hang, the protected process stops before the lock can pass on
    The server takes the requests and never answers, the connection staying open (a stalled
    leader, a network that drops packets): only a client that bounds its requests notices.

    Basis: Nomad nomad/locks.go: after the last renew the leader keeps the lock 2 × TTL, then
    the lock delay, then clears it and another allocation can acquire it; Nomad's Go api client
    sets no timeout on a request by default, so a client that waits on a hung renew keeps its
    protected process running beside the next holder.

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And every renew and release hangs from now on
    Then the protected process stopped before the server could give the lock to another

  @LOCK-LATE-CONFLICT-STOPS @must
  Scenario: a renew conflict that comes late stops the protected process too
    The next renew is held an eighth of the TTL (under any sensible request timeout) and then
    answered 409, as a renew delivered late after the lock passed on is answered.

    Basis: Nomad guide (lock-renew pseudo-code): "On conflict: exit the process with error
    code"; nomad/variables_endpoint.go (RenewLock) answers 409 once the lock ID no longer holds
    the variable, however long the request took to get there. Nomad's Go LockLeaser crashes on
    a late conflict and leaves its protected process running.

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And the next renew is held an eighth of the TTL and then answered 409
    Then the protected process stopped soon after the conflict

  @LOCK-NO-CRASH @should
  Scenario: the client ends with an error of its own, never a crash
    Two runs of the client, each ended the way clients end: the first is stopped by Nomad with
    SIGTERM while it holds the lock; the second, started once the lock is free, meets a renew
    conflict answered an eighth of the TTL late, and if it still runs twice the profile's
    stop_within later, Nomad stops it with SIGTERM too (SIGKILL after the kill timeout, which is
    Nomad's and no crash). Each run's end is judged by what it printed: a Go panic or fatal
    error, a Rust panic or a Python traceback, or death by a signal that dumps core, is a crash.

    Basis: Nomad guide (lock-renew pseudo-code): "On conflict: exit the process with error
    code"; a crash is not the documented error exit: it skips the client's own cleanup
    (stopping the protected process, releasing the lock) and says nothing an operator can act
    on. Nomad's Go LockLeaser under `nomad var lock` panics ("send on closed channel",
    api/locks.go) when its protected function returns after the leaser has closed its error
    channel: after a late conflict and on a lapse.

    Given a Variables server
    When the client starts
    And Nomad stops the task with SIGTERM
    And the client runs again, holds the lock, and its next renew is held an eighth of the TTL and then answered 409
    Then no run of the client crashed

  @LOCK-LAPSE-TTL @should
  Scenario: when renews keep failing, the protected process stops once the TTL has passed
    The guide's sequence: once a renew has failed, the client may retry with backoff for up to
    a TTL, and must then stop. Counted from the first renew that failed, if it was sent within
    the TTL of the last success (a client that sent none by then must stop when that TTL
    expires); Nomad's Go helper, which renews at 0.7 × TTL and caps a renew's retries at the
    TTL (api/retry.go), stops about 1.7 × TTL after its last success and passes.

    Basis: Nomad guide (lock-renew pseudo-code): "On failure: retry with backoff up to TTL. If
    TTL expires, attempt to revoke lock, then exit the process with error code"; the API
    promises the lock only for the TTL, and Nomad keeps it for 2 × TTL and the lock delay
    (nomad/locks.go), so a client past this point still runs alone (LOCK-LAPSE-STOPS judges
    the point where it no longer would).

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And every renew and release fails with 503 from now on
    Then the protected process stopped within the TTL of the last renew the server accepted

  @LOCK-LAPSE-RELEASE-ATTEMPT @should
  Scenario: when the TTL has lapsed the client attempts to release the lock
    Basis: Nomad guide (lock-renew pseudo-code): "If TTL expires, attempt to revoke lock";
    a release that gets through frees the lock for the replacement at once.

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And every renew and release fails with 503 from now on
    Then the client tried to release the lock after its renews failed

  @LOCK-LAPSE-RELEASE-ENDS @should
  Scenario: after a lapse, Nomad's 500 to a late release ends the client with an error
    The harness fails every renew and release with 503 until Nomad would have freed the lock
    (2 × TTL plus the lock delay after the last renew it accepted), then lets the client's
    requests through: a release sent from then on meets Nomad's own answer, 500 "variable
    doesn't hold a lock". A client that gave its release up earlier never meets it; the clause
    still judges how it ended. A crash (a Go panic, a Rust panic, a Python traceback) is no
    exit of the client's own: it cut the release short rather than gave it up.

    Basis: Nomad nomad/state/state_store_variables.go (VarLockRelease) returns a plain error for
    a variable that holds no lock, which command/agent/http.go (errCodeFromHandler) answers with
    500, and the Go api client does not retry it (api/retry.go, retryPut, retries 429 and
    statuses above 500 only): no retry can release a lock that is gone. The guide's lock-renew pseudo-code: "If TTL expires, attempt to revoke lock,
    then exit the process with error code". A client that retries forever never exits, so Nomad
    never restarts or reschedules the allocation; one that exits 0 tells Nomad its work is done.

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And every renew and release fails with 503 until Nomad would have freed the lock
    Then the client gave up its release and exited with an error code
