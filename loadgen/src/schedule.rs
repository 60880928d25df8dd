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
//!
//! Sending on time is [`wait_until`]'s: a coarse sleep until shortly before the due
//! time ([`LEAD`]), then short pauses that let the runtime serve sockets until the
//! clock reaches it. tokio's own timer cannot do this: it has a 1 ms resolution and
//! rounds up, so a request due mid-millisecond left up to a millisecond late (send
//! lag p50 ~0.5-0.8 ms at a few thousand requests/s, ten times the server's answer
//! time). The real sleep ([`Waiter`]) is a `timerfd` on the runtime's own epoll, with
//! the thread's timer slack lowered, so it wakes within tens of microseconds.
//! The [`Wait`] trait lets a test drive the same logic on virtual time.

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

/// How long before a due time the coarse sleep ends: covers the kernel's wake-up
/// latency (timer slack lowered to 1 µs, an idle core's wake-up tens of µs).
pub const LEAD: Nanos = 60_000;

/// When the worker's driver wants its thread next: the moment its coarse sleep
/// ends ([`LEAD`] before its next due time). The tasks that read answers and
/// pushes yield once it has passed.
///
/// A worker is one thread, and tokio's `LocalSet` polls up to 61 of its tasks
/// between two polls of the driver (the worker's main future). When the server
/// pushes one change to every subscriber at once, those polls were all parsing
/// pushes while a request came due: send lag p99 1.2-2.6 ms at the smoke profile
/// against a machine wake-up p99 of 0.3-0.4 ms (docs/benchmarks.md). A reader
/// that finds the driver due yields instead, the rest of the round is cheap, and
/// the driver runs at the next.
#[derive(Debug)]
pub struct DriverDue {
    clock: Clock,
    at: std::cell::Cell<Nanos>,
}

impl DriverDue {
    /// Not due until [`DriverDue::wait_for`] says when.
    pub fn new(clock: Clock) -> DriverDue {
        DriverDue {
            clock,
            at: std::cell::Cell::new(Nanos::MAX),
        }
    }

    /// The driver will wait for `next`: due from [`LEAD`] before it.
    pub fn wait_for(&self, next: Nanos) {
        self.at.set(next.saturating_sub(LEAD));
    }

    /// Whether the driver is due now.
    pub fn is_due(&self) -> bool {
        self.clock.now() >= self.at.get()
    }
}

/// A clock that can be waited on: the real one ([`Waiter`]) or a test's virtual one.
pub trait Wait {
    /// Now, on the run's clock.
    fn now(&self) -> Nanos;
    /// Sleeps until about `t` (it may wake a little early or late).
    fn sleep_until(&mut self, t: Nanos) -> impl std::future::Future<Output = ()>;
    /// One short pause while waiting precisely: lets the runtime serve other tasks
    /// and sockets, then comes back.
    fn pause(&mut self) -> impl std::future::Future<Output = ()>;
}

/// Waits until the clock reads `t`: sleeps until [`LEAD`] before it, then pauses
/// until it comes. Returns the time it returned at (`>= t`).
pub async fn wait_until<W: Wait>(w: &mut W, t: Nanos) -> Nanos {
    let now = w.now();
    if t > now + LEAD {
        w.sleep_until(t - LEAD).await;
    }
    loop {
        let now = w.now();
        if now >= t {
            return now;
        }
        w.pause().await;
    }
}

/// The next time the driver must act, after it sent everything due at `sent_upto`:
/// the earliest due time of the rate-driven items and the next millisecond tick (the
/// wheels' resolution). An item still due at `sent_upto` had nothing to send (a drain
/// with nothing left) and waits for the tick instead of spinning.
pub fn next_wake(sent_upto: Nanos, due: impl IntoIterator<Item = Option<Nanos>>) -> Nanos {
    let tick = (sent_upto / MILLI + 1) * MILLI;
    due.into_iter()
        .flatten()
        .filter(|t| *t > sent_upto)
        .fold(tick, Nanos::min)
}

/// The real clock's waiter: a `timerfd` registered with the runtime, so the worker
/// serves its sockets while it sleeps and wakes at a microsecond-precise time.
#[derive(Debug)]
pub struct Waiter {
    clock: Clock,
    timer: Option<tokio::io::unix::AsyncFd<Timer>>,
}

/// An owned `timerfd`, as tokio's `AsyncFd` wants it (`AsRawFd`).
#[derive(Debug)]
struct Timer(nix::sys::timerfd::TimerFd);

impl std::os::fd::AsRawFd for Timer {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd as _;
        self.0.as_fd().as_raw_fd()
    }
}

/// Registers `timer` with the current runtime's reactor.
#[allow(unsafe_code)]
fn register(timer: Timer) -> Option<tokio::io::unix::AsyncFd<Timer>> {
    // SAFETY: `AsyncFd::register` needs the descriptor to stay open and be the same
    // file until the registration is dropped. `Timer` owns its descriptor (a
    // `TimerFd` closes it only when dropped) and the `AsyncFd` owns the `Timer`, so
    // the descriptor lives exactly as long as the registration. tokio has no safe
    // way to register a descriptor that is not one of its own socket types.
    unsafe { tokio::io::unix::AsyncFd::register(timer) }.ok()
}

