//! The percentile spectrum of a histogram: latency against percentile, the way
//! wrk2 and HdrHistogram print it (`Value  Percentile  TotalCount  1/(1-Percentile)`)
//! and plot it on a logarithmic `1/(1-p)` axis, where 90 %, 99 %, 99.9 % … are
//! evenly spaced so the tail gets as much room as the median.

use hdrhistogram::Histogram;

/// Ticks per halving of the remaining distance to 100 %, as wrk2 prints them.
pub const TICKS_PER_HALF_DISTANCE: u32 = 5;

/// One step of the spectrum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpectrumPoint {
    /// Quantile reached, 0..=1.
    pub quantile: f64,
    /// Highest value at that quantile, microseconds.
    pub value_us: u64,
    /// Values recorded at or below `value_us`.
    pub total_count: u64,
}

impl SpectrumPoint {
    /// `1 / (1 − quantile)`: 10 at p90, 100 at p99; infinite at 100 %.
    pub fn inverse_tail(&self) -> f64 {
        if self.quantile >= 1.0 {
            f64::INFINITY
        } else {
            1.0 / (1.0 - self.quantile)
        }
    }
}

/// The spectrum of a histogram; empty for an empty histogram. The last point is at 100 %.
pub fn spectrum(histogram: &Histogram<u64>) -> Vec<SpectrumPoint> {
    if histogram.is_empty() {
        return Vec::new();
    }
    let mut total = 0;
    histogram
        .iter_quantiles(TICKS_PER_HALF_DISTANCE)
        .map(|step| {
            total += step.count_since_last_iteration();
            SpectrumPoint {
                quantile: step.quantile_iterated_to(),
                value_us: step.value_iterated_to(),
                total_count: total,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::new_histogram;

    #[test]
    fn spectrum_is_monotonic_and_ends_at_max() {
        let mut h = new_histogram();
        for v in 1..=10_000u64 {
            h.record(v).unwrap();
        }
        let points = spectrum(&h);
        assert!(points.len() > 20);
        assert!(points.windows(2).all(|w| w[0].quantile <= w[1].quantile
            && w[0].value_us <= w[1].value_us
            && w[0].total_count <= w[1].total_count));
        let last = points.last().unwrap();
        assert_eq!(last.quantile, 1.0);
        assert_eq!(last.value_us, h.highest_equivalent(10_000));
        assert_eq!(last.total_count, 10_000);
        assert!(last.inverse_tail().is_infinite());
        assert!(spectrum(&new_histogram()).is_empty());
    }
}
