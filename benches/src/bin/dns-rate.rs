//! DNS queries per second against the HTTP list's rate for the same
//! service, on a running registry (`--dns-listen` on): registers
//! `--instances` instances of `--service` (`dnsbench`; 0: register none,
//! the service is already there), then for `--seconds` each keeps
//! `--window` requests in flight from one thread, first `--qtype` (A, AAAA
//! or SRV) queries for `SERVICE.nacos.` over UDP (with EDNS offering
//! `--edns` bytes, 1232 as dig and current resolvers do; 0: no EDNS, 512
//! bytes at most), or with `--tcp` over one TCP connection, `--window`
//! queries pipelined (RFC 7766), then, with `--http`,
//! `GET /nacos/v1/ns/instance/list` pipelined on one keep-alive
//! connection, and prints one JSON line with the rates. Run the registry
//! pinned to one core (`--workers 1`) and this on another;
//! `scripts/bench-dns.sh` does, and measures the HTTP list with wrk too:
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
    "usage: dns-rate --dns ADDR [--http ADDR] [--service NAME] [--qtype A|AAAA|SRV] \
     [--edns SIZE] [--instances N] [--seconds S] [--window W] [--tcp]";

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: Option<T>) -> T {
    match (opt(args, name), default) {
        (Some(v), _) | (None, Some(v)) => v,
        _ => {
            eprintln!("dns-rate: {name} is missing\n{USAGE}");
            std::process::exit(2);
        }
    }
}

fn opt<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    let i = args.iter().position(|a| a == name)?;
    let parsed = args.get(i + 1).and_then(|v| v.parse().ok());
    if parsed.is_none() {
        eprintln!("dns-rate: {name} is bad\n{USAGE}");
        std::process::exit(2);
    }
    parsed
}

/// A query (recursion desired) for `SERVICE.nacos.` of `qtype`, with an
/// EDNS record offering `edns` bytes unless 0, and id 0: [`dns_rate`]
/// writes each id.
fn query(service: &str, qtype: u16, edns: u16) -> Vec<u8> {
    let mut q = vec![0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, u8::from(edns > 0)];
    for label in [service, "nacos"] {
        q.push(u8::try_from(label.len()).expect("a label is at most 63 bytes"));
        q.extend_from_slice(label.as_bytes());
    }
    q.push(0);
    q.extend_from_slice(&qtype.to_be_bytes());
    q.extend_from_slice(&1u16.to_be_bytes()); // class IN
    if edns > 0 {
        // OPT: root name, type 41, the size as class, version 0, no options.
        q.extend_from_slice(&[0, 0, 41]);
        q.extend_from_slice(&edns.to_be_bytes());
        q.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    }
    q
}

fn qtype_code(name: &str) -> u16 {
    match name {
        "A" => 1,
        "AAAA" => 28,
        "SRV" => 33,
        _ => {
            eprintln!("dns-rate: --qtype {name}: A, AAAA or SRV\n{USAGE}");
            std::process::exit(2);
        }
    }
}

/// What the DNS run measured.
struct DnsRun {
    per_s: f64,
    /// The last answer's size.
    bytes: usize,
    /// Answers with the TC bit.
    truncated: u64,
}

/// UDP queries answered per second, `window` in flight.
fn dns_rate(dns: SocketAddr, mut query: Vec<u8>, seconds: u64, window: usize) -> DnsRun {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.connect(dns).expect("connect");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut id = 0u16;
    let mut send = |socket: &UdpSocket| {
        id = id.wrapping_add(1);
        query[..2].copy_from_slice(&id.to_be_bytes());
        socket.send(&query).expect("send");
    };
    for _ in 0..window {
        send(&socket);
    }
    let mut buf = [0u8; 1500];
    let (started, mut answered, mut size, mut truncated) = (Instant::now(), 0u64, 0, 0);
    while started.elapsed() < Duration::from_secs(seconds) {
        match socket.recv(&mut buf) {
            Ok(n) => {
                let records = u16::from_be_bytes([buf[6], buf[7]]);
                assert!(n > 12 && buf[3] & 0x0f == 0, "NOERROR answers");
                assert!(records > 0, "answers with records");
                answered += 1;
                truncated += u64::from(buf[2] & 0x02 != 0);
                size = n;
                send(&socket);
            }
            // Lost datagrams: refill the window.
            Err(_) => (0..window).for_each(|_| send(&socket)),
        }
    }
    DnsRun {
        per_s: answered as f64 / started.elapsed().as_secs_f64(),
        bytes: size,
        truncated,
    }
}

