//! A service's sorted instance list, shared between revisions so a write
//! costs about the same in a service of ten instances or of 200,000.
//!
//! A snapshot is immutable, so a write publishes a new list. Copying the
//! whole list made a register O(n) in the service's size (O(n²) to fill a
//! service). An [`InstanceList`] of more than [`FLAT_MAX`] instances is
//! instead a persistent B+tree: sorted leaves of at most [`LEAF_MAX`]
//! instances under inner nodes of at most [`INNER_MAX`] children, every node
//! behind an `Arc` and shared with the revisions before and after it. A write
//! copies the path from the root to its leaf (one leaf and one node per
//! level) and shares everything else. A service of 10,000 instances is three
//! levels deep: a write copies ~24 instances and ~25 child pointers, where a
//! flat list copied 10,000 instances and a one-level spine of chunks still
//! copied ~210 pointers. Each level multiplies the capacity by about 12, so
//! the cost grows with log n, not with n.
//!
//! Small lists stay one flat slice, so the common case (a handful of
//! instances) reads exactly as before: beats and queries pay no extra
//! indirection.
//!
//! The list also keeps its digest (the checksum readers and cluster peers
//! compare) up to date per write: the wrapping sum of a per-instance hash.
//! A sum needs no order and no rescan, and a list is sorted by a unique key,
//! so two lists with the same visible instances have the same digest.
//!
//! Readers see only `&InstanceList` inside a published snapshot: lock-free as
//! before. A published node is never mutated; writers build new lists with
//! the `with_*` methods under the shard's writer lock.

use std::cmp::Ordering;
use std::net::IpAddr;
use std::ops::Index;
use std::sync::Arc;

use crate::model::Instance;

/// Longest list kept as one flat slice. A write into a flat list copies it
/// whole, which below this size costs less than walking a tree.
pub(crate) const FLAT_MAX: usize = 64;
/// Longest leaf: a leaf that grows past it splits into two halves. A write
/// clones every instance of its leaf (two reference counts each), so leaves
/// are kept short; below ~16 the extra level costs more than it saves.
const LEAF_MAX: usize = 32;
/// Most children of an inner node. A write copies one node per level, each
/// child pointer a reference count: 16 keeps a node about as cheap to copy
/// as a leaf while the tree stays shallow (4 levels at 200,000 instances).
const INNER_MAX: usize = 32;
/// How full a bulk-built tree's nodes are: room for a few inserts each
/// before the first split.
const LEAF_FILL: usize = 24;
const INNER_FILL: usize = 24;

/// The key a list is sorted by: cluster, IP, port, persistent first.
pub(crate) type SortKey<'a> = (&'a str, IpAddr, u16, bool);

/// A sorted, immutable list of instances with its digest. Cloning copies at
/// most [`FLAT_MAX`] instances or one root node.
/// `repr(C)`: the representation first, where a snapshot's layout expects
/// a lookup to read (see [`ServiceSnapshot`](crate::ServiceSnapshot)).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct InstanceList {
    repr: Repr,
    digest: u64,
    /// How many instances are persistent, kept like the digest so a door
    /// asks "does this service hold the other kind" in O(1) (Nacos gives a
    /// service one kind).
    persistent: u32,
}

#[derive(Clone, Debug)]
enum Repr {
    /// At most [`FLAT_MAX`] instances, in one allocation whose capacity
    /// may exceed its length: see [`flat_capacity`].
    Flat(Vec<Instance>),
    /// More than [`FLAT_MAX`]: the root's children (at least two), every
    /// leaf at the same depth. The length is the last child's end, so the
    /// variant is one fat pointer and the enum no larger than the `Vec`.
    Tree(Arc<[Child]>),
}

/// One subtree, shared by every revision that has not changed it.
#[derive(Clone, Debug)]
enum Node {
    /// Sorted instances, [`LEAF_MAX`] / 4 to [`LEAF_MAX`] of them.
    Leaf(Arc<[Instance]>),
    /// [`INNER_MAX`] / 4 to [`INNER_MAX`] subtrees, in order.
    Inner(Arc<[Child]>),
}

