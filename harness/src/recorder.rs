//! The recorder: the only writer of the run record.
//!
//! Two things feed it. cucumber's event stream (scenario and step lifecycle, through the
//! [`Recorder`] writer) and the steps themselves (operation events, verdict hints and cleanup
//! results, through a [`CaseHandle`]). Events of concurrent scenarios interleave; everything is
//! keyed by [`CaseKey`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use cucumber::event::{self, Cucumber, HookType, Scenario, Step, StepError};
use cucumber::{Event, parser};
use nomad_conform_reports::model::{Attachment, Case, OpEvent, StepOutcome, StepRecord, Verdict};

use crate::clauses::{CaseKey, ClauseSet};
use crate::step_dispatch::StepFault;

/// How to read a failed step, set by the step before it fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint {
    /// The clause could not be exercised (e.g. a failure could not be provoked): Skip.
    Skip(String),
    /// The failure is a deadline that passed: TimedOut.
    TimedOut,
    /// The harness, not the plugin, is at fault: Error.
    HarnessError,
    /// A precondition failed: the plugin broke the named clause first, so this one cannot be
    /// judged: Blocked.
    Blocked(String),
}

/// What the steps of one scenario report, beside cucumber's own events.
#[derive(Debug)]
pub struct CaseState {
    pub started: Instant,
    pub events: Vec<OpEvent>,
    pub hint: Option<Hint>,
    pub leaked: Vec<String>,
    /// What the harness could not check in the clause's cleanup, for reasons of its own.
    pub cleanup_errors: Vec<String>,
    pub notes: Vec<String>,
    /// Artefacts for people to look at (a timeline drawing, a log), in the order attached.
    pub attachments: Vec<Attachment>,
}

/// The most attachments a case keeps; later ones are dropped with a note.
pub const MAX_ATTACHMENTS: usize = 16;

impl CaseState {
    /// Keep `a` with the case, unless it already has [`MAX_ATTACHMENTS`].
    pub fn attach(&mut self, a: Attachment) {
        if self.attachments.len() < MAX_ATTACHMENTS {
            self.attachments.push(a);
        } else {
            self.notes.push(format!(
                "attachment {:?} ({}, {} bytes) dropped: a case keeps at most {MAX_ATTACHMENTS}",
                a.title, a.media_type, a.total_bytes
            ));
        }
    }
}

pub type CaseHandle = Arc<Mutex<CaseState>>;

/// A handle with nothing recorded yet, its clock started now.
pub fn new_case() -> CaseHandle {
    Arc::new(Mutex::new(CaseState {
        started: Instant::now(),
        events: Vec::new(),
        hint: None,
        leaked: Vec::new(),
        cleanup_errors: Vec::new(),
        notes: Vec::new(),
        attachments: Vec::new(),
    }))
}

/// Lock a handle, tolerating a poisoned mutex (a panicking step must not lose the record).
pub fn lock(h: &CaseHandle) -> MutexGuard<'_, CaseState> {
    h.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug)]
struct InFlight {
    state: CaseHandle,
    started_at: SystemTime,
    steps: Vec<StepRecord>,
    step_started: Option<SystemTime>,
    failure: Option<String>,
    /// No step definition, or more than one, matched a step: the harness's fault.
    step_fault: Option<String>,
    hook_error: Option<String>,
}

impl InFlight {
    fn new(at: SystemTime) -> Self {
        InFlight {
            state: new_case(),
            started_at: at,
            steps: Vec::new(),
            step_started: None,
            failure: None,
            step_fault: None,
            hook_error: None,
        }
    }
}

type CaseCallback = Box<dyn Fn(&Case) + Send>;

struct Inner {
    clauses: Arc<ClauseSet>,
    rerun_prefix: crate::command_line::CommandLine,
    seed: u64,
    in_flight: HashMap<CaseKey, InFlight>,
    finished: BTreeMap<CaseKey, Case>,
    ledgers: HashMap<CaseKey, crate::ledger::Ledger>,
    on_case: Option<CaseCallback>,
    secrets: BTreeSet<String>,
}

/// Shared store of the run's cases. Cheap to clone.
#[derive(Clone)]
pub struct RunStore {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for RunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunStore")
    }
}

