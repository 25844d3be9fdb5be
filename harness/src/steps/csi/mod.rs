//! Step definitions of the CSI suite, and the World they share.
//!
//! Every call goes through [`CsiWorld::record`]; calls that make something (a volume, a
//! snapshot, a publication, a stage, a publish) register its undo in the scenario's ledger when
//! they succeed, whether or not the scenario expected them to.

pub mod block;
pub mod budget;
mod common;
mod config;
mod controller;
mod expansion;
mod groups;
mod identity;
mod modify;
mod node;
mod nomad;
pub mod ready;
mod requests;
pub mod shared;
mod snapshots;
pub mod volumes;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::plugins::csi::cleanup::{Pending, Undo, UndoContext};
use crate::plugins::csi::{Connection, Rpc, call, pb};
use crate::recorder::Hint;
use crate::world::{ScenarioCtx, SuiteWorld};

pub use config::{Capabilities, CsiConfig};
pub use requests::Mode;
// The judges of plugin answers that the CSI fuzz target runs (crate::fuzz_api).
pub(crate) use controller::nomad_compare;
pub(crate) use groups::group_problems;
pub(crate) use identity::{domain_style, ready};
pub(crate) use nomad::reachable;

/// The outcome of a step: `Err` carries the whole failure message.
pub type StepResult = Result<(), String>;

/// A volume the scenario created.
#[derive(Clone, Debug)]
pub struct Vol {
    pub name: String,
    pub id: String,
    pub capacity: i64,
    pub mode: Mode,
    /// Nomad's own ID for the volume: what its staging and allocation paths are named after.
    pub nomad_id: String,
    pub volume: Option<serde_json::Value>,
    /// The capacity range it was created with (what a retry of its CreateVolume sends).
    pub range: Option<pb::CapacityRange>,
    /// One of the user's `--volume` volumes, registered rather than created: never deleted.
    pub borrowed: bool,
}

#[derive(Clone, Debug)]
pub struct Snap {
    pub name: String,
    pub id: String,
    pub source: String,
}

/// One page of a listing: the IDs on it and the token it handed out.
#[derive(Clone, Debug, Default)]
pub struct Page {
    pub ids: Vec<String>,
    pub next_token: String,
}

