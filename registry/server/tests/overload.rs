//! Bounds under pressure: connections past `max_connections` get a 503 and
//! are closed at once, requests past `max_inflight` get a 503 and keep their
//! connection, idle connections are closed after `idle_timeout_ms`, and the
//! server serves normally once the pressure is gone.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::TestServer;
use registry_proto::http1::{parse_response, Method};
use registry_server::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NS: &str = "/nacos/v1/ns";
const TOO_MANY: &str = "too many connections, please try again later";
const OVERLOADED: &str = "server is overloaded, please try again later";

fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

/// A response: status, head, body.
type Resp = (u16, String, String);

/// Reads one response from `s`, leaving any rest in `buf`.
async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>, within: Duration) -> Option<Resp> {
    let deadline = Instant::now() + within;
    let mut chunk = [0u8; 16384];
    loop {
        if let Some((r, used)) = parse_response(buf).expect("well-formed response") {
            let resp = (
                r.status,
                String::from_utf8_lossy(&buf[..used - r.body.len()]).into_owned(),
                String::from_utf8_lossy(&r.body).into_owned(),
            );
            buf.drain(..used);
            return Some(resp);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return None,
        }
    }
}

/// Whether the peer closes `s` within `within` (EOF or reset, nothing more sent).
async fn closes_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut chunk = [0u8; 256];
    matches!(
        tokio::time::timeout(within, s.read(&mut chunk)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

/// Opens a connection and completes one request on it, so the server has
/// accepted and counted it.
async fn served_connection(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(&get(&format!("{NS}/operator/metrics")))
        .await
        .expect("write");
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, Duration::from_secs(5))
        .await
        .expect("a response");
    assert_eq!(r.0, 200, "{}", r.2);
    s
}

/// Polls until a new connection is served again, within `within`. Returns
/// how long it took and how many attempts were refused with a 503 meanwhile.
async fn served_again_within(addr: SocketAddr, within: Duration) -> (Duration, u64) {
    let started = Instant::now();
    let mut refused = 0;
    loop {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let mut buf = Vec::new();
        let _ = s.write_all(&get(&format!("{NS}/operator/metrics"))).await;
        match read_response(&mut s, &mut buf, Duration::from_secs(1)).await {
            Some((200, _, _)) => return (started.elapsed(), refused),
            Some((503, _, _)) => refused += 1,
            _ => {}
        }
        assert!(
            started.elapsed() < within,
            "not served again within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn prometheus(server: &TestServer) -> String {
    let r = server.call(Method::Get, "/metrics").await;
    assert_eq!(r.status, 200);
    r.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_get_503_and_are_closed_promptly() {
    let server = TestServer::with(Config {
        max_connections: 4,
        ..Config::for_test()
    })
    .await;
    let addr = server.http_addr;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(served_connection(addr).await);
    }
    // Six more, silent: each gets the 503 without asking, then the close.
    let mut refused: u64 = 0;
    for i in 0..6 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf, Duration::from_secs(1))
            .await
            .unwrap_or_else(|| panic!("extra connection {i}: no 503 within 1 s"));
        assert_eq!((r.0, r.2.as_str()), (503, TOO_MANY), "extra connection {i}");
        assert!(
            r.1.contains("\r\nConnection: close\r\n"),
            "extra connection {i}: {}",
            r.1
        );
        assert!(
            buf.is_empty() && closes_within(&mut s, Duration::from_secs(1)).await,
            "extra connection {i} was not closed"
        );
        refused += 1;
    }
    // The held connections still work.
    for s in &mut held {
        s.write_all(&get(&format!("{NS}/operator/metrics")))
            .await
            .unwrap();
        let mut buf = Vec::new();
        let r = read_response(s, &mut buf, Duration::from_secs(5)).await;
        assert_eq!(r.map(|r| r.0), Some(200));
    }
    // Once they close, new connections are served again.
    drop(held);
    refused += served_again_within(addr, Duration::from_secs(10)).await.1;
    let mut again = Vec::new();
    for _ in 0..4 {
        again.push(served_connection(addr).await);
    }
    drop(again);
    refused += served_again_within(addr, Duration::from_secs(10)).await.1;
    let text = prometheus(&server).await;
    assert!(
        text.contains(&format!(
            "registry_http_connections_refused_total {refused}\n"
        )),
        "{text}"
    );
    server.stop().await;
}

/// A client that writes its request right after connecting (every real
/// client) must still read the 503, not a reset: the server has to read (or
/// at least not discard with a RST) what the client sent before closing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_client_that_already_sent_its_request_reads_the_503() {
    let server = TestServer::with(Config {
        max_connections: 1,
        ..Config::for_test()
    })
    .await;
    let addr = server.http_addr;
    let _held = served_connection(addr).await;
    let mut failures = Vec::new();
    for i in 0..20 {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let _ = s.write_all(&get(&format!("{NS}/operator/metrics"))).await;
        let mut buf = Vec::new();
        match read_response(&mut s, &mut buf, Duration::from_secs(1)).await {
            Some((503, _, body)) if body == TOO_MANY => {}
            other => failures.push(format!("attempt {i}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_and_free_their_slots() {
    let idle = Duration::from_millis(300);
    let server = TestServer::with(Config {
        max_connections: 2,
        idle_timeout_ms: idle.as_millis() as u64,
        ..Config::for_test()
    })
    .await;
    let addr = server.http_addr;
    let started = Instant::now();
    let mut a = served_connection(addr).await;
    let mut b = served_connection(addr).await;
    // Full: a third is refused.
    let mut c = TcpStream::connect(addr).await.unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        read_response(&mut c, &mut buf, Duration::from_secs(1))
            .await
            .map(|r| r.0),
        Some(503)
    );
    // The idle two are closed by the server after the idle timeout...
    assert!(closes_within(&mut a, Duration::from_secs(2)).await);
    assert!(closes_within(&mut b, Duration::from_secs(2)).await);
    let closed_after = started.elapsed();
    assert!(
        closed_after >= idle - Duration::from_millis(50),
        "closed too early: {closed_after:?}"
    );
    // ...and their slots serve new connections.
    served_again_within(addr, Duration::from_secs(10)).await;
    server.stop().await;
}

/// Handlers are synchronous and microseconds long, so two sockets cannot be
/// made to overlap in a handler deterministically; instead the test takes
/// the in-flight slots itself, as long-running requests would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_max_inflight_get_503_at_once_and_keep_the_connection() {
    let server = TestServer::with(Config {
        max_inflight: 2,
        ..Config::for_test()
    })
    .await;
    let addr = server.http_addr;
    let mut s = served_connection(addr).await;
    server.app.inflight.store(2, Ordering::SeqCst);
    let mut buf = Vec::new();
    for i in 0..3 {
        s.write_all(&get(&format!("{NS}/instance/list?serviceName=x")))
            .await
            .unwrap();
        let r = read_response(&mut s, &mut buf, Duration::from_secs(1))
            .await
            .unwrap_or_else(|| panic!("request {i}: no answer within 1 s"));
        assert_eq!((r.0, r.2.as_str()), (503, OVERLOADED), "request {i}");
        assert!(!r.1.contains("Connection: close"), "{}", r.1);
    }
    // Shed requests change nothing.
    let r = common::call(
        addr,
        Method::Post,
        &format!("{NS}/instance?serviceName=x&ip=10.0.0.1&port=1"),
        None,
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (503, OVERLOADED));
    assert_eq!(server.app.store.stats().instances, 0);
    // Framing errors and unknown paths are answered without a slot.
    let r = common::call(addr, Method::Get, "/nope", None).await;
    assert_eq!(r.status, 404);
    server.app.inflight.store(0, Ordering::SeqCst);
    s.write_all(&get(&format!("{NS}/instance/list?serviceName=x")))
        .await
        .unwrap();
    let r = read_response(&mut s, &mut buf, Duration::from_secs(1)).await;
    assert_eq!(
        r.map(|r| r.0),
        Some(200),
        "served again on the same connection"
    );
    let text = prometheus(&server).await;
    assert!(
        text.contains("registry_http_requests_shed_total 4\n"),
        "{text}"
    );
    assert!(
        text.contains("registry_http_requests_total{route=\"instance_list\",status=\"503\"} 3\n"),
        "{text}"
    );
    server.stop().await;
}
