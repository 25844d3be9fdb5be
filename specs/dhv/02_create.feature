@dhv
Feature: create
  Nomad runs `<plugin> create` when a volume is created (`nomad volume create`, or the create
  API), again when a create is repeated with the volume's ID, and again for every volume on the
  node each time the client agent starts. The environment carries DHV_OPERATION, DHV_VOLUMES_DIR,
  DHV_PLUGIN_DIR, DHV_NODE_POOL, DHV_NAMESPACE, DHV_VOLUME_NAME, DHV_VOLUME_ID,
  DHV_CAPACITY_MIN_BYTES, DHV_CAPACITY_MAX_BYTES, DHV_NODE_ID and DHV_PARAMETERS, and nothing else.
  The plugin prints {"path": ..., "bytes": ...} on stdout.

  Background:
    Given a volume request

  @DHV-CREATE-EXIT-ZERO @must
  Scenario: create exits with status 0
    Nomad treats any other exit status as a failed create.

    When Nomad creates the volume
    Then the plugin exits with status 0

  @DHV-CREATE-VOLUMES-DIR-MISSING @must
  Scenario: create works when the volumes directory does not exist yet
    The Nomad client sets DHV_VOLUMES_DIR to its host_volumes_dir (by default
    <data_dir>/host_volumes; client/client.go falls back to <state_dir>/host_volumes) but never
    creates that directory: only its built-in mkdir plugin makes parent directories (MkdirAll in
    client/hostvolumemanager/host_volume_plugin.go). On a fresh node the first create meets a
    directory that does not exist, and a plugin that does not make it fails that create.
    Here the harness does not make the directory; for every other clause it makes it, as a
    first create on the node would have, so that a plugin that needs it is judged once, here.

    Given a volume request whose volumes directory does not exist
    When Nomad creates the volume
    Then the create succeeds although the volumes directory did not exist

  @DHV-CREATE-SINGLE-JSON @must
  Scenario: create prints exactly one JSON object
    Nomad decodes the whole of stdout with a single json.Unmarshal: whitespace around the object
    is fine, anything after it fails the create.

    When Nomad creates the volume
    Then stdout is exactly one JSON object

  @DHV-CREATE-PATH @must
  Scenario: create reports the volume's path
    "path" is required: Nomad mounts it into workloads and passes it back to delete as
    DHV_CREATED_PATH. Nomad does not check it, so an empty path is stored as is.

    When Nomad creates the volume
    Then the response has a "path" that is a non-empty absolute path

  @DHV-CREATE-BYTES @must
  Scenario: create reports bytes as a 64-bit integer, or leaves it out
    Nomad decodes "bytes" into an int64 (HostVolumePluginCreateResponse in
    client/hostvolumemanager/host_volume_plugin.go): a fraction, an exponent, a string or a
    number outside int64 fails the decode, and so the create, after the volume was made.
    Nomad checks nothing else: a negative size is stored as it is (DHV-CREATE-CAPACITY warns).

    When Nomad creates the volume
    Then the response's "bytes" is absent or an integer Go decodes into an int64

  @DHV-CREATE-PATH-EXISTS @must
  Scenario: the reported path exists after create
    The plugin must create a path on disk and return it; Nomad mounts it into workloads.

    When Nomad creates the volume
    Then the reported path exists

  @DHV-CREATE-OWN-PATH @must
  Scenario: every volume gets a path of its own
    Nomad mounts the reported path into workloads and hands it to delete. A path shared by two
    volumes, "/", or the volumes directory itself exposes or destroys other data.

    Given a second volume request
    When Nomad creates both volumes
    Then each reported path is distinct, and none is "/", the volumes directory or one of its parents

  @DHV-CREATE-DEADLINE @must
  Scenario: create completes within the deadline
    Nomad kills create after 60 seconds.

    When Nomad creates the volume
    Then the call completes within the "create" deadline

  @DHV-CREATE-IDEMPOTENT @must
  Scenario: create is idempotent
    Create runs again with the same inputs when a create is repeated with the volume's ID. It must
    produce the same result and keep the volume's data. Nomad uses only "path" and "bytes" of
    the answer (client/hostvolumemanager/host_volumes.go stores the path as the volume's host
    path, nomad/host_volume_endpoint.go the bytes as its capacity): other fields may differ.

    Given the plugin has created the volume
    And a file is written into the volume
    When Nomad creates the volume again with the same environment
    Then the plugin exits with status 0
    And the answer has the path and bytes of the first create
    And the file written into the volume is still there

  @DHV-CREATE-RESTORE @must
  Scenario: after an agent restart, create finds every existing volume
    At every start the client agent runs create again for each volume it had, all at once, with
    the saved request. A volume whose restore fails is not made available on the node. All the
    restores share one 50 s budget (batchFirstFingerprintsTimeout in client/node_updater.go),
    not 60 s each; a profile whose create deadline is shorter caps it too.

    Given the plugin has created 3 volumes
    And a file is written into each volume
    When the agent restarts and restores every volume at once
    Then every restore exits with status 0 and reports the path of the first create
    And the files written into the volumes are still there

  @DHV-CREATE-RESTORE-VANISHED @must
  Scenario: a restore makes a volume whose path vanished available again
    The docs say create must be idempotent because it runs again for every volume at every
    client agent start, which makes the volume available again after a host reboot. After a
    reboot a mount is gone and a directory on a tmpfs is gone: the client runs create with the
    saved request (restoreForCreate in client/hostvolumemanager/host_volumes.go) and registers
    the path it reports, and every task that mounts the volume then binds that path: a path
    that does not exist fails the task's mount. The harness makes the path vanish (unmounts it
    if it is a mount point, then removes it) and restores the volume as the agent does.

    Given the plugin has created the volume
    When the volume's path vanishes, as after a host reboot
    And the agent restarts and restores every volume at once
    Then every restore exits with status 0 and reports the path of the first create
    And the reported path exists again

  @DHV-CREATE-UPDATE @should
  Scenario: an update applies the new capacity or refuses it
    A volume is updated by creating it again with the same ID and a changed capacity range or
    parameters: the server allows it (ValidateUpdate in nomad/structs/host_volumes.go), the
    docs describe expanding a volume's capacity this way, and the client runs create with the
    new request and stores the "bytes" it answers as the volume's capacity
    (nomad/host_volume_endpoint.go). A plugin that sizes volumes applies the larger range, or
    refuses with a non-zero exit status; answering with the old size and exit 0 reports the
    update as done when nothing changed. A plugin that does not size volumes answers 0. Either
    way the volume keeps its data. Nothing in Nomad breaks: SHOULD.

    Given the volume request asks for a capacity range
    And the plugin has created the volume
    And a file is written into the volume
    When Nomad updates the volume to a larger capacity range
    Then the update reports 0 bytes or a size within the new range, or fails with a non-zero exit status
    And the file written into the volume is still there

  @DHV-CREATE-PARALLEL @must
  Scenario: creates of different volumes can run at the same time
    Nomad serialises operations per volume, but runs operations on different volumes
    concurrently, even on one node.

    Given 8 volume requests
    When Nomad creates all the volumes at once
    Then every create exits with status 0 and reports a distinct path that exists

  @DHV-CREATE-PARAMETERS-FORMS @must
  Scenario: every form of DHV_PARAMETERS is handled
    DHV_PARAMETERS is Go's JSON encoding of a map of strings: null when the volume has no
    parameters, {} when the map is empty, otherwise a compact object with sorted keys.
    Each must be accepted, or refused with a non-zero exit status; never a crash.

    When Nomad creates volumes with DHV_PARAMETERS set to null, {} and a sorted compact object
    Then each create either succeeds or fails with a non-zero exit status and leaves nothing behind

  @DHV-CREATE-FAILED-CLEANUP @must
  Scenario: a failed create leaves nothing behind
    Nomad does not call delete after a failed create: the plugin must clean up after itself and
    exit with a non-zero status.

    When Nomad creates a volume that the plugin cannot create
    Then the plugin exits with a non-zero status
    And nothing new is left in the volumes directory

  @DHV-CREATE-ERROR-JSON @should
  Scenario: a failed create explains itself in an error object
    On a failed create Nomad reads {"error": "..."} from stdout and puts the message in the error
    it returns to the user; without it the user sees only the exit status.

    When Nomad creates a volume that the plugin cannot create
    Then stdout is a JSON object with a non-empty "error" string

  @DHV-CREATE-CAPACITY @should
  Scenario: the reported capacity lies within the requested range
    DHV_CAPACITY_MIN_BYTES and DHV_CAPACITY_MAX_BYTES carry the volume's capacity_min and
    capacity_max. A plugin that sizes volumes reports a size within them; one that does not
    reports 0. Nomad stores the reported size as the volume's capacity without checking it
    (nomad/host_volume_endpoint.go), so a negative or out-of-range size misleads only people.

    Given the volume request asks for a capacity range
    When Nomad creates the volume
    Then the reported bytes are 0 or within the requested range
