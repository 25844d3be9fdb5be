//! `nomad-conform fleet csi-node`: on a node of the conform-fleet job, find the node's CSI
//! node plugin the way the Nomad client lays it out, and run the CSI suite against it as a
//! node plugin.
//!
//! Facts from Nomad's source:
//! - the CSI plugin API (`GET /v1/plugin/csi/:plugin_id`, api/csi.go CSIPlugin) maps each
//!   node ID to the CSIInfo of the plugin's node instance there: its `AllocID` and whether it
//!   is `Healthy` (nomad/structs/node.go);
//! - the client gives each plugin allocation a socket directory of its own,
//!   `<state_dir>/csi/plugins/<alloc ID>/`, where the plugin makes `csi.sock`
//!   (client/allocrunner/taskrunner/plugin_supervisor_hook.go, socketMountPoint;
//!   structs.CSISocketName); an allocation registered before that layout keeps its old socket,
//!   `<state_dir>/csi/<type>/<plugin ID>/csi.sock` (setSocketHook keeps the registered path);
//! - the client's state_dir is `<data_dir>/client` unless `client { state_dir }` says otherwise
//!   (command/agent/agent.go), `/opt/nomad/data/client` with the Linux packages' data_dir.
//!
//! Inside the job the API is the Task API socket (`NOMAD_ADDR=unix://${NOMAD_SECRETS_DIR}/api.sock`)
//! with the task's workload identity as `NOMAD_TOKEN` (`identity { env = true }`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cli::CsiNodeArgs;
use crate::error::HarnessError;
use crate::nomad_api::{ApiError, NomadApi};

/// The socket Nomad's client gives `alloc_id`'s plugin, or the one an older client gave
/// `plugin_id` (checked in that order: the first that exists).
pub fn socket_candidates(state_dir: &Path, plugin_id: &str, alloc_id: &str) -> [PathBuf; 3] {
    let csi = state_dir.join("csi");
    [
        csi.join("plugins").join(alloc_id).join("csi.sock"),
        csi.join("node").join(plugin_id).join("csi.sock"),
        csi.join("monolith").join(plugin_id).join("csi.sock"),
    ]
}

/// The node plugin's socket on `node_id`: `Err` (exit 3) when the plugin has no healthy
/// allocation there or its socket is not where Nomad puts it.
pub async fn find_socket(args: &CsiNodeArgs) -> Result<PathBuf, HarnessError> {
    let settings = crate::nomad_api::settings::nomad_cli_from_env(&args.api)?;
    settings.warn();
    let timeout = humantime::parse_duration(args.timeout.trim()).map_err(|e| {
        HarnessError::Usage(format!(
            "--timeout {:?} is not a duration: {e}",
            args.timeout
        ))
    })?;
    let api = NomadApi::new(&settings, "default", timeout.max(Duration::from_millis(1)));
    let plugin = api.csi_plugin(&args.plugin_id).await.map_err(|e| {
        let hint = match &e {
            ApiError::Status { status: 403, .. } => {
                " (the task's workload identity needs a policy with plugin { policy = \"read\" }: see docs/guides/fleet.md)"
            }
            ApiError::Status { status: 404, .. } => " (is the plugin's job running? nomad plugin status)",
            _ => "",
        };
        HarnessError::Internal(format!(
            "failed to read CSI plugin {:?} at {}: {e}{hint}",
            args.plugin_id, settings.addr
        ))
    })?;
    let info = plugin.healthy_on(&args.node_id).map_err(|why| {
        HarnessError::Internal(format!("{why} (node {}): nothing to test", args.node_id))
    })?;
    let candidates = socket_candidates(&args.state_dir, &args.plugin_id, &info.alloc_id);
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .ok_or_else(|| {
            HarnessError::Internal(format!(
                "CSI plugin {:?} runs in allocation {} on this node, but its socket is not at {} (is --state-dir the client's state_dir?)",
                args.plugin_id,
                info.alloc_id,
                candidates[0].display()
            ))
        })
}

/// Find the socket, then become `nomad-conform csi --endpoint unix://SOCKET --plugin-type node
/// --json FILE ARGS...` (the same binary, replacing this process, so Nomad's kill signal
/// reaches the run).
pub fn run(args: &CsiNodeArgs, rt: &tokio::runtime::Runtime) -> Result<i32, HarnessError> {
    let socket = rt.block_on(find_socket(args))?;
    let exe = std::env::current_exe()
        .map_err(|e| HarnessError::Internal(format!("failed to find this program: {e}")))?;
    let argv = csi_argv(&socket, args);
    eprintln!(
        "nomad-conform fleet: CSI plugin {} on node {}: nomad-conform {}",
        args.plugin_id,
        args.node_id,
        argv.join(" ")
    );
    use std::os::unix::process::CommandExt as _;
    let e = std::process::Command::new(exe).args(&argv).exec();
    Err(HarnessError::Internal(format!(
        "failed to start nomad-conform csi: {e}"
    )))
}

/// The CSI run's arguments.
pub fn csi_argv(socket: &Path, args: &CsiNodeArgs) -> Vec<String> {
    let mut argv = vec![
        "csi".to_string(),
        "--endpoint".into(),
        format!("unix://{}", socket.display()),
        "--plugin-type".into(),
        "node".into(),
        "--json".into(),
        args.json.display().to_string(),
    ];
    argv.extend(args.csi_args.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_are_where_the_client_puts_them() {
        let c = socket_candidates(Path::new("/opt/nomad/data/client"), "hostpath", "a1b2");
        assert_eq!(
            c[0],
            Path::new("/opt/nomad/data/client/csi/plugins/a1b2/csi.sock")
        );
        assert_eq!(
            c[1],
            Path::new("/opt/nomad/data/client/csi/node/hostpath/csi.sock")
        );
    }
}
