//! Store write and lease paths: register, beat, and the sweeper's tick,
//! at 1k, 100k and 1.1M instances.

use std::hint::black_box;

use benches::profile::{self, NAMESPACE};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use registry_core::{InstanceSpec, Millis, ServiceRef, Store, StoreConfig};

fn fleet(n: usize) -> (Store, Vec<String>) {
    let store = Store::new(StoreConfig::default());
    let names = profile::populate(&store, profile::services_for(n), n, Millis(0));
    (store, names)
}

fn beat(c: &mut Criterion) {
    let mut g = c.benchmark_group("store/beat");
    g.throughput(Throughput::Elements(1));
    for n in profile::sizes() {
        let (store, names) = fleet(n);
        let services = names.len();
        // In fleet order, as a load generator's timing wheel walks it.
        let mut j = 0usize;
        g.bench_with_input(BenchmarkId::new("sequential", n), &n, |b, &n| {
            b.iter(|| {
                j = (j + 1) % n;
                let svc = ServiceRef::new(NAMESPACE, &names[profile::service_of(j, services)]);
                black_box(store.beat(svc, profile::addr(j), Millis(1_000)))
            })
        });
        // A stride coprime with n: an order no cache or prefetcher can
        // predict, the worst case of beats arriving from many clients.
        g.bench_with_input(BenchmarkId::new("random", n), &n, |b, &n| {
            b.iter(|| {
                j = (j + 7919) % n;
                let svc = ServiceRef::new(NAMESPACE, &names[profile::service_of(j, services)]);
                black_box(store.beat(svc, profile::addr(j), Millis(1_000)))
            })
        });
    }
    g.finish();
}

fn register(c: &mut Criterion) {
    let mut g = c.benchmark_group("store/register");
    g.throughput(Throughput::Elements(1));
    for n in profile::sizes() {
        let (store, names) = fleet(n);
        let services = names.len();
        let meta = profile::instance_metadata(0);
        // A new instance in a new service: the load phase of the capacity
        // profile, where most registrations create their service.
        let mut j = n;
        g.bench_with_input(BenchmarkId::new("new_service", n), &n, |b, _| {
            b.iter(|| {
                j += 1;
                let name = profile::service_name(j);
                let spec = InstanceSpec {
                    metadata: meta.clone(),
                    ..InstanceSpec::new("DEFAULT", profile::instance_ip(j), 9090)
                };
                let svc = ServiceRef::new(NAMESPACE, &name);
                black_box(store.register(svc, &spec, Millis(1)).unwrap())
            })
        });
        // Changing an existing instance (a new weight each time): the write
        // path's copy-and-swap on a typical one-or-two-instance service.
        let mut k = 0usize;
        g.bench_with_input(BenchmarkId::new("update", n), &n, |b, &n| {
            b.iter(|| {
                k = (k + 1) % n;
                let spec = InstanceSpec {
                    weight: (k % 7) as f64 + 1.0,
                    metadata: meta.clone(),
                    ..InstanceSpec::new("DEFAULT", profile::instance_ip(k), 8080)
                };
                let svc = ServiceRef::new(NAMESPACE, &names[profile::service_of(k, services)]);
                black_box(store.register(svc, &spec, Millis(1)).unwrap())
            })
        });
    }
    g.finish();
}

fn expire(c: &mut Criterion) {
    let mut g = c.benchmark_group("store/expire_tick");
    for n in profile::sizes() {
        let (store, _) = fleet(n);
        g.throughput(Throughput::Elements(n as u64));
        // Every instance is live: the tick finds nothing to do, which is
        // the steady state the sweeper's cost target is about.
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| black_box(store.expire(Millis(1_000))))
        });
    }
    g.finish();
}

criterion_group!(benches, beat, register, expire);
criterion_main!(benches);
