//! UDP push with real sockets: subscribers receive the full list after each
//! change, bursts coalesce, large lists are gzipped, unacked pushes are
//! resent once then counted failed, lapsed subscriptions stop pushes, the
//! `clientIP` parameter is never a push target, and bad acks are dropped.

use crate::common;

use std::time::Duration;

use common::TestServer;
use registry_proto::http1::Method;
use registry_proto::naming::list::ServiceInfo;
use registry_proto::udp::ack::encode_ack;
use registry_proto::udp::push::{decode_push, PushPacket};
use registry_server::Config;
use tokio::net::UdpSocket;
use tokio::time::{timeout, Instant};

struct Subscriber {
    socket: UdpSocket,
}

impl Subscriber {
    async fn bind() -> Subscriber {
        Subscriber {
            socket: UdpSocket::bind("127.0.0.1:0").await.expect("bind udp"),
        }
    }

    fn port(&self) -> u16 {
        self.socket.local_addr().expect("addr").port()
    }

    async fn subscribe(&self, server: &TestServer, service: &str) -> ServiceInfo {
        let r = server
            .call(
                Method::Get,
                &format!(
                    "/nacos/v1/ns/instance/list?serviceName={service}&udpPort={}",
                    self.port()
                ),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        let info = ServiceInfo::parse(r.body.as_bytes()).expect("list json");
        assert_eq!(
            info.cache_millis, 10_000,
            "subscribed callers are told the push cache time"
        );
        info
    }

    /// The next push within `wait`, with the raw datagram.
    async fn next(&self, wait: Duration) -> Option<(PushPacket, Vec<u8>, std::net::SocketAddr)> {
        let mut buf = vec![0u8; 70_000];
        let (n, from) = timeout(wait, self.socket.recv_from(&mut buf))
            .await
            .ok()?
            .expect("recv");
        buf.truncate(n);
        Some((decode_push(&buf).expect("valid push"), buf, from))
    }

    async fn ack(&self, packet: &PushPacket, to: std::net::SocketAddr) {
        let mut out = Vec::new();
        encode_ack(packet.last_ref_time, &mut out);
        self.socket.send_to(&out, to).await.expect("send ack");
    }

    /// Receives pushes (acking each) until one carries `ports`.
    async fn until_ports(&self, ports: &[u16], wait: Duration) -> ServiceInfo {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some((packet, _, from)) = self.next(left).await else {
                panic!("no push carrying {ports:?} within {wait:?}");
            };
            self.ack(&packet, from).await;
            let info = packet.service_info().expect("push data is a list");
            let mut got: Vec<u16> = info.hosts.iter().map(|h| h.port).collect();
            got.sort_unstable();
            if got == ports {
                return info;
            }
        }
    }
}

