//! A bounded, stable-Rust stand-in for the cargo-fuzz targets in `fuzz/`: the same
//! pipelines (keep them in step with `fuzz/fuzz_targets/*.rs`), fed with the fuzz
//! seeds, random mutations of them, and random bytes. Runs in `cargo test`;
//! `FUZZ_SMOKE_CASES=200000 cargo test -p registry-proto --release --test fuzz_smoke`
//! runs longer. Unlike libFuzzer there is no coverage feedback, so this catches
//! shallow panics only; the coverage-guided run is `cargo fuzz run` (see fuzz/README.md).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use std::net::IpAddr;

use registry_proto::dns::name::{Parent, ServiceName};
use registry_proto::dns::{Host, Responder, Transport, Zone};
use registry_proto::error::ProtoError;
use registry_proto::grpc::{self, Payload};
use registry_proto::http1::{parse_request, parse_request_with_httparse, Limits};
use registry_proto::naming::beat::{BeatIdentity, BeatInfo, BeatRequest};
use registry_proto::naming::instance::{InstanceKey, InstancePatch, InstanceRequest};
use registry_proto::naming::list::ListRequest;
use registry_proto::naming::route::route;
use registry_proto::naming::service::{ServiceListRequest, ServiceRequest};
use registry_proto::naming::{Metadata, ParseLimits};
use registry_proto::params::{java_trim, percent_decode, Params};
use registry_proto::udp::ack::{encode_ack_of, parse_ack};
use registry_proto::udp::push::{decode_push, encode_push};

/// `get` finds the first value of every name, whether the reader noted its
/// first occurrence while splitting (the names requests look up) or not.
fn check_first_values(p: &Params<'_>) {
    for (name, _) in p.iter().take(64) {
        let first = p.iter().find(|(k, _)| *k == name).map(|(_, v)| v);
        assert_eq!(p.get(name), first, "{name:?}");
    }
}

/// `fuzz/fuzz_targets/http_request.rs`.
fn http_pipeline(data: &[u8]) {
    let limits = Limits::default();
    let pl = ParseLimits::default();
    // The reader of plain heads answers as httparse does, at every offset
    // a pipelined connection would parse from.
    let mut rest = data;
    loop {
        let parsed = parse_request(rest, &limits);
        assert_eq!(parsed, parse_request_with_httparse(rest, &limits));
        let Ok(Some((req, used))) = parsed else {
            break;
        };
        assert!(used > 0 && used <= rest.len());
        let _ = route(req.method, req.path).map_err(|e| e.to_string());
        if let Ok(p) = Params::from_request(&req) {
            check_first_values(&p);
            let _ = InstanceRequest::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = InstanceKey::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = InstancePatch::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = BeatRequest::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = ListRequest::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = ServiceRequest::parse_update(&p, &pl).map_err(|e| e.to_string());
            let _ = ServiceListRequest::parse(&p, &pl).map_err(|e| e.to_string());
        }
        rest = &rest[used..];
    }
    if let Ok(p) = Params::parse("", Some(data)) {
        check_first_values(&p);
        let _ = InstanceRequest::parse(&p, &pl);
        let _ = BeatRequest::parse(&p, &pl);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Metadata::parse(text, &pl);
    }
}

