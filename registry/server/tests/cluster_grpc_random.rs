//! A randomised schedule of Nacos 2.x clients on a cluster of three real
//! `registry` processes: clients connected to different nodes register,
//! deregister and batch-register; connections are dropped (the client
//! gives up: its instances must leave every node); clients reconnect to
//! another node and redo what they published; nodes are killed with
//! `kill -9` and restarted, and each client that was connected to the dead
//! node either redoes on a survivor or never comes back. At random points,
//! and at the end, every node's lists (1.x HTTP, and 2.x queries at the end)
//! must equal the model (the union of what every live client published)
//! within a stated bound: 3 s (shorter than the 4 s synced-client grace, so
//! removals must arrive by replication) when no node died or restarted in
//! the last 8 s, 8 s (the grace plus 4 s) when one did.
//!
//! `GRPC_CLUSTER_SEED=<n>` replays a run (the seed is printed, and every
//! failure prints it with the history); `GRPC_CLUSTER_OPS=<n>` (default 80)
//! and `GRPC_CLUSTER_RESTARTS=<n>` (default 2) make a longer run
//! (`scripts/cluster-random.sh` loops seeds).
//!
//! The clients are the bare gRPC test client (`grpc_client`): one real
//! HTTP/2 connection each, with no client-side logic, so the schedule
//! decides exactly when a connection closes and what a redo sends.

use crate::cluster_support;
use crate::grpc_client;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use cluster_support::{Rng, TestCluster};
use grpc_client::Raw;
use registry_proto::grpc::message::{
    BatchInstanceRequest, InstanceRequest, NamingHead, ServiceQueryRequest, WireInstance,
};
use registry_proto::grpc::Payload;

const SERVICES: [&str; 3] = ["rg-a", "rg-b", "rg-c"];
const CLIENTS: usize = 4;
/// Ports each client may publish per service (its own range, so no two
/// clients ever publish the same instance).
const PORTS_PER_CLIENT: u16 = 4;

/// Synced clients outlive their node's last renewal by 4 s (renewed every
/// 300 ms).
const GRACE_MS: u64 = 4_000;
const FLAGS: &[&str] = &[
    "--client-expire-grace-ms",
    "4000",
    "--client-verify-interval-ms",
    "300",
];
/// Lists equal the model this long after the last change when no node
/// died or restarted recently (replication window 100 ms, polling, a
/// loaded machine). It is shorter than the grace: a close or deregistration
/// must reach every node by replication, not by the expiry of a copy.
const SETTLE: Duration = Duration::from_secs(3);
/// ... and this long when one did (counted from the kill and from the
/// restart): the dead node's synced clients linger on the others until the
/// grace ends, also once it is back (the new process does not renew what
/// the old one held): a client that redid elsewhere and then dropped its new
/// connection stays listed by its old connection's copy until then.
const SETTLE_AFTER_KILL: Duration = Duration::from_millis(GRACE_MS + 4_000);

fn naming(service: &str) -> NamingHead {
    NamingHead {
        namespace: Some("public".into()),
        service_name: Some(service.into()),
        group_name: Some("DEFAULT_GROUP".into()),
    }
}

fn instance(port: u16) -> WireInstance {
    WireInstance {
        ip: Some("127.0.0.1".into()),
        port: Some(port.into()),
        ..WireInstance::default()
    }
}

/// One client's live connection: the node it is on, the channel, and the
/// task answering the server's detections on its stream.
struct Connection {
    node: usize,
    raw: Raw,
    keeper: tokio::task::JoinHandle<()>,
}

impl Connection {
    /// Closes it as a client process would by exiting: stream and channel go.
    fn close(self) {
        self.keeper.abort();
        drop(self.raw);
    }
}

/// One logical 2.x client: what it has published, per service index, and
/// its connection (none while it is away).
#[derive(Default)]
struct Client {
    published: BTreeMap<usize, BTreeSet<u16>>,
    connection: Option<Connection>,
}

fn port_of(client: usize, k: u16) -> u16 {
    7_000 + client as u16 * 10 + k
}

/// The run: cluster, clients, model, and the history printed on failure.
struct Run {
    seed: u64,
    rng: Rng,
    cluster: TestCluster,
    clients: Vec<Client>,
    history: Vec<String>,
    started: Instant,
    last_disruption: Option<Instant>,
    restarts: usize,
    /// The node killed and not yet restarted.
    down: Option<usize>,
}

