//! The runner: starts the target and the workers, walks the plan's phases, verifies,
//! and assembles the report. Everything here runs on the calling thread; the workers
//! run on their own.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use hdrhistogram::serialization::interval_log::{IntervalLogWriter, IntervalLogWriterBuilder};
use hdrhistogram::serialization::V2DeflateSerializer;
use reports::{
    Environment, GeneratorHealth, LatencyBlock, Operation, ProfileInfo, PushStats, Report, Target,
    Verification,
};

use crate::dialect::Dialect;
use crate::exit;
use crate::host;
use crate::metrics::{self, MetricsServer};
use crate::output::{self, Collector, Live, Notes};
use crate::plan::{Phase, Plan, Span};
use crate::profile::{Overrides, Profile, Protocol, DEFAULT_PROFILE};
use crate::recorder::{ErrorClass, Op, Stats};
use crate::schedule::{Clock, Nanos, MILLI, SECOND};
use crate::segment::Segment;
use crate::start::StartAt;
use crate::target::{ControlClient, Server, TargetConfig};
use crate::threshold::{self, Threshold};
use crate::verify::{self, Check};
use crate::worker::{self, Interval, Shared};

/// A bad command line, profile or threshold (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Everything `loadgen run` needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// A built-in profile name or a TOML file.
    pub profile: String,
    /// Values that replace the profile's.
    pub overrides: Overrides,
    /// The server.
    pub target: TargetConfig,
    /// Where the report and the interval log go.
    pub out: PathBuf,
    /// Extra thresholds (`--threshold`).
    pub thresholds: Vec<String>,
    /// Faults to run in the steady phase (`--fault`, [`crate::fault`]).
    pub faults: Vec<crate::fault::FaultSpec>,
    /// No progress bar and no summary on the terminal.
    pub quiet: bool,
    /// Commit of the code under test (default: `git rev-parse --short HEAD`).
    pub commit: Option<String>,
    /// How generator and server are pinned (free text for the report).
    pub pinning: Option<String>,
    /// The slice of the profile this process runs (`--segment`).
    pub segment: Segment,
    /// When the load begins (`--start-at`); default: at once.
    pub start_at: Option<StartAt>,
    /// The profile at this multiple of its load (`loadgen capacity`'s steps).
    pub multiple: Option<f64>,
    /// Operations count in the report only from this long after the steady phase
    /// starts (`loadgen capacity`'s warm-up); default: everything from the load phase.
    pub warmup: Option<Duration>,
    /// Serve loadgen's own Prometheus metrics here while it runs (`--metrics-listen`).
    pub metrics_listen: Option<std::net::SocketAddr>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            profile: DEFAULT_PROFILE.to_owned(),
            overrides: Overrides::default(),
            target: TargetConfig {
                registry_workers: 1,
                ..TargetConfig::default()
            },
            out: PathBuf::from("target/loadgen"),
            thresholds: Vec::new(),
            faults: Vec::new(),
            quiet: false,
            commit: None,
            pinning: None,
            segment: Segment::WHOLE,
            start_at: None,
            multiple: None,
            warmup: None,
            metrics_listen: None,
        }
    }
}

/// The exit code a finished run deserves: verification (5) before "fell behind or
/// skipped schedule slots" (4) before thresholds (3).
pub fn exit_code(report: &Report) -> u8 {
    let verified = report.verification.as_ref().is_none_or(|v| v.ok)
        && report.push.as_ref().is_none_or(|p| p.converged);
    if !verified {
        exit::VERIFICATION
    } else if report.generator.fell_behind || report.generator.skipped_slots > 0 {
        exit::FELL_BEHIND
    } else if report.thresholds.iter().any(|t| !t.passed) {
        exit::THRESHOLDS
    } else {
        exit::OK
    }
}

/// A configuration checked and resolved before anything is sent.
#[derive(Debug)]
struct Resolved {
    /// The whole profile (what the report names).
    whole: Profile,
    /// The slice this process runs (the whole profile unless `--segment`).
    slice: Profile,
    thresholds: Vec<Threshold>,
    /// When to begin the load.
    start: Option<SystemTime>,
}

/// Checks a configuration without sending anything: profile, thresholds, segment,
/// start time.
pub(crate) fn check(config: &RunConfig) -> Result<(), UsageError> {
    resolve(config).map(|_| ())
}

/// Resolves the profile, thresholds and start time of a configuration (usage errors).
fn resolve(config: &RunConfig) -> Result<Resolved, UsageError> {
    let usage = |e: &dyn std::fmt::Display| UsageError(e.to_string());
    let mut whole = Profile::load(&config.profile).map_err(|e| usage(&e))?;
    whole.apply(&config.overrides);
    if let Some(multiple) = config.multiple {
        whole = whole.scaled(multiple);
    }
    whole.validate().map_err(|e| usage(&e))?;
    let slice = whole.slice(config.segment).map_err(|e| usage(&e))?;
    if config.warmup.is_some_and(|w| w >= whole.steady.duration.0) {
        return Err(UsageError(format!(
            "the warm-up must be shorter than the steady phase ({})",
            whole.steady.duration
        )));
    }
    let start = config
        .start_at
        .map(|s| s.resolve(SystemTime::now()))
        .transpose()
        .map_err(|e| usage(&e))?;
    let profile = &whole;
    let thresholds = profile
        .thresholds
        .iter()
        .chain(&config.thresholds)
        .map(|t| threshold::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| UsageError(e.to_string()))?;
    Ok(Resolved {
        slice,
        thresholds,
        start,
        whole,
    })
}

fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

type Log<'a, 'b> =
    IntervalLogWriter<'a, 'b, std::io::BufWriter<std::fs::File>, V2DeflateSerializer>;

/// Runs one profile end to end and returns its report (also saved under `out`).
///
/// The steps: resolve the profile, reach the server, start the workers, walk the plan's
/// phases ([`Phases::walk`]), collect the workers' records, build and save the report.
pub fn run(config: RunConfig) -> anyhow::Result<Report> {
    let Resolved {
        whole,
        slice: profile,
        thresholds,
        start,
    } = resolve(&config)?;
    preflight(&profile)?;
    let live = Live::new(config.quiet);
    let metrics = serve_metrics(&config, &live)?;
    let server = Server::start(&config.target)?;
    let mut control = control_client(&config, &profile, &server);
    let baseline = baseline(&config, &profile, &server, &mut control)?;
    let workers = worker_count(&profile, &server, &config.target);
    if let Some(start) = start {
        wait_for_start(start, &live, config.quiet);
    }
    let clock = Clock::start();
    let started_at = SystemTime::now();
    let shared = Arc::new(share_fleet(&config, &profile, &server, clock, workers));
    if !config.quiet {
        live.println(announcement(&shared, &server, workers));
    }

    let paths = ReportPaths::new(&config.out, &profile.name, started_at)?;
    let hlog_file = std::fs::File::create(&paths.hlog)
        .with_context(|| format!("creating {}", paths.hlog.display()))?;
    let mut hlog_out = std::io::BufWriter::new(hlog_file);
    let mut serializer = V2DeflateSerializer::new();
    let mut log = begin_log(&mut hlog_out, &mut serializer, &profile, started_at)?;

    let probe = crate::jitter::Probe::start(None).context("starting the wake-up probe")?;
    let (handles, intervals) = start_workers(&shared, workers)?;
    let mut phases = Phases {
        shared: shared.clone(),
        judge_count: config.segment.is_whole(),
        warmup: config.warmup,
        measured: None,
        metrics: metrics.as_ref(),
        running: Stats::default(),
        intervals,
        collector: Collector::new(workers),
        log: &mut log,
        live,
        phase: Phase::Init,
        spans: Vec::new(),
        status: String::new(),
        faults: fault_schedule(&config, &profile, &control, &server),
        fault_results: Vec::new(),
    };
    let mut walked = phases.walk(baseline, &control);
    let (fault_results, server_stats) = (std::mem::take(&mut phases.fault_results), server.stats());
    let mut totals = join_workers(handles, probe)?;
    let (timeline, measured) = phases.finish();
    keep_measured(&mut totals, &mut walked, measured);
    drop(log);
    use std::io::Write as _;
    hlog_out.flush().context("writing the interval log")?;

    let mut report = new_report(&config, &whole, &server, started_at);
    fill_report(
        &mut report,
        &config,
        &profile,
        &shared.plan,
        &totals,
        &walked,
    )?;
    report.timeline = timeline;
    report.faults = fault_results;
    report.server = server_stats;
    judge_and_save(&mut report, &thresholds, &paths)?;

    if !config.quiet {
        let notes = summary_notes(&profile, &server, &totals, &walked, &paths);
        println!("{}", output::summary(&report, &notes));
    }
    server.stop()?;
    Ok(report)
}

/// Evaluates the run's thresholds on the finished report and saves it.
fn judge_and_save(
    report: &mut Report,
    thresholds: &[Threshold],
    paths: &ReportPaths,
) -> anyhow::Result<()> {
    report.thresholds = thresholds.iter().map(|t| t.evaluate(report)).collect();
    report
        .save(&paths.json)
        .with_context(|| format!("saving {}", paths.json.display()))
}

/// The run's faults (the profile's, then `--fault`'s), with a control client for
/// every target (none without faults).
fn fault_schedule(
    config: &RunConfig,
    profile: &Profile,
    control: &ControlClient,
    server: &Server,
) -> Option<crate::fault::Faults> {
    let specs: Vec<crate::fault::FaultSpec> = profile
        .faults
        .iter()
        .map(|f| crate::fault::FaultSpec {
            at: f.at.0,
            command: f.command.clone(),
        })
        .chain(config.faults.iter().cloned())
        .collect();
    if specs.is_empty() {
        return None;
    }
    let names = server.addrs.iter().map(|a| a.to_string()).collect();
    Some(crate::fault::Faults::new(
        specs,
        control.each_member(),
        names,
    ))
}

