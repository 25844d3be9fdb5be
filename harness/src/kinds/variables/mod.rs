//! The Variables server suite (`nomad-conform variables`): Nomad's Variables, lock and ACL
//! rules checked against a server, the reference one by default or a real Nomad agent.
//!
//! Without `--nomad-addr` the run starts one reference Variables server (with ACLs on and a
//! management token of its own, and the numbers of the profile's `[lock] server`) that every
//! scenario shares; scenarios keep apart by their paths, policy and token names, which carry
//! the scenario's unique token. A scenario that restarts the server starts one of its own.
//! With `--nomad-addr` the scenarios run against that agent: ACL clauses need ACLs on and a
//! management token (`--token`), and clauses that need to control the server are skipped.

use std::sync::Arc;
use std::time::Duration;

use nomad_conform_reports::model::{RunRecord, Subject};
use nomad_conform_variables::{AclConfig, Listen, ServerConfig, Token, VariablesServer};

use crate::clauses::{CaseKey, ClauseSet};
use crate::cli::VariablesArgs;
use crate::error::HarnessError;
use crate::nomad_api::{AddrFallback, ApiSettings};
use crate::plugins::variables::{Call, Credential, Endpoint, send};
use crate::profile::Profile;
use crate::run::{Prepared, RunStart, Selection, Suite, SuiteOptions};
use crate::shell::quote;
use crate::steps::variables::{Acl, Target, Timing, VariablesConfig, VariablesWorld, go_duration};
use crate::world::RunCtx;

pub const KIND: &str = "variables";

/// The management token of the reference server the run starts (never a real secret).
pub const ADMIN_TOKEN: &str = "nomad-conform-management";

/// The Variables suite: against the reference server, or the Nomad agent at `--nomad-addr`.
pub enum VariablesSuite<'a> {
    /// A reference server started from this configuration (ACLs on with the harness's own
    /// management token, on `127.0.0.1`, whatever it says; its numbers and faults are kept),
    /// shared by every scenario, and copied for a scenario that restarts its server. Without
    /// `--nomad-addr` the configuration is the default one with the profile's numbers; the
    /// project's tests give faulty servers.
    Reference {
        server: Option<Box<ServerConfig>>,
        common: &'a SuiteOptions,
    },
    /// A Nomad agent (address, TLS, management token, region).
    Nomad {
        api: Box<ApiSettings>,
        common: &'a SuiteOptions,
    },
}

impl<'a> VariablesSuite<'a> {
    /// The suite the command line asks for.
    pub fn from_args(
        args: &'a VariablesArgs,
        common: &'a SuiteOptions,
    ) -> Result<Self, HarnessError> {
        // The scenarios choose their namespaces (and make some): a namespace of the user's
        // would be silently ignored. NOMAD_NAMESPACE is ignored as the rest of a shell's
        // environment is.
        if args.api.namespace.is_some() {
            return Err(HarnessError::Usage(
                "--namespace is not for the variables suite: its scenarios use namespaces of their own"
                    .into(),
            ));
        }
        let api = crate::nomad_api::settings::from_env(&args.api, AddrFallback::Flag)?;
        // A --token without --nomad-addr is refused there, as every API flag is: the
        // reference server is started with a management token of its own.
        match api {
            None => Ok(VariablesSuite::Reference {
                server: None,
                common,
            }),
            Some(_) if args.api.token.as_ref().is_some_and(|t| t.trim().is_empty()) => {
                Err(HarnessError::Usage("--token is empty".into()))
            }
            Some(api) => {
                api.warn();
                Ok(VariablesSuite::Nomad {
                    api: Box::new(api),
                    common,
                })
            }
        }
    }

    fn common(&self) -> &SuiteOptions {
        match self {
            VariablesSuite::Reference { common, .. } | VariablesSuite::Nomad { common, .. } => {
                common
            }
        }
    }

    /// Start the reference server, or reach and probe the agent.
    async fn setup(&self, profile: &Profile) -> Result<Setup, HarnessError> {
        let numbers = profile.lock.server_profile().map_err(HarnessError::Usage)?;
        match self {
            VariablesSuite::Reference { server, common } => {
                let server = server
                    .as_deref()
                    .cloned()
                    .unwrap_or_else(|| ServerConfig::localhost().with_profile(numbers));
                reference_setup(common, server).await
            }
            VariablesSuite::Nomad { api, .. } => nomad_setup(api, numbers).await,
        }
    }
}

