//! Property-based inputs: volumes with generated names, namespaces, node pools, parameters and
//! capacities, within what Nomad accepts. A failing case is shrunk by proptest and reported as
//! the exact environment that reproduces it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cucumber::{then, when};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};

use super::{DhvWorld, StepResult, created_from, created_problem, list_paths, list_tree};
use crate::ledger::Ledger;
use crate::plugins::dhv::paths::own_path_problem;
use crate::plugins::dhv::{Call, CreatedVolume, EnvPolicy, Plugin, VolumeRequest};
use crate::recorder::CaseHandle;

const MIB: i64 = 1 << 20;

/// Everything one generated case needs, movable to a blocking thread.
#[derive(Clone)]
struct Bench {
    plugin: Arc<Plugin>,
    cwd: PathBuf,
    create_deadline: Duration,
    delete_deadline: Duration,
    ledger: Ledger,
    case: CaseHandle,
    scratch_root: PathBuf,
    /// Each case gets a volumes directory of its own under this one, so that what one case
    /// leaves behind cannot hide what the next one does (shrinking reruns similar inputs).
    cases_root: PathBuf,
    next_case: Arc<AtomicUsize>,
}

impl Bench {
    /// A new volumes directory, made (as by an earlier create on the node).
    fn fresh_volumes_dir(&self) -> std::io::Result<PathBuf> {
        let n = self.next_case.fetch_add(1, Ordering::SeqCst);
        let dir = self.cases_root.join(n.to_string());
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }
}

/// Shrink attempts after the first failure, at most (each one calls the plugin).
const SHRINK_ITERATIONS: u32 = 1024;

/// Volumes as Nomad can describe them: any non-empty name, namespaces and node pools by Nomad's
/// validation rules, any map of string parameters, any capacity range up to `ceiling`.
fn volumes(base: VolumeRequest, ceiling: i64) -> impl Strategy<Value = VolumeRequest> {
    let name = prop_oneof!["[a-zA-Z0-9_.-]{1,64}", "[ -~]{1,40}", "\\PC{1,16}",];
    let namespace = "[a-zA-Z0-9-]{1,128}";
    let node_pool = "[a-zA-Z0-9_-]{1,128}";
    let id =
        any::<[u8; 16]>().prop_map(|b| uuid::Builder::from_random_bytes(b).into_uuid().to_string());
    let base_params = base.parameters.clone();
    let params = prop_oneof![
        Just(base_params.clone()),
        prop::collection::btree_map("[a-zA-Z0-9_.-]{1,16}", "[ -~]{0,24}|\\PC{0,8}", 1..4)
            .prop_map(move |extra: BTreeMap<String, String>| {
                extra
                    .iter()
                    .fold(base_params.clone(), |p, (k, v)| p.with(k, v))
            }),
    ];
    let capacity = prop_oneof![
        Just((0i64, 0i64)),
        (0..=ceiling).prop_flat_map(move |min| (Just(min), min..=ceiling)),
    ];
    (name, namespace, node_pool, id, params, capacity).prop_map(
        move |(name, namespace, node_pool, id, parameters, (capacity_min, capacity_max))| {
            VolumeRequest {
                name,
                namespace,
                node_pool,
                id,
                parameters,
                capacity_min,
                capacity_max,
                ..base.clone()
            }
        },
    )
}

/// The ordinary volume with one thing changed to what breaks shell plugins most often, one
/// volume each, in this order (the first that fails is reported): names with a slash, a
/// backslash, a double quote, a space, a leading dash, a newline, a glob, a command
/// substitution, non-ASCII, a very long one; a namespace and a node pool with a leading dash
/// (both valid in Nomad); parameter values with a double quote, a backslash, a newline.
fn troublemakers(base: &VolumeRequest) -> Vec<VolumeRequest> {
    let mut out = Vec::new();
    let long = "a".repeat(300);
    for name in [
        "/",
        "\\",
        "\"",
        " ",
        "-a",
        "\n",
        "*",
        "$(id)",
        "é",
        long.as_str(),
    ] {
        out.push(VolumeRequest {
            name: name.to_string(),
            ..base.clone()
        });
    }
    out.push(VolumeRequest {
        namespace: "-".into(),
        ..base.clone()
    });
    out.push(VolumeRequest {
        node_pool: "-".into(),
        ..base.clone()
    });
    for value in ["\"", "\\", "\n"] {
        out.push(VolumeRequest {
            parameters: base.parameters.with("nomad-conform-key", value),
            ..base.clone()
        });
    }
    out
}

