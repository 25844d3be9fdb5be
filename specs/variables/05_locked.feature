@variables @locks
Feature: locked variables
  While a variable is locked everybody can read it, but only the lock holder can change it.
  Source: Nomad's Variables documentation (Locks) and nomad/state/state_store_variables.go.

  @VARIABLES-LOCKED-WRITE @must
  Scenario: a locked variable refuses writes without the lock ID and takes the holder's
    Basis: Nomad docs, Nomad Variables (Locks): "Once a variable is locked, it can be read by
    everyone, but it can only be updated by the lock holder"; nomad/state/state_store_variables.go
    (varSetTxn) answers a write without the held lock ID with 409 and stores one that carries it.

    Given the harness holds the lock on "lock/a" with items "k=1"
    When the harness writes "lock/a" with "k=2"
    Then the answer is 409
    And reading "lock/a" gives "k=1"
    When the holder writes "lock/a" with "k=3" and its lock ID
    Then the answer is 200
    And reading "lock/a" gives "k=3"

  @VARIABLES-LOCKED-DELETE @must
  Scenario: a locked variable cannot be deleted
    Basis: Nomad nomad/state/state_store_variables.go (svDeleteTxn): a delete of a locked
    variable answers 409; DELETE /v1/var/<path> cannot carry a lock ID, so the lock must be
    released, or expire, first.

    Given the harness holds the lock on "lock/a" with items "k=1"
    When the harness deletes "lock/a"
    Then the answer is 409
    And reading "lock/a" gives "k=1"

  @VARIABLES-LOCKED-READABLE @must
  Scenario: a locked variable can be read by everyone
    Basis: Nomad docs, Nomad Variables (Locks): "Once a variable is locked, it can be read by
    everyone".

    Given the harness holds the lock on "lock/a" with items "k=1"
    When the harness reads "lock/a"
    Then the answer is 200 with the variable "lock/a" holding "k=1"

  @VARIABLES-LOCKED-WRITE-LOCK @must
  Scenario: the holder's write resets its lock's TTL and lock delay to the defaults and leaves the leader's timer; a write naming a TTL or delay is refused
    The lock is taken with the minimum TTL and a long lock delay, so that the reset is seen and
    the timer can be watched: it must still lapse twice the TTL after the acquire.

    Basis: Nomad nomad/variables_endpoint.go (canonicalizeAndValidate) refuses a set or cas
    whose Lock has a TTL or a LockDelay with 400 "variable should not contain lock
    definition", and canonicalizes a Lock that has only the ID (nomad/structs/variables.go,
    VariableLock.Canonicalize) to the default TTL and lock delay (15s), which the write stores
    and answers; the leader's timer is started and stopped by lock-acquire and lock-release
    only, so the write does not restart it. A lock client depends on it: a holder that writes
    its data must send its Lock with the ID only (echoing the acquire's answer is refused, and
    Nomad's own test zeroes TTL and LockDelay first), and after such a write its renews keep
    the lock for twice the default TTL, not twice its own.

    Given the harness holds the lock on "lock/a" with the minimum TTL and a long lock delay
    When the holder writes "lock/a" with "k=2", its lock ID, TTL and lock delay
    Then the answer is 400
    When the holder writes "lock/a" with "k=3" and its lock ID
    Then the answer is 200 with the lock's TTL and lock delay reset to the defaults
    When the holder renews the lock on "lock/a" just after twice the TTL
    Then the answer is 409 with "attempting to modify locked variable"