/// TCP queries answered per second, `window` pipelined on one connection
/// (RFC 7766), each framed by its two-byte length.
fn dns_tcp_rate(dns: SocketAddr, mut query: Vec<u8>, seconds: u64, window: usize) -> DnsRun {
    let mut conn = TcpStream::connect(dns).expect("connect");
    conn.set_nodelay(true).expect("nodelay");
    let mut id = 0u16;
    let mut frame = |out: &mut Vec<u8>| {
        id = id.wrapping_add(1);
        query[..2].copy_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&(query.len() as u16).to_be_bytes());
        out.extend_from_slice(&query);
    };
    let mut pending = Vec::new();
    (0..window).for_each(|_| frame(&mut pending));
    conn.write_all(&pending).expect("write");
    let (mut buf, mut chunk) = (Vec::new(), vec![0u8; 1 << 16]);
    let (started, mut answered, mut size) = (Instant::now(), 0u64, 0);
    while started.elapsed() < Duration::from_secs(seconds) {
        let n = conn.read(&mut chunk).expect("read");
        assert!(n > 0, "the registry closed the connection");
        buf.extend_from_slice(&chunk[..n]);
        let (mut at, mut again) = (0, Vec::new());
        while buf.len() - at >= 2 {
            let len = usize::from(u16::from_be_bytes([buf[at], buf[at + 1]]));
            let Some(answer) = buf.get(at + 2..at + 2 + len) else {
                break;
            };
            assert!(len > 12 && answer[3] & 0x0f == 0, "NOERROR answers");
            assert!(u16::from_be_bytes([answer[6], answer[7]]) > 0, "records");
            (answered, size, at) = (answered + 1, len, at + 2 + len);
            frame(&mut again);
        }
        buf.drain(..at);
        conn.write_all(&again).expect("write");
    }
    DnsRun {
        per_s: answered as f64 / started.elapsed().as_secs_f64(),
        bytes: size,
        truncated: 0,
    }
}

/// HTTP list responses per second, `window` pipelined on one connection.
fn http_rate(http: SocketAddr, service: &str, seconds: u64, window: usize) -> f64 {
    let mut conn = TcpStream::connect(http).expect("connect");
    conn.set_nodelay(true).expect("nodelay");
    let mut request = Vec::new();
    let target = format!("/nacos/v1/ns/instance/list?serviceName={service}&healthyOnly=true");
    let target = target.as_str();
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

fn register(http: SocketAddr, service: &str, instances: usize) {
    let mut conn = TcpStream::connect(http).expect("connect");
    let mut chunk = vec![0u8; 1 << 16];
    for i in 0..instances {
        let target = format!(
            "/nacos/v1/ns/instance?serviceName={service}&ip=10.9.{}.{}&port=80",
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
    let dns: SocketAddr = arg(&args, "--dns", None);
    let http: Option<SocketAddr> = opt(&args, "--http");
    let service: String = arg(&args, "--service", Some("dnsbench".to_owned()));
    let qtype: String = arg(&args, "--qtype", Some("A".to_owned()));
    let instances: usize = arg(&args, "--instances", Some(10));
    let seconds: u64 = arg(&args, "--seconds", Some(5));
    let window: usize = arg(&args, "--window", Some(32));
    let edns: u16 = arg(&args, "--edns", Some(1232));
    let tcp = args.iter().any(|a| a == "--tcp");
    if instances > 0 {
        let http = http.unwrap_or_else(|| {
            eprintln!("dns-rate: --instances needs --http\n{USAGE}");
            std::process::exit(2);
        });
        register(http, &service, instances);
    }
    let query = query(&service, qtype_code(&qtype), edns);
    let run = if tcp {
        dns_tcp_rate(dns, query, seconds, window)
    } else {
        dns_rate(dns, query, seconds, window)
    };
    let dns_qps = run.per_s;
    let mut out = serde_json::json!({
        "service": service,
        "qtype": qtype,
        "edns": edns,
        "window": window,
        "seconds": seconds,
        "answer_bytes": run.bytes,
        "truncated": run.truncated,
        "transport": if tcp { "tcp" } else { "udp" },
        "dns_queries_per_s": dns_qps.round(),
    });
    if let Some(http) = http {
        let http_qps = http_rate(http, &service, seconds, window);
        out["http_list_per_s"] = http_qps.round().into();
        out["dns_over_http"] = ((dns_qps / http_qps * 100.0).round() / 100.0).into();
    }
    println!("{out}");
}
