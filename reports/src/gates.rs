//! Instruction-count gates: the hot paths' instructions per operation as
//! `scripts/gates.sh` measures them under callgrind, and a pure comparison of
//! two such measurements against a tight threshold.
//!
//! Latencies on a shared 2-core machine move by tens of percent from one run
//! to the next; the instruction count of one binary on one input moves by a
//! few instructions. So these numbers can block a merge on a 2 % change
//! without repeated runs or significance tests, where wall-clock comparisons
//! ([`compare`](crate::compare())) can only advise.
//!
//! The file is its own small format, not a load [`Report`](crate::Report): it
//! has no histograms or timelines, and what makes two files comparable is the
//! toolchain (rustc, valgrind), not the machine. Each operation keeps the raw
//! callgrind totals of the `N` and `2N` runs next to the derived
//! `ir_per_op = (ir_2n − ir_n) / N`, so a file can be checked and any file can
//! be a baseline (history files under `reports/history/` are exactly these).
//!
//! ```
//! use reports::gates::{compare_gates, GateOp, GatePolicy, GateReport};
//!
//! let base = GateReport::new("aaaa", "rustc 1.90.0", "valgrind-3.19.0", "h1",
//!     vec![GateOp::from_counts("beat", 20_000, 26_000_000, 42_000_000)]);
//! let mut head = base.clone();
//! head.ops[0] = GateOp::from_counts("beat", 20_000, 26_000_000, 43_000_000);
//! let result = compare_gates(&base, &head, &GatePolicy::default())?;
//! assert!(result.has_regression()); // 800 -> 850 Ir/op is +6.25 %
//! # Ok::<(), reports::gates::GateError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::compare::Verdict;
use crate::table::Table;

/// Version of the gates file format.
pub const GATES_SCHEMA_VERSION: u32 = 1;
/// The `kind` every gates file carries, so it is never mistaken for a load report.
pub const GATES_KIND: &str = "instruction-counts";

/// Instructions per operation of every measured hot path at one commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateReport {
    /// [`GATES_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// [`GATES_KIND`].
    pub kind: String,
    /// The measured commit (`git rev-parse`), with `-dirty` for an uncommitted tree.
    pub commit: String,
    /// When the measurement was taken, RFC 3339 UTC.
    pub recorded_at: String,
    /// `rustc --version` of the build.
    pub rustc: String,
    /// `valgrind --version` of the measurement.
    pub valgrind: String,
    /// Git blob id of the `hotpaths` program that was measured: equal ids mean
    /// both sides ran the same fixture and loops.
    pub harness: String,
    /// One entry per hot path.
    pub ops: Vec<GateOp>,
}

/// One hot path's counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateOp {
    /// The `hotpaths` operation name (`beat`, `list-encode`, …).
    pub name: String,
    /// `N`: iterations of the shorter run.
    pub iterations: u64,
    /// Callgrind's total instructions (Ir) for `N` iterations, set-up included.
    pub ir_n: u64,
    /// Total instructions for `2N` iterations.
    pub ir_2n: u64,
    /// `(ir_2n − ir_n) / iterations`, rounded to 0.1: set-up cancels out.
    pub ir_per_op: f64,
}

impl GateOp {
    /// An operation from its raw counts, deriving `ir_per_op`.
    pub fn from_counts(name: impl Into<String>, iterations: u64, ir_n: u64, ir_2n: u64) -> Self {
        GateOp {
            name: name.into(),
            iterations,
            ir_n,
            ir_2n,
            ir_per_op: per_op(iterations, ir_n, ir_2n),
        }
    }
}

fn per_op(iterations: u64, ir_n: u64, ir_2n: u64) -> f64 {
    let raw = (ir_2n as f64 - ir_n as f64) / iterations.max(1) as f64;
    (raw * 10.0).round() / 10.0
}

