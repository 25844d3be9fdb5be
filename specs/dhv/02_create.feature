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
  Scenario: create reports bytes as a non-negative 64-bit integer, or leaves it out
    Nomad decodes "bytes" into an int64: a fraction, an exponent, a string or a number outside
    int64 fails the create after the volume was made. A negative size is meaningless.

    When Nomad creates the volume
    Then the response's "bytes" is absent or an integer from 0 to 9223372036854775807

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
    produce the same result and keep the volume's data.

    Given the plugin has created the volume
    And a file is written into the volume
    When Nomad creates the volume again with the same environment
    Then the plugin exits with status 0
    And stdout holds the same JSON as the first create
    And the file written into the volume is still there

  @DHV-CREATE-RESTORE @must
  Scenario: after an agent restart, create finds every existing volume
    At every start the client agent runs create again for each volume it had, all at once, with
    the saved request. A volume whose restore fails is not made available on the node.

    Given the plugin has created 3 volumes
    And a file is written into each volume
    When the agent restarts and restores every volume at once
    Then every restore exits with status 0 and reports the path of the first create
    And the files written into the volumes are still there

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
    reports 0.

    Given the volume request asks for a capacity range
    When Nomad creates the volume
    Then the reported bytes are 0 or within the requested range
