//! The sorted index of service names behind `GET /service/list`.
//!
//! Per namespace, one sorted list of service keys per group, ordered by
//! grouped name. A list is kept in chunks of a few hundred keys, so a page
//! at any offset is found by walking chunk lengths (a few hundred steps for
//! 600k services) and then copying the page: the cost is the page, not the
//! registry, and not how deep the page is. Inserting or removing a key
//! moves at most one chunk's worth of pointers.
//!
//! Listing every group (`*`): a grouped name is `group@@name` and a group
//! holds no `@@`, so all names of one group sort together, and the groups'
//! lists concatenated in the order of their `group@@` prefixes are the
//! namespace in name order: a page skips whole groups by their lengths.
//! Names stored without a group (possible through the core's API, never
//! from the server, which always writes `group@@name`) sort elsewhere; a
//! namespace holding any falls back to merging its groups, O(offset + page).
//!
//! Written by the store when a service is created or removed, under that
//! shard's writer lock and then this index's lock (always in that order);
//! read by listings under the read lock, which writers hold only for one
//! chunk's insert or removal.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap, HashMap};

use parking_lot::RwLock;

use crate::model::{ServiceKey, GROUP_SEPARATOR};

/// Keys per chunk after a split; a chunk splits at twice this.
const CHUNK: usize = 512;

fn by_name(a: &ServiceKey, b: &ServiceKey) -> Ordering {
    a.grouped_name().cmp(b.grouped_name())
}

/// Keys sorted by grouped name, in chunks.
#[derive(Default)]
struct SortedChunks {
    chunks: Vec<Vec<ServiceKey>>,
    len: usize,
}

impl SortedChunks {
    /// The chunk `key` belongs in: the first whose last key is not below it.
    fn chunk_for(&self, key: &ServiceKey) -> usize {
        let i = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|l| by_name(l, key) == Ordering::Less));
        i.min(self.chunks.len().saturating_sub(1))
    }

    fn insert(&mut self, key: &ServiceKey) -> bool {
        if self.chunks.is_empty() {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let c = self.chunk_for(key);
        let chunk = &mut self.chunks[c];
        let Err(at) = chunk.binary_search_by(|k| by_name(k, key)) else {
            return false;
        };
        chunk.insert(at, key.clone());
        self.len += 1;
        if chunk.len() >= 2 * CHUNK {
            let tail = chunk.split_off(CHUNK);
            self.chunks.insert(c + 1, tail);
        }
        true
    }

    fn remove(&mut self, key: &ServiceKey) -> bool {
        if self.chunks.is_empty() {
            return false;
        }
        let c = self.chunk_for(key);
        let chunk = &mut self.chunks[c];
        let Ok(at) = chunk.binary_search_by(|k| by_name(k, key)) else {
            return false;
        };
        chunk.remove(at);
        self.len -= 1;
        if chunk.is_empty() {
            self.chunks.remove(c);
        }
        true
    }

    /// The keys from `offset` on, in order: skips whole chunks first.
    fn from(&self, mut offset: usize) -> impl Iterator<Item = &ServiceKey> {
        let mut first = self.chunks.len();
        for (i, c) in self.chunks.iter().enumerate() {
            if offset < c.len() {
                first = i;
                break;
            }
            offset -= c.len();
        }
        self.chunks[first.min(self.chunks.len())..]
            .iter()
            .flatten()
            .skip(offset)
    }

    fn iter(&self) -> impl Iterator<Item = &ServiceKey> {
        self.chunks.iter().flatten()
    }
}

/// One namespace: its groups keyed by their `group@@` prefix (the order in
/// which their names sort), and how many names have no group.
#[derive(Default)]
struct Namespace {
    groups: BTreeMap<Box<str>, SortedChunks>,
    ungrouped: usize,
}

fn prefix(group: &str) -> String {
    let mut p = String::with_capacity(group.len() + GROUP_SEPARATOR.len());
    p.push_str(group);
    p.push_str(GROUP_SEPARATOR);
    p
}

