//! TLS for `https://` addresses: the CA to trust (a PEM file, a directory of them, or the
//! system's store), a client certificate for mutual TLS, the server name to verify, or no
//! verification at all (`--tls-skip-verify`, said in the report); and turning what rustls
//! says about a failed handshake into one sentence that names the cause.
//!
//! The settings mirror the nomad CLI's (api/api.go, TLSConfig): `CACert` beats `CAPath`, a
//! directory is read whole, recursively, and every file in it must hold a certificate
//! (go-rootcerts, LoadCAPath); without either the system's CA store is used (Go's
//! crypto/tls); `TLSServerName` replaces the address's host for verification and SNI.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore,
};

/// What the user gave for TLS (paths only: a key's content is read into rustls, never shown).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// A PEM file of CA certificates, or a directory of them.
    pub ca_cert: Option<PathBuf>,
    /// A directory of PEM CA certificates (used when `ca_cert` is not given).
    pub ca_path: Option<PathBuf>,
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// The name to verify the server's certificate against (and send as SNI).
    pub server_name: Option<String>,
    /// Do not verify the server's certificate.
    pub skip_verify: bool,
}

impl TlsSettings {
    /// True when nothing was set.
    pub fn is_empty(&self) -> bool {
        *self == TlsSettings::default()
    }

    /// The client for a server reached as `host`. `Err` is a usage error (a file that cannot
    /// be read or holds no certificate, a key without a certificate, a bad server name).
    pub fn client(&self, host: &str) -> Result<TlsClient, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let (builder, trust) = if self.skip_verify {
            (
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(NoVerification(provider))),
                "not verified (--tls-skip-verify)".to_string(),
            )
        } else {
            let (roots, trust) = self.roots()?;
            (builder.with_root_certificates(roots), trust)
        };
        let config = match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => {
                let chain = read_certs("--client-cert", cert)?;
                let key = PrivateKeyDer::from_pem_file(key).map_err(|e| match e {
                    rustls::pki_types::pem::Error::Io(io) => {
                        format!("--client-key {}: {io}", key.display())
                    }
                    _ => format!(
                        "--client-key {}: no PEM private key in it (PKCS#8, PKCS#1 or SEC1)",
                        key.display()
                    ),
                })?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    format!("--client-cert {} and --client-key: {e}", cert.display())
                })?
            }
            (Some(_), None) => {
                return Err(
                    "--client-cert needs --client-key (NOMAD_CLIENT_KEY): the key of the certificate"
                        .into(),
                );
            }
            (None, Some(_)) => {
                return Err(
                    "--client-key needs --client-cert (NOMAD_CLIENT_CERT): the certificate of the key"
                        .into(),
                );
            }
            (None, None) => builder.with_no_client_auth(),
        };
        let shown_name = self.server_name.clone().unwrap_or_else(|| host.to_string());
        let server_name = ServerName::try_from(shown_name.clone()).map_err(|_| {
            format!("--tls-server-name {shown_name:?} is not a DNS name or an IP address")
        })?;
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
            shown_name,
            trust,
            client_cert: self.client_cert.clone(),
            settings: self.clone(),
        })
    }

    /// The CA store and how it reads in a sentence.
    fn roots(&self) -> Result<(RootCertStore, String), String> {
        let mut roots = RootCertStore::empty();
        let (flag, path) = match (&self.ca_cert, &self.ca_path) {
            (Some(p), _) => ("--ca-cert", p),
            (None, Some(p)) => ("--ca-path", p),
            (None, None) => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(
                        "https:// needs a CA to trust and the system has none: give the cluster's CA with --ca-cert FILE (or NOMAD_CACERT)"
                            .into(),
                    );
                }
                return Ok((roots, "the system's CA certificates".into()));
            }
        };
        let meta =
            std::fs::metadata(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
        let files = if meta.is_dir() {
            let mut files = Vec::new();
            walk(path, &mut files).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
            files.sort();
            if files.is_empty() {
                return Err(format!(
                    "{flag} {}: the directory holds no file",
                    path.display()
                ));
            }
            files
        } else {
            vec![path.clone()]
        };
        for f in &files {
            for cert in read_certs(flag, f)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("{flag} {}: {e}", f.display()))?;
            }
        }
        Ok((roots, format!("CA {}", path.display())))
    }
}

