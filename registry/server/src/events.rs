//! The change feed: how writers hand [`ChangeEvent`]s to the notifier.
//!
//! Writers (HTTP handlers, the sweeper, the health checker) only call
//! [`ChangeFeed::publish`]; the notifier takes the receiving end once. The
//! queue is bounded; when it is full the service goes into an overflow set
//! instead (one entry per service, so bounded by the store), and the
//! notifier drains that set. Publishing therefore never blocks and never
//! grows memory beyond the number of services.
//!
//! A module of its own so that the parts that write (health checks, the
//! sweeper) depend on this small type rather than on the whole server
//! state ([`crate::state::App`]).

use std::collections::HashSet;

use parking_lot::Mutex;
use registry_core::{ChangeEvent, ServiceKey};
use tokio::sync::{mpsc, Notify};

/// Events buffered between writers and the notifier before the overflow
/// set takes over.
pub const EVENT_QUEUE: usize = 65_536;

/// The writers' end and (until the notifier takes it) the reader's end.
pub struct ChangeFeed {
    sender: mpsc::Sender<ChangeEvent>,
    receiver: Mutex<Option<mpsc::Receiver<ChangeEvent>>>,
    /// Services whose events did not fit in the queue.
    overflow: Mutex<HashSet<ServiceKey>>,
    overflow_ready: Notify,
}

impl Default for ChangeFeed {
    fn default() -> Self {
        ChangeFeed::with_capacity(EVENT_QUEUE)
    }
}

impl ChangeFeed {
    /// A feed whose queue holds `capacity` events before overflowing.
    pub fn with_capacity(capacity: usize) -> ChangeFeed {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        ChangeFeed {
            sender,
            receiver: Mutex::new(Some(receiver)),
            overflow: Mutex::new(HashSet::new()),
            overflow_ready: Notify::new(),
        }
    }

    /// Hands a change to the notifier. Never blocks: when the queue is full
    /// the service goes into the overflow set instead.
    pub fn publish(&self, event: Option<ChangeEvent>) {
        let Some(event) = event else { return };
        if let Err(mpsc::error::TrySendError::Full(event)) = self.sender.try_send(event) {
            self.overflow.lock().insert(event.service);
            self.overflow_ready.notify_one();
        }
    }

    /// The event receiver; the notifier takes it once.
    pub fn take_receiver(&self) -> Option<mpsc::Receiver<ChangeEvent>> {
        self.receiver.lock().take()
    }

    /// Services that overflowed the queue since the last call.
    pub fn take_overflow(&self) -> Vec<ServiceKey> {
        self.overflow.lock().drain().collect()
    }

    /// Resolves when the overflow set has entries.
    pub async fn overflowed(&self) {
        self.overflow_ready.notified().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, revision: u64) -> ChangeEvent {
        ChangeEvent {
            service: ServiceKey::new("public", name),
            revision,
        }
    }

    #[test]
    fn a_full_queue_overflows_into_one_entry_per_service() {
        let feed = ChangeFeed::with_capacity(2);
        let mut rx = feed.take_receiver().expect("first take");
        assert!(feed.take_receiver().is_none(), "taken once");
        for r in 0..5 {
            feed.publish(Some(event("G@@a", r)));
        }
        feed.publish(Some(event("G@@b", 9)));
        feed.publish(None);
        assert_eq!(rx.try_recv().map(|e| e.revision), Ok(0));
        assert_eq!(rx.try_recv().map(|e| e.revision), Ok(1));
        assert!(rx.try_recv().is_err());
        let mut over = feed.take_overflow();
        over.sort_by(|a, b| a.grouped_name().cmp(b.grouped_name()));
        assert_eq!(
            over,
            [
                ServiceKey::new("public", "G@@a"),
                ServiceKey::new("public", "G@@b")
            ]
        );
        assert!(feed.take_overflow().is_empty());
    }
}
