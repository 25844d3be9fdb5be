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
