//! The capability probe: what Nomad's first fingerprint of the plugin asks, once, before any
//! clause runs. Which services are asked depends on the plugin type, as in Nomad
//! (`client/pluginmanager/csimanager/fingerprint.go`): the node service only on node and
//! monolith plugins, the controller service only on controller and monolith plugins.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::cli::PluginType;
use crate::plugins::csi::{Connection, Rpc, call, pb};
use crate::profile::Profile;
use crate::steps::csi::Capabilities;

/// What the capability probe learned.
#[derive(Debug, Default)]
pub struct Probe {
    pub name: String,
    pub version: Option<String>,
    pub caps: Capabilities,
    /// From the node plugin's NodeGetInfo (empty when it was not asked or gave none).
    pub node_id: String,
    pub max_volumes: i64,
    /// NodeGetInfo's accessible_topology segments, when the node reports one.
    pub node_topology: Option<std::collections::HashMap<String, String>>,
    /// Whether the node service was probed (node and monolith plugins).
    pub node_probed: bool,
    /// Calls that failed, by method: scenarios needing what they would have told are skipped.
    pub failures: Vec<String>,
}

impl Probe {
    pub fn details(&self, plugin_type: PluginType) -> BTreeMap<String, String> {
        let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        let mut d = BTreeMap::new();
        d.insert("name".into(), self.name.clone());
        d.insert("plugin_type".into(), plugin_type.as_str().into());
        d.insert("capabilities".into(), join(&self.caps.plugin));
        if plugin_type != PluginType::Node {
            d.insert(
                "controller_capabilities".into(),
                join(&self.caps.controller),
            );
        }
        if self.node_probed {
            d.insert("node_capabilities".into(), join(&self.caps.node));
            d.insert("node_id".into(), self.node_id.clone());
            d.insert("max_volumes_per_node".into(), self.max_volumes.to_string());
        }
        if !self.caps.group.is_empty() {
            d.insert(
                "group_controller_capabilities".into(),
                join(&self.caps.group),
            );
        }
        if !self.failures.is_empty() {
            d.insert("probe_failures".into(), self.failures.join("; "));
        }
        d
    }

    fn failed(&mut self, rpc: &Rpc) {
        self.failures
            .push(format!("{}: {}", rpc.method, rpc.outcome()));
    }
}

