//! What a run prints depends on where it goes: a progress bar on a terminal, plain lines per
//! clause when stderr is not a terminal or CI is set. The terminal here is a real
//! pseudo-terminal.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs a few DHV clauses against the reference mkdir plugin with stderr on a pseudo-terminal
/// (or, with `ci`, the same under CI=1). Returns stdout and what reached the terminal.
fn run_on_terminal(ci: bool) -> (String, String) {
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-plugins/dhv/mkdir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nomad-conform"));
    cmd.args(["dhv"])
        .arg(&plugin)
        .args([
            "--tags",
            "@DHV-FINGERPRINT-EXIT-ZERO or @DHV-CREATE-EXIT-ZERO or @DHV-DELETE-EXIT-ZERO",
        ])
        .env_remove("CI")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(pty.slave));
    if ci {
        cmd.env("CI", "1");
    }
    let child = cmd.spawn().expect("nomad-conform runs");
    // The child holds the only other copy of the slave now; read the master until it closes.
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut master = std::fs::File::from(pty.master);
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break, // EIO once the last slave closes.
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let out = child.wait_with_output().expect("nomad-conform finishes");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        reader.join().expect("reader"),
    )
}

#[test]
fn a_terminal_gets_a_progress_bar_instead_of_a_line_per_clause() {
    let (stdout, terminal) = run_on_terminal(false);
    // The bar counts clauses ("3/3") and is cleared with terminal control sequences.
    assert!(
        terminal.contains("/3"),
        "no progress count on the terminal: {terminal:?}"
    );
    assert!(
        terminal.contains('\u{1b}'),
        "no control sequences: {terminal:?}"
    );
    // Passing clauses are not listed one by one; the summary still is.
    assert!(!stdout.contains("PASS "), "{stdout}");
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}");
}

#[test]
fn ci_gets_plain_lines_even_on_a_terminal() {
    let (stdout, terminal) = run_on_terminal(true);
    assert!(
        !terminal.contains('\u{1b}'),
        "control sequences under CI: {terminal:?}"
    );
    assert_eq!(stdout.matches("PASS ").count(), 3, "{stdout}");
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}");
}
