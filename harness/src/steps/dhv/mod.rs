//! Step definitions of the dynamic host volume suite, and the World they share.
//!
//! Steps reach the plugin only through [`DhvWorld::invoke`] (which records every call) and
//! register what the plugin made in the scenario's ledger. Failure messages say what the clause
//! requires, what was seen, and how to reproduce it.

mod common;
mod config;
mod create;
mod delete;
mod fingerprint;
mod general;
mod generated;
mod side_effects;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::SeedableRng as _;

use crate::plugins::dhv::response::{self, Field};
use crate::plugins::dhv::{
    Call, CallOpts, CreatedVolume, EnvPolicy, Expect, Parameters, Plugin, VolumeRequest,
};
use crate::profile::DhvProfile;
use crate::recorder::Hint;
use crate::world::{ScenarioCtx, SuiteWorld};

pub use config::DhvConfig;

/// One volume the scenario asked for.
#[derive(Debug)]
pub struct Vol {
    pub req: VolumeRequest,
    /// What create reported, once it succeeded.
    pub created: Option<Created>,
    /// Set when a step deleted the volume, so cleanup does not delete it again.
    pub deleted: Arc<AtomicBool>,
    /// A file the scenario wrote into the volume, and its contents.
    pub marker: Option<(PathBuf, String)>,
}

#[derive(Clone, Debug)]
pub struct Created {
    pub path: String,
    pub json: serde_json::Value,
    /// The command that repeats the create that made it.
    pub reproduce: String,
    /// How long that create took: the automatic delete after a failed state save runs on
    /// what is left of the create's context.
    pub wall: Duration,
}

#[derive(Debug, Default, cucumber::World)]
pub struct DhvWorld {
    ctx: Option<ScenarioCtx<DhvConfig>>,
    /// Volumes in the order the steps asked for them: index 0 is "the volume".
    volumes: Vec<Vol>,
    /// Calls made by the latest When step.
    last: Vec<Call>,
    /// The volumes directory as it was before the latest When step.
    before: Option<BTreeSet<PathBuf>>,
    /// Other state a When step leaves for its Then steps.
    secret: Option<String>,
    generated: Option<Result<u32, String>>,
    /// Per call of the latest When step: what a failed create left in the volumes directory.
    form_leftovers: Vec<Vec<PathBuf>>,
    /// Paths named after the scenario's volumes that appeared outside the volumes directory.
    strays_seen: Vec<PathBuf>,
    /// What the working directory, the plugin directory and the private /tmp held before the
    /// calls whose writing outside their volumes is watched (see `side_effects`).
    outside_before: Option<side_effects::Outside>,
    /// Set by a When step whose special call failed and whose ordinary twin failed too: the
    /// clause is then Blocked by the clause that judges the ordinary call.
    root_problem: Option<Problem>,
    /// Held while the scenario's calls must be the only calls of the plugin (see
    /// [`Plugin::alone`]).
    alone: Option<tokio::sync::OwnedRwLockWriteGuard<()>>,
    /// The capacity range of the first create, before an update changed it.
    first_range: Option<(i64, i64)>,
}

impl SuiteWorld for DhvWorld {
    type Config = DhvConfig;

    fn attach(&mut self, ctx: ScenarioCtx<DhvConfig>) {
        self.ctx = Some(ctx);
    }

    fn scenario(&self) -> Option<&ScenarioCtx<DhvConfig>> {
        self.ctx.as_ref()
    }
}

/// The outcome of a step: `Err` carries the whole failure message.
pub type StepResult = Result<(), String>;

impl DhvWorld {
    pub fn ctx(&self) -> &ScenarioCtx<DhvConfig> {
        self.ctx
            .as_ref()
            .expect("the before hook attaches a scenario context")
    }

    fn ctx_mut(&mut self) -> &mut ScenarioCtx<DhvConfig> {
        self.ctx
            .as_mut()
            .expect("the before hook attaches a scenario context")
    }

    pub fn config(&self) -> &DhvConfig {
        &self.ctx().run.config
    }

    pub fn plugin(&self) -> Arc<Plugin> {
        self.config().plugin.clone()
    }

