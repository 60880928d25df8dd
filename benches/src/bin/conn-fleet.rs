//! `conn-fleet`: many Nacos 2.x connections held open against one registry, to
//! measure what an idle connection costs the server and how fast a push reaches
//! every subscriber (issue 26, target 4). `scripts/grpc-conns.sh` runs it.
//!
//! Each simulated client does what a 2.x client does to stay connected and
//! nothing else: `ServerCheckRequest`, the bidirectional stream with
//! `ConnectionSetupRequest`, a `HealthCheckRequest` every `--health-secs`
//! (the Java client's keep-alive), answers to the server's detections, and
//! acks of pushes. Connections come from `--sources` loopback addresses
//! (127.0.0.1, .2, ...) so more than one address's ephemeral ports are used.
//!
//! The client speaks HTTP/2 through `h2` directly, not through a tonic
//! `Channel`: a `Channel` adds a buffer task and its queue per connection,
//! which at 100,000 connections is gigabytes of generator memory measuring
//! nothing about the server. The gRPC message framing is
//! `registry_proto::grpc::frame`'s, which loadgen's 2.x fleet uses too.
//!
//! Push latency: the first `--subscribe` connections subscribe to one service;
//! connection 0 then registers one new instance per round (port 20000 + round)
//! and each subscriber records the time from that register to the first push
//! whose hosts include the new port. Printed as one JSON object, with the
//! server's resident memory (`--server-pid`) before and after connecting.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use benches::flags::value;
use bytes::Bytes;
use hdrhistogram::Histogram;
use registry_proto::grpc::frame::{self, Decoder};
use registry_proto::grpc::message::{
    ClientDetectionResponse, ConnectionSetupRequest, HealthCheckRequest, InstanceRequest,
    NamingHead, NotifySubscriberRequest, NotifySubscriberResponse, RequestHead, ResponseHead,
    ServerCheckRequest, ServiceQueryRequest, SubscribeServiceRequest, WireInstance,
};
use registry_proto::grpc::{Payload, REQUEST_PATH, STREAM_PATH};

const SERVICE: &str = "conn-fleet.push";
const FIRST_PORT: i64 = 20_000;

struct Options {
    grpc: String,
    connections: usize,
    sources: u8,
    subscribe: usize,
    rounds: usize,
    health_secs: u64,
    server_pid: u32,
    hold_secs: u64,
    concurrency: usize,
    metrics: String,
    ops: usize,
    kinds: String,
}

impl Options {
    fn parse() -> Result<Options, String> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        Ok(Options {
            grpc: value(&args, "--grpc", "127.0.0.1:9848".to_string())?,
            connections: value(&args, "--connections", 1_000)?,
            sources: value(&args, "--sources", 8)?,
            subscribe: value(&args, "--subscribe", 0)?,
            rounds: value(&args, "--rounds", 10)?,
            health_secs: value(&args, "--health-secs", 5)?,
            server_pid: value(&args, "--server-pid", 0)?,
            hold_secs: value(&args, "--hold-secs", 0)?,
            concurrency: value(&args, "--concurrency", 64)?,
            metrics: value(&args, "--metrics", String::new())?,
            ops: value(&args, "--ops", 0)?,
            kinds: value(&args, "--kinds", "register,query,deregister".to_string())?,
        })
    }
}

/// When each round's instance was registered (ns since start; 0 = not yet).
struct Rounds {
    start: Instant,
    registered_at: Vec<AtomicU64>,
    latency: Mutex<Histogram<u64>>,
    received: AtomicUsize,
}

struct Client {
    send: h2::client::SendRequest<Bytes>,
    authority: String,
    /// The stream's request side, for acks and detection answers.
    stream: tokio::sync::Mutex<h2::SendStream<Bytes>>,
}

/// The largest message taken (a push of the test service stays far below it).
const MAX_MESSAGE: usize = 16 << 20;