#[derive(Clone, Debug)]
struct Child {
    /// Instances in this child and every sibling before it, so the child
    /// holding an index is a binary search.
    end: usize,
    node: Node,
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
        let persistent = instances.iter().filter(|i| !i.ephemeral).count() as u32;
        InstanceList {
            repr: Repr::build(instances),
            digest,
            persistent,
        }
    }

    /// Number of instances.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Flat(items) => items.len(),
            Repr::Tree(root) => children_len(root),
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
            Repr::Tree(root) => {
                if i >= children_len(root) {
                    return None;
                }
                let (leaf, offset) = leaf_at(root, i);
                leaf.get(offset)
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
                root: &[],
                current: items.iter(),
                remaining: items.len(),
                len: items.len(),
            },
            Repr::Tree(root) => Iter {
                root,
                current: [].iter(),
                remaining: children_len(root),
                len: children_len(root),
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

    /// How many instances are persistent (the rest are ephemeral).
    pub fn persistent_len(&self) -> usize {
        self.persistent as usize
    }

    /// The instance whose sort key is `probe`, in one search. A beat looks
    /// its instance up this way: `position` followed by indexing would walk
    /// down the tree a second time.
    pub(crate) fn find(&self, probe: SortKey<'_>) -> Option<&Instance> {
        let items: &[Instance] = match &self.repr {
            Repr::Flat(items) => items,
            Repr::Tree(root) => {
                let mut probe = probe;
                let (leaf, _) = leaf_for(root, &mut probe)?;
                let j = leaf.binary_search_by(|i| key_cmp(i, &mut probe)).ok()?;
                return leaf.get(j);
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
            Repr::Tree(root) => {
                let mut probe = probe;
                let Some((leaf, start)) = leaf_for(root, &mut probe) else {
                    return Err(children_len(root));
                };
                leaf.binary_search_by(|i| key_cmp(i, &mut probe))
                    .map(|j| start + j)
                    .map_err(|j| start + j)
            }
        }
    }

    /// This list with the instance at `i` replaced by `inst` (same sort key).
    pub(crate) fn with_replaced(&self, i: usize, inst: Instance) -> Self {
        match &self.repr {
            Repr::Flat(items) => {
                let old = &items[i];
                debug_assert!(old.sort_key() == inst.sort_key());
                let digest = self
                    .digest
                    .wrapping_sub(instance_hash(old))
                    .wrapping_add(instance_hash(&inst));
                let mut v = Vec::with_capacity(items.capacity());
                v.extend_from_slice(items);
                v[i] = inst;
                InstanceList {
                    repr: Repr::Flat(v),
                    digest,
                    // The kind is part of the sort key, so it is unchanged.
                    persistent: self.persistent,
                }
            }
            Repr::Tree(root) => {
                let new_hash = instance_hash(&inst);
                let (root, old) = replaced(root, i, inst);
                let digest = self
                    .digest
                    .wrapping_sub(instance_hash(old))
                    .wrapping_add(new_hash);
                InstanceList {
                    repr: Repr::Tree(root),
                    digest,
                    // The kind is part of the sort key, so it is unchanged.
                    persistent: self.persistent,
                }
            }
        }
    }

    /// This list with `inst` inserted at `i`, where [`InstanceList::position`]
    /// said it belongs.
    pub(crate) fn with_inserted(&self, i: usize, inst: Instance) -> Self {
        let digest = self.digest.wrapping_add(instance_hash(&inst));
        let persistent = self.persistent + u32::from(!inst.ephemeral);
        let repr = match &self.repr {
            Repr::Flat(items) => {
                let mut v = Vec::with_capacity(flat_capacity(items.capacity(), items.len() + 1));
                v.extend_from_slice(&items[..i]);
                v.push(inst);
                v.extend_from_slice(&items[i..]);
                Repr::build(v)
            }
            Repr::Tree(root) => {
                let len = children_len(root);
                let root = match inserted(root, i, inst) {
                    (one, None) => one,
                    // The root split: the tree grows a level.
                    (left, Some(right)) => {
                        let left_len = children_len(&left);
                        Arc::from([
                            Child {
                                end: left_len,
                                node: Node::Inner(left),
                            },
                            Child {
                                end: len + 1,
                                node: Node::Inner(right),
                            },
                        ])
                    }
                };
                Repr::Tree(root)
            }
        };
        InstanceList {
            repr,
            digest,
            persistent,
        }
    }

    /// This list without the instance at `i`.
    pub(crate) fn with_removed(&self, i: usize) -> Self {
        let (repr, old) = match &self.repr {
            Repr::Flat(items) => {
                let mut v = Vec::with_capacity(flat_capacity(items.capacity(), items.len() - 1));
                v.extend_from_slice(&items[..i]);
                v.extend_from_slice(&items[i + 1..]);
                (Repr::Flat(v), &items[i])
            }
            Repr::Tree(root) if children_len(root) - 1 <= FLAT_MAX => {
                let kept = self
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| *k != i)
                    .map(|(_, inst)| inst.clone());
                (Repr::Flat(kept.collect()), &self[i])
            }
            Repr::Tree(root) => {
                let (mut root, old) = removed(root, i);
                // A root left with one child hands the tree to it.
                while root.len() == 1 {
                    match &root[0].node {
                        Node::Inner(only) => root = only.clone(),
                        Node::Leaf(_) => break,
                    }
                }
                (Repr::Tree(root), old)
            }
        };
        let digest = self.digest.wrapping_sub(instance_hash(old));
        let persistent = self.persistent - u32::from(!old.ephemeral);
        InstanceList {
            repr,
            digest,
            persistent,
        }
    }
}

