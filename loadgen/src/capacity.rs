//! `loadgen capacity`: how much load a server holds within an SLO, found by the tool.
//!
//! The search runs the profile at multiples of its load (the fleet and every rate
//! multiplied together, [`Profile::scaled`](crate::profile::Profile::scaled)): 1×, then
//! growing by a factor until a step fails, then bisection between the last pass and
//! the first failure until they are within the precision. Each step is a whole run
//! (load, steady, settle, verify, drain); its figures count only from the end of a
//! warm-up into the steady phase. A step fails for one reason, judged in this order:
//!
//! 1. **the generator fell behind** (its scheduling lag over the profile's limits, or
//!    a skipped schedule slot): the step measured loadgen, not the server, and says so;
//! 2. **server errors**: an SLO on `errors` or `error_rate` failed;
//! 3. **server SLO**: a latency or rate SLO failed;
//! 4. **verification**: the server's final state or the subscribers' views were wrong.
//!
//! The result (every step's offered load, achieved rates, p99s and verdict, the
//! highest passing multiple and why the next step failed) is printed and written as
//! `capacity.json` and `capacity.html` (a chart of p99 against offered load).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use reports::chart::{Chart, Series, XAxis, YAxis};
use reports::Report;
use serde::Serialize;

use crate::runner::{self, RunConfig, UsageError};
use crate::threshold::{self, Metric};

/// Everything `loadgen capacity` needs.
#[derive(Debug, Clone)]
pub struct CapacityConfig {
    /// The run each step makes (profile, target, output directory, ...).
    pub run: RunConfig,
    /// SLO expressions, in threshold syntax (`beat.p99<50ms`, `*.errors<=0`).
    pub slos: Vec<String>,
    /// How long into the steady phase figures start to count.
    pub warmup: Duration,
    /// Factor between growing steps (> 1).
    pub growth: f64,
    /// The largest multiple tried.
    pub max_multiple: f64,
    /// Bisection stops when the first failure is within this fraction of the last pass.
    pub precision: f64,
    /// The most steps in all.
    pub max_steps: u32,
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum Verdict {
    /// Every SLO held and the server verified.
    Pass,
    /// The generator could not keep its schedule: the step measured loadgen.
    GeneratorFellBehind(String),
    /// An SLO on errors failed.
    ServerErrors(String),
    /// A latency or rate SLO failed.
    ServerSlo(String),
    /// The server's state or the subscribers' views were wrong.
    Verification(String),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Pass => f.write_str("pass"),
            Verdict::GeneratorFellBehind(d) => write!(f, "generator fell behind ({d})"),
            Verdict::ServerErrors(d) => write!(f, "server errors ({d})"),
            Verdict::ServerSlo(d) => write!(f, "server SLO ({d})"),
            Verdict::Verification(d) => write!(f, "verification ({d})"),
        }
    }
}

/// One step of the search.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The multiple of the profile's load.
    pub multiple: f64,
    /// Operations per second the schedule offered (all operations).
    pub offered_rate: f64,
    /// Operations per second completed.
    pub achieved_rate: f64,
    /// Corrected p99 per operation, microseconds.
    pub p99_us: Vec<(String, u64)>,
    /// The verdict.
    pub verdict: Verdict,
    /// The step's full report.
    pub report: PathBuf,
}

/// The outcome of a search.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    /// The profile searched.
    pub profile: String,
    /// The server.
    pub target: String,
    /// The SLOs.
    pub slos: Vec<String>,
    /// Every step, in the order run.
    pub steps: Vec<Step>,
    /// The highest multiple that passed, if any.
    pub highest_pass: Option<f64>,
    /// Why the lowest failing multiple failed, if any failed.
    pub limit: Option<Verdict>,
    /// The lowest failing multiple.
    pub lowest_failure: Option<f64>,
}

