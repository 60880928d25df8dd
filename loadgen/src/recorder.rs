//! Recording: one set of HdrHistograms per worker, merged losslessly at the end.
//!
//! Every operation's outcome is recorded, whatever it was. An answered operation
//! records its *corrected* latency (completion minus the intended send time from the
//! schedule: what a client experiences, coordinated omission included) and its
//! *uncorrected* latency (completion minus the actual write: the server's service
//! time), in microseconds with 3 significant digits. An operation that failed without
//! an answer (timeout, broken connection, never sent) records its corrected latency at
//! the moment it was declared failed: leaving it out would make p99.9 look best exactly
//! when the server is drowning. It has an uncorrected latency only if it was written.
//! A schedule slot the generator could not fill (nothing to deregister, no free
//! instance slot) is counted as *skipped*: the run did not offer the load it planned,
//! which makes it invalid (see [`OpStats::skipped`]).
//! Each dispatch records the *scheduling lag* (dispatch minus intended: whether the
//! generator itself kept up) and each write the *send lag* (write minus the moment
//! the request could be written; waiting for a free connection before that is the
//! *connection wait*). A 2.x call is written when the socket takes its last byte,
//! and the part of its send lag from the call's start to then, queued in the
//! generator's own HTTP/2 client, is its *client queue* ([`Recorder::client_queue`]).
//!
//! A worker records into the histograms of the current second only ([`Stats`]); at
//! each second boundary [`Recorder::roll`] adds them into the running total and hands
//! a copy to the runner for the per-second timeline and the `.hlog`. Nothing crosses
//! threads per request. Progress counters for the live bar are published by the
//! worker once per tick into [`Progress`] (single writer, `Relaxed`: the bar only needs
//! eventually-visible, individually consistent numbers, not ordering with anything).

use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

use crate::schedule::Nanos;

/// An operation the generator performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Op {
    /// `POST /instance`, scheduled.
    Register = 0,
    /// `DELETE /instance`.
    Deregister = 1,
    /// `PUT /instance/beat`.
    Beat = 2,
    /// `POST /instance` after a beat was answered 20404, as the Java client does.
    Reregister = 3,
    /// `GET /instance/list` without subscribing.
    Query = 4,
    /// `GET /instance/list` with `udpPort`: a subscriber's (re-)poll.
    Subscribe = 5,
}

impl Op {
    /// Every operation, in report order.
    pub const ALL: [Op; 6] = [
        Op::Register,
        Op::Deregister,
        Op::Beat,
        Op::Reregister,
        Op::Query,
        Op::Subscribe,
    ];

    /// The name used in reports and thresholds.
    pub fn name(self) -> &'static str {
        match self {
            Op::Register => "register",
            Op::Deregister => "deregister",
            Op::Beat => "beat",
            Op::Reregister => "reregister",
            Op::Query => "query",
            Op::Subscribe => "subscribe",
        }
    }

    /// The operation with this value.
    pub fn from_u8(v: u8) -> Option<Op> {
        Op::ALL.get(usize::from(v)).copied()
    }
}

/// Why an operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorClass {
    /// A 4xx status.
    Http4xx = 0,
    /// A 5xx (or other non-2xx) status.
    Http5xx = 1,
    /// No response within the connection timeout.
    Timeout = 2,
    /// The connection failed or closed before the response.
    Connection = 3,
    /// A response or datagram that does not follow the protocol.
    Protocol = 4,
}

impl ErrorClass {
    /// Every class.
    pub const ALL: [ErrorClass; 5] = [
        ErrorClass::Http4xx,
        ErrorClass::Http5xx,
        ErrorClass::Timeout,
        ErrorClass::Connection,
        ErrorClass::Protocol,
    ];

