//! The comparison policy: which metrics gate, by how much they may worsen, and
//! below what absolute change a difference is noise.
//!
//! A metric of a *subject* (an operation name, or one of the reserved subjects
//! [`SUBJECT_PUSH`], [`SUBJECT_SEND_LAG`] and [`SUBJECT_SERVER`]) regresses when
//! it worsens by more than `threshold_pct` percent **and** by more than
//! `noise_floor` (in the metric's own unit, see [`Metric::unit`]) **and**, with
//! repeated runs, the difference is significant at `alpha`. Rules are layered:
//! built-in per-metric defaults, then `[metrics.NAME]` from the policy file, then
//! built-in per-subject defaults (push latency has millisecond floors, send lag is
//! advisory), then `[operations.SUBJECT.NAME]` from the file; each layer may set
//! any of `threshold_pct`, `noise_floor` and `gate`. `report policy` prints the
//! defaults as a starting file:
//!
//! ```toml
//! alpha = 0.05
//! [metrics.p99]
//! threshold_pct = 10.0
//! noise_floor = 500.0
//! gate = true
//! [operations.beat.p99]
//! threshold_pct = 20.0
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

/// Subject name of the push-propagation latency block.
pub const SUBJECT_PUSH: &str = "push";
/// Subject name of the generator's send-lag block.
pub const SUBJECT_SEND_LAG: &str = "send_lag";
/// Subject name of the server resource figures.
pub const SUBJECT_SERVER: &str = "server";

/// A compared quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    /// Median corrected latency.
    P50,
    /// 90th percentile corrected latency.
    P90,
    /// 99th percentile corrected latency.
    P99,
    /// 99.9th percentile corrected latency.
    P999,
    /// 99.99th percentile corrected latency.
    P9999,
    /// Largest corrected latency.
    Max,
    /// Achieved operations per second.
    Throughput,
    /// Failed operations as a fraction of all.
    ErrorRate,
    /// Server peak resident set size.
    PeakRss,
    /// Server CPU seconds used during the run.
    CpuSeconds,
}

/// The unit of a metric's values and noise floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Microseconds.
    Micros,
    /// Operations per second.
    PerSecond,
    /// A fraction between 0 and 1.
    Ratio,
    /// Bytes.
    Bytes,
    /// Seconds.
    Seconds,
}

impl Metric {
    /// Every metric, in table order.
    pub const ALL: [Metric; 10] = [
        Metric::P50,
        Metric::P90,
        Metric::P99,
        Metric::P999,
        Metric::P9999,
        Metric::Max,
        Metric::Throughput,
        Metric::ErrorRate,
        Metric::PeakRss,
        Metric::CpuSeconds,
    ];

    /// The metric's name in policy files and tables.
    pub fn name(self) -> &'static str {
        match self {
            Metric::P50 => "p50",
            Metric::P90 => "p90",
            Metric::P99 => "p99",
            Metric::P999 => "p999",
            Metric::P9999 => "p9999",
            Metric::Max => "max",
            Metric::Throughput => "throughput",
            Metric::ErrorRate => "error_rate",
            Metric::PeakRss => "peak_rss",
            Metric::CpuSeconds => "cpu_seconds",
        }
    }

    /// True when a larger value is worse (latency, errors, resources), false for throughput.
    pub fn higher_is_worse(self) -> bool {
        !matches!(self, Metric::Throughput)
    }

    /// The unit of the metric's values and of its noise floor.
    pub fn unit(self) -> Unit {
        match self {
            Metric::P50
            | Metric::P90
            | Metric::P99
            | Metric::P999
            | Metric::P9999
            | Metric::Max => Unit::Micros,
            Metric::Throughput => Unit::PerSecond,
            Metric::ErrorRate => Unit::Ratio,
            Metric::PeakRss => Unit::Bytes,
            Metric::CpuSeconds => Unit::Seconds,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = PolicyError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| PolicyError::UnknownMetric(name.to_owned()))
    }
}

