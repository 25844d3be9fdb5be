//! Where the Nomad API is and who we are, from the environment an allocation gives a task.
//!
//! - `NOMAD_UNIX_ADDR=unix://<secrets>/api.sock`: the Task API socket (contract B.6); when set
//!   it wins over `NOMAD_ADDR`. It needs a token even with ACLs off, so `identity { env = true }`
//!   must expose `NOMAD_TOKEN`.
//! - `NOMAD_ADDR`: `http://host:port` or `unix:///path` (default `http://127.0.0.1:4646`). TLS is
//!   not spoken: use the Task API socket, which is the guide's recommendation anyway.
//! - `NOMAD_TOKEN`: sent as `X-Nomad-Token` when non-empty.
//! - `NOMAD_NAMESPACE`: sent as `?namespace=` (default `default`; `*` is refused for writes).
//!
//! Empty values count as unset, as Nomad's own client treats them.

use std::path::PathBuf;

use thiserror::Error;

/// Default agent address, as Nomad's CLI uses it.
pub const DEFAULT_ADDR: &str = "http://127.0.0.1:4646";

/// How to reach the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// Plain HTTP over TCP.
    Tcp { host: String, port: u16 },
    /// HTTP over a unix socket (agent socket or Task API socket).
    Unix(PathBuf),
}

impl Endpoint {
    /// The `Host` header value.
    pub fn authority(&self) -> String {
        match self {
            Self::Tcp { host, port } if host.contains(':') => format!("[{host}]:{port}"),
            Self::Tcp { host, port } => format!("{host}:{port}"),
            Self::Unix(_) => "localhost".to_string(),
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Tcp { .. } => write!(f, "http://{}", self.authority()),
            Self::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

/// What the environment says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NomadEnv {
    /// Where to send requests.
    pub endpoint: Endpoint,
    /// `X-Nomad-Token`, if any.
    pub token: Option<String>,
    /// Namespace of the variable.
    pub namespace: String,
}

/// A setting we cannot use.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EnvError {
    #[error("{var}={value:?} is not usable: {why}")]
    Address {
        var: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("NOMAD_NAMESPACE=* is not allowed: a lock lives in one namespace")]
    WildcardNamespace,
}

impl NomadEnv {
    /// From the process environment.
    pub fn from_process() -> Result<Self, EnvError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// From any lookup (for tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let endpoint = match (get("NOMAD_UNIX_ADDR"), get("NOMAD_ADDR")) {
            (Some(unix), _) => parse_address("NOMAD_UNIX_ADDR", &unix)?,
            (None, Some(addr)) => parse_address("NOMAD_ADDR", &addr)?,
            (None, None) => parse_address("NOMAD_ADDR", DEFAULT_ADDR)?,
        };
        let namespace = get("NOMAD_NAMESPACE").unwrap_or_else(|| "default".to_string());
        if namespace == "*" {
            return Err(EnvError::WildcardNamespace);
        }
        Ok(Self {
            endpoint,
            token: get("NOMAD_TOKEN"),
            namespace,
        })
    }
}

fn parse_address(var: &'static str, value: &str) -> Result<Endpoint, EnvError> {
    let bad = |why| EnvError::Address {
        var,
        value: value.to_string(),
        why,
    };
    if let Some(path) = value.strip_prefix("unix://") {
        if path.is_empty() {
            return Err(bad("the socket path is empty"));
        }
        return Ok(Endpoint::Unix(PathBuf::from(path)));
    }
    if var == "NOMAD_UNIX_ADDR" {
        return Err(bad("expected unix://<path of the Task API socket>"));
    }
    let with_scheme = if value.contains("://") {
        value.to_string()
    } else {
        format!("http://{value}")
    };
    let url = url::Url::parse(&with_scheme).map_err(|_| bad("not a URL"))?;
    match url.scheme() {
        "http" => {}
        "https" => {
            return Err(bad(
                "TLS is not supported; use plain http or the Task API socket (NOMAD_UNIX_ADDR)",
            ));
        }
        _ => return Err(bad("expected http://host:port or unix:///path")),
    }
    let host = url
        .host_str()
        .ok_or_else(|| bad("no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    Ok(Endpoint::Tcp { host, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<NomadEnv, EnvError> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        NomadEnv::from_lookup(|name| {
            owned
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn defaults() {
        let got = env(&[]).unwrap();
        assert_eq!(
            got.endpoint,
            Endpoint::Tcp {
                host: "127.0.0.1".into(),
                port: 4646
            }
        );
        assert_eq!(got.namespace, "default");
        assert_eq!(got.token, None);
    }

    #[test]
    fn task_api_socket_wins_over_nomad_addr() {
        let got = env(&[
            ("NOMAD_ADDR", "http://10.0.0.1:4646"),
            ("NOMAD_UNIX_ADDR", "unix:///secrets/api.sock"),
            ("NOMAD_TOKEN", "s3cret"),
            ("NOMAD_NAMESPACE", "prod"),
        ])
        .unwrap();
        assert_eq!(got.endpoint, Endpoint::Unix("/secrets/api.sock".into()));
        assert_eq!(got.endpoint.to_string(), "unix:///secrets/api.sock");
        assert_eq!(got.token.as_deref(), Some("s3cret"));
        assert_eq!(got.namespace, "prod");
    }

    #[test]
    fn address_forms() {
        let table: [(&str, Option<Endpoint>); 7] = [
            (
                "http://127.0.0.1:8080",
                Some(Endpoint::Tcp {
                    host: "127.0.0.1".into(),
                    port: 8080,
                }),
            ),
            (
                "localhost:4646",
                Some(Endpoint::Tcp {
                    host: "localhost".into(),
                    port: 4646,
                }),
            ),
            (
                "http://[::1]:4646",
                Some(Endpoint::Tcp {
                    host: "::1".into(),
                    port: 4646,
                }),
            ),
            (
                "unix:///run/nomad.sock",
                Some(Endpoint::Unix("/run/nomad.sock".into())),
            ),
            ("https://nomad:4646", None),
            ("unix://", None),
            ("ftp://x", None),
        ];
        for (value, expected) in table {
            let got = env(&[("NOMAD_ADDR", value)]).map(|e| e.endpoint).ok();
            assert_eq!(got, expected, "{value}");
        }
        assert_eq!(
            Endpoint::Tcp {
                host: "::1".into(),
                port: 1
            }
            .authority(),
            "[::1]:1"
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(
            env(&[("NOMAD_NAMESPACE", "*")]),
            Err(EnvError::WildcardNamespace)
        );
        assert!(env(&[("NOMAD_UNIX_ADDR", "http://x")]).is_err());
        // Empty values count as unset.
        assert_eq!(
            env(&[("NOMAD_UNIX_ADDR", ""), ("NOMAD_TOKEN", "")])
                .unwrap()
                .token,
            None
        );
    }
}
