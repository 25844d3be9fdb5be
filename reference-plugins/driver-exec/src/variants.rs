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
            "a WaitTask made while the task runs learns of the exit as nomad-driver-lxc does: a \
             monitor polls the task every 2 s, and WaitTask polls the monitor every 2 s, so it \
             returns 2 to 4 s after the exit",
        NoSendSignals = "no-send-signals":
            "Capabilities says send_signals=false; SignalTask fails, and StopTask ignores the \
             signal and SIGKILLs the task's process group at once",
        Chroot = "chroot":
            "Capabilities says fs_isolation=CHROOT; each task, and each exec in it, runs \
             chrooted into its task directory (the root the client built), in a mount \
             namespace of its own where the driver mounts the host's /dev and a fresh /proc",
        Image = "image":
            "Capabilities says fs_isolation=IMAGE; the driver builds each task's root itself \
             (read-only host /usr, /etc, /lib, /lib64, /bin, /sbin; /dev, /proc, a tmpfs /tmp; \
             /alloc, /local, /secrets) in a mount namespace of its own, and runs the task and \
             its execs chrooted into it",
        DynamicUsers = "dynamic-users":
            "Capabilities says dynamic_workload_users=true; StartTask refuses a task without a \
             user or an existing cgroup path, and runs it (and its execs) as uid = gid = N of \
             its user nomad-<N>, in that cgroup",
        SlowStart = "slow-start":
            "StartTask waits 35 s before it starts the task (a driver pulling an image); \
             RecoverTask is not slowed",
        OwnUnknownTaskError = "own-unknown-task-error":
            "a task id the driver does not know (one never started, or destroyed) gets \
             FAILED_PRECONDITION \"no task with this id on this driver\" instead of Nomad's \
             UNKNOWN \"task not found for given id\"",
        Undetected = "undetected":
            "Fingerprint reports UNDETECTED (exec runtime not found on this node), though \
             tasks would run: the node lacks the runtime, as far as the driver can tell",
        DestroyGrace = "destroy-grace":
            "DestroyTask(force) of a running task sends SIGTERM and waits a fixed grace of 60 s \
             for the task to exit before it kills it (nomad-driver-lxc's Shutdown(1 minute))",
        LateSigintHandler = "late-sigint-handler":
            "SIGINT keeps its default action for 1 s after the handshake line, and only then is \
             ignored; RPCs are answered only after that (go-plugin's Serve prints the line \
             before signal.Notify, and serves after it)",
        StatsPerStream = "stats-per-stream":
            "each TaskStats stream sends one message and then ends (OK); Nomad's stats hook \
             opens another one collection interval later",
    }
}

/// Variants that cannot be on together, and why.
const CONFLICTS: &[(Variant, Variant, &str)] = &[
    (
        Variant::Chroot,
        Variant::Image,
        "a driver has one filesystem isolation",
    ),
    (
        Variant::InvisibleTasks,
        Variant::Chroot,
        "the task's env file lies in the state directory, outside the task's root",
    ),
    (
        Variant::InvisibleTasks,
        Variant::Image,
        "the task's env file lies in the state directory, outside the task's root",
    ),
    (
        Variant::InvisibleTasks,
        Variant::DynamicUsers,
        "the task's env file is readable by root only",
    ),
];

/// Why the variants switched on cannot be on together, if they cannot.
pub fn conflict(variants: &Variants) -> Option<String> {
    CONFLICTS
        .iter()
        .find(|(a, b, _)| variants.has(*a) && variants.has(*b))
        .map(|(a, b, why)| format!("--variant {a} and --variant {b} exclude each other: {why}"))
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

    #[test]
    fn conflicting_variants_are_named() {
        assert_eq!(conflict(&Variants::default()), None);
        assert_eq!(
            conflict(&Variants::new([Variant::Chroot, Variant::DynamicUsers])),
            None
        );
        let both = conflict(&Variants::new([Variant::Image, Variant::Chroot])).unwrap();
        assert!(
            both.contains("--variant chroot and --variant image"),
            "{both}"
        );
        assert!(
            conflict(&Variants::new([
                Variant::InvisibleTasks,
                Variant::DynamicUsers
            ]))
            .is_some()
        );
    }
}
