//! Encoded DNS answers, kept per query and service revision, so that a
//! repeated query costs a copy and two patched bytes instead of a hickory
//! decode, a store read and an encode.
//!
//! # What a key is, and why a hit is the answer
//! The key is the query's bytes with its id and RD bit left out, and the
//! transport (which bounds the size): the responder's answer depends on
//! the query only through those bytes, and on the id and RD bit only in
//! its own id and RD bit ([`Responder::respond`]). So a hit copies the
//! cached answer and writes the new query's id and RD bit: byte for byte
//! what the responder would send, question (case included) and EDNS alike,
//! and a resolver randomising the case of names (0x20) simply misses. A
//! query over [`MAX_QUERY`] bytes is not cached.
//!
//! # When an answer may be kept: one service revision
//! Only an answer built from exactly one service's snapshot is kept
//! ([`Source`]): a service's, a cluster's or an instance's name, whatever
//! its records. The entry keeps that service and the snapshot's revision,
//! and a hit first reads the service's current revision (one lock-free
//! store read): any change (an instance, its health, the protect
//! threshold: every published change grows the revision, never reused)
//! misses, so the next query after a change sees it, as without a cache.
//! Answers that read no service (REFUSED, FORMERR, the apex) or that also
//! depend on which other services exist (NXDOMAIN for a missing service,
//! NODATA for a namespace) are built every time.
//!
//! # Round robin
//! The responder starts a service's records at one of at most
//! [`ROTATIONS`] places; the entry has a slot for each order, filled by the
//! first query that asks for it, so rotation goes on exactly as uncached.
//!
//! # Bounds
//! [`SLOTS`] entries, direct-mapped by the key's hash: a new key takes its
//! slot's place, so a slot costs one atomic load to read and nothing to
//! evict. Answers over [`MAX_ANSWER`] bytes (large TCP answers) are not
//! kept, and all kept answers together stay within the byte budget: over
//! it an insert first empties up to [`SWEEP`] other slots (a hand going
//! round, so entries nobody reads leave), and does not keep its answer
//! when still over.
//!
//! Written by whichever task answers a query that misses (UDP and every
//! TCP connection), read by all; readers never wait.

use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwapOption;
use foldhash::fast::FixedState;
use registry_proto::dns::{Rcode, Response, Transport, ROTATIONS};

/// Entries (direct-mapped slots).
pub const SLOTS: usize = 4096;
/// The largest answer kept: every UDP answer fits, large TCP ones do not.
pub const MAX_ANSWER: usize = 2048;
/// The largest query kept: a name of 255 bytes with EDNS options fits.
pub const MAX_QUERY: usize = 512;
/// Slots an insert over budget may empty.
const SWEEP: usize = 8;
/// What an entry costs besides its key and answers (the struct, the Arc,
/// the variant table), for the budget.
const ENTRY_OVERHEAD: usize = 128;

/// The one service snapshot an answer was built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Its namespace.
    pub namespace: Box<str>,
    /// Its `GROUP@@service` name.
    pub grouped: Box<str>,
    /// The snapshot's revision.
    pub revision: u64,
}

/// One order of a cached answer.
struct Answer {
    bytes: Box<[u8]>,
    rcode: Rcode,
    truncated: bool,
}