/// Every service name, by namespace and group.
#[derive(Default)]
pub(crate) struct ServiceIndex {
    namespaces: RwLock<HashMap<Box<str>, Namespace>>,
}

impl ServiceIndex {
    pub(crate) fn insert(&self, key: &ServiceKey) {
        let group = prefix(key.group());
        let mut namespaces = self.namespaces.write();
        let ns = match namespaces.get_mut(key.namespace()) {
            Some(n) => n,
            None => namespaces.entry(key.namespace().into()).or_default(),
        };
        let added = ns.groups.entry(group.into()).or_default().insert(key);
        if added && !key.grouped_name().contains(GROUP_SEPARATOR) {
            ns.ungrouped += 1;
        }
    }

    pub(crate) fn remove(&self, key: &ServiceKey) {
        let group = prefix(key.group());
        let mut namespaces = self.namespaces.write();
        let Some(ns) = namespaces.get_mut(key.namespace()) else {
            return;
        };
        let Some(list) = ns.groups.get_mut(group.as_str()) else {
            return;
        };
        if list.remove(key) && !key.grouped_name().contains(GROUP_SEPARATOR) {
            ns.ungrouped -= 1;
        }
        if list.len == 0 {
            ns.groups.remove(group.as_str());
            if ns.groups.is_empty() {
                namespaces.remove(key.namespace());
            }
        }
    }

    /// The services of `namespace` (of `group`, or every group for
    /// `None`) sorted by grouped name: how many in all, and `size` of them
    /// from `offset` on.
    pub(crate) fn page(
        &self,
        namespace: &str,
        group: Option<&str>,
        offset: usize,
        size: usize,
    ) -> (usize, Vec<ServiceKey>) {
        let namespaces = self.namespaces.read();
        let Some(ns) = namespaces.get(namespace) else {
            return (0, Vec::new());
        };
        let take = |keys: &mut dyn Iterator<Item = &ServiceKey>| -> Vec<ServiceKey> {
            keys.take(size).cloned().collect()
        };
        match group {
            Some(g) => match ns.groups.get(prefix(g).as_str()) {
                Some(list) => (list.len, take(&mut list.from(offset))),
                None => (0, Vec::new()),
            },
            None => {
                let count: usize = ns.groups.values().map(|l| l.len).sum();
                if offset >= count {
                    return (count, Vec::new());
                }
                if ns.ungrouped > 0 {
                    let mut merged = Merged::new(ns.groups.values()).skip(offset);
                    return (count, take(&mut merged));
                }
                // Groups in prefix order are the namespace in name order:
                // skip whole groups by their lengths.
                let mut skip = offset;
                let mut first = 0;
                for list in ns.groups.values() {
                    if skip < list.len {
                        break;
                    }
                    skip -= list.len;
                    first += 1;
                }
                let mut lists = ns.groups.values().skip(first);
                let head = lists.next().map(|l| l.from(skip));
                let mut keys = head
                    .into_iter()
                    .flatten()
                    .chain(lists.flat_map(|l| l.iter()));
                (count, take(&mut keys))
            }
        }
    }
}

/// Several sorted lists merged into one stream in name order.
struct Merged<'a> {
    heads: BinaryHeap<Reverse<Head<'a>>>,
}

/// The next key of one list, ordered by that key.
struct Head<'a> {
    key: &'a ServiceKey,
    rest: Box<dyn Iterator<Item = &'a ServiceKey> + 'a>,
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head<'_> {}

impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        by_name(self.key, other.key)
    }
}

impl<'a> Merged<'a> {
    fn new(lists: impl Iterator<Item = &'a SortedChunks>) -> Merged<'a> {
        let heads = lists
            .filter_map(|list| {
                let mut rest: Box<dyn Iterator<Item = &'a ServiceKey> + 'a> = Box::new(list.iter());
                let key = rest.next()?;
                Some(Reverse(Head { key, rest }))
            })
            .collect();
        Merged { heads }
    }
}

impl<'a> Iterator for Merged<'a> {
    type Item = &'a ServiceKey;

