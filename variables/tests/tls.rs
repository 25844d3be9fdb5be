//! The server over `https://` (`ServerConfig::with_tls`), as a Nomad agent with `tls { http =
//! true }` and, with a client-certificate verifier, `verify_https_client = true`. The CA and the
//! certificates are made by the test (rcgen); nothing is read from disk or the network.

use std::sync::Arc;
use std::time::Duration;

use nomad_conform_variables::{Profile, ServerConfig, VariablesServer};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Pki {
    ca: CertificateDer<'static>,
    server: (CertificateDer<'static>, PrivateKeyDer<'static>),
    client: (CertificateDer<'static>, PrivateKeyDer<'static>),
}

fn leaf(
    issuer: &Issuer<'static, KeyPair>,
    server: bool,
) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut params = CertificateParams::new(vec!["server.global.nomad".to_string()]).unwrap();
    if server {
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    } else {
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    }
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (
        cert.der().clone(),
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    )
}

fn pki() -> Pki {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "variables test CA");
    let key = KeyPair::generate().unwrap();
    let ca = params.self_signed(&key).unwrap().der().clone();
    let issuer = Issuer::new(params, key);
    Pki {
        ca,
        server: leaf(&issuer, true),
        client: leaf(&issuer, false),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(pki: &Pki) -> Arc<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.clone()).unwrap();
    Arc::new(roots)
}

fn server_config(pki: &Pki, mutual: bool) -> Arc<rustls::ServerConfig> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if mutual {
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(roots(pki), provider())
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    Arc::new(
        builder
            .with_single_cert(vec![pki.server.0.clone()], pki.server.1.clone_key())
            .unwrap(),
    )
}

fn client_config(pki: &Pki, with_cert: bool) -> Arc<rustls::ClientConfig> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(pki));
    Arc::new(if with_cert {
        builder
            .with_client_auth_cert(vec![pki.client.0.clone()], pki.client.1.clone_key())
            .unwrap()
    } else {
        builder.with_no_client_auth()
    })
}

/// `GET /v1/var/absent` over TLS: the whole answer, or why there is none.
async fn get(
    addr: std::net::SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> Result<String, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tls.write_all(b"GET /v1/var/absent HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut out = Vec::new();
    tls.read_to_end(&mut out)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&out).into_owned();
    if text.is_empty() {
        return Err("no answer".into());
    }
    Ok(text)
}

#[tokio::test]
async fn https_answers_and_a_stalled_handshake_holds_up_nobody() {
    let pki = pki();
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_tls(server_config(&pki, false)),
    )
    .await
    .unwrap();
    let addr = server.addr().unwrap();
    assert_eq!(server.nomad_addr(), format!("https://{addr}"));
    // A connection that never starts its handshake.
    let _stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        get(addr, client_config(&pki, false)),
    )
    .await
    .expect("an answer while another connection stalls")
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /v1/var/absent HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut out)).await;
    assert!(
        !out.starts_with(b"HTTP/"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn mutual_tls_refuses_a_client_without_a_certificate() {
    let pki = pki();
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(Profile::fast())
            .with_tls(server_config(&pki, true)),
    )
    .await
    .unwrap();
    let addr = server.addr().unwrap();
    let refused = get(addr, client_config(&pki, false)).await;
    assert!(refused.is_err(), "{refused:?}");
    let answer = get(addr, client_config(&pki, true)).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
    server.shutdown().await.unwrap();
}