/// `fuzz/fuzz_targets/beat_json.rs`.
fn beat_json_pipeline(data: &[u8]) {
    let limits = ParseLimits::default();
    // The bytes as a `beat` form value, read in place: whatever the form reader
    // accepts decodes, and serde accepts the decoded text with the same identity;
    // and a beat request carrying the bytes in its form body reads as checking
    // the body, decoding the value and then reading it would.
    if let Some(fast) = BeatIdentity::scan_form(data, &limits) {
        let decoded = percent_decode(data).expect("the form reader took what does not decode");
        let info = BeatInfo::parse(java_trim(&decoded), &limits)
            .expect("the form reader took what serde refuses");
        assert_eq!(fast.ip.as_deref(), info.ip.as_deref());
        assert_eq!(fast.port, info.port);
        assert_eq!(fast.cluster.as_deref(), info.cluster.as_deref());
    }
    if !data.contains(&b'&') {
        let body = [b"beat=".as_slice(), data].concat();
        let form = Params::parse("serviceName=s&ip=1.1.1.1&port=1", Some(&body))
            .and_then(|p| {
                let r = BeatRequest::parse(&p, &limits)?;
                Ok((r.ip.into_owned(), r.port, r.cluster.into_owned()))
            })
            .map_err(|e| e.to_string());
        let decoded = std::str::from_utf8(data)
            .map_err(|_| ProtoError::Utf8)
            .and_then(|_| percent_decode(data))
            .and_then(|d| {
                let d = java_trim(&d);
                let id = if d.is_empty() {
                    BeatIdentity::default()
                } else {
                    BeatIdentity::read(d, &limits)?
                };
                Ok((
                    id.ip.as_deref().unwrap_or("1.1.1.1").to_owned(),
                    id.port.unwrap_or(1),
                    id.cluster.as_deref().unwrap_or("DEFAULT").to_owned(),
                ))
            });
        assert_eq!(form, decoded.map_err(|e| e.to_string()), "{data:?}");
    }

    // The bytes as the JSON text itself.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let slow = BeatInfo::parse(text, &limits);
    let read = BeatIdentity::read(text, &limits);
    assert_eq!(read.is_ok(), slow.is_ok(), "{text:?}");
    if let Some(fast) = BeatIdentity::scan(text, &limits) {
        let info = slow.expect("the fast path accepted what serde refuses");
        assert_eq!(fast.ip.as_deref(), info.ip.as_deref());
        assert_eq!(fast.port, info.port);
        assert_eq!(fast.cluster.as_deref(), info.cluster.as_deref());
    }
}

/// `fuzz/fuzz_targets/udp_ack.rs`.
fn ack_pipeline(data: &[u8]) {
    if let Ok(ack) = parse_ack(data) {
        let mut out = Vec::new();
        encode_ack_of(ack.kind, ack.last_ref_time, &mut out);
        assert_eq!(parse_ack(&out), Ok(ack));
    }
}

/// `fuzz/fuzz_targets/udp_push.rs`.
fn push_pipeline(data: &[u8]) {
    if let Ok(p) = decode_push(data) {
        let _ = p.service_info();
        let mut out = Vec::new();
        encode_push(p.data.as_bytes(), p.last_ref_time, &mut out);
        let again = decode_push(&out).expect("re-encoded push decodes");
        assert_eq!((again.data, again.last_ref_time), (p.data, p.last_ref_time));
    }
}

