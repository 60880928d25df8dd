//! A service's sorted instance list, shared in chunks between revisions so a
//! write costs the same in a service of ten instances or of ten thousand.
//!
//! A snapshot is immutable, so a write publishes a new list. Copying the whole
//! list made a register O(n) in the service's size (O(n²) to fill a service).
//! An [`InstanceList`] of more than [`CHUNK_MAX`] instances is instead a spine
//! of `Arc`-shared chunks, each sorted and at most [`CHUNK_MAX`] long: a write
//! copies the one chunk it changes and the spine (one pointer per chunk), and
//! shares every other chunk with the previous revision. A service of 10,000
//! instances has about 200 chunks of about 50: a write touches ~250 values
//! instead of 10,000. Small lists stay one flat slice, so the common case (a
//! handful of instances) reads exactly as before: beats and queries pay no
//! extra indirection.
//!
//! The list also keeps its digest (the checksum readers and cluster peers
//! compare) up to date per write: the wrapping sum of a per-instance hash.
//! A sum needs no order and no rescan, and a list is sorted by a unique key,
//! so two lists with the same visible instances have the same digest.
//!
//! Readers see only `&InstanceList` inside a published snapshot: lock-free as
//! before. Writers build new lists with the `with_*` methods under the
//! shard's writer lock.

use std::net::IpAddr;
use std::ops::Index;
use std::sync::Arc;

use crate::model::Instance;

/// Longest chunk: a chunk that grows past it splits into two halves.
/// ~sqrt(10,000 / 4): the spine pointers a write copies cost about a quarter
/// of an instance each, so this balances the two at 10,000 instances.
pub(crate) const CHUNK_MAX: usize = 64;
/// How full a bulk-built list's chunks are: room for a few inserts each
/// before the first split.
const CHUNK_FILL: usize = 48;
/// A chunk shrunk below this merges with a neighbour, so removals cannot
/// leave a spine of tiny chunks.
const CHUNK_MIN: usize = CHUNK_MAX / 4;

/// The key a list is sorted by: cluster, IP, port, persistent first.
pub(crate) type SortKey<'a> = (&'a str, IpAddr, u16, bool);

/// A sorted, immutable list of instances with its digest. Cloning copies at
/// most [`CHUNK_MAX`] instances or the spine.
#[derive(Clone, Debug)]
pub struct InstanceList {
    repr: Repr,
    digest: u64,
}

#[derive(Clone, Debug)]
enum Repr {
    /// At most [`CHUNK_MAX`] instances, in one slice.
    Flat(Box<[Instance]>),
    /// More than [`CHUNK_MAX`]: non-empty sorted chunks in order.
    Chunked { chunks: Box<[Chunk]>, len: usize },
}

#[derive(Clone, Debug)]
struct Chunk {
    /// Index one past this chunk's last instance in the whole list.
    end: usize,
    items: Arc<[Instance]>,
}

impl Default for InstanceList {
    fn default() -> Self {
        InstanceList::from_sorted(Vec::new())
    }
}

impl InstanceList {
    /// A list of `instances`, which must be sorted by [`Instance::sort_key`]
    /// without duplicates (the writer's invariant, checked in debug builds).
    pub(crate) fn from_sorted(instances: Vec<Instance>) -> Self {
        debug_assert!(instances
            .windows(2)
            .all(|w| w[0].sort_key() < w[1].sort_key()));
        let digest = instances
            .iter()
            .fold(0u64, |d, i| d.wrapping_add(instance_hash(i)));
        InstanceList {
            repr: Repr::build(instances),
            digest,
        }
    }