fn of<T: registry_proto::grpc::Message + serde::Serialize>(value: &T) -> Bytes {
    frame::encode(&Payload::of(value))
}

/// Takes every complete gRPC message the decoder holds; stops at one that is not
/// a message (the stream cannot be framed past it).
fn messages(decoder: &mut Decoder) -> Vec<Payload> {
    let mut out = Vec::new();
    while let Ok(Some(p)) = decoder.message() {
        out.push(p);
    }
    out
}

fn request(authority: &str, path: &str) -> http::Request<()> {
    http::Request::builder()
        .method("POST")
        .uri(format!("http://{authority}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a valid request")
}

async fn unary(
    send: &h2::client::SendRequest<Bytes>,
    authority: &str,
    message: Bytes,
) -> Result<Payload, String> {
    let mut send = send.clone().ready().await.map_err(|e| e.to_string())?;
    let (response, mut body_tx) = send
        .send_request(request(authority, REQUEST_PATH), false)
        .map_err(|e| e.to_string())?;
    body_tx
        .send_data(message, true)
        .map_err(|e| e.to_string())?;
    let mut body = response.await.map_err(|e| e.to_string())?.into_body();
    let mut decoder = Decoder::new(MAX_MESSAGE);
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        let _ = body.flow_control().release_capacity(chunk.len());
        decoder.extend(&chunk);
    }
    messages(&mut decoder).pop().ok_or("no answer".into())
}

impl Client {
    async fn unary(&self, message: Bytes) -> Result<Payload, String> {
        unary(&self.send, &self.authority, message).await
    }

    async fn reply(&self, message: Bytes) {
        let _ = self.stream.lock().await.send_data(message, false);
    }
}

async fn connect(o: &Options, i: usize) -> Result<(Arc<Client>, h2::RecvStream), String> {
    let server: std::net::SocketAddr = o.grpc.parse().map_err(|e| format!("--grpc: {e}"))?;
    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    let source = std::net::Ipv4Addr::new(127, 0, 0, 1 + (i % usize::from(o.sources)) as u8);
    socket
        .bind((source, 0).into())
        .map_err(|e| format!("bind {source}: {e}"))?;
    let tcp = socket.connect(server).await.map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let (send, conn) = h2::client::handshake(tcp)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let authority = o.grpc.clone();
    let answer = unary(&send, &authority, of(&ServerCheckRequest::default())).await?;
    if answer.type_name() != "ServerCheckResponse" {
        return Err(format!("server check answered {}", answer.type_name()));
    }
    // The stream: setup, then it stays open for the server's requests.
    let mut ready = send.clone().ready().await.map_err(|e| e.to_string())?;
    let (response, mut stream) = ready
        .send_request(request(&authority, STREAM_PATH), false)
        .map_err(|e| e.to_string())?;
    let setup = ConnectionSetupRequest {
        client_version: Some("Nacos-Java-Client:v2.4.0".into()),
        ..ConnectionSetupRequest::default()
    };
    stream
        .send_data(of(&setup), false)
        .map_err(|e| e.to_string())?;
    let body = response.await.map_err(|e| e.to_string())?.into_body();
    let client = Arc::new(Client {
        send,
        authority,
        stream: tokio::sync::Mutex::new(stream),
    });
    Ok((client, body))
}

