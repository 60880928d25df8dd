//! How much of a corrected latency is the generator's own send lag, when a figure
//! is generator-limited, and the generator's verdict on a run: one place
//! ([`Verdict`]) that every renderer reads, so the report's top line and its
//! generator section cannot disagree.
//!
//! A corrected latency runs from the intended send time, so it holds the time a
//! request waited inside the generator before it was written (send lag) plus the
//! time on the wire and in the server. Part of any send lag is the machine's own:
//! a thread that sleeps until an absolute time wakes some microseconds late (tens to
//! hundreds on a shared virtual machine), and no generator on that machine can send
//! earlier than it wakes. Loadgen measures that lateness on its own cores during the
//! run (`wakeup_lateness`). An operation is *generator-limited* when both hold:
//!
//! - its send lag is a material share of its latency: over [`LIMIT_PCT`] (10 %) of its
//!   corrected p50 or p99, so the figure partly measures the generator; and
//! - its send lag is more than the machine's wake-up jitter explains: send-lag p99 over
//!   [`Allowance`], `max(`[`FLOOR_US`]`, `[`WAKEUP_FACTOR`]` × wake-up p99)`. Below it
//!   the generator sends as early as the machine lets any thread, and a better
//!   generator would not change the figure.
//!
//! A report without a wake-up measurement (older ones) is judged by the share alone.
//! Such a report says so in one line ([`Verdict::note`]), and `report compare` does
//! not call a worse generator-limited latency a server regression unless told to
//! (`--allow-generator-limited`, see [`crate::compare`]).
//!
//! Shares compare percentiles of two distributions (send lag p99 against corrected
//! p99), not one request's parts: a bound on the generator's part, which is what a
//! reader needs to know whether to trust the figure.

use crate::report::{Operation, Report};

/// Send lag above this percentage of a corrected percentile makes it generator-limited.
pub const LIMIT_PCT: f64 = 10.0;

/// Send-lag p99 at or below this many µs is never the generator's fault, however quiet
/// the machine's timers are: a wake-up, a clock read and a write take that long.
pub const FLOOR_US: u64 = 20;

/// Send-lag p99 up to this multiple of the machine's wake-up p99 is the machine's
/// (the goal loadgen holds itself to: send lag p99 <= 1.5 x wake-up p99).
pub const WAKEUP_FACTOR: f64 = 1.5;

/// The send lag a run's machine explains: its p99 is held against this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    /// The machine's wake-up lateness p99, µs (`None`: not measured, older report).
    pub wakeup_p99_us: Option<u64>,
    /// The allowance, µs: `max(FLOOR_US, WAKEUP_FACTOR x wake-up p99)`, 0 unmeasured.
    pub us: u64,
}

impl Allowance {
    /// The allowance of `report`'s machine.
    pub fn of(report: &Report) -> Allowance {
        let wakeup_p99_us = report
            .wakeup_lateness
            .as_ref()
            .filter(|b| b.summary.count > 0)
            .map(|b| b.summary.p99_us);
        Allowance {
            wakeup_p99_us,
            us: wakeup_p99_us.map_or(0, |w| FLOOR_US.max((w as f64 * WAKEUP_FACTOR) as u64)),
        }
    }
}

/// An operation's send lag against its corrected latency, at p50 and p99.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    /// Send lag p50, µs.
    pub lag_p50_us: u64,
    /// Send lag p99, µs.
    pub lag_p99_us: u64,
    /// Send lag p50 as a percentage of corrected p50.
    pub p50_pct: f64,
    /// Send lag p99 as a percentage of corrected p99.
    pub p99_pct: f64,
}

impl Share {
    /// Whether either percentile is more than [`LIMIT_PCT`] send lag.
    pub fn material(&self) -> bool {
        self.p50_pct > LIMIT_PCT || self.p99_pct > LIMIT_PCT
    }

    /// Whether the figure is generator-limited on a machine that explains `allowance`
    /// (see the module documentation).
    pub fn limited(&self, allowance: Allowance) -> bool {
        self.material() && self.lag_p99_us > allowance.us
    }

    /// `send lag p50 12µs (3% of corrected p50), p99 80µs (8% of corrected p99)`.
    pub fn describe(&self) -> String {
        format!(
            "send lag p50 {} ({:.0}% of corrected p50), p99 {} ({:.0}% of corrected p99)",
            crate::table::micros(self.lag_p50_us as f64),
            self.p50_pct,
            crate::table::micros(self.lag_p99_us as f64),
            self.p99_pct
        )
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        if part == 0 {
            0.0
        } else {
            100.0
        }
    } else {
        part as f64 / whole as f64 * 100.0
    }
}

