@csi
Feature: identity
  Nomad learns who a plugin is and whether it is healthy through the Identity service:
  GetPluginInfo when the plugin registers, GetPluginCapabilities and Probe on every
  fingerprint (every 30 seconds), and Probe in a loop while the plugin task starts.

  @CSI-IDENTITY-PLUGIN-INFO @must
  Scenario: GetPluginInfo names the plugin and its version
    The name is REQUIRED (a domain-style name of at most 63 characters) and Nomad refuses an
    empty one ("plugin returned empty name field"); vendor_version is REQUIRED and becomes the
    plugin's version in Nomad.

    When the harness calls GetPluginInfo
    Then the call succeeds
    And the plugin name is a non-empty domain-style name of at most 63 characters
    And the vendor version is not empty

  @CSI-IDENTITY-PLUGIN-INFO-DEADLINE @must
  Scenario: GetPluginInfo answers within Nomad's registration timeout
    Nomad gives GetPluginInfo 1 second, connection included, when the plugin registers.

    When the harness calls GetPluginInfo
    Then the call completes within the "plugin info" deadline

  @CSI-IDENTITY-CAPABILITIES @must
  Scenario: GetPluginCapabilities succeeds
    Nomad reads CONTROLLER_SERVICE and VOLUME_ACCESSIBILITY_CONSTRAINTS from it on the first
    fingerprint; without an answer the plugin is never fingerprinted.

    When the harness calls GetPluginCapabilities
    Then the call succeeds

  @CSI-IDENTITY-PROBE @must
  Scenario: Probe reports a healthy plugin
    Probe must succeed; "ready" absent or true means ready. Nomad marks a plugin whose Probe
    fails as unhealthy.

    When the harness calls Probe
    Then the call succeeds
    And the plugin reports ready

  @CSI-IDENTITY-PROBE-DEADLINE @must
  Scenario: Probe answers within Nomad's probe timeout
    Nomad gives every Probe 5 seconds.

    When the harness calls Probe
    Then the call completes within the "probe" deadline

  @CSI-IDENTITY-PROBE-READY-IN-TIME @must
  Scenario: the plugin becomes ready within Nomad's health timeout
    While the plugin task starts, Nomad probes it every 5 seconds for up to the health timeout
    (30 seconds by default) and restarts the task if it never reports ready.

    When the harness probes the plugin until it reports ready
    Then it reports ready within the "health" deadline
