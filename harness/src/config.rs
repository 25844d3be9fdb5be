//! `nomad-conform.toml`: settings for flags that were given neither on the command line nor in
//! a `NOMAD_CONFORM_*` variable.
//!
//! Keys are the long flag names. Global flags (`quiet`, `verbose`) sit at the top level; the
//! flags of a suite sit in its table:
//!
//! ```toml
//! quiet = false
//!
//! [dhv]
//! plugin = "/opt/nomad/host_volume_plugins/my-plugin"
//! parameters = '{"mode": "0755"}'
//! capacity-max = "1GiB"
//! junit = "reports/dhv.xml"
//! ```
//!
//! The file is turned into extra command-line arguments, appended only for flags whose value
//! would otherwise come from a default; clap then parses as usual. So the command line beats the
//! environment, which beats the file, which beats the defaults.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, Command, CommandFactory as _};

use crate::cli::Cli;
use crate::error::HarnessError;

pub const DEFAULT_FILE: &str = "nomad-conform.toml";

/// The command line with the settings of the config file appended.
pub fn argv_with_config(argv: Vec<OsString>) -> Result<Vec<OsString>, HarnessError> {
    let cmd = Cli::command();
    // A first, lenient parse: which flags were given, and where is the config file?
    let Ok(matches) = cmd.clone().ignore_errors(true).try_get_matches_from(&argv) else {
        return Ok(argv);
    };
    let explicit = matches.get_one::<PathBuf>("config").cloned();
    let path = match explicit {
        Some(p) => p,
        None if Path::new(DEFAULT_FILE).is_file() => PathBuf::from(DEFAULT_FILE),
        None => return Ok(argv),
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        HarnessError::Usage(format!(
            "failed to read config file {}: {e}",
            path.display()
        ))
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        HarnessError::Usage(format!(
            "failed to parse config file {}: {}",
            path.display(),
            e.message()
        ))
    })?;
    let extra = extra_args(&cmd, &matches, &table, &path)?;
    let mut argv = argv;
    argv.extend(extra);
    Ok(argv)
}

fn extra_args(
    cmd: &Command,
    matches: &ArgMatches,
    table: &toml::Table,
    path: &Path,
) -> Result<Vec<OsString>, HarnessError> {
    let shown = path.display();
    let sub = matches.subcommand();
    let mut out = Vec::new();
    for (key, value) in table {
        if let toml::Value::Table(section) = value {
            let Some(sub_cmd) = cmd.find_subcommand(key) else {
                return Err(HarnessError::Usage(format!(
                    "{shown}: unknown section [{key}]"
                )));
            };
            // Only the running subcommand's section applies.
            if let Some((name, sub_matches)) = sub
                && name == key
            {
                out.extend(section_args(sub_cmd, sub_matches, section, key, path)?);
            }
        } else {
            out.extend(arg_for(cmd, matches, key, value, "the top level", path)?);
        }
    }
    Ok(out)
}

/// The arguments of a subcommand's section; a table inside it is the section of one of its own
/// subcommands (`[fleet.collect]`), applied when that one runs.
fn section_args(
    cmd: &Command,
    matches: &ArgMatches,
    section: &toml::Table,
    place: &str,
    path: &Path,
) -> Result<Vec<OsString>, HarnessError> {
    let mut out = Vec::new();
    for (k, v) in section {
        if let toml::Value::Table(inner) = v
            && let Some(inner_cmd) = cmd.find_subcommand(k)
        {
            if let Some((name, inner_matches)) = matches.subcommand()
                && name == k
            {
                out.extend(section_args(
                    inner_cmd,
                    inner_matches,
                    inner,
                    &format!("{place}.{k}"),
                    path,
                )?);
            }
            continue;
        }
        out.extend(arg_for(cmd, matches, k, v, &format!("[{place}]"), path)?);
    }
    Ok(out)
}