/// Why a gates file or a pair of them was refused.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The file could not be read; check the path.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Not JSON, or fields missing or unknown; regenerate it with `scripts/gates.sh`.
    #[error("not a valid gates file: {0}")]
    Json(#[from] serde_json::Error),
    /// Another format version or kind (a load report, say); pass gates files only.
    #[error("not a gates file of version {GATES_SCHEMA_VERSION}: {0}")]
    Format(String),
    /// `ir_per_op` does not follow from the raw counts (a hand-edited file);
    /// fix the numbers or measure again.
    #[error(
        "{op}: ir_per_op {stored} does not match (ir_2n - ir_n) / iterations = {derived}, or ir_2n < ir_n"
    )]
    Inconsistent {
        /// The operation.
        op: String,
        /// The stored value.
        stored: f64,
        /// The value derived from the counts.
        derived: f64,
    },
    /// The sides were built or measured with different tools, so counts differ
    /// for reasons other than the code; measure both in one job, or `--force`.
    #[error(
        "{what} differs: base has `{base}`, head has `{head}`; measure both in one job or --force"
    )]
    Toolchain {
        /// `rustc` or `valgrind`.
        what: &'static str,
        /// The base's value.
        base: String,
        /// The head's value.
        head: String,
    },
    /// The policy file is not valid TOML or has unknown keys.
    #[error("invalid gate policy: {0}")]
    Policy(String),
    /// The sides ran different `hotpaths` programs where the same one is
    /// required (a pinned baseline): re-pin it with `scripts/gates.sh --pin`.
    #[error(
        "base ran hotpaths program {base}, head ran {head}: the baseline is stale; re-pin it with scripts/gates.sh --pin"
    )]
    Harness {
        /// The base's harness id.
        base: String,
        /// The head's harness id.
        head: String,
    },
}

impl GateReport {
    /// A report of the current version recorded now.
    pub fn new(
        commit: impl Into<String>,
        rustc: impl Into<String>,
        valgrind: impl Into<String>,
        harness: impl Into<String>,
        ops: Vec<GateOp>,
    ) -> Self {
        GateReport {
            schema_version: GATES_SCHEMA_VERSION,
            kind: GATES_KIND.to_owned(),
            commit: commit.into(),
            recorded_at: crate::rfc3339_utc(std::time::SystemTime::now()),
            rustc: rustc.into(),
            valgrind: valgrind.into(),
            harness: harness.into(),
            ops,
        }
    }

    /// Parses and checks a gates file's text.
    pub fn from_json_str(text: &str) -> Result<Self, GateError> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        let version = value.get("schema_version").and_then(|v| v.as_u64());
        let kind = value.get("kind").and_then(|v| v.as_str());
        if version != Some(u64::from(GATES_SCHEMA_VERSION)) || kind != Some(GATES_KIND) {
            return Err(GateError::Format(format!(
                "schema_version {version:?}, kind {kind:?}"
            )));
        }
        let report: GateReport = serde_json::from_value(value)?;
        for op in &report.ops {
            let derived = per_op(op.iterations, op.ir_n, op.ir_2n);
            // 0.1: the writer may round a final 5 the other way.
            if op.ir_2n < op.ir_n
                || op.iterations == 0
                || (derived - op.ir_per_op).abs() > 0.1 + 1e-9
            {
                return Err(GateError::Inconsistent {
                    op: op.name.clone(),
                    stored: op.ir_per_op,
                    derived,
                });
            }
        }
        Ok(report)
    }

    /// Reads a gates file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, GateError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| GateError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json_str(&text)
    }

    /// The operation named `name`.
    pub fn op(&self, name: &str) -> Option<&GateOp> {
        self.ops.iter().find(|o| o.name == name)
    }
}

/// How one operation is judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateRule {
    /// Largest tolerated growth of instructions per operation, percent.
    pub threshold_pct: f64,
    /// Changes of at most this many instructions per operation never fail
    /// (callgrind totals wobble by a few instructions between runs).
    pub noise_floor: f64,
    /// False: reported as a warning, never failing.
    pub gate: bool,
}

/// Thresholds for [`compare_gates`], from `reports/gates/policy.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct GatePolicy {
    /// The rule of every operation without its own.
    pub default: GateRule,
    /// Per-operation rules.
    pub ops: BTreeMap<String, GateRule>,
    /// Compare files from different toolchains anyway.
    pub force: bool,
    /// Refuse sides that ran different `hotpaths` programs (a pinned
    /// baseline must have been measured with head's program).
    pub same_harness: bool,
}

