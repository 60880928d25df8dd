//! `loadgen`: see `loadgen --help` and the library documentation.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = loadgen::cli::Cli::parse();
    match loadgen::cli::execute(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<loadgen::UsageError>().is_some() {
                ExitCode::from(loadgen::exit::USAGE)
            } else {
                ExitCode::from(loadgen::exit::ERROR)
            }
        }
    }
}