    /// The key used in reports (`errors_by_class`).
    pub fn key(self) -> &'static str {
        match self {
            ErrorClass::Http4xx => "http_4xx",
            ErrorClass::Http5xx => "http_5xx",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Connection => "connection",
            ErrorClass::Protocol => "protocol",
        }
    }

    /// The class of a non-2xx status.
    pub fn of_status(status: u16) -> ErrorClass {
        if (400..500).contains(&status) {
            ErrorClass::Http4xx
        } else {
            ErrorClass::Http5xx
        }
    }
}

/// A failure: its class and why, in words (the first distinct reasons of each class
/// are kept in the report with counts: [`reports::reasons`]).
///
/// Most reasons are fixed sentences and cost nothing; one that carries what the
/// system said (an I/O error, an HTTP status, a server's message) is allocated once
/// and shared by every request it fails (a broken connection fails its whole
/// pipeline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The class, for counting.
    pub class: ErrorClass,
    reason: Reason,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reason {
    Fixed(&'static str),
    Said(std::rc::Rc<str>),
}

impl Failure {
    /// A failure of `class` for a fixed reason.
    pub const fn new(class: ErrorClass, reason: &'static str) -> Failure {
        Failure {
            class,
            reason: Reason::Fixed(reason),
        }
    }

    /// A failure of `class` for a reason built at run time (`what: error`).
    pub fn because(class: ErrorClass, reason: impl std::fmt::Display) -> Failure {
        Failure {
            class,
            reason: Reason::Said(reason.to_string().into()),
        }
    }

    /// A non-2xx answer: its status and the start of its body.
    pub fn status(status: u16, body: &[u8]) -> Failure {
        let body = String::from_utf8_lossy(&body[..body.len().min(120)]);
        let body = body.trim();
        if body.is_empty() {
            Failure::because(ErrorClass::of_status(status), format_args!("HTTP {status}"))
        } else {
            Failure::because(
                ErrorClass::of_status(status),
                format_args!("HTTP {status}: {body}"),
            )
        }
    }

    /// Why, in words.
    pub fn reason(&self) -> &str {
        match &self.reason {
            Reason::Fixed(s) => s,
            Reason::Said(s) => s,
        }
    }
}

/// A histogram for one second of recording: starts small and grows to what it
/// records, so a worker's many per-second histograms stay cheap to copy.
pub fn interval_histogram() -> Histogram<u64> {
    // Constant, valid bounds (low 1, sigfig 3): cannot fail.
    let mut h = Histogram::new_with_bounds(1, 2, 3).expect("valid histogram bounds");
    h.auto(true);
    h
}

fn micros(ns: u64) -> u64 {
    ns / 1000
}

/// Phases a recorder tells apart ([`crate::plan::Phase`] values).
pub const PHASES: usize = 7;

/// One operation's figures.
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Completion minus intended send time, µs.
    pub corrected: Histogram<u64>,
    /// Completion minus actual send time, µs.
    pub uncorrected: Histogram<u64>,
    /// Actual write minus the moment the request could be written (its intended
    /// time, or later when its connection had no room), µs: the part of
    /// `corrected` spent waiting inside the generator.
    pub send_lag: Histogram<u64>,
    /// That moment minus the intended time, µs: the part of `corrected` spent
    /// waiting for the connection (earlier answers on a full pipeline, a
    /// reconnect), which is the server's and the wire's, not the generator's.
    pub conn_wait: Histogram<u64>,
    /// Of `send_lag`, the time from a 2.x call's start to the write that handed its
    /// last byte to the socket (queued in the generator's HTTP/2 client behind its other tasks),
    /// µs. Empty for HTTP, whose writes are the socket's own.
    pub client_queue: Histogram<u64>,
    /// Operations written, per phase they were written in.
    pub sent_in: [u64; PHASES],
    /// Completed operations, failed ones included.
    pub count: u64,
    /// Failures by [`ErrorClass`].
    pub errors: [u64; 5],
    /// The first distinct reasons of each class, with counts (bounded).
    pub reasons: Vec<reports::reasons::ErrorSample>,
    /// 2.x calls whose send time is their socket's stamp.
    pub stamped: u64,
    /// 2.x calls whose send time fell back to their start (no stamp was taken).
    pub fallback: u64,
    /// Operations whose intended time came: dispatched or skipped.
    pub intended: u64,
    /// Schedule slots whose time came but that the generator could not fill.
    pub skipped: u64,
}