/// How one metric is judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricRule {
    /// Largest tolerated worsening, percent of the base value.
    pub threshold_pct: f64,
    /// Changes smaller than this, in the metric's unit, are never regressions.
    pub noise_floor: f64,
    /// False for advisory metrics: reported as warnings, never failing.
    pub gate: bool,
}

/// A partial [`MetricRule`]: the fields a policy layer sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleOverride {
    /// Replaces [`MetricRule::threshold_pct`] when set.
    pub threshold_pct: Option<f64>,
    /// Replaces [`MetricRule::noise_floor`] when set.
    pub noise_floor: Option<f64>,
    /// Replaces [`MetricRule::gate`] when set.
    pub gate: Option<bool>,
}

impl RuleOverride {
    fn apply(&self, rule: MetricRule) -> MetricRule {
        MetricRule {
            threshold_pct: self.threshold_pct.unwrap_or(rule.threshold_pct),
            noise_floor: self.noise_floor.unwrap_or(rule.noise_floor),
            gate: self.gate.unwrap_or(rule.gate),
        }
    }
}

/// Thresholds, noise floors and significance level for `compare`.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Significance level for repeated runs: a difference counts only when p < alpha.
    pub alpha: f64,
    /// Compare reports of different profiles or environments anyway (the `--force` flag).
    pub force: bool,
    /// Judge generator-limited latencies like any other (`--allow-generator-limited`):
    /// by default a worse latency whose send lag is over 10 % of it on either side is
    /// not called a server regression (see [`crate::lag`]).
    pub allow_generator_limited: bool,
    /// Compare runs that failed their thresholds, fell behind or skipped slots
    /// (`--allow-invalid`); by default such a run is refused.
    pub allow_invalid: bool,
    /// Rule per metric, for every subject; holds every [`Metric`].
    pub metrics: BTreeMap<Metric, MetricRule>,
    /// Per-subject adjustments layered over `metrics`.
    pub subjects: BTreeMap<String, BTreeMap<Metric, RuleOverride>>,
}

/// Why a policy file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read; check the path.
    #[error("cannot read policy {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys; see the message for the line.
    #[error("invalid policy: {0}")]
    Toml(#[from] toml::de::Error),
    /// A metric name is not one of [`Metric::ALL`].
    #[error(
        "unknown metric `{0}` (known: p50, p90, p99, p999, p9999, max, throughput, error_rate, peak_rss, cpu_seconds)"
    )]
    UnknownMetric(String),
    /// A number is out of range: alpha must be in (0, 1), thresholds and floors finite and ≥ 0.
    #[error("invalid policy value: {0}")]
    OutOfRange(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    alpha: Option<f64>,
    #[serde(default)]
    metrics: BTreeMap<String, RuleOverride>,
    #[serde(default)]
    operations: BTreeMap<String, BTreeMap<String, RuleOverride>>,
}

fn rule(threshold_pct: f64, noise_floor: f64, gate: bool) -> MetricRule {
    MetricRule {
        threshold_pct,
        noise_floor,
        gate,
    }
}

fn floor_only(noise_floor: f64) -> RuleOverride {
    RuleOverride {
        noise_floor: Some(noise_floor),
        ..RuleOverride::default()
    }
}

