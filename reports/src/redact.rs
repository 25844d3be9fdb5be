//! Redaction: secret values never reach a report. The harness collects the values it knows to
//! be secret (parameters with secret-looking names, CSI secrets, tokens); every string of the
//! record has them replaced before any writer sees it.

use serde_json::Value;

use crate::model::RunRecord;

pub const MARK: &str = "[redacted]";

/// Values shorter than this are not redacted: replacing "1" everywhere would destroy the report.
pub const MIN_SECRET_LEN: usize = 4;

/// Whether a parameter or field name suggests its value is a secret.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "password",
        "passwd",
        "secret",
        "token",
        "credential",
        "apikey",
        "api_key",
        "api-key",
        "private_key",
        "private-key",
        "privatekey",
        "access_key",
        "access-key",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// The record with every occurrence of every secret replaced by [`MARK`].
pub fn redact(record: &RunRecord, secrets: &[String]) -> RunRecord {
    let mut secrets: Vec<&str> = secrets
        .iter()
        .map(String::as_str)
        .filter(|s| s.len() >= MIN_SECRET_LEN)
        .collect();
    if secrets.is_empty() {
        return record.clone();
    }
    // Longest first, so that a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let Ok(mut value) = serde_json::to_value(record) else {
        return record.clone();
    };
    scrub(&mut value, &secrets);
    serde_json::from_value(value).unwrap_or_else(|_| record.clone())
}

fn scrub(v: &mut Value, secrets: &[&str]) {
    match v {
        Value::String(s) => {
            for secret in secrets {
                if s.contains(secret) {
                    *s = s.replace(secret, MARK);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| scrub(x, secrets)),
        Value::Object(o) => o.values_mut().for_each(|x| scrub(x, secrets)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        assert!(is_secret_name("password"));
        assert!(is_secret_name("DB_PASSWORD"));
        assert!(is_secret_name("apiToken"));
        assert!(!is_secret_name("mode"));
        assert!(!is_secret_name("uid"));
    }

    #[test]
    fn scrubs_everywhere_longest_first() {
        let mut v = serde_json::json!({
            "a": "x hunter2hunter2 y",
            "b": ["hunter2", {"c": "k=hunter2"}],
            "n": 5
        });
        scrub(&mut v, &["hunter2hunter2", "hunter2"]);
        assert_eq!(
            v,
            serde_json::json!({
                "a": "x [redacted] y",
                "b": ["[redacted]", {"c": "k=[redacted]"}],
                "n": 5
            })
        );
    }
}
