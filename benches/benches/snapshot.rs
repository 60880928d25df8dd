//! Snapshot reads: a query's load + select, single-threaded and with reader
//! threads running while a writer changes services.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::profile::{self, NAMESPACE};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use registry_core::{InstanceSpec, Millis, ServiceRef, Store, StoreConfig, View};

fn fleet(n: usize) -> (Arc<Store>, Arc<Vec<String>>) {
    let store = Store::new(StoreConfig::default());
    let names = profile::populate(&store, profile::services_for(n), n, Millis(0));
    (Arc::new(store), Arc::new(names))
}

fn read(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot/read");
    g.throughput(Throughput::Elements(1));
    for n in profile::sizes() {
        let (store, names) = fleet(n);
        let mut i = 0usize;
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                i = (i + 7919) % names.len();
                let svc = ServiceRef::new(NAMESPACE, &names[i]);
                black_box(store.read(svc, |s| s.instances().len()))
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("snapshot/query");
    g.throughput(Throughput::Elements(1));
    for n in profile::sizes() {
        let (store, names) = fleet(n);
        let mut i = 0usize;
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                i = (i + 7919) % names.len();
                let svc = ServiceRef::new(NAMESPACE, &names[i]);
                black_box(store.read(svc, |s| s.select(&View::default()).hosts.len()))
            })
        });
    }
    g.finish();
}

/// Reads per second with `threads` readers while one writer re-registers
/// instances as fast as it can.
fn read_with_writer(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot/read_with_writer");
    let n = *profile::sizes().last().expect("at least one size");
    let (store, names) = fleet(n);
    for threads in [1usize, 2] {
        g.throughput(Throughput::Elements(threads as u64));
        g.bench_with_input(
            BenchmarkId::new(format!("{n}"), threads),
            &threads,
            |b, &threads| {
                b.iter_custom(|iters| {
                    let stop = Arc::new(AtomicBool::new(false));
                    let writer = {
                        let (store, names, stop) = (store.clone(), names.clone(), stop.clone());
                        std::thread::spawn(move || {
                            let mut j = 0usize;
                            while !stop.load(Ordering::Relaxed) {
                                j += 1;
                                let mut spec =
                                    InstanceSpec::new("DEFAULT", profile::instance_ip(j % n), 8080);
                                spec.weight = (j % 3) as f64;
                                let svc = ServiceRef::new(
                                    NAMESPACE,
                                    &names[profile::service_of(j % n, names.len())],
                                );
                                let _ = store.register(svc, &spec, Millis(1));
                            }
                        })
                    };
                    let start = Instant::now();
                    let readers: Vec<_> = (0..threads)
                        .map(|t| {
                            let (store, names) = (store.clone(), names.clone());
                            std::thread::spawn(move || {
                                let mut i = t * 13;
                                for _ in 0..iters {
                                    i = (i + 7919) % names.len();
                                    let svc = ServiceRef::new(NAMESPACE, &names[i]);
                                    black_box(store.read(svc, |s| s.instances().len()));
                                }
                            })
                        })
                        .collect();
                    for r in readers {
                        r.join().expect("reader");
                    }
                    let elapsed = start.elapsed();
                    stop.store(true, Ordering::Relaxed);
                    writer.join().expect("writer");
                    // Time per iteration across all readers: lower is better
                    // and `threads` readers doing `iters` each count `threads`
                    // elements per iteration.
                    elapsed.max(Duration::from_nanos(1))
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, read, read_with_writer);
criterion_main!(benches);
