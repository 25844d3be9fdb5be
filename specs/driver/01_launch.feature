@driver
Feature: launch
  The Nomad client starts a driver plugin binary with go-plugin: it sets the magic cookie and
  the protocol versions it speaks in the environment, reads the first line the plugin prints on
  stdout (the handshake: core protocol, app protocol, network, address, protocol), and dials the
  address with plaintext gRPC. Nothing of the plugin is usable until this works.

  @DRIVER-LAUNCH-FIRST-LINE @must
  Scenario: the first line on stdout is the handshake
    The host reads exactly one line from stdout and parses it as the handshake; anything printed
    before it (a banner, a log line) is taken for the handshake and fails the load.

    Basis: Nomad helper/pluginutils/loader/init.go (fingerprintPlugin) starts the plugin with
    hashicorp/go-plugin client.go (Start), which takes the first stdout line as the handshake and
    refuses the plugin when it does not parse: the driver is never loaded.

    When the harness launches the plugin as Nomad does
    Then the first line on stdout is a handshake line

  @DRIVER-LAUNCH-HANDSHAKE-FORMAT @must
  Scenario: the handshake has every field, well formed
    CORE|APP|NETWORK|ADDR|PROTOCOL, then the server certificate (empty without AutoMTLS) and,
    only when the host asked for it, the multiplexing flag: numbers where numbers go, no empty
    field before the certificate.

    Basis: hashicorp/go-plugin client.go (Start): a line with fewer than four fields, or a
    version that is not a number, is refused ("Unrecognized remote plugin message"), and Nomad
    never loads the driver.

    When the harness launches the plugin as Nomad does
    Then the handshake has every field, well formed

  @DRIVER-LAUNCH-CORE-PROTOCOL @must
  Scenario: the core protocol version is 1
    Basis: hashicorp/go-plugin client.go (Start): the core protocol version MUST equal the
    host's (1), otherwise the plugin is refused as incompatible.

    When the harness launches the plugin as Nomad does
    Then the handshake's core protocol version is 1

  @DRIVER-LAUNCH-APP-PROTOCOL @must
  Scenario: the app protocol version is 2
    Nomad offers only version 2 (PLUGIN_PROTOCOL_VERSIONS=2): 1 was the pre-0.9 executor.

    Basis: Nomad plugins/base/plugin.go (Handshake, ProtocolVersion 2) and hashicorp/go-plugin
    client.go (Start): a version the host did not offer is refused and the driver is not loaded.

    When the harness launches the plugin as Nomad does
    Then the handshake's app protocol version is 2

  @DRIVER-LAUNCH-ADDRESS @must
  Scenario: the announced network and address accept a connection
    The network is unix (or tcp) and the address is where the plugin serves gRPC.

    Basis: hashicorp/go-plugin client.go (Start): only unix and tcp are accepted, the address is
    resolved and dialled with plaintext HTTP/2 (grpc_client.go); a plugin that cannot be dialled
    is never loaded.

    When the harness launches the plugin as Nomad does
    Then the handshake's network is unix or tcp
    And the harness can connect to the announced address

  @DRIVER-LAUNCH-PROTOCOL-GRPC @must
  Scenario: the protocol is grpc
    Basis: Nomad helper/pluginutils/loader/init.go (fingerprintPlugin) sets AllowedProtocols to
    grpc only; hashicorp/go-plugin client.go (Start) takes a missing protocol field for netrpc and
    refuses a protocol the host does not allow.

    When the harness launches the plugin as Nomad does
    Then the handshake's protocol is grpc

  @DRIVER-LAUNCH-DEADLINE @must
  Scenario: the handshake comes within the start timeout
    The host waits a limited time for the handshake line (the profile's driver start timeout;
    go-plugin's default is one minute).

    Basis: hashicorp/go-plugin client.go (Start, StartTimeout default 1 minute, which Nomad does
    not change): past it the host kills the plugin ("timeout while waiting for plugin to start").

    When the harness launches the plugin as Nomad does
    Then the handshake came within the start timeout

  @DRIVER-LAUNCH-NEEDS-COOKIE @should
  Scenario: started without the magic cookie, the plugin refuses to run
    A plugin binary run by hand (no NOMAD_PLUGIN_MAGIC_COOKIE) says it is a plugin and exits
    non-zero instead of serving.

    Basis: hashicorp/go-plugin server.go (Serve): without the cookie a server prints that the
    binary is a plugin and exits with status 1; Nomad itself always sets the cookie
    (plugins/base/plugin.go, Handshake), so only people running the binary by hand see this.

    When the harness launches the plugin without the magic cookie
    Then the plugin exits with a non-zero status and prints no handshake

  @DRIVER-LAUNCH-SURVIVES-SIGINT @should
  Scenario: the plugin survives SIGINT
    A Ctrl-C in the agent's terminal reaches the plugin too (same process group in a shell); a
    plugin should keep serving and let the agent decide. The harness sends SIGINT once the
    plugin has answered PluginInfo: go-plugin's servers print the handshake before they start
    ignoring SIGINT, and answer RPCs only after, so a signal right after the handshake would
    judge the plugin's start, a window no operator's Ctrl-C aims at.

    Basis: hashicorp/go-plugin server.go (Serve) counts and ignores os.Interrupt in every Go
    plugin (signal.Notify after the handshake line, before server.Serve), so Nomad never
    expects a running driver to die of it.

    Given the plugin has been launched as Nomad launches it
    When the harness sends SIGINT to the plugin
    Then the plugin still answers PluginInfo

  @DRIVER-LAUNCH-STDERR-HCLOG @should @shape-long
  Scenario: the plugin logs hclog lines on stderr
    Nomad reads the plugin's stderr line by line: JSON with @level, @message and @timestamp, or
    lines with a [LEVEL] prefix, land in the agent's log at their level; anything else is logged
    at debug.

    Basis: hashicorp/go-plugin client.go (logStderr) parses each line as hclog JSON or by level
    prefix; Nomad plugins/serve.go sets up JSON hclog for Go plugins, and unparsed lines lose
    their level in the agent's log.

    Given the plugin is running as Nomad's long-lived instance
    When the harness starts a long task and stops it
    Then every line on the plugin's stderr is hclog JSON or has a level prefix
