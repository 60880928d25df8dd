//! Heartbeat leases: one atomic deadline per ephemeral instance, in a
//! per-shard slab that a beat updates in place and the sweeper scans.
//!
//! A beat must not rebuild a snapshot, so the time of an instance's next
//! expiry check lives outside the immutable [`Instance`](crate::Instance):
//! the instance holds a slot number, and the slot holds the deadline. Slots
//! are contiguous `AtomicU64`s, so the sweeper's scan over 1.1M live
//! instances is a linear pass over 9 MB that touches no pointer.
//!
//! The slab grows in buckets of doubling size (64, 128, 256, ... slots) that
//! never move, so beats index it without a lock while the shard's writer
//! allocates new slots. Beats write deadlines (`Relaxed`: a deadline is a
//! single word read by the sweeper, which re-reads it under the writer lock
//! before acting on it); only the writer allocates and frees slots.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::model::{LeaseTimeouts, Millis};

/// Deadline value of a free slot: never due.
pub(crate) const FREE: u64 = u64::MAX;

/// log2 of the first bucket's size.
const BASE_SHIFT: u32 = 6;
/// Number of buckets: 64 * (2^26 - 1) slots, far beyond any shard.
const BUCKETS: usize = 26;

/// A lease slot number. `LeaseSlot::NONE` marks persistent instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseSlot(pub(crate) u32);

impl LeaseSlot {
    /// No lease: persistent instances are not renewed by beats.
    pub const NONE: LeaseSlot = LeaseSlot(u32::MAX);

    /// True for ephemeral instances that hold a slot.
    pub fn is_some(self) -> bool {
        self != Self::NONE
    }
}

/// The slab of deadlines owned by one shard.
pub(crate) struct LeaseTable {
    buckets: [OnceLock<Box<[AtomicU64]>>; BUCKETS],
    /// Slots ever handed out; the sweeper scans `0..high_water`.
    high_water: AtomicU32,
}

fn locate(slot: u32) -> (usize, usize) {
    let i = u64::from(slot) + (1 << BASE_SHIFT);
    let bucket = 63 - i.leading_zeros() - BASE_SHIFT;
    let offset = i - (1u64 << (bucket + BASE_SHIFT));
    (bucket as usize, offset as usize)
}

impl LeaseTable {
    pub(crate) fn new() -> Self {
        LeaseTable {
            buckets: std::array::from_fn(|_| OnceLock::new()),
            high_water: AtomicU32::new(0),
        }
    }

    fn cell(&self, slot: LeaseSlot) -> Option<&AtomicU64> {
        let (b, off) = locate(slot.0);
        self.buckets.get(b)?.get()?.get(off)
    }

    /// Sets the slot's deadline. Called by beats without any lock.
    #[inline]
    pub(crate) fn renew(&self, slot: LeaseSlot, deadline: u64) {
        if let Some(c) = self.cell(slot) {
            c.store(deadline, Ordering::Relaxed);
        }
    }

    /// Reads the slot's deadline.
    pub(crate) fn deadline(&self, slot: LeaseSlot) -> u64 {
        self.cell(slot).map_or(FREE, |c| c.load(Ordering::Relaxed))
    }

