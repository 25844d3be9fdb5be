//! What a run prints while it goes on: a progress bar on a terminal, one plain line per clause
//! when not on a terminal or when CI is set, nothing but the verdict with --quiet.
//!
//! Every text printed passes through [`shown`]: secrets redacted, and control characters (a
//! plugin's ANSI escapes, a carriage return) written as `\x1b`, so that nothing a plugin says
//! can clear the screen or forge a verdict. The harness's own colouring (the progress bar's) is
//! added by indicatif around the text, not in it.

use std::io::{IsTerminal as _, Write as _};

use indicatif::{ProgressBar, ProgressStyle};
use nomad_conform_reports::model::Verdict;
use nomad_conform_reports::summary::{Verbosity, case_line};

use crate::recorder::RunStore;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Output {
    pub quiet: bool,
    pub verbose: bool,
}

impl Output {
    pub fn verbosity(self) -> Verbosity {
        match (self.quiet, self.verbose) {
            (true, _) => Verbosity::Quiet,
            (false, true) => Verbosity::Verbose,
            (false, false) => Verbosity::Normal,
        }
    }

    /// A progress bar only for a person watching a terminal.
    fn wants_bar(self) -> bool {
        !self.quiet && std::io::stderr().is_terminal() && std::env::var_os("CI").is_none()
    }
}

/// Progress of one run; finish it before printing the summary.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Print the run's header and report every case as it finishes.
    pub fn start(store: &RunStore, header: &str, total: usize, out: Output, strict: bool) -> Self {
        if out.quiet {
            return Progress { bar: None };
        }
        println!("{}", shown(header));
        if out.wants_bar() {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{bar:30.cyan/blue} {pos}/{len} {elapsed} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let b = bar.clone();
            store.on_case(move |case| {
                b.inc(1);
                b.set_message(case.clause.clone());
                if case.verdict != Verdict::Pass {
                    b.println(shown(&case_line(case, strict)));
                }
            });
            Progress { bar: Some(bar) }
        } else {
            store.on_case(move |case| {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{}", shown(&case_line(case, strict)));
                let _ = stdout.flush();
            });
            Progress { bar: None }
        }
    }

    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `text` as the console shows it: every registered secret redacted
/// ([`crate::secrets::redact`]), then every control character but newline and tab escaped
/// ([`escape_controls`]).
pub fn shown(text: &str) -> String {
    escape_controls(&crate::secrets::redact(text))
}

/// `text` with every control character but newline and tab written out: C0 controls, DEL and
/// C1 controls as `\xNN` (`\x1b` for ESC, the start of every ANSI sequence), and Unicode's
/// bidirectional overrides, which reorder what a line seems to say, as `\u{202e}`.
pub fn escape_controls(text: &str) -> String {
    let needs = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(needs) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !needs(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_not_obeyed() {
        assert_eq!(
            escape_controls("a\x1b[2J\x1b[Hverdict: conformant\r\n\tb\x07\u{9b}31m\u{202e}x\x7f"),
            "a\\x1b[2J\\x1b[Hverdict: conformant\\x0d\n\tb\\x07\\x9b31m\\u{202e}x\\x7f"
        );
        assert_eq!(escape_controls("plain é\nline"), "plain é\nline");
    }
}
