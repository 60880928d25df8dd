//! Reassembly of replicated states sent in parts: a service state or a 2.x
//! client set larger than one peer message travels as several messages of
//! one revision, and is applied only once every part is here, so a reader
//! never sees half of it (half a client set would remove the other half).
//!
//! Bounded: at most [`MAX_PENDING`] states wait at once, each for at most
//! [`PENDING_TTL_MS`]; a newer revision of the same state replaces an
//! incomplete older one. What is dropped is repaired by the next checksum
//! or verify round.

use std::collections::HashMap;

/// States waiting for parts at once.
pub(crate) const MAX_PENDING: usize = 1024;
/// How long an incomplete state waits for its other parts, in ms.
pub(crate) const PENDING_TTL_MS: u64 = 30_000;

struct Pending<T> {
    revision: u64,
    started_ms: u64,
    got: u32,
    parts: Vec<Option<T>>,
}

/// Incomplete states, keyed by what they are the state of.
pub(crate) struct Parts<T> {
    pending: HashMap<String, Pending<T>>,
}

impl<T> Default for Parts<T> {
    fn default() -> Self {
        Parts {
            pending: HashMap::new(),
        }
    }
}

/// What [`Parts::offer`] made of a part.
pub(crate) enum Offered<T> {
    /// Every part of the revision, in order.
    Complete(Vec<T>),
    /// Kept; more parts are due.
    Waiting,
    /// Older than a revision already waiting, or no room: dropped.
    Dropped,
}

impl<T> Parts<T> {
    /// Offers part `part` of `parts` of `key`'s state at `revision`; the
    /// caller has checked `part < parts`.
    pub(crate) fn offer(
        &mut self,
        key: String,
        revision: u64,
        part: u32,
        parts: u32,
        item: T,
        now_ms: u64,
    ) -> Offered<T> {
        if parts <= 1 {
            return Offered::Complete(vec![item]);
        }
        self.pending
            .retain(|_, p| now_ms.saturating_sub(p.started_ms) < PENDING_TTL_MS);
        if !self.pending.contains_key(&key) && self.pending.len() >= MAX_PENDING {
            return Offered::Dropped;
        }
        let entry = self.pending.entry(key.clone()).or_insert_with(|| Pending {
            revision,
            started_ms: now_ms,
            got: 0,
            parts: Vec::new(),
        });
        if entry.revision > revision {
            return Offered::Dropped;
        }
        if entry.revision < revision || entry.parts.len() != parts as usize {
            *entry = Pending {
                revision,
                started_ms: now_ms,
                got: 0,
                parts: (0..parts).map(|_| None).collect(),
            };
        }
        let slot = &mut entry.parts[part as usize];
        if slot.is_none() {
            entry.got += 1;
        }
        *slot = Some(item);
        if entry.got < parts {
            return Offered::Waiting;
        }
        let done = self
            .pending
            .remove(&key)
            .map(|p| p.parts)
            .unwrap_or_default();
        Offered::Complete(done.into_iter().flatten().collect())
    }

    /// States waiting now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_complete_once_every_part_arrived_in_any_order() {
        let mut p = Parts::default();
        assert!(matches!(
            p.offer("s".into(), 1, 2, 3, "c", 0),
            Offered::Waiting
        ));
        assert!(matches!(
            p.offer("s".into(), 1, 0, 3, "a", 0),
            Offered::Waiting
        ));
        // A repeated part does not count twice.
        assert!(matches!(
            p.offer("s".into(), 1, 0, 3, "a", 0),
            Offered::Waiting
        ));
        match p.offer("s".into(), 1, 1, 3, "b", 0) {
            Offered::Complete(v) => assert_eq!(v, vec!["a", "b", "c"]),
            _ => panic!("not complete"),
        }
        assert_eq!(p.len(), 0);
    }

    #[test]
    fn a_newer_revision_replaces_an_incomplete_one_and_old_parts_are_dropped() {
        let mut p = Parts::default();
        assert!(matches!(
            p.offer("s".into(), 1, 0, 2, 1, 0),
            Offered::Waiting
        ));
        assert!(matches!(
            p.offer("s".into(), 2, 0, 2, 20, 0),
            Offered::Waiting
        ));
        assert!(matches!(
            p.offer("s".into(), 1, 1, 2, 11, 0),
            Offered::Dropped
        ));
        assert!(matches!(
            p.offer("s".into(), 2, 1, 2, 21, 0),
            Offered::Complete(v) if v == vec![20, 21]
        ));
        // An incomplete state expires.
        assert!(matches!(
            p.offer("t".into(), 1, 0, 2, 1, 0),
            Offered::Waiting
        ));
        assert!(matches!(
            p.offer("u".into(), 1, 0, 2, 1, PENDING_TTL_MS),
            Offered::Waiting
        ));
        assert_eq!(p.len(), 1);
    }
}