/// Reads the server's requests on the stream: answers detections, acks pushes
/// and records the rounds they show.
async fn read_stream(client: Arc<Client>, mut body: h2::RecvStream, rounds: Arc<Rounds>) {
    let mut decoder = Decoder::new(MAX_MESSAGE);
    let mut seen = 0usize;
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        decoder.extend(&chunk);
        for p in messages(&mut decoder) {
            match p.type_name() {
                "ClientDetectionRequest" => {
                    let head = serde_json::from_slice::<RequestHead>(p.json()).unwrap_or_default();
                    let answer = ClientDetectionResponse {
                        head: ResponseHead::ok(head.request_id),
                    };
                    client.reply(of(&answer)).await;
                }
                "NotifySubscriberRequest" => {
                    let Ok(push) = serde_json::from_slice::<NotifySubscriberRequest>(p.json())
                    else {
                        continue;
                    };
                    let now = rounds.start.elapsed().as_nanos() as u64;
                    let newest = push
                        .service_info
                        .iter()
                        .flat_map(|i| i.hosts.iter())
                        .map(|h| h.port - FIRST_PORT)
                        .filter(|r| *r >= 0)
                        .max();
                    if let Some(r) = newest.map(|r| r as usize) {
                        record(&rounds, r, &mut seen, now);
                    }
                    let ack = NotifySubscriberResponse {
                        head: ResponseHead::ok(push.head.request_id),
                    };
                    client.reply(of(&ack)).await;
                }
                _ => {}
            }
        }
    }
}

/// Records the first receipt of each round up to `r` not seen yet.
fn record(rounds: &Rounds, r: usize, seen: &mut usize, now: u64) {
    while *seen <= r && *seen < rounds.registered_at.len() {
        let at = rounds.registered_at[*seen].load(Ordering::Acquire);
        if at > 0 && now >= at {
            let mut h = rounds.latency.lock().expect("not poisoned");
            let _ = h.record(((now - at) / 1_000).max(1));
            rounds.received.fetch_add(1, Ordering::Relaxed);
        }
        *seen += 1;
    }
}

fn naming() -> NamingHead {
    NamingHead {
        namespace: Some("public".into()),
        service_name: Some(SERVICE.into()),
        group_name: Some("DEFAULT_GROUP".into()),
    }
}

async fn health_loop(client: Arc<Client>, every: Duration, offset: Duration) {
    tokio::time::sleep(offset).await;
    loop {
        if client
            .unary(of(&HealthCheckRequest::default()))
            .await
            .is_err()
        {
            return;
        }
        tokio::time::sleep(every).await;
    }
}

/// `VmRSS` and `VmHWM` of `pid`, KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The registry's `registry_memory_bytes` parts from its `/metrics` at
/// `addr` (`HOST:PORT`), empty without one.
async fn memory_parts(addr: &str) -> Vec<(String, f64)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    if addr.is_empty() {
        return Vec::new();
    }
    let Ok(mut tcp) = tokio::net::TcpStream::connect(addr).await else {
        return Vec::new();
    };
    let get = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut text = String::new();
    if tcp.write_all(get.as_bytes()).await.is_err() || tcp.read_to_string(&mut text).await.is_err()
    {
        return Vec::new();
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("registry_memory_bytes{part=\""))
        .filter_map(|l| {
            let (part, rest) = l.split_once("\"} ")?;
            Some((part.to_owned(), rest.trim().parse().ok()?))
        })
        .collect()
}

/// CPU seconds (user + system) `pid` has used, from `/proc/PID/stat`.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    (ticks(11) + ticks(12)) / 100.0
}

/// A register, query or deregister of ops instance `i`.
fn op_request(kind: &str, i: usize) -> Bytes {
    let naming = NamingHead {
        service_name: Some(format!("conn-fleet.ops.{}", i % 100)),
        ..naming()
    };
    if kind == "query" {
        return of(&ServiceQueryRequest {
            naming,
            ..ServiceQueryRequest::default()
        });
    }
    let op = if kind == "register" {
        "registerInstance"
    } else {
        "deregisterInstance"
    };
    let mut metadata = std::collections::BTreeMap::new();
    if kind == "register" {
        metadata.insert("version".to_owned(), "1.0.0".to_owned());
        metadata.insert("env".to_owned(), "prod".to_owned());
    }
    of(&InstanceRequest {
        naming,
        r#type: Some(op.into()),
        instance: Some(WireInstance {
            ip: Some(format!("10.1.{}.{}", (i / 250) % 250, i % 250)),
            port: Some(8080),
            weight: Some(1.0),
            healthy: Some(true),
            enabled: Some(true),
            ephemeral: Some(true),
            cluster_name: Some("DEFAULT".into()),
            metadata: Some(metadata),
            ..WireInstance::default()
        }),
        ..InstanceRequest::default()
    })
}

