//! Runs the CSI suite against the reference plugin csi-hostpath, correct and with each fault
//! switch of fixtures/csi, and checks every verdict exactly. Needs root (real bind mounts).

mod support;

use std::path::PathBuf;

use nomad_conform_reports::model::Verdict;
use support::{Expect, fixture_dirs, needs_root, root, run_and_check, unproven_must_clauses};

/// The csi-hostpath binary built next to this test (`cargo test --workspace` builds it).
fn csi_hostpath() -> PathBuf {
    support::workspace_bin("csi-hostpath")
}

/// The launch command of the reference plugin, as the CSI guide (docs/guides/csi.md) documents it.
fn launch(expect: &Expect) -> String {
    let mut cmd = format!(
        "{} --endpoint {{endpoint}} --node-id nomad-conform-node --state-dir {{state_dir}}",
        csi_hostpath().display()
    );
    // The limit the CSI guide's command uses, unless the fixture sets its own.
    if !expect
        .plugin_args
        .iter()
        .any(|a| a == "--max-volumes-per-node")
    {
        cmd.push_str(" --max-volumes-per-node 16");
    }
    for a in &expect.plugin_args {
        cmd.push(' ');
        cmd.push_str(a);
    }
    for f in &expect.faults {
        cmd.push_str(" --fault ");
        cmd.push_str(f);
    }
    for v in &expect.variants {
        cmd.push_str(" --variant ");
        cmd.push_str(v);
    }
    cmd
}