impl RunStore {
    /// `rerun_prefix` is the command line that reruns the suite against the same plugin; each
    /// case's rerun command adds `--seed` and `--tags @<clause>` to it.
    pub fn new(
        clauses: Arc<ClauseSet>,
        rerun_prefix: crate::command_line::CommandLine,
        seed: u64,
    ) -> Self {
        RunStore {
            inner: Arc::new(Mutex::new(Inner {
                clauses,
                rerun_prefix,
                seed,
                in_flight: HashMap::new(),
                finished: BTreeMap::new(),
                ledgers: HashMap::new(),
                on_case: None,
                secrets: BTreeSet::new(),
            })),
        }
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called with every case as soon as it is final (for progress output).
    pub fn on_case(&self, f: impl Fn(&Case) + Send + 'static) {
        self.inner().on_case = Some(Box::new(f));
    }

    /// Remember a secret value: it is redacted from every report.
    pub fn add_secret(&self, value: &str) {
        crate::secrets::register(value);
        self.inner().secrets.insert(value.to_string());
    }

    /// This run's secrets and every one the process learned elsewhere ([`crate::secrets`]).
    pub fn secrets(&self) -> Vec<String> {
        let mut all = self.inner().secrets.clone();
        all.extend(crate::secrets::all());
        all.into_iter().collect()
    }

    pub fn clauses(&self) -> Arc<ClauseSet> {
        self.inner().clauses.clone()
    }

    /// The handle steps use to report into the case at `key`.
    pub fn case(&self, key: &CaseKey) -> CaseHandle {
        self.inner()
            .in_flight
            .entry(key.clone())
            .or_insert_with(|| InFlight::new(SystemTime::now()))
            .state
            .clone()
    }

    pub fn register_ledger(&self, key: &CaseKey, ledger: crate::ledger::Ledger) {
        self.inner().ledgers.insert(key.clone(), ledger);
    }

    pub fn release_ledger(&self, key: &CaseKey) {
        self.inner().ledgers.remove(key);
    }

    /// Ledgers of scenarios that never reached their cleanup (the run was interrupted).
    pub fn take_ledgers(&self) -> Vec<(CaseKey, crate::ledger::Ledger)> {
        self.inner().ledgers.drain().collect()
    }

    /// Record a case that will not run, with the reason.
    pub fn record_skip(&self, key: &CaseKey, reason: &str) {
        let mut inner = self.inner();
        let Some(clause) = inner.clauses.get(key).cloned() else {
            return;
        };
        let case = Case {
            reason: Some(reason.to_string()),
            ..case_of(&clause, Verdict::Skip, rerun(&inner, &clause.id))
        };
        if let Some(cb) = &inner.on_case {
            cb(&case);
        }
        inner.finished.insert(key.clone(), case);
    }

    /// Close the run after an interruption: scenarios under way become errors, selected ones
    /// that never started become skips.
    pub fn finish_interrupted(&self, selected: &BTreeSet<CaseKey>) {
        let in_flight: Vec<CaseKey> = self.inner().in_flight.keys().cloned().collect();
        for key in in_flight {
            self.finalize(&key, SystemTime::now(), None, true);
        }
        let missing: Vec<CaseKey> = {
            let inner = self.inner();
            selected
                .iter()
                .filter(|k| !inner.finished.contains_key(*k))
                .cloned()
                .collect()
        };
        for key in missing {
            self.record_skip(&key, "not run: the run was interrupted");
        }
    }

    /// Every finished case, in spec order.
    pub fn cases(&self) -> Vec<Case> {
        self.inner().finished.values().cloned().collect()
    }

    /// The finished cases, taken out of the store (once the run is over: the record is built
    /// from them without copying every recorded call).
    pub fn take_cases(&self) -> Vec<Case> {
        std::mem::take(&mut self.inner().finished)
            .into_values()
            .collect()
    }

    fn with_flight(&self, key: &CaseKey, at: SystemTime, f: impl FnOnce(&mut InFlight)) {
        let mut inner = self.inner();
        let flight = inner
            .in_flight
            .entry(key.clone())
            .or_insert_with(|| InFlight::new(at));
        f(flight);
    }

    fn finalize(
        &self,
        key: &CaseKey,
        at: SystemTime,
        scenario: Option<(&gherkin::Feature, &gherkin::Scenario)>,
        interrupted: bool,
    ) {
        let mut inner = self.inner();
        let Some(mut flight) = inner.in_flight.remove(key) else {
            return;
        };
        let Some(clause) = inner.clauses.get(key).cloned() else {
            return;
        };
        // What the case recorded is moved into it, not copied: the scenario is over, so its
        // state has no other reader, and a plugin's output or a failure text quoting it is kept
        // once.
        let handle = flight.state.clone();
        let mut state = lock(&handle);
        let mut blocked_by = None;
        let (mut verdict, mut reason) = if interrupted {
            (
                Verdict::Interrupted,
                Some("interrupted: the run was stopped before this clause finished".to_string()),
            )
        } else if let Some(h) = &flight.hook_error {
            (
                Verdict::Error,
                Some(format!("the harness failed to set up the scenario: {h}")),
            )
        } else if let Some(f) = flight.failure.take() {
            match &state.hint {
                Some(Hint::Skip(r)) => (Verdict::Skip, Some(r.clone())),
                Some(Hint::TimedOut) => (Verdict::TimedOut, Some(f)),
                Some(Hint::HarnessError) => (Verdict::Error, Some(f)),
                Some(Hint::Blocked(by)) => {
                    blocked_by = Some(by.clone());
                    (
                        Verdict::Blocked,
                        Some(format!(
                            "blocked by {by}: this clause cannot be judged because a call it needs failed\n{f}"
                        )),
                    )
                }
                None => (Verdict::Fail, Some(f)),
            }
        } else if let Some(fault) = flight.step_fault.take() {
            (Verdict::Error, Some(fault))
        } else {
            (Verdict::Pass, None)
        };
        if !state.leaked.is_empty() && interrupted {
            // The interrupt cut the clause short: what it left is not the plugin's leak.
            let list = state.leaked.join("\n  ");
            reason = reason
                .map(|r| format!("{r}\n\nnot cleaned up (the run was interrupted):\n  {list}"));
        } else if !state.leaked.is_empty() {
            // A clause the plugin already failed keeps its own verdict, with what it left
            // listed: what the cleanup could not undo is then often that failure's consequence
            // (a volume deleted while published leaves its mount behind), and Leaked in its
            // place would hide which rule was broken. So does a clause blocked by another's
            // failure: it was not judged, the leak is most often what that failure left (a
            // delete that cannot unmount fails its own clause and leaves the mounts of those it
            // blocked), and it stays grouped under that root cause; if that root cause did not
            // fail after all, the run's end makes it Leaked (`settle_preconditions`). Otherwise
            // the leak is the verdict.
            if !matches!(
                verdict,
                Verdict::Fail | Verdict::TimedOut | Verdict::Blocked
            ) {
                verdict.raise(Verdict::Leaked);
            }
            let list = state.leaked.join("\n  ");
            let text = format!("{}\n  {list}", nomad_conform_reports::model::LEFT_BEHIND);
            reason = Some(match reason {
                Some(mut r) => {
                    r.push_str("\n\n");
                    r.push_str(&text);
                    r
                }
                None => text,
            });
        }
        if !state.cleanup_errors.is_empty() {
            // The harness could not check what the clause left: a pass cannot stand, and a
            // plugin's failure is kept with the harness's words beside it.
            let list = state.cleanup_errors.join("\n  ");
            let text = format!("harness error in the cleanup:\n  {list}");
            if verdict == Verdict::Pass {
                verdict = Verdict::Error;
            }
            reason = Some(match reason {
                Some(r) => format!("{r}\n\n{text}"),
                None => text,
            });
        }
        let mut steps = std::mem::take(&mut flight.steps);
        if let Some((feature, sc)) = scenario {
            let all: Vec<&gherkin::Step> = feature
                .background
                .iter()
                .flat_map(|b| b.steps.iter())
                .chain(sc.steps.iter())
                .collect();
            for s in all.into_iter().skip(steps.len()) {
                steps.push(StepRecord {
                    keyword: s.keyword.trim().to_string(),
                    text: s.value.clone(),
                    outcome: StepOutcome::NotRun,
                    duration_ms: 0,
                });
            }
        }
        let case = Case {
            reason,
            blocked_by,
            duration_ms: millis_between(flight.started_at, at),
            steps,
            events: std::mem::take(&mut state.events),
            notes: std::mem::take(&mut state.notes),
            attachments: std::mem::take(&mut state.attachments),
            ..case_of(&clause, verdict, rerun(&inner, &clause.id))
        };
        drop(state);
        if let Some(cb) = &inner.on_case {
            cb(&case);
        }
        inner.finished.insert(key.clone(), case);
    }
}

/// A case of `clause` with `verdict` and nothing recorded yet.
fn case_of(clause: &crate::clauses::Clause, verdict: Verdict, rerun: String) -> Case {
    Case {
        clause: clause.id.clone(),
        level: clause.level,
        title: clause.title.clone(),
        text: clause.text.clone(),
        basis: clause.basis.clone(),
        kind: clause.kind.clone(),
        operation: clause.operation.clone(),
        spec_file: clause.key.file.clone(),
        line: clause.key.line as u32,
        verdict,
        reason: None,
        blocked_by: None,
        rerun: Some(rerun),
        duration_ms: 0,
        steps: Vec::new(),
        events: Vec::new(),
        notes: Vec::new(),
        attachments: Vec::new(),
        known: None,
    }
}

fn rerun(inner: &Inner, id: &str) -> String {
    inner.rerun_prefix.rerun(inner.seed, id)
}

/// Whole milliseconds from `a` to `b`, rounded to the nearest: cut down, a run's clause
/// durations would add up to half a millisecond per clause less than they took.
fn millis_between(a: SystemTime, b: SystemTime) -> u64 {
    b.duration_since(a)
        .map(|d| (d.as_micros() as u64 + 500) / 1000)
        .unwrap_or(0)
}

/// [`step_error_text`], taking the text out of the panic payload when nothing else holds it
/// (cucumber hands the recorder the last reference): a failure quoting a plugin's output is not
/// copied again.
fn take_step_error_text(err: StepError) -> String {
    match err {
        StepError::Panic(mut info) => {
            match Arc::get_mut(&mut info).and_then(|p| p.downcast_mut::<String>()) {
                Some(text) => std::mem::take(text),
                None => panic_text(&info),
            }
        }
        other => step_error_text(&other),
    }
}

/// The text of a failed step: the `Err` string of the step (cucumber turns it into a panic
/// payload), or a description of why no step could run.
pub fn step_error_text(err: &StepError) -> String {
    match err {
        StepError::Panic(info) => panic_text(info),
        StepError::NotFound => "no step definition matches".into(),
        StepError::AmbiguousMatch(e) => format!("ambiguous step definitions: {e}"),
    }
}

pub fn panic_text(info: &event::Info) -> String {
    if let Some(s) = info.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = info.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "a step panicked with a non-text payload".into()
    }
}

