@variables @locks
Feature: lock renew and release
  PUT /v1/var/<path>?lock-renew with the lock ID keeps the lock for another TTL;
  ?lock-release with the lock ID gives it back. Source: Nomad's Variables documentation
  (Locks), command/agent/variable_endpoint.go, nomad/variables_endpoint.go (RenewLock) and
  nomad/state/state_store_variables.go (VarLockRelease).

  @VARIABLES-RENEW-HOLDER @must
  Scenario: the holder's renew answers 200 with its lock
    Basis: Nomad docs, Nomad Variables (Locks): a lock "can be renewed for as many new periods
    as wanted"; nomad/variables_endpoint.go (RenewLock) answers 200 with the variable's
    metadata and its Lock.

    Given the harness holds the lock on "lock/a" with items "k=v"
    When the holder renews the lock on "lock/a"
    Then the answer is 200 with the lock ID held

  @VARIABLES-RENEW-REFUSED @must
  Scenario: a renew by anyone but the holder is refused
    Basis: Nomad nomad/variables_endpoint.go (RenewLock): another lock ID answers 409
    "attempting to modify locked variable", a variable without a lock 409 "variable doesn't
    hold a lock", a missing variable 404 "variable doesn't exist".

    Given the harness holds the lock on "lock/a"
    And "lock/free" holds "k=v"
    When another client renews the lock on "lock/a" with a made-up lock ID
    Then the answer is 409
    When another client renews the lock on "lock/free" with a made-up lock ID
    Then the answer is 409
    When another client renews the lock on "lock/never" with a made-up lock ID
    Then the answer is 404
    And the holder can still renew the lock on "lock/a"

  @VARIABLES-RELEASE-HOLDER @must
  Scenario: the holder's release frees the lock and keeps the items
    Basis: Nomad docs, Nomad Variables (Locks): "Once it is no longer needed, it must be
    released"; nomad/state/state_store_variables.go (VarLockRelease) clears the lock, keeps
    the items and answers 200.

    Given the harness holds the lock on "lock/a" with items "k=v"
    When the holder releases the lock on "lock/a"
    Then the answer is 200
    And reading "lock/a" gives "k=v"
    And another client can acquire the lock on "lock/a"

  @VARIABLES-RELEASE-REFUSED @must
  Scenario: a release with another lock ID, without one, or with items is refused, and the lock stays
    Basis: Nomad nomad/state/state_store_variables.go (VarLockRelease): another lock ID answers
    409; command/agent/variable_endpoint.go and nomad/variables_endpoint.go answer 400 "missing
    lock information" without Lock.ID, and 400 "lock release operation doesn't take variable
    items" for any Items, even {}.

    Given the harness holds the lock on "lock/a"
    When another client releases the lock on "lock/a" with a made-up lock ID
    Then the answer is 409
    When the holder releases the lock on "lock/a" without its lock ID
    Then the answer is 400
    When the holder releases the lock on "lock/a" with its lock ID and empty items
    Then the answer is 400
    And the holder can still renew the lock on "lock/a"