/// Refuses what cannot run well and warns about what may not.
fn preflight(profile: &Profile) -> anyhow::Result<()> {
    warn_about_file_limit(profile);
    if profile.generator.busy_poll && host::realtime() == Some(true) {
        anyhow::bail!(
            "--busy-poll under a real-time scheduling policy (chrt -f/-r): the kernel \
             throttles a real-time task that uses more than 95 % of a second, stalling the \
             generator 50 ms each second; run loadgen under the normal policy (chrt -o 0)"
        );
    }
    Ok(())
}

/// Starts `--metrics-listen`'s server, if asked for, and says where it is.
fn serve_metrics(config: &RunConfig, live: &Live) -> anyhow::Result<Option<MetricsServer>> {
    let metrics = config
        .metrics_listen
        .map(|addr| MetricsServer::start(addr).with_context(|| format!("--metrics-listen {addr}")))
        .transpose()?;
    if let Some(m) = &metrics {
        if !config.quiet {
            live.println(format!(
                "loadgen: metrics at http://{}/metrics",
                m.local_addr()
            ));
        }
    }
    Ok(metrics)
}

/// The client that counts and lists what the server holds, through the fleet's
/// own API (for the 2.x fleet: by its services' lists, over gRPC).
fn control_client(config: &RunConfig, profile: &Profile, server: &Server) -> ControlClient {
    let dialect = profile.protocol.dialect().unwrap_or(Dialect::V1);
    let control = ControlClient::for_members(server.addrs.clone()).with_dialect(dialect);
    if profile.protocol != Protocol::Grpc {
        return control;
    }
    let mut naming = crate::fleet::Naming::new(&profile.fleet);
    naming.segment = config.segment;
    control
        .counting_by_lists(naming)
        .listing_over_grpc(server.grpc.clone())
}

/// The instance count the run's expectations start from: the server's count before
/// the run, or 0 for a segment (whose expected count is its own instances: the
/// server's total is judged across segments by `report merge`).
fn baseline(
    config: &RunConfig,
    profile: &Profile,
    server: &Server,
    control: &mut ControlClient,
) -> anyhow::Result<u64> {
    let grpc = profile.protocol == Protocol::Grpc;
    let dialect = profile.protocol.dialect().unwrap_or(Dialect::V1);
    let count = verify::server_count(control).with_context(|| {
        format!(
            "the target {} does not answer {}",
            server.url,
            match (grpc, dialect) {
                (true, _) => "the gRPC lists of the fleet's services",
                (false, Dialect::V1) => "/nacos/v1/ns/operator/metrics",
                (false, Dialect::V3) => "/nacos/v3/admin/ns/ops/metrics?onlyStatus=false",
            }
        )
    })?;
    Ok(if config.segment.is_whole() { count } else { 0 })
}

/// What the workers share for this run: the profile, its plan and naming, and
/// where the lanes connect (the 2.x fleet's lanes to the members' gRPC ports,
/// unbound).
fn share_fleet(
    config: &RunConfig,
    profile: &Profile,
    server: &Server,
    clock: Clock,
    workers: u32,
) -> Shared {
    let (targets, sources) = if profile.protocol == Protocol::Grpc {
        (server.grpc.clone(), Vec::new())
    } else {
        (server.addrs.clone(), source_ips(profile, server))
    };
    let mut shared = Shared::new(
        profile.clone(),
        clock,
        targets,
        sources,
        server.local_ip(),
        workers,
    );
    shared.naming.segment = config.segment;
    shared
}

/// Opens the interval log (`.hlog`) with its header.
fn begin_log<'a, 'b>(
    out: &'a mut std::io::BufWriter<std::fs::File>,
    serializer: &'b mut V2DeflateSerializer,
    profile: &Profile,
    started_at: SystemTime,
) -> anyhow::Result<Log<'a, 'b>> {
    IntervalLogWriterBuilder::new()
        .add_comment(&format!("loadgen {} profile {}", env!("CARGO_PKG_VERSION"), profile.name))
        .add_comment("[Histogram log format version 1.3]")
        .add_comment("values in microseconds; Tag=<op> corrected latency, <op>.uncorrected, send_lag, conn_wait, sched_lag, push")
        .with_start_time(started_at)
        .begin_log_with(out, serializer)
        .context("writing the interval log header")
}

/// With a warm-up, the report counts only what the workers recorded after it
/// until the end of the steady phase, over that span.
fn keep_measured(
    totals: &mut Totals,
    walked: &mut Walked,
    measured: Option<(Nanos, Nanos, Stats)>,
) {
    let Some((from, until, stats)) = measured else {
        return;
    };
    totals.stats = stats;
    walked.start = from;
    walked.end = until;
    walked.spans = vec![Span {
        phase: Phase::Steady,
        start: from,
        end: until,
    }];
}

