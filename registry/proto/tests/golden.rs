//! Golden JSON fixtures: the exact bytes our encoders produce for each response body
//! and the push packet, pinned in `tests/fixtures/`. A diff here is a wire change that
//! every Nacos client sees; regenerate with `UPDATE_GOLDEN=1 cargo test -p
//! registry-proto --test golden` only when the change is intended, and review the diff.
//!
//! The fixtures were checked field by field against nacos-v1-protocol.md.

use std::path::PathBuf;

use registry_proto::naming::beat::{beat_not_found, beat_ok, BeatResponse};
use registry_proto::naming::instance::InstanceDetailView;
use registry_proto::naming::list::{HeartbeatTimes, HostView, ServiceInfo, ServiceInfoView};
use registry_proto::naming::metadata::MetadataPairs;
use registry_proto::naming::operator::{Metrics, ServerStatus, Switches};
use registry_proto::naming::service::{
    encode_service_list, ClusterView, Selector, ServiceDetailView, ServiceList,
};
use registry_proto::naming::{Metadata, ServiceName};
use registry_proto::udp::push::{decode_push, encode_push, Encoding, PushKind};

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Compares `actual` with the fixture (ignoring one trailing newline in the file).
fn golden(name: &str, actual: &[u8]) {
    let path = fixture_path(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let mut bytes = actual.to_vec();
        bytes.push(b'\n');
        std::fs::write(&path, bytes).unwrap();
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let expected = expected.strip_suffix(b"\n").unwrap_or(&expected);
    assert_eq!(
        String::from_utf8_lossy(actual),
        String::from_utf8_lossy(expected),
        "{name} differs from its golden fixture"
    );
}

fn demo() -> ServiceName<'static> {
    ServiceName::new("DEFAULT_GROUP", "demo")
}

#[test]
fn list_response() {
    let meta = Metadata::from_pairs([("k", "v"), ("preserved.register.source", "SPRING_CLOUD")]);
    let none = Metadata::new();
    let hosts = [
        HostView {
            ip: "127.0.0.1",
            port: 8080,
            healthy: true,
            enabled: true,
            weight: 1.0,
            ephemeral: true,
            cluster_name: "DEFAULT",
            service: demo(),
            instance_id: None,
            metadata: &meta,
            heartbeat: HeartbeatTimes::default(),
        },
        HostView {
            ip: "127.0.0.1",
            port: 8081,
            healthy: false,
            enabled: true,
            weight: 2.5,
            ephemeral: false,
            cluster_name: "c1",
            service: demo(),
            instance_id: Some("custom-id"),
            metadata: &none,
            heartbeat: HeartbeatTimes {
                interval_ms: 1000,
                timeout_ms: 3000,
                delete_timeout_ms: 6000,
            },
        },
    ];
    let view = ServiceInfoView {
        service: demo(),
        clusters: "",
        cache_millis: 10_000,
        hosts: &hosts,
        last_ref_time: 1_700_000_000_000,
        checksum: "3bbcf6dd1175203a8afdade0e77a27cd",
        reach_protection_threshold: false,
        metadata: &none,
    };
    let mut out = Vec::new();
    view.encode(&mut out).unwrap();
    golden("list_response.json", &out);

    // What a client reads back.
    let info = ServiceInfo::parse(&out).unwrap();
    assert_eq!(info.grouped_name(), "DEFAULT_GROUP@@demo");
    assert_eq!(info.clusters, "");
    assert_eq!(info.hosts.len(), 2);
    assert_eq!(
        info.hosts[0].instance_id.as_deref(),
        Some("127.0.0.1#8080#DEFAULT#DEFAULT_GROUP@@demo")
    );
    assert!(info.hosts[0].is_healthy() && !info.hosts[1].is_healthy());
    assert_eq!(info.hosts[1].instance_heart_beat_time_out, Some(3000));
}

