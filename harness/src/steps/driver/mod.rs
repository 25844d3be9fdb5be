//! Step definitions of the task driver suite, and the World they share.
//!
//! Each clause loads its own plugin instance as the Nomad client does (launch, connect,
//! SetConfig with Nomad's settings, Init) and starts tasks the way the client builds them
//! (plugins::driver::taskconfig). Every call is recorded; everything a clause starts (plugin
//! processes, tasks) is registered in its ledger and undone when it ends: tasks destroyed with
//! force, the plugin shut down as Nomad does, and any process still carrying a task's marker
//! killed and reported as leaked.

mod base;
mod cleanup;
mod config;
mod exec;
mod fingerprint;
mod launch;
mod lifecycle;
mod observation;
mod robustness;
mod survival;
pub mod tasks;
mod waiter;

use std::sync::Arc;

use nomad_conform_reports::model::OpEvent;

use crate::plugins::driver as pd;
use crate::plugins::driver::taskconfig::{self, AllocDir, LogFifos, Placement};
use crate::plugins::driver::{
    Client, DriverRpc, LaunchError, LaunchSpec, PluginProcess, assess_plugin_info, connect,
    drivers, nomad_config,
};
use crate::recorder::Hint;
use crate::world::{ScenarioCtx, SuiteWorld};
use tasks::Placeholders;

pub use cleanup::Instances;
pub use config::{
    DriverConfig, DriverProbe, EncodedConfig, PluginConfigSource, ProbeTask, health_name,
};

/// The outcome of a step: `Err` carries the whole failure message.
pub type StepResult = Result<(), String>;

/// A running plugin instance and the connection the harness (playing Nomad) holds to it.
#[derive(Debug)]
pub struct Instance {
    pub process: Arc<PluginProcess>,
    pub client: Client,
}

/// A task the clause started (or tried to).
#[derive(Clone, Debug)]
pub struct Task {
    pub shape: String,
    pub id: String,
    pub name: String,
    pub config: drivers::TaskConfig,
    pub handle: Option<drivers::TaskHandle>,
    pub dir: AllocDir,
    pub fifos: LogFifos,
    /// The value of NOMAD_CONFORM_TASK in its environment.
    pub marker: String,
    /// Its directories as it sees them (per the driver's isolation).
    pub view: taskconfig::TaskView,
    pub placeholders: Placeholders,
    /// Nomad's WaitTask, made as soon as StartTask (or RecoverTask) succeeded.
    pub waiter: Option<waiter::Waiter>,
}

#[derive(Debug, Default, cucumber::World)]
pub struct DriverWorld {
    ctx: Option<ScenarioCtx<DriverConfig>>,
    /// Every plugin instance the clause started, the current one last; shared with cleanup.
    instances: Instances,
    tasks: Vec<Task>,
    /// Calls of the latest When step.
    last: Vec<DriverRpc>,
    /// What the latest launch gave (the launch clauses look at it).
    launched: Option<Result<(), LaunchFailureKind>>,
    /// The handshake of a launch the harness could not connect to.
    handshake_only: Option<crate::plugins::driver::Handshake>,
    /// Other state the When steps leave for Then steps.
    notes: Vec<String>,
    fingerprint: Option<Arc<crate::plugins::driver::StreamHandle<drivers::FingerprintResponse>>>,
    events: Option<Arc<crate::plugins::driver::StreamHandle<drivers::DriverTaskEvent>>>,
    stats: Option<Arc<crate::plugins::driver::StreamHandle<drivers::TaskStatsResponse>>>,
    /// The Fingerprint and TaskEvents streams the driver manager keeps open on the current
    /// instance, opened before any task as on a real node.
    node_streams: Option<NodeStreams>,
    /// Every stats message the clause collected, over the streams it opened.
    stats_messages: Vec<drivers::TaskStatsResponse>,
    exec: Option<exec::ExecResult>,
    /// When the latest StopTask was sent, and its timeout.
    stop_sent: Option<(std::time::Instant, std::time::Duration)>,
    /// The latest StartTask call, also when the step that made it failed.
    last_start: Option<DriverRpc>,
    generated: Option<Result<u32, String>>,
    /// The task was meant to exit while the plugin was down, but the harness could not see it
    /// do so (its processes are hidden): the relaunched driver is asked whether it still runs.
    exit_unseen: bool,
}

