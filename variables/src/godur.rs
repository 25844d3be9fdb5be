//! Go `time.Duration` text, as Nomad puts lock TTLs and delays on the wire.
//!
//! Nomad writes `VariableLock.TTL` and `LockDelay` with Go's `Duration.String()`
//! (`"15s"`, `"1m30s"`, `"1.5s"`, `"24h0m0s"`; zero is written as `""` by the caller) and
//! reads strings with `time.ParseDuration` (contract B.2, `VariableLock.MarshalJSON` /
//! `UnmarshalJSON` in `nomad/structs/variables.go`). Both directions are implemented here
//! from the documented behaviour of Go's `time` package. Values are signed nanoseconds
//! (`i64`), like Go's `time.Duration`.

const NS_PER_SEC: u64 = 1_000_000_000;

/// Formats nanoseconds the way Go's `time.Duration.String()` does.
pub fn format(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    let body = if u < NS_PER_SEC {
        if u < 1_000 {
            format!("{u}ns")
        } else if u < 1_000_000 {
            format!("{}µs", decimal(u, 3))
        } else {
            format!("{}ms", decimal(u, 6))
        }
    } else {
        let whole_secs = u / NS_PER_SEC;
        let secs = format!("{}{}", whole_secs % 60, fraction(u % NS_PER_SEC, 9));
        let total_mins = whole_secs / 60;
        if total_mins == 0 {
            format!("{secs}s")
        } else if total_mins < 60 {
            format!("{total_mins}m{secs}s")
        } else {
            format!("{}h{}m{secs}s", total_mins / 60, total_mins % 60)
        }
    };
    format!("{sign}{body}")
}

/// `value / 10^digits` with the remainder as a trimmed decimal fraction.
fn decimal(value: u64, digits: u32) -> String {
    let scale = 10u64.pow(digits);
    format!("{}{}", value / scale, fraction(value % scale, digits))
}

/// `.ddd` for a remainder of `digits` decimal places, trailing zeros dropped; empty for 0.
fn fraction(rem: u64, digits: u32) -> String {
    if rem == 0 {
        return String::new();
    }
    let padded = format!("{rem:0width$}", width = digits as usize);
    format!(".{}", padded.trim_end_matches('0'))
}

/// Parses a duration the way Go's `time.ParseDuration` does: an optional sign, then one or
/// more `<number><unit>` parts (units `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`); `"0"`
/// alone is allowed. Errors carry Go's message text.
pub fn parse(text: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration \"{text}\"");
    let mut rest = text;
    let mut negative = false;
    if let Some(stripped) = rest.strip_prefix('-') {
        negative = true;
        rest = stripped;
    } else if let Some(stripped) = rest.strip_prefix('+') {
        rest = stripped;
    }
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    const LIMIT: u64 = 1 << 63;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if first != b'.' && !first.is_ascii_digit() {
            return Err(invalid());
        }
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for digit in rest[..int_len].bytes() {
            whole = whole
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit - b'0')))
                .filter(|v| *v <= LIMIT)
                .ok_or_else(invalid)?;
        }
        rest = &rest[int_len..];
        let mut frac: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut frac_len = 0;
        if let Some(after_dot) = rest.strip_prefix('.') {
            frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflowed = false;
            for digit in after_dot[..frac_len].bytes() {
                if overflowed {
                    continue;
                }
                match frac
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(digit - b'0')))
                    .filter(|v| *v <= LIMIT)
                {
                    Some(v) => {
                        frac = v;
                        scale *= 10.0;
                    }
                    None => overflowed = true,
                }
            }
            rest = &after_dot[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return Err(invalid());
        }
        let unit_len: usize = rest
            .chars()
            .take_while(|c| *c != '.' && !c.is_ascii_digit())
            .map(char::len_utf8)
            .sum();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let unit_ns: u64 = match unit {
            "" => return Err(format!("time: missing unit in duration \"{text}\"")),
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => NS_PER_SEC,
            "m" => 60 * NS_PER_SEC,
            "h" => 3_600 * NS_PER_SEC,
            other => {
                return Err(format!(
                    "time: unknown unit \"{other}\" in duration \"{text}\""
                ));
            }
        };
        let mut part = whole
            .checked_mul(unit_ns)
            .filter(|v| *v <= LIMIT)
            .ok_or_else(invalid)?;
        if frac > 0 {
            part = part
                .checked_add((frac as f64 * (unit_ns as f64 / scale)) as u64)
                .filter(|v| *v <= LIMIT)
                .ok_or_else(invalid)?;
        }
        total = total
            .checked_add(part)
            .filter(|v| *v <= LIMIT)
            .ok_or_else(invalid)?;
    }
    if negative {
        Ok((total as i128).wrapping_neg() as i64)
    } else if total > i64::MAX as u64 {
        Err(invalid())
    } else {
        Ok(total as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn formats_like_go() {
        let table: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (2_000_000, "2ms"),
            (100_000_000, "100ms"),
            (1_500_000_000, "1.5s"),
            (15 * S, "15s"),
            (60 * S, "1m0s"),
            (90 * S, "1m30s"),
            (3_600 * S, "1h0m0s"),
            (24 * 3_600 * S, "24h0m0s"),
            (-15 * S, "-15s"),
            (8_640 * S, "2h24m0s"),
        ];
        for (nanos, want) in table {
            assert_eq!(format(*nanos), *want, "format({nanos})");
        }
    }

    #[test]
    fn parses_like_go() {
        let table: &[(&str, i64)] = &[
            ("0", 0),
            ("15s", 15 * S),
            ("1.5s", 1_500_000_000),
            ("1m30s", 90 * S),
            ("24h", 24 * 3_600 * S),
            ("100ms", 100_000_000),
            ("10µs", 10_000),
            ("10us", 10_000),
            ("-2s", -2 * S),
            ("+3s", 3 * S),
            (".5s", 500_000_000),
            ("1h0m0s", 3_600 * S),
        ];
        for (text, want) in table {
            assert_eq!(parse(text), Ok(*want), "parse({text})");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        assert_eq!(
            parse("10"),
            Err("time: missing unit in duration \"10\"".into())
        );
        assert_eq!(
            parse("10x"),
            Err("time: unknown unit \"x\" in duration \"10x\"".into())
        );
        for bad in ["", "-", "s", ".s", "1..s", "abc", "99999999999999999999h"] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn round_trips() {
        for nanos in [1, 999, 1_234_567, 10 * S, 15 * S, 86_399 * S + 5] {
            assert_eq!(parse(&format(nanos)), Ok(nanos));
        }
    }
}