impl OpStats {
    fn new() -> OpStats {
        OpStats {
            corrected: interval_histogram(),
            uncorrected: interval_histogram(),
            send_lag: interval_histogram(),
            conn_wait: interval_histogram(),
            client_queue: interval_histogram(),
            sent_in: [0; PHASES],
            count: 0,
            errors: [0; 5],
            reasons: Vec::new(),
            stamped: 0,
            fallback: 0,
            intended: 0,
            skipped: 0,
        }
    }

    /// All failures.
    pub fn error_count(&self) -> u64 {
        self.errors.iter().sum()
    }

    fn count_failure(&mut self, failure: &Failure) {
        self.errors[failure.class as usize] += 1;
        reports::reasons::add(&mut self.reasons, failure.class.key(), failure.reason(), 1);
    }
}

/// Everything recorded over some span of time (a second, or a whole run).
#[derive(Debug, Clone)]
pub struct Stats {
    /// Per operation, indexed by `Op as usize`.
    pub ops: [OpStats; 6],
    /// Send lag over all operations (see [`OpStats::send_lag`]), µs.
    pub send_lag: Histogram<u64>,
    /// Connection wait over all operations (see [`OpStats::conn_wait`]), µs.
    pub conn_wait: Histogram<u64>,
    /// Dispatch time minus intended time, µs.
    pub sched_lag: Histogram<u64>,
    /// Change-to-receipt latency of pushes, µs.
    pub push: Histogram<u64>,
    /// Push datagrams received.
    pub pushes: u64,
    /// Acks sent.
    pub acks: u64,
    /// Datagrams that were not valid pushes, or pushes for another service.
    pub push_errors: u64,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            ops: std::array::from_fn(|_| OpStats::new()),
            send_lag: interval_histogram(),
            conn_wait: interval_histogram(),
            sched_lag: interval_histogram(),
            push: interval_histogram(),
            pushes: 0,
            acks: 0,
            push_errors: 0,
        }
    }
}

impl Stats {
    /// The figures of `op`.
    pub fn op(&self, op: Op) -> &OpStats {
        &self.ops[op as usize]
    }

    /// Adds `other` (lossless: histogram counts add).
    pub fn add(&mut self, other: &Stats) {
        for (a, b) in self.ops.iter_mut().zip(&other.ops) {
            add_hist(&mut a.corrected, &b.corrected);
            add_hist(&mut a.uncorrected, &b.uncorrected);
            add_hist(&mut a.send_lag, &b.send_lag);
            add_hist(&mut a.conn_wait, &b.conn_wait);
            add_hist(&mut a.client_queue, &b.client_queue);
            for (x, y) in a.sent_in.iter_mut().zip(&b.sent_in) {
                *x += y;
            }
            a.count += b.count;
            a.intended += b.intended;
            a.skipped += b.skipped;
            for (x, y) in a.errors.iter_mut().zip(&b.errors) {
                *x += y;
            }
            reports::reasons::merge(&mut a.reasons, &b.reasons);
            a.stamped += b.stamped;
            a.fallback += b.fallback;
        }
        add_hist(&mut self.send_lag, &other.send_lag);
        add_hist(&mut self.conn_wait, &other.conn_wait);
        add_hist(&mut self.sched_lag, &other.sched_lag);
        add_hist(&mut self.push, &other.push);
        self.pushes += other.pushes;
        self.acks += other.acks;
        self.push_errors += other.push_errors;
    }

