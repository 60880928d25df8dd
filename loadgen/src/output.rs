//! What a run shows and writes while it runs: the live progress bar, the per-second
//! timeline, the 1 s interval `.hlog`, and the final terminal summary.
//!
//! Workers send one [`Interval`] per second each; the [`Collector`] merges the
//! workers' histograms of a second once all of them have reported it, turns the
//! merged second into a [`TimelinePoint`] and interval-log lines (HdrHistogram's
//! format: `Tag=<op>,<start>,<length>,<max>,<base64 V2+DEFLATE>`; tags `<op>` for the
//! corrected latency, `<op>.uncorrected`, `send_lag`, `sched_lag` and `push`, values in
//! microseconds), and keeps the latest second for the progress bar.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use hdrhistogram::serialization::interval_log::{IntervalLogWriter, Tag};
use hdrhistogram::serialization::Serializer;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reports::{Report, TimelineOp, TimelinePoint};

use crate::plan::{Phase, Rates};
use crate::recorder::{Op, Stats};
use crate::worker::Interval;

/// Merges per-worker seconds into the timeline and the interval log.
#[derive(Debug)]
pub struct Collector {
    workers: u32,
    pending: BTreeMap<u32, (Stats, u32)>,
    last_seen: Vec<Option<u32>>,
    /// Finished seconds, ascending.
    pub timeline: Vec<TimelinePoint>,
    /// The latest finished second.
    pub latest: Option<(u32, Stats)>,
}

impl Collector {
    /// A collector for `workers` workers.
    pub fn new(workers: u32) -> Collector {
        Collector {
            workers,
            pending: BTreeMap::new(),
            last_seen: vec![None; workers as usize],
            timeline: Vec::new(),
            latest: None,
        }
    }

    /// Takes one worker's second; finishes every second all workers have passed.
    pub fn absorb<W: Write, S: Serializer>(
        &mut self,
        interval: Interval,
        log: Option<&mut IntervalLogWriter<'_, '_, W, S>>,
    ) {
        let w = interval.worker as usize;
        if let Some(seen) = self.last_seen.get_mut(w) {
            *seen = Some(seen.map_or(interval.second, |s| s.max(interval.second)));
        }
        let entry = self
            .pending
            .entry(interval.second)
            .or_insert_with(|| (Stats::default(), 0));
        entry.0.add(&interval.stats);
        entry.1 += 1;
        let done_upto = self
            .last_seen
            .iter()
            .map(|s| s.unwrap_or(0))
            .min()
            .unwrap_or(0);
        let all_seen = self.last_seen.iter().all(Option::is_some);
        // A second is complete when every worker has reported a later one (or it
        // itself, from every worker).
        let ready: Vec<u32> = self
            .pending
            .iter()
            .filter(|(s, (_, n))| *n >= self.workers || (all_seen && **s < done_upto))
            .map(|(s, _)| *s)
            .collect();
        let mut log = log;
        for s in ready {
            if let Some((stats, _)) = self.pending.remove(&s) {
                self.finish_second(s, stats, log.as_deref_mut());
            }
        }
    }

    /// Finishes every pending second (at the end of the run).
    pub fn flush<W: Write, S: Serializer>(
        &mut self,
        mut log: Option<&mut IntervalLogWriter<'_, '_, W, S>>,
    ) {
        let pending = std::mem::take(&mut self.pending);
        for (s, (stats, _)) in pending {
            self.finish_second(s, stats, log.as_deref_mut());
        }
    }