/// The report's measured parts: length, operations, send lag, push, verification
/// and the generator's health.
fn fill_report(
    report: &mut Report,
    config: &RunConfig,
    profile: &Profile,
    plan: &Plan,
    totals: &Totals,
    walked: &Walked,
) -> anyhow::Result<()> {
    report.segment = (!config.segment.is_whole()).then(|| config.segment.to_string());
    report.duration_s = (walked.end.saturating_sub(walked.start)) as f64 / SECOND as f64;
    add_operations(report, &totals.stats, plan, &walked.spans)?;
    report.send_lag = Some(LatencyBlock::from_histogram(&totals.stats.send_lag)?);
    report.wakeup_lateness = Some(LatencyBlock::from_histogram(&totals.wakeup)?);
    report.push = push_stats(profile, &totals.stats, walked)?;
    report.verification = Some(verification(profile, walked));
    report.generator = GeneratorLimits::of(profile).judge(&totals.stats);
    Ok(())
}

/// Sleeps until `start` (`--start-at`), saying so.
fn wait_for_start(start: SystemTime, live: &Live, quiet: bool) {
    if let Ok(wait) = start.duration_since(SystemTime::now()) {
        if !quiet {
            live.println(format!(
                "loadgen: starting at {} (in {:.1} s)",
                reports::rfc3339_utc(start),
                wait.as_secs_f64()
            ));
        }
        std::thread::sleep(wait);
    }
}

/// Warns when the open-file limit cannot hold every subscriber socket and connection.
fn warn_about_file_limit(profile: &Profile) {
    let nofile = host::raise_nofile().unwrap_or(0);
    let needed = u64::from(profile.fleet.subscribers) + u64::from(profile.connections.count) + 256;
    if nofile > 0 && nofile < needed {
        eprintln!(
            "warning: the open-file limit ({nofile}) is below what {} subscribers need ({needed})",
            profile.fleet.subscribers
        );
    }
}

/// The profile's worker count; 0 means one per core, less an embedded registry's.
fn worker_count(profile: &Profile, server: &Server, target: &TargetConfig) -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let workers = match profile.generator.workers {
        // An embedded registry needs its own cores: leave them to it.
        0 if server.embedded => cores.saturating_sub(target.registry_workers as u32).max(1),
        0 => cores,
        n => n,
    };
    // A 2.x worker's lanes are its clients: no worker without one.
    if profile.protocol == Protocol::Grpc {
        workers.min(profile.grpc.clients.max(1))
    } else {
        workers
    }
}

/// Loopback source addresses to spread connections over (none for a remote server).
fn source_ips(profile: &Profile, server: &Server) -> Vec<IpAddr> {
    if server.addr.ip().is_loopback() {
        let count = profile.connections.source_ips;
        (0..u32::from(count))
            .map(|i| crate::conn::loopback_source(i, count))
            .collect()
    } else {
        Vec::new()
    }
}

fn announcement(shared: &Shared, server: &Server, workers: u32) -> String {
    format!(
        "loadgen: profile {} against {}{} with {workers} workers\n{}",
        shared.profile.name,
        server.url,
        if server.embedded {
            " (embedded registry)"
        } else {
            ""
        },
        shared.plan.describe().trim_end()
    )
}

/// Where a run's files go: `loadgen-<profile>-<start>.json` and `.hlog`.
struct ReportPaths {
    json: PathBuf,
    hlog: PathBuf,
}

impl ReportPaths {
    fn new(out: &std::path::Path, profile: &str, started_at: SystemTime) -> anyhow::Result<Self> {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let stamp = reports::rfc3339_utc(started_at).replace([':', '-'], "");
        let base = out.join(format!("loadgen-{profile}-{}", stamp.trim_end_matches('Z')));
        Ok(ReportPaths {
            json: base.with_extension("json"),
            hlog: base.with_extension("hlog"),
        })
    }
}

type WorkerHandle = std::thread::JoinHandle<anyhow::Result<worker::Outcome>>;

