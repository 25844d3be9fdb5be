//! The handshake line a go-plugin server prints as its first stdout line (A.3):
//! `CORE|APP|NETWORK|ADDR|PROTOCOL|SERVERCERT[|MUXSUPPORTED]`.
//!
//! [`Handshake::parse`] keeps every field raw, types what the host reads, and lists every rule
//! the go-plugin host (as Nomad configures it) would reject the line for. Nothing is enforced
//! here: steps judge each rule separately. Parsing never panics and does no I/O; TCP host
//! names are looked up by [`Handshake::resolve_names`].
//!
//! Host-side rules (go-plugin `client.go` `Start`, with Nomad's config: AllowedProtocols grpc,
//! versions {2}, no AutoMTLS, no broker multiplexing):
//! * the line is trimmed of surrounding whitespace and split on every `|`; fewer than 4 fields
//!   is "Unrecognized remote plugin message";
//! * field 1 must parse as a Go `strconv.Atoi` integer equal to 1;
//! * field 2 must parse the same way and be one of the versions offered in
//!   `PLUGIN_PROTOCOL_VERSIONS`;
//! * field 3 must be `unix` or `tcp`; field 4 is resolved with `ResolveUnixAddr` (accepts any
//!   string) or `ResolveTCPAddr`;
//! * field 5 is the protocol, `netrpc` when absent; Nomad allows only `grpc`;
//! * field 6 is ignored unless longer than 50 characters, when the host tries to load it as
//!   the server's certificate (which a host without AutoMTLS never asked for);
//! * field 7 (mux support) is read only by hosts that enable broker multiplexing; Nomad does
//!   not, so it is kept and parsed but never a violation.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

use super::golang::{go_atoi, go_parse_bool, resolve_tcp_literal};
use super::protocol::CORE_PROTOCOL_VERSION;

/// Where the plugin listens, as the host would dial it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum PluginAddress {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl std::fmt::Display for PluginAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginAddress::Unix(p) => write!(f, "unix:{}", p.display()),
            PluginAddress::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// One rule of the host's handshake check that the line breaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Violation {
    #[error("the line has {found} |-separated field(s); the host needs at least 4")]
    TooFewFields { found: usize },
    #[error("core protocol field {field:?} is not an integer")]
    CoreNotAnInteger { field: String },
    #[error("core protocol version is {found}; the host requires {CORE_PROTOCOL_VERSION}")]
    CoreVersion { found: i64 },
    #[error("app protocol field {field:?} is not an integer")]
    AppNotAnInteger { field: String },
    #[error("app protocol version {found} was not offered (the host offered {offered:?})")]
    AppVersionNotOffered { found: i64, offered: Vec<i64> },
    #[error("network {network:?} is neither unix nor tcp")]
    UnknownNetwork { network: String },
    #[error("address {address:?} does not resolve as a {network} address: {reason}")]
    AddressDoesNotResolve {
        network: String,
        address: String,
        reason: String,
    },
    #[error("protocol is {protocol:?}{}; Nomad allows only grpc", if *announced { "" } else { " (field absent, so the host assumes netrpc)" })]
    ProtocolNotGrpc { protocol: String, announced: bool },
    #[error(
        "field 6 holds {length} characters, so the host tries to load it as the server's \
         certificate, though it never asked for mTLS (Nomad leaves AutoMTLS off)"
    )]
    ServerCertAnnounced { length: usize },
}

impl Violation {
    /// A stable name for the rule (`too_few_fields`, `core_version`, ...), as serialised.
    pub fn rule(&self) -> &'static str {
        match self {
            Violation::TooFewFields { .. } => "too_few_fields",
            Violation::CoreNotAnInteger { .. } => "core_not_an_integer",
            Violation::CoreVersion { .. } => "core_version",
            Violation::AppNotAnInteger { .. } => "app_not_an_integer",
            Violation::AppVersionNotOffered { .. } => "app_version_not_offered",
            Violation::UnknownNetwork { .. } => "unknown_network",
            Violation::AddressDoesNotResolve { .. } => "address_does_not_resolve",
            Violation::ProtocolNotGrpc { .. } => "protocol_not_grpc",
            Violation::ServerCertAnnounced { .. } => "server_cert_announced",
        }
    }
}

