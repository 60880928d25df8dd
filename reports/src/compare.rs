//! Comparing a head run (or several) against a base run (or several): a pure
//! function from reports and a [`Policy`] to a [`Comparison`].
//!
//! Each side may hold repeated runs of the same commit. Per metric, the value of
//! a side is the mean of its runs' values; the change counts as a regression only
//! when it is beyond the policy's relative threshold, beyond its absolute noise
//! floor, and (when both sides have at least two runs) significant under Welch's
//! t-test at the policy's alpha. Single runs cannot be tested for significance, so
//! with one run on either side the threshold and floor alone decide.
//!
//! Latency metrics use the *corrected* histograms (what a client experiences).
//! Reports of different profiles or machines measure different things, so they
//! are refused unless the policy is forced, in which case the mismatch is kept
//! as a warning in the result.

use std::fmt::Write as _;

use crate::latency::Summary;
use crate::policy::{
    Metric, MetricRule, Policy, Unit, SUBJECT_PUSH, SUBJECT_SEND_LAG, SUBJECT_SERVER,
};
use crate::report::{Report, SCHEMA_VERSION};
use crate::significance::{mean_variance, welch_t_test};
use crate::table::{self, Table};

/// Why two sets of reports could not be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    /// One side has no reports; pass at least one base and one head.
    #[error("no {side} reports to compare")]
    NoRuns {
        /// `base` or `head`.
        side: &'static str,
    },
    /// A report has another format version; regenerate it (never forced).
    #[error("{run} has schema_version {found}, expected {SCHEMA_VERSION}")]
    SchemaVersion {
        /// Which run, such as `head[1]`.
        run: String,
        /// Its version.
        found: u32,
    },
    /// The runs used different profiles or configurations; rerun with one profile, or pass `--force`.
    #[error("{run} ran profile {found}, but base[0] ran {expected}; use one profile or --force")]
    ProfileMismatch {
        /// Which run, such as `head[0]`.
        run: String,
        /// `name@config_hash` of `base[0]`.
        expected: String,
        /// `name@config_hash` of this run.
        found: String,
    },
    /// A run is not valid (failed thresholds, fell behind, skipped slots); rerun it, or pass `--allow-invalid`.
    #[error("{run} is not a valid run: {why}; rerun it or pass --allow-invalid")]
    InvalidRun {
        /// Which run.
        run: String,
        /// What made it invalid.
        why: String,
    },
    /// The runs happened on different machines; compare on one machine, or pass `--force`.
    #[error(
        "{run} ran on {found}, but base[0] ran on {expected}; compare on one machine or --force"
    )]
    EnvironmentMismatch {
        /// Which run.
        run: String,
        /// `cpu_model × cores` of `base[0]`.
        expected: String,
        /// `cpu_model × cores` of this run.
        found: String,
    },
}

/// The judgement of one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Within threshold (or better, but not clearly).
    Ok,
    /// Better beyond threshold, floor and significance.
    Improved,
    /// Worse beyond the threshold, but by less than the noise floor.
    WithinNoise,
    /// Worse beyond threshold and floor, but not significant across repeated runs.
    NotSignificant,
    /// Would be a regression, but the metric is advisory (`gate = false`).
    Warning,
    /// Worse beyond threshold, floor and significance on a gating metric.
    Regression,
    /// Would be a regression, but the operation's latency is generator-limited on a
    /// side (send lag over 10 % of a corrected percentile): it may be loadgen's, so
    /// it is not called the server's without `--allow-generator-limited`.
    GeneratorLimited,
    /// Present on only one side (operation added or removed); never fails.
    Missing,
}

impl Verdict {
    /// The word printed in tables.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Improved => "improved",
            Verdict::WithinNoise => "noise",
            Verdict::NotSignificant => "not significant",
            Verdict::Warning => "warning",
            Verdict::Regression => "**REGRESSION**",
            Verdict::GeneratorLimited => "generator-limited",
            Verdict::Missing => "missing",
        }
    }
}