    /// Number of instances.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Flat(items) => items.len(),
            Repr::Chunked { len, .. } => *len,
        }
    }

    /// True when the list holds no instance.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The instance at `i` in sort order.
    pub fn get(&self, i: usize) -> Option<&Instance> {
        match &self.repr {
            Repr::Flat(items) => items.get(i),
            Repr::Chunked { chunks, len } => {
                if i >= *len {
                    return None;
                }
                let (c, offset) = locate(chunks, i);
                chunks[c].items.get(offset)
            }
        }
    }

    /// The first instance in sort order.
    pub fn first(&self) -> Option<&Instance> {
        self.get(0)
    }

    /// Every instance in sort order.
    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Flat(items) => Iter {
                chunks: [].iter(),
                current: items.iter(),
                remaining: items.len(),
            },
            Repr::Chunked { chunks, len } => Iter {
                chunks: chunks.iter(),
                current: [].iter(),
                remaining: *len,
            },
        }
    }

    /// A copy of every instance, in sort order.
    pub fn to_vec(&self) -> Vec<Instance> {
        self.iter().cloned().collect()
    }

    /// A 64-bit digest of every field a reader can see; equal lists have
    /// equal digests, and it changes whenever a visible field does.
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }

    /// The instance whose sort key is `probe`, in one search. A beat looks
    /// its instance up this way: `position` followed by indexing would walk
    /// from the global index back to its chunk a second time.
    pub(crate) fn find(&self, probe: SortKey<'_>) -> Option<&Instance> {
        let items: &[Instance] = match &self.repr {
            Repr::Flat(items) => items,
            Repr::Chunked { chunks, .. } => {
                &chunks
                    .get(chunks.partition_point(|ch| last_key(ch) < probe))?
                    .items
            }
        };
        let j = items.binary_search_by(|i| i.sort_key().cmp(&probe)).ok()?;
        items.get(j)
    }

    /// Where `probe` is (`Ok`) or would be inserted (`Err`), as a global
    /// index, like `slice::binary_search`.
    pub(crate) fn position(&self, probe: SortKey<'_>) -> Result<usize, usize> {
        match &self.repr {
            Repr::Flat(items) => items.binary_search_by(|i| i.sort_key().cmp(&probe)),
            Repr::Chunked { chunks, len } => {
                // The first chunk whose last instance is not below the probe.
                let c = chunks.partition_point(|ch| last_key(ch) < probe);
                let Some(chunk) = chunks.get(c) else {
                    return Err(*len);
                };
                let start = start_of(chunks, c);
                chunk
                    .items
                    .binary_search_by(|i| i.sort_key().cmp(&probe))
                    .map(|j| start + j)
                    .map_err(|j| start + j)
            }
        }
    }

    /// This list with the instance at `i` replaced by `inst` (same sort key).
    pub(crate) fn with_replaced(&self, i: usize, inst: Instance) -> Self {
        let old = &self[i];
        debug_assert!(old.sort_key() == inst.sort_key());
        let digest = self
            .digest
            .wrapping_sub(instance_hash(old))
            .wrapping_add(instance_hash(&inst));
        let repr = match &self.repr {
            Repr::Flat(items) => {
                let mut v = items.to_vec();
                v[i] = inst;
                Repr::Flat(v.into_boxed_slice())
            }
            Repr::Chunked { chunks, len } => {
                let (c, offset) = locate(chunks, i);
                let mut items = chunks[c].items.to_vec();
                items[offset] = inst;
                let mut spine = chunks.to_vec();
                spine[c].items = items.into();
                Repr::Chunked {
                    chunks: spine.into_boxed_slice(),
                    len: *len,
                }
            }
        };
        InstanceList { repr, digest }
    }

    /// This list with `inst` inserted at `i`, where [`InstanceList::position`]
    /// said it belongs.
    pub(crate) fn with_inserted(&self, i: usize, inst: Instance) -> Self {
        let digest = self.digest.wrapping_add(instance_hash(&inst));
        let repr = match &self.repr {
            Repr::Flat(items) => {
                let mut v = Vec::with_capacity(items.len() + 1);
                v.extend_from_slice(&items[..i]);
                v.push(inst);
                v.extend_from_slice(&items[i..]);
                Repr::build(v)
            }
            Repr::Chunked { chunks, len } => {
                // The chunk holding index i-1 or i: the first whose end
                // reaches i (the last one when appending).
                let c = chunks
                    .partition_point(|ch| ch.end < i)
                    .min(chunks.len() - 1);
                let start = start_of(chunks, c);
                let mut items = chunks[c].items.to_vec();
                items.insert(i - start, inst);
                let mut spine = Vec::with_capacity(chunks.len() + 1);
                spine.extend_from_slice(&chunks[..c]);
                if items.len() > CHUNK_MAX {
                    let tail = items.split_off(items.len() / 2);
                    spine.push(Chunk {
                        end: start + items.len(),
                        items: items.into(),
                    });
                    spine.push(Chunk {
                        end: chunks[c].end + 1,
                        items: tail.into(),
                    });
                } else {
                    spine.push(Chunk {
                        end: chunks[c].end + 1,
                        items: items.into(),
                    });
                }
                spine.extend(chunks[c + 1..].iter().map(|ch| Chunk {
                    end: ch.end + 1,
                    items: ch.items.clone(),
                }));
                Repr::Chunked {
                    chunks: spine.into_boxed_slice(),
                    len: len + 1,
                }
            }
        };
        InstanceList { repr, digest }
    }

    /// This list without the instance at `i`.
    pub(crate) fn with_removed(&self, i: usize) -> Self {
        let digest = self.digest.wrapping_sub(instance_hash(&self[i]));
        let repr = match &self.repr {
            Repr::Flat(items) => {
                let mut v = Vec::with_capacity(items.len() - 1);
                v.extend_from_slice(&items[..i]);
                v.extend_from_slice(&items[i + 1..]);
                Repr::Flat(v.into_boxed_slice())
            }
            Repr::Chunked { len, .. } if len - 1 <= CHUNK_MAX => {
                let mut v = self.to_vec();
                v.remove(i);
                Repr::build(v)
            }
            Repr::Chunked { chunks, len } => {
                let (c, offset) = locate(chunks, i);
                let mut items = chunks[c].items.to_vec();
                items.remove(offset);
                // A small remainder joins a neighbour that has room, so the
                // spine stays about len / CHUNK_FILL long.
                let merge_with = if items.is_empty() || items.len() >= CHUNK_MIN {
                    None
                } else if c + 1 < chunks.len()
                    && items.len() + chunks[c + 1].items.len() <= CHUNK_MAX
                {
                    Some(c + 1)
                } else if c > 0 && items.len() + chunks[c - 1].items.len() <= CHUNK_MAX {
                    Some(c - 1)
                } else {
                    None
                };
                let mut spine: Vec<Chunk> = Vec::with_capacity(chunks.len());
                for (k, ch) in chunks.iter().enumerate() {
                    let end = if k >= c { ch.end - 1 } else { ch.end };
                    if k == c {
                        match merge_with {
                            // Joined with the previous chunk, already pushed.
                            Some(m) if m < c => {
                                let prev = spine.pop().expect("previous chunk pushed");
                                let mut joined = prev.items.to_vec();
                                joined.append(&mut items);
                                spine.push(Chunk {
                                    end,
                                    items: joined.into(),
                                });
                            }
                            // Joined with the next chunk, pushed at k = c + 1.
                            Some(_) => {}
                            None if items.is_empty() => {}
                            None => spine.push(Chunk {
                                end,
                                items: std::mem::take(&mut items).into(),
                            }),
                        }
                    } else if k == c + 1 && merge_with == Some(k) {
                        items.extend_from_slice(&ch.items);
                        spine.push(Chunk {
                            end,
                            items: std::mem::take(&mut items).into(),
                        });
                    } else {
                        spine.push(Chunk {
                            end,
                            items: ch.items.clone(),
                        });
                    }
                }
                Repr::Chunked {
                    chunks: spine.into_boxed_slice(),
                    len: len - 1,
                }
            }
        };
        InstanceList { repr, digest }
    }

    /// Chunks in the spine (1 for a flat list).
    #[cfg(test)]
    fn chunk_count(&self) -> usize {
        match &self.repr {
            Repr::Flat(_) => 1,
            Repr::Chunked { chunks, .. } => chunks.len(),
        }
    }
}