impl Repr {
    /// Bulk build: leaves [`LEAF_FILL`] full, inner nodes [`INNER_FILL`]
    /// full, sizes spread evenly so no node starts under its minimum.
    fn build(mut instances: Vec<Instance>) -> Repr {
        let len = instances.len();
        if len <= FLAT_MAX {
            // The expiry pass sizes it to the list it replaces: keep that
            // room unless `flat_capacity` would give it back.
            if instances.capacity() > flat_capacity(instances.capacity(), len) {
                instances.shrink_to_fit();
            }
            return Repr::Flat(instances);
        }
        let mut rest = instances.into_iter();
        let mut level: Vec<Node> = even_parts(len, LEAF_FILL)
            .map(|size| Node::Leaf(rest.by_ref().take(size).collect()))
            .collect();
        while level.len() > INNER_FILL {
            let mut nodes = level.into_iter();
            level = even_parts(nodes.len(), INNER_FILL)
                .map(|size| Node::Inner(with_ends(nodes.by_ref().take(size))))
                .collect();
        }
        Repr::Tree(with_ends(level.into_iter()))
    }
}

impl Node {
    /// Instances under this node.
    fn len(&self) -> usize {
        match self {
            Node::Leaf(items) => items.len(),
            Node::Inner(children) => children_len(children),
        }
    }

    /// Entries of this node itself: instances of a leaf, children of an
    /// inner node. What the size bounds apply to.
    fn width(&self) -> usize {
        match self {
            Node::Leaf(items) => items.len(),
            Node::Inner(children) => children.len(),
        }
    }

    /// Below this width a node merges with or borrows from a neighbour, so
    /// removals cannot leave a tree of near-empty nodes.
    fn min_width(&self) -> usize {
        match self {
            Node::Leaf(_) => LEAF_MAX / 4,
            Node::Inner(_) => INNER_MAX / 4,
        }
    }

    /// The last instance under this node.
    fn last(&self) -> &Instance {
        let mut node = self;
        loop {
            match node {
                Node::Leaf(items) => return items.last().expect("nodes are never empty"),
                Node::Inner(children) => {
                    node = &children.last().expect("nodes are never empty").node;
                }
            }
        }
    }
}

/// The capacity for a flat list of `len` instances that replaces one of
/// capacity `cap`: exact when it grows, so a fleet that only registers
/// holds no spare room; unchanged when it shrinks to half or more.
///
/// Why keep room on a shrink: every write frees the old list and allocates
/// the new one. A list one instance shorter is in a smaller size class,
/// so when a fleet deregisters (a deployment, a drain) each service frees
/// a block in its old class and takes a fresh one in the next smaller
/// class. The old classes' pages empty in random order and stay resident
/// while the new classes grow: under `nacos-1x-report`'s drain RSS rose
/// by ~55 MiB while live bytes fell. A list that keeps its capacity
/// reuses the block the previous revision just freed, in the same class.
/// Below half it shrinks to fit, so spare room is bounded by the list.
fn flat_capacity(cap: usize, len: usize) -> usize {
    if len > cap || len * 2 < cap {
        len
    } else {
        cap
    }
}

/// `items` with `remove` entries at `at` replaced by `insert`, in one
/// allocation: the chain is exact-size, so `collect` writes in place.
fn spliced<T: Clone, C: FromIterator<T>>(
    items: &[T],
    at: usize,
    remove: usize,
    insert: Option<T>,
) -> C {
    items[..at]
        .iter()
        .cloned()
        .chain(insert)
        .chain(items[at + remove..].iter().cloned())
        .collect()
}

/// `total` split into the fewest parts of at most `fill`, as even as can be.
fn even_parts(total: usize, fill: usize) -> impl Iterator<Item = usize> {
    let parts = total.div_ceil(fill).max(1);
    (0..parts).map(move |k| total / parts + usize::from(k < total % parts))
}

/// Children for `nodes`, with their running ends.
fn with_ends(nodes: impl Iterator<Item = Node>) -> Arc<[Child]> {
    let mut end = 0;
    nodes
        .map(|node| {
            end += node.len();
            Child { end, node }
        })
        .collect()
}

