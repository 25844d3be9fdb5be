//! Which Nomad API a run talks to, and how: the address, TLS, token, region and namespace,
//! from the command line ([`crate::cli::NomadApiArgs`]) with the nomad CLI's own environment
//! variables as the last word before the defaults.
//!
//! Precedence, for each setting on its own: a flag, then its `NOMAD_CONFORM_*` variable, then
//! `nomad-conform.toml` (clap and [`crate::config`] merge those three), then the nomad CLI's
//! variable (`NOMAD_ADDR`, `NOMAD_TOKEN`, `NOMAD_REGION`, `NOMAD_NAMESPACE`, `NOMAD_CACERT`,
//! `NOMAD_CAPATH`, `NOMAD_CLIENT_CERT`, `NOMAD_CLIENT_KEY`, `NOMAD_TLS_SERVER_NAME`,
//! `NOMAD_SKIP_VERIFY`; empty counts as unset, as in the nomad CLI), then the default. So an
//! operator's shell set up for `nomad` works as it is, and anything nomad-conform is told
//! beats it.
//!
//! `NOMAD_ADDR` only chooses the agent of `fleet collect`: for `lock` and `variables` a real
//! Nomad is used only when `--nomad-addr` says so (they write variables, policies and tokens;
//! a shell's `NOMAD_ADDR` must not point them at a cluster), and the other variables apply
//! once it does.

use crate::cli::NomadApiArgs;
use crate::error::HarnessError;

use super::address::Address;
use super::client::Target;
use super::tls::TlsSettings;

/// The nomad CLI's default address.
pub const DEFAULT_ADDR: &str = "http://127.0.0.1:4646";

/// Where the address comes from when `--nomad-addr` is not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrFallback {
    /// `NOMAD_ADDR`, then the nomad CLI's default (`fleet collect`).
    NomadCli,
    /// None: without `--nomad-addr` there is no Nomad to talk to (`lock`, `variables`).
    Flag,
}

/// The API a run talks to, resolved. Its `Debug` never shows the token.
#[derive(Clone)]
pub struct ApiSettings {
    /// The address as given.
    pub addr: String,
    pub address: Address,
    pub target: Target,
    /// Sent as `X-Nomad-Token`; registered as a secret.
    pub token: Option<String>,
    pub namespace: Option<String>,
    pub region: Option<String>,
}

impl std::fmt::Debug for ApiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiSettings")
            .field("addr", &self.addr)
            .field("target", &self.target)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .field("namespace", &self.namespace)
            .field("region", &self.region)
            .finish()
    }
}

impl ApiSettings {
    /// The report subject's lines about the connection: `TLS` (what is trusted, the client
    /// certificate) and, without verification, a `warning`.
    pub fn details(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(tls) = &self.target.tls {
            out.push(("TLS".to_string(), tls.describe()));
            if let Some(w) = tls.warning() {
                out.push(("warning".to_string(), w));
            }
        }
        if let Some(r) = &self.region {
            out.push(("region".to_string(), r.clone()));
        }
        out
    }

    /// Prints the skip-verify warning on stderr (once per run).
    pub fn warn(&self) {
        if let Some(w) = self.target.tls.as_ref().and_then(|t| t.warning()) {
            eprintln!("warning: {w}");
        }
    }

    /// The flags that reach this API again, for rerun lines (never the token: the rerun line
    /// says `--token "$NOMAD_TOKEN"` where one was used).
    pub fn rerun_flags(&self) -> Vec<String> {
        let q = crate::shell::quote;
        let mut out = vec!["--nomad-addr".to_string(), q(&self.addr)];
        let mut flag = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                out.push(name.to_string());
                out.push(q(&v));
            }
        };
        flag("--namespace", self.namespace.clone());
        flag("--region", self.region.clone());
        if let Some(tls) = &self.target.tls {
            let t = &tls.settings;
            let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
            flag("--ca-cert", path(&t.ca_cert));
            flag("--ca-path", path(&t.ca_path));
            flag("--client-cert", path(&t.client_cert));
            flag("--client-key", path(&t.client_key));
            flag("--tls-server-name", t.server_name.clone());
            if t.skip_verify {
                out.push("--tls-skip-verify".into());
            }
        }
        if self.token.is_some() {
            out.push("--token \"$NOMAD_TOKEN\"".into());
        }
        out
    }

    /// curl flags that repeat this connection's TLS (empty for plain HTTP).
    pub fn curl_flags(&self) -> Vec<String> {
        self.target
            .tls
            .as_ref()
            .map(|t| t.curl_flags())
            .unwrap_or_default()
    }
}

fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.trim().is_empty())
}

/// Go's strconv.ParseBool, which the nomad CLI reads NOMAD_SKIP_VERIFY with.
fn go_bool(name: &str, v: &str) -> Result<bool, HarnessError> {
    match v.trim() {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(HarnessError::Usage(format!(
            "{name}={other:?} is not a boolean (true, false, 1, 0, t, f)"
        ))),
    }
}

/// The settings of `args`, with the nomad CLI's variables read through `env`. `Ok(None)`:
/// no address (only with [`AddrFallback::Flag`]); then no other API setting may be given.
pub fn resolve(
    args: &NomadApiArgs,
    fallback: AddrFallback,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ApiSettings>, HarnessError> {
    let env = |name: &str| nonempty(env(name));
    let explicit: Vec<&str> = [
        ("--ca-cert", args.ca_cert.is_some()),
        ("--ca-path", args.ca_path.is_some()),
        ("--client-cert", args.client_cert.is_some()),
        ("--client-key", args.client_key.is_some()),
        ("--tls-server-name", args.tls_server_name.is_some()),
        ("--tls-skip-verify", args.tls_skip_verify),
        ("--region", args.region.is_some()),
        ("--namespace", args.namespace.is_some()),
        ("--token", args.token.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, given)| given.then_some(flag))
    .collect();
    let addr = match (nonempty(args.nomad_addr.clone()), fallback) {
        (Some(a), _) => a,
        (None, AddrFallback::NomadCli) => env("NOMAD_ADDR").unwrap_or_else(|| DEFAULT_ADDR.into()),
        (None, AddrFallback::Flag) => {
            if let Some(flag) = explicit.first() {
                return Err(HarnessError::Usage(format!(
                    "{flag} goes with --nomad-addr: without it the run uses the reference Variables server"
                )));
            }
            return Ok(None);
        }
    };
    let address =
        Address::parse(&addr).map_err(|e| HarnessError::Usage(format!("--nomad-addr {e}")))?;
    let path = |given: &Option<std::path::PathBuf>, var: &str| {
        given.clone().or_else(|| env(var).map(Into::into))
    };
    // The CA is one setting given two ways: ours (file or directory) beat both of the nomad
    // CLI's, so that --ca-path is not overruled by a NOMAD_CACERT.
    let ours = args.ca_cert.is_some() || args.ca_path.is_some();
    let tls = TlsSettings {
        ca_cert: if ours {
            args.ca_cert.clone()
        } else {
            path(&None, "NOMAD_CACERT")
        },
        ca_path: if ours {
            args.ca_path.clone()
        } else {
            path(&None, "NOMAD_CAPATH")
        },
        client_cert: path(&args.client_cert, "NOMAD_CLIENT_CERT"),
        client_key: path(&args.client_key, "NOMAD_CLIENT_KEY"),
        server_name: args
            .tls_server_name
            .clone()
            .or_else(|| env("NOMAD_TLS_SERVER_NAME")),
        skip_verify: args.tls_skip_verify
            || match env("NOMAD_SKIP_VERIFY") {
                Some(v) => go_bool("NOMAD_SKIP_VERIFY", &v)?,
                None => false,
            },
    };
    let tls = if address.https {
        Some(tls.client(&address.host).map_err(HarnessError::Usage)?)
    } else {
        // The nomad CLI ignores TLS settings for http:// and unix:// addresses; so do we for
        // its variables, but a TLS flag given to us with a plain address is a mistake.
        if let Some(flag) = explicit
            .iter()
            .find(|f| !matches!(**f, "--region" | "--namespace" | "--token"))
        {
            return Err(HarnessError::Usage(format!(
                "{flag} is for an https:// address, and --nomad-addr {addr} is plain"
            )));
        }
        None
    };
    let token = nonempty(args.token.clone()).or_else(|| env("NOMAD_TOKEN"));
    if let Some(t) = &token {
        crate::secrets::register(t);
    }
    let target = Target {
        upstream: address.upstream.clone(),
        tls,
        base: address.base(),
    };
    Ok(Some(ApiSettings {
        addr,
        address,
        target,
        token,
        namespace: nonempty(args.namespace.clone()).or_else(|| env("NOMAD_NAMESPACE")),
        region: nonempty(args.region.clone()).or_else(|| env("NOMAD_REGION")),
    }))
}

/// [`resolve`] with the process's environment.
pub fn from_env(
    args: &NomadApiArgs,
    fallback: AddrFallback,
) -> Result<Option<ApiSettings>, HarnessError> {
    resolve(args, fallback, &|name| std::env::var(name).ok())
}

/// [`from_env`] for the commands that always talk to an agent (`fleet collect`, `fleet
/// csi-node`): `NOMAD_ADDR`, then the nomad CLI's default, when `--nomad-addr` is not given.
pub fn nomad_cli_from_env(args: &NomadApiArgs) -> Result<ApiSettings, HarnessError> {
    from_env(args, AddrFallback::NomadCli)?
        .ok_or_else(|| HarnessError::Internal("no Nomad API address, not even the default".into()))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn with(
        args: &NomadApiArgs,
        fallback: AddrFallback,
        vars: &[(&str, &str)],
    ) -> Result<Option<ApiSettings>, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        resolve(args, fallback, &|n| vars.get(n).cloned()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_nomad_cli_variables_come_after_ours() {
        let args = NomadApiArgs::default();
        let s = with(&args, AddrFallback::NomadCli, &[]).unwrap().unwrap();
        assert_eq!(s.addr, DEFAULT_ADDR);
        assert!(s.token.is_none() && s.namespace.is_none() && s.region.is_none());
        let vars = [
            ("NOMAD_ADDR", "http://nomad.example:4646"),
            ("NOMAD_TOKEN", "tok-from-nomad-env"),
            ("NOMAD_NAMESPACE", "prod"),
            ("NOMAD_REGION", "eu"),
        ];
        let s = with(&args, AddrFallback::NomadCli, &vars).unwrap().unwrap();
        assert_eq!(s.addr, "http://nomad.example:4646");
        assert_eq!(s.token.as_deref(), Some("tok-from-nomad-env"));
        // Debug output (a panic message, a log line) never carries the token.
        assert!(!format!("{s:?}").contains("tok-from-nomad-env"), "{s:?}");
        let api = super::super::NomadApi::new(&s, "default", std::time::Duration::from_secs(1));
        assert!(
            !format!("{api:?}").contains("tok-from-nomad-env"),
            "{api:?}"
        );
        assert_eq!(s.namespace.as_deref(), Some("prod"));
        assert_eq!(s.region.as_deref(), Some("eu"));
        // Ours win, setting by setting.
        let ours = NomadApiArgs {
            nomad_addr: Some("http://10.1.1.1:4646".into()),
            region: Some("us".into()),
            ..NomadApiArgs::default()
        };
        let s = with(&ours, AddrFallback::NomadCli, &vars).unwrap().unwrap();
        assert_eq!(s.addr, "http://10.1.1.1:4646");
        assert_eq!(s.region.as_deref(), Some("us"));
        assert_eq!(s.namespace.as_deref(), Some("prod"));
        // Empty is unset, as for the nomad CLI.
        let s = with(
            &args,
            AddrFallback::NomadCli,
            &[("NOMAD_ADDR", ""), ("NOMAD_TOKEN", " ")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.addr, DEFAULT_ADDR);
        assert!(s.token.is_none());
    }

    #[test]
    fn lock_and_variables_need_the_flag() {
        let args = NomadApiArgs::default();
        // A shell's NOMAD_ADDR never points the suites that write at a cluster.
        assert!(
            with(
                &args,
                AddrFallback::Flag,
                &[("NOMAD_ADDR", "https://prod:4646"), ("NOMAD_CACERT", "/x")]
            )
            .unwrap()
            .is_none()
        );
        let tls_without_addr = NomadApiArgs {
            ca_cert: Some("/ca.pem".into()),
            ..NomadApiArgs::default()
        };
        let e = with(&tls_without_addr, AddrFallback::Flag, &[]).unwrap_err();
        assert!(e.starts_with("--ca-cert goes with --nomad-addr"), "{e}");
        // A token too: without --nomad-addr it would be silently ignored.
        let token_without_addr = NomadApiArgs {
            token: Some("s3cret".into()),
            ..NomadApiArgs::default()
        };
        let e = with(&token_without_addr, AddrFallback::Flag, &[]).unwrap_err();
        assert!(e.starts_with("--token goes with --nomad-addr"), "{e}");
    }

    #[test]
    fn tls_settings_and_plain_addresses() {
        // The nomad CLI's TLS variables are ignored for a plain address; our flags are refused.
        let plain = NomadApiArgs {
            nomad_addr: Some("http://127.0.0.1:4646".into()),
            ..NomadApiArgs::default()
        };
        let s = with(
            &plain,
            AddrFallback::Flag,
            &[("NOMAD_CACERT", "/nonexistent.pem")],
        )
        .unwrap()
        .unwrap();
        assert!(s.target.tls.is_none());
        let e = with(
            &NomadApiArgs {
                tls_skip_verify: true,
                ..plain.clone()
            },
            AddrFallback::Flag,
            &[],
        )
        .unwrap_err();
        assert!(
            e.contains("--tls-skip-verify is for an https:// address"),
            "{e}"
        );
        // https: the files are read before anything runs (a usage error names the file).
        let https = NomadApiArgs {
            nomad_addr: Some("https://127.0.0.1:4646".into()),
            ..NomadApiArgs::default()
        };
        let e = with(
            &https,
            AddrFallback::Flag,
            &[("NOMAD_CACERT", "/nonexistent/ca.pem")],
        )
        .unwrap_err();
        assert!(e.starts_with("--ca-cert /nonexistent/ca.pem: "), "{e}");
        let e = with(
            &https,
            AddrFallback::Flag,
            &[("NOMAD_SKIP_VERIFY", "maybe")],
        )
        .unwrap_err();
        assert!(
            e.contains("NOMAD_SKIP_VERIFY=\"maybe\" is not a boolean"),
            "{e}"
        );
        let s = with(&https, AddrFallback::Flag, &[("NOMAD_SKIP_VERIFY", "1")])
            .unwrap()
            .unwrap();
        let tls = s.target.tls.as_ref().unwrap();
        assert!(tls.skips_verification());
        assert!(
            s.details()
                .iter()
                .any(|(k, v)| k == "warning" && v.contains("verification is off"))
        );
        assert_eq!(s.curl_flags(), ["-k"]);
        // Our CA directory beats the nomad CLI's CA file.
        let dir = tempfile::tempdir().unwrap();
        let with_dir = NomadApiArgs {
            ca_path: Some(dir.path().to_path_buf()),
            ..https.clone()
        };
        let e = with(
            &with_dir,
            AddrFallback::Flag,
            &[("NOMAD_CACERT", "/nonexistent/ca.pem")],
        )
        .unwrap_err();
        assert!(e.starts_with("--ca-path "), "{e}");
        let e = with(
            &NomadApiArgs {
                nomad_addr: Some("ftp://x".into()),
                ..NomadApiArgs::default()
            },
            AddrFallback::Flag,
            &[],
        )
        .unwrap_err();
        assert!(e.starts_with("--nomad-addr \"ftp://x\": expected"), "{e}");
    }
}
