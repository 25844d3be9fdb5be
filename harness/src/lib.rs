//! nomad-conform: a conformance harness for HashiCorp Nomad plugins.
//!
//! Specs (Gherkin, in `specs/`) say what a plugin must do; [`run`] drives a real plugin through
//! them with cucumber; [`recorder`] keeps everything that happened; the writers of the
//! `nomad-conform-reports` crate render the record.

pub mod app;
pub mod background_removal;
pub mod capture;
pub mod clause_docs;
pub mod clauses;
pub mod cli;
pub mod command_line;
pub mod config;
pub mod console;
pub mod crash;
pub mod disk_guard;
pub mod error;
pub mod escapees;
pub mod exec_signals;
pub mod executable;
pub mod explain;
pub mod fleet;
#[doc(hidden)]
pub mod fuzz_api;
pub mod goversion;
pub mod hex;
pub mod kinds;
pub mod known_failures;
pub mod ledger;
pub mod loop_devices;
pub mod loop_watch;
pub mod mounts;
pub mod nomad_api;
pub mod plugins;
pub mod process;
pub mod procfs;
pub mod profile;
pub mod recorder;
pub mod report;
pub mod run;
pub mod safe_remove;
pub mod secrets;
pub mod shell;
pub mod sizes;
pub mod specs;
pub mod step_dispatch;
pub mod steps;
pub mod utf8_paths;
pub mod world;

/// A duration as a short human figure: `850ms`, `1.25s`.
pub fn fmt_duration(d: std::time::Duration) -> String {
    nomad_conform_reports::transcript::fmt_ms(d.as_secs_f64() * 1000.0)
}
