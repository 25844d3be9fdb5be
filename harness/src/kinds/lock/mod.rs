//! The singleton lock client suite (`nomad-conform lock`): read how the client is run (shim or
//! sidecar), which server plays Nomad (the reference Variables server, a fresh one per clause,
//! or a real Nomad behind the harness's proxy), skip what the run cannot check, run; whatever
//! happened, no client or protected process stays running.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use nomad_conform_reports::model::{RunRecord, Subject};

use crate::clauses::{CaseKey, ClauseSet};
use crate::error::HarnessError;
use crate::plugins::dhv::quote;
use crate::plugins::lock::{ProbeCommand, Upstream};
use crate::profile::Profile;
use crate::recorder::RunStore;
use crate::run::{RunMeta, Selection, SuiteOptions, execute, finish_record, load_suite};
use crate::steps::lock::LockWorld;
use crate::world::RunCtx;

pub const KIND: &str = "lock";

/// What the user asked for, as given on the command line.
#[derive(Clone, Debug, Default)]
pub struct LockOptions {
    pub client: Option<String>,
    pub sidecar: Option<String>,
    pub sentinel: String,
    pub path: String,
    pub nomad_addr: Option<String>,
    pub token: Option<String>,
    pub task_api: bool,
    pub kill_timeout: Option<String>,
    pub give_up: Option<String>,
    pub stop_on_client_after: Option<String>,
    pub clients: Option<usize>,
}

/// How the client under test runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// One task: the command wraps the protected process (`{protected}`).
    Shim { command: String },
    /// A leader task and the application the harness starts once `sentinel` (a file name in
    /// the client's allocation directory) exists.
    Sidecar { command: String, sentinel: String },
}

impl Pattern {
    pub fn is_shim(&self) -> bool {
        matches!(self, Pattern::Shim { .. })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Pattern::Shim { .. } => "shim",
            Pattern::Sidecar { .. } => "sidecar",
        }
    }

    pub fn command(&self) -> &str {
        match self {
            Pattern::Shim { command } | Pattern::Sidecar { command, .. } => command,
        }
    }
}

/// Which server plays Nomad.
#[derive(Clone, Debug)]
pub enum ServerChoice {
    /// The reference Variables server with these numbers, one per clause.
    Reference(nomad_conform_variables::Profile),
    /// A real Nomad agent; the harness's management token, if any, is only used by the
    /// harness's own "other holder".
    Nomad {
        upstream: Upstream,
        addr: String,
        token: Option<String>,
    },
}

impl ServerChoice {
    pub fn is_reference(&self) -> bool {
        matches!(self, ServerChoice::Reference(_))
    }

    /// The server's lock numbers: the reference server's profile, or Nomad's own.
    fn numbers(&self) -> nomad_conform_variables::Profile {
        match self {
            ServerChoice::Reference(p) => p.clone(),
            ServerChoice::Nomad { .. } => nomad_conform_variables::Profile::nomad(),
        }
    }

    /// The shortest TTL the server grants (Nomad: 10 s).
    pub fn ttl_min(&self) -> Duration {
        self.numbers().lock_ttl_min
    }

    /// The TTL a lock gets when it asks for none (Nomad: 15 s).
    pub fn ttl_default(&self) -> Duration {
        self.numbers().lock_ttl_default
    }

    /// The lock delay a lock gets when it asks for none (Nomad: 15 s).
    pub fn delay_default(&self) -> Duration {
        self.numbers().lock_delay_default
    }
}

/// What the steps of a lock run read.
#[derive(Debug)]
pub struct LockConfig {
    pub pattern: Pattern,
    /// The lock's variable path.
    pub path: String,
    pub server: ServerChoice,
    /// Clients reach the API over a unix socket (NOMAD_UNIX_ADDR), as through the Task API.
    pub task_api: bool,
    /// The sidecar pattern's application kill_timeout, and how long Nomad waits after the
    /// kill signal before SIGKILL.
    pub kill_timeout: Duration,
    /// The client's give-up window, as the user configured it.
    pub give_up: Option<Duration>,
    /// The job's `disconnect { stop_on_client_after }`.
    pub stop_on_client_after: Option<Duration>,
    /// Clients in the singleton campaign.
    pub clients: usize,
    pub probe: ProbeCommand,
    /// The rerun line's prefix, for reproduce text.
    pub command_line: String,
}

