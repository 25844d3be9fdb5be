@dhv
Feature: general
  What holds for every call: how the plugin is run, what it may rely on, what it must never do.

  @DHV-GENERAL-UNKNOWN-OPERATION @should
  Scenario: an unknown operation is refused
    A plugin should not treat an operation it does not know as one it does: future Nomad
    versions may add operations. Today's client only ever sends fingerprint, create and delete
    (client/hostvolumemanager/host_volume_plugin.go), so nothing breaks yet: future-proofing.

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

  @DHV-GENERAL-MISSING-VARIABLE @should
  Scenario: a missing variable never makes the plugin act outside its volumes
    A plugin that builds paths from variables without checking them can create or remove things
    in "/" or in its working directory when a variable is empty or missing. The Nomad client
    always sets every variable of create and delete (client/hostvolumemanager/
    host_volume_plugin.go); only its automatic delete sends an empty name and namespace, which
    DHV-DELETE-AUTO-DELETE-KEEPS-OTHERS judges: future-proofing.

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

  @DHV-GENERAL-OUTPUT-CLOSED-ON-EXIT @should
  Scenario: no process started by the plugin keeps its output open
    The Nomad client reads stdout and stderr with cmd.Output() (client/hostvolumemanager/
    host_volume_plugin.go), which returns only once both pipes are closed: a background process
    that inherits them delays the call for as long as it holds them, after the plugin exited.
    A holder that lets go within the deadline only delays the call (this clause); one that holds
    them past the deadline hangs it (DHV-GENERAL-OUTPUT-CLOSED-BY-DEADLINE judges that).

    When Nomad fingerprints, creates and deletes a volume, waiting for their output as Nomad does
    Then no call left a process holding the plugin's stdout or stderr

  @DHV-GENERAL-OUTPUT-CLOSED-BY-DEADLINE @must
  Scenario: the plugin's output is closed by the call's deadline
    At the deadline exec.CommandContext kills only the plugin itself, and with no WaitDelay
    cmd.Output() then goes on waiting for the pipes (client/hostvolumemanager/
    host_volume_plugin.go): a process the plugin started that holds stdout or stderr past the
    deadline hangs the agent's call until it exits, with the volume's name still locked.
    The harness waits for the pipes, as Nomad does, until each call's deadline.

    When Nomad fingerprints, creates and deletes a volume, waiting for their output as Nomad does
    Then every call's output was closed by its deadline

  @DHV-GENERAL-NO-STRAY-PROCESS @should
  Scenario: no process started by the plugin outlives it
    Nomad does not kill what a plugin leaves running; such processes pile up on the node.
    The calls run while no other call of the plugin does, and every earlier call's processes
    have been stopped: what is left running is these calls', whatever runs beside them.

    When Nomad fingerprints, creates and deletes a volume
    Then no call left a process of the plugin running

  @DHV-GENERAL-NO-LEFTOVERS @should
  Scenario: create and delete leave nothing behind outside the volume
    Every volume's life runs create and delete once. What they leave in the Nomad agent's
    working directory (the client starts the plugin without setting a directory,
    client/hostvolumemanager/host_volume_plugin.go), the plugin directory or /tmp once the
    volume is deleted is never cleaned up by Nomad, and piles up on the node with every volume.
    The calls run while no other call of the plugin does, with a /tmp of their own (as for
    DHV-FINGERPRINT-NO-SIDE-EFFECTS), so that what they leave there is seen and nothing else is.
    A file made and removed again by the calls is not counted.

    When Nomad creates and deletes a volume while nothing else of it runs
    Then nothing was left in the working directory, the plugin directory or /tmp

  @DHV-GENERAL-NO-GROUP-SIGNAL @must
  Scenario: the plugin never signals its process group
    The Nomad client starts the plugin with exec.CommandContext and no Setpgid
    (client/hostvolumemanager/host_volume_plugin.go), so the plugin shares the agent's process
    group: a signal to the group (`kill 0`, `trap 'kill 0' EXIT`) reaches the Nomad agent
    itself. SIGTERM and SIGINT make the agent shut down, SIGHUP makes it reload, SIGKILL kills it.
    The harness runs each call under a stand-in for the agent in the plugin's process group,
    which records every signal it gets and from whom.

    When Nomad fingerprints, creates and deletes a volume
    Then no call signalled the agent's process group

  @DHV-GENERAL-NO-SECRETS-ECHOED @should
  Scenario: parameter values are not echoed
    Plugin stdout and stderr end up in the agent's logs; parameters can carry credentials.

    When Nomad creates and deletes a volume whose parameters carry a secret
    Then the secret appears in no output of the plugin
