//! Time for the server: monotonic milliseconds for the core, wall-clock
//! milliseconds for the `lastRefTime` fields clients see.
//!
//! Monotonic time comes from `tokio::time::Instant`, so tests can pause and
//! advance it.

use std::time::{SystemTime, UNIX_EPOCH};

use registry_core::Millis;
use tokio::time::Instant;

/// The server's clock, started when the server starts.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base: Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Clock {
        Clock {
            base: Instant::now(),
        }
    }

    /// Monotonic milliseconds since start, for the core.
    pub fn now(&self) -> Millis {
        Millis(self.base.elapsed().as_millis() as u64)
    }

    /// Monotonic milliseconds since start at `t`, for callers that already
    /// read the clock.
    pub fn at(&self, t: Instant) -> Millis {
        Millis(t.saturating_duration_since(self.base).as_millis() as u64)
    }

    /// The `Instant` at monotonic time `t`.
    pub fn instant_at(&self, t: Millis) -> Instant {
        self.base + std::time::Duration::from_millis(t.0)
    }

    /// Wall-clock milliseconds since the Unix epoch.
    pub fn wall_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}
