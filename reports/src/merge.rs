//! Merging reports written by several concurrent loadgen processes of one run.
//!
//! Counters add up and histograms are decoded, added and re-encoded, so the
//! merged percentiles are exactly those of one process that had recorded every
//! value. The inputs are taken to have run *at the same time* against the same
//! profile, so:
//!
//! * rates add up (each process drove its own share of the load), and
//!   `duration_s` is the longest input's;
//! * timelines merge by `t_s`: counts and errors add up, and the per-second p99 is
//!   the largest input's, an upper bound (one second's histogram is not stored, so
//!   the exact value cannot be recovered);
//! * `environment`, `tool`, `target` and `profile.params` are the first input's, and
//!   `started_at` is the earliest;
//! * server figures add up when each process ran its own embedded server, and take
//!   the largest value when all processes loaded the same non-embedded URL (one
//!   server measured several times);
//! * error samples merge by class and message, counts added, still bounded
//!   ([`crate::reasons`]); send-stamp counts add; the machines' wake-up lateness
//!   histograms add, as send lag's do;
//! * thresholds are merged by expression: passed only if it passed everywhere,
//!   with the value from the first process where it failed.
//!
//! Inputs of another format version or another profile are refused.
//!
//! Segments (`loadgen run --segment I/N`): when the inputs are segments, they must be
//! exactly the segments `1/N ..= N/N` of one run. Each segment checked its own
//! services' lists and its own subscribers' convergence, but could not judge the
//! shared server's total: the merge does, comparing the sum of the segments'
//! instances with the server's count as the last segment saw it (the smallest count
//! reported: after a drain, the one taken when every segment had drained; this
//! assumes the server held nothing else). The merged report covers the whole run, so
//! it has no `segment`.

use std::collections::BTreeMap;

use crate::latency::{self, HistogramError, LatencyBlock};
use crate::report::{
    GeneratorHealth, Operation, PushStats, Report, SendStamps, ServerStats, ThresholdResult,
    TimelinePoint, Verification, SCHEMA_VERSION,
};

/// Why reports could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge; pass at least one report.
    #[error("no reports to merge")]
    Empty,
    /// An input has another format version; regenerate it with a matching loadgen.
    #[error("input {index} has schema_version {found}, expected {SCHEMA_VERSION}")]
    SchemaVersion {
        /// Position of the input (0-based).
        index: usize,
        /// Its version.
        found: u32,
    },
    /// An input ran another profile or configuration; merge only processes of one run.
    #[error(
        "input {index} ran profile {found} but input 0 ran {expected}; merge only processes of one run"
    )]
    ProfileMismatch {
        /// Position of the input (0-based).
        index: usize,
        /// `name@config_hash` of input 0.
        expected: String,
        /// `name@config_hash` of this input.
        found: String,
    },
    /// The inputs are not exactly the segments 1/N..N/N of one run.
    #[error("segments: {0}")]
    Segments(String),
    /// A histogram could not be decoded or added.
    #[error("operation {operation}: {source}")]
    Histogram {
        /// Which histogram.
        operation: String,
        /// What went wrong.
        #[source]
        source: HistogramError,
    },
}

