//! Durations as Nomad puts them on the wire (Go `time.Duration` text) and as the logs show them.
//!
//! Nomad reads a lock's `TTL` and `LockDelay` with Go's duration syntax (`"15s"`, `"1m30s"`,
//! `"1.5s"`, `"500ms"`) and answers with the same syntax (contract B.2). We send the shortest
//! exact spelling in one unit and read back whatever the server granted, so the renew timing
//! follows the TTL the server actually applied.

use std::time::Duration;

const NANOS_PER: [(u128, &str); 4] = [
    (1_000_000_000, "s"),
    (1_000_000, "ms"),
    (1_000, "us"),
    (1, "ns"),
];

/// The duration in one Go unit, exactly: `15s`, `1500ms`, `0s`.
pub fn to_go(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    let (per, unit) = NANOS_PER
        .iter()
        .copied()
        .find(|(per, _)| nanos.is_multiple_of(*per))
        .unwrap_or((1, "ns"));
    format!("{}{unit}", nanos / per)
}

/// Parses Go duration text (`1h2m3.5s`, `1.5s`, `300ms`, `2µs`, `0`); `None` for anything
/// else, including negative values (a lock TTL is never negative).
pub fn parse_go(text: &str) -> Option<Duration> {
    let text = text.strip_prefix('+').unwrap_or(text);
    if text == "0" {
        return Some(Duration::ZERO);
    }
    if text.is_empty() || text.starts_with('-') {
        return None;
    }
    let mut rest = text;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    Some(Duration::from_nanos(total.round() as u64))
}

/// For logs: rounded to milliseconds, in humantime's spelling (`1s`, `250ms`, `1m 30s`).
pub fn human(duration: Duration) -> String {
    let millis = Duration::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
    humantime::format_duration(millis).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_text_in_one_exact_unit() {
        let table = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(15), "15s"),
            (Duration::from_secs(600), "600s"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_micros(7), "7us"),
            (Duration::from_nanos(3), "3ns"),
        ];
        for (duration, text) in table {
            assert_eq!(to_go(duration), text);
            assert_eq!(parse_go(text), Some(duration), "{text}");
        }
    }

    #[test]
    fn parses_what_nomad_answers() {
        let table = [
            ("15s", Some(Duration::from_secs(15))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("24h0m0s", Some(Duration::from_secs(86_400))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("250µs", Some(Duration::from_micros(250))),
            ("0", Some(Duration::ZERO)),
            ("", None),
            ("-1s", None),
            ("15", None),
            ("1x", None),
        ];
        for (text, expected) in table {
            assert_eq!(parse_go(text), expected, "{text:?}");
        }
    }

    #[test]
    fn human_rounds_to_milliseconds() {
        assert_eq!(human(Duration::from_nanos(1_234_567_891)), "1s 234ms");
        assert_eq!(human(Duration::from_secs(15)), "15s");
    }
}
