//! One run of a suite: select scenarios, drive cucumber with our recorder, survive Ctrl-C, and
//! turn the store into a run record. Nothing here knows a plugin kind: [`run_suite`] owns the
//! life of every kind's run, and a kind only says how to prepare its subject ([`Suite`]).

mod interrupt;
mod suite;

pub use interrupt::Interrupts;
pub use suite::{Prepared, RunStart, Suite, run_suite};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::FutureExt as _;
use gherkin::tagexpr::TagOperation;
use nomad_conform_reports::model::{self, RunRecord};

use crate::clauses::{CaseKey, ClauseSet};
use crate::world::{RunCtx, ScenarioCtx, SuiteWorld};

/// Which scenarios a run executes.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Scenarios cucumber runs.
    pub run: BTreeSet<CaseKey>,
    /// Scenarios recorded as skipped before the run, with the reason.
    pub skip: BTreeMap<CaseKey, String>,
}

impl Selection {
    /// Everything matched by the tag expression, or everything.
    pub fn by_tags(clauses: &ClauseSet, tags: Option<&TagOperation>) -> Selection {
        use cucumber::tag::Ext as _;
        let run = clauses
            .iter()
            .filter(|c| tags.is_none_or(|t| t.eval(c.tags.iter())))
            .map(|c| c.key.clone())
            .collect();
        Selection {
            run,
            skip: BTreeMap::new(),
        }
    }

    /// Keep only the clauses of one shard: clause IDs are spread over shards by a stable hash,
    /// so every machine computes the same split.
    pub fn keep_shard(&mut self, clauses: &ClauseSet, shard: model::Shard) {
        let in_shard = |key: &CaseKey| {
            clauses.get(key).is_some_and(|c| {
                crate::world::stable_hash(&c.id) % u64::from(shard.total)
                    == u64::from(shard.index - 1)
            })
        };
        self.run.retain(|k| in_shard(k));
        self.skip.retain(|k, _| in_shard(k));
    }

    /// Move a selected scenario to the skipped ones.
    pub fn skip(&mut self, key: &CaseKey, reason: impl Into<String>) {
        if self.run.remove(key) {
            self.skip.insert(key.clone(), reason.into());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.run.is_empty() && self.skip.is_empty()
    }
}

/// Parses nothing: hands cucumber the features we parsed and validated ourselves.
struct Preparsed;

impl cucumber::Parser<Vec<gherkin::Feature>> for Preparsed {
    type Cli = cucumber::cli::Empty;
    type Output =
        futures::stream::Iter<std::vec::IntoIter<cucumber::parser::Result<gherkin::Feature>>>;

