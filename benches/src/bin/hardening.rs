//! Figures for the server's hardening (issue 13), each against a server the
//! calling script started and pinned (`scripts/slowloris.sh`,
//! `scripts/mass-expiry.sh`), or in-process for the store alone:
//!
//! ```text
//! hardening service-list [--services 600000] [--iterations 2000]
//! hardening slowloris    --target ADDR [--slow 2000] [--seconds 10] [--clients 8]
//! hardening mass-expiry  --target ADDR [--instances 100000] [--seconds 10] [--clients 8]
//! ```
//!
//! - `service-list`: page 1 (100 names) of `Store::list_services` over N
//!   services, one group and all groups, in µs; and for reference what the
//!   old listing did on every call (collect and sort every name).
//! - `slowloris`: the p99 of normal clients (beat/list mix, one keep-alive
//!   connection each, paced) quiet, then with `--slow` connections
//!   dribbling a request head at 1 byte/s (reopened when the server closes
//!   them); prints both and their ratio.
//! - `mass-expiry`: the p99 of beats quiet, then while `--instances`
//!   unbeaten instances expire (the server must run with short timeouts,
//!   e.g. `--beat-timeout-ms 2000 --delete-timeout-ms 4000`).
//!
//! Latency is measured from each request's intended send time (a fixed
//! pace per client), so a stalled server cannot hide behind its own stall.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use registry_core::{InstanceSpec, Millis, ServiceRef, Store, StoreConfig};
use registry_proto::http1::parse_response;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const NS: &str = "/nacos/v1/ns";

struct Args(Vec<String>);

impl Args {
    fn value<T: std::str::FromStr>(&self, name: &str, default: T) -> T {
        self.0
            .iter()
            .position(|a| a == name)
            .and_then(|i| self.0.get(i + 1))
            .map(|v| {
                v.parse().unwrap_or_else(|_| {
                    eprintln!("hardening: bad value for {name}: {v}");
                    std::process::exit(2)
                })
            })
            .unwrap_or(default)
    }

    fn target(&self) -> SocketAddr {
        let t: String = self.value("--target", String::new());
        t.trim_start_matches("http://").parse().unwrap_or_else(|_| {
            eprintln!("hardening: --target HOST:PORT is required");
            std::process::exit(2)
        })
    }
}

fn main() {
    let args = Args(std::env::args().skip(1).collect());
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime")
    };
    match args.0.first().map(String::as_str) {
        Some("service-list") => service_list(&args),
        Some("slowloris") => runtime().block_on(slowloris(&args)),
        Some("mass-expiry") => runtime().block_on(mass_expiry(&args)),
        _ => {
            eprintln!("usage: hardening service-list|slowloris|mass-expiry [options] (see the source header)");
            std::process::exit(2);
        }
    }
}

// ----- service-list ------------------------------------------------------------

fn service_list(args: &Args) {
    let services: usize = args.value("--services", 600_000);
    let iterations: usize = args.value("--iterations", 2_000);
    let store = Store::new(StoreConfig::default());
    let ip = "10.0.0.1".parse().expect("literal");
    let built = Instant::now();
    let mut names = Vec::with_capacity(services);
    for i in 0..services {
        let name = format!("DEFAULT_GROUP@@service-{i:07}");
        store
            .register(
                ServiceRef::new("public", &name),
                &InstanceSpec::new("DEFAULT", ip, 8080),
                Millis(0),
            )
            .expect("register");
        names.push(name);
    }
    println!(
        "service-list: {services} services registered in {:.1} s",
        built.elapsed().as_secs_f64()
    );
    for (what, group) in [("one group", Some("DEFAULT_GROUP")), ("all groups", None)] {
        let mut us = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let t = Instant::now();
            let page = store.list_services("public", group, 1, 100);
            us.push(t.elapsed().as_secs_f64() * 1e6);
            assert_eq!(
                (page.count, page.services.len()),
                (services, 100.min(services))
            );
        }
        let last_page = services.div_ceil(100);
        let t = Instant::now();
        let page = store.list_services("public", group, last_page, 100);
        let last_us = t.elapsed().as_secs_f64() * 1e6;
        assert!(!page.services.is_empty());
        us.sort_by(f64::total_cmp);
        println!(
            "service-list: page 1 of 100, {what}: p50 {:.1} µs, p99 {:.1} µs; last page ({last_page}): {last_us:.0} µs",
            us[us.len() / 2],
            us[us.len() * 99 / 100]
        );
    }
    // What the old listing did per call: visit every service, then sort.
    let t = Instant::now();
    let mut all: Vec<&str> = names.iter().map(String::as_str).collect();
    all.sort_unstable();
    std::hint::black_box(&all);
    println!(
        "service-list: reference, collecting and sorting {services} names once: {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );
}

