//! From parsed command line to exit status: run a suite or re-render reports, write the report
//! files, print the summary.

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::CommandFactory as _;
use nomad_conform_reports::model::{RunRecord, Shard};

use crate::cli::{
    Cli, CollectArgs, Command, CsiArgs, DhvArgs, DriverArgs, ExplainArgs, ExplainFormat,
    FleetCommand, ListArgs, ListFormat, LockArgs, ReportArgs, ReportFiles, SuiteArgs,
    VariablesArgs,
};
use crate::console::Output;
use crate::error::{HarnessError, exit, exit_code_for};
use crate::kinds::csi;
use crate::kinds::dhv;
use crate::kinds::driver;
use crate::kinds::lock;
use crate::kinds::variables;
use crate::known_failures::KnownFailures;
use crate::report::Protected;
use crate::run::{SuiteOptions, run_suite};

/// Run the command; every error is reported here, so the caller only exits with the code.
pub fn run(cli: Cli) -> i32 {
    // Secrets given on the command line or in the environment (NOMAD_TOKEN, and every variable
    // whose name looks secret: a plugin run with --inherit-env may print them) never reach a
    // report or the console (see crate::secrets).
    crate::secrets::register_from_words(&command_line());
    crate::secrets::register_env(std::env::vars_os().map(|(k, v)| {
        (
            k.to_string_lossy().into_owned(),
            v.to_string_lossy().into_owned(),
        )
    }));
    let output = Output {
        quiet: cli.quiet,
        verbose: cli.verbose,
    };
    let result = match cli.command {
        Command::Dhv(args) => runtime().and_then(|rt| rt.block_on(run_dhv(*args, output))),
        Command::Csi(args) => runtime().and_then(|rt| rt.block_on(run_csi(*args, output))),
        Command::Driver(args) => runtime().and_then(|rt| rt.block_on(run_driver(*args, output))),
        Command::Lock(args) => runtime().and_then(|rt| rt.block_on(run_lock(*args, output))),
        Command::Variables(args) => {
            runtime().and_then(|rt| rt.block_on(run_variables(*args, output)))
        }
        Command::List(args) => list(&args),
        Command::Explain(args) => explain(&args),
        Command::Report(args) => report(&args, output),
        Command::Fleet(args) => match args.command {
            FleetCommand::Collect(args) => {
                runtime().and_then(|rt| rt.block_on(fleet_collect(*args, output)))
            }
            FleetCommand::CsiNode(args) => {
                runtime().and_then(|rt| crate::fleet::csi_node::run(&args, &rt))
            }
        },
        Command::Probe(args) => Ok(crate::plugins::lock::probe::run(&args)),
        Command::Manpage { out_dir } => manpage(out_dir.as_deref()),
        Command::Completions(args) => {
            clap_complete::generate(
                args.shell,
                &mut Cli::command(),
                "nomad-conform",
                &mut std::io::stdout(),
            );
            Ok(0)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "nomad-conform: error: {}",
                crate::console::shown(&e.to_string())
            );
            e.exit_code()
        }
    }
}

/// The command line as text, for secrets and the record: read with `args_os` (a path that is
/// not UTF-8 is a path like any other), and shown lossily where it is not UTF-8.
fn command_line() -> Vec<String> {
    std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

fn runtime() -> Result<tokio::runtime::Runtime, HarnessError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| HarnessError::Internal(format!("failed to start the async runtime: {e}")))
}

/// `M/N` with 1 <= M <= N.
pub fn parse_shard(s: &str) -> Result<Shard, HarnessError> {
    let bad = || {
        HarnessError::Usage(format!(
            "--shard {s:?}: expected M/N with 1 <= M <= N, e.g. 2/3"
        ))
    };
    let (m, n) = s.split_once('/').ok_or_else(bad)?;
    let index: u32 = m.trim().parse().map_err(|_| bad())?;
    let total: u32 = n.trim().parse().map_err(|_| bad())?;
    if index == 0 || total == 0 || index > total {
        return Err(bad());
    }
    Ok(Shard { index, total })
}

fn suite_options(s: &SuiteArgs, output: Output) -> Result<SuiteOptions, HarnessError> {
    Ok(SuiteOptions {
        specs: s.specs.clone(),
        profile: s.profile.clone(),
        tags: s.tags.clone(),
        seed: s.seed,
        jobs: s.jobs,
        strict: s.strict,
        shard: s.shard.as_deref().map(parse_shard).transpose()?,
        output,
        command_line: command_line(),
    })
}

