//! The DNS door against real resolvers: `dig` (Debian's bind9-dnsutils) and
//! dnspython 2.7.0, both installed by `scripts/deps/dns.sh`; these tests fail
//! (never skip) when they are missing.
//!
//! Nacos has no DNS door of its own (its answer is the CoreDNS plugin,
//! alibaba/nacos #7250), so what a name answers is what Nacos's instance
//! list answers: the enabled, healthy instances, or every enabled one once
//! the healthy share is at or below the protect threshold
//! (`naming/src/main/java/com/alibaba/nacos/naming/utils/ServiceUtil.java`,
//! `selectInstancesWithHealthyProtection` with `enableOnly`, as
//! `naming/.../core/InstanceOperatorClientImpl.java` `listInstance` calls it).

use crate::binary::{Conn, Registry};
use crate::common::TestServer;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use registry_proto::http1::Method;
use registry_server::Config;

const NS: &str = "/nacos/v1/ns";

fn dnspython() -> PathBuf {
    let python = std::env::var_os("NACOS_COMPAT_DIR")
        .map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/compat"),
            PathBuf::from,
        )
        .join("venv-dns/bin/python");
    assert!(
        python.exists(),
        "dnspython is not installed at {}: run scripts/deps/dns.sh (scripts/test.sh does)",
        python.display()
    );
    python
}

/// What `dig` printed: the status, the header flags and the answer lines
/// (`name ttl class type data`).
struct Dig {
    status: String,
    flags: Vec<String>,
    answers: Vec<Vec<String>>,
}

impl Dig {
    /// The answers' data of one type.
    fn data(&self, rtype: &str) -> Vec<String> {
        self.answers
            .iter()
            .filter(|a| a[3] == rtype)
            .map(|a| a[4..].join(" "))
            .collect()
    }
}