/// The streams a driver manager keeps open on an instance: Fingerprint and TaskEvents.
type NodeStreams = (
    Arc<crate::plugins::driver::StreamHandle<drivers::FingerprintResponse>>,
    Arc<crate::plugins::driver::StreamHandle<drivers::DriverTaskEvent>>,
);

/// How a launch failed, kept for the launch clauses.
#[derive(Debug)]
pub struct LaunchFailureKind {
    pub error: String,
    pub root: &'static str,
    pub unrecognized_line: Option<String>,
}

impl SuiteWorld for DriverWorld {
    type Config = DriverConfig;

    fn attach(&mut self, ctx: ScenarioCtx<DriverConfig>) {
        ctx.ledger.track(self.instances.cleanup(
            ctx.run.config.timings,
            ctx.run.profile.driver.rpc_deadline,
            ctx.case.clone(),
            ctx.scratch().join("a"),
            ctx.run.config.probe.host.cgroups.clone(),
        ));
        self.ctx = Some(ctx);
    }

    fn scenario(&self) -> Option<&ScenarioCtx<DriverConfig>> {
        self.ctx.as_ref()
    }
}

/// The clause whose check a launch failure breaks (the root of a blocked clause).
pub fn launch_root(e: &LaunchError) -> &'static str {
    match e {
        LaunchError::NoHandshake { .. } => "DRIVER-LAUNCH-DEADLINE",
        LaunchError::Unrecognized { line, .. } if looks_like_handshake(line) => {
            "DRIVER-LAUNCH-HANDSHAKE-FORMAT"
        }
        _ => "DRIVER-LAUNCH-FIRST-LINE",
    }
}

/// A line that starts like a handshake: an integer, then a `|`.
pub fn looks_like_handshake(line: &str) -> bool {
    line.trim()
        .split_once('|')
        .is_some_and(|(first, _)| first.trim().parse::<i64>().is_ok())
}

/// The clause that judges a handshake rule.
pub fn violation_root(rule: &str) -> &'static str {
    match rule {
        "core_version" | "core_not_an_integer" => "DRIVER-LAUNCH-CORE-PROTOCOL",
        "app_version_not_offered" | "app_not_an_integer" => "DRIVER-LAUNCH-APP-PROTOCOL",
        "unknown_network" | "address_does_not_resolve" => "DRIVER-LAUNCH-ADDRESS",
        "protocol_not_grpc" => "DRIVER-LAUNCH-PROTOCOL-GRPC",
        _ => "DRIVER-LAUNCH-HANDSHAKE-FORMAT",
    }
}

/// A call whose connection broke under it (the plugin went away mid-call), not an answer.
pub fn broken_connection(rpc: &DriverRpc) -> bool {
    !rpc.ok()
        && (rpc.code == tonic::Code::Unavailable
            || (rpc.code == tonic::Code::Unknown && rpc.message.contains("transport error")))
}

/// A StartTask of a task shape the user gave that failed the way a node or a shape fails, not
/// the way a broken plugin fails: an error status, in time, with the plugin still running,
/// for a call the driver implements (say the runtime binary is missing on this node, or the
/// shape names an image that does not exist). The task clauses cannot be judged then; they
/// are blocked on DRIVER-HEALTHY-STARTS, which says whether the driver's health claimed
/// otherwise. A crash, a timeout or UNIMPLEMENTED stays the plugin's failure.
fn plain_start_failure(rpc: &DriverRpc, inst: &Instance, shape: &str) -> Option<String> {
    use tonic::Code;
    let user_shape = tasks::SHAPES.contains(&shape);
    if rpc.ok()
        || !user_shape
        || rpc.timed_out
        || broken_connection(rpc)
        || !inst.process.is_alive()
        || matches!(
            rpc.code,
            Code::Unimplemented | Code::Unavailable | Code::Cancelled | Code::DeadlineExceeded
        )
    {
        return None;
    }
    let recoverable = match rpc.recoverable() {
        Some(true) => " (marked recoverable: Nomad would retry it)",
        Some(false) => " (marked not recoverable)",
        None => "",
    };
    Some(format!(
        "StartTask {}{recoverable}: the driver refused the {shape} task as the run gave it, which is the node's or the task shape's doing (fix the shape with --tasks, or run where the driver's runtime is), not a broken protocol",
        rpc.outcome()
    ))
}

