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
  Scenario: the fingerprint gives a known health state
    Basis: Nomad client/pluginmanager/drivermanager/instance.go (handleFingerprint) turns the
    health into the node's driver info: Detected unless UNDETECTED, Healthy only when HEALTHY;
    scheduler/feasible (DriverChecker) places tasks only on a driver that is both. A value that
    is none of the three is not a state Nomad knows: the driver is never healthy.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then the first fingerprint has a known health state

  @DRIVER-FINGERPRINT-DESCRIPTION @should
  Scenario: the fingerprint describes its health
    Basis: Nomad client/pluginmanager/drivermanager/instance.go (handleFingerprint) copies
    health_description verbatim into the node's driver info, and client/node_updater.go emits a
    node event when it changes; Nomad needs nothing of it, but it is all an operator sees of why
    a driver is unhealthy (`nomad node status -verbose`).

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then the first fingerprint has a health description

  @DRIVER-FINGERPRINT-ATTRIBUTES @should
  Scenario: the fingerprint's attributes are well formed
    Every attribute has a name and exactly one value (string, int, float or bool).

    Basis: Nomad client/pluginmanager/drivermanager/instance.go (handleFingerprint) turns each
    attribute into text (plugins/shared/structs/attribute.go, GoString); one with no value becomes
    the empty text, and client/node_updater.go (updateNodeFromDriver) deletes a node attribute
    whose new value is empty. The attribute never reaches the node, so a job's constraint on it
    never matches; nothing else breaks, hence SHOULD.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then every attribute of the first fingerprint has a name and a value

  @DRIVER-FINGERPRINT-STREAM-OPEN @should
  Scenario: the Fingerprint stream stays open
    Basis: Nomad client/pluginmanager/drivermanager/instance.go (fingerprint): when the stream
    ends cleanly the driver manager opens it again at once (a backoff of 5 s to 2 min applies only
    when reopening fails, and an error marks the driver unhealthy). A stream that ends after each
    message costs the agent a busy reopen loop and the plugin a stream per loop; scheduling goes
    on.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then the stream is still open after the fingerprint period

  @DRIVER-FINGERPRINT-PERIODIC @should
  Scenario: the plugin fingerprints again periodically
    A second fingerprint within the fingerprint period passes. A driver whose stream stays open
    and quiet is skipped, saying so: the contract asks for another message only on a change,
    and the run changes nothing. A stream that ended is DRIVER-FINGERPRINT-STREAM-OPEN's
    failure, and this clause is blocked on it.

    Basis: the driver.proto comment on Fingerprint asks for a first message at once and another
    "if there is a change in the driver's state"; Nomad's client only reads what arrives
    (client/pluginmanager/drivermanager/instance.go, fingerprint). Nomad's built-in drivers
    resend every 30 s (fingerprintPeriod), which keeps health current after a dependency goes
    away without the driver watching it.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    Then a second fingerprint arrives within the fingerprint period

  @DRIVER-HEALTHY-STARTS @should @shape-long
  Scenario: a driver that says it is healthy starts the task shapes
    A driver whose first fingerprint says HEALTHY starts a task shape the run gives, or refuses
    it as worth retrying (a RecoverableError with recoverable = true). A driver that is not
    healthy is not asked (Nomad places nothing on it): the clause is skipped.

    Basis: scheduler/feasible (DriverChecker) places tasks on every node whose driver is detected
    and healthy (client/pluginmanager/drivermanager/instance.go, handleFingerprint); a driver that
    says HEALTHY while every start fails for good (its runtime is missing, say) keeps drawing
    allocations that fail at once, where an UNHEALTHY fingerprint would have sent them elsewhere.

    Given the plugin is running as Nomad's long-lived instance
    When Nomad opens the Fingerprint stream
    And the harness starts a long task on the driver it reports
    Then a driver that says it is healthy started the task, or refused it as worth retrying