/// Every file below `dir` (symlinks followed), as go-rootcerts walks a CA path.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if std::fs::metadata(&path)?.is_dir() {
            walk(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// The PEM certificates of `path`; at least one.
fn read_certs(flag: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let shown = path.display();
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| match e {
        rustls::pki_types::pem::Error::Io(io) => format!("{flag} {shown}: {io}"),
        e => format!("{flag} {shown}: not PEM: {e}"),
    })?;
    let certs = iter
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{flag} {shown}: not PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{flag} {shown}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(certs)
}

/// A ready TLS client configuration for one server.
#[derive(Clone)]
pub struct TlsClient {
    pub config: Arc<ClientConfig>,
    pub server_name: ServerName<'static>,
    /// The name verified and sent as SNI.
    pub shown_name: String,
    /// What is trusted, in a few words: `CA /etc/nomad.d/ca.pem`, `not verified (...)`.
    pub trust: String,
    /// The client certificate presented, if any.
    pub client_cert: Option<PathBuf>,
    pub settings: TlsSettings,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("server_name", &self.shown_name)
            .field("trust", &self.trust)
            .field("client_cert", &self.client_cert)
            .finish()
    }
}

impl TlsClient {
    pub fn skips_verification(&self) -> bool {
        self.settings.skip_verify
    }

    /// The run's TLS in one line, for the report's subject: what is trusted, the name, the
    /// client certificate (its path; a key is never shown).
    pub fn describe(&self) -> String {
        let mut s = format!("https, server certificate {}", self.trust);
        if !self.settings.skip_verify {
            s.push_str(&format!(", verified for {:?}", self.shown_name));
        }
        match &self.client_cert {
            Some(c) => s.push_str(&format!(", client certificate {}", c.display())),
            None => s.push_str(", no client certificate"),
        }
        s
    }

    /// The warning a run without verification carries.
    pub fn warning(&self) -> Option<String> {
        self.settings.skip_verify.then(|| {
            "TLS certificate verification is off (--tls-skip-verify / NOMAD_SKIP_VERIFY): anyone on the path to the agent could have answered this run, and read its token"
                .to_string()
        })
    }

    /// curl's flags for the same TLS: `--cacert F`, `--capath D`, `--cert F --key F`, `-k`.
    pub fn curl_flags(&self) -> Vec<String> {
        let q = crate::shell::quote;
        let s = &self.settings;
        let mut out = Vec::new();
        if s.skip_verify {
            out.push("-k".to_string());
        } else if let Some(ca) = &s.ca_cert {
            let flag = if ca.is_dir() { "--capath" } else { "--cacert" };
            out.push(format!("{flag} {}", q(&ca.display().to_string())));
        } else if let Some(ca) = &s.ca_path {
            out.push(format!("--capath {}", q(&ca.display().to_string())));
        }
        if let (Some(c), Some(k)) = (&s.client_cert, &s.client_key) {
            out.push(format!("--cert {}", q(&c.display().to_string())));
            out.push(format!("--key {}", q(&k.display().to_string())));
        }
        out
    }
}

/// `--tls-skip-verify`: every certificate is accepted; the handshake's signatures are still
/// checked (Go's InsecureSkipVerify skips the chain and the name, nothing else).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The rustls error somewhere in `err`'s chain (hyper and tokio-rustls wrap it in io errors).
pub fn rustls_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(r) =
                (inner as &(dyn std::error::Error + 'static)).downcast_ref::<rustls::Error>()
        {
            return Some(r);
        }
        cur = e.source();
    }
    None
}