/// Merges reports of concurrent processes into one (see the module documentation).
pub fn merge(reports: &[Report]) -> Result<Report, MergeError> {
    let first = reports.first().ok_or(MergeError::Empty)?;
    for (index, report) in reports.iter().enumerate() {
        if report.schema_version != SCHEMA_VERSION {
            return Err(MergeError::SchemaVersion {
                index,
                found: report.schema_version,
            });
        }
        if report.profile.name != first.profile.name
            || report.profile.config_hash != first.profile.config_hash
        {
            return Err(MergeError::ProfileMismatch {
                index,
                expected: profile_id(first),
                found: profile_id(report),
            });
        }
    }

    let segmented = check_segments(reports)?;
    let duration_s = reports.iter().map(|r| r.duration_s).fold(0.0, f64::max);
    let mut merged = first.clone();
    merged.duration_s = duration_s;
    merged.started_at = reports
        .iter()
        .map(|r| r.started_at.as_str())
        .min()
        .unwrap_or_default()
        .to_owned();
    merged.operations = merge_operations(reports)?;
    merged.send_lag = merge_optional_blocks(
        "send_lag",
        reports.iter().filter_map(|r| r.send_lag.as_ref()),
    )?;
    merged.wakeup_lateness = merge_optional_blocks(
        "wakeup_lateness",
        reports.iter().filter_map(|r| r.wakeup_lateness.as_ref()),
    )?;
    merged.push = merge_push(reports)?;
    merged.timeline = merge_timelines(reports);
    let shared_server = reports
        .iter()
        .all(|r| !r.target.embedded && r.target.url == first.target.url);
    merged.server = merge_server(reports, shared_server);
    merged.verification = if segmented {
        merge_segment_verification(reports)
    } else {
        merge_verification(reports, shared_server)
    };
    merged.segment = None;
    merged.generator = GeneratorHealth {
        fell_behind: reports.iter().any(|r| r.generator.fell_behind),
        max_send_lag_us: reports
            .iter()
            .map(|r| r.generator.max_send_lag_us)
            .max()
            .unwrap_or(0),
        skipped_slots: reports.iter().map(|r| r.generator.skipped_slots).sum(),
        p99_send_lag_us: match &merged.send_lag {
            Some(block) => block.summary.p99_us,
            None => reports
                .iter()
                .map(|r| r.generator.p99_send_lag_us)
                .max()
                .unwrap_or(0),
        },
    };
    merged.thresholds = merge_thresholds(reports);
    merged.phases = merge_phases(reports);
    let faults: Vec<&[crate::fault::FaultResult]> =
        reports.iter().map(|r| r.faults.as_slice()).collect();
    merged.faults = crate::fault::merge(&faults);
    Ok(merged)
}

/// Concurrent processes ran the same phases: rates add, the longest one's length
/// is the phase's.
fn merge_phases(reports: &[Report]) -> Vec<crate::report::PhaseRates> {
    let mut out: Vec<crate::report::PhaseRates> = Vec::new();
    for phase in reports.iter().flat_map(|r| &r.phases) {
        let Some(m) = out.iter_mut().find(|m| m.phase == phase.phase) else {
            out.push(phase.clone());
            continue;
        };
        m.planned_s = m.planned_s.max(phase.planned_s);
        m.actual_s = m.actual_s.max(phase.actual_s);
        for op in &phase.ops {
            match m.ops.iter_mut().find(|o| o.name == op.name) {
                Some(o) => {
                    o.intended_rate += op.intended_rate;
                    o.achieved_rate += op.achieved_rate;
                }
                None => m.ops.push(op.clone()),
            }
        }
    }
    out
}

/// Whether the inputs are segments; an error unless they are all segments 1..=N of
/// one N, each once, or none is.
fn check_segments(reports: &[Report]) -> Result<bool, MergeError> {
    let specs: Vec<Option<&str>> = reports.iter().map(|r| r.segment.as_deref()).collect();
    if specs.iter().all(Option::is_none) {
        return Ok(false);
    }
    let bad = |reason: String| Err(MergeError::Segments(reason));
    let mut seen = Vec::new();
    let mut count = None;
    for (index, spec) in specs.iter().enumerate() {
        let Some(spec) = spec else {
            return bad(format!("input {index} is a whole run, the others segments"));
        };
        let parsed = spec
            .split_once('/')
            .and_then(|(i, n)| Some((i.parse::<u32>().ok()?, n.parse::<u32>().ok()?)));
        let Some((i, n)) = parsed.filter(|(i, n)| *i >= 1 && i <= n) else {
            return bad(format!("input {index} has an invalid segment {spec:?}"));
        };
        if *count.get_or_insert(n) != n {
            return bad(format!("input {index} is segment {spec} of another split"));
        }
        if seen.contains(&i) {
            return bad(format!("segment {spec} is given twice"));
        }
        seen.push(i);
    }
    let n = count.unwrap_or(0);
    let missing: Vec<String> = (1..=n)
        .filter(|i| !seen.contains(i))
        .map(|i| format!("{i}/{n}"))
        .collect();
    if !missing.is_empty() {
        return bad(format!("missing {}", missing.join(", ")));
    }
    Ok(true)
}