/// Every page of a listing, for failure messages: what each held and the token it gave.
pub fn describe_pages(pages: &[Page]) -> String {
    pages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            format!(
                "page {}: {} entr{} {:?}, next_token {:?}",
                i + 1,
                p.ids.len(),
                if p.ids.len() == 1 { "y" } else { "ies" },
                p.ids,
                p.next_token
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A group snapshot the scenario created.
#[derive(Clone, Debug)]
pub struct GroupSnap {
    pub name: String,
    pub id: String,
    pub snapshot_ids: Vec<String>,
}

/// An allocation that claims a volume on the node.
#[derive(Clone, Debug)]
pub struct Alloc {
    pub id: String,
    pub target: PathBuf,
    pub readonly: bool,
}

#[derive(Debug, Default, cucumber::World)]
pub struct CsiWorld {
    ctx: Option<ScenarioCtx<CsiConfig>>,
    vols: Vec<Vol>,
    snaps: Vec<Snap>,
    groups: Vec<GroupSnap>,
    allocs: Vec<Alloc>,
    /// Calls of the latest When step.
    last: Vec<Rpc>,
    /// Pages of the latest paginated listing.
    pages: Vec<Page>,
    /// What the latest unfiltered listing had to show: every volume (or snapshot) the run made
    /// before the listing began and no call had asked to delete by the time it ended, whichever
    /// clause made it. What the plugin puts last on its pages is then always among what is
    /// checked, whatever other clauses run beside this one.
    must_list: std::collections::BTreeSet<String>,
    /// The publish context of the first ControllerPublishVolume.
    publish_context: Option<serde_json::Value>,
    /// How many NodeStageVolume calls the latest claim made.
    stage_calls: usize,
    /// Undo flags of what the scenario made, so that what a step undid is not undone again.
    undone: HashMap<Undo, Arc<AtomicBool>>,
    /// The time Probe took to report ready, or why it never did.
    ready_after: Option<Result<std::time::Duration, String>>,
    /// Steps of repeated lifecycles that did not succeed.
    round_failures: Vec<String>,
    /// Nomad claims: the volume's index and the allocation; `released` marks the ones whose
    /// allocation stopped.
    claims: Vec<(usize, Alloc, bool)>,
    /// Volumes ControllerPublishVolume has published to the node (by volume ID).
    controller_published: std::collections::HashSet<String>,
    /// Loop devices found behind block volumes' targets when they were published; checked
    /// again after the scenario's cleanup.
    loops_seen: crate::loop_watch::LoopWatch,
    /// Loop devices behind block targets that the claims attached (not there before them).
    claim_loops: Vec<crate::loop_devices::Attached>,
    /// A file was written into the first volume through a claim, to look for in its copies.
    content_marker: bool,
    undo_ctx: Option<Arc<UndoContext>>,
    /// Attachments of the node's budget this clause holds, and the volumes it attached.
    attachments_held: u32,
    attached: std::collections::HashSet<String>,
    /// The size this clause creates volumes with, once a CreateVolume refused the run's
    /// `--test-volume-size` as OUT_OF_RANGE and a size the plugin accepts was found; with
    /// `size_unspecified`, no capacity range at all (the plugin's own size, as Nomad asks when
    /// a volume specification gives no capacity).
    size: Option<i64>,
    size_unspecified: bool,
    /// The size the clause's ControllerExpandVolume asked for: twice the volume's, or less
    /// when the plugin refused that as OUT_OF_RANGE (expansion.rs, grow).
    expanded_to: Option<i64>,
    /// This clause's hold on a shared volume, when it reads one (shared.rs).
    reader: Option<shared::Reader>,
    /// Nomad's base directory of the shared volume, once this clause reads it: its staging and
    /// allocation paths are there.
    shared_base: Option<PathBuf>,
}

impl SuiteWorld for CsiWorld {
    type Config = CsiConfig;

    fn attach(&mut self, ctx: ScenarioCtx<CsiConfig>) {
        self.undo_ctx = Some(Arc::new(UndoContext {
            controller: ctx.run.config.controller.clone(),
            node: ctx.run.config.node.clone(),
            secrets: ctx.run.config.secrets.clone(),
            deadline: ctx.run.profile.csi.rpc_deadline,
            case: ctx.case.clone(),
            known_volumes: ctx.run.config.known_volumes.clone(),
            known_snapshots: ctx.run.config.known_snapshots.clone(),
        }));
        // Tracked before anything the scenario makes, so checked after all of it is undone.
        ctx.ledger.track(self.loops_seen.clone());
        self.ctx = Some(ctx);
    }

    fn scenario(&self) -> Option<&ScenarioCtx<CsiConfig>> {
        self.ctx.as_ref()
    }

    fn prepare(&mut self) -> futures::future::LocalBoxFuture<'_, ()> {
        Box::pin(async move {
            use budget::Declared;
            self.join_readers();
            let declared = Declared::from_tags(&self.ctx().clause.tags);
            let n = match (declared, &self.config().attachments) {
                (_, None) | (Declared::Lazy, _) => return,
                (Declared::All, Some(b)) => b.limit(),
                (Declared::Count(n), Some(_)) => n,
            };
            self.take_attachments(n).await;
        })
    }
}

/// One RPC through a connection, recorded in the case. `$conn` is `controller` or `node`,
/// `$client` the client constructor on the connection.
macro_rules! rpc {
    ($w:expr, $conn:ident, $client:ident, $service:literal, $method:literal, $fn:ident, $req:expr) => {{
        let conn = $w.config().$conn.clone();
        let deadline = $w.ctx().run.profile.csi.rpc_deadline;
        let mut cl = conn.$client();
        let (rpc, resp) =
            $crate::plugins::csi::call($service, $method, $req, deadline, |r| async move {
                cl.$fn(r).await
            })
            .await;
        $w.record(&rpc, &conn);
        (rpc, resp)
    }};
}
pub(crate) use rpc;

impl CsiWorld {
    pub fn ctx(&self) -> &ScenarioCtx<CsiConfig> {
        self.ctx
            .as_ref()
            .expect("the before hook attaches a scenario context")
    }

    pub fn config(&self) -> &CsiConfig {
        &self.ctx().run.config
    }

    pub fn record(&self, rpc: &Rpc, conn: &Connection) {
        let ctx = self.ctx();
        ctx.record(rpc.event(ctx.offset_ms(rpc.started), &conn.socket));
    }

    pub fn secrets(&self) -> HashMap<String, String> {
        self.config().secrets.clone()
    }

    /// The capability Nomad sends for `mode`, with the run's mount options
    /// (`--mount-fs-type`, `--mount-flags`) for file-system volumes.
    pub fn cap(&self, mode: Mode) -> pb::VolumeCapability {
        mode.capability_with(&self.config().mount_fs_type, &self.config().mount_flags)
    }

    /// The size this clause's volumes are created with.
    pub fn volume_size(&self) -> i64 {
        self.size.unwrap_or(self.config().volume_size)
    }

    /// The capacity range this clause's CreateVolume calls send: at least the volume size, or
    /// none once the plugin refused every size the harness could name.
    pub fn capacity_range(&self) -> Option<pb::CapacityRange> {
        if self.size_unspecified {
            return None;
        }
        requests::capacity(self.volume_size())
    }

    /// Whether the clause fell back to creating volumes without a capacity range.
    pub fn size_unspecified(&self) -> bool {
        self.size_unspecified
    }

    /// CreateVolume with a request `build` makes from the clause's volume size. A plugin may
    /// have a minimum (or maximum) volume size the run's `--test-volume-size` misses, and the
    /// spec's answer to that is OUT_OF_RANGE ("Unsupported capacity_range"): then the clause
    /// finds a size the plugin accepts (GetCapacity's minimum_volume_size, a size its error
    /// names, or no capacity range at all, so the plugin picks), notes it, and asks again.
    pub async fn create_sized(
        &mut self,
        build: impl Fn(&CsiWorld) -> pb::CreateVolumeRequest,
        mode: Mode,
    ) -> Rpc {
        let rpc = self.create_volume(build(self), mode).await;
        if rpc.code != tonic::Code::OutOfRange || self.size_unspecified {
            return rpc;
        }
        let requested = self.volume_size();
        let (size, from) = self.accepted_size(&rpc, requested).await;
        match size {
            Some(s) => self.size = Some(s),
            None => self.size_unspecified = true,
        }
        let again = match size {
            Some(s) => format!("{s} bytes ({from})"),
            None => "no capacity range, so that the plugin picks its own size (as Nomad asks when a volume specification gives no capacity)".into(),
        };
        self.ctx().note(format!(
            "CreateVolume refused {requested} bytes as OUT_OF_RANGE ({}); the clause creates its volumes with {again} instead. Give --test-volume-size to choose the size",
            rpc.message
        ));
        self.create_volume(build(self), mode).await
    }

    /// A size the plugin accepts, after `refused` (OUT_OF_RANGE for `requested` bytes).
    async fn accepted_size(&mut self, refused: &Rpc, requested: i64) -> (Option<i64>, String) {
        if self.config().caps.controller.contains("GET_CAPACITY") {
            let req = requests::get_capacity(self);
            let (_, resp) = rpc!(
                self,
                controller,
                controller,
                "Controller",
                "GetCapacity",
                get_capacity,
                req
            );
            if let Some(r) = resp {
                if let Some(min) = r.minimum_volume_size.filter(|m| *m > requested) {
                    return (Some(min), "GetCapacity's minimum_volume_size".into());
                }
                if let Some(max) = r.maximum_volume_size.filter(|m| *m > 0 && *m < requested) {
                    return (Some(max), "GetCapacity's maximum_volume_size".into());
                }
            }
        }
        match size_in_message(&refused.message, requested) {
            Some(s) => (Some(s), "a size the plugin's error names".into()),
            None => (None, String::new()),
        }
    }

    /// Take `n` of the node's attachments for the rest of the clause.
    async fn take_attachments(&mut self, n: u32) {
        let Some(budget) = &self.config().attachments else {
            return;
        };
        let (hold, waited) = budget.take(n).await;
        let limit = budget.limit();
        let count = hold.count();
        if waited >= std::time::Duration::from_millis(1) {
            crate::recorder::lock(&self.ctx().case).notes.push(format!(
                "waited {} for {count} of the node's {limit} attachments (max_volumes_per_node), held by other clauses",
                crate::fmt_duration(waited),
            ));
        }
        self.ctx().ledger.track(hold);
        self.attachments_held += count;
    }

    /// Before a call that attaches `volume_id` to the node (ControllerPublishVolume,
    /// NodeStageVolume, NodePublishVolume): make sure the clause holds an attachment for it.
    async fn reserve_attachment(&mut self, volume_id: &str) -> Result<(), String> {
        if self.config().attachments.is_none()
            || volume_id.is_empty()
            || self.attached.contains(volume_id)
        {
            return Ok(());
        }
        let whole_node = self
            .config()
            .attachments
            .as_ref()
            .is_some_and(|b| self.attachments_held >= b.limit());
        if self.attached.len() as u32 >= self.attachments_held && !whole_node {
            if self.attachments_held > 0 {
                // Waiting while holding could deadlock with another clause doing the same.
                return Err(self.ctx().harness_error(format!(
                    "this clause attaches more volumes to the node ({}) than it declares: tag it @attaches-{} in the spec",
                    self.attached.len() + 1,
                    self.attached.len() + 1
                )));
            }
            self.take_attachments(1).await;
        }
        self.attached.insert(volume_id.to_string());
        Ok(())
    }

    /// The node ID to publish to, as Nomad sends it: never empty. A node plugin that reported
    /// none blocks the clause on CSI-NODE-INFO (Nomad refuses such a plugin).
    pub fn publish_node_id(&self) -> Result<String, String> {
        let id = self.config().node_id.clone();
        if !id.is_empty() {
            return Ok(id);
        }
        if self.config().node_probed {
            let text = self.fail(
                "precondition: NodeGetInfo reports a node ID (Nomad sends it in every ControllerPublishVolume)",
                "NodeGetInfo gave no node_id: Nomad would never publish a volume to this node",
                &[],
            );
            return Err(self.ctx().blocked("CSI-NODE-INFO", text));
        }
        Err(self
            .ctx()
            .skip("controller-only run without --node-id: no node ID to publish to"))
    }

    /// Whether the run can look inside volumes it creates: controller and node service both.
    pub fn can_read_volumes(&self) -> bool {
        self.config().plugin_type == crate::cli::PluginType::Monolith && self.config().node_probed
    }

    /// Whether this is a node-only run: volumes come from `--volume`, not CreateVolume.
    pub fn node_only(&self) -> bool {
        self.config().plugin_type == crate::cli::PluginType::Node
    }

    /// Whether the clauses claim the user's `--volume` volumes instead of creating their own:
    /// node-only runs, and controllers that cannot create (volumes registered with Nomad).
    pub fn borrows_volumes(&self) -> bool {
        self.node_only()
            || !self
                .config()
                .caps
                .controller
                .contains("CREATE_DELETE_VOLUME")
                && self.config().user_volumes.is_some()
    }

    /// Register `undo` in the ledger; returns its flag.
    fn track(&mut self, undo: Undo) {
        let flag = Arc::new(AtomicBool::new(false));
        if let Some(ctx) = &self.undo_ctx {
            self.ctx().ledger.track(Pending {
                undo: undo.clone(),
                done: flag.clone(),
                ctx: ctx.clone(),
            });
        }
        self.undone.insert(undo, flag);
    }

    /// Tracks `undo` unless cleanup already has it pending: a repeated publish or stage (an
    /// idempotency check) needs one undo, but one made again after a step undid it (a second
    /// claim after a release) needs a new one, newest in the ledger.
    fn track_unless_pending(&mut self, undo: Undo) {
        match self.undone.get(&undo) {
            Some(done) if !done.load(Ordering::SeqCst) => {}
            _ => self.track(undo),
        }
    }

    /// Registers `undo` before the call that makes what it undoes (a publish, a stage), so that a
    /// call cut short by an interrupt, which may have done its work without the harness seeing
    /// the answer, is still undone, in order (unpublish and unstage before the volume is
    /// deleted). Returns whether it was registered now: then a call that fails made nothing,
    /// and [`Self::made_nothing`] withdraws it.
    fn track_before(&mut self, undo: &Undo) -> bool {
        let fresh = !matches!(self.undone.get(undo), Some(done) if !done.load(Ordering::SeqCst));
        if fresh {
            self.track(undo.clone());
        }
        fresh
    }

    /// The call registered with [`Self::track_before`] failed: nothing to undo.
    fn made_nothing(&self, undo: &Undo, fresh: bool) {
        if fresh {
            self.mark_undone(undo);
        }
    }

    /// A step undid `undo` itself: cleanup must not do it again.
    fn mark_undone(&self, undo: &Undo) {
        if let Some(f) = self.undone.get(undo) {
            f.store(true, Ordering::SeqCst);
        }
    }

    /// A name unique to this run and scenario.
    pub fn unique_name(&self, what: &str) -> String {
        let n = self.vols.len() + self.snaps.len() + self.groups.len() + self.allocs.len();
        format!("{}-{what}-{n}", self.ctx().token)
    }

    pub fn vol(&self, i: usize) -> Result<&Vol, String> {
        self.vols.get(i).ok_or_else(|| {
            self.ctx()
                .harness_error(format!("the scenario has no volume #{}", i + 1))
        })
    }

    pub fn last_call(&self) -> Result<&Rpc, String> {
        self.last.last().ok_or_else(|| {
            self.ctx()
                .harness_error("no call was made before this step")
        })
    }

    // ---- calls that make things ----------------------------------------------------------

    pub async fn create_volume(&mut self, req: pb::CreateVolumeRequest, mode: Mode) -> Rpc {
        let name = req.name.clone();
        let capacity = req
            .capacity_range
            .as_ref()
            .map(|c| c.required_bytes)
            .unwrap_or(0);
        let sent_range = req.capacity_range;
        let (rpc, resp) = rpc!(
            self,
            controller,
            controller,
            "Controller",
            "CreateVolume",
            create_volume,
            req
        );
        if let Some(v) = resp.and_then(|r| r.volume) {
            self.adopt_volume(&name, &v, capacity, mode);
            if let Some(last) = self.vols.last_mut() {
                last.range = sent_range;
            }
        }
        rpc
    }

    /// Remember a volume the plugin made, and register its deletion.
    pub fn adopt_volume(&mut self, name: &str, v: &pb::Volume, requested: i64, mode: Mode) {
        self.config().known_volumes.made(&v.volume_id);
        let undo = Undo::DeleteVolume {
            volume_id: v.volume_id.clone(),
        };
        self.track_unless_pending(undo);
        let nomad_id = format!("vol{}", self.vols.len());
        let range = if self.size_unspecified {
            None
        } else {
            requests::capacity(requested)
        };
        self.vols.push(Vol {
            name: name.to_string(),
            id: v.volume_id.clone(),
            capacity: v.capacity_bytes.max(requested),
            mode,
            nomad_id,
            volume: serde_json::to_value(v).ok(),
            range,
            borrowed: false,
        });
    }

    /// Create a volume with the run's size and parameters; anything but success fails. A
    /// node-only run borrows one of the `--volume` volumes instead.
    pub async fn must_create_volume(&mut self, mode: Mode) -> Result<usize, String> {
        if self.borrows_volumes() {
            return self.borrow_volume(mode).await;
        }
        let name = self.unique_name("vol");
        let rpc = self
            .create_sized(|w| requests::create_volume(w, &name, mode), mode)
            .await;
        if rpc.ok()
            && let Some(v) = self.vols.last().filter(|v| v.name == name)
        {
            if !v.id.is_empty() {
                return Ok(self.vols.len() - 1);
            }
            // A volume with no ID cannot be named in any later call: a clause that went on
            // would judge refusals of an empty volume_id, not what it asks about. CreateVolume's
            // own clause judges the answer.
            return Err(self.precondition(
                "CSI-CONTROLLER-CREATE",
                "CreateVolume returns a volume with a volume_id",
                "the volume's volume_id is empty",
                &[&rpc],
            ));
        }
        if rpc.code == tonic::Code::InvalidArgument && mode != Mode::SingleNodeWriter {
            return Err(self.ctx().skip(format!(
                "the plugin does not support {} ({})",
                mode.describe(),
                rpc.outcome()
            )));
        }
        // A block or multi-writer volume is judged first by the clauses that need one.
        let root = match mode {
            Mode::SingleNodeWriter => "CSI-CONTROLLER-CREATE",
            Mode::BlockSingleNodeWriter => "CSI-BLOCK-CLAIM",
            Mode::MultiNodeMultiWriter => "CSI-NOMAD-SHARED-VOLUME",
            Mode::MultiNodeSingleWriter => "CSI-NOMAD-READ-BESIDE-WRITE",
        };
        Err(self.precondition(
            root,
            &format!(
                "CreateVolume of a {} volume succeeds",
                mode.describe_short()
            ),
            &rpc.summary(),
            &[&rpc],
        ))
    }

    /// A node-only run's stand-in for CreateVolume: one of the user's volumes, for this clause
    /// alone until its cleanup is done. Never deleted.
    async fn borrow_volume(&mut self, mode: Mode) -> Result<usize, String> {
        if mode != Mode::SingleNodeWriter {
            return Err(self.ctx().skip(format!(
                "the --volume volumes are claimed as single-node-writer file-system volumes, and this clause needs {}",
                mode.describe()
            )));
        }
        let Some(pool) = &self.config().user_volumes else {
            return Err(self
                .ctx()
                .skip("no volumes to claim: name existing ones with --volume ID[,CONTEXT]"));
        };
        let lease = pool.lease().await;
        let volume = pb::Volume {
            volume_id: lease.volume.id.clone(),
            volume_context: lease.volume.context.clone(),
            capacity_bytes: 0,
            ..Default::default()
        };
        self.ctx().ledger.track(lease);
        let nomad_id = format!("vol{}", self.vols.len());
        self.vols.push(Vol {
            name: volume.volume_id.clone(),
            id: volume.volume_id.clone(),
            capacity: 0,
            mode,
            nomad_id,
            volume: serde_json::to_value(&volume).ok(),
            range: None,
            borrowed: true,
        });
        Ok(self.vols.len() - 1)
    }

    pub async fn delete_volume(&mut self, id: &str) -> Rpc {
        self.config().known_volumes.deleting(id);
        let req = pb::DeleteVolumeRequest {
            volume_id: id.to_string(),
            secrets: self.secrets(),
        };
        let (rpc, _) = rpc!(
            self,
            controller,
            controller,
            "Controller",
            "DeleteVolume",
            delete_volume,
            req
        );
        if rpc.ok() {
            self.mark_undone(&Undo::DeleteVolume {
                volume_id: id.to_string(),
            });
            // A deleted volume no longer takes one of the node's attachments.
            self.attached.remove(id);
        }
        rpc
    }

    pub async fn create_snapshot(&mut self, req: pb::CreateSnapshotRequest) -> Rpc {
        let name = req.name.clone();
        let (rpc, resp) = rpc!(
            self,
            controller,
            controller,
            "Controller",
            "CreateSnapshot",
            create_snapshot,
            req
        );
        if let Some(s) = resp.and_then(|r| r.snapshot) {
            self.config().known_snapshots.made(&s.snapshot_id);
            let undo = Undo::DeleteSnapshot {
                snapshot_id: s.snapshot_id.clone(),
            };
            self.track_unless_pending(undo);
            self.snaps.push(Snap {
                name,
                id: s.snapshot_id,
                source: s.source_volume_id,
            });
        }
        rpc
    }

    pub async fn delete_snapshot(&mut self, id: &str) -> Rpc {
        self.config().known_snapshots.deleting(id);
        let req = pb::DeleteSnapshotRequest {
            snapshot_id: id.to_string(),
            secrets: self.secrets(),
        };
        let (rpc, _) = rpc!(
            self,
            controller,
            controller,
            "Controller",
            "DeleteSnapshot",
            delete_snapshot,
            req
        );
        if rpc.ok() {
            self.mark_undone(&Undo::DeleteSnapshot {
                snapshot_id: id.to_string(),
            });
        }
        rpc
    }

    pub async fn create_group_snapshot(
        &mut self,
        req: pb::CreateVolumeGroupSnapshotRequest,
    ) -> (Rpc, Option<pb::VolumeGroupSnapshot>) {
        let name = req.name.clone();
        let (rpc, resp) = rpc!(
            self,
            controller,
            group,
            "GroupController",
            "CreateVolumeGroupSnapshot",
            create_volume_group_snapshot,
            req
        );
        let group = resp.and_then(|r| r.group_snapshot);
        if let Some(g) = &group {
            let snapshot_ids: Vec<String> =
                g.snapshots.iter().map(|s| s.snapshot_id.clone()).collect();
            let undo = Undo::DeleteGroupSnapshot {
                group_snapshot_id: g.group_snapshot_id.clone(),
                snapshot_ids: snapshot_ids.clone(),
            };
            self.track_unless_pending(undo);
            self.groups.push(GroupSnap {
                name,
                id: g.group_snapshot_id.clone(),
                snapshot_ids,
            });
        }
        (rpc, group)
    }

    pub async fn delete_group_snapshot(&mut self, id: &str, snapshot_ids: Vec<String>) -> Rpc {
        for s in &snapshot_ids {
            self.config().known_snapshots.deleting(s);
        }
        let req = pb::DeleteVolumeGroupSnapshotRequest {
            group_snapshot_id: id.to_string(),
            snapshot_ids: snapshot_ids.clone(),
            secrets: self.secrets(),
        };
        let (rpc, _) = rpc!(
            self,
            controller,
            group,
            "GroupController",
            "DeleteVolumeGroupSnapshot",
            delete_volume_group_snapshot,
            req
        );
        if rpc.ok() {
            self.mark_undone(&Undo::DeleteGroupSnapshot {
                group_snapshot_id: id.to_string(),
                snapshot_ids,
            });
        }
        rpc
    }

    pub async fn controller_publish(
        &mut self,
        req: pb::ControllerPublishVolumeRequest,
    ) -> Result<(Rpc, Option<pb::ControllerPublishVolumeResponse>), String> {
        self.reserve_attachment(&req.volume_id).await?;
        let undo = Undo::ControllerUnpublish {
            volume_id: req.volume_id.clone(),
            node_id: req.node_id.clone(),
        };
        let fresh = self.track_before(&undo);
        let (rpc, resp) = rpc!(
            self,
            controller,
            controller,
            "Controller",
            "ControllerPublishVolume",
            controller_publish_volume,
            req
        );
        if !rpc.ok() {
            self.made_nothing(&undo, fresh);
        }
        Ok((rpc, resp))
    }

    pub async fn controller_unpublish(&mut self, req: pb::ControllerUnpublishVolumeRequest) -> Rpc {
        let undo = Undo::ControllerUnpublish {
            volume_id: req.volume_id.clone(),
            node_id: req.node_id.clone(),
        };
        let (rpc, _) = rpc!(
            self,
            controller,
            controller,
            "Controller",
            "ControllerUnpublishVolume",
            controller_unpublish_volume,
            req
        );
        if rpc.ok() {
            self.mark_undone(&undo);
            if let Undo::ControllerUnpublish { volume_id, .. } = &undo {
                self.attached.remove(volume_id);
            }
        }
        rpc
    }

    pub async fn node_stage(&mut self, req: pb::NodeStageVolumeRequest) -> Result<Rpc, String> {
        self.reserve_attachment(&req.volume_id).await?;
        let undo = Undo::NodeUnstage {
            volume_id: req.volume_id.clone(),
            staging_path: req.staging_target_path.clone(),
        };
        let fresh = self.track_before(&undo);
        let (rpc, _) = rpc!(
            self,
            node,
            node,
            "Node",
            "NodeStageVolume",
            node_stage_volume,
            req
        );
        if !rpc.ok() {
            self.made_nothing(&undo, fresh);
        }
        Ok(rpc)
    }

    pub async fn node_unstage(&mut self, req: pb::NodeUnstageVolumeRequest) -> Rpc {
        let undo = Undo::NodeUnstage {
            volume_id: req.volume_id.clone(),
            staging_path: req.staging_target_path.clone(),
        };
        let (rpc, _) = rpc!(
            self,
            node,
            node,
            "Node",
            "NodeUnstageVolume",
            node_unstage_volume,
            req
        );
        if rpc.ok() {
            self.mark_undone(&undo);
        }
        rpc
    }

    pub async fn node_publish(&mut self, req: pb::NodePublishVolumeRequest) -> Result<Rpc, String> {
        self.reserve_attachment(&req.volume_id).await?;
        let undo = Undo::NodeUnpublish {
            volume_id: req.volume_id.clone(),
            target_path: req.target_path.clone(),
        };
        let fresh = self.track_before(&undo);
        let (rpc, _) = rpc!(
            self,
            node,
            node,
            "Node",
            "NodePublishVolume",
            node_publish_volume,
            req
        );
        if !rpc.ok() {
            self.made_nothing(&undo, fresh);
        }
        Ok(rpc)
    }

    pub async fn node_unpublish(&mut self, req: pb::NodeUnpublishVolumeRequest) -> Rpc {
        let undo = Undo::NodeUnpublish {
            volume_id: req.volume_id.clone(),
            target_path: req.target_path.clone(),
        };
        let (rpc, _) = rpc!(
            self,
            node,
            node,
            "Node",
            "NodeUnpublishVolume",
            node_unpublish_volume,
            req
        );
        if rpc.ok() {
            self.mark_undone(&undo);
        }
        rpc
    }

    // ---- Nomad's paths -------------------------------------------------------------------

    /// stage_publish_base_dir: where Nomad makes staging and per-allocation directories.
    pub fn mount_base(&self) -> PathBuf {
        if let Some(base) = &self.shared_base {
            return base.clone();
        }
        match &self.config().mount_dir {
            Some(d) => d.join(format!(
                "{}-{}",
                self.ctx().token,
                self.ctx().clause.id.to_ascii_lowercase()
            )),
            None => self.ctx().scratch().join("csi"),
        }
    }

    /// `<base>/staging/<namespace>/<volume>/<usage>`, created as Nomad does (mode 0700).
    pub fn staging_path(&self, vol: &Vol, readonly: bool) -> Result<PathBuf, String> {
        let p = self
            .mount_base()
            .join("staging/default")
            .join(&vol.nomad_id)
            .join(vol.mode.usage(readonly));
        make_dir(&p).map_err(|e| self.ctx().harness_error(e))?;
        Ok(p)
    }

    /// `<base>/per-alloc/<alloc>/<volume>/<usage>`; Nomad creates the parent, not the target.
    pub fn target_path(&self, alloc: &str, vol: &Vol, readonly: bool) -> Result<PathBuf, String> {
        let p = self
            .mount_base()
            .join("per-alloc")
            .join(alloc)
            .join(&vol.nomad_id)
            .join(vol.mode.usage(readonly));
        if let Some(parent) = p.parent() {
            make_dir(parent).map_err(|e| self.ctx().harness_error(e))?;
        }
        Ok(p)
    }

    pub fn new_alloc_id(&mut self) -> String {
        use rand::RngExt as _;
        let bytes: [u8; 16] = self.ctx.as_mut().expect("attached").rng.random();
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string()
    }

    pub fn stages(&self) -> bool {
        self.config().caps.node.contains("STAGE_UNSTAGE_VOLUME")
    }

    pub fn controller_publishes(&self) -> bool {
        self.config()
            .caps
            .controller
            .contains("PUBLISH_UNPUBLISH_VOLUME")
    }

    // ---- failures ------------------------------------------------------------------------

    /// A call this clause needs (not the one it judges) failed: the verdict is Blocked by
    /// `root`, the clause whose check that call is, and the message says what failed.
    pub fn precondition(&self, root: &str, expected: &str, seen: &str, calls: &[&Rpc]) -> String {
        let root = self.root_for(root, calls);
        let text = self.fail(&format!("precondition: {expected}"), seen, calls);
        self.ctx().blocked(root, text)
    }

    /// The clause that judges why `calls` failed. A ControllerPublishVolume refused with
    /// RESOURCE_EXHAUSTED while the harness keeps the node within its max_volumes_per_node (the
    /// attachment budget) is the node's limit counting attachments that were undone:
    /// CSI-CONTROLLER-UNPUBLISH-FREES judges that (or, where it does not run,
    /// CSI-NOMAD-MAX-VOLUMES-PER-NODE), not the clause the claim belongs to, which passes on
    /// such a plugin as long as the node is not full.
    fn root_for<'a>(&self, root: &'a str, calls: &[&Rpc]) -> &'a str {
        let exhausted = calls.iter().any(|c| {
            c.method == "ControllerPublishVolume" && c.code == tonic::Code::ResourceExhausted
        });
        if !exhausted || self.config().attachments.is_none() {
            return root;
        }
        [
            "CSI-CONTROLLER-UNPUBLISH-FREES",
            "CSI-NOMAD-MAX-VOLUMES-PER-NODE",
        ]
        .into_iter()
        .find(|c| self.config().judged.contains(*c))
        .unwrap_or(root)
    }

    /// What the clause requires, what was seen, and how to reproduce. A call that got no answer
    /// before its deadline makes the verdict TimedOut.
    pub fn fail(&self, expected: &str, seen: &str, calls: &[&Rpc]) -> String {
        if calls.iter().any(|c| c.timed_out) {
            self.ctx().hint(Hint::TimedOut);
        }
        // After a --launch run the plugin and its socket are gone: the reproduce block starts
        // it again at a path it names, then makes the calls there.
        let launched = self.config().launcher.as_ref().map(|l| {
            let dir = std::path::PathBuf::from(format!(
                "/tmp/nomad-conform-repro-{}",
                self.ctx().run.run_id
            ));
            (l.reproduce_start(&dir), dir.join("csi.sock"))
        });
        let mut repro: Vec<String> = Vec::new();
        if let Some((start, _)) = &launched
            && !calls.is_empty()
        {
            repro.push(start.clone());
        }
        repro.extend(calls.iter().map(|c| {
            let socket = match (&launched, c.path.split('/').nth(1)) {
                (Some((_, s)), _) => s,
                (None, Some("csi.v1.Node")) => &self.config().node.socket,
                (None, _) => &self.config().controller.socket,
            };
            c.reproduce(socket)
        }));
        let hint = size_hint(calls, self.volume_size()).unwrap_or_default();
        // A release refused for want of secrets: Nomad never sends them there.
        let secrets_hint = calls
            .iter()
            .find(|c| {
                c.method == "ControllerUnpublishVolume"
                    && matches!(
                        c.code,
                        tonic::Code::InvalidArgument
                            | tonic::Code::Unauthenticated
                            | tonic::Code::PermissionDenied
                    )
            })
            .map(|_| {
                "\nnote: Nomad sends no secrets with ControllerUnpublishVolume (client/structs/csi.go copies only the volume and node IDs), so neither does the harness: a plugin that needs them can never release a claim"
            })
            .unwrap_or_default();
        // A plugin the harness launched that died by itself: its crash first, in a line (what
        // the one-line reason shows), and its last words after what was seen.
        let seen = match self.config().launcher.as_ref().and_then(|l| l.died()) {
            Some((status, log)) => format!(
                "{}\n{seen}\nthe plugin process died ({status}); its last words:\n{}",
                crate::crash::death_line(&status, &log),
                crate::crash::last_words(&log)
            ),
            None => seen.to_string(),
        };
        crate::steps::failure_text(expected, &format!("{seen}{hint}{secrets_hint}"), &repro)
    }
}