async fn dig(dns: SocketAddr, name: &str, rtype: &str, extra: &[&str]) -> Dig {
    let out = tokio::process::Command::new("dig")
        .args([
            &format!("@{}", dns.ip()),
            "-p",
            &dns.port().to_string(),
            "+tries=1",
            "+time=5",
            "+noall",
            "+comments",
            "+answer",
        ])
        .args(extra)
        .args([name, rtype])
        .kill_on_drop(true)
        .output()
        .await
        .expect("dig runs: install bind9-dnsutils (scripts/deps/dns.sh)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "dig {name} {rtype}: {text}");
    let status = text
        .split_once("status: ")
        .and_then(|(_, r)| r.split(',').next())
        .unwrap_or_else(|| panic!("no status in:\n{text}"))
        .to_owned();
    let flags = text
        .split_once(";; flags: ")
        .and_then(|(_, r)| r.split(';').next())
        .map(|f| f.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let answers = text
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect();
    Dig {
        status,
        flags,
        answers,
    }
}

/// dnspython's view of one query (see tests/compat/python_dns.py).
async fn resolve(
    dns: SocketAddr,
    transport: &str,
    name: &str,
    rtype: &str,
    payload: Option<u16>,
) -> serde_json::Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/compat/python_dns.py");
    let mut cmd = tokio::process::Command::new(dnspython());
    cmd.arg(script)
        .args([&dns.port().to_string(), transport, name, rtype])
        .args(payload.map(|p| p.to_string()))
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("dnspython finished in time")
        .expect("dnspython started");
    assert!(
        out.status.success(),
        "dnspython {name} {rtype}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn answers(v: &serde_json::Value, rtype: &str) -> Vec<String> {
    v["answer"]
        .as_array()
        .expect("answer")
        .iter()
        .filter(|r| r["type"] == rtype)
        .map(|r| r["data"].as_str().expect("data").to_owned())
        .collect()
}

fn flags(v: &serde_json::Value) -> Vec<&str> {
    v["flags"]
        .as_array()
        .expect("flags")
        .iter()
        .map(|f| f.as_str().expect("flag"))
        .collect()
}

async fn register(conn: &mut Conn, query: &str) {
    let (status, body) = conn
        .call(Method::Post, &format!("{NS}/instance?{query}"))
        .await
        .expect("register");
    assert_eq!((status, body.as_str()), (200, "ok"), "{query}");
}

async fn start(name: &str) -> (Registry, SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = Registry::start(
        &["--dns-listen", "127.0.0.1:0"],
        &dir.path().join(format!("{name}.log")),
    )
    .await;
    let dns = r
        .dns_addr
        .expect("the listening line names the DNS address");
    (r, dns, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dig_reads_services_clusters_and_instances() {
    let (registry, dns, _dir) = start("dig").await;
    let mut conn = Conn::open(registry.addr).await.expect("connect");
    for q in [
        "serviceName=orders&ip=10.0.0.1&port=8080&weight=2.5&metadata=v%3D1",
        "serviceName=orders&ip=10.0.0.2&port=8080&clusterName=east",
        "serviceName=orders&ip=::1&port=9090",
        "serviceName=Pay.Svc&groupName=shop&ip=10.0.1.1&port=80",
    ] {
        register(&mut conn, q).await;
    }

    let a = dig(dns, "orders.nacos.", "A", &[]).await;
    assert_eq!(a.status, "NOERROR");
    assert!(a.flags.contains(&"aa".to_owned()) && !a.flags.contains(&"ra".to_owned()));
    let ips: BTreeSet<String> = a.data("A").into_iter().collect();
    assert_eq!(ips, BTreeSet::from(["10.0.0.1".into(), "10.0.0.2".into()]));
    assert!(
        a.answers.iter().all(|r| r[1] == "5"),
        "TTL 5 s: {:?}",
        a.answers
    );
    assert_eq!(
        dig(dns, "orders.nacos.", "AAAA", &[]).await.data("AAAA"),
        ["::1"]
    );
    // Case does not matter; a cluster narrows.
    assert_eq!(
        dig(dns, "EAST.Orders.NACOS.", "A", &[]).await.data("A"),
        ["10.0.0.2"]
    );
    // The escape: `Pay.Svc` in group `shop` of `public`.
    let escaped = dig(dns, "_50ay_2e_53vc.shop._.nacos.", "A", &[]).await;
    assert_eq!(escaped.data("A"), ["10.0.1.1"]);

    let srv = dig(dns, "_.orders._._.nacos.", "SRV", &[]).await;
    let mut srv = srv.data("SRV");
    srv.sort();
    assert_eq!(
        srv,
        [
            "0 100 9090 00000000000000000000000000000001-9090._.orders._._.nacos.",
            "0 250 8080 0a000001-8080._.orders._._.nacos.",
        ]
    );
    let txt = dig(dns, "0a000001-8080._.orders._._.nacos.", "TXT", &[]).await;
    assert_eq!(txt.data("TXT"), ["\"v=1\""]);

    // RFC 2308: no such name, and a name without that type.
    let none = dig(dns, "nope.nacos.", "A", &[]).await;
    assert_eq!((none.status.as_str(), none.answers.len()), ("NXDOMAIN", 0));
    assert_eq!(
        dig(dns, "west.orders.nacos.", "A", &[]).await.status,
        "NXDOMAIN"
    );
    let nodata = dig(dns, "orders.nacos.", "MX", &[]).await;
    assert_eq!(
        (nodata.status.as_str(), nodata.answers.len()),
        ("NOERROR", 0)
    );
    // The group above `Pay.Svc` exists, empty (RFC 8020).
    assert_eq!(dig(dns, "shop._.nacos.", "A", &[]).await.status, "NOERROR");
    // Not our zone: refused, not recursed.
    let other = dig(dns, "example.com.", "A", &[]).await;
    assert_eq!(other.status, "REFUSED");
    assert!(!other.flags.contains(&"ra".to_owned()));

    // Disabling an instance and registering another: the next query sees both.
    let (status, _) = conn
        .call(
            Method::Put,
            &format!("{NS}/instance?serviceName=orders&ip=10.0.0.1&port=8080&enabled=false"),
        )
        .await
        .expect("update");
    assert_eq!(status, 200);
    register(&mut conn, "serviceName=orders&ip=10.0.0.3&port=8080").await;
    let ips: BTreeSet<String> = dig(dns, "orders.nacos.", "A", &[])
        .await
        .data("A")
        .into_iter()
        .collect();
    assert_eq!(ips, BTreeSet::from(["10.0.0.2".into(), "10.0.0.3".into()]));

    let nx = registry
        .metric("registry_dns_answers_total{rcode=\"NXDOMAIN\"}")
        .await;
    assert_eq!(nx, 2.0);
    assert_eq!(
        registry
            .metric("registry_dns_answers_total{rcode=\"REFUSED\"}")
            .await,
        1.0
    );
    assert!(
        registry
            .metric("registry_dns_queries_total{transport=\"udp\"}")
            .await
            >= 12.0
    );
    registry.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_service_truncates_over_udp_and_answers_over_tcp() {
    let (registry, dns, _dir) = start("large").await;
    let mut conn = Conn::open(registry.addr).await.expect("connect");
    for i in 0..200u32 {
        let q = format!(
            "serviceName=big&ip=10.1.{}.{}&port=80",
            i / 250,
            i % 250 + 1
        );
        register(&mut conn, &q).await;
    }
    // dnspython over UDP with EDNS 1232: TC, then TCP: all of it.
    let udp = resolve(dns, "udp", "big.nacos.", "A", Some(1232)).await;
    assert!(flags(&udp).contains(&"TC"), "{udp}");
    let tcp = resolve(dns, "tcp", "big.nacos.", "A", Some(1232)).await;
    assert!(!flags(&tcp).contains(&"TC"));
    assert_eq!(answers(&tcp, "A").len(), 200);
    // dig without EDNS: 512 bytes; dig retries over TCP on TC by itself.
    let plain = dig(dns, "big.nacos.", "A", &["+noedns", "+ignore"]).await;
    assert!(plain.flags.contains(&"tc".to_owned()));
    assert_eq!(dig(dns, "big.nacos.", "A", &[]).await.data("A").len(), 200);
    assert!(registry.metric("registry_dns_truncated_total").await >= 2.0);
    assert!(
        registry
            .metric("registry_dns_queries_total{transport=\"tcp\"}")
            .await
            >= 2.0
    );
    registry.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_instances_answer_over_tcp() {
    let (registry, dns, _dir) = start("huge").await;
    // Pipelined on four connections: the registration is not what is tested.
    let mut tasks = Vec::new();
    for c in 0..4u32 {
        let addr = registry.addr;
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr).await.expect("connect");
            for i in (c * 2_500)..((c + 1) * 2_500) {
                let q = format!(
                    "serviceName=huge&ip=10.2.{}.{}&port=80",
                    i / 200,
                    i % 200 + 1
                );
                register(&mut conn, &q).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("registered");
    }
    // 10,000 A records do not fit one DNS message (65,535 bytes): as many
    // as fit, all of them registered and distinct, TC saying the rest.
    let tcp = resolve(dns, "tcp", "huge.nacos.", "A", None).await;
    assert_eq!(tcp["rcode"], "NOERROR");
    assert!(flags(&tcp).contains(&"TC"));
    let ips: BTreeSet<String> = answers(&tcp, "A").into_iter().collect();
    assert!(ips.len() > 3_000, "{} addresses", ips.len());
    assert!(ips.iter().all(|ip| ip.starts_with("10.2.")));
    let srv = resolve(dns, "tcp", "huge.nacos.", "SRV", None).await;
    assert!(answers(&srv, "SRV").len() > 1_000);
    registry.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unhealthy_instances_leave_until_the_protect_threshold() {
    // In-process, on the injected clock: leases expire by moving it.
    let config = Config {
        dns_listen: Some("127.0.0.1:0".parse().expect("addr")),
        ..Config::for_test()
    };
    let (server, clock) = TestServer::with_clock(config).await;
    let dns = server.dns_addr.expect("DNS on");
    let mut conn = Conn::open(server.http_addr).await.expect("connect");
    let (status, _) = conn
        .call(
            Method::Post,
            &format!("{NS}/service?serviceName=guarded&protectThreshold=0.5"),
        )
        .await
        .expect("create service");
    assert_eq!(status, 200);
    for ip in ["10.3.0.1", "10.3.0.2", "10.3.0.3"] {
        register(&mut conn, &format!("serviceName=guarded&ip={ip}&port=80")).await;
    }
    // Past the beat timeout (15 s), before deletion (30 s), with only .1 beating.
    clock.advance(Duration::from_secs(10));
    let beat = "beat=%7B%22ip%22%3A%2210.3.0.1%22%2C%22port%22%3A80%7D";
    let (status, _) = conn
        .call(
            Method::Put,
            &format!("{NS}/instance/beat?serviceName=guarded&{beat}"),
        )
        .await
        .expect("beat");
    assert_eq!(status, 200);
    clock.advance(Duration::from_secs(8));
    server.swept().await;
    // One of three healthy (0.33 <= 0.5): protection, all three.
    let all = dig(dns, "guarded.nacos.", "A", &[]).await;
    assert_eq!(all.data("A").len(), 3, "{:?}", all.answers);
    // Lower the threshold: only the healthy one.
    let (status, _) = conn
        .call(
            Method::Put,
            &format!("{NS}/service?serviceName=guarded&protectThreshold=0.2"),
        )
        .await
        .expect("update service");
    assert_eq!(status, 200);
    assert_eq!(
        dig(dns, "guarded.nacos.", "A", &[]).await.data("A"),
        ["10.3.0.1"]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_answers_for_another_nodes_registration() {
    use crate::cluster_support::{free_addrs, until, Node};
    let dir = tempfile::tempdir().expect("tempdir");
    let (addrs, dns) = (free_addrs(2), free_addrs(2));
    let members = format!("{},{}", addrs[0], addrs[1]);
    let mut nodes = Vec::new();
    for i in 0..2 {
        let listen = dns[i].to_string();
        let log = dir.path().join(format!("node{i}.log"));
        nodes.push(Node::start(addrs[i], &members, &["--dns-listen", &listen], &log).await);
    }
    until(Duration::from_secs(20), "both nodes ready", || async {
        nodes[0].ready().await && nodes[1].ready().await
    })
    .await;
    // Registered through node 0; node 1 answers from its own replica.
    assert_eq!(nodes[0].register("replicated", 7001).await.0, 200);
    let other = dns[1];
    until(Duration::from_secs(20), "node 1 answers for it", || async move {
        dig(other, "replicated.nacos.", "A", &[]).await.data("A") == ["127.0.0.1"]
    })
    .await;
    let srv = dig(dns[1], "replicated.nacos.", "SRV", &[]).await;
    assert_eq!(
        srv.data("SRV"),
        ["0 100 7001 7f000001-7001._.replicated._._.nacos."]
    );
}

/// A query with `id` for `name` (labels joined by dots, no trailing dot) of
/// `qtype`, framed for TCP by its two-byte length.
fn framed_query(id: u16, name: &str, qtype: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, (qtype >> 8) as u8, qtype as u8, 0, 1]);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    framed
}

/// Reads one framed answer: its id and rcode.
async fn read_answer(stream: &mut tokio::net::TcpStream) -> (u16, u8) {
    use tokio::io::AsyncReadExt as _;
    let read = async {
        let len = stream.read_u16().await.expect("length");
        let mut answer = vec![0; usize::from(len)];
        stream.read_exact(&mut answer).await.expect("answer");
        (u16::from_be_bytes([answer[0], answer[1]]), answer[3] & 0x0f)
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an answer within 10 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_tcp_queries_are_answered_in_order() {
    use tokio::io::AsyncWriteExt as _;
    let (registry, dns, _dir) = start("pipelined").await;
    let mut conn = Conn::open(registry.addr).await.expect("connect");
    register(&mut conn, "serviceName=orders&ip=10.0.0.1&port=80").await;
    let mut stream = tokio::net::TcpStream::connect(dns).await.expect("tcp");
    // Three whole queries and the start of a fourth in one write (RFC 7766
    // pipelining): the three are answered in order without waiting for the
    // fourth, which is answered once its last bytes arrive.
    let fourth = framed_query(4, "orders.nacos", 1);
    let mut batch = framed_query(1, "orders.nacos", 1);
    batch.extend(framed_query(2, "missing.nacos", 1));
    batch.extend(framed_query(3, "orders.nacos", 33));
    batch.extend_from_slice(&fourth[..5]);
    stream.write_all(&batch).await.expect("write");
    assert_eq!(read_answer(&mut stream).await, (1, 0));
    assert_eq!(read_answer(&mut stream).await, (2, 3), "NXDOMAIN");
    assert_eq!(read_answer(&mut stream).await, (3, 0));
    stream.write_all(&fourth[5..]).await.expect("write");
    assert_eq!(read_answer(&mut stream).await, (4, 0));
    registry.terminate().await;
}