fn merge_segment_verification(reports: &[Report]) -> Option<Verification> {
    let parts: Vec<&Verification> = reports
        .iter()
        .filter_map(|r| r.verification.as_ref())
        .collect();
    if parts.len() != reports.len() {
        return None;
    }
    let expected_instances = parts.iter().map(|p| p.expected_instances).sum();
    let server_instances = parts.iter().filter_map(|p| p.server_instances).min();
    let segments_ok = parts.iter().all(|p| p.ok);
    Some(Verification {
        expected_instances,
        server_instances,
        ok: segments_ok && server_instances == Some(expected_instances),
        detail: format!(
            "{} segments: own lists and subscribers {}; server instances {} (expected {expected_instances} in all)",
            parts.len(),
            if segments_ok { "ok" } else { "FAILED" },
            server_instances.map_or("unknown: no segment could read them".to_owned(), |n| n.to_string())
        ),
    })
}

fn profile_id(report: &Report) -> String {
    format!("{}@{}", report.profile.name, report.profile.config_hash)
}

fn merge_block<'a>(
    name: &str,
    blocks: impl IntoIterator<Item = &'a LatencyBlock>,
) -> Result<LatencyBlock, MergeError> {
    merge_optional_blocks(name, blocks).map(|block| block.unwrap_or_else(LatencyBlock::empty))
}

fn merge_optional_blocks<'a>(
    name: &str,
    blocks: impl IntoIterator<Item = &'a LatencyBlock>,
) -> Result<Option<LatencyBlock>, MergeError> {
    let wrap = |source| MergeError::Histogram {
        operation: name.to_owned(),
        source,
    };
    match latency::merge_blocks(blocks).map_err(wrap)? {
        Some(histogram) => Ok(Some(
            LatencyBlock::from_histogram(&histogram).map_err(wrap)?,
        )),
        None => Ok(None),
    }
}

fn merge_operations(reports: &[Report]) -> Result<Vec<Operation>, MergeError> {
    // Keep the order in which operations first appear, so merged output reads like its inputs.
    let mut names: Vec<&str> = Vec::new();
    for op in reports.iter().flat_map(|r| &r.operations) {
        if !names.contains(&op.name.as_str()) {
            names.push(&op.name);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let parts: Vec<&Operation> = reports
                .iter()
                .flat_map(|r| r.operations.iter().filter(|op| op.name == name))
                .collect();
            let mut errors_by_class = BTreeMap::new();
            for part in &parts {
                for (class, n) in &part.errors_by_class {
                    *errors_by_class.entry(class.clone()).or_insert(0) += n;
                }
            }
            let target_rates: Vec<f64> = parts.iter().filter_map(|p| p.target_rate).collect();
            let mut error_samples = Vec::new();
            for part in &parts {
                crate::reasons::merge(&mut error_samples, &part.error_samples);
            }
            let stamps: Vec<SendStamps> = parts.iter().filter_map(|p| p.send_stamps).collect();
            Ok(Operation {
                name: name.to_owned(),
                count: parts.iter().map(|p| p.count).sum(),
                errors: parts.iter().map(|p| p.errors).sum(),
                errors_by_class,
                target_rate: (!target_rates.is_empty()).then(|| target_rates.iter().sum()),
                achieved_rate: parts.iter().map(|p| p.achieved_rate).sum(),
                corrected: merge_block(name, parts.iter().map(|p| &p.corrected))?,
                uncorrected: merge_block(name, parts.iter().map(|p| &p.uncorrected))?,
                skipped: parts.iter().map(|p| p.skipped).sum(),
                send_lag: merge_optional_blocks(
                    name,
                    parts.iter().filter_map(|p| p.send_lag.as_ref()),
                )?,
                connection_wait: merge_optional_blocks(
                    name,
                    parts.iter().filter_map(|p| p.connection_wait.as_ref()),
                )?,
                client_queue: merge_optional_blocks(
                    name,
                    parts.iter().filter_map(|p| p.client_queue.as_ref()),
                )?,
                error_samples,
                send_stamps: (!stamps.is_empty()).then(|| SendStamps {
                    stamped: stamps.iter().map(|s| s.stamped).sum(),
                    fallback: stamps.iter().map(|s| s.fallback).sum(),
                }),
            })
        })
        .collect()
}