/// A parsed handshake line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Handshake {
    /// The first stdout line as read, without its line ending.
    pub line: String,
    /// The trimmed line split on every `|`.
    pub fields: Vec<String>,
    /// Field 1 as an integer.
    pub core: Option<i64>,
    /// Field 2 as an integer.
    pub app: Option<i64>,
    /// Field 3, raw.
    pub network: Option<String>,
    /// Field 4, raw.
    pub addr: Option<String>,
    /// Field 5, or `netrpc` when absent (the host's default).
    pub protocol: String,
    /// Whether field 5 was present.
    pub protocol_announced: bool,
    /// Field 6, raw (Go plugins print it empty without AutoMTLS).
    pub server_cert: Option<String>,
    /// Field 7, raw.
    pub mux: Option<String>,
    /// Field 7 as Go's `strconv.ParseBool` reads it.
    pub mux_supported: Option<bool>,
    /// The address the host would dial, when it resolved.
    pub address: Option<PluginAddress>,
    /// A TCP host name still to be looked up (see [`Handshake::resolve_names`]).
    pub pending_lookup: Option<String>,
    /// The versions the host offered, for the record.
    pub offered: Vec<i64>,
    /// Every rule the line breaks, in the order the host checks them.
    pub violations: Vec<Violation>,
}

impl Handshake {
    /// Parse `line` as a host that offered app protocol versions `offered` would.
    pub fn parse(line: &str, offered: &[i64]) -> Handshake {
        let trimmed = line.trim();
        let fields: Vec<String> = trimmed.split('|').map(str::to_owned).collect();
        let field = |i: usize| fields.get(i).cloned();
        let mut violations = Vec::new();
        if fields.len() < 4 {
            violations.push(Violation::TooFewFields {
                found: fields.len(),
            });
        }

        let core = field(0).and_then(|f| go_atoi(&f));
        match (field(0), core) {
            (Some(f), None) => violations.push(Violation::CoreNotAnInteger { field: f }),
            (_, Some(c)) if c != CORE_PROTOCOL_VERSION => {
                violations.push(Violation::CoreVersion { found: c })
            }
            _ => {}
        }
        let app = field(1).and_then(|f| go_atoi(&f));
        match (field(1), app) {
            (Some(f), None) => violations.push(Violation::AppNotAnInteger { field: f }),
            (_, Some(a)) if !offered.contains(&a) => {
                violations.push(Violation::AppVersionNotOffered {
                    found: a,
                    offered: offered.to_vec(),
                })
            }
            _ => {}
        }

        let network = field(2);
        let addr = field(3);
        let mut address = None;
        let mut pending_lookup = None;
        if let (Some(net), Some(a)) = (&network, &addr) {
            match net.as_str() {
                "unix" => address = Some(PluginAddress::Unix(PathBuf::from(a))),
                "tcp" => match resolve_tcp_literal(a) {
                    Ok(Some(sa)) => address = Some(PluginAddress::Tcp(sa)),
                    Ok(None) => pending_lookup = Some(a.clone()),
                    Err(reason) => violations.push(Violation::AddressDoesNotResolve {
                        network: net.clone(),
                        address: a.clone(),
                        reason,
                    }),
                },
                _ => violations.push(Violation::UnknownNetwork {
                    network: net.clone(),
                }),
            }
        }

        let protocol_announced = fields.len() >= 5;
        let protocol = field(4).unwrap_or_else(|| "netrpc".to_owned());
        if fields.len() >= 4 && protocol != "grpc" {
            violations.push(Violation::ProtocolNotGrpc {
                protocol: protocol.clone(),
                announced: protocol_announced,
            });
        }
        let server_cert = field(5);
        if let Some(cert) = &server_cert
            && cert.len() > 50
        {
            violations.push(Violation::ServerCertAnnounced { length: cert.len() });
        }
        let mux = field(6);
        let mux_supported = mux.as_deref().and_then(go_parse_bool);

        Handshake {
            line: line.to_owned(),
            fields,
            core,
            app,
            network,
            addr,
            protocol,
            protocol_announced,
            server_cert,
            mux,
            mux_supported,
            address,
            pending_lookup,
            offered: offered.to_vec(),
            violations,
        }
    }