impl Default for GatePolicy {
    /// 2 % above a floor of 1 instruction per operation, gating every operation.
    fn default() -> Self {
        GatePolicy {
            default: GateRule {
                threshold_pct: 2.0,
                noise_floor: 1.0,
                gate: true,
            },
            ops: BTreeMap::new(),
            force: false,
            same_harness: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    threshold_pct: Option<f64>,
    noise_floor: Option<f64>,
    gate: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    threshold_pct: Option<f64>,
    noise_floor: Option<f64>,
    #[serde(default)]
    ops: BTreeMap<String, RuleFile>,
}

impl GatePolicy {
    /// The rule for operation `name`.
    pub fn rule(&self, name: &str) -> GateRule {
        self.ops.get(name).copied().unwrap_or(self.default)
    }

    /// Parses a policy: top-level `threshold_pct` and `noise_floor`, and
    /// `[ops.NAME]` tables that may set `threshold_pct`, `noise_floor`, `gate`.
    pub fn from_toml_str(text: &str) -> Result<Self, GateError> {
        let file: PolicyFile =
            toml::from_str(text).map_err(|e| GateError::Policy(e.to_string()))?;
        let mut policy = GatePolicy::default();
        policy.default.threshold_pct = file.threshold_pct.unwrap_or(policy.default.threshold_pct);
        policy.default.noise_floor = file.noise_floor.unwrap_or(policy.default.noise_floor);
        for (name, r) in file.ops {
            let d = policy.default;
            policy.ops.insert(
                name,
                GateRule {
                    threshold_pct: r.threshold_pct.unwrap_or(d.threshold_pct),
                    noise_floor: r.noise_floor.unwrap_or(d.noise_floor),
                    gate: r.gate.unwrap_or(d.gate),
                },
            );
        }
        let rules = std::iter::once(("(default)", &policy.default))
            .chain(policy.ops.iter().map(|(k, v)| (k.as_str(), v)));
        for (name, r) in rules {
            for (what, v) in [
                ("threshold_pct", r.threshold_pct),
                ("noise_floor", r.noise_floor),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(GateError::Policy(format!(
                        "{name}: {what} = {v} (must be finite and >= 0)"
                    )));
                }
            }
        }
        Ok(policy)
    }

    /// Reads a policy file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, GateError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| GateError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml_str(&text)
    }
}

/// One compared operation.
#[derive(Debug, Clone, PartialEq)]
pub struct GateRow {
    /// The operation.
    pub name: String,
    /// Base instructions per operation, `None` when base lacks the operation.
    pub base: Option<f64>,
    /// Head instructions per operation, `None` when head lacks it.
    pub head: Option<f64>,
    /// `(head − base) / base` in percent.
    pub delta_pct: Option<f64>,
    /// The rule applied.
    pub rule: GateRule,
    /// `Ok`, `Improved`, `WithinNoise`, `Warning`, `Regression` or `Missing`.
    pub verdict: Verdict,
}

/// The result of [`compare_gates`].
#[derive(Debug, Clone, PartialEq)]
pub struct GateComparison {
    /// Base commit.
    pub base_commit: String,
    /// Head commit.
    pub head_commit: String,
    /// Operations in base order, then those only head has.
    pub rows: Vec<GateRow>,
    /// Notes: a different harness on each side, toolchain mismatches let through by `force`.
    pub warnings: Vec<String>,
}

impl GateComparison {
    /// True when a gating operation grew beyond its threshold and floor, or
    /// is measured on one side only: a renamed or dropped hot path would
    /// otherwise leave the gate unseen (rename both sides in one change, and
    /// the pinned baseline with it).
    pub fn has_regression(&self) -> bool {
        self.rows.iter().any(|r| {
            r.verdict == Verdict::Regression || (r.verdict == Verdict::Missing && r.rule.gate)
        })
    }