/// Run the suite against a reference server started from `server` (see
/// [`VariablesSuite::Reference`]); the project's tests call this with faulty servers.
pub async fn run_reference(
    common: &SuiteOptions,
    server: ServerConfig,
) -> Result<RunRecord, HarnessError> {
    crate::run::run_suite(
        common,
        &VariablesSuite::Reference {
            server: Some(Box::new(server)),
            common,
        },
    )
    .await
}

async fn nomad_setup(
    api: &ApiSettings,
    numbers: nomad_conform_variables::Profile,
) -> Result<Setup, HarnessError> {
    let addr = api.addr.as_str();
    let token = api.token.as_deref();
    let endpoint =
        Endpoint::of_settings(api).map_err(|e| HarnessError::Usage(format!("--nomad-addr {e}")))?;
    if numbers.scale_divisor != 1 {
        eprintln!(
            "warning: the profile's [lock] server = {:?} expects the server at {addr} to enforce Nomad's lock numbers divided by {} (TTL from {}); a real Nomad enforces TTL 10s..24h: use the default profile",
            numbers.name,
            numbers.scale_divisor,
            crate::fmt_duration(numbers.lock_ttl_min)
        );
    }
    let admin = Credential::management(token);
    let timing = Timing::for_numbers(&numbers);
    let probe = probe(&endpoint, &admin, token.is_some(), timing.request_timeout).await?;
    let mut rerun = vec!["nomad-conform".to_string(), KIND.into()];
    rerun.extend(api.rerun_flags());
    Ok(Setup {
        target: Target::Nomad {
            addr: addr.to_string(),
        },
        endpoint,
        numbers,
        admin,
        acl: probe.acl,
        anonymous_policy: probe.anonymous_policy,
        subject: Subject {
            plugin: addr.to_string(),
            version: probe.version,
            details: api.details().into_iter().collect(),
        },
        server_text: format!("Nomad at {addr}"),
        rerun,
        secret: token.map(str::to_string),
    })
}

async fn reference_setup(
    common: &SuiteOptions,
    server: ServerConfig,
) -> Result<Setup, HarnessError> {
    let template = ServerConfig {
        listen: Listen::localhost(),
        acl: AclConfig::enabled().with_token(Token::management(ADMIN_TOKEN)),
        ..server
    };
    let numbers = template.profile.clone();
    let handle = VariablesServer::start(template.clone())
        .await
        .map_err(|e| {
            HarnessError::Internal(format!(
                "failed to start the reference Variables server: {e}"
            ))
        })?;
    let endpoint = Endpoint::of_server(&handle).ok_or_else(|| {
        HarnessError::Internal("the reference Variables server has no TCP address".into())
    })?;
    let faults: Vec<String> = template.faults.iter().map(|f| f.to_string()).collect();
    let mut details = vec![("listening on".to_string(), endpoint.base())];
    if !faults.is_empty() {
        details.push(("faults".into(), faults.join(", ")));
    }
    let mut rerun = vec!["nomad-conform".to_string(), KIND.into()];
    if let Some(p) = &common.profile {
        rerun.push("--profile".into());
        rerun.push(quote(&p.display().to_string()));
    }
    Ok(Setup {
        target: Target::Reference {
            server: Arc::new(handle),
            template: Box::new(template),
        },
        endpoint,
        numbers,
        admin: Credential::management(Some(ADMIN_TOKEN)),
        acl: Acl::On,
        anonymous_policy: false,
        subject: Subject {
            plugin: "reference Variables server (nomad-conform-variables)".into(),
            version: Some(env!("CARGO_PKG_VERSION").into()),
            details: details.into_iter().collect(),
        },
        server_text: if faults.is_empty() {
            "the reference Variables server".into()
        } else {
            format!(
                "the reference Variables server with faults {}",
                faults.join(", ")
            )
        },
        rerun,
        secret: None,
    })
}