fn duration(flag: &str, text: &Option<String>) -> Result<Option<Duration>, HarnessError> {
    text.as_deref()
        .map(|t| {
            humantime::parse_duration(t)
                .map_err(|e| HarnessError::Usage(format!("{flag} {t:?}: {e}")))
        })
        .transpose()
}

impl LockOptions {
    fn pattern(&self) -> Result<Pattern, HarnessError> {
        match (&self.client, &self.sidecar) {
            (Some(c), None) => {
                if !c.contains("{protected}") {
                    return Err(HarnessError::Usage(format!(
                        "--client {c:?}: the command must contain {{protected}}, where the protected process goes"
                    )));
                }
                Ok(Pattern::Shim { command: c.clone() })
            }
            (None, Some(s)) => {
                if self.sentinel.is_empty() || self.sentinel.contains('/') {
                    return Err(HarnessError::Usage(format!(
                        "--sentinel {:?}: give a file name (it is made in each client's allocation directory)",
                        self.sentinel
                    )));
                }
                Ok(Pattern::Sidecar {
                    command: s.clone(),
                    sentinel: self.sentinel.clone(),
                })
            }
            _ => Err(HarnessError::Usage(
                "give the client under test: --client CMD (shim) or --sidecar CMD (sidecar)".into(),
            )),
        }
    }

    fn rerun_prefix(&self, common: &SuiteOptions) -> String {
        let mut parts = vec!["nomad-conform".to_string(), KIND.into()];
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                parts.push(name.into());
                parts.push(quote(&v));
            }
        };
        flag("--client", self.client.clone());
        flag("--sidecar", self.sidecar.clone());
        if self.sidecar.is_some() && self.sentinel != "lock-held" {
            flag("--sentinel", Some(self.sentinel.clone()));
        }
        if self.path != crate::cli::DEFAULT_LOCK_PATH {
            flag("--path", Some(self.path.clone()));
        }
        flag("--nomad-addr", self.nomad_addr.clone());
        flag("--kill-timeout", self.kill_timeout.clone());
        flag("--give-up", self.give_up.clone());
        flag("--stop-on-client-after", self.stop_on_client_after.clone());
        flag("--clients", self.clients.map(|c| c.to_string()));
        flag("--profile", common.profile.clone());
        flag(
            "--specs",
            common.specs.as_ref().map(|p| p.display().to_string()),
        );
        if self.task_api {
            parts.push("--task-api".into());
        }
        parts.join(" ")
    }
}

/// Clauses the run cannot check, with the reason.
fn skips(
    clauses: &ClauseSet,
    selection: &Selection,
    config: &LockConfig,
) -> Vec<(CaseKey, String)> {
    let mut out = Vec::new();
    for key in &selection.run {
        let Some(clause) = clauses.get(key) else {
            continue;
        };
        let reason = clause.tags.iter().find_map(|t| match t.as_str() {
            "shim-only" if !config.pattern.is_shim() => Some(
                "the clause is about a shim's protected process (its exit status); this run checks a sidecar"
                    .to_string(),
            ),
            "sidecar-only" if config.pattern.is_shim() => {
                Some("the clause is about the sidecar pattern; this run checks a shim".to_string())
            }
            "requires-reference-server" if !config.server.is_reference() => Some(
                "the clause needs the reference Variables server (it restarts the server or sets its ACLs); this run uses --nomad-addr"
                    .to_string(),
            ),
            "requires-give-up" if config.give_up.is_none() => Some(
                "give the client's give-up window with --give-up D (the time after which it must stop trying to acquire and fail)"
                    .to_string(),
            ),
            "requires-stop-on-client-after" if config.stop_on_client_after.is_none() => Some(
                "give the job's disconnect.stop_on_client_after with --stop-on-client-after D to compute the timing advice"
                    .to_string(),
            ),
            _ => None,
        });
        if let Some(r) = reason {
            out.push((key.clone(), r));
        }
    }
    out
}

