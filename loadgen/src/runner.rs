//! The runner: starts the target and the workers, walks the plan's phases, verifies,
//! and assembles the report. Everything here runs on the calling thread; the workers
//! run on their own.

use std::net::{IpAddr, Ipv4Addr};
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

use crate::exit;
use crate::host;
use crate::output::{self, Collector, Live, Notes};
use crate::plan::Phase;
use crate::profile::{Overrides, Profile, DEFAULT_PROFILE};
use crate::recorder::{ErrorClass, Op, Stats};
use crate::schedule::{Clock, Nanos, MILLI, SECOND};
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
    /// No progress bar and no summary on the terminal.
    pub quiet: bool,
    /// Commit of the code under test (default: `git rev-parse --short HEAD`).
    pub commit: Option<String>,
    /// How generator and server are pinned (free text for the report).
    pub pinning: Option<String>,
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
            quiet: false,
            commit: None,
            pinning: None,
        }
    }
}

/// The exit code a finished run deserves: verification (5) before "fell behind" (4)
/// before thresholds (3).
pub fn exit_code(report: &Report) -> u8 {
    let verified = report.verification.as_ref().is_none_or(|v| v.ok)
        && report.push.as_ref().is_none_or(|p| p.converged);
    if !verified {
        exit::VERIFICATION
    } else if report.generator.fell_behind {
        exit::FELL_BEHIND
    } else if report.thresholds.iter().any(|t| !t.passed) {
        exit::THRESHOLDS
    } else {
        exit::OK
    }
}

/// Resolves the profile and thresholds of a configuration (usage errors).
fn resolve(config: &RunConfig) -> Result<(Profile, Vec<Threshold>), UsageError> {
    let mut profile = Profile::load(&config.profile).map_err(|e| UsageError(e.to_string()))?;
    profile.apply(&config.overrides);
    profile.validate().map_err(|e| UsageError(e.to_string()))?;
    let thresholds = profile
        .thresholds
        .iter()
        .chain(&config.thresholds)
        .map(|t| threshold::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| UsageError(e.to_string()))?;
    Ok((profile, thresholds))
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

/// The runner's state while phases run.
struct Phases<'l, 'a, 'b> {
    shared: Arc<Shared>,
    rx: Receiver<Interval>,
    collector: Collector,
    log: &'l mut Log<'a, 'b>,
    live: Live,
    phase: Phase,
    extra: String,
}

impl Phases<'_, '_, '_> {
    fn now(&self) -> Nanos {
        self.shared.clock.now()
    }

    fn enter(&mut self, phase: Phase) -> Nanos {
        let now = self.now();
        self.shared.set_phase(phase, now);
        self.phase = phase;
        self.extra.clear();
        now
    }

    /// Feeds worker seconds to the collector and refreshes the bar for about `wait`.
    fn pump(&mut self, wait: Duration) {
        let until = std::time::Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(interval) => self.collector.absorb(interval, Some(&mut *self.log)),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if left.is_zero() {
                break;
            }
        }
        let outstanding = self.shared.sum(|p| &p.outstanding);
        self.live.update(
            self.phase,
            self.collector.latest.as_ref(),
            outstanding,
            &self.extra,
        );
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
        client: &mut ControlClient,
    ) -> Check {
        let start = self.enter(phase);
        let limit = start + timeout.as_nanos() as Nanos;
        let mut last = Check::default();
        let mut next_verify = 0;
        self.wait_until(limit, |me| {
            let sh = &me.shared;
            // Worker figures are refreshed every 100 ms: trust them after a few rounds.
            if !sh.all_in(phase) || me.now() < start + 300 * MILLI {
                return false;
            }
            let changes = sh.sum(|p| &p.changes_outstanding);
            let unconverged = sh.sum(|p| &p.unconverged);
            me.extra = format!("waiting: {changes} changes, {unconverged} subscribers unconverged");
            last = Check {
                expected: baseline + sh.sum(|p| &p.present),
                server: None,
                subscribers: sh.profile.fleet.subscribers.into(),
                unconverged,
                bad_lists: 0,
                bad_examples: Vec::new(),
                changes_outstanding: changes,
            };
            if changes > 0 || unconverged > 0 || me.now() < next_verify {
                return false;
            }
            next_verify = me.now() + 500 * MILLI;
            last.server = verify::server_count(client).ok();
            if let Ok((bad, examples)) = verify::lists(client, &sh.naming, &sh.watch.expected()) {
                last.bad_lists = bad;
                last.bad_examples = examples;
            } else {
                last.bad_lists = u64::from(sh.watch.len().max(1));
            }
            last.ok()
        });
        if last.server.is_none() {
            last.server = verify::server_count(client).ok();
        }
        last
    }
}

