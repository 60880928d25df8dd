//! The cache inside the real door: a real store, the real responder, and
//! the uncached answer as the reference each hit must equal byte for byte.

use std::net::IpAddr;
use std::sync::Arc;

use registry_core::{InstanceSpec, Millis, ServiceRef, Store, StoreConfig};
use registry_proto::dns::{Rcode, Responder, Transport};

use super::super::{Dns, DnsStats, StoreZone};
use super::{AnswerCache, Source, MAX_ANSWER};

const ORDERS: (&str, &str) = ("public", "DEFAULT_GROUP@@orders");

fn orders() -> ServiceRef<'static> {
    ServiceRef::new(ORDERS.0, ORDERS.1)
}

fn store_of(n: u8) -> Arc<Store> {
    let store = Arc::new(Store::new(StoreConfig::default()));
    for i in 0..n {
        add(&store, i);
    }
    store
}

fn add(store: &Store, i: u8) {
    let ip: IpAddr = [10, 0, 0, i + 1].into();
    store
        .register(orders(), &InstanceSpec::new("DEFAULT", ip, 8080), Millis(0))
        .unwrap();
}

/// A query for `name` of `qtype` (1: A, 33: SRV) with `id` and RD set or
/// not, optionally with EDNS offering 1232 bytes.
fn query(name: &str, qtype: u16, id: u16, rd: bool, edns: bool) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[u8::from(rd), 0, 0, 1, 0, 0, 0, 0, 0, u8::from(edns)]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&[0, 1]);
    if edns {
        q.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
    }
    q
}

fn door(store: &Arc<Store>) -> (Dns, Arc<DnsStats>) {
    let stats = Arc::new(DnsStats::default());
    let dns = Dns::new("nacos.", 5, store.clone(), stats.clone()).unwrap();
    (dns, stats)
}

/// What the responder answers without a cache.
fn uncached(store: &Store, q: &[u8], transport: Transport, rotate: usize) -> Vec<u8> {
    let responder = Responder::new("nacos.", 5).unwrap();
    let zone = StoreZone::new(store);
    responder
        .respond(q, transport, &zone, rotate)
        .unwrap()
        .bytes
}

#[test]
fn a_hit_is_the_uncached_answer_to_the_new_id_and_rd_bit() {
    let store = store_of(3);
    let (dns, stats) = door(&store);
    for (qtype, edns) in [(1, false), (33, false), (1, true)] {
        let before = stats.cached.get();
        // Three orders of three instances: the first three queries fill
        // them, the next three are copies.
        for rotate in 0..6u16 {
            let q = query("orders.nacos.", qtype, 1000 + rotate, rotate % 2 == 0, edns);
            let got = dns.answer(&q, Transport::Udp).unwrap();
            let rotate = dns.rotate.load(std::sync::atomic::Ordering::Relaxed) - 1;
            assert_eq!(
                got,
                uncached(&store, &q, Transport::Udp, rotate),
                "{qtype} {rotate}"
            );
            assert_eq!(&got[..2], &q[..2], "the new id");
        }
        assert_eq!(stats.cached.get() - before, 3, "qtype {qtype} edns {edns}");
    }
    // Hits are counted as the answers they copy.
    assert_eq!(stats.answers(Rcode::Answer), 18);
}

#[test]
fn a_revision_change_misses_and_the_next_answer_sees_it() {
    let store = store_of(1);
    let (dns, stats) = door(&store);
    let q = query("orders.nacos.", 1, 7, true, false);
    let records = |a: &[u8]| u16::from_be_bytes([a[6], a[7]]);
    assert_eq!(records(&dns.answer(&q, Transport::Udp).unwrap()), 1);
    assert_eq!(records(&dns.answer(&q, Transport::Udp).unwrap()), 1);
    assert_eq!(stats.cached.get(), 1);
    add(&store, 1);
    let a = dns.answer(&q, Transport::Udp).unwrap();
    assert_eq!(records(&a), 2, "the new instance is seen at once");
    assert_eq!(stats.cached.get(), 1, "a miss");
    // Deregistering the last instances empties the service: NODATA, also
    // seen by the next query.
    for i in 0..2u8 {
        let addr = registry_core::InstanceAddr {
            cluster: "DEFAULT",
            ip: [10, 0, 0, i + 1].into(),
            port: 8080,
        };
        store.deregister(orders(), addr, true, Millis(1)).unwrap();
    }
    let a = dns.answer(&q, Transport::Udp).unwrap();
    assert_eq!(records(&a), 0);
}

