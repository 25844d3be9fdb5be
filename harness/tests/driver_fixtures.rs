//! Runs the task driver suite against the reference driver driver-exec, correct, with each
//! fault switch of fixtures/driver, and with each variant, and checks every verdict exactly.
//!
//! A fixture directory holds `expect.toml` and, optionally, `tasks.hcl`/`tasks.toml` (used as
//! `--tasks` instead of the driver guide's `--task-command`) and `plugin.hcl`/`plugin.json` (the
//! plugin configuration, instead of fixtures/driver/plugin.hcl) and `profile.toml` (the profile,
//! instead of fast).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::{Expect, fixture_dirs, root, run_and_check, unproven_must_clauses};

/// The task template the driver guide gives for drivers that run a command, driver-exec's shape.
const TASK_COMMAND: &str = "command = {command}\nargs = {args}";

fn driver_exec() -> PathBuf {
    support::workspace_bin("driver-exec")
}

/// The first of `names` that exists in `dir`.
fn file_in(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// The arguments of one fixture's run (run from `dir`).
fn args(dir: &Path, expect: &Expect) -> Vec<String> {
    // A fixture's own profile.toml (laid over nomad-1.10, as any profile file) replaces fast.
    let profile = file_in(dir, &["profile.toml"])
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "fast".into());
    let mut args = vec![
        "driver".to_string(),
        driver_exec().display().to_string(),
        "--profile".into(),
        profile,
    ];
    let switches: Vec<String> = expect
        .faults
        .iter()
        .map(|f| format!("--fault {f}"))
        .chain(expect.variants.iter().map(|v| format!("--variant {v}")))
        .chain(expect.plugin_args.iter().cloned())
        .collect();
    if !switches.is_empty() {
        args.push("--plugin-args".into());
        args.push(switches.join(" "));
    }
    match file_in(dir, &["tasks.hcl", "tasks.toml"]) {
        Some(p) => args.extend(["--tasks".into(), p.display().to_string()]),
        None => args.extend(["--task-command".into(), TASK_COMMAND.into()]),
    }
    let config = file_in(dir, &["plugin.hcl", "plugin.json"])
        .unwrap_or_else(|| root().join("fixtures/driver/plugin.hcl"));
    args.extend(["--plugin-config".into(), config.display().to_string()]);
    args
}

#[test]
fn reference_driver_exec_passes_every_clause() {
    let expect = Expect {
        description: "reference driver-exec".into(),
        ..Expect::default()
    };
    let dir = root().join("reference-plugins/driver-exec");
    run_and_check(&dir, &args(&dir, &expect), &expect, "driver-exec");
}

fn fixture(name: &str) {
    let dir = root().join("fixtures/driver").join(name);
    let expect = Expect::load(&dir);
    run_and_check(&dir, &args(&dir, &expect), &expect, name);
}

/// One test per fixture directory; `every_fixture_is_listed` keeps this list complete.
macro_rules! fixtures {
    ($($name:ident => $dir:literal),* $(,)?) => {
        const LISTED: &[&str] = &[$($dir),*];
        $(
            #[test]
            fn $name() {
                fixture($dir);
            }
        )*
    };
}

