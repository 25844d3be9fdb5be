//! Starting, restarting and stopping the server, and the handle tests drive it with.
//!
//! The server listens on loopback TCP, on a unix socket, or on a unix socket with the Task
//! API's rules (contract B.6: `${NOMAD_SECRETS_DIR}/api.sock`, reached with
//! `NOMAD_UNIX_ADDR=unix://<path>`, every request authenticated). [`ServerHandle::restart`]
//! models a leader restart (contract B.3): the HTTP listener goes away, stored variables
//! stay (they are raft state), every in-memory lock timer and pending lock delay is lost,
//! and the new leader rebuilds a fresh 2 × TTL timer for each lock in state.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::acl::{AclConfig, Policy, Token};
use crate::clock::{Clock, TokioClock};
use crate::engine::{Engine, lock};
use crate::error::Error;
use crate::faults::{Fault, Faults};
use crate::history::{LockEvent, RequestRecord};
use crate::http::{ListenerKind, router};
use crate::locks::TimerInfo;
use crate::profile::Profile;
use crate::wire::Variable;

/// Where to listen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address; port 0 picks a free port (see [`ServerHandle::addr`]).
    Tcp(SocketAddr),
    /// A plain unix socket (the normal agent API over a socket).
    Unix(PathBuf),
    /// A unix socket with Task API authentication (no token: 401; unknown token with ACLs
    /// on: 403; the anonymous policy is never used).
    TaskApi(PathBuf),
}

impl Listen {
    /// `127.0.0.1:0`.
    pub fn localhost() -> Self {
        Self::Tcp(SocketAddr::from(([127, 0, 0, 1], 0)))
    }
}

/// Everything [`VariablesServer::start`] needs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where to listen.
    pub listen: Listen,
    /// Numbers to enforce.
    pub profile: Profile,
    /// ACLs (disabled by default).
    pub acl: AclConfig,
    /// Time source.
    pub clock: Arc<dyn Clock>,
    /// Misbehaviours, for testing a conformance suite against a broken server (none by
    /// default; see [`Fault`]).
    pub faults: Faults,
    /// Serve TCP over TLS (`https://`) with this configuration; a client-certificate verifier
    /// in it makes it mutual TLS, as an agent with `verify_https_client`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl ServerConfig {
    /// Nomad's profile, ACLs off, tokio's clock.
    pub fn new(listen: Listen) -> Self {
        Self {
            listen,
            profile: Profile::nomad(),
            acl: AclConfig::disabled(),
            clock: Arc::new(TokioClock::new()),
            faults: Faults::none(),
            tls: None,
        }
    }

    /// [`ServerConfig::new`] on `127.0.0.1:0`.
    pub fn localhost() -> Self {
        Self::new(Listen::localhost())
    }

    /// Uses `profile`.
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// Uses `acl`.
    pub fn with_acl(mut self, acl: AclConfig) -> Self {
        self.acl = acl;
        self
    }

    /// Uses `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Serves TCP over TLS with `config` (see [`ServerConfig::tls`]).
    pub fn with_tls(mut self, config: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// Turns `fault` on: the server breaks the rule it names. Only for testing a conformance
    /// suite; a server with a fault is not a reference server.
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.faults.insert(fault);
        self
    }
}

/// Entry point.
#[derive(Debug)]
pub struct VariablesServer;

impl VariablesServer {
    /// Binds the listener and starts serving.
    pub async fn start(config: ServerConfig) -> Result<ServerHandle, Error> {
        if !config.faults.has(Fault::PolicyUnchecked) {
            config.acl.validate()?;
        }
        let mut engine = Engine::new(config.profile, config.clock, config.acl);
        engine.faults = config.faults;
        let engine = Arc::new(engine);
        let (bound, kind) = match config.listen {
            Listen::Tcp(addr) => (Bound::Tcp(addr), ListenerKind::Tcp),
            Listen::Unix(path) => (Bound::Unix(path), ListenerKind::Unix),
            Listen::TaskApi(path) => (Bound::Unix(path), ListenerKind::TaskApi),
        };
        let mut handle = ServerHandle {
            engine,
            bound,
            kind,
            tls: config.tls,
            serving: tokio::sync::Mutex::new(None),
        };
        let (serving, bound) = handle.bind_and_serve().await?;
        handle.bound = bound;
        *handle.serving.get_mut() = Some(serving);
        Ok(handle)
    }
}

