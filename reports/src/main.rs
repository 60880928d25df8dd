//! `report`: show, render, merge and compare loadgen reports (see
//! [`reports::cli`]). Exit codes: 0 success; 1 `compare` or `gates` found a
//! regression; 2 anything else went wrong (bad arguments, unreadable or
//! incompatible reports), so CI can tell a slower commit from a broken pipeline.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(reports::cli::status(std::env::args_os()))
}
