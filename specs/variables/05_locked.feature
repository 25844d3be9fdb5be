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