    pub fn deadlines(&self) -> &DhvProfile {
        &self.ctx().run.profile.dhv
    }

    /// DHV_VOLUMES_DIR of this scenario, made on first use as on a node where a first create
    /// has made it. The Nomad client never makes it (only its built-in mkdir plugin makes parent
    /// directories): the first create on a fresh node meets no directory, which
    /// DHV-CREATE-VOLUMES-DIR-MISSING judges, and there it is never made.
    pub fn volumes_dir(&self) -> PathBuf {
        let d = self.ctx().scratch().join("volumes");
        if self.ctx().clause.id != VOLUMES_DIR_CLAUSE {
            let _ = std::fs::create_dir_all(&d);
        }
        d
    }

    /// The working directory plugin calls run in (Nomad: the agent's working directory).
    pub fn cwd(&self) -> PathBuf {
        let d = self.ctx().scratch().join("cwd");
        let _ = std::fs::create_dir_all(&d);
        d
    }

    /// A new volume request with a fresh identity from the scenario's seed.
    pub fn new_request(&mut self) -> VolumeRequest {
        let n = self.volumes.len();
        let volumes_dir = self.volumes_dir();
        let config = self.config();
        let plugin_dir = config.plugin.dir.clone();
        let (capacity_min, capacity_max) = config.capacity.unwrap_or((0, 0));
        let parameters = config.parameters.clone();
        let ctx = self.ctx_mut();
        let id = uuid_from(&mut ctx.rng);
        // One node per scenario: the node ID depends only on the scenario's seed.
        let node_id = uuid_from(&mut rand::rngs::StdRng::seed_from_u64(
            ctx.seed ^ 0x6e6f6465,
        ));
        VolumeRequest {
            volumes_dir,
            plugin_dir,
            node_pool: "default".into(),
            namespace: "default".into(),
            name: format!("{}-{n}", ctx.token),
            id,
            capacity_min,
            capacity_max,
            node_id,
            parameters,
        }
    }

    /// Ask for one more volume; returns its index.
    pub fn add_volume(&mut self) -> usize {
        let req = self.new_request();
        self.volumes.push(Vol {
            req,
            created: None,
            deleted: Arc::new(AtomicBool::new(false)),
            marker: None,
        });
        self.volumes.len() - 1
    }

    pub fn volume(&self, i: usize) -> Result<&Vol, String> {
        self.volumes.get(i).ok_or_else(|| {
            self.ctx()
                .harness_error(format!("the scenario has no volume #{}", i + 1))
        })
    }

    /// Run the plugin and record the call in the case.
    pub async fn invoke(
        &self,
        label: &str,
        op: &str,
        env: Vec<(String, String)>,
        policy: EnvPolicy,
        deadline: Duration,
    ) -> Call {
        self.invoke_expecting(label, op, env, policy, deadline, Expect::Normal)
            .await
    }

    /// [`DhvWorld::invoke`] for a call that may be meant to fail (it then runs under a file-size
    /// limit, see [`crate::disk_guard`]).
    pub async fn invoke_expecting(
        &self,
        label: &str,
        op: &str,
        env: Vec<(String, String)>,
        policy: EnvPolicy,
        deadline: Duration,
        expect: Expect,
    ) -> Call {
        let opts = CallOpts {
            expect: Some(expect),
            ..CallOpts::default()
        };
        self.invoke_with(label, op, env, policy, deadline, opts)
            .await
    }

    /// Run the plugin with `opts` and record the call in the case.
    pub async fn invoke_with(
        &self,
        label: &str,
        op: &str,
        env: Vec<(String, String)>,
        policy: EnvPolicy,
        deadline: Duration,
        opts: CallOpts,
    ) -> Call {
        let opts = CallOpts {
            alone: self.alone.is_some(),
            ..opts
        };
        let call = self
            .plugin()
            .invoke_opts(label, op, env, policy, &self.cwd(), deadline, &opts)
            .await;
        let ctx = self.ctx();
        ctx.record(call.event(ctx.offset_ms(call.started)));
        call
    }

