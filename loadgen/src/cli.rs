//! The command line: `loadgen run`, `loadgen profiles`, `loadgen bench-http`.
//!
//! Every flag can also be set through the environment variable named in `--help`
//! (`LOADGEN_*`). `loadgen` with no subcommand is `loadgen run` with the defaults: the
//! smoke profile against an embedded registry.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::bench::{self, BenchConfig};
use crate::capacity::CapacityConfig;
use crate::profile::{parse_duration, Overrides, Profile, DEFAULT_PROFILE};
use crate::runner::{exit_code, run, RunConfig, UsageError};
use crate::segment::Segment;
use crate::start::StartAt;
use crate::target::{parse_url, TargetConfig};

const AFTER_HELP: &str = "\
Exit codes:
  0  the run completed and every check passed
  1  error (target unreachable, I/O, ...)
  2  usage error (bad flag, profile or threshold)
  3  a threshold failed
  4  the generator fell behind its schedule (latencies partly measure loadgen)
     or skipped slots of it (the planned load was not offered)
  5  verification failed (server state or subscriber convergence)

Pinning on a 2-core machine: run the server on one core and loadgen on the other,
e.g. `taskset -c 0 registry --workers 1 &` and
`taskset -c 1 loadgen run --target http://127.0.0.1:8848 --registry-pid $!`.";

/// An open-loop load generator for Nacos-1.x-compatible registries.
#[derive(Debug, Parser)]
#[command(name = "loadgen", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// What to do (default: `run`).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// A subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a load profile against an embedded registry or `--target`.
    Run(Box<RunArgs>),
    /// List the built-in profiles.
    Profiles,
    /// Find the highest multiple of a profile's load (fleet and rates together) the
    /// server holds within SLOs: 1x, growing steps, then bisection; writes
    /// capacity.json and capacity.html (p99 against offered load) into --out.
    Capacity(Box<CapacityArgs>),
    /// Fire one GET at a server as fast as possible (or at --rate), recording every
    /// latency: measures the generator itself (compare with wrk).
    BenchHttp(BenchArgs),
}