/// A size in bytes that an error message names, other than `requested`: the smallest one above
/// it (a minimum), else the largest one below it (a maximum). Sizes are plain byte counts of at
/// least 1 KiB or numbers with a unit (`1GiB`, `10 Gi`, `512 MB`, `4k`).
/// A create at the run's size (`run_size`) refused as OUT_OF_RANGE, whose error names a size:
/// the line that says which flag chooses it. A clause's own larger or smaller request refused
/// is no reason to change the run's size, and gets none.
fn size_hint(calls: &[&Rpc], run_size: i64) -> Option<String> {
    calls
        .iter()
        .filter(|c| c.method == "CreateVolume" && c.code == tonic::Code::OutOfRange)
        .filter(|c| {
            c.request
                .pointer("/capacity_range/required_bytes")
                .and_then(|b| b.as_i64().or_else(|| b.as_str()?.parse().ok()))
                .is_none_or(|b| b == run_size)
        })
        .find_map(|c| size_in_message(&c.message, 0))
        .map(|s| {
            format!(
                "\nhint: the plugin refused the volume size as OUT_OF_RANGE and its error names {s} bytes: rerun with --test-volume-size {s}"
            )
        })
}

pub fn size_in_message(message: &str, requested: i64) -> Option<i64> {
    let lower = message.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut sizes = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() || (i > 0 && bytes[i - 1].is_ascii_alphanumeric()) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        let Ok(number) = lower[start..i].parse::<f64>() else {
            continue;
        };
        let mut j = i;
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        let unit_start = j;
        while j < bytes.len() && bytes[j].is_ascii_alphabetic() {
            j += 1;
        }
        let unit = &lower[unit_start..j];
        let factor: f64 = match unit {
            "b" | "byte" | "bytes" => 1.0,
            "k" | "kb" => 1e3,
            "ki" | "kib" => 1024.0,
            "m" | "mb" => 1e6,
            "mi" | "mib" => 1024.0 * 1024.0,
            "g" | "gb" => 1e9,
            "gi" | "gib" => 1024.0 * 1024.0 * 1024.0,
            "t" | "tb" => 1e12,
            "ti" | "tib" => 1024.0f64.powi(4),
            _ if number >= 1024.0 && number.fract() == 0.0 => 1.0,
            _ => continue,
        };
        let size = number * factor;
        if (1.0..9.2e18).contains(&size) {
            sizes.push(size as i64);
        }
    }
    let above = sizes.iter().copied().filter(|s| *s > requested).min();
    above.or_else(|| sizes.iter().copied().filter(|s| *s < requested).max())
}