#[derive(Clone, Debug)]
enum Bound {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

#[derive(Debug)]
struct Serving {
    stop: oneshot::Sender<()>,
    task: JoinHandle<io::Result<()>>,
}

/// A running server.
#[derive(Debug)]
pub struct ServerHandle {
    engine: Arc<Engine>,
    bound: Bound,
    kind: ListenerKind,
    tls: Option<Arc<rustls::ServerConfig>>,
    serving: tokio::sync::Mutex<Option<Serving>>,
}

const STOP_GRACE: Duration = Duration::from_secs(2);

impl ServerHandle {
    /// The bound TCP address (`None` on a unix socket).
    pub fn addr(&self) -> Option<SocketAddr> {
        match &self.bound {
            Bound::Tcp(addr) => Some(*addr),
            Bound::Unix(_) => None,
        }
    }

    /// The unix socket path (`None` on TCP).
    pub fn socket_path(&self) -> Option<&Path> {
        match &self.bound {
            Bound::Tcp(_) => None,
            Bound::Unix(path) => Some(path),
        }
    }

    /// The address in `NOMAD_ADDR` form: `http://127.0.0.1:PORT` or `unix:///path`.
    pub fn nomad_addr(&self) -> String {
        match &self.bound {
            Bound::Tcp(addr) if self.tls.is_some() => format!("https://{addr}"),
            Bound::Tcp(addr) => format!("http://{addr}"),
            Bound::Unix(path) => format!("unix://{}", path.display()),
        }
    }

    /// The profile in force.
    pub fn profile(&self) -> &Profile {
        &self.engine.profile
    }

    /// Replaces the whole ACL configuration; takes effect for the next request.
    pub fn set_acl(&self, acl: AclConfig) -> Result<(), Error> {
        acl.validate()?;
        *self
            .engine
            .acl
            .write()
            .unwrap_or_else(PoisonError::into_inner) = acl;
        Ok(())
    }

    /// The ACL configuration in force.
    pub fn acl(&self) -> AclConfig {
        self.engine
            .acl
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Adds or replaces one policy (by name).
    pub fn upsert_policy(&self, policy: Policy) -> Result<(), Error> {
        policy.validate()?;
        self.edit_acl(|acl| acl.upsert_policy(policy));
        Ok(())
    }

    /// Removes a policy by name (tokens naming it lose what it granted).
    pub fn remove_policy(&self, name: &str) {
        self.edit_acl(|acl| acl.policies.retain(|p| p.name != name));
    }

    /// Adds or replaces one token (by secret).
    pub fn upsert_token(&self, token: Token) {
        self.edit_acl(|acl| acl.upsert_token(token));
    }

    /// Removes a token by secret (its requests then get 403).
    pub fn remove_token(&self, secret: &str) {
        self.edit_acl(|acl| acl.tokens.retain(|t| t.secret_id != secret));
    }

    fn edit_acl(&self, edit: impl FnOnce(&mut AclConfig)) {
        edit(
            &mut self
                .engine
                .acl
                .write()
                .unwrap_or_else(PoisonError::into_inner),
        );
    }

    /// Every lock event so far, in order.
    pub fn history(&self) -> Vec<LockEvent> {
        lock(&self.engine.history).events()
    }

    /// Every HTTP exchange so far, in order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.engine.history).requests()
    }

    /// A stored variable, lock included.
    pub fn variable(&self, namespace: &str, path: &str) -> Option<Variable> {
        lock(&self.engine.core).store.get(namespace, path).cloned()
    }

    /// Every stored variable in (namespace, path) order.
    pub fn variables(&self) -> Vec<Variable> {
        lock(&self.engine.core).store.all().cloned().collect()
    }

