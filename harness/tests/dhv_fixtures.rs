//! Runs the DHV suite against every reference plugin and every fixture, and checks the verdicts
//! exactly: each fixture fails the clauses its expect.toml names and passes every other one;
//! each reference plugin passes every clause. This is how we know every check can fail, and
//! does not fail wrongly.

mod support;

use std::path::Path;

use support::{Expect, fixture_dirs, root, run_and_check, unproven_must_clauses};

fn check(plugin: &Path, dir: &Path, expect: &Expect) {
    let args = vec!["dhv".to_string(), plugin.display().to_string()];
    run_and_check(dir, &args, expect, &plugin.display().to_string());
}

fn fixture(name: &str) {
    let dir = root().join("fixtures/dhv").join(name);
    let expect = Expect::load(&dir);
    let plugin = match &expect.plugin_bin {
        Some(name) => support::workspace_bin(name),
        None => dir.join("plugin"),
    };
    check(&plugin, &dir, &expect);
}

#[test]
fn reference_mkdir_passes_every_clause() {
    let dir = root().join("reference-plugins/dhv");
    let expect = Expect {
        description: "reference mkdir".into(),
        ..Expect::default()
    };
    check(&dir.join("mkdir"), &dir, &expect);
}

#[test]
fn reference_ext4_image_passes_every_clause() {
    if !support::needs_root("the ext4-image reference plugin (loop mounts)") {
        return;
    }
    let dir = root().join("reference-plugins/dhv");
    let expect = Expect {
        description: "reference ext4-image".into(),
        ..Expect::default()
    };
    check(&dir.join("ext4-image"), &dir, &expect);
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
    control => "control",
    fingerprint_exits_nonzero => "fingerprint-exits-nonzero",
    fingerprint_trailing_text => "fingerprint-trailing-text",
    fingerprint_no_version => "fingerprint-no-version",
    fingerprint_null_version => "fingerprint-null-version",
    fingerprint_bad_version => "fingerprint-bad-version",
    fingerprint_slow => "fingerprint-slow",
    fingerprint_hangs => "fingerprint-hangs",
    create_exits_nonzero => "create-exits-nonzero",
    create_trailing_text => "create-trailing-text",
    create_no_path => "create-no-path",
    create_relative_path => "create-relative-path",
    create_bytes_float => "create-bytes-float",
    create_bytes_negative => "create-bytes-negative",
    create_path_missing => "create-path-missing",
    create_returns_root => "create-returns-root",
    create_shared_path => "create-shared-path",
    create_slow => "create-slow",
    create_not_idempotent => "create-not-idempotent",
    create_fails_if_exists => "create-fails-if-exists",
    global_lock => "global-lock",
    parameters_empty_object => "parameters-empty-object",
    no_cleanup_on_failure => "no-cleanup-on-failure",
    delete_exits_nonzero => "delete-exits-nonzero",
    delete_keeps_path => "delete-keeps-path",
    delete_not_idempotent => "delete-not-idempotent",
    delete_slow => "delete-slow",
    delete_wipes_siblings => "delete-wipes-siblings",
    delete_removes_created_path => "delete-removes-created-path",
    unknown_op_is_create => "unknown-op-is-create",
    unlocks_in_background => "unlocks-in-background",
    variant_compiled_binary => "variant-compiled-binary",
    variant_no_bytes => "variant-no-bytes",
    variant_outside_volumes_dir => "variant-outside-volumes-dir",
    variant_reuses_existing_dir => "variant-reuses-existing-dir",
    variant_writes_capacity => "variant-writes-capacity",
    needs_home => "needs-home",
    needs_path => "needs-path",
    unchecked_variables => "unchecked-variables",
    name_based_paths => "name-based-paths",
    holds_stdout => "holds-stdout",
    leaves_daemon => "leaves-daemon",
    leaves_setsid_daemon => "leaves-setsid-daemon",
    fingerprint_writes_cache => "fingerprint-writes-cache",
    no_error_json => "no-error-json",
    capacity_out_of_range => "capacity-out-of-range",
    echoes_parameters => "echoes-parameters",
    fingerprint_background_lock => "fingerprint-background-lock",
    fingerprint_writes_tmp => "fingerprint-writes-tmp",
    name_with_slash => "name-with-slash",
    mkdir_without_p => "mkdir-without-p",
    kill_group_on_exit => "kill-group-on-exit",
    variant_extra_field_on_repeat => "variant-extra-field-on-repeat",
    variant_holds_stdout_briefly => "variant-holds-stdout-briefly",
    variant_symlinked_plugin => "variant-symlinked-plugin",
    restore_keeps_vanished => "restore-keeps-vanished",
    update_ignores_capacity => "update-ignores-capacity",
    variant_non_ascii_error => "variant-non-ascii-error",
    variant_relies_on_signals => "variant-relies-on-signals",
    create_leaves_files => "create-leaves-files",
    variant_cleans_its_tmp => "variant-cleans-its-tmp",
    leaves_detached_daemon => "leaves-detached-daemon",
}