async fn run_dhv(args: DhvArgs, output: Output) -> Result<i32, HarnessError> {
    let common = suite_options(&args.suite, output)?;
    let known = known_failures("dhv", &args.suite)?;
    let plugin = match (&args.plugin, &args.plugin_dir) {
        (Some(_), Some(_)) => {
            return Err(HarnessError::Usage(
                "give either a PLUGIN or --plugin-dir DIR, not both".into(),
            ));
        }
        (None, None) => {
            return Err(HarnessError::Usage(
                "give the plugin to test (nomad-conform dhv PLUGIN) or a directory of plugins \
                 (--plugin-dir DIR)"
                    .into(),
            ));
        }
        (None, Some(_)) => {
            let r = &args.suite.reports;
            if r.junit.is_some() || r.html.is_some() || r.json.is_some() {
                return Err(HarnessError::Usage(
                    "with --plugin-dir, reports go to --out-dir DIR (<plugin>.json, .xml and \
                     .html for each plugin); --junit, --html and --json name one plugin's files"
                        .into(),
                ));
            }
            PathBuf::new()
        }
        (Some(p), None) => {
            if args.out_dir.is_some() {
                return Err(HarnessError::Usage(
                    "--out-dir is for --plugin-dir; for one plugin use --junit, --html and \
                     --json"
                        .into(),
                ));
            }
            p.clone()
        }
    };
    if args.plugin_dir.is_none() {
        crate::report::check_files(
            &args.suite.reports,
            &[Protected::new(&plugin, "the plugin")],
        )?;
    }
    if let Some(dir) = &args.plugin_dir {
        if known.is_some() {
            return Err(HarnessError::Usage(
                "--known-failures names one plugin's known failures; it does not apply to \
                 --plugin-dir"
                    .into(),
            ));
        }
        return dhv::plugin_dir::run(&common, &args, dir, args.out_dir.as_deref(), output).await;
    }
    let record = run_suite(
        &common,
        &dhv::DhvSuite {
            args: &args,
            plugin: &plugin,
            common: &common,
        },
    )
    .await?;
    finish_known(record, known.as_ref(), &args.suite.reports, output)
}

async fn fleet_collect(args: CollectArgs, output: Output) -> Result<i32, HarnessError> {
    let timeout = humantime::parse_duration(args.timeout.trim()).map_err(|e| {
        HarnessError::Usage(format!(
            "--timeout {:?} is not a duration: {e}",
            args.timeout
        ))
    })?;
    if args.job.trim().is_empty() {
        return Err(HarnessError::Usage("--job must name a job".into()));
    }
    crate::report::check_files(&args.reports, &[])?;
    let api = crate::nomad_api::settings::nomad_cli_from_env(&args.api)?;
    api.warn();
    let opts = crate::fleet::CollectOptions {
        job: args.job.clone(),
        api,
        records_dir: args.records_dir.clone(),
        timeout,
        csi_plugin: args.csi_plugin.clone().filter(|p| !p.trim().is_empty()),
    };
    crate::fleet::run(&opts, &args.reports, output).await
}

async fn run_csi(args: CsiArgs, output: Output) -> Result<i32, HarnessError> {
    let common = suite_options(&args.suite, output)?;
    let known = known_failures("csi", &args.suite)?;
    let launched: Vec<Protected> = args
        .launch
        .as_deref()
        .and_then(|l| Protected::program_of(l, "the launched binary"))
        .into_iter()
        .collect();
    crate::report::check_files(&args.suite.reports, &launched)?;
    let record = run_suite(
        &common,
        &csi::CsiSuite {
            args: &args,
            common: &common,
        },
    )
    .await?;
    finish_known(record, known.as_ref(), &args.suite.reports, output)
}

async fn run_driver(args: DriverArgs, output: Output) -> Result<i32, HarnessError> {
    let common = suite_options(&args.suite, output)?;
    let known = known_failures("driver", &args.suite)?;
    crate::report::check_files(
        &args.suite.reports,
        &[Protected::new(&args.plugin, "the plugin")],
    )?;
    let record = run_suite(
        &common,
        &driver::DriverSuite {
            args: &args,
            common: &common,
        },
    )
    .await?;
    finish_known(record, known.as_ref(), &args.suite.reports, output)
}