impl Default for Policy {
    /// p50–p99.9 may worsen by 10–20 % above floors of 0.1–1 ms, p99.99 and max are
    /// advisory (one run's tail is mostly noise), throughput may drop 5 %, the error
    /// rate may rise by 10 % of itself or 0.1 percentage point, server memory and
    /// CPU by 10 %. Push latency gets millisecond floors; send lag is advisory.
    fn default() -> Self {
        let metrics = BTreeMap::from([
            (Metric::P50, rule(10.0, 100.0, true)),
            (Metric::P90, rule(10.0, 200.0, true)),
            (Metric::P99, rule(10.0, 500.0, true)),
            (Metric::P999, rule(20.0, 1_000.0, true)),
            (Metric::P9999, rule(25.0, 2_000.0, false)),
            (Metric::Max, rule(50.0, 5_000.0, false)),
            (Metric::Throughput, rule(5.0, 1.0, true)),
            (Metric::ErrorRate, rule(10.0, 0.001, true)),
            (Metric::PeakRss, rule(10.0, 4.0 * 1024.0 * 1024.0, true)),
            (Metric::CpuSeconds, rule(10.0, 0.5, true)),
        ]);
        let advisory = RuleOverride {
            gate: Some(false),
            ..RuleOverride::default()
        };
        let subjects = BTreeMap::from([
            (
                SUBJECT_PUSH.to_owned(),
                BTreeMap::from([
                    (Metric::P50, floor_only(1_000.0)),
                    (Metric::P90, floor_only(2_000.0)),
                    (Metric::P99, floor_only(5_000.0)),
                    (Metric::P999, floor_only(10_000.0)),
                ]),
            ),
            (
                SUBJECT_SEND_LAG.to_owned(),
                Metric::ALL.into_iter().map(|m| (m, advisory)).collect(),
            ),
        ]);
        Policy {
            alpha: 0.05,
            force: false,
            allow_generator_limited: false,
            allow_invalid: false,
            metrics,
            subjects,
        }
    }
}

impl Policy {
    /// The rule for `metric` of `subject` (an operation name or a reserved subject).
    pub fn rule(&self, subject: &str, metric: Metric) -> MetricRule {
        let base = self
            .metrics
            .get(&metric)
            .copied()
            .unwrap_or_else(|| rule(10.0, 0.0, true));
        match self.subjects.get(subject).and_then(|s| s.get(&metric)) {
            Some(adjustment) => adjustment.apply(base),
            None => base,
        }
    }

    /// Parses a policy file, layering it over [`Policy::default`].
    pub fn from_toml_str(text: &str) -> Result<Self, PolicyError> {
        let file: PolicyFile = toml::from_str(text)?;
        let mut policy = Policy::default();
        if let Some(alpha) = file.alpha {
            policy.alpha = alpha;
        }
        for (name, adjustment) in &file.metrics {
            let metric: Metric = name.parse()?;
            let current = policy
                .metrics
                .get(&metric)
                .copied()
                .unwrap_or_else(|| rule(10.0, 0.0, true));
            policy.metrics.insert(metric, adjustment.apply(current));
        }
        for (subject, rules) in &file.operations {
            for (name, adjustment) in rules {
                let metric: Metric = name.parse()?;
                let slot = policy
                    .subjects
                    .entry(subject.clone())
                    .or_default()
                    .entry(metric)
                    .or_default();
                // The file's settings win over the built-in subject defaults.
                *slot = RuleOverride {
                    threshold_pct: adjustment.threshold_pct.or(slot.threshold_pct),
                    noise_floor: adjustment.noise_floor.or(slot.noise_floor),
                    gate: adjustment.gate.or(slot.gate),
                };
            }
        }
        policy.validate()?;
        Ok(policy)
    }

