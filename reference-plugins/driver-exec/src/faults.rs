//! Fault switches: deliberate, named violations of exactly one rule each.
//!
//! A conformance harness is only trustworthy if its checks can fail. Each `--fault NAME` makes
//! this otherwise correct driver break one rule, so the harness's own tests can show that the
//! matching clause notices. Every fault is checked at the one place in the plugin where the rule
//! it breaks is implemented: search for its variant name.

use crate::switches::{self, switches};

switches! {
    /// One deliberate rule violation; [`Fault::rule`] says which.
    pub enum Fault ("fault") {
        // The go-plugin launch (launch.rs, log.rs, main.rs).
        HandshakeGarbled = "handshake-garbled":
            "the handshake line is cut short to `1|2|unix`",
        HandshakeCore2 = "handshake-core-2":
            "the handshake announces core protocol version 2 instead of 1",
        HandshakeApp1 = "handshake-app-1":
            "the handshake announces application protocol version 1 instead of 2",
        HandshakeBadAddress = "handshake-bad-address":
            "the handshake announces a socket path where nothing listens",
        HandshakeNetrpc = "handshake-netrpc":
            "the handshake announces protocol `netrpc` instead of `grpc`",
        StdoutBanner = "stdout-banner":
            "a banner line is printed on stdout before the handshake line",
        SlowHandshake = "slow-handshake":
            "the handshake line comes 5 s after start",
        IgnoresCookie = "ignores-cookie":
            "the plugin starts without the magic cookie instead of refusing with exit status 1",
        DiesOnSigint = "dies-on-sigint":
            "SIGINT kills the plugin instead of being ignored",
        PlainStderr = "plain-stderr":
            "stderr carries unprefixed plain-text lines instead of hclog JSON",
        ExitOnDisconnect = "exit-on-disconnect":
            "the plugin exits when the client's connection closes instead of serving on",
        // BasePlugin (base.rs, config.rs).
        WrongPluginType = "wrong-plugin-type":
            "PluginInfo reports type DEVICE instead of DRIVER",
        NoApiVersion = "no-api-version":
            "PluginInfo reports no plugin_api_versions",
        BadConfigSchema = "bad-config-schema":
            "ConfigSchema has an Attr of type `strng`, which is no HCL type",
        SetConfigNeedsNomadConfig = "set-config-needs-nomad-config":
            "SetConfig fails when nomad_config is absent (Nomad's config validation launch)",
        SetConfigRejectsNil = "set-config-rejects-nil":
            "SetConfig fails on any nil attribute, which go-cty sends for every unset one",
        CtyOnly = "cty-only":
            "SetConfig and StartTask fail on a config map that lacks some schema attribute",
        InitFails = "init-fails":
            "Driver/Init returns an error",
        SecondInitFails = "second-init-fails":
            "Driver/Init fails every time after the first in a process, though Nomad calls it \
             again when it reattaches after an agent restart",
        // Fingerprint (fingerprint.rs).
        FingerprintLate = "fingerprint-late":
            "the first Fingerprint message comes after 5 s instead of at once",
        FingerprintBadHealth = "fingerprint-bad-health":
            "Fingerprint reports health 7, which is no HealthState",
        FingerprintEmptyAttribute = "fingerprint-empty-attribute":
            "a Fingerprint attribute has no value set",
        FingerprintCloses = "fingerprint-closes":
            "the Fingerprint stream ends after its first message",
        FingerprintOnce = "fingerprint-once":
            "the Fingerprint stream stays open but never sends a second message",
        // Task schema and capabilities (taskconfig.rs, driver.rs).
        BadTaskSchema = "bad-task-schema":
            "TaskConfigSchema has an Attr of type `strng`, which is no HCL type",
        CapabilitiesError = "capabilities-error":
            "Capabilities returns an error",
        // StartTask (start.rs).
        HandleWrongId = "handle-wrong-id":
            "the TaskHandle's config.id differs from the started task's id",
        BadConfigLeavesProcess = "bad-config-leaves-process":
            "StartTask starts a process before validating the task config and leaves it \
             running when it rejects the config",
        BadConfigRecoverable = "bad-config-recoverable":
            "a StartTask refused for a task config that cannot be decoded is marked \
             recoverable, though retrying can never help",
        PanicsInStart = "panics-in-start":
            "every StartTask makes the plugin die as a Go plugin panics: a Go panic and stack \
             on stderr, exit status 2",
        HealthyButStartFails = "healthy-but-start-fails":
            "Fingerprint says HEALTHY, but every StartTask fails: the runtime binary does not \
             exist",
        CrashesOnEmptyArgs = "crashes-on-empty-args":
            "a task config with `args = []` makes the plugin process panic and die",
        CrashesOnEmptyArgument = "crashes-on-empty-argument":
            "a task whose `args` hold an empty string makes the plugin panic and die once the \
             task has started (as nomad-driver-lxc does on `volumes = [\"data\"]`)",
        LogsDropped = "logs-dropped":
            "task output goes to /dev/null instead of the stdout_path/stderr_path FIFOs",
        EnvDropped = "env-dropped":
            "the task gets an empty environment instead of TaskConfig.env",
        TaskDirEnvWrong = "task-dir-env-wrong":
            "the task's NOMAD_TASK_DIR points at the allocation directory, not the task directory",
        TasksDieWithPlugin = "tasks-die-with-plugin":
            "tasks run in the plugin's session and process group, so they die with the plugin",
        // WaitTask, InspectTask (driver.rs).
        WaitWrongCode = "wait-wrong-code":
            "WaitTask always reports exit_code 0",
        WaitOnce = "wait-once":
            "a WaitTask made after the task exited never returns",
        WaitSingleWaiter = "wait-single-waiter":
            "of several WaitTask calls made while the task runs, only the first returns",
        UnknownTaskHangs = "unknown-task-hangs":
            "WaitTask of an unknown task id never returns instead of failing",
        InspectNoCompletedAt = "inspect-no-completed-at":
            "InspectTask omits completed_at, which Nomad's client cannot convert",
        // StopTask, DestroyTask, SignalTask (stop.rs).
        StopIgnoresSignal = "stop-ignores-signal":
            "StopTask always sends SIGKILL instead of the requested signal",
        StopNoEscalation = "stop-no-escalation":
            "StopTask never sends SIGKILL: it returns at the timeout with the task still alive",
        StopLateEscalation = "stop-late-escalation":
            "StopTask returns at the timeout with the task alive, and sends SIGKILL 12 s \
             later",
        StopExitedErrors = "stop-exited-errors":
            "StopTask of a task that has exited returns an error",
        RejectsEmptySignal = "rejects-empty-signal":
            "StopTask with an empty signal (a job without kill_signal) fails instead of using \
             SIGINT",
        StopKillsAll = "stop-kills-all":
            "StopTask stops every task of the plugin, not just the one named",
        DestroyLeavesChildren = "destroy-leaves-children":
            "DestroyTask(force) kills only the task's main process, not its children",
        DestroyKeepsTask = "destroy-keeps-task":
            "the task is still known after DestroyTask",
        DestroyLeavesTask = "destroy-leaves-task":
            "DestroyTask(force) answers OK but neither stops nor forgets the task",
        SignalIgnored = "signal-ignored":
            "SignalTask answers OK without delivering the signal",
        SignalUnknownOk = "signal-unknown-ok":
            "SignalTask with an unknown signal name answers OK",
        // TaskStats (stats.rs), TaskEvents (events.rs).
        StatsOnce = "stats-once":
            "the TaskStats stream sends one message and then nothing while staying open",
        StatsNeverEnds = "stats-never-ends":
            "the TaskStats stream goes on after the task exited",
        EventsNoAllocId = "events-no-alloc-id":
            "TaskEvents carry no alloc_id, so Nomad cannot route them",
        // ExecTask, ExecTaskStreaming (exec.rs, exec_stream.rs).
        ExecNoOutput = "exec-no-output":
            "ExecTask returns empty stdout and stderr",
        ExecStreamNoStderr = "exec-stream-no-stderr":
            "ExecTaskStreaming without a tty never sends stderr data",
        ExecStreamBuffers = "exec-stream-buffers":
            "ExecTaskStreaming sends the output only when the command exits",
        ExecStreamNoPty = "exec-stream-no-pty":
            "ExecTaskStreaming ignores `tty` and always uses pipes",
        ExecStreamIgnoresResize = "exec-stream-ignores-resize":
            "ExecTaskStreaming ignores tty_size messages",
        ExecStreamIgnoresStdinClose = "exec-stream-ignores-stdin-close":
            "ExecTaskStreaming ignores stdin close, so the command never sees end of input",
        ExecStreamWaitsChildren = "exec-stream-waits-children":
            "ExecTaskStreaming with a tty does not make the terminal the command's controlling \
             terminal (so its orphans are not hung up) and ends only when they close the output",
        ExecStreamNoExitCode = "exec-stream-no-exit-code":
            "ExecTaskStreaming always reports exit code 0",
        ClaimsChroot = "claims-chroot":
            "Capabilities says fs_isolation CHROOT, but tasks and execs see the host's filesystem",
        // RecoverTask (start.rs).
        RecoverFails = "recover-fails":
            "RecoverTask always fails",
        RecoverLosesExitCode = "recover-loses-exit-code":
            "a task that exited while the plugin was down is recovered with exit code 0",
        RecoverDecodesRawConfig = "recover-decodes-raw-config":
            "RecoverTask decodes handle.config.msgpack_driver_config and fails when it cannot, \
             as it cannot after an agent restart (Nomad sends that field empty)",
        RecoverRefusesKnownTask = "recover-refuses-known-task":
            "RecoverTask of a task this plugin process already knows fails with \
             \"task already exists\"",
    }
}

