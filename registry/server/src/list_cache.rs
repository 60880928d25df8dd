//! Encoded instance lists, computed at most once per service revision and
//! view while cached, shared by every reader and every push of it.
//!
//! Keys name the service and the view (clusters exactly as sent,
//! healthy-only, and whether the reader is a push subscriber, which changes
//! `cacheMillis`); values carry the revision they encode, so a newer
//! revision simply replaces them. The cache holds at most its byte budget:
//! when an insert crosses it, entries are evicted until it is back under
//! three quarters. 600k cold services cost nothing until they are read.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use foldhash::fast::FixedState;

/// One encoded list.
pub struct CachedList {
    /// The service revision it encodes.
    pub revision: u64,
    /// The JSON body.
    pub body: Box<[u8]>,
}

/// The cache.
pub struct ListCache {
    map: papaya::HashMap<Box<str>, Arc<CachedList>, FixedState>,
    bytes: AtomicUsize,
    budget: usize,
}

/// Overhead charged per entry beyond its body and key.
const ENTRY_OVERHEAD: usize = 96;

impl ListCache {
    /// A cache holding at most `budget` bytes (0 disables caching).
    pub fn new(budget: usize) -> ListCache {
        ListCache {
            map: papaya::HashMap::builder()
                .hasher(FixedState::with_seed(0x11))
                .build(),
            bytes: AtomicUsize::new(0),
            budget,
        }
    }

    /// Writes the cache key of a view into `key`.
    pub fn key(
        key: &mut String,
        namespace: &str,
        grouped: &str,
        clusters: &str,
        healthy_only: bool,
        subscribed: bool,
    ) {
        key.clear();
        key.push_str(namespace);
        key.push('\u{1}');
        key.push_str(grouped);
        key.push('\u{1}');
        key.push_str(clusters);
        key.push('\u{1}');
        key.push(if healthy_only { 'h' } else { 'a' });
        key.push(if subscribed { 's' } else { 'p' });
    }

    /// The cached list for `key` if it encodes `revision`.
    pub fn get(&self, key: &str, revision: u64) -> Option<Arc<CachedList>> {
        let map = self.map.pin();
        map.get(key).filter(|c| c.revision == revision).cloned()
    }

    /// Caches `body` as the encoding of `revision`, unless a newer one is
    /// already there. Returns the shared entry.
    pub fn put(&self, key: &str, revision: u64, body: Vec<u8>) -> Arc<CachedList> {
        let entry = Arc::new(CachedList {
            revision,
            body: body.into_boxed_slice(),
        });
        if self.budget == 0 {
            return entry;
        }
        let size = entry.body.len() + key.len() + ENTRY_OVERHEAD;
        let map = self.map.pin();
        self.bytes.fetch_add(size, Ordering::Relaxed);
        if let Some(old) = map.insert(Box::from(key), entry.clone()) {
            self.bytes.fetch_sub(
                old.body.len() + key.len() + ENTRY_OVERHEAD,
                Ordering::Relaxed,
            );
        }
        if self.bytes.load(Ordering::Relaxed) > self.budget {
            self.evict(&map);
        }
        entry
    }

    fn evict(
        &self,
        map: &papaya::HashMapRef<'_, Box<str>, Arc<CachedList>, FixedState, impl papaya::Guard>,
    ) {
        let target = self.budget / 4 * 3;
        let victims: Vec<Box<str>> = map.keys().cloned().collect();
        for k in victims {
            if self.bytes.load(Ordering::Relaxed) <= target {
                break;
            }
            if let Some(v) = map.remove(&k) {
                self.bytes
                    .fetch_sub(v.body.len() + k.len() + ENTRY_OVERHEAD, Ordering::Relaxed);
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_only_the_same_revision() {
        let c = ListCache::new(1 << 20);
        let mut k = String::new();
        ListCache::key(&mut k, "public", "G@@a", "", false, false);
        c.put(&k, 3, b"three".to_vec());
        assert_eq!(&*c.get(&k, 3).unwrap().body, b"three");
        assert!(c.get(&k, 4).is_none());
        c.put(&k, 4, b"four".to_vec());
        assert!(c.get(&k, 3).is_none());
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn stays_within_budget() {
        let budget = 64 * 1024;
        let c = ListCache::new(budget);
        let mut k = String::new();
        for i in 0..1000 {
            ListCache::key(&mut k, "public", &format!("G@@s{i}"), "", false, false);
            c.put(&k, 1, vec![b'x'; 1000]);
            assert!(c.bytes() <= budget + 2000, "{} bytes", c.bytes());
        }
        assert!(c.len() < 1000);
        assert!(!c.is_empty());
    }
}
