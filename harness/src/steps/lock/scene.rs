//! One clause's world: the server, a proxy per client, the probe listener, the clients, and
//! the harness's own "other holder".

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nomad_conform_variables::{
    AclConfig, Capability, Listen as ServerListen, LockEvent, Policy, ServerConfig, ServerHandle,
    Token, VariablesServer,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::checker::{Hold, holder_intervals, lock_owners, with_conflicts};
use super::{LockConfig, Pattern, ServerChoice};
use crate::nomad_api::{Target, Upstream};
use crate::plugins::lock::api::Holder;
use crate::plugins::lock::proxy::Listen;
use crate::plugins::lock::{
    ApiAddr, ClientOptions, ClientSpec, Exchange, ProbeInterval, ProbeListener, Proxy, ProxyConfig,
    RunningClient,
};
use crate::world::ScenarioCtx;

/// The label of the harness's own holder in records.
pub const OTHER: &str = "other-holder";

/// The management token of a reference server with ACLs (never a real secret).
const ADMIN_TOKEN: &str = "nomad-conform-management";

/// A lock held by the harness itself, renewed in the background until released.
#[derive(Debug)]
pub struct OtherHold {
    pub holder: Holder,
    pub id: String,
    pub ttl: Duration,
    pub acquired: Instant,
    stop: watch::Sender<bool>,
    renewer: JoinHandle<()>,
}

impl OtherHold {
    /// Stop renewing and release; when the release was answered.
    pub async fn release(self) -> Result<Instant, String> {
        let _ = self.stop.send(true);
        self.renewer.abort();
        self.holder.release(&self.id).await?;
        Ok(Instant::now())
    }
}

impl Drop for OtherHold {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// Everything one clause runs.
#[derive(Debug)]
pub struct Scene {
    pub server: Option<Arc<ServerHandle>>,
    pub upstream: Target,
    /// The clients' NOMAD_TOKEN, NOMAD_NAMESPACE and NOMAD_REGION.
    pub token: Option<String>,
    pub namespace: Option<String>,
    pub region: Option<String>,
    /// The token of the harness's own holder.
    pub admin_token: Option<String>,
    pub listener: ProbeListener,
    pub proxies: BTreeMap<String, Proxy>,
    pub clients: Vec<RunningClient>,
    pub t0: Instant,
    /// The protected process exits by itself: after D with code N.
    pub probe_exit: Option<(Duration, u8)>,
    pub other: Option<OtherHold>,
    /// When the other holder's lock was released.
    pub other_released: Option<Instant>,
    dir: PathBuf,
    recorded: bool,
    /// The clause's ledger: what a client leaves running detached is swept there.
    ledger: crate::ledger::Ledger,
}

impl Scene {
    /// A server as the run's configuration says; with `acl_namespace`, a reference server with
    /// ACLs on whose client token may write only the lock path in that namespace.
    pub async fn build(
        ctx: &ScenarioCtx<LockConfig>,
        acl_namespace: Option<&str>,
    ) -> Result<Scene, String> {
        let config = &ctx.run.config;
        let mut region = None;
        let (server, upstream, token, admin_token, namespace) = match &config.server {
            ServerChoice::Reference(profile) => {
                let mut sc = ServerConfig::localhost().with_profile(profile.clone());
                // An address of its own, as the proxies have: the port stays free while a
                // restart (LOCK-SERVER-RESTART) has the server down, and no other server may be
                // given it meanwhile.
                sc.listen = ServerListen::Tcp(std::net::SocketAddr::from((
                    crate::plugins::lock::proxy::private_loopback(),
                    0,
                )));
                let (mut token, mut admin, mut ns) = (None, None, None);
                if let Some(namespace) = acl_namespace {
                    let client_secret = format!("{}-client", ctx.token);
                    let policy = Policy::new("conform-lock").path(
                        namespace,
                        &config.path,
                        &[Capability::Write, Capability::Read, Capability::List],
                    );
                    sc = sc.with_acl(
                        AclConfig::enabled()
                            .with_policy(policy)
                            .with_token(Token::management(ADMIN_TOKEN))
                            .with_token(Token::client(&client_secret, &["conform-lock"])),
                    );
                    crate::secrets::register(&client_secret);
                    crate::secrets::register(ADMIN_TOKEN);
                    token = Some(client_secret);
                    admin = Some(ADMIN_TOKEN.to_string());
                    ns = Some(namespace.to_string());
                }
                let handle = match VariablesServer::start(sc.clone()).await {
                    Ok(h) => h,
                    Err(_) => {
                        // That address cannot be bound here: 127.0.0.1, as before.
                        sc.listen = ServerListen::localhost();
                        VariablesServer::start(sc).await.map_err(|e| {
                            ctx.harness_error(format!("failed to start the reference server: {e}"))
                        })?
                    }
                };
                let upstream = Target::plain(Upstream::of_server(&handle));
                (Some(Arc::new(handle)), upstream, token, admin, ns)
            }
            ServerChoice::Nomad(api) => {
                region = api.region.clone();
                (
                    None,
                    api.target.clone(),
                    api.token.clone(),
                    api.token.clone(),
                    api.namespace.clone(),
                )
            }
        };
        let dir = ctx.scratch().to_path_buf();
        let listener = ProbeListener::bind(&dir.join("probe.sock"))
            .await
            .map_err(|e| ctx.harness_error(format!("failed to listen for probes: {e}")))?;
        Ok(Scene {
            server,
            upstream,
            token,
            namespace,
            region,
            admin_token,
            listener,
            proxies: BTreeMap::new(),
            clients: Vec::new(),
            t0: Instant::now(),
            probe_exit: None,
            other: None,
            other_released: None,
            dir,
            recorded: false,
            ledger: ctx.ledger.clone(),
        })
    }

    /// The proxy of `label`, started on first use (over a unix socket with `--task-api`).
    pub async fn proxy(&mut self, label: &str, task_api: bool) -> Result<&Proxy, String> {
        if !self.proxies.contains_key(label) {
            let mut pc = ProxyConfig::new(label, self.upstream.clone());
            if task_api {
                pc = pc.with_listen(Listen::Unix(self.dir.join(format!("{label}.sock"))));
            }
            let p = Proxy::start(pc)
                .await
                .map_err(|e| format!("failed to start the proxy: {e}"))?;
            self.proxies.insert(label.to_string(), p);
        }
        Ok(&self.proxies[label])
    }

    /// Starts client `label` as an allocation runs it.
    pub async fn start_client(
        &mut self,
        config: &LockConfig,
        label: &str,
    ) -> Result<&RunningClient, String> {
        let addr = self.proxy(label, config.task_api).await?.nomad_addr();
        let addr = ApiAddr::parse(&addr)?;
        let alloc = self.dir.join(format!("alloc-{label}"));
        std::fs::create_dir_all(&alloc)
            .map_err(|e| format!("failed to create {}: {e}", alloc.display()))?;
        let mut opts = ClientOptions::new(
            label,
            addr,
            &config.path,
            self.listener.socket_path(),
            config.probe.clone(),
        );
        opts.token = self.token.clone();
        opts.namespace = self.namespace.clone();
        opts.region = self.region.clone();
        opts.probe_exit_after = self.probe_exit;
        opts.cwd = Some(alloc.clone());
        let spec = match &config.pattern {
            Pattern::Shim { command } => ClientSpec::Shim {
                command: command.clone(),
            },
            Pattern::Sidecar { command, sentinel } => ClientSpec::Sidecar {
                command: command.clone(),
                sentinel: alloc.join(sentinel),
                kill_timeout: config.kill_timeout,
            },
        };
        let c = RunningClient::start(&spec, &opts)
            .await
            .map_err(|e| e.to_string())?;
        // A client's descendant that left its session (`setsid cmd &`) is found by the
        // client's environment when the clause ends, killed, and told with the clause.
        self.ledger.track(crate::escapees::Sweep {
            env: c.env().to_vec(),
            what: format!("lock client {label}"),
        });
        self.clients.push(c);
        Ok(self.clients.last().expect("just pushed"))
    }

    pub fn client(&self, label: &str) -> Option<&RunningClient> {
        self.clients.iter().find(|c| c.label() == label)
    }

    /// The harness takes the lock itself (through its own proxy) and renews it every TTL/2.
    pub async fn take_lock(&mut self, config: &LockConfig) -> Result<(), String> {
        let upstream = match self.proxy(OTHER, false).await?.addr() {
            Some(a) => Target::plain(Upstream::Tcp(a)),
            None => return Err("the other holder's proxy has no address".into()),
        };
        let holder = Holder {
            upstream,
            path: config.path.clone(),
            namespace: self.namespace.clone(),
            region: self.region.clone(),
            token: self.admin_token.clone(),
            timeout: Duration::from_secs(5),
        };
        let ttl = config.server.ttl_min() * 2;
        let id = holder
            .acquire(ttl, config.server.delay_default())
            .await
            .map_err(|e| {
                format!(
                    "the harness could not take the lock at {}: {e}",
                    config.path
                )
            })?;
        let (stop, mut stopped) = watch::channel(false);
        let (h, lock_id) = (holder.clone(), id.clone());
        let renewer = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(ttl / 2) => {}
                    _ = stopped.changed() => return,
                }
                let _ = h.renew(&lock_id).await;
            }
        });
        self.other = Some(OtherHold {
            holder,
            id,
            ttl,
            acquired: Instant::now(),
            stop,
            renewer,
        });
        Ok(())
    }

    /// Every exchange of every proxy, in time order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let mut v: Vec<Exchange> = self.proxies.values().flat_map(|p| p.records()).collect();
        v.sort_by_key(|e| e.at);
        v
    }

    pub fn probes(&self) -> Vec<ProbeInterval> {
        self.listener.intervals()
    }

    pub fn probes_of(&self, label: &str) -> Vec<ProbeInterval> {
        self.probes()
            .into_iter()
            .filter(|p| p.label == label)
            .collect()
    }

    /// The reference server's lock history (empty against a real Nomad).
    pub fn history(&self) -> Vec<LockEvent> {
        self.server
            .as_ref()
            .map(|s| s.history())
            .unwrap_or_default()
    }

    /// Who held the lock when, as the reference server saw it, each hold ending at the first
    /// renew answered 409 too (see [`crate::steps::lock::checker::with_conflicts`]).
    pub fn holds(&self) -> Vec<Hold> {
        let ex = self.exchanges();
        with_conflicts(holder_intervals(&self.history(), &lock_owners(&ex)), &ex)
    }

    /// Exchanges, probe intervals and the clients' processes into the case (once).
    pub fn record_into(&mut self, ctx: &ScenarioCtx<LockConfig>) {
        if self.recorded {
            return;
        }
        self.recorded = true;
        let start = crate::recorder::lock(&ctx.case).started;
        for e in self.exchanges() {
            ctx.record(e.event(start));
        }
        let mut notes = Vec::new();
        for p in self.probes() {
            notes.push(format!(
                "protected process of {} (pid {}): ran {} ms .. {}{}",
                p.label,
                p.pid,
                crate::steps::lock::checker::offset_ms(start, p.start),
                p.end
                    .map(|e| format!("{} ms", crate::steps::lock::checker::offset_ms(start, e)))
                    .unwrap_or_else(|| "still running".into()),
                match (p.exit, p.killed) {
                    (Some(c), _) => format!(", exited {c}"),
                    (None, true) => ", killed".to_string(),
                    _ => String::new(),
                }
            ));
        }
        for c in &self.clients {
            for t in c.tasks() {
                let status = t
                    .status
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "running".into());
                notes.push(format!(
                    "{} {} ({}): {status}; stderr: {}",
                    c.label(),
                    t.role,
                    t.argv.join(" "),
                    t.stderr.text.trim()
                ));
            }
        }
        for (label, proxy) in &self.proxies {
            let dropped = proxy.dropped_records();
            if dropped > 0 {
                notes.push(format!(
                    "{dropped} exchange(s) of {label} were not kept: the proxy's record was full (the verdict rests on the server's lock history and the kept ones)"
                ));
            }
        }
        let mut state = crate::recorder::lock(&ctx.case);
        state.notes.extend(notes);
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        for c in &self.clients {
            c.kill();
        }
        for p in self.proxies.values() {
            p.shutdown();
        }
    }
}