impl DriverWorld {
    pub fn ctx(&self) -> &ScenarioCtx<DriverConfig> {
        self.ctx
            .as_ref()
            .expect("the before hook attaches a scenario context")
    }

    pub fn config(&self) -> &DriverConfig {
        &self.ctx().run.config
    }

    pub fn spec(&self) -> &LaunchSpec {
        &self.config().launch
    }

    pub fn driver_profile(&self) -> &crate::profile::DriverProfile {
        &self.ctx().run.profile.driver
    }

    /// Record a call in the case. A task call that took longer than an ordinary RPC gets a
    /// note saying so: Nomad waits as long as it takes, and so does the harness, up to the
    /// profile's task_call_deadline.
    pub fn record(&self, rpc: &DriverRpc) {
        let ctx = self.ctx();
        ctx.record(rpc.event(ctx.offset_ms(rpc.started), Some(self.spec())));
        let patient = ["StartTask", "RecoverTask", "StopTask", "DestroyTask"];
        if patient.contains(&rpc.method.as_str()) && rpc.duration > self.config().timings.rpc {
            crate::recorder::lock(&ctx.case).notes.push(format!(
                "{} took {} (Nomad's client sets no deadline on it; the harness waits up to {})",
                rpc.method,
                crate::fmt_duration(rpc.duration),
                crate::fmt_duration(self.config().timings.task_call)
            ));
        }
    }

    pub fn record_event(&self, ev: OpEvent) {
        self.ctx().record(ev);
    }

    pub fn offset_now(&self) -> u64 {
        self.ctx().offset_ms(std::time::Instant::now())
    }

    /// What the clause requires, what was seen, how to reproduce. A call that got no answer
    /// before its deadline makes the verdict TimedOut.
    pub fn fail(&self, expected: &str, seen: &str, calls: &[&DriverRpc]) -> String {
        if calls.iter().any(|c| c.timed_out) {
            self.ctx().hint(Hint::TimedOut);
        }
        let seen = match self.died() {
            // The crash first: it is what the one-line reason shows.
            Some(died) => format!("{}\n{seen}\n{}", died.headline, died.note),
            None => seen.to_string(),
        };
        let seen = seen.as_str();
        let mut repro: Vec<String> = Vec::new();
        if calls.is_empty() {
            repro.push(self.spec().command_line());
        }
        repro.extend(calls.iter().map(|c| c.reproduce(self.spec())));
        crate::steps::failure_text(expected, seen, &repro)
    }

    /// When the current plugin process died by itself: how, in a line (its panic and the first
    /// frame of its own code, when stderr has one), and its last words on stderr (a Go `panic:`
    /// with the first goroutine's frames, when there is one).
    pub fn died(&self) -> Option<Died> {
        let inst = self.instances.current()?;
        let p = &inst.process;
        if p.is_alive() || p.killed_by_harness() {
            return None;
        }
        let status = p
            .exit_status()
            .map(|s| s.to_string())
            .unwrap_or_else(|| "gone".into());
        // All of stderr the harness kept: a panic is followed by every goroutine's stack, so its
        // first line may be far from the end.
        let stderr = p.stderr_excerpt(usize::MAX / 4).text;
        Some(Died {
            headline: crate::crash::death_line(&status, &stderr),
            note: format!(
                "the plugin process died ({status}); its last words on stderr:\n{}",
                crate::crash::last_words(&stderr)
            ),
        })
    }

    /// Whether the driver's task processes can be seen in /proc (the probe's finding). When
    /// they cannot (a VM, a runtime that hides them), clauses judge through the driver's
    /// answers, and what only processes can show is skipped with the reason.
    pub fn task_visible(&self, _i: usize) -> bool {
        self.config().probe.tasks_visible()
    }