// ----- clients ------------------------------------------------------------------

/// A keep-alive connection answering one request at a time.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends `request`, returns the status.
    async fn call(&mut self, request: &[u8]) -> u16 {
        self.stream.write_all(request).await.expect("write");
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some((r, used)) = parse_response(&self.buf).expect("well-formed") {
                let status = r.status;
                self.buf.drain(..used);
                return status;
            }
            let n = self.stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "server closed a normal connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn post(target: &str) -> Vec<u8> {
    format!("POST {target} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n").into_bytes()
}

fn put(target: &str) -> Vec<u8> {
    format!("PUT {target} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n").into_bytes()
}

fn get(target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

/// Latencies in ns, merged from every client (figures, not a hot path).
#[derive(Default)]
struct Latencies(std::sync::Mutex<Vec<u64>>);

impl Latencies {
    fn extend(&self, v: Vec<u64>) {
        self.0.lock().expect("samples").extend(v);
    }

    fn summary(&self) -> (usize, f64, f64) {
        let mut v = self.0.lock().expect("samples").clone();
        v.sort_unstable();
        if v.is_empty() {
            return (0, 0.0, 0.0);
        }
        let at = |q: f64| v[((v.len() as f64 * q) as usize).min(v.len() - 1)] as f64 / 1e6;
        (v.len(), at(0.5), at(0.99))
    }
}

/// Runs `clients` paced clients for `seconds`, each sending its requests
/// in turn every `every`; latencies from the intended send time.
async fn paced_mix(
    addr: SocketAddr,
    clients: usize,
    seconds: f64,
    every: Duration,
    requests: Arc<Vec<Vec<u8>>>,
) -> Latencies {
    let out = Arc::new(Latencies::default());
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (out, requests) = (out.clone(), requests.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await;
            let start = Instant::now() + every.mul_f64(c as f64 / clients as f64);
            let end = start + Duration::from_secs_f64(seconds);
            let mut samples = Vec::new();
            let mut n = 0u32;
            loop {
                let intended = start + every * n;
                if intended >= end {
                    break;
                }
                tokio::time::sleep_until(intended.into()).await;
                let request = &requests[(c + n as usize) % requests.len()];
                let status = conn.call(request).await;
                assert_eq!(status, 200, "normal request answered {status}");
                samples.push(intended.elapsed().as_nanos() as u64);
                n += 1;
            }
            out.extend(samples);
        }));
    }
    for t in tasks {
        t.await.expect("client");
    }
    Arc::try_unwrap(out).unwrap_or_else(|_| unreachable!("every client is done"))
}

fn print_phase(name: &str, l: &Latencies) -> f64 {
    let (n, p50, p99) = l.summary();
    println!("{name}: {n} requests, p50 {p50:.3} ms, p99 {p99:.3} ms");
    p99
}