/// The [`StepFault`] a step failed with, when no single definition could run it.
fn step_fault(err: &StepError) -> Option<&StepFault> {
    match err {
        StepError::Panic(info) => info.downcast_ref::<StepFault>(),
        _ => None,
    }
}

/// The cucumber writer that feeds the store.
#[derive(Clone, Debug)]
pub struct Recorder {
    pub store: RunStore,
}

impl<W: 'static> cucumber::Writer<W> for Recorder {
    type Cli = cucumber::cli::Empty;

    async fn handle_event(&mut self, ev: parser::Result<Event<Cucumber<W>>>, _cli: &Self::Cli) {
        let Ok(Event { value, at, .. }) = ev else {
            return;
        };
        let (feature, scenario, sev) = match value {
            Cucumber::Feature(f, event::Feature::Scenario(s, ev)) => (f, s, ev.event),
            Cucumber::Feature(f, event::Feature::Rule(_, event::Rule::Scenario(s, ev))) => {
                (f, s, ev.event)
            }
            _ => return,
        };
        let key = CaseKey::of(&feature, &scenario);
        match sev {
            Scenario::Started => self.store.with_flight(&key, at, |f| f.started_at = at),
            Scenario::Step(step, ev) | Scenario::Background(step, ev) => {
                self.store
                    .with_flight(&key, at, |f| step_event(f, &step, ev, at))
            }
            Scenario::Hook(HookType::Before, event::Hook::Failed(_, info)) => {
                let text = panic_text(&info);
                self.store
                    .with_flight(&key, at, |f| f.hook_error = Some(text))
            }
            Scenario::Hook(HookType::After, event::Hook::Failed(_, info)) => {
                let text = panic_text(&info);
                self.store.with_flight(&key, at, |f| {
                    lock(&f.state)
                        .leaked
                        .push(format!("cleanup failed: {text}"))
                })
            }
            Scenario::Hook(..) | Scenario::Log(_) => {}
            Scenario::Finished => self
                .store
                .finalize(&key, at, Some((&feature, &scenario)), false),
        }
    }
}

