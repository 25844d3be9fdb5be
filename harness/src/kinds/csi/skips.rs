//! Which clauses a plugin cannot be judged on, decided before the run from the clauses'
//! `@requires-...` tags, the plugin type and what the probe learned. Each skip says why.
//!
//! Tags: `requires-controller` / `requires-node` (the service), `requires-<CAP>` (a controller
//! capability), `requires-node-<CAP>`, `requires-group`, `requires-group-<CAP>`,
//! `requires-launch`, `requires-max-volumes`, `requires-mutable-parameters`,
//! `requires-multi-writer`, `requires-block`, and `requires-volume`: a volume to claim, made by
//! CreateVolume or, for node-only runs and plugins that cannot create, one of `--volume`.

use crate::clauses::{CaseKey, ClauseSet};
use crate::cli::PluginType;
use crate::run::Selection;

use super::probe::Probe;

/// What the skip rules look at besides the probe.
#[derive(Clone, Copy, Debug)]
pub struct RunFacts {
    pub plugin_type: PluginType,
    /// The user said which type the plugin is (`--plugin-type`); otherwise it was assumed.
    pub plugin_type_given: bool,
    pub launched: bool,
    pub mutable_parameters: bool,
    /// The run was given volumes to claim (`--volume`): node-only runs, and plugins whose
    /// controller cannot create volumes.
    pub user_volumes: bool,
    /// A node ID to publish to is known (NodeGetInfo, or `--node-id` for a controller-only run).
    pub node_id_known: bool,
}

const NODE_ONLY: &str = "node-only plugin (--plugin-type node): Nomad calls the controller service only on controller and monolith plugins";
const CONTROLLER_ONLY: &str = "controller-only plugin (--plugin-type controller): Nomad calls the node service only on node and monolith plugins";