async fn run_lock(args: LockArgs, output: Output) -> Result<i32, HarnessError> {
    let common = suite_options(&args.suite, output)?;
    let known = known_failures("lock", &args.suite)?;
    let programs: Vec<Protected> = [&args.client, &args.sidecar]
        .into_iter()
        .flatten()
        .filter_map(|c| Protected::program_of(c, "the client's program"))
        .collect();
    crate::report::check_files(&args.suite.reports, &programs)?;
    let record = run_suite(
        &common,
        &lock::LockSuite {
            args: &args,
            common: &common,
        },
    )
    .await?;
    finish_known(record, known.as_ref(), &args.suite.reports, output)
}

async fn run_variables(args: VariablesArgs, output: Output) -> Result<i32, HarnessError> {
    let common = suite_options(&args.suite, output)?;
    let known = known_failures("variables", &args.suite)?;
    crate::report::check_files(&args.suite.reports, &[])?;
    let suite = variables::VariablesSuite::from_args(&args, &common)?;
    let record = run_suite(&common, &suite).await?;
    finish_known(record, known.as_ref(), &args.suite.reports, output)
}

/// The list of known failures a run was given, read and checked against every clause of the
/// suite (not only the selected ones) before anything runs.
fn known_failures(kind: &str, s: &SuiteArgs) -> Result<Option<KnownFailures>, HarnessError> {
    let Some(path) = &s.known_failures else {
        return Ok(None);
    };
    load_known_failures(kind, s.specs.clone(), path).map(Some)
}

fn load_known_failures(
    kind: &str,
    specs: Option<PathBuf>,
    path: &std::path::Path,
) -> Result<KnownFailures, HarnessError> {
    let opts = SuiteOptions {
        specs,
        ..SuiteOptions::default()
    };
    let (_, clauses, _) = crate::run::load_suite(kind, &opts)?;
    let ids: BTreeSet<String> = clauses.iter().map(|c| c.id.clone()).collect();
    KnownFailures::load(path, &ids)
}

/// [`finish`], with the list of known failures applied to the record first.
fn finish_known(
    mut record: RunRecord,
    known: Option<&KnownFailures>,
    files: &ReportFiles,
    output: Output,
) -> Result<i32, HarnessError> {
    if let Some(known) = known {
        known.apply(&mut record);
    }
    finish(&record, files, output)
}

/// Write the requested reports and print the summary. Every report is attempted even if one
/// fails, so an interrupted run still leaves what it can.
fn finish(record: &RunRecord, files: &ReportFiles, output: Output) -> Result<i32, HarnessError> {
    let mut first_error = None;
    let writes: [(&Option<std::path::PathBuf>, WriteFn); 3] = [
        (&files.junit, crate::report::write_junit),
        (&files.html, crate::report::write_html),
        (&files.json, crate::report::write_json),
    ];
    for (path, write) in writes {
        if let Some(path) = path
            && let Err(e) = write(record, path)
        {
            eprintln!(
                "nomad-conform: error: {}",
                crate::console::shown(&e.to_string())
            );
            first_error.get_or_insert(e);
        }
    }
    println!(
        "{}",
        crate::console::shown(&nomad_conform_reports::summary::render(
            record,
            output.verbosity()
        ))
    );
    match first_error {
        Some(e) => Err(e),
        None => Ok(exit_code_for(record)),
    }
}

type WriteFn = fn(&RunRecord, &std::path::Path) -> Result<(), HarnessError>;

fn report(args: &ReportArgs, output: Output) -> Result<i32, HarnessError> {
    if args.compare && args.records.len() != 2 {
        return Err(HarnessError::Usage(
            "--compare takes two records: BEFORE.json AFTER.json".into(),
        ));
    }
    if args.compare && args.reports.json.is_some() {
        return Err(HarnessError::Usage(
            "--compare writes --html and --junit; the records themselves are the JSON".into(),
        ));
    }
    if args.records.len() > 1 && !args.merge && !args.compare {
        return Err(HarnessError::Usage(
            "several records given: add --merge to join them into one report".into(),
        ));
    }
    let inputs: Vec<Protected> = args
        .records
        .iter()
        .map(|p| Protected::new(p, "a record this command reads"))
        .collect();
    let mut targets = crate::report::named(&args.reports);
    if let Some(p) = &args.write_known_failures {
        targets.push(("--write-known-failures", p));
    }
    crate::report::check_targets(&targets, &inputs)?;
    let mut records = Vec::new();
    for path in &args.records {
        let text = std::fs::read_to_string(path)
            .map_err(|e| HarnessError::Usage(format!("failed to read {}: {e}", path.display())))?;
        let record = nomad_conform_reports::json::parse(&text)
            .map_err(|e| HarnessError::Usage(format!("{}: {e}", path.display())))?;
        records.push(record);
    }
    let known = match &args.known_failures {
        // The kind of the (first) record names the suite whose clauses the list may name.
        Some(path) => Some(load_known_failures(&records[0].kind, None, path)?),
        None => None,
    };
    for r in &mut records {
        r.strict |= args.strict;
        if let Some(k) = &known {
            k.apply(r);
        }
    }
    if args.compare {
        return compare(&records[0], &records[1], &args.reports);
    }
    let record = if args.merge {
        nomad_conform_reports::merge::merge(records)
            .map_err(|e| HarnessError::Usage(e.to_string()))?
    } else {
        records.remove(0)
    };
    if let Some(path) = &args.write_known_failures {
        let list = crate::known_failures::write_list(&record);
        nomad_conform_reports::write_atomically(path, &list).map_err(|e| {
            HarnessError::Internal(format!(
                "failed to write the list of known failures {}: {e}",
                path.display()
            ))
        })?;
    }
    finish(&record, &args.reports, output)
}

