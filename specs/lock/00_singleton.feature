@lock
Feature: singleton
  The invariant the lock exists for, checked from the recorded history alone: at most one
  protected process at a time, and none while its client holds no lock as the server saw it.
  Source: Nomad's guide "Configure singleton deployments" (its design goal: "at most one
  instance of a given allocation running on the cluster at one time").

  @LOCK-SINGLETON @must
  Scenario: several clients under faults never run two protected processes at once
    The clients run against one server under a fault campaign. Every campaign, whatever its
    seed, applies the faults that expose the known ways a client breaks the singleton, in order,
    each a TTL after the previous one and once a client holds the lock: the holder's renew
    connection reset; three of its renews answered 503; its renew answered 409 an eighth of a
    TTL late (then, on the reference server, the lock is cleared, as the 409 said it passed on);
    an outage longer than a lock's lifetime (2 × TTL + lock delay + TTL) in which the holder's
    requests hang and are then delivered and every other client is refused. The campaign lasts
    until the outage has played out and two more TTLs (or --campaign, for a soak); its length
    comes from the TTL and lock delay the clients ask for. The seed draws the rest (latency,
    5xx, 429, resets, partitions). A client that exits is started again, as Nomad's restart
    policy does. A client holds its lock from the acquire until the lock leaves the server's
    state (a release, or the end of the lock delay after the leader's timer fired: Nomad
    refuses every other acquire until then, nomad/locks.go), or until a renew of it is answered
    409 (as one delivered after the lock passed on). On failure the report names the scheduled
    fault that exposed the first violation, draws the timeline, and prints every fault with the
    seed that replays them.

    Basis: Nomad guide, Configure singleton deployments: "there is at most one instance of a
    given allocation running on the cluster at one time"; the design "errs on the side of
    correctness: having zero or one allocations running rather than the incorrect one or two".

    Given a Variables server
    When the clients run under a seeded fault campaign with an outage longer than a lock's lifetime
    Then no two protected processes overlapped and none ran without its client holding the lock

  @LOCK-SERVER-RESTART @must @requires-reference-server
  Scenario: a server restart does not make two copies run
    The server loses its in-memory TTL timers and is unreachable for a TTL; Nomad's new leader
    rebuilds the timers from the state (nomad/locks.go restoreLockTTLTimers).

    Basis: Nomad guide, Configure singleton deployments: at most one instance at a time; a
    leader change or restart is an ordinary event in a Nomad cluster.

    Given a Variables server
    When two clients run and the first holds the lock
    And the server restarts, losing its lock timers, and is down for a TTL
    Then no two protected processes overlapped and none ran without its client holding the lock

  @LOCK-TIMING @should @requires-stop-on-client-after
  Scenario: the measured timing leaves no window for two copies after a node failure
    The advice is computed from the client's measured renew period and stop time, the TTL and
    lock delay it asks for and the job's stop_on_client_after; its reasoning is in the report.

    Basis: Nomad guide, Configure singleton deployments: "Tune the lock TTL, the time it takes
    the alloc to give up, and the stop_on_client_after duration timer values" (group.disconnect
    forces a disconnected client to stop the allocation).

    Given a Variables server
    When the client starts
    And the client holds the lock and its protected process runs
    And every renew and release fails with 503 from now on
    Then the timing advice shows no window in which two copies could run
