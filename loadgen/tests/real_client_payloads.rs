//! loadgen's 2.x requests against what the real clients send, field for field.
//!
//! The real Python `nacos-sdk-python==3.2.0` (a script, installed by
//! `scripts/deps/clients.sh`; the test fails, never skips, when it is missing) and the
//! Rust `nacos-sdk` 0.8 crate (in-process) talk to the embedded registry through a
//! recording gRPC proxy: every payload they send, unary or on the stream, is kept as
//! the golden payload of its type. loadgen's requests ([`loadgen::grpc::request`])
//! must carry every field either client sends with a value, with the same JSON kind,
//! no field neither sends, and the instance defaults (`weight`, `healthy`, `enabled`,
//! `ephemeral`) the clients send: a field loadgen leaves `null` where a client never
//! does is what made r-nacos refuse every loadgen registration.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use loadgen::grpc::request::{self, Sample};
use nacos_sdk::api::naming::{NamingServiceBuilder, ServiceInstance};
use nacos_sdk::api::props::ClientProps;
use registry_proto::grpc::{Payload, REQUEST_PATH, STREAM_PATH};
use serde_json::Value;
use tokio_stream::StreamExt as _;
use tonic::body::Body;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::codegen::{http, BoxFuture, BoxStream, Service};
use tonic::server::NamedService;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};

/// Payloads by client, then by type name (every one of that type, in order).
type Log = Arc<Mutex<BTreeMap<String, Vec<Value>>>>;

fn record(log: &Log, p: &Payload) {
    let json = serde_json::from_slice(p.json()).unwrap_or(Value::Null);
    log.lock()
        .unwrap()
        .entry(p.type_name().to_owned())
        .or_default()
        .push(json);
}

fn codec() -> tonic_prost::ProstCodec<Payload, Payload> {
    tonic_prost::ProstCodec::default()
}

/// The proxy: both Nacos services, forwarded to `upstream`, recorded into `log`.
#[derive(Clone)]
struct Proxy {
    upstream: Channel,
    log: Log,
}

#[derive(Clone)]
struct Unary(Proxy);
#[derive(Clone)]
struct Bidi(Proxy);

impl NamedService for Unary {
    const NAME: &'static str = "Request";
}

impl NamedService for Bidi {
    const NAME: &'static str = "BiRequestStream";
}

impl Service<http::Request<Body>> for Unary {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let proxy = self.0.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(codec());
            Ok(grpc.unary(proxy, req).await)
        })
    }
}

impl Service<Request<Payload>> for Proxy {
    type Response = Response<Payload>;
    type Error = Status;
    type Future = BoxFuture<Response<Payload>, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Payload>) -> Self::Future {
        let proxy = self.clone();
        Box::pin(async move {
            let payload = req.into_inner();
            record(&proxy.log, &payload);
            let mut g = tonic::client::Grpc::new(proxy.upstream.clone());
            g.ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            g.unary(
                Request::new(payload),
                PathAndQuery::from_static(REQUEST_PATH),
                codec(),
            )
            .await
        })
    }
}

impl Service<http::Request<Body>> for Bidi {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let proxy = self.0.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(codec());
            Ok(grpc.streaming(BidiInner(proxy), req).await)
        })
    }
}

struct BidiInner(Proxy);

impl Service<Request<Streaming<Payload>>> for BidiInner {
    type Response = Response<BoxStream<Payload>>;
    type Error = Status;
    type Future = BoxFuture<Self::Response, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Streaming<Payload>>) -> Self::Future {
        let proxy = self.0.clone();
        Box::pin(async move {
            let log = proxy.log.clone();
            let inbound = req.into_inner().map_while(move |m| {
                let p = m.ok()?;
                record(&log, &p);
                Some(p)
            });
            let mut g = tonic::client::Grpc::new(proxy.upstream.clone());
            g.ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            let answer = g
                .streaming(
                    Request::new(inbound),
                    PathAndQuery::from_static(STREAM_PATH),
                    codec(),
                )
                .await?
                .into_inner();
            let out: BoxStream<Payload> = Box::pin(answer);
            Ok(Response::new(out))
        })
    }
}

/// Starts a recording proxy to `upstream`; returns its address.
async fn start_proxy(upstream: SocketAddr, log: Log) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let upstream = tonic::transport::Endpoint::from_shared(format!("http://{upstream}"))
        .unwrap()
        .connect_lazy();
    let proxy = Proxy { upstream, log };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Unary(proxy.clone()))
            .add_service(Bidi(proxy))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    addr
}