/// The plugin capabilities a GetPluginCapabilities answer names (an expansion one recorded as
/// VOLUME_EXPANSION_ONLINE or VOLUME_EXPANSION_OFFLINE).
pub fn plugin_capabilities(c: &pb::GetPluginCapabilitiesResponse) -> Vec<String> {
    c.capabilities
        .iter()
        .filter_map(|cap| match &cap.r#type {
            Some(pb::plugin_capability::Type::Service(s)) => {
                Some(s.r#type().as_str_name().to_string())
            }
            Some(pb::plugin_capability::Type::VolumeExpansion(e)) => {
                Some(format!("VOLUME_EXPANSION_{}", e.r#type().as_str_name()))
            }
            None => None,
        })
        .collect()
}

/// The RPCs a ControllerGetCapabilities answer names.
pub fn controller_capabilities(c: &pb::ControllerGetCapabilitiesResponse) -> Vec<String> {
    c.capabilities
        .iter()
        .filter_map(|cap| {
            let Some(pb::controller_service_capability::Type::Rpc(r)) = &cap.r#type else {
                return None;
            };
            Some(r.r#type().as_str_name().to_string())
        })
        .collect()
}

/// The RPCs a GroupControllerGetCapabilities answer names.
pub fn group_capabilities(c: &pb::GroupControllerGetCapabilitiesResponse) -> Vec<String> {
    c.capabilities
        .iter()
        .filter_map(|cap| {
            let Some(pb::group_controller_service_capability::Type::Rpc(r)) = &cap.r#type else {
                return None;
            };
            Some(r.r#type().as_str_name().to_string())
        })
        .collect()
}

/// The RPCs a NodeGetCapabilities answer names.
pub fn node_capabilities(c: &pb::NodeGetCapabilitiesResponse) -> Vec<String> {
    c.capabilities
        .iter()
        .filter_map(|cap| {
            let Some(pb::node_service_capability::Type::Rpc(r)) = &cap.r#type else {
                return None;
            };
            Some(r.r#type().as_str_name().to_string())
        })
        .collect()
}

/// Ask the plugin once what it is and what it can do (Nomad's first fingerprint). `controller`
/// is the controller plugin's connection (the same as `node` for a monolith on one socket).
pub async fn probe(
    controller: &Connection,
    node: &Connection,
    profile: &Profile,
    plugin_type: PluginType,
    separate_controller: bool,
) -> Probe {
    let d = profile.csi.rpc_deadline.min(Duration::from_secs(10));
    let mut p = Probe::default();
    // Identity: asked of whichever plugin the run has (the node's socket for a monolith).
    let identity = if plugin_type == PluginType::Controller {
        controller
    } else {
        node
    };
    let mut id = identity.identity();
    let (rpc, info) = call(
        "Identity",
        "GetPluginInfo",
        pb::GetPluginInfoRequest {},
        d,
        |r| async move { id.get_plugin_info(r).await },
    )
    .await;
    match info {
        Some(i) => {
            p.name = i.name;
            p.version = (!i.vendor_version.is_empty()).then_some(i.vendor_version);
        }
        None => p.failed(&rpc),
    }
    let mut id = identity.identity();
    let (rpc, caps) = call(
        "Identity",
        "GetPluginCapabilities",
        pb::GetPluginCapabilitiesRequest {},
        d,
        |r| async move { id.get_plugin_capabilities(r).await },
    )
    .await;
    match caps {
        Some(c) => p.caps.plugin.extend(plugin_capabilities(&c)),
        None => p.failed(&rpc),
    }
    if separate_controller {
        p.caps.plugin.insert("CONTROLLER_SERVICE".into());
    }
    // A node-only instance may advertise CONTROLLER_SERVICE (the capabilities are the sum over
    // all of the plugin's instances): Nomad never calls its controller service.
    let controller_asked =
        plugin_type != PluginType::Node && p.caps.plugin.contains("CONTROLLER_SERVICE");
    if controller_asked {
        let mut cl = controller.controller();
        let (rpc, caps) = call(
            "Controller",
            "ControllerGetCapabilities",
            pb::ControllerGetCapabilitiesRequest {},
            d,
            |r| async move { cl.controller_get_capabilities(r).await },
        )
        .await;
        match caps {
            Some(c) => p.caps.controller.extend(controller_capabilities(&c)),
            None => p.failed(&rpc),
        }
    }
    if plugin_type != PluginType::Node && p.caps.plugin.contains("GROUP_CONTROLLER_SERVICE") {
        let mut cl = controller.group();
        let (rpc, caps) = call(
            "GroupController",
            "GroupControllerGetCapabilities",
            pb::GroupControllerGetCapabilitiesRequest {},
            d,
            |r| async move { cl.group_controller_get_capabilities(r).await },
        )
        .await;
        match caps {
            Some(c) => p.caps.group.extend(group_capabilities(&c)),
            None => p.failed(&rpc),
        }
    }
    if plugin_type == PluginType::Controller {
        return p;
    }
    p.node_probed = true;
    let mut nd = node.node();
    let (rpc, caps) = call(
        "Node",
        "NodeGetCapabilities",
        pb::NodeGetCapabilitiesRequest {},
        d,
        |r| async move { nd.node_get_capabilities(r).await },
    )
    .await;
    match caps {
        Some(c) => p.caps.node.extend(node_capabilities(&c)),
        None => p.failed(&rpc),
    }
    let mut nd = node.node();
    let (rpc, info) = call(
        "Node",
        "NodeGetInfo",
        pb::NodeGetInfoRequest {},
        d,
        |r| async move { nd.node_get_info(r).await },
    )
    .await;
    match info {
        Some(i) => {
            p.node_id = i.node_id;
            p.max_volumes = i.max_volumes_per_node;
            p.node_topology = i.accessible_topology.map(|t| t.segments);
        }
        None => p.failed(&rpc),
    }
    p
}
