//! The BasePlugin service every Nomad plugin serves: who it is, its config schema, its config.
//!
//! Nomad calls PluginInfo and ConfigSchema in a short-lived fingerprinting launch (type must be
//! DRIVER, `plugin_api_versions` must overlap Nomad's `v0.1.0`, `plugin_version` must parse as
//! a version), then SetConfig in a validation launch (without `nomad_config`) and again in the
//! long-lived instance (contracts/task-drivers.md A.8).

use std::sync::Arc;

use nomad_conform_proto::nomad::base::base_plugin_server::BasePlugin;
use nomad_conform_proto::nomad::base::{
    ConfigSchemaRequest, ConfigSchemaResponse, PluginInfoRequest, PluginInfoResponse, PluginType,
    SetConfigRequest, SetConfigResponse,
};
use tonic::{Request, Response, Status};

use crate::config;
use crate::faults::Fault;
use crate::log;
use crate::plugin::{PLUGIN_API_VERSIONS, PLUGIN_NAME, Plugin};
use crate::rpc;

pub struct BaseService {
    plugin: Arc<Plugin>,
}

impl BaseService {
    pub fn new(plugin: Arc<Plugin>) -> Self {
        BaseService { plugin }
    }

    fn plugin_info(&self) -> PluginInfoResponse {
        let faults = &self.plugin.faults;
        let r#type = if faults.has(Fault::WrongPluginType) {
            PluginType::Device
        } else {
            PluginType::Driver
        };
        let plugin_api_versions = if faults.has(Fault::NoApiVersion) {
            Vec::new()
        } else {
            PLUGIN_API_VERSIONS.iter().map(|v| v.to_string()).collect()
        };
        PluginInfoResponse {
            r#type: r#type as i32,
            plugin_api_versions,
            plugin_version: env!("CARGO_PKG_VERSION").to_string(),
            name: PLUGIN_NAME.to_string(),
        }
    }

    fn set_config(&self, request: SetConfigRequest) -> Result<SetConfigResponse, Status> {
        let faults = &self.plugin.faults;
        if request.nomad_config.is_none() && faults.has(Fault::SetConfigNeedsNomadConfig) {
            return Err(rpc::failed(
                "SetConfig needs nomad_config (set-config-needs-nomad-config fault)",
            ));
        }
        let api_version = request.plugin_api_version.trim_start_matches('v');
        if !api_version.is_empty()
            && !PLUGIN_API_VERSIONS
                .iter()
                .any(|v| v.trim_start_matches('v') == api_version)
        {
            return Err(rpc::failed(format!(
                "plugin API version {:?} is not one this driver speaks ({})",
                request.plugin_api_version,
                PLUGIN_API_VERSIONS.join(", ")
            )));
        }
        let config = config::decode(&request.msgpack_config, faults, &self.plugin.variants)
            .map_err(|why| rpc::failed(format!("invalid plugin config: {why}")))?;
        log::info(
            "config set",
            &[
                ("enabled", config.enabled.to_string()),
                (
                    "fingerprint_period",
                    format!("{:?}", config.fingerprint_period),
                ),
                ("nomad_config", request.nomad_config.is_some().to_string()),
            ],
        );
        self.plugin.set_config(config);
        Ok(SetConfigResponse {})
    }
}

#[tonic::async_trait]
impl BasePlugin for BaseService {
    async fn plugin_info(
        &self,
        _: Request<PluginInfoRequest>,
    ) -> Result<Response<PluginInfoResponse>, Status> {
        rpc::finish("PluginInfo", "", Ok(self.plugin_info()))
    }

    async fn config_schema(
        &self,
        _: Request<ConfigSchemaRequest>,
    ) -> Result<Response<ConfigSchemaResponse>, Status> {
        let spec = config::schema(&self.plugin.faults, &self.plugin.variants);
        rpc::finish("ConfigSchema", "", Ok(ConfigSchemaResponse { spec }))
    }

    async fn set_config(
        &self,
        request: Request<SetConfigRequest>,
    ) -> Result<Response<SetConfigResponse>, Status> {
        rpc::finish("SetConfig", "", self.set_config(request.into_inner()))
    }
}