impl Run {
    fn note(&mut self, what: String) {
        let line = format!("{:>7.3}s {what}", self.started.elapsed().as_secs_f64());
        self.history.push(line);
    }

    fn fail(&self, what: &str) -> ! {
        let mut s = format!(
            "{what}\nreplay: GRPC_CLUSTER_SEED={} (history below)\n",
            self.seed
        );
        for line in &self.history {
            let _ = writeln!(s, "  {line}");
        }
        panic!("{s}");
    }

    /// What every node must list for service `s`: the union of what the
    /// clients published.
    fn expected(&self, s: usize) -> Vec<u16> {
        let all: BTreeSet<u16> = self
            .clients
            .iter()
            .filter_map(|c| c.published.get(&s))
            .flatten()
            .copied()
            .collect();
        all.into_iter().collect()
    }

    fn pick(&mut self, n: usize) -> usize {
        self.rng.below(n as u64) as usize
    }

    /// A client with a connection, connecting one when none has.
    async fn connected_client(&mut self) -> usize {
        let with: Vec<usize> = (0..CLIENTS)
            .filter(|c| self.clients[*c].connection.is_some())
            .collect();
        if !with.is_empty() {
            return with[self.pick(with.len())];
        }
        let c = self.pick(CLIENTS);
        self.reconnect(c, None).await;
        c
    }

    /// Sends `payload` on client `c`'s connection; anything but a 200 of
    /// type `answer` fails the run.
    async fn send(&mut self, c: usize, payload: Payload, answer: &str) {
        let conn = self.clients[c].connection.as_ref().expect("connected");
        let node = conn.node;
        let reply = tokio::time::timeout(Duration::from_secs(5), conn.raw.try_call(payload)).await;
        let ok = match &reply {
            Ok(Ok(p)) => {
                let v: serde_json::Value = serde_json::from_slice(p.json()).unwrap_or_default();
                p.type_name() == answer && v["resultCode"] == 200
            }
            _ => false,
        };
        if !ok {
            let got = match reply {
                Ok(Ok(p)) => format!("{} {}", p.type_name(), String::from_utf8_lossy(p.json())),
                Ok(Err(status)) => format!("{status:?}"),
                Err(_) => "no answer within 5 s".to_owned(),
            };
            self.fail(&format!(
                "client {c} on node {node}: expected {answer}, got {got}"
            ));
        }
    }

    async fn register(&mut self, c: usize, s: usize, port: u16, redo: bool) {
        let req = InstanceRequest {
            naming: naming(SERVICES[s]),
            r#type: Some("registerInstance".into()),
            instance: Some(instance(port)),
            ..InstanceRequest::default()
        };
        self.send(c, Payload::of(&req), "InstanceResponse").await;
        if !redo {
            self.clients[c].published.entry(s).or_default().insert(port);
        }
    }

    async fn deregister(&mut self, c: usize, s: usize, port: u16) {
        let req = InstanceRequest {
            naming: naming(SERVICES[s]),
            r#type: Some("deregisterInstance".into()),
            instance: Some(instance(port)),
            ..InstanceRequest::default()
        };
        self.send(c, Payload::of(&req), "InstanceResponse").await;
        if let Some(set) = self.clients[c].published.get_mut(&s) {
            set.remove(&port);
        }
    }

    /// A batch replaces the connection's instances of the service.
    async fn batch(&mut self, c: usize, s: usize, ports: BTreeSet<u16>) {
        let req = BatchInstanceRequest {
            naming: naming(SERVICES[s]),
            r#type: Some("batchRegisterInstance".into()),
            instances: Some(ports.iter().map(|p| instance(*p)).collect()),
            ..BatchInstanceRequest::default()
        };
        self.send(c, Payload::of(&req), "BatchInstanceResponse")
            .await;
        self.clients[c].published.insert(s, ports);
    }

