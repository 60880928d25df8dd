//! Push fan-out: one change encoded once (list JSON, push packet) and sent
//! to 10k subscribers with batched `sendmmsg`, as the notifier does.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use registry_core::{InstanceSpec, Metadata, Millis, ServiceRef, Store, StoreConfig};
use registry_proto::naming::ServiceName;
use registry_proto::udp::push::encode_push;
use registry_server::convert::{encode_list, ListView};
use registry_server::pusher;
/// `n` distinct subscriber addresses served by a few real sockets: each
/// receiver is bound to `0.0.0.0:port`, so every 127.x.y.z address at that
/// port reaches it. Receivers never read; once their buffers fill the
/// kernel drops datagrams at the socket, as it would for a slow client.
fn subscribers(n: usize) -> (Vec<UdpSocket>, Vec<SocketAddr>) {
    let receivers: Vec<UdpSocket> = (0..8)
        .map(|_| UdpSocket::bind("0.0.0.0:0").expect("bind receiver"))
        .collect();
    let ports: Vec<u16> = receivers
        .iter()
        .map(|r| r.local_addr().expect("addr").port())
        .collect();
    let addrs = (0..n)
        .map(|i| {
            let host = i / ports.len();
            let ip = Ipv4Addr::new(127, 1, (host / 250) as u8, (host % 250) as u8 + 1);
            SocketAddr::from((ip, ports[i % ports.len()]))
        })
        .collect();
    (receivers, addrs)
}

fn fanout(c: &mut Criterion) {
    let store = Store::new(StoreConfig::default());
    let svc = ServiceRef::new("public", "DEFAULT_GROUP@@fanout");
    for i in 0..10u8 {
        let spec = InstanceSpec {
            metadata: Metadata::from_pairs([("version", "1.0.0")]).expect("valid"),
            ..InstanceSpec::new("DEFAULT", [10, 0, 0, i].into(), 8080)
        };
        store.register(svc, &spec, Millis(0)).expect("register");
    }
    let snapshot = store.snapshot(svc).expect("service");
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let n = if std::env::args().any(|a| a == "--bench") {
        10_000
    } else {
        100
    };
    let (_receivers, targets) = subscribers(n);

    let mut g = c.benchmark_group("notify/fanout");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(20);
    g.bench_with_input(BenchmarkId::new("encode_once_send", n), &n, |b, _| {
        b.iter(|| {
            let view = ListView {
                service: ServiceName::new("DEFAULT_GROUP", "fanout"),
                clusters: "",
                cluster_list: &[],
                healthy_only: false,
                cache_millis: 10_000,
                last_ref_time: 1,
            };
            let mut body = Vec::with_capacity(4096);
            encode_list(Some(&snapshot), &view, &mut body);
            let mut packet = Vec::with_capacity(body.len());
            encode_push(&body, 7, &mut packet);
            black_box(pusher::send_all(&socket, &packet, &targets))
        })
    });
    g.finish();
}

criterion_group!(benches, fanout);
criterion_main!(benches);
