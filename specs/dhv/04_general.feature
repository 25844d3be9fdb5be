@dhv
Feature: general
  What holds for every call: how the plugin is run, what it may rely on, what it must never do.

  @DHV-GENERAL-UNKNOWN-OPERATION @must
  Scenario: an unknown operation is refused
    A plugin must not treat an operation it does not know as one it does: future Nomad versions
    may add operations.

    Given a volume request
    When Nomad calls the plugin with the operation "resize"
    Then the plugin exits with a non-zero status
    And nothing new is left in the volumes directory

  @DHV-GENERAL-MINIMAL-ENV @must
  Scenario: the plugin works with only the DHV_* variables
    Nomad passes only the DHV_* variables: no PATH, HOME or USER. The plugin runs in the agent's
    working directory, as the agent's user.

    When Nomad fingerprints, creates and deletes a volume with exactly its own environment
    Then every call exits with status 0 with nothing but Nomad's environment

  @DHV-GENERAL-MISSING-VARIABLE @must
  Scenario: a missing variable never makes the plugin act outside its volumes
    A plugin that builds paths from variables without checking them can create or remove things
    in "/" or in its working directory when a variable is empty or missing.

    When Nomad creates volumes with each of DHV_VOLUMES_DIR, DHV_VOLUME_ID and DHV_VOLUME_NAME missing in turn
    Then nothing named after those volumes appears in "/", the working directory or the plugin directory
    And each create either fails with a non-zero exit status or reports a path of its own that exists

  @DHV-GENERAL-GENERATED-INPUTS @must
  Scenario: create and delete handle any volume Nomad can describe
    Volume names can be any non-empty string, namespaces match [a-zA-Z0-9-]{1,128}, node pools
    [a-zA-Z0-9-_]{1,128}, parameters any map of strings, capacities any range. For each, create
    either succeeds and delete then removes everything create made, or create fails cleanly.

    When Nomad creates and deletes volumes with generated names, namespaces, node pools, parameters and capacities
    Then every create succeeded and its delete removed the path, or the create failed and left nothing behind

  @DHV-GENERAL-OUTPUT-CLOSED-ON-EXIT @must
  Scenario: no process started by the plugin keeps its output open
    Nomad reads stdout and stderr until they close. A background process that inherits them keeps
    the call waiting after the plugin exits, past its deadline.

    When Nomad fingerprints, creates and deletes a volume
    Then no call left a process holding the plugin's stdout or stderr

  @DHV-GENERAL-NO-STRAY-PROCESS @should
  Scenario: no process started by the plugin outlives it
    Nomad does not kill what a plugin leaves running; such processes pile up on the node.

    When Nomad fingerprints, creates and deletes a volume
    Then no call left a process of the plugin running

  @DHV-GENERAL-NO-SECRETS-ECHOED @should
  Scenario: parameter values are not echoed
    Plugin stdout and stderr end up in the agent's logs; parameters can carry credentials.

    When Nomad creates and deletes a volume whose parameters carry a secret
    Then the secret appears in no output of the plugin
