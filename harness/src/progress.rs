//! Progress output while a run goes on: one plain line per finished clause.

use std::io::Write as _;

use nomad_conform_reports::summary::case_line;

use crate::recorder::RunStore;

pub fn attach(store: &RunStore, strict: bool) {
    store.on_case(move |case| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", case_line(case, strict));
        let _ = out.flush();
    });
}
