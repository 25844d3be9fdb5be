//! Nomad's load sequence for an external driver (A.8), as helpers the steps call:
//!
//! 1. [`fingerprint_launch`]: launch, connect, `PluginInfo`, and (if Nomad would go on)
//!    `ConfigSchema`, then go-plugin's kill. Nomad stops after `PluginInfo` when the type is
//!    neither DRIVER nor DEVICE, the `plugin_version` does not parse, or the API versions are
//!    malformed or do not include v0.1.0 ([`assess_plugin_info`]).
//! 2. [`validation_launch`], only when ConfigSchema returned a spec: another process;
//!    `SetConfig{msgpack_config, nomad_config unset, plugin_api_version}` twice (once inside the
//!    loader's Dispense, once explicitly: helper/pluginutils/loader/init.go,
//!    validatePluginConfig), no `Init`, then kill. Without a spec Nomad makes no such launch
//!    and sends the instance empty msgpack_config bytes.
//! 3. [`instance_launch`]: the long-lived instance; `SetConfig` with
//!    `nomad_config.driver = {ClientMaxPort 14512, ClientMinPort 14000}` ([`nomad_config`]), then
//!    `Driver/Init` (UNIMPLEMENTED accepted). Any other failure makes Nomad kill the plugin.
//!
//! Each returns every record it made; none judges them.

use nomad_conform_proto::nomad::base;
use serde::Serialize;
use tonic::Code;

use super::call::DriverRpc;
use super::connect::{Client, ConnectError, ConnectionFacts, connect};
use super::host::{ApiNegotiation, HostTimings, negotiate_api_version};
use super::launch::{LaunchError, launch};
use super::launch_spec::LaunchSpec;
use super::protocol::{CLIENT_MAX_PORT, CLIENT_MIN_PORT};
use super::running::{Killed, PluginProcess};
use super::shutdown::{KillReport, kill_like_go_plugin};
use crate::goversion::GoVersion;

/// What Nomad's loader makes of a `PluginInfo` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InfoAssessment {
    /// The type is DRIVER (2) or DEVICE (3).
    pub type_known: bool,
    /// Why `plugin_version` does not parse as a go-version.
    pub version_error: Option<String>,
    pub api: ApiNegotiation,
    /// Why Nomad would not go on to `ConfigSchema` (an error, or "skipped" for no overlap).
    pub stop: Option<String>,
}