    /// A Markdown headline, warnings and a table: operation, base, head, delta, threshold, verdict.
    pub fn to_markdown(&self) -> String {
        let regressions = self
            .rows
            .iter()
            .filter(|r| r.verdict == Verdict::Regression)
            .count();
        let headline = if regressions > 0 {
            format!("REGRESSION in {regressions} hot path(s)")
        } else {
            "no regression".to_owned()
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "### Instruction counts (Ir/op, callgrind): {} -> {}: {headline}\n",
            short(&self.base_commit),
            short(&self.head_commit)
        );
        for w in &self.warnings {
            let _ = writeln!(out, "> warning: {w}");
        }
        if !self.warnings.is_empty() {
            out.push('\n');
        }
        let mut table = Table::new(["hot path", "base", "head", "delta", "limit", "verdict"]);
        for r in &self.rows {
            let cell = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
            table.push([
                r.name.clone(),
                cell(r.base),
                cell(r.head),
                r.delta_pct.map_or("-".to_owned(), |d| format!("{d:+.2}%")),
                if r.rule.gate {
                    format!("+{}%", r.rule.threshold_pct)
                } else {
                    "advisory".to_owned()
                },
                r.verdict.label().to_owned(),
            ]);
        }
        out.push_str(&table.to_markdown());
        out
    }
}

/// A commit as tables show it: ten hex digits, keeping a `-dirty` marker.
fn short(commit: &str) -> String {
    let (sha, dirty) = match commit.strip_suffix("-dirty") {
        Some(sha) => (sha, "-dirty"),
        None => (commit, ""),
    };
    let end = sha.char_indices().nth(10).map_or(sha.len(), |(i, _)| i);
    format!("{}{dirty}", &sha[..end])
}

fn judge(base: f64, head: f64, rule: GateRule) -> (f64, Verdict) {
    let delta = head - base;
    let pct = if base > 0.0 {
        delta / base * 100.0
    } else if delta == 0.0 {
        0.0
    } else {
        f64::INFINITY
    };
    let beyond = pct.abs() > rule.threshold_pct && delta.abs() > rule.noise_floor;
    let verdict = if !beyond {
        if delta > 0.0 && pct > rule.threshold_pct {
            Verdict::WithinNoise
        } else {
            Verdict::Ok
        }
    } else if delta < 0.0 {
        Verdict::Improved
    } else if rule.gate {
        Verdict::Regression
    } else {
        Verdict::Warning
    };
    (pct, verdict)
}

/// Compares head's instructions per operation against base's under `policy`.
///
/// An operation regresses when it grows by more than its `threshold_pct`
/// **and** by more than its `noise_floor` instructions. One run per side is
/// enough: the counts are deterministic. Operations on one side only are
/// listed as missing and fail the gate (unless their rule is advisory).
///
/// # Errors
/// [`GateError::Toolchain`] when rustc or valgrind differ and `policy.force` is off;
/// [`GateError::Harness`] when the programs differ and `policy.same_harness` is on.
pub fn compare_gates(
    base: &GateReport,
    head: &GateReport,
    policy: &GatePolicy,
) -> Result<GateComparison, GateError> {
    let mut warnings = Vec::new();
    for (what, b, h) in [
        ("rustc", &base.rustc, &head.rustc),
        ("valgrind", &base.valgrind, &head.valgrind),
    ] {
        if b != h {
            let error = GateError::Toolchain {
                what,
                base: b.clone(),
                head: h.clone(),
            };
            if policy.force {
                warnings.push(format!("forced: {error}"));
            } else {
                return Err(error);
            }
        }
    }
    if base.harness != head.harness && policy.same_harness {
        return Err(GateError::Harness {
            base: base.harness.clone(),
            head: head.harness.clone(),
        });
    }
    if base.harness != head.harness {
        warnings.push(format!(
            "the sides ran different hotpaths programs ({} vs {}): a change in a fixture or loop shows up as a change here",
            short(&base.harness),
            short(&head.harness)
        ));
    }
    let mut names: Vec<&str> = base.ops.iter().map(|o| o.name.as_str()).collect();
    for op in &head.ops {
        if !names.contains(&op.name.as_str()) {
            names.push(&op.name);
        }
    }
    let rows = names
        .into_iter()
        .map(|name| {
            let rule = policy.rule(name);
            let b = base.op(name).map(|o| o.ir_per_op);
            let h = head.op(name).map(|o| o.ir_per_op);
            let (delta_pct, verdict) = match (b, h) {
                (Some(b), Some(h)) => {
                    let (pct, verdict) = judge(b, h, rule);
                    (Some(pct), verdict)
                }
                _ => (None, Verdict::Missing),
            };
            GateRow {
                name: name.to_owned(),
                base: b,
                head: h,
                delta_pct,
                rule,
                verdict,
            }
        })
        .collect();
    Ok(GateComparison {
        base_commit: base.commit.clone(),
        head_commit: head.commit.clone(),
        rows,
        warnings,
    })
}