fn compat_dir() -> PathBuf {
    std::env::var_os("NACOS_COMPAT_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/compat"),
        PathBuf::from,
    )
}

async fn python_payloads(http: SocketAddr, grpc: SocketAddr) -> BTreeMap<String, Vec<Value>> {
    let python = compat_dir().join("venv-grpc/bin/python");
    assert!(
        python.exists(),
        "nacos-sdk-python==3.2.0 not found at {}: run scripts/deps/clients.sh (the test command does)",
        python.display()
    );
    let log = Log::default();
    let proxy = start_proxy(grpc, log.clone()).await;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/python_2x_payloads.py");
    let port = proxy.port().to_string();
    let run = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(http.to_string())
            .arg(port)
            .arg("golden-py")
            .output()
    });
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the Python client finished in time")
        .expect("the client's thread")
        .expect("the Python client started");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("PASS"),
        "the Python client failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let log = log.lock().unwrap().clone();
    log
}

async fn rust_payloads(http: SocketAddr, grpc: SocketAddr) -> BTreeMap<String, Vec<Value>> {
    let log = Log::default();
    let proxy = start_proxy(grpc, log.clone()).await;
    let client = NamingServiceBuilder::new(
        ClientProps::new()
            .server_addr(http.to_string())
            .remote_grpc_port(proxy.port())
            .namespace("")
            .env_first(false)
            .naming_push_empty_protection(false)
            .app_name("loadgen-golden"),
    )
    .build()
    .await
    .expect("nacos-sdk client");
    let instance = |ip: &str| ServiceInstance {
        ip: ip.into(),
        port: 8080,
        ..ServiceInstance::default()
    };
    let pushed = Arc::new(Pushed::default());
    client
        .subscribe("golden-rs".into(), None, Vec::new(), pushed.clone())
        .await
        .expect("subscribe");
    client
        .register_instance("golden-rs".into(), None, instance("10.0.0.1"))
        .await
        .expect("register");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !*pushed.0.lock().unwrap() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no push reached the Rust client"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    client
        .batch_register_instance(
            "golden-rs-batch".into(),
            None,
            vec![instance("10.0.0.2"), instance("10.0.0.3")],
        )
        .await
        .expect("batch register");
    let hosts = client
        .get_all_instances("golden-rs".into(), None, Vec::new(), false)
        .await
        .expect("query");
    assert_eq!(hosts.len(), 1);
    client
        .deregister_instance("golden-rs".into(), None, instance("10.0.0.1"))
        .await
        .expect("deregister");
    tokio::time::sleep(Duration::from_millis(500)).await; // the push's ack
    drop(client);
    let log = log.lock().unwrap().clone();
    log
}

#[derive(Default)]
struct Pushed(Mutex<bool>);

impl nacos_sdk::api::naming::NamingEventListener for Pushed {
    fn event(&self, _: Arc<nacos_sdk::api::naming::NamingChangeEvent>) {
        *self.0.lock().unwrap() = true;
    }
}

/// JSON kind of a value, objects by their fields.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Differences between loadgen's payload `ours` and the clients' payloads `theirs`
/// of one type, at `path`.
fn differences(path: &str, ours: &Value, theirs: &[&Value], out: &mut Vec<String>) {
    let Some(ours_map) = ours.as_object() else {
        for t in theirs {
            if !t.is_null() && kind(t) != kind(ours) {
                out.push(format!("{path}: loadgen sends {ours}, a client sends {t}"));
            }
        }
        return;
    };
    let maps: Vec<_> = theirs.iter().filter_map(|t| t.as_object()).collect();
    for key in ours_map.keys() {
        let sent: Vec<&Value> = maps.iter().filter_map(|m| m.get(key)).collect();
        if sent.is_empty() {
            out.push(format!("{path}.{key}: loadgen sends it, no client does"));
        }
    }
    for m in &maps {
        for (key, value) in m.iter() {
            let here = format!("{path}.{key}");
            match ours_map.get(key) {
                _ if value.is_null() => {}
                None | Some(Value::Null) => {
                    if !QUIRKS
                        .iter()
                        .any(|(ty, k)| path.starts_with(ty) && k == key)
                    {
                        out.push(format!("{here}: a client sends {value}, loadgen does not"));
                    }
                }
                Some(mine) => {
                    let firsts = |v: &Value| v.as_array().and_then(|a| a.first()).cloned();
                    match (mine, value) {
                        (Value::Array(_), Value::Array(_)) => {
                            if let (Some(a), Some(b)) = (firsts(mine), firsts(value)) {
                                differences(&format!("{here}[0]"), &a, &[&b], out);
                            }
                        }
                        (Value::Object(o), Value::Object(t))
                            if (!o.is_empty() || !t.is_empty())
                                && !OPAQUE.contains(&key.as_str()) =>
                        {
                            differences(&here, mine, &[value], out);
                        }
                        _ if kind(mine) != kind(value) => out.push(format!(
                            "{here}: loadgen sends {mine}, a client sends {value}"
                        )),
                        _ => {}
                    }
                }
            }
        }
    }
}