fn children_len(children: &[Child]) -> usize {
    children.last().map_or(0, |c| c.end)
}

fn start_of(children: &[Child], c: usize) -> usize {
    if c == 0 {
        0
    } else {
        children[c - 1].end
    }
}

/// The child holding index `i` (< the children's total) and the offset of
/// `i` inside it.
fn child_at(children: &[Child], i: usize) -> (usize, usize) {
    let c = children.partition_point(|ch| ch.end <= i);
    (c, i - start_of(children, c))
}

/// The leaf holding index `i` (< the tree's length) and `i`'s offset in it.
fn leaf_at(mut children: &[Child], mut i: usize) -> (&[Instance], usize) {
    loop {
        let (c, offset) = child_at(children, i);
        match &children[c].node {
            Node::Leaf(items) => return (items, offset),
            Node::Inner(below) => (children, i) = (below, offset),
        }
    }
}

/// Orders `inst` against `probe` as [`Instance::sort_key`] does. A search
/// compares one probe with ~15 instances, nearly all in the probe's
/// cluster: once a name compares equal, the probe borrows the instance's
/// (interned) copy, so later comparisons with that cluster are a pointer
/// test instead of a `memcmp`.
fn key_cmp<'a>(inst: &'a Instance, probe: &mut SortKey<'a>) -> Ordering {
    let cluster: &'a str = &inst.cluster;
    if !std::ptr::eq(cluster, probe.0) {
        match cluster.cmp(probe.0) {
            Ordering::Equal => probe.0 = cluster,
            unequal => return unequal,
        }
    }
    (inst.ip, inst.port, inst.ephemeral).cmp(&(probe.1, probe.2, probe.3))
}

/// The leaf where `probe` is or would be inserted and the index of its
/// first instance; `None` when `probe` sorts after every instance.
fn leaf_for<'a: 'p, 'p>(
    mut children: &'a [Child],
    probe: &mut SortKey<'p>,
) -> Option<(&'a [Instance], usize)> {
    let mut start = 0;
    loop {
        // The first child whose last instance is not below the probe. Below
        // the root there always is one: the parent chose this node by it.
        // (`partition_point` would not let the probe keep a cluster name
        // borrowed from the tree: it lends each child only to one call.)
        let (mut c, mut end) = (0, children.len());
        while c < end {
            let mid = c + (end - c) / 2;
            if key_cmp(children[mid].node.last(), probe).is_lt() {
                c = mid + 1;
            } else {
                end = mid;
            }
        }
        let child = children.get(c)?;
        start += start_of(children, c);
        match &child.node {
            Node::Leaf(items) => return Some((items, start)),
            Node::Inner(below) => children = below,
        }
    }
}

/// A fresh copy of `items`, changed in place by `edit` before anyone else
/// can see it. Cloning the whole slice and then overwriting costs one
/// clone more than splicing, but is a plain copy loop: a chained iterator
/// costs about twice as much per element.
fn edited<T: Clone>(items: &[T], edit: impl FnOnce(&mut [T])) -> Arc<[T]> {
    let mut copy: Arc<[T]> = items.iter().cloned().collect();
    edit(Arc::get_mut(&mut copy).expect("a fresh copy is not shared"));
    copy
}

/// `children` with child `c` replaced by `node`, which has `delta` more
/// instances than it: the ends from it on shift by `delta`.
fn with_child(children: &[Child], c: usize, node: Node, delta: isize) -> Arc<[Child]> {
    edited(children, |new| {
        new[c].node = node;
        for ch in &mut new[c..] {
            ch.end = ch.end.wrapping_add_signed(delta);
        }
    })
}

/// The path copy of a replacement: new nodes from the root to the leaf of
/// index `i`, everything else shared; and the instance replaced.
fn replaced(children: &[Child], i: usize, inst: Instance) -> (Arc<[Child]>, &Instance) {
    let (c, offset) = child_at(children, i);
    let (node, old) = match &children[c].node {
        Node::Leaf(items) => {
            debug_assert!(items[offset].sort_key() == inst.sort_key());
            (
                Node::Leaf(edited(items, |new| new[offset] = inst)),
                &items[offset],
            )
        }
        Node::Inner(below) => {
            let (below, old) = replaced(below, offset, inst);
            (Node::Inner(below), old)
        }
    };
    (with_child(children, c, node, 0), old)
}