/// Starts the workers; their per-second records arrive on the returned channel.
fn start_workers(
    shared: &Arc<Shared>,
    workers: u32,
) -> anyhow::Result<(Vec<WorkerHandle>, Receiver<Interval>)> {
    let (tx, rx) = mpsc::channel();
    let handles = (0..workers)
        .map(|w| worker::spawn(shared.clone(), w, tx.clone()).context("starting a worker thread"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((handles, rx))
}

/// What the workers recorded, added together.
struct Totals {
    stats: Stats,
    instance_slots: usize,
    subscriber_slots: usize,
    /// The machine's wake-up lateness over the run, µs ([`crate::jitter`]).
    wakeup: hdrhistogram::Histogram<u64>,
}

/// Joins the workers, then stops the wake-up probe that ran beside them (on
/// loadgen's own cores, its affinity, for the whole run).
fn join_workers(handles: Vec<WorkerHandle>, probe: crate::jitter::Probe) -> anyhow::Result<Totals> {
    let mut totals = Totals {
        stats: Stats::default(),
        instance_slots: 0,
        subscriber_slots: 0,
        wakeup: reports::new_histogram(),
    };
    for handle in handles {
        let outcome = match handle.join() {
            Ok(outcome) => outcome?,
            Err(_) => anyhow::bail!("a worker thread panicked"),
        };
        totals.stats.add(&outcome.stats);
        totals.instance_slots += outcome.instance_slots;
        totals.subscriber_slots += outcome.subscriber_slots;
    }
    totals.wakeup = probe.stop();
    Ok(totals)
}

/// The runner's state while phases run.
struct Phases<'l, 'a, 'b> {
    shared: Arc<Shared>,
    /// Where live metrics go (`--metrics-listen`), and everything recorded so far.
    metrics: Option<&'l MetricsServer>,
    running: Stats,
    /// Whether the server's instance total is this process's to judge.
    judge_count: bool,
    /// Record only from this long after the steady phase starts.
    warmup: Option<Duration>,
    /// With a warm-up: what was recorded between the warm-up and the end of the
    /// steady phase.
    measured: Option<Measured>,
    intervals: Receiver<Interval>,
    collector: Collector,
    log: &'l mut Log<'a, 'b>,
    live: Live,
    phase: Phase,
    /// The phases entered so far, the last one still open.
    spans: Vec<Span>,
    /// What the progress line says besides the counters (what a settle waits for).
    status: String,
    /// The fault schedule (`--fault`), run in the steady phase.
    faults: Option<crate::fault::Faults>,
    /// What the faults did, once the steady phase is over.
    fault_results: Vec<reports::fault::FaultResult>,
}

/// The steady phase after its warm-up, in whole seconds of the run clock.
struct Measured {
    from: u32,
    /// `u32::MAX` while the steady phase runs.
    until: u32,
    stats: Stats,
}

/// What walking the plan found.
struct Walked {
    /// When the load phase started and the workers were told to stop.
    start: Nanos,
    end: Nanos,
    /// The server checked after the steady phase, and at the end (after the drain,
    /// or the same check when there is none).
    after_steady: Check,
    at_end: Check,
    /// Each phase's span; with a warm-up, only the measured part of the steady phase.
    spans: Vec<Span>,
}

impl Phases<'_, '_, '_> {
    fn now(&self) -> Nanos {
        self.shared.clock.now()
    }

    fn enter(&mut self, phase: Phase) -> Nanos {
        let now = self.now();
        if let Some(open) = self.spans.last_mut() {
            open.end = now;
        }
        if phase != Phase::Stop {
            self.spans.push(Span {
                phase,
                start: now,
                end: now,
            });
        }
        self.shared.set_phase(phase, now);
        self.phase = phase;
        self.status.clear();
        now
    }

    /// Load, steady, settle and verify, then drain, settle and verify again.
    fn walk(&mut self, baseline: u64, control: &ControlClient) -> Walked {
        let members = &mut control.each_member();
        let settle_timeout = self.shared.profile.generator.settle_timeout.0;
        let start = self.load();
        self.steady();
        let after_steady = self.settle(Phase::Settle, settle_timeout, baseline, members);
        let at_end = if self.shared.profile.drain.enabled {
            self.drain();
            self.settle(Phase::Final, settle_timeout, baseline, members)
        } else {
            after_steady.clone()
        };
        let end = self.enter(Phase::Stop);
        Walked {
            start,
            end,
            after_steady,
            at_end,
            spans: std::mem::take(&mut self.spans),
        }
    }

    /// A phase that sends a fixed number of operations may take up to three times its
    /// planned length and 30 s more before the runner moves on.
    fn limit_of(&self, phase: Phase, start: Nanos) -> Nanos {
        let planned = self
            .shared
            .plan
            .step(phase)
            .map_or(Duration::ZERO, |s| s.duration);
        start + (planned * 3 + Duration::from_secs(30)).as_nanos() as Nanos
    }

    /// Registers the fleet; returns when the phase started.
    fn load(&mut self) -> Nanos {
        let start = self.enter(Phase::Load);
        let limit = self.limit_of(Phase::Load, start);
        let loaded = self.wait_until(limit, |me| {
            me.shared.all_in(Phase::Load) && me.shared.sum(|p| &p.load_left) == 0
        });
        if !loaded {
            self.live
                .println("warning: the load phase did not finish in time; continuing");
        }
        start
    }

    fn steady(&mut self) {
        let start = self.enter(Phase::Steady);
        if let Some(warmup) = self.warmup {
            // Whole seconds from the first one that starts after the warm-up.
            let from = (start + warmup.as_nanos() as Nanos).div_ceil(SECOND);
            self.measured = Some(Measured {
                from: from as u32,
                until: u32::MAX,
                stats: Stats::default(),
            });
        }
        let end = start + self.shared.profile.steady.duration.0.as_nanos() as Nanos;
        let mut faults = self.faults.take();
        self.wait_until(end, |me| {
            if let Some(f) = faults.as_mut() {
                let now = me.now();
                let since = Duration::from_nanos(now.saturating_sub(start));
                let shared = &me.shared;
                f.tick(
                    now,
                    since,
                    &shared.naming,
                    &shared.watch.expected(),
                    shared.errors(),
                );
            }
            false
        });
        if let Some(f) = faults {
            self.fault_results = f.finish(self.now(), self.shared.errors());
        }
        if let Some(m) = self.measured.as_mut() {
            // The last whole second of the steady phase ends the measured span.
            m.until = (end / SECOND) as u32;
        }
    }

    fn drain(&mut self) {
        let start = self.enter(Phase::Drain);
        let limit = self.limit_of(Phase::Drain, start);
        let drained = self.wait_until(limit, |me| {
            let shared = &me.shared;
            shared.all_in(Phase::Drain)
                && me.now() >= start + 300 * MILLI
                && shared.sum(|p| &p.drain_left) == 0
                && shared.sum(|p| &p.changes_outstanding) == 0
        });
        if !drained {
            self.live
                .println("warning: the drain did not finish in time");
        }
    }

    /// Feeds worker seconds to the collector and refreshes the bar for about `wait`.
    fn pump(&mut self, wait: Duration) {
        let until = std::time::Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self
                .intervals
                .recv_timeout(left.min(Duration::from_millis(50)))
            {
                Ok(interval) => self.absorb(interval),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if left.is_zero() {
                break;
            }
        }
        let now = output::Now {
            phase: self.phase,
            rates: self.shared.plan.rates(self.phase),
            latest: self.collector.latest.as_ref(),
            errors: self.shared.errors(),
            outstanding: self.shared.sum(|p| &p.outstanding),
        };
        self.live.update(&now, &self.status);
    }

    /// Pumps until `done` holds or `limit` passes; returns whether it held.
    fn wait_until(&mut self, limit: Nanos, mut done: impl FnMut(&mut Self) -> bool) -> bool {
        loop {
            self.pump(Duration::from_millis(100));
            if done(self) {
                return true;
            }
            if self.now() >= limit {
                return false;
            }
        }
    }

    /// Waits for changes to be answered and subscribers to converge, then checks the
    /// server; retried until it passes or `timeout` ends.
    fn settle(
        &mut self,
        phase: Phase,
        timeout: Duration,
        baseline: u64,
        members: &mut [ControlClient],
    ) -> Check {
        let start = self.enter(phase);
        let limit = start + timeout.as_nanos() as Nanos;
        let mut last = Check::default();
        let mut next_verify = 0;
        self.wait_until(limit, |me| {
            let shared = &me.shared;
            // Worker figures are refreshed every 100 ms: trust them after a few rounds.
            if !shared.all_in(phase) || me.now() < start + 300 * MILLI {
                return false;
            }
            let changes = shared.sum(|p| &p.changes_outstanding);
            let unconverged = shared.sum(|p| &p.unconverged);
            me.status =
                format!("waiting: {changes} changes, {unconverged} subscribers unconverged");
            last = Check {
                expected: baseline + shared.sum(|p| &p.present),
                server: None,
                subscribers: shared.profile.fleet.subscribers.into(),
                unconverged,
                bad_lists: 0,
                bad_examples: Vec::new(),
                changes_outstanding: changes,
                judge_count: me.judge_count,
                unread: Vec::new(),
            };
            if changes > 0 || unconverged > 0 || me.now() < next_verify {
                return false;
            }
            next_verify = me.now() + 500 * MILLI;
            let found = verify::members(members, &shared.naming, &shared.watch.expected());
            last.server = found.count;
            last.bad_lists = found.bad;
            last.bad_examples = found.examples;
            last.unread = found.unread;
            last.ok()
        });
        if last.server.is_none() {
            // Not read while settling (changes in flight, or no member answered): once
            // more now, keeping why each member could not say.
            let mut unread = Vec::new();
            for m in members.iter_mut() {
                match verify::server_count(m) {
                    Ok(n) => {
                        last.server = Some(n);
                        unread.clear();
                        break;
                    }
                    Err(e) => unread.push(format!(
                        "{}instance count: {e:#}",
                        m.addr().map_or(String::new(), |a| format!("{a}: "))
                    )),
                }
            }
            if last.server.is_none() {
                last.unread = unread;
            }
        }
        last
    }

    /// One worker second: into the timeline and the log, and into the measured
    /// figures once the warm-up is over.
    fn absorb(&mut self, interval: Interval) {
        if let Some(m) = self.measured.as_mut() {
            if (m.from..m.until).contains(&interval.second) {
                m.stats.add(&interval.stats);
            }
        }
        if self.metrics.is_some() {
            self.running.add(&interval.stats);
        }
        self.collector.absorb(interval, Some(&mut *self.log));
        if let Some(server) = self.metrics {
            let now = output::Now {
                phase: self.phase,
                rates: self.shared.plan.rates(self.phase),
                latest: self.collector.latest.as_ref(),
                errors: self.shared.errors(),
                outstanding: self.shared.sum(|p| &p.outstanding),
            };
            server.publish(metrics::render(
                &self.running,
                &now,
                self.now() as f64 / SECOND as f64,
            ));
        }
    }

    /// Takes the seconds the workers sent last; returns the run's timeline and, with a
    /// warm-up, the span measured (run clock) and what was recorded in it.
    fn finish(mut self) -> (Vec<reports::TimelinePoint>, Option<(Nanos, Nanos, Stats)>) {
        while let Ok(interval) = self.intervals.try_recv() {
            self.absorb(interval);
        }
        self.collector.flush(Some(&mut *self.log));
        self.live.finish();
        let measured = self.measured.take().map(|m| {
            let end = Nanos::from(m.until.max(m.from)) * SECOND;
            (Nanos::from(m.from) * SECOND, end, m.stats)
        });
        (std::mem::take(&mut self.collector.timeline), measured)
    }
}