/// Fields a real client sends that loadgen leaves out, and why.
const QUIRKS: [(&str, &str); 1] = [
    // nacos-sdk-python 3.2.0 misspells `healthyOnly` (the name the Java server and
    // the Rust client use); loadgen sends `healthyOnly`.
    ("ServiceQueryRequest", "healthOnly"),
];

/// Types only some clients send within the test's few seconds (the keep-alive
/// every 5 s of idleness): one client's capture is the golden payload.
const ONE_CLIENT_ENOUGH: [&str; 1] = ["HealthCheckRequest"];

/// Objects compared by kind only: capability and label maps whose entries differ
/// from client to client.
const OPAQUE: [&str; 5] = ["metadata", "headers", "labels", "abilities", "abilityTable"];

/// Instance fields whose values (the clients' defaults) loadgen must send as they do.
const DEFAULTS: [&str; 4] = ["weight", "healthy", "enabled", "ephemeral"];

fn instance_defaults(v: &Value) -> Vec<(String, Value)> {
    let instances: Vec<&Value> = match (v.get("instance"), v.get("instances")) {
        (Some(i), _) => vec![i],
        (_, Some(Value::Array(a))) => a.iter().collect(),
        _ => Vec::new(),
    };
    instances
        .iter()
        .flat_map(|i| {
            DEFAULTS
                .iter()
                .map(|k| ((*k).to_owned(), i.get(*k).cloned().unwrap_or(Value::Null)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadgen_sends_what_the_real_2x_clients_send() {
    use clap::Parser as _;
    let mut config = registry_server::Config::parse_from(["registry"]);
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let registry = registry_server::Embedded::start(config).expect("embedded registry");
    let (http, grpc) = (registry.http_addr, registry.grpc_addr);
    let clients = [
        ("python 3.2.0", python_payloads(http, grpc).await),
        ("rust nacos-sdk 0.8", rust_payloads(http, grpc).await),
    ];
    let mut problems = Vec::new();
    for sample in request::samples() {
        let Sample { payload, .. } = &sample;
        let ty = payload.type_name();
        let ours: Value = serde_json::from_slice(payload.json()).expect("loadgen's JSON");
        let theirs: Vec<&Value> = clients
            .iter()
            .filter_map(|(_, log)| log.get(ty))
            .flatten()
            .filter(|v| sample.matches(v))
            .collect();
        for (name, log) in &clients {
            let sent = log
                .get(ty)
                .is_some_and(|all| all.iter().any(|v| sample.matches(v)));
            assert!(
                sent || (ONE_CLIENT_ENOUGH.contains(&ty) && !theirs.is_empty()),
                "the {name} client sent no {ty} {}: the golden set is incomplete ({:?})",
                sample.what,
                log.keys().collect::<Vec<_>>()
            );
        }
        differences(
            &format!("{ty} {}", sample.what),
            &ours,
            &theirs,
            &mut problems,
        );
        for t in &theirs {
            for ((key, want), (_, got)) in instance_defaults(t).iter().zip(instance_defaults(&ours))
            {
                if *want != got {
                    problems.push(format!(
                        "{ty} {}: instance.{key} is {got}, clients send {want}",
                        sample.what
                    ));
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "loadgen's 2.x payloads differ from the real clients':\n{}\n\ncaptured: {}",
        problems.join("\n"),
        serde_json::to_string_pretty(
            &clients
                .iter()
                .map(|(n, l)| (n.to_string(), l.clone()))
                .collect::<BTreeMap<_, _>>()
        )
        .unwrap()
    );
    registry.stop().expect("the registry stops");
}
