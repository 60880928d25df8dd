//! A batch's responses as they go out: the bytes written for them, with
//! large cached bodies shared instead of copied in.
//!
//! A cached instance list (4.3 KB for 10 instances) is one `Arc` shared by
//! every reader of its service revision (see `list_cache`). Copying it into
//! the batch's write buffer was ~12 % of a pipelined list's CPU (libc
//! `memmove`), and a 16-deep batch of them (~70 KB) grew that buffer from
//! 16 to 128 KiB every batch, since it is shrunk after each. So a body of
//! at least [`SHARE_FROM`] bytes is held here by reference, at the offset
//! of the bytes it follows, and the batch goes out in one `writev` of the
//! pieces of the bytes with the bodies between them: the kernel's copy into
//! the socket is the only one. Smaller bodies are copied: for them a copy
//! costs less than one more slice for the kernel to walk.
//!
//! Written by one connection task only (or the bench's connection).

use std::io::IoSlice;
use std::sync::Arc;

use crate::list_cache::CachedList;

/// Bodies at least this large are shared, not copied.
pub(crate) const SHARE_FROM: usize = 1024;
/// The most shared bodies one batch holds, so its slices fit a fixed array
/// ([`SLICES`]); a batch with as many is written before the rest is answered.
pub(crate) const MAX_SHARED: usize = 64;
/// Slices of a batch at most: each shared body, and a piece of the bytes
/// before, between and after them.
pub(crate) const SLICES: usize = 2 * MAX_SHARED + 1;

/// The responses of one batch, in order.
#[derive(Default)]
pub(crate) struct Responses {
    /// Heads and copied bodies.
    bytes: Vec<u8>,
    /// Shared bodies, each with the length of `bytes` when it was added:
    /// it goes out after `bytes[..offset]`. Offsets never decrease.
    shared: Vec<(usize, Arc<CachedList>)>,
    /// Bytes of the shared bodies together.
    shared_len: usize,
}

impl Responses {
    /// The bytes, to append a response (or part of one) to. Only append
    /// to them, or change what follows the last shared body: a shared
    /// body's place is an offset into them.
    pub(crate) fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Appends `body` by reference: it goes out after the bytes so far.
    pub(crate) fn share(&mut self, body: Arc<CachedList>) {
        self.shared_len += body.body.len();
        self.shared.push((self.bytes.len(), body));
    }

    /// Where a response still to come belongs (see [`Responses::insert`]).
    pub(crate) fn mark(&self) -> usize {
        self.bytes.len()
    }

    /// Inserts `piece` at `at`, a [`Responses::mark`] (moved on by the
    /// length of what was inserted at or before it since). A shared body
    /// added at the same mark was added before the response that is now
    /// inserted there (a shared body always follows a head), so it stays
    /// in front of it; those after it move on.
    pub(crate) fn insert(&mut self, at: usize, piece: &[u8]) {
        self.bytes.splice(at..at, piece.iter().copied());
        for (offset, _) in self.shared.iter_mut().filter(|(o, _)| *o > at) {
            *offset += piece.len();
        }
    }

    /// Bytes of the responses together.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len() + self.shared_len
    }

    /// Whether there is nothing to write.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no more bodies may be shared before the batch is written.
    pub(crate) fn is_full(&self) -> bool {
        self.shared.len() >= MAX_SHARED
    }

    /// The bytes alone when no body is shared: one plain `write`.
    pub(crate) fn contiguous(&self) -> Option<&[u8]> {
        self.shared.is_empty().then_some(&self.bytes[..])
    }

    /// Fills `out` with the responses' slices in order; how many it used.
    /// Empty pieces are left out.
    pub(crate) fn slices<'s>(&'s self, out: &mut [IoSlice<'s>; SLICES]) -> usize {
        let mut n = 0;
        let mut push = |piece: &'s [u8]| {
            if !piece.is_empty() {
                out[n] = IoSlice::new(piece);
                n += 1;
            }
        };
        let mut from = 0;
        for (offset, body) in &self.shared {
            push(&self.bytes[from..*offset]);
            push(&body.body);
            from = *offset;
        }
        push(&self.bytes[from..]);
        n
    }

    /// The responses as one buffer (for tests and the bench's checks; the
    /// connection never copies them).
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut slices = [IoSlice::new(&[]); SLICES];
        let n = self.slices(&mut slices);
        slices[..n].iter().flat_map(|s| s.iter().copied()).collect()
    }

    /// Empties it; bytes grown past `above` are shrunk back to `to`, so a
    /// connection that once answered something large does not keep it.
    pub(crate) fn clear(&mut self, above: usize, to: usize) {
        self.bytes.clear();
        self.shared.clear();
        self.shared_len = 0;
        if self.bytes.capacity() > above {
            self.bytes.shrink_to(to);
        }
    }

    /// Capacity held by the bytes (what an idle connection keeps).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.bytes.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(text: &[u8]) -> Arc<CachedList> {
        Arc::new(CachedList::new(1, text.to_vec()))
    }

    #[test]
    fn shared_bodies_go_out_between_the_bytes_in_order() {
        let mut r = Responses::default();
        r.bytes().extend_from_slice(b"head1|");
        r.share(cached(b"BODY1"));
        r.bytes().extend_from_slice(b"head2|");
        r.share(cached(b"BODY2"));
        r.bytes().extend_from_slice(b"tail");
        assert_eq!(r.to_vec(), b"head1|BODY1head2|BODY2tail");
        assert_eq!(r.len(), r.to_vec().len());
        assert!(r.contiguous().is_none());
        let mut s = [IoSlice::new(&[]); SLICES];
        assert_eq!(r.slices(&mut s), 5);
    }

    #[test]
    fn a_late_response_goes_after_the_shared_body_before_it_and_before_the_next() {
        let mut r = Responses::default();
        r.bytes().extend_from_slice(b"h1|");
        r.share(cached(b"B1"));
        let late = r.mark();
        r.bytes().extend_from_slice(b"h3|");
        r.share(cached(b"B3"));
        r.insert(late, b"LATE|");
        assert_eq!(r.to_vec(), b"h1|B1LATE|h3|B3");
        // Two late responses at one mark, inserted in order.
        let mut r = Responses::default();
        let first = r.mark();
        let second = r.mark();
        r.bytes().extend_from_slice(b"h|");
        r.share(cached(b"B"));
        r.insert(first, b"one|");
        r.insert(second + 4, b"two|");
        assert_eq!(r.to_vec(), b"one|two|h|B");
    }

    #[test]
    fn clearing_empties_and_caps_what_is_kept() {
        let mut r = Responses::default();
        r.bytes().resize(100_000, b'x');
        r.share(cached(b"B"));
        r.clear(64 * 1024, 16 * 1024);
        assert!(r.is_empty());
        assert_eq!(r.contiguous(), Some(&b""[..]));
        assert!(r.capacity() <= 16 * 1024);
        // At or under the threshold the capacity is kept for the next batch.
        r.bytes().resize(30_000, b'x');
        let kept = r.capacity();
        r.clear(64 * 1024, 16 * 1024);
        assert_eq!(r.capacity(), kept);
    }

    #[test]
    fn it_is_full_at_the_most_shared_bodies() {
        let mut r = Responses::default();
        let body = cached(b"B");
        for _ in 0..MAX_SHARED {
            assert!(!r.is_full());
            r.bytes().extend_from_slice(b"h");
            r.share(body.clone());
        }
        assert!(r.is_full());
        let mut s = [IoSlice::new(&[]); SLICES];
        assert_eq!(r.slices(&mut s), 2 * MAX_SHARED);
    }
}
