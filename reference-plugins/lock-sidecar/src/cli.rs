//! The command line: which lock, which pattern (shim or sidecar), the timing knobs, switches.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::faults::{Fault, Variant};

/// Holds a Nomad Variables lock around a protected process, so that at most one copy of it
/// runs in the cluster.
///
/// Shim:    lock-sidecar --path P [options] -- <command> [args...]
///
/// Sidecar: lock-sidecar --path P [options] --sentinel <file>
///
/// Environment: NOMAD_ADDR (http://host:port or unix:///path), NOMAD_UNIX_ADDR (the Task API
/// socket; wins over NOMAD_ADDR), NOMAD_TOKEN, NOMAD_NAMESPACE (default "default").
///
/// Exit: the command's status in shim mode (128 + signal if a signal killed it); 1 when the
/// lock could not be acquired in time or was lost; 2 for usage errors and refusals (403, 400);
/// 126/127 when the command could not be started.
#[derive(Debug, Parser)]
#[command(name = "lock-sidecar", version, verbatim_doc_comment)]
pub struct Cli {
    /// Variable path of the lock (for example nomad/jobs/example/lock).
    #[arg(long, value_name = "VAR PATH")]
    pub path: String,

    /// Lock TTL to ask for (Nomad accepts 10s to 24h); renewed every TTL/2.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub ttl: Duration,

    /// Lock delay to ask for: how long the server keeps an expired lock before others may take it.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub delay: Duration,

    /// Stop waiting for the lock after this long and exit 1.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub give_up: Duration,

    /// Longest wait between two acquire attempts.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub max_backoff: Duration,

    /// Sidecar mode: create this file once the lock is held, remove it when the lock is lost.
    #[arg(long, value_name = "FILE", conflicts_with = "command")]
    pub sentinel: Option<PathBuf>,

    /// Log every successful renew too.
    #[arg(short, long)]
    pub verbose: bool,

    /// Break one rule on purpose (repeatable), for the conformance suite's fixtures.
    #[arg(long = "fault", value_enum, value_name = "NAME")]
    pub faults: Vec<Fault>,

    /// Use an allowed behaviour that differs from the default (repeatable).
    #[arg(long = "variant", value_enum, value_name = "NAME")]
    pub variants: Vec<Variant>,

    /// Shim mode: the protected command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Which pattern to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Wrap a command.
    Shim(Vec<String>),
    /// Signal a sibling task through a file.
    Sidecar(PathBuf),
}

impl Cli {
    /// The pattern, or why the arguments name none.
    pub fn mode(&self) -> Result<Mode, String> {
        if self.path.trim_matches('/').is_empty() {
            return Err("--path must name a variable".to_string());
        }
        match (&self.sentinel, self.command.is_empty()) {
            (Some(file), true) => {
                let parent = file
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or_else(|| std::path::Path::new("."));
                if !parent.is_dir() {
                    return Err(format!(
                        "the sentinel's directory {} does not exist",
                        parent.display()
                    ));
                }
                Ok(Mode::Sidecar(file.clone()))
            }
            (None, false) => Ok(Mode::Shim(self.command.clone())),
            (None, true) => {
                Err("give a command after `--` (shim) or --sentinel FILE (sidecar)".to_string())
            }
            (Some(_), false) => Err("use either a command or --sentinel, not both".to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("lock-sidecar").chain(args.iter().copied()))
    }

    #[test]
    fn shim_with_defaults() {
        let cli = parse(&["--path", "a/b", "--", "sleep", "--x", "1"]).unwrap();
        assert_eq!(cli.ttl, Duration::from_secs(15));
        assert_eq!(cli.delay, Duration::from_secs(15));
        assert_eq!(cli.give_up, Duration::from_secs(300));
        assert_eq!(cli.max_backoff, Duration::from_secs(30));
        assert_eq!(
            cli.mode().unwrap(),
            Mode::Shim(vec!["sleep".into(), "--x".into(), "1".into()])
        );
    }

    #[test]
    fn sidecar_and_switches() {
        let dir = std::env::temp_dir();
        let sentinel = dir.join("ready");
        let cli = parse(&[
            "--path",
            "a",
            "--ttl",
            "1s",
            "--sentinel",
            sentinel.to_str().unwrap(),
            "--fault",
            "renews-late",
            "--fault",
            "keeps-child",
            "--variant",
            "renew-0.7",
        ])
        .unwrap();
        assert_eq!(cli.mode().unwrap(), Mode::Sidecar(sentinel));
        assert_eq!(cli.faults, [Fault::RenewsLate, Fault::KeepsChild]);
        assert_eq!(cli.variants, [Variant::Renew07]);
        let cli = parse(&[
            "--path",
            "a",
            "--fault",
            "panics-on-late-409",
            "--variant",
            "exit-on-conflict",
            "--",
            "x",
        ])
        .unwrap();
        assert_eq!(cli.faults, [Fault::PanicsOnLate409]);
        assert_eq!(cli.variants, [Variant::ExitOnConflict]);
    }

    #[test]
    fn refusals() {
        assert!(parse(&["--path", "a", "--fault", "nope", "--", "x"]).is_err());
        assert!(parse(&["--", "x"]).is_err());
        assert!(parse(&["--path", "a", "--sentinel", "/tmp/x", "--", "x"]).is_err());
        assert!(parse(&["--path", "a"]).unwrap().mode().is_err());
        assert!(parse(&["--path", "/", "--", "x"]).unwrap().mode().is_err());
        assert!(
            parse(&["--path", "a", "--sentinel", "/no/such/dir/ready"])
                .unwrap()
                .mode()
                .is_err()
        );
    }
}
