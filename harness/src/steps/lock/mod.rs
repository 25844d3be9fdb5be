//! Step definitions of the lock client suite, and the World they share.
//!
//! Each clause builds its own scene: a Variables server (a fresh reference server, or the real
//! Nomad of `--nomad-addr`), a fault-injecting proxy per client (so that every request is
//! recorded and attributed), a probe listener, and the clients it starts the way an
//! allocation runs them. Verdicts are read from what was recorded: the proxies' exchanges,
//! the server's lock history (reference server) and the probes' intervals. Dropping the World
//! kills every client and probe, stops the proxies and the server.

mod access;
mod acquire;
pub mod checker;
mod config;
mod lapse_release;
mod release;
mod renew;
mod scene;
mod singleton;
pub mod timeline;

use std::time::{Duration, Instant};

use crate::plugins::lock::{Exchange, Operation};
use crate::world::{ScenarioCtx, SuiteWorld};

pub use config::{LockConfig, Pattern, ServerChoice};
pub use scene::Scene;

/// The outcome of a step: `Err` carries the whole failure message.
pub type StepResult = Result<(), String>;

/// The clause every other one rests on: a client that never holds the lock with its
/// protected process running cannot be judged on what it does with it.
pub const ROOT: &str = "LOCK-STARTS";

#[derive(Debug, Default, cucumber::World)]
pub struct LockWorld {
    ctx: Option<ScenarioCtx<LockConfig>>,
    scene: Option<Scene>,
    /// When the latest fault the clause injected took effect (the 409, the outage).
    fault_at: Option<Instant>,
    /// When the harness stopped failing requests because Nomad would have freed the lock.
    freed_at: Option<Instant>,
    /// When the harness (as Nomad) sent the stop signal.
    signalled_at: Option<Instant>,
    /// The client's state when the harness had to SIGKILL it at the kill timeout.
    notes_at_kill: Option<String>,
    /// The protected processes (pids) still alive, as /proc saw them, when the harness sent
    /// Nomad's SIGKILL at the kill timeout (`None`: the client had exited by itself before).
    alive_at_kill: Option<Vec<u32>>,
    /// LOCK-NO-CRASH: whether the second run of the client got the late 409.
    second_run_met_conflict: Option<bool>,
    /// The singleton campaign's scheduled faults, as they took effect.
    applied: Vec<singleton::Applied>,
    /// When the harness began stopping every client at the end of a campaign.
    stopped_at: Option<Instant>,
}

impl SuiteWorld for LockWorld {
    type Config = LockConfig;

    fn attach(&mut self, ctx: ScenarioCtx<LockConfig>) {
        self.ctx = Some(ctx);
    }

    fn scenario(&self) -> Option<&ScenarioCtx<LockConfig>> {
        self.ctx.as_ref()
    }
}

impl LockWorld {
    pub fn ctx(&self) -> &ScenarioCtx<LockConfig> {
        self.ctx
            .as_ref()
            .expect("the before hook attaches a scenario context")
    }

    pub fn config(&self) -> &LockConfig {
        &self.ctx().run.config
    }

    pub fn lock_profile(&self) -> &crate::profile::LockProfile {
        &self.ctx().run.profile.lock
    }

    pub fn scene(&self) -> Result<&Scene, String> {
        self.scene.as_ref().ok_or_else(|| {
            self.ctx()
                .harness_error("the clause has no Variables server")
        })
    }

    pub fn scene_mut(&mut self) -> Result<&mut Scene, String> {
        if self.scene.is_none() {
            return Err(self
                .ctx()
                .harness_error("the clause has no Variables server"));
        }
        Ok(self.scene.as_mut().expect("checked"))
    }

    /// The running client `label`.
    pub fn client(&self, label: &str) -> Result<&crate::plugins::lock::RunningClient, String> {
        self.scene()?.client(label).ok_or_else(|| {
            self.ctx()
                .harness_error(format!("the clause started no client {label}"))
        })
    }

    /// The reproduce lines of a failure: the rerun command, then the client's requests.
    pub fn reproduce(&self, exchanges: &[&Exchange]) -> Vec<String> {
        let ctx = self.ctx();
        let mut out = vec![
            self.config()
                .command_line
                .rerun(ctx.run.seed, &ctx.clause.id),
        ];
        out.extend(exchanges.iter().take(6).map(|e| e.reproduce()));
        out
    }

    /// A failure text with the rerun line and `exchanges` as curl lines; a client that crashed
    /// (a panic, a traceback) has the first lines of its crash added to what was seen.
    pub fn fail(&self, expected: &str, seen: &str, exchanges: &[&Exchange]) -> String {
        let crashes = self.crashes();
        // The crash first, in a line: it is what the one-line reason shows.
        let mut seen = match crashes.first() {
            Some((label, headline, _)) => format!("{label} crashed: {headline}\n{seen}"),
            None => seen.to_string(),
        };
        for (label, _, report) in &crashes {
            seen.push_str(&format!("\n{label} crashed:\n{report}"));
        }
        crate::steps::failure_text(expected, &seen, &self.reproduce(exchanges))
    }

    /// The label, the crash in a line ([`crate::crash::headline`]) and the first lines of the
    /// panic or traceback of each client whose stderr holds one.
    pub fn crashes(&self) -> Vec<(String, String, String)> {
        let Some(scene) = self.scene.as_ref() else {
            return Vec::new();
        };
        scene
            .clients
            .iter()
            .filter_map(|c| {
                let stderr: Vec<String> = c.tasks().iter().map(|t| t.stderr.text.clone()).collect();
                let stderr = stderr.join("\n");
                let report = crate::crash::report(&stderr)?;
                let headline = crate::crash::headline(&stderr).unwrap_or_default();
                Some((c.label().to_string(), headline, report))
            })
            .collect()
    }

    /// Record the scene's exchanges, probe intervals and client output in the case, once.
    pub fn record_scene(&mut self) {
        if let (Some(ctx), Some(scene)) = (self.ctx.as_ref(), self.scene.as_mut()) {
            scene.record_into(ctx);
        }
    }
}

/// The TTL the server granted in `e` (a successful acquire), if its answer says.
pub fn granted_ttl(e: &Exchange) -> Option<Duration> {
    let v: serde_json::Value = serde_json::from_str(&e.response_body).ok()?;
    let lock = v.get("Lock")?;
    let ttl = lock.get("TTL")?.as_str()?;
    nomad_conform_variables::parse_go_duration(ttl)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .map(Duration::from_nanos)
}

/// The lock delay the server granted in `e`, if its answer says.
pub fn granted_delay(e: &Exchange) -> Option<Duration> {
    let v: serde_json::Value = serde_json::from_str(&e.response_body).ok()?;
    let d = v.get("Lock")?.get("LockDelay")?.as_str()?;
    nomad_conform_variables::parse_go_duration(d)
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .map(Duration::from_nanos)
}

/// When the answer to `e` reached the client.
pub fn answered_at(e: &Exchange) -> Instant {
    e.at + e.duration
}

/// The client's lock operations, in order.
pub fn lock_ops<'a>(exchanges: &'a [Exchange], client: &str) -> Vec<&'a Exchange> {
    let mut v: Vec<&Exchange> = exchanges
        .iter()
        .filter(|e| e.client == client && Operation::LOCK.contains(&e.operation))
        .collect();
    v.sort_by_key(|e| e.at);
    v
}

/// `1.2 s`
pub fn fmt(d: Duration) -> String {
    crate::fmt_duration(d)
}
