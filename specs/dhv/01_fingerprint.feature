@dhv
Feature: fingerprint
  Each time a Nomad client starts, or reloads on SIGHUP, it runs every executable in its host volume
  plugin directory as `<plugin> fingerprint`, with DHV_OPERATION=fingerprint as the only
  environment variable, and registers the plugin on the node under the version it reports.
  A plugin that fails here is logged and left out: no volume can be placed with it.

  @DHV-FINGERPRINT-EXIT-ZERO @must
  Scenario: fingerprint exits with status 0
    Nomad treats any other exit status as "not a plugin", even when stdout holds a valid version.

    When Nomad fingerprints the plugin
    Then the plugin exits with status 0

  @DHV-FINGERPRINT-SINGLE-JSON @must
  Scenario: fingerprint prints exactly one JSON object
    Nomad decodes the whole of stdout with a single json.Unmarshal. Whitespace around the object
    is fine; anything after it (a second object, a log line) makes the decode fail.

    When Nomad fingerprints the plugin
    Then stdout is exactly one JSON object

  @DHV-FINGERPRINT-VERSION-PRESENT @must
  Scenario: fingerprint reports a version string
    A missing or null "version" decodes to a nil version, which the Nomad agent then dereferences:
    the client crashes with a nil-pointer panic. A version that is not a string fails to decode.

    When Nomad fingerprints the plugin
    Then the response has a "version" that is a string

  @DHV-FINGERPRINT-VERSION-VALID @must
  Scenario: the version is valid for hashicorp/go-version
    Nomad parses the version with hashicorp/go-version (an optional "v", dot-separated numbers,
    an optional pre-release and +metadata, no surrounding spaces) and rejects the plugin otherwise.

    When Nomad fingerprints the plugin
    Then the version parses with hashicorp/go-version's grammar

  @DHV-FINGERPRINT-DISCOVERY-DEADLINE @must
  Scenario: fingerprint completes within the deadline Nomad enforces at discovery
    The documentation allows 5 seconds, but the agent's discovery wraps every fingerprint in a
    1-second context: a slower plugin is killed and left out.

    When Nomad fingerprints the plugin
    Then the call completes within the "fingerprint discovery" deadline

  @DHV-FINGERPRINT-DOCUMENTED-DEADLINE @must
  Scenario: fingerprint completes within the documented deadline
    The plugin specification says fingerprint must complete within 5 seconds or Nomad kills it.

    When Nomad fingerprints the plugin
    Then the call completes within the "fingerprint documented" deadline

  @DHV-FINGERPRINT-NO-SIDE-EFFECTS @should
  Scenario: fingerprint does no work
    Fingerprint runs at every agent start and reload (client/fingerprint/dynamic_host_volumes.go
    runs every plugin in the directory each time); the specification says no actual work should
    be done. It should not write files into the working directory, the plugin directory or /tmp.
    The call runs while no other call of the plugin does, with a /tmp of its own (a directory of
    the harness mounted over /tmp for the plugin alone; as root, or where user namespaces are
    allowed), so that what it writes there is seen and nothing else is.

    When Nomad fingerprints the plugin while nothing else of it runs
    Then nothing was written into the working directory, the plugin directory or /tmp
