//! Where the registry's memory goes: the resident set broken into parts and
//! published as `registry_memory_bytes{part=…}` gauges on `/metrics`.
//!
//! The parts, which add up to the RSS:
//! - `store_instances`, `store_services`, `store_leases`: the registry's own
//!   data, estimated from counts and struct sizes by the core
//!   ([`registry_core::StoreStats`]); the lease slab is exact;
//! - `list_cache`: encoded list bodies as the cache accounts them;
//! - `read_buffers`: connection read buffers as their budget charges them;
//! - `allocated_other`: every other live allocation (write buffers, the
//!   subscriber table, the notifier, interned names and metadata, metrics):
//!   jemalloc's `allocated` less the parts above;
//! - `allocator_overhead`: pages jemalloc holds beyond live allocations
//!   (fragmentation, freed pages not yet returned, its own metadata):
//!   `resident` less `allocated`;
//! - `outside_allocator`: the rest of the RSS (code, stacks, the kernel's
//!   view of mappings jemalloc does not report): RSS less `resident`.
//!
//! Read when `/metrics` is scraped: a jemalloc epoch advance and a few
//! counter reads, no walk over the store. Where jemalloc is not the global
//! allocator (tests), its figures are near zero and the allocator parts read
//! as zero rather than as nonsense: every difference saturates.

use registry_core::StoreStats;
use tikv_jemalloc_ctl::{epoch, stats};

use registry_proto::prometheus::{Exposition, Kind};

/// The allocator's own counters, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Bytes in live allocations.
    pub allocated: usize,
    /// Bytes in pages holding live allocations.
    pub active: usize,
    /// Bytes of physically resident pages jemalloc maps, its metadata included.
    pub resident: usize,
    /// Bytes of jemalloc's own metadata.
    pub metadata: usize,
    /// Bytes of virtual memory kept mapped but returned to the kernel.
    pub retained: usize,
}

impl AllocatorStats {
    /// Current figures; `None` when jemalloc's statistics cannot be read.
    pub fn read() -> Option<AllocatorStats> {
        // The counters are cached per epoch: advance it so they are fresh.
        epoch::advance().ok()?;
        Some(AllocatorStats {
            allocated: stats::allocated::read().ok()?,
            active: stats::active::read().ok()?,
            resident: stats::resident::read().ok()?,
            metadata: stats::metadata::read().ok()?,
            retained: stats::retained::read().ok()?,
        })
    }
}

/// What the server knows it holds, outside the allocator's view.
#[derive(Clone, Copy, Debug, Default)]
pub struct Parts {
    /// The store's counts and estimates.
    pub store: StoreStats,
    /// Bytes of the list cache.
    pub list_cache: usize,
    /// Bytes of connection read buffers.
    pub read_buffers: usize,
}

/// The process's resident set in bytes, from `/proc/self/status`.
pub fn rss_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The breakdown as `(part, bytes)` rows, in the order the header lists.
pub fn breakdown(parts: &Parts, alloc: AllocatorStats, rss: usize) -> Vec<(&'static str, usize)> {
    let known = [
        ("store_instances", parts.store.instance_bytes()),
        ("store_services", parts.store.service_bytes()),
        ("store_leases", parts.store.lease_bytes),
        ("list_cache", parts.list_cache),
        ("read_buffers", parts.read_buffers),
    ];
    let known_sum: usize = known.iter().map(|(_, b)| b).sum();
    let mut rows = known.to_vec();
    rows.push(("allocated_other", alloc.allocated.saturating_sub(known_sum)));
    rows.push((
        "allocator_overhead",
        alloc.resident.saturating_sub(alloc.allocated),
    ));
    rows.push((
        "outside_allocator",
        rss.saturating_sub(alloc.resident.max(alloc.allocated)),
    ));
    rows
}

/// Appends the memory families: the RSS, its breakdown, and jemalloc's
/// counters as they are.
pub fn render(parts: &Parts, e: &mut Exposition<'_>) {
    let rss = rss_bytes().unwrap_or(0);
    let alloc = AllocatorStats::read().unwrap_or_default();
    e.gauge(
        "registry_memory_rss_bytes",
        "Resident set size of the process.",
        rss,
    );
    const PARTS: &str = "registry_memory_bytes";
    e.family(
        PARTS,
        Kind::Gauge,
        "The resident set by part (estimates for the store; see footprint.rs).",
    );
    for (part, bytes) in breakdown(parts, alloc, rss) {
        e.sample(PARTS, &[("part", part)], bytes);
    }
    const ALLOCATOR: &str = "registry_allocator_bytes";
    e.family(ALLOCATOR, Kind::Gauge, "jemalloc's statistics.");
    for (stat, bytes) in [
        ("allocated", alloc.allocated),
        ("active", alloc.active),
        ("resident", alloc.resident),
        ("metadata", alloc.metadata),
        ("retained", alloc.retained),
    ] {
        e.sample(ALLOCATOR, &[("stat", stat)], bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_add_up_to_the_rss() {
        let parts = Parts {
            store: StoreStats {
                services: 10,
                instances: 100,
                lease_bytes: 800,
            },
            list_cache: 5_000,
            read_buffers: 4_096,
        };
        let alloc = AllocatorStats {
            allocated: 1 << 20,
            active: 1 << 21,
            resident: 3 << 20,
            metadata: 1 << 16,
            retained: 0,
        };
        let rss = 5 << 20;
        let rows = breakdown(&parts, alloc, rss);
        assert_eq!(rows.iter().map(|(_, b)| b).sum::<usize>(), rss);
        let get = |name: &str| rows.iter().find(|(p, _)| *p == name).unwrap().1;
        assert_eq!(get("allocator_overhead"), 2 << 20);
        assert_eq!(get("store_leases"), 800);
    }

    #[test]
    fn a_foreign_allocator_reads_as_zero_not_as_underflow() {
        let parts = Parts {
            list_cache: 1 << 20,
            ..Parts::default()
        };
        let rows = breakdown(&parts, AllocatorStats::default(), 1 << 22);
        for (part, bytes) in rows {
            assert!(bytes <= 1 << 22, "{part}: {bytes}");
        }
    }

    #[test]
    fn rendered_text_names_every_part() {
        let text = registry_proto::prometheus::text(|e| render(&Parts::default(), e));
        for part in ["store_instances", "list_cache", "allocator_overhead"] {
            assert!(text.contains(&format!("part=\"{part}\"")), "{text}");
        }
        assert!(text.contains("registry_memory_rss_bytes "), "{text}");
    }
}
