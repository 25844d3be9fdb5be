@variables @acl
Feature: ACLs
  With ACLs on, every Variables request is judged by the caller's token: the capabilities its
  policies grant on the variable's namespace and path. Source: Nomad's Variables documentation
  (ACL for Variables, Task Access to Variables), acl/policy.go and acl/acl.go. The suite makes
  the policies and tokens a clause needs with Nomad's ACL API and the management token
  (--token), each rule in namespace "default" and below the scenario's own prefix, and deletes
  them again; without ACLs, or without a management token, these clauses are skipped.

  @VARIABLES-ACL-NO-TOKEN @must @requires-no-anonymous-policy
  Scenario: a request without a token, or with a token the server does not know, is refused with 403
    Basis: Nomad docs, Nomad Variables (ACL for Variables): "Access to variables is controlled
    by ACL policies"; nomad/variables_endpoint.go answers a caller without the capability 403
    "Permission denied", and command/agent/http.go an unknown token 403 "ACL token not found".

    Given "app/config" holds "k=v"
    Then a request without a token cannot read "app/config"
    And a request without a token cannot write "app/config"
    And a request with an unknown token cannot read "app/config"
    And a request with an unknown token cannot write "app/config"

  @VARIABLES-ACL-READ @must
  Scenario: read lets a token read a variable, not write or delete it
    Basis: Nomad docs, Nomad Variables (ACL for Variables): read is to "Read the decrypted
    contents of Variables at this path"; nomad/variables_endpoint.go (Apply) needs write to
    write and destroy to delete.

    Given "app/config" holds "k=v"
    And a token "reader" with "read" on "app/*"
    Then the token "reader" can read "app/config"
    And the token "reader" cannot write "app/config"
    And the token "reader" cannot delete "app/config"

  @VARIABLES-ACL-WRITE-NOT-READ @must
  Scenario: write lets a token write a variable, not read or delete it
    Basis: Nomad docs, Nomad Variables (ACL for Variables): write is to "Create or update
    Variables at this path" and does not include "the "read" or "destroy" capabilities";
    acl/policy.go (expandVariablesCapabilities) adds nothing to write.

    Given "app/config" holds "k=v"
    And a token "writer" with "write" on "app/*"
    Then the token "writer" can write "app/config"
    And the token "writer" cannot read "app/config"
    And the token "writer" cannot delete "app/config"

  @VARIABLES-ACL-DESTROY @must
  Scenario: destroy lets a token delete a variable, not read or write it
    Basis: Nomad docs, Nomad Variables (ACL for Variables): destroy is to "Delete Variables at
    this path"; nomad/variables_endpoint.go (Apply, Read) needs destroy to delete, read to read
    and write to write.

    Given "app/config" holds "k=v"
    And a token "destroyer" with "destroy" on "app/*"
    Then the token "destroyer" cannot read "app/config"
    And the token "destroyer" cannot write "app/config"
    And the token "destroyer" can delete "app/config"

  @VARIABLES-ACL-LIST @must
  Scenario: list shows a token a variable's metadata, not its items; read includes list
    Basis: Nomad docs, Nomad Variables (ACL for Variables): list is to "List the metadata but
    not contents of Variables at this path", and read "Also includes the "list" capability";
    nomad/variables_endpoint.go (List) filters a listing variable by variable.

    Given "app/config" holds "k=v"
    And a token "lister" with "list" on "app/*"
    And a token "reader" with "read" on "app/*"
    Then the token "lister" can list "app/config"
    And the token "lister" cannot read "app/config"
    And the token "reader" can list "app/config"

  @VARIABLES-ACL-LOCK-NEEDS-WRITE @must
  Scenario: taking, renewing and releasing a lock needs write
    Basis: Nomad nomad/variables_endpoint.go (Apply, RenewLock): lock-acquire, lock-renew and
    lock-release need the write capability on the path; read alone is refused with 403.

    Given a token "reader" with "read" on "app/*"
    And a token "writer" with "write" on "app/*"
    Then the token "reader" cannot lock "app/lock"
    And the token "writer" can lock "app/lock"

  @VARIABLES-ACL-DENY @must
  Scenario: deny wins in its rule, and a closer deny glob refuses what a broader glob grants
    Basis: Nomad acl/policy.go (expandVariablesCapabilities): deny anywhere in a rule's
    capabilities reduces the rule to deny; acl/acl.go (matchingVariablesCapabilitySet): the
    closest matching glob decides, so a deny on app/secret/* refuses what app/* grants.

    Given "app/config" holds "k=v"
    And "app/secret/key" holds "k=v"
    And "app/locked" holds "k=v"
    And a token "t" with these rules:
      | path         | capabilities |
      | app/*        | read         |
      | app/secret/* | deny         |
      | app/locked   | read, deny   |
    Then the token "t" can read "app/config"
    And the token "t" cannot read "app/secret/key"
    And the token "t" cannot read "app/locked"

  @VARIABLES-ACL-GLOB @must
  Scenario: a * in a path rule matches any characters, / included, and nothing that lacks the rest of the rule
    Basis: Nomad docs, Nomad Variables (ACL for Variables): "the glob can match an empty string
    and all other characters. This policy grants read access to paths prefixed with "system/"
    but not a path named "system" (without a trailing slash)".

    Given "app/a/b/c" holds "k=v"
    And "app" holds "k=v"
    And a token "t" with "read" on "app/*"
    Then the token "t" can read "app/a/b/c"
    And the token "t" cannot read "app"

  @VARIABLES-ACL-EXACT-FIRST @must
  Scenario: a rule for the exact path wins over every glob
    Basis: Nomad docs, Nomad Variables (Task Access to Variables): "The most specific rule for a
    path applies"; acl/acl.go (matchingVariablesCapabilitySet) takes an exact rule first, alone,
    before any glob.

    Given "app/config" holds "k=v"
    And a token "t" with these rules:
      | path       | capabilities |
      | app/*      | read, write  |
      | app/config | read         |
    Then the token "t" cannot write "app/config"
    And the token "t" can write "app/other"

  @VARIABLES-ACL-CLOSEST-GLOB @must
  Scenario: of several matching globs the closest one decides, alone
    Basis: Nomad acl/acl.go (findClosestMatchingGlob): the glob with the fewest characters left
    to match wins, and its capabilities are not merged with those of the other globs.

    Given "app/team/config" holds "k=v"
    And a token "t" with these rules:
      | path       | capabilities |
      | app/*      | read         |
      | app/team/* | write        |
    Then the token "t" can write "app/team/config"
    And the token "t" cannot read "app/team/config"

  @VARIABLES-ACL-POLICY-CHECKED @must
  Scenario: a valid variables policy is accepted; a path with a leading / or an unknown capability is refused
    Every other ACL clause makes policies first; a server that refuses a valid one is judged here.

    Basis: Nomad acl/policy.go (Parse): a variables path must not be empty or start with "/",
    and its capabilities are list, read, write, destroy and deny; nomad/acl_endpoint.go
    (UpsertPolicies) refuses an invalid policy with 400.

    When the harness creates a policy with "read" on "app/*"
    Then the answer is 200
    When the harness creates a policy with "read" on "/app/*"
    Then the answer is 400
    When the harness creates a policy with "sudo" on "app/*"
    Then the answer is 400

  @VARIABLES-ACL-WORKLOAD @must @requires-reference-server
  Scenario: a workload identity reads its own job's variables and nothing else by default
    The harness gives the reference server a workload identity token for job JOB, group "web",
    task "httpd" in namespace "default", with no policy of its own (Nomad has no API that makes
    one without running the job).

    Basis: Nomad docs, Nomad Variables (Task Access to Variables): a task's workload identity
    has read and list on nomad/jobs, nomad/jobs/<job>, nomad/jobs/<job>/<group> and
    nomad/jobs/<job>/<group>/<task>; acl/acl.go gives exactly those paths, to reads and lists
    only, in the job's namespace.

    Given "nomad/jobs/JOB" holds "k=v"
    And "nomad/jobs/JOB/web/httpd" holds "k=v"
    And "nomad/jobs/JOB/other" holds "k=v"
    And "nomad/jobs/JOB-other" holds "k=v"
    And a workload identity "wi" for job JOB, group "web", task "httpd"
    Then the token "wi" can read "nomad/jobs/JOB"
    And the token "wi" can read "nomad/jobs/JOB/web/httpd"
    And the token "wi" cannot read "nomad/jobs/JOB/other"
    And the token "wi" cannot read "nomad/jobs/JOB-other"
    And the token "wi" cannot write "nomad/jobs/JOB"

  @VARIABLES-ACL-WORKLOAD-LOCK @must @requires-reference-server
  Scenario: a workload identity without a policy of its job cannot take, renew or release a lock, not even on its own job's paths
    The harness gives the reference server a workload identity token for job JOB, group "web",
    task "httpd" in namespace "default", with no policy attached to it.

    Basis: Nomad acl/acl.go gives a workload identity read and list, and nothing else, on
    nomad/jobs, nomad/jobs/<job>, nomad/jobs/<job>/<group> and nomad/jobs/<job>/<group>/<task>,
    and only when the caller passes the claim, which Read and List do;
    nomad/variables_endpoint.go (Apply, RenewLock) checks write without it. A lock client
    depends on it: a task that takes a lock with its own workload identity (NOMAD_TOKEN) gets
    403 "Permission denied" until a policy granting write on the lock's path is attached to
    its job (nomad acl policy apply -job).

    Given a workload identity "wi" for job JOB, group "web", task "httpd"
    And the harness holds the lock on "nomad/jobs/JOB/web/httpd"
    Then the token "wi" cannot lock "nomad/jobs/JOB"
    And the token "wi" cannot renew or release the lock on "nomad/jobs/JOB/web/httpd"
    And the holder can still renew the lock on "nomad/jobs/JOB/web/httpd"

  @VARIABLES-ACL-POLICY-KEYS @should
  Scenario: unknown or repeated top-level keys in a policy are refused with Nomad's text, unknown keys inside its blocks are ignored
    Basis: Nomad acl/policy.go (Parse, strict as nomad/structs/acl.go ACLPolicy.Validate calls
    it) collects the top-level keys that are no policy block, and every repeated agent, node,
    operator, quota or plugin block, and refuses them, sorted, with "Invalid or duplicate
    policy keys: <keys>"; it checks no deeper level, so unknown keys inside namespace,
    variables and path blocks are ignored. An unknown variables capability is refused with
    "Invalid variable capability '<capability>' in namespace <name>". nomad/acl_endpoint.go
    (UpsertPolicies) answers both refusals with 400.

    When the harness creates a policy with unknown top-level keys and a repeated agent block
    Then the answer is 400 and says "Invalid or duplicate policy keys: agent, bogus, zeta"
    When the harness creates a policy with unknown keys inside its namespace, variables and path blocks
    Then the answer is 200
    When the harness creates a policy with "sudo" on "app/*"
    Then the answer is 400 and says "Invalid variable capability 'sudo' in namespace default"