async fn setup_mix(addr: SocketAddr, clients: usize) -> Arc<Vec<Vec<u8>>> {
    let mut conn = Conn::open(addr).await;
    let mut requests = Vec::new();
    for c in 0..clients {
        let q = format!("serviceName=mix&ip=10.7.0.1&port={}", 2000 + c);
        assert_eq!(conn.call(&post(&format!("{NS}/instance?{q}"))).await, 200);
        requests.push(put(&format!("{NS}/instance/beat?{q}")));
        requests.push(get(&format!("{NS}/instance/list?serviceName=mix")));
    }
    Arc::new(requests)
}

// ----- slowloris ----------------------------------------------------------------

async fn slowloris(args: &Args) {
    let addr = args.target();
    let slow: usize = args.value("--slow", 2_000);
    let seconds: f64 = args.value("--seconds", 10.0);
    let clients: usize = args.value("--clients", 8);
    let every = Duration::from_millis(args.value("--every-ms", 5));
    let requests = setup_mix(addr, clients).await;
    let quiet = paced_mix(addr, clients, seconds, every, requests.clone()).await;
    let quiet_p99 = print_phase("slowloris: quiet", &quiet);

    let stop = Arc::new(AtomicBool::new(false));
    let closed = Arc::new(AtomicU64::new(0));
    // The attacker on a thread and runtime of its own, so its work never
    // delays the normal clients' own loop (which would read as latency).
    let dribbler = {
        let (stop, closed) = (stop.clone(), closed.clone());
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(dribble(addr, slow, stop, closed))
        })
    };
    // Let the slow connections pile up first.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let loaded = paced_mix(addr, clients, seconds, every, requests.clone()).await;
    stop.store(true, Ordering::Relaxed);
    let open = dribbler.join().expect("dribbler");
    let loaded_p99 = print_phase(&format!("slowloris: with {slow} slow connections"), &loaded);
    // Quiet again, after: the machine's own drift shows between the two.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = paced_mix(addr, clients, seconds, every, requests).await;
    let after_p99 = print_phase("slowloris: quiet again", &after);
    println!(
        "slowloris: p99 ratio {:.2} (loaded / mean of the quiet runs); slow connections closed by the server: {}, open at the end: {open}",
        loaded_p99 / ((quiet_p99 + after_p99) / 2.0),
        closed.load(Ordering::Relaxed)
    );
}

/// Keeps `slow` connections open, each sending one byte of a request head
/// per second; reopens those the server closes. Returns how many are open.
async fn dribble(
    addr: SocketAddr,
    slow: usize,
    stop: Arc<AtomicBool>,
    closed: Arc<AtomicU64>,
) -> usize {
    let head = format!(
        "GET {NS}/instance/list?serviceName=slow HTTP/1.1\r\nHost: t\r\nX-Slow: {}\r\n\r\n",
        "y".repeat(200)
    );
    let head = head.as_bytes();
    let mut conns: Vec<Option<(TcpStream, usize)>> = Vec::with_capacity(slow);
    for _ in 0..slow {
        conns.push(TcpStream::connect(addr).await.ok().map(|s| (s, 0)));
    }
    // Each connection sends once a second, spread evenly over the second
    // (100 slices of 10 ms), as independent clients would.
    let slices = 100;
    let per_slice = slow.div_ceil(slices).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut chunk = [0u8; 512];
    let mut slice = 0;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let from = (slice * per_slice).min(conns.len());
        let to = (from + per_slice).min(conns.len());
        slice = (slice + 1) % slices;
        for slot in conns[from..to].iter_mut() {
            let reopen = match slot {
                Some((s, sent)) => {
                    // Anything to read is the 408 or the close: either way it is going.
                    let gone = match s.try_read(&mut chunk) {
                        Ok(_) => true,
                        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                    } || s.try_write(&head[*sent % (head.len() - 4)..][..1]).is_err();
                    *sent += 1;
                    gone
                }
                None => true,
            };
            if reopen {
                if slot.is_some() {
                    closed.fetch_add(1, Ordering::Relaxed);
                }
                *slot = TcpStream::connect(addr).await.ok().map(|s| (s, 0));
            }
        }
    }
    conns.iter().filter(|c| c.is_some()).count()
}

