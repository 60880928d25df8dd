//! Thresholds: pass/fail gates on a finished report, such as `beat.p99<5ms`.
//!
//! Syntax: `SUBJECT.METRIC OP VALUE[UNIT]`, spaces allowed around the operator.
//!
//! - `SUBJECT`: an operation (`register`, `deregister`, `beat`, `reregister`, `query`,
//!   `subscribe`), `*` (every operation; the worst one decides), `push`
//!   (change-to-receipt latency) or `send_lag`.
//! - `METRIC`: `p50`, `p90`, `p99`, `p99.9`, `p99.99`, `max`, `min`, `mean` (corrected
//!   latency), `count`, `errors`, `error_rate` (a fraction, or with `%`), `rate`
//!   (achieved operations per second).
//! - `OP`: `<`, `<=`, `>`, `>=`, `==`.
//! - `UNIT` for latencies: `us`, `ms` (the default when none is given would be
//!   ambiguous, so latencies require one), `s`.
//!
//! A failed threshold makes `loadgen run` exit with code 3.

use std::fmt;

use reports::{Report, Summary, ThresholdResult};

/// Why a threshold expression is not valid. The text shows the expected syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid threshold {expr:?}: {reason} (expected e.g. `beat.p99<5ms`, `*.errors<=0`, `query.rate>=1000`)")]
pub struct ThresholdError {
    /// The expression.
    pub expr: String,
    /// What is wrong.
    pub reason: String,
}

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// A latency percentile (0..=100).
    Percentile(f64),
    /// Largest latency.
    Max,
    /// Smallest latency.
    Min,
    /// Mean latency.
    Mean,
    /// Completed operations.
    Count,
    /// Failed operations.
    Errors,
    /// Failed / completed.
    ErrorRate,
    /// Achieved operations per second.
    Rate,
    /// `fault.missing_instance_seconds`: instance-seconds missing over every fault.
    MissingInstanceSeconds,
    /// `fault.converge_s`: the slowest fault's convergence, seconds (one that never
    /// converged counts as [`NEVER_CONVERGED_S`]).
    ConvergeS,
}

/// What `fault.converge_s` reads for a fault whose lists never converged.
pub const NEVER_CONVERGED_S: f64 = 1e9;

impl Metric {
    fn is_latency(self) -> bool {
        matches!(
            self,
            Metric::Percentile(_) | Metric::Max | Metric::Min | Metric::Mean
        )
    }
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
}

impl Cmp {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Eq => (a - b).abs() < 1e-9,
        }
    }

    /// Whether larger values are worse (so `*` reports the largest).
    fn upper_bound(self) -> bool {
        matches!(self, Cmp::Lt | Cmp::Le | Cmp::Eq)
    }
}

/// A parsed threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The expression as written.
    pub expr: String,
    /// The subject (`beat`, `*`, `push`, `send_lag`).
    pub subject: String,
    /// The metric.
    pub metric: Metric,
    /// The comparison.
    pub cmp: Cmp,
    /// The bound in the expression's unit.
    pub value: f64,
    /// Microseconds per expression unit for latencies (1 for others; for `%` rates,
    /// 0.01 turns percent into a fraction).
    pub scale: f64,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expr)
    }
}