/// One sentence for a failed TLS exchange with `base`: which of the usual causes it is and
/// what to give. `client_cert` says whether this run presented one.
pub fn explain(err: &rustls::Error, base: &str, client_cert: bool) -> String {
    use rustls::Error as E;
    match err {
        E::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
            "the certificate of {base} is signed by a CA this run does not trust: give the cluster's CA with --ca-cert FILE (or NOMAD_CACERT)"
        ),
        E::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected,
            presented,
        }) => {
            let expected = server_name_text(expected);
            format!(
                "the certificate of {base} is not valid for the name {expected:?} (it names {}): set --tls-server-name (or NOMAD_TLS_SERVER_NAME) to a name it has, such as Nomad's server.<region>.nomad",
                if presented.is_empty() {
                    "nothing".to_string()
                } else {
                    presented.join(", ")
                }
            )
        }
        E::InvalidCertificate(CertificateError::NotValidForName) => format!(
            "the certificate of {base} is not valid for the name this run asked for: set --tls-server-name (or NOMAD_TLS_SERVER_NAME) to a name it has, such as Nomad's server.<region>.nomad"
        ),
        E::InvalidCertificate(other) => {
            format!("the certificate of {base} was refused: {other:?}")
        }
        E::AlertReceived(AlertDescription::CertificateRequired) => missing_client_cert(base),
        E::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateRevoked
            | AlertDescription::AccessDenied
            | AlertDescription::HandshakeFailure),
        ) => {
            if client_cert {
                format!(
                    "{base} refused this run's client certificate (TLS alert {}): it must be signed by the CA the agent trusts for clients (its tls {{ ca_file }})",
                    alert_text(*alert)
                )
            } else {
                missing_client_cert(base)
            }
        }
        E::InvalidMessage(_) => format!(
            "{base} does not speak TLS (its answer to the TLS handshake is not TLS): is it a plain http:// port?"
        ),
        other => format!("TLS with {base} failed: {other}"),
    }
}

fn missing_client_cert(base: &str) -> String {
    format!(
        "{base} requires a client certificate (mutual TLS) and this run gave none: give --client-cert FILE and --client-key FILE (or NOMAD_CLIENT_CERT and NOMAD_CLIENT_KEY)"
    )
}

fn alert_text(a: AlertDescription) -> String {
    let debug = format!("{a:?}");
    // BadCertificate -> bad_certificate, as RFC 8446 names alerts.
    let mut out = String::new();
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

fn server_name_text(n: &ServerName<'_>) -> String {
    match n {
        ServerName::DnsName(d) => d.as_ref().to_string(),
        ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_read_as_one_sentence_each() {
        let base = "https://127.0.0.1:1";
        let unknown = explain(
            &rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
            base,
            false,
        );
        assert!(
            unknown.contains("does not trust") && unknown.contains("--ca-cert"),
            "{unknown}"
        );
        let name = explain(
            &rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("nomad.example").unwrap(),
                presented: vec!["DnsName(\"server.global.nomad\")".into()],
            }),
            base,
            false,
        );
        assert!(
            name.contains("\"nomad.example\"") && name.contains("--tls-server-name"),
            "{name}"
        );
        let missing = explain(
            &rustls::Error::AlertReceived(AlertDescription::CertificateRequired),
            base,
            false,
        );
        assert!(
            missing.contains("requires a client certificate"),
            "{missing}"
        );
        let refused = explain(
            &rustls::Error::AlertReceived(AlertDescription::BadCertificate),
            base,
            true,
        );
        assert!(
            refused.contains("refused this run's client certificate (TLS alert bad_certificate)"),
            "{refused}"
        );
        // The same alert without a certificate of ours: one is missing.
        assert!(
            explain(
                &rustls::Error::AlertReceived(AlertDescription::BadCertificate),
                base,
                false
            )
            .contains("requires a client certificate")
        );
        for s in [unknown, name, missing, refused] {
            assert_eq!(s.lines().count(), 1, "{s}");
        }
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let s = TlsSettings {
            ca_cert: Some(empty.clone()),
            ..TlsSettings::default()
        };
        let e = s.client("x").unwrap_err();
        assert!(
            e.starts_with("--ca-cert ") && e.contains("no PEM certificate"),
            "{e}"
        );
        let s = TlsSettings {
            ca_cert: Some(dir.path().join("missing.pem")),
            ..TlsSettings::default()
        };
        assert!(s.client("x").unwrap_err().contains("No such file"));
        let s = TlsSettings {
            client_cert: Some(empty.clone()),
            skip_verify: true,
            ..TlsSettings::default()
        };
        assert!(s.client("x").unwrap_err().contains("needs --client-key"));
        let key = dir.path().join("key.pem");
        std::fs::write(
            &key,
            "-----BEGIN NOTHING-----\nAAAA\n-----END NOTHING-----\n",
        )
        .unwrap();
        let s = TlsSettings {
            ca_path: Some(dir.path().to_path_buf()),
            ..TlsSettings::default()
        };
        // A directory whose files hold no certificate is refused, file by file.
        assert!(s.client("x").unwrap_err().starts_with("--ca-path "));
    }
}
