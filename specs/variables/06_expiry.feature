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
    duration"; nomad/variables_endpoint.go (RenewLock) answers 409 "attempting to modify locked
    variable" once the leader's timer has fired (RenewTTLTimer finds no timer to reset), while
    the lock is still in state.

    Given the harness holds the lock on "lock/a" with the minimum TTL and a long lock delay
    When another client keeps trying to acquire the lock on "lock/a"
    And the holder renews the lock on "lock/a" once the lock delay has begun
    Then the answer is 409 with "attempting to modify locked variable"
    And the other client did not get the lock before the TTL and the lock delay had passed

  @VARIABLES-EXPIRY-DELAY-CLEARS-ANY @should
  Scenario: a release frees a lock at once, while the lock delay of a lapse, once begun, clears whatever lock the variable holds when it ends
    The lapsed holder releases during the lock delay and another client takes the lock at
    once; when the first lock's delay ends, that client's lock is gone.

    Basis: Nomad nomad/state/state_store_variables.go (VarLockRelease) clears a lock at once,
    and nomad/variables_endpoint.go (Apply) then only stops the leader's TTL timer: no delay
    follows a release. nomad/locks.go (CreateVariableLockTTLTimer) starts a lapse's lock delay
    with time.AfterFunc, which nothing cancels; when it ends, invalidateVariableLock applies a
    lock-release without a lock ID, and VarLockRelease compares IDs only when the request has
    one, so the lock is cleared whoever holds it then, and its holder's renew answers 409
    "variable doesn't hold a lock".

    Given the harness holds the lock on "lock/a" with the minimum TTL and a long lock delay
    When the lock on "lock/a" has lapsed into its lock delay
    And the holder releases the lock on "lock/a"
    Then the answer is 200
    When another client takes the lock on "lock/a"
    Then the answer is 200 with a lock ID
    When the lock delay of "lock/a" has ended
    And the other client renews its lock on "lock/a"
    Then the answer is 409 with "variable doesn't hold a lock"

  @VARIABLES-EXPIRY-REACQUIRE @must
  Scenario: the holder's acquire with its own lock ID answers 200 but does not extend the lock; only a renew does
    Basis: Nomad nomad/state/state_store_variables.go (VarLockAcquire) refuses an acquire only
    when another lock ID holds the variable, so the holder's acquire with its own lock ID
    answers 200 with that ID; nomad/locks.go (CreateVariableLockTTLTimer) then finds the
    leader's timer for that ID running and leaves it as it is. A lock client depends on both:
    Nomad's Go client (api/locks.go, LockLeaser) acquires again with its old lock ID after a
    renew conflict and needs the 200, and it keeps a lock only by renewing it.

    Given the harness holds the lock on "lock/a" with the minimum TTL and a long lock delay
    When the holder acquires the lock on "lock/a" again with its lock ID at the TTL
    Then the answer is 200 with the lock ID held
    When the holder renews the lock on "lock/a" just after twice the TTL
    Then the answer is 409 with "attempting to modify locked variable"
