//! Slow and hostile clients cannot hold the server: a request head or body
//! that trickles in is answered 408 at its deadline however often bytes
//! arrive, a client that never reads is dropped at the write deadline, and
//! every connection's read buffer comes out of one memory budget. Then the
//! whole picture: 2,000 connections dribbling headers at 1 byte/s while
//! normal clients run a list/beat mix.
//!
//! Deadlines here are short (hundreds of ms) so the tests are quick. What
//! is asserted is order, not speed: a connection is never closed *before*
//! its deadline (a lower bound, which load cannot break), and it is closed
//! within a generous bound after it. No latency is asserted; the latency
//! of normal clients under slowloris is measured by `scripts/slowloris.sh`.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::TestServer;
use registry_proto::http1::parse_response;
use registry_server::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const NS: &str = "/nacos/v1/ns";
/// How long a test waits for something that should happen "at once".
const PATIENCE: Duration = Duration::from_secs(20);

fn config() -> Config {
    Config {
        head_timeout_ms: 600,
        body_timeout_ms: 600,
        write_timeout_ms: 400,
        ..Config::for_test()
    }
}

/// Reads until the peer closes (or `PATIENCE` runs out); returns what was
/// read and whether it closed.
async fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (got, true),
            Ok(Ok(n)) => got.extend_from_slice(&chunk[..n]),
            Err(_) => return (got, false),
        }
    }
}

/// Sends `bytes` one at a time, `every` apart, until the server closes.
/// Returns when the first byte went out, the response, and when it closed.
async fn dribble(addr: SocketAddr, bytes: &[u8], every: Duration) -> (Instant, String, Instant) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let first = Instant::now();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    for b in bytes.iter().cycle() {
        assert!(first.elapsed() < PATIENCE, "never closed");
        if s.write_all(&[*b]).await.is_err() {
            break;
        }
        match tokio::time::timeout(every, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => reply.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
    }
    let (rest, _) = read_to_close(&mut s).await;
    reply.extend_from_slice(&rest);
    (
        first,
        String::from_utf8_lossy(&reply).into_owned(),
        Instant::now(),
    )
}

