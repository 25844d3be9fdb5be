@variables
Feature: check-and-set
  A write or a delete with ?cas=<index> happens only if the variable's ModifyIndex is that
  index (0: only if there is no variable); otherwise Nomad answers 409 Conflict with the
  variable as it is. Source: command/agent/variable_endpoint.go (parseCAS) and
  nomad/state/state_store_variables.go (varSetCASTxn, svDeleteCASTxn).

  @VARIABLES-CAS-CREATE-ONLY @must
  Scenario: cas=0 creates a missing variable and refuses to overwrite an existing one
    Basis: Nomad nomad/state/state_store_variables.go (varSetCASTxn): with cas=0 the write
    happens only if no variable exists at the path; otherwise it answers 409 with the existing
    variable, which is left as it was.

    When the harness writes "app/new" with "k=1" and cas 0
    Then the answer is 200
    When the harness writes "app/new" with "k=2" and cas 0
    Then the answer is 409 with the variable "app/new" holding "k=1"
    And reading "app/new" gives "k=1"

  @VARIABLES-CAS-INDEX @must
  Scenario: cas with the current ModifyIndex writes; a stale index is refused with the current variable
    Basis: Nomad nomad/state/state_store_variables.go (varSetCASTxn): an index that is not the
    variable's ModifyIndex answers 409 Conflict with the current variable (its ModifyIndex and,
    for a caller who may read it, its Items) and writes nothing; the current index writes.

    Given "app/config" holds "v=1"
    And "app/config" has been rewritten with "v=2"
    When the harness writes "app/config" with "v=3" and cas at the first write's index
    Then the answer is 409 with the variable "app/config" holding "v=2"
    And the answer's ModifyIndex is the latest write's
    When the harness writes "app/config" with "v=3" and cas at the current index
    Then the answer is 200 with the variable "app/config" holding "v=3"

  @VARIABLES-CAS-DELETE @must
  Scenario: a delete with a stale cas index is refused; with the current one it deletes
    Basis: Nomad nomad/state/state_store_variables.go (svDeleteCASTxn): a delete whose cas is
    not the variable's ModifyIndex answers 409 and deletes nothing; the current index deletes
    (204).

    Given "app/config" holds "v=1"
    And "app/config" has been rewritten with "v=2"
    When the harness deletes "app/config" with cas at the first write's index
    Then the answer is 409
    And reading "app/config" gives "v=2"
    When the harness deletes "app/config" with cas at the current index
    Then the answer is 204
    And reading "app/config" answers 404
