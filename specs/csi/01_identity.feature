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

    Basis: CSI spec v1.12, GetPluginInfo: name and vendor_version are REQUIRED, and the name MUST
    follow domain-name notation and MUST be 63 characters or less; Nomad plugins/csi/client.go
    (PluginGetInfo): an empty name is an error, so
    client/allocrunner/taskrunner/plugin_supervisor_hook.go (registerPlugin) fails and the plugin
    task is restarted instead of registered.

    When the harness calls GetPluginInfo
    Then the call succeeds
    And the plugin name is a non-empty domain-style name of at most 63 characters
    And the vendor version is not empty

  @CSI-IDENTITY-PLUGIN-INFO-DEADLINE @must
  Scenario: GetPluginInfo answers within Nomad's registration timeout
    Nomad gives GetPluginInfo 1 second, connection included, when the plugin registers.

    Basis: Nomad plugins/csi/client.go (PluginInfo): GetPluginInfo runs under a 1-second context
    that also covers connecting; when it fails,
    client/allocrunner/taskrunner/plugin_supervisor_hook.go (registerPlugin) returns an error and
    the plugin task is restarted ("CSI plugin failed to register") instead of registered. The spec
    sets no timeout: the CO MAY choose its own.

    When the harness calls GetPluginInfo
    Then the call completes within the "plugin info" deadline

  @CSI-IDENTITY-CAPABILITIES @must
  Scenario: GetPluginCapabilities succeeds
    Nomad reads CONTROLLER_SERVICE and VOLUME_ACCESSIBILITY_CONSTRAINTS from it on the first
    fingerprint; without an answer the plugin is never fingerprinted.

    Basis: CSI spec v1.12, GetPluginCapabilities and Connectivity: it is a REQUIRED Identity RPC,
    which every plugin SHALL implement; Nomad client/pluginmanager/csimanager/fingerprint.go
    (buildBasicFingerprint): an error fails the initial fingerprint, so the plugin stays unhealthy
    and no volume manager is created for it.

    When the harness calls GetPluginCapabilities
    Then the call succeeds

  @CSI-IDENTITY-PROBE @must
  Scenario: Probe reports a healthy plugin
    Probe must succeed; "ready" absent or true means ready. Nomad marks a plugin whose Probe
    fails as unhealthy.

    Basis: CSI spec v1.12, Probe: the plugin MUST implement it, SHALL answer an error when
    unhealthy, and answers ready=false only while it is still initialising; Nomad
    client/pluginmanager/csimanager/fingerprint.go (buildNodeFingerprint,
    buildControllerFingerprint): a Probe error or ready=false marks the plugin unhealthy, and
    scheduler/feasible/feasible.go (CSIVolumeChecker.isFeasible) places no allocation that needs a
    volume on a node whose node plugin is unhealthy.

    When the harness calls Probe
    Then the call succeeds
    And the plugin reports ready

  @CSI-IDENTITY-PROBE-DEADLINE @must
  Scenario: Probe answers within Nomad's probe timeout
    Nomad gives every Probe 5 seconds.

    Basis: Nomad client/allocrunner/taskrunner/plugin_supervisor_hook.go (supervisorLoopOnce): every
    Probe gets a 5-second context; a plugin whose Probe always takes longer never counts as ready,
    so ensureSupervisorLoop restarts its task when the health timeout runs out ("CSI plugin failed
    probe"). The spec sets no timeout.

    When the harness calls Probe
    Then the call completes within the "probe" deadline

  @CSI-IDENTITY-PROBE-READY-IN-TIME @must
  Scenario: the plugin becomes ready within Nomad's health timeout
    While the plugin task starts, Nomad probes it every 5 seconds for up to the health timeout
    (30 seconds by default) and restarts the task if it never reports ready.

    Basis: Nomad client/allocrunner/taskrunner/plugin_supervisor_hook.go (ensureSupervisorLoop):
    Nomad probes every 5 seconds until the plugin reports ready and restarts the task, never
    registering the plugin, when csi_plugin.health_timeout (30 seconds by default) runs out first.
    The spec only says ready=false is for a plugin still initialising.

    When the harness probes the plugin until it reports ready
    Then it reports ready within the "health" deadline