    /// A call this clause needs (not the one it judges) failed: Blocked by `root`.
    pub fn precondition(
        &self,
        root: &str,
        expected: &str,
        seen: &str,
        calls: &[&DriverRpc],
    ) -> String {
        let text = self.fail(&format!("precondition: {expected}"), seen, calls);
        self.ctx().blocked(root, text)
    }

    /// The current plugin instance, or a harness error if the steps never started one.
    pub fn instance(&self) -> Result<Arc<Instance>, String> {
        self.instances
            .current()
            .ok_or_else(|| self.ctx().harness_error("no plugin instance was started"))
    }

    pub fn client(&self) -> Result<Client, String> {
        Ok(self.instance()?.client.clone())
    }

    /// The launch spec of this clause's plugins: the run's, with the clause's own socket
    /// directory (short: unix socket paths are limited).
    fn clause_spec(&self) -> LaunchSpec {
        self.spec().clone()
    }

    /// Launch the plugin and connect to it; a failure blocks the clause on the launch clause
    /// that judges it.
    /// A plugin that never printed a handshake to the probe would make every clause wait the
    /// whole start timeout again: they are blocked on the probe's launch instead.
    pub fn blocked_on_first_launch(&self) -> Result<(), String> {
        match &self.config().probe.launch_timed_out {
            Some(e) => Err(self.precondition(
                "DRIVER-LAUNCH-DEADLINE",
                "the plugin launches as Nomad launches it (judged on the harness's first launch, whose handshake never came)",
                e,
                &[],
            )),
            None => Ok(()),
        }
    }

    pub async fn launch_and_connect(&mut self) -> Result<Arc<Instance>, String> {
        self.blocked_on_first_launch()?;
        let spec = self.clause_spec();
        let process = match pd::launch(&spec).await {
            Ok(p) => p,
            Err(e) => {
                let root = launch_root(&e);
                return Err(self.precondition(
                    root,
                    "the plugin launches as Nomad launches it",
                    &e.to_string(),
                    &[],
                ));
            }
        };
        if let Some(v) = process.handshake.violations.first() {
            let seen = format!("{v} (handshake line {:?})", process.handshake.line);
            let root = violation_root(v.rule());
            process.kill_now().await;
            return Err(self.precondition(root, "a handshake Nomad accepts", &seen, &[]));
        }
        let timings = self.config().timings;
        let client = match connect(&process.handshake, timings.connect).await {
            Ok(c) => c,
            Err(e) => {
                let seen = format!("{e}\nstderr:\n{}", process.stderr_tail());
                process.kill_now().await;
                return Err(self.precondition(
                    "DRIVER-LAUNCH-ADDRESS",
                    "the harness connects to the plugin",
                    &seen,
                    &[],
                ));
            }
        };
        let inst = Arc::new(Instance {
            process: Arc::new(process),
            client,
        });
        self.instances.push(inst.clone());
        Ok(inst)
    }

    /// The plugin configuration bytes as Nomad sends them, or why there are none (Blocked on
    /// the clause that explains it).
    pub fn config_bytes(&self, empty: bool) -> Result<Vec<u8>, String> {
        let cfg = if empty {
            &self.config().empty_config
        } else {
            &self.config().config
        };
        match cfg {
            Ok(c) => Ok(c.cty.clone()),
            Err(e) => {
                let root = match &self.config().probe.info {
                    Some(info) if assess_plugin_info(info).stop.is_some() => {
                        "DRIVER-BASE-PLUGIN-INFO"
                    }
                    None => "DRIVER-LAUNCH-FIRST-LINE",
                    Some(_) => "DRIVER-BASE-CONFIG-SCHEMA",
                };
                Err(self.precondition(
                    root,
                    "the plugin configuration can be encoded against the plugin's ConfigSchema",
                    e,
                    &[],
                ))
            }
        }
    }