/// The path copy of an insertion at index `i`: the new node, and a second
/// one when it split in two.
fn inserted(children: &[Child], i: usize, inst: Instance) -> (Arc<[Child]>, Option<Arc<[Child]>>) {
    // The child holding index i-1 or i: the first whose end reaches i (the
    // last one when appending).
    let c = children
        .partition_point(|ch| ch.end < i)
        .min(children.len() - 1);
    let start = start_of(children, c);
    let (node, split) = match &children[c].node {
        Node::Leaf(items) if items.len() < LEAF_MAX => {
            (Node::Leaf(spliced(items, i - start, 0, Some(inst))), None)
        }
        Node::Leaf(items) => {
            let mut left: Vec<Instance> = spliced(items, i - start, 0, Some(inst));
            let right = left.split_off(left.len() / 2);
            (Node::Leaf(left.into()), Some(Node::Leaf(right.into())))
        }
        Node::Inner(below) => {
            let (left, right) = inserted(below, i - start, inst);
            (Node::Inner(left), right.map(Node::Inner))
        }
    };
    let Some(right) = split else {
        return (with_child(children, c, node, 1), None);
    };
    let left_end = start + node.len();
    let mut out = Vec::with_capacity(children.len() + 1);
    out.extend_from_slice(&children[..c]);
    out.push(Child {
        end: left_end,
        node,
    });
    out.push(Child {
        end: children[c].end + 1,
        node: right,
    });
    out.extend(children[c + 1..].iter().map(|ch| Child {
        end: ch.end + 1,
        node: ch.node.clone(),
    }));
    if out.len() <= INNER_MAX {
        return (out.into(), None);
    }
    let (left, right) = halves(out);
    (left, Some(right))
}

/// Splits an overfull list of children into two halves, the second
/// re-based to count from zero.
fn halves(mut children: Vec<Child>) -> (Arc<[Child]>, Arc<[Child]>) {
    let tail = children.split_off(children.len() / 2);
    let base = children_len(&children);
    let tail: Arc<[Child]> = tail
        .into_iter()
        .map(|ch| Child {
            end: ch.end - base,
            node: ch.node,
        })
        .collect();
    (children.into(), tail)
}

/// The path copy of a removal at index `i`, and the instance removed. A
/// node left under its minimum joins a neighbour: merged into one when
/// they fit, else split evenly between the two.
fn removed(children: &[Child], i: usize) -> (Arc<[Child]>, &Instance) {
    let (c, offset) = child_at(children, i);
    let (node, old) = match &children[c].node {
        Node::Leaf(items) => (Node::Leaf(spliced(items, offset, 1, None)), &items[offset]),
        Node::Inner(below) => {
            let (below, old) = removed(below, offset);
            (Node::Inner(below), old)
        }
    };
    if node.width() >= node.min_width() || children.len() == 1 {
        return (with_child(children, c, node, -1), old);
    }
    // The pair (l, l + 1) holding c, and the start of l.
    let l = if c + 1 < children.len() { c } else { c - 1 };
    let start = start_of(children, l);
    let (left, right) = if l == c {
        (&node, &children[c + 1].node)
    } else {
        (&children[l].node, &node)
    };
    let joined = joined(left, right);
    let mut end = start;
    let out: Arc<[Child]> = children[..l]
        .iter()
        .cloned()
        .chain(joined.into_iter().map(|node| {
            end += node.len();
            Child { end, node }
        }))
        .chain(children[l + 2..].iter().map(|ch| Child {
            end: ch.end - 1,
            node: ch.node.clone(),
        }))
        .collect();
    (out, old)
}