impl cucumber::writer::Normalized for Recorder {}

fn step_event<W>(flight: &mut InFlight, step: &gherkin::Step, ev: Step<W>, at: SystemTime) {
    let outcome = match ev {
        Step::Started => {
            flight.step_started = Some(at);
            return;
        }
        Step::Passed(..) => StepOutcome::Passed,
        Step::Skipped => {
            let text = format!("{} {}", step.keyword.trim(), step.value);
            flight.step_fault = Some(StepFault::Undefined(text).to_string());
            StepOutcome::Undefined
        }
        Step::Failed(_, _, _, err) => match step_fault(&err) {
            // No single definition for the step: the harness's fault, not a failed check.
            Some(fault) => {
                flight.step_fault = Some(fault.to_string());
                match fault {
                    StepFault::Undefined(_) => StepOutcome::Undefined,
                    StepFault::Ambiguous(..) => StepOutcome::Failed,
                }
            }
            None => {
                flight.failure = Some(take_step_error_text(err));
                StepOutcome::Failed
            }
        },
    };
    let started = flight.step_started.take().unwrap_or(at);
    flight.steps.push(StepRecord {
        keyword: step.keyword.trim().to_string(),
        text: step.value.clone(),
        outcome,
        duration_ms: millis_between(started, at),
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::specs::{SpecFile, parse};
    use nomad_conform_reports::model::{MEDIA_SVG, MEDIA_TEXT};

    /// A store with one clause, and the key of its scenario.
    pub(crate) fn store_with_one_clause() -> (RunStore, CaseKey) {
        let features = parse(&[SpecFile {
            path: "specs/dhv/09_t.feature".into(),
            text: "Feature: f\n  @DHV-T-ATTACH @must\n  Scenario: attaches\n    Given x\n".into(),
        }])
        .unwrap();
        let clauses = ClauseSet::from_features("dhv", &features).unwrap();
        let key = clauses.iter().next().unwrap().key.clone();
        (
            RunStore::new(
                Arc::new(clauses),
                crate::command_line::CommandLine::new(&["nomad-conform", "dhv", "./p"]),
                7,
            ),
            key,
        )
    }

    #[test]
    fn attachments_reach_the_case() {
        let (store, key) = store_with_one_clause();
        let handle = store.case(&key);
        lock(&handle).attach(Attachment::new(
            "timeline",
            MEDIA_SVG,
            "<svg xmlns=\"http://www.w3.org/2000/svg\"/>".into(),
        ));
        lock(&handle).attach(Attachment::new("log", MEDIA_TEXT, "line 1\n".into()));
        store.finalize(&key, SystemTime::now(), None, false);
        let cases = store.cases();
        assert_eq!(cases.len(), 1);
        let case = &cases[0];
        assert_eq!(case.verdict, Verdict::Pass);
        let titles: Vec<(&str, &str)> = case
            .attachments
            .iter()
            .map(|a| (a.title.as_str(), a.media_type.as_str()))
            .collect();
        assert_eq!(titles, [("timeline", MEDIA_SVG), ("log", MEDIA_TEXT)]);
        assert_eq!(case.attachments[1].content, "line 1\n");
        assert_eq!(case.attachments[1].total_bytes, 7);
    }

    /// What a clause's cleanup could not undo makes a passing clause Leaked, but a clause the
    /// plugin already failed keeps Fail, and a clause blocked by another's failure stays
    /// Blocked, with the leak listed: the leak is then often that failure's consequence (a
    /// volume deleted while published leaves its mount).
    #[test]
    fn a_leak_does_not_replace_the_clauses_own_failure() {
        for (hint, failed, want) in [
            (None, true, Verdict::Fail),
            (
                Some(Hint::Blocked("CSI-OTHER".into())),
                true,
                Verdict::Blocked,
            ),
            (None, false, Verdict::Leaked),
        ] {
            let (store, key) = store_with_one_clause();
            let handle = store.case(&key);
            lock(&handle).leaked.push("/x was still mounted".into());
            lock(&handle).hint = hint;
            store.with_flight(&key, SystemTime::now(), |f| {
                f.state = handle.clone();
                if failed {
                    f.failure = Some("expected: refused\nseen: deleted".into());
                }
            });
            store.finalize(&key, SystemTime::now(), None, false);
            let case = &store.cases()[0];
            assert_eq!(case.verdict, want);
            let reason = case.reason.as_deref().unwrap_or_default();
            assert!(reason.contains("/x was still mounted"), "{reason}");
            assert_eq!(reason.contains("seen: deleted"), failed, "{reason}");
        }
    }

    #[test]
    fn a_case_keeps_a_bounded_number_of_attachments() {
        let (store, key) = store_with_one_clause();
        let handle = store.case(&key);
        for i in 0..MAX_ATTACHMENTS + 2 {
            lock(&handle).attach(Attachment::new(format!("a{i}"), MEDIA_TEXT, "x".into()));
        }
        store.finalize(&key, SystemTime::now(), None, false);
        let case = &store.cases()[0];
        assert_eq!(case.attachments.len(), MAX_ATTACHMENTS);
        assert_eq!(case.notes.len(), 2);
        assert!(
            case.notes[0].contains("attachment \"a16\""),
            "{:?}",
            case.notes
        );
    }
}
