//! The report schema as Rust types, and reading and writing it as JSON.
//!
//! A [`Report`] holds plain values only (numbers, strings, booleans and encoded
//! histograms), never derived comparisons, so that any saved report can later be
//! loaded as a baseline. The field set is version 1 of the format
//! ([`SCHEMA_VERSION`]); the committed JSON Schema (`reports/schema/report.schema.json`,
//! see [`crate::schema`]) describes the same fields and is checked against these
//! types by the tests. Units are in the field names: `_us` is microseconds, `_s`
//! seconds, `_bytes` bytes, rates are operations per second.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::environment::Environment;
use crate::latency::LatencyBlock;

/// The version of the report format written by this crate and the only one it reads.
pub const SCHEMA_VERSION: u32 = 1;

/// The `tool` value written by the load generator.
pub const TOOL_LOADGEN: &str = "loadgen";

/// One run of the load generator (or several concurrent runs merged into one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Format version; always [`SCHEMA_VERSION`] for reports this crate writes.
    pub schema_version: u32,
    /// Name of the program that wrote the report, normally [`TOOL_LOADGEN`].
    pub tool: String,
    /// Version of that program.
    pub tool_version: String,
    /// When the run started, RFC 3339 in UTC (see [`crate::timestamp::rfc3339_utc`]).
    pub started_at: String,
    /// Wall-clock length of the measured run in seconds.
    pub duration_s: f64,
    /// Where the run happened; compared before two reports are compared.
    pub environment: Environment,
    /// Which load profile was run.
    pub profile: ProfileInfo,
    /// Which server was loaded.
    pub target: Target,
    /// One entry per operation kind (`register`, `beat`, `query`, …).
    pub operations: Vec<Operation>,
    /// Generator health: actual send time minus intended send time, over all operations.
    pub send_lag: Option<LatencyBlock>,
    /// Push propagation as seen by subscribers, when the profile has subscribers.
    pub push: Option<PushStats>,
    /// Per-second counts and p99 per operation; `t_s` ascending.
    pub timeline: Vec<TimelinePoint>,
    /// Server-side resource use, when the server ran on this machine.
    pub server: Option<ServerStats>,
    /// End-of-run check that the server holds what the generator registered.
    pub verification: Option<Verification>,
    /// Whether the generator itself kept up with its schedule.
    pub generator: GeneratorHealth,
    /// SLO thresholds evaluated at the end of the run.
    pub thresholds: Vec<ThresholdResult>,
    /// The slice of the profile this report covers, `"I/N"`, when one run was split
    /// over N processes (`loadgen run --segment I/N`); absent for a whole run and for
    /// the merge of every segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<String>,
    /// Each phase of the run (load, steady, drain) with the rates the profile
    /// intended and those achieved: an operation's run-wide rate cannot show a phase
    /// that took twice its planned length. Absent in older reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseRates>,
    /// Each scheduled fault and what the targets served around it
    /// ([`crate::fault`]). Absent for a run without faults and in older reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<crate::fault::FaultResult>,
    /// How late a bare absolute-time timer wake-up was on the generator's own cores
    /// during the run (the machine's wake-up jitter, measured beside the workers): the
    /// floor under any send lag, which the generator-limited verdict judges send lag
    /// against ([`crate::lag`]). Absent in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeup_lateness: Option<LatencyBlock>,
}

/// One phase of a run: how long it was planned to take and took, and per scheduled
/// operation the rate the profile intended against the rate achieved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseRates {
    /// `load`, `steady` or `drain`.
    pub phase: String,
    /// The plan's length of the phase, seconds (load and drain: count / rate).
    pub planned_s: f64,
    /// How long it took, seconds.
    pub actual_s: f64,
    /// The operations the phase schedules at a rate.
    pub ops: Vec<PhaseOp>,
}

/// One operation's rates in one phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseOp {
    /// Operation name.
    pub name: String,
    /// The profile's rate, operations per second.
    pub intended_rate: f64,
    /// Operations sent during the phase over its actual length.
    pub achieved_rate: f64,
}

impl PhaseOp {
    /// Achieved over intended (1 when nothing was intended).
    pub fn ratio(&self) -> f64 {
        if self.intended_rate > 0.0 {
            self.achieved_rate / self.intended_rate
        } else {
            1.0
        }
    }
}

/// The load profile a run used.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileInfo {
    /// Profile name, such as `smoke` or `nacos-1x-report`.
    pub name: String,
    /// Hash of the fully resolved configuration; runs compare only when it matches.
    pub config_hash: String,
    /// The resolved configuration itself, for humans.
    pub params: serde_json::Value,
}

/// The server a run loaded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// Base URL, such as `http://127.0.0.1:8848`.
    pub url: String,
    /// True when loadgen started the registry in-process on loopback.
    pub embedded: bool,
}

