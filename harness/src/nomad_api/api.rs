//! Reading the Nomad HTTP API as one caller sees it: a token, a namespace, a region. Errors
//! come back as Nomad writes them (command/agent/http.go, CodedError: a status and a
//! plain-text body), or as why no answer came.

use std::time::Duration;

use super::client::{CallError, Target, call};
use super::settings::ApiSettings;

/// Why a request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// No connection, a TLS failure, or no answer in time.
    Unreachable(CallError),
    /// Nomad answered with an error status; its plain-text body.
    Status { status: u16, body: String },
    /// A 200 whose body is not what the endpoint returns.
    BadAnswer(String),
}

impl ApiError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::Status { status: 404, .. })
    }

    /// The server could not be used at all (TLS, or no connection).
    pub fn is_tls(&self) -> bool {
        matches!(self, ApiError::Unreachable(e) if e.is_tls())
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Unreachable(e @ CallError::Tls(_)) => write!(f, "{e}"),
            ApiError::Unreachable(why) => write!(f, "no answer: {why}"),
            ApiError::Status { status, body } => {
                let body = body.trim();
                if body.is_empty() {
                    write!(f, "Nomad answered {status}")
                } else {
                    write!(f, "Nomad answered {status}: {body}")
                }
            }
            ApiError::BadAnswer(why) => write!(f, "Nomad's answer makes no sense: {why}"),
        }
    }
}

/// The Nomad HTTP API of one agent, as one caller (token, namespace, region) sees it. Its
/// `Debug` never shows the token.
#[derive(Clone)]
pub struct NomadApi {
    pub target: Target,
    pub token: Option<String>,
    pub namespace: String,
    /// Sent as `region=` on every request when set (api/api.go does the same).
    pub region: Option<String>,
    pub timeout: Duration,
}

impl std::fmt::Debug for NomadApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NomadApi")
            .field("target", &self.target)
            .field("token", &self.token.as_ref().map(|_| "<hidden>"))
            .field("namespace", &self.namespace)
            .field("region", &self.region)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl NomadApi {
    /// The API of `settings`, in `default_namespace` unless they name one.
    pub fn new(settings: &ApiSettings, default_namespace: &str, timeout: Duration) -> NomadApi {
        NomadApi {
            target: settings.target.clone(),
            token: settings.token.clone(),
            namespace: settings
                .namespace
                .clone()
                .unwrap_or_else(|| default_namespace.to_string()),
            region: settings.region.clone(),
            timeout,
        }
    }

    /// `GET path?query&namespace=NS[&region=R]`; the body of a 200.
    pub async fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<String, ApiError> {
        let mut q: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        q.push(format!("namespace={}", encode(&self.namespace)));
        if let Some(r) = &self.region {
            q.push(format!("region={}", encode(r)));
        }
        let target = format!("{path}?{}", q.join("&"));
        let a = call(
            &self.target,
            "GET",
            &target,
            self.token.as_deref(),
            None,
            self.timeout,
        )
        .await
        .map_err(ApiError::Unreachable)?;
        if a.status == 200 {
            Ok(a.body)
        } else {
            Err(ApiError::Status {
                status: a.status,
                body: a.body,
            })
        }
    }
}

/// Percent-encoding of a path segment or query value: everything but RFC 3986's unreserved
/// characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_segments_and_values() {
        assert_eq!(encode("alloc/conform"), "alloc%2Fconform");
        assert_eq!(encode("conform-fleet"), "conform-fleet");
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }
}
