//! Attachment bookkeeping: ControllerPublishVolume and ControllerUnpublishVolume (kept per
//! volume and node, with max_volumes_per_node), and ValidateVolumeCapabilities.

use std::collections::HashMap;

use nomad_conform_proto::csi::v1::validate_volume_capabilities_response::Confirmed;
use nomad_conform_proto::csi::v1::volume_capability::access_mode::Mode;
use nomad_conform_proto::csi::v1::{
    ControllerPublishVolumeRequest, ControllerPublishVolumeResponse,
    ControllerUnpublishVolumeRequest, ControllerUnpublishVolumeResponse,
    ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse,
};
use tonic::Status;
use uuid::Uuid;

use super::{ControllerService, check_mutable_parameters, sorted};
use crate::faults::Fault;
use crate::locks::LockKey;
use crate::rpc;
use crate::state::ControllerPublication;
use crate::variants::Variant;

impl ControllerService {
    pub(super) async fn handle_publish(
        &self,
        req: ControllerPublishVolumeRequest,
    ) -> Result<ControllerPublishVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        let node = req.node_id.as_str();
        rpc::require(faults, id, "volume_id")?;
        rpc::require(faults, node, "node_id")?;
        let capability =
            rpc::required_capability(faults, &req.volume_capability, "volume_capability")?;
        plugin.needs_secrets(&req.secrets, "ControllerPublishVolume")?;
        let mut reply = ControllerPublishVolumeResponse {
            publish_context: HashMap::from([
                ("node_id".to_string(), node.to_string()),
                ("readonly".to_string(), req.readonly.to_string()),
            ]),
        };
        // publish-context-changes: a fresh attachment id in every answer, so a retry's
        // publish_context differs from the first one.
        if faults.has(Fault::PublishContextChanges) {
            reply
                .publish_context
                .insert("attachment_id".to_string(), Uuid::new_v4().to_string());
        }
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;