/// Two neighbouring nodes of one level as one node when they fit in one,
/// else as two of even widths.
fn joined(left: &Node, right: &Node) -> Vec<Node> {
    match (left, right) {
        (Node::Leaf(a), Node::Leaf(b)) => {
            let mut all: Vec<Instance> = a.iter().chain(b.iter()).cloned().collect();
            if all.len() <= LEAF_MAX {
                return vec![Node::Leaf(all.into())];
            }
            let tail = all.split_off(all.len() / 2);
            vec![Node::Leaf(all.into()), Node::Leaf(tail.into())]
        }
        (Node::Inner(a), Node::Inner(b)) => {
            let base = children_len(a);
            let all: Vec<Child> = a
                .iter()
                .cloned()
                .chain(b.iter().map(|ch| Child {
                    end: ch.end + base,
                    node: ch.node.clone(),
                }))
                .collect();
            if all.len() <= INNER_MAX {
                return vec![Node::Inner(all.into())];
            }
            let (a, b) = halves(all);
            vec![Node::Inner(a), Node::Inner(b)]
        }
        _ => unreachable!("every leaf is at the same depth"),
    }
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
    /// The tree's root; empty for a flat list, whose slice is `current`.
    root: &'a [Child],
    current: std::slice::Iter<'a, Instance>,
    remaining: usize,
    len: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Instance;

    fn next(&mut self) -> Option<&'a Instance> {
        if let Some(i) = self.current.next() {
            self.remaining -= 1;
            return Some(i);
        }
        if self.remaining == 0 {
            return None;
        }
        // The next leaf, found from the root: a walk of a few levels per
        // ~24 instances, and no stack to keep in the iterator.
        let (leaf, offset) = leaf_at(self.root, self.len - self.remaining);
        self.current = leaf[offset..].iter();
        self.remaining -= 1;
        self.current.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// FNV-1a over every field of `i` a reader of the list can see, finished
/// with a 64-bit mix so that a sum of hashes spreads over all bits.
/// Deterministic across processes, so two servers with the same state agree.
pub(crate) fn instance_hash(i: &Instance) -> u64 {
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

    fn inst(port: u32, weight: f64) -> Instance {
        // Ports past u16 move to the next IP, so lists can exceed 65,535.
        // Every seventh is persistent, so the walks count both kinds.
        let ip = std::net::Ipv4Addr::from(0x0a00_0000 + (port >> 16));
        Instance {
            ip: IpAddr::V4(ip),
            port: port as u16,
            healthy: true,
            enabled: true,
            ephemeral: port % 7 != 0,
            weight,
            cluster: crate::shared_str::SharedStr::new("DEFAULT"),
            metadata: Metadata::empty(),
            timeouts: LeaseTimeouts::NACOS,
            lease: LeaseSlot::NONE,
        }
    }

    fn key(i: &Instance) -> u32 {
        let IpAddr::V4(ip) = i.ip else {
            panic!("v4 only")
        };
        ((u32::from(ip) - 0x0a00_0000) << 16) | u32::from(i.port)
    }

    fn keys(l: &InstanceList) -> Vec<u32> {
        l.iter().map(key).collect()
    }

    fn bulk(n: u32) -> InstanceList {
        InstanceList::from_sorted((0..n).map(|p| inst(p, 1.0)).collect())
    }

    fn insert(l: &InstanceList, port: u32) -> InstanceList {
        let probe = inst(port, 1.0);
        let at = l.position(probe.sort_key()).expect_err("new port");
        l.with_inserted(at, probe)
    }

    fn remove(l: &InstanceList, port: u32) -> InstanceList {
        let at = l.position(inst(port, 1.0).sort_key()).expect("present");
        l.with_removed(at)
    }

    /// A deterministic pseudo-random sequence (an LCG): fixed, so a failure
    /// replays.
    fn lcg(seed: u32) -> impl FnMut(u32) -> u32 {
        let mut x = seed;
        move |bound| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 8) % bound
        }
    }

    /// Checks every structural invariant and returns the tree's height
    /// (0 for a flat list): the form matches the length, every leaf is at
    /// the same depth, every node but the root is within its bounds, ends
    /// are running sums, the order is strict and the digest is the sum.
    fn check(l: &InstanceList) -> usize {
        let height = match &l.repr {
            Repr::Flat(items) => {
                assert!(items.len() <= FLAT_MAX, "flat of {}", items.len());
                0
            }
            Repr::Tree(root) => {
                let len = children_len(root);
                assert!(len > FLAT_MAX, "tree of {len}");
                assert!((2..=INNER_MAX).contains(&root.len()), "root {}", root.len());
                let (n, height) = check_children(root);
                assert_eq!(n, len);
                height
            }
        };
        let all = l.to_vec();
        assert_eq!(all.len(), l.len());
        assert_eq!(l.iter().len(), l.len());
        assert!(all.windows(2).all(|w| w[0].sort_key() < w[1].sort_key()));
        let sum = all
            .iter()
            .fold(0u64, |d, i| d.wrapping_add(instance_hash(i)));
        assert_eq!(sum, l.digest());
        let persistent = all.iter().filter(|i| !i.ephemeral).count();
        assert_eq!(persistent, l.persistent_len());
        height
    }

    /// (instances, height) under `children`, checking each child.
    fn check_children(children: &[Child]) -> (usize, usize) {
        let mut end = 0;
        let mut height = None;
        for ch in children {
            let (n, h) = match &ch.node {
                Node::Leaf(items) => {
                    assert!(
                        (LEAF_MAX / 4..=LEAF_MAX).contains(&items.len()),
                        "leaf {}",
                        items.len()
                    );
                    (items.len(), 1)
                }
                Node::Inner(below) => {
                    assert!(
                        (INNER_MAX / 4..=INNER_MAX).contains(&below.len()),
                        "inner {}",
                        below.len()
                    );
                    check_children(below)
                }
            };
            end += n;
            assert_eq!(ch.end, end, "running end");
            assert_eq!(*height.get_or_insert(h), h, "leaves at one depth");
        }
        (end, height.expect("non-empty") + 1)
    }

    /// Every node of the tree, by address, leaves and inner nodes apart.
    fn nodes(l: &InstanceList) -> (Vec<*const Instance>, Vec<*const Child>) {
        fn walk(
            children: &[Child],
            leaves: &mut Vec<*const Instance>,
            inner: &mut Vec<*const Child>,
        ) {
            inner.push(children.as_ptr());
            for ch in children {
                match &ch.node {
                    Node::Leaf(items) => leaves.push(items.as_ptr()),
                    Node::Inner(below) => walk(below, leaves, inner),
                }
            }
        }
        let (mut leaves, mut inner) = (Vec::new(), Vec::new());
        if let Repr::Tree(root) = &l.repr {
            walk(root, &mut leaves, &mut inner);
        }
        (leaves, inner)
    }

    /// How many nodes of `new` are not shared with `old`.
    fn copied(old: &InstanceList, new: &InstanceList) -> (usize, usize) {
        let (old_leaves, old_inner) = nodes(old);
        let (new_leaves, new_inner) = nodes(new);
        (
            new_leaves
                .iter()
                .filter(|p| !old_leaves.contains(p))
                .count(),
            new_inner.iter().filter(|p| !old_inner.contains(p)).count(),
        )
    }

    /// The room a flat list's allocation holds.
    fn capacity(l: &InstanceList) -> usize {
        match &l.repr {
            Repr::Flat(items) => items.capacity(),
            Repr::Tree(_) => panic!("a tree has no flat capacity"),
        }
    }

    #[test]
    fn a_flat_list_grows_exactly_and_keeps_its_block_when_it_shrinks() {
        // Growth is exact: a fleet that only registers holds no spare room.
        let one = insert(&InstanceList::default(), 1);
        let two = insert(&one, 2);
        let three = insert(&two, 3);
        assert_eq!(
            (capacity(&one), capacity(&two), capacity(&three)),
            (1, 2, 3)
        );
        // Down to half, the next revision is allocated in the same size
        // class as the one it replaces.
        let two_of_three = remove(&three, 2);
        assert_eq!(capacity(&two_of_three), 3);
        assert_eq!(capacity(&remove(&two, 1)), 2);
        let replaced = two_of_three.with_replaced(0, inst(1, 7.0));
        assert_eq!(capacity(&replaced), 3);
        assert_eq!(capacity(&insert(&two_of_three, 5)), 3);
        // Below half it shrinks to fit, and empty holds nothing.
        let one_of_three = remove(&two_of_three, 1);
        assert_eq!(capacity(&one_of_three), 1);
        assert_eq!(capacity(&remove(&one_of_three, 3)), 0);
        for l in [&two_of_three, &replaced, &one_of_three] {
            check(l);
        }
        assert_eq!(keys(&one_of_three), [3]);
        // A list built from a vector (the expiry pass sizes it to the old
        // list) follows the same rule.
        let mut v = Vec::with_capacity(40);
        v.push(inst(1, 1.0));
        assert_eq!(capacity(&InstanceList::from_sorted(v)), 1);
        let mut v = Vec::with_capacity(3);
        v.extend([inst(1, 1.0), inst(2, 1.0)]);
        assert_eq!(capacity(&InstanceList::from_sorted(v)), 3);
    }

    /// Random inserts and removals agree with a sorted `Vec` at every step
    /// (order, index, position, find, length, digest) while the list grows
    /// through three levels and shrinks back to flat.
    #[test]
    fn agrees_with_a_sorted_vec_through_growth_and_shrinkage() {
        let mut list = InstanceList::default();
        let mut model: Vec<u32> = Vec::new();
        let mut next = lcg(12345);
        let mut max_height = 0;
        for step in 0..12_000 {
            let port = next(6_000);
            let removing = step > 6_000 && step % 3 != 0;
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
                max_height = max_height.max(check(&list));
                assert_eq!(keys(&list), model);
                for (k, p) in model.iter().enumerate() {
                    assert_eq!(key(&list[k]), *p);
                    let probe = inst(*p, 1.0);
                    assert_eq!(list.position(probe.sort_key()), Ok(k));
                    assert_eq!(list.find(probe.sort_key()).map(key), Some(*p));
                }
                let absent = inst(6_001, 1.0);
                assert_eq!(list.position(absent.sort_key()), Err(model.len()));
                assert!(list.find(absent.sort_key()).is_none());
                let rebuilt = InstanceList::from_sorted(list.to_vec());
                assert_eq!(rebuilt.digest(), list.digest());
                assert_eq!(rebuilt, list);
            }
        }
        assert!(
            max_height >= 3,
            "the walk crossed inner nodes: {max_height}"
        );
        assert_eq!(keys(&list), model);
        check(&list);
    }

    /// Ascending, descending and middle inserts (the shapes that split the
    /// same node over and over) keep every invariant.
    #[test]
    fn sequential_inserts_split_cleanly() {
        for order in 0..3 {
            let mut list = InstanceList::default();
            let n = 3_000u32;
            for k in 0..n {
                let port = match order {
                    0 => k,
                    1 => n - k,
                    _ => (k % 2) * 100_000 + k,
                };
                list = insert(&list, port);
                if k % 251 == 0 {
                    check(&list);
                }
            }
            assert_eq!(list.len(), n as usize);
            assert!(check(&list) <= 4, "order {order}");
        }
    }

    #[test]
    fn a_write_into_a_large_list_copies_only_its_path() {
        let big = bulk(10_000);
        let height = check(&big);
        assert_eq!(height, 3, "10,000 instances are three levels deep");
        let changed = big.with_replaced(5_000, inst(5_000, 2.0));
        // One leaf and the inner nodes above it (the root included).
        assert_eq!(copied(&big, &changed), (1, height - 1));
        assert_eq!(changed[5_000].weight, 2.0);
        assert_eq!(big[5_000].weight, 1.0, "the old revision is untouched");
        check(&changed);

        let grown = insert(&big, 20_000);
        assert_eq!(copied(&big, &grown), (1, height - 1));
        let shrunk = remove(&big, 7);
        assert!(
            copied(&big, &shrunk).0 <= 2,
            "a leaf and maybe its neighbour"
        );
        check(&grown);
        check(&shrunk);
    }

    /// At the per-service cap (200,000) the tree is four levels deep and a
    /// write still copies one node per level.
    #[test]
    fn the_tree_stays_shallow_at_the_instance_cap() {
        let big = bulk(200_000);
        let height = check(&big);
        assert_eq!(height, 4);
        let changed = big.with_replaced(123_456, inst(123_456, 3.0));
        assert_eq!(copied(&big, &changed), (1, height - 1));
        assert_eq!(changed[123_456].weight, 3.0);
        assert_eq!(
            changed.find(inst(199_999, 1.0).sort_key()).map(key),
            Some(199_999)
        );
    }

    #[test]
    fn digest_follows_visible_fields_and_not_history() {
        for n in [10, 200, 5_000] {
            let a = bulk(n);
            let b = a.with_replaced(7, inst(7, 3.0));
            assert_ne!(a.digest(), b.digest());
            let back = b.with_replaced(7, inst(7, 1.0));
            assert_eq!(a.digest(), back.digest());
            let grown = insert(&a, 100_000);
            assert_eq!(remove(&grown, 100_000).digest(), a.digest());
        }
        assert_eq!(InstanceList::default().digest(), 0);
    }

    /// Removals in random order from a three-level tree down to empty: the
    /// tree stays balanced and shallow, and turns flat again at the end.
    #[test]
    fn removals_down_to_empty_keep_the_tree_shallow() {
        let mut list = bulk(5_000);
        let mut left: Vec<u32> = (0..5_000).collect();
        let mut next = lcg(777);
        while !left.is_empty() {
            let port = left.swap_remove(next(left.len() as u32) as usize);
            list = remove(&list, port);
            if left.len() % 193 == 0 {
                let height = check(&list);
                // Every node at least a quarter full bounds the height.
                assert!(height <= 4, "{height} levels for {}", left.len());
                if left.len() <= FLAT_MAX {
                    assert_eq!(height, 0, "flat again at {}", left.len());
                }
            }
        }
        assert!(list.is_empty());
        assert_eq!(list.iter().count(), 0);
        assert_eq!(list.digest(), 0);
    }

    /// The flat-to-tree boundary both ways, one instance at a time.
    #[test]
    fn crossing_the_flat_limit_both_ways() {
        let mut list = bulk(FLAT_MAX as u32);
        assert_eq!(check(&list), 0);
        list = insert(&list, 1_000);
        assert!(check(&list) > 0);
        list = remove(&list, 1_000);
        assert_eq!(check(&list), 0);
        assert_eq!(list, bulk(FLAT_MAX as u32));
        assert_eq!(list.get(FLAT_MAX), None);
    }

    #[test]
    fn the_representation_leads_the_list() {
        // What a lookup reads (24 bytes), first: see `repr(C)` above.
        assert_eq!(std::mem::offset_of!(InstanceList, repr), 0);
        assert_eq!(std::mem::size_of::<Repr>(), 24);
    }
}
