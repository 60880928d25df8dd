//! How much of a corrected latency is the generator's own send lag, and when a
//! figure is generator-limited.
//!
//! A corrected latency runs from the intended send time, so it holds the time a
//! request waited inside the generator before it was written (send lag) plus the
//! time on the wire and in the server. When the send lag is a large part of it, the
//! figure measures the generator: [`LIMIT_PCT`] (10 %) of a corrected percentile is
//! the line. Such a report says so in one line ([`note`]), and `report compare`
//! does not call a worse generator-limited latency a server regression unless told
//! to (`--allow-generator-limited`, see [`crate::compare`]).
//!
//! Shares compare percentiles of two distributions (send lag p99 against corrected
//! p99), not one request's parts: a bound on the generator's part, which is what a
//! reader needs to know whether to trust the figure.

use crate::report::{Operation, Report};

/// Send lag above this percentage of a corrected percentile makes it generator-limited.
pub const LIMIT_PCT: f64 = 10.0;

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
    pub fn limited(&self) -> bool {
        self.p50_pct > LIMIT_PCT || self.p99_pct > LIMIT_PCT
    }

    /// `lag 12µs/80µs (3%/8% of corrected)`.
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
    report
        .operation(name)
        .and_then(share)
        .is_some_and(|s| s.limited())
}

/// The generator-limited operations of `report`, in report order.
pub fn limited_ops(report: &Report) -> Vec<&str> {
    report
        .operations
        .iter()
        .filter(|op| share(op).is_some_and(|s| s.limited()))
        .map(|op| op.name.as_str())
        .collect()
}

/// The one-line warning of a report with generator-limited figures, if it has any.
pub fn note(report: &Report) -> Option<String> {
    let ops = limited_ops(report);
    (!ops.is_empty()).then(|| {
        format!(
            "GENERATOR-LIMITED: send lag is over {LIMIT_PCT:.0}% of corrected p50 or p99 for {}: \
             these latencies partly measure loadgen, not the server",
            ops.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::LatencyBlock;

    fn op(corrected_us: &[u64], lag_us: &[u64]) -> Operation {
        let block = |values: &[u64]| {
            let mut h = crate::new_histogram();
            for v in values {
                h.record(*v).unwrap();
            }
            LatencyBlock::from_histogram(&h).unwrap()
        };
        let mut o = Operation::new("beat", 1, 1.0, block(corrected_us), block(corrected_us));
        o.send_lag = Some(block(lag_us));
        o
    }

    #[test]
    fn a_latency_that_is_mostly_send_lag_is_limited() {
        let mostly_lag = op(&[1000, 1000, 5000], &[900, 900, 4500]);
        let s = share(&mostly_lag).unwrap();
        assert!(s.limited() && s.p50_pct > 80.0, "{s:?}");
        assert!(s.describe().contains("% of corrected p99"));
        let on_time = op(&[1000, 1000, 5000], &[5, 8, 20]);
        assert!(!share(&on_time).unwrap().limited());
        // p50 fine, p99 mostly lag: still limited.
        let corrected: Vec<u64> = [1000; 98].into_iter().chain([9000; 2]).collect();
        let lag: Vec<u64> = [5; 98].into_iter().chain([8000; 2]).collect();
        let tail = op(&corrected, &lag);
        let t = share(&tail).unwrap();
        assert!(t.limited() && t.p50_pct < LIMIT_PCT, "{t:?}");
        // Without a send-lag block (an older report) nothing is claimed.
        let mut old = on_time.clone();
        old.send_lag = None;
        assert!(share(&old).is_none());
    }
}
