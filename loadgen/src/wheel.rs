//! A hashed timing wheel of logical clients: O(1) insert, advance in time
//! proportional to what is due.
//!
//! Hundreds of thousands of simulated instances each beat every few seconds; a task or
//! a runtime timer per instance would cost a future, a waker and a timer entry each,
//! and wake the runtime once per beat. Instead each worker keeps its clients in one
//! wheel of `slots` one-tick buckets (a tick is a millisecond in loadgen). An entry is
//! a client id linked into its bucket through a `next` index stored in a flat array
//! next to its due tick: 8 bytes per client and no allocation per insert. Due times
//! further away than one turn of the wheel stay in their bucket until their turn comes
//! round (the "rounds" of a hashed wheel).
//!
//! Removal is lazy: the owner marks a client as gone and ignores it when it fires,
//! which keeps entries free of back-links.

/// Marks the end of a bucket's list.
const NIL: u32 = u32::MAX;

/// A tick count since the start of the run (milliseconds in loadgen: 49 days fit).
pub type Tick = u32;

#[derive(Debug, Clone, Copy)]
struct Link {
    next: u32,
    due: Tick,
}

/// A hashed timing wheel of `u32` client ids.
#[derive(Debug, Clone)]
pub struct Wheel {
    heads: Box<[u32]>,
    mask: u32,
    links: Vec<Link>,
    /// The last tick processed by [`Wheel::advance`].
    now: Tick,
    len: usize,
}

impl Wheel {
    /// A wheel with `slots` buckets (rounded up to a power of two), whose clock starts
    /// at `now` (entries due at or before `now` fire on the next advance).
    pub fn new(slots: usize, now: Tick) -> Wheel {
        let slots = slots.clamp(2, 1 << 24).next_power_of_two();
        Wheel {
            heads: vec![NIL; slots].into_boxed_slice(),
            mask: (slots - 1) as u32,
            links: Vec::new(),
            now,
            len: 0,
        }
    }

    /// The last tick advanced to.
    pub fn now(&self) -> Tick {
        self.now
    }

    /// Entries in the wheel.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the wheel is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reserves link space for ids below `n`, so inserts do not reallocate.
    pub fn reserve_ids(&mut self, n: usize) {
        if n > self.links.len() {
            self.links.resize(n, Link { next: NIL, due: 0 });
        }
    }

    /// Bytes held per id slot (for footprint accounting).
    pub const BYTES_PER_ID: usize = std::mem::size_of::<Link>();

    /// Schedules `id` at `due`. A due tick already passed fires on the next advance.
    /// An id must not be inserted again before it has fired.
    pub fn insert(&mut self, id: u32, due: Tick) {
        debug_assert!(id != NIL);
        let due = due.max(self.now.wrapping_add(1));
        if id as usize >= self.links.len() {
            let n = (id as usize + 1).max(self.links.len() * 2).max(64);
            self.reserve_ids(n);
        }
        let slot = (due & self.mask) as usize;
        self.links[id as usize] = Link {
            next: self.heads[slot],
            due,
        };
        self.heads[slot] = id;
        self.len += 1;
    }

    /// Moves the clock to `to` and appends every entry due at or before it to `fired`
    /// as `(id, due)`, in bucket order. Fired entries leave the wheel; re-insert them
    /// to fire again.
    pub fn advance(&mut self, to: Tick, fired: &mut Vec<(u32, Tick)>) {
        if to <= self.now {
            return;
        }
        // Beyond one full turn every bucket is visited once.
        let span = (to - self.now).min(self.mask + 1);
        for i in 1..=span {
            let slot = (self.now.wrapping_add(i) & self.mask) as usize;
            let mut id = std::mem::replace(&mut self.heads[slot], NIL);
            while id != NIL {
                let link = self.links[id as usize];
                if link.due <= to {
                    fired.push((id, link.due));
                    self.len -= 1;
                } else {
                    // A later round: back into the bucket.
                    self.links[id as usize].next = self.heads[slot];
                    self.heads[slot] = id;
                }
                id = link.next;
            }
        }
        self.now = to;
    }