impl Repr {
    fn build(instances: Vec<Instance>) -> Repr {
        if instances.len() <= CHUNK_MAX {
            return Repr::Flat(instances.into_boxed_slice());
        }
        let len = instances.len();
        let mut chunks = Vec::with_capacity(len.div_ceil(CHUNK_FILL));
        let mut end = 0;
        for part in instances.chunks(CHUNK_FILL) {
            end += part.len();
            chunks.push(Chunk {
                end,
                items: part.into(),
            });
        }
        Repr::Chunked {
            chunks: chunks.into_boxed_slice(),
            len,
        }
    }
}

fn start_of(chunks: &[Chunk], c: usize) -> usize {
    if c == 0 {
        0
    } else {
        chunks[c - 1].end
    }
}

/// The chunk holding global index `i` (< len) and the offset inside it.
fn locate(chunks: &[Chunk], i: usize) -> (usize, usize) {
    let c = chunks.partition_point(|ch| ch.end <= i);
    (c, i - start_of(chunks, c))
}

fn last_key(chunk: &Chunk) -> SortKey<'_> {
    chunk
        .items
        .last()
        .expect("chunks are never empty")
        .sort_key()
}

impl Index<usize> for InstanceList {
    type Output = Instance;

    fn index(&self, i: usize) -> &Instance {
        match self.get(i) {
            Some(inst) => inst,
            None => panic!("instance index {i} out of range for {}", self.len()),
        }
    }
}