    /// Empties every figure, keeping the histograms' allocations.
    pub fn reset(&mut self) {
        for o in &mut self.ops {
            o.corrected.reset();
            o.uncorrected.reset();
            o.send_lag.reset();
            o.conn_wait.reset();
            o.client_queue.reset();
            o.sent_in = [0; PHASES];
            o.count = 0;
            o.errors = [0; 5];
            o.reasons.clear();
            o.stamped = 0;
            o.fallback = 0;
            o.intended = 0;
            o.skipped = 0;
        }
        self.send_lag.reset();
        self.conn_wait.reset();
        self.sched_lag.reset();
        self.push.reset();
        self.pushes = 0;
        self.acks = 0;
        self.push_errors = 0;
    }
}

fn add_hist(into: &mut Histogram<u64>, from: &Histogram<u64>) {
    // Both auto-resize, so adding cannot run out of range.
    let _ = into.add(from);
}

/// A worker's recorder.
#[derive(Debug, Default)]
pub struct Recorder {
    /// The current second.
    pub current: Stats,
    total: Stats,
    /// The phase writes are counted in ([`crate::plan::Phase`] as a number).
    phase: u8,
}

impl Recorder {
    /// A fresh recorder.
    pub fn new() -> Recorder {
        Recorder::default()
    }

    /// An operation came due and was handed to a connection at `now`.
    pub fn dispatched(&mut self, op: Op, intended: Nanos, now: Nanos) {
        self.current.ops[op as usize].intended += 1;
        let _ = self
            .current
            .sched_lag
            .record(micros(now.saturating_sub(intended)));
    }

    /// Counts writes from now on in `phase`.
    pub fn set_phase(&mut self, phase: crate::plan::Phase) {
        self.phase = phase.as_u8();
    }

    /// An operation was written to its connection at `sent`; it could have been
    /// from `ready` on (at or after `intended`: see [`crate::conn::Lane::ready_at`]).
    pub fn sent(&mut self, op: Op, intended: Nanos, ready: Nanos, sent: Nanos) {
        let ready = ready.clamp(intended, sent.max(intended));
        let lag = micros(sent.saturating_sub(ready));
        let wait = micros(ready - intended);
        let _ = self.current.send_lag.record(lag);
        let _ = self.current.conn_wait.record(wait);
        let o = &mut self.current.ops[op as usize];
        let _ = o.send_lag.record(lag);
        let _ = o.conn_wait.record(wait);
        o.sent_in[usize::from(self.phase).min(PHASES - 1)] += 1;
    }

    /// A 2.x call of `op` started at `started` had its last byte handed to the
    /// socket at `wired` (its send, [`Recorder::sent`]); `stamped` says whether that
    /// time is the socket's stamp or the fallback to its start.
    pub fn client_queue(&mut self, op: Op, started: Nanos, wired: Nanos, stamped: bool) {
        let queued = micros(wired.saturating_sub(started));
        let o = &mut self.current.ops[op as usize];
        let _ = o.client_queue.record(queued);
        if stamped {
            o.stamped += 1;
        } else {
            o.fallback += 1;
        }
    }

    /// An operation got a response at `done` (`outcome` is its verdict: an HTTP error
    /// status or a protocol error still has a latency).
    pub fn completed(
        &mut self,
        op: Op,
        intended: Nanos,
        sent: Nanos,
        done: Nanos,
        outcome: Result<(), &Failure>,
    ) {
        let o = &mut self.current.ops[op as usize];
        o.count += 1;
        let _ = o.corrected.record(micros(done.saturating_sub(intended)));
        let _ = o.uncorrected.record(micros(done.saturating_sub(sent)));
        if let Err(failure) = outcome {
            o.count_failure(failure);
        }
    }

    /// An operation failed without a response (timeout, connection loss, never
    /// sent), declared failed at `declared`. Its corrected latency runs to that
    /// moment; it has an uncorrected one only if it was written (`sent`).
    pub fn failed(
        &mut self,
        op: Op,
        failure: &Failure,
        intended: Nanos,
        sent: Option<Nanos>,
        declared: Nanos,
    ) {
        let o = &mut self.current.ops[op as usize];
        o.count += 1;
        o.count_failure(failure);
        let _ = o
            .corrected
            .record(micros(declared.saturating_sub(intended)));
        if let Some(sent) = sent {
            let _ = o.uncorrected.record(micros(declared.saturating_sub(sent)));
        }
    }