fn check(dir: PathBuf, expect: &Expect, label: &str) {
    let args = vec![
        "csi".to_string(),
        "--launch".into(),
        launch(expect),
        "--mutable-parameters".into(),
        r#"{"tier":"fast"}"#.into(),
    ];
    let record = run_and_check(&dir, &args, expect, label);
    // A Blocked clause names the clause that judges what it needed: that clause must not have
    // passed in the same run, or the reader is sent to a clause with nothing to say.
    let verdicts: std::collections::BTreeMap<&str, Verdict> = record
        .cases
        .iter()
        .map(|c| (c.clause.as_str(), c.verdict))
        .collect();
    let wrong: Vec<String> = record
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Blocked)
        .filter_map(|c| {
            let root = c.blocked_by.as_deref()?;
            let v = verdicts.get(root)?;
            (!v.is_failure() && *v != Verdict::Blocked)
                .then(|| format!("{} is blocked by {root}, which is {}", c.clause, v.as_str()))
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{label}: blocked clauses naming a root that did not fail:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn reference_csi_hostpath_passes_every_clause() {
    if !needs_root("the CSI reference plugin (bind mounts)") {
        return;
    }
    // Launched as the CSI guide's command is, without --plugin-type: the monolith it is assumed to be
    // is judged by CSI-IDENTITY-MONOLITH-ASSUMED (variant-monolith-chosen runs the other).
    let expect = Expect {
        description: "reference csi-hostpath".into(),
        skip: vec!["CSI-IDENTITY-MONOLITH-CONTROLLER".into()],
        ..Expect::default()
    };
    check(
        root().join("reference-plugins/csi-hostpath"),
        &expect,
        "csi-hostpath",
    );
}

fn fixture(name: &str) {
    if !needs_root("the CSI fixtures (bind mounts)") {
        return;
    }
    let dir = root().join("fixtures/csi").join(name);
    let expect = Expect::load(&dir);
    check(dir, &expect, name);
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
    block_ignores_readonly => "block-ignores-readonly",
    block_keeps_device => "block-keeps-device",
    block_publish_not_device => "block-publish-not-device",
    block_stage_wipes => "block-stage-wipes",
    block_unsupported => "block-unsupported",
    controller_capabilities_error => "controller-capabilities-error",
    controller_unpublish_not_idempotent => "controller-unpublish-not-idempotent",
    create_accepts_missing_name => "create-accepts-missing-name",
    create_accepts_unknown_mutable => "create-accepts-unknown-mutable",
    create_empty_id => "create-empty-id",
    create_ignores_capacity => "create-ignores-capacity",
    create_ignores_capacity_conflict => "create-ignores-capacity-conflict",
    create_ignores_content_source => "create-ignores-content-source",
    create_not_idempotent => "create-not-idempotent",
    create_races => "create-races",
    create_rejects_mutable => "create-rejects-mutable",
    delete_in_use_ok => "delete-in-use-ok",
    delete_keeps_volume => "delete-keeps-volume",
    delete_unknown_not_found => "delete-unknown-not-found",
    empty_node_id => "empty-node-id",
    empty_plugin_name => "empty-plugin-name",
    error_details => "error-details",
    expand_ignores_size => "expand-ignores-size",
    expand_shrinks => "expand-shrinks",
    expand_unknown_ok => "expand-unknown-ok",
    forget_state => "forget-state",
    get_capacity_negative => "get-capacity-negative",
    get_snapshot_unknown_ok => "get-snapshot-unknown-ok",
    get_snapshot_wrong => "get-snapshot-wrong",
    group_capabilities_error => "group-capabilities-error",
    group_delete_keeps => "group-delete-keeps",
    group_delete_unknown_not_found => "group-delete-unknown-not-found",
    group_get_no_snapshots => "group-get-no-snapshots",
    group_get_unknown_ok => "group-get-unknown-ok",
    group_snapshot_accepts_missing_name => "group-snapshot-accepts-missing-name",
    group_snapshot_not_idempotent => "group-snapshot-not-idempotent",
    list_bad_token_ok => "list-bad-token-ok",
    list_ignores_max_entries => "list-ignores-max-entries",
    list_snapshots_empty => "list-snapshots-empty",
    list_snapshots_ignores_filter => "list-snapshots-ignores-filter",
    modify_accepts_unknown => "modify-accepts-unknown",
    modify_rejects_all => "modify-rejects-all",
    modify_unknown_ok => "modify-unknown-ok",
    node_capabilities_error => "node-capabilities-error",
    node_expand_unknown_ok => "node-expand-unknown-ok",
    node_publish_ignores_readonly => "node-publish-ignores-readonly",
    node_publish_no_mount => "node-publish-no-mount",
    node_publish_not_idempotent => "node-publish-not-idempotent",
    node_publish_without_stage_ok => "node-publish-without-stage-ok",
    node_unpublish_keeps_mount => "node-unpublish-keeps-mount",
    node_unpublish_not_idempotent => "node-unpublish-not-idempotent",
    plugin_capabilities_error => "plugin-capabilities-error",
    probe_error => "probe-error",
    probe_fails_after_start => "probe-fails-after-start",
    probe_not_ready => "probe-not-ready",
    publish_context_changes => "publish-context-changes",
    publish_incompatible_ok => "publish-incompatible-ok",
    publish_limit_too_early => "publish-limit-too-early",
    publish_limit_wrong_code => "publish-limit-wrong-code",
    publish_unknown_node_ok => "publish-unknown-node-ok",
    publish_unknown_volume_ok => "publish-unknown-volume-ok",
    readonly_beside_writer_writable => "readonly-beside-writer-writable",
    ready_after_last_probe => "ready-after-last-probe",
    skip_required_field_checks => "skip-required-field-checks",
    slow_plugin_info => "slow-plugin-info",
    slow_probe => "slow-probe",
    snapshot_delete_unknown_not_found => "snapshot-delete-unknown-not-found",
    snapshot_no_creation_time => "snapshot-no-creation-time",
    snapshot_not_idempotent => "snapshot-not-idempotent",
    stage_missing_path_ok => "stage-missing-path-ok",
    stage_not_idempotent => "stage-not-idempotent",
    stats_ignores_path => "stats-ignores-path",
    stats_negative => "stats-negative",
    stats_unknown_ok => "stats-unknown-ok",
    topology_elsewhere => "topology-elsewhere",
    unpublish_needs_secrets => "unpublish-needs-secrets",
    unstage_not_idempotent => "unstage-not-idempotent",
    validate_accepts_missing_capabilities => "validate-accepts-missing-capabilities",
    validate_confirms_other => "validate-confirms-other",
    validate_unknown_ok => "validate-unknown-ok",
    variant_attach_limit_3 => "variant-attach-limit-3",
    variant_capacity_unknown => "variant-capacity-unknown",
    variant_ignores_max_volumes => "variant-ignores-max-volumes",
    variant_loop_at_create => "variant-loop-at-create",
    variant_max_size_1gib => "variant-max-size-1gib",
    variant_max_size_no_room => "variant-max-size-no-room",
    variant_min_size_1gib => "variant-min-size-1gib",
    variant_needs_secrets => "variant-needs-secrets",
    variant_node_only => "variant-node-only",
    variant_opaque_page_tokens => "variant-opaque-page-tokens",
    variant_publish_from_backing_store => "variant-publish-from-backing-store",
    variant_register_only => "variant-register-only",
    variant_release_not_found => "variant-release-not-found",
    variant_second_target_allowed => "variant-second-target-allowed",
    variant_slow_start => "variant-slow-start",
    variant_stage_without_mount => "variant-stage-without-mount",
    variant_topology => "variant-topology",
    variant_validate_without_confirmed => "variant-validate-without-confirmed",
    variant_no_publish_readonly => "variant-no-publish-readonly",
    variant_release_unknown_ok => "variant-release-unknown-ok",
    variant_bad_range_out_of_range => "variant-bad-range-out-of-range",
    variant_monolith_chosen => "variant-monolith-chosen",
    node_unknown_internal => "node-unknown-internal",
    validate_confirms_first_only => "validate-confirms-first-only",
    unpublish_keeps_attachment => "unpublish-keeps-attachment",
    list_drops_last_volume => "list-drops-last-volume",
    create_accepts_bad_range => "create-accepts-bad-range",
    monolith_without_controller => "monolith-without-controller",
    assumed_monolith_without_controller => "assumed-monolith-without-controller",
}

#[test]
fn every_fixture_is_listed() {
    let listed: std::collections::BTreeSet<String> = LISTED.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        fixture_dirs("csi"),
        listed,
        "fixtures on disk vs. listed in this test"
    );
}

#[test]
fn every_must_clause_is_failed_by_some_fixture() {
    let missing = unproven_must_clauses("csi", LISTED);
    assert!(
        missing.is_empty(),
        "MUST clauses no fixture fails: {missing:?}"
    );
}

/// Ctrl-C while a launched plugin is answering: the partial report is written, what the
/// scenarios mounted is undone, and the plugin is stopped. Only this run's mounts (under its own
/// --mount-dir) and processes (marked through the environment the plugin inherits) are looked
/// at, so fixtures running at the same time do not disturb it.
#[test]
fn sigint_stops_the_launched_plugin_and_cleans_up() {
    if !needs_root("the CSI interrupt test (bind mounts)") {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let mount_dir = tempfile::tempdir().unwrap();
    let marker = format!("NOMAD_CONFORM_TEST_MARKER=sigint-{}", std::process::id());
    let junit = out.path().join("partial.xml");
    let expect = Expect {
        faults: vec!["slow-probe".into()],
        ..Expect::default()
    };
    let (k, v) = marker.split_once('=').unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .env(k, v)
        .args([
            "csi",
            "--launch",
            &launch(&expect),
            "--jobs",
            "4",
            "--junit",
        ])
        .arg(&junit)
        .arg("--mount-dir")
        .arg(mount_dir.path())
        .args([
            "--tags",
            "@CSI-IDENTITY-PROBE-DEADLINE or @CSI-NOMAD-CLAIM or @CSI-NODE-PUBLISH-MOUNTS",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The claim scenarios finish at once; the Probe takes 6 s.
    std::thread::sleep(std::time::Duration::from_millis(1500));
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
    assert!(xml.contains("CSI-NOMAD-CLAIM"), "{xml}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let ours = mount_dir.path().display().to_string();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(&ours)).collect();
    assert!(left.is_empty(), "mounts left: {left:?}");
    let plugins: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .map(|env| {
                    String::from_utf8_lossy(&env)
                        .split('\0')
                        .any(|kv| kv == marker)
                })
                .unwrap_or(false)
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("csi-hostpath"))
        .collect();
    assert!(plugins.is_empty(), "plugin still running: {plugins:?}");
}

/// A node that takes 3 volumes at most, the suite at --jobs 1 and --jobs 8, three times each:
/// the same verdict for every clause every time (the attachment budget keeps clauses from
/// driving the plugin past its own limit, whatever runs at the same time).
#[test]
fn verdicts_do_not_depend_on_jobs() {
    if !needs_root("the CSI determinism test (bind mounts)") {
        return;
    }
    let expect = Expect {
        plugin_args: vec!["--max-volumes-per-node".into(), "3".into()],
        ..Expect::default()
    };
    // The six runs go at the same time (each launches its own plugin with its own state): the
    // test finishes sooner, and the verdicts must hold under that load too.
    let runs: Vec<(&str, std::collections::BTreeMap<String, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = ["1", "8"]
            .iter()
            .flat_map(|jobs| std::iter::repeat_n(*jobs, 3))
            .map(|jobs| {
                let args: Vec<String> = vec![
                    "csi".into(),
                    "--launch".into(),
                    launch(&expect),
                    "--mutable-parameters".into(),
                    r#"{"tier":"fast"}"#.into(),
                    "--jobs".into(),
                    jobs.into(),
                    "--seed".into(),
                    "7".into(),
                ];
                s.spawn(move || (jobs, support::verdicts(None, &args)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (first_jobs, first) = &runs[0];
    assert!(first.len() > 100, "{first:?}");
    for (jobs, run) in &runs[1..] {
        let differ: Vec<String> = first
            .iter()
            .filter(|(id, v)| run.get(*id) != Some(v))
            .map(|(id, v)| {
                format!(
                    "{id}: {v} at --jobs {first_jobs}, {:?} at --jobs {jobs}",
                    run.get(id)
                )
            })
            .collect();
        assert!(differ.is_empty(), "verdicts differ:\n{}", differ.join("\n"));
    }
    // And they are the reference's: every clause passes or is skipped.
    let bad: Vec<_> = first
        .iter()
        .filter(|(_, v)| !matches!(v.as_str(), "pass" | "skip"))
        .collect();
    assert!(bad.is_empty(), "not passing with a limit of 3: {bad:?}");
}

/// Issue 21, item 1: requests as Nomad builds them. With a volume specification's mount options
/// (`--mount-fs-type`, `--mount-flags`) and secrets, every mount capability Nomad sends carries
/// them (CreateVolume, ValidateVolumeCapabilities, ControllerPublishVolume, NodeStageVolume,
/// NodePublishVolume), CreateVolume carries an empty accessibility_requirements,
/// ControllerUnpublishVolume carries no secrets, and (item 4) ControllerExpandVolume carries no
/// capability for a volume never claimed and the claim's capability for a claimed one.
#[test]
fn requests_carry_what_nomad_sends() {
    if !needs_root("the CSI reference plugin (bind mounts)") {
        return;
    }
    let dir = root().join("fixtures/csi/variant-needs-secrets");
    let expect = Expect::load(&dir);
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("run.json");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nomad-conform"))
        .current_dir(&dir)
        .args(["csi", "--launch", &launch(&expect)])
        .args(&expect.args)
        .args(["--mount-fs-type", "ext4", "--mount-flags", "noatime"])
        .args(["--mount-flags", "nodev", "--tags"])
        .arg("@CSI-NOMAD-RELEASE or @CSI-CONTROLLER-VALIDATE or @CSI-EXPAND-CONTROLLER or @CSI-EXPAND-NODE")
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for (clause, event) in record["cases"].as_array().unwrap().iter().flat_map(|c| {
        let clause = c["clause"].as_str().unwrap_or_default();
        c["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(move |e| (clause, e))
    }) {
        let req = &event["request"];
        let method = req["method"].as_str().unwrap_or_default();
        let name = method.rsplit('/').next().unwrap_or_default().to_string();
        let body = &req["request"];
        let caps: Vec<&serde_json::Value> = match name.as_str() {
            "CreateVolume" | "ValidateVolumeCapabilities" => body["volume_capabilities"]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default(),
            "ControllerPublishVolume" | "NodeStageVolume" | "NodePublishVolume" => {
                vec![&body["volume_capability"]]
            }
            // The volume of CSI-EXPAND-CONTROLLER was never claimed: Nomad knows no capability.
            "ControllerExpandVolume" if clause == "CSI-EXPAND-CONTROLLER" => {
                assert!(
                    body["volume_capability"].is_null(),
                    "ControllerExpandVolume of an unclaimed volume with a capability: {body}"
                );
                Vec::new()
            }
            // CSI-EXPAND-NODE's volume is claimed: the claim's capability goes with it.
            "ControllerExpandVolume" if clause == "CSI-EXPAND-NODE" => {
                vec![&body["volume_capability"]]
            }
            _ => Vec::new(),
        };
        for cap in &caps {
            let mount = &cap["mount"];
            assert_eq!(mount["fs_type"], "ext4", "{name}: {body}");
            assert_eq!(
                mount["mount_flags"],
                serde_json::json!(["noatime", "nodev"]),
                "{name}: {body}"
            );
        }
        if name == "CreateVolume" {
            assert!(
                body["accessibility_requirements"].is_object(),
                "CreateVolume without accessibility_requirements: {body}"
            );
        }
        // The harness's own cleanup (an undo, "(cleanup)") still sends the secrets, so that a
        // plugin that needs them is not left holding an attachment; every release a clause
        // makes is Nomad's, without them.
        let cleanup = event["operation"]
            .as_str()
            .is_some_and(|o| o.ends_with("(cleanup)"));
        if name == "ControllerUnpublishVolume" && !cleanup {
            let secrets = &body["secrets"];
            assert!(
                secrets.is_null() || secrets.as_object().is_some_and(|m| m.is_empty()),
                "ControllerUnpublishVolume with secrets: {body}"
            );
        }
        *seen.entry(name).or_default() += 1;
    }
    for m in [
        "CreateVolume",
        "ValidateVolumeCapabilities",
        "ControllerPublishVolume",
        "NodeStageVolume",
        "NodePublishVolume",
        "ControllerUnpublishVolume",
        "ControllerExpandVolume",
        "NodeExpandVolume",
    ] {
        assert!(seen.contains_key(m), "no {m} recorded: {seen:?}");
    }
}
