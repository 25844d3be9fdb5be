@variables
Feature: namespaces
  Every variable belongs to a namespace, named with ?namespace= (default: "default"). Source:
  Nomad's Variables documentation. Against a real Nomad the suite creates a namespace of its
  own (PUT /v1/namespace/<name>) and deletes it again.

  @VARIABLES-NAMESPACE-SEPARATE @must
  Scenario: the same path in two namespaces holds two separate variables
    Basis: Nomad docs, Nomad Variables: "Every Variable belongs to a specific Nomad namespace";
    nomad/state/state_store_variables.go keys variables by namespace and path.

    Given a namespace of the scenario's own
    And "shared/config" holds "env=default"
    And "shared/config" holds "env=other" in that namespace
    When the harness reads "shared/config" in that namespace
    Then the answer is 200 with the variable "shared/config" holding "env=other"
    When the harness deletes "shared/config" in that namespace
    Then the answer is 204
    And reading "shared/config" gives "env=default"

  @VARIABLES-NAMESPACE-LOCKS @should
  Scenario: lock-acquire and lock-release take the body's Namespace over ?namespace=, lock-renew takes ?namespace= only
    Basis: Nomad nomad/variables_endpoint.go (Apply) uses the Namespace of the request's
    variable when it is set, and ?namespace= (default "default") only when it is not;
    lock-renew carries no namespace of its own (nomad/structs/variables.go,
    VariablesRenewLockRequest), so RenewLock looks the variable up, and checks the token, in
    the namespace of ?namespace= and ignores the body's.

    Given a namespace of the scenario's own
    When the harness acquires the lock on "shared/lock" naming that namespace in the body only
    Then the answer is 200 with a lock ID in that namespace
    When the holder renews the lock on "shared/lock" naming that namespace in the body only
    Then the answer is 404 with "variable doesn't exist"
    When the holder renews the lock on "shared/lock" in that namespace
    Then the answer is 200
    When the holder releases the lock on "shared/lock" naming that namespace in the body only
    Then the answer is 200