    /// From now until [`DhvWorld::together`], the scenario's calls are the only calls of the
    /// plugin: every other call has ended (and what it left running was stopped) before.
    pub async fn alone(&mut self) {
        if self.alone.is_none() {
            self.alone = Some(self.plugin().alone().await);
        }
    }

    /// Let other scenarios call the plugin again.
    pub fn together(&mut self) {
        self.alone = None;
    }

    pub async fn fingerprint(&self, policy: EnvPolicy) -> Call {
        let deadline = self.deadlines().fingerprint_kill_deadline();
        self.invoke(
            "fingerprint",
            "fingerprint",
            crate::plugins::dhv::fingerprint_env(),
            policy,
            deadline,
        )
        .await
    }

    /// Call create for `req`; when it succeeds with a usable path, register the volume for
    /// cleanup. Returns the call and what was created.
    pub async fn create_request(
        &self,
        label: &str,
        req: &VolumeRequest,
        policy: EnvPolicy,
        deleted: Arc<AtomicBool>,
    ) -> (Call, Option<Created>) {
        self.create_expecting(label, req, policy, deleted, Expect::Normal)
            .await
    }

    /// [`DhvWorld::create_request`] for a create that may be meant to fail.
    pub async fn create_expecting(
        &self,
        label: &str,
        req: &VolumeRequest,
        policy: EnvPolicy,
        deleted: Arc<AtomicBool>,
        expect: Expect,
    ) -> (Call, Option<Created>) {
        let call = self
            .invoke_expecting(
                label,
                "create",
                req.create_env(),
                policy,
                self.deadlines().create_deadline,
                expect,
            )
            .await;
        let created = created_from(&call);
        if let Some(c) = &created {
            self.track_volume(req, &c.path, deleted);
        }
        (call, created)
    }

    pub fn track_volume(&self, req: &VolumeRequest, path: &str, deleted: Arc<AtomicBool>) {
        let ctx = self.ctx();
        ctx.ledger.track(CreatedVolume {
            plugin: self.plugin(),
            request: req.clone(),
            path: path.to_string(),
            cwd: self.cwd(),
            deadline: self.deadlines().delete_deadline,
            scratch_root: ctx.run.scratch_base.clone(),
            deleted,
            case: ctx.case.clone(),
        });
    }

    /// Create volume `i` (once more, if it exists already).
    pub async fn create(&mut self, i: usize, label: &str) -> Result<Call, String> {
        let (req, deleted) = {
            let v = self.volume(i)?;
            (v.req.clone(), v.deleted.clone())
        };
        let (call, created) = self
            .create_request(label, &req, EnvPolicy::Configured, deleted)
            .await;
        if let Some(c) = created {
            let v = &mut self.volumes[i];
            v.deleted.store(false, Ordering::SeqCst);
            if v.created.is_none() {
                v.created = Some(c);
            }
        }
        Ok(call)
    }

    /// Create volume `i` as a precondition: anything but a volume Nomad can use (registered,
    /// with a path of its own that exists) blocks the scenario on the clause that judges it.
    pub async fn must_create(&mut self, i: usize) -> StepResult {
        let call = self.create(i, "create").await?;
        let others: Vec<String> = self
            .volumes
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .filter_map(|(_, v)| v.created.as_ref().map(|c| c.path.clone()))
            .collect();
        let v = &self.volumes[i];
        let created = if call.succeeded() {
            v.created.as_ref()
        } else {
            None
        };
        match usable_volume(&call, created, &v.req, &others) {
            Ok(()) => Ok(()),
            Err((root, seen)) => Err(self.precondition(
                root,
                "create gives a volume with a path of its own that exists (otherwise this clause cannot hold)",
                &seen,
                &[&call],
            )),
        }
    }

    /// The path create reported for volume `i`.
    pub fn created_path(&self, i: usize) -> Result<String, String> {
        self.volume(i)?
            .created
            .as_ref()
            .map(|c| c.path.clone())
            .ok_or_else(|| {
                self.ctx()
                    .harness_error(format!("volume #{} was never created", i + 1))
            })
    }