/// Checks the configuration before any load is sent: the profile, every SLO, the
/// search's own numbers.
pub fn check(config: &CapacityConfig) -> Result<(), UsageError> {
    runner::check(&config.run)?;
    if config.slos.is_empty() {
        return Err(UsageError("give at least one --slo".into()));
    }
    for slo in &config.slos {
        threshold::parse(slo).map_err(|e| UsageError(format!("--slo: {e}")))?;
    }
    if !(config.growth > 1.0 && config.growth.is_finite()) {
        return Err(UsageError("--growth must be above 1".into()));
    }
    if !(config.max_multiple >= 1.0 && config.max_multiple.is_finite()) {
        return Err(UsageError("--max-multiple must be at least 1".into()));
    }
    if !(config.precision > 0.0 && config.precision.is_finite()) {
        return Err(UsageError("--precision must be above 0".into()));
    }
    Ok(())
}

/// The next multiple to try after `steps`, or `None` when the search is over.
pub fn next_multiple(pass: Option<f64>, fail: Option<f64>, config: &CapacityConfig) -> Option<f64> {
    match (pass, fail) {
        (None, None) => Some(1.0),
        (Some(p), None) => {
            let next = p * config.growth;
            (next <= config.max_multiple * (1.0 + 1e-9)).then_some(next)
        }
        (Some(p), Some(f)) => (f > p * (1.0 + config.precision)).then_some((p + f) / 2.0),
        // 1× already fails: nothing below it is tried.
        (None, Some(_)) => None,
    }
}

/// Runs the search.
pub fn search(config: &CapacityConfig) -> anyhow::Result<Capacity> {
    check(config)?;
    let mut capacity = Capacity {
        profile: config.run.profile.clone(),
        target: config
            .run
            .target
            .url
            .clone()
            .unwrap_or_else(|| "embedded".into()),
        slos: config.slos.clone(),
        steps: Vec::new(),
        highest_pass: None,
        limit: None,
        lowest_failure: None,
    };
    while (capacity.steps.len() as u32) < config.max_steps {
        let Some(multiple) = next_multiple(capacity.highest_pass, capacity.lowest_failure, config)
        else {
            break;
        };
        let step = run_step(config, multiple, capacity.steps.len())?;
        if !config.run.quiet {
            println!("{}", step_line(&step));
        }
        if step.verdict == Verdict::Pass {
            capacity.highest_pass = Some(multiple);
        } else {
            capacity.lowest_failure = Some(multiple);
            capacity.limit = Some(step.verdict.clone());
        }
        capacity.steps.push(step);
    }
    Ok(capacity)
}

fn run_step(config: &CapacityConfig, multiple: f64, index: usize) -> anyhow::Result<Step> {
    let out = config
        .run
        .out
        .join(format!("step-{:02}-x{multiple:.3}", index + 1));
    let run = RunConfig {
        multiple: Some(multiple),
        warmup: Some(config.warmup),
        thresholds: config.slos.clone(),
        quiet: true,
        out: out.clone(),
        ..config.run.clone()
    };
    let report = runner::run(run).with_context(|| format!("the step at {multiple}×"))?;
    let path = std::fs::read_dir(&out)
        .ok()
        .and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "json"))
        })
        .unwrap_or(out);
    Ok(Step {
        multiple,
        offered_rate: report.operations.iter().filter_map(|o| o.target_rate).sum(),
        achieved_rate: report.operations.iter().map(|o| o.achieved_rate).sum(),
        p99_us: report
            .operations
            .iter()
            .filter(|o| o.count > 0)
            .map(|o| (o.name.clone(), o.corrected.summary.p99_us))
            .collect(),
        verdict: verdict(&report),
        report: path,
    })
}

