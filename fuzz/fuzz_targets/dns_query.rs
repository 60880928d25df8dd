//! Arbitrary datagrams as DNS queries to the DNS door's responder (compressed-name
//! loops, short packets, huge counts, any opcode or EDNS): `respond` must never
//! panic, and every answer must be a response to the query's id that fits its
//! transport, and differs from the answer to another id and RD bit in those
//! alone (what the DNS door's answer cache relies on). Kept in step with
//! `dns_pipeline` in registry/proto/tests/fuzz_smoke.rs.

#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use registry_proto::dns::name::{Parent, ServiceName};
use registry_proto::dns::{Host, Responder, Transport, Zone};

/// `a` with two instances (one IPv6), `b` with 300 (past any UDP size).
struct Fixed;

impl Zone for Fixed {
    fn hosts(&self, name: &ServiceName, visit: &mut dyn FnMut(Host<'_>)) -> bool {
        let n = match name.service.as_str() {
            "a" => 1,
            "b" => 300,
            _ => return false,
        };
        for i in 0..n {
            let ip = IpAddr::V4((0x0a00_0001 + i).into());
            visit(Host { ip, port: 80, weight: 1.0, cluster: "DEFAULT" });
        }
        visit(Host { ip: "::1".parse().unwrap(), port: 80, weight: 0.5, cluster: "DEFAULT" });
        true
    }

    fn instance(
        &self,
        name: &ServiceName,
        _ip: IpAddr,
        _port: u16,
        meta: &mut dyn FnMut(&str, &str),
    ) -> bool {
        meta("k", "v");
        name.service == "a"
    }

    fn has_services(&self, parent: &Parent) -> bool {
        parent.namespace == "public"
    }
}

fuzz_target!(|data: &[u8]| {
    let responder = Responder::new("nacos.", 5).unwrap();
    for (transport, limit) in [(Transport::Udp, 1232), (Transport::Tcp, 65_535)] {
        let Some(r) = responder.respond(data, transport, &Fixed, data.len()) else {
            continue;
        };
        assert!(r.bytes.len() >= 12 && r.bytes.len() <= limit);
        assert_eq!(r.bytes[..2], data[..2], "the query's id");
        assert!(r.bytes[2] & 0x80 != 0, "QR: a response");
        // What the DNS door's answer cache relies on: another id and RD
        // bit change the answer in its id and RD bit alone.
        let mut other = data.to_vec();
        other[0] ^= 0x5a;
        other[2] ^= 1;
        let again = responder.respond(&other, transport, &Fixed, data.len());
        let mut again = again.expect("answered as before").bytes;
        again[0] ^= 0x5a;
        again[2] ^= 1;
        assert_eq!(again, r.bytes, "only the id and RD bit differ");
    }
});
