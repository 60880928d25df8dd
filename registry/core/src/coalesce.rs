//! Merging change events per service within a window, last revision wins.
//!
//! The notifier feeds every [`ChangeEvent`] to a [`Coalescer`]. The first
//! event for a service opens a window; further events for it inside the
//! window only raise the revision. When the window closes the service is
//! due, once, carrying the latest revision. A burst of 100 changes to one
//! service therefore yields one push of its final state. (Nacos 1.x drops
//! events while a push is pending and pushes 1 s later; we keep the idea
//! with a configurable, much shorter window.)
//!
//! Owned by the single notifier task; not shared.

use std::collections::{HashMap, VecDeque};

use crate::event::ChangeEvent;
use crate::model::{Millis, ServiceKey};

/// Per-service event merging with a fixed window.
pub struct Coalescer {
    window_ms: u64,
    /// Latest revision per service with an open window.
    pending: HashMap<ServiceKey, u64, foldhash::fast::FixedState>,
    /// Services in the order their windows close (windows have equal
    /// length, so opening order is closing order).
    queue: VecDeque<(Millis, ServiceKey)>,
}

/// A service whose window closed: push its state at `revision` or later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    /// The service.
    pub service: ServiceKey,
    /// The highest revision seen in the window.
    pub revision: u64,
    /// When its window opened: the first change the push will carry.
    pub first_change: Millis,
}

impl Coalescer {
    /// A coalescer with a window of `window_ms` (0 = due at once).
    pub fn new(window_ms: u64) -> Self {
        Coalescer {
            window_ms,
            pending: HashMap::default(),
            queue: VecDeque::new(),
        }
    }

    /// Records an event seen at `now`.
    pub fn offer(&mut self, event: ChangeEvent, now: Millis) {
        match self.pending.get_mut(&event.service) {
            Some(rev) => *rev = (*rev).max(event.revision),
            None => {
                self.queue.push_back((now, event.service.clone()));
                self.pending.insert(event.service, event.revision);
            }
        }
    }

    /// When the earliest open window closes.
    pub fn next_due(&self) -> Option<Millis> {
        self.queue.front().map(|(t, _)| t.plus(self.window_ms))
    }

    /// Moves every service whose window has closed by `now` into `out`.
    pub fn drain_due(&mut self, now: Millis, out: &mut Vec<Due>) {
        while let Some((opened, _)) = self.queue.front() {
            if opened.plus(self.window_ms) > now {
                break;
            }
            let (opened, service) = self.queue.pop_front().expect("front exists");
            if let Some(revision) = self.pending.remove(&service) {
                out.push(Due {
                    service,
                    revision,
                    first_change: opened,
                });
            }
        }
    }

    /// Services with an open window.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when no window is open.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, revision: u64) -> ChangeEvent {
        ChangeEvent {
            service: ServiceKey::new("public", name),
            revision,
        }
    }

    #[test]
    fn a_burst_becomes_one_due_with_the_last_revision() {
        let mut c = Coalescer::new(50);
        for r in 1..=100 {
            c.offer(ev("G@@a", r), Millis(r));
        }
        assert_eq!(c.next_due(), Some(Millis(51)));
        let mut out = Vec::new();
        c.drain_due(Millis(50), &mut out);
        assert!(out.is_empty());
        c.drain_due(Millis(51), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].revision, 100);
        assert_eq!(out[0].first_change, Millis(1));
        assert!(c.is_empty());
    }

    #[test]
    fn services_are_due_in_window_order_and_independent() {
        let mut c = Coalescer::new(10);
        c.offer(ev("G@@a", 1), Millis(0));
        c.offer(ev("G@@b", 5), Millis(3));
        c.offer(ev("G@@a", 2), Millis(4));
        let mut out = Vec::new();
        c.drain_due(Millis(10), &mut out);
        assert_eq!(
            out.iter()
                .map(|d| d.service.grouped_name())
                .collect::<Vec<_>>(),
            ["G@@a"]
        );
        c.drain_due(Millis(13), &mut out);
        assert_eq!(out[1].service.grouped_name(), "G@@b");
        // A change after the window closed opens a new one.
        c.offer(ev("G@@a", 3), Millis(14));
        assert_eq!(c.next_due(), Some(Millis(24)));
    }

    #[test]
    fn revisions_never_go_down_within_a_window() {
        let mut c = Coalescer::new(5);
        c.offer(ev("G@@a", 9), Millis(0));
        c.offer(ev("G@@a", 3), Millis(1));
        let mut out = Vec::new();
        c.drain_due(Millis(5), &mut out);
        assert_eq!(out[0].revision, 9);
    }
}
