//! The plugin's stderr as go-plugin's host reads it (A.7, `client.go` `logStderr` and
//! `log_entry.go` `parseJSON`).
//!
//! Each line is first tried as an hclog JSON entry: a JSON **object** whose `@message`,
//! `@level` and `@timestamp` are taken out and every other key kept as a field. The timestamp,
//! when present, must match Go's layout `2006-01-02T15:04:05.000000Z07:00` exactly (six
//! fractional digits, `Z` or a `±hh:mm` offset), or the whole line counts as not JSON. The level
//! is read like hclog's `LevelFromString` (trimmed, any case: trace, debug, info, warn, error);
//! an entry without a known level is logged verbatim at debug.
//!
//! A line that is not an hclog entry is logged at the level of a `[TRACE]`, `[DEBUG]`,
//! `[INFO]`, `[WARN]` or `[ERROR]` prefix. From a line starting `panic: ` or `fatal error: `
//! onward (a Go crash and its goroutine dump), unprefixed lines are at error; anything else is
//! at debug. Lines longer than the host's 64 KiB read buffer reach it in pieces, each logged
//! verbatim at debug ([`LogLine::partial`]).
//!
//! One hazard is recorded rather than reproduced: the Go host asserts that `@message`,
//! `@level` and `@timestamp` are strings, so an entry where one of them is another JSON type
//! panics the host's log goroutine (and so the Nomad agent). Such a line is kept as not JSON,
//! at debug, with [`LogLine::host_hazard`] saying why.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

pub use super::golang::{TIMESTAMP_LAYOUT, parse_go_timestamp};
/// The host's stderr read buffer (go-plugin's default `PluginLogBufferSize`).
pub const LINE_BUFFER: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// One stderr line and what the host made of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogLine {
    /// When the harness read it, since the plugin was started.
    pub at: Duration,
    pub level: Level,
    /// `@message` of a JSON entry, or the raw line.
    pub message: String,
    /// Whether the line was an hclog JSON entry (an object with a valid or absent timestamp).
    pub json: bool,
    /// The line as read, without its line ending.
    pub raw: String,
    /// `@level` of a JSON entry, as written.
    pub json_level: Option<String>,
    /// `@timestamp` of a JSON entry, as written.
    pub timestamp: Option<String>,
    /// The other keys of a JSON entry (`@module`, `@caller`, key/value pairs).
    pub fields: Map<String, Value>,
    /// A piece of a line longer than the host's read buffer.
    pub partial: bool,
    /// Something in the line that would crash a Go host.
    pub host_hazard: Option<String>,
}

/// Parses stderr lines in order (the panic state carries from line to line).
#[derive(Clone, Debug, Default)]
pub struct HclogParser {
    panicking: bool,
}

impl HclogParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a `panic: ` or `fatal error: ` line has been seen.
    pub fn panicking(&self) -> bool {
        self.panicking
    }

    /// A piece of an over-long line: verbatim at debug.
    pub fn partial(&mut self, raw: &str, at: Duration) -> LogLine {
        let mut line = plain(raw, at, Level::Debug);
        line.partial = true;
        line
    }

    /// One complete line (without its line ending).
    pub fn parse(&mut self, raw: &str, at: Duration) -> LogLine {
        match parse_entry(raw) {
            Entry::Json {
                message,
                level,
                timestamp,
                fields,
            } => {
                let known = level.as_deref().and_then(level_from_string);
                LogLine {
                    at,
                    level: known.unwrap_or(Level::Debug),
                    message: if known.is_some() {
                        message
                    } else {
                        raw.to_owned()
                    },
                    json: true,
                    raw: raw.to_owned(),
                    json_level: level,
                    timestamp,
                    fields,
                    partial: false,
                    host_hazard: None,
                }
            }
            Entry::NotJson { hazard } => {
                let level = if let Some(l) = bracket_level(raw) {
                    l
                } else if raw.starts_with("panic: ") || raw.starts_with("fatal error: ") {
                    self.panicking = true;
                    Level::Error
                } else if self.panicking {
                    Level::Error
                } else {
                    Level::Debug
                };
                let mut line = plain(raw, at, level);
                line.host_hazard = hazard;
                line
            }
        }
    }
}

fn plain(raw: &str, at: Duration, level: Level) -> LogLine {
    LogLine {
        at,
        level,
        message: raw.to_owned(),
        json: false,
        raw: raw.to_owned(),
        json_level: None,
        timestamp: None,
        fields: Map::new(),
        partial: false,
        host_hazard: None,
    }
}

fn bracket_level(raw: &str) -> Option<Level> {
    [
        ("[TRACE]", Level::Trace),
        ("[DEBUG]", Level::Debug),
        ("[INFO]", Level::Info),
        ("[WARN]", Level::Warn),
        ("[ERROR]", Level::Error),
    ]
    .into_iter()
    .find(|(p, _)| raw.starts_with(p))
    .map(|(_, l)| l)
}

/// hclog's `LevelFromString` for the levels a line can carry (`off` and anything else: none).
pub fn level_from_string(s: &str) -> Option<Level> {
    match s.trim().to_lowercase().as_str() {
        "trace" => Some(Level::Trace),
        "debug" => Some(Level::Debug),
        "info" => Some(Level::Info),
        "warn" => Some(Level::Warn),
        "error" => Some(Level::Error),
        _ => None,
    }
}

