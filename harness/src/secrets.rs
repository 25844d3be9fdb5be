//! Every secret the process learns, in one place: the tokens it is given (`--token`, `NOMAD_TOKEN`
//! and every secret-looking variable of its environment, secret-looking flags of the commands it
//! runs), the ones it mints (client and management tokens of a reference server, workload
//! identities) and the ones it reads back (`SecretID` in an answer). Reports are redacted against
//! this list ([`crate::run::finish_record`]), and so is everything printed while the run goes on
//! and every error line, so that neither a CI artifact nor a console log carries a secret. Each
//! secret is looked for in every form it takes in text (JSON, shell-quoted, HTML, URL, each line
//! of a multi-line one: `nomad_conform_reports::secret_forms`).
//!
//! The list is process-wide because secrets are met deep in transports that do not know the run;
//! a process runs one suite (or one per plugin of a directory, which share it harmlessly).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use nomad_conform_reports::redact::{MIN_SECRET_LEN, Redactor, is_secret_name};

struct Registry {
    secrets: BTreeSet<String>,
    /// Built again when a secret is added: registering is rare, redacting is not.
    redactor: Arc<Redactor>,
}

static SECRETS: Mutex<Option<Registry>> = Mutex::new(None);

/// Remember `value` as secret (values too short to redact safely are ignored, as in reports).
pub fn register(value: &str) {
    let value = value.trim();
    if value.len() < MIN_SECRET_LEN {
        return;
    }
    let Ok(mut guard) = SECRETS.lock() else {
        return;
    };
    let registry = guard.get_or_insert_with(|| Registry {
        secrets: BTreeSet::new(),
        redactor: Arc::default(),
    });
    if registry.secrets.insert(value.to_string()) {
        let secrets: Vec<&String> = registry.secrets.iter().collect();
        registry.redactor = Arc::new(Redactor::new(&secrets));
    }
}

/// Every secret registered so far.
pub fn all() -> Vec<String> {
    SECRETS
        .lock()
        .ok()
        .and_then(|g| g.as_ref().map(|r| r.secrets.iter().cloned().collect()))
        .unwrap_or_default()
}

fn redactor() -> Arc<Redactor> {
    SECRETS
        .lock()
        .ok()
        .and_then(|g| g.as_ref().map(|r| r.redactor.clone()))
        .unwrap_or_default()
}

/// `text` with every registered secret, in every form, replaced.
pub fn redact(text: &str) -> String {
    redactor().redact(text).into_owned()
}

/// Whether `text` holds a registered secret in any form: a command line the harness prints
/// names such a value by a variable instead ([`crate::command_line`]).
pub fn holds_secret(text: &str) -> bool {
    redactor().finds(text)
}

/// Whether an environment variable's name says it holds a secret: a secret-looking name
/// (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*PASSPHRASE*`, `*CREDENTIAL*`, ...), `*_KEY`, and
/// everything of AWS and Vault but their well-known settings that are not secret (a region, an
/// address: redacting those would only mangle reports).
pub fn is_secret_env_name(name: &str) -> bool {
    const NOT_SECRET: &[&str] = &[
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_DEFAULT_OUTPUT",
        "AWS_PAGER",
        "AWS_CONFIG_FILE",
        "AWS_SDK_LOAD_CONFIG",
        "AWS_EC2_METADATA_DISABLED",
        "VAULT_ADDR",
        "VAULT_NAMESPACE",
        "VAULT_FORMAT",
        "VAULT_SKIP_VERIFY",
        "VAULT_CACERT",
        "VAULT_CAPATH",
        "VAULT_TLS_SERVER_NAME",
        "VAULT_MAX_RETRIES",
        "VAULT_CLIENT_TIMEOUT",
    ];
    let upper = name.to_ascii_uppercase();
    if NOT_SECRET.contains(&upper.as_str()) {
        return false;
    }
    is_secret_name(name)
        || upper.ends_with("_KEY")
        || upper.starts_with("AWS_")
        || upper.starts_with("VAULT_")
}

/// Register the value of every variable of `vars` whose name looks secret
/// ([`is_secret_env_name`]); a yes-or-no value (`true`, `false`) is a setting, not a secret,
/// and is left alone.
pub fn register_env(vars: impl IntoIterator<Item = (String, String)>) {
    for (name, value) in vars {
        let v = value.trim();
        if is_secret_env_name(&name)
            && !["true", "false", "yes", "no"]
                .iter()
                .any(|b| v.eq_ignore_ascii_case(b))
        {
            register(&value);
        }
    }
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

    #[test]
    fn secret_looking_environment_variables() {
        for name in [
            "VAULT_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "MY_PASSWORD",
            "GPG_PASSPHRASE",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "STRIPE_KEY",
            "VAULT_UNSEAL",
            "nomad_token",
        ] {
            assert!(is_secret_env_name(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "AWS_REGION",
            "VAULT_ADDR",
            "KEYBOARD",
            "MONKEY",
        ] {
            assert!(!is_secret_env_name(name), "{name}");
        }
        register_env([
            ("VAULT_TOKEN".into(), "hvs.env-vault-1111".into()),
            ("MY_PASSWORD".into(), "env-pass\"word-2222".into()),
            ("SOME_TOKEN_ENABLED".into(), "true".into()),
            ("HOME".into(), "/srv/home-3333".into()),
        ]);
        let text = r#"hvs.env-vault-1111 {"p":"env-pass\"word-2222"} true /srv/home-3333"#;
        assert_eq!(
            redact(text),
            r#"[redacted] {"p":"[redacted]"} true /srv/home-3333"#
        );
        assert!(holds_secret("x hvs.env-vault-1111"));
        assert!(!holds_secret("/srv/home-3333"));
    }
}
