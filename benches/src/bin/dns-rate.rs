//! DNS queries per second against the HTTP list's rate for the same
//! service, on a running registry (`--dns-listen` on): registers
//! `--instances` instances of `dnsbench`, then for `--seconds` each keeps
//! `--window` requests in flight from one thread, first A queries over UDP,
//! then `GET /nacos/v1/ns/instance/list` pipelined on one keep-alive
//! connection, and prints one JSON line with both rates. Run the registry
//! pinned to one core (`--workers 1`) and this on another:
//!
//! ```sh
//! taskset -c 0 target/release/registry --listen 127.0.0.1:18848 --dns-listen 127.0.0.1:18600 --workers 1 &
//! taskset -c 1 target/release/dns-rate --http 127.0.0.1:18848 --dns 127.0.0.1:18600
//! ```

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use registry_proto::http1::{parse_response, write_request, Method};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const USAGE: &str =
    "usage: dns-rate --http ADDR --dns ADDR [--instances N] [--seconds S] [--window W]";

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: Option<T>) -> T {
    let value = args
        .iter()
        .position(|a| a == name)
        .map(|i| args.get(i + 1).and_then(|v| v.parse().ok()));
    match (value, default) {
        (Some(Some(v)), _) | (None, Some(v)) => v,
        _ => {
            eprintln!("dns-rate: {name} is missing or bad\n{USAGE}");
            std::process::exit(2);
        }
    }
}

/// An A query for `dnsbench.nacos.` with id `id`.
fn query(id: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    q.extend_from_slice(b"\x08dnsbench\x05nacos\x00\x00\x01\x00\x01");
    q
}

/// UDP queries answered per second, `window` in flight.
fn dns_rate(dns: SocketAddr, seconds: u64, window: usize) -> f64 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.connect(dns).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut id = 0u16;
    let mut send = |socket: &UdpSocket| {
        id = id.wrapping_add(1);
        socket.send(&query(id)).expect("send");
    };
    for _ in 0..window {
        send(&socket);
    }
    let mut buf = [0u8; 1500];
    let (started, mut answered) = (Instant::now(), 0u64);
    while started.elapsed() < Duration::from_secs(seconds) {
        match socket.recv(&mut buf) {
            Ok(n) => {
                assert!(n > 12 && buf[3] & 0x0f == 0, "NOERROR answers");
                answered += 1;
                send(&socket);
            }
            // Lost datagrams: refill the window.
            Err(_) => (0..window).for_each(|_| send(&socket)),
        }
    }
    answered as f64 / started.elapsed().as_secs_f64()
}

/// HTTP list responses per second, `window` pipelined on one connection.
fn http_rate(http: SocketAddr, seconds: u64, window: usize) -> f64 {
    let mut conn = TcpStream::connect(http).expect("connect");
    conn.set_nodelay(true).expect("nodelay");
    let mut request = Vec::new();
    let target = "/nacos/v1/ns/instance/list?serviceName=dnsbench&healthyOnly=true";
    write_request(&mut request, Method::Get, target, &http.to_string(), None);
    for _ in 0..window {
        conn.write_all(&request).expect("write");
    }
    let (mut buf, mut chunk) = (Vec::new(), vec![0u8; 1 << 16]);
    let (started, mut answered) = (Instant::now(), 0u64);
    while started.elapsed() < Duration::from_secs(seconds) {
        let n = conn.read(&mut chunk).expect("read");
        assert!(n > 0, "the registry closed the connection");
        buf.extend_from_slice(&chunk[..n]);
        let mut used_total = 0;
        while let Ok(Some((r, used))) = parse_response(&buf[used_total..]) {
            assert_eq!(r.status, 200);
            used_total += used;
            answered += 1;
            conn.write_all(&request).expect("write");
        }
        buf.drain(..used_total);
    }
    answered as f64 / started.elapsed().as_secs_f64()
}

fn register(http: SocketAddr, instances: usize) {
    let mut conn = TcpStream::connect(http).expect("connect");
    let mut chunk = vec![0u8; 1 << 16];
    for i in 0..instances {
        let target = format!(
            "/nacos/v1/ns/instance?serviceName=dnsbench&ip=10.9.{}.{}&port=80",
            i / 250,
            i % 250 + 1
        );
        let mut request = Vec::new();
        write_request(&mut request, Method::Post, &target, &http.to_string(), None);
        conn.write_all(&request).expect("write");
        let mut buf = Vec::new();
        while parse_response(&buf).ok().flatten().is_none() {
            let n = conn.read(&mut chunk).expect("read");
            assert!(n > 0, "closed");
            buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let http: SocketAddr = arg(&args, "--http", None);
    let dns: SocketAddr = arg(&args, "--dns", None);
    let instances: usize = arg(&args, "--instances", Some(10));
    let seconds: u64 = arg(&args, "--seconds", Some(5));
    let window: usize = arg(&args, "--window", Some(32));
    register(http, instances);
    let dns_qps = dns_rate(dns, seconds, window);
    let http_qps = http_rate(http, seconds, window);
    println!(
        "{}",
        serde_json::json!({
            "instances": instances,
            "window": window,
            "seconds": seconds,
            "dns_udp_queries_per_s": dns_qps.round(),
            "http_list_per_s": http_qps.round(),
            "dns_over_http": (dns_qps / http_qps * 100.0).round() / 100.0,
        })
    );
}