/// Runs `o.ops` of each kind over the first connections (16 in flight) and
/// returns the server's CPU microseconds per operation of each kind.
async fn server_cost(o: &Options, clients: &[Arc<Client>]) -> serde_json::Value {
    let lanes = clients.len().min(16);
    let mut out = serde_json::Map::new();
    for kind in o
        .kinds
        .split(',')
        .filter(|k| ["register", "query", "deregister"].contains(k))
    {
        let before = cpu_secs(o.server_pid);
        let began = Instant::now();
        let mut lanes_done = Vec::new();
        for (lane, client) in clients.iter().enumerate().take(lanes) {
            let client = client.clone();
            let (ops, kind) = (o.ops, kind.to_owned());
            lanes_done.push(tokio::spawn(async move {
                let mut errors = 0usize;
                for i in (lane..ops).step_by(lanes) {
                    errors += usize::from(client.unary(op_request(&kind, i)).await.is_err());
                }
                errors
            }));
        }
        let mut errors = 0;
        for l in lanes_done {
            errors += l.await.unwrap_or(0);
        }
        let secs = began.elapsed().as_secs_f64();
        let cpu = cpu_secs(o.server_pid) - before;
        out.insert(
            kind.to_owned(),
            serde_json::json!({
                "ops": o.ops,
                "errors": errors,
                "ops_per_sec": o.ops as f64 / secs,
                "server_cpu_us_per_op": cpu * 1e6 / o.ops.max(1) as f64,
            }),
        );
    }
    serde_json::Value::Object(out)
}

fn self_rss_kib() -> u64 {
    memory_kib(std::process::id()).0
}

async fn connect_all(o: &Arc<Options>, rounds: &Arc<Rounds>) -> Vec<Arc<Client>> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..o.concurrency.max(1) {
        let (o, next, rounds) = (o.clone(), next.clone(), rounds.clone());
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= o.connections {
                    return mine;
                }
                match connect(&o, i).await {
                    Ok((client, body)) => {
                        tokio::spawn(read_stream(client.clone(), body, rounds.clone()));
                        mine.push((i, client));
                    }
                    Err(e) => eprintln!("conn-fleet: connection {i}: {e}"),
                }
            }
        }));
    }
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.await.unwrap_or_default());
    }
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, c)| c).collect()
}

async fn subscribe_all(clients: &[Arc<Client>], count: usize) -> usize {
    let mut ok = 0;
    for c in clients.iter().take(count) {
        let sub = SubscribeServiceRequest {
            naming: naming(),
            subscribe: Some(true),
            clusters: Some(String::new()),
            ..SubscribeServiceRequest::default()
        };
        if let Ok(p) = c.unary(of(&sub)).await {
            ok += usize::from(p.type_name() == "SubscribeServiceResponse");
        }
    }
    ok
}

