//! Validation of variables and locks, with Nomad's exact error texts.
//!
//! Source: contract C.4 and B.2/B.3, from `nomad/structs/variables.go` (`ValidatePath`,
//! `VariableDecrypted.Validate`, `ValidateForLock`, `VariableLock.Validate`) and
//! `canonicalizeAndValidate` in `nomad/variables_endpoint.go`. Where Nomad joins errors with
//! go-multierror, [`multierror`] renders the same text ("1 error occurred:\n\t* ...\n\n").

use std::collections::BTreeMap;

use crate::profile::{Profile, nanos};
use crate::wire::VariableLock;

pub(crate) const WILDCARD_NAMESPACE: &str = "can not target wildcard (\"*\")namespace";
pub(crate) const SIZE_LIMIT: &str = "variables are limited to 64KiB in total size";
pub(crate) const NEGATIVE_DURATION: &str = "Lock delay and TTL must be positive";
pub(crate) const TTL_BOUNDS: &str = "TTL must be between 10 seconds and 24 hours";

/// go-multierror's list format.
pub(crate) fn multierror(errors: &[&str]) -> String {
    match errors {
        [one] => format!("1 error occurred:\n\t* {one}\n\n"),
        many => {
            let points: Vec<String> = many.iter().map(|e| format!("* {e}")).collect();
            format!(
                "{} errors occurred:\n\t{}\n\n",
                many.len(),
                points.join("\n\t")
            )
        }
    }
}

/// A path allowed by `^[a-zA-Z0-9-_~/]{1,128}$` and the reserved `nomad/` rules.
pub(crate) fn validate_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("variable requires path".to_string());
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'~' | b'/');
    if path.len() > 128 || !path.bytes().all(allowed) {
        return Err(format!("invalid path {}", go_quote(path)));
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts[0] != "nomad" {
        return Ok(());
    }
    if parts.len() == 1 {
        return Err("\"nomad\" is a reserved top-level directory path, but you may write variables to \"nomad/jobs\", \"nomad/job-templates\", \"nomad/sentinel\", or below".to_string());
    }
    match parts[1] {
        "jobs" | "sentinel" => Ok(()),
        "job-templates" if parts.len() == 3 => Ok(()),
        "job-templates" => Err("\"nomad/job-templates\" is a reserved directory path, but you may write variables at the level below it, for example, \"nomad/job-templates/template-name\"".to_string()),
        _ => Err("only paths at \"nomad/jobs\" or \"nomad/job-templates\" and below are valid paths under the top-level \"nomad\" directory".to_string()),
    }
}

/// Go's `%q` for the strings a path can hold after the character check failed.
fn go_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Sum of key and value bytes.
pub(crate) fn items_size(items: &BTreeMap<String, String>) -> u64 {
    items.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum()
}

/// `VariableLock.Validate`: non-negative durations, TTL within the profile's bounds.
pub(crate) fn validate_lock(lock: &VariableLock, profile: &Profile) -> Result<(), String> {
    let mut errors = Vec::new();
    if lock.lock_delay_nanos < 0 || lock.ttl_nanos < 0 {
        errors.push(NEGATIVE_DURATION);
    }
    if lock.ttl_nanos > nanos(profile.lock_ttl_max) || lock.ttl_nanos < nanos(profile.lock_ttl_min)
    {
        errors.push(TTL_BOUNDS);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(multierror(&errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_table() {
        let ok = [
            "a",
            "a/b/c",
            "~x_y-z",
            "/leading",
            "trailing/",
            "double//slash",
            "nomad/jobs",
            "nomad/jobs/example/web/httpd",
            "nomad/sentinel",
            "nomad/sentinel/x/y",
            "nomad/job-templates/one",
            "nomadic",
        ];
        for path in ok {
            assert_eq!(validate_path(path), Ok(()), "{path}");
        }
        let too_long = "a".repeat(129);
        let bad = [
            "",
            "a.b",
            "a b",
            "a@b",
            "a*",
            too_long.as_str(),
            "nomad",
            "nomad/",
            "nomad/job-templates",
            "nomad/job-templates/a/b",
            "nomad/other",
        ];
        for path in bad {
            assert!(validate_path(path).is_err(), "{path} should be invalid");
        }
        assert_eq!(validate_path(&"a".repeat(128)), Ok(()));
        assert_eq!(validate_path("a.b"), Err("invalid path \"a.b\"".into()));
    }

    #[test]
    fn lock_table() {
        let s = 1_000_000_000i64;
        let nomad = Profile::nomad();
        let lock = |ttl: i64, delay: i64| VariableLock {
            id: "x".into(),
            ttl_nanos: ttl,
            lock_delay_nanos: delay,
        };
        assert_eq!(validate_lock(&lock(10 * s, 0), &nomad), Ok(()));
        assert_eq!(validate_lock(&lock(86_400 * s, 0), &nomad), Ok(()));
        // Lock delay has no bound other than >= 0.
        assert_eq!(validate_lock(&lock(15 * s, 1), &nomad), Ok(()));
        assert_eq!(validate_lock(&lock(15 * s, 1_000_000 * s), &nomad), Ok(()));
        assert_eq!(
            validate_lock(&lock(10 * s - 1, 0), &nomad),
            Err("1 error occurred:\n\t* TTL must be between 10 seconds and 24 hours\n\n".into())
        );
        assert!(validate_lock(&lock(86_400 * s + 1, 0), &nomad).is_err());
        assert_eq!(
            validate_lock(&lock(-s, 0), &nomad),
            Err("2 errors occurred:\n\t* Lock delay and TTL must be positive\n\t* TTL must be between 10 seconds and 24 hours\n\n".into())
        );
        assert!(validate_lock(&lock(15 * s, -1), &nomad).is_err());
        // The fast profile moves the bounds, not the message.
        assert_eq!(validate_lock(&lock(s, 0), &Profile::fast()), Ok(()));
        assert!(validate_lock(&lock(s - 1, 0), &Profile::fast()).is_err());
    }
}