// ----- mass-expiry ----------------------------------------------------------------

async fn mass_expiry(args: &Args) {
    let addr = args.target();
    let instances: usize = args.value("--instances", 100_000);
    let seconds: f64 = args.value("--seconds", 10.0);
    let clients: usize = args.value("--clients", 8);
    let every = Duration::from_millis(args.value("--every-ms", 5));
    let mut conn = Conn::open(addr).await;
    let mut beats = Vec::new();
    for c in 0..clients {
        let q = format!("serviceName=beaters&ip=10.8.0.1&port={}", 3000 + c);
        assert_eq!(conn.call(&post(&format!("{NS}/instance?{q}"))).await, 200);
        beats.push(put(&format!("{NS}/instance/beat?{q}")));
    }
    let beats = Arc::new(beats);
    let quiet = paced_mix(addr, clients, seconds, every, beats.clone()).await;
    let quiet_p99 = print_phase("mass-expiry: quiet beats", &quiet);

    // The mass: `instances` instances in services of 10, registered fast
    // (pipelined) and then never beaten.
    let registered = Instant::now();
    register_mass(addr, instances).await;
    println!(
        "mass-expiry: {instances} instances registered in {:.1} s; beating others while they expire",
        registered.elapsed().as_secs_f64()
    );
    let before = metric(addr, "registry_expired_removed_total").await;
    let loaded = paced_mix(addr, clients, seconds, every, beats.clone()).await;
    let removed = metric(addr, "registry_expired_removed_total").await - before;
    let loaded_p99 = print_phase("mass-expiry: beats during the expiry", &loaded);
    let after = paced_mix(addr, clients, seconds, every, beats).await;
    let after_p99 = print_phase("mass-expiry: quiet beats again", &after);
    println!(
        "mass-expiry: {removed} instances deleted by the sweeper during the window; \
         p99 ratio {:.2} (during / mean of the quiet runs)",
        loaded_p99 / ((quiet_p99 + after_p99) / 2.0)
    );
}

async fn register_mass(addr: SocketAddr, instances: usize) {
    let lanes = 8;
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await;
            let mut i = lane;
            while i < instances {
                let mut batch = Vec::new();
                let mut n = 0;
                while n < 64 && i < instances {
                    batch.extend(post(&format!(
                        "{NS}/instance?serviceName=mass-{}&ip=10.9.{}.{}&port={}",
                        i / 10,
                        (i / 250) % 250,
                        i % 250,
                        8000 + i % 10
                    )));
                    n += 1;
                    i += lanes;
                }
                conn.stream.write_all(&batch).await.expect("write");
                for _ in 0..n {
                    let mut chunk = [0u8; 16 * 1024];
                    loop {
                        if let Some((r, used)) = parse_response(&conn.buf).expect("well-formed") {
                            assert_eq!(r.status, 200);
                            conn.buf.drain(..used);
                            break;
                        }
                        let got = conn.stream.read(&mut chunk).await.expect("read");
                        assert!(got > 0);
                        conn.buf.extend_from_slice(&chunk[..got]);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("register");
    }
}

async fn metric(addr: SocketAddr, name: &str) -> f64 {
    let mut conn = Conn::open(addr).await;
    conn.stream
        .write_all(&get("/metrics"))
        .await
        .expect("write");
    let mut chunk = [0u8; 64 * 1024];
    loop {
        if let Some((r, _)) = parse_response(&conn.buf).expect("well-formed") {
            let text = String::from_utf8_lossy(&r.body);
            return text
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0);
        }
        let n = conn.stream.read(&mut chunk).await.expect("read");
        assert!(n > 0);
        conn.buf.extend_from_slice(&chunk[..n]);
    }
}
