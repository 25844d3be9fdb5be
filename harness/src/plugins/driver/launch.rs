//! Starting a driver plugin as Nomad's agent starts it (A.2): go-plugin's environment on top of
//! the agent's own, stdin closed (an agent under systemd has /dev/null there), the first stdout
//! line awaited within the start timeout. Unlike Nomad, the plugin runs in a process group of
//! its own, so that the harness can kill everything it started.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio::sync::oneshot;

use super::handshake::Handshake;
use super::hclog::LogLine;
use super::launch_spec::{BaseEnv, LaunchSpec};
use super::pipes::{self, FirstLine, Output};
use super::protocol::MAGIC_COOKIE_KEY;
use super::running::{PluginProcess, exit_watch};
use crate::process::{ProcInfo, register_group};
use nomad_conform_reports::model::ExitStatus;

/// What every launch failure carries: how to reproduce it and what the plugin said.
#[derive(Clone, Debug)]
pub struct LaunchFailure {
    /// [`LaunchSpec::command_line`].
    pub command: String,
    /// The variables the host set (see [`LaunchSpec::host_env`]).
    pub env: Vec<(String, String)>,
    /// The last bytes the plugin wrote to stderr.
    pub stderr_tail: String,
    /// Its stderr as the host parsed it.
    pub logs: Vec<LogLine>,
    /// From spawn to the failure.
    pub after: Duration,
    /// The plugin's pid and process group (0 if it never started); the group is gone.
    pub pid: i32,
}

impl std::fmt::Display for LaunchFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\ncommand: {}", self.command)?;
        if self.stderr_tail.trim().is_empty() {
            write!(f, "\nstderr: (empty)")
        } else {
            write!(f, "\nstderr:\n{}", self.stderr_tail.trim_end())
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("failed to start the plugin: {message}{ctx}")]
    Spawn { message: String, ctx: LaunchFailure },
    #[error(
        "failed to launch the plugin: it exited ({status}) before printing its handshake line{}{ctx}",
        first_line.as_ref().map(|l| format!(" (its stdout began {l:?})")).unwrap_or_default()
    )]
    ExitedBeforeHandshake {
        status: ExitStatus,
        first_line: Option<String>,
        ctx: LaunchFailure,
    },
    #[error(
        "failed to launch the plugin: no handshake line within {}; its process group was \
         killed{ctx}", crate::fmt_duration(*timeout)
    )]
    NoHandshake {
        timeout: Duration,
        /// Members of the group still alive after the SIGKILL (should be none).
        survivors: Vec<ProcInfo>,
        ctx: LaunchFailure,
    },
    #[error(
        "failed to launch the plugin: its first stdout line {line:?} is not a handshake (the \
         host needs at least 4 |-separated fields); the plugin was killed{ctx}"
    )]
    Unrecognized {
        line: String,
        handshake: Box<Handshake>,
        ctx: LaunchFailure,
    },
    #[error(
        "failed to launch the plugin: its first stdout line is longer than the host's 64 KiB \
         limit (it begins {prefix:?}); the plugin was killed{ctx}"
    )]
    FirstLineTooLong { prefix: String, ctx: LaunchFailure },
    #[error(
        "failed to launch the plugin: it closed its stdout without printing a line; the \
         plugin was killed{ctx}"
    )]
    StdoutClosed { ctx: LaunchFailure },
}

impl LaunchError {
    pub fn failure(&self) -> &LaunchFailure {
        match self {
            LaunchError::Spawn { ctx, .. }
            | LaunchError::ExitedBeforeHandshake { ctx, .. }
            | LaunchError::NoHandshake { ctx, .. }
            | LaunchError::Unrecognized { ctx, .. }
            | LaunchError::FirstLineTooLong { ctx, .. }
            | LaunchError::StdoutClosed { ctx, .. } => ctx,
        }
    }
}

/// How long to wait, once the process exited, for its last stdout and stderr bytes.
const LAST_WORDS: Duration = Duration::from_millis(200);

