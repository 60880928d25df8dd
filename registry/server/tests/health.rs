//! Server-side health checks of persistent instances, through the real
//! binary, against loopback listeners the test controls: TCP connect by
//! default, HTTP GET chosen per cluster through service metadata, flips in
//! both directions, and ephemeral instances left to their beats.

use crate::binary;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use binary::Registry;
use registry_proto::http1::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A port with nothing listening on it.
async fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    l.local_addr().expect("addr").port()
}

/// Accepts and drops connections until aborted.
async fn tcp_up() -> (u16, JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    let task = tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            drop(s);
        }
    });
    (port, task)
}

/// Answers `GET /health` with 200 while `up`, else 503; anything else 404.
async fn http_server(up: Arc<AtomicBool>) -> (u16, JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let up = up.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let line = String::from_utf8_lossy(&buf[..n]);
                let status = if !line.starts_with("GET /health ") {
                    "404 Not Found"
                } else if up.load(Ordering::Relaxed) {
                    "200 OK"
                } else {
                    "503 Service Unavailable"
                };
                let reply =
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    (port, task)
}

/// The health the server reports for each port of `service`.
async fn health(reg: &Registry, service: &str) -> Vec<(u16, bool)> {
    let mut out: Vec<(u16, bool)> = reg
        .hosts(service)
        .await
        .iter()
        .map(|h| {
            (
                h["port"].as_u64().expect("port") as u16,
                h["healthy"].as_bool().expect("healthy"),
            )
        })
        .collect();
    out.sort_unstable();
    out
}

async fn eventually(reg: &Registry, service: &str, want: &[(u16, bool)], what: &str) {
    let mut want = want.to_vec();
    want.sort_unstable();
    let started = Instant::now();
    loop {
        let got = health(reg, service).await;
        if got == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: want {want:?}, got {got:?}\n{}",
            reg.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn post(reg: &Registry, target: &str) {
    let (status, body) = reg.call(Method::Post, target).await;
    assert_eq!((status, body.as_str()), (200, "ok"), "{target}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_instances_are_checked_by_tcp_and_http() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = [
        "--health-check-interval-ms",
        "100",
        "--health-check-timeout-ms",
        "500",
        "--health-check-threshold",
        "2",
    ];
    let reg = Registry::start(&args, &dir.path().join("registry.log")).await;

    // TCP, the default: a listening port stays healthy, a closed one flips.
    let (up, up_task) = tcp_up().await;
    let down = closed_port().await;
    for port in [up, down] {
        post(
            &reg,
            &format!(
                "/nacos/v1/ns/instance?serviceName=hc-tcp&ip=127.0.0.1&port={port}&ephemeral=false"
            ),
        )
        .await;
    }
    // An ephemeral instance at a closed port: left to its beats, not probed.
    let eph = closed_port().await;
    post(
        &reg,
        &format!("/nacos/v1/ns/instance?serviceName=hc-tcp&ip=127.0.0.1&port={eph}"),
    )
    .await;
    eventually(
        &reg,
        "hc-tcp",
        &[(up, true), (down, false), (eph, true)],
        "closed port flips",
    )
    .await;

    // The listener goes away: its instance flips too.
    up_task.abort();
    let _ = up_task.await;
    eventually(
        &reg,
        "hc-tcp",
        &[(up, false), (down, false), (eph, true)],
        "stopped listener flips",
    )
    .await;

    // HTTP for cluster `web` only, through the service's metadata.
    post(
        &reg,
        "/nacos/v1/ns/service?serviceName=hc-http&protectThreshold=0",
    )
    .await;
    let (status, body) = reg
        .call(
            Method::Put,
            "/nacos/v1/ns/service?serviceName=hc-http&protectThreshold=0\
             &metadata=preserved.health.checker.web%3DHTTP%3A%2Fhealth",
        )
        .await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let serving = Arc::new(AtomicBool::new(true));
    let (web, _web_task) = http_server(serving.clone()).await;
    // Accepts TCP but speaks no HTTP: healthy by TCP, not by HTTP.
    let (tcp_only, _tcp_task) = tcp_up().await;
    for (cluster, port) in [("web", web), ("web", tcp_only), ("DEFAULT", tcp_only)] {
        post(
            &reg,
            &format!(
                "/nacos/v1/ns/instance?serviceName=hc-http&ip=127.0.0.1&port={port}\
                 &clusterName={cluster}&ephemeral=false"
            ),
        )
        .await;
    }
    let list = |web_up: bool| {
        let mut v = vec![(web, web_up), (tcp_only, false), (tcp_only, true)];
        v.sort_unstable();
        v
    };
    eventually(
        &reg,
        "hc-http",
        &list(true),
        "HTTP 200 healthy, no HTTP unhealthy",
    )
    .await;
    serving.store(false, Ordering::Relaxed);
    eventually(&reg, "hc-http", &list(false), "HTTP 503 flips").await;
    serving.store(true, Ordering::Relaxed);
    eventually(&reg, "hc-http", &list(true), "HTTP 200 again flips back").await;

    let (_, metrics) = reg.call(Method::Get, "/metrics").await;
    assert!(
        metrics.contains("registry_health_transitions_total{to=\"unhealthy\"}"),
        "{metrics}"
    );
    reg.terminate().await;
}