async fn register(server: &TestServer, service: &str, port: u16, extra: &str) {
    let r = server
        .call(
            Method::Post,
            &format!("/nacos/v1/ns/instance?serviceName={service}&ip=10.0.0.1&port={port}{extra}"),
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
}

async fn deregister(server: &TestServer, service: &str, port: u16) {
    let r = server
        .call(
            Method::Delete,
            &format!("/nacos/v1/ns/instance?serviceName={service}&ip=10.0.0.1&port={port}"),
        )
        .await;
    assert_eq!(r.status, 200);
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_sees_register_deregister_and_health_changes() {
    let server = TestServer::with(Config {
        beat_timeout_ms: 400,
        delete_timeout_ms: 60_000,
        sweep_interval_ms: 50,
        ..Config::for_test()
    })
    .await;
    let sub = Subscriber::bind().await;
    assert!(sub.subscribe(&server, "push-a").await.hosts.is_empty());

    register(&server, "push-a", 80, "").await;
    let info = sub.until_ports(&[80], Duration::from_secs(2)).await;
    assert_eq!(
        info.name, "DEFAULT_GROUP@@push-a",
        "pushes carry the grouped name"
    );
    register(&server, "push-a", 81, "").await;
    sub.until_ports(&[80, 81], Duration::from_secs(2)).await;
    deregister(&server, "push-a", 80).await;
    sub.until_ports(&[81], Duration::from_secs(2)).await;

    // No beats for 81: after the beat timeout the sweeper marks it
    // unhealthy and the subscriber is told. A second, beating instance keeps
    // the healthy share above the protect threshold (0), which would
    // otherwise report every instance healthy, as Nacos does.
    register(&server, "push-a", 82, "").await;
    sub.until_ports(&[81, 82], Duration::from_secs(2)).await;
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut saw_unhealthy = false;
    while Instant::now() < deadline && !saw_unhealthy {
        // Keep 82 alive.
        server
            .call(
                Method::Put,
                "/nacos/v1/ns/instance/beat?serviceName=push-a&ip=10.0.0.1&port=82",
            )
            .await;
        if let Some((p, _, from)) = sub.next(Duration::from_millis(100)).await {
            sub.ack(&p, from).await;
            let info = p.service_info().unwrap();
            saw_unhealthy = info.hosts.iter().any(|h| h.port == 81 && !h.is_healthy());
        }
    }
    assert!(saw_unhealthy, "health change pushed");
    let push = &server.app.metrics.push;
    eventually("acks counted", || push.acked.get() >= 5).await;
    assert_eq!(push.failed.get(), 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_changes_yields_few_pushes_ending_in_the_final_state() {
    let server = TestServer::with(Config {
        push_window_ms: 100,
        ..Config::for_test()
    })
    .await;
    let sub = Subscriber::bind().await;
    sub.subscribe(&server, "burst").await;
    // 100 changes pipelined on one connection.
    let mut bytes = Vec::new();
    for port in 0..100u16 {
        registry_proto::http1::write_request(
            &mut bytes,
            Method::Post,
            &format!("/nacos/v1/ns/instance?serviceName=burst&ip=10.0.0.1&port={port}"),
            "x",
            None,
        );
    }
    let replies = common::raw_expect(server.http_addr, &bytes, 100).await;
    assert!(replies.iter().all(|r| r.status == 200));
    let mut pushes = 0;
    let mut last = Vec::new();
    while let Some((p, _, from)) = sub.next(Duration::from_millis(500)).await {
        sub.ack(&p, from).await;
        pushes += 1;
        last = p
            .service_info()
            .unwrap()
            .hosts
            .iter()
            .map(|h| h.port)
            .collect::<Vec<_>>();
    }
    last.sort_unstable();
    assert_eq!(
        last,
        (0..100).collect::<Vec<u16>>(),
        "the last push carries the final state"
    );
    assert!(
        (1..=10).contains(&pushes),
        "{pushes} pushes for 100 changes"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_lists_are_gzipped() {
    let server = TestServer::spawn().await;
    let sub = Subscriber::bind().await;
    sub.subscribe(&server, "big").await;
    for port in 0..40u16 {
        register(
            &server,
            "big",
            port,
            "&metadata=version%3D1.2.3,zone%3Dzone-a",
        )
        .await;
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (p, raw, from) = sub
            .next(deadline.saturating_duration_since(Instant::now()))
            .await
            .expect("push");
        sub.ack(&p, from).await;
        if p.service_info().unwrap().hosts.len() == 40 {
            assert_eq!(&raw[..2], &[0x1f, 0x8b], "gzip magic");
            assert!(p.compressed);
            break;
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacked_push_is_resent_once_then_counted_failed() {
    let server = TestServer::with(Config {
        push_ack_timeout_ms: 200,
        ..Config::for_test()
    })
    .await;
    let sub = Subscriber::bind().await;
    sub.subscribe(&server, "silent").await;
    register(&server, "silent", 80, "").await;
    let (first, _, _) = sub.next(Duration::from_secs(2)).await.expect("push");
    let (again, _, _) = sub.next(Duration::from_secs(2)).await.expect("resend");
    assert_eq!(
        first.last_ref_time, again.last_ref_time,
        "the resend is the same packet"
    );
    assert!(
        sub.next(Duration::from_millis(600)).await.is_none(),
        "no third send"
    );
    let push = &server.app.metrics.push;
    eventually("failure counted", || push.failed.get() == 1).await;
    assert_eq!(push.retried.get(), 1);
    assert_eq!(push.acked.get(), 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_subscription_stops_pushes() {
    // The lease lapses on a clock the test moves, not by sleeping past it.
    let (server, clock) = TestServer::with_clock(Config {
        subscriber_lease_ms: 10_000,
        ..Config::for_test()
    })
    .await;
    let sub = Subscriber::bind().await;
    sub.subscribe(&server, "lapse").await;
    register(&server, "lapse", 80, "").await;
    sub.until_ports(&[80], Duration::from_secs(2)).await;
    clock.advance(Duration::from_millis(10_001));
    register(&server, "lapse", 81, "").await;
    assert!(
        sub.next(Duration::from_millis(500)).await.is_none(),
        "no push after the lease lapsed"
    );
    // Polling again renews it.
    sub.subscribe(&server, "lapse").await;
    register(&server, "lapse", 82, "").await;
    sub.until_ports(&[80, 81, 82], Duration::from_secs(2)).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_ip_is_never_a_push_target() {
    let server = TestServer::spawn().await;
    let sub = Subscriber::bind().await;
    // A decoy socket on another loopback address: a server honouring
    // clientIP would push there.
    let decoy = UdpSocket::bind(("127.0.0.2", sub.port()))
        .await
        .expect("bind decoy");
    let r = server
        .call(
            Method::Get,
            &format!(
                "/nacos/v1/ns/instance/list?serviceName=cip&udpPort={}&clientIP=127.0.0.2",
                sub.port()
            ),
        )
        .await;
    assert_eq!(r.status, 200);
    register(&server, "cip", 80, "").await;
    sub.until_ports(&[80], Duration::from_secs(2)).await;
    let mut buf = [0u8; 1024];
    assert!(
        timeout(Duration::from_millis(300), decoy.recv_from(&mut buf))
            .await
            .is_err(),
        "nothing may reach the clientIP address"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_acks_are_counted_and_dropped() {
    let server = TestServer::spawn().await;
    let sub = Subscriber::bind().await;
    sub.subscribe(&server, "acks").await;
    register(&server, "acks", 80, "").await;
    let (p, _, from) = sub.next(Duration::from_secs(2)).await.expect("push");
    sub.ack(&p, from).await;
    sub.ack(&p, from).await; // duplicate
    let junk: [&[u8]; 4] = [
        b"not json",
        br#"{"type":"push-ack","lastRefTime":"999999","data":""}"#, // unknown
        br#"{"type":"weird","lastRefTime":1}"#,
        &[b'x'; 4000], // oversized for an ack
    ];
    for j in junk {
        sub.socket.send_to(j, from).await.unwrap();
    }
    let push = &server.app.metrics.push;
    eventually("bad acks counted", || push.bad_acks.get() >= 5).await;
    assert_eq!(push.acked.get(), 1);
    // Still serving.
    register(&server, "acks", 81, "").await;
    sub.until_ports(&[80, 81], Duration::from_secs(2)).await;
    server.stop().await;
}