/// One compared metric of one subject.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Operation name, or `push`, `send_lag`, `server`.
    pub subject: String,
    /// The metric.
    pub metric: Metric,
    /// Mean over base runs, `None` when no base run has it.
    pub base: Option<f64>,
    /// Mean over head runs, `None` when no head run has it.
    pub head: Option<f64>,
    /// `(head − base) / base` in percent; infinite when base is 0 and head is not.
    pub delta_pct: Option<f64>,
    /// Welch's two-sided p-value, when both sides have two or more runs.
    pub p_value: Option<f64>,
    /// The rule that was applied.
    pub rule: MetricRule,
    /// The judgement.
    pub verdict: Verdict,
}

/// The result of [`compare`].
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Number of base runs.
    pub base_runs: usize,
    /// Number of head runs.
    pub head_runs: usize,
    /// One row per subject and metric present on either side.
    pub rows: Vec<Row>,
    /// Mismatches that `force` let through.
    pub warnings: Vec<String>,
    /// Per scheduled fault, the first base and first head run side by side
    /// ([`crate::fault::compare_lines`]); empty when neither had faults.
    pub faults: Vec<String>,
}

impl Comparison {
    /// True when any gating metric regressed.
    pub fn has_regression(&self) -> bool {
        self.rows.iter().any(|r| r.verdict == Verdict::Regression)
    }

    /// The rows that regressed.
    pub fn regressions(&self) -> impl Iterator<Item = &Row> {
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Regression)
    }

    /// The comparison as a table: metric, base, head, delta, p, verdict.
    pub fn table(&self) -> Table {
        let mut table = Table::new(["metric", "base", "head", "delta", "p", "verdict"]);
        for row in &self.rows {
            table.push([
                format!("{} {}", row.subject, row.metric),
                row.base
                    .map_or("-".to_owned(), |v| value_cell(row.metric, v)),
                row.head
                    .map_or("-".to_owned(), |v| value_cell(row.metric, v)),
                row.delta_pct.map_or("-".to_owned(), table::delta_pct),
                row.p_value.map_or("-".to_owned(), |p| format!("{p:.3}")),
                row.verdict.label().to_owned(),
            ]);
        }
        table
    }

    /// A Markdown summary for CI: a headline, any warnings and the table.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let regressions = self.regressions().count();
        let headline = if regressions > 0 {
            format!("REGRESSION in {regressions} metric(s)")
        } else {
            "no regression".to_owned()
        };
        let _ = writeln!(
            out,
            "### report compare: {} base run(s) vs {} head run(s): {headline}\n",
            self.base_runs, self.head_runs
        );
        for warning in &self.warnings {
            let _ = writeln!(out, "> warning: {warning}");
        }
        let limited = self
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::GeneratorLimited)
            .count();
        if limited > 0 {
            let _ = writeln!(
                out,
                "> {limited} worse latency figure(s) not judged: generator-limited (send lag over \
                 {:.0}% of a corrected percentile and above what the machine's own wake-up \
                 lateness explains); rerun with the generator on time, or pass \
                 --allow-generator-limited",
                crate::lag::LIMIT_PCT
            );
        }
        for line in &self.faults {
            let _ = writeln!(out, "> {line}");
        }
        if !self.warnings.is_empty() || !self.faults.is_empty() {
            out.push('\n');
        }
        out.push_str(&self.table().to_markdown());
        out
    }
}

fn value_cell(metric: Metric, value: f64) -> String {
    match metric.unit() {
        Unit::Micros => table::micros(value),
        Unit::PerSecond => table::per_second(value),
        Unit::Ratio => table::fraction(value),
        Unit::Bytes => table::bytes(value),
        Unit::Seconds => format!("{value:.2}s"),
    }
}

const LATENCY_METRICS: [Metric; 6] = [
    Metric::P50,
    Metric::P90,
    Metric::P99,
    Metric::P999,
    Metric::P9999,
    Metric::Max,
];