/// `loadgen run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Built-in profile name (see `loadgen profiles`) or a TOML file.
    #[arg(long, short, env = "LOADGEN_PROFILE", default_value = DEFAULT_PROFILE)]
    pub profile: String,
    /// A running Nacos-1.x-compatible server, e.g. http://127.0.0.1:8848, or a
    /// comma-separated list of cluster members (clients spread over them and fail over
    /// as Nacos clients do); without it an embedded registry is started on loopback.
    #[arg(long, env = "LOADGEN_TARGET")]
    pub target: Option<String>,
    /// The members' gRPC addresses for `--protocol grpc`, comma-separated in the order
    /// of `--target` (default: each member's HTTP port + 1000, as Nacos 2.x clients
    /// assume).
    #[arg(long, env = "LOADGEN_GRPC_TARGET", requires = "target")]
    pub grpc_target: Option<String>,
    /// Length of the steady phase (e.g. 30s, 2m).
    #[arg(long, env = "LOADGEN_DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Directory for the JSON report and the .hlog.
    #[arg(long, env = "LOADGEN_OUT", default_value = "target/loadgen")]
    pub out: PathBuf,
    /// A gate such as `beat.p99<5ms`, `*.errors<=0`, `query.rate>=1000` (repeatable).
    #[arg(long = "threshold", env = "LOADGEN_THRESHOLDS", value_delimiter = ';')]
    pub thresholds: Vec<String>,
    /// A fault: run COMMAND (by `sh -c`) AT into the steady phase and report what
    /// the targets' lists lost until they converged, e.g. `10s=kill -9 1234` (repeatable).
    #[arg(long = "fault", value_parser = crate::fault::parse)]
    pub faults: Vec<crate::fault::FaultSpec>,
    /// Services (overrides the profile).
    #[arg(long, env = "LOADGEN_SERVICES")]
    pub services: Option<u32>,
    /// Instances registered in the load phase.
    #[arg(long, env = "LOADGEN_INSTANCES")]
    pub instances: Option<u32>,
    /// UDP push subscribers.
    #[arg(long, env = "LOADGEN_SUBSCRIBERS")]
    pub subscribers: Option<u32>,
    /// Services watched by subscribers.
    #[arg(long, env = "LOADGEN_WATCHED_SERVICES")]
    pub watched_services: Option<u32>,
    /// Registrations per second in the load phase (and deregistrations in the drain).
    #[arg(long, env = "LOADGEN_RATE")]
    pub rate: Option<f64>,
    /// Queries per second in the steady phase.
    #[arg(long, env = "LOADGEN_QUERY_RATE")]
    pub query_rate: Option<f64>,
    /// Registrations and deregistrations per second (each) in the steady phase.
    #[arg(long, env = "LOADGEN_CHURN_RATE")]
    pub churn_rate: Option<f64>,
    /// Keep-alive connections in total.
    #[arg(long, env = "LOADGEN_CONNECTIONS")]
    pub connections: Option<u32>,
    /// Requests in flight per connection.
    #[arg(long, env = "LOADGEN_PIPELINE")]
    pub pipeline: Option<u32>,
    /// Worker threads (default: one per available core).
    #[arg(long, env = "LOADGEN_WORKERS")]
    pub workers: Option<u32>,
    /// Do not deregister the fleet at the end.
    #[arg(long, env = "LOADGEN_NO_DRAIN")]
    pub no_drain: bool,
    /// Workers spin instead of sleeping when idle, so that a server on the same host
    /// never pays for waking the generator (loopback runs the receiver's wake-up in the
    /// sender); loadgen's own CPU then reads 100 %.
    #[arg(long, env = "LOADGEN_BUSY_POLL")]
    pub busy_poll: bool,
    /// The fleet: `http` (Nacos 1.x: HTTP requests and beats, UDP push), `grpc`
    /// (Nacos 2.x: gRPC connections on the HTTP port + 1000, pushes on their
    /// streams) or `v3` (Nacos 3.x's v3 client HTTP API, `/nacos/v3/client/ns/`:
    /// heartbeats, subscribers poll).
    #[arg(long, env = "LOADGEN_PROTOCOL", value_enum)]
    pub protocol: Option<crate::profile::Protocol>,
    /// Simulated 2.x clients (gRPC connections) with `--protocol grpc`.
    #[arg(long, env = "LOADGEN_GRPC_CLIENTS")]
    pub grpc_clients: Option<u32>,
    /// Process id of an external server, for its RSS and CPU seconds in the report.
    #[arg(long, env = "LOADGEN_REGISTRY_PID")]
    pub registry_pid: Option<u32>,
    /// Worker threads of the embedded registry.
    #[arg(long, env = "LOADGEN_REGISTRY_WORKERS", default_value_t = 1)]
    pub registry_workers: usize,
    /// Allow a target outside 127.0.0.0/8.
    #[arg(long, env = "LOADGEN_ALLOW_REMOTE")]
    pub allow_remote: bool,
    /// No progress bar and no summary.
    #[arg(long, short, env = "LOADGEN_QUIET")]
    pub quiet: bool,
    /// Commit recorded in the report (default: `git rev-parse HEAD`).
    #[arg(long, env = "LOADGEN_COMMIT")]
    pub commit: Option<String>,
    /// How server and loadgen are pinned, recorded in the report (e.g. "registry=0 loadgen=1").
    #[arg(long, env = "LOADGEN_PINNING")]
    pub pinning: Option<String>,
    /// Run only slice I of N of the profile (its services' instances and subscribers,
    /// 1/N of every rate), e.g. 1/2; merge the N reports with `report merge`.
    #[arg(long, env = "LOADGEN_SEGMENT", value_parser = parse_segment)]
    pub segment: Option<Segment>,
    /// Begin the load at this time: RFC 3339 (2026-11-30T12:00:00Z) or a delay (+30s),
    /// so processes on several machines run their phases together.
    #[arg(long, env = "LOADGEN_START_AT", value_parser = parse_start)]
    pub start_at: Option<StartAt>,
    /// Serve loadgen's own Prometheus metrics (rates, errors, latency, generator lag)
    /// at http://ADDR/metrics while it runs, e.g. 127.0.0.1:9464.
    #[arg(long, env = "LOADGEN_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

fn parse_segment(text: &str) -> Result<Segment, String> {
    text.parse()
        .map_err(|e: crate::segment::SegmentError| e.to_string())
}

fn parse_start(text: &str) -> Result<StartAt, String> {
    StartAt::parse(text).map_err(|e| e.to_string())
}

impl RunArgs {
    /// The run configuration these flags describe.
    pub fn config(&self) -> RunConfig {
        RunConfig {
            profile: self.profile.clone(),
            overrides: Overrides {
                services: self.services,
                instances: self.instances,
                subscribers: self.subscribers,
                watched_services: self.watched_services,
                rate: self.rate,
                duration: self.duration,
                query_rate: self.query_rate,
                churn_rate: self.churn_rate,
                connections: self.connections,
                pipeline: self.pipeline,
                workers: self.workers,
                no_drain: self.no_drain,
                busy_poll: self.busy_poll,
                protocol: self.protocol,
                grpc_clients: self.grpc_clients,
            },
            target: TargetConfig {
                url: self.target.clone(),
                pid: self.registry_pid,
                registry_workers: self.registry_workers,
                allow_remote: self.allow_remote,
                grpc_url: self.grpc_target.clone(),
            },
            out: self.out.clone(),
            thresholds: self.thresholds.clone(),
            faults: self.faults.clone(),
            quiet: self.quiet,
            commit: self.commit.clone(),
            pinning: self.pinning.clone(),
            segment: self.segment.unwrap_or(Segment::WHOLE),
            start_at: self.start_at,
            multiple: None,
            warmup: None,
            metrics_listen: self.metrics_listen,
        }
    }
}

