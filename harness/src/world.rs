//! What every scenario gets, whatever the plugin kind: the run's context, its own case handle,
//! resource ledger, scratch directory and seeded randomness.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use nomad_conform_reports::model::{Attachment, OpEvent};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::clauses::{CaseKey, Clause};
use crate::ledger::{Ledger, ScratchDir};
use crate::profile::Profile;
use crate::recorder::{CaseHandle, Hint, RunStore, lock};

/// Shared by every scenario of a run. `C` is the kind's own configuration.
#[derive(Debug)]
pub struct RunCtx<C> {
    pub run_id: String,
    pub seed: u64,
    pub profile: Profile,
    pub config: C,
    /// The run's own directory; every scenario's scratch directory lives in it.
    pub scratch_base: PathBuf,
    pub store: RunStore,
}

/// One scenario's context.
#[derive(Debug)]
pub struct ScenarioCtx<C> {
    pub run: Arc<RunCtx<C>>,
    pub clause: Clause,
    pub case: CaseHandle,
    pub ledger: Ledger,
    /// A directory for this scenario alone, made when a step first asks for it (see
    /// [`ScenarioCtx::scratch`]) and removed when the scenario ends.
    scratch: PathBuf,
    scratch_made: std::sync::OnceLock<()>,
    /// The scenario's seed: derived from the run seed and the clause ID, so a clause run alone
    /// with `--seed` sees the same generated inputs.
    pub seed: u64,
    /// Randomness for identities (volume IDs): seeded from the scenario seed *and* the run ID,
    /// so that two runs with the same seed on one host never share a volume ID.
    pub rng: StdRng,
    /// A short string unique to this run and scenario, put into every name the scenario makes.
    pub token: String,
}

impl<C> ScenarioCtx<C> {
    /// Set up a scenario: its case handle, ledger and identities. Its scratch directory is
    /// made on first use: a clause that never asks for one (most CSI clauses) has no
    /// directory to check for leftover mounts and loop devices, nor to remove.
    pub fn new(run: Arc<RunCtx<C>>, key: &CaseKey) -> Result<Self, String> {
        let clause = run
            .store
            .clauses()
            .get(key)
            .cloned()
            .ok_or_else(|| format!("no clause registered at {}:{}", key.file, key.line))?;
        let case = run.store.case(key);
        let ledger = Ledger::default();
        run.store.register_ledger(key, ledger.clone());
        // The run's directory is canonical (run.rs, make_scratch_base) and a clause ID has no
        // separators, so this path is too.
        let scratch = run.scratch_base.join(clause.id.to_ascii_lowercase());
        let seed = stable_hash(&format!("{}/{}", run.seed, clause.id));
        let token = token(&run.run_id, seed);
        Ok(ScenarioCtx {
            rng: StdRng::seed_from_u64(seed ^ stable_hash(&run.run_id)),
            run,
            clause,
            case,
            ledger,
            scratch,
            scratch_made: std::sync::OnceLock::new(),
            seed,
            token,
        })
    }

    /// A context for what several scenarios share (a volume made once for the clauses that only
    /// read it), outside any one of them: its calls and hints go to `log`, what it makes to
    /// `ledger`, which whoever shares it tears down; `name` (no separators) names its scratch
    /// directory and seeds its identities, and stands in for a clause ID, so that a failed
    /// precondition inside it is always a block, never its own failure.
    pub fn shared(
        run: Arc<RunCtx<C>>,
        name: &str,
        template: &Clause,
        log: CaseHandle,
        ledger: Ledger,
    ) -> Self {
        let seed = stable_hash(&format!("{}/{name}", run.seed));
        let token = token(&run.run_id, seed);
        let clause = Clause {
            id: name.to_string(),
            tags: Vec::new(),
            ..template.clone()
        };
        ScenarioCtx {
            rng: StdRng::seed_from_u64(seed ^ stable_hash(&run.run_id)),
            scratch: run.scratch_base.join(name),
            run,
            clause,
            case: log,
            ledger,
            scratch_made: std::sync::OnceLock::new(),
            seed,
            token,
        }
    }