/// A plugin whose fingerprint starts a background job guarded by a node-wide lock (only one
/// runs at a time), the clauses that fingerprint at --jobs 1 and --jobs 8, three times each,
/// side by side: the same verdict for every clause every time, DHV-GENERAL-NO-STRAY-PROCESS
/// failed in each (whichever concurrent call's job holds the lock).
#[test]
fn no_stray_verdict_does_not_depend_on_jobs() {
    let dir = root().join("fixtures/dhv/fingerprint-background-lock");
    let tags = "@DHV-FINGERPRINT-EXIT-ZERO or @DHV-FINGERPRINT-SINGLE-JSON or \
                @DHV-FINGERPRINT-VERSION-PRESENT or @DHV-FINGERPRINT-VERSION-VALID or \
                @DHV-FINGERPRINT-DISCOVERY-DEADLINE or @DHV-FINGERPRINT-DOCUMENTED-DEADLINE or \
                @DHV-FINGERPRINT-NO-SIDE-EFFECTS or @DHV-GENERAL-MINIMAL-ENV or \
                @DHV-GENERAL-OUTPUT-CLOSED-ON-EXIT or @DHV-GENERAL-NO-STRAY-PROCESS";
    let runs: Vec<(&str, std::collections::BTreeMap<String, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = ["1", "8"]
            .iter()
            .flat_map(|jobs| std::iter::repeat_n(*jobs, 3))
            .map(|jobs| {
                let dir = &dir;
                s.spawn(move || {
                    let args = [
                        "dhv", "./plugin", "--tags", tags, "--jobs", jobs, "--seed", "7",
                    ];
                    (jobs, support::verdicts(Some(dir), &args))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (first_jobs, first) = &runs[0];
    assert_eq!(first.len(), 10, "{first:?}");
    assert_eq!(
        first
            .get("DHV-GENERAL-NO-STRAY-PROCESS")
            .map(String::as_str),
        Some("fail"),
        "{first:?}"
    );
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
}

/// Fingerprint still gets a private /tmp, and what it writes there is still seen, when /tmp is
/// a tmpfs (as on many distributions) and when the run's directory is on a mount of its own
/// under /tmp (a TMPDIR on a tmpfs): the stand-in once let go of the mount its own private
/// directory was on, and the clause passed with a note. Each case in a mount namespace of its
/// own, so nothing outside it sees the mounts.
#[test]
fn fingerprint_gets_a_private_tmp_whatever_tmp_is_mounted_on() {
    if !support::needs_root("mount namespaces with a tmpfs over /tmp") {
        return;
    }
    let dir = root().join("fixtures/dhv/fingerprint-writes-tmp");
    let out = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let setups = [
        (
            "/tmp a tmpfs",
            "mount -t tmpfs t /tmp && export TMPDIR=/tmp",
        ),
        (
            "TMPDIR a tmpfs under /tmp",
            "mount -t tmpfs t /tmp && mkdir /tmp/nomad-conform-own && \
             mount -t tmpfs t2 /tmp/nomad-conform-own && export TMPDIR=/tmp/nomad-conform-own",
        ),
    ];
    for (i, (what, setup)) in setups.iter().enumerate() {
        let json = out.path().join(format!("run{i}.json"));
        let script = format!(
            "{setup} && exec \"$0\" -q dhv ./plugin --tags @DHV-FINGERPRINT-NO-SIDE-EFFECTS --seed 7 --json \"$1\""
        );
        let run = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .arg(env!("CARGO_BIN_EXE_nomad-conform"))
            .arg(&json)
            .current_dir(&dir)
            .output()
            .unwrap();
        let text = std::fs::read_to_string(&json).unwrap_or_else(|e| {
            panic!(
                "{what}: no record ({e}): {}",
                String::from_utf8_lossy(&run.stderr)
            )
        });
        let record: serde_json::Value = serde_json::from_str(&text).unwrap();
        let case = &record["cases"][0];
        assert_eq!(case["verdict"], "fail", "{what}: {case}");
        let reason = case["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("fixture-fingerprint.cache"),
            "{what}: {reason}"
        );
    }
}

#[test]
fn every_fixture_is_listed() {
    let listed: std::collections::BTreeSet<String> = LISTED.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        fixture_dirs("dhv"),
        listed,
        "fixtures on disk vs. listed in this test"
    );
}

#[test]
fn every_must_clause_is_failed_by_some_fixture() {
    let missing = unproven_must_clauses("dhv", LISTED);
    assert!(
        missing.is_empty(),
        "MUST clauses no fixture fails: {missing:?}"
    );
}
