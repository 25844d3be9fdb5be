//! Step definitions, one module per plugin kind.
pub mod csi;
pub mod dhv;
pub mod driver;
pub mod lock;
pub mod variables;

/// The most of what was seen a failure quotes: a plugin's 50 MB answer is in the call's
/// captured output (bounded by `--capture-limit`), not copied into the reason again.
pub const MAX_SEEN_BYTES: usize = 16 * 1024;

/// expected / seen / reproduce, with continuation lines indented; `seen` is cut at
/// [`MAX_SEEN_BYTES`] (on a character boundary), saying how much was left out.
pub fn failure_text(expected: &str, seen: &str, reproduce: &[String]) -> String {
    let indent = |s: &str| s.replace('\n', "\n          ");
    let head = nomad_conform_reports::text::head(seen, MAX_SEEN_BYTES);
    let seen = if head.len() < seen.len() {
        format!(
            "{head}… ({} more bytes; the whole output is in the call's captured output)",
            seen.len() - head.len()
        )
    } else {
        seen.to_string()
    };
    let mut out = format!(
        "expected: {}\nseen:     {}",
        indent(expected),
        indent(&seen)
    );
    if !reproduce.is_empty() {
        out.push_str("\nreproduce:");
        for r in reproduce {
            out.push_str("\n  ");
            out.push_str(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_seen_is_bounded() {
        let long = "é".repeat(MAX_SEEN_BYTES);
        let text = failure_text("x", &long, &[]);
        assert!(text.len() < MAX_SEEN_BYTES + 200, "{}", text.len());
        assert!(text.contains(&format!("… ({} more bytes", long.len() - MAX_SEEN_BYTES)));
        let short = failure_text("a", "b\nc", &["run it".into()]);
        assert_eq!(
            short,
            "expected: a\nseen:     b\n          c\nreproduce:\n  run it"
        );
    }
}
