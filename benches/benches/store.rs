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
        let mut j = 0usize;
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| {
                // A stride that is coprime with n walks the fleet in an
                // order the cache cannot predict.
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
        // New instances beyond the fleet, into existing services.
        let mut j = n;
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                j += 1;
                let spec = InstanceSpec {
                    metadata: meta.clone(),
                    ..InstanceSpec::new("DEFAULT", profile::instance_ip(j), 9090)
                };
                let svc = ServiceRef::new(NAMESPACE, &names[j % services]);
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