/// One query's answers at one revision.
struct Entry {
    key: Box<[u8]>,
    source: Source,
    /// One per order the answer's records can come in, filled lazily.
    answers: Box<[OnceLock<Answer>]>,
    /// Bytes this entry counts against the budget (grows as answers fill).
    size: AtomicUsize,
    used: Arc<AtomicUsize>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.used
            .fetch_sub(self.size.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// What a hit sent, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The answer's code.
    pub rcode: Rcode,
    /// Whether it has the TC bit.
    pub truncated: bool,
}

/// The cache.
pub struct AnswerCache {
    slots: Box<[ArcSwapOption<Entry>]>,
    /// Bytes held by live entries (`Relaxed`: a budget, not a lock; an
    /// insert racing another may overshoot it by one answer).
    used: Arc<AtomicUsize>,
    budget: usize,
    hand: AtomicUsize,
    hasher: FixedState,
}

impl AnswerCache {
    /// A cache of at most `budget` bytes of answers in [`SLOTS`] slots.
    pub fn new(budget: usize) -> AnswerCache {
        AnswerCache {
            slots: (0..SLOTS).map(|_| ArcSwapOption::empty()).collect(),
            used: Arc::new(AtomicUsize::new(0)),
            budget,
            hand: AtomicUsize::new(0),
            hasher: FixedState::with_seed(0x646e_735f_6361_6368),
        }
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Writes the cached answer to `query` into `out` when there is one
    /// for the order `rotate` picks and `current` (the revision of a
    /// service, `None` when it is gone) still says the entry's revision.
    pub fn get(
        &self,
        query: &[u8],
        transport: Transport,
        rotate: usize,
        current: impl FnOnce(&str, &str) -> Option<u64>,
        out: &mut Vec<u8>,
    ) -> Option<Hit> {
        let slot = self.slot(query, transport)?;
        let guard = slot.load();
        let entry = guard.as_ref()?;
        if !same_key(&entry.key, query, transport) {
            return None;
        }
        let answer = entry.answers[rotate % entry.answers.len()].get()?;
        if current(&entry.source.namespace, &entry.source.grouped) != Some(entry.source.revision) {
            return None;
        }
        out.clear();
        out.extend_from_slice(&answer.bytes);
        // The id, and the RD bit (the low bit of the third byte), are the
        // query's; the responder copied them from the first query asked.
        out[..2].copy_from_slice(&query[..2]);
        out[2] = (out[2] & !1) | (query[2] & 1);
        Some(Hit {
            rcode: answer.rcode,
            truncated: answer.truncated,
        })
    }

    /// Keeps `response`, the answer to `query` at `rotate` built from
    /// `source` alone.
    pub fn put(
        &self,
        query: &[u8],
        transport: Transport,
        rotate: usize,
        source: Source,
        response: &Response,
    ) {
        let Some(slot) = self.slot(query, transport) else {
            return;
        };
        if response.bytes.len() > MAX_ANSWER || response.bytes.len() < 12 {
            return;
        }
        let size = response.bytes.len() + 16;
        let current = slot.load_full();
        let entry = match current {
            Some(e)
                if same_key(&e.key, query, transport) && e.source.revision >= source.revision =>
            {
                // An older reader's answer never replaces a newer entry.
                if e.source.revision > source.revision {
                    return;
                }
                e
            }
            _ => {
                let key_len = query.len() + 1;
                if !self.room(key_len + ENTRY_OVERHEAD + size) {
                    return;
                }
                let fresh = Arc::new(Entry {
                    key: key(query, transport),
                    source,
                    answers: (0..response.rotations.clamp(1, ROTATIONS))
                        .map(|_| OnceLock::new())
                        .collect(),
                    size: AtomicUsize::new(key_len + ENTRY_OVERHEAD),
                    used: self.used.clone(),
                });
                self.used
                    .fetch_add(key_len + ENTRY_OVERHEAD, Ordering::Relaxed);
                slot.store(Some(fresh.clone()));
                fresh
            }
        };
        if !self.room(size) {
            return;
        }
        let answer = Answer {
            bytes: response.bytes.clone().into_boxed_slice(),
            rcode: response.rcode,
            truncated: response.truncated,
        };
        if entry.answers[rotate % entry.answers.len()]
            .set(answer)
            .is_ok()
        {
            entry.size.fetch_add(size, Ordering::Relaxed);
            self.used.fetch_add(size, Ordering::Relaxed);
        }
    }

    /// Whether `bytes` more fit the budget, after the hand empties up to
    /// [`SWEEP`] slots when they do not.
    fn room(&self, bytes: usize) -> bool {
        for _ in 0..SWEEP {
            if self.used() + bytes <= self.budget {
                return true;
            }
            let at = self.hand.fetch_add(1, Ordering::Relaxed) % SLOTS;
            self.slots[at].store(None);
        }
        self.used() + bytes <= self.budget
    }

    fn slot(&self, query: &[u8], transport: Transport) -> Option<&ArcSwapOption<Entry>> {
        if query.len() < 12 || query.len() > MAX_QUERY {
            return None;
        }
        let mut h = self.hasher.build_hasher();
        h.write_u8(transport_byte(transport));
        h.write_u8(query[2] & !1);
        h.write(&query[3..]);
        Some(&self.slots[(h.finish() as usize) % SLOTS])
    }
}

fn transport_byte(transport: Transport) -> u8 {
    match transport {
        Transport::Udp => 0,
        Transport::Tcp => 1,
    }
}

/// The transport, then the query from its third byte with RD cleared.
fn key(query: &[u8], transport: Transport) -> Box<[u8]> {
    let mut key = Vec::with_capacity(query.len() - 1);
    key.push(transport_byte(transport));
    key.push(query[2] & !1);
    key.extend_from_slice(&query[3..]);
    key.into_boxed_slice()
}

fn same_key(key: &[u8], query: &[u8], transport: Transport) -> bool {
    key.len() == query.len() - 1
        && key[0] == transport_byte(transport)
        && key[1] == query[2] & !1
        && key[2..] == query[3..]
}

#[cfg(test)]
mod tests;
