@driver
Feature: base
  Nomad loads a driver in three launches: one to fingerprint it (PluginInfo, ConfigSchema), one to
  validate the agent's plugin configuration (SetConfig), and the long-lived instance (SetConfig
  with Nomad's own settings, then Init). The configuration travels as msgpack, encoded by Nomad
  from the agent's HCL against the plugin's schema.

  @DRIVER-BASE-PLUGIN-INFO @must
  Scenario: PluginInfo says it is a driver, with a name, a version and API version v0.1.0
    Basis: Nomad helper/pluginutils/loader/init.go (fingerprintPlugin, selectApiVersion) and
    plugins/base/client.go (PluginInfo): a type other than DRIVER or DEVICE, a plugin_version
    hashicorp/go-version cannot parse, or no or unparsable plugin_api_versions fail the load; no
    version equal to v0.1.0 among them (loader/api_versions.go) skips the plugin with a warning.
    The loader does not check the name, but it is the plugin's ID (init.go, PluginID): jobs
    select the driver by it (`driver = "..."`), so a driver without one can never be used.

    When Nomad fingerprints the plugin in a launch of its own
    Then PluginInfo says DRIVER, a name, a valid plugin version and API version v0.1.0

  @DRIVER-BASE-CONFIG-SCHEMA @must
  Scenario: ConfigSchema returns a schema Nomad can convert
    Basis: Nomad helper/pluginutils/loader/init.go (validatePluginConfig) converts the returned
    hclspec with hclspecutils.Convert and parses the agent's configuration with it; a schema that
    does not convert stops the plugin from loading.

    When Nomad fingerprints the plugin in a launch of its own
    Then the plugin configuration schema converts

  @DRIVER-BASE-SET-CONFIG @must
  Scenario: SetConfig accepts the agent's configuration in both launches
    For a plugin with a ConfigSchema, Nomad validates the agent's configuration in a launch of
    its own (SetConfig twice, without nomad_config, no Init), then gives it to the long-lived
    instance (with nomad_config.driver: the client's port range and CPU topology). A plugin
    without a ConfigSchema gets no validation launch and empty msgpack_config bytes.

    Basis: Nomad helper/pluginutils/loader/init.go (validatePluginConfig), loader.go (Dispense)
    and client/pluginmanager/drivermanager/instance.go (dispense): an error from any SetConfig
    fails the plugin's load ("SetConfig failed").

    When Nomad validates the plugin configuration in a launch of its own
    And Nomad starts the plugin's long-lived instance with that configuration
    Then both SetConfig calls succeed

  @DRIVER-BASE-SET-CONFIG-EMPTY @must
  Scenario: SetConfig accepts an empty configuration
    An agent with no `plugin` block for the driver sends the schema's defaults: every attribute
    present, nil where the schema gives no default.

    Basis: Nomad helper/pluginutils/loader/init.go (validatePluginConfig) parses `{}` when the
    agent has no configuration for the plugin, and go-cty's msgpack encoding writes every
    attribute of the object, nil where unset; a refusal means the driver never loads on an agent
    without a plugin block.

    When Nomad starts the plugin's long-lived instance with an empty configuration
    Then SetConfig succeeds

  @DRIVER-BASE-INIT @must
  Scenario: Init succeeds or is not implemented
    Basis: Nomad plugins/drivers/client.go (Init): UNIMPLEMENTED counts as success, any other
    error makes client/pluginmanager/drivermanager/instance.go kill the plugin.

    When Nomad starts the plugin's long-lived instance
    Then Init succeeds or is UNIMPLEMENTED

  @DRIVER-BASE-PLAIN-MSGPACK @should
  Scenario: SetConfig accepts plain msgpack too
    Nomad's own tests, and other hosts built on Nomad's SDK, encode configuration as a plain
    msgpack map with only the attributes given (EncodeConcreteDriverConfig).

    Basis: Nomad plugins/base/plugin.go (MsgPackDecode) decodes both forms the same way in Go
    drivers, and plugins/drivers/testutils (EncodeConcreteDriverConfig) sends the plain one.

    When the harness sends the configuration as plain msgpack
    Then SetConfig succeeds
