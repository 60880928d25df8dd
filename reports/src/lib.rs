//! Load reports: the versioned JSON format written by `loadgen`, and what the
//! `report` binary does with it (show, render as HTML, merge, compare).
//!
//! Building a report from code (what loadgen does):
//!
//! ```
//! use reports::{Environment, LatencyBlock, Operation, ProfileInfo, Report, Target};
//!
//! let mut corrected = reports::new_histogram();
//! corrected.record(1_250).unwrap(); // microseconds
//! let uncorrected = corrected.clone();
//!
//! let mut report = Report::new(
//!     "0.1.0",
//!     reports::rfc3339_utc(std::time::SystemTime::now()),
//!     Environment::detect("abc1234"),
//!     ProfileInfo { name: "smoke".into(), config_hash: "9f2c".into(), params: serde_json::json!({}) },
//!     Target { url: "http://127.0.0.1:8848".into(), embedded: true },
//! );
//! report.duration_s = 10.0;
//! let mut beat = Operation::new(
//!     "beat",
//!     1,
//!     report.duration_s,
//!     LatencyBlock::from_histogram(&corrected)?,
//!     LatencyBlock::from_histogram(&uncorrected)?,
//! );
//! beat.target_rate = Some(0.1);
//! report.operations.push(beat);
//!
//! let json = serde_json::to_value(&report)?;
//! assert!(reports::validate_against_schema(&json).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//!
//! - [`report`]: the schema as Rust types ([`Report`], [`Operation`], …), loading and saving.
//! - [`latency`]: [`LatencyBlock`], a summary plus a base64 V2+DEFLATE HdrHistogram.
//! - [`environment`]: [`Environment::detect`], the machine a run happened on.
//! - [`timestamp`]: RFC 3339 timestamps for `started_at`.
//! - [`schema`]: the committed JSON Schema and [`validate_against_schema`].
//! - [`merge`](mod@merge): [`merge()`](merge::merge) reports of concurrent processes losslessly.
//! - [`policy`]: the comparison [`Policy`] (thresholds, noise floors, alpha) from TOML.
//! - [`significance`]: Welch's t-test for repeated runs.
//! - [`reasons`]: the first distinct error messages per class, bounded, with counts.
//! - [`lag`]: how much of a corrected latency is send lag; generator-limited figures.
//! - [`compare`](mod@compare): [`compare()`](compare::compare), pure, from reports and a policy to a [`Comparison`].
//! - [`gates`]: instruction counts of the hot paths ([`gates::GateReport`]) and
//!   their tight, deterministic comparison ([`gates::compare_gates`]).
//! - [`table`]: text and Markdown tables and unit formatting.
//! - [`show`]: the report as text or Markdown sections.
//! - [`spectrum`]: percentile spectra of histograms.
//! - [`chart`]: line charts as inline SVG.
//! - [`page`]: the self-contained HTML page.
//! - [`cli`]: the `report` command line, [`cli::status`] runs one.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod chart;
pub mod cli;
pub mod compare;
pub mod environment;
pub mod fault;
pub mod gates;
pub mod lag;
pub mod latency;
pub mod merge;
pub mod page;
pub mod policy;
pub mod reasons;
pub mod report;
pub mod schema;
pub mod show;
pub mod significance;
pub mod spectrum;
pub mod table;
pub mod timestamp;

pub use compare::{compare, CompareError, Comparison, Row, Verdict};
pub use environment::Environment;
pub use latency::{new_histogram, HistogramError, LatencyBlock, Summary};
pub use merge::{merge, MergeError};
pub use page::render_html;
pub use policy::{Metric, MetricRule, Policy, PolicyError};
pub use report::{
    GeneratorHealth, Operation, PhaseOp, PhaseRates, ProfileInfo, PushStats, Report, ReportError,
    SendStamps, ServerStats, Target, ThresholdResult, TimelineOp, TimelinePoint, Verification,
    SCHEMA_VERSION,
};
pub use schema::validate_against_schema;
pub use show::Format;
pub use timestamp::rfc3339_utc;