/// The skip reason for one tag, if the tag is not satisfied.
fn reason(tag: &str, probe: &Probe, facts: RunFacts) -> Option<String> {
    let need = tag.strip_prefix("requires-")?;
    let node_only = facts.plugin_type == PluginType::Node;
    let controller_only = facts.plugin_type == PluginType::Controller;
    let missing = |what: String| Some(format!("the plugin does not advertise {what}"));
    let monolith = facts.plugin_type == PluginType::Monolith;
    // A monolith that offers no controller: what a controller capability or a created volume
    // would need is that service, not the capability itself.
    let no_controller = !node_only && !probe.caps.plugin.contains("CONTROLLER_SERVICE");
    const NO_CONTROLLER: &str =
        "the plugin does not advertise the CONTROLLER_SERVICE plugin capability";
    match need {
        "monolith-chosen" if !monolith => Some(format!(
            "the plugin is run as a {} plugin: Nomad needs the controller service only of monoliths and controller plugins",
            facts.plugin_type.as_str()
        )),
        "monolith-chosen" if !facts.plugin_type_given => Some(
            "no --plugin-type given: the plugin is judged as a monolith by default, and CSI-IDENTITY-MONOLITH-ASSUMED judges that guess".into(),
        ),
        "monolith-assumed" if facts.plugin_type_given => Some(format!(
            "--plugin-type {} was given: the run judges the type the user chose",
            facts.plugin_type.as_str()
        )),
        "monolith-assumed" if !monolith => Some(format!(
            "judged as a {} plugin, from the sockets given",
            facts.plugin_type.as_str()
        )),
        "monolith-chosen" | "monolith-assumed" => None,
        "node" if controller_only => Some(CONTROLLER_ONLY.into()),
        "node" => None,
        "controller" | "group" if node_only => Some(NODE_ONLY.into()),
        "controller" if !probe.caps.plugin.contains("CONTROLLER_SERVICE") => {
            missing("the CONTROLLER_SERVICE plugin capability".into())
        }
        "group" if !probe.caps.plugin.contains("GROUP_CONTROLLER_SERVICE") => {
            missing("the GROUP_CONTROLLER_SERVICE plugin capability".into())
        }
        "controller" | "group" => None,
        "launch" if !facts.launched => {
            Some("needs a plugin the harness launched itself (--launch), to restart it".into())
        }
        "max-volumes" if !probe.node_probed => Some(
            "controller-only run: no node plugin reports max_volumes_per_node (NodeGetInfo)"
                .into(),
        ),
        "max-volumes" if probe.max_volumes <= 0 => {
            Some("the node reports no max_volumes_per_node limit".into())
        }
        "mutable-parameters" if !facts.mutable_parameters => Some(
            "needs mutable parameters the plugin supports: pass --mutable-parameters JSON".into(),
        ),
        "multi-writer" | "block" if node_only => Some(format!(
            "node-only run: the --volume volumes are claimed as single-node-writer file-system volumes, and this clause needs a {} volume",
            if need == "block" { "block" } else { "multi-node-multi-writer" }
        )),
        "launch" | "max-volumes" | "mutable-parameters" | "multi-writer" | "block" => None,
        // A volume to claim: created, or one of --volume (node-only runs, and controllers that
        // cannot create, whose volumes are registered as `nomad volume register` does).
        "volume" if no_controller && !facts.user_volumes => Some(format!(
            "{NO_CONTROLLER}, so there is no volume to claim: a node plugin is run with --plugin-type node and --volume ID[,CONTEXT]"
        )),
        "volume" if node_only || !probe.caps.controller.contains("CREATE_DELETE_VOLUME") => {
            (!facts.user_volumes).then(|| {
                if node_only {
                    "node-only run without volumes to claim: name existing ones with --volume ID[,CONTEXT]".into()
                } else {
                    "the plugin does not advertise CREATE_DELETE_VOLUME: name existing volumes to claim with --volume ID[,CONTEXT], as `nomad volume register` would register them".into()
                }
            })
        }
        "volume" => None,
        n if n.starts_with("group-") => {
            let cap = &n["group-".len()..];
            if node_only {
                Some(NODE_ONLY.into())
            } else {
                (!probe.caps.group.contains(cap)).then(|| {
                    format!("the plugin does not advertise the group controller capability {cap}")
                })
            }
        }
        n if n.starts_with("node-") => {
            let cap = &n["node-".len()..];
            if controller_only {
                Some(CONTROLLER_ONLY.into())
            } else {
                (!probe.caps.node.contains(cap))
                    .then(|| format!("the plugin does not advertise the node capability {cap}"))
            }
        }
        _ if node_only => Some(NODE_ONLY.into()),
        "PUBLISH_UNPUBLISH_VOLUME" if controller_only && !facts.node_id_known => Some(
            "controller-only run without --node-id: ControllerPublishVolume needs the node ID that the node plugin's NodeGetInfo reports".into(),
        ),
        _ if no_controller => Some(NO_CONTROLLER.into()),
        cap if !probe.caps.controller.contains(cap) => {
            missing(format!("the controller capability {cap}"))
        }
        _ => None,
    }
}

