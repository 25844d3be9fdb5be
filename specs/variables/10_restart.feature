@variables @locks
Feature: leader restart
  Locks are raft state: a new leader keeps them and starts their TTL timers afresh
  (nomad/locks.go). The suite restarts a reference server to check it; against a real Nomad
  this clause is skipped.

  @VARIABLES-RESTART-KEEPS-LOCK @must @requires-reference-server
  Scenario: a lock survives a restart of the server, and its holder can renew and release it
    The clause runs on a reference server of its own, restarted in the middle.

    Basis: Nomad nomad/locks.go (restoreLockTTLTimers): after a leader change every lock in
    state gets a fresh TTL timer; the lock and its ID are raft state and survive.

    Given a server of the scenario's own
    And the harness holds the lock on "lock/a" with items "k=v"
    When the server restarts
    Then another client cannot acquire the lock on "lock/a"
    And the holder can still renew the lock on "lock/a"
    And the holder can release the lock on "lock/a"
