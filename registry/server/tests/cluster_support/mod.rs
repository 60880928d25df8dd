//! Test support for clusters of real `registry` processes on loopback:
//! ports chosen by binding port 0 first, every node told every member,
//! short timings so failure detection and expiry take a second or two, and
//! bounded polling for conditions that cross processes.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use registry_proto::http1::Method;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::binary::Conn;

/// Timings every test node runs with unless its `extra` arguments give the
/// flag (ms): probes every 200 ms, DOWN after three misses; checksums every 500 ms; unhealthy after 1.5 s of silence,
/// deleted after 3 s.
pub const FAST: &[&str] = &[
    "--cluster-probe-interval-ms",
    "200",
    "--cluster-probe-failures",
    "3",
    "--cluster-relay-timeout-ms",
    "1000",
    "--distro-verify-interval-ms",
    "500",
    "--beat-interval-ms",
    "500",
    "--beat-timeout-ms",
    "1500",
    "--delete-timeout-ms",
    "3000",
    "--sweep-interval-ms",
    "100",
    "--empty-service-ttl-ms",
    "600000",
    "--workers",
    "1",
    "--shards",
    "4",
];

/// Free loopback ports for `n` listeners, taken from below the kernel's
/// ephemeral range. A port from that range (what binding port 0 hands out)
/// can be taken meanwhile by any outgoing connection's local end, and a node
/// restarted on its old port then fails to bind; ports outside it are only
/// ever bound explicitly. A per-process counter keeps this binary's tests off
/// each other's ports; the process id spreads binaries apart; each candidate
/// is checked by binding it.
pub fn free_addrs(n: usize) -> Vec<SocketAddr> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = explicit_port_range();
    let span = high - low;
    let offset = std::process::id() * 7919 % span;
    let mut addrs = Vec::with_capacity(n);
    for _ in 0..span {
        if addrs.len() == n {
            break;
        }
        let port = low + (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let addr = SocketAddr::from(([127, 0, 0, 1], port as u16));
        if TcpListener::bind(addr).is_ok() {
            addrs.push(addr);
        }
    }
    assert_eq!(addrs.len(), n, "no {n} free ports in {low}..{high}");
    addrs
}

/// Ports `[low, high)` that the kernel never hands out on its own: below
/// `ip_local_port_range` when there is room, else above it.
fn explicit_port_range() -> (u32, u32) {
    let (lo, hi) = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|v| v.parse::<u32>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32768, 60999));
    if lo >= 12_000 {
        (10_000, lo)
    } else {
        assert!(hi < 64_000, "no room outside the ephemeral range {lo}-{hi}");
        (hi + 1, 65_536)
    }
}

/// One node of a test cluster: a real process.
pub struct Node {
    pub addr: SocketAddr,
    /// Its gRPC address, chosen like `addr` (not the HTTP port + 1000,
    /// which nothing checked was free).
    pub grpc: SocketAddr,
    members: String,
    extra: Vec<String>,
    /// Started with only `--config FILE` when set: the file says it all.
    config: Option<PathBuf>,
    log: PathBuf,
    child: Option<Child>,
    pub pid: u32,
}

/// Raft timings for test clusters (ms): elections in under a second, writes
/// time out after 2 s, no health checks (the tests' instances are not probed).
pub const RAFT_FAST: &[&str] = &[
    "--raft-election-timeout-ms",
    "800",
    "--raft-heartbeat-ms",
    "100",
    "--raft-write-timeout-ms",
    "2000",
    "--health-check-interval-ms",
    "0",
];

/// Starts `n` Raft nodes (real processes) on fresh loopback addresses, each
/// with its data dir `dir/data{i}` and log `dir/node{i}.log`, timed by
/// [`RAFT_FAST`] then `extra`. Returns the nodes and their data dirs; it does
/// not wait for a leader.
pub async fn start_raft_nodes(dir: &Path, n: usize, extra: &[&str]) -> (Vec<Node>, Vec<PathBuf>) {
    let addrs = free_addrs(n);
    let members = addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        let data = dir.join(format!("data{i}"));
        let mut args: Vec<&str> = vec!["--data-dir", data.to_str().expect("utf-8 path")];
        args.extend_from_slice(RAFT_FAST);
        args.extend_from_slice(extra);
        let log = dir.join(format!("node{i}.log"));
        nodes.push(Node::start(*a, &members, &args, &log).await);
        dirs.push(data);
    }
    (nodes, dirs)
}