    fn finish_second<W: Write, S: Serializer>(
        &mut self,
        second: u32,
        stats: Stats,
        log: Option<&mut IntervalLogWriter<'_, '_, W, S>>,
    ) {
        let mut point = TimelinePoint {
            t_s: second,
            ops: BTreeMap::new(),
        };
        for op in Op::ALL {
            let o = stats.op(op);
            if o.count == 0 {
                continue;
            }
            point.ops.insert(
                op.name().to_owned(),
                TimelineOp {
                    count: o.count,
                    errors: o.error_count(),
                    p99_us: if o.corrected.is_empty() {
                        0
                    } else {
                        o.corrected.value_at_quantile(0.99)
                    },
                },
            );
        }
        if let Some(log) = log {
            let start = Duration::from_secs(u64::from(second));
            let len = Duration::from_secs(1);
            let mut write = |tag: &str, h: &Histogram<u64>| {
                if !h.is_empty() {
                    let _ = log.write_histogram(h, start, len, Tag::new(tag));
                }
            };
            for op in Op::ALL {
                let o = stats.op(op);
                write(op.name(), &o.corrected);
                write(&format!("{}.uncorrected", op.name()), &o.uncorrected);
            }
            write("send_lag", &stats.send_lag);
            write("conn_wait", &stats.conn_wait);
            write("sched_lag", &stats.sched_lag);
            write("push", &stats.push);
        }
        // Seconds finish in order (a worker's seconds ascend), but a late duplicate
        // of an already finished second is merged into its point.
        match self.timeline.iter_mut().find(|p| p.t_s == second) {
            Some(p) => {
                for (k, v) in point.ops {
                    let e = p.ops.entry(k).or_default();
                    e.count += v.count;
                    e.errors += v.errors;
                    e.p99_us = e.p99_us.max(v.p99_us);
                }
            }
            None => {
                self.timeline.push(point);
                self.timeline.sort_by_key(|p| p.t_s);
            }
        }
        self.latest = Some((second, stats));
    }
}

/// The live progress line (hidden when stderr is not a terminal or when quiet).
#[derive(Debug)]
pub struct Live {
    bar: ProgressBar,
}

impl Live {
    /// A spinner with elapsed time and a message.
    pub fn new(quiet: bool) -> Live {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
            if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}") {
                bar.set_style(style);
            }
            bar
        };
        Live { bar }
    }

    /// Updates the line: the phase, each rate-driven operation's achieved rate
    /// (writes in the latest finished second) against the rate the phase intends,
    /// errors so far, the latest second's send lag, and what is in flight.
    pub fn update(&self, now: &Now<'_>, extra: &str) {
        self.bar.set_message(now.line(extra));
        self.bar.tick();
    }

    /// Prints a line above the bar.
    pub fn println(&self, line: impl AsRef<str>) {
        if self.bar.is_hidden() {
            eprintln!("{}", line.as_ref());
        } else {
            self.bar.println(line.as_ref());
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// What the progress line (and `--metrics-listen`) shows of a running run.
#[derive(Debug, Clone, Copy)]
pub struct Now<'a> {
    /// The phase.
    pub phase: Phase,
    /// The rates the phase intends.
    pub rates: Rates,
    /// The latest finished second.
    pub latest: Option<&'a (u32, Stats)>,
    /// Failed operations so far.
    pub errors: u64,
    /// Requests queued or in flight.
    pub outstanding: u64,
}

impl Now<'_> {
    /// Writes of `op` in the latest second.
    pub fn achieved(&self, op: Op) -> u64 {
        self.latest
            .map_or(0, |(_, s)| s.op(op).sent_in.iter().sum())
    }

    /// The latest second's send lag p50 and p99, µs.
    pub fn send_lag_us(&self) -> Option<(u64, u64)> {
        let (_, s) = self.latest?;
        (!s.send_lag.is_empty()).then(|| {
            (
                s.send_lag.value_at_quantile(0.5),
                s.send_lag.value_at_quantile(0.99),
            )
        })
    }

    fn line(&self, extra: &str) -> String {
        let mut msg = format!("{:<6}", self.phase);
        for op in Op::ALL {
            let sent = self.achieved(op);
            match self.rates.of(op).filter(|r| *r > 0.0) {
                Some(rate) => msg.push_str(&format!(
                    " | {} {sent}/s of {}",
                    op.name(),
                    reports::table::per_second(rate)
                )),
                None if sent > 0 => msg.push_str(&format!(" | {} {sent}/s", op.name())),
                None => {}
            }
        }
        msg.push_str(&format!(" | errors {}", self.errors));
        if let Some((p50, p99)) = self.send_lag_us() {
            msg.push_str(&format!(
                " | send lag p50 {} p99 {}",
                reports::table::micros(p50 as f64),
                reports::table::micros(p99 as f64)
            ));
        }
        msg.push_str(&format!(" | in flight {}", self.outstanding));
        if !extra.is_empty() {
            msg.push_str(" | ");
            msg.push_str(extra);
        }
        msg
    }
}