/// The verdict of one step's report (see the module documentation for the order).
pub fn verdict(report: &Report) -> Verdict {
    let generator = &report.generator;
    if generator.fell_behind || generator.skipped_slots > 0 {
        let why = if generator.skipped_slots > 0 {
            format!("{} schedule slots skipped", generator.skipped_slots)
        } else {
            "its scheduling lag exceeded the profile's generator limits".to_owned()
        };
        return Verdict::GeneratorFellBehind(format!(
            "{why}; send lag p99 {} µs, max {} µs",
            generator.p99_send_lag_us, generator.max_send_lag_us
        ));
    }
    let failed: Vec<_> = report.thresholds.iter().filter(|t| !t.passed).collect();
    let is_errors = |expr: &str| {
        threshold::parse(expr).is_ok_and(|t| matches!(t.metric, Metric::Errors | Metric::ErrorRate))
    };
    let describe = |errors: bool| {
        failed
            .iter()
            .filter(|t| is_errors(&t.expr) == errors)
            .map(|t| format!("{} was {}", t.expr, t.actual))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if failed.iter().any(|t| is_errors(&t.expr)) {
        return Verdict::ServerErrors(describe(true));
    }
    if !failed.is_empty() {
        return Verdict::ServerSlo(describe(false));
    }
    match &report.verification {
        Some(v) if !v.ok => return Verdict::Verification(v.detail.clone()),
        _ => {}
    }
    if report.push.as_ref().is_some_and(|p| !p.converged) {
        return Verdict::Verification("subscribers did not converge".into());
    }
    Verdict::Pass
}

fn step_line(step: &Step) -> String {
    let p99: Vec<String> = step
        .p99_us
        .iter()
        .map(|(op, us)| format!("{op} {}", reports::table::micros(*us as f64)))
        .collect();
    format!(
        "{:>8.3}×  offered {:>10.0}/s  achieved {:>10.0}/s  p99 [{}]  {}",
        step.multiple,
        step.offered_rate,
        step.achieved_rate,
        p99.join(", "),
        step.verdict
    )
}

impl Capacity {
    /// The terminal summary.
    pub fn summary(&self) -> String {
        let mut out = format!(
            "capacity of {} for profile {} within {}\n",
            self.target,
            self.profile,
            self.slos.join(", ")
        );
        for step in &self.steps {
            out.push_str(&step_line(step));
            out.push('\n');
        }
        out.push_str(&match (self.highest_pass, &self.limit) {
            (Some(p), Some(limit)) => format!(
                "highest passing multiple: {p}× (next step {}× failed: {limit})\n",
                self.lowest_failure.unwrap_or(0.0)
            ),
            (Some(p), None) => format!("highest passing multiple: {p}× (the largest tried)\n"),
            (None, Some(limit)) => format!("no step passed: 1× failed: {limit}\n"),
            (None, None) => "no step ran\n".to_owned(),
        });
        out
    }

    /// A self-contained HTML page: the steps' table and p99 against offered load.
    pub fn to_html(&self) -> String {
        let mut names: Vec<&str> = Vec::new();
        for (name, _) in self.steps.iter().flat_map(|s| &s.p99_us) {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        let mut by_load: Vec<&Step> = self.steps.iter().collect();
        by_load.sort_by(|a, b| a.offered_rate.total_cmp(&b.offered_rate));
        let series = names
            .iter()
            .map(|name| Series {
                name: format!("{name} p99"),
                points: by_load
                    .iter()
                    .filter_map(|s| {
                        let us = s.p99_us.iter().find(|(n, _)| n == name)?.1;
                        Some((s.offered_rate, us as f64))
                    })
                    .collect(),
            })
            .collect();
        let chart = Chart {
            id: "p99-vs-offered".into(),
            title: "corrected p99 against offered load".into(),
            x: XAxis::OfferedLoad,
            y: YAxis::Latency,
            series,
        };
        let esc = reports::chart::escape;
        let rows: String = self
            .steps
            .iter()
            .map(|s| {
                format!(
                    "<tr><td>{:.3}×</td><td>{:.0}</td><td>{:.0}</td><td>{}</td></tr>",
                    s.multiple,
                    s.offered_rate,
                    s.achieved_rate,
                    esc(&s.verdict.to_string())
                )
            })
            .collect();
        format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>capacity</title>\
             <style>body{{font-family:sans-serif}} td,th{{padding:2px 8px;text-align:right}} \
             .grid{{stroke:#ddd}} .series{{fill:none;stroke-width:2}} .s0{{stroke:#1f77b4}} \
             .s1{{stroke:#d62728}} .s2{{stroke:#2ca02c}} .s3{{stroke:#9467bd}} .s4{{stroke:#ff7f0e}} \
             .s5{{stroke:#8c564b}}</style></head><body>\
             <h1>Capacity: {}</h1><pre>{}</pre>{}<table><tr><th>multiple</th><th>offered/s</th>\
             <th>achieved/s</th><th>verdict</th></tr>{rows}</table></body></html>\n",
            esc(&self.profile),
            esc(&self.summary()),
            chart.to_svg()
        )
    }

    /// Writes `capacity.json` and `capacity.html` into `dir`; returns their paths.
    pub fn save(&self, dir: &std::path::Path) -> anyhow::Result<[PathBuf; 2]> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = dir.join("capacity.json");
        let html = dir.join("capacity.html");
        std::fs::write(&json, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("writing {}", json.display()))?;
        std::fs::write(&html, self.to_html())
            .with_context(|| format!("writing {}", html.display()))?;
        Ok([json, html])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> CapacityConfig {
        CapacityConfig {
            run: RunConfig::default(),
            slos: vec!["*.errors<=0".into()],
            warmup: Duration::from_secs(1),
            growth: 2.0,
            max_multiple: 16.0,
            precision: 0.1,
            max_steps: 20,
        }
    }

    /// Drives the search against a server whose known limit is `limit`×.
    fn simulate(limit: f64, c: &CapacityConfig) -> (Vec<f64>, Option<f64>, Option<f64>) {
        let (mut pass, mut fail, mut tried) = (None, None, Vec::new());
        while let Some(m) = next_multiple(pass, fail, c) {
            tried.push(m);
            if m <= limit {
                pass = Some(m);
            } else {
                fail = Some(m);
            }
        }
        (tried, pass, fail)
    }

    #[test]
    fn grows_then_bisects_to_within_the_precision() {
        let c = config();
        let (tried, pass, fail) = simulate(5.3, &c);
        assert_eq!(&tried[..4], &[1.0, 2.0, 4.0, 8.0]);
        let (p, f) = (pass.unwrap(), fail.unwrap());
        assert!(p <= 5.3 && 5.3 < f && f <= p * 1.1, "{p} .. {f}");
        let (tried, pass, fail) = simulate(100.0, &c);
        assert_eq!(tried, vec![1.0, 2.0, 4.0, 8.0, 16.0]);
        assert_eq!((pass, fail), (Some(16.0), None));
        let (tried, pass, _) = simulate(0.5, &c);
        assert_eq!((tried, pass), (vec![1.0], None));
    }

    #[test]
    fn bad_input_is_refused_before_anything_runs() {
        let mut c = config();
        c.slos = vec!["beat.p99<".into()];
        assert!(check(&c).unwrap_err().0.contains("--slo"));
        let mut c = config();
        c.slos.clear();
        assert!(check(&c).is_err());
        let mut c = config();
        c.growth = 1.0;
        assert!(check(&c).is_err());
        assert!(check(&config()).is_ok());
    }

    #[test]
    fn verdicts_blame_the_generator_before_the_server() {
        let mut r = Report::new(
            "0",
            "x",
            reports::Environment::default(),
            reports::ProfileInfo::default(),
            reports::Target::default(),
        );
        assert_eq!(verdict(&r), Verdict::Pass);
        r.thresholds.push(reports::ThresholdResult {
            expr: "beat.p99<50ms".into(),
            passed: false,
            actual: 80.0,
        });
        assert!(matches!(verdict(&r), Verdict::ServerSlo(_)));
        r.thresholds.push(reports::ThresholdResult {
            expr: "*.errors<=0".into(),
            passed: false,
            actual: 3.0,
        });
        assert!(matches!(verdict(&r), Verdict::ServerErrors(_)));
        r.generator.skipped_slots = 2;
        assert!(matches!(verdict(&r), Verdict::GeneratorFellBehind(_)));
    }
}