/// The faults switched on for this run; empty for the correct plugin.
pub type Faults = switches::Set<Fault>;

/// The fault list for `--help`.
pub fn help_text() -> String {
    let entries: Vec<(&str, &str)> = Fault::ALL.iter().map(|f| (f.name(), f.rule())).collect();
    switches::help_section(
        "Faults (--fault NAME, repeatable), each breaking one rule:",
        &entries,
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_fault_is_listed_once_and_round_trips() {
        let unique: BTreeSet<Fault> = Fault::ALL.iter().copied().collect();
        assert_eq!(unique.len(), Fault::ALL.len());
        for fault in Fault::ALL {
            assert_eq!(fault.name().parse::<Fault>(), Ok(*fault));
            assert!(!fault.rule().is_empty());
        }
    }

    #[test]
    fn the_readme_documents_every_fault() {
        let readme = include_str!("../README.md");
        for fault in Fault::ALL {
            assert!(
                readme.contains(&format!("| `{}` |", fault.name())),
                "{fault} undocumented"
            );
        }
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = "no-such-fault".parse::<Fault>().unwrap_err();
        assert!(err.contains("unknown fault 'no-such-fault'"), "{err}");
        assert!(err.contains("wait-once") && err.contains("handshake-garbled"));
    }

    #[test]
    fn help_lists_every_fault() {
        let help = help_text();
        for fault in Fault::ALL {
            assert!(help.contains(fault.name()), "{fault} missing from --help");
        }
    }
}
