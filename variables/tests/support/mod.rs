//! A tiny HTTP/1.1 client for the tests (TCP or unix socket), sending exactly the bytes a
//! test asks for (no Content-Type, like Nomad's Go client), and server start helpers.

#![allow(dead_code)]

use std::path::PathBuf;

use nomad_conform_variables::{AclConfig, Profile, ServerConfig, ServerHandle, VariablesServer};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn index(&self) -> Option<u64> {
        self.header("x-nomad-index").map(|v| v.parse().unwrap())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// `Lock.ID` of a JSON body.
    pub fn lock_id(&self) -> String {
        self.json()["Lock"]["ID"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Where the server listens.
#[derive(Debug, Clone)]
pub enum Target {
    Tcp(std::net::SocketAddr),
    Unix(PathBuf),
}

/// A client with an optional token.
#[derive(Debug, Clone)]
pub struct Client {
    pub target: Target,
    pub token: Option<String>,
}

impl Client {
    pub fn of(server: &ServerHandle) -> Self {
        let target = match server.addr() {
            Some(addr) => Target::Tcp(addr),
            None => Target::Unix(server.socket_path().unwrap().to_path_buf()),
        };
        Self {
            target,
            token: None,
        }
    }

    pub fn with_token(&self, token: &str) -> Self {
        Self {
            target: self.target.clone(),
            token: Some(token.to_string()),
        }
    }

    pub async fn get(&self, uri: &str) -> Resp {
        self.send("GET", uri, None, &[]).await
    }

    pub async fn put(&self, uri: &str, body: &str) -> Resp {
        self.send("PUT", uri, Some(body), &[]).await
    }

    pub async fn delete(&self, uri: &str) -> Resp {
        self.send("DELETE", uri, None, &[]).await
    }

    /// `PUT /v1/var/<path>?lock-acquire` with a TTL and delay (Go duration strings).
    pub async fn acquire(&self, path: &str, ttl: &str, delay: &str) -> Resp {
        let body = format!(
            r#"{{"Namespace":"","Path":"{path}","Items":null,"Lock":{{"ID":"","TTL":"{ttl}","LockDelay":"{delay}"}}}}"#
        );
        self.put(&format!("/v1/var/{path}?lock-acquire="), &body)
            .await
    }

    pub async fn acquire_as(&self, path: &str, id: &str, ttl: &str, delay: &str) -> Resp {
        let body = format!(r#"{{"Lock":{{"ID":"{id}","TTL":"{ttl}","LockDelay":"{delay}"}}}}"#);
        self.put(&format!("/v1/var/{path}?lock-acquire="), &body)
            .await
    }

    pub async fn renew(&self, path: &str, id: &str) -> Resp {
        let body = format!(r#"{{"Path":"{path}","Lock":{{"ID":"{id}"}}}}"#);
        self.put(&format!("/v1/var/{path}?lock-renew="), &body)
            .await
    }

    pub async fn release(&self, path: &str, id: &str) -> Resp {
        let body = format!(
            r#"{{"Namespace":"","Path":"","Lock":{{"ID":"{id}","TTL":"","LockDelay":""}}}}"#
        );
        self.put(&format!("/v1/var/{path}?lock-release="), &body)
            .await
    }

    pub async fn send(
        &self,
        method: &str,
        uri: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut request =
            format!("{method} {uri} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        if let Some(token) = &self.token {
            request.push_str(&format!("X-Nomad-Token: {token}\r\n"));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        let body = body.unwrap_or("");
        request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        match &self.target {
            Target::Tcp(addr) => exchange(TcpStream::connect(addr).await.unwrap(), &request).await,
            Target::Unix(path) => {
                exchange(UnixStream::connect(path).await.unwrap(), &request).await
            }
        }
    }
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, request: &str) -> Resp {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("no header end");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_string(),
    }
}

/// A loopback server with `profile` and `acl`.
pub async fn start(profile: Profile, acl: AclConfig) -> (ServerHandle, Client) {
    let server = VariablesServer::start(
        ServerConfig::localhost()
            .with_profile(profile)
            .with_acl(acl),
    )
    .await
    .unwrap();
    let client = Client::of(&server);
    (server, client)
}

/// A loopback server with the fast profile and ACLs off.
pub async fn start_fast() -> (ServerHandle, Client) {
    start(Profile::fast(), AclConfig::disabled()).await
}

/// Body of a plain set with items.
pub fn items_body(items: &[(&str, &str)]) -> String {
    let items: Vec<String> = items
        .iter()
        .map(|(k, v)| format!("\"{k}\":\"{v}\""))
        .collect();
    format!("{{\"Items\":{{{}}}}}", items.join(","))
}
