//! The one budget every connection's read buffer is charged to
//! (`--max-buffered-bytes`), and the size those buffers start at and grow by.
//!
//! Shared state, not HTTP's own: the server state holds it and the
//! configuration checks its bounds against [`READ_CHUNK`], and neither may
//! depend on a door. The HTTP door charges it (`http::conn`); `/metrics`
//! renders it.

use std::sync::atomic::{AtomicUsize, Ordering};

use registry_proto::prometheus::Exposition;

/// Initial read buffer size, and the step it grows by.
pub const READ_CHUNK: usize = 16 * 1024;

/// Bytes of connection read buffers the server may hold at once.
#[derive(Debug)]
pub struct BufferBudget {
    used: AtomicUsize,
    limit: usize,
    peak: AtomicUsize,
}

impl BufferBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> BufferBudget {
        BufferBudget {
            used: AtomicUsize::new(0),
            limit,
            peak: AtomicUsize::new(0),
        }
    }

    /// Takes `n` bytes if they fit.
    pub(crate) fn try_charge(&self, n: usize) -> bool {
        let charged = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(n).filter(|total| *total <= self.limit)
            });
        match charged {
            Ok(before) => {
                self.peak.fetch_max(before + n, Ordering::Relaxed);
                true
            }
            Err(_) => false,
        }
    }

    /// Charges `n` bytes a buffer got beyond what it asked for, whether
    /// they fit or not: they are held already, and the release on drop
    /// returns them.
    pub(crate) fn charge_over(&self, n: usize) {
        self.used.fetch_add(n, Ordering::AcqRel);
    }

    /// Returns `n` bytes.
    pub(crate) fn release(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Most bytes ever held at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Appends the read-buffer budget's families.
    pub fn render(&self, e: &mut Exposition<'_>) {
        e.gauge(
            "registry_http_buffer_bytes",
            "Bytes of connection read buffers held.",
            self.used(),
        );
        e.gauge(
            "registry_http_buffer_bytes_peak",
            "Most bytes of read buffers held at once.",
            self.peak(),
        );
        e.gauge(
            "registry_http_buffer_bytes_limit",
            "The read-buffer budget (--max-buffered-bytes).",
            self.limit,
        );
    }
}