#[test]
fn list_response_with_borrowed_pairs() {
    // The server may serialize its own storage through `MetadataPairs`.
    let pairs: Vec<(Box<str>, Box<str>)> = vec![("k".into(), "v".into())];
    let hosts = [HostView {
        ip: "10.0.0.1",
        port: 1,
        healthy: true,
        enabled: true,
        weight: 1.0,
        ephemeral: true,
        cluster_name: "DEFAULT",
        service: demo(),
        instance_id: None,
        metadata: MetadataPairs(&pairs),
        heartbeat: HeartbeatTimes::default(),
    }];
    let view = ServiceInfoView {
        service: demo(),
        clusters: "DEFAULT",
        cache_millis: 3000,
        hosts: &hosts,
        last_ref_time: 1,
        checksum: "c",
        reach_protection_threshold: true,
        metadata: MetadataPairs(&pairs[..0]),
    };
    let mut out = Vec::new();
    view.encode(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(r#""metadata":{"k":"v"}"#));
    assert!(text.contains(r#""clusters":"DEFAULT""#));
    assert!(text.contains(r#""reachProtectionThreshold":true"#));
}

#[test]
fn beat_responses() {
    let mut out = Vec::new();
    beat_ok(&mut out, 5000, true);
    golden("beat_ok.json", &out);
    assert_eq!(BeatResponse::parse(&out).unwrap().code, 10200);
    out.clear();
    beat_not_found(&mut out, 5000);
    golden("beat_not_found.json", &out);
    assert!(BeatResponse::parse(&out).unwrap().is_not_found());
}

#[test]
fn instance_detail() {
    let meta = Metadata::from_pairs([("k", "v")]);
    let view = InstanceDetailView {
        service: demo(),
        ip: "127.0.0.1",
        port: 8080,
        cluster_name: "DEFAULT",
        weight: 1.0,
        healthy: true,
        instance_id: None,
        metadata: &meta,
    };
    let mut out = Vec::new();
    view.encode(&mut out).unwrap();
    golden("instance_detail.json", &out);
}

#[test]
fn service_detail() {
    let meta = Metadata::from_pairs([("owner", "team-a")]);
    let none = Metadata::new();
    let clusters = [
        ClusterView {
            name: "DEFAULT",
            metadata: &none,
        },
        ClusterView {
            name: "c1",
            metadata: &none,
        },
    ];
    let view = ServiceDetailView {
        service: demo(),
        namespace_id: "public",
        protect_threshold: 0.5,
        metadata: &meta,
        selector: &Selector::None,
        clusters: &clusters,
    };
    let mut out = Vec::new();
    view.encode(&mut out).unwrap();
    golden("service_detail.json", &out);
}

#[test]
fn service_list() {
    let mut out = Vec::new();
    encode_service_list(&mut out, 12, ["demo", "orders"]);
    golden("service_list.json", &out);
    let l = ServiceList::parse(&out).unwrap();
    assert_eq!((l.count, l.doms.len()), (12, 2));
}

#[test]
fn metrics() {
    let m = Metrics {
        status: ServerStatus::Up,
        service_count: 2,
        instance_count: 3,
        subscribe_count: 1,
        raft_notify_task_count: 0,
        responsible_service_count: 2,
        responsible_instance_count: 3,
        cpu: 0.25,
        load: 1.5,
        mem: 0.125,
    };
    let mut out = Vec::new();
    m.encode(&mut out);
    golden("metrics.json", &out);
    assert_eq!(Metrics::parse(&out).unwrap(), m);
}

#[test]
fn switches() {
    let mut out = Vec::new();
    Switches::default().encode(&mut out);
    golden("switches.json", &out);
}

#[test]
fn push_packet() {
    let data = br#"{"name":"DEFAULT_GROUP@@demo","clusters":"","cacheMillis":10000,"hosts":[]}"#;
    let mut out = Vec::new();
    assert_eq!(encode_push(data, 42, &mut out), Encoding::Plain);
    golden("push_packet.json", &out);
    let p = decode_push(&out).unwrap();
    assert_eq!(p.kind, PushKind::Dom);
    assert_eq!(p.data.as_bytes(), data);
    assert_eq!(p.last_ref_time, 42);
}

#[test]
fn clients_read_real_server_shapes() {
    // A 1.4 server's answer (hand-built from doSrvIpxt) and the 2.x answer from the
    // open-api docs both parse, and name the same grouped service.
    let v14 = std::fs::read(fixture_path("nacos14_list.json")).unwrap();
    let v2 = std::fs::read(fixture_path("nacos2x_list.json")).unwrap();
    let a = ServiceInfo::parse(&v14).unwrap();
    let b = ServiceInfo::parse(&v2).unwrap();
    assert_eq!(a.grouped_name(), "DEFAULT_GROUP@@nacos.test.1");
    assert_eq!(b.grouped_name(), "DEFAULT_GROUP@@nacos.test.1");
    assert_eq!(a.endpoints(), b.endpoints());
    assert_eq!(a.hosts[0].metadata.get("k").map(String::as_str), Some("v"));
    assert!(b.hosts[0].is_healthy());
    assert_eq!(b.hosts[0].instance_heart_beat_interval, Some(5000));
}