impl PartialEq for InstanceList {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<'a> IntoIterator for &'a InstanceList {
    type Item = &'a Instance;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Iterator over an [`InstanceList`] in sort order.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    chunks: std::slice::Iter<'a, Chunk>,
    current: std::slice::Iter<'a, Instance>,
    remaining: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Instance;

    fn next(&mut self) -> Option<&'a Instance> {
        loop {
            if let Some(i) = self.current.next() {
                self.remaining -= 1;
                return Some(i);
            }
            self.current = self.chunks.next()?.items.iter();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// FNV-1a over every field of `i` a reader of the list can see, finished
/// with a 64-bit mix so that a sum of hashes spreads over all bits.
/// Deterministic across processes, so two servers with the same state agree.
fn instance_hash(i: &Instance) -> u64 {
    const PRIME: u64 = 0x100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(PRIME);
        }
    };
    eat(i.cluster.as_bytes());
    eat(&[0]);
    match i.ip {
        IpAddr::V4(a) => eat(&a.octets()),
        IpAddr::V6(a) => eat(&a.octets()),
    }
    eat(&i.port.to_le_bytes());
    eat(&i.weight.to_bits().to_le_bytes());
    eat(&[
        u8::from(i.healthy),
        u8::from(i.enabled),
        u8::from(i.ephemeral),
    ]);
    eat(i.metadata.encoded().as_bytes());
    // The finaliser of MurmurHash3: FNV's low bits mix poorly on their own.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::LeaseSlot;
    use crate::metadata::Metadata;
    use crate::model::LeaseTimeouts;

    fn inst(port: u16, weight: f64) -> Instance {
        Instance {
            ip: "10.0.0.1".parse().unwrap(),
            port,
            healthy: true,
            enabled: true,
            ephemeral: true,
            weight,
            cluster: Arc::from("DEFAULT"),
            metadata: Metadata::empty(),
            timeouts: LeaseTimeouts::NACOS,
            lease: LeaseSlot::NONE,
        }
    }

    fn ports(l: &InstanceList) -> Vec<u16> {
        l.iter().map(|i| i.port).collect()
    }

