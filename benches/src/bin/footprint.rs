//! Builds Nacos's capacity profile in memory and prints one JSON object:
//! `services`, `instances`, `rss_bytes`, `bytes_per_instance` (RSS growth
//! divided by instances) and `build_seconds`; and, to check the store's
//! parts on `/metrics` against reality, `allocated_growth_bytes` (jemalloc's
//! live bytes, which do not depend on the CPU or the build's speed) next to
//! the store's own estimates (`estimated_*_bytes`, as `/metrics` shows them).
//! Two runs with the same services and different instances split the real
//! cost into per-instance and per-service bytes.
//!
//! `cargo run --release -p benches --bin footprint -- --services 600000 --instances 1100000`

use std::time::Instant;

use benches::{flags, measure, profile};
use registry_core::{Millis, Store, StoreConfig};
use registry_server::footprint::AllocatorStats;

// The server's allocator, so the figure is the server's.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let parsed = (|| -> Result<(usize, usize, usize), String> {
        Ok((
            flags::value(&args, "--services", 600_000)?,
            flags::value(&args, "--instances", 1_100_000)?,
            flags::value(&args, "--shards", 64)?,
        ))
    })();
    let (services, instances, shards) = match parsed {
        Ok(v) if v.1 >= v.0 && v.0 > 0 => v,
        Ok(_) => {
            eprintln!("footprint: need 0 < --services <= --instances");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!(
                "footprint: {e}\nusage: footprint [--services N] [--instances N] [--shards N]"
            );
            std::process::exit(2);
        }
    };
    let config = StoreConfig {
        shards,
        ..StoreConfig::default()
    };
    if let Err(e) = config.validate() {
        eprintln!("footprint: {e}");
        std::process::exit(2);
    }
    let before = measure::rss_bytes().unwrap_or(0);
    let allocated_before = AllocatorStats::read().map_or(0, |a| a.allocated);
    let started = Instant::now();
    let store = Store::new(config);
    profile::populate(&store, services, instances, Millis(0));
    let build_seconds = started.elapsed().as_secs_f64();
    let after = measure::rss_bytes().unwrap_or(0);
    let allocated = AllocatorStats::read()
        .map_or(0, |a| a.allocated)
        .saturating_sub(allocated_before);
    let stats = store.stats();
    assert_eq!(stats.instances, instances, "every instance registered");
    let grown = after.saturating_sub(before);
    let out = serde_json::json!({
        "services": stats.services,
        "instances": stats.instances,
        "rss_bytes": after,
        "rss_growth_bytes": grown,
        "bytes_per_instance": grown as f64 / instances as f64,
        "build_seconds": build_seconds,
        "allocated_growth_bytes": allocated,
        "estimated_instances_bytes": stats.instance_bytes(),
        "estimated_services_bytes": stats.service_bytes(),
        "lease_bytes": stats.lease_bytes,
        "shards": shards,
    });
    println!("{out}");
}
