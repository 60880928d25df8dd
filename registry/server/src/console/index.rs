//! The console's copy of the service names, for searches by substring and
//! the per-namespace counts, which the store's own sorted index (exact
//! pages by group) does not answer.
//!
//! The store keeps each name behind its own allocation: a search over 600k
//! keys takes a cache miss per name (about a second on a busy 2-core
//! machine). This index copies every name once into one string, sorted,
//! so a search reads memory front to back (milliseconds), and is replaced
//! as a whole (an immutable `Arc`, swapped under a short lock).
//!
//! Freshness: counts on a page are always live (read from the page's
//! snapshots); only *which* services exist may lag. While the console is
//! in use, [`refresh`] rebuilds the index off the request path when the
//! store's service count changed and the index is [`REBUILD_AFTER_MS`] old,
//! or when it is [`MAX_AGE_MS`] old; a page view finding no index, or one
//! older than [`STALE_MS`] (the console was idle), rebuilds it before
//! answering. Nothing runs while nobody looks at the console.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use registry_core::model::GROUP_SEPARATOR;
use registry_core::{Millis, Store};
use tokio_util::sync::CancellationToken;

use crate::state::App;

/// A changed store is re-indexed at most this often while viewed.
pub const REBUILD_AFTER_MS: u64 = 2_000;
/// An unchanged store is re-indexed this often while viewed (a create and
/// a delete leave the count unchanged).
pub const MAX_AGE_MS: u64 = 15_000;
/// An index this old is rebuilt before answering (the console was idle).
pub const STALE_MS: u64 = 60_000;
/// The console counts as in use this long after its last page view.
const IN_USE_MS: u64 = 60_000;

/// One immutable index.
pub struct ServiceIndex {
    /// When it was built (server clock).
    pub built_at: Millis,
    /// The store's service count when it was built.
    services: usize,
    /// Every grouped name, concatenated in index order, so a search reads
    /// memory front to back instead of jumping around it.
    names: String,
    /// Per namespace (sorted): its name and its range in `entries`.
    namespaces: Vec<(String, Range<usize>)>,
    /// Each service, sorted by name within each namespace's range.
    entries: Vec<Entry>,
}

/// Where one grouped name lies in `names`: `start..end`, its service name
/// (after `@@`) from `name`.
#[derive(Clone, Copy)]
struct Entry {
    start: u32,
    name: u32,
    end: u32,
}

/// What a search asks for.
pub struct Query<'a> {
    /// Namespace id.
    pub namespace: &'a str,
    /// Text the service name must contain (any case); empty for all.
    pub name: &'a str,
    /// Text the group must contain (any case); empty for all.
    pub group: &'a str,
    /// Page number, from 1.
    pub page_no: usize,
    /// Services per page.
    pub page_size: usize,
}

impl ServiceIndex {
    /// Indexes every service of `store`.
    pub fn build(store: &Store, now: Millis) -> ServiceIndex {
        let services = store.stats().services;
        let mut names = String::with_capacity(services * 48);
        let mut spaces: Vec<String> = Vec::new();
        let mut raw: Vec<(u16, u32, u32)> = Vec::with_capacity(services);
        let mut last = usize::MAX;
        store.for_each_service_key(|key| {
            let ns = key.namespace();
            if spaces.get(last).is_none_or(|s| s != ns) {
                last = spaces.iter().position(|s| s == ns).unwrap_or_else(|| {
                    spaces.push(ns.to_string());
                    spaces.len() - 1
                });
            }
            let start = names.len();
            names.push_str(key.grouped_name());
            // Namespaces are few (u16) and names short; the store bounds both.
            raw.push((last as u16, start as u32, names.len() as u32));
        });
        let mut order: Vec<usize> = (0..spaces.len()).collect();
        order.sort_by(|a, b| spaces[*a].cmp(&spaces[*b]));
        let mut rank = vec![0u16; spaces.len()];
        for (r, id) in order.iter().enumerate() {
            rank[*id] = r as u16;
        }
        let text = |(_, s, e): &(u16, u32, u32)| &names[*s as usize..*e as usize];
        raw.sort_unstable_by(|a, b| {
            rank[a.0 as usize]
                .cmp(&rank[b.0 as usize])
                .then_with(|| text(a).cmp(text(b)))
        });
        // Sorted, so each namespace's entries are one run.
        let mut namespaces: Vec<(String, Range<usize>)> = Vec::with_capacity(spaces.len());
        for (i, (ns, _, _)) in raw.iter().enumerate() {
            let ns = &spaces[*ns as usize];
            match namespaces.last_mut() {
                Some((last, range)) if last == ns => range.end = i + 1,
                _ => namespaces.push((ns.clone(), i..i + 1)),
            }
        }
        let mut sorted = String::with_capacity(names.len());
        let entries = raw
            .iter()
            .map(|r| {
                let grouped = text(r);
                let start = sorted.len();
                sorted.push_str(grouped);
                // The store's keys are always grouped; an ungrouped one
                // would be all name, no group.
                let name = separator(grouped).map_or(start, |i| start + i + GROUP_SEPARATOR.len());
                Entry {
                    start: start as u32,
                    name: name as u32,
                    end: sorted.len() as u32,
                }
            })
            .collect();
        ServiceIndex {
            built_at: now,
            services,
            names: sorted,
            namespaces,
            entries,
        }
    }