/// Run one generated case in a volumes directory of its own: create, then delete what was
/// created. Returns the calls made and the problem, if any.
async fn exercise(bench: &Bench, req: &VolumeRequest) -> (Vec<Call>, Result<(), String>) {
    let vols = match bench.fresh_volumes_dir() {
        Ok(d) => d,
        Err(e) => {
            return (
                Vec::new(),
                Err(format!("harness: no volumes directory: {e}")),
            );
        }
    };
    let req = &VolumeRequest {
        volumes_dir: vols.clone(),
        ..req.clone()
    };
    let create = bench
        .plugin
        .invoke(
            "create",
            "create",
            req.create_env(),
            EnvPolicy::Configured,
            &bench.cwd,
            bench.create_deadline,
        )
        .await;
    match create.exit_code() {
        Some(0) => {}
        Some(_) => {
            let left: Vec<PathBuf> = list_tree(&vols).into_iter().collect();
            let result = if left.is_empty() || create.out.strays_killed {
                Ok(())
            } else {
                Err(format!("create failed but left {}", list_paths(&left)))
            };
            return (vec![create], result);
        }
        None => {
            let s = create.summary();
            return (vec![create], Err(s));
        }
    }
    let Some(created) = created_from(&create) else {
        let why = created_problem(&create).unwrap_or_default();
        return (vec![create], Err(why));
    };
    let deleted = Arc::new(AtomicBool::new(false));
    bench.ledger.track(CreatedVolume {
        plugin: bench.plugin.clone(),
        request: req.clone(),
        path: created.path.clone(),
        cwd: bench.cwd.clone(),
        deadline: bench.delete_deadline,
        scratch_root: bench.scratch_root.clone(),
        deleted: deleted.clone(),
        case: bench.case.clone(),
    });
    if let Some(p) = own_path_problem(&created.path, &vols, &[]) {
        return (vec![create], Err(p));
    }
    if !Path::new(&created.path).exists() {
        let p = format!("create reported {}, which does not exist", created.path);
        return (vec![create], Err(p));
    }
    let delete = bench
        .plugin
        .invoke(
            "delete",
            "delete",
            req.delete_env(&created.path),
            EnvPolicy::Configured,
            &bench.cwd,
            bench.delete_deadline,
        )
        .await;
    let left: Vec<PathBuf> = list_tree(&vols).into_iter().collect();
    // A process the plugin left behind that had to be killed never finished what it was doing:
    // what it would have removed is not judged here (DHV-GENERAL-NO-STRAY-PROCESS reports it).
    let cut_short = create.out.strays_killed || delete.out.strays_killed;
    let result = if !delete.succeeded() {
        Err(format!("delete failed: {}", delete.summary()))
    } else if Path::new(&created.path).symlink_metadata().is_ok() {
        Err(format!("{} still exists after delete", created.path))
    } else if !left.is_empty() && !cut_short {
        deleted.store(true, Ordering::SeqCst);
        Err(format!(
            "create then delete left {} behind in DHV_VOLUMES_DIR",
            list_paths(&left)
        ))
    } else {
        deleted.store(true, Ordering::SeqCst);
        Ok(())
    };
    (vec![create, delete], result)
}