/// `report --compare BEFORE AFTER`: what changed, printed and written as asked; exit status 1
/// when something got worse.
fn compare(
    before: &RunRecord,
    after: &RunRecord,
    files: &ReportFiles,
) -> Result<i32, HarnessError> {
    use nomad_conform_reports::compare;
    let c = compare::compare(before, after).map_err(|e| HarnessError::Usage(e.to_string()))?;
    let write = |path: &Option<PathBuf>, what: &str, text: Result<String, String>| {
        let Some(path) = path else { return Ok(()) };
        let text = text.map_err(|e| HarnessError::Internal(format!("{what}: {e}")))?;
        nomad_conform_reports::write_atomically(path, &text).map_err(|e| {
            HarnessError::Internal(format!("failed to write {what} {}: {e}", path.display()))
        })
    };
    write(
        &files.html,
        "the HTML comparison",
        c.html().map_err(|e| e.to_string()),
    )?;
    write(
        &files.junit,
        "the JUnit comparison",
        c.junit().map_err(|e| e.to_string()),
    )?;
    println!("{}", crate::console::shown(&c.text()));
    Ok(if c.is_worse() {
        exit::NOT_CONFORMANT
    } else {
        exit::CONFORMANT
    })
}

fn explain(args: &ExplainArgs) -> Result<i32, HarnessError> {
    let found = crate::explain::find(&args.clause)?;
    match args.format {
        ExplainFormat::Text => println!("{}", crate::explain::to_text(&found)),
        ExplainFormat::Json => {
            let text = serde_json::to_string_pretty(&crate::explain::to_json(&found))
                .map_err(|e| HarnessError::Internal(format!("failed to write JSON: {e}")))?;
            println!("{text}");
        }
    }
    Ok(0)
}

fn list(args: &ListArgs) -> Result<i32, HarnessError> {
    let opts = SuiteOptions {
        specs: args.specs.clone(),
        ..SuiteOptions::default()
    };
    let (_, clauses, _) = crate::run::load_suite(&args.kind, &opts)?;
    match args.format {
        ListFormat::Text => {
            let width = clauses.iter().map(|c| c.id.len()).max().unwrap_or(0);
            for c in clauses.iter() {
                println!("{:<width$}  {:<6}  {}", c.id, c.level.as_str(), c.title);
            }
        }
        ListFormat::Json => {
            let items: Vec<serde_json::Value> = clauses
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "id": c.id,
                        "level": c.level,
                        "title": c.title,
                        "text": c.text,
                        "basis": c.basis,
                        "kind": c.kind,
                        "operation": c.operation,
                        "file": c.key.file,
                        "line": c.key.line,
                        "tags": c.tags,
                    })
                })
                .collect();
            let text = serde_json::to_string_pretty(&items)
                .map_err(|e| HarnessError::Internal(format!("failed to write JSON: {e}")))?;
            println!("{text}");
        }
        ListFormat::Markdown => {
            print!("{}", crate::clause_docs::markdown(&args.kind, &clauses));
        }
    }
    Ok(0)
}

/// The man pages (clap_mangen) the Debian package ships: the main page on stdout, or the page of
/// every visible command written to `out_dir`, which the main page's SUBCOMMANDS section names.
fn manpage(out_dir: Option<&std::path::Path>) -> Result<i32, HarnessError> {
    let cmd = Cli::command().disable_help_subcommand(true);
    match out_dir {
        Some(dir) => clap_mangen::generate_to(cmd, dir),
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout()),
    }
    .map(|()| 0)
    .map_err(|e| HarnessError::Internal(format!("writing the man page: {e}")))
}