    fn grouped(&self, e: Entry) -> &str {
        &self.names[e.start as usize..e.end as usize]
    }

    /// Namespaces and their service counts, sorted by namespace.
    pub fn namespaces(&self) -> impl Iterator<Item = (&str, usize)> {
        self.namespaces.iter().map(|(n, r)| (n.as_str(), r.len()))
    }

    /// The grouped names of one page of matches, and how many match.
    pub fn search(&self, q: &Query<'_>) -> (usize, Vec<&str>) {
        let range = self
            .namespaces
            .binary_search_by(|(n, _)| n.as_str().cmp(q.namespace))
            .map_or(0..0, |i| self.namespaces[i].1.clone());
        let entries = &self.entries[range];
        let skip = (q.page_no.max(1) - 1).saturating_mul(q.page_size);
        if q.name.is_empty() && q.group.is_empty() {
            let page = entries.iter().skip(skip).take(q.page_size);
            return (entries.len(), page.map(|e| self.grouped(*e)).collect());
        }
        let (mut count, mut page) = (0, Vec::with_capacity(q.page_size.min(entries.len())));
        let names = self.names.as_bytes();
        for e in entries {
            let (start, name, end) = (e.start as usize, e.name as usize, e.end as usize);
            // Both parts are ASCII (the naming API allows `[0-9a-zA-Z@.:_-]`).
            let group = &names[start..name.saturating_sub(GROUP_SEPARATOR.len()).max(start)];
            if contains_ignore_case(&names[name..end], q.name)
                && contains_ignore_case(group, q.group)
            {
                if count >= skip && page.len() < q.page_size {
                    page.push(self.grouped(*e));
                }
                count += 1;
            }
        }
        (count, page)
    }
}

/// Where `@@` is in a grouped name: a byte search, as `str::find` would
/// build a searcher per key.
fn separator(grouped: &str) -> Option<usize> {
    grouped
        .as_bytes()
        .windows(GROUP_SEPARATOR.len())
        .position(|w| w == GROUP_SEPARATOR.as_bytes())
}