/// The arguments a setting stands for, or none if the flag already has a value from the
/// command line or the environment.
fn arg_for(
    cmd: &Command,
    matches: &ArgMatches,
    key: &str,
    value: &toml::Value,
    place: &str,
    path: &Path,
) -> Result<Vec<OsString>, HarnessError> {
    let shown = path.display();
    let Some(arg) = cmd
        .get_arguments()
        .find(|a| a.get_long() == Some(key) || (a.is_positional() && a.get_id() == key))
    else {
        return Err(HarnessError::Usage(format!(
            "{shown}: unknown setting {key:?} in {place}"
        )));
    };
    if matches!(
        matches.value_source(arg.get_id().as_str()),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    ) {
        return Ok(Vec::new());
    }
    let switch = matches!(arg.get_action(), clap::ArgAction::SetTrue);
    let values: Vec<String> = match value {
        // A switch: present or absent.
        toml::Value::Boolean(b) if switch => {
            return Ok(if *b {
                vec![OsString::from(format!("--{key}"))]
            } else {
                Vec::new()
            });
        }
        toml::Value::Boolean(b) => vec![b.to_string()],
        toml::Value::String(s) => vec![s.clone()],
        toml::Value::Integer(i) => vec![i.to_string()],
        toml::Value::Float(f) => vec![f.to_string()],
        toml::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        other => {
            return Err(HarnessError::Usage(format!(
                "{shown}: setting {key:?} in {place} cannot be {}",
                other.type_str()
            )));
        }
    };
    let mut out = Vec::new();
    for v in values {
        if arg.is_positional() {
            out.push(OsString::from(v));
        } else {
            out.push(OsString::from(format!("--{key}={v}")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::Command as Sub;

    fn with_config(config: &str, args: &[&str]) -> Result<Cli, String> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, config).unwrap();
        let mut argv: Vec<OsString> = vec!["nomad-conform".into(), "--config".into(), file.into()];
        argv.extend(args.iter().map(OsString::from));
        let argv = argv_with_config(argv).map_err(|e| e.to_string())?;
        Cli::try_parse_from(argv).map_err(|e| e.to_string())
    }

    fn dhv(cli: &Cli) -> &crate::cli::DhvArgs {
        match &cli.command {
            Sub::Dhv(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn file_fills_in_what_flags_leave_out() {
        let cli = with_config(
            "quiet = true\n[dhv]\nplugin = \"/p\"\ncapacity-max = \"1GiB\"\njobs = 3\ninherit-env = true\ntags = \"@must\"\n",
            &["dhv", "--tags", "@should"],
        )
        .unwrap();
        assert!(cli.quiet);
        let a = dhv(&cli);
        assert_eq!(a.plugin, Some(PathBuf::from("/p")));
        assert_eq!(a.capacity_max.as_deref(), Some("1GiB"));
        assert_eq!(a.suite.jobs, 3);
        assert!(a.inherit_env);
        // The command line wins.
        assert_eq!(a.suite.tags.as_deref(), Some("@should"));
    }

    #[test]
    fn unknown_settings_are_errors() {
        let e = with_config("[dhv]\ncapacity-maxx = \"1\"\n", &["dhv", "/p"]).unwrap_err();
        assert!(
            e.contains("unknown setting \"capacity-maxx\" in [dhv]"),
            "{e}"
        );
        let e = with_config("[nope]\nx = 1\n", &["dhv", "/p"]).unwrap_err();
        assert!(e.contains("unknown section [nope]"), "{e}");
        let e = with_config("[dhv\n", &["dhv", "/p"]).unwrap_err();
        assert!(e.contains("failed to parse config file"), "{e}");
    }

    #[test]
    fn other_sections_do_not_apply() {
        let cli = with_config("[list]\nformat = \"json\"\n", &["dhv", "/p"]).unwrap();
        assert_eq!(dhv(&cli).suite.jobs, 8);
    }

    #[test]
    fn nested_sections_fill_in_a_subcommand_of_a_subcommand() {
        let cli = with_config(
            "[fleet.collect]\nnomad-addr = \"https://nomad.example:4646\"\nca-cert = \"/etc/nomad.d/ca.pem\"\ntls-skip-verify = true\n",
            &["fleet", "collect", "--ca-cert", "/flag/ca.pem"],
        )
        .unwrap();
        let Sub::Fleet(f) = &cli.command else {
            panic!("{cli:?}")
        };
        let crate::cli::FleetCommand::Collect(c) = &f.command else {
            panic!("{f:?}")
        };
        assert_eq!(
            c.api.nomad_addr.as_deref(),
            Some("https://nomad.example:4646")
        );
        // The flag beats the file.
        assert_eq!(c.api.ca_cert, Some(PathBuf::from("/flag/ca.pem")));
        assert!(c.api.tls_skip_verify);
        // An unknown key inside the nested section is still refused.
        let e = with_config("[fleet.collect]\nnope = 1\n", &["fleet", "collect"]).unwrap_err();
        assert!(
            e.contains("unknown setting \"nope\" in [fleet.collect]"),
            "{e}"
        );
    }
}