/// Parses one expression.
pub fn parse(expr: &str) -> Result<Threshold, ThresholdError> {
    let err = |reason: &str| ThresholdError {
        expr: expr.to_owned(),
        reason: reason.to_owned(),
    };
    let t = expr.trim();
    let op_at = t
        .find(['<', '>', '='])
        .ok_or_else(|| err("no comparison operator"))?;
    let (lhs, rest) = t.split_at(op_at);
    let (cmp, rhs) = if let Some(r) = rest.strip_prefix("<=") {
        (Cmp::Le, r)
    } else if let Some(r) = rest.strip_prefix(">=") {
        (Cmp::Ge, r)
    } else if let Some(r) = rest.strip_prefix("==") {
        (Cmp::Eq, r)
    } else if let Some(r) = rest.strip_prefix('<') {
        (Cmp::Lt, r)
    } else if let Some(r) = rest.strip_prefix('>') {
        (Cmp::Gt, r)
    } else {
        return Err(err("unknown operator"));
    };
    let (subject, metric_text) = lhs
        .trim()
        .split_once('.')
        .ok_or_else(|| err("expected SUBJECT.METRIC before the operator"))?;
    if subject.is_empty() {
        return Err(err("empty subject"));
    }
    let metric = match metric_text {
        "p50" => Metric::Percentile(50.0),
        "p90" => Metric::Percentile(90.0),
        "p99" => Metric::Percentile(99.0),
        "p99.9" | "p999" => Metric::Percentile(99.9),
        "p99.99" | "p9999" => Metric::Percentile(99.99),
        "max" => Metric::Max,
        "min" => Metric::Min,
        "mean" => Metric::Mean,
        "count" => Metric::Count,
        "errors" => Metric::Errors,
        "error_rate" => Metric::ErrorRate,
        "rate" => Metric::Rate,
        "missing_instance_seconds" if subject == "fault" => Metric::MissingInstanceSeconds,
        "converge_s" if subject == "fault" => Metric::ConvergeS,
        _ => return Err(err("unknown metric")),
    };
    let rhs = rhs.trim();
    let num_end = rhs
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e'))
        .unwrap_or(rhs.len());
    let (num, unit) = rhs.split_at(num_end);
    let value: f64 = num.parse().map_err(|_| err("the bound is not a number"))?;
    let unit = unit.trim();
    let scale = if metric.is_latency() {
        match unit {
            "us" | "µs" => 1.0,
            "ms" => 1e3,
            "s" => 1e6,
            "" => return Err(err("a latency bound needs a unit: us, ms or s")),
            _ => return Err(err("unknown latency unit")),
        }
    } else {
        match (metric, unit) {
            (Metric::ErrorRate, "%") => 0.01,
            (Metric::Rate, "/s") | (_, "") => 1.0,
            (Metric::ConvergeS, "s") => 1.0,
            _ => return Err(err("unexpected unit")),
        }
    };
    Ok(Threshold {
        expr: expr.to_owned(),
        subject: subject.to_owned(),
        metric,
        cmp,
        value,
        scale,
    })
}

fn latency(summary: &Summary, metric: Metric) -> f64 {
    match metric {
        Metric::Percentile(p) if p <= 50.0 => summary.p50_us as f64,
        Metric::Percentile(p) if p <= 90.0 => summary.p90_us as f64,
        Metric::Percentile(p) if p <= 99.0 => summary.p99_us as f64,
        Metric::Percentile(p) if p <= 99.9 => summary.p999_us as f64,
        Metric::Percentile(_) => summary.p9999_us as f64,
        Metric::Max => summary.max_us as f64,
        Metric::Min => summary.min_us as f64,
        Metric::Mean => summary.mean_us,
        Metric::Count => summary.count as f64,
        _ => 0.0,
    }
}

impl Threshold {
    /// The measured values of the subject, in the expression's unit.
    fn actuals(&self, report: &Report) -> Vec<f64> {
        let in_unit = |raw: f64| raw / self.scale;
        let of_op = |op: &reports::Operation| match self.metric {
            Metric::Errors => op.errors as f64,
            Metric::ErrorRate => in_unit(op.error_rate()),
            Metric::Rate => op.achieved_rate,
            Metric::Count => op.count as f64,
            m => in_unit(latency(&op.corrected.summary, m)),
        };
        match self.subject.as_str() {
            "*" => report
                .operations
                .iter()
                .filter(|o| o.count > 0 || !self.metric.is_latency())
                .map(of_op)
                .collect(),
            "push" => {
                let Some(p) = &report.push else {
                    return vec![0.0];
                };
                vec![match self.metric {
                    Metric::Count => p.pushes_received as f64,
                    Metric::Errors | Metric::ErrorRate => f64::from(u8::from(!p.converged)),
                    Metric::Rate => reports::report::rate(p.pushes_received, report.duration_s),
                    m => in_unit(latency(&p.latency.summary, m)),
                }]
            }
            "send_lag" => vec![report
                .send_lag
                .as_ref()
                .map_or(0.0, |b| in_unit(latency(&b.summary, self.metric)))],
            "fault" => fault_actuals(report, self.metric),
            name => vec![report.operation(name).map_or(0.0, of_op)],
        }
    }

    /// Evaluates the threshold on a report; for `*`, the worst operation decides.
    pub fn evaluate(&self, report: &Report) -> ThresholdResult {
        let values = self.actuals(report);
        let worst = if self.cmp.upper_bound() {
            values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        } else {
            values.iter().copied().fold(f64::INFINITY, f64::min)
        };
        let actual = if worst.is_finite() { worst } else { 0.0 };
        ThresholdResult {
            expr: self.expr.clone(),
            passed: values.iter().all(|v| self.cmp.holds(*v, self.value)),
            actual,
        }
    }
}