fn new_report(
    config: &RunConfig,
    profile: &Profile,
    server: &Server,
    started_at: SystemTime,
) -> Report {
    let mut env = Environment::detect(config.commit.clone().unwrap_or_else(git_commit));
    env.pinning = config
        .pinning
        .clone()
        .or_else(|| host::cpus_allowed().map(|c| format!("loadgen cpus {c}")));
    Report::new(
        env!("CARGO_PKG_VERSION"),
        reports::rfc3339_utc(started_at),
        env,
        ProfileInfo {
            name: profile.name.clone(),
            config_hash: profile.config_hash(),
            params: serde_json::to_value(profile).unwrap_or_default(),
        },
        Target {
            url: server.url.clone(),
            embedded: server.embedded,
        },
    )
}

/// One entry per operation that was scheduled or done, and the phases' rates.
///
/// A rate-driven operation's target is the plan's rate over the phases as they
/// actually ran ([`Plan::intended_rate`]): counting what was intended by the time it
/// was sent would read 100 % however late the generator ran.
fn add_operations(
    report: &mut Report,
    total: &Stats,
    plan: &Plan,
    spans: &[Span],
) -> anyhow::Result<()> {
    report.phases = plan.phase_rates(spans, total);
    for op in Op::ALL {
        let figures = total.op(op);
        if figures.count == 0 && figures.intended == 0 {
            continue;
        }
        let mut entry = Operation::new(
            op.name(),
            figures.count,
            report.duration_s,
            LatencyBlock::from_histogram(&figures.corrected)?,
            LatencyBlock::from_histogram(&figures.uncorrected)?,
        );
        entry.errors = figures.error_count();
        for class in ErrorClass::ALL {
            entry
                .errors_by_class
                .insert(class.key().to_owned(), figures.errors[class as usize]);
        }
        entry.target_rate = Some(
            plan.intended_rate(spans, op)
                .unwrap_or_else(|| reports::report::rate(figures.intended, report.duration_s)),
        );
        entry.skipped = figures.skipped;
        entry.error_samples = figures.reasons.clone();
        if figures.stamped + figures.fallback > 0 {
            entry.send_stamps = Some(reports::SendStamps {
                stamped: figures.stamped,
                fallback: figures.fallback,
            });
        }
        entry.send_lag = Some(LatencyBlock::from_histogram(&figures.send_lag)?);
        entry.connection_wait = Some(LatencyBlock::from_histogram(&figures.conn_wait)?);
        // Only a fleet whose client queues a call before its socket has one (2.x).
        if !figures.client_queue.is_empty() {
            entry.client_queue = Some(LatencyBlock::from_histogram(&figures.client_queue)?);
        }
        report.operations.push(entry);
    }
    Ok(())
}

