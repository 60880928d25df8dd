//! Property tests: the parsers never panic on arbitrary bytes, and every encoder's
//! output decodes back to what was encoded.

use proptest::prelude::*;

use registry_proto::http1::{
    parse_request, parse_response, write_request, write_response, ContentType, Limits, Method,
};
use registry_proto::naming::list::{HeartbeatTimes, HostView, ServiceInfo, ServiceInfoView};
use registry_proto::naming::{Metadata, ParseLimits, ServiceName};
use registry_proto::params::{Params, QueryWriter};
use registry_proto::udp::ack::{encode_ack_of, parse_ack, AckKind};
use registry_proto::udp::push::{decode_push, encode_push, Encoding, GZIP_THRESHOLD};

proptest! {
    #[test]
    fn parse_request_never_panics(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        let limits = Limits::default();
        if let Ok(Some((req, used))) = parse_request(&data, &limits) {
            prop_assert!(used > 0 && used <= data.len());
            // The request is framed by its own bytes alone.
            let again = parse_request(&data[..used], &limits).unwrap().unwrap();
            prop_assert_eq!(again.0, req);
        }
    }

    #[test]
    fn parse_request_never_panics_on_near_misses(
        head in "(GET|PUT|POST|DELETE|PATCH|HEAD|X) /[a-z/%?=&@0-9]{0,40} HTTP/1\\.[01]\r\n",
        headers in prop::collection::vec(
            "(Content-Length|Transfer-Encoding|Connection|Content-Type|Expect|X-A): ?[ -~]{0,20}\r\n", 0..6),
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut wire = head.into_bytes();
        for h in headers {
            wire.extend_from_slice(h.as_bytes());
        }
        wire.extend_from_slice(b"\r\n");
        wire.extend_from_slice(&tail);
        let _ = parse_request(&wire, &Limits::default());
    }

    #[test]
    fn parse_response_never_panics(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(Some((_, used))) = parse_response(&data) {
            prop_assert!(used > 0 && used <= data.len());
        }
    }

    #[test]
    fn requests_round_trip(
        method in prop::sample::select(vec![Method::Get, Method::Post, Method::Put, Method::Delete, Method::Patch]),
        path in "/[a-zA-Z0-9/._-]{0,60}",
        query in "[a-zA-Z0-9=&%+._-]{0,80}",
        host in "[a-z0-9.:-]{1,30}",
        body in prop::option::of(prop::collection::vec(any::<u8>(), 0..300)),
    ) {
        let target = if query.is_empty() { path.clone() } else { format!("{path}?{query}") };
        let mut wire = Vec::new();
        write_request(&mut wire, method, &target, &host, body.as_deref().map(|b| ("text/plain", b)));
        let (req, used) = parse_request(&wire, &Limits::default()).unwrap().unwrap();
        prop_assert_eq!(used, wire.len());
        prop_assert_eq!(req.method, method);
        prop_assert_eq!(req.path, path.as_str());
        prop_assert_eq!(req.query, query.as_str());
        prop_assert_eq!(req.host(), Some(host.as_str()));
        prop_assert_eq!(&*req.body, body.as_deref().unwrap_or(b""));
    }

    #[test]
    fn responses_round_trip(
        status in prop::sample::select(vec![200u16, 400, 403, 404, 405, 413, 500, 501, 503]),
        body in prop::collection::vec(any::<u8>(), 0..3000),
        keep_alive in any::<bool>(),
    ) {
        let mut wire = Vec::new();
        write_response(&mut wire, status, ContentType::Json, &body, keep_alive);
        let (res, used) = parse_response(&wire).unwrap().unwrap();
        prop_assert_eq!(used, wire.len());
        prop_assert_eq!(res.status, status);
        prop_assert_eq!(res.keep_alive, keep_alive);
        prop_assert_eq!(&*res.body, body.as_slice());
    }

    #[test]
    fn chunked_bodies_round_trip(
        body in prop::collection::vec(any::<u8>(), 0..3000),
        sizes in prop::collection::vec(1usize..700, 1..20),
    ) {
        let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let mut rest = &body[..];
        let mut i = 0;
        while !rest.is_empty() {
            let n = sizes[i % sizes.len()].min(rest.len());
            wire.extend_from_slice(format!("{n:X};x=y\r\n").as_bytes());
            wire.extend_from_slice(&rest[..n]);
            wire.extend_from_slice(b"\r\n");
            rest = &rest[n..];
            i += 1;
        }
        wire.extend_from_slice(b"0\r\n\r\n");
        let (res, used) = parse_response(&wire).unwrap().unwrap();
        prop_assert_eq!(used, wire.len());
        prop_assert_eq!(&*res.body, body.as_slice());
    }

    #[test]
    fn push_packets_round_trip(data in any::<String>(), last_ref_time in any::<u64>(), repeat in 1usize..200) {
        let data = data.repeat(repeat);
        let mut out = Vec::new();
        let enc = encode_push(data.as_bytes(), last_ref_time, &mut out);
        let p = decode_push(&out).unwrap();
        prop_assert_eq!(p.data, data);
        prop_assert_eq!(p.last_ref_time, last_ref_time);
        prop_assert_eq!(p.compressed, enc == Encoding::Gzip);
        if enc == Encoding::Plain {
            prop_assert!(out.len() < GZIP_THRESHOLD);
        }
    }

    #[test]
    fn decode_push_never_panics(data in prop::collection::vec(any::<u8>(), 0..512), gz in any::<bool>()) {
        let mut d = data;
        if gz {
            d.splice(0..0, [0x1f, 0x8b]);
        }
        let _ = decode_push(&d);
    }

    #[test]
    fn acks_round_trip(
        kind in prop::sample::select(vec![AckKind::PushAck, AckKind::DumpAck, AckKind::UnknownAck]),
        n in any::<u64>(),
    ) {
        let mut out = Vec::new();
        encode_ack_of(kind, n, &mut out);
        let ack = parse_ack(&out).unwrap();
        prop_assert_eq!((ack.kind, ack.last_ref_time), (kind, n));
    }

    #[test]
    fn params_round_trip(pairs in prop::collection::vec(("[a-zA-Z]{1,8}", any::<String>()), 0..10)) {
        let mut q = String::new();
        {
            let mut w = QueryWriter::form(&mut q);
            for (k, v) in &pairs {
                w.param(k, v);
            }
        }
        let p = Params::parse(&q, None).unwrap();
        prop_assert_eq!(p.len(), pairs.len());
        for (k, _) in &pairs {
            let first = pairs.iter().find(|(k2, _)| k2 == k).map(|(_, v)| v.as_str());
            prop_assert_eq!(p.get(k), first);
        }
    }

    #[test]
    fn metadata_json_round_trips(pairs in prop::collection::vec((any::<String>(), any::<String>()), 0..20)) {
        let m = Metadata::from_pairs(pairs.clone());
        let limits = ParseLimits { max_metadata_bytes: usize::MAX, ..ParseLimits::default() };
        prop_assert_eq!(Metadata::parse(&m.to_json(), &limits).unwrap(), m.clone());
        // Last value of a duplicate key wins.
        for (k, _) in &pairs {
            let last = pairs.iter().rev().find(|(k2, _)| k2 == k).map(|(_, v)| v.as_str());
            prop_assert_eq!(m.get(k), last);
        }
    }

    #[test]
    fn service_info_round_trips(
        hosts in prop::collection::vec(
            ("[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}", any::<u16>(), any::<bool>(), 0.0f64..10000.0),
            0..30),
        clusters in "[A-Za-z0-9,-]{0,20}",
        last_ref_time in any::<u64>(),
    ) {
        let svc = ServiceName::new("G", "svc");
        let meta = Metadata::from_pairs([("k", "v")]);
        let views: Vec<_> = hosts.iter().map(|(ip, port, healthy, weight)| HostView {
            ip, port: *port, healthy: *healthy, enabled: true, weight: *weight, ephemeral: true,
            cluster_name: "DEFAULT", service: svc, instance_id: None, metadata: &meta,
            heartbeat: HeartbeatTimes::default(),
        }).collect();
        let view = ServiceInfoView {
            service: svc, clusters: &clusters, cache_millis: 10_000, hosts: &views,
            last_ref_time, checksum: "x", reach_protection_threshold: false, metadata: &meta,
        };
        let mut out = Vec::new();
        view.encode(&mut out).unwrap();
        let info = ServiceInfo::parse(&out).unwrap();
        prop_assert_eq!(info.grouped_name(), "G@@svc");
        prop_assert_eq!(&info.clusters, &clusters);
        prop_assert_eq!(info.last_ref_time, last_ref_time);
        prop_assert_eq!(info.hosts.len(), hosts.len());
        for (h, (ip, port, healthy, weight)) in info.hosts.iter().zip(&hosts) {
            prop_assert_eq!((&h.ip, h.port, h.is_healthy()), (ip, *port, *healthy));
            // serde_json parses floats to within one ulp (no `float_roundtrip`).
            prop_assert!((h.weight - weight).abs() <= weight.abs() * 1e-15);
        }
    }
}