    /// Call delete with `env`.
    pub async fn delete_request(&self, label: &str, env: Vec<(String, String)>) -> Call {
        self.invoke(
            label,
            "delete",
            env,
            EnvPolicy::Configured,
            self.deadlines().delete_deadline,
        )
        .await
    }

    /// Call delete for volume `i` with `env`; a success marks the volume deleted.
    pub async fn delete_with(&self, i: usize, label: &str, env: Vec<(String, String)>) -> Call {
        let call = self.delete_request(label, env).await;
        if call.succeeded()
            && let Some(v) = self.volumes.get(i)
        {
            v.deleted.store(true, Ordering::SeqCst);
        }
        call
    }

    pub async fn delete(&self, i: usize, label: &str) -> Result<Call, String> {
        let path = self.created_path(i)?;
        let env = self.volume(i)?.req.delete_env(&path);
        Ok(self.delete_with(i, label, env).await)
    }

    /// Write a marker file into volume `i`.
    pub fn write_marker(&mut self, i: usize) -> StepResult {
        let path = self.created_path(i)?;
        // Never write into something that is not the volume's own ("/", the volumes dir...).
        if let Some(problem) =
            crate::plugins::dhv::paths::own_path_problem(&path, &self.volumes_dir(), &[])
        {
            let text = self.fail_after(
                "precondition: the volume has a path of its own to write a file into",
                &format!("{problem}; the harness does not write there"),
                &self.create_repro(i),
                &[],
            );
            return Err(self.ctx().blocked("DHV-CREATE-OWN-PATH", text));
        }
        // Never written through a symlink out of the run's own directory: a volume path that
        // leads elsewhere (a link to the user's data) is not the harness's to write into.
        if let Some(outside) = self.resolves_outside_run(&path) {
            return Err(self.ctx().skip(format!(
                "the volume's path {path} resolves to {} through a symlink, outside the run's scratch directory: the harness writes nothing there",
                outside.display()
            )));
        }
        let token = format!("{}-{i}", self.ctx().token);
        let file = Path::new(&path).join(format!("nomad-conform-{token}.txt"));
        // Removed at the end of the scenario whatever becomes of the volume.
        self.ctx().ledger.track(crate::ledger::OwnFile {
            path: file.clone(),
            content: token.clone(),
        });
        if let Err(e) = write_new(&file, &token) {
            let text = self.fail_after(
                "precondition: the volume's path is a writable directory",
                &format!("writing {} failed: {e}", file.display()),
                &self.create_repro(i),
                &[],
            );
            return Err(self.ctx().blocked("DHV-CREATE-PATH-EXISTS", text));
        }
        self.volumes[i].marker = Some((file, token));
        Ok(())
    }

    /// Where `path` leads when a symlink on the way takes it out of the run's scratch directory.
    /// A path outside the run with no symlink on the way is where the plugin keeps its volumes
    /// itself, and not this.
    fn resolves_outside_run(&self, path: &str) -> Option<PathBuf> {
        let resolved = std::fs::canonicalize(path).ok()?;
        if resolved == crate::plugins::dhv::paths::lexically_clean(Path::new(path)) {
            return None;
        }
        let run = std::fs::canonicalize(&self.ctx().run.scratch_base).ok()?;
        (!resolved.starts_with(run)).then_some(resolved)
    }

    /// Check that the marker of volume `i` is still there, unchanged.
    pub fn marker_intact(&self, i: usize) -> Result<(), String> {
        let Some((file, token)) = &self.volume(i)?.marker else {
            return Err(self
                .ctx()
                .harness_error(format!("no file was written into volume #{}", i + 1)));
        };
        match std::fs::read_to_string(file) {
            Ok(s) if &s == token => Ok(()),
            Ok(s) => Err(format!("{} now holds {s:?}", file.display())),
            Err(e) => Err(format!("{} is gone ({e})", file.display())),
        }
    }

    /// Record the volumes directory before a When step acts.
    pub fn snapshot_volumes_dir(&mut self) {
        self.before = Some(list_tree(&self.volumes_dir()));
    }

