//! Volumes several clauses share: clauses that only read a volume (its capabilities, its stats,
//! a request about it that a plugin must refuse) do not each need their own create, or their
//! own create, stage and mount; the plugin is asked for one, and it is undone once the last of
//! them is over. There are two: a created volume (`@reads-shared-volume`) and a volume
//! published for an allocation (`@reads-shared-publication`).
//!
//! The rules that keep a shared volume from coupling verdicts:
//!
//! - Only clauses tagged for it use it, and each of them only reads: its own calls never change
//!   what the volume holds or where it is mounted in a correct plugin (what a wrong plugin makes
//!   of a request it should have refused, a snapshot say, is the reader's own to undo).
//! - It is made the same way whichever clause asks first, with the calls a clause of its own
//!   makes ("the plugin has created a volume", then for the publication "the volume is
//!   published to the node", "the volume is staged for the node", "the plugin has published the
//!   volume for an allocation"), so a plugin that breaks one of them blocks every reader on the
//!   clause that judges that call (CSI-CONTROLLER-CREATE, CSI-NOMAD-CLAIM), as it would have
//!   blocked each reader alone. Its calls are copied into every reader's record, marked
//!   `(shared)`.
//! - Readers take turns: the CSI spec makes the CO keep at most one call in flight per volume
//!   (a plugin may answer ABORTED otherwise), so a reader holds the publication from its first
//!   step to its cleanup.
//! - The publication holds one of the node's attachments while it lives, taken as any clause
//!   takes one. A shared volume is undone when the last reader the run selected has finished
//!   (counted before the run), or at the end of the run (an interrupted run included). What its
//!   undo could not undo is told in the last reader's notes and on the console, not judged:
//!   releasing and deleting a volume are judged by CSI-NOMAD-RELEASE,
//!   CSI-NODE-UNPUBLISH-REMOVES-TARGET and CSI-CONTROLLER-DELETE on volumes of their own, and
//!   which reader happens to be last must not decide a verdict.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cucumber::given;
use futures::future::BoxFuture;
use nomad_conform_reports::model::OpEvent;
use tokio::sync::{OnceCell, OwnedMutexGuard};

use super::{Alloc, CsiConfig, CsiWorld, StepResult, Vol};
use crate::clauses::ClauseSet;
use crate::ledger::{Ledger, Resource, TeardownOutcome};
use crate::recorder::{CaseHandle, Hint, lock, new_case};
use crate::run::Selection;
use crate::world::{RunCtx, ScenarioCtx, SuiteWorld};

/// What is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// A created volume.
    Volume,
    /// A volume published for an allocation (and staged, and published to the node, as the
    /// plugin's capabilities have Nomad do).
    Publication,
}

impl Sharing {
    const ALL: [Sharing; 2] = [Sharing::Volume, Sharing::Publication];

    /// The tag of a clause that reads it.
    pub fn tag(self) -> &'static str {
        match self {
            Sharing::Volume => "reads-shared-volume",
            Sharing::Publication => "reads-shared-publication",
        }
    }

    /// The name of its scratch directory and identities, and in messages.
    fn name(self) -> &'static str {
        match self {
            Sharing::Volume => "shared-volume",
            Sharing::Publication => "shared-publication",
        }
    }
}

/// The run's shared volumes.
#[derive(Debug)]
pub struct Shares {
    volume: Arc<Shared>,
    publication: Arc<Shared>,
}

impl Shares {
    /// One of each, for the readers among the clauses `selection` runs.
    pub fn for_selection(clauses: &ClauseSet, selection: &Selection) -> Shares {
        let make = |sharing: Sharing| {
            let readers = selection
                .run
                .iter()
                .filter_map(|k| clauses.get(k))
                .filter(|c| c.tags.iter().any(|t| t == sharing.tag()))
                .count();
            Arc::new(Shared {
                sharing,
                readers_left: AtomicUsize::new(readers),
                made: OnceCell::new(),
                turn: Arc::new(tokio::sync::Mutex::new(())),
                ledger: Ledger::default(),
                log: new_case(),
            })
        };
        Shares {
            volume: make(Sharing::Volume),
            publication: make(Sharing::Publication),
        }
    }

    fn get(&self, sharing: Sharing) -> &Arc<Shared> {
        match sharing {
            Sharing::Volume => &self.volume,
            Sharing::Publication => &self.publication,
        }
    }

    /// Undo whatever is left of them (the end of the run): the publication first, whose
    /// attachment may be wanted. What could not be undone is warned about.
    pub async fn undo(&self) {
        self.publication.undo().await;
        self.volume.undo().await;
    }
}

/// What the readers get: the volume, the allocation it is published for, and how it came
/// about.
#[derive(Clone, Debug)]
struct Made {
    /// Nomad's base directory it was staged and published under.
    base: std::path::PathBuf,
    vol: Vol,
    /// The allocation a publication is published for.
    alloc: Option<Alloc>,
    publish_context: Option<serde_json::Value>,
    controller_published: HashSet<String>,
    events: Vec<OpEvent>,
}

/// Why there is no shared volume: the failure text of the step that failed, and its hint
/// (Blocked by the clause that judges the call, Skip, ...).
#[derive(Clone, Debug)]
struct Refused {
    message: String,
    hint: Option<Hint>,
}

/// One shared volume.
#[derive(Debug)]
pub struct Shared {
    sharing: Sharing,
    /// Readers the run selected that have not finished.
    readers_left: AtomicUsize,
    made: OnceCell<Result<Made, Refused>>,
    /// Readers take turns.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// What making it made, undone after the last reader.
    ledger: Ledger,
    /// Its calls and notes.
    log: CaseHandle,
}

