//! Builds Nacos's capacity profile in memory and prints one JSON object:
//! `services`, `instances`, `rss_bytes`, `bytes_per_instance` (RSS growth
//! divided by instances) and `build_seconds`; and, to check the store's
//! parts on `/metrics` against reality, `allocated_growth_bytes` (jemalloc's
//! live bytes, which do not depend on the CPU or the build's speed) next to
//! the store's own estimates (`estimated_*_bytes`, as `/metrics` shows them).
//! Two runs with the same services and different instances split the real
//! cost into per-instance and per-service bytes.
//!
//! With `--drain`, it then deregisters the whole fleet in a fixed
//! pseudo-random order, as `nacos-1x-report`'s drain does, and adds
//! `drain_peak_resident_bytes` (jemalloc's resident bytes at their highest
//! during the drain, sampled every 10,000 deregistrations),
//! `drain_start_resident_bytes` and the allocated bytes before and after
//! (`drain_start_allocated_bytes`, `drain_end_allocated_bytes`): where the
//! peak RSS of that profile comes from once the fleet is full.
//!
//! `cargo run --release -p benches --bin footprint -- --services 600000 --instances 1100000`

use std::time::Instant;

use benches::{flags, measure, profile};
use registry_core::{Millis, ServiceRef, Store, StoreConfig};
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
    let drain = args
        .iter()
        .any(|a| a == "--drain")
        .then(|| drain(&store, services, instances));
    let mut out = serde_json::json!({
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
    if let Some(d) = drain {
        out["drain_start_resident_bytes"] = d.start_resident.into();
        out["drain_peak_resident_bytes"] = d.peak_resident.into();
        out["drain_start_allocated_bytes"] = d.start_allocated.into();
        out["drain_end_allocated_bytes"] = d.end_allocated.into();
    }
    println!("{out}");
}

/// What the drain did to jemalloc's figures.
struct Drain {
    start_allocated: usize,
    start_resident: usize,
    peak_resident: usize,
    end_allocated: usize,
}

/// Deregisters every instance `populate` registered, in the order of a
/// fixed full-period LCG over the instance numbers (random-looking, the
/// same every run), sampling resident bytes as it goes.
fn drain(store: &Store, services: usize, instances: usize) -> Drain {
    let names: Vec<String> = (0..services).map(profile::service_name).collect();
    let resident = || AllocatorStats::read().map_or(0, |a| a.resident);
    let start_resident = resident();
    let start_allocated = AllocatorStats::read().map_or(0, |a| a.allocated);
    let mut peak_resident = start_resident;
    // x -> 5x + 1 mod 2^k has full period (Hull-Dobell); skip values past
    // the fleet.
    let modulus = instances.next_power_of_two().max(4);
    let mut x = 0usize;
    let mut done = 0;
    while done < instances {
        x = (x.wrapping_mul(5).wrapping_add(1)) & (modulus - 1);
        if x >= instances {
            continue;
        }
        let svc = profile::service_of(x, services);
        let addr = profile::addr(x);
        store
            .deregister(
                ServiceRef::new(profile::NAMESPACE, &names[svc]),
                addr,
                true,
                Millis(0),
            )
            .expect("deregistration succeeds");
        done += 1;
        if done % 10_000 == 0 {
            peak_resident = peak_resident.max(resident());
        }
    }
    assert_eq!(store.stats().instances, 0, "every instance deregistered");
    Drain {
        start_allocated,
        start_resident,
        peak_resident: peak_resident.max(resident()),
        end_allocated: AllocatorStats::read().map_or(0, |a| a.allocated),
    }
}