    /// Paths in the volumes directory that were not there at the last snapshot.
    pub fn new_in_volumes_dir(&self) -> Result<Vec<PathBuf>, String> {
        let Some(before) = &self.before else {
            return Err(self
                .ctx()
                .harness_error("no listing of the volumes directory was taken before the call"));
        };
        let after = list_tree(&self.volumes_dir());
        Ok(after.difference(before).cloned().collect())
    }

    /// Build the failure message of a clause: what it requires, what was seen, how to
    /// reproduce. A call killed at its deadline makes the verdict TimedOut; one the harness
    /// stopped (for the disk) makes it Skip, with the reason: that failure is not the plugin's.
    pub fn fail(&self, expected: &str, seen: &str, calls: &[&Call]) -> String {
        self.fail_after(expected, seen, &[], calls)
    }

    /// Like [`Self::fail`], with the commands of earlier calls the failure depends on (the
    /// first create of an idempotency check) listed before those of `calls`.
    pub fn fail_after(
        &self,
        expected: &str,
        seen: &str,
        earlier: &[&str],
        calls: &[&Call],
    ) -> String {
        if let Some(skip) = stopped_by_harness(calls) {
            return self.ctx().skip(skip);
        }
        if calls.iter().any(|c| c.killed_at_deadline()) {
            self.ctx().hint(Hint::TimedOut);
        }
        let mut repro: Vec<String> = earlier.iter().map(|s| s.to_string()).collect();
        repro.extend(calls.iter().map(|c| c.reproduce()));
        crate::steps::failure_text(expected, seen, &repro)
    }

    /// The reproduce command of the create that made volume `i`, if it was created.
    pub fn create_repro(&self, i: usize) -> Vec<&str> {
        self.volumes
            .get(i)
            .and_then(|v| v.created.as_ref())
            .map(|c| vec![c.reproduce.as_str()])
            .unwrap_or_default()
    }

    /// A call this clause needs (not the one it judges) failed: the verdict is Blocked by
    /// `root`, the clause whose check that call is, and the message says what failed. In the
    /// root clause itself it is an ordinary failure.
    pub fn precondition(&self, root: &str, expected: &str, seen: &str, calls: &[&Call]) -> String {
        if let Some(skip) = stopped_by_harness(calls) {
            return self.ctx().skip(skip);
        }
        let text = self.fail(&format!("precondition: {expected}"), seen, calls);
        self.ctx().blocked(root, text)
    }

    /// Create `n` ordinary volumes one after another (the request every other clause makes),
    /// and, with `delete`, delete each again: what a clause that found a problem with its own,
    /// special calls (concurrent, generated, with a variable missing) runs to tell whether the
    /// plugin fails ordinary calls the same way. The first problem comes with the clause that
    /// judges it, so that this clause is Blocked by that one instead of failing for the same
    /// cause. The volumes are tracked for cleanup.
    pub async fn ordinary_calls(&mut self, n: usize, delete: bool) -> Result<(), Problem> {
        let mut paths: Vec<String> = Vec::new();
        for _ in 0..n {
            let req = self.new_request();
            let deleted = Arc::new(AtomicBool::new(false));
            let (call, created) = self
                .create_request(
                    "create (an ordinary volume, alone)",
                    &req,
                    EnvPolicy::Configured,
                    deleted.clone(),
                )
                .await;
            if let Err((root, seen)) = usable_volume(&call, created.as_ref(), &req, &paths) {
                return Err(Problem {
                    root,
                    expected: "an ordinary create, alone, gives a volume Nomad can use".into(),
                    seen,
                    calls: vec![call],
                });
            }
            let path = created.map(|c| c.path).unwrap_or_default();
            if delete {
                let del = self
                    .delete_request("delete (an ordinary volume, alone)", req.delete_env(&path))
                    .await;
                let problem = if !del.succeeded() {
                    Some((exit_clause(&del), del.summary()))
                } else if Path::new(&path).symlink_metadata().is_ok() {
                    Some((
                        "DHV-DELETE-REMOVES-PATH",
                        format!("{path} still exists after delete"),
                    ))
                } else {
                    deleted.store(true, Ordering::SeqCst);
                    None
                };
                if let Some((root, seen)) = problem {
                    return Err(Problem {
                        root,
                        expected: "an ordinary delete, alone, removes an ordinary volume".into(),
                        seen,
                        calls: vec![call, del],
                    });
                }
            }
            paths.push(path);
        }
        Ok(())
    }