fixtures! {
    bad_config_leaves_process => "bad-config-leaves-process",
    bad_config_recoverable => "bad-config-recoverable",
    bad_config_schema => "bad-config-schema",
    bad_task_schema => "bad-task-schema",
    capabilities_error => "capabilities-error",
    claims_chroot => "claims-chroot",
    crashes_on_empty_argument => "crashes-on-empty-argument",
    crashes_on_empty_args => "crashes-on-empty-args",
    cty_only => "cty-only",
    destroy_keeps_task => "destroy-keeps-task",
    destroy_leaves_children => "destroy-leaves-children",
    destroy_leaves_task => "destroy-leaves-task",
    dies_on_sigint => "dies-on-sigint",
    env_dropped => "env-dropped",
    events_no_alloc_id => "events-no-alloc-id",
    exec_no_output => "exec-no-output",
    exec_stream_buffers => "exec-stream-buffers",
    exec_stream_ignores_resize => "exec-stream-ignores-resize",
    exec_stream_ignores_stdin_close => "exec-stream-ignores-stdin-close",
    exec_stream_no_exit_code => "exec-stream-no-exit-code",
    exec_stream_no_pty => "exec-stream-no-pty",
    exec_stream_no_stderr => "exec-stream-no-stderr",
    exec_stream_waits_children => "exec-stream-waits-children",
    exit_on_disconnect => "exit-on-disconnect",
    fingerprint_bad_health => "fingerprint-bad-health",
    fingerprint_closes => "fingerprint-closes",
    fingerprint_empty_attribute => "fingerprint-empty-attribute",
    fingerprint_late => "fingerprint-late",
    fingerprint_once => "fingerprint-once",
    handle_wrong_id => "handle-wrong-id",
    handshake_app_1 => "handshake-app-1",
    handshake_bad_address => "handshake-bad-address",
    handshake_core_2 => "handshake-core-2",
    handshake_garbled => "handshake-garbled",
    handshake_netrpc => "handshake-netrpc",
    healthy_but_start_fails => "healthy-but-start-fails",
    ignores_cookie => "ignores-cookie",
    init_fails => "init-fails",
    inspect_no_completed_at => "inspect-no-completed-at",
    logs_dropped => "logs-dropped",
    no_api_version => "no-api-version",
    panics_in_start => "panics-in-start",
    plain_stderr => "plain-stderr",
    recover_decodes_raw_config => "recover-decodes-raw-config",
    recover_fails => "recover-fails",
    recover_fails_invisible => "recover-fails-invisible",
    recover_loses_exit_code => "recover-loses-exit-code",
    recover_refuses_known_task => "recover-refuses-known-task",
    rejects_empty_signal => "rejects-empty-signal",
    second_init_fails => "second-init-fails",
    set_config_needs_nomad_config => "set-config-needs-nomad-config",
    set_config_rejects_nil => "set-config-rejects-nil",
    signal_ignored => "signal-ignored",
    signal_unknown_ok => "signal-unknown-ok",
    slow_handshake => "slow-handshake",
    stats_never_ends => "stats-never-ends",
    stats_once => "stats-once",
    stdout_banner => "stdout-banner",
    stop_exited_errors => "stop-exited-errors",
    stop_ignores_signal => "stop-ignores-signal",
    stop_kills_all => "stop-kills-all",
    stop_late_escalation => "stop-late-escalation",
    stop_no_escalation => "stop-no-escalation",
    task_dir_env_wrong => "task-dir-env-wrong",
    tasks_die_with_plugin => "tasks-die-with-plugin",
    unknown_task_hangs => "unknown-task-hangs",
    variant_chroot => "variant-chroot",
    variant_destroy_grace => "variant-destroy-grace",
    variant_dynamic_users => "variant-dynamic-users",
    variant_empty_health_description => "variant-empty-health-description",
    variant_handle_state_unset => "variant-handle-state-unset",
    variant_image => "variant-image",
    variant_invisible_slow_exit => "variant-invisible-slow-exit",
    variant_invisible_tasks => "variant-invisible-tasks",
    variant_late_sigint_handler => "variant-late-sigint-handler",
    variant_no_exec => "variant-no-exec",
    variant_no_init_shutdown => "variant-no-init-shutdown",
    variant_no_send_signals => "variant-no-send-signals",
    variant_no_stdio_broker => "variant-no-stdio-broker",
    variant_not_found => "variant-not-found",
    variant_own_unknown_task_error => "variant-own-unknown-task-error",
    variant_plain_start_errors => "variant-plain-start-errors",
    variant_slow_start => "variant-slow-start",
    variant_tasks_file => "variant-tasks-file",
    variant_undetected => "variant-undetected",
    variant_tcp => "variant-tcp",
    variant_stats_per_stream => "variant-stats-per-stream",
    variant_wait_poll => "variant-wait-poll",
    wait_once => "wait-once",
    wait_single_waiter => "wait-single-waiter",
    wait_wrong_code => "wait-wrong-code",
    wrong_plugin_type => "wrong-plugin-type",
}