/// `fault.*`: per fault (none: 0, nothing to fail); `errors` and `count` read the
/// window's errors and the number of faults.
fn fault_actuals(report: &Report, metric: Metric) -> Vec<f64> {
    if report.faults.is_empty() {
        return vec![0.0];
    }
    report
        .faults
        .iter()
        .map(|f| match metric {
            Metric::MissingInstanceSeconds => f.missing_instance_seconds,
            Metric::ConvergeS => f.converge_s.unwrap_or(NEVER_CONVERGED_S),
            Metric::Errors => f.errors as f64,
            _ => report.faults.len() as f64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reports::{Environment, LatencyBlock, Operation, ProfileInfo, Target};

    #[test]
    fn fault_thresholds_read_every_fault() {
        let mut r = report();
        let fault = |converge: Option<f64>, missing: f64| reports::fault::FaultResult {
            converge_s: converge,
            missing_instance_seconds: missing,
            ..Default::default()
        };
        r.faults = vec![fault(Some(2.0), 0.0), fault(Some(12.0), 3.5)];
        let converge = parse("fault.converge_s<=10").unwrap().evaluate(&r);
        assert!(!converge.passed);
        assert_eq!(converge.actual, 12.0);
        let missing = parse("fault.missing_instance_seconds<=0")
            .unwrap()
            .evaluate(&r);
        assert!(!missing.passed);
        assert_eq!(missing.actual, 3.5);
        r.faults = vec![fault(None, 0.0)];
        assert!(!parse("fault.converge_s<=10s").unwrap().evaluate(&r).passed);
        assert!(parse("beat.converge_s<=10").is_err());
    }

    fn report() -> Report {
        let mut r = Report::new(
            "0",
            "2026-01-01T00:00:00Z",
            Environment::default(),
            ProfileInfo::default(),
            Target::default(),
        );
        r.duration_s = 10.0;
        let mut h = reports::new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 10).unwrap(); // 10 µs .. 10 ms
        }
        let block = LatencyBlock::from_histogram(&h).unwrap();
        let mut beat = Operation::new("beat", 1000, 10.0, block.clone(), block.clone());
        beat.errors = 2;
        r.operations.push(beat);
        r.operations
            .push(Operation::new("query", 50, 10.0, block.clone(), block));
        r
    }

    #[test]
    fn parses_the_documented_forms() {
        let t = parse("beat.p99<5ms").unwrap();
        assert_eq!(
            (t.subject.as_str(), t.metric, t.cmp, t.value, t.scale),
            ("beat", Metric::Percentile(99.0), Cmp::Lt, 5.0, 1e3)
        );
        assert_eq!(parse("*.errors <= 0").unwrap().cmp, Cmp::Le);
        assert_eq!(parse("query.rate>=1000/s").unwrap().metric, Metric::Rate);
        assert_eq!(
            parse("beat.p99.9 < 1s").unwrap().metric,
            Metric::Percentile(99.9)
        );
        assert_eq!(parse("beat.error_rate<1%").unwrap().scale, 0.01);
        for bad in [
            "beat.p99",
            "beat<5ms",
            "beat.p42<1ms",
            "beat.p99<5",
            "beat.p99<5parsecs",
            ".p99<1ms",
            "beat.count<x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn evaluates_against_a_report() {
        let r = report();
        let pass = |e: &str| parse(e).unwrap().evaluate(&r);
        let p99 = pass("beat.p99<20ms");
        assert!(p99.passed);
        assert!((p99.actual - 9.9).abs() < 0.1, "{}", p99.actual); // ms
        assert!(!pass("beat.p99<5ms").passed);
        assert!(!pass("*.errors<=0").passed);
        assert_eq!(pass("*.errors<=0").actual, 2.0);
        assert!(pass("query.errors<=0").passed);
        assert!(pass("beat.rate>=100").passed);
        assert!(!pass("query.rate>=100").passed);
        assert_eq!(pass("query.rate>=100").actual, 5.0);
        assert!(pass("beat.error_rate<1%").passed);
        // A missing operation measures 0.
        assert!(!pass("register.rate>=1").passed);
        assert!(pass("push.p99<1ms").passed);
    }
}