    /// The text that blocks this clause on `problem` (see [`DhvWorld::ordinary_calls`]), with
    /// what this clause saw first.
    pub fn blocked_on(&self, problem: &Problem, first_seen: &str) -> String {
        let calls: Vec<&Call> = problem.calls.iter().collect();
        self.precondition(
            problem.root,
            &problem.expected,
            &format!(
                "{}
(this clause first saw: {})",
                problem.seen,
                first_seen.lines().next().unwrap_or_default()
            ),
            &calls,
        )
    }

    pub fn last_call(&self) -> Result<&Call, String> {
        self.last.last().ok_or_else(|| {
            self.ctx()
                .harness_error("no plugin call was made before this step")
        })
    }
}

/// The clause that judges a create while DHV_VOLUMES_DIR does not exist yet.
pub const VOLUMES_DIR_CLAUSE: &str = "DHV-CREATE-VOLUMES-DIR-MISSING";

/// What an ordinary call found wrong, and the clause that judges it.
#[derive(Debug)]
pub struct Problem {
    pub root: &'static str,
    pub expected: String,
    pub seen: String,
    pub calls: Vec<Call>,
}

/// The operation of a call (`fingerprint`, `create`, `delete`, or an unknown one).
pub fn op_of(call: &Call) -> &str {
    call.argv.get(1).map(String::as_str).unwrap_or_default()
}

/// The clause that judges a call killed at its deadline. A fingerprint runs until the
/// documented deadline; the shorter discovery deadline has a clause of its own.
pub fn deadline_clause(call: &Call) -> &'static str {
    match op_of(call) {
        "fingerprint" => "DHV-FINGERPRINT-DOCUMENTED-DEADLINE",
        "delete" => "DHV-DELETE-DEADLINE",
        _ => "DHV-CREATE-DEADLINE",
    }
}

/// The reason a clause is skipped when the harness stopped one of `calls` itself (docs/guides/dhv.md:
/// such a clause is skipped with that reason, not judged).
fn stopped_by_harness(calls: &[&Call]) -> Option<String> {
    calls.iter().find_map(|c| {
        c.stopped_by_harness().map(|why| {
            format!(
                "not judged: the harness stopped {} ({why}), so how it ended was not the plugin's doing",
                c.label
            )
        })
    })
}

/// The clause that judges a call that did not exit 0 (or was killed at its deadline).
pub fn exit_clause(call: &Call) -> &'static str {
    if call.killed_at_deadline() {
        return deadline_clause(call);
    }
    match op_of(call) {
        "fingerprint" => "DHV-FINGERPRINT-EXIT-ZERO",
        "delete" => "DHV-DELETE-EXIT-ZERO",
        _ => "DHV-CREATE-EXIT-ZERO",
    }
}

/// Why the answer of a fingerprint or create call cannot be read at all, with the clause that
/// judges that: killed, a non-zero exit (Nomad never reads the answer of a failed call as one),
/// or stdout that Go cannot decode into the response struct.
pub fn answer_problem(call: &Call) -> Option<(&'static str, String)> {
    if !call.succeeded() {
        return Some((exit_clause(call), call.summary()));
    }
    let single_json = if op_of(call) == "fingerprint" {
        "DHV-FINGERPRINT-SINGLE-JSON"
    } else {
        "DHV-CREATE-SINGLE-JSON"
    };
    match call.stdout_json() {
        Err(p) => Some((single_json, format!("{p}\n{}", call.summary()))),
        Ok(serde_json::Value::Object(_) | serde_json::Value::Null) => None,
        Ok(other) => Some((
            single_json,
            format!(
                "stdout holds {}, which Go cannot decode into the response: {other}",
                crate::plugins::dhv::env::json_kind(&other)
            ),
        )),
    }
}