    fn insert(l: &InstanceList, port: u16) -> InstanceList {
        let probe = inst(port, 1.0);
        let at = l.position(probe.sort_key()).expect_err("new port");
        l.with_inserted(at, probe)
    }

    fn remove(l: &InstanceList, port: u16) -> InstanceList {
        let at = l.position(inst(port, 1.0).sort_key()).expect("present");
        l.with_removed(at)
    }

    /// Random-ish inserts and removals agree with a sorted `Vec` at every
    /// step: order, index, position, length and digest.
    #[test]
    fn agrees_with_a_sorted_vec_through_growth_and_shrinkage() {
        let mut list = InstanceList::default();
        let mut model: Vec<u16> = Vec::new();
        let mut x: u32 = 12345;
        let mut next = || {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u16 % 2_000
        };
        for step in 0..3_000 {
            let port = next();
            let removing = step > 1_500 && step % 3 != 0;
            match model.binary_search(&port) {
                Ok(k) if removing || step % 5 == 0 => {
                    model.remove(k);
                    list = remove(&list, port);
                }
                Ok(_) => {}
                Err(k) => {
                    model.insert(k, port);
                    list = insert(&list, port);
                }
            }
            assert_eq!(list.len(), model.len());
            if step % 97 == 0 {
                assert_eq!(ports(&list), model);
                for (k, p) in model.iter().enumerate() {
                    assert_eq!(list[k].port, *p);
                    assert_eq!(list.position(inst(*p, 1.0).sort_key()), Ok(k));
                }
                let rebuilt = InstanceList::from_sorted(list.to_vec());
                assert_eq!(rebuilt.digest(), list.digest());
            }
        }
        assert_eq!(ports(&list), model);
    }

    #[test]
    fn a_write_into_a_large_list_shares_every_other_chunk() {
        let big = InstanceList::from_sorted((0..10_000).map(|p| inst(p, 1.0)).collect());
        assert!(big.chunk_count() > 100, "{}", big.chunk_count());
        let changed = big.with_replaced(5_000, inst(5_000, 2.0));
        let (Repr::Chunked { chunks: a, .. }, Repr::Chunked { chunks: b, .. }) =
            (&big.repr, &changed.repr)
        else {
            panic!("a 10,000-instance list is chunked");
        };
        let shared = a
            .iter()
            .zip(b.iter())
            .filter(|(x, y)| Arc::ptr_eq(&x.items, &y.items))
            .count();
        assert_eq!(shared, a.len() - 1);
        assert_eq!(changed[5_000].weight, 2.0);
        assert_eq!(big[5_000].weight, 1.0, "the old revision is untouched");
    }

    #[test]
    fn digest_follows_visible_fields_and_not_history() {
        let a = InstanceList::from_sorted((0..200).map(|p| inst(p, 1.0)).collect());
        let b = a.with_replaced(7, inst(7, 3.0));
        assert_ne!(a.digest(), b.digest());
        let back = b.with_replaced(7, inst(7, 1.0));
        assert_eq!(a.digest(), back.digest());
        let grown = insert(&a, 500);
        assert_eq!(remove(&grown, 500).digest(), a.digest());
        assert_eq!(InstanceList::default().digest(), 0);
    }

    #[test]
    fn removals_down_to_empty_keep_the_spine_short() {
        let mut list = InstanceList::from_sorted((0..1_000).map(|p| inst(p, 1.0)).collect());
        for p in (0..1_000).step_by(2) {
            list = remove(&list, p);
        }
        // 500 left: never more chunks than a fill of CHUNK_MIN would give.
        assert!(
            list.chunk_count() <= 500 / CHUNK_MIN,
            "{}",
            list.chunk_count()
        );
        for p in (1..1_000).step_by(2) {
            list = remove(&list, p);
        }
        assert!(list.is_empty());
        assert_eq!(list.iter().count(), 0);
    }
}