/// Whether `haystack` contains `needle`, ignoring ASCII case (names are
/// ASCII: `[0-9a-zA-Z@.:_-]`); an empty needle matches everything.
fn contains_ignore_case(haystack: &[u8], needle: &str) -> bool {
    let n = needle.as_bytes();
    n.is_empty() || haystack.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// The console's state kept between requests: the current index and when
/// a page was last viewed. Written by page views and [`refresh`].
#[derive(Default)]
pub struct Console {
    index: Mutex<Option<Arc<ServiceIndex>>>,
    /// Server-clock ms of the last page view, plus one (0: never viewed).
    viewed: AtomicU64,
}

impl Console {
    /// The index to answer a page view from, building it first when there
    /// is none or it is older than [`STALE_MS`].
    pub fn index(&self, store: &Store, now: Millis) -> Arc<ServiceIndex> {
        self.viewed.store(now.0 + 1, Ordering::Relaxed);
        if let Some(i) = self.current() {
            if now.0.saturating_sub(i.built_at.0) < STALE_MS {
                return i;
            }
        }
        self.rebuild(store, now)
    }

    fn current(&self) -> Option<Arc<ServiceIndex>> {
        self.index.lock().clone()
    }

    fn rebuild(&self, store: &Store, now: Millis) -> Arc<ServiceIndex> {
        // Built outside the lock: readers keep the old index meanwhile.
        let fresh = Arc::new(ServiceIndex::build(store, now));
        *self.index.lock() = Some(fresh.clone());
        fresh
    }

    /// Whether [`refresh`] should rebuild now.
    fn due(&self, store: &Store, now: Millis) -> bool {
        let viewed = self.viewed.load(Ordering::Relaxed);
        if viewed == 0 || now.0.saturating_sub(viewed - 1) > IN_USE_MS {
            return false;
        }
        self.current().is_some_and(|i| {
            let age = now.0.saturating_sub(i.built_at.0);
            age >= MAX_AGE_MS || (age >= REBUILD_AFTER_MS && store.stats().services != i.services)
        })
    }
}

/// Keeps the index fresh while the console is in use: checks once a
/// second and rebuilds on a blocking thread, off the request path. Holds
/// only a weak handle, so it never keeps a stopped server alive; ends when
/// `stop` fires or the server is gone.
pub async fn refresh(app: Weak<App>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(strong) = app.upgrade() else { return };
        if !strong.console.due(&strong.store, strong.clock.now()) {
            continue;
        }
        let rebuilt = tokio::task::spawn_blocking(move || {
            let now = strong.clock.now();
            strong.console.rebuild(&strong.store, now);
        });
        let _ = rebuilt.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_core::{InstanceSpec, ServiceRef, StoreConfig};

    fn store(names: &[(&str, &str)]) -> Store {
        let s = Store::new(StoreConfig {
            shards: 4,
            ..StoreConfig::default()
        });
        for (ns, name) in names {
            let spec = InstanceSpec::new("DEFAULT", "10.0.0.1".parse().unwrap(), 80);
            s.register(ServiceRef::new(ns, name), &spec, Millis(0))
                .unwrap();
        }
        s
    }

    fn q<'a>(namespace: &'a str, name: &'a str, group: &'a str, page_no: usize) -> Query<'a> {
        Query {
            namespace,
            name,
            group,
            page_no,
            page_size: 2,
        }
    }

    #[test]
    fn pages_are_sorted_per_namespace_and_searches_count_all_matches() {
        let s = store(&[
            ("public", "G@@b"),
            ("dev", "G@@a"),
            ("public", "G@@a"),
            ("public", "H@@ab"),
            ("public", "DEFAULT_GROUP@@Abc"),
        ]);
        let i = ServiceIndex::build(&s, Millis(5));
        assert_eq!(
            i.namespaces().collect::<Vec<_>>(),
            [("dev", 1), ("public", 4)]
        );
        assert_eq!(
            i.search(&q("public", "", "", 1)),
            (4, vec!["DEFAULT_GROUP@@Abc", "G@@a"])
        );
        assert_eq!(
            i.search(&q("public", "", "", 2)),
            (4, vec!["G@@b", "H@@ab"])
        );
        assert_eq!(i.search(&q("public", "", "", 3)), (4, vec![]));
        assert_eq!(
            i.search(&q("public", "A", "", 1)),
            (3, vec!["DEFAULT_GROUP@@Abc", "G@@a"])
        );
        assert_eq!(i.search(&q("public", "A", "", 2)), (3, vec!["H@@ab"]));
        assert_eq!(i.search(&q("public", "", "h", 1)), (1, vec!["H@@ab"]));
        assert_eq!(i.search(&q("nope", "", "", 1)), (0, vec![]));
    }

    #[test]
    fn views_rebuild_a_missing_or_stale_index_and_refresh_only_while_in_use() {
        let s = store(&[("public", "G@@a")]);
        let c = Console::default();
        assert!(!c.due(&s, Millis(0)), "never viewed: nothing to refresh");
        let first = c.index(&s, Millis(1_000));
        assert_eq!(first.built_at, Millis(1_000));
        assert!(Arc::ptr_eq(&first, &c.index(&s, Millis(2_000))));
        // A new service makes it due after REBUILD_AFTER_MS, not before.
        let spec = InstanceSpec::new("DEFAULT", "10.0.0.1".parse().unwrap(), 80);
        s.register(ServiceRef::new("public", "G@@b"), &spec, Millis(0))
            .unwrap();
        assert!(!c.due(&s, Millis(1_000 + REBUILD_AFTER_MS - 1)));
        assert!(c.due(&s, Millis(1_000 + REBUILD_AFTER_MS)));
        // Unchanged, it is due only at MAX_AGE_MS.
        let second = c.rebuild(&s, Millis(4_000));
        assert!(!c.due(&s, Millis(4_000 + MAX_AGE_MS - 1)));
        assert!(c.due(&s, Millis(4_000 + MAX_AGE_MS)));
        assert_eq!(second.search(&q("public", "", "", 1)).0, 2);
        // Idle: no refresh; the next view rebuilds the stale index itself.
        let idle = 2_000 + IN_USE_MS + 1;
        assert!(!c.due(&s, Millis(idle)));
        let later = c.index(&s, Millis(4_000 + STALE_MS));
        assert_eq!(later.built_at, Millis(4_000 + STALE_MS));
    }
}
