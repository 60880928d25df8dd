//! Latency blocks: a percentile summary plus the full histogram it came from.
//!
//! Percentiles cannot be merged or re-derived, so every [`LatencyBlock`] keeps the
//! whole HdrHistogram next to its [`Summary`], encoded as HdrHistogram V2+DEFLATE
//! and then standard base64 (the payload format of HdrHistogram interval logs, so
//! Java and Rust tools decode it too). Values are microseconds recorded with
//! [`SIGNIFICANT_DIGITS`] significant digits. Decoding, adding and re-encoding is
//! lossless, which is what `report merge` relies on.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant decimal digits every latency histogram keeps.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Highest latency a fresh histogram tracks before it grows: 60 s in microseconds.
pub const HIGHEST_TRACKABLE_US: u64 = 60_000_000;

/// A fresh microsecond histogram with this crate's conventions: 1 µs .. 60 s at
/// 3 significant digits, growing automatically if a larger value is recorded.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that satisfy `new_with_bounds`' documented
    // preconditions (low >= 1, high >= 2 * low, sigfig <= 5), and a unit test
    // calls this, so the error branch is unreachable.
    let mut histogram = Histogram::new_with_bounds(1, HIGHEST_TRACKABLE_US, SIGNIFICANT_DIGITS)
        .expect("constant histogram bounds are valid");
    histogram.auto(true);
    histogram
}

/// Percentiles and moments of one latency distribution, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Recorded values.
    pub count: u64,
    /// Smallest value (0 when empty).
    pub min_us: u64,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// 99.99th percentile.
    pub p9999_us: u64,
    /// Largest value (0 when empty).
    pub max_us: u64,
    /// Standard deviation.
    pub stdev_us: f64,
}

impl Summary {
    /// Summarises a histogram; an empty histogram gives all zeros.
    pub fn of(histogram: &Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return Summary::default();
        }
        Summary {
            count: histogram.len(),
            min_us: histogram.min(),
            mean_us: histogram.mean(),
            p50_us: histogram.value_at_quantile(0.50),
            p90_us: histogram.value_at_quantile(0.90),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            p9999_us: histogram.value_at_quantile(0.9999),
            max_us: histogram.max(),
            stdev_us: histogram.stdev(),
        }
    }
}

/// A latency distribution: summary numbers for readers, encoded histogram for tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyBlock {
    /// Numbers computed from `histogram` when the block was built.
    pub summary: Summary,
    /// The histogram: HdrHistogram V2+DEFLATE, standard base64 with padding.
    pub histogram: String,
}

/// Why a histogram could not be encoded, decoded or added.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    /// Encoding failed; only possible with a bucket count above `i64::MAX`.
    #[error("cannot encode histogram: {0}")]
    Encode(String),
    /// The `histogram` field is not base64; the report file is damaged.
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    /// The bytes are not an HdrHistogram V2 or V2+DEFLATE histogram; the report file is damaged.
    #[error("histogram is not a valid HdrHistogram encoding: {0}")]
    Decode(#[from] hdrhistogram::serialization::DeserializeError),
    /// Two histograms could not be added; they hold values outside each other's range.
    #[error("cannot add histograms: {0}")]
    Add(#[from] hdrhistogram::AdditionError),
}

impl LatencyBlock {
    /// Summarises and encodes a histogram of microsecond latencies.
    pub fn from_histogram(histogram: &Histogram<u64>) -> Result<Self, HistogramError> {
        Ok(LatencyBlock {
            summary: Summary::of(histogram),
            histogram: encode(histogram)?,
        })
    }

    /// A block for an operation that recorded nothing.
    pub fn empty() -> Self {
        // An empty histogram always encodes: it has no counts that could overflow.
        let histogram = new_histogram();
        LatencyBlock {
            summary: Summary::default(),
            histogram: encode(&histogram).unwrap_or_default(),
        }
    }

    /// Decodes the stored histogram.
    pub fn histogram(&self) -> Result<Histogram<u64>, HistogramError> {
        decode(&self.histogram)
    }
}

/// Encodes a histogram as base64 of V2+DEFLATE.
pub fn encode(histogram: &Histogram<u64>) -> Result<String, HistogramError> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(histogram, &mut bytes)
        .map_err(|e| HistogramError::Encode(format!("{e:?}")))?;
    Ok(BASE64.encode(bytes))
}

/// Decodes base64 of V2 or V2+DEFLATE into an auto-resizing histogram.
pub fn decode(text: &str) -> Result<Histogram<u64>, HistogramError> {
    let bytes = BASE64.decode(text.trim())?;
    let mut histogram: Histogram<u64> = Deserializer::new().deserialize(&mut bytes.as_slice())?;
    // Decoded histograms keep the writer's range; let them grow so that adding a
    // histogram with larger values (from another process) never fails.
    histogram.auto(true);
    Ok(histogram)
}

/// Adds the histograms of several blocks (losslessly) into one.
///
/// Returns `None` for an empty input.
pub fn merge_blocks<'a>(
    blocks: impl IntoIterator<Item = &'a LatencyBlock>,
) -> Result<Option<Histogram<u64>>, HistogramError> {
    let mut merged: Option<Histogram<u64>> = None;
    for block in blocks {
        let histogram = block.histogram()?;
        match merged.as_mut() {
            None => merged = Some(histogram),
            Some(total) => total.add(&histogram)?,
        }
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_every_count() {
        let mut h = new_histogram();
        for v in [1u64, 2, 3, 1_000, 1_001, 59_999_999, 120_000_000] {
            h.record(v).unwrap();
        }
        let block = LatencyBlock::from_histogram(&h).unwrap();
        let back = block.histogram().unwrap();
        assert_eq!(back, h);
        assert_eq!(block.summary.count, 7);
        assert_eq!(block.summary.max_us, h.max());
    }

    #[test]
    fn empty_block_decodes_to_empty_histogram() {
        let block = LatencyBlock::empty();
        assert_eq!(block.summary, Summary::default());
        assert!(block.histogram().unwrap().is_empty());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(decode("!!!"), Err(HistogramError::Base64(_))));
        assert!(matches!(decode("AAAA"), Err(HistogramError::Decode(_))));
        let truncated = &LatencyBlock::empty().histogram[..12];
        assert!(decode(truncated).is_err());
    }
}
