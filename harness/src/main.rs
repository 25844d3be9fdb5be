//! The `nomad-conform` binary: parse the command line (and config file), run, exit with the
//! outcome's code.

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    // The stand-in for the Nomad agent that DHV plugin calls run under (plugins::dhv::agent):
    // the harness starts its own binary for it, before any configuration is read.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if nomad_conform::plugins::dhv::agent::is_agent(&raw) {
        let code = nomad_conform::plugins::dhv::agent::main(&raw);
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(125));
    }
    let argv = match nomad_conform::config::argv_with_config(std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!(
                "{}",
                nomad_conform::console::shown(&format!("nomad-conform: error: {e}"))
            );
            return std::process::ExitCode::from(2);
        }
    };
    let cli = nomad_conform::cli::Cli::parse_from(argv);
    let code = nomad_conform::app::run(cli);
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(3))
}
