//! loadgen's own cost per simulated request on the HTTP fleet's hot path: writing a
//! light beat (the naming builders, as every request was written before, against the
//! worker's template) and framing a pipelined batch of 32 beat replies
//! (`parse_response` against the connection's [`Framer`], which remembers heads).
//! The end-to-end figure is loadgen's CPU seconds per request in
//! `scripts/loadtest.sh`; this isolates the two parts that changed.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use loadgen::conn::Framer;
use loadgen::dialect::Dialect;
use loadgen::fleet::Naming;
use loadgen::segment::Segment;
use loadgen::template::Templates;
use registry_proto::http1::{parse_response, write_request, Method};
use registry_proto::naming::client::{self, InstanceSpec};
use registry_proto::naming::ServiceName;

fn naming() -> Naming {
    Naming {
        namespace: "public".into(),
        group: "DEFAULT_GROUP".into(),
        prefix: "svc".into(),
        cluster: "DEFAULT".into(),
        services: 600_000,
        watched: 10_000,
        port: 8080,
        segment: Segment::WHOLE,
    }
}

const HOST: &str = "127.0.0.1:18849";

/// The worker's slow path for one beat: name and IP formatted, every parameter
/// percent-encoded, then framed.
fn built(
    n: &Naming,
    s: u32,
    ip: Ipv4Addr,
    scratch: &mut (String, String, String),
    out: &mut Vec<u8>,
) {
    use std::fmt::Write as _;
    let (name, ip_text, path) = scratch;
    n.service_name(s, name);
    ip_text.clear();
    let _ = write!(ip_text, "{ip}");
    let spec = InstanceSpec {
        namespace_id: &n.namespace,
        cluster: &n.cluster,
        ..InstanceSpec::new(ServiceName::new(&n.group, name), ip_text, n.port)
    };
    path.clear();
    client::beat_light(path, &spec);
    write_request(out, Method::Put, path, HOST, None);
}

fn encode(c: &mut Criterion) {
    let n = naming();
    let templates = Templates::new(&n, HOST, Dialect::V1);
    let beat = templates.beat_light.expect("a beat template");
    let mut g = c.benchmark_group("beat-request");
    g.throughput(Throughput::Elements(1));
    let mut out = Vec::with_capacity(8192);
    let mut scratch = (String::new(), String::new(), String::new());
    let mut i = 0u32;
    g.bench_function("builders", |b| {
        b.iter(|| {
            i = i.wrapping_add(7919) % 1_100_000;
            out.clear();
            built(
                &n,
                i % 600_000,
                Ipv4Addr::from(0x0a00_0000 + i),
                &mut scratch,
                &mut out,
            );
            black_box(out.len())
        })
    });
    g.bench_function("template", |b| {
        b.iter(|| {
            i = i.wrapping_add(7919) % 1_100_000;
            out.clear();
            beat.write(&mut out, i % 600_000, Ipv4Addr::from(0x0a00_0000 + i));
            black_box(out.len())
        })
    });
    g.finish();
}

fn frame(c: &mut Criterion) {
    let reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: 64\r\n\r\n{\"clientBeatInterval\":5000,\"code\":10200,\"lightBeatEnabled\":true}";
    let wire = reply.repeat(32);
    let mut g = c.benchmark_group("beat-replies-32");
    g.throughput(Throughput::Elements(32));
    g.bench_function("parse_response", |b| {
        b.iter(|| {
            let mut at = 0;
            let mut bodies = 0;
            while let Ok(Some((r, used))) = parse_response(&wire[at..]) {
                bodies += r.body.len();
                at += used;
            }
            black_box(bodies)
        })
    });
    let mut framer = Framer::default();
    g.bench_function("framer", |b| {
        b.iter(|| {
            let mut at = 0;
            let mut bodies = 0;
            while let Ok(Some((r, used))) = framer.frame(&wire[at..]) {
                bodies += r.body.len();
                at += used;
            }
            black_box(bodies)
        })
    });
    g.finish();
}

criterion_group!(benches, encode, frame);
criterion_main!(benches);