/// Extra figures that have no place in the report schema, printed after its table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Notes {
    /// Scheduling lag (dispatch minus intended): p99 and max, µs.
    pub sched_lag_us: (u64, u64),
    /// The limits that decide "fell behind", µs.
    pub lag_limits_us: (u64, u64),
    /// Verification at the end of the steady phase.
    pub steady_check: String,
    /// Loadgen's own memory per simulated client.
    pub footprint: String,
    /// Files written.
    pub files: Vec<String>,
}

/// The terminal summary: the report's tables, then the notes.
pub fn summary(report: &Report, notes: &Notes) -> String {
    let mut out = reports::show::render(report, reports::Format::Text);
    let (p99, max) = notes.sched_lag_us;
    out.push_str(&format!(
        "== Generator health ==\nscheduling (dispatch - intended): p99 {}, max {} (limits {} / {}); send lag is the wait inside loadgen once a request could be written, connection wait (per operation) the wait for its connection before that: the server's{}\n",
        reports::table::micros(p99 as f64),
        reports::table::micros(max as f64),
        reports::table::micros(notes.lag_limits_us.0 as f64),
        reports::table::micros(notes.lag_limits_us.1 as f64),
        // The same verdict as the report's generator section, not a second opinion.
        if reports::lag::Verdict::of(report).fell_behind {
            "\nWARNING: the generator fell behind its schedule; latencies partly measure loadgen itself"
        } else {
            ""
        }
    ));
    if !notes.steady_check.is_empty() {
        out.push_str(&format!("steady-phase check: {}\n", notes.steady_check));
    }
    if !notes.footprint.is_empty() {
        out.push_str(&format!("loadgen memory: {}\n", notes.footprint));
    }
    for f in &notes.files {
        out.push_str(&format!("wrote {f}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{
        IntervalLogIterator, IntervalLogWriterBuilder, LogEntry,
    };
    use hdrhistogram::serialization::V2DeflateSerializer;

    fn second(worker: u32, s: u32, beats: u64) -> Interval {
        let mut stats = Stats::default();
        let o = &mut stats.ops[Op::Beat as usize];
        o.count = beats;
        for i in 0..beats {
            o.corrected.record(100 + i).unwrap();
        }
        Interval {
            worker,
            second: s,
            stats,
        }
    }

    #[test]
    fn merges_seconds_of_all_workers_and_logs_them() {
        let mut out = Vec::new();
        let mut ser = V2DeflateSerializer::new();
        {
            let mut log = IntervalLogWriterBuilder::new()
                .begin_log_with(&mut out, &mut ser)
                .unwrap();
            let mut c = Collector::new(2);
            c.absorb(second(0, 0, 10), Some(&mut log));
            assert!(c.timeline.is_empty(), "waits for the other worker");
            c.absorb(second(1, 0, 5), Some(&mut log));
            assert_eq!(c.timeline.len(), 1);
            assert_eq!(c.timeline[0].ops["beat"].count, 15);
            c.absorb(second(0, 1, 1), Some(&mut log));
            c.absorb(second(0, 2, 1), Some(&mut log));
            c.absorb(second(1, 2, 1), Some(&mut log));
            // Worker 1 skipped second 1 (a stall); once both passed it, it is done.
            assert_eq!(
                c.timeline.iter().map(|p| p.t_s).collect::<Vec<_>>(),
                [0, 1, 2]
            );
            c.flush(Some(&mut log));
            assert_eq!(c.latest.as_ref().unwrap().0, 2);
        }
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains("Tag=beat,"), "{text}");
        let intervals = IntervalLogIterator::new(&out)
            .filter_map(|e| match e {
                Ok(LogEntry::Interval(h)) => Some(h.tag().map(|t| t.as_str().to_owned())),
                _ => None,
            })
            .count();
        assert_eq!(intervals, 3);
    }
}
