//! The one run path every kind takes: profile and specs, the run's ID, seed and scratch
//! directory, the kind's preparation (options checked, subject probed, skips), the header and
//! progress, the clauses, the kind's own teardown, then what every run does at its end (every
//! process group the run started killed, whatever still runs in its directory killed and named,
//! the scratch directory removed) and the record, with every secret redacted.

use std::path::PathBuf;
use std::sync::Arc;

use chrono::Utc;
use nomad_conform_reports::model::{RunRecord, Subject};

use super::{RunMeta, Selection, SuiteOptions, execute, finish_record, load_suite};
use crate::clauses::ClauseSet;
use crate::error::HarnessError;
use crate::profile::Profile;
use crate::recorder::RunStore;
use crate::world::{RunCtx, SuiteWorld};

/// What a run has before its kind prepares it.
#[derive(Debug)]
pub struct RunStart {
    pub run_id: String,
    pub seed: u64,
    /// The run's own directory (made, resolved); removed at the end of the run.
    pub scratch: PathBuf,
    pub profile: Profile,
}

/// What a kind made ready for its run.
#[derive(Debug)]
pub struct Prepared<C> {
    /// What the kind's steps read.
    pub config: C,
    /// The plugin (or client, or server) under test, for the record.
    pub subject: Subject,
    /// The run header's words about the subject, e.g. `demo 1.0.0 at /run/csi.sock`.
    pub about: String,
    /// The rerun line's prefix, for reproduce commands: a value holding a secret is a variable.
    pub rerun_prefix: crate::command_line::CommandLine,
    /// How many clauses may run at once, when the kind must limit `--jobs` (one shared server).
    pub jobs: Option<usize>,
    /// Values to keep out of every report and console line (tokens, secrets).
    pub secrets: Vec<String>,
}

/// A plugin kind's part of a run.
#[allow(async_fn_in_trait)] // Used with concrete types only, on the run's own runtime.
pub trait Suite {
    /// The kind's name: the subcommand, and the folder of its specs.
    const KIND: &'static str;
    type World: SuiteWorld;

    /// The directory the run's scratch directory goes in (the system's temp directory unless
    /// the user named one). Checked before anything is made.
    fn scratch_parent(&self) -> Result<PathBuf, HarnessError> {
        Ok(std::env::temp_dir())
    }

    /// Check what only the kind knows of its options, reach and probe the subject, and move
    /// the clauses this run cannot judge from `selection` to its skips, with the reason. An
    /// error ends the run before any clause; whatever the kind started is cleaned up.
    async fn prepare(
        &self,
        start: &RunStart,
        clauses: &ClauseSet,
        selection: &mut Selection,
    ) -> Result<Prepared<<Self::World as SuiteWorld>::Config>, HarnessError>;

    /// After the clauses, before what every run does at its end: stop what only this kind
    /// started (a launched plugin, tasks a driver still runs).
    async fn finish(&self, _run: &RunCtx<<Self::World as SuiteWorld>::Config>) {}
}

