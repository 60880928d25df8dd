//! Multi-threaded stress: readers loading snapshots while writers and the
//! sweeper run never see a torn state, an older revision than one they saw
//! before, or one older than a write already acknowledged to them.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use registry_core::{InstanceAddr, InstanceSpec, Metadata, Millis, ServiceRef, Store, StoreConfig};

const SERVICES: usize = 16;
const IP: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));

fn name(i: usize) -> String {
    format!("G@@stress-{i}")
}

#[test]
fn readers_never_see_torn_or_stale_snapshots() {
    let store = Arc::new(Store::new(StoreConfig {
        shards: 4,
        ..StoreConfig::default()
    }));
    let names: Arc<Vec<String>> = Arc::new((0..SERVICES).map(name).collect());
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..SERVICES).map(|_| AtomicU64::new(0)).collect());
    let clock = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(3);

    let mut handles = Vec::new();
    // Two writers, each owning half the services: register and deregister
    // instances whose metadata names their own port, so a torn instance
    // (fields from two writes) is detectable.
    for w in 0..2usize {
        let (store, names, acked, clock, stop) = (
            store.clone(),
            names.clone(),
            acked.clone(),
            clock.clone(),
            stop.clone(),
        );
        handles.push(thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let svc = w + 2 * (n as usize % (SERVICES / 2));
                // Each service cycles through 1,200 ports: past the flat
                // limit (64) and past one root of leaves (~600), so lists
                // two and three levels deep are read while written too.
                let port = ((n as usize / (SERVICES / 2)) % 1_200) as u16;
                let now = Millis(clock.load(Ordering::Relaxed));
                let key = ServiceRef::new("public", &names[svc]);
                let written = if n % 3 == 2 {
                    let addr = InstanceAddr {
                        cluster: "DEFAULT",
                        ip: IP,
                        port,
                    };
                    store.deregister(key, addr, true, now).unwrap()
                } else {
                    let mut spec = InstanceSpec::new("DEFAULT", IP, port);
                    spec.weight = f64::from(port);
                    spec.metadata = Metadata::from_pairs([("port", port.to_string())]).unwrap();
                    store.register(key, &spec, now).unwrap()
                };
                acked[svc].fetch_max(written.revision, Ordering::Release);
                n = n.wrapping_add(1);
            }
        }));
    }
    // The sweeper, with a clock that runs fast enough to expire instances.
    {
        let (store, clock, stop) = (store.clone(), clock.clone(), stop.clone());
        handles.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let now = clock.fetch_add(50, Ordering::Relaxed) + 50;
                store.expire(Millis(now));
            }
        }));
    }
    // Readers.
    let mut readers = Vec::new();
    for r in 0..2usize {
        let (store, names, acked, stop) =
            (store.clone(), names.clone(), acked.clone(), stop.clone());
        readers.push(thread::spawn(move || {
            let mut seen = [0u64; SERVICES];
            let mut loads = 0u64;
            let mut longest = 0usize;
            while !stop.load(Ordering::Relaxed) {
                for svc in 0..SERVICES {
                    let floor = acked[(svc + r) % SERVICES].load(Ordering::Acquire);
                    let svc = (svc + r) % SERVICES;
                    let Some(snap) = store.snapshot(ServiceRef::new("public", &names[svc])) else {
                        continue;
                    };
                    loads += 1;
                    assert!(
                        snap.revision() >= floor,
                        "revision {} older than acknowledged {floor}",
                        snap.revision()
                    );
                    assert!(snap.revision() >= seen[svc], "revision went backwards");
                    seen[svc] = snap.revision();
                    let inst = snap.instances();
                    longest = longest.max(inst.len());
                    for (a, b) in inst.iter().zip(inst.iter().skip(1)) {
                        assert!(a.port < b.port, "unsorted or duplicate instances");
                    }
                    for i in inst {
                        assert_eq!(
                            i.metadata.get("port"),
                            Some(i.port.to_string().as_str()),
                            "torn instance"
                        );
                        assert_eq!(i.weight, f64::from(i.port), "torn instance");
                    }
                }
            }
            (loads, longest)
        }));
    }
    while Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    let mut longest = 0;
    for r in readers {
        let (loads, seen) = r.join().unwrap();
        assert!(loads > 1000, "reader made only {loads} loads");
        longest = longest.max(seen);
    }
    // Lists past the flat limit (64) were read: the tree's paths ran.
    assert!(longest > 64, "longest list read: {longest}");
    eprintln!("longest list read: {longest}");
    // The sweeper really ran: with the clock far ahead, everything expires.
    let now = clock.load(Ordering::Relaxed) + 60_000;
    store.expire(Millis(now));
    assert_eq!(store.stats().instances, 0);
}
