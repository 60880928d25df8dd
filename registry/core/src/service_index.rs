//! The sorted index of service names behind `GET /service/list`.
//!
//! One `BTreeSet` of service keys per (namespace, group), ordered by
//! grouped name. A page of one group walks its set from the start of the
//! page, so page 1 costs O(page) whatever the registry holds (600k
//! services included); a deeper page costs its offset in tree steps
//! (nanoseconds each), and the count is the set's length. Listing every
//! group (`*`) merges the namespace's groups in name order with a heap,
//! O((offset + page) · log groups).
//!
//! Written by the store when a service is created or removed, under that
//! shard's writer lock and then this index's lock (always in that order);
//! read by listings under the read lock, which writers hold only for one
//! tree insert or removal.

use std::cmp::Reverse;
use std::collections::{btree_set, BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::iter::Peekable;

use parking_lot::RwLock;

use crate::model::ServiceKey;

/// A service key ordered by its grouped name (the namespace is the same
/// for every key of one set).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ByName(ServiceKey);

impl Ord for ByName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.grouped_name().cmp(other.0.grouped_name())
    }
}

impl PartialOrd for ByName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Groups of one namespace, each a sorted set of its services.
type Groups = BTreeMap<Box<str>, BTreeSet<ByName>>;

/// Every service name, by namespace and group.
#[derive(Default)]
pub(crate) struct ServiceIndex {
    namespaces: RwLock<HashMap<Box<str>, Groups>>,
}

impl ServiceIndex {
    pub(crate) fn insert(&self, key: &ServiceKey) {
        let mut namespaces = self.namespaces.write();
        let groups = match namespaces.get_mut(key.namespace()) {
            Some(g) => g,
            None => namespaces.entry(key.namespace().into()).or_default(),
        };
        let set = match groups.get_mut(key.group()) {
            Some(s) => s,
            None => groups.entry(key.group().into()).or_default(),
        };
        set.insert(ByName(key.clone()));
    }

    pub(crate) fn remove(&self, key: &ServiceKey) {
        let mut namespaces = self.namespaces.write();
        let Some(groups) = namespaces.get_mut(key.namespace()) else {
            return;
        };
        let Some(set) = groups.get_mut(key.group()) else {
            return;
        };
        set.remove(&ByName(key.clone()));
        if set.is_empty() {
            groups.remove(key.group());
            if groups.is_empty() {
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
        let Some(groups) = namespaces.get(namespace) else {
            return (0, Vec::new());
        };
        match group {
            Some(g) => match groups.get(g) {
                Some(set) => (
                    set.len(),
                    set.iter()
                        .skip(offset)
                        .take(size)
                        .map(|k| k.0.clone())
                        .collect(),
                ),
                None => (0, Vec::new()),
            },
            None => {
                let count = groups.values().map(BTreeSet::len).sum();
                if offset >= count {
                    return (count, Vec::new());
                }
                let page = Merged::new(groups.values())
                    .skip(offset)
                    .take(size)
                    .cloned()
                    .collect();
                (count, page)
            }
        }
    }
}

/// The sets of several groups merged into one stream in name order.
struct Merged<'a> {
    heads: BinaryHeap<Reverse<Head<'a>>>,
}

/// The next key of one set, ordered by that key.
struct Head<'a> {
    key: &'a ByName,
    rest: Peekable<btree_set::Iter<'a, ByName>>,
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Head<'_> {}

impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(other.key)
    }
}

impl<'a> Merged<'a> {
    fn new(sets: impl Iterator<Item = &'a BTreeSet<ByName>>) -> Merged<'a> {
        let heads = sets
            .filter_map(|set| {
                let mut rest = set.iter().peekable();
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
        Some(&key.0)
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
        // Groups whose order differs from the order of their grouped names
        // ("A-B@@" sorts before "A@@"), and one name without a group.
        for name in ["A@@x", "A-B@@y", "A@@a", "B@@m", "A-B@@b", "plain"] {
            index.insert(&ServiceKey::new("public", name));
        }
        index.insert(&ServiceKey::new("other", "A@@z"));
        let (count, all) = index.page("public", None, 0, 10);
        assert_eq!(count, 6);
        assert_eq!(
            names(&all),
            ["A-B@@b", "A-B@@y", "A@@a", "A@@x", "B@@m", "plain"]
        );
        let (count, page) = index.page("public", None, 2, 3);
        assert_eq!((count, names(&page)), (6, vec!["A@@a", "A@@x", "B@@m"]));
        let (count, a) = index.page("public", Some("A"), 1, 5);
        assert_eq!((count, names(&a)), (2, vec!["A@@x"]));
        assert_eq!(index.page("public", Some("DEFAULT_GROUP"), 0, 5).0, 1);
        assert_eq!(index.page("public", None, 6, 5), (6, Vec::new()));
        assert_eq!(index.page("nowhere", None, 0, 5), (0, Vec::new()));
        index.remove(&ServiceKey::new("public", "A@@x"));
        index.remove(&ServiceKey::new("public", "A@@a"));
        index.remove(&ServiceKey::new("public", "A@@a"));
        assert_eq!(index.page("public", Some("A"), 0, 5), (0, Vec::new()));
        assert_eq!(index.page("public", None, 0, 10).0, 4);
    }
}