/// Whether a create gave a volume Nomad can use: registered (see [`created_problem`]), its
/// path exists, and it is the volume's own (not "/", the volumes directory or a parent of it,
/// not one of `others`). On a problem: the clause that judges it, and what was seen.
pub fn usable_volume(
    call: &Call,
    created: Option<&Created>,
    req: &VolumeRequest,
    others: &[String],
) -> Result<(), (&'static str, String)> {
    let Some(created) = created else {
        let seen = created_problem(call).unwrap_or_else(|| call.summary());
        return Err((create_root_clause(call), seen));
    };
    if let Some(p) =
        crate::plugins::dhv::paths::own_path_problem(&created.path, &req.volumes_dir, others)
    {
        return Err(("DHV-CREATE-OWN-PATH", p));
    }
    if !Path::new(&created.path).exists() {
        return Err((
            "DHV-CREATE-PATH-EXISTS",
            format!("{} does not exist after create", created.path),
        ));
    }
    Ok(())
}

/// What create reported, if Nomad would have registered a volume: exit 0 and a response that
/// decodes in full (Nomad fails a create whose `bytes` or `path` does not decode) with an
/// absolute path.
pub fn created_from(call: &Call) -> Option<Created> {
    if created_problem(call).is_some() {
        return None;
    }
    let json = call.stdout_json().ok()?;
    let resp = response::create_response(&json).ok()?;
    match resp.path {
        Field::Value(p) => Some(Created {
            path: p,
            json,
            reproduce: call.reproduce(),
            wall: call.out.wall,
        }),
        _ => None,
    }
}

/// The clause that judges what went wrong with a create that gave no usable volume: a clause
/// that needed the volume is Blocked by it.
pub fn create_root_clause(call: &Call) -> &'static str {
    if let Some((root, _)) = answer_problem(call) {
        return root;
    }
    let Ok(json) = call.stdout_json() else {
        return "DHV-CREATE-SINGLE-JSON";
    };
    match response::create_response(&json) {
        Err(_) => "DHV-CREATE-SINGLE-JSON",
        Ok(r) if r.bytes.invalid().is_some() => "DHV-CREATE-BYTES",
        Ok(r) if r.error.invalid().is_some() => "DHV-CREATE-SINGLE-JSON",
        Ok(_) => "DHV-CREATE-PATH",
    }
}

/// Why a create did not give a volume Nomad would register, if it did not.
pub fn created_problem(call: &Call) -> Option<String> {
    if !call.succeeded() {
        return Some(call.summary());
    }
    let json = match call.stdout_json() {
        Ok(j) => j,
        Err(e) => return Some(format!("{e}\n{}", call.summary())),
    };
    let r = match response::create_response(&json) {
        Err(e) => return Some(e),
        Ok(r) => r,
    };
    if let Some(e) = r.bytes.invalid().or(r.error.invalid()) {
        return Some(format!("{e}: Nomad fails the create"));
    }
    match r.path {
        Field::Value(p) if p.starts_with('/') => None,
        Field::Value(p) if p.is_empty() => Some(format!("\"path\" is empty: {json}")),
        Field::Value(p) => Some(format!("{p:?} is not an absolute path")),
        Field::Absent | Field::Null => Some(format!("no \"path\" in the response: {json}")),
        Field::Invalid(e) => Some(e),
    }
}

/// Write `content` to a new file at `path`: never through a symlink, never over a file that
/// is already there.
fn write_new(path: &Path, content: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?
        .write_all(content.as_bytes())
}

/// Every path under `dir` (not following symlinks), at most 10 000 entries.
pub fn list_tree(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if out.len() >= 10_000 {
                return out;
            }
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.insert(p);
        }
    }
    out
}

/// A version 4 UUID drawn from `rng`, as Nomad generates volume and node IDs.
pub fn uuid_from(rng: &mut impl rand::Rng) -> String {
    use rand::RngExt as _;
    let bytes: [u8; 16] = rng.random();
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// Turn a possibly empty list of paths into message text.
pub fn list_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The base parameters, or a sample object when the run has none (for the "sorted compact
/// object" form).
pub fn sample_object(base: &Parameters) -> Parameters {
    match base {
        Parameters::Map(m) if !m.is_empty() => base.clone(),
        _ => Parameters::Null
            .with("nomad-conform-key", "value")
            .with("another", "<&>"),
    }
}