fn push_stats(
    profile: &Profile,
    total: &Stats,
    walked: &Walked,
) -> anyhow::Result<Option<PushStats>> {
    if profile.fleet.subscribers == 0 {
        return Ok(None);
    }
    let (steady, end) = (&walked.after_steady, &walked.at_end);
    let mismatched = steady.unconverged.max(end.unconverged);
    Ok(Some(PushStats {
        subscribers: u64::from(profile.fleet.subscribers),
        pushes_received: total.pushes,
        acks_sent: total.acks,
        converged: mismatched == 0 && steady.bad_lists == 0 && end.bad_lists == 0,
        mismatched_subscribers: mismatched,
        latency: LatencyBlock::from_histogram(&total.push)?,
    }))
}

fn verification(profile: &Profile, walked: &Walked) -> Verification {
    let (steady, end) = (&walked.after_steady, &walked.at_end);
    Verification {
        expected_instances: end.expected,
        server_instances: end.server,
        ok: steady.ok() && end.ok(),
        detail: if profile.drain.enabled {
            format!(
                "after steady: {}; after drain: {}",
                steady.describe(),
                end.describe()
            )
        } else {
            format!("after steady: {}", steady.describe())
        },
    }
}

/// The profile's limits on the generator's own lag, in microseconds.
struct GeneratorLimits {
    p99_us: u64,
    max_us: u64,
}