#[test]
fn answers_that_read_no_single_service_are_built_every_time() {
    let store = store_of(1);
    let (dns, stats) = door(&store);
    for name in ["missing.nacos.", "nacos.", "other.zone."] {
        let q = query(name, 1, 9, true, false);
        for _ in 0..3 {
            dns.answer(&q, Transport::Udp).unwrap();
        }
    }
    assert_eq!(stats.cached.get(), 0);
    assert_eq!(stats.answers(Rcode::NxDomain), 3);
    // A missing service's NXDOMAIN turns into an answer once it exists.
    let q = query("later.nacos.", 1, 9, true, false);
    assert_eq!(dns.answer(&q, Transport::Udp).unwrap()[3] & 0x0f, 3);
    let later = ServiceRef::new("public", "DEFAULT_GROUP@@later");
    let spec = InstanceSpec::new("DEFAULT", [10, 1, 0, 1].into(), 80);
    store.register(later, &spec, Millis(0)).unwrap();
    assert_eq!(dns.answer(&q, Transport::Udp).unwrap()[3] & 0x0f, 0);
}

#[test]
fn udp_and_tcp_answers_are_kept_apart() {
    // 200 instances: truncated over UDP, whole over TCP.
    let store = Arc::new(Store::new(StoreConfig::default()));
    for i in 0..200u8 {
        let ip: IpAddr = [10, 0, 1, i].into();
        let spec = InstanceSpec::new("DEFAULT", ip, 8080);
        store.register(orders(), &spec, Millis(0)).unwrap();
    }
    let (dns, _) = door(&store);
    let q = query("orders.nacos.", 1, 1, true, false);
    for _ in 0..40 {
        let udp = dns.answer(&q, Transport::Udp).unwrap();
        assert!(udp.len() <= 512 && udp[2] & 0x02 != 0, "TC over UDP");
        let tcp = dns.answer(&q, Transport::Tcp).unwrap();
        assert!(tcp.len() > 512 && tcp[2] & 0x02 == 0, "whole over TCP");
    }
}

#[test]
fn the_cache_stays_within_its_budget() {
    let budget = 64 * 1024;
    let cache = AnswerCache::new(budget);
    let response = registry_proto::dns::Response {
        bytes: vec![0; MAX_ANSWER],
        rcode: Rcode::Answer,
        truncated: false,
        rotations: 16,
    };
    for i in 0..10_000u32 {
        let q = query(&format!("s{i}.nacos."), 1, 1, true, false);
        let source = Source {
            namespace: "public".into(),
            grouped: format!("DEFAULT_GROUP@@s{i}").into(),
            revision: 1,
        };
        cache.put(&q, Transport::Udp, i as usize, source, &response);
        assert!(cache.used() <= budget, "{} after {i}", cache.used());
    }
    assert!(cache.used() > budget / 2, "it does keep answers");
    let oversized = registry_proto::dns::Response {
        bytes: vec![0; MAX_ANSWER + 1],
        ..response
    };
    let empty = AnswerCache::new(budget);
    let q = query("big.nacos.", 1, 1, true, false);
    let source = Source {
        namespace: "public".into(),
        grouped: "DEFAULT_GROUP@@big".into(),
        revision: 1,
    };
    empty.put(&q, Transport::Tcp, 0, source, &oversized);
    assert_eq!(empty.used(), 0, "large answers are not kept");
}