/// `loadgen capacity`.
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// The run each step makes (`run`'s flags).
    #[command(flatten)]
    pub run: RunArgs,
    /// An SLO in threshold syntax, e.g. `beat.p99<50ms`, `*.errors<=0` (repeatable).
    #[arg(long = "slo", required = true)]
    pub slos: Vec<String>,
    /// How long into each step's steady phase its figures start to count.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Factor between growing steps.
    #[arg(long, default_value_t = 2.0)]
    pub growth: f64,
    /// The largest multiple tried.
    #[arg(long, default_value_t = 64.0)]
    pub max_multiple: f64,
    /// Bisection stops when the first failure is within this fraction of the last pass.
    #[arg(long, default_value_t = 0.1)]
    pub precision: f64,
    /// The most steps in all.
    #[arg(long, default_value_t = 12)]
    pub max_steps: u32,
}

impl CapacityArgs {
    /// The search these flags describe.
    pub fn config(&self) -> CapacityConfig {
        CapacityConfig {
            run: self.run.config(),
            slos: self.slos.clone(),
            warmup: self.warmup,
            growth: self.growth,
            max_multiple: self.max_multiple,
            precision: self.precision,
            max_steps: self.max_steps,
        }
    }
}

/// `loadgen bench-http`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The server, e.g. http://127.0.0.1:9000.
    #[arg(long, env = "LOADGEN_TARGET")]
    pub target: String,
    /// Request path.
    #[arg(long, default_value = "/")]
    pub path: String,
    /// Connections in total.
    #[arg(long, short, default_value_t = 32)]
    pub connections: u32,
    /// Requests per write (pipelining depth; 1 = none).
    #[arg(long, default_value_t = 1)]
    pub pipeline: u32,
    /// How long to run.
    #[arg(long, short, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Requests per second in total (open-loop); default: as fast as possible.
    #[arg(long, short = 'R')]
    pub rate: Option<f64>,
    /// Worker threads (default: one per available core).
    #[arg(long, short = 't')]
    pub workers: Option<u32>,
    /// Loopback source addresses to spread connections over (0: let the OS pick).
    #[arg(long, default_value_t = 0)]
    pub source_ips: u8,
    /// Allow a target outside 127.0.0.0/8.
    #[arg(long)]
    pub allow_remote: bool,
}

/// Runs a parsed command line; returns the exit code.
pub fn execute(cli: Cli) -> anyhow::Result<u8> {
    let command = match cli.command {
        Some(c) => c,
        None => Cli::parse_from(["loadgen", "run"])
            .command
            .ok_or_else(|| UsageError("no command".into()))?,
    };
    match command {
        Command::Run(args) => {
            let report = run(args.config())?;
            let code = exit_code(&report);
            if code == crate::exit::FELL_BEHIND {
                eprintln!("warning: the generator fell behind its schedule (exit code 4)");
            }
            Ok(code)
        }
        Command::Capacity(args) => {
            let config = args.config();
            let capacity = crate::capacity::search(&config)?;
            let files = capacity.save(&config.run.out)?;
            print!("{}", capacity.summary());
            for f in files {
                println!("wrote {}", f.display());
            }
            Ok(crate::exit::OK)
        }
        Command::Profiles => {
            let all = Profile::built_in()?;
            let width = all.iter().map(|p| p.name.len()).max().unwrap_or(0);
            for p in all {
                println!("{:<width$}  {}", p.name, p.description);
            }
            Ok(crate::exit::OK)
        }
        Command::BenchHttp(args) => {
            let target = parse_url(&args.target).map_err(|e| UsageError(e.to_string()))?;
            if !target.ip().is_loopback() && !args.allow_remote {
                return Err(UsageError(format!(
                    "{} is not a loopback address; pass --allow-remote",
                    args.target
                ))
                .into());
            }
            let workers = args.workers.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
            });
            let result = bench::run(&BenchConfig {
                target,
                path: args.path,
                connections: args.connections.max(1),
                pipeline: args.pipeline.max(1),
                duration: args.duration,
                rate: args.rate,
                workers,
                source_ips: args.source_ips,
            })?;
            println!(
                "bench-http {} for {:.1}s, {} connections, pipeline {}, {} workers{}",
                args.target,
                args.duration.as_secs_f64(),
                args.connections,
                args.pipeline,
                workers,
                args.rate
                    .map(|r| format!(", rate {r}/s"))
                    .unwrap_or_default()
            );
            print!("{}", result.render());
            Ok(if result.errors > 0 {
                crate::exit::ERROR
            } else {
                crate::exit::OK
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        let cli = Cli::parse_from([
            "loadgen",
            "run",
            "--profile",
            "churn",
            "--duration",
            "5s",
            "--threshold",
            "beat.p99<5ms",
            "--threshold",
            "*.errors<=0",
            "--instances",
            "100",
            "--no-drain",
            "--busy-poll",
        ]);
        let Some(Command::Run(args)) = cli.command else {
            panic!("run expected")
        };
        let c = args.config();
        assert_eq!(c.profile, "churn");
        assert_eq!(c.overrides.duration, Some(Duration::from_secs(5)));
        assert_eq!(c.thresholds.len(), 2);
        assert!(c.overrides.no_drain);
        assert!(c.overrides.busy_poll);
        assert!(Cli::try_parse_from(["loadgen", "run", "--duration", "soon"]).is_err());
        assert!(Cli::parse_from(["loadgen"]).command.is_none());
    }
}
