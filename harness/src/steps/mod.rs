//! Step definitions, one module per plugin kind.
pub mod csi;
pub mod dhv;
pub mod driver;
pub mod lock;
pub mod variables;

/// expected / seen / reproduce, with continuation lines indented.
pub fn failure_text(expected: &str, seen: &str, reproduce: &[String]) -> String {
    let indent = |s: &str| s.replace('\n', "\n          ");
    let mut out = format!("expected: {}\nseen:     {}", indent(expected), indent(seen));
    if !reproduce.is_empty() {
        out.push_str("\nreproduce:");
        for r in reproduce {
            out.push_str("\n  ");
            out.push_str(r);
        }
    }
    out
}
