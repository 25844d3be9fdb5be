//! The singleton lock client suite (`nomad-conform lock`): read how the client is run (shim or
//! sidecar), which server plays Nomad (the reference Variables server, a fresh one per clause,
//! or a real Nomad behind the harness's proxy), skip what the run cannot check; the run itself
//! is [`crate::run::run_suite`]'s.

use std::time::Duration;

use nomad_conform_reports::model::Subject;

use crate::clauses::{CaseKey, ClauseSet};
use crate::cli::LockArgs;
use crate::command_line::CommandLine;
use crate::error::HarnessError;
use crate::nomad_api::{AddrFallback, ApiSettings};
use crate::plugins::lock::ProbeCommand;
use crate::run::{Prepared, RunStart, Selection, Suite, SuiteOptions};
use crate::steps::lock::{LockConfig, LockWorld, Pattern, ServerChoice};

pub const KIND: &str = "lock";

fn duration(flag: &str, text: &Option<String>) -> Result<Option<Duration>, HarnessError> {
    text.as_deref()
        .map(|t| {
            humantime::parse_duration(t)
                .map_err(|e| HarnessError::Usage(format!("{flag} {t:?}: {e}")))
        })
        .transpose()
}

/// The lock suite run with these command-line arguments.
pub struct LockSuite<'a> {
    pub args: &'a LockArgs,
    pub common: &'a SuiteOptions,
}

impl LockSuite<'_> {
    fn pattern(&self) -> Result<Pattern, HarnessError> {
        let args = self.args;
        match (&args.client, &args.sidecar) {
            (Some(c), None) => {
                if !c.contains("{protected}") {
                    return Err(HarnessError::Usage(format!(
                        "--client {c:?}: the command must contain {{protected}}, where the protected process goes"
                    )));
                }
                Ok(Pattern::Shim { command: c.clone() })
            }
            (None, Some(s)) => {
                if args.sentinel.is_empty() || args.sentinel.contains('/') {
                    return Err(HarnessError::Usage(format!(
                        "--sentinel {:?}: give a file name (it is made in each client's allocation directory)",
                        args.sentinel
                    )));
                }
                Ok(Pattern::Sidecar {
                    command: s.clone(),
                    sentinel: args.sentinel.clone(),
                })
            }
            _ => Err(HarnessError::Usage(
                "give the client under test: --client CMD (shim) or --sidecar CMD (sidecar)".into(),
            )),
        }
    }

    fn rerun_prefix(&self, api: Option<&ApiSettings>) -> CommandLine {
        let (args, common) = (self.args, self.common);
        let mut line = CommandLine::new(&["nomad-conform", KIND]);
        if let Some(api) = api {
            for w in api.rerun_flags() {
                line.shell_word(w);
            }
        }
        let mut flag = |name: &str, value: Option<String>| {
            line.flag(name, value.as_deref());
        };
        flag("--client", args.client.clone());
        flag("--sidecar", args.sidecar.clone());
        if args.sidecar.is_some() && args.sentinel != "lock-held" {
            flag("--sentinel", Some(args.sentinel.clone()));
        }
        if args.path != crate::cli::DEFAULT_LOCK_PATH {
            flag("--path", Some(args.path.clone()));
        }
        flag("--kill-timeout", args.kill_timeout.clone());
        flag("--give-up", args.give_up.clone());
        flag("--stop-on-client-after", args.stop_on_client_after.clone());
        flag("--clients", args.clients.map(|c| c.to_string()));
        flag(
            "--profile",
            common.profile.as_ref().map(|p| p.display().to_string()),
        );
        flag(
            "--specs",
            common.specs.as_ref().map(|p| p.display().to_string()),
        );
        if args.task_api {
            line.word("--task-api");
        }
        line
    }
}

/// The client's command line must split as a shell splits it, and its program must be one this
/// machine can run, before anything runs: otherwise every clause would end in the same shell
/// syntax error or "no such file" (a line that needs a shell is left to the shell).
fn check_program(pattern: &Pattern) -> Result<(), HarnessError> {
    let flag = if pattern.is_shim() {
        "--client"
    } else {
        "--sidecar"
    };
    crate::shell::split_words(flag, pattern.command()).map_err(HarnessError::Usage)?;
    let line = crate::plugins::lock::substitute(
        pattern.command(),
        &[("path", "x"), ("protected", "x"), ("sentinel", "x")],
    );
    let argv = crate::plugins::lock::task_argv(&line);
    let Some(program) = argv.first() else {
        return Err(HarnessError::Usage(format!("{flag}: the command is empty")));
    };
    if argv.len() > 2 && program == "/bin/sh" && argv[1] == "-c" {
        return Ok(());
    }
    crate::executable::check_program(program)
        .map_err(|why| HarnessError::Usage(format!("{flag}: {why}")))
}