/// The share of `op`'s corrected p50/p99 that is send lag, when the report has its
/// send lag and latencies.
pub fn share(op: &Operation) -> Option<Share> {
    let lag = op.send_lag.as_ref()?.summary;
    let corrected = op.corrected.summary;
    if lag.count == 0 || corrected.count == 0 {
        return None;
    }
    Some(Share {
        lag_p50_us: lag.p50_us,
        lag_p99_us: lag.p99_us,
        p50_pct: pct(lag.p50_us, corrected.p50_us),
        p99_pct: pct(lag.p99_us, corrected.p99_us),
    })
}

/// Whether the operation called `name` is generator-limited in `report`.
pub fn op_limited(report: &Report, name: &str) -> bool {
    let allowance = Allowance::of(report);
    report
        .operation(name)
        .and_then(share)
        .is_some_and(|s| s.limited(allowance))
}

/// The generator-limited operations of `report`, in report order.
pub fn limited_ops(report: &Report) -> Vec<&str> {
    Verdict::of(report).limited
}

/// The generator's verdict on a run, from which every rendering of it is derived.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict<'a> {
    /// Its scheduling lag broke the profile's limits (loadgen exit 4).
    pub fell_behind: bool,
    /// Schedule slots it skipped (loadgen exit 4 when any).
    pub skipped_slots: u64,
    /// The generator-limited operations, in report order.
    pub limited: Vec<&'a str>,
    /// What the machine's wake-up jitter explains.
    pub allowance: Allowance,
    /// Send lag over all operations, p99 and max, µs.
    pub send_lag_p99_us: u64,
    /// See `send_lag_p99_us`.
    pub send_lag_max_us: u64,
    /// Sends timed by a fallback instead of a socket stamp, over all operations.
    pub fallback_sends: u64,
}