#[test]
fn every_fixture_is_listed() {
    let listed: std::collections::BTreeSet<String> = LISTED.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        fixture_dirs("driver"),
        listed,
        "fixtures on disk vs. listed in this test"
    );
}

#[test]
fn every_must_clause_is_failed_by_some_fixture() {
    let missing = unproven_must_clauses("driver", LISTED);
    assert!(
        missing.is_empty(),
        "MUST clauses no fixture fails: {missing:?}"
    );
}

/// Every fault switch driver-exec documents has a fixture, so no switch goes untested.
#[test]
fn every_fault_switch_has_a_fixture() {
    let readme =
        std::fs::read_to_string(root().join("reference-plugins/driver-exec/README.md")).unwrap();
    let faults = readme
        .split("### Faults")
        .nth(1)
        .and_then(|s| s.split("### Variants").next())
        .unwrap();
    let missing: Vec<&str> = faults
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .filter(|f| !LISTED.contains(f))
        .collect();
    assert!(missing.is_empty(), "faults without a fixture: {missing:?}");
}

/// Processes whose environment holds `needle` (KEY=VALUE, or a KEY=VALUE prefix ending in `/`).
fn processes_with(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .map(|env| {
                    String::from_utf8_lossy(&env)
                        .split('\0')
                        .any(|kv| kv == needle || (needle.ends_with('/') && kv.starts_with(needle)))
                })
                .unwrap_or(false)
        })
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // Zombies are gone already; only their parent has not reaped them.
            let state = stat.rsplit(')').next()?.split_whitespace().next()?;
            (state != "Z").then_some(())?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            Some(String::from_utf8_lossy(&cmd).replace('\0', " "))
        })
        .collect()
}

/// Ctrl-C in the middle of a run with tasks running: the partial report is written, and no
/// plugin process, supervisor or task of the run is left (the plugin processes carry a marker
/// through the environment they inherit; tasks carry the run's NOMAD_CONFORM_TASK prefix).
#[test]
fn sigint_leaves_no_plugin_or_task_running() {
    let out = tempfile::tempdir().unwrap();
    let junit = out.path().join("partial.xml");
    let json = out.path().join("partial.json");
    let marker = format!(
        "NOMAD_CONFORM_TEST_MARKER=driver-sigint-{}",
        std::process::id()
    );
    let (k, v) = marker.split_once('=').unwrap();
    let dir = root().join("fixtures/driver");
    let mut args = args(&dir, &Expect::default());
    args.extend([
        "--jobs".into(),
        "4".into(),
        "--tags".into(),
        "@DRIVER-SURVIVE-PLUGIN-KILL or @DRIVER-TASKS-INDEPENDENT or @DRIVER-FINGERPRINT-STREAM-OPEN or @DRIVER-EXEC-STREAMING-TTY-STREAMING".into(),
    ]);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .env(k, v)
        .args(&args)
        .arg("--junit")
        .arg(&junit)
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for tasks to be running; the stream clauses take 3 s.
    std::thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(130), "{stdout}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(r#"<property name="interrupted" value="true"/>"#),
        "{xml}"
    );
    let record: nomad_conform_reports::model::RunRecord =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let plugins = processes_with(&marker);
    assert!(
        plugins.is_empty(),
        "plugin processes still running: {plugins:?}"
    );
    let tasks = processes_with(&format!("NOMAD_CONFORM_TASK={}/", record.run_id));
    assert!(tasks.is_empty(), "tasks still running: {tasks:?}");
}