    /// A schedule slot of `op` came due but the generator had nothing to send for it.
    pub fn skip(&mut self, op: Op) {
        let o = &mut self.current.ops[op as usize];
        o.intended += 1;
        o.skipped += 1;
    }

    /// A push arrived that revealed a change sent at `change_sent`.
    pub fn push_latency(&mut self, change_sent: Nanos, received: Nanos) {
        let _ = self
            .current
            .push
            .record(micros(received.saturating_sub(change_sent)));
    }

    /// Ends the current second: adds it to the total and returns it.
    pub fn roll(&mut self) -> Stats {
        self.total.add(&self.current);
        let out = self.current.clone();
        self.current.reset();
        out
    }

    /// Everything recorded, the current second included.
    pub fn finish(mut self) -> Stats {
        self.total.add(&self.current);
        self.total
    }

    /// Schedule slots skipped so far, over all operations.
    pub fn skipped(&self) -> u64 {
        let (a, b) = (&self.total.ops, &self.current.ops);
        a.iter().chain(b).map(|o| o.skipped).sum()
    }

    /// Count and errors of `op` so far (total plus current second).
    pub fn counts(&self, op: Op) -> (u64, u64) {
        let (a, b) = (self.total.op(op), self.current.op(op));
        (a.count + b.count, a.error_count() + b.error_count())
    }
}

/// Counters a worker publishes for the progress bar.
#[derive(Debug, Default)]
pub struct Progress {
    counts: [AtomicU64; 6],
    errors: [AtomicU64; 6],
    /// Schedule slots skipped so far, over all operations.
    pub skipped: AtomicU64,
    /// Requests queued or in flight.
    pub outstanding: AtomicU64,
    /// Instances the server is believed to hold.
    pub present: AtomicU64,
    /// Subscribers whose view differs from the expected list (computed while settling).
    pub unconverged: AtomicU64,
    /// Load-phase registrations not yet answered.
    pub load_left: AtomicU64,
    /// Instances not yet deregistered (drain).
    pub drain_left: AtomicU64,
    /// Scheduled changes (register, deregister) queued or in flight.
    pub changes_outstanding: AtomicU64,
    /// Set once the worker has seen the current phase (its value).
    pub phase_seen: AtomicU64,
}

impl Progress {
    /// Publishes a recorder's counts.
    pub fn publish(&self, r: &Recorder) {
        for op in Op::ALL {
            let (c, e) = r.counts(op);
            self.counts[op as usize].store(c, Ordering::Relaxed);
            self.errors[op as usize].store(e, Ordering::Relaxed);
        }
        self.skipped.store(r.skipped(), Ordering::Relaxed);
    }