/// Scenarios whose `@requires-...` tags the plugin does not satisfy, with the reason.
pub fn skips(
    clauses: &ClauseSet,
    selection: &Selection,
    probe: &Probe,
    facts: RunFacts,
) -> Vec<(CaseKey, String)> {
    let mut out = Vec::new();
    for key in &selection.run {
        let Some(clause) = clauses.get(key) else {
            continue;
        };
        if let Some(reason) = clause.tags.iter().find_map(|t| reason(t, probe, facts)) {
            let reason = if probe.failures.is_empty() {
                reason
            } else {
                format!("{reason} (probing failed: {})", probe.failures.join("; "))
            };
            out.push((key.clone(), reason));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(plugin_type: PluginType) -> RunFacts {
        RunFacts {
            plugin_type,
            plugin_type_given: true,
            launched: true,
            mutable_parameters: true,
            user_volumes: true,
            node_id_known: true,
        }
    }

    fn monolith_probe() -> Probe {
        let mut p = Probe {
            node_probed: true,
            max_volumes: 3,
            ..Probe::default()
        };
        p.caps.plugin.insert("CONTROLLER_SERVICE".into());
        p.caps.controller.insert("CREATE_DELETE_VOLUME".into());
        p.caps.controller.insert("PUBLISH_UNPUBLISH_VOLUME".into());
        p.caps.node.insert("STAGE_UNSTAGE_VOLUME".into());
        p
    }

    #[test]
    fn a_node_only_plugin_advertising_the_controller_service_is_not_asked_for_it() {
        let p = monolith_probe();
        let f = facts(PluginType::Node);
        assert!(
            reason("requires-controller", &p, f)
                .unwrap()
                .contains("node-only")
        );
        assert!(
            reason("requires-PUBLISH_UNPUBLISH_VOLUME", &p, f)
                .unwrap()
                .contains("node-only")
        );
        // Volumes come from --volume; CreateVolume itself is the controller's.
        assert_eq!(reason("requires-volume", &p, f), None);
        assert!(
            reason("requires-CREATE_DELETE_VOLUME", &p, f)
                .unwrap()
                .contains("node-only")
        );
        let without = RunFacts {
            user_volumes: false,
            ..f
        };
        assert!(
            reason("requires-volume", &p, without)
                .unwrap()
                .contains("--volume")
        );
        assert_eq!(reason("requires-node-STAGE_UNSTAGE_VOLUME", &p, f), None);
        assert!(reason("requires-block", &p, f).is_some());
    }

    #[test]
    fn a_controller_only_plugin_skips_the_node_service() {
        let mut p = monolith_probe();
        p.node_probed = false;
        let f = facts(PluginType::Controller);
        assert!(
            reason("requires-node", &p, f)
                .unwrap()
                .contains("controller-only")
        );
        assert!(
            reason("requires-node-STAGE_UNSTAGE_VOLUME", &p, f)
                .unwrap()
                .contains("controller-only")
        );
        assert_eq!(reason("requires-CREATE_DELETE_VOLUME", &p, f), None);
        let no_node = RunFacts {
            node_id_known: false,
            ..f
        };
        assert!(
            reason("requires-PUBLISH_UNPUBLISH_VOLUME", &p, no_node)
                .unwrap()
                .contains("--node-id")
        );
        assert!(reason("requires-max-volumes", &p, f).is_some());
    }

    #[test]
    fn a_controller_that_cannot_create_claims_the_volumes_it_is_given() {
        let mut p = monolith_probe();
        p.caps.controller.remove("CREATE_DELETE_VOLUME");
        let f = facts(PluginType::Monolith);
        assert_eq!(reason("requires-volume", &p, f), None);
        assert!(reason("requires-CREATE_DELETE_VOLUME", &p, f).is_some());
        let without = RunFacts {
            user_volumes: false,
            ..f
        };
        assert!(
            reason("requires-volume", &p, without)
                .unwrap()
                .contains("CREATE_DELETE_VOLUME")
        );
    }

    #[test]
    fn a_monolith_needs_what_it_advertises() {
        let p = monolith_probe();
        let f = facts(PluginType::Monolith);
        assert_eq!(reason("requires-node", &p, f), None);
        assert_eq!(reason("requires-controller", &p, f), None);
        assert!(reason("requires-EXPAND_VOLUME", &p, f).is_some());
        assert!(reason("requires-node-GET_VOLUME_STATS", &p, f).is_some());
        assert_eq!(reason("requires-block", &p, f), None);
        assert_eq!(reason("attaches-all", &p, f), None);
    }

    #[test]
    fn the_monolith_clauses_follow_whether_the_type_was_given() {
        let p = monolith_probe();
        let chosen = facts(PluginType::Monolith);
        assert_eq!(reason("requires-monolith-chosen", &p, chosen), None);
        assert!(reason("requires-monolith-assumed", &p, chosen).is_some());
        let assumed = RunFacts {
            plugin_type_given: false,
            ..chosen
        };
        assert!(reason("requires-monolith-chosen", &p, assumed).is_some());
        assert_eq!(reason("requires-monolith-assumed", &p, assumed), None);
        let node = facts(PluginType::Node);
        assert!(reason("requires-monolith-chosen", &p, node).is_some());
        assert!(reason("requires-monolith-assumed", &p, node).is_some());
    }
}
