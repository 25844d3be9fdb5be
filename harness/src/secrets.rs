//! Every secret the process learns, in one place: the tokens it is given (`--token`, `NOMAD_TOKEN`,
//! secret-looking flags of the commands it runs), the ones it mints (client and management tokens
//! of a reference server, workload identities) and the ones it reads back (`SecretID` in an
//! answer). Reports are redacted against this list ([`crate::run::finish_record`]), and so is
//! everything printed while the run goes on and every error line, so that neither a CI artifact
//! nor a console log carries a secret.
//!
//! The list is process-wide because secrets are met deep in transports that do not know the run;
//! a process runs one suite (or one per plugin of a directory, which share it harmlessly).

use std::collections::BTreeSet;
use std::sync::Mutex;

use nomad_conform_reports::redact::{MARK, MIN_SECRET_LEN, is_secret_name};

static SECRETS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Remember `value` as secret (values too short to redact safely are ignored, as in reports).
pub fn register(value: &str) {
    let value = value.trim();
    if value.len() >= MIN_SECRET_LEN
        && let Ok(mut s) = SECRETS.lock()
    {
        s.insert(value.to_string());
    }
}

/// Every secret registered so far.
pub fn all() -> Vec<String> {
    SECRETS
        .lock()
        .map(|s| s.iter().cloned().collect())
        .unwrap_or_default()
}

/// `text` with every registered secret replaced (longest first).
pub fn redact(text: &str) -> String {
    let mut secrets = all();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_string();
    for s in &secrets {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), MARK);
        }
    }
    out
}

/// Register the values of secret-looking options in a command line: `--token T`,
/// `-token=T`, `--api-key T`, and `NAME=value` words whose name looks secret
/// (`NOMAD_TOKEN=...`).
pub fn register_from_words(words: &[String]) {
    let mut words = words.iter().peekable();
    while let Some(w) = words.next() {
        if let Some(flag) = w.strip_prefix('-') {
            let flag = flag.trim_start_matches('-');
            match flag.split_once('=') {
                Some((name, value)) if is_secret_name(name) => register(value),
                None if is_secret_name(flag) => {
                    if let Some(next) = words.peek()
                        && !next.starts_with('-')
                    {
                        register(next);
                    }
                }
                _ => {}
            }
        } else if let Some((name, value)) = w.split_once('=')
            && is_secret_name(name)
            && !name.is_empty()
        {
            register(value);
        }
    }
}

/// [`register_from_words`] for a command line given as one shell string.
pub fn register_from_command(command: &str) {
    if let Some(words) = shlex::split(command) {
        register_from_words(&words);
    }
}

/// Register every `SecretID` (and other secret-named string field) found in a JSON answer:
/// Nomad's ACL API returns tokens' secrets in its bodies.
pub fn register_from_json(value: &serde_json::Value) {
    match value {
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                match v {
                    serde_json::Value::String(s) if k == "SecretID" || is_secret_name(k) => {
                        register(s)
                    }
                    other => register_from_json(other),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(register_from_json),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_secrets_in_command_lines_and_answers() {
        register_from_words(&[
            "client".into(),
            "--token".into(),
            "tok-aaaa1111".into(),
            "-api-key=key-bbbb2222".into(),
            "NOMAD_TOKEN=tok-cccc3333".into(),
            "--mode".into(),
            "fast-mode-value".into(),
        ]);
        register_from_json(&serde_json::json!({
            "AccessorID": "acc-dddd4444",
            "SecretID": "sec-eeee5555",
            "Tokens": [{"SecretID": "sec-ffff6666"}]
        }));
        let text = "tok-aaaa1111 key-bbbb2222 tok-cccc3333 fast-mode-value acc-dddd4444 sec-eeee5555 sec-ffff6666";
        assert_eq!(
            redact(text),
            "[redacted] [redacted] [redacted] fast-mode-value acc-dddd4444 [redacted] [redacted]"
        );
    }
}