    /// The earliest due tick, scanning forward from now up to one turn (for sleeping
    /// until work is due). `None` when empty.
    pub fn next_due(&self) -> Option<Tick> {
        if self.is_empty() {
            return None;
        }
        let slots = self.mask + 1;
        let mut best: Option<Tick> = None;
        for i in 1..=slots {
            let slot = (self.now.wrapping_add(i) & self.mask) as usize;
            let mut id = self.heads[slot];
            while id != NIL {
                let due = self.links[id as usize].due;
                best = Some(best.map_or(due, |b| b.min(due)));
                id = self.links[id as usize].next;
            }
            if let Some(b) = best {
                if b <= self.now.wrapping_add(i) {
                    return best;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(w: &mut Wheel, to: Tick) -> Vec<(u32, Tick)> {
        let mut out = Vec::new();
        w.advance(to, &mut out);
        out.sort_unstable();
        out
    }

    #[test]
    fn fires_at_the_due_tick_and_not_before() {
        let mut w = Wheel::new(16, 0);
        w.insert(1, 5);
        w.insert(2, 5);
        w.insert(3, 7);
        assert_eq!(fire(&mut w, 4), vec![]);
        assert_eq!(fire(&mut w, 5), vec![(1, 5), (2, 5)]);
        assert_eq!(w.len(), 1);
        assert_eq!(fire(&mut w, 100), vec![(3, 7)]);
        assert!(w.is_empty());
    }

    #[test]
    fn far_entries_wait_for_their_round() {
        let mut w = Wheel::new(8, 0);
        w.insert(1, 3); // same bucket as 11 and 19
        w.insert(2, 11);
        w.insert(3, 19);
        assert_eq!(fire(&mut w, 3), vec![(1, 3)]);
        assert_eq!(fire(&mut w, 10), vec![]);
        assert_eq!(fire(&mut w, 11), vec![(2, 11)]);
        // A jump of more than one turn still finds everything due.
        w.insert(4, 12);
        w.insert(5, 1000);
        assert_eq!(fire(&mut w, 500), vec![(3, 19), (4, 12)]);
        assert_eq!(w.next_due(), Some(1000));
        assert_eq!(fire(&mut w, 1000), vec![(5, 1000)]);
        assert_eq!(w.next_due(), None);
    }

    #[test]
    fn past_due_fires_on_next_advance_and_reinsert_works() {
        let mut w = Wheel::new(64, 100);
        w.insert(7, 50);
        assert_eq!(w.next_due(), Some(101));
        assert_eq!(fire(&mut w, 101), vec![(7, 101)]);
        // A periodic client: re-insert what fired, as the driver does for beats.
        let mut beats = 0;
        w.insert(7, 106);
        for t in 102..=200 {
            for (id, due) in fire(&mut w, t) {
                assert_eq!(due, t, "fires exactly on time when advanced every tick");
                beats += 1;
                w.insert(id, due + 5);
            }
        }
        assert_eq!(beats, 19); // 106, 111, ..., 196
    }

    #[test]
    fn many_clients_each_fire_once_per_period() {
        // 10k clients with a 5000-tick period spread over the period, advanced in
        // uneven steps: every client fires exactly twice in two periods, never early.
        let period = 5000;
        let n = 10_000u32;
        let mut w = Wheel::new(8192, 0);
        for id in 0..n {
            w.insert(id, 1 + (id * 7919) % period);
        }
        let mut count = vec![0u32; n as usize];
        let mut t = 0;
        let mut step = 1;
        while t < 2 * period {
            t = (t + step).min(2 * period);
            step = step % 37 + 1;
            let mut out = Vec::new();
            w.advance(t, &mut out);
            for (id, due) in out {
                assert!(due <= t);
                count[id as usize] += 1;
                w.insert(id, due + period);
            }
        }
        assert!(count.iter().all(|&c| c == 2), "each fired twice");
        assert_eq!(w.len(), n as usize);
    }

    #[test]
    fn compact() {
        assert_eq!(Wheel::BYTES_PER_ID, 8);
    }
}
