@variables @locks
Feature: lock expiry
  A lock that is neither renewed nor released lapses: Nomad's leader runs a timer of twice the
  TTL, then the variable stays locked for the lock delay, then the lock is cleared
  (nomad/locks.go). These clauses wait for it: a few seconds with the fast profile, up to a
  minute with Nomad's own numbers (TTL from 10s). Times are counted from the holder's acquire;
  a lock may be cleared up to half the minimum TTL later than Nomad's numbers give.

  @VARIABLES-EXPIRY-HELD-FOR-TTL @must
  Scenario: a lock is held for at least its TTL without renewals
    Basis: Nomad docs, Nomad Variables (Locks): "The TTL defines the time the lock will be held".

    Given the harness holds the lock on "lock/a" with the minimum TTL and a short lock delay
    When another client acquires the lock on "lock/a" at 80% of the TTL
    Then the answer is 409

  @VARIABLES-EXPIRY-RENEW-EXTENDS @must
  Scenario: renewing keeps the lock well past its TTL
    Basis: Nomad docs, Nomad Variables (Locks): "if the lock needs to be in place for longer,
    it can be renewed for as many new periods as wanted"; nomad/locks.go (RenewTTLTimer)
    restarts the leader's timer at every renew.

    Given the harness holds the lock on "lock/a" with the minimum TTL and a short lock delay
    When the holder renews the lock on "lock/a" every half TTL for three TTLs
    Then every renew answered 200
    And another client could not acquire the lock on "lock/a" meanwhile

  @VARIABLES-EXPIRY-FREES @must
  Scenario: an abandoned lock is cleared after twice its TTL and its lock delay
    Basis: Nomad nomad/locks.go: the leader's timer for a lock runs for 2 x TTL; when it fires
    the lock delay starts, and when that ends the lock is cleared from state, so another client
    can take it.

    Given the harness holds the lock on "lock/a" with the minimum TTL and a short lock delay
    When another client keeps trying to acquire the lock on "lock/a"
    Then the other client gets the lock within twice the TTL and the lock delay

  @VARIABLES-EXPIRY-LOCK-DELAY @must
  Scenario: once its TTL has lapsed a lock stays held for the lock delay, and cannot be renewed
    Basis: Nomad docs, Nomad Variables (Locks): "If by the time the TTL expires, and no renew
    or release calls were made, the variable will remain locked for at least the lock delay
    duration"; nomad/variables_endpoint.go (RenewLock) answers 409 once the leader's timer has
    fired.

    Given the harness holds the lock on "lock/a" with the minimum TTL and a long lock delay
    When another client keeps trying to acquire the lock on "lock/a"
    And the holder renews the lock on "lock/a" once the lock delay has begun
    Then the answer is 409
    And the other client did not get the lock before the TTL and the lock delay had passed