impl Waiter {
    /// A waiter on `clock`, for the current thread. Lowers the thread's timer slack
    /// (the kernel's default 50 µs would be the floor of every wake-up); without a
    /// `timerfd` it falls back to tokio's millisecond timer.
    pub fn new(clock: Clock) -> Waiter {
        use nix::sys::timerfd::{ClockId, TimerFd, TimerFlags};
        let _ = nix::sys::prctl::set_timerslack(1);
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .ok()
        .and_then(|fd| register(Timer(fd)));
        Waiter { clock, timer }
    }
}

impl Wait for Waiter {
    fn now(&self) -> Nanos {
        self.clock.now()
    }

    async fn sleep_until(&mut self, t: Nanos) {
        use nix::sys::time::TimeSpec;
        use nix::sys::timerfd::{Expiration, TimerSetTimeFlags};
        let Some(timer) = &self.timer else {
            tokio::time::sleep_until(self.clock.instant(t)).await;
            return;
        };
        let wait = t.saturating_sub(self.clock.now());
        if wait == 0 {
            return;
        }
        let expires = Expiration::OneShot(TimeSpec::from_duration(
            std::time::Duration::from_nanos(wait),
        ));
        if timer
            .get_ref()
            .0
            .set(expires, TimerSetTimeFlags::empty())
            .is_err()
        {
            tokio::time::sleep_until(self.clock.instant(t)).await;
            return;
        }
        while let Ok(mut ready) = timer.readable().await {
            // Reading the expiry count rearms readiness; `wait` says whether it fired.
            match ready.try_io(|fd| fd.get_ref().0.wait().map_err(std::io::Error::from)) {
                Ok(_) => return,
                Err(_would_block) => continue,
            }
        }
    }

    async fn pause(&mut self) {
        tokio::task::yield_now().await;
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

    #[test]
    fn the_driver_is_due_from_its_lead_before_its_next_time() {
        let clock = Clock::start();
        let due = DriverDue::new(clock);
        assert!(!due.is_due(), "not due before the driver says when");
        // An hour from now: not due (the clock cannot get there during the test).
        due.wait_for(clock.now() + 3600 * SECOND);
        assert!(!due.is_due());
        // Within LEAD of now: due already, as the coarse sleep has ended.
        due.wait_for(clock.now() + LEAD / 2);
        assert!(due.is_due());
        due.wait_for(0);
        assert!(due.is_due());
    }

    /// Virtual time: a sleep wakes `late` after the time asked for (the kernel's
    /// wake-up latency), a pause costs `pause` (other tasks' work in between).
    struct Virtual {
        now: Nanos,
        late: Nanos,
        pause: Nanos,
        sleeps: u32,
    }

    impl Wait for Virtual {
        fn now(&self) -> Nanos {
            self.now
        }

        async fn sleep_until(&mut self, t: Nanos) {
            self.sleeps += 1;
            self.now = self.now.max(t + self.late);
        }

        async fn pause(&mut self) {
            self.now += self.pause;
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Requests due at known instants (10k/s, none on a millisecond boundary) leave
    /// within one pause of their time when the kernel wakes within the lead, and a
    /// kernel that wakes later than the lead shows up as lag, never hidden.
    #[test]
    fn due_requests_leave_within_the_bound_on_virtual_time() {
        for (late, pause, bound) in [
            (0, 1_000, 1_000),
            (40_000, 2_000, 2_000),
            (55_000, 5_000, 5_000),
        ] {
            let mut clock = Virtual {
                now: 0,
                late,
                pause,
                sleeps: 0,
            };
            let mut pacer = Pacer::new(123_457, 10_000.0, Some(1_000));
            let worst = block_on(async {
                let mut worst = 0;
                while let Some(due) = pacer.peek() {
                    let wake = next_wake(clock.now, [Some(due)]);
                    let at = wait_until(&mut clock, wake).await;
                    while let Some(intended) = pacer.next_due(clock.now) {
                        worst = worst.max(at - intended);
                    }
                }
                worst
            });
            assert!(
                worst <= bound,
                "late {late}: worst lag {worst} ns > {bound}"
            );
            assert!(
                clock.sleeps > 0,
                "it sleeps between requests instead of spinning"
            );
        }
        // Woken 200 µs late: the lag is there to see.
        let mut clock = Virtual {
            now: 0,
            late: 200_000,
            pause: 1_000,
            sleeps: 0,
        };
        let at = block_on(wait_until(&mut clock, 1_000_000));
        assert!(at - 1_000_000 >= 200_000 - LEAD, "{at}");
    }

    #[test]
    fn the_driver_wakes_at_the_earliest_due_time_or_the_next_tick() {
        assert_eq!(next_wake(1_500_000, [None, None]), 2_000_000);
        assert_eq!(
            next_wake(1_500_000, [Some(1_700_000), Some(1_600_123)]),
            1_600_123
        );
        assert_eq!(next_wake(1_500_000, [Some(5_000_000)]), 2_000_000);
        assert_eq!(
            next_wake(1_500_000, [Some(1_000_000)]),
            2_000_000,
            "stalled: the tick"
        );
    }

    #[test]
    fn the_real_waiter_returns_at_or_after_the_time() {
        let clock = Clock::start();
        let at = block_on(async {
            let mut w = Waiter::new(clock);
            let t = clock.now() + 3 * MILLI + 123_456;
            (t, wait_until(&mut w, t).await)
        });
        assert!(at.1 >= at.0, "{at:?}");
    }

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