/// Runs one profile end to end and returns its report (also saved under `out`).
pub fn run(config: RunConfig) -> anyhow::Result<Report> {
    let (profile, thresholds) = resolve(&config)?;
    let nofile = host::raise_nofile().unwrap_or(0);
    let needed = u64::from(profile.fleet.subscribers) + u64::from(profile.connections.count) + 256;
    if nofile > 0 && nofile < needed {
        eprintln!(
            "warning: the open-file limit ({nofile}) is below what {} subscribers need ({needed})",
            profile.fleet.subscribers
        );
    }
    let live = Live::new(config.quiet);
    let server = Server::start(&config.target)?;
    let mut client = ControlClient::new(server.addr);
    let baseline = verify::server_count(&mut client).with_context(|| {
        format!(
            "the target {} does not answer /nacos/v1/ns/operator/metrics",
            server.url
        )
    })?;

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let workers = match profile.generator.workers {
        // An embedded registry needs its own cores: leave them to it.
        0 if server.embedded => cores
            .saturating_sub(config.target.registry_workers as u32)
            .max(1),
        0 => cores,
        n => n,
    };
    let source_ips: Vec<IpAddr> = if server.addr.ip().is_loopback() {
        (1..=profile.connections.source_ips)
            .map(|i| IpAddr::V4(Ipv4Addr::new(127, 0, 0, i)))
            .collect()
    } else {
        Vec::new()
    };
    let clock = Clock::start();
    let started_at = SystemTime::now();
    let shared = Arc::new(Shared::new(
        profile.clone(),
        clock,
        server.addr,
        source_ips,
        server.local_ip(),
        workers,
    ));
    if !config.quiet {
        live.println(format!(
            "loadgen: profile {} against {}{} with {workers} workers\n{}",
            profile.name,
            server.url,
            if server.embedded {
                " (embedded registry)"
            } else {
                ""
            },
            shared.plan.describe().trim_end()
        ));
    }

    std::fs::create_dir_all(&config.out)
        .with_context(|| format!("creating {}", config.out.display()))?;
    let stamp = reports::rfc3339_utc(started_at).replace([':', '-'], "");
    let base = config.out.join(format!(
        "loadgen-{}-{}",
        profile.name,
        stamp.trim_end_matches('Z')
    ));
    let json_path = base.with_extension("json");
    let hlog_path = base.with_extension("hlog");
    let hlog_file = std::fs::File::create(&hlog_path)
        .with_context(|| format!("creating {}", hlog_path.display()))?;
    let mut hlog_out = std::io::BufWriter::new(hlog_file);
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment(&format!("loadgen {} profile {}", env!("CARGO_PKG_VERSION"), profile.name))
        .add_comment("[Histogram log format version 1.3]")
        .add_comment("values in microseconds; Tag=<op> corrected latency, <op>.uncorrected, send_lag, sched_lag, push")
        .with_start_time(started_at)
        .begin_log_with(&mut hlog_out, &mut serializer)
        .context("writing the interval log header")?;

    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for w in 0..workers {
        handles.push(
            worker::spawn(shared.clone(), w, tx.clone()).context("starting a worker thread")?,
        );
    }
    drop(tx);

    let mut ph = Phases {
        shared: shared.clone(),
        rx,
        collector: Collector::new(workers),
        log: &mut log,
        live,
        phase: Phase::Init,
        extra: String::new(),
    };
    let plan = shared.plan.clone();
    let settle_timeout = profile.generator.settle_timeout.0;

    // Load.
    let load_start = ph.enter(Phase::Load);
    let load_limit = load_start
        + (plan
            .step(Phase::Load)
            .map_or(Duration::ZERO, |s| s.duration)
            * 3
            + Duration::from_secs(30))
        .as_nanos() as Nanos;
    let loaded = ph.wait_until(load_limit, |me| {
        me.shared.all_in(Phase::Load) && me.shared.sum(|p| &p.load_left) == 0
    });
    if !loaded {
        ph.live
            .println("warning: the load phase did not finish in time; continuing");
    }
    // Steady.
    let steady_start = ph.enter(Phase::Steady);
    let steady_end = steady_start + profile.steady.duration.0.as_nanos() as Nanos;
    ph.wait_until(steady_end, |_| false);
    // Settle and verify.
    let steady_check = ph.settle(Phase::Settle, settle_timeout, baseline, &mut client);
    let mut final_check = steady_check.clone();
    if profile.drain.enabled {
        let drain_start = ph.enter(Phase::Drain);
        let drain_limit = drain_start
            + (plan
                .step(Phase::Drain)
                .map_or(Duration::ZERO, |s| s.duration)
                * 3
                + Duration::from_secs(30))
            .as_nanos() as Nanos;
        let drained = ph.wait_until(drain_limit, |me| {
            me.shared.all_in(Phase::Drain)
                && me.now() >= drain_start + 300 * MILLI
                && me.shared.sum(|p| &p.drain_left) == 0
                && me.shared.sum(|p| &p.changes_outstanding) == 0
        });
        if !drained {
            ph.live.println("warning: the drain did not finish in time");
        }
        final_check = ph.settle(Phase::Final, settle_timeout, baseline, &mut client);
    }
    let end = ph.enter(Phase::Stop);
    let server_stats = server.stats();

    let mut outcomes = Vec::new();
    for h in handles {
        match h.join() {
            Ok(r) => outcomes.push(r?),
            Err(_) => anyhow::bail!("a worker thread panicked"),
        }
    }
    while let Ok(interval) = ph.rx.try_recv() {
        ph.collector.absorb(interval, Some(&mut *ph.log));
    }
    ph.collector.flush(Some(&mut *ph.log));
    ph.live.finish();
    let timeline = std::mem::take(&mut ph.collector.timeline);
    drop(ph);
    drop(log);
    use std::io::Write as _;
    hlog_out.flush().context("writing the interval log")?;

    let mut total = Stats::default();
    let (mut instance_slots, mut subscriber_slots) = (0, 0);
    for o in &outcomes {
        total.add(&o.stats);
        instance_slots += o.instance_slots;
        subscriber_slots += o.subscriber_slots;
    }
    let duration_s = (end.saturating_sub(load_start)) as f64 / SECOND as f64;

    // The report.
    let mut env = Environment::detect(config.commit.clone().unwrap_or_else(git_commit));
    env.pinning = config
        .pinning
        .clone()
        .or_else(|| host::cpus_allowed().map(|c| format!("loadgen cpus {c}")));
    let mut report = Report::new(
        env!("CARGO_PKG_VERSION"),
        reports::rfc3339_utc(started_at),
        env,
        ProfileInfo {
            name: profile.name.clone(),
            config_hash: profile.config_hash(),
            params: serde_json::to_value(&profile).unwrap_or_default(),
        },
        Target {
            url: server.url.clone(),
            embedded: server.embedded,
        },
    );
    report.duration_s = duration_s;
    for op in Op::ALL {
        let o = total.op(op);
        if o.count == 0 && o.intended == 0 {
            continue;
        }
        let mut r = Operation::new(
            op.name(),
            o.count,
            duration_s,
            LatencyBlock::from_histogram(&o.corrected)?,
            LatencyBlock::from_histogram(&o.uncorrected)?,
        );
        r.errors = o.error_count();
        for class in ErrorClass::ALL {
            r.errors_by_class
                .insert(class.key().to_owned(), o.errors[class as usize]);
        }
        r.target_rate = Some(reports::report::rate(o.intended, duration_s));
        report.operations.push(r);
    }
    report.send_lag = Some(LatencyBlock::from_histogram(&total.send_lag)?);
    if profile.fleet.subscribers > 0 {
        let mismatched = steady_check.unconverged.max(final_check.unconverged);
        report.push = Some(PushStats {
            subscribers: u64::from(profile.fleet.subscribers),
            pushes_received: total.pushes,
            acks_sent: total.acks,
            converged: mismatched == 0 && steady_check.bad_lists == 0 && final_check.bad_lists == 0,
            mismatched_subscribers: mismatched,
            latency: LatencyBlock::from_histogram(&total.push)?,
        });
    }
    report.timeline = timeline;
    report.server = server_stats;
    report.verification = Some(Verification {
        expected_instances: final_check.expected,
        server_instances: final_check.server.unwrap_or(0),
        ok: steady_check.ok() && final_check.ok(),
        detail: if profile.drain.enabled {
            format!(
                "after steady: {}; after drain: {}",
                steady_check.describe(),
                final_check.describe()
            )
        } else {
            format!("after steady: {}", steady_check.describe())
        },
    });
    let sched = &total.sched_lag;
    let (sched_p99, sched_max) = if sched.is_empty() {
        (0, 0)
    } else {
        (sched.value_at_quantile(0.99), sched.max())
    };
    let limits = (
        profile.generator.max_p99_lag.0.as_micros() as u64,
        profile.generator.max_lag.0.as_micros() as u64,
    );
    let send = &total.send_lag;
    report.generator = GeneratorHealth {
        fell_behind: sched_p99 > limits.0 || sched_max > limits.1,
        max_send_lag_us: if send.is_empty() { 0 } else { send.max() },
        p99_send_lag_us: if send.is_empty() {
            0
        } else {
            send.value_at_quantile(0.99)
        },
    };
    report.thresholds = thresholds.iter().map(|t| t.evaluate(&report)).collect();
    report
        .save(&json_path)
        .with_context(|| format!("saving {}", json_path.display()))?;

    if !config.quiet {
        let (_, peak) = host::memory(None);
        let notes = Notes {
            sched_lag_us: (sched_p99, sched_max),
            lag_limits_us: limits,
            steady_check: if profile.drain.enabled {
                steady_check.describe()
            } else {
                String::new()
            },
            footprint: format!(
                "peak RSS {} of the whole process{} for {instance_slots} instance slots and {subscriber_slots} subscribers ({} B of state per instance)",
                peak.map_or("-".to_owned(), |b| reports::table::bytes(b as f64)),
                if server.embedded { " (embedded registry included)" } else { "" },
                crate::fleet::Instances::BYTES_PER_INSTANCE
            ),
            files: vec![json_path.display().to_string(), hlog_path.display().to_string()],
        };
        println!("{}", output::summary(&report, &notes));
    }
    server.stop()?;
    Ok(report)
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
        let (p, t) = resolve(&RunConfig::default()).unwrap();
        assert_eq!(p.name, "smoke");
        assert_eq!(t.len(), 1, "smoke's own threshold");
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
        r.generator.fell_behind = true;
        assert_eq!(exit_code(&r), exit::FELL_BEHIND);
        r.verification = Some(Verification {
            ok: false,
            ..Verification::default()
        });
        assert_eq!(exit_code(&r), exit::VERIFICATION);
    }
}