    /// Closes client `c`'s connection (if any), connects it to a live node
    /// other than its last (or `to`), and redoes what it published: per
    /// service a batch or one registration per instance, as the real
    /// clients do depending on how they registered.
    async fn reconnect(&mut self, c: usize, to: Option<usize>) {
        let old = self.clients[c].connection.take();
        let from = old.as_ref().map(|o| o.node);
        if let Some(o) = old {
            o.close();
        }
        let node = to.unwrap_or_else(|| {
            let others: Vec<usize> = (0..3)
                .filter(|n| Some(*n) != from && Some(*n) != self.down)
                .collect();
            others[self.pick(others.len())]
        });
        let addr = self.cluster.nodes[node].grpc;
        let raw = Raw::connect(addr).await;
        let keeper = raw.set_up().await.keep_alive();
        self.clients[c].connection = Some(Connection { node, raw, keeper });
        let published: Vec<(usize, BTreeSet<u16>)> = self.clients[c]
            .published
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(s, p)| (*s, p.clone()))
            .collect();
        let batched = self.rng.below(2) == 0;
        for (s, ports) in &published {
            if batched {
                self.batch(c, *s, ports.clone()).await;
            } else {
                for p in ports {
                    self.register(c, *s, *p, true).await;
                }
            }
        }
        self.note(format!(
            "client {c} reconnected {from:?} -> node {node}, redo {published:?} {}",
            if batched { "by batch" } else { "one by one" }
        ));
    }

    /// `kill -9` of a node: each client on it redoes on a survivor or gives
    /// up (what it published must leave every node within the grace); half
    /// the time the survivors must converge while it is down; the node is
    /// restarted and rejoins.
    async fn restart(&mut self, n: usize) {
        self.cluster.nodes[n].kill9().await;
        self.down = Some(n);
        self.last_disruption = Some(Instant::now());
        self.restarts += 1;
        self.note(format!("kill -9 node {n}"));
        for c in 0..CLIENTS {
            if self.clients[c].connection.as_ref().map(|x| x.node) != Some(n) {
                continue;
            }
            let dead = self.clients[c].connection.take().expect("on the dead node");
            dead.close();
            if self.rng.below(10) < 7 {
                let survivors: Vec<usize> = (0..3).filter(|x| *x != n).collect();
                let to = survivors[self.pick(survivors.len())];
                self.reconnect(c, Some(to)).await;
            } else {
                self.clients[c].published.clear();
                self.note(format!("client {c} does not come back"));
            }
        }
        if self.rng.below(2) == 0 {
            self.settle().await;
        }
        self.cluster.nodes[n].restart().await;
        self.down = None;
        self.cluster.until_all_up(Duration::from_secs(20)).await;
        self.last_disruption = Some(Instant::now());
        self.note(format!("node {n} restarted, all UP"));
    }

    /// Waits until every node lists every service as the model says; fails
    /// after the bound.
    async fn settle(&mut self) {
        let recent_kill = self
            .last_disruption
            .is_some_and(|k| k.elapsed() < SETTLE_AFTER_KILL);
        let limit = if recent_kill {
            SETTLE_AFTER_KILL
        } else {
            SETTLE
        };
        let expected: Vec<Vec<u16>> = (0..SERVICES.len()).map(|s| self.expected(s)).collect();
        let started = Instant::now();
        loop {
            let lists = self.lists().await;
            if lists.iter().all(|(_, node)| *node == expected) {
                self.note(format!("settled in {:?}: {expected:?}", started.elapsed()));
                return;
            }
            if started.elapsed() > limit {
                let mut s =
                    format!("not equal to the model within {limit:?}\nmodel: {expected:?}\n");
                for (i, l) in &lists {
                    let _ = writeln!(s, "node {i} lists: {l:?}");
                }
                self.fail(&s);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// What each running node lists over 1.x HTTP, per service (`[65535]`
    /// when it does not answer).
    async fn lists(&self) -> Vec<(usize, Vec<Vec<u16>>)> {
        let mut out = Vec::new();
        for (i, node) in self.cluster.nodes.iter().enumerate() {
            if Some(i) == self.down {
                continue;
            }
            let mut per = Vec::new();
            for svc in SERVICES {
                per.push(node.ports(svc).await.unwrap_or_else(|| vec![u16::MAX]));
            }
            out.push((i, per));
        }
        out
    }

    /// One random step of the schedule.
    async fn step(&mut self) {
        let roll = self.rng.below(100);
        match roll {
            0..=29 => {
                let c = self.connected_client().await;
                let s = self.pick(SERVICES.len());
                let port = port_of(c, self.rng.below(PORTS_PER_CLIENT.into()) as u16);
                self.register(c, s, port, false).await;
                self.note(format!("client {c} registers {} {port}", SERVICES[s]));
            }
            30..=44 => {
                let c = self.connected_client().await;
                let s = self.pick(SERVICES.len());
                let mine: Vec<u16> = self.clients[c]
                    .published
                    .get(&s)
                    .map(|p| p.iter().copied().collect())
                    .unwrap_or_default();
                let port = match mine.len() {
                    0 => port_of(c, 0),
                    n => mine[self.pick(n)],
                };
                self.deregister(c, s, port).await;
                self.note(format!("client {c} deregisters {} {port}", SERVICES[s]));
            }
            45..=56 => {
                let c = self.connected_client().await;
                let s = self.pick(SERVICES.len());
                let ports: BTreeSet<u16> = (0..PORTS_PER_CLIENT)
                    .filter(|_| self.rng.below(2) == 0)
                    .map(|k| port_of(c, k))
                    .collect();
                let ports = if ports.is_empty() {
                    BTreeSet::from([port_of(c, 1)])
                } else {
                    ports
                };
                self.note(format!("client {c} batch {} {ports:?}", SERVICES[s]));
                self.batch(c, s, ports).await;
            }
            57..=64 => {
                let c = self.connected_client().await;
                let conn = self.clients[c].connection.take().expect("connected");
                let node = conn.node;
                conn.close();
                self.clients[c].published.clear();
                self.note(format!("client {c} drops its connection to node {node}"));
            }
            65..=74 => {
                let c = self.pick(CLIENTS);
                self.reconnect(c, None).await;
            }
            75..=89 => self.settle().await,
            _ => tokio::time::sleep(Duration::from_millis(self.rng.below(100))).await,
        }
    }

    /// At the end: every node's 2.x answer (a query on a fresh connection
    /// to it) equals the model too.
    async fn check_grpc_lists(&mut self) {
        for n in 0..3 {
            let raw = Raw::connect(self.cluster.nodes[n].grpc).await;
            let _keeper = raw.set_up().await.keep_alive();
            for (s, svc) in SERVICES.iter().enumerate() {
                let q = ServiceQueryRequest {
                    naming: naming(svc),
                    ..ServiceQueryRequest::default()
                };
                let p = raw.call(Payload::of(&q)).await;
                let v: serde_json::Value = serde_json::from_slice(p.json()).unwrap_or_default();
                let mut got: Vec<u16> = v["serviceInfo"]["hosts"]
                    .as_array()
                    .map(|h| {
                        h.iter()
                            .map(|h| h["port"].as_u64().unwrap_or(0) as u16)
                            .collect()
                    })
                    .unwrap_or_default();
                got.sort_unstable();
                let want = self.expected(s);
                if got != want {
                    self.fail(&format!(
                        "node {n} answers a 2.x query of {svc} with {got:?}, the model is {want:?}"
                    ));
                }
            }
        }
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_grpc_clients_drops_and_restarts_converge_to_the_model() {
    let seed = env_number("GRPC_CLUSTER_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1
    });
    let ops = env_number("GRPC_CLUSTER_OPS").unwrap_or(80);
    let max_restarts = env_number("GRPC_CLUSTER_RESTARTS").unwrap_or(2) as usize;
    println!(
        "GRPC_CLUSTER_SEED={seed} GRPC_CLUSTER_OPS={ops} GRPC_CLUSTER_RESTARTS={max_restarts}"
    );
    let cluster = TestCluster::start(3, FLAGS).await;
    let mut run = Run {
        seed,
        rng: Rng(seed),
        cluster,
        clients: (0..CLIENTS).map(|_| Client::default()).collect(),
        history: Vec::new(),
        started: Instant::now(),
        last_disruption: None,
        restarts: 0,
        down: None,
    };
    // Every client starts on a node of its own (round robin).
    for c in 0..CLIENTS {
        run.reconnect(c, Some(c % 3)).await;
    }
    // The restarts fall at random steps of the schedule.
    let restart_at: BTreeSet<u64> = (0..max_restarts)
        .map(|_| run.rng.below(ops.max(1)))
        .collect();
    for step in 0..ops {
        if restart_at.contains(&step) {
            let n = run.pick(3);
            run.restart(n).await;
        }
        run.step().await;
    }
    run.settle().await;
    run.check_grpc_lists().await;
    for (i, n) in run.cluster.nodes.iter().enumerate() {
        let oversize = n.metric("registry_cluster_oversize_total").await;
        if oversize != 0.0 {
            run.fail(&format!("node {i} skipped {oversize} states as too large"));
        }
    }
    println!(
        "{ops} steps, {} restarts, {:?}; history:\n  {}",
        run.restarts,
        run.started.elapsed(),
        run.history.join("\n  ")
    );
    for c in run.clients {
        if let Some(conn) = c.connection {
            conn.close();
        }
    }
}