/// `fuzz/fuzz_targets/distro_message.rs`.
fn distro_pipeline(data: &[u8]) {
    use registry_proto::distro::{
        decode, decode_answer, encode, encode_answer, Checksums, Datums, Fetch, NamespaceSet,
        Report, SnapshotPart,
    };
    fn round_trip<T>(data: &[u8])
    where
        T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
    {
        const MAX: usize = 64 * 1024;
        match decode::<T>(data, MAX) {
            Ok(m) => assert_eq!(decode::<T>(&encode(&m), usize::MAX).as_ref(), Ok(&m)),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
    round_trip::<Report>(data);
    round_trip::<Datums>(data);
    round_trip::<Checksums>(data);
    round_trip::<Fetch>(data);
    round_trip::<SnapshotPart>(data);
    round_trip::<NamespaceSet>(data);
    if let Ok(m) = decode::<NamespaceSet>(data, 64 * 1024) {
        if let Err(why) = m.body.check() {
            assert!(!why.is_empty());
        }
    }
    if let Ok(set) = decode_answer::<NamespaceSet>(data, 64 * 1024) {
        assert_eq!(
            decode_answer::<NamespaceSet>(&encode_answer(&set), usize::MAX),
            Ok(set)
        );
    }
}

/// `fuzz/fuzz_targets/distro_clients.rs`.
fn clients_pipeline(data: &[u8]) {
    use registry_proto::distro::{
        decode, decode_answer, encode, encode_answer, ClientSets, ClientVerify, ClientVerifyAnswer,
    };
    const MAX: usize = 64 * 1024;
    match decode::<ClientSets>(data, MAX) {
        Ok(m) => {
            assert_eq!(
                decode::<ClientSets>(&encode(&m), usize::MAX).as_ref(),
                Ok(&m)
            );
            for part in &m.body.items {
                match part.check() {
                    Ok(()) => assert!(part.part < part.parts),
                    Err(why) => assert!(!why.is_empty()),
                }
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    match decode::<ClientVerify>(data, MAX) {
        Ok(m) => assert_eq!(
            decode::<ClientVerify>(&encode(&m), usize::MAX).as_ref(),
            Ok(&m)
        ),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    if let Ok(a) = decode_answer::<ClientVerifyAnswer>(data, MAX) {
        assert_eq!(
            decode_answer::<ClientVerifyAnswer>(&encode_answer(&a), usize::MAX),
            Ok(a)
        );
    }
}

/// `fuzz/fuzz_targets/raft_message.rs`.
fn raft_pipeline(data: &[u8]) {
    use registry_proto::distro::{decode, decode_answer, encode, encode_answer};
    use registry_proto::raft::{Batch, RaftAnswer, RaftRequest};
    const MAX: usize = 64 * 1024;
    match decode::<RaftRequest>(data, MAX) {
        Ok(m) => {
            let once = encode(&m);
            let again = decode::<RaftRequest>(&once, usize::MAX).expect("re-decodes");
            assert_eq!(encode(&again), once);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    if let Ok(a) = decode_answer::<RaftAnswer>(data, MAX) {
        let once = encode_answer(&a);
        let again = decode_answer::<RaftAnswer>(&once, usize::MAX).expect("re-decodes");
        assert_eq!(encode_answer(&again), once);
    }
    let _ = serde_json::from_slice::<Batch>(data);
}

/// `fuzz/fuzz_targets/grpc_payload.rs`.
fn grpc_pipeline(data: &[u8]) {
    const TYPES: &[&str] = &[
        "ServerCheckRequest",
        "ConnectionSetupRequest",
        "HealthCheckRequest",
        "InstanceRequest",
        "PersistentInstanceRequest",
        "BatchInstanceRequest",
        "SubscribeServiceRequest",
        "ServiceQueryRequest",
        "ServiceListRequest",
        "NotifySubscriberResponse",
        "ClientDetectionResponse",
        "NoSuchRequest",
    ];
    let limits = ParseLimits::default();
    let ok_code = |c: i32| matches!(c, 300..=302 | 400 | 500 | 502 | 503);
    if let Ok(p) = <Payload as prost::Message>::decode(data) {
        if let Err(r) = grpc::decode(p.type_name(), p.json(), &limits) {
            assert!(ok_code(r.code));
        }
    }
    for t in TYPES {
        if let Err(r) = grpc::decode(t, data, &limits) {
            assert!(ok_code(r.code));
        }
    }
}

/// `fuzz/fuzz_targets/open_api.rs`.
fn open_api_pipeline(data: &[u8]) {
    use registry_proto::naming::batch::MetadataBatch;
    use registry_proto::naming::health::HealthUpdate;
    use registry_proto::openapi::envelope::{ApiError, Envelope};
    use registry_proto::openapi::{admin, instance, namespace, route, service};
    fn envelope_is_json(e: ApiError) {
        let mut out = Vec::new();
        e.encode(&mut out);
        let v = Envelope::parse(&out).expect("an envelope is JSON");
        assert!(v.code != 0 && v.message.is_some());
        assert_eq!(v.data.as_str(), Some(&*e.detail));
    }
    fn check<T>(r: Result<T, ProtoError>) {
        if let Err(e) = r {
            envelope_is_json(ApiError::from(e));
        }
    }
    let limits = Limits::default();
    let pl = ParseLimits::default();
    let Ok(Some((req, _))) = parse_request(data, &limits) else {
        return;
    };
    let _ = route::route(req.method, req.path).map_err(|e| e.to_string());
    let Ok(p) = Params::from_request(&req) else {
        return;
    };
    for kind in [
        instance::ListKind::V2,
        instance::ListKind::V3Client,
        instance::ListKind::V3Admin,
    ] {
        check(instance::ListForm::parse(&p, &pl, kind));
    }
    for kind in [service::ListKind::V2, service::ListKind::V3] {
        if let Err(e) = service::ListForm::parse(&p, &pl, kind) {
            envelope_is_json(e);
        }
    }
    for door in [namespace::Door::V1, namespace::Door::Open] {
        check(namespace::NamespaceForm::parse_create(&p, door));
        check(namespace::NamespaceForm::parse_update(&p, door));
    }
    if let Err(e) = namespace::namespace_id_param(&p) {
        envelope_is_json(e);
    }
    check(MetadataBatch::parse(&p, &pl));
    check(HealthUpdate::parse(&p, &pl));
    let _ = instance::heart_beat(&p);
    // The admin forms (cluster, client views, log, distro, statuses, paging).
    for r in [
        admin::ClusterForm::parse(&p, &pl).err(),
        admin::ClientServiceForm::parse(&p, &pl).err(),
        admin::client_id(&p).err(),
        admin::log_form(&p).err(),
        admin::distro_form(&p).err(),
        admin::SubscriberPage::parse(&p).err(),
    ]
    .into_iter()
    .flatten()
    {
        envelope_is_json(r);
    }
    if let Some(key) = req.path.strip_prefix(route::STATUSES_PREFIX) {
        if let Err(e) = admin::statuses_key(key) {
            envelope_is_json(e);
        }
    }
}

/// `fuzz/fuzz_targets/grpc_frame.rs`.
fn grpc_frame_pipeline(data: &[u8]) {
    fn in_steps(data: &[u8], step: usize) -> (Vec<Payload>, bool) {
        let mut d = grpc::frame::Decoder::new(1 << 16);
        let mut out = Vec::new();
        for piece in data.chunks(step.max(1)) {
            d.extend(piece);
            loop {
                match d.message() {
                    Ok(Some(p)) => out.push(p),
                    Ok(None) => break,
                    Err(_) => return (out, true),
                }
            }
        }
        (out, false)
    }
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    let whole = in_steps(rest, rest.len());
    assert_eq!(
        whole,
        in_steps(rest, usize::from(step)),
        "the cut changed it"
    );
    for p in &whole.0 {
        let mut d = grpc::frame::Decoder::new(1 << 16);
        d.extend(&grpc::frame::encode(p));
        assert_eq!(d.message().ok().flatten().as_ref(), Some(p));
        assert_eq!(d.pending(), 0);
    }
}

/// `a` with two instances (one IPv6), `b` with 300 (past any UDP size): the
/// zone of `fuzz/fuzz_targets/dns_query.rs`.
struct DnsFixed;

impl Zone for DnsFixed {
    fn hosts(&self, name: &ServiceName, visit: &mut dyn FnMut(Host<'_>)) -> bool {
        let n = match name.service.as_str() {
            "a" => 1,
            "b" => 300,
            _ => return false,
        };
        for i in 0..n {
            let ip = IpAddr::V4((0x0a00_0001 + i).into());
            visit(Host {
                ip,
                port: 80,
                weight: 1.0,
                cluster: "DEFAULT",
            });
        }
        visit(Host {
            ip: IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            port: 80,
            weight: 0.5,
            cluster: "DEFAULT",
        });
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

/// `fuzz/fuzz_targets/dns_query.rs`.
fn dns_pipeline(data: &[u8]) {
    let responder = Responder::new("nacos.", 5).unwrap();
    for (transport, limit) in [(Transport::Udp, 1232), (Transport::Tcp, 65_535)] {
        let Some(r) = responder.respond(data, transport, &DnsFixed, data.len()) else {
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
        let again = responder.respond(&other, transport, &DnsFixed, data.len());
        let mut again = again.expect("answered as before").bytes;
        again[0] ^= 0x5a;
        again[2] ^= 1;
        assert_eq!(again, r.bytes, "only the id and RD bit differ");
    }
}

/// The seed inputs of the fuzz targets (`fuzz/seeds/<target>/`), when present.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/seeds")
        .join(target);
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| std::fs::read(e.ok()?.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    // Built-in seeds, so the smoke run is meaningful even without the fuzz folder.
    out.push(match target {
        "http_request" => b"PUT /nacos/v1/ns/instance/beat?serviceName=G%40%40s&ip=1.1.1.1&port=1&beat=%7B%22port%22%3A1%7D HTTP/1.1\r\nContent-Length: 0\r\n\r\n".to_vec(),
        "open_api" => b"PUT /nacos/v3/admin/ns/instance/metadata/batch?serviceName=s&metadata=k%3Dv&instances=%5B%7B%22ip%22%3A%221.1.1.1%22%2C%22port%22%3A1%7D%5D&namespaceName=n&pageSize=0 HTTP/1.1\r\nContent-Length: 0\r\n\r\n".to_vec(),
        "beat_json" => br#"{"port":1,"ip":"1.1.1.1","weight":1.0,"cluster":"c","metadata":{"k":"v"}}"#.to_vec(),
        "udp_ack" => br#"{"type":"push-ack","lastRefTime":"7","data":""}"#.to_vec(),
        "distro_message" => br#"{"v":2,"from":"127.0.0.1:1","node":1,"body":{"part":0,"parts":1,"items":[]}}"#.to_vec(),
        "raft_message" => RAFT_SEED.to_vec(),
        "distro_clients" => br#"{"v":2,"from":"127.0.0.1:1","node":1,"body":{"node":1,"items":[{"client":"c","revision":1,"part":0,"parts":2,"instances":[]}]}}"#.to_vec(),
        "grpc_frame" => grpc_frame_seed(),
        // An A query for `a.nacos.`.
        "dns_query" => b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x05nacos\x00\x00\x01\x00\x01".to_vec(),
        "grpc_payload" => br#"{"requestId":"1","serviceName":"s","type":"registerInstance","instance":{"ip":"1.1.1.1","port":1}}"#.to_vec(),
        _ => br#"{"type":"dom","data":"{}","lastRefTime":1}"#.to_vec(),
    });
    out
}

/// An append carrying one entry with one command (as a leader sends it).
const RAFT_SEED: &[u8] = br#"{"v":2,"from":"127.0.0.1:1","node":1,"body":{"append":{"vote":{"leader_id":{"term":1,"node_id":1},"committed":true},"prev_log_id":{"leader_id":{"term":1,"node_id":1},"index":3},"entries":[{"log_id":{"leader_id":{"term":1,"node_id":1},"index":4},"payload":{"Normal":[{"kind":"write","op":"register","params":"serviceName=a&ip=1.1.1.1&port=1&ephemeral=false"},{"kind":"health","namespace":"public","service":"DEFAULT_GROUP@@a","cluster":"DEFAULT","ip":"1.1.1.1","port":1,"healthy":false}]}}],"leader_commit":{"leader_id":{"term":1,"node_id":1},"index":3}}}}"#;

/// Frames of 7 bytes, then one `HealthCheckRequest` message.
fn grpc_frame_seed() -> Vec<u8> {
    let p = Payload::new("HealthCheckRequest", &br#"{"requestId":"1"}"#[..]);
    let mut seed = vec![7];
    seed.extend_from_slice(&grpc::frame::encode(&p));
    seed
}

fn cases() -> u32 {
    std::env::var("FUZZ_SMOKE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// A seed with up to 16 byte-level mutations (overwrite, insert, delete, truncate), or
/// plain random bytes.
fn input(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        prop::sample::select(seeds),
        prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 0..16),
    )
        .prop_map(|(mut data, edits)| {
            for (at, op, byte) in edits {
                if data.is_empty() {
                    data.push(byte);
                    continue;
                }
                let i = at.index(data.len());
                match op {
                    0 => data[i] = byte,
                    1 => data.insert(i, byte),
                    2 => {
                        data.remove(i);
                    }
                    _ => data.truncate(i),
                }
            }
            data
        });
    prop_oneof![3 => mutated, 1 => prop::collection::vec(any::<u8>(), 0..1024)]
}

fn run(target: &str, pipeline: fn(&[u8])) {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&input(seeds(target)), |data| {
            pipeline(&data);
            Ok(())
        })
        .unwrap();
}

#[test]
fn dns_query_smoke() {
    run("dns_query", dns_pipeline);
}

#[test]
fn http_request_smoke() {
    run("http_request", http_pipeline);
}

#[test]
fn raft_message_smoke() {
    // The seed must be a valid message, or the mutations explore nothing.
    let seed =
        registry_proto::distro::decode::<registry_proto::raft::RaftRequest>(RAFT_SEED, 1 << 20);
    assert!(seed.is_ok(), "{seed:?}");
    run("raft_message", raft_pipeline);
}

#[test]
fn open_api_smoke() {
    run("open_api", open_api_pipeline);
}

#[test]
fn beat_json_smoke() {
    run("beat_json", beat_json_pipeline);
}

#[test]
fn udp_ack_smoke() {
    run("udp_ack", ack_pipeline);
}

#[test]
fn udp_push_smoke() {
    run("udp_push", push_pipeline);
}

#[test]
fn distro_message_smoke() {
    run("distro_message", distro_pipeline);
}

#[test]
fn distro_clients_smoke() {
    run("distro_clients", clients_pipeline);
}

#[test]
fn grpc_frame_smoke() {
    // The seed must hold a message, or the mutations explore only errors.
    let mut d = grpc::frame::Decoder::new(1 << 16);
    d.extend(&grpc_frame_seed()[1..]);
    assert!(matches!(d.message(), Ok(Some(_))));
    run("grpc_frame", grpc_frame_pipeline);
}

#[test]
fn grpc_payload_smoke() {
    run("grpc_payload", grpc_pipeline);
}
