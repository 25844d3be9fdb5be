//! Logging to stderr the way a go-plugin host reads it: one hclog JSON object per line.
//!
//! The host parses each stderr line as JSON and recognises `@level` (trace, debug, info, warn,
//! error), `@message` and `@timestamp`, whose layout must be exactly Go's
//! `2006-01-02T15:04:05.000000Z07:00` (microseconds, `Z` for UTC); any other key becomes a
//! key/value pair of the log entry. A line whose timestamp does not parse is treated as plain
//! text (contracts/task-drivers.md A.7). hclog writes the keys in sorted order, as here.
//!
//! The plain-stderr fault writes unprefixed plain text instead, which the host logs at debug
//! level without the plugin's level or fields.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::OnceLock;

use crate::faults::{Fault, Faults};

/// The `@module` of every line: the plugin's name.
const MODULE: &str = "exec-reference";

static PLAIN: OnceLock<bool> = OnceLock::new();

/// Chooses the format once, before the first line is written.
pub fn init(faults: &Faults) {
    let _ = PLAIN.set(faults.has(Fault::PlainStderr));
}

#[derive(Clone, Copy, Debug)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

pub fn trace(message: &str, fields: &[(&str, String)]) {
    write(Level::Trace, message, fields);
}

pub fn debug(message: &str, fields: &[(&str, String)]) {
    write(Level::Debug, message, fields);
}

pub fn info(message: &str, fields: &[(&str, String)]) {
    write(Level::Info, message, fields);
}

pub fn warn(message: &str, fields: &[(&str, String)]) {
    write(Level::Warn, message, fields);
}

pub fn error(message: &str, fields: &[(&str, String)]) {
    write(Level::Error, message, fields);
}

/// Writes one line to stderr. Errors writing it are ignored: there is nowhere else to report
/// them.
pub fn write(level: Level, message: &str, fields: &[(&str, String)]) {
    let line = if *PLAIN.get().unwrap_or(&false) {
        plain_line(message, fields)
    } else {
        json_line(level, message, fields, chrono::Utc::now())
    };
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(line.as_bytes());
    let _ = stderr.write_all(b"\n");
}

/// `{"@level":"info","@message":"...","@module":"exec-reference","@timestamp":"...",...}`
fn json_line(
    level: Level,
    message: &str,
    fields: &[(&str, String)],
    now: chrono::DateTime<chrono::Utc>,
) -> String {
    let mut entry: BTreeMap<&str, &str> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let timestamp = go_timestamp(now);
    entry.insert("@level", level.name());
    entry.insert("@message", message);
    entry.insert("@module", MODULE);
    entry.insert("@timestamp", &timestamp);
    serde_json::to_string(&entry).unwrap_or_else(|_| message.to_string())
}

/// Go's `2006-01-02T15:04:05.000000Z07:00` for a UTC time: always six fractional digits, `Z`.
pub fn go_timestamp(time: chrono::DateTime<chrono::Utc>) -> String {
    time.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn plain_line(message: &str, fields: &[(&str, String)]) -> String {
    let mut line = message.to_string();
    for (key, value) in fields {
        line.push_str(&format!(" {key}={value}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;

    #[test]
    fn json_lines_carry_the_keys_and_timestamp_layout_the_host_parses() {
        let now = chrono::Utc
            .with_ymd_and_hms(2026, 3, 4, 5, 6, 7)
            .unwrap()
            .checked_add_signed(chrono::Duration::microseconds(89))
            .unwrap();
        let line = json_line(Level::Warn, "hello", &[("task_id", "a/b/c".into())], now);
        assert_eq!(
            line,
            r#"{"@level":"warn","@message":"hello","@module":"exec-reference","@timestamp":"2026-03-04T05:06:07.000089Z","task_id":"a/b/c"}"#
        );
    }

    #[test]
    fn plain_lines_have_no_json() {
        assert_eq!(
            plain_line("started", &[("pid", "7".into())]),
            "started pid=7"
        );
    }
}
