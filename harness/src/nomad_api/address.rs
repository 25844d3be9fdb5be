//! Where the Nomad HTTP API is: `http://`, `https://` or `unix://`, as the nomad CLI's
//! `-address` and `NOMAD_ADDR` take it.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

/// Nomad's HTTP port, for an address that names none (the nomad CLI's default too).
pub const NOMAD_PORT: u16 = 4646;

/// Where a connection goes (the transport under HTTP, or under TLS for `https://`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "addr", rename_all = "kebab-case")]
pub enum Upstream {
    Tcp(SocketAddr),
    Unix(PathBuf),
    /// A host name and port (`nomad.example:4646`), resolved at each connection.
    Http {
        authority: String,
    },
}

impl Upstream {
    /// The reference Variables server's address.
    pub fn of_server(server: &nomad_conform_variables::ServerHandle) -> Upstream {
        match (server.addr(), server.socket_path()) {
            (Some(addr), _) => Upstream::Tcp(addr),
            (None, Some(path)) => Upstream::Unix(path.to_path_buf()),
            (None, None) => Upstream::Http {
                authority: server
                    .nomad_addr()
                    .trim_start_matches("http://")
                    .to_string(),
            },
        }
    }

    /// The `Host` header of a request sent there.
    pub fn host_header(&self) -> String {
        match self {
            Upstream::Tcp(addr) => addr.to_string(),
            Upstream::Unix(_) => "localhost".to_string(),
            Upstream::Http { authority } => authority.clone(),
        }
    }
}

/// A parsed API address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub upstream: Upstream,
    /// `https://`: TLS over the connection.
    pub https: bool,
    /// The host as written (without brackets for IPv6), the TLS server name by default.
    pub host: String,
}

impl Address {
    /// `http://host[:port]`, `https://host[:port]` (a path or trailing slash is ignored; port
    /// 4646 when none is given) or `unix:///absolute/path`.
    pub fn parse(addr: &str) -> Result<Address, String> {
        let addr = addr.trim();
        let bad = |why: &str| format!("{addr:?}: {why}");
        if let Some(path) = addr.strip_prefix("unix://") {
            if !path.starts_with('/') {
                return Err(bad("a unix socket path must be absolute (unix:///path)"));
            }
            return Ok(Address {
                upstream: Upstream::Unix(PathBuf::from(path)),
                https: false,
                host: "localhost".into(),
            });
        }
        let (https, rest) = if let Some(r) = addr.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = addr.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(bad(
                "expected http://HOST:PORT, https://HOST:PORT or unix:///PATH",
            ));
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.is_empty() || authority.contains('@') {
            return Err(bad(if https {
                "expected https://HOST:PORT"
            } else {
                "expected http://HOST:PORT"
            }));
        }
        let authority = if has_port(authority) {
            authority.to_string()
        } else {
            format!("{authority}:{NOMAD_PORT}")
        };
        let host = match authority.rsplit_once(':') {
            Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
            None => authority.clone(),
        };
        if host.is_empty() {
            return Err(bad("the address names no host"));
        }
        let upstream = match authority.parse::<SocketAddr>() {
            Ok(sa) => Upstream::Tcp(sa),
            Err(_) => Upstream::Http { authority },
        };
        Ok(Address {
            upstream,
            https,
            host,
        })
    }

    /// `http://…`, `https://…` or `unix://…`, as a reproduce command writes it.
    pub fn base(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        match &self.upstream {
            Upstream::Tcp(a) => format!("{scheme}://{a}"),
            Upstream::Http { authority } => format!("{scheme}://{authority}"),
            Upstream::Unix(p) => format!("unix://{}", p.display()),
        }
    }
}

fn has_port(authority: &str) -> bool {
    match authority.rsplit_once(':') {
        Some((host, port)) => {
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!host.contains(':') || host.ends_with(']'))
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse() {
        let a = Address::parse("http://127.0.0.1:4646").unwrap();
        assert_eq!(a.upstream, Upstream::Tcp("127.0.0.1:4646".parse().unwrap()));
        assert!(!a.https);
        let a = Address::parse("https://nomad.service:4646/").unwrap();
        assert_eq!(
            a.upstream,
            Upstream::Http {
                authority: "nomad.service:4646".into()
            }
        );
        assert!(a.https);
        assert_eq!(a.host, "nomad.service");
        assert_eq!(a.base(), "https://nomad.service:4646");
        let a = Address::parse("http://nomad.service").unwrap();
        assert_eq!(
            a.upstream,
            Upstream::Http {
                authority: "nomad.service:4646".into()
            }
        );
        let a = Address::parse("https://[::1]").unwrap();
        assert_eq!(a.upstream, Upstream::Tcp("[::1]:4646".parse().unwrap()));
        assert_eq!(a.host, "::1");
        let a = Address::parse("unix:///secrets/api.sock").unwrap();
        assert_eq!(a.upstream, Upstream::Unix("/secrets/api.sock".into()));
        assert_eq!(a.base(), "unix:///secrets/api.sock");
        for bad in [
            "ftp://x:4646",
            "unix://rel.sock",
            "http://",
            "x:1",
            "http://u@h:1",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad}");
        }
    }
}