impl<'a> Verdict<'a> {
    /// The verdict on `report`.
    pub fn of(report: &'a Report) -> Verdict<'a> {
        let allowance = Allowance::of(report);
        Verdict {
            fell_behind: report.generator.fell_behind,
            skipped_slots: report.generator.skipped_slots,
            limited: report
                .operations
                .iter()
                .filter(|op| share(op).is_some_and(|s| s.limited(allowance)))
                .map(|op| op.name.as_str())
                .collect(),
            allowance,
            send_lag_p99_us: report.generator.p99_send_lag_us,
            send_lag_max_us: report.generator.max_send_lag_us,
            fallback_sends: report
                .operations
                .iter()
                .filter_map(|op| op.send_stamps)
                .map(|s| s.fallback)
                .sum(),
        }
    }

    /// Whether every figure measures the server: on schedule, nothing skipped, no
    /// operation generator-limited.
    pub fn clean(&self) -> bool {
        !self.fell_behind && self.skipped_slots == 0 && self.limited.is_empty()
    }

    /// The warning under the operations table, when some figure is generator-limited.
    pub fn note(&self) -> Option<String> {
        (!self.limited.is_empty()).then(|| {
            format!(
                "GENERATOR-LIMITED: for {} send lag is over {LIMIT_PCT:.0}% of corrected p50 or p99 \
                 and its p99 over {}: these latencies partly measure loadgen, not the server",
                self.limited.join(", "),
                self.allowance_words()
            )
        })
    }

    /// The generator section's first line: the schedule, then the send lag against
    /// the machine's wake-up jitter, in words that agree with [`Verdict::note`].
    pub fn headline(&self) -> String {
        let schedule = if self.fell_behind {
            "FELL BEHIND its schedule (scheduling lag over the profile's limits): latencies partly measure the generator"
        } else {
            "kept its schedule (scheduling lag within the profile's limits)"
        };
        let lag = if self.limited.is_empty() {
            format!(
                "no figure generator-limited (send lag p99 {} against {})",
                crate::table::micros(self.send_lag_p99_us as f64),
                self.allowance_words()
            )
        } else {
            format!(
                "but GENERATOR-LIMITED for {}: send lag p99 {} over {}",
                self.limited.join(", "),
                crate::table::micros(self.send_lag_p99_us as f64),
                self.allowance_words()
            )
        };
        format!(
            "{schedule}; {lag}; send lag max {}",
            crate::table::micros(self.send_lag_max_us as f64)
        )
    }

    /// `1.5 x wake-up p99 160µs = 240µs`, or why there is no allowance.
    fn allowance_words(&self) -> String {
        match self.allowance.wakeup_p99_us {
            Some(w) => format!(
                "max({}, {WAKEUP_FACTOR} x the machine's wake-up p99 {}) = {}",
                crate::table::micros(FLOOR_US as f64),
                crate::table::micros(w as f64),
                crate::table::micros(self.allowance.us as f64)
            ),
            None => "no wake-up measurement (older report)".to_owned(),
        }
    }
}

/// The one-line warning of a report with generator-limited figures, if it has any.
pub fn note(report: &Report) -> Option<String> {
    Verdict::of(report).note()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LatencyBlock;

    fn block(values: &[u64]) -> LatencyBlock {
        let mut h = crate::new_histogram();
        for v in values {
            h.record(*v).unwrap();
        }
        LatencyBlock::from_histogram(&h).unwrap()
    }

    fn op(corrected_us: &[u64], lag_us: &[u64]) -> Operation {
        let mut o = Operation::new("beat", 1, 1.0, block(corrected_us), block(corrected_us));
        o.send_lag = Some(block(lag_us));
        o
    }

    const UNMEASURED: Allowance = Allowance {
        wakeup_p99_us: None,
        us: 0,
    };

    #[test]
    fn a_latency_that_is_mostly_send_lag_is_limited() {
        let mostly_lag = op(&[1000, 1000, 5000], &[900, 900, 4500]);
        let s = share(&mostly_lag).unwrap();
        assert!(s.limited(UNMEASURED) && s.p50_pct > 80.0, "{s:?}");
        assert!(s.describe().contains("% of corrected p99"));
        let on_time = op(&[1000, 1000, 5000], &[5, 8, 20]);
        assert!(!share(&on_time).unwrap().limited(UNMEASURED));
        // p50 fine, p99 mostly lag: still limited.
        let corrected: Vec<u64> = [1000; 98].into_iter().chain([9000; 2]).collect();
        let lag: Vec<u64> = [5; 98].into_iter().chain([8000; 2]).collect();
        let tail = op(&corrected, &lag);
        let t = share(&tail).unwrap();
        assert!(t.limited(UNMEASURED) && t.p50_pct < LIMIT_PCT, "{t:?}");
        // Without a send-lag block (an older report) nothing is claimed.
        let mut old = on_time.clone();
        old.send_lag = None;
        assert!(share(&old).is_none());
    }

    #[test]
    fn send_lag_the_machines_wakeups_explain_is_not_the_generators() {
        // Corrected p99 ~300 µs, send lag p99 ~200 µs: a large share.
        let mut report = crate::report::Report::new(
            "0",
            "x",
            Default::default(),
            Default::default(),
            Default::default(),
        );
        report
            .operations
            .push(op(&[200, 300, 300], &[150, 200, 200]));
        assert_eq!(
            limited_ops(&report),
            ["beat"],
            "unmeasured: the share alone"
        );
        // The machine's own timers wake 160 µs late at p99: 1.5 x = 240 µs >= 200 µs.
        report.wakeup_lateness = Some(block(&[90, 160, 160]));
        let allowance = Allowance::of(&report);
        assert_eq!(allowance.wakeup_p99_us, Some(160));
        assert_eq!(allowance.us, 240);
        let v = Verdict::of(&report);
        assert!(v.limited.is_empty() && v.clean(), "{v:?}");
        assert!(v.note().is_none());
        assert!(
            v.headline().contains("no figure generator-limited"),
            "{}",
            v.headline()
        );
        // A quiet machine (wake-up p99 10 µs): the floor, 20 µs, is the allowance.
        report.wakeup_lateness = Some(block(&[5, 10, 10]));
        let v = Verdict::of(&report);
        assert_eq!(v.allowance.us, FLOOR_US);
        assert_eq!(v.limited, ["beat"]);
        let (note, headline) = (v.note().unwrap(), v.headline());
        assert!(note.starts_with("GENERATOR-LIMITED: for beat"), "{note}");
        assert!(
            headline.contains("but GENERATOR-LIMITED for beat"),
            "{headline}"
        );
        assert!(!headline.contains("no figure"), "the two agree: {headline}");
    }

    #[test]
    fn the_headline_follows_the_schedule_verdict() {
        let mut report = crate::report::Report::new(
            "0",
            "x",
            Default::default(),
            Default::default(),
            Default::default(),
        );
        assert!(Verdict::of(&report)
            .headline()
            .starts_with("kept its schedule"));
        report.generator.fell_behind = true;
        let v = Verdict::of(&report);
        assert!(v.headline().starts_with("FELL BEHIND") && !v.clean());
    }
}
