//! The Prometheus text exposition format (version 0.0.4): the one writer of
//! the server's `/metrics` and of loadgen's `--metrics-listen` page.
//!
//! Each part of the server that keeps metrics (the HTTP door, push, gRPC,
//! persistence, health checks, auth, memory, the cluster and Raft) appends
//! its families to one [`Exposition`]: a `# HELP` and `# TYPE` header, then
//! the samples. The counters stay where they are counted, as `Relaxed`
//! atomics (the server's `metrics` module); this module only formats what it
//! is handed when `/metrics` is read, so the request path pays nothing for
//! it. loadgen writes its summaries (quantiles of its HdrHistograms) through
//! the same writer, so both binaries spell the format one way.
//!
//! Our own rather than the `prometheus-client` crate: that crate writes
//! OpenMetrics (a `# EOF` line, `_total` appended to counter names by the
//! library, `# UNIT` lines) and holds its values in its own registry of
//! metric types, so the names the console, the tests and the figure scripts
//! read would change and every counter would move into its registry. What
//! the server needs is ~100 lines of formatting.

use std::fmt::Display;
use std::io::Write as _;

/// A metric family's type, as `# TYPE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only grows (names end in `_total` by convention).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Cumulative buckets with `_bucket`, `_sum` and `_count` samples.
    Histogram,
    /// Quantile samples (`quantile` label) with `_sum` and `_count`.
    Summary,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        }
    }
}

/// The text being written, appended to a response body.
pub struct Exposition<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Exposition<'a> {
    /// Appends to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Exposition<'a> {
        Exposition { out }
    }

    /// A family's header; its samples follow with [`Exposition::sample`].
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        // Writes into a Vec<u8> cannot fail.
        let _ = writeln!(
            self.out,
            "# HELP {name} {help}\n# TYPE {name} {}",
            kind.name()
        );
    }

    /// One sample. `labels` are (name, value) pairs; no labels writes the
    /// bare name.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.extend_from_slice(name.as_bytes());
        if !labels.is_empty() {
            self.labels(labels);
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// One sample with its labels in braces even when there are none
    /// (`name{} value`): how the server has always written a histogram's
    /// `_sum` and `_count`. Parsers read both spellings.
    fn braced_sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.extend_from_slice(name.as_bytes());
        self.labels(labels);
        let _ = writeln!(self.out, " {value}");
    }

    /// A histogram's samples (its header is a [`Exposition::family`] of
    /// [`Kind::Histogram`]): `buckets` are (upper bound, cumulative count),
    /// ascending, `None` for `+Inf`; each `_bucket` sample carries `labels`
    /// and `le`.
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        buckets: &[(Option<f64>, u64)],
        sum: f64,
        count: u64,
    ) {
        for (upper, cumulative) in buckets {
            let le = upper.map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = write!(self.out, "{name}_bucket{{");
            self.pairs(labels);
            if !labels.is_empty() {
                self.out.push(b',');
            }
            self.pairs(&[("le", &le)]);
            let _ = writeln!(self.out, "}} {cumulative}");
        }
        self.braced_sample(&format!("{name}_sum"), labels, sum);
        self.braced_sample(&format!("{name}_count"), labels, count);
    }

    /// A summary's samples (its header is a [`Exposition::family`] of
    /// [`Kind::Summary`]): one sample per (quantile, value), each carrying
    /// `labels` and `quantile`, then `_sum` and `_count` with `labels` only.
    pub fn summary(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        quantiles: &[(f64, f64)],
        sum: f64,
        count: u64,
    ) {
        for (q, value) in quantiles {
            let q = q.to_string();
            let mut all = labels.to_vec();
            all.push(("quantile", &q));
            self.sample(name, &all, value);
        }
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, count);
    }

    /// A family of one unlabelled counter.
    pub fn counter(&mut self, name: &str, help: &str, value: impl Display) {
        self.family(name, Kind::Counter, help);
        self.sample(name, &[], value);
    }

    /// A family of one unlabelled gauge.
    pub fn gauge(&mut self, name: &str, help: &str, value: impl Display) {
        self.family(name, Kind::Gauge, help);
        self.sample(name, &[], value);
    }

    /// `{a="x",b="y"}`.
    fn labels(&mut self, labels: &[(&str, &str)]) {
        self.out.push(b'{');
        self.pairs(labels);
        self.out.push(b'}');
    }

    /// `a="x",b="y"`, values escaped as the format asks (`\\`, `\"`, `\n`).
    fn pairs(&mut self, labels: &[(&str, &str)]) {
        for (i, (name, value)) in labels.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(name.as_bytes());
            self.out.extend_from_slice(b"=\"");
            for b in value.bytes() {
                match b {
                    b'\\' => self.out.extend_from_slice(b"\\\\"),
                    b'"' => self.out.extend_from_slice(b"\\\""),
                    b'\n' => self.out.extend_from_slice(b"\\n"),
                    _ => self.out.push(b),
                }
            }
            self.out.push(b'"');
        }
    }
}

/// Runs `write` on a fresh exposition and returns the text.
pub fn text(write: impl FnOnce(&mut Exposition<'_>)) -> String {
    let mut out = Vec::new();
    write(&mut Exposition::new(&mut out));
    String::from_utf8(out).expect("the exposition is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_is_its_header_then_its_samples() {
        let t = text(|e| {
            e.family("x_total", Kind::Counter, "Xs seen.");
            e.sample("x_total", &[("kind", "a"), ("to", "b")], 3);
            e.gauge("y", "Ys held.", 2.5);
        });
        assert_eq!(
            t,
            "# HELP x_total Xs seen.\n# TYPE x_total counter\n\
             x_total{kind=\"a\",to=\"b\"} 3\n\
             # HELP y Ys held.\n# TYPE y gauge\ny 2.5\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let t = text(|e| e.sample("m", &[("v", "a\"b\\c\nd")], 1));
        assert_eq!(t, "m{v=\"a\\\"b\\\\c\\nd\"} 1\n");
    }

    #[test]
    fn a_histogram_writes_buckets_with_le_then_sum_and_count() {
        let t = text(|e| {
            e.histogram("h", &[("route", "r")], &[(Some(0.5), 1), (None, 3)], 1.5, 3);
        });
        assert_eq!(
            t,
            "h_bucket{route=\"r\",le=\"0.5\"} 1\nh_bucket{route=\"r\",le=\"+Inf\"} 3\n\
             h_sum{route=\"r\"} 1.5\nh_count{route=\"r\"} 3\n"
        );
    }

    #[test]
    fn a_summary_writes_quantiles_then_sum_and_count() {
        let t = text(|e| {
            e.summary(
                "s",
                &[("op", "beat")],
                &[(0.5, 0.001), (0.99, 0.25)],
                1.5,
                3,
            )
        });
        assert_eq!(
            t,
            "s{op=\"beat\",quantile=\"0.5\"} 0.001\ns{op=\"beat\",quantile=\"0.99\"} 0.25\n\
             s_sum{op=\"beat\"} 1.5\ns_count{op=\"beat\"} 3\n"
        );
        assert_eq!(
            text(|e| e.summary("s", &[], &[(0.5, 2.0)], 2.0, 1)),
            "s{quantile=\"0.5\"} 2\ns_sum 2\ns_count 1\n"
        );
    }

    #[test]
    fn a_braced_sample_keeps_its_braces_without_labels() {
        assert_eq!(
            text(|e| e.braced_sample("h_count", &[], 4)),
            "h_count{} 4\n"
        );
    }
}
