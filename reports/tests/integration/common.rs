//! Shared test fixtures: deterministic reports built by code, scratch folders
//! and a runner for the `report` binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hdrhistogram::Histogram;
use reports::{
    Environment, GeneratorHealth, LatencyBlock, Operation, ProfileInfo, PushStats, Report,
    ServerStats, Target, ThresholdResult, TimelineOp, TimelinePoint, Verification,
};

/// A small deterministic generator (xorshift64*), so fixtures never change between runs.
pub struct Noise(u64);

impl Noise {
    pub fn new(seed: u64) -> Self {
        Noise(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A latency in µs with a long tail: `median * exp(spread * standard-normal-ish)`.
    pub fn latency_us(&mut self, median_us: f64) -> u64 {
        // Sum of 4 uniforms, centred: close enough to normal for a fixture.
        let z = (0..4).map(|_| self.next_f64()).sum::<f64>() - 2.0;
        let tail = if self.next_f64() < 0.01 { 8.0 } else { 1.0 };
        (median_us * (1.2 * z).exp() * tail).max(1.0) as u64
    }
}

/// Values recorded into a fresh histogram.
pub fn histogram_of(values: &[u64]) -> Histogram<u64> {
    let mut h = reports::new_histogram();
    for &v in values {
        h.record(v).unwrap();
    }
    h
}

pub fn block_of(values: &[u64]) -> LatencyBlock {
    LatencyBlock::from_histogram(&histogram_of(values)).unwrap()
}

/// The operations of the fixture: name, median latency (µs), count, target rate.
const OPERATIONS: [(&str, f64, u64, Option<f64>); 3] = [
    ("register", 400.0, 3_000, Some(100.0)),
    ("beat", 250.0, 12_000, Some(400.0)),
    ("query", 300.0, 6_000, None),
];

/// A full report (every optional block present) whose latencies are multiplied by `scale`.
pub fn sample_report(seed: u64, scale: f64) -> Report {
    let mut noise = Noise::new(seed);
    let duration_s = 30.0;
    let mut report = Report::new(
        "0.1.0",
        "2026-01-02T03:04:05Z",
        Environment {
            commit: "0123456789abcdef".into(),
            rustc: "rustc 1.95.0".into(),
            cpu_model: "Test CPU @ 2.00GHz".into(),
            cores: 2,
            kernel: "6.1.0-test".into(),
            os: "Debian GNU/Linux 12 (bookworm)".into(),
            pinning: Some("server=0 loadgen=1".into()),
        },
        ProfileInfo {
            name: "smoke".into(),
            config_hash: "c0ffee".into(),
            params: serde_json::json!({"instances": 2000, "services": 100, "beat_interval_s": 5}),
        },
        Target {
            url: "http://127.0.0.1:8848".into(),
            embedded: true,
        },
    );
    report.duration_s = duration_s;
    let mut timeline: BTreeMap<u32, TimelinePoint> = BTreeMap::new();
    for (name, median, count, target) in OPERATIONS {
        let mut corrected = Vec::new();
        let mut uncorrected = Vec::new();
        let mut per_second: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for i in 0..count {
            let service = noise.latency_us(median * scale);
            // Queueing before the send adds to the corrected latency only.
            let queued = if noise.next_f64() < 0.05 {
                noise.latency_us(median * scale * 2.0)
            } else {
                0
            };
            corrected.push(service + queued);
            uncorrected.push(service);
            let second = (i * 30 / count) as u32;
            per_second.entry(second).or_default().push(service + queued);
        }
        let errors = count / 500;
        let mut op = Operation::new(
            name,
            count,
            duration_s,
            block_of(&corrected),
            block_of(&uncorrected),
        );
        op.target_rate = target;
        op.errors = errors;
        op.errors_by_class = BTreeMap::from([
            ("http_5xx".to_owned(), errors / 2),
            ("timeout".to_owned(), errors - errors / 2),
        ]);
        reports::reasons::add(
            &mut op.error_samples,
            "http_5xx",
            "HTTP 503: server busy",
            errors / 2,
        );
        let timeout = "no answer within 3 s";
        reports::reasons::add(
            &mut op.error_samples,
            "timeout",
            timeout,
            errors - errors / 2,
        );
        if name == "register" {
            op.send_stamps = Some(reports::SendStamps {
                stamped: count,
                fallback: 0,
            });
        }
        report.operations.push(op);
        for (second, values) in per_second {
            let h = histogram_of(&values);
            timeline
                .entry(second)
                .or_insert_with(|| TimelinePoint {
                    t_s: second,
                    ops: BTreeMap::new(),
                })
                .ops
                .insert(
                    name.to_owned(),
                    TimelineOp {
                        count: values.len() as u64,
                        errors: u64::from(second % 7 == 3),
                        p99_us: h.value_at_quantile(0.99),
                    },
                );
        }
    }
    report.timeline = timeline.into_values().collect();
    let lag: Vec<u64> = (0..5_000).map(|_| noise.latency_us(40.0)).collect();
    report.send_lag = Some(block_of(&lag));
    let wakeup: Vec<u64> = (0..5_000).map(|_| noise.latency_us(30.0)).collect();
    report.wakeup_lateness = Some(block_of(&wakeup));
    let push: Vec<u64> = (0..800)
        .map(|_| noise.latency_us(3_000.0 * scale))
        .collect();
    report.push = Some(PushStats {
        subscribers: 200,
        pushes_received: 800,
        acks_sent: 800,
        converged: true,
        mismatched_subscribers: 0,
        latency: block_of(&push),
    });
    report.server = Some(ServerStats {
        rss_bytes: Some(48 * 1024 * 1024),
        peak_rss_bytes: Some(52 * 1024 * 1024),
        cpu_seconds: Some(7.5),
    });
    report.verification = Some(Verification {
        expected_instances: 2_000,
        server_instances: Some(2_000),
        ok: true,
        detail: String::new(),
    });
    let lag_summary = report
        .send_lag
        .as_ref()
        .map(|b| b.summary)
        .unwrap_or_default();
    report.generator = GeneratorHealth {
        fell_behind: false,
        max_send_lag_us: lag_summary.max_us,
        p99_send_lag_us: lag_summary.p99_us,
        skipped_slots: 0,
    };
    report.thresholds = vec![
        ThresholdResult {
            expr: "beat.p99<20ms".into(),
            passed: true,
            actual: report.operations[1].corrected.summary.p99_us as f64 / 1000.0,
        },
        ThresholdResult {
            expr: "errors.rate<0.01".into(),
            passed: true,
            actual: 0.002,
        },
    ];
    report
}

/// A report with every optional block absent and no operations.
pub fn minimal_report() -> Report {
    Report::new(
        "0.1.0",
        "2026-01-02T03:04:05Z",
        Environment::default(),
        ProfileInfo::default(),
        Target::default(),
    )
}

/// A fresh, empty scratch folder for one test.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("reports-tests")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a report into `dir` and returns its path.
pub fn write(dir: &Path, name: &str, report: &Report) -> PathBuf {
    let path = dir.join(name);
    report.save(&path).unwrap();
    path
}

/// Runs the `report` binary.
pub fn report_cli<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_report"))
        .args(args)
        .env_remove("REPORT_POLICY")
        .env_remove("REPORT_FORMAT")
        .env_remove("REPORT_GATES_POLICY")
        .output()
        .expect("report binary runs")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