fn merge_push(reports: &[Report]) -> Result<Option<PushStats>, MergeError> {
    let parts: Vec<&PushStats> = reports.iter().filter_map(|r| r.push.as_ref()).collect();
    if parts.is_empty() {
        return Ok(None);
    }
    Ok(Some(PushStats {
        subscribers: parts.iter().map(|p| p.subscribers).sum(),
        pushes_received: parts.iter().map(|p| p.pushes_received).sum(),
        acks_sent: parts.iter().map(|p| p.acks_sent).sum(),
        converged: parts.iter().all(|p| p.converged),
        mismatched_subscribers: parts.iter().map(|p| p.mismatched_subscribers).sum(),
        latency: merge_block("push", parts.iter().map(|p| &p.latency))?,
    }))
}

fn merge_timelines(reports: &[Report]) -> Vec<TimelinePoint> {
    let mut seconds: BTreeMap<u32, TimelinePoint> = BTreeMap::new();
    for point in reports.iter().flat_map(|r| &r.timeline) {
        let merged = seconds.entry(point.t_s).or_insert_with(|| TimelinePoint {
            t_s: point.t_s,
            ops: BTreeMap::new(),
        });
        for (name, op) in &point.ops {
            let slot = merged.ops.entry(name.clone()).or_default();
            slot.count += op.count;
            slot.errors += op.errors;
            slot.p99_us = slot.p99_us.max(op.p99_us);
        }
    }
    seconds.into_values().collect()
}

fn merge_server(reports: &[Report], shared_server: bool) -> Option<ServerStats> {
    let parts: Vec<&ServerStats> = reports.iter().filter_map(|r| r.server.as_ref()).collect();
    if parts.is_empty() {
        return None;
    }
    let combine_u64 = |values: Vec<u64>| -> Option<u64> {
        if values.is_empty() {
            None
        } else if shared_server {
            values.into_iter().max()
        } else {
            Some(values.into_iter().sum())
        }
    };
    let cpu: Vec<f64> = parts.iter().filter_map(|p| p.cpu_seconds).collect();
    Some(ServerStats {
        rss_bytes: combine_u64(parts.iter().filter_map(|p| p.rss_bytes).collect()),
        peak_rss_bytes: combine_u64(parts.iter().filter_map(|p| p.peak_rss_bytes).collect()),
        cpu_seconds: if cpu.is_empty() {
            None
        } else if shared_server {
            Some(cpu.into_iter().fold(0.0, f64::max))
        } else {
            Some(cpu.into_iter().sum())
        },
    })
}

fn merge_verification(reports: &[Report], shared_server: bool) -> Option<Verification> {
    let parts: Vec<&Verification> = reports
        .iter()
        .filter_map(|r| r.verification.as_ref())
        .collect();
    if parts.is_empty() {
        return None;
    }
    let expected_instances = parts.iter().map(|p| p.expected_instances).sum();
    let (server_instances, ok) = if shared_server {
        // One server saw every process's instances: its count must equal the total.
        let server = parts.iter().filter_map(|p| p.server_instances).max();
        (server, server == Some(expected_instances))
    } else {
        // Each its own server: the sum is known only if every count is.
        let counts: Option<Vec<u64>> = parts.iter().map(|p| p.server_instances).collect();
        (counts.map(|c| c.iter().sum()), parts.iter().all(|p| p.ok))
    };
    let detail = parts
        .iter()
        .map(|p| p.detail.as_str())
        .filter(|d| !d.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    Some(Verification {
        expected_instances,
        server_instances,
        ok,
        detail,
    })
}

fn merge_thresholds(reports: &[Report]) -> Vec<ThresholdResult> {
    let mut merged: Vec<ThresholdResult> = Vec::new();
    for threshold in reports.iter().flat_map(|r| &r.thresholds) {
        match merged.iter_mut().find(|m| m.expr == threshold.expr) {
            None => merged.push(threshold.clone()),
            Some(existing) => {
                if existing.passed && !threshold.passed {
                    existing.passed = false;
                    existing.actual = threshold.actual;
                }
            }
        }
    }
    merged
}
