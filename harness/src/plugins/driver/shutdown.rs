//! Ending a plugin as Nomad does (A.6), and reattaching to one (A.8 step 3).
//!
//! * go-plugin's `Client.Kill`: `GRPCController/Shutdown` (error ignored), close the
//!   connection, wait up to 2 s for the process to exit, then SIGKILL the process;
//! * Nomad's instance cleanup: `Driver/Shutdown` with a 2 s context first (UNIMPLEMENTED counts
//!   as success), then `Kill`.
//!
//! Nomad kills only the plugin process. The harness then kills the plugin's whole process
//! group, so nothing outlives a run; what was still alive in the group at that point (and so
//! would have outlived the plugin under Nomad) is recorded.

use std::time::{Duration, Instant};

use nomad_conform_reports::model::ExitStatus;
use tonic::Code;

use super::call::{Deadline, DriverRpc};
use super::connect::{Client, ConnectError, connect};
use super::handshake::Handshake;
use super::host::{ApiNegotiation, HostTimings, negotiate_api_version};
use super::running::PluginProcess;
use crate::process::ProcInfo;
use nomad_conform_proto::nomad::base;

/// What go-plugin's kill sequence did.
#[derive(Clone, Debug)]
pub struct KillReport {
    /// `GRPCController/Shutdown`, unless the plugin had already exited.
    pub controller_shutdown: Option<DriverRpc>,
    /// The plugin exited within the grace period after the connection was closed.
    pub exited_on_its_own: bool,
    /// From closing the connection to the plugin's exit (or to the SIGKILL).
    pub waited: Duration,
    /// The plugin was still running after the grace period and got SIGKILL.
    pub sigkill_sent: bool,
    pub status: Option<ExitStatus>,
    /// Members of its process group still alive once the plugin was gone: under Nomad they
    /// would have outlived it. The harness killed them.
    pub outlived_plugin: Vec<ProcInfo>,
    /// Members still alive after the harness killed the group (should be none).
    pub survivors: Vec<ProcInfo>,
}

/// What Nomad's shutdown of a driver instance did.
#[derive(Clone, Debug)]
pub struct ShutdownReport {
    /// `Driver/Shutdown`, unless the plugin had already exited.
    pub driver_shutdown: Option<DriverRpc>,
    pub kill: KillReport,
}

impl ShutdownReport {
    /// Every RPC made, in order.
    pub fn records(&self) -> Vec<&DriverRpc> {
        self.driver_shutdown
            .iter()
            .chain(self.kill.controller_shutdown.iter())
            .collect()
    }

    /// Whether Nomad would count `Driver/Shutdown` as done (OK or UNIMPLEMENTED).
    pub fn driver_shutdown_accepted(&self) -> bool {
        self.driver_shutdown
            .as_ref()
            .is_none_or(|r| r.ok() || r.code == Code::Unimplemented)
    }
}

/// go-plugin's `Client.Kill` on `client` and `process`: see the module docs. `rpc` bounds the
/// Controller call (go-plugin waits for it as long as the process lives), `grace` is the wait
/// for the exit (go-plugin: 2 s).
pub async fn kill_like_go_plugin(
    client: &Client,
    process: &PluginProcess,
    rpc: Duration,
    grace: Duration,
) -> KillReport {
    let controller_shutdown = if process.is_alive() {
        Some(client.controller_shutdown(rpc).await.0)
    } else {
        None
    };
    client.close();
    let closed = Instant::now();
    let status = process.wait_exit(grace).await;
    let exited_on_its_own = status.is_some();
    let sigkill_sent = !exited_on_its_own;
    if sigkill_sent {
        process.sigkill_leader();
        process.wait_exit(grace).await;
    }
    let waited = closed.elapsed();
    let outlived_plugin = process.group_members();
    let killed = process.kill_now().await;
    KillReport {
        controller_shutdown,
        exited_on_its_own,
        waited,
        sigkill_sent,
        status: killed.status,
        outlived_plugin,
        survivors: killed.survivors,
    }
}

/// Nomad's cleanup of a driver instance: `Driver/Shutdown` with `timings.driver_shutdown` as a
/// context deadline, then [`kill_like_go_plugin`].
pub async fn shutdown_like_nomad(
    client: &Client,
    process: &PluginProcess,
    timings: &HostTimings,
) -> ShutdownReport {
    let driver_shutdown = if process.is_alive() {
        Some(
            client
                .driver_shutdown(Deadline::with_header(timings.driver_shutdown))
                .await
                .0,
        )
    } else {
        None
    };
    let kill = kill_like_go_plugin(client, process, timings.rpc, timings.kill_grace).await;
    ShutdownReport {
        driver_shutdown,
        kill,
    }
}

/// A new connection to a running plugin, as after an agent restart.
#[derive(Debug)]
pub struct Reattached {
    pub client: Client,
    /// `PluginInfo`, which Nomad calls again to learn the API version.
    pub plugin_info: DriverRpc,
    pub info: Option<base::PluginInfoResponse>,
    /// The API version negotiated from the new answer.
    pub api: Option<ApiNegotiation>,
}

/// Reattach to the plugin behind `handshake` (its saved reattach config): a new connection to
/// the same address, with the broker and stdio streams a Go host opens, then `PluginInfo`.
/// Nothing of the running process is touched; close the old [`Client`] first to play an agent
/// that died.
pub async fn reattach(
    handshake: &Handshake,
    timings: &HostTimings,
) -> Result<Reattached, ConnectError> {
    let client = connect(handshake, timings.connect).await?;
    let (plugin_info, info) = client.plugin_info(timings.rpc).await;
    let api = info
        .as_ref()
        .map(|i| negotiate_api_version(&i.plugin_api_versions));
    Ok(Reattached {
        client,
        plugin_info,
        info,
        api,
    })
}

/// For reports: a short line about a kill.
impl std::fmt::Display for KillReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.status, self.exited_on_its_own) {
            (Some(s), true) => write!(
                f,
                "the plugin exited ({s}) after {}",
                crate::fmt_duration(self.waited)
            )?,
            (Some(s), false) => write!(
                f,
                "the plugin did not exit within the grace period and was killed ({s})"
            )?,
            (None, _) => write!(f, "the plugin could not be reaped")?,
        }
        if !self.outlived_plugin.is_empty() {
            let who: Vec<String> = self.outlived_plugin.iter().map(|p| p.to_string()).collect();
            write!(
                f,
                "; still running in its group afterwards: {}",
                who.join(", ")
            )?;
        }
        Ok(())
    }
}