/// The clause that judges what went wrong with the ordinary volume's create and delete, if
/// another clause does: a create that gives no usable volume (even one that fails cleanly:
/// an ordinary create must succeed), a delete that fails or leaves the path.
fn base_root(
    base: &VolumeRequest,
    calls: &[Call],
    failure: Option<&String>,
) -> Option<(&'static str, String)> {
    let create = calls.first()?;
    let req = VolumeRequest {
        volumes_dir: create
            .env_var("DHV_VOLUMES_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| base.volumes_dir.clone()),
        ..base.clone()
    };
    let created = created_from(create);
    // `exercise` deletes only a volume it found usable: without a delete, create is the cause.
    let Some(delete) = calls.get(1) else {
        return super::usable_volume(create, created.as_ref(), &req, &[]).err();
    };
    if !delete.succeeded() {
        return Some((super::exit_clause(delete), delete.summary()));
    }
    let path = created.map(|c| c.path).unwrap_or_default();
    if Path::new(&path).symlink_metadata().is_ok() {
        let seen = failure.cloned().unwrap_or_default();
        return Some(("DHV-DELETE-REMOVES-PATH", seen));
    }
    None
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Describe a generated volume for a message.
fn describe(req: &VolumeRequest) -> String {
    format!(
        "name={:?} namespace={:?} node_pool={:?} id={} capacity={}..{} parameters={}",
        req.name,
        req.namespace,
        req.node_pool,
        req.id,
        req.capacity_min,
        req.capacity_max,
        req.parameters.to_go_json()
    )
}

/// What the property search found: proptest's outcome, the input a plugin was killed at its
/// deadline for (not shrunk), and the first input that failed.
type Found = (
    Result<(), TestError<VolumeRequest>>,
    Option<(VolumeRequest, String)>,
    Option<(VolumeRequest, String)>,
);

/// Generated volumes tried `cases` times from `seed`, the first failure shrunk within
/// `shrink_budget`, on a blocking thread (proptest is synchronous; each case's calls run on
/// this runtime).
async fn search(
    bench: &Bench,
    base: VolumeRequest,
    ceiling: i64,
    cases: u32,
    shrink_budget: Duration,
    seed_value: u64,
) -> Result<Found, tokio::task::JoinError> {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&seed_value.to_le_bytes());
    let handle = tokio::runtime::Handle::current();
    let runner_bench = bench.clone();
    tokio::task::spawn_blocking(move || {
        // proptest prints a line to stderr whenever its own shrink limits stop it, whatever
        // its verbosity: its limits are set out of reach, and the harness keeps its own budget
        // (below), after which every further shrink attempt passes without calling the plugin
        // and proptest ends quietly on the smallest input that failed.
        let config = Config {
            cases,
            max_shrink_iters: u32::MAX - 1,
            max_shrink_time: 0,
            failure_persistence: None,
            ..Config::default()
        };
        let shrink: Mutex<(Option<std::time::Instant>, u32)> = Mutex::new((None, 0));
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
        // A call killed at its deadline says nothing shrinking can use, and every attempt would
        // wait out the deadline again: stop at the first one and report that input.
        let timed_out: Mutex<Option<(VolumeRequest, String)>> = Mutex::new(None);
        // The first input that failed, kept in case shrinking ends on one that does not fail
        // again when run once more.
        let first: Mutex<Option<(VolumeRequest, String)>> = Mutex::new(None);
        let result = runner.run(&volumes(base, ceiling), |req| {
            if let Some((_, why)) = &*lock(&timed_out) {
                return Err(TestCaseError::fail(why.clone()));
            }
            {
                let mut budget = lock(&shrink);
                if let Some(started) = budget.0 {
                    budget.1 += 1;
                    if started.elapsed() > shrink_budget || budget.1 > SHRINK_ITERATIONS {
                        return Ok(());
                    }
                }
            }
            let (calls, result) = handle.block_on(exercise(&runner_bench, &req));
            if let Err(why) = &result {
                lock(&shrink).0.get_or_insert_with(std::time::Instant::now);
                lock(&first).get_or_insert_with(|| (req.clone(), why.clone()));
                if calls.iter().any(|c| c.killed_at_deadline()) {
                    *lock(&timed_out) = Some((req.clone(), why.clone()));
                }
            }
            result.map_err(TestCaseError::fail)
        });
        (
            result,
            timed_out.into_inner().unwrap_or_else(|p| p.into_inner()),
            first.into_inner().unwrap_or_else(|p| p.into_inner()),
        )
    })
    .await
}

#[when(
    "Nomad creates and deletes volumes with generated names, namespaces, node pools, parameters and capacities"
)]
async fn generated(w: &mut DhvWorld) -> StepResult {
    let base = w.new_request();
    let ceiling = w
        .config()
        .capacity
        .map(|c| c.1)
        .filter(|m| *m > 0)
        .unwrap_or(64 * MIB);
    let cases = w.config().property_cases;
    let shrink_budget = w.ctx().run.profile.harness.shrink_budget;
    let ctx = w.ctx();
    let bench = Bench {
        plugin: w.plugin(),
        cwd: w.cwd(),
        create_deadline: w.deadlines().create_deadline,
        delete_deadline: w.deadlines().delete_deadline,
        ledger: ctx.ledger.clone(),
        case: ctx.case.clone(),
        scratch_root: ctx.run.scratch_base.clone(),
        cases_root: ctx.scratch().join("generated"),
        next_case: Arc::new(AtomicUsize::new(0)),
    };
    // First the ordinary volume every other clause creates: if it fails, that is not about
    // generated inputs, and the clause that judges such a call says what is wrong.
    let (calls, result) = exercise(&bench, &base).await;
    if let Some((root, seen)) = base_root(&base, &calls, result.as_ref().err()) {
        let ctx = w.ctx();
        for c in &calls {
            ctx.record(c.event(ctx.offset_ms(c.started)));
        }
        let refs: Vec<&Call> = calls.iter().collect();
        return Err(w.precondition(
            root,
            &format!(
                "an ordinary volume ({}) is created and deleted",
                describe(&base)
            ),
            &seen,
            &refs,
        ));
    }
    if let Err(why) = result {
        // Only this clause checks what create and delete leave in DHV_VOLUMES_DIR: the
        // ordinary volume is the smallest failing input.
        let ctx = w.ctx();
        for c in &calls {
            ctx.record(c.event(ctx.offset_ms(c.started)));
        }
        w.generated = Some(Err(format!(
            "the ordinary volume fails already: {}\n{why}",
            describe(&base)
        )));
        w.last = calls;
        return Ok(());
    }
    // Then the inputs known to break shell plugins, each alone in an ordinary volume: when
    // one fails, it is the smallest failing input there is, whatever the seed, and no
    // shrinking is needed to reach it.
    for cand in troublemakers(&base) {
        let (calls, result) = exercise(&bench, &cand).await;
        if let Err(why) = result {
            let ctx = w.ctx();
            for c in &calls {
                ctx.record(c.event(ctx.offset_ms(c.started)));
            }
            w.generated = Some(Err(format!(
                "smallest failing volume (an input known to break shell plugins, tried first): {}\n{why}",
                describe(&cand)
            )));
            w.last = calls;
            return Ok(());
        }
    }
    let seed = w.ctx().seed;
    let (outcome, timed_out, first) = search(&bench, base, ceiling, cases, shrink_budget, seed)
        .await
        .map_err(|e| {
            w.ctx()
                .harness_error(format!("the property runner failed: {e}"))
        })?;

    let (failing, what, why) = match (outcome, timed_out) {
        (Ok(()), _) => {
            w.generated = Some(Ok(cases));
            w.last.clear();
            return Ok(());
        }
        (Err(TestError::Fail(..)), Some((first, why))) => (
            first,
            "first failing volume (not shrunk: the plugin was killed at its deadline)",
            why,
        ),
        (Err(TestError::Fail(reason, minimal)), None) => {
            (minimal, "smallest failing volume", reason.to_string())
        }
        (Err(TestError::Abort(why)), _) => {
            return Err(w
                .ctx()
                .harness_error(format!("the property runner gave up: {why}")));
        }
    };
    // Run the failing case once more, recorded, for its reproduction commands. If the shrunk
    // case does not fail again, the first failing input is what was found.
    let (mut calls, again) = exercise(&bench, &failing).await;
    let (failing, what, why) = match (again, first) {
        (Ok(()), Some((first, first_why))) if what == "smallest failing volume" => {
            let (first_calls, _) = exercise(&bench, &first).await;
            calls = first_calls;
            (
                first,
                "first failing volume (the shrunk one did not fail again when rerun)",
                first_why,
            )
        }
        _ => (failing, what, why),
    };
    let ctx = w.ctx();
    for c in &calls {
        ctx.record(c.event(ctx.offset_ms(c.started)));
    }
    w.generated = Some(Err(format!("{what}: {}\n{why}", describe(&failing))));
    w.last = calls;
    Ok(())
}

#[then(
    "every create succeeded and its delete removed the path, or the create failed and left nothing behind"
)]
async fn generated_ok(w: &mut DhvWorld) -> StepResult {
    match &w.generated {
        Some(Ok(_)) => Ok(()),
        Some(Err(problem)) => {
            let calls: Vec<&Call> = w.last.iter().collect();
            Err(w.fail(
                "for any volume Nomad can describe, create then delete leaves nothing, or create refuses cleanly",
                problem,
                &calls,
            ))
        }
        None => Err(w.ctx().harness_error("no generated inputs were run")),
    }
}
