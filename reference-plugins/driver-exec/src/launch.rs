//! The go-plugin launch protocol, plugin side (contracts/task-drivers.md A.2, A.3).
//!
//! 1. The host sets `NOMAD_PLUGIN_MAGIC_COOKIE`; without the right value the binary was not
//!    started by a host, so it says so on stderr and exits with status 1.
//! 2. The host lists the application protocol versions it speaks in
//!    `PLUGIN_PROTOCOL_VERSIONS`; this plugin speaks only 2. Like go-plugin, it announces its
//!    own version even when the host does not offer it and leaves refusing to the host.
//! 3. The plugin listens on a fresh unix socket in `$PLUGIN_UNIX_SOCKET_DIR`, else `$TMPDIR`
//!    (or, with the tcp variant, on 127.0.0.1 within `PLUGIN_MIN_PORT..=PLUGIN_MAX_PORT`).
//! 4. Only then it prints one line on stdout, `CORE|APP|NETWORK|ADDRESS|PROTOCOL|CERT`, here
//!    `1|2|unix|/tmp/plugin…|grpc|` (no certificate: Nomad does not use AutoMTLS), and keeps
//!    running: the host connects and drives it over gRPC.
//! 5. SIGINT is ignored (a terminal's Ctrl-C reaches the whole foreground group, and the host
//!    decides when its plugins stop); it is caught and dropped rather than set to SIG_IGN,
//!    because an ignored disposition would be inherited by every task the plugin starts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{SignalKind, signal};

use crate::faults::{Fault, Faults};
use crate::log;
use crate::variants::{Variant, Variants};

/// Nomad's handshake config (plugins/base/plugin.go).
pub const MAGIC_COOKIE_KEY: &str = "NOMAD_PLUGIN_MAGIC_COOKIE";
pub const MAGIC_COOKIE_VALUE: &str =
    "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255";
/// go-plugin's own protocol version.
pub const CORE_PROTOCOL_VERSION: u32 = 1;
/// Nomad's plugin protocol version (2: gRPC plugins, Nomad 0.9 and later).
pub const APP_PROTOCOL_VERSION: u32 = 2;

/// Longest unix socket path the kernel accepts (sun_path is 108 bytes with the final NUL).
const MAX_SOCKET_PATH: usize = 107;
/// go-plugin's port range when the host sets none.
const DEFAULT_PORTS: (u16, u16) = (10000, 25000);

/// Step 1: whether a host started us. The message is for a person who ran the binary by hand.
pub fn check_cookie(faults: &Faults) -> Result<(), String> {
    if faults.has(Fault::IgnoresCookie) {
        return Ok(());
    }
    match std::env::var(MAGIC_COOKIE_KEY) {
        Ok(value) if value == MAGIC_COOKIE_VALUE => Ok(()),
        _ => Err(format!(
            "driver-exec is a Nomad task driver plugin: Nomad starts it and talks to it over \
             gRPC. It cannot be run on its own ({MAGIC_COOKIE_KEY} is missing or wrong). \
             See `driver-exec --help`."
        )),
    }
}

/// Step 2: the versions the host offers; a warning is logged when 2 is not among them.
pub fn check_protocol_versions() {
    let offered = std::env::var("PLUGIN_PROTOCOL_VERSIONS").unwrap_or_default();
    let versions: Vec<u32> = offered
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    if !offered.is_empty() && !versions.contains(&APP_PROTOCOL_VERSION) {
        log::warn(
            "the host does not offer protocol version 2; announcing it anyway",
            &[("offered", offered)],
        );
    }
}

/// Where the plugin listens.
pub enum Listener {
    Unix(UnixListener, PathBuf),
    Tcp(TcpListener, SocketAddr),
}

impl Listener {
    /// Step 3.
    pub async fn open(variants: &Variants) -> anyhow::Result<Listener> {
        if variants.has(Variant::Tcp) {
            let (listener, addr) = listen_tcp().await?;
            return Ok(Listener::Tcp(listener, addr));
        }
        let path = socket_path()?;
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("failed to listen on {}", path.display()))?;
        Ok(Listener::Unix(listener, path))
    }

    /// The unix socket to remove when the plugin stops, if any.
    pub fn socket(&self) -> Option<&Path> {
        match self {
            Listener::Unix(_, path) => Some(path),
            Listener::Tcp(..) => None,
        }
    }

    /// Step 4: the line for stdout (without the newline).
    pub fn handshake_line(&self, faults: &Faults) -> String {
        let (network, address) = match self {
            Listener::Unix(_, path) => ("unix", path.display().to_string()),
            Listener::Tcp(_, addr) => ("tcp", addr.to_string()),
        };
        if faults.has(Fault::HandshakeGarbled) {
            return format!("{CORE_PROTOCOL_VERSION}|{APP_PROTOCOL_VERSION}|{network}");
        }
        let core = if faults.has(Fault::HandshakeCore2) {
            2
        } else {
            CORE_PROTOCOL_VERSION
        };
        let app = if faults.has(Fault::HandshakeApp1) {
            1
        } else {
            APP_PROTOCOL_VERSION
        };
        let address = if faults.has(Fault::HandshakeBadAddress) {
            format!("{address}.nothing-listens-here")
        } else {
            address
        };
        let protocol = if faults.has(Fault::HandshakeNetrpc) {
            "netrpc"
        } else {
            "grpc"
        };
        format!("{core}|{app}|{network}|{address}|{protocol}|")
    }
}

