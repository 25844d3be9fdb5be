//! Command-line interface: one subcommand per plugin kind, plus `list`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "nomad-conform",
    version,
    about = "Conformance tests for HashiCorp Nomad plugins: will Nomad get along with my plugin?",
    long_about = None,
    after_help = "Exit status: 0 every MUST clause passed; 1 a MUST clause failed; 2 usage or \
                  configuration error; 3 the harness failed or nothing could be tested; \
                  130 interrupted."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Test a dynamic host volume plugin (an executable called with fingerprint/create/delete).
    Dhv(Box<DhvArgs>),
    /// List the clauses of a suite: ID, level and title.
    List(ListArgs),
}

/// Flags every suite takes.
#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Write a JUnit XML report to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write the full run record as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run only clauses matching a tag expression, e.g. '@must and not @DHV-CREATE-RESTORE'.
    #[arg(long, value_name = "EXPR")]
    pub tags: Option<String>,
    /// Seed for every generated input; printed by every run, so a run can be repeated.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// How many clauses run at the same time.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub jobs: usize,
    /// Run the feature files in DIR instead of the built-in specs.
    #[arg(long, value_name = "DIR")]
    pub specs: Option<PathBuf>,
    /// Contract profile: a built-in name (nomad-1.10) or a TOML file laid over it.
    #[arg(long, value_name = "NAME|FILE")]
    pub profile: Option<String>,
    /// Count SHOULD failures as failures (exit status 1).
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, Args)]
pub struct DhvArgs {
    /// The plugin executable, as it would sit in Nomad's host_volume_plugin_dir.
    pub plugin: PathBuf,
    /// Directory to make volumes directories in (DHV_VOLUMES_DIR of each clause is a new
    /// directory inside it). Default: the system temporary directory.
    #[arg(long, value_name = "DIR")]
    pub volumes_dir: Option<PathBuf>,
    /// DHV_PARAMETERS for the volumes the suite creates: a JSON object of strings, or null.
    #[arg(long, value_name = "JSON")]
    pub parameters: Option<String>,
    /// Parameters the plugin refuses, used to provoke a failed create.
    #[arg(long, value_name = "JSON")]
    pub failing_parameters: Option<String>,
    /// DHV_CAPACITY_MIN_BYTES for the volumes the suite creates (e.g. 10MiB, 50MB, 1048576).
    #[arg(long, value_name = "BYTES")]
    pub capacity_min: Option<String>,
    /// DHV_CAPACITY_MAX_BYTES for the volumes the suite creates.
    #[arg(long, value_name = "BYTES")]
    pub capacity_max: Option<String>,
    /// Pass the harness's own environment to the plugin as well (Nomad passes only DHV_*).
    #[arg(long)]
    pub inherit_env: bool,
    /// Bytes of stdout/stderr kept per call (head and tail); the rest is counted and dropped.
    #[arg(long, value_name = "BYTES", default_value = "1MiB")]
    pub capture_limit: String,
    /// How many generated volumes DHV-GENERAL-GENERATED-INPUTS tries.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub property_cases: u32,
    #[command(flatten)]
    pub suite: SuiteArgs,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The suite: dhv.
    #[arg(value_parser = ["dhv"])]
    pub kind: String,
    /// List the feature files in DIR instead of the built-in specs.
    #[arg(long, value_name = "DIR")]
    pub specs: Option<PathBuf>,
}