        let Some(volume) = plugin.store.read(|s| s.volumes.get(id).cloned()) else {
            if faults.has(Fault::PublishUnknownVolumeOk) {
                return Ok(reply);
            }
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        };
        // A capability of the other access type. The ControllerPublishVolume table has no row
        // for it, so the general one applies: "Invalid or unsupported field in the request",
        // 3 INVALID_ARGUMENT.
        if let Some(message) = rpc::access_type_mismatch(id, volume.access_type, &capability) {
            return Err(Status::invalid_argument(message));
        }
        if node != plugin.config.node_id && !faults.has(Fault::PublishUnknownNodeOk) {
            return Err(Status::not_found(format!(
                "node {node:?} does not exist: this plugin serves node {:?}",
                plugin.config.node_id
            )));
        }
        let publication = ControllerPublication {
            volume_id: id.to_string(),
            node_id: node.to_string(),
            capability,
            readonly: req.readonly,
        };
        let max = plugin.config.max_volumes_per_node;
        plugin.store.update(|s| {
            let publications = &mut s.controller_publications;
            if let Some(existing) = publications
                .iter_mut()
                .find(|p| p.volume_id == id && p.node_id == node)
            {
                if *existing == publication {
                    return Ok(()); // A retry: already done.
                }
                // A read-only use on a node where a multi-node volume is already attached
                // read-write with the same capability: the attachment serves it (Nomad
                // publishes once per claim, so a reader beside a writer on one node asks for
                // this). The node side makes the reader's target read-only. (no-publish-readonly:
                // a plugin without PUBLISH_READONLY may refuse the flag it was never to be sent.)
                if publication.readonly
                    && !plugin.variants.has(Variant::NoPublishReadonly)
                    && !existing.readonly
                    && existing.capability == publication.capability
                    && publication.capability.access_mode.is_multi_node()
                {
                    return Ok(());
                }
                if !faults.has(Fault::PublishIncompatibleOk) {
                    return Err(Status::already_exists(format!(
                        "volume {id:?} is already published to node {node:?} with another \
                         capability or readonly flag"
                    )));
                }
                *existing = publication;
                return Ok(());
            }
            let single_node = !publication.capability.access_mode.is_multi_node();
            if let Some(other) = publications.iter().find(|p| {
                p.volume_id == id && (single_node || !p.capability.access_mode.is_multi_node())
            }) {
                return Err(Status::failed_precondition(format!(
                    "volume {id:?} is already published to node {:?} and its access mode \
                     allows only one node",
                    other.node_id
                )));
            }
            // The node's limit, as NodeGetInfo reports it. (ignores-max-volumes: Nomad's
            // scheduler counts claims against max_volumes_per_node itself, so the plugin may
            // leave it to the CO and publish anyway.)
            let on_node = publications.iter().filter(|p| p.node_id == node).count();
            let on_node = i64::try_from(on_node).unwrap_or(i64::MAX).saturating_add(
                plugin
                    .leaked_attachments
                    .load(std::sync::atomic::Ordering::SeqCst),
            );
            // publish-limit-too-early: counts one volume too many.
            let counted = if faults.has(Fault::PublishLimitTooEarly) {
                on_node.saturating_add(1)
            } else {
                on_node
            };
            if max > 0 && counted >= max && !plugin.variants.has(Variant::IgnoresMaxVolumes) {
                // publish-limit-wrong-code: the right refusal with the wrong code.
                if faults.has(Fault::PublishLimitWrongCode) {
                    return Err(Status::internal(format!(
                        "node {node:?} already has {on_node} published volumes, its maximum \
                         (publish-limit-wrong-code fault)"
                    )));
                }
                return Err(Status::resource_exhausted(format!(
                    "node {node:?} already has {on_node} published volumes, its maximum is {max}"
                )));
            }
            publications.push(publication);
            Ok(())
        })?;
        Ok(reply)
    }

    pub(super) async fn handle_unpublish(
        &self,
        req: ControllerUnpublishVolumeRequest,
    ) -> Result<ControllerUnpublishVolumeResponse, Status> {
        let plugin = &*self.plugin;
        let id = req.volume_id.as_str();
        let node = req.node_id.as_str();
        rpc::require(&plugin.faults, id, "volume_id")?;
        // unpublish-needs-secrets: Nomad sends no secrets here (client/structs/csi.go), so a
        // plugin that needs them can never release a claim under Nomad.
        if plugin.faults.has(Fault::UnpublishNeedsSecrets) {
            plugin.check_secrets(&req.secrets, "ControllerUnpublishVolume")?;
        }
        let _lock = plugin.locks.lock(LockKey::Volume(id)).await;

        // An empty node_id means every node. An unknown volume or node is simply not
        // published, which is what the caller wants: OK. (release-not-found: NOT_FOUND, as
        // the spec's table has it for an unknown volume or node; Nomad counts it as done.)
        let matches =
            |p: &ControllerPublication| p.volume_id == id && (node.is_empty() || p.node_id == node);
        let published = plugin
            .store
            .read(|s| s.controller_publications.iter().any(matches));
        if !published {
            if plugin.faults.has(Fault::ControllerUnpublishNotIdempotent) {
                return Err(Status::internal(format!(
                    "volume {id:?} is not published to node {node:?}"
                )));
            }
            if plugin.variants.has(Variant::ReleaseNotFound) {
                return Err(Status::not_found(format!(
                    "volume {id:?} is not published to node {node:?}"
                )));
            }
            return Ok(ControllerUnpublishVolumeResponse {});
        }
        plugin.store.update(|s| {
            s.controller_publications.retain(|p| !matches(p));
            Ok(())
        })?;
        // unpublish-keeps-attachment: the publication goes, but its attachment still counts
        // against the node's limit.
        if plugin.faults.has(Fault::UnpublishKeepsAttachment) {
            plugin
                .leaked_attachments
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(ControllerUnpublishVolumeResponse {})
    }

    pub(super) fn handle_validate(
        &self,
        req: ValidateVolumeCapabilitiesRequest,
    ) -> Result<ValidateVolumeCapabilitiesResponse, Status> {
        let plugin = &*self.plugin;
        let faults = &plugin.faults;
        let id = req.volume_id.as_str();
        rpc::require(faults, id, "volume_id")?;
        if !faults.has(Fault::ValidateAcceptsMissingCapabilities) {
            rpc::require_field(
                faults,
                !req.volume_capabilities.is_empty(),
                "volume_capabilities (at least one capability)",
            )?;
        }
        let volume = plugin.store.read(|s| s.volumes.get(id).cloned());
        if volume.is_none() && !faults.has(Fault::ValidateUnknownOk) {
            return Err(Status::not_found(format!("volume {id:?} does not exist")));
        }

        // Confirm only if everything asked for is supported; otherwise say why not.
        let mut problems: Vec<String> = req
            .volume_capabilities
            .iter()
            .filter_map(|c| match rpc::parse_capability(c) {
                Err(status) => Some(status.message().to_string()),
                // A block volume is only ever a device, a mount volume only a directory.
                Ok(capability) => volume
                    .as_ref()
                    .and_then(|v| rpc::access_type_mismatch(id, v.access_type, &capability)),
            })
            .collect();
        if let Some(volume) = &volume
            && !req.parameters.is_empty()
            && sorted(&req.parameters) != volume.parameters
        {
            problems.push("parameters differ from those the volume was created with".into());
        }
        if let Err(status) = check_mutable_parameters(&req.mutable_parameters) {
            problems.push(status.message().to_string());
        }
        if !problems.is_empty() {
            return Ok(ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: problems.join("; "),
            });
        }
        // validate-without-confirmed: `confirmed` is OPTIONAL, and Nomad accepts an answer
        // without it.
        if plugin.variants.has(Variant::ValidateWithoutConfirmed) {
            return Ok(ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: String::new(),
            });
        }
        let mut volume_capabilities = req.volume_capabilities;
        // validate-confirms-first-only: the rest of what was asked goes unconfirmed.
        if faults.has(Fault::ValidateConfirmsFirstOnly) {
            volume_capabilities.truncate(1);
        }
        // validate-confirms-other: another access mode than each one asked for.
        if faults.has(Fault::ValidateConfirmsOther) {
            for capability in &mut volume_capabilities {
                let mode = capability.access_mode.get_or_insert_default();
                mode.mode = if mode.mode == Mode::MultiNodeReaderOnly as i32 {
                    Mode::SingleNodeWriter as i32
                } else {
                    Mode::MultiNodeReaderOnly as i32
                };
            }
        }
        Ok(ValidateVolumeCapabilitiesResponse {
            confirmed: Some(Confirmed {
                volume_context: req.volume_context,
                volume_capabilities,
                parameters: req.parameters,
                mutable_parameters: req.mutable_parameters,
            }),
            message: String::new(),
        })
    }
}