    /// Whether the host would get past the field count (4 or more fields): a line with fewer
    /// is "not a handshake" and the host gives up on the plugin.
    pub fn recognized(&self) -> bool {
        self.fields.len() >= 4
    }

    /// Whether the host would accept the line (no violation, an address to dial).
    pub fn acceptable(&self) -> bool {
        self.violations.is_empty() && self.address.is_some()
    }

    /// Look up a TCP host name (as `ResolveTCPAddr` does, preferring IPv4), within `within`.
    /// A name that does not resolve adds [`Violation::AddressDoesNotResolve`].
    pub async fn resolve_names(&mut self, within: std::time::Duration) {
        let Some(a) = self.pending_lookup.take() else {
            return;
        };
        let looked = tokio::time::timeout(within, tokio::net::lookup_host(a.clone())).await;
        let reason = match looked {
            Ok(Ok(addrs)) => {
                let all: Vec<SocketAddr> = addrs.collect();
                match all.iter().find(|s| s.is_ipv4()).or(all.first()) {
                    Some(sa) => {
                        self.address = Some(PluginAddress::Tcp(*sa));
                        return;
                    }
                    None => "no addresses".to_owned(),
                }
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "the lookup did not finish in time".to_owned(),
        };
        self.violations.push(Violation::AddressDoesNotResolve {
            network: "tcp".into(),
            address: a,
            reason,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(h: &Handshake) -> Vec<&'static str> {
        h.violations.iter().map(Violation::rule).collect()
    }

    #[test]
    fn table() {
        // (line, violated rules, address)
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            (
                "1|2|unix|/tmp/plugin1|grpc|",
                &[],
                Some("unix:/tmp/plugin1"),
            ),
            ("1|2|unix|/tmp/p|grpc|\r\n", &[], Some("unix:/tmp/p")),
            ("  1|2|unix|/tmp/p|grpc|  ", &[], Some("unix:/tmp/p")),
            ("1|2|unix|/tmp/p|grpc", &[], Some("unix:/tmp/p")),
            ("1|2|unix|/tmp/p|grpc||true", &[], Some("unix:/tmp/p")),
            (
                "1|2|tcp|127.0.0.1:10000|grpc|",
                &[],
                Some("tcp:127.0.0.1:10000"),
            ),
            ("1|2|tcp|:10000|grpc|", &[], Some("tcp:127.0.0.1:10000")),
            ("1|2|tcp|[::1]:1|grpc|", &[], Some("tcp:[::1]:1")),
            ("+1|02|unix|/p|grpc|", &[], Some("unix:/p")),
            ("1|2|unix|/p", &["protocol_not_grpc"], Some("unix:/p")),
            (
                "1|2|unix|/p|netrpc|",
                &["protocol_not_grpc"],
                Some("unix:/p"),
            ),
            ("2|2|unix|/p|grpc|", &["core_version"], Some("unix:/p")),
            (
                "x|2|unix|/p|grpc|",
                &["core_not_an_integer"],
                Some("unix:/p"),
            ),
            (
                "1|3|unix|/p|grpc|",
                &["app_version_not_offered"],
                Some("unix:/p"),
            ),
            (
                "1| 2|unix|/p|grpc|",
                &["app_not_an_integer"],
                Some("unix:/p"),
            ),
            ("1|2|udp|/p|grpc|", &["unknown_network"], None),
            (
                "1|2|tcp|127.0.0.1|grpc|",
                &["address_does_not_resolve"],
                None,
            ),
            (
                "1|2|tcp|1.2.3.4:http|grpc|",
                &["address_does_not_resolve"],
                None,
            ),
            (
                "1|2|tcp|1.2.3.4:70000|grpc|",
                &["address_does_not_resolve"],
                None,
            ),
            (
                "hello world",
                &["too_few_fields", "core_not_an_integer"],
                None,
            ),
            ("", &["too_few_fields", "core_not_an_integer"], None),
            ("1|2|unix", &["too_few_fields"], None),
        ];
        for (line, want, addr) in cases {
            let h = Handshake::parse(line, &[2]);
            assert_eq!(rules(&h), *want, "{line:?}");
            assert_eq!(
                h.address.as_ref().map(|a| a.to_string()).as_deref(),
                *addr,
                "{line:?}"
            );
        }
    }

    #[test]
    fn typed_fields() {
        let h = Handshake::parse("1|2|unix|/tmp/p|grpc||true\n", &[2]);
        assert_eq!(h.line, "1|2|unix|/tmp/p|grpc||true\n");
        assert_eq!((h.core, h.app), (Some(1), Some(2)));
        assert_eq!(h.server_cert.as_deref(), Some(""));
        assert_eq!(h.mux_supported, Some(true));
        assert!(h.protocol_announced && h.acceptable());
        let h = Handshake::parse("1|2|unix|/p", &[2]);
        assert_eq!(h.protocol, "netrpc");
        assert!(!h.protocol_announced && !h.acceptable() && h.recognized());
        let cert = "A".repeat(51);
        let h = Handshake::parse(&format!("1|2|unix|/p|grpc|{cert}"), &[2]);
        assert_eq!(rules(&h), ["server_cert_announced"]);
        let h = Handshake::parse(&format!("1|2|unix|/p|grpc|{}", &cert[..50]), &[2]);
        assert!(h.violations.is_empty());
        let h = Handshake::parse("1|2|tcp|localhost:1|grpc|", &[2]);
        assert_eq!(h.pending_lookup.as_deref(), Some("localhost:1"));
    }

    #[tokio::test]
    async fn host_names_are_looked_up() {
        let mut h = Handshake::parse("1|2|tcp|localhost:1234|grpc|", &[2]);
        h.resolve_names(std::time::Duration::from_secs(5)).await;
        assert!(
            matches!(h.address, Some(PluginAddress::Tcp(a)) if a.port() == 1234),
            "{h:?}"
        );
        let mut h = Handshake::parse("1|2|tcp|no-such-host.invalid:1|grpc|", &[2]);
        h.resolve_names(std::time::Duration::from_secs(5)).await;
        assert_eq!(rules(&h), ["address_does_not_resolve"]);
    }

    proptest! {
        #[test]
        fn never_panics_on_any_string(line in any::<String>(), offered in proptest::collection::vec(any::<i64>(), 0..3)) {
            let h = Handshake::parse(&line, &offered);
            prop_assert_eq!(h.fields.join("|"), line.trim());
            prop_assert_eq!(h.recognized(), !h.violations.contains(&Violation::TooFewFields { found: h.fields.len() }));
        }

        #[test]
        fn well_formed_lines_are_accepted(path in "/[a-z0-9/._-]{1,60}", app in 0i64..5) {
            let h = Handshake::parse(&format!("1|{app}|unix|{path}|grpc|\n"), &[2]);
            prop_assert_eq!(h.acceptable(), app == 2);
            prop_assert_eq!(h.address, Some(PluginAddress::Unix(PathBuf::from(&path))));
        }

        #[test]
        fn structured_garbage_never_panics(
            fields in proptest::collection::vec("[0-9a-z:.\\[\\]+ -]{0,12}", 0..9),
            net in prop_oneof![Just("unix"), Just("tcp"), Just("udp")],
        ) {
            let mut f = fields.clone();
            if f.len() > 2 { f[2] = net.to_owned(); }
            let line = f.join("|");
            let h = Handshake::parse(&line, &[2]);
            prop_assert!(!h.fields.is_empty());
            prop_assert_eq!(h.acceptable(), h.violations.is_empty() && h.address.is_some());
        }
    }
}