/// Reach the agent once before any clause: a TLS problem or an agent that is not there is one
/// line and exit 3, not a failure of every clause. Any HTTP answer will do (the token may not
/// read the variable yet).
async fn preflight(api: &ApiSettings, path: &str) -> Result<(), HarnessError> {
    let target = crate::plugins::lock::api::lock_target(
        path,
        "",
        api.namespace.as_deref(),
        api.region.as_deref(),
    )
    .replace("?&", "?");
    crate::nomad_api::call(
        &api.target,
        "GET",
        &target,
        api.token.as_deref(),
        None,
        Duration::from_secs(10),
    )
    .await
    .map(|_| ())
    .map_err(|e| HarnessError::Internal(format!("failed to reach Nomad at {}: {e}", api.addr)))
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

impl Suite for LockSuite<'_> {
    const KIND: &'static str = KIND;
    type World = LockWorld;

    async fn prepare(
        &self,
        start: &RunStart,
        clauses: &ClauseSet,
        selection: &mut Selection,
    ) -> Result<Prepared<LockConfig>, HarnessError> {
        let opts = self.args;
        let profile = &start.profile;
        let api = crate::nomad_api::settings::from_env(&opts.api, AddrFallback::Flag)?;
        let pattern = self.pattern()?;
        crate::secrets::register_from_command(pattern.command());
        check_program(&pattern)?;
        if opts.path.trim_matches('/').is_empty() {
            return Err(HarnessError::Usage("--path must name a variable".into()));
        }
        if let Some(api) = &api {
            api.warn();
            preflight(api, opts.path.trim_start_matches('/')).await?;
        }
        let server = match &api {
            None => {
                ServerChoice::Reference(profile.lock.server_profile().map_err(HarnessError::Usage)?)
            }
            Some(api) => ServerChoice::Nomad(Box::new(api.clone())),
        };
        let kill_timeout =
            duration("--kill-timeout", &opts.kill_timeout)?.unwrap_or(profile.lock.kill_timeout);
        let give_up = duration("--give-up", &opts.give_up)?;
        let stop_on_client_after = duration("--stop-on-client-after", &opts.stop_on_client_after)?;
        let campaign = duration("--campaign", &opts.campaign)?.unwrap_or(profile.lock.campaign);
        let clients = opts.clients.unwrap_or(profile.lock.campaign_clients);
        if !(2..=16).contains(&clients) {
            return Err(HarnessError::Usage(format!(
                "--clients {clients}: the singleton campaign needs 2 to 16 clients"
            )));
        }
        let probe = ProbeCommand::current_exe()
            .map_err(|e| HarnessError::Internal(format!("the probe command: {e}")))?;
        let rerun_prefix = self.rerun_prefix(api.as_ref());
        let config = LockConfig {
            pattern,
            path: opts.path.trim_start_matches('/').to_string(),
            server,
            task_api: opts.task_api,
            kill_timeout,
            give_up,
            stop_on_client_after,
            clients,
            campaign,
            probe,
            command_line: rerun_prefix.clone(),
        };
        for (key, reason) in skips(clauses, selection, &config) {
            selection.skip(&key, reason);
        }
        let server_text = match &config.server {
            ServerChoice::Reference(p) => {
                format!("the reference Variables server ({} numbers)", p.name)
            }
            ServerChoice::Nomad(api) => format!("Nomad at {}", api.addr),
        };
        let about = format!(
            "{} client `{}` against {server_text}",
            config.pattern.name(),
            config.pattern.command(),
        );
        let mut details = vec![
            ("pattern".to_string(), config.pattern.name().to_string()),
            ("lock path".to_string(), config.path.clone()),
            ("server".to_string(), server_text),
            (
                "API".to_string(),
                if config.task_api {
                    "unix socket (NOMAD_UNIX_ADDR, as the Task API)".to_string()
                } else {
                    "http (NOMAD_ADDR)".to_string()
                },
            ),
        ];
        if let Some(api) = &api {
            details.extend(api.details());
        }
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
        // Against one real Nomad every clause uses the same variable: one at a time. Against
        // the reference server each clause has a server of its own.
        let jobs = (!config.server.is_reference()).then_some(1);
        Ok(Prepared {
            config,
            subject,
            about,
            rerun_prefix,
            jobs,
            secrets: api
                .as_ref()
                .and_then(|a| a.token.clone())
                .into_iter()
                .collect(),
        })
    }
}