/// Step 4: prints the handshake, after whatever the faults put before it.
pub async fn announce(line: &str, faults: &Faults) {
    if faults.has(Fault::SlowHandshake) {
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    if faults.has(Fault::StdoutBanner) {
        println!("driver-exec {} starting", env!("CARGO_PKG_VERSION"));
    }
    println!("{line}");
    // println! flushes at the newline only on a terminal: stdout is a pipe here.
    let _ = std::io::Write::flush(&mut std::io::stdout());
}

/// How long after the handshake the late-sigint-handler variant starts ignoring SIGINT.
pub const LATE_SIGINT_HANDLER: Duration = Duration::from_secs(1);

/// SIGINT's default action (it terminates the process), whatever was inherited.
pub fn default_interrupts() -> anyhow::Result<()> {
    // SAFETY: SIG_DFL installs no handler; nothing else in the process handles SIGINT yet.
    unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGINT,
            nix::sys::signal::SigHandler::SigDfl,
        )
    }
    .context("failed to restore SIGINT's default action")?;
    Ok(())
}

/// Step 5: catch SIGINT and drop it (unless the dies-on-sigint fault leaves the default, which
/// terminates the process).
pub fn ignore_interrupts(faults: &Faults) -> anyhow::Result<()> {
    if faults.has(Fault::DiesOnSigint) {
        // The default action, whatever was inherited: a plugin started from a background job
        // of a non-interactive shell inherits SIGINT ignored, and would not die of it.
        // SAFETY: SIG_DFL installs no handler; nothing else in the process handles SIGINT.
        unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGINT,
                nix::sys::signal::SigHandler::SigDfl,
            )
        }
        .context("failed to restore SIGINT's default action")?;
        return Ok(());
    }
    let mut interrupts = signal(SignalKind::interrupt()).context("failed to handle SIGINT")?;
    tokio::spawn(async move {
        let mut count = 0u64;
        while interrupts.recv().await.is_some() {
            count += 1;
            log::trace(
                "SIGINT received and ignored",
                &[("count", count.to_string())],
            );
        }
    });
    Ok(())
}

/// A fresh socket path in `$PLUGIN_UNIX_SOCKET_DIR`, else the temporary directory.
fn socket_path() -> anyhow::Result<PathBuf> {
    let dir = std::env::var_os("PLUGIN_UNIX_SOCKET_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let path = dir.join(format!("plugin{}{nanos:09}", std::process::id()));
    let length = path.as_os_str().len();
    if length > MAX_SOCKET_PATH {
        bail!(
            "socket path {} is {length} bytes, longer than the {MAX_SOCKET_PATH} a unix socket \
             allows; set PLUGIN_UNIX_SOCKET_DIR or TMPDIR to a shorter directory",
            path.display()
        );
    }
    Ok(path)
}

/// The first free port of the host's range on the loopback address.
async fn listen_tcp() -> anyhow::Result<(TcpListener, SocketAddr)> {
    let min = port_from_env("PLUGIN_MIN_PORT").unwrap_or(DEFAULT_PORTS.0);
    let max = port_from_env("PLUGIN_MAX_PORT").unwrap_or(DEFAULT_PORTS.1);
    if min > max {
        bail!("PLUGIN_MIN_PORT {min} is above PLUGIN_MAX_PORT {max}");
    }
    for port in min..=max {
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)).await {
            let addr = listener.local_addr()?;
            return Ok((listener, addr));
        }
    }
    bail!("no free port on 127.0.0.1 between {min} and {max}")
}

fn port_from_env(name: &str) -> Option<u16> {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&p| p != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn unix_listener() -> (Listener, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.sock");
        let listener = UnixListener::bind(&path).unwrap();
        (Listener::Unix(listener, path), dir)
    }

    #[tokio::test]
    async fn handshake_line_has_six_fields_with_a_trailing_bar() {
        let (listener, dir) = unix_listener().await;
        let line = listener.handshake_line(&Faults::default());
        assert_eq!(
            line,
            format!("1|2|unix|{}|grpc|", dir.path().join("p.sock").display())
        );
    }

    #[tokio::test]
    async fn handshake_faults_change_one_field_each() {
        let (listener, _dir) = unix_listener().await;
        let field = |fault: Fault, index: usize| {
            let line = listener.handshake_line(&Faults::new([fault]));
            line.split('|').nth(index).unwrap_or_default().to_string()
        };
        assert_eq!(field(Fault::HandshakeCore2, 0), "2");
        assert_eq!(field(Fault::HandshakeApp1, 1), "1");
        assert_eq!(field(Fault::HandshakeNetrpc, 4), "netrpc");
        assert!(field(Fault::HandshakeBadAddress, 3).ends_with(".nothing-listens-here"));
        assert_eq!(
            listener.handshake_line(&Faults::new([Fault::HandshakeGarbled])),
            "1|2|unix"
        );
    }
}