    /// Moves the deadline from `current` to `next` unless a beat changed it
    /// meanwhile. Used by the sweeper so that a racing beat always wins.
    pub(crate) fn postpone(&self, slot: LeaseSlot, current: u64, next: u64) -> bool {
        self.cell(slot).is_some_and(|c| {
            c.compare_exchange(current, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Makes `slot` usable, allocating its bucket if needed. Writer only.
    pub(crate) fn activate(&self, slot: LeaseSlot, deadline: u64) {
        let (b, _) = locate(slot.0);
        self.buckets[b].get_or_init(|| {
            let len = 1usize << (b as u32 + BASE_SHIFT);
            (0..len).map(|_| AtomicU64::new(FREE)).collect()
        });
        self.renew(slot, deadline);
        self.high_water.fetch_max(slot.0 + 1, Ordering::Release);
    }

    /// Marks `slot` free. Writer only.
    pub(crate) fn release(&self, slot: LeaseSlot) {
        if let Some(c) = self.cell(slot) {
            c.store(FREE, Ordering::Relaxed);
        }
    }

    /// Appends every slot whose deadline is at or before `now` to `due`.
    /// Cost: one sequential pass over the slots in use.
    pub(crate) fn scan_due(&self, now: Millis, due: &mut Vec<LeaseSlot>) {
        let mut remaining = self.high_water.load(Ordering::Acquire) as usize;
        let mut base = 0u32;
        for bucket in &self.buckets {
            if remaining == 0 {
                break;
            }
            let Some(cells) = bucket.get() else { break };
            let n = cells.len().min(remaining);
            for (i, c) in cells[..n].iter().enumerate() {
                if due_at(c.load(Ordering::Relaxed)) <= now {
                    due.push(LeaseSlot(base + i as u32));
                }
            }
            remaining -= n;
            base += cells.len() as u32;
        }
    }

    /// Bytes held by the slab.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.buckets
            .iter()
            .filter_map(|b| b.get())
            .map(|b| b.len() * std::mem::size_of::<AtomicU64>())
            .sum()
    }
}

/// The deadline a beat at `now` sets: the first moment the sweeper must look.
///
/// A stored deadline is `ms << 1 | kind`, so one word per instance says both
/// when to look and what the time means: kind 0 is "first check,
/// `first_check_ms` after the last beat"; kind 1 is "postponed by the
/// sweeper to the delete time".
#[inline]
pub(crate) fn beat_deadline(now: Millis, t: &LeaseTimeouts) -> u64 {
    now.plus(t.first_check_ms()).0 << 1
}

/// The deadline the sweeper sets after marking an instance unhealthy: its
/// delete time.
pub(crate) fn postponed_deadline(last_beat: Millis, t: &LeaseTimeouts) -> u64 {
    (last_beat.plus(u64::from(t.delete_timeout_ms)).0 << 1) | 1
}

/// When a stored deadline is due.
#[inline]
pub(crate) fn due_at(deadline: u64) -> Millis {
    Millis(deadline >> 1)
}

/// The time of the last beat encoded in a deadline.
pub(crate) fn last_beat(deadline: u64, t: &LeaseTimeouts) -> Millis {
    let back = if deadline & 1 == 0 {
        t.first_check_ms()
    } else {
        u64::from(t.delete_timeout_ms)
    };
    Millis((deadline >> 1).saturating_sub(back))
}

/// Hands out and recycles slot numbers. Owned by the shard's writer.
#[derive(Default)]
pub(crate) struct SlotAllocator {
    free: Vec<u32>,
    next: u32,
}

impl SlotAllocator {
    pub(crate) fn allocate(&mut self) -> LeaseSlot {
        if let Some(s) = self.free.pop() {
            return LeaseSlot(s);
        }
        let s = self.next;
        self.next += 1;
        LeaseSlot(s)
    }

    pub(crate) fn free(&mut self, slot: LeaseSlot) {
        self.free.push(slot.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_covers_buckets_contiguously() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(63), (0, 63));
        assert_eq!(locate(64), (1, 0));
        assert_eq!(locate(191), (1, 127));
        assert_eq!(locate(192), (2, 0));
    }

    #[test]
    fn scan_finds_only_due_slots() {
        let t = LeaseTable::new();
        let mut alloc = SlotAllocator::default();
        let slots: Vec<_> = (0..300).map(|_| alloc.allocate()).collect();
        for (i, s) in slots.iter().enumerate() {
            t.activate(*s, (1000 + i as u64) << 1);
        }
        t.release(slots[5]);
        let mut due = Vec::new();
        t.scan_due(Millis(1010), &mut due);
        let expect: Vec<_> = (0..=10).filter(|i| *i != 5).map(LeaseSlot).collect();
        assert_eq!(due, expect);
    }

    #[test]
    fn postpone_loses_to_a_racing_renewal() {
        let t = LeaseTable::new();
        let s = LeaseSlot(0);
        t.activate(s, 10);
        t.renew(s, 50);
        assert!(!t.postpone(s, 10, 99));
        assert_eq!(t.deadline(s), 50);
        assert!(t.postpone(s, 50, 99));
        assert_eq!(t.deadline(s), 99);
    }

    #[test]
    fn deadlines_round_trip_the_last_beat() {
        let t = LeaseTimeouts::NACOS;
        let d = beat_deadline(Millis(1000), &t);
        assert_eq!(due_at(d), Millis(16_000));
        assert_eq!(last_beat(d, &t), Millis(1000));
        let p = postponed_deadline(Millis(1000), &t);
        assert_eq!(due_at(p), Millis(31_000));
        assert_eq!(last_beat(p, &t), Millis(1000));
    }

    #[test]
    fn freed_slots_are_reused() {
        let mut a = SlotAllocator::default();
        let s0 = a.allocate();
        let _s1 = a.allocate();
        a.free(s0);
        assert_eq!(a.allocate(), s0);
    }
}