    /// Nomad's long-lived instance: launch, connect, SetConfig (with nomad_config), Init.
    /// Returns the calls; a failure blocks the clause.
    pub async fn start_instance(&mut self, empty_config: bool) -> Result<Vec<DriverRpc>, String> {
        let msgpack_config = self.config_bytes(empty_config)?;
        let inst = self.launch_and_connect().await?;
        let rpc_deadline = self.config().timings.rpc;
        let req = pd::base::SetConfigRequest {
            msgpack_config,
            nomad_config: Some(nomad_config()),
            plugin_api_version: self.config().probe.api_version.clone(),
        };
        let (set, _) = inst.client.set_config(req, rpc_deadline).await;
        self.record(&set);
        if !set.ok() {
            return Err(self.precondition(
                "DRIVER-BASE-SET-CONFIG",
                "SetConfig accepts the configuration",
                &set.summary(),
                &[&set],
            ));
        }
        let (init, _) = inst.client.init(rpc_deadline).await;
        self.record(&init);
        if !init.ok() && init.code != tonic::Code::Unimplemented {
            return Err(self.precondition(
                "DRIVER-BASE-INIT",
                "Init succeeds or is UNIMPLEMENTED",
                &init.summary(),
                &[&init],
            ));
        }
        self.capabilities_known()?;
        // The driver manager opens both streams right after the instance is up, before any
        // task runner asks for anything (drivermanager/instance.go, run).
        let fp = inst
            .client
            .fingerprint(self.driver_profile().fingerprint_deadline, 4)
            .await;
        let events = inst.client.task_events(std::time::Duration::ZERO, 64).await;
        self.node_streams = Some((Arc::new(fp), Arc::new(events)));
        Ok(vec![set, init])
    }

    /// A clause that needs a capability (`@requires-exec`, `@requires-send-signals`) runs only
    /// when the run's Capabilities call answered; when it did not, the clause is blocked on the
    /// capabilities clause (Nomad refuses to start tasks on such a driver).
    fn capabilities_known(&self) -> Result<(), String> {
        let needs = self
            .ctx()
            .clause
            .tags
            .iter()
            .any(|t| t.starts_with("requires-"));
        let probe = &self.config().probe;
        if !needs || probe.caps.is_some() {
            return Ok(());
        }
        Err(self.precondition(
            "DRIVER-CAPABILITIES",
            "Capabilities answers, saying whether the driver offers what this clause needs",
            &probe.failures.join("; "),
            &[],
        ))
    }

