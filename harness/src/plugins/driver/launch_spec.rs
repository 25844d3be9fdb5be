//! How to launch one plugin: its program and arguments, the environment Nomad's agent gives it
//! (go-plugin's variables on top of the agent's own), the start timeout and the capture limits.
//! Plain data, read by the launch and by everything that reports on a launched plugin.

use std::path::PathBuf;
use std::time::Duration;

use super::protocol::{
    APP_PROTOCOL_VERSION, DEFAULT_MAX_PORT, DEFAULT_MIN_PORT, MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE,
    NOMAD_START_TIMEOUT,
};
use crate::shell::quote;

/// The environment the plugin starts from, before go-plugin's variables are added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseEnv {
    /// The harness's own environment, as Nomad's agent passes its environment on.
    Inherit,
    /// Exactly these variables.
    Exact(Vec<(String, String)>),
}

/// How to launch one plugin.
#[derive(Clone, Debug)]
pub struct LaunchSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub base_env: BaseEnv,
    /// Added to the base environment (a fault switch, say); go-plugin's variables win.
    pub extra_env: Vec<(String, String)>,
    /// Send `NOMAD_PLUGIN_MAGIC_COOKIE` (a clause launches without it; then the variable is
    /// also removed from an inherited environment).
    pub send_magic_cookie: bool,
    /// `PLUGIN_PROTOCOL_VERSIONS`: the comma-separated app protocol versions offered (`2`).
    pub protocol_versions: String,
    /// `PLUGIN_MIN_PORT` / `PLUGIN_MAX_PORT`.
    pub min_port: u32,
    pub max_port: u32,
    /// How long to wait for the first stdout line (Nomad: 1 minute).
    pub start_timeout: Duration,
    pub cwd: Option<PathBuf>,
    /// Bytes of stdout (after the handshake) and stderr kept (head and tail, half each).
    pub stdout_limit: usize,
    pub stderr_limit: usize,
    /// Parsed stderr lines kept (the first half and the most recent half).
    pub log_lines_limit: usize,
}

impl LaunchSpec {
    /// What Nomad's agent would do for `program args...`: inherited environment, the cookie,
    /// versions `2`, ports 10000-25000, a 1 minute start timeout.
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>) -> Self {
        LaunchSpec {
            program: program.into(),
            args,
            base_env: BaseEnv::Inherit,
            extra_env: Vec::new(),
            send_magic_cookie: true,
            protocol_versions: APP_PROTOCOL_VERSION.to_string(),
            min_port: DEFAULT_MIN_PORT,
            max_port: DEFAULT_MAX_PORT,
            start_timeout: NOMAD_START_TIMEOUT,
            cwd: None,
            stdout_limit: 256 * 1024,
            stderr_limit: 1024 * 1024,
            log_lines_limit: 2000,
        }
    }

    /// The variables the host sets on top of the base environment, in go-plugin's order,
    /// preceded by `extra_env` (later entries win).
    pub fn host_env(&self) -> Vec<(String, String)> {
        let mut env = self.extra_env.clone();
        if self.send_magic_cookie {
            env.push((MAGIC_COOKIE_KEY.into(), MAGIC_COOKIE_VALUE.into()));
        }
        env.push(("PLUGIN_MIN_PORT".into(), self.min_port.to_string()));
        env.push(("PLUGIN_MAX_PORT".into(), self.max_port.to_string()));
        env.push((
            "PLUGIN_PROTOCOL_VERSIONS".into(),
            self.protocol_versions.clone(),
        ));
        env
    }

    /// The app protocol versions offered, as integers (what a handshake's field 2 must match).
    pub fn offered_versions(&self) -> Vec<i64> {
        self.protocol_versions
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .collect()
    }

    /// A shell command that starts the plugin the same way (for an inherited base, only the
    /// variables the host adds are listed: the rest is the caller's own environment).
    pub fn command_line(&self) -> String {
        let mut words = Vec::new();
        if let Some(cwd) = &self.cwd {
            words.push(format!("cd {} &&", quote(&cwd.display().to_string())));
        }
        match &self.base_env {
            BaseEnv::Inherit => {
                words.push("env".into());
                if !self.send_magic_cookie {
                    words.push(format!("-u {MAGIC_COOKIE_KEY}"));
                }
            }
            BaseEnv::Exact(base) => {
                words.push("env -i".into());
                words.extend(base.iter().map(|(k, v)| quote(&format!("{k}={v}"))));
            }
        }
        words.extend(
            self.host_env()
                .iter()
                .map(|(k, v)| quote(&format!("{k}={v}"))),
        );
        words.push(quote(&self.program.display().to_string()));
        words.extend(self.args.iter().map(|a| quote(a)));
        words.join(" ")
    }
}