    /// The scenario's own directory, made on the first call and registered at the bottom of
    /// the ledger, so that it is removed after everything the scenario made (mounts in it
    /// among them) is undone. A directory that cannot be made is said in the case; the step
    /// that uses it then fails on the missing directory.
    pub fn scratch(&self) -> &std::path::Path {
        self.scratch_made.get_or_init(|| {
            if let Err(e) = std::fs::create_dir_all(&self.scratch) {
                self.note(format!(
                    "harness: failed to create {}: {e}",
                    self.scratch.display()
                ));
            }
            self.ledger.track_first(ScratchDir {
                path: self.scratch.clone(),
            });
        });
        &self.scratch
    }

    pub fn record(&self, ev: OpEvent) {
        lock(&self.case).events.push(ev);
    }

    /// Attach an artefact to the case for people to look at: an SVG drawing (`image/svg+xml`,
    /// drawn in the HTML report) or text (`text/plain`, ...). The content is cut at 1 MiB
    /// and secrets are redacted from it like from the rest of the record.
    pub fn attach(&self, title: impl Into<String>, media_type: &str, content: String) {
        lock(&self.case).attach(Attachment::new(title, media_type, content));
    }

    /// Milliseconds from the start of the case to `at`.
    pub fn offset_ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(lock(&self.case).started)
            .as_millis() as u64
    }

    /// A line for people reading the case: something seen that is not the verdict's question.
    pub fn note(&self, text: impl Into<String>) {
        lock(&self.case).notes.push(text.into());
    }

    pub fn hint(&self, hint: Hint) {
        lock(&self.case).hint = Some(hint);
    }

    /// Mark the case as skipped and return the text to fail the step with (cucumber cannot skip
    /// from inside a step, so the step fails and the recorder turns it into Skip).
    pub fn skip(&self, reason: impl Into<String>) -> String {
        let reason = reason.into();
        self.hint(Hint::Skip(reason.clone()));
        reason
    }

    /// A precondition failed: the plugin broke clause `root` (the one whose check this call
    /// is), so this clause cannot be judged. Returns `message` to fail the step with. In the
    /// root clause itself the failure is an ordinary Fail.
    pub fn blocked(&self, root: &str, message: String) -> String {
        if root != self.clause.id {
            self.hint(Hint::Blocked(root.to_string()));
        }
        message
    }

    /// Mark a failure as the harness's own, not the plugin's.
    pub fn harness_error(&self, message: impl Into<String>) -> String {
        self.hint(Hint::HarnessError);
        format!("harness error: {}", message.into())
    }

    /// Undo what the scenario made and record what could not be undone.
    pub async fn teardown(&self) {
        let outcome = self.ledger.teardown().await;
        self.run.store.release_ledger(&self.clause.key);
        let mut state = lock(&self.case);
        state.leaked.extend(outcome.leaked);
        state.cleanup_errors.extend(outcome.errors);
        state.notes.extend(outcome.notes);
    }
}

