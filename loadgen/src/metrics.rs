//! `--metrics-listen ADDR`: loadgen's own figures in the Prometheus text format while
//! it runs, so a long run can be watched on a dashboard.
//!
//! The runner renders the page from what the workers report each second (the running
//! totals of every operation, its errors by class, skipped slots, corrected-latency
//! quantiles, send and scheduling lag) and from the live counters (requests
//! outstanding, the phase), and hands the text to a [`MetricsServer`]: one plain
//! thread answering `GET /metrics` with the latest page. Nothing on the workers' paths
//! changes: they already send their seconds to the runner.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::Histogram;
use registry_proto::prometheus::{self, Exposition, Kind};

use crate::output::Now;
use crate::recorder::{ErrorClass, Op, OpStats, Stats};

/// Serves the latest page at `/metrics`.
#[derive(Debug)]
pub struct MetricsServer {
    addr: SocketAddr,
    page: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` (port 0 picks one) and starts serving an empty page.
    pub fn start(addr: SocketAddr) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        // Polled, so that stop() needs no connection to wake the thread.
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let page = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (served, stopped) = (page.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("loadgen-metrics".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => answer(stream, &served),
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            })?;
        Ok(MetricsServer {
            addr,
            page,
            stop,
            thread: Some(thread),
        })
    }

    /// The address it serves on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the page.
    pub fn publish(&self, page: String) {
        if let Ok(mut p) = self.page.lock() {
            *p = page;
        }
    }

    /// Stops serving.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Answers one request (one per connection, bounded in size and time).
fn answer(mut stream: TcpStream, page: &Mutex<String>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let (status, body) = if line.starts_with(b"GET /metrics ") {
        ("200 OK", page.lock().map(|p| p.clone()).unwrap_or_default())
    } else {
        ("404 Not Found", "not found: try GET /metrics\n".to_owned())
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

const QUANTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 0.9999];

/// The page for `total` (everything recorded so far) and `now` (what the progress
/// line shows: phase, intended and achieved rates, errors, the latest send lag),
/// `elapsed_s` into the run. Written by the server's writer of the format
/// ([`registry_proto::prometheus`]), so both binaries spell it one way.
pub fn render(total: &Stats, now: &Now<'_>, elapsed_s: f64) -> String {
    prometheus::text(|e| {
        live_rates(e, now);
        counters(e, total);
        latencies(e, total);
        gauges(e, now, elapsed_s);
    })
}

/// The per-operation counters: ended, intended, failed by class, skipped.
fn counters(e: &mut Exposition<'_>, total: &Stats) {
    per_op(
        e,
        total,
        (
            "loadgen_operations_total",
            "Operations that ended (answered or failed).",
        ),
        |o| o.count,
    );
    per_op(
        e,
        total,
        (
            "loadgen_intended_total",
            "Operations whose intended send time came.",
        ),
        |o| o.intended,
    );
    e.family(
        "loadgen_errors_total",
        Kind::Counter,
        "Failed operations by class.",
    );
    for op in Op::ALL {
        for class in ErrorClass::ALL {
            e.sample(
                "loadgen_errors_total",
                &[("op", op.name()), ("class", class.key())],
                total.op(op).errors[class as usize],
            );
        }
    }
    per_op(
        e,
        total,
        (
            "loadgen_skipped_slots_total",
            "Schedule slots the generator could not fill (invalidates the run).",
        ),
        |o| o.skipped,
    );
}

/// One counter family with a sample per operation.
fn per_op(
    e: &mut Exposition<'_>,
    total: &Stats,
    (name, help): (&str, &str),
    value: impl Fn(&OpStats) -> u64,
) {
    e.family(name, Kind::Counter, help);
    for op in Op::ALL {
        e.sample(name, &[("op", op.name())], value(total.op(op)));
    }
}

/// The latency summaries: corrected per operation, send and schedule lag, push.
fn latencies(e: &mut Exposition<'_>, total: &Stats) {
    e.family(
        "loadgen_latency_seconds",
        Kind::Summary,
        "Corrected latency (from the intended send time), failures included.",
    );
    for op in Op::ALL {
        summary(
            e,
            "loadgen_latency_seconds",
            &[("op", op.name())],
            &total.op(op).corrected,
        );
    }
    for (name, help, h) in [
        (
            "loadgen_send_lag_seconds",
            "Write time minus the time a request could be written: waiting inside loadgen.",
            &total.send_lag,
        ),
        (
            "loadgen_connection_wait_seconds",
            "Time a request waited for its connection (earlier answers, a reconnect).",
            &total.conn_wait,
        ),
        (
            "loadgen_schedule_lag_seconds",
            "Dispatch time minus intended send time: the generator's own lag.",
            &total.sched_lag,
        ),
        (
            "loadgen_push_latency_seconds",
            "Change-to-receipt latency of pushes.",
            &total.push,
        ),
    ] {
        e.family(name, Kind::Summary, help);
        summary(e, name, &[], h);
    }
}

/// What is true now: requests outstanding, the phase, the time into the run.
fn gauges(e: &mut Exposition<'_>, now: &Now<'_>, elapsed_s: f64) {
    e.gauge(
        "loadgen_outstanding_requests",
        "Requests queued or in flight.",
        now.outstanding,
    );
    e.family(
        "loadgen_phase",
        Kind::Gauge,
        "1 for the current phase of the run.",
    );
    e.sample("loadgen_phase", &[("phase", &now.phase.to_string())], 1);
    e.gauge(
        "loadgen_elapsed_seconds",
        "Seconds since the run started.",
        format_args!("{elapsed_s:.3}"),
    );
}

/// The progress line's figures: intended and achieved rates of the phase, errors so
/// far, the latest second's send lag.
fn live_rates(e: &mut Exposition<'_>, now: &Now<'_>) {
    e.family(
        "loadgen_intended_rate",
        Kind::Gauge,
        "Operations per second the current phase intends (rate-driven operations).",
    );
    for op in Op::ALL {
        if let Some(rate) = now.rates.of(op) {
            e.sample("loadgen_intended_rate", &[("op", op.name())], rate);
        }
    }
    e.family(
        "loadgen_achieved_rate",
        Kind::Gauge,
        "Operations written in the latest finished second.",
    );
    for op in Op::ALL {
        e.sample(
            "loadgen_achieved_rate",
            &[("op", op.name())],
            now.achieved(op),
        );
    }
    e.gauge(
        "loadgen_errors_so_far",
        "Failed operations so far.",
        now.errors,
    );
    e.family(
        "loadgen_current_send_lag_seconds",
        Kind::Gauge,
        "Send lag p50 and p99 in the latest finished second.",
    );
    let (p50, p99) = now.send_lag_us().unwrap_or((0, 0));
    for (q, v) in [("0.5", p50), ("0.99", p99)] {
        e.sample(
            "loadgen_current_send_lag_seconds",
            &[("quantile", q)],
            v as f64 / 1e6,
        );
    }
}

/// A Prometheus summary of a histogram in microseconds, in seconds.
fn summary(e: &mut Exposition<'_>, name: &str, labels: &[(&str, &str)], h: &Histogram<u64>) {
    let quantiles = QUANTILES.map(|q| {
        let value = if h.is_empty() {
            0
        } else {
            h.value_at_quantile(q)
        };
        (q, value as f64 / 1e6)
    });
    let sum = h.mean() * h.len() as f64 / 1e6;
    e.summary(name, labels, &quantiles, sum, h.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Phase;
    use crate::recorder::Recorder;
    use crate::target::ControlClient;

    #[test]
    fn the_page_holds_every_outcome_and_lag() {
        let mut r = Recorder::new();
        r.dispatched(Op::Beat, 0, 1_000);
        r.completed(Op::Beat, 0, 1_000, 2_000_000, Ok(()));
        r.dispatched(Op::Beat, 0, 1_000);
        r.failed(
            Op::Beat,
            &crate::recorder::Failure::new(ErrorClass::Timeout, "late"),
            0,
            Some(1_000),
            3_000_000_000,
        );
        r.skip(Op::Deregister);
        let total = r.finish();
        let latest = (3, total.clone());
        let plan =
            crate::plan::Plan::from_profile(&crate::profile::Profile::load("smoke").unwrap());
        let page = render(
            &total,
            &Now {
                phase: Phase::Steady,
                rates: plan.rates(Phase::Steady),
                latest: Some(&latest),
                errors: 1,
                outstanding: 7,
            },
            12.5,
        );
        for line in [
            "loadgen_operations_total{op=\"beat\"} 2",
            "loadgen_intended_total{op=\"beat\"} 2",
            "loadgen_errors_total{op=\"beat\",class=\"timeout\"} 1",
            "loadgen_skipped_slots_total{op=\"deregister\"} 1",
            "loadgen_latency_seconds_count{op=\"beat\"} 2",
            "loadgen_outstanding_requests 7",
            "loadgen_phase{phase=\"steady\"} 1",
            "# TYPE loadgen_latency_seconds summary",
            "loadgen_intended_rate{op=\"query\"} 500",
            "loadgen_achieved_rate{op=\"beat\"} 0",
            "loadgen_errors_so_far 1",
            "loadgen_current_send_lag_seconds{quantile=\"0.99\"} 0",
        ] {
            assert!(
                page.lines().any(|l| l == line),
                "missing {line:?} in\n{page}"
            );
        }
        // The timeout is the slowest beat: 3 s, within the histogram's precision.
        let max = page
            .lines()
            .find(|l| l.starts_with("loadgen_latency_seconds{op=\"beat\",quantile=\"0.9999\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap();
        assert!((2.99..=3.01).contains(&max), "{max}");
    }

    #[test]
    fn serves_the_latest_page_over_http() {
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
        server.publish("loadgen_up 1\n".into());
        let mut client = ControlClient::new(server.local_addr());
        let (status, body) = client.get("/metrics").unwrap();
        assert_eq!((status, body.as_slice()), (200, &b"loadgen_up 1\n"[..]));
        server.publish("loadgen_up 2\n".into());
        let (_, body) = client.get("/metrics").unwrap();
        assert_eq!(body, b"loadgen_up 2\n");
        assert_eq!(client.get("/other").unwrap().0, 404);
        server.stop();
    }
}
