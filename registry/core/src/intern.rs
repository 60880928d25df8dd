//! Per-shard string interning for namespaces, cluster names and metadata maps.
//!
//! Most instances share a handful of cluster names and metadata maps. The
//! shard's writer interns them so identical values are one allocation. The
//! table holds strong references; entries nobody else uses any more are
//! dropped in a collection pass that runs when the table has doubled since
//! the last pass, so the amortised cost per intern stays constant.
//!
//! Written only under the shard's writer lock.

use std::collections::HashSet;
use std::sync::Arc;

use crate::metadata::Metadata;
use crate::shared_str::SharedStr;

/// Minimum table size before a collection pass is considered.
const MIN_WATERMARK: usize = 1024;

/// A string interner owned by one shard's writer.
#[derive(Default)]
pub(crate) struct Interner {
    set: HashSet<Arc<str>, foldhash::fast::FixedState>,
    /// Cluster names and metadata buffers: what instances hold, one
    /// pointer wide (see [`SharedStr`]).
    shared: HashSet<SharedStr, foldhash::fast::FixedState>,
    watermark: usize,
}

impl Interner {
    /// Returns the shared copy of `s`, adding it if new.
    pub(crate) fn string(&mut self, s: &str) -> Arc<str> {
        if let Some(found) = self.set.get(s) {
            return found.clone();
        }
        self.collect_if_grown();
        let shared: Arc<str> = Arc::from(s);
        self.set.insert(shared.clone());
        shared
    }

    /// Returns the shared copy of the cluster name `s`, adding it if new.
    pub(crate) fn cluster(&mut self, s: &str) -> SharedStr {
        if let Some(found) = self.shared.get(s) {
            return found.clone();
        }
        self.collect_if_grown();
        let shared = SharedStr::new(s);
        self.shared.insert(shared.clone());
        shared
    }

    /// Returns a metadata map that shares its buffer with every identical map
    /// interned before.
    pub(crate) fn metadata(&mut self, m: Metadata) -> Metadata {
        match m.shared() {
            None => m,
            Some(buf) => {
                if let Some(found) = self.shared.get(buf.as_str()) {
                    return Metadata::from_shared(found.clone());
                }
                self.collect_if_grown();
                self.shared.insert(buf.clone());
                m
            }
        }
    }

    fn collect_if_grown(&mut self) {
        if self.set.len() + self.shared.len() < self.watermark.max(MIN_WATERMARK) {
            return;
        }
        // Only the table holds a reference: nobody uses the value any more.
        self.set.retain(|s| Arc::strong_count(s) > 1);
        self.shared.retain(|s| s.holders() > 1);
        self.watermark = (self.set.len() + self.shared.len()) * 2;
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.set.len() + self.shared.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_strings_share_one_allocation() {
        let mut i = Interner::default();
        let a = i.string("DEFAULT");
        let b = i.string("DEFAULT");
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn identical_metadata_shares_one_buffer() {
        let mut i = Interner::default();
        let a = i.metadata(Metadata::from_pairs([("v", "1")]).unwrap());
        let b = i.metadata(Metadata::from_pairs([("v", "1")]).unwrap());
        assert!(SharedStr::ptr_eq(a.shared().unwrap(), b.shared().unwrap()));
    }

    #[test]
    fn unused_entries_are_collected() {
        let mut i = Interner::default();
        for n in 0..(MIN_WATERMARK * 3) {
            // Dropped at once: only the table keeps them.
            let _ = i.string(&n.to_string());
        }
        let kept = i.string("kept");
        for n in 0..(MIN_WATERMARK * 3) {
            let _ = i.string(&format!("x{n}"));
        }
        assert!(i.len() < MIN_WATERMARK * 3, "table grew to {}", i.len());
        assert!(Arc::ptr_eq(&kept, &i.string("kept")));
    }
}
