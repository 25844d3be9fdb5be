//! What a run prints while it goes on: a progress bar on a terminal, one plain line per clause
//! when not on a terminal or when CI is set, nothing but the verdict with --quiet.

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
        println!("{}", crate::secrets::redact(header));
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
                    b.println(crate::secrets::redact(&case_line(case, strict)));
                }
            });
            Progress { bar: Some(bar) }
        } else {
            store.on_case(move |case| {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(
                    stdout,
                    "{}",
                    crate::secrets::redact(&case_line(case, strict))
                );
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
