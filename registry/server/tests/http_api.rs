//! The Nacos 1.x naming HTTP API over real sockets: one test per endpoint
//! pinning status codes and bodies, then the HTTP/1.1 behaviour clients rely
//! on (keep-alive, pipelining, HEAD, HTTP/1.0, form bodies, `Expect:
//! 100-continue`), expiry through the API, and graceful shutdown.
//!
//! Requests made with `TestServer::call` present themselves as the Java
//! client 1.4.8 (`Nacos-Java-Client:v1.4.8`); tests that need another
//! User-Agent, headers or exact bytes use the raw [`Conn`] below.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::TestServer;
use registry_proto::http1::{parse_response, Method};
use registry_proto::params::percent_encode_into;
use registry_server::Config;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NS: &str = "/nacos/v1/ns";

// ----- helpers ---------------------------------------------------------------

/// Percent-encodes a parameter value.
fn enc(s: &str) -> String {
    let mut out = String::new();
    percent_encode_into(&mut out, s);
    out
}

/// A request's exact bytes: HTTP/1.1, a `Host`, the extra header lines and a
/// `Content-Length` for the body.
fn http(method: &str, target: &str, headers: &[&str], body: &str) -> Vec<u8> {
    let mut s = format!("{method} {target} HTTP/1.1\r\nHost: test\r\n");
    for h in headers {
        s.push_str(h);
        s.push_str("\r\n");
    }
    s.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.into_bytes()
}

/// One response read off a [`Conn`], with its head kept for header checks.
#[derive(Debug)]
struct Resp {
    status: u16,
    head: String,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A raw client connection that reads responses one at a time.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        Conn {
            stream: TcpStream::connect(addr).await.expect("connect"),
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    /// Reads more bytes; 0 on EOF or reset. Panics after `deadline`.
    async fn fill(&mut self, deadline: Instant) -> usize {
        let mut chunk = [0u8; 65536];
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, self.stream.read(&mut chunk)).await {
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&chunk[..n]);
                n
            }
            Ok(Err(_)) => 0,
            Err(_) => panic!(
                "no complete response in time; have {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
        }
    }

    /// The next complete response (with its body).
    async fn recv(&mut self) -> Resp {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let parsed = parse_response(&self.buf).expect("well-formed response");
            if let Some((r, used)) = parsed {
                let resp = Resp {
                    status: r.status,
                    head: String::from_utf8_lossy(&self.buf[..used - r.body.len()]).into_owned(),
                    body: String::from_utf8_lossy(&r.body).into_owned(),
                };
                self.buf.drain(..used);
                return resp;
            }
            let n = self.fill(deadline).await;
            assert!(
                n > 0,
                "closed before a complete response: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
        }
    }

    /// The next response head only (the answer to a HEAD request).
    async fn recv_head(&mut self) -> Resp {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..i + 4]).into_owned();
                self.buf.drain(..i + 4);
                let status = head[9..12].parse().expect("status code");
                return Resp {
                    status,
                    head,
                    body: String::new(),
                };
            }
            let n = self.fill(deadline).await;
            assert!(n > 0, "closed before a complete head");
        }
    }

    /// Whether the server closes the connection within `within` without
    /// sending anything more.
    async fn closed_within(&mut self, within: Duration) -> bool {
        let mut chunk = [0u8; 1024];
        match tokio::time::timeout(within, self.stream.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => self.buf.is_empty(),
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&chunk[..n]);
                false
            }
            Err(_) => false,
        }
    }
}

async fn call(server: &TestServer, method: Method, target: &str) -> (u16, String) {
    let r = server.call(method, target).await;
    (r.status, r.body)
}

async fn get_json(server: &TestServer, target: &str) -> Value {
    let r = server.call(Method::Get, target).await;
    assert_eq!(r.status, 200, "GET {target}: {}", r.body);
    r.json()
}

async fn expect_ok(server: &TestServer, method: Method, target: &str) {
    let r = server.call(method, target).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, "ok"),
        "{method:?} {target}"
    );
}

async fn register(server: &TestServer, query: &str) {
    expect_ok(server, Method::Post, &format!("{NS}/instance?{query}")).await;
}

async fn list(server: &TestServer, query: &str) -> Value {
    get_json(server, &format!("{NS}/instance/list?{query}")).await
}

/// `(serviceCount, instanceCount)` from `operator/metrics`.
async fn counts(server: &TestServer) -> (u64, u64) {
    let m = get_json(server, &format!("{NS}/operator/metrics")).await;
    (
        m["serviceCount"].as_u64().expect("serviceCount"),
        m["instanceCount"].as_u64().expect("instanceCount"),
    )
}

/// The ports of a list response's hosts, sorted.
fn ports(list: &Value) -> Vec<u64> {
    let mut p: Vec<u64> = list["hosts"]
        .as_array()
        .expect("hosts array")
        .iter()
        .map(|h| h["port"].as_u64().expect("port"))
        .collect();
    p.sort_unstable();
    p
}

/// The host with `port` in a list response.
fn host(list: &Value, port: u64) -> &Value {
    list["hosts"]
        .as_array()
        .expect("hosts array")
        .iter()
        .find(|h| h["port"] == port)
        .unwrap_or_else(|| panic!("no host with port {port} in {list}"))
}

async fn light_beat(server: &TestServer, service: &str, ip: &str, port: u16) -> (u16, String) {
    call(
        server,
        Method::Put,
        &format!("{NS}/instance/beat?serviceName={service}&ip={ip}&port={port}"),
    )
    .await
}