/// Compares `head` runs against `base` runs under `policy` (see the module documentation).
pub fn compare(
    base: &[Report],
    head: &[Report],
    policy: &Policy,
) -> Result<Comparison, CompareError> {
    let mut warnings = check_compatible(base, head, policy.force)?;
    warnings.extend(check_valid(base, head, policy.allow_invalid)?);

    // Subjects in the order they first appear, base first, then the reserved ones.
    let mut subjects: Vec<(String, Vec<Metric>)> = Vec::new();
    let op_metrics: Vec<Metric> = LATENCY_METRICS
        .into_iter()
        .chain([Metric::Throughput, Metric::ErrorRate])
        .collect();
    for op in base.iter().chain(head).flat_map(|r| &r.operations) {
        if !subjects.iter().any(|(name, _)| *name == op.name) {
            subjects.push((op.name.clone(), op_metrics.clone()));
        }
    }
    for reserved in [SUBJECT_PUSH, SUBJECT_SEND_LAG] {
        if !subjects.iter().any(|(name, _)| name == reserved) {
            subjects.push((reserved.to_owned(), LATENCY_METRICS.to_vec()));
        }
    }
    subjects.push((
        SUBJECT_SERVER.to_owned(),
        vec![Metric::PeakRss, Metric::CpuSeconds],
    ));

    let mut rows = Vec::new();
    for (subject, metrics) in &subjects {
        for &metric in metrics {
            let base_values: Vec<f64> = base
                .iter()
                .filter_map(|r| value(r, subject, metric))
                .collect();
            let head_values: Vec<f64> = head
                .iter()
                .filter_map(|r| value(r, subject, metric))
                .collect();
            if base_values.is_empty() && head_values.is_empty() {
                continue;
            }
            let rule = policy.rule(subject, metric);
            let mut row = judge(
                subject,
                metric,
                rule,
                policy.alpha,
                &base_values,
                &head_values,
            );
            if row.verdict == Verdict::Regression
                && !policy.allow_generator_limited
                && LATENCY_METRICS.contains(&metric)
                && base
                    .iter()
                    .chain(head)
                    .any(|r| crate::lag::op_limited(r, subject))
            {
                row.verdict = Verdict::GeneratorLimited;
            }
            rows.push(row);
        }
    }
    Ok(Comparison {
        base_runs: base.len(),
        head_runs: head.len(),
        rows,
        warnings,
        faults: crate::fault::compare_lines(
            base.first().map_or(&[], |r| r.faults.as_slice()),
            head.first().map_or(&[], |r| r.faults.as_slice()),
        ),
    })
}