/// Launch the plugin and read its handshake line. On success the process keeps running,
/// owned by the returned [`PluginProcess`]; the handshake's violations are returned, not
/// enforced. On failure nothing of the plugin is left running.
pub async fn launch(spec: &LaunchSpec) -> Result<PluginProcess, LaunchError> {
    crate::escapees::become_subreaper();
    let output = Arc::new(Mutex::new(Output::new(
        spec.stdout_limit,
        spec.stderr_limit,
        spec.log_lines_limit,
    )));
    let started = Instant::now();
    let failure = |out: &Arc<Mutex<Output>>, pid: i32| {
        let o = pipes::lock(out);
        LaunchFailure {
            command: spec.command_line(),
            env: spec.host_env(),
            stderr_tail: o.stderr.excerpt(4096).text,
            logs: o.logs.lines(),
            after: started.elapsed(),
            pid,
        }
    };
    let mut child = match spawn(spec).await {
        Ok(c) => c,
        Err(e) => {
            return Err(LaunchError::Spawn {
                message: format!("{}: {e}", spec.program.display()),
                ctx: failure(&output, 0),
            });
        }
    };
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    register_group(pid);
    let (first_tx, mut first_rx) = oneshot::channel();
    if let Some(out) = child.stdout.take() {
        pipes::read_stdout(out, output.clone(), first_tx);
    }
    if let Some(err) = child.stderr.take() {
        pipes::read_stderr(err, output.clone(), started);
    }
    let mut exit = exit_watch(child);
    let process = PluginProcess::new(spec.clone(), pid, started, exit.clone(), output.clone());

    let deadline = tokio::time::sleep(spec.start_timeout);
    tokio::pin!(deadline);
    let first = tokio::select! {
        biased;
        first = &mut first_rx => first.ok(),
        _ = async { let _ = exit.wait_for(Option::is_some).await; } => {
            // Let the readers take in the last words before reporting.
            let first = tokio::time::timeout(LAST_WORDS, &mut first_rx).await.ok().and_then(Result::ok);
            stderr_closed(&output, LAST_WORDS).await;
            let status = process.exit_status().unwrap_or(ExitStatus::SpawnFailed {
                message: "the plugin's exit status was lost".into(),
            });
            let first_line = match first {
                Some(FirstLine::Line { text, .. }) => Some(text),
                Some(FirstLine::TooLong { prefix, .. }) => Some(prefix),
                _ => None,
            };
            process.kill_now().await;
            return Err(LaunchError::ExitedBeforeHandshake { status, first_line, ctx: failure(&output, pid) });
        }
        _ = &mut deadline => {
            let report = process.kill_now().await;
            return Err(LaunchError::NoHandshake {
                timeout: spec.start_timeout,
                survivors: report.survivors,
                ctx: failure(&output, pid),
            });
        }
    };
    match first {
        Some(FirstLine::Line { text, at }) => {
            let mut handshake = Handshake::parse(&text, &spec.offered_versions());
            if !handshake.recognized() {
                process.kill_now().await;
                return Err(LaunchError::Unrecognized {
                    line: text,
                    handshake: Box::new(handshake),
                    ctx: failure(&output, pid),
                });
            }
            let left = spec.start_timeout.saturating_sub(started.elapsed());
            handshake
                .resolve_names(left.max(Duration::from_secs(1)))
                .await;
            Ok(process.with_handshake(handshake, at.duration_since(started)))
        }
        Some(FirstLine::TooLong { prefix, .. }) => {
            process.kill_now().await;
            Err(LaunchError::FirstLineTooLong {
                prefix,
                ctx: failure(&output, pid),
            })
        }
        Some(FirstLine::Eof { .. }) | None => {
            // A plugin that closes stdout is usually exiting: prefer saying so.
            let status = process.wait_exit(LAST_WORDS).await;
            stderr_closed(&output, LAST_WORDS).await;
            process.kill_now().await;
            Err(match status {
                Some(status) => LaunchError::ExitedBeforeHandshake {
                    status,
                    first_line: None,
                    ctx: failure(&output, pid),
                },
                None => LaunchError::StdoutClosed {
                    ctx: failure(&output, pid),
                },
            })
        }
    }
}

/// Wait at most `within` for stderr to reach EOF (the plugin's last words).
async fn stderr_closed(output: &Arc<Mutex<Output>>, within: Duration) {
    let until = Instant::now() + within;
    while !pipes::lock(output).stderr_closed && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn spawn(spec: &LaunchSpec) -> std::io::Result<tokio::process::Child> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args);
    match &spec.base_env {
        BaseEnv::Inherit => {
            if !spec.send_magic_cookie {
                cmd.env_remove(MAGIC_COOKIE_KEY);
            }
        }
        BaseEnv::Exact(base) => {
            cmd.env_clear();
            cmd.envs(base.iter().map(|(k, v)| (k, v)));
        }
    }
    cmd.envs(spec.host_env());
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::exec_signals::reset_on_tokio_spawn(&mut cmd);
    crate::process::spawn_retrying(&mut cmd).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_as_go_plugin_builds_it() {
        let mut spec = LaunchSpec::new("/bin/plugin", vec!["-x".into()]);
        spec.extra_env = vec![("FAULT".into(), "a b".into())];
        let env = spec.host_env();
        assert_eq!(env[0], ("FAULT".into(), "a b".into()));
        assert_eq!(env[1].0, MAGIC_COOKIE_KEY);
        assert_eq!(env[2], ("PLUGIN_MIN_PORT".into(), "10000".into()));
        assert_eq!(env[3], ("PLUGIN_MAX_PORT".into(), "25000".into()));
        assert_eq!(env[4], ("PLUGIN_PROTOCOL_VERSIONS".into(), "2".into()));
        assert_eq!(spec.offered_versions(), [2]);
        let cmd = spec.command_line();
        assert!(
            cmd.starts_with("env 'FAULT=a b' 'NOMAD_PLUGIN_MAGIC_COOKIE=e43"),
            "{cmd}"
        );
        assert!(
            cmd.ends_with("'PLUGIN_PROTOCOL_VERSIONS=2' /bin/plugin -x"),
            "{cmd}"
        );
        spec.send_magic_cookie = false;
        let cmd = spec.command_line();
        assert!(
            cmd.starts_with("env -u NOMAD_PLUGIN_MAGIC_COOKIE 'FAULT=a b' 'PLUGIN_MIN_PORT"),
            "{cmd}"
        );
        spec.base_env = BaseEnv::Exact(vec![("PATH".into(), "/bin".into())]);
        let cmd = spec.command_line();
        assert!(
            cmd.starts_with("env -i 'PATH=/bin' 'FAULT=a b' 'PLUGIN_MIN_PORT"),
            "{cmd}"
        );
        spec.protocol_versions = "2, 3,x".into();
        assert_eq!(spec.offered_versions(), [2, 3]);
    }
}
