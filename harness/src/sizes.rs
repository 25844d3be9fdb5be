//! Byte sizes given on the command line, read as Nomad's CLI reads them (decimal and binary
//! units), for every kind's size options (`--capacity-min`, `--capture-limit`,
//! `--test-volume-size`, ...).

use crate::error::HarnessError;

/// A byte count as Nomad's CLI reads one ("50MB" is 50,000,000; "50MiB" is 52,428,800),
/// within int64.
pub fn parse_bytes(flag: &str, s: &str) -> Result<i64, HarnessError> {
    let n = s
        .trim()
        .parse::<bytesize::ByteSize>()
        .map_err(|e| HarnessError::Usage(format!("{flag} {s:?} is not a size: {e}")))?
        .as_u64();
    i64::try_from(n)
        .ok()
        .filter(|n| *n < i64::MAX)
        .ok_or_else(|| HarnessError::Usage(format!("{flag} {s:?} is larger than int64")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_like_nomad() {
        assert_eq!(parse_bytes("f", "50MB").unwrap(), 50_000_000);
        assert_eq!(parse_bytes("f", "50MiB").unwrap(), 52_428_800);
        assert_eq!(parse_bytes("f", "100").unwrap(), 100);
        assert!(parse_bytes("f", "lots").is_err());
        assert!(
            parse_bytes("f", "20EiB")
                .unwrap_err()
                .to_string()
                .contains("int64")
        );
    }
}