impl GeneratorLimits {
    fn of(profile: &Profile) -> GeneratorLimits {
        GeneratorLimits {
            p99_us: profile.generator.max_p99_lag.0.as_micros() as u64,
            max_us: profile.generator.max_lag.0.as_micros() as u64,
        }
    }

    /// Whether the generator kept its schedule: its scheduling lag within the limits
    /// and no slot skipped.
    fn judge(&self, total: &Stats) -> GeneratorHealth {
        let (sched_p99, sched_max) = p99_and_max(&total.sched_lag);
        let (send_p99, send_max) = p99_and_max(&total.send_lag);
        let skipped_slots = total.ops.iter().map(|o| o.skipped).sum();
        GeneratorHealth {
            fell_behind: sched_p99 > self.p99_us || sched_max > self.max_us,
            max_send_lag_us: send_max,
            p99_send_lag_us: send_p99,
            skipped_slots,
        }
    }
}

fn p99_and_max(h: &hdrhistogram::Histogram<u64>) -> (u64, u64) {
    if h.is_empty() {
        (0, 0)
    } else {
        (h.value_at_quantile(0.99), h.max())
    }
}

fn summary_notes(
    profile: &Profile,
    server: &Server,
    totals: &Totals,
    walked: &Walked,
    paths: &ReportPaths,
) -> Notes {
    let (_, peak) = host::memory(None);
    let limits = GeneratorLimits::of(profile);
    Notes {
        sched_lag_us: p99_and_max(&totals.stats.sched_lag),
        lag_limits_us: (limits.p99_us, limits.max_us),
        steady_check: if profile.drain.enabled {
            walked.after_steady.describe()
        } else {
            String::new()
        },
        footprint: format!(
            "peak RSS {} of the whole process{} for {} instance slots and {} subscribers ({} B of state per instance)",
            peak.map_or("-".to_owned(), |b| reports::table::bytes(b as f64)),
            if server.embedded { " (embedded registry included)" } else { "" },
            totals.instance_slots,
            totals.subscriber_slots,
            crate::fleet::Instances::BYTES_PER_INSTANCE
        ),
        files: vec![paths.json.display().to_string(), paths.hlog.display().to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_are_typed() {
        let bad_profile = RunConfig {
            profile: "no-such".into(),
            ..RunConfig::default()
        };
        assert!(resolve(&bad_profile).is_err());
        let bad_threshold = RunConfig {
            thresholds: vec!["beat.p99<".into()],
            ..RunConfig::default()
        };
        assert!(resolve(&bad_threshold).unwrap_err().0.contains("threshold"));
        let resolved = resolve(&RunConfig::default()).unwrap();
        assert_eq!(resolved.whole.name, "smoke");
        assert_eq!(resolved.thresholds.len(), 1, "smoke's own threshold");
        let past = RunConfig {
            start_at: Some(StartAt::At(std::time::UNIX_EPOCH)),
            ..RunConfig::default()
        };
        assert!(resolve(&past).unwrap_err().0.contains("in the past"));
        let too_many = RunConfig {
            // Slice 2000 of 5000 would own services 1999, 6999, ...: smoke has 1000.
            segment: Segment {
                index: 2000,
                count: 5000,
            },
            ..RunConfig::default()
        };
        assert!(resolve(&too_many)
            .unwrap_err()
            .0
            .contains("owns no service"));
        let half = RunConfig {
            segment: Segment { index: 2, count: 2 },
            multiple: Some(2.0),
            ..RunConfig::default()
        };
        let resolved = resolve(&half).unwrap();
        assert_eq!(resolved.whole.fleet.instances, 20_000);
        assert_eq!(resolved.slice.fleet.instances, 10_000);
        assert_eq!(
            resolved.slice.steady.query_rate,
            resolved.whole.steady.query_rate / 2.0
        );
    }

    #[test]
    fn exit_codes_follow_the_documented_precedence() {
        let mut r = Report::new(
            "0",
            "x",
            Environment::default(),
            ProfileInfo::default(),
            Target::default(),
        );
        assert_eq!(exit_code(&r), exit::OK);
        r.thresholds.push(reports::ThresholdResult {
            expr: "x".into(),
            passed: false,
            actual: 1.0,
        });
        assert_eq!(exit_code(&r), exit::THRESHOLDS);
        r.generator.skipped_slots = 1;
        assert_eq!(
            exit_code(&r),
            exit::FELL_BEHIND,
            "a skipped slot invalidates"
        );
        r.generator.skipped_slots = 0;
        r.generator.fell_behind = true;
        assert_eq!(exit_code(&r), exit::FELL_BEHIND);
        r.verification = Some(Verification {
            ok: false,
            ..Verification::default()
        });
        assert_eq!(exit_code(&r), exit::VERIFICATION);
    }
}