    /// The leader's running TTL timers and lock delays, soonest first.
    pub fn timers(&self) -> Vec<TimerInfo> {
        lock(&self.engine.core).timers.snapshot()
    }

    /// Clears the lock on a variable now, as the leader's invalidation does (a harness action,
    /// recorded as `ForcedRelease`); returns the lock ID that was cleared.
    pub fn force_release(&self, namespace: &str, path: &str) -> Option<String> {
        self.engine.force_release(namespace, path)
    }

    /// Restarts the server: see [`ServerHandle::restart_with_downtime`] with no downtime.
    pub async fn restart(&self) -> Result<(), Error> {
        self.restart_with_downtime(Duration::ZERO).await
    }

    /// Stops the listener, drops every lock timer and pending delay, waits `downtime` (in the
    /// server's clock), rebuilds a 2 × TTL timer per lock in state and listens again on the
    /// same address.
    pub async fn restart_with_downtime(&self, downtime: Duration) -> Result<(), Error> {
        let mut serving = self.serving.lock().await;
        let Some(current) = serving.take() else {
            return Err(Error::ShutDown {
                action: "restart the server",
            });
        };
        stop(current).await;
        self.engine.drop_timers();
        if self.engine.has(Fault::RestartDropsLocks) {
            self.engine.drop_all_locks();
        }
        if !downtime.is_zero() {
            self.engine.clock.sleep(downtime).await;
        }
        self.engine.restore_timers();
        let (next, _) = self.bind_and_serve().await?;
        *serving = Some(next);
        Ok(())
    }

    /// Stops serving and drops every timer. Idempotent.
    pub async fn shutdown(&self) -> Result<(), Error> {
        let current = self.serving.lock().await.take();
        lock(&self.engine.core).timers.drop_all();
        if let Some(current) = current {
            stop(current).await;
            if let Bound::Unix(path) = &self.bound {
                remove_stale_socket(path)?;
            }
        }
        Ok(())
    }

    async fn bind_and_serve(&self) -> Result<(Serving, Bound), Error> {
        let app = router(Arc::clone(&self.engine), self.kind);
        match &self.bound {
            Bound::Tcp(addr) => {
                let listener = TcpListener::bind(addr)
                    .await
                    .map_err(|source| Error::BindTcp {
                        addr: *addr,
                        source,
                    })?;
                let local = listener.local_addr().map_err(|source| Error::BindTcp {
                    addr: *addr,
                    source,
                })?;
                let serving = match &self.tls {
                    None => spawn_serving(listener, app),
                    Some(config) => spawn_serving(
                        crate::tls::TlsListener::new(listener, Arc::clone(config)).map_err(
                            |source| Error::BindTcp {
                                addr: *addr,
                                source,
                            },
                        )?,
                        app,
                    ),
                };
                Ok((serving, Bound::Tcp(local)))
            }
            Bound::Unix(path) => {
                remove_stale_socket(path)?;
                let listener = UnixListener::bind(path).map_err(|source| Error::BindUnix {
                    path: path.clone(),
                    source,
                })?;
                Ok((spawn_serving(listener, app), Bound::Unix(path.clone())))
            }
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(current) = self.serving.get_mut().take() {
            let _ = current.stop.send(());
            current.task.abort();
            if let Bound::Unix(path) = &self.bound {
                let _ = std::fs::remove_file(path);
            }
        }
        lock(&self.engine.core).timers.drop_all();
    }
}

fn spawn_serving<L>(listener: L, app: axum::Router) -> Serving
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    Serving { stop, task }
}

async fn stop(serving: Serving) {
    let Serving { stop, mut task } = serving;
    let _ = stop.send(());
    if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
        task.abort();
        let _ = task.await;
    }
}

/// Removes a leftover socket file (not a regular file or directory).
fn remove_stale_socket(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|source| Error::BindUnix {
                path: path.to_path_buf(),
                source,
            })
        }
        Ok(_) => Err(Error::BindUnix {
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a non-socket file is in the way",
            ),
        }),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::BindUnix {
            path: path.to_path_buf(),
            source,
        }),
    }
}