fn make_dir(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .map_err(|e| format!("failed to create {}: {e}", p.display()))
}

/// Whether `path` is a mount point now; an error when that cannot be told.
pub fn is_mounted(path: &Path) -> std::io::Result<bool> {
    crate::mounts::is_mount_point(path)
}

/// Call the identity service (no ledger, no tracking).
pub async fn identity_call<Req, Resp, F, Fut>(
    w: &CsiWorld,
    method: &str,
    req: Req,
    deadline: std::time::Duration,
    f: F,
) -> (Rpc, Option<Resp>)
where
    Req: serde::Serialize,
    Resp: serde::Serialize,
    F: FnOnce(tonic::Request<Req>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
{
    let (rpc, resp) = call("Identity", method, req, deadline, f).await;
    w.record(&rpc, &w.config().node);
    (rpc, resp)
}

#[cfg(test)]
mod tests {
    use super::{size_hint, size_in_message};

    #[test]
    fn sizes_an_error_names() {
        let gib = 1i64 << 30;
        let m = "volumes are at least 1073741824 bytes (1 GiB); the requested range (required_bytes 67108864, limit_bytes 0) is below that minimum";
        assert_eq!(size_in_message(m, 64 << 20), Some(gib));
        assert_eq!(size_in_message("minimum size is 10Gi", gib), Some(10 * gib));
        assert_eq!(
            size_in_message("size must be at least 5 GB", gib),
            Some(5_000_000_000)
        );
        // A maximum below the request.
        assert_eq!(size_in_message("at most 512 MiB", gib), Some(512 << 20));
        // Small numbers without a unit are not sizes; nor are digits inside words.
        assert_eq!(size_in_message("error 42 in v1beta3", gib), None);
        assert_eq!(size_in_message("out of range", gib), None);
    }

    #[test]
    fn the_size_hint_names_a_size_only_for_the_runs_own_size() {
        let refused = |required: i64| crate::plugins::csi::Rpc {
            method: "CreateVolume".into(),
            path: "/csi.v1.Controller/CreateVolume".into(),
            request: serde_json::json!({"capacity_range": {"required_bytes": required}}),
            code: tonic::Code::OutOfRange,
            message: "volumes are at most 1073741824 bytes".into(),
            details_len: 0,
            response: None,
            started: std::time::Instant::now(),
            duration: std::time::Duration::ZERO,
            deadline: std::time::Duration::from_secs(1),
            timed_out: false,
        };
        let gib = 1 << 30;
        let at_run_size = refused(2 * gib);
        let hint = size_hint(&[&at_run_size], 2 * gib).expect("a hint");
        assert!(hint.contains("--test-volume-size 1073741824"), "{hint}");
        // The clause asked for twice the run's size on purpose: no hint to change the run's.
        let larger = refused(4 * gib);
        assert_eq!(size_hint(&[&larger], 2 * gib), None);
    }
}