/// Run the lock suite. Returns the record; writing reports is the caller's business.
pub async fn run(common: &SuiteOptions, opts: &LockOptions) -> Result<RunRecord, HarnessError> {
    let started_at = Utc::now();
    let pattern = opts.pattern()?;
    if let Some(t) = &opts.token {
        crate::secrets::register(t);
    }
    crate::secrets::register_from_command(pattern.command());
    let profile = Profile::load(common.profile.as_deref())?;
    if opts.path.trim_matches('/').is_empty() {
        return Err(HarnessError::Usage("--path must name a variable".into()));
    }
    let server = match &opts.nomad_addr {
        None => {
            ServerChoice::Reference(profile.lock.server_profile().map_err(HarnessError::Usage)?)
        }
        Some(addr) => ServerChoice::Nomad {
            upstream: Upstream::parse(addr)
                .map_err(|e| HarnessError::Usage(format!("--nomad-addr: {e}")))?,
            addr: addr.clone(),
            token: opts.token.clone(),
        },
    };
    let kill_timeout =
        duration("--kill-timeout", &opts.kill_timeout)?.unwrap_or(profile.lock.kill_timeout);
    let give_up = duration("--give-up", &opts.give_up)?;
    let stop_on_client_after = duration("--stop-on-client-after", &opts.stop_on_client_after)?;
    let clients = opts.clients.unwrap_or(profile.lock.campaign_clients);
    if !(2..=16).contains(&clients) {
        return Err(HarnessError::Usage(format!(
            "--clients {clients}: the singleton campaign needs 2 to 16 clients"
        )));
    }
    let probe = ProbeCommand::current_exe()
        .map_err(|e| HarnessError::Internal(format!("the probe command: {e}")))?;
    let (features, clauses, mut selection) = load_suite(KIND, common)?;
    let config = LockConfig {
        pattern,
        path: opts.path.trim_start_matches('/').to_string(),
        server,
        task_api: opts.task_api,
        kill_timeout,
        give_up,
        stop_on_client_after,
        clients,
        probe,
        command_line: opts.rerun_prefix(common),
    };
    for (key, reason) in skips(&clauses, &selection, &config) {
        selection.skip(&key, reason);
    }
    // Against one real Nomad every clause uses the same variable: one at a time. Against the
    // reference server each clause has a server of its own.
    let jobs = if config.server.is_reference() {
        common.jobs.max(1)
    } else {
        1
    };

    let run_id = crate::run::new_run_id();
    let seed = crate::run::seed_or_random(common.seed);
    let scratch_base = crate::run::make_scratch_base(&std::env::temp_dir(), &run_id)?;
    let store = RunStore::new(clauses, config.command_line.clone(), seed);
    let server_text = match &config.server {
        ServerChoice::Reference(p) => {
            format!("the reference Variables server ({} numbers)", p.name)
        }
        ServerChoice::Nomad { addr, .. } => format!("Nomad at {addr}"),
    };
    let header = format!(
        "nomad-conform {KIND}: {} client `{}` against {server_text}, profile {}, seed {seed}, run {run_id}",
        config.pattern.name(),
        config.pattern.command(),
        profile.name,
    );
    let progress = crate::console::Progress::start(
        &store,
        &header,
        selection.run.len() + selection.skip.len(),
        common.output,
        common.strict,
    );
    let mut details = vec![
        ("pattern".to_string(), config.pattern.name().to_string()),
        ("lock path".to_string(), config.path.clone()),
        ("server".to_string(), server_text.clone()),
        (
            "API".to_string(),
            if config.task_api {
                "unix socket (NOMAD_UNIX_ADDR, as the Task API)".to_string()
            } else {
                "http (NOMAD_ADDR)".to_string()
            },
        ),
    ];
    if let Some(g) = config.give_up {
        details.push(("give-up".into(), crate::fmt_duration(g)));
    }
    if let Some(s) = config.stop_on_client_after {
        details.push(("stop_on_client_after".into(), crate::fmt_duration(s)));
    }
    let subject = Subject {
        plugin: config.pattern.command().to_string(),
        version: None,
        details: details.into_iter().collect(),
    };
    let ctx = Arc::new(RunCtx {
        run_id: run_id.clone(),
        seed,
        profile,
        config,
        scratch_base: scratch_base.clone(),
        store,
    });
    let interrupted = execute::<LockWorld>(ctx.clone(), features, &selection, jobs).await;
    progress.finish();
    crate::process::kill_all_live_groups();
    let cleanup = crate::ledger::remove_scratch(&scratch_base);
    for leak in &cleanup.leaked {
        eprintln!("warning: {leak}");
    }
    let meta = RunMeta {
        kind: KIND.into(),
        subject,
        command_line: common.command_line.clone(),
        started_at,
        strict: common.strict,
        shard: common.shard,
    };
    Ok(finish_record(&ctx, meta, interrupted))
}
