//! Prometheus metrics: request counts by route and status, latency
//! histograms per route, and the registry's own counters and gauges.
//!
//! Everything is a `Relaxed` atomic: each counter is independent and read
//! only to render `/metrics`, so no ordering between them is needed. The
//! text is written by [`registry_proto::prometheus`], the one writer of the
//! exposition format.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use registry_proto::naming::route::Route;

use registry_proto::prometheus::{Exposition, Kind};

/// A part that adds metric families to `/metrics` (a door's counters).
pub trait Render: Send + Sync {
    /// Appends its families.
    fn render(&self, e: &mut Exposition<'_>);
}

/// The families of the parts started at run time (each running door's),
/// rendered on `/metrics` after the server's own. Written once per door as
/// the server starts, read on each scrape: a mutex, never on a request path
/// other than `/metrics`.
#[derive(Default)]
pub struct Board(parking_lot::Mutex<Vec<Arc<dyn Render>>>);

impl Board {
    /// Adds `part`'s families.
    pub fn add(&self, part: Arc<dyn Render>) {
        self.0.lock().push(part);
    }

    /// Appends every part's families, in the order they were added.
    pub fn render(&self, e: &mut Exposition<'_>) {
        for part in self.0.lock().iter() {
            part.render(e);
        }
    }
}

/// Status codes with their own counter; anything else counts as "other".
const STATUSES: [u16; 14] = [
    200, 400, 401, 403, 404, 405, 408, 411, 413, 414, 431, 500, 501, 503,
];
const STATUS_SLOTS: usize = STATUSES.len() + 1;

/// Upper bounds of the latency buckets, in microseconds.
const LATENCY_BOUNDS_US: [u64; 14] = [
    25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
];

/// A cumulative-bucket histogram of microseconds.
pub struct Histogram {
    bounds: &'static [u64],
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// A histogram over `bounds` (ascending, in the recorded unit).
    pub fn new(bounds: &'static [u64]) -> Histogram {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// A latency histogram in microseconds.
    pub fn latency() -> Histogram {
        Histogram::new(&LATENCY_BOUNDS_US)
    }

    /// Records one value.
    pub fn record(&self, v: u64) {
        let i = self.bounds.partition_point(|b| *b < v);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a duration in microseconds.
    pub fn record_duration(&self, d: Duration) {
        self.record(d.as_micros() as u64);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Writes the histogram's samples, values divided by `scale` (1e6 turns
    /// microseconds into the seconds Prometheus expects).
    pub fn render(&self, e: &mut Exposition<'_>, name: &str, labels: &[(&str, &str)], scale: f64) {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(self.bounds.len() + 1);
        for (i, b) in self.bounds.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            buckets.push((Some(*b as f64 / scale), cumulative));
        }
        cumulative += self.buckets[self.bounds.len()].load(Ordering::Relaxed);
        buckets.push((None, cumulative));
        let sum = self.sum.load(Ordering::Relaxed) as f64 / scale;
        e.histogram(name, labels, &buckets, sum, self.count());
    }
}

/// A monotonically increasing counter.
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// Subtracts one.
    pub fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    /// Sets the value.
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Upper bounds for push batch sizes (datagrams per `sendmmsg`).
const BATCH_BOUNDS: [u64; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Push counters, written by the notifier.
pub struct PushMetrics {
    /// Live subscriptions.
    pub subscribers: Gauge,
    /// Polls refused a subscription by a limit.
    pub subscribe_refused: Counter,
    /// Pushes awaiting an ack (UDP and gRPC), as the notifier's tables hold them.
    pub pending: Gauge,
    /// Datagrams sent (first sends and resends).
    pub sent: Counter,
    /// Pushes acknowledged.
    pub acked: Counter,
    /// Resends after an ack timeout.
    pub retried: Counter,
    /// Pushes given up after the resend.
    pub failed: Counter,
    /// Pushes not sent: too large even gzipped, or the ack table was full.
    pub skipped: Counter,
    /// Ack datagrams dropped: malformed, oversized, unknown or duplicate.
    pub bad_acks: Counter,
    /// Datagrams per batch send.
    pub batch_size: Histogram,
    /// From the first change in a window to the push send, in µs.
    pub change_to_send: Histogram,
    /// From send to ack, in µs.
    pub round_trip: Histogram,
}

impl Default for PushMetrics {
    fn default() -> Self {
        PushMetrics {
            subscribers: Gauge::default(),
            subscribe_refused: Counter::default(),
            pending: Gauge::default(),
            sent: Counter::default(),
            acked: Counter::default(),
            retried: Counter::default(),
            failed: Counter::default(),
            skipped: Counter::default(),
            bad_acks: Counter::default(),
            batch_size: Histogram::new(&BATCH_BOUNDS),
            change_to_send: Histogram::latency(),
            round_trip: Histogram::latency(),
        }
    }
}

/// Every metric the server keeps.
pub struct Metrics {
    requests: Box<[[AtomicU64; STATUS_SLOTS]]>,
    latency: Box<[Histogram]>,
    /// Requests that failed before routing (bad framing, unknown path).
    pub unrouted: [AtomicU64; STATUS_SLOTS],
    /// Beats that renewed a lease.
    pub beats: Counter,
    /// Beats for unknown instances (answered 20404).
    pub beats_not_found: Counter,
    /// Instances marked unhealthy by the sweeper.
    pub expired_unhealthy: Counter,
    /// Instances deleted by the sweeper.
    pub expired_removed: Counter,
    /// Empty auto-created services removed by the sweeper.
    pub services_removed: Counter,
    /// Sweeper passes finished.
    pub sweeps: Counter,
    /// Open HTTP connections.
    pub connections: Gauge,
    /// Connections refused at the connection limit.
    pub connections_refused: Counter,
    /// Requests answered 503 at the in-flight limit.
    pub requests_shed: Counter,
    /// Requests whose head did not arrive within `--head-timeout-ms`.
    pub head_timeouts: Counter,
    /// Requests whose body did not arrive within `--body-timeout-ms`.
    pub body_timeouts: Counter,
    /// Connections closed because a write took longer than `--write-timeout-ms`.
    pub write_timeouts: Counter,
    /// Connections refused or closed because the read-buffer budget was spent.
    pub buffer_refusals: Counter,
    /// Push and subscription metrics.
    pub push: PushMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Route::ALL.iter().map(|_| Default::default()).collect(),
            latency: Route::ALL.iter().map(|_| Histogram::latency()).collect(),
            unrouted: Default::default(),
            beats: Counter::default(),
            beats_not_found: Counter::default(),
            expired_unhealthy: Counter::default(),
            expired_removed: Counter::default(),
            services_removed: Counter::default(),
            sweeps: Counter::default(),
            connections: Gauge::default(),
            connections_refused: Counter::default(),
            requests_shed: Counter::default(),
            head_timeouts: Counter::default(),
            body_timeouts: Counter::default(),
            write_timeouts: Counter::default(),
            buffer_refusals: Counter::default(),
            push: PushMetrics::default(),
        }
    }
}

fn status_slot(status: u16) -> usize {
    STATUSES
        .iter()
        .position(|s| *s == status)
        .unwrap_or(STATUSES.len())
}

fn status_label(slot: usize) -> String {
    STATUSES
        .get(slot)
        .map_or_else(|| "other".to_string(), |s| s.to_string())
}

/// Gauges read from the store when rendering.
pub struct StoreGauges {
    /// Services held.
    pub services: usize,
    /// Instances held.
    pub instances: usize,
}

impl Metrics {
    /// Counts one answered request.
    pub fn request(&self, route: Option<Route>, status: u16, elapsed: Duration) {
        let slot = status_slot(status);
        match route {
            Some(r) => {
                self.requests[r as usize][slot].fetch_add(1, Ordering::Relaxed);
                self.latency[r as usize].record_duration(elapsed);
            }
            None => {
                self.unrouted[slot].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Requests answered on `route` with `status`.
    pub fn requests_with(&self, route: Route, status: u16) -> u64 {
        self.requests[route as usize][status_slot(status)].load(Ordering::Relaxed)
    }

    /// Appends the HTTP door's and push's families to `e`.
    pub fn render(&self, store: &StoreGauges, e: &mut Exposition<'_>) {
        self.render_requests(e);
        e.gauge("registry_services", "Services held.", store.services);
        e.gauge("registry_instances", "Instances held.", store.instances);
        e.gauge(
            "registry_http_connections",
            "Open HTTP connections.",
            self.connections.get(),
        );
        e.family(
            "registry_http_timeouts_total",
            Kind::Counter,
            "Connections closed at a deadline, by kind.",
        );
        for (kind, c) in [
            ("head", &self.head_timeouts),
            ("body", &self.body_timeouts),
            ("write", &self.write_timeouts),
        ] {
            e.sample("registry_http_timeouts_total", &[("kind", kind)], c.get());
        }
        let counters: [(&str, &str, &Counter); 9] = [
            (
                "registry_sweeps_total",
                "Sweeper passes finished.",
                &self.sweeps,
            ),
            (
                "registry_http_buffer_refusals_total",
                "Connections refused or closed: read-buffer budget spent.",
                &self.buffer_refusals,
            ),
            (
                "registry_beats_total",
                "Beats that renewed a lease.",
                &self.beats,
            ),
            (
                "registry_beats_not_found_total",
                "Beats for unknown instances (20404).",
                &self.beats_not_found,
            ),
            (
                "registry_expired_unhealthy_total",
                "Instances marked unhealthy by the sweeper.",
                &self.expired_unhealthy,
            ),
            (
                "registry_expired_removed_total",
                "Instances deleted by the sweeper.",
                &self.expired_removed,
            ),
            (
                "registry_services_removed_total",
                "Empty auto-created services removed.",
                &self.services_removed,
            ),
            (
                "registry_http_connections_refused_total",
                "Connections refused at the limit.",
                &self.connections_refused,
            ),
            (
                "registry_http_requests_shed_total",
                "Requests answered 503 at the in-flight limit.",
                &self.requests_shed,
            ),
        ];
        for (name, help, c) in counters {
            e.counter(name, help, c.get());
        }
        self.push.render(e);
    }

    /// Requests by route and status (only the pairs seen), and their
    /// latency per route.
    fn render_requests(&self, e: &mut Exposition<'_>) {
        const REQUESTS: &str = "registry_http_requests_total";
        e.family(
            REQUESTS,
            Kind::Counter,
            "HTTP requests answered, by route and status.",
        );
        let routes = Route::ALL
            .iter()
            .map(|r| (r.name(), &self.requests[*r as usize]));
        for (route, slots) in routes.chain([("none", &self.unrouted)]) {
            for (slot, n) in slots.iter().enumerate() {
                let n = n.load(Ordering::Relaxed);
                if n > 0 {
                    let status = status_label(slot);
                    e.sample(REQUESTS, &[("route", route), ("status", &status)], n);
                }
            }
        }
        const LATENCY: &str = "registry_http_request_duration_seconds";
        e.family(
            LATENCY,
            Kind::Histogram,
            "Time from parsed request to response written into the buffer.",
        );
        for (ri, route) in Route::ALL.iter().enumerate() {
            if self.latency[ri].count() > 0 {
                self.latency[ri].render(e, LATENCY, &[("route", route.name())], 1e6);
            }
        }
    }
}

impl PushMetrics {
    /// Appends the push families to `e`.
    fn render(&self, e: &mut Exposition<'_>) {
        let counters: [(&str, &str, &Counter); 6] = [
            (
                "registry_push_sent_total",
                "Push datagrams sent, resends included.",
                &self.sent,
            ),
            (
                "registry_push_acked_total",
                "Pushes acknowledged.",
                &self.acked,
            ),
            (
                "registry_push_retried_total",
                "Pushes resent after an ack timeout.",
                &self.retried,
            ),
            (
                "registry_push_failed_total",
                "Pushes given up after the resend.",
                &self.failed,
            ),
            (
                "registry_push_skipped_total",
                "Pushes not sent (too large, or ack table full).",
                &self.skipped,
            ),
            (
                "registry_push_bad_acks_total",
                "Ack datagrams dropped as malformed, unknown or duplicate.",
                &self.bad_acks,
            ),
        ];
        for (name, help, c) in counters {
            e.counter(name, help, c.get());
        }
        e.gauge(
            "registry_push_subscribers",
            "Live push subscriptions.",
            self.subscribers.get(),
        );
        e.counter(
            "registry_push_subscribe_refused_total",
            "Polls refused a subscription by a limit.",
            self.subscribe_refused.get(),
        );
        e.gauge(
            "registry_push_pending_acks",
            "Pushes awaiting an ack.",
            self.pending.get(),
        );
        let histograms = [
            (
                "registry_push_batch_size",
                "Datagrams per batched send.",
                &self.batch_size,
                1.0,
            ),
            (
                "registry_push_change_to_send_seconds",
                "From a service's first change in a window to its push.",
                &self.change_to_send,
                1e6,
            ),
            (
                "registry_push_round_trip_seconds",
                "From push send to its ack.",
                &self.round_trip,
                1e6,
            ),
        ];
        for (name, help, h, scale) in histograms {
            e.family(name, Kind::Histogram, help);
            h.render(e, name, &[], scale);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::latency();
        h.record(10);
        h.record(60);
        h.record(5_000_000);
        let out = registry_proto::prometheus::text(|e| h.render(e, "x", &[], 1.0));
        assert!(out.contains("x_bucket{le=\"25\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"100\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"1000000\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_count{} 3\n"), "{out}");
    }

    #[test]
    fn requests_are_counted_by_route_and_status() {
        let m = Metrics::default();
        m.request(Some(Route::InstanceBeat), 200, Duration::from_micros(30));
        m.request(Some(Route::InstanceBeat), 200, Duration::from_micros(30));
        m.request(
            Some(Route::InstanceRegister),
            400,
            Duration::from_micros(30),
        );
        m.request(None, 418, Duration::ZERO);
        let gauges = StoreGauges {
            services: 3,
            instances: 7,
        };
        let text = registry_proto::prometheus::text(|e| m.render(&gauges, e));
        assert!(text
            .contains("registry_http_requests_total{route=\"instance_beat\",status=\"200\"} 2\n"));
        assert!(text.contains(
            "registry_http_requests_total{route=\"instance_register\",status=\"400\"} 1\n"
        ));
        assert!(text.contains("registry_http_requests_total{route=\"none\",status=\"other\"} 1\n"));
        assert!(text.contains("registry_instances 7\n"));
        assert_eq!(m.requests_with(Route::InstanceBeat, 200), 2);
    }
}
