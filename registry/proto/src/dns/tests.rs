//! The responder against a zone of fixed instances: each rule of the
//! module header, decoded back with hickory.

use std::net::IpAddr;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};

use super::name::{Parent, ServiceName};
use super::{Host, Rcode, Responder, Transport, Zone};

/// `orders` in `public`/`DEFAULT_GROUP` with `n` instances in cluster
/// `DEFAULT` (10.0.x.y:8080, weight 2.5, metadata `v=1`), and an empty
/// service `idle`; namespace `dev` holds `orders` in group `shop`.
struct Fixed {
    n: u32,
}

impl Fixed {
    fn ip(i: u32) -> IpAddr {
        IpAddr::V4((0x0a00_0000 + i).into())
    }
}

impl Zone for Fixed {
    fn hosts(&self, name: &ServiceName, visit: &mut dyn FnMut(Host<'_>)) -> bool {
        let known = (
            name.namespace.as_str(),
            name.group.as_str(),
            name.service.as_str(),
        );
        match known {
            ("public", "DEFAULT_GROUP", "idle") => true,
            ("public", "DEFAULT_GROUP", "orders") | ("dev", "shop", "orders") => {
                if name.cluster.as_deref().is_some_and(|c| c != "DEFAULT") {
                    return false;
                }
                for i in 0..self.n {
                    visit(Host {
                        ip: Fixed::ip(i),
                        port: 8080,
                        weight: 2.5,
                        cluster: "DEFAULT",
                    });
                }
                visit(Host {
                    ip: "::1".parse().unwrap(),
                    port: 9090,
                    weight: 0.0,
                    cluster: "DEFAULT",
                });
                true
            }
            _ => false,
        }
    }

    fn instance(
        &self,
        name: &ServiceName,
        ip: IpAddr,
        port: u16,
        meta: &mut dyn FnMut(&str, &str),
    ) -> bool {
        let found = name.service == "orders" && ip == Fixed::ip(0) && port == 8080;
        if found {
            meta("v", "1");
            meta("zone", "east");
        }
        found
    }

    fn has_services(&self, parent: &Parent) -> bool {
        parent.namespace == "dev" && parent.group.as_deref().is_none_or(|g| g == "shop")
    }
}

fn query(name: &str, qtype: RecordType, edns: Option<u16>) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(4242)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true);
    let mut q = Query::query(Name::from_ascii(name).unwrap(), qtype);
    q.set_query_class(DNSClass::IN);
    m.add_query(q);
    if let Some(size) = edns {
        let mut e = Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

fn ask(name: &str, qtype: RecordType, transport: Transport, n: u32) -> (Message, Rcode) {
    let r = Responder::new("nacos.", 5).unwrap();
    let resp = r
        .respond(&query(name, qtype, None), transport, &Fixed { n }, 0)
        .expect("answered");
    let msg = Message::from_vec(&resp.bytes).unwrap();
    assert_eq!(msg.truncated(), resp.truncated);
    (msg, resp.rcode)
}

#[test]
fn a_and_aaaa_list_the_instances_authoritatively() {
    let (m, rcode) = ask("orders.nacos.", RecordType::A, Transport::Udp, 3);
    assert_eq!(
        (rcode, m.response_code()),
        (Rcode::Answer, ResponseCode::NoError)
    );
    assert_eq!(m.id(), 4242);
    assert!(m.authoritative() && !m.recursion_available() && m.recursion_desired());
    assert_eq!(m.answers().len(), 3);
    assert!(m.answers().iter().all(|r| r.ttl() == 5));
    let (m, _) = ask("OrDeRs.NaCoS.", RecordType::AAAA, Transport::Udp, 3);
    assert_eq!(m.answers().len(), 1, "the ::1 instance");
    assert_eq!(
        m.queries()[0].name().to_ascii(),
        "OrDeRs.NaCoS.",
        "the question as asked"
    );
}

#[test]
fn srv_carries_port_weight_and_a_target_that_resolves() {
    let (m, _) = ask("orders.nacos.", RecordType::SRV, Transport::Udp, 1);
    let srvs: Vec<_> = m
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            RData::SRV(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(srvs.len(), 2);
    assert_eq!(
        (srvs[0].priority(), srvs[0].weight(), srvs[0].port()),
        (0, 250, 8080)
    );
    assert_eq!(srvs[1].weight(), 0, "weight 0 stays 0");
    let target = srvs[0].target().to_ascii();
    assert_eq!(target, "0a000000-8080._.orders._._.nacos.");
    assert_eq!(m.additionals().len(), 2, "the targets' addresses");
    let (t, rcode) = ask(&target, RecordType::TXT, Transport::Udp, 1);
    assert_eq!(rcode, Rcode::Answer);
    match t.answers()[0].data() {
        RData::TXT(txt) => {
            let strings: Vec<String> = txt
                .iter()
                .map(|s| String::from_utf8(s.to_vec()).unwrap())
                .collect();
            assert_eq!(strings, ["v=1", "zone=east"]);
        }
        other => panic!("{other:?}"),
    }
    let (a, _) = ask(&target, RecordType::A, Transport::Udp, 1);
    assert_eq!(a.answers().len(), 1);
}

#[test]
fn nxdomain_and_nodata_follow_rfc_2308() {
    for name in [
        "nope.nacos.",
        "west.orders.nacos.",
        "a.b.c.d.e.f.nacos.",
        "x_zz.nacos.",
        "*.orders.nacos.",
    ] {
        let (m, rcode) = ask(name, RecordType::A, Transport::Udp, 1);
        assert_eq!(
            (rcode, m.response_code()),
            (Rcode::NxDomain, ResponseCode::NXDomain),
            "{name}"
        );
        assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);
    }
    // Known names without records of that type: the empty service, a type
    // the service does not hold, a namespace and a group above services.
    for (name, qtype) in [
        ("idle.nacos.", RecordType::A),
        ("orders.nacos.", RecordType::MX),
        ("dev.nacos.", RecordType::A),
        ("shop.dev.nacos.", RecordType::A),
        ("nacos.", RecordType::A),
    ] {
        let (m, rcode) = ask(name, qtype, Transport::Udp, 1);
        assert_eq!(
            (rcode, m.response_code()),
            (Rcode::NoData, ResponseCode::NoError),
            "{name}"
        );
        assert!(m.answers().is_empty());
        assert_eq!(m.name_servers()[0].record_type(), RecordType::SOA);
    }
    let (m, _) = ask("nacos.", RecordType::SOA, Transport::Udp, 1);
    assert_eq!(m.answers()[0].record_type(), RecordType::SOA);
}

#[test]
fn other_zones_are_refused_without_recursion() {
    let (m, rcode) = ask("example.com.", RecordType::A, Transport::Udp, 1);
    assert_eq!(
        (rcode, m.response_code()),
        (Rcode::Refused, ResponseCode::Refused)
    );
    assert!(!m.recursion_available() && m.answers().is_empty());
}

#[test]
fn a_large_service_truncates_over_udp_and_fills_tcp() {
    let (m, _) = ask("orders.nacos.", RecordType::A, Transport::Udp, 100);
    assert!(m.truncated());
    let (m, _) = ask("orders.nacos.", RecordType::A, Transport::Tcp, 100);
    assert!(!m.truncated());
    assert_eq!(m.answers().len(), 100);
    // More than one message can hold: as many as fit, and TC says so.
    let r = Responder::new("nacos.", 5).unwrap();
    let resp = r
        .respond(
            &query("orders.nacos.", RecordType::SRV, None),
            Transport::Tcp,
            &Fixed { n: 10_000 },
            7,
        )
        .unwrap();
    assert!(resp.bytes.len() <= 65_535 && resp.truncated);
    let m = Message::from_vec(&resp.bytes).unwrap();
    // Nothing past the last record (hickory's decoder would not notice).
    assert_eq!(m.to_vec().unwrap().len(), resp.bytes.len());
    assert!(m.answers().len() > 1_000, "{}", m.answers().len());
}

#[test]
fn edns_raises_the_udp_limit() {
    let r = Responder::new("nacos.", 5).unwrap();
    let q = query("orders.nacos.", RecordType::A, Some(4096));
    let resp = r.respond(&q, Transport::Udp, &Fixed { n: 40 }, 0).unwrap();
    assert!(!resp.truncated && resp.bytes.len() > 512 && resp.bytes.len() <= 1232);
    let m = Message::from_vec(&resp.bytes).unwrap();
    assert!(m.extensions().is_some(), "an EDNS query gets OPT back");
}

#[test]
fn hostile_packets_get_formerr_or_nothing() {
    let r = Responder::new("nacos.", 5).unwrap();
    let zone = Fixed { n: 1 };
    assert!(r.respond(&[], Transport::Udp, &zone, 0).is_none());
    assert!(r.respond(&[1, 2, 3], Transport::Udp, &zone, 0).is_none());
    let mut q = query("orders.nacos.", RecordType::A, None);
    // Huge counts: refused from the header alone.
    q[4..12].copy_from_slice(&[0xff; 8]);
    let resp = r.respond(&q, Transport::Udp, &zone, 0).unwrap();
    assert_eq!(resp.rcode, Rcode::FormErr);
    // A compression pointer to itself in the question name.
    let mut q = query("orders.nacos.", RecordType::A, None);
    q.truncate(12);
    q.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
    let resp = r.respond(&q, Transport::Udp, &zone, 0).unwrap();
    assert_eq!(resp.rcode, Rcode::FormErr);
    assert_eq!(Message::from_vec(&resp.bytes).unwrap().id(), 4242);
    // A question name pointing into the header reads it with the id and
    // RD bit cleared, so two ids get the same answer (the answer cache's
    // rule), found by fuzzing: the id's first byte read as a label length.
    let mut q = query("orders.nacos.", RecordType::A, None);
    q.truncate(12);
    q.extend_from_slice(&[0xc0, 0, 0, 12, 0, 1]);
    q[0] = 0;
    let first = r.respond(&q, Transport::Udp, &zone, 0).unwrap().bytes;
    q[0] = 0x5a;
    q[1] = 0x01;
    q[2] ^= 1;
    let mut second = r.respond(&q, Transport::Udp, &zone, 0).unwrap().bytes;
    second[..2].copy_from_slice(&first[..2]);
    second[2] ^= 1;
    assert_eq!(second, first, "only the id and RD bit differ");
    // A response is never answered.
    let mut q = query("orders.nacos.", RecordType::A, None);
    q[2] |= 0x80;
    assert!(r.respond(&q, Transport::Udp, &zone, 0).is_none());
}

#[test]
fn rotation_has_bounded_starts_spread_over_a_large_service() {
    let r = Responder::new("nacos.", 5).unwrap();
    let first_a = |n: u32, rotate: usize| {
        let q = query("orders.nacos.", RecordType::A, Some(1232));
        let resp = r.respond(&q, Transport::Tcp, &Fixed { n }, rotate).unwrap();
        let msg = Message::from_vec(&resp.bytes).unwrap();
        let first = msg.answers()[0].data().to_string();
        (first, resp.rotations, resp.bytes)
    };
    // Up to ROTATIONS records: every one starts an answer in turn.
    let starts: std::collections::HashSet<_> = (0..4).map(|k| first_a(4, k).0).collect();
    assert_eq!(starts.len(), 4);
    assert_eq!(first_a(4, 0).1, 5, "four and the IPv6 one");
    // Past it: ROTATIONS starts, spread over the whole service, and
    // rotations equal modulo ROTATIONS answer the same bytes.
    let n = 20 * super::ROTATIONS as u32;
    let starts: Vec<_> = (0..super::ROTATIONS).map(|k| first_a(n, k).0).collect();
    assert_eq!(
        starts
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len(),
        super::ROTATIONS
    );
    assert_eq!(first_a(n, 3).1, super::ROTATIONS);
    assert_eq!(first_a(n, 3).2, first_a(n, 3 + super::ROTATIONS).2);
    assert_eq!(starts[super::ROTATIONS - 1], Fixed::ip(n - 20).to_string());
    // A type without records to order has one order.
    let q = query("orders.nacos.", RecordType::TXT, None);
    assert_eq!(
        r.respond(&q, Transport::Udp, &Fixed { n: 4 }, 1)
            .unwrap()
            .rotations,
        1
    );
}

#[test]
fn the_id_and_rd_bit_change_the_answer_there_alone() {
    let r = Responder::new("nacos.", 5).unwrap();
    let zone = Fixed { n: 40 };
    let mut queries = vec![
        query("orders.nacos.", RecordType::A, None),
        query("orders.nacos.", RecordType::SRV, Some(1232)),
        query("missing.nacos.", RecordType::A, None),
        query("idle.nacos.", RecordType::A, Some(4096)),
        query("other.zone.", RecordType::A, None),
    ];
    let mut bad_version = query("orders.nacos.", RecordType::A, Some(1232));
    let at = bad_version.len() - 5; // the OPT record's version byte
    bad_version[at] = 1;
    queries.push(bad_version);
    for q in &queries {
        for transport in [Transport::Udp, Transport::Tcp] {
            let a = r.respond(q, transport, &zone, 3).unwrap();
            let mut other = q.clone();
            other[..2].copy_from_slice(&[0xbe, 0xef]);
            other[2] ^= 1;
            let b = r.respond(&other, transport, &zone, 3).unwrap();
            assert_eq!(&b.bytes[..2], &[0xbe, 0xef]);
            assert_eq!(b.bytes[2] & 1, other[2] & 1, "RD copied");
            assert_eq!(a.bytes[2] ^ b.bytes[2], 1);
            assert_eq!(a.bytes[3..], b.bytes[3..]);
            assert_eq!((a.rcode, a.truncated), (b.rcode, b.truncated));
        }
    }
}
