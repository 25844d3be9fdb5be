//! The Identity service: who the plugin is, what it supports, whether it is ready.
//!
//! Nomad calls GetPluginInfo once at registration (an empty name is fatal there), and Probe
//! every 30 s with a 5 s timeout (a missing `ready` counts as ready).

use std::sync::Arc;
use std::time::Duration;

use nomad_conform_proto::csi::v1::identity_server::Identity;
use nomad_conform_proto::csi::v1::plugin_capability::{self, service, volume_expansion};
use nomad_conform_proto::csi::v1::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest,
    GetPluginInfoResponse, PluginCapability, ProbeRequest, ProbeResponse,
};
use tonic::{Request, Response, Status};

use crate::faults::Fault;
use crate::plugin::{PLUGIN_NAME, Plugin};
use crate::rpc;
use crate::variants::Variant;

pub struct IdentityService {
    plugin: Arc<Plugin>,
    /// Probes answered so far (probe-fails-after-start).
    probes: std::sync::atomic::AtomicUsize,
}

impl IdentityService {
    pub fn new(plugin: Arc<Plugin>) -> Self {
        IdentityService {
            plugin,
            probes: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    async fn plugin_info(&self) -> GetPluginInfoResponse {
        if self.plugin.faults.has(Fault::SlowPluginInfo) {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        let name = if self.plugin.faults.has(Fault::EmptyPluginName) {
            ""
        } else {
            PLUGIN_NAME
        };
        GetPluginInfoResponse {
            name: name.to_string(),
            vendor_version: env!("CARGO_PKG_VERSION").to_string(),
            manifest: Default::default(),
        }
    }

    async fn probe(&self) -> Result<ProbeResponse, Status> {
        let faults = &self.plugin.faults;
        if faults.has(Fault::SlowProbe) {
            tokio::time::sleep(Duration::from_secs(6)).await;
        }
        let earlier = self
            .probes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if faults.has(Fault::ProbeError) || faults.has(Fault::ProbeFailsAfterStart) && earlier > 0 {
            return Err(Status::failed_precondition(
                "plugin is not healthy (probe-error fault)",
            ));
        }
        // Nothing to wait for: the state was loaded before the socket was opened. (slow-start:
        // not ready for the first seconds.)
        let ready = !faults.has(Fault::ProbeNotReady) && !self.plugin.starting();
        Ok(ProbeResponse { ready: Some(ready) })
    }
}

/// The plugin serves the Controller and GroupController services and can grow volumes while
/// they are in use.
///
/// Under the node-only variant this instance serves neither (main.rs does not register
/// them), and still advertises both: a plugin's capabilities are the sum over its instances,
/// and in a split deployment another instance is the controller.
fn plugin_capabilities(plugin: &Plugin) -> Vec<PluginCapability> {
    let serves = |kind: service::Type| PluginCapability {
        r#type: Some(plugin_capability::Type::Service(
            plugin_capability::Service {
                r#type: kind as i32,
            },
        )),
    };
    // no-controller-service: the controller is served, but not advertised.
    let mut capabilities = if plugin.faults.has(Fault::NoControllerService) {
        Vec::new()
    } else {
        vec![
            serves(service::Type::ControllerService),
            serves(service::Type::GroupControllerService),
        ]
    };
    // capacity-unknown: nothing to grow.
    if !plugin.variants.has(Variant::CapacityUnknown) {
        capabilities.push(PluginCapability {
            r#type: Some(plugin_capability::Type::VolumeExpansion(
                plugin_capability::VolumeExpansion {
                    r#type: volume_expansion::Type::Online as i32,
                },
            )),
        });
    }
    // topology: volumes are reachable from some nodes only (here: this one).
    if plugin.reports_topology() {
        capabilities.push(serves(service::Type::VolumeAccessibilityConstraints));
    }
    capabilities
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _request: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        let result = match self.plugin.not_started() {
            Ok(()) => Ok(self.plugin_info().await),
            Err(status) => Err(status),
        };
        rpc::finish(&self.plugin.faults, "GetPluginInfo", "", result)
    }

    async fn get_plugin_capabilities(
        &self,
        _request: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        let result = if let Err(status) = self.plugin.not_started() {
            Err(status)
        } else if self.plugin.faults.has(Fault::PluginCapabilitiesError) {
            Err(Status::internal(
                "failed to list the plugin capabilities (plugin-capabilities-error fault)",
            ))
        } else {
            Ok(GetPluginCapabilitiesResponse {
                capabilities: plugin_capabilities(&self.plugin),
            })
        };
        rpc::finish(&self.plugin.faults, "GetPluginCapabilities", "", result)
    }

    async fn probe(
        &self,
        _request: Request<ProbeRequest>,
    ) -> Result<Response<ProbeResponse>, Status> {
        rpc::finish(&self.plugin.faults, "Probe", "", self.probe().await)
    }
}