/// Nomad's checks of `PluginInfo`, in its order.
pub fn assess_plugin_info(info: &base::PluginInfoResponse) -> InfoAssessment {
    let type_known = info.r#type == base::PluginType::Driver as i32
        || info.r#type == base::PluginType::Device as i32;
    let version_error = GoVersion::parse(&info.plugin_version)
        .err()
        .map(|e| e.to_string());
    let api = negotiate_api_version(&info.plugin_api_versions);
    let stop = if !type_known {
        Some(format!("plugin is of unknown type: {}", info.r#type))
    } else if let Some(e) = &version_error {
        Some(format!("failed to parse plugin version: {e}"))
    } else if let Some(e) = &api.error {
        Some(format!("failed to validate API versions: {e}"))
    } else if api.chosen.is_none() {
        Some("skipped: the plugin's API versions do not include v0.1.0".into())
    } else {
        None
    };
    InfoAssessment {
        type_known,
        version_error,
        api,
        stop,
    }
}

/// `NomadConfig` as the client sends it to a driver instance: the plugin port range and the
/// node's CPU topology (client/config NomadPluginConfig).
pub fn nomad_config() -> base::NomadConfig {
    base::NomadConfig {
        driver: Some(base::NomadDriverConfig {
            client_max_port: CLIENT_MAX_PORT,
            client_min_port: CLIENT_MIN_PORT,
            topology: Some(super::topology::client_topology()),
        }),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error("{error}; the plugin was killed\ncommand: {command}\nstderr:\n{stderr_tail}")]
    Connect {
        error: ConnectError,
        command: String,
        stderr_tail: String,
        killed: Killed,
    },
}

async fn launch_and_connect(
    spec: &LaunchSpec,
    timings: &HostTimings,
) -> Result<(PluginProcess, Client), LoadError> {
    let process = launch(spec).await?;
    match connect(&process.handshake, timings.connect).await {
        Ok(client) => Ok((process, client)),
        Err(error) => {
            let killed = process.kill_now().await;
            Err(LoadError::Connect {
                error,
                command: process.command_line(),
                stderr_tail: process.stderr_tail(),
                killed,
            })
        }
    }
}

/// The fingerprinting launch (A.8 step 1). The process has been killed when this returns.
#[derive(Debug)]
pub struct FingerprintLaunch {
    pub process: PluginProcess,
    pub connection: ConnectionFacts,
    pub plugin_info: DriverRpc,
    pub info: Option<base::PluginInfoResponse>,
    pub assessment: Option<InfoAssessment>,
    /// Made only when Nomad would go on after `PluginInfo`.
    pub config_schema: Option<DriverRpc>,
    pub schema: Option<base::ConfigSchemaResponse>,
    pub kill: KillReport,
}

impl FingerprintLaunch {
    pub fn records(&self) -> Vec<&DriverRpc> {
        std::iter::once(&self.plugin_info)
            .chain(self.config_schema.iter())
            .chain(self.kill.controller_shutdown.iter())
            .collect()
    }
}

pub async fn fingerprint_launch(
    spec: &LaunchSpec,
    timings: &HostTimings,
) -> Result<FingerprintLaunch, LoadError> {
    let (process, client) = launch_and_connect(spec, timings).await?;
    let (plugin_info, info) = client.plugin_info(timings.rpc).await;
    let assessment = info.as_ref().map(assess_plugin_info);
    let (config_schema, schema) = match &assessment {
        Some(a) if a.stop.is_none() => {
            let (rpc, schema) = client.config_schema(timings.rpc).await;
            (Some(rpc), schema)
        }
        _ => (None, None),
    };
    let kill = kill_like_go_plugin(&client, &process, timings.rpc, timings.kill_grace).await;
    Ok(FingerprintLaunch {
        connection: client.facts().clone(),
        process,
        plugin_info,
        info,
        assessment,
        config_schema,
        schema,
        kill,
    })
}

/// The config validation launch (A.8 step 2). The process has been killed when this returns.
#[derive(Debug)]
pub struct ValidationLaunch {
    pub process: PluginProcess,
    pub connection: ConnectionFacts,
    /// Both SetConfig calls, in order (the second only when the first succeeded: the loader's
    /// Dispense fails otherwise).
    pub set_configs: Vec<DriverRpc>,
    pub kill: KillReport,
}

/// `SetConfig{msgpack_config, nomad_config unset, plugin_api_version: api_version}`, twice.
pub async fn validation_launch(
    spec: &LaunchSpec,
    msgpack_config: Vec<u8>,
    api_version: &str,
    timings: &HostTimings,
) -> Result<ValidationLaunch, LoadError> {
    let (process, client) = launch_and_connect(spec, timings).await?;
    let req = base::SetConfigRequest {
        msgpack_config,
        nomad_config: None,
        plugin_api_version: api_version.to_owned(),
    };
    let mut set_configs = Vec::new();
    for _ in 0..2 {
        let (rpc, _) = client.set_config(req.clone(), timings.rpc).await;
        let ok = rpc.ok();
        set_configs.push(rpc);
        if !ok {
            break;
        }
    }
    let kill = kill_like_go_plugin(&client, &process, timings.rpc, timings.kill_grace).await;
    Ok(ValidationLaunch {
        connection: client.facts().clone(),
        process,
        set_configs,
        kill,
    })
}

/// The long-lived instance (A.8 step 3).
#[derive(Debug)]
pub struct InstanceLaunch {
    pub process: PluginProcess,
    pub client: Client,
    pub set_config: DriverRpc,
    /// Made only when SetConfig succeeded.
    pub init: Option<DriverRpc>,
    /// Why Nomad would give up on the instance (then it was killed: see `kill`).
    pub failure: Option<String>,
    pub kill: Option<KillReport>,
}

impl InstanceLaunch {
    /// Whether the instance is up as Nomad would have it.
    pub fn running(&self) -> bool {
        self.failure.is_none()
    }

    pub fn records(&self) -> Vec<&DriverRpc> {
        std::iter::once(&self.set_config)
            .chain(self.init.iter())
            .chain(self.kill.iter().flat_map(|k| k.controller_shutdown.iter()))
            .collect()
    }
}

/// Launch the instance: `SetConfig{msgpack_config, nomad_config, api_version}`, then `Init`.
pub async fn instance_launch(
    spec: &LaunchSpec,
    msgpack_config: Vec<u8>,
    api_version: &str,
    nomad_config: base::NomadConfig,
    timings: &HostTimings,
) -> Result<InstanceLaunch, LoadError> {
    let (process, client) = launch_and_connect(spec, timings).await?;
    let req = base::SetConfigRequest {
        msgpack_config,
        nomad_config: Some(nomad_config),
        plugin_api_version: api_version.to_owned(),
    };
    let (set_config, _) = client.set_config(req, timings.rpc).await;
    let mut init = None;
    let failure = if set_config.ok() {
        let (rpc, _) = client.init(timings.rpc).await;
        let failure = (!rpc.ok() && rpc.code != Code::Unimplemented)
            .then(|| format!("Init failed: {}", rpc.outcome()));
        init = Some(rpc);
        failure
    } else {
        Some(format!("SetConfig failed: {}", set_config.outcome()))
    };
    let kill = match failure {
        Some(_) => {
            Some(kill_like_go_plugin(&client, &process, timings.rpc, timings.kill_grace).await)
        }
        None => None,
    };
    Ok(InstanceLaunch {
        process,
        client,
        set_config,
        init,
        failure,
        kill,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiate(v: &[&str]) -> ApiNegotiation {
        negotiate_api_version(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn api_versions_as_nomad_selects_them() {
        assert_eq!(negotiate(&["v0.1.0"]).chosen.as_deref(), Some("v0.1.0"));
        assert_eq!(negotiate(&["0.1.0"]).chosen.as_deref(), Some("0.1.0"));
        assert_eq!(negotiate(&["0.1"]).chosen.as_deref(), Some("0.1"));
        assert_eq!(
            negotiate(&["v0.2.0", "0.1.0"]).chosen.as_deref(),
            Some("0.1.0")
        );
        let none = negotiate(&["v0.2.0"]);
        assert_eq!((none.chosen, none.error), (None, None));
        assert!(negotiate(&[]).error.is_some());
        assert!(negotiate(&["v0.1.0", "bogus"]).error.is_some());
        assert!(negotiate(&["v0.1.0-beta"]).chosen.is_none());
    }

    #[test]
    fn plugin_info_assessment() {
        let mut info = base::PluginInfoResponse {
            r#type: base::PluginType::Driver as i32,
            plugin_api_versions: vec!["v0.1.0".into()],
            plugin_version: "1.2.3".into(),
            name: "x".into(),
        };
        assert_eq!(assess_plugin_info(&info).stop, None);
        info.plugin_version = "not a version".into();
        assert!(assess_plugin_info(&info).stop.unwrap().contains("version"));
        info.plugin_version = "1.0".into();
        info.r#type = 0;
        assert!(
            assess_plugin_info(&info)
                .stop
                .unwrap()
                .contains("unknown type")
        );
        info.r#type = base::PluginType::Device as i32;
        info.plugin_api_versions = vec!["v9".into()];
        assert!(
            assess_plugin_info(&info)
                .stop
                .unwrap()
                .starts_with("skipped")
        );
        let c = nomad_config().driver.unwrap();
        assert_eq!((c.client_min_port, c.client_max_port), (14000, 14512));
    }
}
