//! Time for the server: monotonic milliseconds for the core, wall-clock
//! milliseconds for the `lastRefTime` fields clients see.
//!
//! Monotonic time comes from `tokio::time::Instant`, so tests can pause and
//! advance it. Tests that run the real server over real sockets (where a
//! paused runtime would jump its timers while a socket is still busy) use
//! an injected clock instead: [`Clock::adjustable`] hands out a
//! [`ClockControl`] that moves the server's time forward at once, so lease
//! expiry is tested by advancing the clock, not by sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use registry_core::Millis;
use tokio::time::Instant;

/// The server's clock, started when the server starts.
#[derive(Clone, Debug)]
pub struct Clock {
    base: Instant,
    /// Milliseconds added by a test through [`ClockControl`]; `None` in
    /// production, so the hot path pays one predictable branch.
    skew: Option<Arc<AtomicU64>>,
}

/// Moves an [`Clock::adjustable`] clock forward.
#[derive(Clone, Debug)]
pub struct ClockControl(Arc<AtomicU64>);

impl ClockControl {
    /// Moves the clock `by` forward, at once, for every holder of it.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Clock {
        Clock {
            base: Instant::now(),
            skew: None,
        }
    }

    /// A clock whose zero is now and which a test can move forward.
    pub fn adjustable() -> (Clock, ClockControl) {
        let skew = Arc::new(AtomicU64::new(0));
        let clock = Clock {
            base: Instant::now(),
            skew: Some(skew.clone()),
        };
        (clock, ClockControl(skew))
    }

    fn skew_ms(&self) -> u64 {
        self.skew.as_ref().map_or(0, |s| s.load(Ordering::Relaxed))
    }

    /// Monotonic milliseconds since start, for the core.
    pub fn now(&self) -> Millis {
        Millis(self.base.elapsed().as_millis() as u64 + self.skew_ms())
    }

    /// Monotonic milliseconds since start at `t`, for callers that already
    /// read the clock.
    pub fn at(&self, t: Instant) -> Millis {
        Millis(t.saturating_duration_since(self.base).as_millis() as u64 + self.skew_ms())
    }

    /// The `Instant` at monotonic time `t` (now, when `t` was skewed past).
    pub fn instant_at(&self, t: Millis) -> Instant {
        self.base + Duration::from_millis(t.0.saturating_sub(self.skew_ms()))
    }

    /// Wall-clock milliseconds since the Unix epoch.
    pub fn wall_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_adjustable_clock_moves_forward_for_every_copy() {
        let (clock, control) = Clock::adjustable();
        let copy = clock.clone();
        assert_eq!(clock.now(), Millis(0));
        control.advance(Duration::from_secs(16));
        assert_eq!(copy.now(), Millis(16_000));
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(clock.now(), Millis(16_005));
        // An instant for a skewed time maps back onto the runtime's clock.
        assert_eq!(
            clock.instant_at(Millis(16_010)),
            clock.base + Duration::from_millis(10)
        );
    }
}