/// Everything a run needs beside the common options.
struct Setup {
    target: Target,
    endpoint: Endpoint,
    numbers: nomad_conform_variables::Profile,
    admin: Credential,
    acl: Acl,
    anonymous_policy: bool,
    subject: Subject,
    server_text: String,
    rerun: Vec<String>,
    /// The user's token, redacted from the record.
    secret: Option<String>,
}

impl Suite for VariablesSuite<'_> {
    const KIND: &'static str = KIND;
    type World = VariablesWorld;

    async fn prepare(
        &self,
        start: &RunStart,
        clauses: &ClauseSet,
        selection: &mut Selection,
    ) -> Result<Prepared<VariablesConfig>, HarnessError> {
        let setup = self.setup(&start.profile).await?;
        let mut rerun = setup.rerun;
        if let Some(d) = &self.common().specs {
            rerun.push("--specs".into());
            rerun.push(quote(&d.display().to_string()));
        }
        let config = VariablesConfig {
            endpoint: setup.endpoint,
            timing: Timing::for_numbers(&setup.numbers),
            numbers: setup.numbers,
            admin: setup.admin,
            acl: setup.acl,
            command_line: rerun.join(" "),
            target: setup.target,
        };
        let rerun_prefix = crate::command_line::CommandLine::from_shell_words(rerun);
        for (key, reason) in skips(clauses, selection, &config, setup.anonymous_policy) {
            selection.skip(&key, reason);
        }
        let n = &config.numbers;
        let numbers_text = format!(
            "{} lock numbers: TTL {}..{}, default TTL {}, lock delay {}",
            n.name,
            go_duration(n.lock_ttl_min),
            go_duration(n.lock_ttl_max),
            go_duration(n.lock_ttl_default),
            go_duration(n.lock_delay_default)
        );
        let mut subject = setup.subject;
        subject
            .details
            .insert("server".into(), setup.server_text.clone());
        subject
            .details
            .insert("numbers".into(), numbers_text.clone());
        subject.details.insert(
            "ACLs".into(),
            match &config.acl {
                Acl::On => "on, with a management token".into(),
                Acl::Off(why) => format!("clauses skipped: {why}"),
            },
        );
        Ok(Prepared {
            rerun_prefix,
            config,
            subject,
            about: format!("{} ({numbers_text})", setup.server_text),
            jobs: None,
            secrets: setup.secret.into_iter().collect(),
        })
    }

    async fn finish(&self, run: &RunCtx<VariablesConfig>) {
        if let Target::Reference { server, .. } = &run.config.target
            && let Err(e) = server.shutdown().await
        {
            eprintln!("warning: the reference Variables server did not stop cleanly: {e}");
        }
    }
}

