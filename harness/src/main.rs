//! The `nomad-conform` binary: parse the command line, run, exit with the outcome's code.

use clap::Parser as _;

fn main() -> std::process::ExitCode {
    let cli = nomad_conform::cli::Cli::parse();
    let code = nomad_conform::app::run(cli);
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(3))
}
