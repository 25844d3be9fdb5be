@driver
Feature: fingerprint
  The long-lived instance's Fingerprint stream tells Nomad whether the driver is detected and
  healthy, and the node attributes it brings. Nomad opens it once and keeps it open.

  @DRIVER-FINGERPRINT-FIRST @must
  Scenario: the first fingerprint comes promptly
    Basis: Nomad client/pluginmanager/drivermanager/instance.go (handleFingerprint) and the agent's
    start-up (WaitForFirstFingerprint) wait for the first message; the driver is not offered to
    the scheduler until it comes, and the agent's start waits on it.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then a first fingerprint arrives within the fingerprint deadline

  @DRIVER-FINGERPRINT-HEALTH @must
  Scenario: the fingerprint gives a known health state and a description
    Basis: Nomad plugins/drivers/client.go (handleFingerprint) maps health UNDETECTED, UNHEALTHY
    and HEALTHY into the node's driver info (DriverInfo Detected/Healthy), with the description
    shown to operators; any other value is not a state the scheduler can use.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then the first fingerprint has a known health state and a description

  @DRIVER-FINGERPRINT-ATTRIBUTES @must
  Scenario: the fingerprint's attributes are well formed
    Every attribute has a name and exactly one value (string, int, float or bool).

    Basis: Nomad plugins/shared/structs/attribute.go (ConvertProtoAttribute): an attribute with no
    value converts to nil and breaks node attribute handling (client/node_updater.go).

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then every attribute of the first fingerprint has a name and a value

  @DRIVER-FINGERPRINT-STREAM-OPEN @must
  Scenario: the Fingerprint stream stays open
    Basis: Nomad client/pluginmanager/drivermanager/instance.go (watchFingerprint): when the stream
    ends, Nomad marks the driver unhealthy and re-dispenses it with a backoff of 5 s to 2 min,
    so a stream that ends takes the driver out of scheduling again and again.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then the stream is still open after the fingerprint period

  @DRIVER-FINGERPRINT-PERIODIC @should
  Scenario: the plugin fingerprints again periodically
    Basis: the driver.proto comment on Fingerprint asks for a message on every change; Nomad's
    built-in drivers resend every 30 s (fingerprintPeriod), which keeps health current after a
    dependency goes away.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then a second fingerprint arrives within the fingerprint period