/// Run `suite` from start to record. Writing reports is the caller's business.
pub async fn run_suite<S: Suite>(
    common: &SuiteOptions,
    suite: &S,
) -> Result<RunRecord, HarnessError> {
    let started_at = Utc::now();
    let profile = Profile::load(common.profile.as_deref())?;
    let (features, clauses, mut selection) = load_suite(S::KIND, common)?;
    let parent = suite.scratch_parent()?;
    // What a clause leaves mounted is found, and what it made is removed without crossing a
    // mount, by reading the mount table: a run that cannot read it cannot keep that promise.
    if let Err(e) = crate::mounts::MountTable::read() {
        return Err(HarnessError::Internal(format!(
            "{e}: the harness cannot tell what a plugin leaves mounted, so it runs nothing"
        )));
    }
    let run_id = super::new_run_id();
    let seed = super::seed_or_random(common.seed);
    let scratch = super::make_scratch_base(&parent, &run_id)?;
    let start = RunStart {
        run_id,
        seed,
        scratch,
        profile,
    };
    // Whatever any kind's plugin starts and abandons comes back to the harness, which can then
    // find and kill it at the end of the run (the lock suite's clients included).
    crate::escapees::become_subreaper();
    let interrupts = super::Interrupts::get();
    let prepared = tokio::select! {
        p = suite.prepare(&start, &clauses, &mut selection) => p,
        _ = interrupts.at_least(1) => {
            eprintln!(
                "nomad-conform: interrupted while preparing the run: stopping what it started"
            );
            end_of_run(&start.scratch).await;
            return Ok(interrupted_before_any_clause::<S>(
                common, start, clauses, &selection, started_at,
            ));
        }
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            end_of_run(&start.scratch).await;
            return Err(e);
        }
    };
    let RunStart {
        run_id,
        seed,
        scratch,
        profile,
    } = start;
    let store = RunStore::new(clauses, prepared.rerun_prefix, seed);
    for secret in &prepared.secrets {
        crate::secrets::register(secret);
        store.add_secret(secret);
    }
    let header = format!(
        "nomad-conform {}: {}, profile {}, seed {seed}, run {run_id}{}",
        S::KIND,
        prepared.about,
        profile.name,
        common
            .shard
            .map(|s| format!(", shard {s}"))
            .unwrap_or_default()
    );
    let progress = crate::console::Progress::start(
        &store,
        &header,
        selection.run.len() + selection.skip.len(),
        common.output,
        common.strict,
    );
    let jobs = prepared.jobs.unwrap_or(common.jobs).max(1);
    let ctx = Arc::new(RunCtx {
        run_id,
        seed,
        profile,
        config: prepared.config,
        scratch_base: scratch.clone(),
        store,
    });
    let interrupted = execute::<S::World>(ctx.clone(), features, &selection, jobs).await;
    progress.finish();
    suite.finish(&ctx).await;
    let survivors = end_of_run(&scratch).await;
    let mut subject = prepared.subject;
    if !survivors.is_empty() {
        subject
            .details
            .insert("left running at the end".into(), survivors.join("; "));
    }
    let meta = RunMeta {
        kind: S::KIND.into(),
        subject,
        command_line: common.command_line.clone(),
        started_at,
        strict: common.strict,
        shard: common.shard,
    };
    Ok(finish_record(&ctx, meta, interrupted))
}

/// The record of a run interrupted before its first clause: every clause not run.
fn interrupted_before_any_clause<S: Suite>(
    common: &SuiteOptions,
    start: RunStart,
    clauses: Arc<ClauseSet>,
    selection: &Selection,
    started_at: chrono::DateTime<Utc>,
) -> RunRecord {
    let store = RunStore::new(clauses, Default::default(), start.seed);
    let mut all = selection.run.clone();
    all.extend(selection.skip.keys().cloned());
    store.finish_interrupted(&all);
    let ctx = RunCtx {
        run_id: start.run_id,
        seed: start.seed,
        profile: start.profile,
        config: (),
        scratch_base: start.scratch,
        store,
    };
    let meta = RunMeta {
        kind: S::KIND.into(),
        subject: Subject {
            plugin: "(not probed: the run was interrupted)".into(),
            version: None,
            details: Default::default(),
        },
        command_line: common.command_line.clone(),
        started_at,
        strict: common.strict,
        shard: common.shard,
    };
    finish_record(&ctx, meta, true)
}

/// What every run does at its end, whatever happened: kill every process group it started,
/// then every process that is still the harness's child (a daemon a plugin detached, found
/// because the harness is its subreaper) and whatever still runs in its directory, then remove
/// the directory. Each survivor is named on stderr and returned, for the record.
/// How many times the end of a run looks again for what killing the last ones orphaned.
const END_SWEEP_ROUNDS: usize = 50;

async fn end_of_run(scratch: &std::path::Path) -> Vec<String> {
    crate::process::kill_all_live_groups();
    let mut survivors = Vec::new();
    // Killing a process orphans its children to the harness (the subreaper): look again until
    // nothing is left, so that a daemon two sessions deep is found once its parent is gone.
    let mut told = std::collections::BTreeSet::new();
    for _ in 0..END_SWEEP_ROUNDS {
        let left = crate::escapees::leftovers_and_descendants();
        if left.is_empty() {
            break;
        }
        crate::escapees::kill_leftovers(&left).await;
        for p in &left {
            if !told.insert(p.pid) {
                continue;
            }
            let line = format!(
                "a process the run started was still running at its end, detached from the plugin that started it: {p} (killed)"
            );
            eprintln!("warning: {}", crate::console::shown(&line));
            survivors.push(line);
        }
    }
    for p in crate::process::processes_in(scratch) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        let line =
            format!("a process was still running in this run's directory at its end: {p} (killed)");
        eprintln!("warning: {}", crate::console::shown(&line));
        survivors.push(line);
    }
    // The clauses' directories set aside for removal first: they are inside this one.
    for failed in crate::background_removal::wait() {
        eprintln!("{}", crate::console::shown(&format!("warning: {failed}")));
    }
    let cleanup = crate::ledger::remove_scratch(scratch);
    for leak in &cleanup.leaked {
        eprintln!("{}", crate::console::shown(&format!("warning: {leak}")));
    }
    survivors
}
