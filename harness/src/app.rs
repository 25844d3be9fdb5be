//! From parsed command line to exit status: run the suite, write the reports, print the summary.

use crate::cli::{Cli, Command, DhvArgs, ListArgs, SuiteArgs};
use crate::error::{HarnessError, exit_code_for};
use crate::kinds::dhv::{self, DhvOptions};
use crate::run::SuiteOptions;
use nomad_conform_reports::model::RunRecord;

/// Run the command; every error is reported here, so the caller only exits with the code.
pub fn run(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Dhv(args) => runtime().and_then(|rt| rt.block_on(run_dhv(*args))),
        Command::List(args) => list(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("nomad-conform: error: {e}");
            e.exit_code()
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, HarnessError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| HarnessError::Internal(format!("failed to start the async runtime: {e}")))
}

fn suite_options(s: &SuiteArgs) -> SuiteOptions {
    SuiteOptions {
        specs: s.specs.clone(),
        profile: s.profile.clone(),
        tags: s.tags.clone(),
        seed: s.seed,
        jobs: s.jobs,
        strict: s.strict,
        command_line: std::env::args().collect(),
    }
}

async fn run_dhv(args: DhvArgs) -> Result<i32, HarnessError> {
    let common = suite_options(&args.suite);
    let capture = dhv::parse_bytes("--capture-limit", &args.capture_limit)?;
    let opts = DhvOptions {
        plugin: args.plugin.clone(),
        volumes_dir: args.volumes_dir.clone(),
        parameters: args.parameters.clone(),
        failing_parameters: args.failing_parameters.clone(),
        capacity_min: args.capacity_min.clone(),
        capacity_max: args.capacity_max.clone(),
        inherit_env: args.inherit_env,
        capture_limit: usize::try_from(capture).unwrap_or(usize::MAX),
        property_cases: args.property_cases,
    };
    let record = dhv::run(&common, &opts).await?;
    finish(&record, &args.suite)
}

/// Write the requested reports and print the summary. Reports are written before anything can
/// fail, so an interrupted run still leaves its partial report.
fn finish(record: &RunRecord, suite: &SuiteArgs) -> Result<i32, HarnessError> {
    let mut write_error = None;
    if let Some(path) = &suite.junit
        && let Err(e) = crate::report::write_junit(record, path)
    {
        write_error = Some(e);
    }
    if let Some(path) = &suite.json
        && let Err(e) = crate::report::write_json(record, path)
    {
        write_error = Some(e);
    }
    println!("{}", nomad_conform_reports::summary::render(record));
    match write_error {
        Some(e) => Err(e),
        None => Ok(exit_code_for(record)),
    }
}

fn list(args: &ListArgs) -> Result<i32, HarnessError> {
    let opts = SuiteOptions {
        specs: args.specs.clone(),
        ..SuiteOptions::default()
    };
    let (_, clauses, _) = crate::run::load_suite(&args.kind, &opts)?;
    let width = clauses.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in clauses.iter() {
        println!("{:<width$}  {:<6}  {}", c.id, c.level.as_str(), c.title);
    }
    Ok(0)
}