/// Results for one operation kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    /// Operation name, such as `beat` or `register`.
    pub name: String,
    /// Completed operations, including failed ones.
    pub count: u64,
    /// Failed operations; the sum of `errors_by_class`.
    pub errors: u64,
    /// Failures by class: `http_4xx`, `http_5xx`, `timeout`, `connection`, `protocol`.
    pub errors_by_class: BTreeMap<String, u64>,
    /// Intended rate in operations per second, for scheduled (open-loop) operations.
    pub target_rate: Option<f64>,
    /// Achieved rate in operations per second: `count / duration_s`.
    pub achieved_rate: f64,
    /// Latency from the intended send time (corrected for coordinated omission).
    pub corrected: LatencyBlock,
    /// Latency from the actual send time (service time).
    pub uncorrected: LatencyBlock,
    /// Schedule slots of this operation the generator could not fill (for example a
    /// deregistration due when nothing was registered): load that was planned but
    /// never offered. Absent in reports written before it existed.
    #[serde(default)]
    pub skipped: u64,
    /// This operation's send lag: the part of `corrected` that is the generator's own
    /// lateness, from the moment a request could be written (its intended time, or
    /// later when its connection had no room) to its write (see [`crate::lag`]).
    /// Absent in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_lag: Option<LatencyBlock>,
    /// What a request waited for its connection before it could be written (earlier
    /// answers on a full pipeline, a reconnect): the part of `corrected` that is
    /// neither the generator nor this request's own answer. Absent in reports
    /// written before it existed (their `send_lag` holds both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_wait: Option<LatencyBlock>,
    /// Of `send_lag`, what a request waited inside the generator's own client after
    /// it was started and before its last byte was written to the socket (the 2.x
    /// fleet's calls queue in its HTTP/2 client behind its other tasks). Absent for
    /// HTTP, whose writes are the socket's own, and in reports written before it
    /// existed (their `send_lag` ended at the call's start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_queue: Option<LatencyBlock>,
    /// The first distinct error messages of each class, with their counts, bounded
    /// ([`crate::reasons`]). Absent when nothing failed, and in older reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_samples: Vec<crate::reasons::ErrorSample>,
    /// How this operation's send times were taken, where a fleet can fall back (the
    /// 2.x fleet's calls: a socket stamp, or the call's start when the socket took no
    /// stamp). Absent for HTTP, whose send time is its write, and in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_stamps: Option<SendStamps>,
}

/// How an operation's send times were taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendStamps {
    /// Sends timed by the socket's stamp of the write that took the last byte.
    pub stamped: u64,
    /// Sends timed by a fallback (the call's start), the socket having taken no stamp:
    /// their send lag and service time are known no better than that.
    pub fallback: u64,
}

impl Operation {
    /// An operation with no target rate and no errors, given its two latency histograms.
    ///
    /// Set `target_rate`, `errors` and `errors_by_class` afterwards where they apply.
    pub fn new(
        name: impl Into<String>,
        count: u64,
        duration_s: f64,
        corrected: LatencyBlock,
        uncorrected: LatencyBlock,
    ) -> Self {
        Operation {
            name: name.into(),
            count,
            errors: 0,
            errors_by_class: BTreeMap::new(),
            target_rate: None,
            achieved_rate: rate(count, duration_s),
            corrected,
            uncorrected,
            skipped: 0,
            send_lag: None,
            connection_wait: None,
            client_queue: None,
            error_samples: Vec::new(),
            send_stamps: None,
        }
    }

    /// Failed operations as a fraction of all operations (0 when there were none).
    pub fn error_rate(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.errors as f64 / self.count as f64
        }
    }
}

/// Push propagation measured by the simulated subscribers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushStats {
    /// Number of subscribers.
    pub subscribers: u64,
    /// UDP push packets received by all subscribers.
    pub pushes_received: u64,
    /// Acks sent back to the server.
    pub acks_sent: u64,
    /// True when every subscriber ended holding the server's final instance list.
    pub converged: bool,
    /// Subscribers whose final view differed from the server's.
    pub mismatched_subscribers: u64,
    /// Change → receipt latency per subscriber.
    pub latency: LatencyBlock,
}

/// One second of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Seconds since the start of the run (the second `[t_s, t_s + 1)`).
    pub t_s: u32,
    /// Figures per operation name for that second.
    pub ops: BTreeMap<String, TimelineOp>,
}

/// One operation's figures in one second of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineOp {
    /// Operations completed in that second.
    pub count: u64,
    /// Operations failed in that second.
    pub errors: u64,
    /// Corrected p99 latency in that second, microseconds.
    pub p99_us: u64,
}

/// Resource use of a server running on the same machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    /// Resident set size at the end of the run, bytes.
    pub rss_bytes: Option<u64>,
    /// Peak resident set size, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// User plus system CPU time used during the run, seconds.
    pub cpu_seconds: Option<f64>,
}

/// End-of-run check of the server's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// Instances the generator expects to be registered.
    pub expected_instances: u64,
    /// Instances the server reports; `null` when it could not be read (`detail`
    /// says why). Older reports wrote 0 for that.
    #[serde(default)]
    pub server_instances: Option<u64>,
    /// True when the check passed.
    pub ok: bool,
    /// Human-readable explanation, empty when there is nothing to say.
    pub detail: String,
}

