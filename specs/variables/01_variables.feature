@variables
Feature: variables
  Nomad keeps Variables at file-like paths in a namespace and serves them over its HTTP API:
  PUT or POST /v1/var/<path> writes one, GET reads it, DELETE deletes it, GET /v1/vars lists
  their metadata. Source: Nomad's Variables documentation and command/agent/variable_endpoint.go.
  Every path the suite uses lies below conform/<scenario token>/, and every variable it writes
  is deleted again.

  @VARIABLES-SET-CREATE @must
  Scenario: a write stores a new variable and answers with it
    Every other clause writes variables first; a server that cannot store one is judged here.

    Basis: Nomad command/agent/variable_endpoint.go (variableUpsert): a write answers 200 with
    the stored variable (Namespace, Path, Items, CreateIndex, ModifyIndex) and sets
    X-Nomad-Index.

    When the harness writes "app/config" with "user=admin port=8080"
    Then the answer is 200 with the variable "app/config" holding "user=admin port=8080"
    And the answer carries the X-Nomad-Index of the write

  @VARIABLES-READ-ROUNDTRIP @must
  Scenario: a read answers the items as they were written
    Basis: Nomad command/agent/variable_endpoint.go (variableQuery) and
    nomad/variables_endpoint.go (Read): GET /v1/var/<path> answers 200 with the decrypted
    variable, items included, at the ModifyIndex of its last write.

    Given "app/config" holds "user=admin port=8080"
    When the harness reads "app/config"
    Then the answer is 200 with the variable "app/config" holding "user=admin port=8080"
    And the answer's ModifyIndex is the latest write's

  @VARIABLES-READ-MISSING @must
  Scenario: a read of a variable that does not exist answers 404
    Basis: Nomad command/agent/variable_endpoint.go (variableQuery): no variable at the path
    answers 404 "variable not found".

    When the harness reads "never/written"
    Then the answer is 404

  @VARIABLES-SET-REPLACE @must
  Scenario: a second write replaces the items and moves the ModifyIndex on
    Basis: Nomad nomad/state/state_store_variables.go (varSetTxn): a write stores the
    request's items as the whole variable, keeps its CreateIndex and gives it a new, higher
    ModifyIndex.

    Given "app/config" holds "user=admin port=8080"
    When the harness writes "app/config" with "user=operator"
    Then the answer is 200 with the variable "app/config" holding "user=operator"
    And the answer keeps the first write's CreateIndex with a higher ModifyIndex
    And reading "app/config" gives "user=operator"

  @VARIABLES-SET-NEEDS-ITEMS @must
  Scenario: a write without items is refused with 400
    Basis: Nomad command/agent/variable_endpoint.go (variableUpsert): "variable missing required
    Items object" (400) when Items is missing or empty; nothing is stored.

    When the harness writes "app/empty" with no items
    Then the answer is 400
    And reading "app/empty" answers 404

  @VARIABLES-DELETE-REMOVES @must
  Scenario: a delete answers 204 and the variable is gone
    Basis: Nomad command/agent/variable_endpoint.go (variableDelete): DELETE /v1/var/<path>
    answers 204 No Content; a read then answers 404.

    Given "app/config" holds "user=admin"
    When the harness deletes "app/config"
    Then the answer is 204
    And reading "app/config" answers 404

  @VARIABLES-LIST-PREFIX @must
  Scenario: a list by prefix answers the metadata of the variables below it, without items
    Basis: Nomad command/agent/variable_endpoint.go (VariablesListRequest) and
    nomad/variables_endpoint.go (List): GET /v1/vars?prefix=<p> answers the metadata
    (VariableMetadata, no Items) of every variable whose path starts with <p>, and of no other.

    Given "list/a" holds "k=1"
    And "list/b/c" holds "k=2"
    And "other/d" holds "k=3"
    When the harness lists the prefix "list/"
    Then the answer is 200 and lists exactly "list/a list/b/c", without items