    fn parse(self, input: Vec<gherkin::Feature>, _cli: Self::Cli) -> Self::Output {
        futures::stream::iter(input.into_iter().map(Ok).collect::<Vec<_>>())
    }
}

/// Run the selected scenarios of `features` with world `W`. Returns true if the run was
/// interrupted (SIGINT or SIGTERM, see [`Interrupts`]); in that case the cases under way are
/// closed as interrupted, their ledgers torn down (until a second interrupt), and every process
/// group is killed.
pub async fn execute<W: SuiteWorld>(
    run: Arc<RunCtx<W::Config>>,
    features: Vec<gherkin::Feature>,
    selection: &Selection,
    jobs: usize,
) -> bool {
    let store = run.store.clone();
    for (key, reason) in &selection.skip {
        store.record_skip(key, reason);
    }
    if selection.run.is_empty() {
        return false;
    }

    let mut opts = cucumber::cli::Opts::<
        cucumber::cli::Empty,
        cucumber::runner::basic::Cli,
        cucumber::cli::Empty,
        cucumber::cli::Empty,
    >::default();
    opts.runner.concurrency = Some(jobs);

    let before_run = run.clone();
    let selected = selection.run.clone();
    // Not `W::cucumber()`: that compiles every step pattern for cucumber's own lookup, which
    // step_dispatch replaces.
    let cucumber = cucumber::Cucumber::<W, _, &str, _, _, _>::new()
        .steps(crate::step_dispatch::collection::<W>())
        .with_parser(Preparsed)
        .with_writer(crate::recorder::Recorder {
            store: store.clone(),
        })
        .max_concurrent_scenarios(jobs)
        .before(move |feature, _rule, scenario, world: &mut W| {
            let run = before_run.clone();
            let key = CaseKey::of(feature, scenario);
            async move {
                match ScenarioCtx::new(run, &key) {
                    Ok(ctx) => world.attach(ctx),
                    Err(e) => panic!("{e}"),
                }
                world.prepare().await;
            }
            .boxed_local()
        })
        .after(
            |_feature, _rule, _scenario, _finished, world: Option<&mut W>| {
                async move {
                    if let Some(ctx) = world.and_then(|w| w.scenario()) {
                        ctx.teardown().await;
                    }
                }
                .boxed_local()
            },
        )
        .with_cli(opts);
    let filter_keys = selected.clone();
    let running = cucumber.filter_run(features, move |feature, _rule, scenario| {
        filter_keys.contains(&CaseKey::of(feature, scenario))
    });

    let interrupts = Interrupts::get();
    let interrupted = tokio::select! {
        _ = running => false,
        _ = interrupts.at_least(1) => true,
    };
    // cucumber replaced the process-wide panic hook with a silent one for the run.
    drop(std::panic::take_hook());

    if interrupted {
        // Calls under way were cancelled with the run (their process guards killed what they
        // started). Undo what the scenarios made while a launched plugin still runs to answer
        // the undo calls, newest first, unless a second interrupt says stop waiting; then kill
        // whatever process group is left. What was not undone is named in its clause.
        let ledgers = store.take_ledgers();
        let undo: Vec<String> = ledgers.iter().flat_map(|(_, l)| l.describe_all()).collect();
        eprintln!(
            "{}",
            crate::console::shown(&interrupt::first_notice(
                ledgers.len(),
                &undo,
                crate::process::live_group_count()
            ))
        );
        let mut pending = ledgers.into_iter();
        let undo_all = async {
            for (key, ledger) in pending.by_ref() {
                let outcome = ledger.teardown().await;
                note_interrupted_cleanup(&store, &key, outcome);
            }
        };
        tokio::select! {
            _ = undo_all => {}
            _ = interrupts.at_least(2) => {
                eprintln!(
                    "nomad-conform: second interrupt: no longer waiting for the plugin; killing every process the run started, removing its mounts and files, writing the reports"
                );
            }
        }
        for (key, ledger) in pending {
            let left = ledger.describe_all();
            if !left.is_empty() {
                let outcome = crate::ledger::TeardownOutcome {
                    leaked: left,
                    ..crate::ledger::TeardownOutcome::default()
                };
                note_interrupted_cleanup(&store, &key, outcome);
            }
        }
        store.finish_interrupted(&selected);
        crate::process::kill_all_live_groups();
    }
    interrupted
}

/// What the cleanup of an interrupted clause left, as notes of the clause: an interrupt cut
/// the clause short, so what it left is not the plugin's leak.
fn note_interrupted_cleanup(
    store: &crate::recorder::RunStore,
    key: &CaseKey,
    outcome: crate::ledger::TeardownOutcome,
) {
    let handle = store.case(key);
    let mut state = crate::recorder::lock(&handle);
    state.notes.extend(outcome.notes);
    state.notes.extend(
        outcome
            .leaked
            .into_iter()
            .map(|l| format!("not cleaned up (the run was interrupted): {l}")),
    );
}

/// What a kind knows about the run when it is over, to build the record.
#[derive(Clone, Debug)]
pub struct RunMeta {
    pub kind: String,
    pub subject: model::Subject,
    pub command_line: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub strict: bool,
    pub shard: Option<model::Shard>,
}

/// The run's record, with every secret the run learned redacted.
pub fn finish_record<C>(run: &RunCtx<C>, meta: RunMeta, interrupted: bool) -> RunRecord {
    let mut record = RunRecord {
        schema_version: model::SCHEMA_VERSION,
        run_id: run.run_id.clone(),
        kind: meta.kind,
        harness: model::HarnessInfo {
            name: "nomad-conform".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        subject: meta.subject,
        profile: model::ProfileInfo {
            name: run.profile.name.clone(),
            nomad_versions: run.profile.nomad_versions.clone(),
        },
        seed: run.seed,
        command_line: meta.command_line,
        started_at: meta.started_at,
        finished_at: Utc::now(),
        interrupted,
        strict: meta.strict,
        environment: environment(),
        shard: meta.shard,
        merged_from: Vec::new(),
        cases: run.store.take_cases(),
    };
    // A shard's record may lack the clause a precondition's call belongs to; the merge settles.
    let complete = record.shard.is_none();
    record.settle_preconditions(complete);
    nomad_conform_reports::redact::redact_in_place(&mut record, &run.store.secrets());
    record
}

/// The machine the run happens on, read from /proc and /etc/os-release.
pub fn environment() -> model::Environment {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let os = read("/etc/os-release")
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    let commit = env!("NOMAD_CONFORM_COMMIT");
    model::Environment {
        os,
        kernel: read("/proc/sys/kernel/osrelease"),
        arch: std::env::consts::ARCH.to_string(),
        hostname: read("/proc/sys/kernel/hostname"),
        harness_commit: (!commit.is_empty()).then(|| commit.to_string()),
    }
}

/// Options every suite shares.
#[derive(Clone, Debug, Default)]
pub struct SuiteOptions {
    /// `--specs DIR`: feature files to run instead of the embedded ones.
    pub specs: Option<std::path::PathBuf>,
    /// `--profile NAME|FILE`.
    pub profile: Option<std::path::PathBuf>,
    /// `--tags EXPR`.
    pub tags: Option<String>,
    pub seed: Option<u64>,
    pub jobs: usize,
    pub strict: bool,
    /// `--shard M/N`: run only the clauses of shard M.
    pub shard: Option<model::Shard>,
    pub output: crate::console::Output,
    /// The command line, for the record.
    pub command_line: Vec<String>,
}

/// Most levels a `--tags` expression may nest (parentheses, and `not`s applied to one another):
/// the parser recurses once a level, and some thousands overflow the stack.
pub const MAX_TAG_DEPTH: usize = 64;

/// How deep `expr` nests: each `(` and each `not` opens a level, which closes with the group or
/// the operand it applies to.
fn tag_depth(expr: &str) -> usize {
    let spaced = expr.replace('(', " ( ").replace(')', " ) ");
    // Per open group: the depth outside it and the `not`s that apply to it.
    let mut outer: Vec<(usize, usize)> = Vec::new();
    let (mut base, mut nots, mut deepest) = (0usize, 0usize, 0usize);
    for token in spaced.split_whitespace() {
        match token {
            "(" => {
                outer.push((base, nots));
                base += nots + 1;
                nots = 0;
            }
            ")" => {
                base = outer.pop().map_or(0, |(b, _)| b);
                nots = 0;
            }
            "not" => nots += 1,
            _ => nots = 0,
        }
        deepest = deepest.max(base + nots);
    }
    deepest
}

/// Parse a `--tags` expression.
pub fn parse_tags(expr: &str) -> Result<TagOperation, crate::error::HarnessError> {
    let depth = tag_depth(expr);
    if depth > MAX_TAG_DEPTH {
        return Err(crate::error::HarnessError::Usage(format!(
            "invalid --tags expression: it nests {depth} levels of parentheses and `not`, more than the {MAX_TAG_DEPTH} allowed"
        )));
    }
    // Unbalanced parentheses are refused before the parser sees them: it backtracks through
    // every unclosed group, which took 24 s on a 1 KB expression with 32 of them (found by
    // the tags fuzz target).
    let mut open = 0usize;
    for c in expr.chars() {
        match c {
            '(' => open += 1,
            ')' if open == 0 => {
                return Err(crate::error::HarnessError::Usage(format!(
                    "invalid --tags expression {expr:?}: a `)` closes no `(`"
                )));
            }
            ')' => open -= 1,
            _ => {}
        }
    }
    if open > 0 {
        return Err(crate::error::HarnessError::Usage(format!(
            "invalid --tags expression {expr:?}: {open} `(` never closed"
        )));
    }
    expr.parse::<TagOperation>().map_err(|e| {
        crate::error::HarnessError::Usage(format!("invalid --tags expression {expr:?}: {e}"))
    })
}

/// Load, parse and validate the specs of `kind`, and select scenarios by tag.
pub fn load_suite(
    kind: &str,
    opts: &SuiteOptions,
) -> Result<(Vec<gherkin::Feature>, Arc<ClauseSet>, Selection), crate::error::HarnessError> {
    use crate::specs::{SpecSource, parse, spec_files};
    let source = match &opts.specs {
        Some(dir) => SpecSource::Dir(dir.clone()),
        None => SpecSource::Embedded,
    };
    let features = parse(&spec_files(kind, &source)?)?;
    let clauses = Arc::new(ClauseSet::from_features(kind, &features)?);
    if clauses.is_empty() {
        return Err(crate::error::HarnessError::Usage(format!(
            "the specs define no {kind} clauses"
        )));
    }
    let tags = opts.tags.as_deref().map(parse_tags).transpose()?;
    let mut selection = Selection::by_tags(&clauses, tags.as_ref());
    if let Some(shard) = opts.shard {
        selection.keep_shard(&clauses, shard);
    }
    if selection.is_empty() {
        return Err(crate::error::HarnessError::Usage(format!(
            "no {kind} clause matches --tags {:?}{} (see `nomad-conform list {kind}`)",
            opts.tags.as_deref().unwrap_or_default(),
            opts.shard
                .map(|s| format!(" in shard {s}"))
                .unwrap_or_default()
        )));
    }
    Ok((features, clauses, selection))
}

/// A fresh run ID (random, not derived from the seed: two runs with one seed still differ).
pub fn new_run_id() -> String {
    use rand::RngExt as _;
    let n: u32 = rand::rng().random();
    format!("{n:08x}")
}

/// The run's seed: the one given, or a random one (printed so it can be given next time).
pub fn seed_or_random(seed: Option<u64>) -> u64 {
    use rand::RngExt as _;
    seed.unwrap_or_else(|| rand::rng().random::<u32>() as u64)
}

/// The run's own directory, `<base>/nomad-conform-<run id>`, made and resolved (mount points
/// are compared with resolved paths).
pub fn make_scratch_base(
    base: &std::path::Path,
    run_id: &str,
) -> Result<std::path::PathBuf, crate::error::HarnessError> {
    let dir = base.join(format!("nomad-conform-{run_id}"));
    std::fs::create_dir_all(&dir).map_err(|e| {
        crate::error::HarnessError::Internal(format!(
            "failed to create scratch directory {}: {e}",
            dir.display()
        ))
    })?;
    dir.canonicalize().map_err(|e| {
        crate::error::HarnessError::Internal(format!("failed to resolve {}: {e}", dir.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_expressions_nest_as_deep_as_their_groups_and_nots() {
        assert_eq!(tag_depth("@must"), 0);
        assert_eq!(tag_depth("@must and not @A"), 1);
        assert_eq!(tag_depth("not @a and not @b and not @c"), 1);
        assert_eq!(tag_depth("not not (@a or (not @b))"), 5);
        assert_eq!(tag_depth("(@a) and (@b)"), 1);
        let nested = |n: usize| format!("{}@must{}", "(".repeat(n), ")".repeat(n));
        assert!(parse_tags(&nested(MAX_TAG_DEPTH)).is_ok());
        let e = parse_tags(&nested(16_000)).unwrap_err().to_string();
        assert!(e.contains("nests 16000 levels"), "{e}");
        let e = parse_tags(&format!("{}@must", "not ".repeat(MAX_TAG_DEPTH + 1)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than the 64 allowed"), "{e}");
    }
}