/// Before: the idle timer restarted on every read, so a byte every 100 ms
/// kept a connection forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dribbled_head_is_answered_408_at_the_head_deadline() {
    let server = TestServer::with(config()).await;
    let head = format!("GET {NS}/instance/list?serviceName=s HTTP/1.1\r\nHost: t\r\n\r\n");
    let (first, reply, closed) = dribble(
        server.http_addr,
        head.as_bytes(),
        Duration::from_millis(100),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 408 "), "{reply}");
    assert!(reply.ends_with("request not received in time"), "{reply}");
    assert!(
        closed - first >= Duration::from_millis(600),
        "not before the deadline"
    );
    assert_eq!(server.app.metrics.head_timeouts.get(), 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dribbled_body_is_answered_408_at_the_body_deadline() {
    let server = TestServer::with(config()).await;
    let mut s = TcpStream::connect(server.http_addr).await.unwrap();
    s.write_all(
        format!(
            "POST {NS}/instance HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let head_sent = Instant::now();
    // The body trickles: a byte every 100 ms never completes 500 bytes in time.
    let (_, reply, closed) = dribble_on(s, b"serviceName=x&", Duration::from_millis(100)).await;
    assert!(reply.starts_with("HTTP/1.1 408 "), "{reply}");
    assert!(closed - head_sent >= Duration::from_millis(600));
    assert_eq!(server.app.metrics.body_timeouts.get(), 1);
    assert_eq!(server.app.store.stats().services, 0, "nothing applied");
    server.stop().await;
}

async fn dribble_on(mut s: TcpStream, bytes: &[u8], every: Duration) -> (Instant, String, Instant) {
    let first = Instant::now();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    for b in bytes.iter().cycle() {
        assert!(first.elapsed() < PATIENCE, "never closed");
        if s.write_all(&[*b]).await.is_err() {
            break;
        }
        match tokio::time::timeout(every, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => reply.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
    }
    let (rest, _) = read_to_close(&mut s).await;
    reply.extend_from_slice(&rest);
    (
        first,
        String::from_utf8_lossy(&reply).into_owned(),
        Instant::now(),
    )
}

/// A keep-alive connection's idle deadline counts from its last response.
/// The connection's timer stands at the first response's deadline and is
/// moved on only when it fires (see `http::conn`): the connection must
/// outlive that first deadline, and still close at the last one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_closes_at_the_deadline_of_its_last_request() {
    let idle = Duration::from_millis(600);
    let server = TestServer::with(Config {
        idle_timeout_ms: 600,
        ..config()
    })
    .await;
    let mut s = TcpStream::connect(server.http_addr).await.unwrap();
    let request = format!("GET {NS}/instance/list?serviceName=s HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut chunk = [0u8; 4096];
    let mut last = Instant::now();
    // Four requests 400 ms apart: each one's deadline passes after the next
    // was answered, so the timer fires early three times.
    for _ in 0..4 {
        // Before the server reads it, so before its idle clock restarts.
        last = Instant::now();
        s.write_all(request.as_bytes()).await.unwrap();
        let n = tokio::time::timeout(PATIENCE, s.read(&mut chunk))
            .await
            .expect("answered")
            .unwrap();
        let reply = String::from_utf8_lossy(&chunk[..n]);
        assert!(
            reply.starts_with("HTTP/1.1 200 "),
            "open and served: {reply}"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let (rest, closed) = read_to_close(&mut s).await;
    assert!(closed, "closed once idle");
    assert!(rest.is_empty(), "closed quietly");
    assert!(last.elapsed() >= idle, "not before the last deadline");
    server.stop().await;
}

/// A client that pipelines requests and never reads: once the socket
/// buffers are full the server's write waits, and at the write deadline
/// the server drops the connection instead of waiting forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_dropped_at_the_write_deadline() {
    let server = TestServer::with(config()).await;
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(server.http_addr).await.unwrap();
    let request = b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n";
    let started = Instant::now();
    // Far more response bytes than any socket buffer holds; the writes of
    // requests fail once the server has gone.
    for _ in 0..20_000 {
        if s.write_all(request).await.is_err() {
            break;
        }
        if server.app.metrics.write_timeouts.get() > 0 {
            break;
        }
    }
    while server.app.metrics.write_timeouts.get() == 0 {
        assert!(started.elapsed() < PATIENCE, "no write timeout");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started.elapsed() >= Duration::from_millis(400));
    while server.app.metrics.connections.get() > 0 {
        assert!(started.elapsed() < PATIENCE, "connection still counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}

/// Read buffers come out of one budget: a large body that does not fit is
/// answered 503 and its connection closed, a new connection finds no
/// buffer and is refused, and once they are gone normal service resumes.
/// The budget's peak never passes its limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_buffers_stay_within_the_budget() {
    let chunk = registry_server::buffers::READ_CHUNK;
    let server = TestServer::with(Config {
        max_buffered_bytes: 4 * chunk,
        max_body_bytes: 1 << 20,
        head_timeout_ms: 10_000,
        body_timeout_ms: 10_000,
        ..Config::for_test()
    })
    .await;
    let addr = server.http_addr;
    // Two connections hold a buffer each; a third sends a large body.
    let idle: Vec<TcpStream> = futures_connect(addr, 2).await;
    let mut big = TcpStream::connect(addr).await.unwrap();
    big.write_all(
        format!("POST {NS}/instance HTTP/1.1\r\nHost: t\r\nContent-Length: 600000\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    // Part of the body: more than the budget lets one buffer grow to, so
    // the server must refuse rather than wait for the rest.
    let body = vec![b'a'; 40_000];
    big.write_all(&body).await.unwrap();
    let (reply, closed) = read_to_close(&mut big).await;
    let reply = String::from_utf8_lossy(&reply);
    assert!(closed, "closed");
    assert!(reply.starts_with("HTTP/1.1 503 "), "{reply}");
    assert!(reply.contains("out of request buffer memory"), "{reply}");
    assert!(server.app.metrics.buffer_refusals.get() >= 1);
    assert!(
        server.app.buffers.peak() <= 4 * chunk,
        "peak {}",
        server.app.buffers.peak()
    );
    drop(idle);
    // Once the others are gone, a request of normal size is served again.
    let started = Instant::now();
    loop {
        let r = common::call(
            addr,
            registry_proto::http1::Method::Get,
            "/nacos/v1/ns/operator/metrics",
            None,
        )
        .await;
        if r.status == 200 {
            break;
        }
        assert!(started.elapsed() < PATIENCE, "not served again: {r:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}

async fn futures_connect(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::new();
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        // One byte: the server has accepted it and given it a buffer.
        s.write_all(b"G").await.unwrap();
        out.push(s);
    }
    // Wait until the server holds their buffers.
    let started = Instant::now();
    while common_buffers(addr).await < n {
        assert!(started.elapsed() < PATIENCE);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    out
}

/// Open connections the server counts (from `/metrics`).
async fn common_buffers(addr: SocketAddr) -> usize {
    let r = common::call(addr, registry_proto::http1::Method::Get, "/metrics", None).await;
    r.body
        .lines()
        .find_map(|l| l.strip_prefix("registry_http_connections "))
        .and_then(|v| v.trim().parse::<usize>().ok())
        // The connection asking is one of them.
        .map_or(0, |n| n.saturating_sub(1))
}

// ----- slowloris ----------------------------------------------------------------

/// Raises the soft limit of open files to the hard limit; returns the limit now.
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let wanted = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// 2,000 connections (fewer only if the fd limit cannot be raised: each
/// costs two descriptors in this process, client and server side) send a
/// request head one byte a second. Meanwhile normal clients register,
/// beat and list. Every slow connection is closed at its head deadline
/// (never before), every normal request is answered 200, and the read
/// buffers and the process's memory stay bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_closed_at_the_deadline_while_normal_clients_are_served() {
    let limit = raise_fd_limit();
    let slow = 2_000.min((limit.saturating_sub(200) / 2) as usize);
    assert!(
        slow >= 500,
        "fd limit {limit} too low for a meaningful test"
    );
    if slow < 2_000 {
        eprintln!("slowloris: RLIMIT_NOFILE is {limit}; using {slow} slow connections");
    }
    let head_timeout = Duration::from_millis(2_000);
    let server = TestServer::with(Config {
        head_timeout_ms: head_timeout.as_millis() as u64,
        max_connections: 10_000,
        ..Config::for_test()
    })
    .await;
    let addr = server.http_addr;
    let rss_before = rss_kib();

    // Normal clients: one keep-alive connection each, register then
    // beat/list until the slow ones are gone.
    let done = tokio_util::sync::CancellationToken::new();
    let mut normal = Vec::new();
    for c in 0..4u16 {
        let done = done.clone();
        normal.push(tokio::spawn(
            async move { normal_client(addr, c, done).await },
        ));
    }

    // The slow connections: opened, then one byte per second each.
    let head =
        format!("GET {NS}/instance/list?serviceName=slow HTTP/1.1\r\nHost: t\r\nX: y\r\n\r\n");
    let mut conns: Vec<(TcpStream, Instant)> = Vec::with_capacity(slow);
    for _ in 0..slow {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(&head.as_bytes()[..1])
            .await
            .expect("first byte");
        conns.push((s, Instant::now()));
    }
    let mut peak_buffers = server.app.buffers.used();
    let mut sent = 1;
    let mut closed_at: Vec<Option<Instant>> = vec![None; slow];
    let started = Instant::now();
    let mut chunk = [0u8; 512];
    while closed_at.iter().any(Option::is_none) {
        assert!(
            started.elapsed() < head_timeout + PATIENCE,
            "{} slow connections still open",
            closed_at.iter().filter(|c| c.is_none()).count()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        let tick = started.elapsed().as_secs() as usize + 1;
        let write_byte = tick > sent && sent < head.len() - 1;
        if write_byte {
            sent += 1;
        }
        for (i, (s, _)) in conns.iter_mut().enumerate() {
            if closed_at[i].is_some() {
                continue;
            }
            match s.try_read(&mut chunk) {
                Ok(0) => closed_at[i] = Some(Instant::now()),
                Ok(_) => {
                    assert!(
                        chunk.starts_with(b"HTTP/1.1 408 "),
                        "slow connection {i} got a reply other than 408"
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if write_byte {
                        let _ = s.try_write(&head.as_bytes()[sent - 1..sent]);
                    }
                }
                Err(_) => closed_at[i] = Some(Instant::now()),
            }
        }
        peak_buffers = peak_buffers.max(server.app.buffers.used());
    }
    for (i, ((_, first), closed)) in conns.iter().zip(&closed_at).enumerate() {
        let closed = closed.expect("closed");
        assert!(
            closed - *first >= head_timeout,
            "slow connection {i} closed before its deadline"
        );
    }
    done.cancel();
    let mut served = 0;
    for n in normal {
        served += n.await.expect("normal client");
    }
    assert!(served > 0, "normal clients were served");
    assert!(server.app.metrics.head_timeouts.get() >= slow as u64);
    let budget = server.app.buffers.limit();
    assert!(server.app.buffers.peak() <= budget);
    assert!(
        peak_buffers <= (slow + 8) * registry_server::buffers::READ_CHUNK,
        "one buffer per connection: {peak_buffers}"
    );
    let grown_mib = rss_kib().saturating_sub(rss_before) / 1024;
    assert!(grown_mib < 256, "RSS grew {grown_mib} MiB");
    eprintln!(
        "slowloris: {slow} slow connections closed; {served} normal requests served; \
         read buffers peaked at {} KiB; RSS grew {grown_mib} MiB",
        peak_buffers / 1024
    );
    server.stop().await;
}

/// One normal client: registers an instance, then alternates beats and
/// lists on one keep-alive connection until `done`. Every answer must be
/// 200. Returns how many requests it made.
async fn normal_client(
    addr: SocketAddr,
    c: u16,
    done: tokio_util::sync::CancellationToken,
) -> usize {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut buf = Vec::new();
    let register = format!(
        "POST {NS}/instance?serviceName=normal&ip=10.1.0.1&port={} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
        1000 + c
    );
    let beat = format!(
        "PUT {NS}/instance/beat?serviceName=normal&ip=10.1.0.1&port={} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n",
        1000 + c
    );
    let list = format!("GET {NS}/instance/list?serviceName=normal HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut n = 0;
    let request = |i: usize| match i {
        0 => register.clone(),
        i if i % 2 == 1 => beat.clone(),
        _ => list.clone(),
    };
    while !done.is_cancelled() {
        s.write_all(request(n).as_bytes()).await.expect("write");
        let status = loop {
            if let Some((r, used)) = parse_response(&buf).expect("well-formed") {
                let status = r.status;
                buf.drain(..used);
                break status;
            }
            let mut chunk = [0u8; 8192];
            let got = tokio::time::timeout(PATIENCE, s.read(&mut chunk))
                .await
                .expect("an answer")
                .expect("read");
            assert!(got > 0, "normal client {c}: closed");
            buf.extend_from_slice(&chunk[..got]);
        };
        assert_eq!(status, 200, "normal client {c}, request {n}");
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    n
}