    fn next(&mut self) -> Option<&'a ServiceKey> {
        let Reverse(mut head) = self.heads.pop()?;
        let key = head.key;
        if let Some(next) = head.rest.next() {
            head.key = next;
            self.heads.push(Reverse(head));
        }
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(keys: &[ServiceKey]) -> Vec<&str> {
        keys.iter().map(ServiceKey::grouped_name).collect()
    }

    #[test]
    fn pages_of_one_group_and_of_all_groups_in_name_order() {
        let index = ServiceIndex::default();
        // Groups whose order differs from the order of their names ("A-B"
        // sorts after "A", but "A-B@@" before "A@@").
        for name in ["A@@x", "A-B@@y", "A@@a", "B@@m", "A-B@@b"] {
            index.insert(&ServiceKey::new("public", name));
        }
        index.insert(&ServiceKey::new("other", "A@@z"));
        let (count, all) = index.page("public", None, 0, 10);
        assert_eq!(count, 5);
        assert_eq!(names(&all), ["A-B@@b", "A-B@@y", "A@@a", "A@@x", "B@@m"]);
        let (count, page) = index.page("public", None, 2, 2);
        assert_eq!((count, names(&page)), (5, vec!["A@@a", "A@@x"]));
        let (count, a) = index.page("public", Some("A"), 1, 5);
        assert_eq!((count, names(&a)), (2, vec!["A@@x"]));
        assert_eq!(index.page("public", None, 5, 5), (5, Vec::new()));
        assert_eq!(index.page("nowhere", None, 0, 5), (0, Vec::new()));
        // A name without a group (core API only): merged, still in order.
        index.insert(&ServiceKey::new("public", "AAA"));
        let (count, all) = index.page("public", None, 0, 10);
        assert_eq!(count, 6);
        assert_eq!(
            names(&all),
            ["A-B@@b", "A-B@@y", "A@@a", "A@@x", "AAA", "B@@m"]
        );
        assert_eq!(index.page("public", Some("DEFAULT_GROUP"), 0, 5).0, 1);
        index.remove(&ServiceKey::new("public", "AAA"));
        index.remove(&ServiceKey::new("public", "A@@x"));
        index.remove(&ServiceKey::new("public", "A@@a"));
        index.remove(&ServiceKey::new("public", "A@@a"));
        assert_eq!(index.page("public", Some("A"), 0, 5), (0, Vec::new()));
        assert_eq!(index.page("public", None, 0, 10).0, 3);
    }

    /// Many keys in random order: chunks split, every page at every depth
    /// matches a plain sorted list, and removals keep it so.
    #[test]
    fn chunked_pages_match_a_sorted_list() {
        let index = ServiceIndex::default();
        let mut reference: Vec<String> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let group = ["G1", "G2", "DEFAULT_GROUP"][(x % 3) as usize];
            let name = format!("{group}@@s{:05}", (x >> 8) % 20_000);
            index.insert(&ServiceKey::new("public", &name));
            reference.push(name);
        }
        reference.sort();
        reference.dedup();
        // Remove every third.
        let removed: Vec<String> = reference.iter().step_by(3).cloned().collect();
        for name in &removed {
            index.remove(&ServiceKey::new("public", name));
        }
        reference.retain(|n| !removed.contains(n));
        for offset in [0, 1, 511, 512, 1023, 1024, 1500, reference.len() - 3] {
            let (count, page) = index.page("public", None, offset, 100);
            assert_eq!(count, reference.len());
            let want: Vec<&str> = reference
                .iter()
                .skip(offset)
                .take(100)
                .map(String::as_str)
                .collect();
            assert_eq!(names(&page), want, "offset {offset}");
        }
        let g1: Vec<&str> = reference
            .iter()
            .filter(|n| n.starts_with("G1@@"))
            .map(String::as_str)
            .collect();
        let mid = g1.len() / 2;
        let (count, page) = index.page("public", Some("G1"), mid, 50);
        assert_eq!(count, g1.len());
        assert_eq!(names(&page), g1[mid..(mid + 50).min(g1.len())].to_vec());
    }
}