enum Entry {
    Json {
        message: String,
        level: Option<String>,
        timestamp: Option<String>,
        fields: Map<String, Value>,
    },
    NotJson {
        hazard: Option<String>,
    },
}

fn parse_entry(raw: &str) -> Entry {
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(raw) else {
        return Entry::NotJson { hazard: None };
    };
    let mut take = |key: &str| -> Result<Option<String>, String> {
        match map.remove(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!(
                "{key} is {} rather than a string: a Go host (go-plugin logStderr) panics on it",
                json_type(&other)
            )),
        }
    };
    let message = take("@message");
    let level = take("@level");
    let timestamp = take("@timestamp");
    let (message, level, timestamp) = match (message, level, timestamp) {
        (Ok(m), Ok(l), Ok(t)) => (m, l, t),
        (Err(h), _, _) | (_, Err(h), _) | (_, _, Err(h)) => {
            return Entry::NotJson { hazard: Some(h) };
        }
    };
    if let Some(t) = &timestamp
        && parse_go_timestamp(t).is_err()
    {
        return Entry::NotJson { hazard: None };
    }
    Entry::Json {
        message: message.unwrap_or_default(),
        level,
        timestamp,
        fields: map,
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let ts = "2024-01-02T15:04:05.000000Z";
        // (line, level, json, message)
        let cases: Vec<(String, Level, bool, String)> = vec![
            (
                format!(
                    r#"{{"@level":"info","@message":"hello","@timestamp":"{ts}","@module":"m"}}"#
                ),
                Level::Info,
                true,
                "hello".into(),
            ),
            (
                r#"{"@level":" WARN ","@message":"w"}"#.into(),
                Level::Warn,
                true,
                "w".into(),
            ),
            (
                r#"{"@level":"trace","@message":"t"}"#.into(),
                Level::Trace,
                true,
                "t".into(),
            ),
            (
                r#"{"@level":"off","@message":"x"}"#.into(),
                Level::Debug,
                true,
                r#"{"@level":"off","@message":"x"}"#.into(),
            ),
            (
                r#"{"msg":"not hclog"}"#.into(),
                Level::Debug,
                true,
                r#"{"msg":"not hclog"}"#.into(),
            ),
            (
                r#"{"@level":"error","@message":"e","@timestamp":"2024-01-02T15:04:05Z"}"#.into(),
                Level::Debug,
                false,
                r#"{"@level":"error","@message":"e","@timestamp":"2024-01-02T15:04:05Z"}"#.into(),
            ),
            (
                "[ERROR] boom".into(),
                Level::Error,
                false,
                "[ERROR] boom".into(),
            ),
            ("[WARN] w".into(), Level::Warn, false, "[WARN] w".into()),
            ("[INFO] i".into(), Level::Info, false, "[INFO] i".into()),
            ("[TRACE] t".into(), Level::Trace, false, "[TRACE] t".into()),
            ("[DEBUG] d".into(), Level::Debug, false, "[DEBUG] d".into()),
            (
                "[error] lower".into(),
                Level::Debug,
                false,
                "[error] lower".into(),
            ),
            ("plain".into(), Level::Debug, false, "plain".into()),
            ("[1,2]".into(), Level::Debug, false, "[1,2]".into()),
        ];
        for (raw, level, json, message) in cases {
            let l = HclogParser::new().parse(&raw, Duration::ZERO);
            assert_eq!(
                (l.level, l.json, &l.message),
                (level, json, &message),
                "{raw}"
            );
            assert_eq!(l.raw, raw);
        }
        let l = HclogParser::new().parse(
            &format!(r#"{{"@level":"info","@message":"m","@timestamp":"{ts}","k":1}}"#),
            Duration::ZERO,
        );
        assert_eq!(l.fields.get("k"), Some(&Value::from(1)));
        assert!(!l.fields.contains_key("@message"));
        assert_eq!(l.timestamp.as_deref(), Some(ts));
    }

    #[test]
    fn a_panic_turns_what_follows_into_errors() {
        let mut p = HclogParser::new();
        assert_eq!(p.parse("before", Duration::ZERO).level, Level::Debug);
        assert_eq!(p.parse("panic: oops", Duration::ZERO).level, Level::Error);
        assert_eq!(
            p.parse("goroutine 1 [running]:", Duration::ZERO).level,
            Level::Error
        );
        assert_eq!(
            p.parse("[INFO] still info", Duration::ZERO).level,
            Level::Info
        );
        assert!(p.panicking());
        let mut p = HclogParser::new();
        assert_eq!(
            p.parse("fatal error: x", Duration::ZERO).level,
            Level::Error
        );
        assert_eq!(p.parse("panicky: no", Duration::ZERO).level, Level::Error);
        let mut p = HclogParser::new();
        assert_eq!(
            p.parse("panic:no space", Duration::ZERO).level,
            Level::Debug
        );
    }

    #[test]
    fn non_string_keys_are_a_host_hazard() {
        for raw in [
            r#"{"@message":5,"@level":"info"}"#,
            r#"{"@message":"m","@level":null}"#,
            r#"{"@message":"m","@timestamp":1}"#,
        ] {
            let l = HclogParser::new().parse(raw, Duration::ZERO);
            assert!(!l.json, "{raw}");
            assert!(l.host_hazard.is_some(), "{raw}");
        }
        let l = HclogParser::new().partial("xxxx", Duration::ZERO);
        assert!(l.partial && l.level == Level::Debug);
    }
}
