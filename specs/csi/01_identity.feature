@csi
Feature: identity
  Nomad learns who a plugin is and whether it is healthy through the Identity service: Probe
  alone while the plugin task starts, every 5 seconds until it reports ready; then GetPluginInfo
  when the plugin registers, GetPluginCapabilities (and NodeGetInfo) until the first fingerprint
  succeeds, and Probe on every fingerprint (every 30 seconds).

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

    Given Nomad has found the plugin ready
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

    Given Nomad has found the plugin ready
    When the harness calls GetPluginInfo
    Then the call completes within the "plugin info" deadline

  @CSI-IDENTITY-CAPABILITIES @must
  Scenario: GetPluginCapabilities succeeds
    Nomad reads CONTROLLER_SERVICE and VOLUME_ACCESSIBILITY_CONSTRAINTS from it, every 30 seconds
    until the first fingerprint succeeds and never again; without an answer the plugin is never
    fingerprinted.

    Basis: CSI spec v1.12, GetPluginCapabilities and Connectivity: it is a REQUIRED Identity RPC,
    which every plugin SHALL implement; Nomad client/pluginmanager/csimanager/fingerprint.go
    (fingerprint, buildBasicFingerprint): it is asked only until the first fingerprint succeeds,
    and an error fails that fingerprint, so the plugin stays unhealthy and no volume manager is
    created for it.

    Given Nomad has found the plugin ready
    When the harness calls GetPluginCapabilities
    Then the call succeeds

  @CSI-IDENTITY-MONOLITH-CONTROLLER @must @requires-monolith-chosen
  Scenario: a monolith plugin offers the controller service
    Run as a monolith (--plugin-type monolith, as a job's csi_plugin block says type =
    "monolith"), the plugin is its own controller: GetPluginCapabilities must advertise
    CONTROLLER_SERVICE. Without it every controller clause would be skipped and the run would
    judge a node plugin.

    Basis: Nomad client/pluginmanager/csimanager/fingerprint.go (buildBasicFingerprint): only
    CONTROLLER_SERVICE sets RequiresControllerPlugin, and without it nomad/csi_endpoint.go
    (Create) refuses `nomad volume create` ("plugin has no controller") and
    nomad/csi_endpoint.go (controllerPublishVolume, controllerUnpublishVolume) never attaches or
    detaches a volume, so a monolith without it can neither create its volumes nor attach them
    for a claim; CSI spec v1.12, GetPluginCapabilities: CONTROLLER_SERVICE is how a plugin says
    it provides the Controller service.

    Given Nomad has found the plugin ready
    When the harness calls GetPluginCapabilities
    Then the plugin advertises CONTROLLER_SERVICE, as the monolith it was run as

  @CSI-IDENTITY-MONOLITH-ASSUMED @should @requires-monolith-assumed
  Scenario: a plugin judged as a monolith by default offers the controller service
    Run without --plugin-type, the plugin is judged as a monolith. One that does not advertise
    CONTROLLER_SERVICE is a node plugin or a broken monolith, and the run cannot tell which:
    every controller clause is skipped. A warning, so that the run's verdict does not rest on a
    guess: say --plugin-type node (with --volume) or --plugin-type monolith.

    Basis: Nomad client/pluginmanager/csimanager/fingerprint.go (buildBasicFingerprint): only
    CONTROLLER_SERVICE sets RequiresControllerPlugin, and without it nomad/csi_endpoint.go
    (Create) refuses `nomad volume create` ("plugin has no controller"); the job's csi_plugin
    block says which type the plugin is, and the run was not told.

    Given Nomad has found the plugin ready
    When the harness calls GetPluginCapabilities
    Then the plugin advertises CONTROLLER_SERVICE, as the monolith it was run as

  @CSI-IDENTITY-PROBE @must
  Scenario: Probe reports a healthy plugin
    Probe must succeed; "ready" absent or true means ready. Nomad marks a plugin whose Probe
    fails as unhealthy.

    Basis: CSI spec v1.12, Probe: the plugin MUST implement it, SHALL answer an error when
    unhealthy, and answers ready=false only while it is still initialising; Nomad
    client/pluginmanager/csimanager/fingerprint.go (buildNodeFingerprint,
    buildControllerFingerprint): a Probe error or ready=false marks the plugin unhealthy, and
    scheduler/feasible/feasible.go (CSIVolumeChecker.isFeasible) places no allocation that needs a
    volume on a node whose node plugin is unhealthy. These are the probes after start-up: a plugin
    never ready at start-up is CSI-IDENTITY-PROBE-READY-IN-TIME's to judge.

    Given Nomad has found the plugin ready
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
    While the plugin task starts, Nomad calls nothing but Probe: at once, then 5 seconds after
    each answer that is not ready, until the health timeout (30 seconds by default, counted from
    the task's start) runs out; then it restarts the task. The harness probes the same way before
    the first clause (counting from the plugin's start with --launch, from its first contact
    otherwise), and every clause that needs a registered plugin is Blocked by this one when no
    probe reported ready in time.

    Basis: Nomad client/allocrunner/taskrunner/plugin_supervisor_hook.go (ensureSupervisorLoop,
    supervisorLoopOnce): Probe with a 5-second timeout, again 5 seconds after each answer that is
    not ready, under a context of csi_plugin.health_timeout from the task's start; when it runs out
    the task is restarted ("CSI plugin failed probe") and never registered, so no volume call ever
    reaches the plugin. The spec only says ready=false is for a plugin still initialising.

    When Nomad probes the plugin from its start, every 5 seconds until it is ready
    Then it reports ready within the "health" deadline