impl Shared {
    /// Undo what making it made. What could not be undone is told (a warning, and a note for
    /// the reader whose cleanup this is), not judged: see the module's comment.
    async fn undo(&self) -> TeardownOutcome {
        let outcome = self.ledger.teardown().await;
        let mut told = TeardownOutcome::default();
        for l in outcome.leaked {
            let line = format!("the {}'s cleanup left: {l}", self.sharing.name());
            eprintln!("warning: {}", crate::console::shown(&line));
            told.notes.push(line);
        }
        told.notes.extend(outcome.notes);
        told.errors.extend(outcome.errors);
        told
    }

    /// Make it, with the calls a clause of its own would make, in a world of its own.
    async fn make(
        &self,
        run: Arc<RunCtx<CsiConfig>>,
        template: &crate::clauses::Clause,
    ) -> Result<Made, Refused> {
        let name = self.sharing.name();
        let ctx = ScenarioCtx::shared(run, name, template, self.log.clone(), self.ledger.clone());
        let mut w = CsiWorld::default();
        w.attach(ctx);
        let outcome = async {
            super::controller::created_volume(&mut w).await?;
            if self.sharing == Sharing::Publication {
                super::node::published_to_node(&mut w).await?;
                super::node::staged_for_node(&mut w).await?;
                super::node::has_published_for_alloc(&mut w).await?;
            }
            Ok::<(), String>(())
        }
        .await;
        let made = outcome.and_then(|()| w.vol(0).cloned());
        let base = w.mount_base();
        let mut log = lock(&self.log);
        match made {
            Ok(vol) => Ok(Made {
                base,
                vol,
                alloc: w.allocs.first().cloned(),
                publish_context: w.publish_context.clone(),
                controller_published: w.controller_published.clone(),
                events: log.events.clone(),
            }),
            Err(message) => Err(Refused {
                message,
                hint: log.hint.take(),
            }),
        }
    }
}

/// A reader's hold on a shared volume, as an entry of its ledger: given back at its cleanup,
/// which undoes the volume after the last reader.
#[derive(Debug)]
pub struct Reader {
    shared: Arc<Shared>,
    /// The reader's turn, once it has the publication.
    turn: Arc<Mutex<Option<OwnedMutexGuard<()>>>>,
}

impl Reader {
    fn handle(&self) -> Reader {
        Reader {
            shared: self.shared.clone(),
            turn: self.turn.clone(),
        }
    }
}

impl Resource for Reader {
    fn describe(&self) -> String {
        format!("a turn with the {}", self.shared.sharing.name())
    }

    fn teardown(self: Box<Self>) -> BoxFuture<'static, TeardownOutcome> {
        Box::pin(async move {
            drop(self.turn.lock().map(|mut t| t.take()));
            let left = self.shared.readers_left.fetch_sub(1, Ordering::SeqCst);
            if left != 1 {
                return TeardownOutcome::default();
            }
            // The last reader undoes it.
            self.shared.undo().await
        })
    }
}

impl CsiWorld {
    /// Register this clause as a reader of a shared volume, if it is one.
    pub(super) fn join_readers(&mut self) {
        let shares = &self.config().shares;
        let tags = &self.ctx().clause.tags;
        let Some(sharing) = Sharing::ALL
            .into_iter()
            .find(|s| tags.iter().any(|t| t == s.tag()))
        else {
            return;
        };
        let reader = Reader {
            shared: shares.get(sharing).clone(),
            turn: Arc::new(Mutex::new(None)),
        };
        self.reader = Some(reader.handle());
        self.ctx().ledger.track(reader);
    }
}

#[given("a volume, shared by the clauses that only read it")]
async fn shared_volume(w: &mut CsiWorld) -> StepResult {
    read(w, Sharing::Volume).await
}

#[given("a volume published for an allocation, shared by the clauses that only read it")]
async fn shared_publication(w: &mut CsiWorld) -> StepResult {
    read(w, Sharing::Publication).await
}

/// Take this clause's turn with the shared volume, made by the first reader to ask; the
/// clause's world then holds it as its first volume (and allocation).
async fn read(w: &mut CsiWorld, sharing: Sharing) -> StepResult {
    let reader = w
        .reader
        .as_ref()
        .filter(|r| r.shared.sharing == sharing)
        .map(Reader::handle)
        .ok_or_else(|| {
            w.ctx().harness_error(format!(
                "only a clause tagged @{} reads the {}",
                sharing.tag(),
                sharing.name()
            ))
        })?;
    let shared = reader.shared.clone();
    let run = w.ctx().run.clone();
    let template = w.ctx().clause.clone();
    let made = shared
        .made
        .get_or_init(|| shared.make(run, &template))
        .await
        .clone();
    let turn = shared.turn.clone().lock_owned().await;
    if let Ok(mut t) = reader.turn.lock() {
        *t = Some(turn);
    }
    match made {
        Ok(p) => {
            for mut ev in p.events {
                ev.operation = format!("{} (shared)", ev.operation);
                ev.notes.push(format!(
                    "made once for the clauses tagged @{}, before this one read it",
                    sharing.tag()
                ));
                w.ctx().record(ev);
            }
            w.shared_base = Some(p.base);
            w.vols = vec![p.vol];
            w.allocs = p.alloc.into_iter().collect();
            w.publish_context = p.publish_context;
            w.controller_published = p.controller_published;
            Ok(())
        }
        Err(Refused { message, hint }) => Err(match hint {
            Some(Hint::Blocked(root)) => w.ctx().blocked(&root, message),
            Some(Hint::Skip(reason)) => w.ctx().skip(reason),
            Some(Hint::HarnessError) => {
                w.ctx().hint(Hint::HarnessError);
                message
            }
            Some(Hint::TimedOut) => {
                w.ctx().hint(Hint::TimedOut);
                message
            }
            None => message,
        }),
    }
}
