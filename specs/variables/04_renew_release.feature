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

  @VARIABLES-RENEW-AFTER-RELEASE @must
  Scenario: once released, a lock cannot be renewed: the holder's renew answers 409 "variable doesn't hold a lock"
    Basis: Nomad nomad/variables_endpoint.go (RenewLock) answers a renew of a variable that
    holds no lock with its coded error 409 "variable doesn't hold a lock", whatever lock ID the
    renew carries, and a release clears the lock from state at once
    (nomad/state/state_store_variables.go, VarLockRelease). A lock client depends on it:
    Nomad's Go client (api/locks.go) takes a renew 409 for a lost lock (ErrLockConflict) and
    goes back to acquiring; a renew that answered 200 would let a client believe it holds a
    lock that is free for anyone to take.

    Given the harness holds the lock on "lock/a"
    When the holder releases the lock on "lock/a"
    Then the answer is 200
    When the holder renews the lock on "lock/a"
    Then the answer is 409 with "variable doesn't hold a lock"
    And another client can acquire the lock on "lock/a"

  @VARIABLES-RELEASE-NOT-HELD @must
  Scenario: a release of a variable that does not exist, or that holds no lock, answers 500 with Nomad's text
    This is what a client's release answers once its lock has lapsed and been cleared, or
    after it already released it: whatever lock ID it sends, the answer is not a 409.

    Basis: Nomad nomad/state/state_store_variables.go (VarLockRelease) looks for the variable,
    then for a lock on it, and only then compares lock IDs; the first two refusals are plain
    errors ("variable doesn't exist", "variable doesn't hold a lock"), which
    nomad/variables_endpoint.go (Apply) returns as they are and command/agent/http.go (wrap)
    answers with 500 and the text, with X-Nomad-Index 0 (command/agent/variable_endpoint.go,
    variableLockOperation). A lock client depends on it: Nomad's Go client (api/retry.go) does
    not retry a 500, and LockLeaser.Start reports "lock release: Unexpected response code: 500
    (variable doesn't hold a lock)" when the lock it held has lapsed, so a client has to read
    that answer as "the lock is already gone", not as a conflict or a passing failure.

    Given "lock/free" holds "k=v"
    And the harness holds the lock on "lock/a"
    When another client releases the lock on "lock/never" with a made-up lock ID
    Then the answer is 500 with "variable doesn't exist" and X-Nomad-Index 0
    When another client releases the lock on "lock/free" with a made-up lock ID
    Then the answer is 500 with "variable doesn't hold a lock" and X-Nomad-Index 0
    When the holder releases the lock on "lock/a"
    Then the answer is 200
    When the holder releases the lock on "lock/a"
    Then the answer is 500 with "variable doesn't hold a lock" and X-Nomad-Index 0

  @VARIABLES-LOCK-CONFLICT-ANSWER @should
  Scenario: lock-acquire and lock-release conflicts answer the zero-value variable, without X-Nomad-Index
    Basis: Nomad nomad/state/state_store_variables.go (VarLockAcquire, VarLockRelease) answers
    a conflict with a zero-value variable carrying the namespace and path only, and
    nomad/variables_endpoint.go (makeVariablesApplyResponse) shows a caller who may read the
    variable its Namespace, Path and zero indexes, with no Lock and no Items: never the data
    or the lock of the variable. command/agent/variable_endpoint.go (variableLockOperation)
    writes the 409 status before its deferred setIndex runs, so unlike a set, cas or delete
    conflict the answer carries no X-Nomad-Index header.

    Given the harness holds the lock on "lock/a" with items "k=v"
    When another client acquires the lock on "lock/a"
    Then the answer is 409 with the zero-value variable "lock/a" and no X-Nomad-Index
    When another client releases the lock on "lock/a" with a made-up lock ID
    Then the answer is 409 with the zero-value variable "lock/a" and no X-Nomad-Index
    And the holder can still renew the lock on "lock/a"
