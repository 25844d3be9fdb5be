@lock
Feature: access
  A lock client uses the token and namespace Nomad gives the allocation, and a refusal is
  final and clear. Source: Nomad's guide "Configure singleton deployments" (ACLs) and
  Nomad's task environment (NOMAD_TOKEN with identity env = true, NOMAD_NAMESPACE).

  @LOCK-403 @must
  Scenario: a client refused with 403 fails without starting the protected process
    Basis: Nomad guide (ACLs): "Allocations cannot write to Nomad variables by default"; a 403
    does not heal by retrying, and the Overview requires that "After a configurable window
    without obtaining the lock, the allocation must fail" (never starting the process).

    Given a Variables server
    And the server refuses the client's lock requests with 403
    When the client starts
    Then the client exits non-zero within the refusal window, without starting the protected process

  @LOCK-403-PROMPT @should
  Scenario: a refusal ends quickly and the client says why
    Basis: Nomad guide (ACLs): the operator must attach a policy granting write on the lock
    path; a client that names the refusal points them to it, one that retries hides it.

    Given a Variables server
    And the server refuses the client's lock requests with 403
    When the client starts
    Then the client made few attempts and its output names the refusal

  @LOCK-TOKEN-NAMESPACE @must @requires-reference-server
  Scenario: the client uses the allocation's token and namespace
    The reference server runs with ACLs on; the client's token may write the lock only in the
    namespace given as NOMAD_NAMESPACE.

    Basis: Nomad sets NOMAD_TOKEN for a task with identity { env = true } and NOMAD_NAMESPACE
    for every task (client/taskenv/env.go); the guide's lock policy is per namespace. A client
    that ignores them is refused, or locks a variable of another namespace than its job's.

    Given a Variables server with ACLs, where the client's token may write the lock in namespace "conform"
    When the client starts
    And the client has run until its protected process runs, or for the start time
    Then every request of the client carried its token and named its namespace
    And the client acquires the lock and starts the protected process in time