/// A Markdown table of instructions per operation across `reports` (oldest
/// first, as history file names sort): one row per file, one column per operation.
pub fn trend_markdown(reports: &[GateReport]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for op in reports.iter().flat_map(|r| &r.ops) {
        if !names.contains(&op.name.as_str()) {
            names.push(&op.name);
        }
    }
    let headers = ["recorded", "commit"]
        .into_iter()
        .map(str::to_owned)
        .chain(names.iter().map(|n| (*n).to_owned()));
    let mut table = Table::new(headers);
    let mut previous: BTreeMap<&str, f64> = BTreeMap::new();
    for r in reports {
        let mut cells = vec![
            r.recorded_at.get(..10).unwrap_or(&r.recorded_at).to_owned(),
            short(&r.commit),
        ];
        for name in &names {
            cells.push(match r.op(name) {
                None => "-".to_owned(),
                Some(op) => {
                    let cell = match previous.get(name) {
                        Some(&p) if p > 0.0 && op.ir_per_op != p => {
                            format!(
                                "{:.1} ({:+.1}%)",
                                op.ir_per_op,
                                (op.ir_per_op - p) / p * 100.0
                            )
                        }
                        _ => format!("{:.1}", op.ir_per_op),
                    };
                    previous.insert(name, op.ir_per_op);
                    cell
                }
            });
        }
        table.push(cells);
    }
    table.to_markdown()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(commit: &str, ops: &[(&str, u64, u64)]) -> GateReport {
        GateReport::new(
            commit,
            "rustc 1.90.0",
            "valgrind-3.19.0",
            "harness1",
            ops.iter()
                .map(|&(name, n, per_op)| {
                    GateOp::from_counts(name, n, 1_000_000, 1_000_000 + n * per_op)
                })
                .collect(),
        )
    }

    fn verdicts(c: &GateComparison) -> Vec<(&str, Verdict)> {
        c.rows
            .iter()
            .map(|r| (r.name.as_str(), r.verdict))
            .collect()
    }

    #[test]
    fn same_counts_pass() {
        let base = report("a", &[("beat", 1000, 800), ("list-encode", 100, 100_000)]);
        let c = compare_gates(&base, &base.clone(), &GatePolicy::default()).unwrap();
        assert!(!c.has_regression());
        assert_eq!(
            verdicts(&c),
            [("beat", Verdict::Ok), ("list-encode", Verdict::Ok)]
        );
    }

    #[test]
    fn growth_beyond_two_percent_fails_and_shrinking_is_an_improvement() {
        let base = report(
            "a",
            &[
                ("beat", 1000, 800),
                ("register", 1000, 5000),
                ("push", 10, 400_000),
            ],
        );
        // +2.5 %, +1.9 %, -10 %.
        let head = report(
            "b",
            &[
                ("beat", 1000, 820),
                ("register", 1000, 5095),
                ("push", 10, 360_000),
            ],
        );
        let c = compare_gates(&base, &head, &GatePolicy::default()).unwrap();
        assert!(c.has_regression());
        assert_eq!(
            verdicts(&c),
            [
                ("beat", Verdict::Regression),
                ("register", Verdict::Ok),
                ("push", Verdict::Improved)
            ]
        );
        let md = c.to_markdown();
        assert!(md.contains("REGRESSION in 1 hot path(s)"), "{md}");
        assert!(
            md.contains("| beat | 800.0 | 820.0 | +2.50% | +2% | **REGRESSION** |"),
            "{md}"
        );
    }

    #[test]
    fn the_noise_floor_protects_tiny_paths() {
        // 40 -> 41 Ir/op is +2.5 % but a single instruction: within noise.
        let base = report("a", &[("tiny", 1000, 40)]);
        let head = report("b", &[("tiny", 1000, 41)]);
        let c = compare_gates(&base, &head, &GatePolicy::default()).unwrap();
        assert_eq!(verdicts(&c), [("tiny", Verdict::WithinNoise)]);
        assert!(!c.has_regression());
    }

    #[test]
    fn per_op_rules_and_advisory_ops() {
        let policy = GatePolicy::from_toml_str(
            "threshold_pct = 1.0\n[ops.push]\nthreshold_pct = 5.0\n[ops.beat]\ngate = false\n",
        )
        .unwrap();
        let base = report(
            "a",
            &[
                ("beat", 1000, 800),
                ("push", 10, 400_000),
                ("other", 100, 1000),
            ],
        );
        let head = report(
            "b",
            &[
                ("beat", 1000, 900),
                ("push", 10, 416_000),
                ("other", 100, 1015),
            ],
        );
        let c = compare_gates(&base, &head, &policy).unwrap();
        assert_eq!(
            verdicts(&c),
            [
                ("beat", Verdict::Warning),
                ("push", Verdict::Ok),
                ("other", Verdict::Regression)
            ]
        );
        assert!(GatePolicy::from_toml_str("threshold = 1").is_err());
        assert!(GatePolicy::from_toml_str("threshold_pct = -1").is_err());
    }

    #[test]
    fn missing_ops_fail_unless_advisory() {
        let base = report("a", &[("beat", 1000, 800), ("old", 10, 10)]);
        let head = report("b", &[("beat", 1000, 800), ("new", 10, 10)]);
        let c = compare_gates(&base, &head, &GatePolicy::default()).unwrap();
        assert_eq!(
            verdicts(&c),
            [
                ("beat", Verdict::Ok),
                ("old", Verdict::Missing),
                ("new", Verdict::Missing)
            ]
        );
        assert!(c.has_regression(), "a hot path on one side only must fail");
        let advisory =
            GatePolicy::from_toml_str("[ops.old]\ngate = false\n[ops.new]\ngate = false\n")
                .unwrap();
        let c = compare_gates(&base, &head, &advisory).unwrap();
        assert!(!c.has_regression());
    }

    #[test]
    fn toolchain_mismatch_is_refused_unless_forced() {
        let base = report("a", &[("beat", 1000, 800)]);
        let mut head = base.clone();
        head.rustc = "rustc 1.91.0".into();
        assert!(matches!(
            compare_gates(&base, &head, &GatePolicy::default()),
            Err(GateError::Toolchain { what: "rustc", .. })
        ));
        let forced = GatePolicy {
            force: true,
            ..GatePolicy::default()
        };
        let c = compare_gates(&base, &head, &forced).unwrap();
        assert_eq!(c.warnings.len(), 1);
    }

    #[test]
    fn files_round_trip_and_inconsistent_counts_are_refused() {
        let r = report("a", &[("beat", 1000, 800)]);
        let text = serde_json::to_string_pretty(&r).unwrap();
        assert_eq!(GateReport::from_json_str(&text).unwrap(), r);

        let mut edited = r.clone();
        edited.ops[0].ir_per_op = 700.0;
        let text = serde_json::to_string(&edited).unwrap();
        assert!(matches!(
            GateReport::from_json_str(&text),
            Err(GateError::Inconsistent { .. })
        ));
        assert!(matches!(
            GateReport::from_json_str(r#"{"schema_version":1,"tool":"loadgen"}"#),
            Err(GateError::Format(_))
        ));
    }

    #[test]
    fn short_commits_keep_the_dirty_marker() {
        assert_eq!(short("3cadd37998766b77e32b-dirty"), "3cadd37998-dirty");
        assert_eq!(short("3cadd37998766b77e32b"), "3cadd37998");
        assert_eq!(short("abc"), "abc");
    }

    #[test]
    fn trend_shows_changes_between_files() {
        let a = report("aaaaaaaaaaaa", &[("beat", 1000, 800)]);
        let b = report("bbbbbbbbbbbb", &[("beat", 1000, 820), ("new", 10, 5)]);
        let md = trend_markdown(&[a, b]);
        assert!(md.contains("| beat | new |"), "{md}");
        assert!(md.contains("| bbbbbbbbbb | 820.0 (+2.5%) | 5.0 |"), "{md}");
    }
}
