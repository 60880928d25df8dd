//! `beat-fleet`: `Store::beat` in a random order over a fleet far past the
//! caches (2M instances in 1M services by default), for counting the cache
//! misses of one beat under cachegrind or callgrind (issue 14, target 1).
//!
//! The gates' `hotpaths beat` beats 1,000 instances in fleet order: every
//! line it touches stays in the caches, so it counts instructions only. At
//! Nacos's scale each beat's lookups (the service map, the service's cell and
//! snapshot, the instance list, the lease slab) land on lines no other recent
//! beat touched, and those misses, not the instructions, set the beat's cost.
//!
//! The program builds the fleet (`benches::profile::populate`), runs
//! `--warmup` beats to bring the simulated caches to their steady state, then
//! `--beats` beats in the never-inlined function `measured`, so that
//! `--toggle-collect=*measured*` counts only those. Each beat picks an
//! instance by a fixed pseudo-random sequence and writes its service's name
//! into a reused buffer, as a server finds it in its read buffer: the loop
//! reads no table of its own that could miss. `--dry` runs the same loop
//! without calling the store, so the loop's own cost can be subtracted.
//!
//! ```text
//! cargo build --release -p benches --no-default-features --bin beat-fleet
//! setarch -R valgrind --tool=callgrind --cache-sim=yes --toggle-collect='*measured*' \
//!     target/release/beat-fleet --beats 200000
//! ```
//! `scripts/beat-misses.sh` runs this with and without `--dry` and prints
//! the misses per beat.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use benches::{flags, profile};
use registry_core::{BeatOutcome, Millis, ServiceRef, Store, StoreConfig};

// The server's allocator: where the fleet's objects land decides which of
// them share lines and pages.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct Args {
    services: usize,
    instances: usize,
    beats: u64,
    warmup: u64,
    dry: bool,
    wait: bool,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let a = Args {
        services: flags::value(args, "--services", 1_000_000)?,
        instances: flags::value(args, "--instances", 2_000_000)?,
        beats: flags::value(args, "--beats", 200_000)?,
        warmup: flags::value(args, "--warmup", 100_000)?,
        dry: args.iter().any(|a| a == "--dry"),
        wait: args.iter().any(|a| a == "--wait"),
    };
    if a.services == 0 || a.services > a.instances || a.instances >= 1 << 24 {
        return Err("need 0 < --services <= --instances < 2^24".into());
    }
    Ok(a)
}

/// splitmix64: a fixed, well-spread sequence, so every run beats the same
/// instances in the same order.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Beats `n` instances drawn from the sequence at `first`; returns how many
/// were renewed (with `dry`, how many would have been called).
#[inline(never)]
fn beat_random(store: &Store, a: &Args, first: u64, n: u64, name: &mut String) -> u64 {
    let mut renewed = 0u64;
    for i in first..first + n {
        let j = (mix(i) % a.instances as u64) as usize;
        profile::write_service_name(name, profile::service_of(j, a.services));
        let service = ServiceRef::new(profile::NAMESPACE, name);
        let addr = profile::addr(j);
        if a.dry {
            black_box((service, addr));
            renewed += 1;
            continue;
        }
        let outcome = store.beat(service, addr, Millis(1_000));
        renewed += u64::from(matches!(outcome, BeatOutcome::Renewed { .. }));
    }
    renewed
}

#[inline(never)]
fn warm_up(store: &Store, a: &Args, name: &mut String) -> u64 {
    beat_random(store, a, 0, a.warmup, name)
}

#[inline(never)]
fn measured(store: &Store, a: &Args, name: &mut String) -> u64 {
    beat_random(store, a, a.warmup, a.beats, name)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = match parse(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "beat-fleet: {e}\nusage: beat-fleet [--services N] [--instances N] \
                 [--beats N] [--warmup N] [--dry] [--wait]"
            );
            return ExitCode::from(2);
        }
    };
    let store = Store::new(StoreConfig::default());
    let started = Instant::now();
    // The names are rebuilt per beat; the fleet's own copies are the store's.
    drop(profile::populate(
        &store,
        a.services,
        a.instances,
        Millis(1_000),
    ));
    let build_s = started.elapsed().as_secs_f64();
    if a.wait {
        // Under `valgrind --instr-atstart=no` the build runs uninstrumented
        // (minutes faster); the caller turns instrumentation on with
        // `callgrind_control -i on` and then sends a line.
        eprintln!("beat-fleet: ready");
        let mut line = String::new();
        if std::io::stdin().read_line(&mut line).is_err() {
            return ExitCode::from(2);
        }
    }
    let mut name = String::with_capacity(64);
    let warm = warm_up(&store, &a, &mut name);
    let started = Instant::now();
    let renewed = measured(&store, &a, &mut name);
    let ns = started.elapsed().as_nanos() as f64 / a.beats.max(1) as f64;
    if warm != a.warmup || renewed != a.beats {
        eprintln!("beat-fleet: {renewed} of {} beats renewed", a.beats);
        return ExitCode::from(3);
    }
    println!(
        "{{\"services\":{},\"instances\":{},\"beats\":{},\"dry\":{},\"build_seconds\":{build_s:.2},\"ns_per_beat\":{ns:.1}}}",
        a.services, a.instances, a.beats, a.dry
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_beat_of_a_small_fleet_renews_and_the_dry_loop_counts_the_same() {
        let store = Store::new(StoreConfig::default());
        let mut a = Args {
            services: 50,
            instances: 120,
            beats: 500,
            warmup: 100,
            dry: false,
            wait: false,
        };
        drop(profile::populate(
            &store,
            a.services,
            a.instances,
            Millis(1_000),
        ));
        let mut name = String::new();
        assert_eq!(warm_up(&store, &a, &mut name), a.warmup);
        assert_eq!(measured(&store, &a, &mut name), a.beats);
        a.dry = true;
        assert_eq!(measured(&store, &a, &mut name), a.beats);
        // The draw covers the fleet, not a corner of it.
        let drawn: std::collections::HashSet<u64> =
            (0..2_000).map(|i| mix(i) % a.instances as u64).collect();
        assert_eq!(drawn.len(), a.instances);
        assert!(parse(&["--services".into(), "0".into()]).is_err());
    }
}