/// A world that carries a [`ScenarioCtx`]: what the generic runner needs from each kind's World.
pub trait SuiteWorld:
    cucumber::World + cucumber::codegen::WorldInventory + std::fmt::Debug
{
    type Config: Send + Sync + std::fmt::Debug + 'static;
    fn attach(&mut self, ctx: ScenarioCtx<Self::Config>);
    fn scenario(&self) -> Option<&ScenarioCtx<Self::Config>>;
    /// Called once the context is attached, before the first step: take what the clause must
    /// hold for its whole run (a share of a run-wide budget). Waiting here holds nothing.
    fn prepare(&mut self) -> futures::future::LocalBoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// The string a scenario puts into every name it makes: the run's and the scenario's own. 32 bits
/// of the scenario's seed, so that two clauses of one run share a token (and would make volumes
/// of the same name, which a plugin's idempotent create hands both) with odds of about 2 in a
/// million for the CSI suite's 124, not the 1 in 9 that 16 bits gave.
fn token(run_id: &str, seed: u64) -> String {
    format!(
        "nc{}{:08x}",
        &run_id[..6.min(run_id.len())],
        seed & 0xffff_ffff
    )
}

/// FNV-1a: a hash that is the same on every platform and Rust version (seeds and shards must be
/// reproducible).
pub fn stable_hash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_of_a_run_do_not_collide() {
        // Every clause ID of the largest suite, with one run's seed: distinct tokens.
        let ids: Vec<String> = (0..400).map(|i| format!("CSI-CLAUSE-{i}")).collect();
        let tokens: std::collections::BTreeSet<String> = ids
            .iter()
            .map(|id| token("0a1b2c3d", stable_hash(&format!("7/{id}"))))
            .collect();
        assert_eq!(tokens.len(), ids.len());
        assert!(
            tokens
                .iter()
                .all(|t| t.starts_with("nc0a1b2c") && t.len() == 16)
        );
    }

    #[test]
    fn stable_hash_is_stable() {
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(stable_hash("1/DHV-A"), stable_hash("2/DHV-A"));
    }

    #[test]
    fn attach_reaches_the_case_and_is_redacted() {
        use nomad_conform_reports::model::{MAX_ATTACHMENT_BYTES, MEDIA_SVG, MEDIA_TEXT};
        let (store, key) = crate::recorder::tests::store_with_one_clause();
        let dir = tempfile::tempdir().unwrap();
        let run = Arc::new(RunCtx {
            run_id: "0a1b2c3d".into(),
            seed: 7,
            profile: Profile::load(None).unwrap(),
            config: (),
            scratch_base: dir.path().to_path_buf(),
            store: store.clone(),
        });
        let ctx = ScenarioCtx::new(run, &key).unwrap();
        ctx.attach("timeline", MEDIA_SVG, "<svg/>".into());
        ctx.attach(
            "server log",
            MEDIA_TEXT,
            "token s3cr3t-t0ken accepted\n".repeat(MAX_ATTACHMENT_BYTES / 8),
        );
        store.add_secret("s3cr3t-t0ken");
        store.finish_interrupted(&std::collections::BTreeSet::new());
        let cases = store.cases();
        let a = &cases[0].attachments;
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0].title.as_str(), a[0].content.as_str()),
            ("timeline", "<svg/>")
        );
        assert!(a[1].truncated && a[1].content.len() <= MAX_ATTACHMENT_BYTES);
        // What the run writes: the record with the run's secrets redacted, attachments too.
        let record = nomad_conform_reports::model::RunRecord {
            schema_version: nomad_conform_reports::model::SCHEMA_VERSION,
            run_id: "0a1b2c3d".into(),
            kind: "dhv".into(),
            harness: nomad_conform_reports::model::HarnessInfo {
                name: "nomad-conform".into(),
                version: "0".into(),
            },
            subject: nomad_conform_reports::model::Subject {
                plugin: "./p".into(),
                version: None,
                details: Default::default(),
            },
            profile: nomad_conform_reports::model::ProfileInfo {
                name: "p".into(),
                nomad_versions: "any".into(),
            },
            seed: 7,
            command_line: Vec::new(),
            started_at: chrono::Utc::now(),
            finished_at: chrono::Utc::now(),
            interrupted: true,
            strict: false,
            environment: Default::default(),
            shard: None,
            merged_from: Vec::new(),
            cases,
        };
        let red = nomad_conform_reports::redact::redact(&record, &store.secrets());
        let log = &red.cases[0].attachments[1].content;
        assert!(!log.contains("s3cr3t-t0ken") && log.contains("token [redacted] accepted"));
    }
}