    /// Published count and errors of `op`.
    pub fn counts(&self, op: Op) -> (u64, u64) {
        (
            self.counts[op as usize].load(Ordering::Relaxed),
            self.errors[op as usize].load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_corrected_and_uncorrected_from_their_own_start() {
        let mut r = Recorder::new();
        // Intended at 0, written 3 ms late, answered 1 ms after the write.
        r.dispatched(Op::Beat, 0, 2_000_000);
        r.sent(Op::Beat, 0, 0, 3_000_000);
        r.completed(Op::Beat, 0, 3_000_000, 4_000_000, Ok(()));
        let s = r.finish();
        let b = s.op(Op::Beat);
        assert_eq!((b.count, b.intended, b.error_count()), (1, 1, 0));
        assert!(b.corrected.equivalent(b.corrected.max(), 4_000));
        assert!(b.uncorrected.equivalent(b.uncorrected.max(), 1_000));
        assert!(s.sched_lag.equivalent(s.sched_lag.max(), 2_000));
        assert!(s.send_lag.equivalent(s.send_lag.max(), 3_000));
        assert!(
            b.send_lag.equivalent(b.send_lag.max(), 3_000),
            "per operation too"
        );
        assert_eq!(b.sent_in[crate::plan::Phase::Init.as_u8() as usize], 1);
    }

    #[test]
    fn waiting_for_the_connection_is_not_send_lag() {
        let mut r = Recorder::new();
        // Intended at 0; its connection's pipeline was full until 2 ms (an earlier
        // answer), the write came 0.5 ms after that.
        r.sent(Op::Query, 0, 2_000_000, 2_500_000);
        // A ready time before the intended one (room long since) is the intended.
        r.sent(Op::Query, 1_000_000, 0, 1_100_000);
        let s = r.finish();
        let q = s.op(Op::Query);
        assert_eq!(q.send_lag.len(), 2);
        assert!(q.send_lag.equivalent(q.send_lag.max(), 500));
        assert!(q.send_lag.equivalent(q.send_lag.min(), 100));
        assert!(q.conn_wait.equivalent(q.conn_wait.max(), 2_000));
        assert_eq!(q.conn_wait.min(), 0);
        assert_eq!(s.conn_wait.len(), 2, "and over all operations");
    }

    #[test]
    fn a_calls_queue_in_the_client_is_kept_per_operation_and_through_a_roll() {
        let mut r = Recorder::new();
        // Could go at 1 ms, started at 1.2 ms, its last byte left at 1.5 ms.
        r.sent(Op::Register, MS, MS, 1_500_000);
        r.client_queue(Op::Register, 1_200_000, 1_500_000, true);
        r.client_queue(Op::Register, 1_600_000, 1_600_000, false);
        let second = r.roll();
        assert_eq!(second.op(Op::Register).client_queue.len(), 2);
        let s = r.finish();
        let reg = s.op(Op::Register);
        assert!(reg.client_queue.equivalent(reg.client_queue.max(), 300));
        assert_eq!((reg.stamped, reg.fallback), (1, 1), "a fallback is counted");
        assert!(
            reg.send_lag.equivalent(reg.send_lag.max(), 500),
            "the queue is part of it"
        );
        assert!(s.op(Op::Query).client_queue.is_empty());
    }

    #[test]
    fn merging_per_worker_histograms_is_lossless() {
        // Two workers record disjoint halves of one distribution; the merged
        // histogram equals one that recorded everything, bucket for bucket.
        let mut single = reports::new_histogram();
        let mut a = Recorder::new();
        let mut b = Recorder::new();
        for i in 0..20_000u64 {
            let us = 1 + (i * 7919) % 250_000;
            single.record(us).unwrap();
            let w = if i % 2 == 0 { &mut a } else { &mut b };
            w.completed(Op::Query, 0, 0, us * 1000, Ok(()));
            if i % 1000 == 0 {
                let _ = w.roll(); // seconds pass at different moments
            }
        }
        let mut merged = Stats::default();
        merged.add(&a.finish());
        merged.add(&b.finish());
        let q = &merged.op(Op::Query).corrected;
        assert_eq!(q.len(), single.len());
        for quantile in [0.0, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(
                q.value_at_quantile(quantile),
                single.value_at_quantile(quantile),
                "q={quantile}"
            );
        }
        // And through the report encoding (V2 + DEFLATE + base64) and back.
        let block = reports::LatencyBlock::from_histogram(q).unwrap();
        let back = block.histogram().unwrap();
        assert_eq!(
            back.value_at_quantile(0.999),
            single.value_at_quantile(0.999)
        );
        assert_eq!(back.len(), single.len());
    }

    #[test]
    fn roll_moves_the_second_into_the_total() {
        let mut r = Recorder::new();
        r.failed(Op::Register, &TIMEOUT, 0, Some(1_000), 2_000_000);
        r.completed(
            Op::Register,
            0,
            0,
            5_000,
            Err(&Failure::status(503, b"busy")),
        );
        assert_eq!(r.counts(Op::Register), (2, 2));
        let second = r.roll();
        assert_eq!(
            second.op(Op::Register).errors[ErrorClass::Timeout as usize],
            1
        );
        assert_eq!(r.current.op(Op::Register).count, 0);
        assert_eq!(r.counts(Op::Register), (2, 2));
        let p = Progress::default();
        p.publish(&r);
        assert_eq!(p.counts(Op::Register), (2, 2));
        let total = r.finish();
        assert_eq!(total.op(Op::Register).corrected.len(), 2);
    }

    #[test]
    fn failures_are_recorded_at_the_moment_they_were_declared() {
        let mut r = Recorder::new();
        // Intended at 1 ms, written at 2 ms, declared timed out at 1001 ms.
        r.dispatched(Op::Beat, MS, 2 * MS);
        r.failed(Op::Beat, &TIMEOUT, MS, Some(2 * MS), 1001 * MS);
        // Intended at 0, never written, abandoned at 500 ms.
        r.dispatched(Op::Beat, 0, 0);
        let refused = Failure::because(ErrorClass::Connection, "connect: refused");
        r.failed(Op::Beat, &refused, 0, None, 500 * MS);
        let s = r.finish();
        let b = s.op(Op::Beat);
        assert_eq!((b.count, b.intended, b.error_count()), (2, 2, 2));
        assert_eq!(
            b.corrected.len(),
            2,
            "both failures are in the corrected record"
        );
        assert!(b.corrected.equivalent(b.corrected.max(), 1_000_000));
        assert!(b.corrected.equivalent(b.corrected.min(), 500_000));
        assert_eq!(
            b.uncorrected.len(),
            1,
            "only the written one has a service time"
        );
        assert!(b.uncorrected.equivalent(b.uncorrected.max(), 999_000));
        assert_eq!(b.errors[ErrorClass::Timeout as usize], 1);
        assert_eq!(b.errors[ErrorClass::Connection as usize], 1);
    }

    #[test]
    fn skipped_slots_are_intended_but_never_counted_as_done() {
        let mut r = Recorder::new();
        r.skip(Op::Deregister);
        let _ = r.roll();
        r.skip(Op::Deregister);
        let s = r.finish();
        let d = s.op(Op::Deregister);
        assert_eq!((d.intended, d.skipped, d.count), (2, 2, 0));
        assert!(d.corrected.is_empty());
    }

    const MS: Nanos = 1_000_000;
    const TIMEOUT: Failure = Failure::new(ErrorClass::Timeout, "no answer in time");

    #[test]
    fn failures_keep_their_reasons_with_counts_through_a_roll() {
        let mut r = Recorder::new();
        let refused = Failure::because(ErrorClass::Connection, "connect: refused");
        r.failed(Op::Register, &refused, 0, None, MS);
        let _ = r.roll();
        r.failed(Op::Register, &refused.clone(), 0, None, 2 * MS);
        r.completed(
            Op::Register,
            0,
            0,
            3 * MS,
            Err(&Failure::status(503, b" busy \n")),
        );
        r.completed(Op::Register, 0, 0, 3 * MS, Err(&Failure::status(404, b"")));
        let s = r.finish();
        let reasons = &s.op(Op::Register).reasons;
        let find = |m: &str| {
            reasons
                .iter()
                .find(|x| x.message == m)
                .map(|x| (x.class.as_str(), x.count))
        };
        assert_eq!(find("connect: refused"), Some(("connection", 2)));
        assert_eq!(find("HTTP 503: busy"), Some(("http_5xx", 1)));
        assert_eq!(find("HTTP 404"), Some(("http_4xx", 1)));
        assert_eq!(s.op(Op::Register).error_count(), 4);
    }

    #[test]
    fn names_and_classes() {
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(Op::from_u8(i as u8), Some(*op));
        }
        assert_eq!(Op::from_u8(6), None);
        assert_eq!(ErrorClass::of_status(404), ErrorClass::Http4xx);
        assert_eq!(ErrorClass::of_status(503), ErrorClass::Http5xx);
        assert_eq!(ErrorClass::of_status(302), ErrorClass::Http5xx);
    }
}