/// Clauses the run cannot check, with the reason.
fn skips(
    clauses: &ClauseSet,
    selection: &Selection,
    config: &VariablesConfig,
    anonymous_policy: bool,
) -> Vec<(CaseKey, String)> {
    let mut out = Vec::new();
    for key in &selection.run {
        let Some(clause) = clauses.get(key) else {
            continue;
        };
        let reason = clause.tags.iter().find_map(|t| match (t.as_str(), &config.target, &config.acl) {
            ("requires-reference-server", Target::Nomad { addr }, _) => Some(format!(
                "the clause needs the reference Variables server (it restarts the server, or makes a workload identity token, which Nomad has no API for); this run checks Nomad at {addr}"
            )),
            ("acl", _, Acl::Off(why)) => Some(why.clone()),
            ("requires-no-anonymous-policy", _, _) if anonymous_policy => Some(
                "the server has an ACL policy named \"anonymous\", which may grant requests without a token what this clause expects refused; run it against a cluster without one"
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

/// What the harness learns about a Nomad agent before the run.
struct Probe {
    acl: Acl,
    anonymous_policy: bool,
    version: Option<String>,
}

/// Ask the agent who the token is (`/v1/acl/token/self`), whether an anonymous policy
/// exists, and its version (`/v1/agent/self`).
async fn probe(
    endpoint: &Endpoint,
    admin: &Credential,
    token_given: bool,
    timeout: Duration,
) -> Result<Probe, HarnessError> {
    let get = |operation: &'static str, target: &str| Call {
        operation,
        method: "GET",
        target: target.to_string(),
        body: None,
        credential: admin.clone(),
    };
    let me = send(endpoint, get("acl-token", "/v1/acl/token/self"), timeout).await;
    let base = endpoint.base();
    let acl = match me.status {
        None => {
            return Err(HarnessError::Internal(format!(
                "failed to reach the Nomad API at {base}: {}",
                me.error.unwrap_or_default()
            )));
        }
        Some(403) if token_given => {
            return Err(HarnessError::Usage(format!(
                "the server at {base} refuses the token given with --token ({})",
                me.outcome()
            )));
        }
        Some(200) => match me
            .json()
            .and_then(|j| j.get("Type").and_then(|t| t.as_str()).map(str::to_string))
        {
            Some(t) if t == "management" => Acl::On,
            Some(t) if token_given => {
                return Err(HarnessError::Usage(format!(
                    "the token given with --token is a {t} token: the suite needs a management token (it writes variables below conform/ and makes ACL policies, tokens and namespaces)"
                )));
            }
            _ => {
                return Err(HarnessError::Usage(format!(
                    "ACLs are on at {base}: give a management token with --token (the suite writes variables below conform/ and makes ACL policies, tokens and namespaces)"
                )));
            }
        },
        Some(_) if me.body.contains("ACL support disabled") => Acl::Off(format!(
            "ACLs are off at {base} (GET /v1/acl/token/self answered {})",
            me.outcome()
        )),
        Some(_) => Acl::Off(format!(
            "the server at {base} could not tell who the token is (GET /v1/acl/token/self answered {})",
            me.outcome()
        )),
    };
    let anonymous_policy = acl == Acl::On
        && send(
            endpoint,
            get("acl-policy", "/v1/acl/policy/anonymous"),
            timeout,
        )
        .await
        .status
            == Some(200);
    let version = send(endpoint, get("agent", "/v1/agent/self"), timeout)
        .await
        .json()
        .and_then(|j| {
            j.pointer("/config/Version/Version")
                .and_then(|v| v.as_str())
                .map(str::to_string)
        });
    Ok(Probe {
        acl,
        anonymous_policy,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_follows_the_numbers() {
        let fast = Timing::for_numbers(&nomad_conform_variables::Profile::fast());
        assert_eq!(fast.poll, Duration::from_millis(100));
        assert_eq!(fast.tolerance, Duration::from_millis(500));
        let nomad = Timing::for_numbers(&nomad_conform_variables::Profile::nomad());
        assert_eq!(nomad.poll, Duration::from_secs(1));
        assert_eq!(nomad.tolerance, Duration::from_secs(5));
    }

    #[tokio::test]
    async fn probe_reads_the_reference_servers_acl_state() {
        let on = VariablesServer::start(
            ServerConfig::localhost()
                .with_acl(AclConfig::enabled().with_token(Token::management("root"))),
        )
        .await
        .unwrap();
        let endpoint = Endpoint::of_server(&on).unwrap();
        let t = Duration::from_secs(5);
        let p = probe(&endpoint, &Credential::management(Some("root")), true, t)
            .await
            .unwrap();
        assert_eq!(p.acl, Acl::On);
        assert!(!p.anonymous_policy);
        let anon = probe(&endpoint, &Credential::management(None), false, t).await;
        assert!(
            matches!(anon, Err(HarnessError::Usage(ref m)) if m.contains("give a management token")),
            "{:?}",
            anon.as_ref().err()
        );
        let bad = probe(&endpoint, &Credential::management(Some("nope")), true, t).await;
        assert!(matches!(bad, Err(HarnessError::Usage(ref m)) if m.contains("refuses")));
        let off = VariablesServer::start(ServerConfig::localhost())
            .await
            .unwrap();
        let p = probe(
            &Endpoint::of_server(&off).unwrap(),
            &Credential::management(None),
            false,
            t,
        )
        .await
        .unwrap();
        assert!(
            matches!(p.acl, Acl::Off(ref why) if why.contains("ACLs are off")),
            "{:?}",
            p.acl
        );
        on.shutdown().await.unwrap();
        let gone = probe(&endpoint, &Credential::management(Some("root")), true, t).await;
        // A server that cannot be used: exit 3, not a usage error.
        assert!(
            matches!(gone, Err(HarnessError::Internal(ref m)) if m.contains("failed to reach"))
        );
        off.shutdown().await.unwrap();
    }
}
