//! Intended send times: the open-loop schedule of rate-driven operations.
//!
//! A [`Pacer`] turns a rate into a sequence of intended send times,
//! `start + k / rate`, that do not depend on when responses arrive (wrk2's model).
//! The driver asks it, at each tick, for every operation whose time has come; when the
//! generator is late it gets all of them at once, each still stamped with its own
//! intended time, so lateness shows up as latency and send lag instead of silently
//! stretching the schedule.
//!
//! A rate is split over `W` workers by giving each worker `rate / W` and an offset of
//! `w / rate`: the union of the workers' schedules is exactly the single schedule at
//! the full rate (see [`Pacer::for_worker`]).

/// Nanoseconds since the run's epoch.
pub type Nanos = u64;

/// One second in [`Nanos`].
pub const SECOND: Nanos = 1_000_000_000;

/// One millisecond in [`Nanos`] (a wheel tick).
pub const MILLI: Nanos = 1_000_000;

/// The run's monotonic clock: [`Nanos`] since a shared epoch. Copied into every
/// worker, so all of them stamp times on one scale.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn start() -> Clock {
        Clock {
            epoch: std::time::Instant::now(),
        }
    }

    /// Nanoseconds since the epoch.
    pub fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as Nanos
    }

    /// The instant `n` nanoseconds after the epoch, for sleeping until it.
    pub fn instant(&self, n: Nanos) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.epoch + std::time::Duration::from_nanos(n))
    }

    /// The epoch.
    pub fn epoch(&self) -> std::time::Instant {
        self.epoch
    }
}

/// A constant-rate sequence of intended times, optionally limited to `limit` items.
#[derive(Debug, Clone, PartialEq)]
pub struct Pacer {
    start: Nanos,
    /// Nanoseconds between two items (fractional, so rates like 3 per second stay exact
    /// over long runs: times are computed from `k`, never accumulated).
    interval: f64,
    issued: u64,
    limit: Option<u64>,
}

impl Pacer {
    /// Items at `rate` per second from `start`; `rate <= 0` gives none.
    pub fn new(start: Nanos, rate: f64, limit: Option<u64>) -> Pacer {
        let interval = if rate > 0.0 && rate.is_finite() {
            1e9 / rate
        } else {
            f64::INFINITY
        };
        Pacer {
            start,
            interval,
            issued: 0,
            limit,
        }
    }

    /// Worker `worker`'s share of a schedule of `rate` per second over `workers`
    /// workers: every `workers`-th item of the full schedule, starting at the
    /// `worker`-th. `limit` is the full schedule's limit.
    pub fn for_worker(
        start: Nanos,
        rate: f64,
        limit: Option<u64>,
        worker: u32,
        workers: u32,
    ) -> Pacer {
        let workers = workers.max(1);
        let full = Pacer::new(start, rate, None);
        let offset = if full.interval.is_finite() {
            (full.interval * f64::from(worker)).round() as u64
        } else {
            0
        };
        Pacer::new(
            start + offset,
            rate / f64::from(workers),
            limit.map(|l| share(l, worker, workers)),
        )
    }

    /// The intended time of item `k`.
    pub fn intended(&self, k: u64) -> Nanos {
        self.start + (k as f64 * self.interval) as u64
    }

    /// The next item's intended time if it is at or before `now`, marking it issued.
    pub fn next_due(&mut self, now: Nanos) -> Option<Nanos> {
        if self.is_done() || !self.interval.is_finite() {
            return None;
        }
        let t = self.intended(self.issued);
        if t <= now {
            self.issued += 1;
            Some(t)
        } else {
            None
        }
    }

    /// The next item's intended time, issued or not (`None` when finished or idle).
    pub fn peek(&self) -> Option<Nanos> {
        (!self.is_done() && self.interval.is_finite()).then(|| self.intended(self.issued))
    }

    /// Items issued so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }

    /// Whether the limit has been reached.
    pub fn is_done(&self) -> bool {
        self.limit.is_some_and(|l| self.issued >= l)
    }
}

/// How many of the items `0..total` fall to `worker` when item `i` goes to worker
/// `i % workers`.
pub fn share(total: u64, worker: u32, workers: u32) -> u64 {
    let (w, n) = (u64::from(worker), u64::from(workers.max(1)));
    if w >= total {
        0
    } else {
        (total - w).div_ceil(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(p: &mut Pacer, now: Nanos) -> Vec<Nanos> {
        std::iter::from_fn(|| p.next_due(now)).collect()
    }

    #[test]
    fn issues_what_is_due_and_nothing_early() {
        let mut p = Pacer::new(1_000, 1000.0, None); // one per ms
        assert_eq!(drain(&mut p, 999), Vec::<Nanos>::new());
        assert_eq!(drain(&mut p, 1_000), vec![1_000]);
        // Late by 3.5 ms: everything due comes at once, each with its own time.
        assert_eq!(
            drain(&mut p, 1_000 + 3_500_000),
            vec![1_001_000, 2_001_000, 3_001_000]
        );
        assert_eq!(p.issued(), 4);
        assert_eq!(p.peek(), Some(4_001_000));
    }

    #[test]
    fn rate_holds_over_long_runs() {
        // 3 per second does not divide a second evenly; times come from k, so after
        // an hour the count is exact.
        let mut p = Pacer::new(0, 3.0, None);
        let n = drain(&mut p, 3600 * SECOND).len();
        assert_eq!(n, 3 * 3600 + 1);
    }

    #[test]
    fn limits_and_zero_rates() {
        let mut p = Pacer::new(0, 1e6, Some(5));
        assert_eq!(drain(&mut p, SECOND).len(), 5);
        assert!(p.is_done());
        assert_eq!(p.peek(), None);
        let mut idle = Pacer::new(0, 0.0, None);
        assert_eq!(drain(&mut idle, u64::MAX / 2).len(), 0);
        assert_eq!(idle.peek(), None);
    }

    #[test]
    fn worker_shares_add_up_to_the_full_schedule() {
        for workers in [1u32, 2, 3, 7] {
            let (rate, limit) = (1234.0, 1001u64);
            let mut all: Vec<Nanos> = (0..workers)
                .flat_map(|w| {
                    let mut p = Pacer::for_worker(50, rate, Some(limit), w, workers);
                    drain(&mut p, 10 * SECOND)
                })
                .collect();
            all.sort_unstable();
            let mut full = Pacer::new(50, rate, Some(limit));
            let want = drain(&mut full, 10 * SECOND);
            assert_eq!(all.len(), want.len(), "workers={workers}");
            for (a, b) in all.iter().zip(&want) {
                // Each worker rounds its own offset: within a nanosecond or two.
                assert!(a.abs_diff(*b) <= 2, "workers={workers}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn shares() {
        assert_eq!(share(10, 0, 3), 4);
        assert_eq!(share(10, 1, 3), 3);
        assert_eq!(share(10, 2, 3), 3);
        assert_eq!(share(2, 3, 4), 0);
        assert_eq!((0..4).map(|w| share(1001, w, 4)).sum::<u64>(), 1001);
    }
}