/// Why one run is not valid, `None` when it is: failed thresholds (loadgen exit 3),
/// fell behind (exit 4) or skipped schedule slots.
fn invalid_reason(report: &Report) -> Option<String> {
    let mut why = Vec::new();
    let failed: Vec<&str> = report
        .thresholds
        .iter()
        .filter(|t| !t.passed)
        .map(|t| t.expr.as_str())
        .collect();
    if !failed.is_empty() {
        why.push(format!("failed thresholds {}", failed.join(", ")));
    }
    if report.generator.fell_behind {
        why.push("the generator fell behind its schedule".to_owned());
    }
    if report.generator.skipped_slots > 0 {
        why.push(format!(
            "skipped {} schedule slot(s)",
            report.generator.skipped_slots
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// Every run with the name errors and warnings give it: `base[0]`, `head[1]`.
fn named_runs<'a>(
    base: &'a [Report],
    head: &'a [Report],
) -> impl Iterator<Item = (String, &'a Report)> {
    let side = |name: &'static str, runs: &'a [Report]| {
        runs.iter()
            .enumerate()
            .map(move |(i, r)| (format!("{name}[{i}]"), r))
    };
    side("base", base).chain(side("head", head))
}

/// Refuses invalid runs unless `allow`, then returns them as warnings.
fn check_valid(base: &[Report], head: &[Report], allow: bool) -> Result<Vec<String>, CompareError> {
    let runs = named_runs(base, head);
    let mut warnings = Vec::new();
    for (run, report) in runs {
        if let Some(why) = invalid_reason(report) {
            let err = CompareError::InvalidRun { run, why };
            if !allow {
                return Err(err);
            }
            warnings.push(format!("allowed: {err}"));
        }
    }
    Ok(warnings)
}

/// Checks that all runs are comparable; returns the mismatches `force` let through.
fn check_compatible(
    base: &[Report],
    head: &[Report],
    force: bool,
) -> Result<Vec<String>, CompareError> {
    let first = base.first().ok_or(CompareError::NoRuns { side: "base" })?;
    if head.is_empty() {
        return Err(CompareError::NoRuns { side: "head" });
    }
    let runs = named_runs(base, head);
    let profile_id = |r: &Report| format!("{}@{}", r.profile.name, r.profile.config_hash);
    let machine_id = |r: &Report| format!("{} x {}", r.environment.cpu_model, r.environment.cores);
    let mut warnings = Vec::new();
    for (run, report) in runs {
        if report.schema_version != SCHEMA_VERSION {
            return Err(CompareError::SchemaVersion {
                run,
                found: report.schema_version,
            });
        }
        let mut mismatches = Vec::new();
        if profile_id(report) != profile_id(first) {
            mismatches.push(CompareError::ProfileMismatch {
                run: run.clone(),
                expected: profile_id(first),
                found: profile_id(report),
            });
        }
        if machine_id(report) != machine_id(first) {
            mismatches.push(CompareError::EnvironmentMismatch {
                run: run.clone(),
                expected: machine_id(first),
                found: machine_id(report),
            });
        }
        for mismatch in mismatches {
            if force {
                warnings.push(format!("forced: {mismatch}"));
            } else {
                return Err(mismatch);
            }
        }
    }
    Ok(warnings)
}

fn latency(summary: &Summary, metric: Metric) -> Option<f64> {
    if summary.count == 0 {
        return None;
    }
    let us = match metric {
        Metric::P50 => summary.p50_us,
        Metric::P90 => summary.p90_us,
        Metric::P99 => summary.p99_us,
        Metric::P999 => summary.p999_us,
        Metric::P9999 => summary.p9999_us,
        Metric::Max => summary.max_us,
        _ => return None,
    };
    Some(us as f64)
}

/// The value of `metric` of `subject` in one report, if it has one.
fn value(report: &Report, subject: &str, metric: Metric) -> Option<f64> {
    if let Some(op) = report.operation(subject) {
        return match metric {
            Metric::Throughput => Some(op.achieved_rate),
            Metric::ErrorRate => Some(op.error_rate()),
            _ => latency(&op.corrected.summary, metric),
        };
    }
    match subject {
        SUBJECT_PUSH => latency(&report.push.as_ref()?.latency.summary, metric),
        SUBJECT_SEND_LAG => latency(&report.send_lag.as_ref()?.summary, metric),
        SUBJECT_SERVER => {
            let server = report.server.as_ref()?;
            match metric {
                Metric::PeakRss => server.peak_rss_bytes.map(|b| b as f64),
                Metric::CpuSeconds => server.cpu_seconds,
                _ => None,
            }
        }
        _ => None,
    }
}

/// Judges one metric from the per-run values of each side.
fn judge(
    subject: &str,
    metric: Metric,
    rule: MetricRule,
    alpha: f64,
    base: &[f64],
    head: &[f64],
) -> Row {
    let mut row = Row {
        subject: subject.to_owned(),
        metric,
        base: (!base.is_empty()).then(|| mean_variance(base).0),
        head: (!head.is_empty()).then(|| mean_variance(head).0),
        delta_pct: None,
        p_value: None,
        rule,
        verdict: Verdict::Missing,
    };
    let (Some(b), Some(h)) = (row.base, row.head) else {
        return row;
    };
    row.delta_pct = Some(relative_pct(h - b, b));
    row.p_value = welch_t_test(base, head).map(|w| w.p);
    let significant = row.p_value.is_none_or(|p| p < alpha);
    // How much worse head is, in the metric's unit (negative: better).
    let worse = if metric.higher_is_worse() {
        h - b
    } else {
        b - h
    };
    let worse_pct = relative_pct(worse, b);
    row.verdict = if worse > 0.0 {
        if worse_pct <= rule.threshold_pct {
            Verdict::Ok
        } else if worse <= rule.noise_floor {
            Verdict::WithinNoise
        } else if !significant {
            Verdict::NotSignificant
        } else if rule.gate {
            Verdict::Regression
        } else {
            Verdict::Warning
        }
    } else if -worse_pct > rule.threshold_pct && -worse > rule.noise_floor && significant {
        Verdict::Improved
    } else {
        Verdict::Ok
    };
    row
}

/// `delta / base` in percent; ±infinity for a change from zero, 0 for no change.
fn relative_pct(delta: f64, base: f64) -> f64 {
    if delta == 0.0 {
        0.0
    } else if base == 0.0 {
        delta.signum() * f64::INFINITY
    } else {
        delta / base.abs() * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(threshold_pct: f64, noise_floor: f64) -> MetricRule {
        MetricRule {
            threshold_pct,
            noise_floor,
            gate: true,
        }
    }

    fn verdict(metric: Metric, r: MetricRule, base: &[f64], head: &[f64]) -> Verdict {
        judge("op", metric, r, 0.05, base, head).verdict
    }

    #[test]
    fn latency_rules() {
        let r = rule(10.0, 100.0);
        assert_eq!(
            verdict(Metric::P99, r, &[1000.0], &[2000.0]),
            Verdict::Regression
        );
        assert_eq!(verdict(Metric::P99, r, &[1000.0], &[1090.0]), Verdict::Ok);
        // +50 % but only 50 µs: below the noise floor.
        assert_eq!(
            verdict(Metric::P99, r, &[100.0], &[150.0]),
            Verdict::WithinNoise
        );
        assert_eq!(
            verdict(Metric::P99, r, &[2000.0], &[1000.0]),
            Verdict::Improved
        );
        assert_eq!(verdict(Metric::P99, r, &[], &[1000.0]), Verdict::Missing);
    }

    #[test]
    fn throughput_regresses_downwards() {
        let r = rule(5.0, 1.0);
        assert_eq!(
            verdict(Metric::Throughput, r, &[1000.0], &[900.0]),
            Verdict::Regression
        );
        assert_eq!(
            verdict(Metric::Throughput, r, &[1000.0], &[1100.0]),
            Verdict::Improved
        );
        assert_eq!(
            verdict(Metric::Throughput, r, &[1000.0], &[960.0]),
            Verdict::Ok
        );
    }

    #[test]
    fn errors_from_zero() {
        let r = rule(10.0, 0.001);
        assert_eq!(
            verdict(Metric::ErrorRate, r, &[0.0], &[0.0005]),
            Verdict::WithinNoise
        );
        assert_eq!(
            verdict(Metric::ErrorRate, r, &[0.0], &[0.01]),
            Verdict::Regression
        );
        assert_eq!(verdict(Metric::ErrorRate, r, &[0.0], &[0.0]), Verdict::Ok);
    }

    #[test]
    fn repeated_runs_need_significance() {
        let r = rule(10.0, 100.0);
        // Means differ by 20 % but the runs overlap heavily.
        let noisy = verdict(
            Metric::P99,
            r,
            &[1000.0, 2000.0, 1500.0],
            &[1300.0, 2300.0, 1800.0],
        );
        assert_eq!(noisy, Verdict::NotSignificant);
        let clear = verdict(
            Metric::P99,
            r,
            &[1000.0, 1010.0, 990.0],
            &[1500.0, 1490.0, 1510.0],
        );
        assert_eq!(clear, Verdict::Regression);
    }

    #[test]
    fn advisory_rules_warn() {
        let r = MetricRule {
            gate: false,
            ..rule(10.0, 100.0)
        };
        assert_eq!(
            verdict(Metric::Max, r, &[1000.0], &[5000.0]),
            Verdict::Warning
        );
    }
}