    /// The harness finds a task's processes by the NOMAD_CONFORM_TASK variable it put in the
    /// task's environment. A clause that judges processes needs to see at least one of a task
    /// it just started; when it sees none (within 2 s), it is blocked on DRIVER-TASK-ENV: the
    /// environment did not reach the task, or the task runs where this host's /proc cannot
    /// see it.
    pub async fn require_visible(&self, i: usize) -> StepResult {
        if !self.task_visible(i) {
            return Err(self.ctx().skip(
                "the harness cannot see this driver's task processes in /proc (the probe task's processes carried no trace of the environment it was given: a VM, or a runtime that hides them), and this clause is about the processes themselves",
            ));
        }
        let marker = self.task(i)?.marker.clone();
        for _ in 0..40 {
            if !taskconfig::marked_processes(&marker).is_empty() {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Err(self.precondition(
            "DRIVER-TASK-ENV",
            "the harness sees the task's processes: a process on this host whose environment carries the TaskConfig.env it gave",
            &format!("no process carries NOMAD_CONFORM_TASK={marker} 2 s after StartTask succeeded"),
            &[],
        ))
    }

    /// Wait until the `trap` or `stubborn` task `i` has set up its signal handling: `ready` on
    /// its stdout, or (for tasks that do not print it, or a driver that drops logs) its
    /// processes' dispositions in /proc. A shell signalled before its `trap` ran dies of the
    /// signal whatever the driver did, so signalling earlier would make the verdict depend on
    /// how fast the task started. Gives up after the profile's RPC deadline, or when the task
    /// has ended, and the clause goes on (its own check then says what it saw).
    pub async fn await_signal_ready(&self, i: usize) -> StepResult {
        use crate::process::{signal_bit, signal_dispositions};
        use nix::sys::signal::Signal;
        let task = self.task(i)?;
        let ready = || {
            if task
                .fifos
                .stdout_text()
                .lines()
                .any(|l| l.trim() == "ready")
            {
                return true;
            }
            let procs = taskconfig::marked_processes(&task.marker);
            let masks: Vec<(u64, u64)> = procs
                .iter()
                .filter_map(|p| signal_dispositions(p.pid))
                .collect();
            match task.shape.as_str() {
                "trap" => {
                    let want = signal_bit(Signal::SIGTERM)
                        | signal_bit(Signal::SIGINT)
                        | signal_bit(Signal::SIGUSR1);
                    masks.iter().any(|(caught, _)| caught & want == want)
                }
                "stubborn" => {
                    let term = signal_bit(Signal::SIGTERM);
                    masks.len() >= 2 && masks.iter().all(|(_, ignored)| ignored & term != 0)
                }
                _ => true,
            }
        };
        let deadline = std::time::Instant::now() + self.config().timings.rpc;
        while std::time::Instant::now() < deadline {
            if ready() || task.waiter.as_ref().is_some_and(|w| w.finished()) {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        Ok(())
    }

    /// A new task of `shape` (TaskConfig as the client builds it); its StartTask call.
    pub async fn start_task(&mut self, shape: &str, code: i32) -> Result<DriverRpc, String> {
        let n = self.tasks.len();
        let token = self.ctx().token.clone();
        let placeholders = Placeholders {
            code,
            stdout: format!("nomad-conform-stdout-{token}-{n}"),
            stderr: format!("nomad-conform-stderr-{token}-{n}"),
            file: format!("nomad-conform-{token}-{n}.txt"),
        };
        let msgpack = self.task_msgpack(shape, &placeholders)?;
        self.start_task_with(shape, placeholders, msgpack).await
    }

    /// The encoded task configuration of `shape`.
    pub fn task_msgpack(&self, shape: &str, p: &Placeholders) -> Result<Vec<u8>, String> {
        let spec = match &self.config().probe.task_schema {
            Ok(s) => s,
            Err(e) => {
                return Err(self.precondition(
                    "DRIVER-TASK-CONFIG-SCHEMA",
                    "the driver's TaskConfigSchema converts",
                    e,
                    &[],
                ));
            }
        };
        match self.config().shapes.render(shape, p, spec) {
            Ok(Some((value, _))) => Ok(nomad_conform_hclspec::encode_cty(&value)),
            Ok(None) => Err(self.ctx().skip(format!(
                "the run has no task configuration for the {shape} shape"
            ))),
            Err(e) => Err(self.ctx().harness_error(e)),
        }
    }

    /// StartTask of a task with the given configuration bytes.
    pub async fn start_task_with(
        &mut self,
        shape: &str,
        placeholders: Placeholders,
        msgpack: Vec<u8>,
    ) -> Result<DriverRpc, String> {
        if let Some(refused) = self.config().probe.not_placeable() {
            // UNDETECTED or UNHEALTHY here is the node's state as the driver reports it: the
            // clause is not judged on this node. A health that is no HealthState is the
            // plugin's fault, judged by DRIVER-FINGERPRINT-HEALTH.
            if refused.node {
                return Err(self.ctx().skip(format!(
                    "{}{}",
                    nomad_conform_reports::model::NOT_JUDGED_ON_THIS_NODE,
                    refused.why
                )));
            }
            return Err(self.precondition(
                "DRIVER-FINGERPRINT-HEALTH",
                "a driver Nomad would place this task on: detected and healthy",
                &refused.why,
                &[],
            ));
        }
        let inst = self.instance()?;
        let n = self.tasks.len();
        let alloc_id = self.new_uuid();
        let name = format!("task{n}");
        let task_id = {
            let ctx = self.ctx.as_mut().expect("attached");
            taskconfig::task_id(&alloc_id, &name, &mut ctx.rng)
        };
        let base = self.ctx().scratch().join("a");
        let marker = format!("{}/{}/{n}", self.ctx().run.run_id, self.ctx().token);
        let placement = Placement {
            alloc_id: alloc_id.clone(),
            job_id: "nomad-conform".into(),
            job_name: "nomad-conform".into(),
            group: "group".into(),
            task: name.clone(),
            namespace: "default".into(),
            node_id: self.node_id(),
            node_name: "nomad-conform-node".into(),
        };
        // Generated configurations may name any command: give them no search path.
        let prepared = taskconfig::prepare(
            &self.config().probe.host,
            &base,
            &placement,
            &task_id,
            &marker,
            msgpack,
            shape != "generated",
        )
        .map_err(|e| match e {
            taskconfig::PrepareError::Node(why) => self.ctx().skip(format!(
                "the harness cannot prepare the task as Nomad's client would on this node: {why}"
            )),
            taskconfig::PrepareError::Harness(why) => self.ctx().harness_error(why),
        })?;
        let taskconfig::Prepared {
            dir,
            fifos,
            config,
            view,
            cgroup,
            ..
        } = prepared;
        self.instances.track_cgroup(cgroup);
        self.instances.track_task(&task_id, &marker);
        let (mut rpc, resp) = inst
            .client
            .start_task(config.clone(), self.config().timings.task_call)
            .await;
        crate::plugins::driver::taskhost::elide_agent_env(
            &mut rpc.request,
            &self.config().probe.host.host_env,
        );
        self.record(&rpc);
        self.last_start = Some(rpc.clone());
        if broken_connection(&rpc) {
            // The connection broke: give a dying plugin a moment to be seen dead, so that a
            // crash is told from a refusal and its last words reach the failure message.
            inst.process
                .wait_exit(std::time::Duration::from_millis(500))
                .await;
        }
        if let Some(why) = plain_start_failure(&rpc, &inst, shape) {
            return Err(self.precondition(
                "DRIVER-HEALTHY-STARTS",
                &format!("StartTask of the {shape} task shape succeeds on this node"),
                &why,
                &[&rpc],
            ));
        }
        let waiter = if rpc.ok() {
            Some(waiter::Waiter::start(inst.client.clone(), task_id.clone()).await)
        } else {
            None
        };
        self.tasks.push(Task {
            shape: shape.to_string(),
            id: task_id,
            name,
            config,
            handle: resp.and_then(|r| r.handle),
            dir,
            fifos,
            marker,
            view,
            placeholders,
            waiter,
        });
        Ok(rpc)
    }

    /// Start a task as a precondition: anything but success blocks the clause.
    pub async fn must_start_task(&mut self, shape: &str, code: i32) -> StepResult {
        let rpc = self.start_task(shape, code).await?;
        if rpc.ok() {
            return Ok(());
        }
        Err(self.precondition(
            "DRIVER-START-HANDLE",
            &format!("StartTask of the {shape} task succeeds"),
            &rpc.summary(),
            &[&rpc],
        ))
    }

    pub fn task(&self, i: usize) -> Result<&Task, String> {
        self.tasks.get(i).ok_or_else(|| {
            self.ctx()
                .harness_error(format!("the clause has no task #{}", i + 1))
        })
    }

    fn new_uuid(&mut self) -> String {
        use rand::RngExt as _;
        let bytes: [u8; 16] = self.ctx.as_mut().expect("attached").rng.random();
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string()
    }

    fn node_id(&self) -> String {
        let h = crate::world::stable_hash(&self.ctx().run.run_id);
        let bytes = [h.to_le_bytes(), h.rotate_left(17).to_le_bytes()].concat();
        let mut b = [0u8; 16];
        b.copy_from_slice(&bytes);
        uuid::Builder::from_random_bytes(b).into_uuid().to_string()
    }

    pub fn last_call(&self) -> Result<&DriverRpc, String> {
        self.last.last().ok_or_else(|| {
            self.ctx()
                .harness_error("no call was made before this step")
        })
    }
}

/// How a plugin process that died by itself went: a line for the one-line "seen", and its last
/// words for the failure's body.
pub struct Died {
    pub headline: String,
    pub note: String,
}