// ----- /instance -------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_post_registers_creates_the_service_and_is_idempotent() {
    let server = TestServer::spawn().await;
    assert_eq!(counts(&server).await, (0, 0));
    register(&server, "serviceName=reg&ip=10.0.0.1&port=8080").await;
    assert_eq!(counts(&server).await, (1, 1));
    // The same instance again is an update, not a second instance.
    register(&server, "serviceName=reg&ip=10.0.0.1&port=8080&weight=3").await;
    assert_eq!(counts(&server).await, (1, 1));
    let l = list(&server, "serviceName=reg").await;
    assert_eq!(host(&l, 8080)["weight"], 3.0);
    // Grouped and ungrouped names reach the same service; groupName makes another.
    register(
        &server,
        "serviceName=DEFAULT_GROUP%40%40reg&ip=10.0.0.2&port=8080",
    )
    .await;
    register(
        &server,
        "serviceName=reg&groupName=G1&ip=10.0.0.3&port=8080",
    )
    .await;
    assert_eq!(counts(&server).await, (2, 3));
    assert_eq!(
        list(&server, "serviceName=reg").await["hosts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let g1 = list(&server, "serviceName=G1%40%40reg").await;
    assert_eq!(g1["name"], "G1@@reg");
    assert_eq!(host(&g1, 8080)["ip"], "10.0.0.3");
    // Ports 0 and 65535 are valid.
    register(&server, "serviceName=edge&ip=10.0.0.1&port=0").await;
    register(&server, "serviceName=edge&ip=10.0.0.1&port=65535").await;
    assert_eq!(ports(&list(&server, "serviceName=edge").await), [0, 65535]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_delete_removes_and_a_missing_instance_is_ok() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=del&ip=10.0.0.1&port=1").await;
    register(&server, "serviceName=del&ip=10.0.0.1&port=2").await;
    expect_ok(
        &server,
        Method::Delete,
        &format!("{NS}/instance?serviceName=del&ip=10.0.0.1&port=1"),
    )
    .await;
    assert_eq!(ports(&list(&server, "serviceName=del").await), [2]);
    assert_eq!(counts(&server).await, (1, 1));
    // Deleting again, another cluster, or in a missing service: `ok`, no change.
    for q in [
        "serviceName=del&ip=10.0.0.1&port=1",
        "serviceName=del&ip=10.0.0.1&port=2&clusterName=c9",
        "serviceName=nosuch&ip=10.0.0.1&port=2",
    ] {
        expect_ok(&server, Method::Delete, &format!("{NS}/instance?{q}")).await;
    }
    assert_eq!(ports(&list(&server, "serviceName=del").await), [2]);
    assert_eq!(counts(&server).await, (1, 1));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_put_is_strict_for_the_java_client_and_upserts_for_others() {
    let server = TestServer::spawn().await;
    // Java client (what `call` sends): unknown service, then unknown instance.
    let (s, b) = call(
        &server,
        Method::Put,
        &format!("{NS}/instance?serviceName=put&ip=10.0.0.1&port=80"),
    )
    .await;
    assert_eq!(
        (s, b.as_str()),
        (
            400,
            "service not found, namespace: public, service: DEFAULT_GROUP@@put"
        )
    );
    register(&server, "serviceName=put&ip=10.0.0.1&port=80").await;
    let (s, b) = call(
        &server,
        Method::Put,
        &format!("{NS}/instance?serviceName=put&ip=10.0.0.2&port=80"),
    )
    .await;
    assert_eq!(
        (s, b.as_str()),
        (
            400,
            "instance not exist: 10.0.0.2#80#DEFAULT#DEFAULT_GROUP@@put"
        )
    );
    assert_eq!(counts(&server).await, (1, 1));
    // A known instance is updated.
    expect_ok(
        &server,
        Method::Put,
        &format!("{NS}/instance?serviceName=put&ip=10.0.0.1&port=80&weight=7&metadata=a%3Db"),
    )
    .await;
    let h = list(&server, "serviceName=put").await["hosts"][0].clone();
    assert_eq!(
        (h["weight"].clone(), h["metadata"].clone()),
        (json!(7.0), json!({"a": "b"}))
    );

    // Any other agent (Python client, curl, none): PUT registers.
    let mut c = Conn::open(server.http_addr).await;
    for (ua, ip) in [
        ("User-Agent: Nacos-Python-Client:v1.0.0", "10.0.0.3"),
        ("User-Agent: curl/8.0", "10.0.0.4"),
        ("User-Agent: Nacos-Java-Client:v0.9.0", "10.0.0.5"),
    ] {
        c.send(&http(
            "PUT",
            &format!("{NS}/instance?serviceName=put2&ip={ip}&port=80"),
            &[ua],
            "",
        ))
        .await;
        let r = c.recv().await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{ua}");
    }
    c.send(&http(
        "PUT",
        &format!("{NS}/instance?serviceName=put2&ip=10.0.0.6&port=80"),
        &[],
        "",
    ))
    .await;
    assert_eq!(c.recv().await.body, "ok");
    assert_eq!(counts(&server).await, (2, 5));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_patch_changes_only_the_given_fields() {
    let server = TestServer::spawn().await;
    register(
        &server,
        "serviceName=pat&ip=10.0.0.1&port=80&weight=2&metadata=k%3Dv",
    )
    .await;
    expect_ok(
        &server,
        Method::Patch,
        &format!("{NS}/instance?serviceName=pat&ip=10.0.0.1&port=80&weight=5"),
    )
    .await;
    let h = host(&list(&server, "serviceName=pat").await, 80).clone();
    assert_eq!(h["weight"], 5.0);
    assert_eq!(h["metadata"], json!({"k": "v"}), "metadata untouched");
    assert_eq!(h["healthy"], true);
    // enabled=false hides it from lists; metadata is replaced as a whole.
    expect_ok(
        &server,
        Method::Patch,
        &format!("{NS}/instance?serviceName=pat&ip=10.0.0.1&port=80&enabled=false&metadata=x%3Dy"),
    )
    .await;
    assert_eq!(
        ports(&list(&server, "serviceName=pat").await),
        Vec::<u64>::new()
    );
    let d = get_json(
        &server,
        &format!("{NS}/instance?serviceName=pat&ip=10.0.0.1&port=80"),
    )
    .await;
    assert_eq!(
        (d["weight"].clone(), d["metadata"].clone()),
        (json!(5.0), json!({"x": "y"}))
    );
    // Unknown instance, unknown service: 400 `instance not found`.
    for q in [
        "serviceName=pat&ip=10.0.0.9&port=80&weight=1",
        "serviceName=nosuch&ip=10.0.0.1&port=80&weight=1",
    ] {
        let (s, b) = call(&server, Method::Patch, &format!("{NS}/instance?{q}")).await;
        assert_eq!((s, b.as_str()), (400, "instance not found"), "{q}");
    }
    assert_eq!(counts(&server).await, (1, 1));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_get_returns_the_detail_and_nacos_404_texts() {
    let server = TestServer::spawn().await;
    register(
        &server,
        "serviceName=det&ip=10.0.0.1&port=80&clusterName=c1&weight=2.5&metadata=%7B%22k%22%3A%22v%22%7D",
    )
    .await;
    let d = get_json(
        &server,
        &format!("{NS}/instance?serviceName=det&ip=10.0.0.1&port=80&clusterName=c1"),
    )
    .await;
    assert_eq!(
        d,
        json!({
            "service": "DEFAULT_GROUP@@det",
            "ip": "10.0.0.1",
            "port": 80,
            "clusterName": "c1",
            "weight": 2.5,
            "healthy": true,
            "instanceId": "10.0.0.1#80#c1#DEFAULT_GROUP@@det",
            "metadata": {"k": "v"}
        })
    );
    // The Python client sends `cluster` as well; `clusterName` wins, `cluster` is the fallback.
    let d = get_json(
        &server,
        &format!("{NS}/instance?serviceName=det&ip=10.0.0.1&port=80&cluster=c1"),
    )
    .await;
    assert_eq!(d["clusterName"], "c1");
    for (q, text) in [
        (
            "serviceName=x&ip=10.0.0.1&port=80",
            "no service DEFAULT_GROUP@@x found!",
        ),
        (
            "serviceName=det&ip=10.0.0.1&port=80&clusterName=c9",
            "no ips found for cluster c9 in service DEFAULT_GROUP@@det",
        ),
        (
            "serviceName=det&ip=10.0.0.1&port=80",
            "no ips found for cluster DEFAULT in service DEFAULT_GROUP@@det",
        ),
        (
            "serviceName=det&ip=10.0.0.2&port=80&clusterName=c1",
            "no matched ip found!",
        ),
        (
            "serviceName=det&ip=10.0.0.1&port=81&clusterName=c1",
            "no matched ip found!",
        ),
    ] {
        let (s, b) = call(&server, Method::Get, &format!("{NS}/instance?{q}")).await;
        assert_eq!((s, b.as_str()), (404, text), "{q}");
    }
    server.stop().await;
}

// ----- /instance/beat --------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beat_renews_answers_20404_for_unknown_and_reregisters_from_a_body() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=bt&ip=10.0.0.1&port=80").await;
    // Light beat (no body), grouped name as the Java client sends it.
    let (s, b) = light_beat(&server, "DEFAULT_GROUP%40%40bt", "10.0.0.1", 80).await;
    assert_eq!(
        (s, b.as_str()),
        (
            200,
            r#"{"clientBeatInterval":5000,"code":10200,"lightBeatEnabled":true}"#
        )
    );
    // Unknown instance, unknown service, other cluster: 20404 without lightBeatEnabled.
    for q in [
        "serviceName=bt&ip=10.0.0.2&port=80",
        "serviceName=nosuch&ip=10.0.0.1&port=80",
        "serviceName=bt&ip=10.0.0.1&port=80&clusterName=c9",
    ] {
        let (s, b) = call(&server, Method::Put, &format!("{NS}/instance/beat?{q}")).await;
        assert_eq!(
            (s, b.as_str()),
            (200, r#"{"clientBeatInterval":5000,"code":20404}"#),
            "{q}"
        );
    }
    assert_eq!(
        counts(&server).await,
        (1, 1),
        "a light beat registers nothing"
    );
    // Unknown instance with a `beat` body: registered from it (cluster, weight, metadata).
    let beat = r#"{"cluster":"c1","ip":"10.0.0.3","metadata":{"m":"1"},"port":8080,"scheduled":true,"serviceName":"DEFAULT_GROUP@@bt","weight":2}"#;
    let (s, b) = call(
        &server,
        Method::Put,
        &format!(
            "{NS}/instance/beat?serviceName=DEFAULT_GROUP%40%40bt&beat={}",
            enc(beat)
        ),
    )
    .await;
    assert_eq!(
        (s, b.as_str()),
        (
            200,
            r#"{"clientBeatInterval":5000,"code":10200,"lightBeatEnabled":true}"#
        )
    );
    let l = list(&server, "serviceName=bt").await;
    let h = host(&l, 8080);
    assert_eq!(
        (&h["ip"], &h["clusterName"], &h["weight"], &h["metadata"]),
        (
            &json!("10.0.0.3"),
            &json!("c1"),
            &json!(2.0),
            &json!({"m": "1"})
        )
    );
    assert_eq!(counts(&server).await, (1, 2));
    // Now a light beat for it finds it (the cluster comes from clusterName).
    let (_, b) = call(
        &server,
        Method::Put,
        &format!("{NS}/instance/beat?serviceName=bt&ip=10.0.0.3&port=8080&clusterName=c1"),
    )
    .await;
    assert!(b.contains("\"code\":10200"), "{b}");
    // `preserved.heart.beat.interval` overrides clientBeatInterval.
    register(
        &server,
        &format!(
            "serviceName=bt&ip=10.0.0.4&port=80&metadata={}",
            enc(r#"{"preserved.heart.beat.interval":"1000"}"#)
        ),
    )
    .await;
    let (_, b) = light_beat(&server, "bt", "10.0.0.4", 80).await;
    assert_eq!(
        b,
        r#"{"clientBeatInterval":1000,"code":10200,"lightBeatEnabled":true}"#
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beat_json_in_a_form_body_as_the_java_client_sends_it() {
    let server = TestServer::spawn().await;
    // NamingProxy.sendBeat: `beat` in the form body, the rest in the query.
    let beat = r#"{"cluster":"DEFAULT","ip":"10.0.0.7","metadata":{},"period":5000,"port":9000,"scheduled":false,"serviceName":"DEFAULT_GROUP@@fb","stopped":false,"weight":1.0}"#;
    let target = format!("{NS}/instance/beat?namespaceId=public&serviceName=DEFAULT_GROUP%40%40fb");
    let r = server
        .call_form(Method::Put, &target, &format!("beat={}", enc(beat)))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["code"], 10200);
    assert_eq!(ports(&list(&server, "serviceName=fb").await), [9000]);
    // The same beat again renews it.
    let r = server
        .call_form(Method::Put, &target, &format!("beat={}", enc(beat)))
        .await;
    assert_eq!(
        r.body,
        r#"{"clientBeatInterval":5000,"code":10200,"lightBeatEnabled":true}"#
    );
    assert_eq!(counts(&server).await, (1, 1));
    server.stop().await;
}

// ----- /instance/list --------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_returns_the_full_service_info_json() {
    let server = TestServer::spawn().await;
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=shape&metadata=sm%3D1"),
    )
    .await;
    register(
        &server,
        &format!(
            "serviceName=shape&ip=10.0.0.1&port=8080&clusterName=c1&weight=2.5&metadata={}",
            enc(r#"{"k":"v"}"#)
        ),
    )
    .await;
    let before = wall_ms();
    let l = list(&server, "serviceName=shape&clusters=c1").await;
    let after = wall_ms();
    let mut keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "allIPs",
            "cacheMillis",
            "checksum",
            "clusters",
            "dom",
            "env",
            "groupName",
            "hosts",
            "lastRefTime",
            "metadata",
            "name",
            "reachProtectionThreshold",
            "useSpecifiedURL",
            "valid"
        ]
    );
    assert_eq!(l["name"], "DEFAULT_GROUP@@shape");
    assert_eq!(l["dom"], "DEFAULT_GROUP@@shape");
    assert_eq!(l["groupName"], "DEFAULT_GROUP");
    assert_eq!(l["clusters"], "c1");
    assert_eq!(l["cacheMillis"], 3000);
    assert_eq!(l["allIPs"], false);
    assert_eq!(l["reachProtectionThreshold"], false);
    assert_eq!(l["valid"], true);
    assert_eq!(l["useSpecifiedURL"], false);
    assert_eq!(l["env"], "");
    assert_eq!(l["metadata"], json!({"sm": "1"}));
    assert!(l["checksum"].as_str().is_some_and(|c| !c.is_empty()), "{l}");
    let t = l["lastRefTime"].as_u64().expect("lastRefTime");
    assert!(t >= before.saturating_sub(1000) && t <= after + 1000, "{t}");
    assert_eq!(
        l["hosts"],
        json!([{
            "ip": "10.0.0.1",
            "port": 8080,
            "valid": true,
            "healthy": true,
            "marked": false,
            "instanceId": "10.0.0.1#8080#c1#DEFAULT_GROUP@@shape",
            "metadata": {"k": "v"},
            "enabled": true,
            "weight": 2.5,
            "clusterName": "c1",
            "serviceName": "DEFAULT_GROUP@@shape",
            "ephemeral": true,
            "instanceHeartBeatInterval": 5000,
            "instanceHeartBeatTimeOut": 15000,
            "ipDeleteTimeout": 30000,
            "instanceIdGenerator": "simple"
        }])
    );
    // A persistent instance says so.
    register(
        &server,
        "serviceName=shape&ip=10.0.0.2&port=8080&clusterName=c1&ephemeral=false",
    )
    .await;
    let l = list(&server, "serviceName=shape").await;
    assert_eq!(l["hosts"].as_array().unwrap().len(), 2);
    let persistent = l["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["ip"] == "10.0.0.2")
        .expect("persistent host");
    assert_eq!(persistent["ephemeral"], false);
    server.stop().await;
}

/// Wall-clock milliseconds, as `lastRefTime` carries them.
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_of_an_unknown_service_is_200_with_no_hosts() {
    let server = TestServer::spawn().await;
    let l = list(&server, "serviceName=ghost&groupName=G2&clusters=c1").await;
    assert_eq!(l["name"], "G2@@ghost");
    assert_eq!(l["clusters"], "c1");
    assert_eq!(l["cacheMillis"], 3000);
    assert_eq!(l["hosts"], json!([]));
    assert_eq!(counts(&server).await, (0, 0), "a list creates nothing");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_cache_millis_is_10000_for_a_push_subscriber() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=cm&ip=10.0.0.1&port=80").await;
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let port = udp.local_addr().unwrap().port();
    let l = list(
        &server,
        &format!("serviceName=cm&clusters=DEFAULT&udpPort={port}&clientIP=192.0.2.2"),
    )
    .await;
    assert_eq!(l["cacheMillis"], 10000);
    assert_eq!(l["clusters"], "DEFAULT");
    assert_eq!(ports(&l), [80]);
    // Without udpPort (or with 0) it is a plain poll.
    assert_eq!(list(&server, "serviceName=cm").await["cacheMillis"], 3000);
    assert_eq!(
        list(&server, "serviceName=cm&udpPort=0").await["cacheMillis"],
        3000
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_checksum_changes_with_the_list_and_not_with_a_beat() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=ck&ip=10.0.0.1&port=80").await;
    let c1 = list(&server, "serviceName=ck").await["checksum"].clone();
    let (_, b) = light_beat(&server, "ck", "10.0.0.1", 80).await;
    assert!(b.contains("10200"));
    assert_eq!(
        list(&server, "serviceName=ck").await["checksum"],
        c1,
        "beat"
    );
    register(&server, "serviceName=ck&ip=10.0.0.1&port=80").await;
    assert_eq!(
        list(&server, "serviceName=ck").await["checksum"],
        c1,
        "re-register with the same fields"
    );
    register(&server, "serviceName=ck&ip=10.0.0.2&port=80").await;
    let c2 = list(&server, "serviceName=ck").await["checksum"].clone();
    assert_ne!(c2, c1, "new instance");
    expect_ok(
        &server,
        Method::Patch,
        &format!("{NS}/instance?serviceName=ck&ip=10.0.0.2&port=80&weight=9"),
    )
    .await;
    let c3 = list(&server, "serviceName=ck").await["checksum"].clone();
    assert_ne!(c3, c2, "weight change");
    expect_ok(
        &server,
        Method::Delete,
        &format!("{NS}/instance?serviceName=ck&ip=10.0.0.2&port=80"),
    )
    .await;
    let c4 = list(&server, "serviceName=ck").await["checksum"].clone();
    assert_ne!(c4, c3, "removal");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_filters_by_clusters_and_echoes_them_exactly() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=cl&ip=10.0.0.1&port=1&clusterName=c1").await;
    register(&server, "serviceName=cl&ip=10.0.0.1&port=2&clusterName=c2").await;
    register(&server, "serviceName=cl&ip=10.0.0.1&port=3").await;
    for (clusters, echoed, expected) in [
        ("", "", vec![1, 2, 3]),
        ("c1", "c1", vec![1]),
        ("c1%2Cc2", "c1,c2", vec![1, 2]),
        ("DEFAULT", "DEFAULT", vec![3]),
        ("c9", "c9", vec![]),
    ] {
        let l = list(&server, &format!("serviceName=cl&clusters={clusters}")).await;
        assert_eq!(l["clusters"], echoed, "{clusters}");
        assert_eq!(ports(&l), expected, "{clusters}");
        for h in l["hosts"].as_array().unwrap() {
            let port = h["port"].as_u64().unwrap();
            let cluster = ["c1", "c2", "DEFAULT"][port as usize - 1];
            assert_eq!(h["clusterName"], cluster);
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_healthy_only_and_disabled_instances() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=ho&ip=10.0.0.1&port=1").await;
    register(&server, "serviceName=ho&ip=10.0.0.1&port=2&healthy=false").await;
    register(&server, "serviceName=ho&ip=10.0.0.1&port=3&enabled=false").await;
    // The Java and Python clients say `enable` on register.
    register(&server, "serviceName=ho&ip=10.0.0.1&port=4&enable=False").await;
    register(
        &server,
        "serviceName=ho&ip=10.0.0.1&port=5&healthy=True&enable=True",
    )
    .await;
    assert_eq!(counts(&server).await, (1, 5));
    let all = list(&server, "serviceName=ho").await;
    assert_eq!(ports(&all), [1, 2, 5], "disabled instances are hidden");
    assert_eq!(host(&all, 2)["healthy"], false);
    assert_eq!(host(&all, 2)["valid"], false);
    assert_eq!(
        ports(&list(&server, "serviceName=ho&healthyOnly=true").await),
        [1, 5]
    );
    assert_eq!(
        ports(&list(&server, "serviceName=ho&healthyOnly=True").await),
        [1, 5],
        "Boolean.parseBoolean ignores case"
    );
    assert_eq!(
        ports(&list(&server, "serviceName=ho&healthyOnly=false").await),
        [1, 2, 5]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_protect_threshold_returns_everyone_as_healthy() {
    let server = TestServer::spawn().await;
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=pt&protectThreshold=0.5"),
    )
    .await;
    register(&server, "serviceName=pt&ip=10.0.0.1&port=1").await;
    register(&server, "serviceName=pt&ip=10.0.0.1&port=2&healthy=false").await;
    // 1 of 2 healthy: 0.5 <= 0.5, protection.
    for q in ["serviceName=pt", "serviceName=pt&healthyOnly=true"] {
        let l = list(&server, q).await;
        assert_eq!(l["reachProtectionThreshold"], true, "{q}");
        assert_eq!(ports(&l), [1, 2], "{q}");
        assert_eq!(host(&l, 2)["healthy"], true, "{q}");
    }
    // 2 of 3 healthy: above the threshold, the unhealthy one shows as such.
    register(&server, "serviceName=pt&ip=10.0.0.1&port=3").await;
    let l = list(&server, "serviceName=pt").await;
    assert_eq!(l["reachProtectionThreshold"], false);
    assert_eq!(host(&l, 2)["healthy"], false);
    assert_eq!(
        ports(&list(&server, "serviceName=pt&healthyOnly=true").await),
        [1, 3]
    );
    // The default threshold 0: one unhealthy of two is not protected...
    register(&server, "serviceName=pt0&ip=10.0.0.1&port=1").await;
    register(&server, "serviceName=pt0&ip=10.0.0.1&port=2&healthy=false").await;
    let l = list(&server, "serviceName=pt0").await;
    assert_eq!(l["reachProtectionThreshold"], false);
    assert_eq!(host(&l, 2)["healthy"], false);
    assert_eq!(
        ports(&list(&server, "serviceName=pt0&healthyOnly=true").await),
        [1]
    );
    // ...but all unhealthy is 0/n <= 0: Nacos 1.4.8 `doSrvIpxt` protects then too.
    expect_ok(
        &server,
        Method::Patch,
        &format!("{NS}/instance?serviceName=pt0&ip=10.0.0.1&port=1&healthy=false"),
    )
    .await;
    let l = list(&server, "serviceName=pt0&healthyOnly=true").await;
    assert_eq!(l["reachProtectionThreshold"], true);
    assert_eq!(ports(&l), [1, 2]);
    server.stop().await;
}

// ----- /service --------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_post_creates_and_refuses_an_existing_one() {
    let server = TestServer::spawn().await;
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=x"),
    )
    .await;
    assert_eq!(counts(&server).await, (1, 0));
    let (s, b) = call(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=x"),
    )
    .await;
    assert_eq!(
        (s, b.as_str()),
        (
            400,
            "specified service already exists, serviceName : DEFAULT_GROUP@@x"
        )
    );
    // Also when the service was auto-created by a registration.
    register(&server, "serviceName=auto&ip=10.0.0.1&port=80").await;
    let (s, b) = call(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=auto&groupName=DEFAULT_GROUP"),
    )
    .await;
    assert_eq!(
        (s, b.as_str()),
        (
            400,
            "specified service already exists, serviceName : DEFAULT_GROUP@@auto"
        )
    );
    // Another group is another service.
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=x&groupName=G1"),
    )
    .await;
    assert_eq!(counts(&server).await, (3, 1));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_delete_removes_it_with_its_instances() {
    let server = TestServer::spawn().await;
    let (s, b) = call(
        &server,
        Method::Delete,
        &format!("{NS}/service?serviceName=x"),
    )
    .await;
    assert_eq!(
        (s, b.as_str()),
        (
            400,
            "specified service not exist, serviceName : DEFAULT_GROUP@@x"
        )
    );
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=x"),
    )
    .await;
    register(&server, "serviceName=x&ip=10.0.0.1&port=1").await;
    register(&server, "serviceName=x&ip=10.0.0.1&port=2").await;
    register(&server, "serviceName=other&ip=10.0.0.1&port=1").await;
    assert_eq!(counts(&server).await, (2, 3));
    // Nacos 1.4.8 deletes a service with its instances.
    expect_ok(
        &server,
        Method::Delete,
        &format!("{NS}/service?serviceName=x"),
    )
    .await;
    assert_eq!(counts(&server).await, (1, 1));
    assert_eq!(list(&server, "serviceName=x").await["hosts"], json!([]));
    let (s, _) = call(&server, Method::Get, &format!("{NS}/service?serviceName=x")).await;
    assert_eq!(s, 404);
    let (s, _) = call(
        &server,
        Method::Delete,
        &format!("{NS}/service?serviceName=x"),
    )
    .await;
    assert_eq!(s, 400, "deleted twice");
    // Beats for its old instances now say 20404.
    let (_, b) = light_beat(&server, "x", "10.0.0.1", 1).await;
    assert!(b.contains("20404"), "{b}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_put_updates_threshold_and_metadata() {
    let server = TestServer::spawn().await;
    let (s, b) = call(
        &server,
        Method::Put,
        &format!("{NS}/service?serviceName=x&protectThreshold=0.1"),
    )
    .await;
    assert_eq!(
        (s, b.as_str()),
        (400, "service DEFAULT_GROUP@@x not found!")
    );
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=x&metadata=a%3D1"),
    )
    .await;
    let (s, b) = call(&server, Method::Put, &format!("{NS}/service?serviceName=x")).await;
    assert_eq!(
        (s, b.as_str()),
        (400, "Param 'protectThreshold' is required.")
    );
    expect_ok(
        &server,
        Method::Put,
        &format!("{NS}/service?serviceName=x&protectThreshold=0.25&metadata=b%3D2"),
    )
    .await;
    let d = get_json(&server, &format!("{NS}/service?serviceName=x")).await;
    assert_eq!(d["protectThreshold"], 0.25);
    assert_eq!(d["metadata"], json!({"b": "2"}), "metadata is replaced");
    // Without metadata the update clears it, as Nacos's update does.
    expect_ok(
        &server,
        Method::Put,
        &format!("{NS}/service?serviceName=x&protectThreshold=0.5"),
    )
    .await;
    let d = get_json(&server, &format!("{NS}/service?serviceName=x")).await;
    assert_eq!(
        (d["protectThreshold"].clone(), d["metadata"].clone()),
        (json!(0.5), json!({}))
    );
    server.stop().await;
}

/// A selector given to `PUT /service` replaces the old one, `none` included
/// (Nacos `service.setSelector(parseSelector(selector))`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_put_with_selector_none_clears_a_label_selector() {
    let server = TestServer::spawn().await;
    let label = enc(r#"{"type":"label","expression":"CONSUMER.label.a = PROVIDER.label.a"}"#);
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=sel&selector={label}"),
    )
    .await;
    let d = get_json(&server, &format!("{NS}/service?serviceName=sel")).await;
    assert_eq!(d["selector"]["type"], "label");
    expect_ok(
        &server,
        Method::Put,
        &format!(
            "{NS}/service?serviceName=sel&protectThreshold=0&selector={}",
            enc(r#"{"type":"none"}"#)
        ),
    )
    .await;
    let d = get_json(&server, &format!("{NS}/service?serviceName=sel")).await;
    assert_eq!(d["selector"], json!({"type": "none"}));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_get_returns_the_detail() {
    let server = TestServer::spawn().await;
    let (s, b) = call(&server, Method::Get, &format!("{NS}/service?serviceName=x")).await;
    assert_eq!(
        (s, b.as_str()),
        (404, "service DEFAULT_GROUP@@x is not found!")
    );
    let selector = r#"{"type":"label","expression":"CONSUMER.label.a = PROVIDER.label.a"}"#;
    expect_ok(
        &server,
        Method::Post,
        &format!(
            "{NS}/service?serviceName=x&groupName=G1&protectThreshold=0.5&metadata=k%3Dv&selector={}",
            enc(selector)
        ),
    )
    .await;
    register(
        &server,
        "serviceName=G1%40%40x&ip=10.0.0.1&port=1&clusterName=c1",
    )
    .await;
    register(&server, "serviceName=G1%40%40x&ip=10.0.0.1&port=2").await;
    register(&server, "serviceName=G1%40%40x&ip=10.0.0.2&port=2").await;
    let d = get_json(&server, &format!("{NS}/service?serviceName=x&groupName=G1")).await;
    assert_eq!(
        d,
        json!({
            "name": "x",
            "namespaceId": "public",
            "protectThreshold": 0.5,
            "metadata": {"k": "v"},
            "selector": {"type": "label", "expression": "CONSUMER.label.a = PROVIDER.label.a"},
            "groupName": "G1",
            "clusters": [
                {"name": "DEFAULT", "healthChecker": {"type": "TCP"}, "metadata": {}},
                {"name": "c1", "healthChecker": {"type": "TCP"}, "metadata": {}}
            ]
        })
    );
    // An auto-created service has the defaults.
    register(&server, "serviceName=auto&ip=10.0.0.1&port=1").await;
    let d = get_json(
        &server,
        &format!("{NS}/service?serviceName=DEFAULT_GROUP%40%40auto"),
    )
    .await;
    assert_eq!(d["name"], "auto");
    assert_eq!(d["groupName"], "DEFAULT_GROUP");
    assert_eq!(d["protectThreshold"], 0.0);
    assert_eq!(d["selector"], json!({"type": "none"}));
    assert_eq!(d["metadata"], json!({}));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_list_pages_groups_and_strips_the_group() {
    let server = TestServer::spawn().await;
    for name in ["a3", "a1", "a2"] {
        expect_ok(
            &server,
            Method::Post,
            &format!("{NS}/service?serviceName={name}"),
        )
        .await;
    }
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=b1&groupName=G1"),
    )
    .await;
    register(
        &server,
        "serviceName=a0&ip=10.0.0.1&port=1&namespaceId=other",
    )
    .await;
    for (q, body) in [
        ("pageNo=1&pageSize=2", r#"{"count":3,"doms":["a1","a2"]}"#),
        ("pageNo=2&pageSize=2", r#"{"count":3,"doms":["a3"]}"#),
        ("pageNo=3&pageSize=2", r#"{"count":3,"doms":[]}"#),
        (
            "pageNo=1&pageSize=10&groupName=G1",
            r#"{"count":1,"doms":["b1"]}"#,
        ),
        (
            "pageNo=1&pageSize=10&namespaceId=other",
            r#"{"count":1,"doms":["a0"]}"#,
        ),
        (
            "pageNo=1&pageSize=10&groupName=nosuch",
            r#"{"count":0,"doms":[]}"#,
        ),
    ] {
        let (s, b) = call(&server, Method::Get, &format!("{NS}/service/list?{q}")).await;
        assert_eq!((s, b.as_str()), (200, body), "{q}");
    }
    server.stop().await;
}

/// `groupName=*` lists every group; Nacos 1.4 strips `groupName + "@@"`,
/// which for `*` strips nothing, so the names keep their group (and two
/// services of the same name in different groups stay distinguishable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_list_of_all_groups_keeps_the_group_as_nacos_does() {
    let server = TestServer::spawn().await;
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=a1"),
    )
    .await;
    expect_ok(
        &server,
        Method::Post,
        &format!("{NS}/service?serviceName=a1&groupName=G1"),
    )
    .await;
    let (s, b) = call(
        &server,
        Method::Get,
        &format!("{NS}/service/list?pageNo=1&pageSize=10&groupName=*"),
    )
    .await;
    assert_eq!(s, 200);
    let mut doms: Vec<String> = serde_json::from_str::<Value>(&b).unwrap()["doms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect();
    doms.sort();
    assert_eq!(doms, ["DEFAULT_GROUP@@a1", "G1@@a1"], "{b}");
    assert!(b.contains("\"count\":2"), "{b}");
    server.stop().await;
}

// ----- operator and metrics ----------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_metrics_and_switches() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=m1&ip=10.0.0.1&port=1").await;
    register(&server, "serviceName=m1&ip=10.0.0.1&port=2").await;
    register(&server, "serviceName=m2&ip=10.0.0.1&port=1").await;
    let m = get_json(&server, &format!("{NS}/operator/metrics")).await;
    assert_eq!(m["status"], "UP");
    assert_eq!(m["serviceCount"], 2);
    assert_eq!(m["instanceCount"], 3);
    assert_eq!(m["responsibleServiceCount"], 2);
    assert_eq!(m["responsibleInstanceCount"], 3);
    assert_eq!(m["raftNotifyTaskCount"], 0);
    for k in ["cpu", "load", "mem"] {
        assert!(m[k].is_number(), "{k}: {m}");
    }
    let s = get_json(&server, &format!("{NS}/operator/switches")).await;
    assert_eq!(s["name"], "00-00---000-NACOS_SWITCH_DOMAIN-000---00-00");
    assert_eq!(s["clientBeatInterval"], 5000);
    assert_eq!(s["defaultCacheMillis"], 3000);
    assert_eq!(s["defaultPushCacheMillis"], 10000);
    assert_eq!(s["lightBeatEnabled"], true);
    assert_eq!(s["defaultInstanceEphemeral"], true);
    assert_eq!(s["pushEnabled"], true);
    server.stop().await;

    // The beat interval switch follows the configuration.
    let server = TestServer::with(Config {
        beat_interval_ms: 2_000,
        ..Config::for_test()
    })
    .await;
    let s = get_json(&server, &format!("{NS}/operator/switches")).await;
    assert_eq!(s["clientBeatInterval"], 2000);
    register(&server, "serviceName=m1&ip=10.0.0.1&port=1").await;
    let (_, b) = light_beat(&server, "m1", "10.0.0.1", 1).await;
    assert_eq!(
        b,
        r#"{"clientBeatInterval":2000,"code":10200,"lightBeatEnabled":true}"#
    );
    let (_, b) = light_beat(&server, "m1", "10.0.0.1", 9).await;
    assert_eq!(b, r#"{"clientBeatInterval":2000,"code":20404}"#);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_metrics_count_requests_by_route_and_status() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=pm&ip=10.0.0.1&port=1").await;
    register(&server, "serviceName=pm&ip=10.0.0.1&port=2").await;
    let (s, _) = call(
        &server,
        Method::Post,
        &format!("{NS}/instance?serviceName=pm"),
    )
    .await;
    assert_eq!(s, 400);
    let (s, _) = call(&server, Method::Get, "/nope").await;
    assert_eq!(s, 404);
    let (_, b) = light_beat(&server, "pm", "10.0.0.1", 1).await;
    assert!(b.contains("10200"));
    let (_, b) = light_beat(&server, "pm", "10.0.0.1", 3).await;
    assert!(b.contains("20404"));
    let mut c = Conn::open(server.http_addr).await;
    c.send(&http("GET", "/metrics", &[], "")).await;
    let r = c.recv().await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    for line in [
        "registry_http_requests_total{route=\"instance_register\",status=\"200\"} 2\n",
        "registry_http_requests_total{route=\"instance_register\",status=\"400\"} 1\n",
        "registry_http_requests_total{route=\"instance_beat\",status=\"200\"} 2\n",
        "registry_http_requests_total{route=\"none\",status=\"404\"} 1\n",
        "registry_services 1\n",
        "registry_instances 2\n",
        "registry_beats_total 1\n",
        "registry_beats_not_found_total 1\n",
        "# TYPE registry_http_requests_total counter\n",
        "# TYPE registry_http_request_duration_seconds histogram\n",
        "# TYPE registry_memory_bytes gauge\n",
        "registry_memory_bytes{part=\"list_cache\"} ",
        "registry_memory_bytes{part=\"allocator_overhead\"} ",
    ] {
        assert!(r.body.contains(line), "missing {line:?} in\n{}", r.body);
    }
    // The breakdown counts the two instances and the one service held.
    let gauge = |part: &str| -> u64 {
        let prefix = format!("registry_memory_bytes{{part=\"{part}\"}} ");
        let line = r.body.lines().find(|l| l.starts_with(&prefix));
        line.and_then(|l| l[prefix.len()..].parse().ok())
            .unwrap_or_else(|| panic!("no {part} in\n{}", r.body))
    };
    assert!(gauge("store_instances") > 0 && gauge("store_services") > 0);
    assert!(r.body.contains("registry_memory_rss_bytes "), "{}", r.body);
    assert!(r
        .body
        .contains("registry_http_request_duration_seconds_count{route=\"instance_register\"} 3\n"));
    // Every sample line is `name{labels} value` or `name value` with a number.
    for line in r.body.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').expect("sample line");
        assert!(value.parse::<f64>().is_ok(), "bad sample {line:?}");
    }
    server.stop().await;
}

// ----- HTTP/1.1 behaviour ------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_answers_the_get_head_without_a_body() {
    let server = TestServer::spawn().await;
    let mut c = Conn::open(server.http_addr).await;
    let target = format!("{NS}/operator/switches");
    c.send(&http("GET", &target, &[], "")).await;
    let get = c.recv().await;
    c.send(&http("HEAD", &target, &[], "")).await;
    let head = c.recv_head().await;
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("Content-Length"),
        Some(get.body.len().to_string().as_str())
    );
    assert_eq!(head.header("Content-Type"), get.header("Content-Type"));
    // Errors too: head only, with the length of the text.
    c.send(&http("HEAD", "/nope", &[], "")).await;
    let head = c.recv_head().await;
    assert_eq!(head.status, 404);
    assert_eq!(
        head.header("Content-Length"),
        Some("Not Found: /nope".len().to_string().as_str())
    );
    // No body bytes followed: the next response on the connection parses.
    c.send(&http("GET", &target, &[], "")).await;
    let again = c.recv().await;
    assert_eq!((again.status, again.body), (200, get.body));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let server = TestServer::spawn().await;
    let mut c = Conn::open(server.http_addr).await;
    for port in 1..=5 {
        c.send(&http(
            "POST",
            &format!("{NS}/instance?serviceName=ka&ip=10.0.0.1&port={port}"),
            &[],
            "",
        ))
        .await;
        let r = c.recv().await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        assert_eq!(r.header("Connection"), None, "HTTP/1.1 default keep-alive");
    }
    c.send(&http(
        "GET",
        &format!("{NS}/instance/list?serviceName=ka"),
        &[],
        "",
    ))
    .await;
    assert_eq!(ports(&c.recv().await.json()), [1, 2, 3, 4, 5]);
    // A request that trickles in a few bytes at a time is answered once whole.
    let slow = http(
        "POST",
        &format!("{NS}/instance?serviceName=ka&ip=10.0.0.1&port=6"),
        &[],
        "",
    );
    for piece in slow.chunks(7) {
        c.send(piece).await;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(c.recv().await.body, "ok");
    // Absolute-form targets (sent through proxies) and one trailing slash.
    let absolute = format!(
        "http://{}{NS}/instance/list/?serviceName=ka",
        server.http_addr
    );
    c.send(&http("GET", &absolute, &[], "")).await;
    assert_eq!(ports(&c.recv().await.json()), [1, 2, 3, 4, 5, 6]);
    // An error keeps the connection too (the stream is still in sync).
    c.send(&http(
        "POST",
        &format!("{NS}/instance?serviceName=ka"),
        &[],
        "",
    ))
    .await;
    assert_eq!(c.recv().await.status, 400);
    // `Connection: close` is honoured.
    c.send(&http(
        "GET",
        &format!("{NS}/operator/metrics"),
        &["Connection: close"],
        "",
    ))
    .await;
    let r = c.recv().await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(1)).await);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order() {
    let server = TestServer::spawn().await;
    let mut batch = Vec::new();
    for i in 0..8 {
        let port = 100 + i;
        batch.extend(http(
            "POST",
            &format!("{NS}/instance?serviceName=pipe&ip=10.0.0.1&port={port}"),
            &[],
            "",
        ));
        batch.extend(http(
            "GET",
            &format!("{NS}/instance?serviceName=pipe&ip=10.0.0.1&port={port}"),
            &[],
            "",
        ));
    }
    let mut c = Conn::open(server.http_addr).await;
    c.send(&batch).await;
    for i in 0..8 {
        let r = c.recv().await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "register {i}");
        let r = c.recv().await;
        assert_eq!(r.status, 200, "detail {i}: {}", r.body);
        assert_eq!(r.json()["port"], 100 + i, "detail {i}");
    }
    assert_eq!(counts(&server).await, (1, 8));
    server.stop().await;
}

/// A batch whose answers pass the connection's 256 KiB flush threshold is
/// still answered completely and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_pipelined_batch_is_answered_completely() {
    let server = TestServer::spawn().await;
    register(&server, "serviceName=big&ip=10.0.0.1&port=1").await;
    let one = http("GET", &format!("{NS}/operator/switches"), &[], "");
    let size = server
        .call(Method::Get, &format!("{NS}/operator/switches"))
        .await
        .body
        .len()
        + 100;
    let n = 256 * 1024 / size + 200;
    let mut batch = Vec::new();
    for i in 0..n {
        if i % 100 == 99 {
            batch.extend(http(
                "GET",
                &format!("{NS}/instance?serviceName=big&ip=10.0.0.1&port=1"),
                &[],
                "",
            ));
        } else {
            batch.extend_from_slice(&one);
        }
    }
    // Write and read concurrently: the answers are larger than socket buffers.
    let (mut rd, mut wr) = TcpStream::connect(server.http_addr)
        .await
        .expect("connect")
        .into_split();
    let writer = tokio::spawn(async move { wr.write_all(&batch).await });
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen < n {
        while let Some((r, used)) = parse_response(&buf).expect("well-formed") {
            assert_eq!(r.status, 200, "response {seen}");
            let is_detail = r.body.starts_with(b"{\"service\"");
            assert_eq!(is_detail, seen % 100 == 99, "response {seen} out of order");
            buf.drain(..used);
            seen += 1;
        }
        if seen == n {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let got = tokio::time::timeout(left, rd.read(&mut chunk))
            .await
            .expect("answers in time")
            .expect("read");
        assert!(got > 0, "closed after {seen} of {n} responses");
        buf.extend_from_slice(&chunk[..got]);
    }
    writer.await.expect("writer").expect("write");
    server.stop().await;
}

/// Splits the first response off `buf`: (status, head, body), and the bytes
/// it took; `None` while it is incomplete. `head_only` for the answer to a
/// HEAD request (a `Content-Length`, no body).
fn split_response(buf: &[u8], head_only: bool) -> Option<(u16, String, Vec<u8>, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8(buf[..end].to_vec()).expect("utf-8 head");
    let status = head[9..12].parse().expect("status");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length")
        .parse()
        .expect("length");
    let body_len = if head_only { 0 } else { length };
    let body = buf.get(end..end + body_len)?.to_vec();
    Some((status, head, body, end + body_len))
}

/// Large cached lists go out from the cache (`writev`, not copied into the
/// write buffer): pipelined with HEADs of the same list, deferred
/// (persistent) writes and other answers, more of them than one write
/// shares and more bytes than the flush threshold and the client's small
/// socket buffer, every answer comes whole and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_large_lists_go_out_whole_and_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = TestServer::with(Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Config::for_test()
    })
    .await;
    for i in 0..10 {
        register(
            &server,
            &format!("serviceName=big-list&ip=10.1.0.{i}&port=8080&metadata=version%3D1.0.0"),
        )
        .await;
    }
    let target = format!("{NS}/instance/list?serviceName=big-list");
    let reference = list(&server, "serviceName=big-list").await;
    let size = server.call(Method::Get, &target).await.body.len();
    // Past the size from which the server shares cached bodies.
    assert!(
        size > 2048,
        "a list of {size} B is too small to test sharing"
    );
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Kind {
        List,
        Head,
        Persistent,
        Other,
    }
    let kinds: Vec<Kind> = (0..300)
        .map(|i| match i % 10 {
            3 => Kind::Head,
            6 => Kind::Persistent,
            8 => Kind::Other,
            _ => Kind::List,
        })
        .collect();
    let mut batch = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        batch.extend(match kind {
            Kind::List => http("GET", &target, &[], ""),
            Kind::Head => http("HEAD", &target, &[], ""),
            Kind::Persistent => http(
                "POST",
                &format!(
                    "{NS}/instance?serviceName=kept&ip=10.2.0.1&port={}&ephemeral=false",
                    1000 + i
                ),
                &[],
                "",
            ),
            Kind::Other => http("GET", &format!("{NS}/operator/switches"), &[], ""),
        });
    }
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("buffer size");
    let (mut rd, mut wr) = socket
        .connect(server.http_addr)
        .await
        .expect("connect")
        .into_split();
    let writer = tokio::spawn(async move { wr.write_all(&batch).await });
    let (mut buf, mut chunk, mut seen) = (Vec::new(), [0u8; 1024], 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen < kinds.len() {
        while let Some((status, head, body, used)) = kinds
            .get(seen)
            .and_then(|k| split_response(&buf, *k == Kind::Head))
        {
            let kind = kinds[seen];
            assert_eq!(status, 200, "response {seen} ({kind:?}): {head}");
            match kind {
                Kind::List => {
                    let v: Value = serde_json::from_slice(&body).expect("list JSON");
                    assert_eq!(v["hosts"], reference["hosts"], "response {seen}");
                    assert_eq!(body.len(), size, "response {seen}");
                }
                Kind::Head => {
                    assert!(
                        head.contains(&format!("Content-Length: {size}\r\n")),
                        "{head}"
                    );
                }
                Kind::Persistent => assert_eq!(body, b"ok", "response {seen}"),
                Kind::Other => assert!(body.starts_with(b"{"), "response {seen}"),
            }
            buf.drain(..used);
            seen += 1;
        }
        if seen == kinds.len() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let got = tokio::time::timeout(left, rd.read(&mut chunk))
            .await
            .expect("answers in time")
            .expect("read");
        assert!(got > 0, "closed after {seen} of {} responses", kinds.len());
        buf.extend_from_slice(&chunk[..got]);
    }
    assert!(buf.is_empty(), "{} bytes past the last answer", buf.len());
    writer.await.expect("writer").expect("write");
    let kept = list(&server, "serviceName=kept").await;
    assert_eq!(kept["hosts"].as_array().map(Vec::len), Some(30));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_closes_by_default() {
    let server = TestServer::spawn().await;
    let mut c = Conn::open(server.http_addr).await;
    c.send(format!("GET {NS}/operator/metrics HTTP/1.0\r\n\r\n").as_bytes())
        .await;
    let r = c.recv().await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "UP");
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(c.closed_within(Duration::from_secs(1)).await);
    server.stop().await;
}

/// An HTTP/1.0 client that asks for keep-alive (ApacheBench `-k`, old
/// proxies) closes unless the response says `Connection: keep-alive`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_keep_alive_is_acknowledged_in_the_response() {
    let server = TestServer::spawn().await;
    let mut c = Conn::open(server.http_addr).await;
    let req = format!("GET {NS}/operator/metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    c.send(req.as_bytes()).await;
    let r = c.recv().await;
    assert_eq!(r.status, 200);
    c.send(req.as_bytes()).await;
    assert_eq!(c.recv().await.status, 200, "the connection stayed open");
    assert_eq!(
        r.header("Connection"),
        Some("keep-alive"),
        "HTTP/1.0 keep-alive must be acknowledged; head was:\n{}",
        r.head
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn form_body_parameters_register_as_the_java_client_sends_them() {
    let server = TestServer::spawn().await;
    let form = format!(
        "serviceName=DEFAULT_GROUP%40%40form&groupName=DEFAULT_GROUP&namespaceId=public&clusterName=c1&ip=10.0.0.1&port=8080&weight=2.0&enable=true&healthy=true&ephemeral=true&metadata={}&app=demo",
        enc(r#"{"k":"v w"}"#)
    );
    let r = server
        .call_form(Method::Post, &format!("{NS}/instance"), &form)
        .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let l = list(&server, "serviceName=form").await;
    let h = host(&l, 8080);
    assert_eq!(
        (&h["clusterName"], &h["weight"], &h["metadata"]),
        (&json!("c1"), &json!(2.0), &json!({"k": "v w"}))
    );
    // The query wins over the body for the same name (Spring's getParameter).
    let r = server
        .call_form(
            Method::Post,
            &format!("{NS}/instance?port=9000"),
            "serviceName=form&ip=10.0.0.2&port=1",
        )
        .await;
    assert_eq!(r.body, "ok");
    assert_eq!(
        ports(&list(&server, "serviceName=form").await),
        [8080, 9000]
    );
    // A chunked form body is reassembled and read.
    let mut c = Conn::open(server.http_addr).await;
    let part1 = "serviceName=form&ip=10.0.0.";
    let part2 = "4&port=7";
    c.send(
        format!(
            "POST {NS}/instance HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{part1}\r\n{:x}\r\n{part2}\r\n0\r\n\r\n",
            part1.len(),
            part2.len()
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(c.recv().await.body, "ok");
    assert_eq!(
        ports(&list(&server, "serviceName=form").await),
        [7, 8080, 9000]
    );
    // A body that is not a form is not read for parameters.
    let mut c = Conn::open(server.http_addr).await;
    c.send(&http(
        "POST",
        &format!("{NS}/instance"),
        &["Content-Type: text/plain"],
        "serviceName=form&ip=10.0.0.3&port=1",
    ))
    .await;
    let r = c.recv().await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (400, "Param 'serviceName' is required.")
    );
    assert_eq!(counts(&server).await, (1, 3));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_100_continue_gets_an_interim_response() {
    let server = TestServer::spawn().await;
    let body = "serviceName=cont&ip=10.0.0.1&port=80";
    let mut c = Conn::open(server.http_addr).await;
    c.send(
        format!(
            "POST {NS}/instance HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .await;
    let interim = tokio::time::timeout(Duration::from_secs(1), c.recv())
        .await
        .expect("100 Continue within 1 s");
    assert_eq!(interim.status, 100);
    assert_eq!(interim.body, "");
    c.send(body.as_bytes()).await;
    let r = c.recv().await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    assert_eq!(ports(&list(&server, "serviceName=cont").await), [80]);
    // With the body already sent, no interim response is needed.
    let mut one = format!(
        "POST {NS}/instance HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    one.push_str(body);
    c.send(one.as_bytes()).await;
    let r = c.recv().await;
    assert!(
        r.status == 200 || r.status == 100,
        "unexpected {}",
        r.status
    );
    if r.status == 100 {
        assert_eq!(c.recv().await.body, "ok");
    }
    server.stop().await;
}

// ----- expiry through the API --------------------------------------------------

/// The sweeper ticks often in real time; the lease times are Nacos's
/// defaults (15 s unhealthy, 30 s deleted) on a clock the test moves.
fn expiry_config() -> Config {
    Config {
        sweep_interval_ms: 10,
        ..Config::for_test()
    }
}

async fn detail_healthy(server: &TestServer, service: &str, port: u16) -> Option<bool> {
    let r = server
        .call(
            Method::Get,
            &format!("{NS}/instance?serviceName={service}&ip=10.0.0.1&port={port}"),
        )
        .await;
    match r.status {
        200 => Some(r.json()["healthy"].as_bool().expect("healthy")),
        404 => None,
        s => panic!("GET instance: {s} {}", r.body),
    }
}

async fn beat_stays(server: &TestServer, service: &str, port: u16) {
    let (_, b) = light_beat(server, service, "10.0.0.1", port).await;
    assert!(b.contains("10200"), "the beaten instance stays: {b}");
}

/// Before: 300 ms timeouts on the wall clock, so a loaded machine that
/// delayed a beat by 300 ms failed it. Now the test moves the server's
/// clock: no sleeps, no race with the machine's load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbeaten_instances_turn_unhealthy_then_disappear_while_beaten_ones_stay() {
    let (server, clock) = TestServer::with_clock(expiry_config()).await;
    register(&server, "serviceName=exp&ip=10.0.0.1&port=1").await;
    register(&server, "serviceName=exp&ip=10.0.0.1&port=2").await;
    clock.advance(Duration::from_secs(10));
    beat_stays(&server, "exp", 2).await;
    server.swept().await;
    assert_eq!(
        detail_healthy(&server, "exp", 1).await,
        Some(true),
        "not before 15 s"
    );
    clock.advance(Duration::from_secs(6));
    server.swept().await;
    assert_eq!(
        detail_healthy(&server, "exp", 1).await,
        Some(false),
        "unhealthy after 15 s"
    );
    assert_eq!(detail_healthy(&server, "exp", 2).await, Some(true));
    let l = list(&server, "serviceName=exp").await;
    assert_eq!(ports(&l), [1, 2]);
    assert_eq!(host(&l, 1)["healthy"], false);
    assert_eq!(host(&l, 2)["healthy"], true);
    assert_eq!(
        ports(&list(&server, "serviceName=exp&healthyOnly=true").await),
        [2]
    );
    clock.advance(Duration::from_secs(8));
    beat_stays(&server, "exp", 2).await;
    server.swept().await;
    assert_eq!(
        detail_healthy(&server, "exp", 1).await,
        Some(false),
        "not deleted before 30 s"
    );
    clock.advance(Duration::from_secs(7));
    server.swept().await;
    let (s, b) = call(
        &server,
        Method::Get,
        &format!("{NS}/instance?serviceName=exp&ip=10.0.0.1&port=1"),
    )
    .await;
    assert_eq!((s, b.as_str()), (404, "no matched ip found!"));
    assert_eq!(ports(&list(&server, "serviceName=exp").await), [2]);
    assert_eq!(counts(&server).await, (1, 1));
    // Its beats now say 20404, so the client re-registers.
    let (_, b) = light_beat(&server, "exp", "10.0.0.1", 1).await;
    assert_eq!(b, r#"{"clientBeatInterval":5000,"code":20404}"#);
    // Persistent instances never expire.
    register(
        &server,
        "serviceName=per&ip=10.0.0.1&port=1&ephemeral=false",
    )
    .await;
    clock.advance(Duration::from_secs(3_600));
    server.swept().await;
    assert_eq!(detail_healthy(&server, "per", 1).await, Some(true));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_beat_revives_an_unhealthy_instance() {
    let (server, clock) = TestServer::with_clock(expiry_config()).await;
    // A healthy persistent neighbour keeps the service below protection
    // (one unhealthy of one would be protected, see the threshold test).
    register(
        &server,
        "serviceName=rev&ip=10.0.0.2&port=1&ephemeral=false",
    )
    .await;
    register(&server, "serviceName=rev&ip=10.0.0.1&port=1").await;
    clock.advance(Duration::from_secs(16));
    server.swept().await;
    assert_eq!(detail_healthy(&server, "rev", 1).await, Some(false));
    assert_eq!(
        ports(&list(&server, "serviceName=rev&healthyOnly=true").await),
        [1],
        "only the persistent neighbour"
    );
    let (s, b) = light_beat(&server, "rev", "10.0.0.1", 1).await;
    assert_eq!(
        (s, b.as_str()),
        (
            200,
            r#"{"clientBeatInterval":5000,"code":10200,"lightBeatEnabled":true}"#
        )
    );
    assert_eq!(detail_healthy(&server, "rev", 1).await, Some(true));
    let l = list(&server, "serviceName=rev&healthyOnly=true").await;
    assert_eq!(l["hosts"].as_array().unwrap().len(), 2, "{l}");
    server.stop().await;
}

// ----- shutdown ----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_does_not_wait_for_idle_keep_alive_connections() {
    // Grace and idle timeout far beyond the test's patience: a stop that
    // waited for the idle connection would not finish within it.
    let server = TestServer::with(Config {
        shutdown_grace_ms: 600_000,
        idle_timeout_ms: 600_000,
        ..Config::for_test()
    })
    .await;
    let addr = server.http_addr;
    let mut idle = Conn::open(addr).await;
    idle.send(&http("GET", &format!("{NS}/operator/metrics"), &[], ""))
        .await;
    assert_eq!(idle.recv().await.status, 200);
    tokio::time::timeout(Duration::from_secs(60), server.stop())
        .await
        .expect("stop did not wait for the idle connection");
    assert!(
        idle.closed_within(Duration::from_secs(1)).await,
        "the idle connection was closed"
    );
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}