async fn push_rounds(o: &Options, clients: &[Arc<Client>], rounds: &Rounds) -> Result<(), String> {
    let writer = clients.first().ok_or("no connection")?;
    for r in 0..o.rounds {
        let register = InstanceRequest {
            naming: naming(),
            r#type: Some("registerInstance".into()),
            instance: Some(WireInstance {
                ip: Some("10.255.0.1".into()),
                port: Some(FIRST_PORT + r as i64),
                weight: Some(1.0),
                healthy: Some(true),
                enabled: Some(true),
                ephemeral: Some(true),
                cluster_name: Some("DEFAULT".into()),
                metadata: Some(Default::default()),
                ..WireInstance::default()
            }),
            ..InstanceRequest::default()
        };
        let at = rounds.start.elapsed().as_nanos() as u64;
        rounds.registered_at[r].store(at.max(1), Ordering::Release);
        let answer = writer.unary(of(&register)).await?;
        if answer.type_name() != "InstanceResponse" {
            return Err(format!("register answered {}", answer.type_name()));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Stragglers: up to 5 s more for the last round to arrive everywhere.
    let want = o.rounds * o.subscribe.min(clients.len());
    let deadline = Instant::now() + Duration::from_secs(5);
    while rounds.received.load(Ordering::Relaxed) < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

async fn run(o: Arc<Options>) -> Result<(), String> {
    let rounds = Arc::new(Rounds {
        start: Instant::now(),
        registered_at: (0..o.rounds).map(|_| AtomicU64::new(0)).collect(),
        latency: Mutex::new(Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds")),
        received: AtomicUsize::new(0),
    });
    let (server_before, _) = memory_kib(o.server_pid);
    let parts_before = memory_parts(&o.metrics).await;
    let self_before = self_rss_kib();
    let began = Instant::now();
    let clients = connect_all(&o, &rounds).await;
    let connect_secs = began.elapsed().as_secs_f64();
    // `--health-secs 0`: no health checks (scripts/grpc-cost.sh counts only
    // the operations it sends).
    for (i, c) in clients.iter().enumerate().filter(|_| o.health_secs > 0) {
        let every = Duration::from_secs(o.health_secs);
        let offset = every.mul_f64((i % 1000) as f64 / 1000.0);
        tokio::spawn(health_loop(c.clone(), every, offset));
    }
    // Let health checks and detections run once over the fleet, then measure.
    tokio::time::sleep(Duration::from_secs(o.health_secs + 1)).await;
    let (server_idle, server_hwm) = memory_kib(o.server_pid);
    let parts_idle = memory_parts(&o.metrics).await;
    let self_idle = self_rss_kib();
    let cost = if o.ops > 0 && !clients.is_empty() {
        server_cost(&o, &clients).await
    } else {
        serde_json::Value::Null
    };
    let subscribed = subscribe_all(&clients, o.subscribe).await;
    if subscribed > 0 {
        push_rounds(&o, &clients, &rounds).await?;
    }
    tokio::time::sleep(Duration::from_secs(o.hold_secs)).await;
    let n = clients.len().max(1) as f64;
    // Each part's growth over the fleet, bytes per connection.
    let parts: serde_json::Map<String, serde_json::Value> = parts_idle
        .iter()
        .map(|(part, after)| {
            let before = parts_before
                .iter()
                .find(|(p, _)| p == part)
                .map_or(0.0, |(_, b)| *b);
            (
                part.clone(),
                serde_json::json!(((after - before) / n).round()),
            )
        })
        .collect();
    let h = rounds.latency.lock().expect("not poisoned").clone();
    let report = serde_json::json!({
        "connections": clients.len(),
        "connect_secs": connect_secs,
        "server_rss_before_kib": server_before,
        "server_rss_idle_kib": server_idle,
        "server_hwm_kib": server_hwm,
        "server_kib_per_connection": (server_idle.saturating_sub(server_before)) as f64 / n,
        "server_bytes_per_connection_by_part": parts,
        "server_cost": cost,
        "client_kib_per_connection": (self_idle.saturating_sub(self_before)) as f64 / n,
        "subscribed": subscribed,
        "rounds": o.rounds,
        "pushes_received": rounds.received.load(Ordering::Relaxed),
        "pushes_expected": o.rounds * subscribed,
        "push_p50_ms": h.value_at_quantile(0.50) as f64 / 1e3,
        "push_p99_ms": h.value_at_quantile(0.99) as f64 / 1e3,
        "push_max_ms": h.max() as f64 / 1e3,
    });
    println!("{report}");
    Ok(())
}

fn main() -> std::process::ExitCode {
    let o = match Options::parse() {
        Ok(o) => Arc::new(o),
        Err(e) => {
            eprintln!("conn-fleet: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(o)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conn-fleet: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
