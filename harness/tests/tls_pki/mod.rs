//! A public key infrastructure made by the test itself (rcgen): the cluster's CA, a server
//! certificate for `server.global.nomad`, `localhost` and 127.0.0.1 as Nomad's `nomad tls cert
//! create -server` makes them, a client certificate from the same CA, and a second CA with a
//! client certificate the server must refuse. Every file is written to a temporary directory;
//! no key material is checked in.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

pub struct Pki {
    pub dir: tempfile::TempDir,
    /// The cluster's CA (PEM).
    pub ca: PathBuf,
    /// A directory holding only the cluster's CA (for --ca-path / NOMAD_CAPATH).
    pub ca_dir: PathBuf,
    /// A CA that signed nothing the server presents.
    pub other_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A client certificate from the other CA: refused by a mutual-TLS server.
    pub rogue_cert: PathBuf,
    pub rogue_key: PathBuf,
}

fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(params, key))
}

fn leaf(
    issuer: &Issuer<'static, KeyPair>,
    names: &[&str],
    ip: bool,
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    if ip {
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    }
    params.distinguished_name.push(DnType::CommonName, names[0]);
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let (ca_pem, issuer) = ca("nomad-conform test CA");
        let (other_pem, other) = ca("someone else's CA");
        let (server_cert, server_key) = leaf(
            &issuer,
            &["server.global.nomad", "localhost"],
            true,
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) = leaf(
            &issuer,
            &["cli.global.nomad"],
            false,
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let (rogue_cert, rogue_key) = leaf(
            &other,
            &["cli.global.nomad"],
            false,
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let ca_dir = dir.path().join("ca.d");
        std::fs::create_dir(&ca_dir).unwrap();
        std::fs::write(ca_dir.join("nomad-agent-ca.pem"), &ca_pem).unwrap();
        Pki {
            ca: write("nomad-agent-ca.pem", &ca_pem),
            ca_dir,
            other_ca: write("other-ca.pem", &other_pem),
            server_cert: write("global-server-nomad.pem", &server_cert),
            server_key: write("global-server-nomad-key.pem", &server_key),
            client_cert: write("global-cli-nomad.pem", &client_cert),
            client_key: write("global-cli-nomad-key.pem", &client_key),
            rogue_cert: write("rogue-cli.pem", &rogue_cert),
            rogue_key: write("rogue-cli-key.pem", &rogue_key),
            dir,
        }
    }

    /// The server's TLS: with `mutual`, clients must present a certificate of the cluster's CA
    /// (Nomad's `verify_https_client = true`).
    pub fn server_config(&self, mutual: bool) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if mutual {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_file(&self.ca).unwrap())
                .unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let chain = CertificateDer::pem_file_iter(&self.server_cert)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(&self.server_key).unwrap();
        Arc::new(builder.with_single_cert(chain, key).unwrap())
    }
}

/// Every variable the nomad CLI reads, for tests to clear before setting their own.
pub const NOMAD_CLI_VARS: [&str; 11] = [
    "NOMAD_ADDR",
    "NOMAD_TOKEN",
    "NOMAD_REGION",
    "NOMAD_NAMESPACE",
    "NOMAD_CACERT",
    "NOMAD_CAPATH",
    "NOMAD_CLIENT_CERT",
    "NOMAD_CLIENT_KEY",
    "NOMAD_TLS_SERVER_NAME",
    "NOMAD_SKIP_VERIFY",
    "NOMAD_HTTP_AUTH",
];