impl Node {
    /// The node's own Raft role (`LEADER`, `FOLLOWER`, ...) as it reports it
    /// in the member list; `None` when it does not answer 200.
    pub async fn raft_role(&self) -> Option<String> {
        let (status, body) = self
            .try_call(Method::Get, "/nacos/v1/core/cluster/nodes")
            .await?;
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let me = self.addr.to_string();
        v["data"]
            .as_array()?
            .iter()
            .find(|m| m["address"].as_str() == Some(&me))
            .and_then(|m| m["extendInfo"]["raftRole"].as_str())
            .map(str::to_owned)
    }

    /// Starts a node at `addr` in the cluster `members`.
    pub async fn start(addr: SocketAddr, members: &str, extra: &[&str], log: &Path) -> Node {
        Node::start_with_grpc(addr, free_addrs(1)[0], members, extra, log).await
    }

    /// Starts a node at `addr` with its gRPC port at `grpc`.
    pub async fn start_with_grpc(
        addr: SocketAddr,
        grpc: SocketAddr,
        members: &str,
        extra: &[&str],
        log: &Path,
    ) -> Node {
        let mut node = Node {
            addr,
            grpc,
            members: members.to_owned(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            config: None,
            log: log.to_path_buf(),
            child: None,
            pid: 0,
        };
        node.spawn().await;
        node
    }

    /// Starts a node with `--config file` and no other flag: `addr` and
    /// `grpc` must be what the file's `[listen]` says.
    pub async fn start_from_config(
        addr: SocketAddr,
        grpc: SocketAddr,
        file: &Path,
        log: &Path,
    ) -> Node {
        let mut node = Node {
            addr,
            grpc,
            members: String::new(),
            extra: Vec::new(),
            config: Some(file.to_path_buf()),
            log: log.to_path_buf(),
            child: None,
            pid: 0,
        };
        node.spawn().await;
        node
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_registry"));
        if let Some(file) = &self.config {
            cmd.arg("--config").arg(file);
            return cmd;
        }
        cmd.args([
            "--listen",
            &self.addr.to_string(),
            "--udp-listen",
            "127.0.0.1:0",
            "--grpc-listen",
            &self.grpc.to_string(),
        ])
        .args(["--members", &self.members])
        .args(self.fast_not_overridden())
        .args(&self.extra);
        cmd
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open log");
        let mut child = self
            .command()
            .env("REGISTRY_LOG", "info,openraft=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .expect("start the registry binary");
        self.pid = child.id().expect("pid");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("registry started within 30 s")
            .expect("read stdout");
        assert!(
            line.as_deref()
                .is_some_and(|l| l.starts_with("registry listening on")),
            "unexpected start: {line:?}\n{}",
            self.log_text()
        );
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.child = Some(child);
    }

    /// The [`FAST`] flags and values, less those that `extra` gives (a flag
    /// may be given once).
    fn fast_not_overridden(&self) -> Vec<&'static str> {
        FAST.chunks(2)
            .filter(|pair| !self.extra.iter().any(|e| e == pair[0]))
            .flatten()
            .copied()
            .collect()
    }

    /// `kill -9`.
    pub async fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.start_kill().expect("SIGKILL");
            let _ = c.wait().await;
        }
    }

    /// Starts the process again at the same address.
    pub async fn restart(&mut self) {
        self.kill9().await;
        self.spawn().await;
    }

    /// Sends a signal by name (`STOP`, `CONT`).
    pub fn signal(&self, name: &str) {
        let ok = std::process::Command::new("kill")
            .args([&format!("-{name}"), &self.pid.to_string()])
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{name} {}", self.pid);
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One request on a fresh connection: `None` when the node does not answer.
    pub async fn try_call(&self, method: Method, target: &str) -> Option<(u16, String)> {
        let mut c = tokio::time::timeout(Duration::from_secs(2), Conn::open(self.addr))
            .await
            .ok()?
            .ok()?;
        tokio::time::timeout(Duration::from_secs(3), c.call(method, target))
            .await
            .ok()?
            .ok()
    }

    /// One request; panics when the node does not answer.
    pub async fn call(&self, method: Method, target: &str) -> (u16, String) {
        match self.try_call(method, target).await {
            Some(r) => r,
            None => panic!("{} did not answer {target}\n{}", self.addr, self.log_text()),
        }
    }

    /// Registers an ephemeral instance 127.0.0.1:`port` of `service`.
    pub async fn register(&self, service: &str, port: u16) -> (u16, String) {
        self.call(
            Method::Post,
            &format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.0.0.1&port={port}"),
        )
        .await
    }

    /// Deregisters it.
    pub async fn deregister(&self, service: &str, port: u16) -> (u16, String) {
        self.call(
            Method::Delete,
            &format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.0.0.1&port={port}"),
        )
        .await
    }

    /// `(port, healthy)` of every instance of `service`, sorted; `None`
    /// when the node does not answer 200.
    pub async fn hosts(&self, service: &str) -> Option<Vec<(u16, bool)>> {
        let (status, body) = self
            .try_call(
                Method::Get,
                &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
            )
            .await?;
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        let mut hosts: Vec<(u16, bool)> = v["hosts"]
            .as_array()?
            .iter()
            .map(|h| {
                (
                    h["port"].as_u64().unwrap_or(0) as u16,
                    h["healthy"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        hosts.sort();
        Some(hosts)
    }

    /// Ports of `service`'s instances (any health).
    pub async fn ports(&self, service: &str) -> Option<Vec<u16>> {
        Some(
            self.hosts(service)
                .await?
                .into_iter()
                .map(|(p, _)| p)
                .collect(),
        )
    }

    /// Whether the node says it is ready.
    pub async fn ready(&self) -> bool {
        matches!(
            self.try_call(Method::Get, "/nacos/v1/console/health/readiness")
                .await,
            Some((200, _))
        )
    }

    /// Member states as the node lists them: `address -> state`.
    pub async fn members(&self) -> Vec<(String, String)> {
        let Some((200, body)) = self
            .try_call(Method::Get, "/nacos/v1/core/cluster/nodes")
            .await
        else {
            return Vec::new();
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let mut out: Vec<(String, String)> = v["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|m| {
                        (
                            m["address"].as_str().unwrap_or("").to_owned(),
                            m["state"].as_str().unwrap_or("").to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// A `/metrics` sample (first line starting with `name `), 0 when absent.
    pub async fn metric(&self, name: &str) -> f64 {
        let Some((_, text)) = self.try_call(Method::Get, "/metrics").await else {
            return 0.0;
        };
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

/// A cluster of `n` nodes, all started with `extra` arguments.
pub struct TestCluster {
    pub nodes: Vec<Node>,
    pub members: String,
    _dir: tempfile::TempDir,
}

impl TestCluster {
    /// Starts `n` nodes and waits until every node is ready and sees every
    /// other UP.
    pub async fn start(n: usize, extra: &[&str]) -> TestCluster {
        TestCluster::start_nodes(free_addrs(n), None, extra).await
    }

    /// Like [`TestCluster::start`], with every node's gRPC port at its HTTP
    /// port + `offset` (what Nacos clients given several servers assume).
    pub async fn start_grpc_offset(n: usize, offset: u16, extra: &[&str]) -> TestCluster {
        let mut addrs = Vec::with_capacity(n);
        while addrs.len() < n {
            let a = free_addrs(1)[0];
            let Some(port) = a.port().checked_add(offset) else {
                continue;
            };
            if TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).is_ok() {
                addrs.push(a);
            }
        }
        TestCluster::start_nodes(addrs, Some(offset), extra).await
    }

    async fn start_nodes(
        addrs: Vec<SocketAddr>,
        offset: Option<u16>,
        extra: &[&str],
    ) -> TestCluster {
        // CLUSTER_LOG_DIR keeps the nodes' logs for a look after a failure.
        let dir = match std::env::var_os("CLUSTER_LOG_DIR") {
            Some(d) => tempfile::Builder::new()
                .prefix("cluster-")
                .disable_cleanup(true)
                .tempdir_in(std::fs::create_dir_all(&d).map(|_| d).expect("log dir"))
                .expect("tempdir"),
            None => tempfile::tempdir().expect("tempdir"),
        };
        let members = addrs
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::new();
        for (i, a) in addrs.iter().enumerate() {
            let log = dir.path().join(format!("node{i}.log"));
            let grpc = match offset {
                Some(o) => SocketAddr::from(([127, 0, 0, 1], a.port() + o)),
                None => free_addrs(1)[0],
            };
            nodes.push(Node::start_with_grpc(*a, grpc, &members, extra, &log).await);
        }
        let c = TestCluster {
            nodes,
            members,
            _dir: dir,
        };
        c.until_all_up(Duration::from_secs(20)).await;
        c
    }

    /// Waits until every running node is ready and lists every member UP.
    pub async fn until_all_up(&self, limit: Duration) {
        let n = self.nodes.len();
        until(limit, "every node ready with every member UP", || async {
            for node in &self.nodes {
                if !node.ready().await {
                    return false;
                }
                let m = node.members().await;
                if m.len() != n || m.iter().any(|(_, s)| s != "UP") {
                    return false;
                }
            }
            true
        })
        .await;
    }

    /// The index (into `nodes`) of the node responsible for `service` (in
    /// `DEFAULT_GROUP`) while the members `up` are UP.
    pub fn owner_among(&self, service: &str, up: &[usize]) -> usize {
        let mut addrs: Vec<String> = up.iter().map(|i| self.nodes[*i].addr.to_string()).collect();
        addrs.sort();
        let i = registry_proto::distro::responsible_index(
            &format!("DEFAULT_GROUP@@{service}"),
            addrs.len(),
        );
        self.nodes
            .iter()
            .position(|n| n.addr.to_string() == addrs[i])
            .expect("member")
    }

    /// A service name owned by node `owner` while every node is UP.
    pub fn service_owned_by(&self, owner: usize, prefix: &str) -> String {
        let all: Vec<usize> = (0..self.nodes.len()).collect();
        (0..10_000)
            .map(|i| format!("{prefix}-{i}"))
            .find(|s| self.owner_among(s, &all) == owner)
            .expect("some name hashes to every node")
    }

    /// Waits until every answering node lists the same `(port, healthy)`s for
    /// `service` and they equal `expected`.
    pub async fn until_everywhere(&self, service: &str, expected: &[(u16, bool)], limit: Duration) {
        let what = format!("every node lists {service} as {expected:?}");
        until(limit, &what, || async {
            for node in &self.nodes {
                if node.hosts(service).await.as_deref() != Some(expected) {
                    return false;
                }
            }
            true
        })
        .await;
    }

    /// Every node's log, for failure messages.
    pub fn logs(&self) -> String {
        let mut s = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            s += &format!("--- node {i} ({}) ---\n{}", n.addr, n.log_text());
        }
        s
    }

    /// What every node lists, for failure messages.
    pub async fn describe(&self, service: &str) -> String {
        let mut s = String::new();
        for n in &self.nodes {
            s += &format!("{}: {:?}\n", n.addr, n.hosts(service).await);
        }
        s
    }
}

/// Polls `cond` every 20 ms until it holds; panics after `limit`.
pub async fn until<F, Fut>(limit: Duration, what: &str, mut cond: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if cond().await {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// xorshift64*: a small reproducible generator for randomised schedules
/// (each test prints its seed).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
