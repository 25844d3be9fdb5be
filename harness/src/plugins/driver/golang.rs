//! The bits of Go's standard library whose exact behaviour the host's checks depend on:
//! `strconv.Atoi` and `strconv.ParseBool` (handshake fields), the syntax `net.ResolveTCPAddr`
//! accepts (handshake address), and `time.Parse` with hclog's timestamp layout (stderr lines).
//! Written from the Go documentation and behaviour; no I/O, no panics.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The Go timestamp layout hclog writes and the host requires.
pub const TIMESTAMP_LAYOUT: &str = "2006-01-02T15:04:05.000000Z07:00";

/// Go's `strconv.Atoi`: an optional sign, then one or more ASCII digits, fitting an int64.
pub fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i128 = digits.parse().ok()?;
    let value = if s.starts_with('-') {
        -magnitude
    } else {
        magnitude
    };
    i64::try_from(value).ok()
}

/// Go's `strconv.ParseBool`.
pub fn go_parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `host:port` as `ResolveTCPAddr` reads it, without any lookup: `Ok(Some)` for a literal IP
/// (an empty host means the local system), `Ok(None)` when the host is a name to look up,
/// `Err` when the syntax or the port is wrong.
pub(crate) fn resolve_tcp_literal(a: &str) -> Result<Option<SocketAddr>, String> {
    if let Ok(sa) = a.parse::<SocketAddr>() {
        return Ok(Some(sa));
    }
    let (host, port) = a
        .rsplit_once(':')
        .ok_or_else(|| "missing port in address".to_owned())?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.contains(':') && !a.starts_with('[') {
        return Err("too many colons in address".into());
    }
    let port: u16 = if port.bytes().all(|b| b.is_ascii_digit()) && !port.is_empty() {
        port.parse().map_err(|_| format!("invalid port {port:?}"))?
    } else {
        return Err(format!("unknown port {port:?}"));
    };
    if host.is_empty() {
        return Ok(Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Some(SocketAddr::new(ip, port)));
    }
    Ok(None)
}

/// Go's `time.Parse("2006-01-02T15:04:05.000000Z07:00", s)`: Ok when Go would accept `s`.
pub fn parse_go_timestamp(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    let bad = |what: &str| Err(format!("{s:?} does not match {TIMESTAMP_LAYOUT}: {what}"));
    let digits = |i: usize, n: usize| -> Option<i64> {
        let part = b.get(i..i + n)?;
        part.iter().all(u8::is_ascii_digit).then(|| {
            part.iter()
                .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'))
        })
    };
    let lit = |i: usize, c: u8| b.get(i) == Some(&c);

    let Some(year) = digits(i, 4) else {
        return bad("year");
    };
    i += 4;
    if !lit(i, b'-') {
        return bad("'-' after the year");
    }
    let Some(month) = digits(i + 1, 2).filter(|m| (1..=12).contains(m)) else {
        return bad("month");
    };
    i += 3;
    if !lit(i, b'-') {
        return bad("'-' after the month");
    }
    let Some(day) = digits(i + 1, 2) else {
        return bad("day");
    };
    i += 3;
    if !lit(i, b'T') {
        return bad("'T'");
    }
    i += 1;
    // Go reads the hour ("15") with one or two digits.
    let (hour, n) = match (digits(i, 2), digits(i, 1)) {
        (Some(h), _) => (h, 2),
        (None, Some(h)) => (h, 1),
        _ => return bad("hour"),
    };
    if hour > 23 {
        return bad("hour out of range");
    }
    i += n;
    if !lit(i, b':') || digits(i + 1, 2).is_none_or(|m| m > 59) {
        return bad("minute");
    }
    i += 3;
    if !lit(i, b':') || digits(i + 1, 2).is_none_or(|s| s > 59) {
        return bad("second");
    }
    i += 3;
    // ".000000": a period or comma and exactly six characters that Go's atoi reads as a
    // non-negative number (a sign is allowed there).
    if !(lit(i, b'.') || lit(i, b',')) {
        return bad("fractional seconds");
    }
    let Some(frac) = b.get(i + 1..i + 7) else {
        return bad("fractional seconds");
    };
    let (neg, body) = match frac[0] {
        b'+' => (false, &frac[1..]),
        b'-' => (true, &frac[1..]),
        _ => (false, frac),
    };
    if body.is_empty() || !body.iter().all(u8::is_ascii_digit) {
        return bad("fractional seconds");
    }
    if neg && body.iter().any(|d| *d != b'0') {
        return bad("fractional second out of range");
    }
    i += 7;
    // "Z07:00": Z, or a sign, two digits, ':', two digits (hour at most 24, minute at most 60).
    if lit(i, b'Z') {
        i += 1;
    } else {
        let ok = matches!(b.get(i), Some(b'+' | b'-'))
            && lit(i + 3, b':')
            && digits(i + 1, 2).is_some_and(|h| h <= 24)
            && digits(i + 4, 2).is_some_and(|m| m <= 60);
        if !ok {
            return bad("time zone");
        }
        i += 6;
    }
    if i != b.len() {
        return bad("extra text");
    }
    if day < 1 || day > days_in(month, year) {
        return bad("day out of range");
    }
    Ok(())
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_integers() {
        assert_eq!(go_atoi("1"), Some(1));
        assert_eq!(go_atoi("+1"), Some(1));
        assert_eq!(go_atoi("-0"), Some(0));
        assert_eq!(go_atoi("0001"), Some(1));
        assert_eq!(go_atoi(""), None);
        assert_eq!(go_atoi("+"), None);
        assert_eq!(go_atoi(" 1"), None);
        assert_eq!(go_atoi("1_0"), None);
        assert_eq!(go_atoi("9223372036854775807"), Some(i64::MAX));
        assert_eq!(go_atoi("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(go_atoi("9223372036854775808"), None);
        assert_eq!(go_atoi("٣"), None);
    }

    #[test]
    fn timestamps() {
        let ok = [
            "2024-01-02T15:04:05.000000Z",
            "2024-01-02T15:04:05.123456+02:00",
            "2024-01-02T15:04:05.123456-24:60",
            "2024-02-29T00:00:00.000000Z",
            "2024-01-02T5:04:05.000000Z",
            "2024-01-02T15:04:05,000000Z",
            "2024-01-02T15:04:05.+00000Z",
            "2024-01-02T15:04:05.-00000Z",
        ];
        for t in ok {
            assert!(parse_go_timestamp(t).is_ok(), "{t}");
        }
        let bad = [
            "2024-01-02T15:04:05Z",
            "2024-01-02T15:04:05.000Z",
            "2024-01-02T15:04:05.123456789Z",
            "2024-01-02T15:04:05.000000",
            "2024-01-02T15:04:05.000000+0200",
            "2024-01-02T15:04:05.000000+25:00",
            "2024-01-02 15:04:05.000000Z",
            "2023-02-29T00:00:00.000000Z",
            "2024-13-01T00:00:00.000000Z",
            "2024-01-00T00:00:00.000000Z",
            "2024-01-02T24:00:00.000000Z",
            "2024-01-02T15:60:00.000000Z",
            "2024-01-02T15:04:05.-00001Z",
            "2024-01-02T15:04:05.000000Zx",
            "24-01-02T15:04:05.000000Z",
            "",
        ];
        for t in bad {
            assert!(parse_go_timestamp(t).is_err(), "{t}");
        }
    }
}
