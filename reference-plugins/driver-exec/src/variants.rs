//! Variant switches: behaviours the contract allows that differ from this plugin's default.
//!
//! A plugin with any of these on must still pass every `@must` clause; they exist so that the
//! harness can show it does not demand more than Nomad does (a tcp listener, missing optional
//! services, NOT_FOUND instead of UNKNOWN for an unknown task, ...). Like faults, each is
//! checked at the one place it changes.

use crate::switches::{self, switches};

switches! {
    /// One allowed deviation from the default behaviour; [`Variant::rule`] says which.
    pub enum Variant ("variant") {
        Tcp = "tcp":
            "listen on 127.0.0.1:<port> within PLUGIN_MIN_PORT..=PLUGIN_MAX_PORT and announce \
             `tcp` (what Go plugins do on Windows)",
        NoStdioBroker = "no-stdio-broker":
            "serve neither plugin.GRPCStdio nor plugin.GRPCBroker: both answer UNIMPLEMENTED, \
             which the host tolerates",
        NotFound = "not-found":
            "an unknown task id gets NOT_FOUND instead of UNKNOWN \"task not found for given id\"",
        NoInitShutdown = "no-init-shutdown":
            "Driver/Init and Driver/Shutdown answer UNIMPLEMENTED, which Nomad treats as success",
        NoExec = "no-exec":
            "Capabilities says exec=false; ExecTask and ExecTaskStreaming answer UNIMPLEMENTED",
        NoConfigSchema = "no-config-schema":
            "ConfigSchema returns no spec, and SetConfig accepts only empty msgpack_config \
             bytes (what Nomad then sends), refusing any other",
        EmptyHealthDescription = "empty-health-description":
            "Fingerprint says HEALTHY with an empty health_description",
        HandleStateUnset = "handle-state-unset":
            "StartTask's TaskHandle leaves `state` unset (UNKNOWN), as Nomad's own drivers do",
        PlainStartErrors = "plain-start-errors":
            "StartTask errors are plain UNKNOWN statuses without a RecoverableError detail, as \
             raw_exec's are",
        InvisibleTasks = "invisible-tasks":
            "no process of a task, nor its supervisor, carries TaskConfig.env in its \
             environment (PATH only); a `/bin/sh -c` script still sees the variables, as \
             unexported shell variables (a task in a VM)",
        WaitPoll = "wait-poll":
            "a WaitTask made while the task runs learns of the exit by polling every 2 s, so it \
             returns up to 2 s after the exit",
        NoSendSignals = "no-send-signals":
            "Capabilities says send_signals=false; SignalTask fails, and StopTask ignores the \
             signal and SIGKILLs the task's process group at once",
    }
}

/// The variants switched on for this run; empty for the default plugin.
pub type Variants = switches::Set<Variant>;

/// The variant list for `--help`.
pub fn help_text() -> String {
    let entries: Vec<(&str, &str)> = Variant::ALL.iter().map(|v| (v.name(), v.rule())).collect();
    switches::help_section(
        "Variants (--variant NAME, repeatable), each allowed by the contract:",
        &entries,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_round_trips_and_is_documented() {
        let readme = include_str!("../README.md");
        for variant in Variant::ALL {
            assert_eq!(variant.name().parse::<Variant>(), Ok(*variant));
            assert!(
                readme.contains(&format!("| `{}` |", variant.name())),
                "{variant} undocumented"
            );
        }
        assert!(
            "nope"
                .parse::<Variant>()
                .unwrap_err()
                .contains("unknown variant")
        );
    }
}
