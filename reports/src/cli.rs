//! The `report` command line: show, render, merge and compare loadgen reports.
//! The binary (`src/main.rs`) is only [`status`]; a test runs a command exactly as
//! the binary would (the Kubernetes example's merge step) through it as well.
//!
//! Exit codes: 0 success; 1 `compare` or `gates` found a regression; 2 anything else went
//! wrong (bad arguments, unreadable or incompatible reports), so CI can tell a
//! slower commit from a broken pipeline.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::gates::{self, GatePolicy, GateReport};
use crate::{Format, Policy, Report};
use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand, ValueEnum};

/// Read, render, merge and compare loadgen reports; compare instruction-count gates.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum ShowFormat {
    Text,
    Markdown,
}

#[derive(Subcommand)]
enum Command {
    /// Print a report: per-operation latency table, push, send lag, server, verification, thresholds.
    Show {
        /// The report (JSON).
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value = "text", env = "REPORT_FORMAT")]
        format: ShowFormat,
    },
    /// Write a self-contained HTML page with tables and charts.
    Html {
        /// The report (JSON).
        file: PathBuf,
        /// Where to write the page.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Merge reports of concurrent loadgen processes: histograms and counters add up, rates sum.
    Merge {
        /// The reports (JSON), at least one.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Where to write the merged report.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Compare head against base; exit 1 on a regression. Prints a Markdown table.
    Compare {
        /// The base report (for example main's).
        base: PathBuf,
        /// The head report (the change under test).
        head: PathBuf,
        /// More base runs of the same commit; with 2+ runs per side, Welch's t-test must agree.
        #[arg(long, num_args = 1.., value_name = "FILE")]
        repeat_base: Vec<PathBuf>,
        /// More head runs of the same commit.
        #[arg(long, num_args = 1.., value_name = "FILE")]
        repeat_head: Vec<PathBuf>,
        /// TOML policy layered over the defaults (see `report policy`).
        #[arg(long, env = "REPORT_POLICY")]
        policy: Option<PathBuf>,
        /// Compare even if profiles or machines differ.
        #[arg(long)]
        force: bool,
        /// Output format (Markdown for a CI job summary).
        #[arg(long, value_enum, default_value = "markdown")]
        format: ShowFormat,
        /// Call a worse latency a regression even when send lag is over 10 % of it
        /// on either side (by default such a figure is reported as generator-limited).
        #[arg(long)]
        allow_generator_limited: bool,
        /// Compare runs that failed their thresholds, fell behind or skipped slots
        /// (refused by default, naming the run and why).
        #[arg(long)]
        allow_invalid: bool,
    },
    /// Print the default compare policy as TOML, a starting point for --policy.
    Policy,
    /// Compare instruction counts of the hot paths (scripts/gates.sh files); exit 1 when one grew beyond its threshold.
    Gates {
        /// The base gates file.
        base: PathBuf,
        /// The head gates file.
        head: PathBuf,
        /// TOML gate policy (default: 2 % above 1 Ir/op for every hot path).
        #[arg(long, env = "REPORT_GATES_POLICY")]
        policy: Option<PathBuf>,
        /// Compare even if rustc or valgrind differ.
        #[arg(long)]
        force: bool,
        /// Refuse (exit 2) files measured with different hotpaths programs:
        /// for a pinned baseline, which must be re-pinned when the program changes.
        #[arg(long)]
        same_harness: bool,
    },
    /// Print instructions per operation across gates files (for example reports/history/gates-*.json).
    GatesTrend {
        /// Gates files, oldest first.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn load(path: &Path) -> Result<Report> {
    Report::load(path).with_context(|| format!("reading report {}", path.display()))
}

fn load_gates(path: &Path) -> Result<GateReport> {
    GateReport::load(path).with_context(|| format!("reading gates file {}", path.display()))
}

fn load_all(first: &Path, more: &[PathBuf]) -> Result<Vec<Report>> {
    std::iter::once(first)
        .chain(more.iter().map(PathBuf::as_path))
        .map(load)
        .collect()
}

/// `report compare`, printed in `format`; `Ok(true)` means a regression.
fn compare(base: &[Report], head: &[Report], policy: &Policy, format: ShowFormat) -> Result<bool> {
    let comparison = crate::compare(base, head, policy).context("comparing reports")?;
    match format {
        ShowFormat::Markdown => print!("{}", comparison.to_markdown()),
        ShowFormat::Text => {
            // A fault's lines first: they say whether the runs' faults compare at all.
            for line in &comparison.faults {
                println!("{line}");
            }
            print!("{}", comparison.table().to_text())
        }
    }
    Ok(comparison.has_regression())
}

/// Runs one command; `Ok(true)` means a regression was found.
fn run(cli: Cli) -> Result<bool> {
    match cli.command {
        Command::Show { file, format } => {
            let format = match format {
                ShowFormat::Text => Format::Text,
                ShowFormat::Markdown => Format::Markdown,
            };
            print!("{}", crate::show::render(&load(&file)?, format));
        }
        Command::Html { file, output } => {
            let html = crate::render_html(&load(&file)?)
                .with_context(|| format!("decoding histograms of {}", file.display()))?;
            std::fs::write(&output, html)
                .with_context(|| format!("writing {}", output.display()))?;
        }
        Command::Merge { files, output } => {
            let inputs = files.iter().map(|f| load(f)).collect::<Result<Vec<_>>>()?;
            let merged = crate::merge(&inputs).context("merging reports")?;
            merged
                .save(&output)
                .with_context(|| format!("writing {}", output.display()))?;
        }
        Command::Compare {
            base,
            head,
            repeat_base,
            repeat_head,
            policy,
            force,
            format,
            allow_generator_limited,
            allow_invalid,
        } => {
            let mut policy = match policy {
                Some(path) => Policy::load(&path)
                    .with_context(|| format!("reading policy {}", path.display()))?,
                None => Policy::default(),
            };
            policy.force = force;
            policy.allow_generator_limited = allow_generator_limited;
            policy.allow_invalid = allow_invalid;
            let base = load_all(&base, &repeat_base)?;
            let head = load_all(&head, &repeat_head)?;
            return compare(&base, &head, &policy, format);
        }
        Command::Policy => print!("{}", Policy::default()),
        Command::Gates {
            base,
            head,
            policy,
            force,
            same_harness,
        } => {
            let mut policy = match policy {
                Some(path) => GatePolicy::load(&path)
                    .with_context(|| format!("reading gate policy {}", path.display()))?,
                None => GatePolicy::default(),
            };
            policy.force = force;
            policy.same_harness = same_harness;
            let base = load_gates(&base)?;
            let head = load_gates(&head)?;
            let comparison =
                gates::compare_gates(&base, &head, &policy).context("comparing gates")?;
            print!("{}", comparison.to_markdown());
            return Ok(comparison.has_regression());
        }
        Command::GatesTrend { files } => {
            let reports = files
                .iter()
                .map(|f| load_gates(f))
                .collect::<Result<Vec<_>>>()?;
            print!("{}", gates::trend_markdown(&reports));
        }
    }
    Ok(false)
}

/// Runs `report` with `args` (the program's name first) and returns its exit
/// code: 0 success, 1 a regression, 2 anything else (usage errors included,
/// printed as clap prints them; `--help` and `--version` print and return 0).
pub fn status<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(cli) {
        Ok(false) => 0,
        Ok(true) => 1,
        Err(error) => {
            eprintln!("error: {error:#}");
            2
        }
    }
}