/// Whether the generator kept up with its own schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GeneratorHealth {
    /// True when the generator could not send on schedule, so latencies partly measure
    /// it (also set when it skipped schedule slots).
    pub fell_behind: bool,
    /// Largest send lag, microseconds.
    pub max_send_lag_us: u64,
    /// 99th percentile send lag, microseconds.
    pub p99_send_lag_us: u64,
    /// Schedule slots the generator skipped over all operations: a run with any did
    /// not offer the load it planned and is not valid. Absent in older reports.
    #[serde(default)]
    pub skipped_slots: u64,
}

/// One evaluated SLO threshold, such as `beat.p99 < 20ms`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThresholdResult {
    /// The threshold expression as the user wrote it.
    pub expr: String,
    /// True when the threshold held.
    pub passed: bool,
    /// The measured value the expression was evaluated on, in the expression's unit.
    pub actual: f64,
}

/// Why a report could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The file could not be read or written; check the path and permissions.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The text is not JSON, or not a report of this version; fix or regenerate the file.
    #[error("not a valid report: {0}")]
    Json(#[from] serde_json::Error),
    /// The report has no numeric `schema_version`; it was not written by this tool.
    #[error("not a report: no numeric `schema_version` field")]
    MissingVersion,
    /// The report was written in another format version; use a matching `report` build.
    #[error("unsupported schema_version {found} (this build reads version {SCHEMA_VERSION})")]
    UnsupportedVersion {
        /// The version found in the file.
        found: u64,
    },
}

impl Report {
    /// An empty report of the current version, written by `loadgen` at `tool_version`.
    ///
    /// Loadgen fills `operations`, `timeline` and the optional blocks as the run
    /// produces them; everything else starts at zero or empty.
    pub fn new(
        tool_version: impl Into<String>,
        started_at: impl Into<String>,
        environment: Environment,
        profile: ProfileInfo,
        target: Target,
    ) -> Self {
        Report {
            schema_version: SCHEMA_VERSION,
            tool: TOOL_LOADGEN.to_owned(),
            tool_version: tool_version.into(),
            started_at: started_at.into(),
            duration_s: 0.0,
            environment,
            profile,
            target,
            operations: Vec::new(),
            send_lag: None,
            push: None,
            timeline: Vec::new(),
            server: None,
            verification: None,
            generator: GeneratorHealth::default(),
            thresholds: Vec::new(),
            segment: None,
            phases: Vec::new(),
            faults: Vec::new(),
            wakeup_lateness: None,
        }
    }

    /// The operation called `name`, if the report has one.
    pub fn operation(&self, name: &str) -> Option<&Operation> {
        self.operations.iter().find(|op| op.name == name)
    }

    /// Parses a report from JSON text, refusing other format versions.
    pub fn from_json_str(text: &str) -> Result<Self, ReportError> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        Self::from_json_value(value)
    }

    /// Converts a parsed JSON value into a report, refusing other format versions.
    ///
    /// The version is checked before the fields so that a report from a newer
    /// format fails with [`ReportError::UnsupportedVersion`] instead of a
    /// confusing missing-field error.
    pub fn from_json_value(value: serde_json::Value) -> Result<Self, ReportError> {
        let version = value
            .get("schema_version")
            .and_then(serde_json::Value::as_u64)
            .ok_or(ReportError::MissingVersion)?;
        if version != u64::from(SCHEMA_VERSION) {
            return Err(ReportError::UnsupportedVersion { found: version });
        }
        Ok(serde_json::from_value(value)?)
    }

    /// The report as pretty-printed JSON.
    pub fn to_json_pretty(&self) -> Result<String, ReportError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Reads a report file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ReportError> {
        let path = path.as_ref();
        let text = fs::read_to_string(path).map_err(|source| ReportError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json_str(&text)
    }

    /// Writes the report as pretty-printed JSON with a trailing newline.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), ReportError> {
        let path = path.as_ref();
        let mut text = self.to_json_pretty()?;
        text.push('\n');
        fs::write(path, text).map_err(|source| ReportError::Io {
            path: path.to_owned(),
            source,
        })
    }
}

/// Operations per second, 0 for a run of no length (never NaN or infinite, which JSON cannot hold).
pub fn rate(count: u64, duration_s: f64) -> f64 {
    if duration_s > 0.0 && duration_s.is_finite() {
        count as f64 / duration_s
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_other_versions_before_reading_fields() {
        let err = Report::from_json_str(r#"{"schema_version": 2}"#).unwrap_err();
        assert!(matches!(err, ReportError::UnsupportedVersion { found: 2 }));
        let err = Report::from_json_str(r#"{"tool": "x"}"#).unwrap_err();
        assert!(matches!(err, ReportError::MissingVersion));
        let err = Report::from_json_str("not json").unwrap_err();
        assert!(matches!(err, ReportError::Json(_)));
    }

    #[test]
    fn rate_is_finite() {
        assert_eq!(rate(10, 0.0), 0.0);
        assert_eq!(rate(10, f64::NAN), 0.0);
        assert_eq!(rate(10, 2.0), 5.0);
    }
}