    /// Reads a policy file (see [`Policy::from_toml_str`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml_str(&text)
    }

    /// Checks that every number is usable.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(PolicyError::OutOfRange(format!(
                "alpha = {} (must be between 0 and 1)",
                self.alpha
            )));
        }
        let check = |what: String, value: Option<f64>| match value {
            Some(v) if !(v.is_finite() && v >= 0.0) => Err(PolicyError::OutOfRange(format!(
                "{what} = {v} (must be finite and >= 0)"
            ))),
            _ => Ok(()),
        };
        for (metric, r) in &self.metrics {
            check(
                format!("metrics.{metric}.threshold_pct"),
                Some(r.threshold_pct),
            )?;
            check(format!("metrics.{metric}.noise_floor"), Some(r.noise_floor))?;
        }
        for (subject, rules) in &self.subjects {
            for (metric, r) in rules {
                check(
                    format!("operations.{subject}.{metric}.threshold_pct"),
                    r.threshold_pct,
                )?;
                check(
                    format!("operations.{subject}.{metric}.noise_floor"),
                    r.noise_floor,
                )?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Policy {
    /// Writes the policy as a TOML file that [`Policy::from_toml_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "# report compare policy. A metric regresses when it worsens by more than"
        )?;
        writeln!(
            f,
            "# threshold_pct percent AND by more than noise_floor (in the metric's unit:"
        )?;
        writeln!(
            f,
            "# µs for latencies, ops/s for throughput, a 0..1 fraction for error_rate,"
        )?;
        writeln!(
            f,
            "# bytes for peak_rss, seconds for cpu_seconds) AND, with repeated runs,"
        )?;
        writeln!(
            f,
            "# Welch's t-test gives p < alpha. gate = false: advisory."
        )?;
        writeln!(f, "alpha = {:?}", self.alpha)?;
        for (metric, r) in &self.metrics {
            writeln!(f, "\n[metrics.{metric}]")?;
            writeln!(f, "threshold_pct = {:?}", r.threshold_pct)?;
            writeln!(f, "noise_floor = {:?}", r.noise_floor)?;
            writeln!(f, "gate = {}", r.gate)?;
        }
        for (subject, rules) in &self.subjects {
            for (metric, r) in rules {
                writeln!(f, "\n[operations.{}.{metric}]", toml_key(subject))?;
                if let Some(v) = r.threshold_pct {
                    writeln!(f, "threshold_pct = {v:?}")?;
                }
                if let Some(v) = r.noise_floor {
                    writeln!(f, "noise_floor = {v:?}")?;
                }
                if let Some(v) = r.gate {
                    writeln!(f, "gate = {v}")?;
                }
            }
        }
        Ok(())
    }
}

/// A TOML key, quoted unless it is a bare key.
fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        key.to_owned()
    } else {
        format!("{key:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_round_trips_through_its_toml() {
        let policy = Policy::default();
        let text = policy.to_string();
        assert_eq!(Policy::from_toml_str(&text).unwrap(), policy);
    }

    #[test]
    fn layers_apply_in_order() {
        let policy = Policy::from_toml_str(
            r#"
            alpha = 0.01
            [metrics.p99]
            threshold_pct = 5.0
            noise_floor = 50.0
            [operations.beat.p99]
            threshold_pct = 20.0
            [operations.push.p99]
            gate = false
            "#,
        )
        .unwrap();
        assert_eq!(policy.alpha, 0.01);
        assert_eq!(policy.rule("query", Metric::P99), rule(5.0, 50.0, true));
        assert_eq!(policy.rule("beat", Metric::P99), rule(20.0, 50.0, true));
        // Push keeps its built-in millisecond floor; the file only made it advisory.
        assert_eq!(policy.rule("push", Metric::P99), rule(5.0, 5_000.0, false));
        assert!(!policy.rule("send_lag", Metric::P50).gate);
    }

    #[test]
    fn refuses_bad_files() {
        assert!(matches!(
            Policy::from_toml_str("[metrics.p42]\nthreshold_pct = 1.0"),
            Err(PolicyError::UnknownMetric(_))
        ));
        assert!(matches!(
            Policy::from_toml_str("[metrics.p99]\nthreshold = 1.0"),
            Err(PolicyError::Toml(_))
        ));
        assert!(matches!(
            Policy::from_toml_str("alpha = 1.5"),
            Err(PolicyError::OutOfRange(_))
        ));
        assert!(matches!(
            Policy::from_toml_str("[metrics.p99]\nnoise_floor = -1.0"),
            Err(PolicyError::OutOfRange(_))
        ));
    }
}
