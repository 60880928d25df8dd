//! Persistent data replicated by Raft across real `registry` processes on
//! loopback, each with its own `--data-dir`: no acknowledged write lost when
//! the leader is `kill -9`ed mid-storm, catch-up after a restart, a wiped
//! node restored by snapshot, and a node cut off from the majority refusing
//! writes.
//!
//! Timings are scaled down by flags (election timeout 800 ms, heartbeat
//! 100 ms); every cross-process condition is polled with a bounded deadline.
//! On a loaded machine a missed heartbeat can start an election: sequential
//! writes retry a 503 as a client would ([`write_acknowledged`]).

use crate::binary;
use crate::cluster_support;
use crate::grpc_client;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_support::{start_raft_nodes, until, Node};
use registry_proto::http1::Method;

const SECOND: Duration = Duration::from_secs(1);

/// A Raft cluster: real processes, one data directory each.
struct RaftCluster {
    nodes: Vec<Node>,
    dirs: Vec<PathBuf>,
    _dir: tempfile::TempDir,
}

impl RaftCluster {
    async fn start(n: usize, extra: &[&str]) -> RaftCluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let (nodes, dirs) = start_raft_nodes(dir.path(), n, extra).await;
        let c = RaftCluster {
            nodes,
            dirs,
            _dir: dir,
        };
        c.until_leader(&[0, 1, 2][..n], 45 * SECOND).await;
        c.until_ready(&[0, 1, 2][..n], 45 * SECOND).await;
        c
    }

    /// Waits until the nodes serve clients (Distro snapshot and Raft state loaded).
    async fn until_ready(&self, which: &[usize], limit: Duration) {
        let started = Instant::now();
        loop {
            let mut waiting = Vec::new();
            for &i in which {
                if !self.nodes[i].ready().await {
                    waiting.push(i);
                }
            }
            if waiting.is_empty() {
                return;
            }
            assert!(
                started.elapsed() < limit,
                "nodes {waiting:?} not ready within {limit:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The index of the node that says it is the leader, among `alive`.
    async fn leader(&self, alive: &[usize]) -> Option<usize> {
        for &i in alive {
            if self.nodes[i].raft_role().await.as_deref() == Some("LEADER") {
                return Some(i);
            }
        }
        None
    }

    async fn until_leader(&self, alive: &[usize], limit: Duration) -> usize {
        let found = Arc::new(Mutex::new(None));
        until(limit, "a Raft leader among the live nodes", || {
            let found = found.clone();
            async move {
                let l = self.leader(alive).await;
                *found.lock().unwrap() = l;
                l.is_some()
            }
        })
        .await;
        let l = *found.lock().unwrap();
        l.expect("leader")
    }

    fn logs(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("--- node {i} ({}) ---\n{}", n.addr, tail(&n.log_text(), 60)))
            .collect()
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A write through `node`, retried (as a client moves on after a 503)
/// while the cluster has no leader for a moment: on a loaded machine a
/// missed heartbeat can start an election. Panics unless acknowledged
/// within 10 s.
async fn write_acknowledged(c: &RaftCluster, node: usize, target: &str) {
    let started = Instant::now();
    loop {
        match c.nodes[node].try_call(Method::Post, target).await {
            Some((200, body)) if body == "ok" => return,
            Some((503, _)) | None if started.elapsed() < 10 * SECOND => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("{target} through node {node}: {other:?}\n{}", c.logs()),
        }
    }
}

fn register_target(service: &str, port: u16) -> String {
    format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.0.0.1&port={port}&ephemeral=false")
}

/// Persistent ports of `service` on `node`, `None` when it does not answer.
async fn ports(node: &Node, service: &str) -> Option<BTreeSet<u16>> {
    node.ports(service).await.map(|v| v.into_iter().collect())
}

/// Waits until every node in `which` lists exactly `expected` for `service`.
async fn until_lists(
    c: &RaftCluster,
    which: &[usize],
    service: &str,
    expected: &BTreeSet<u16>,
    limit: Duration,
) {
    let started = Instant::now();
    loop {
        let mut all = true;
        for &i in which {
            if ports(&c.nodes[i], service).await.as_ref() != Some(expected) {
                all = false;
                break;
            }
        }
        if all {
            return;
        }
        if started.elapsed() > limit {
            let mut seen = String::new();
            for &i in which {
                let p = ports(&c.nodes[i], service).await;
                seen += &format!(
                    "node {i}: {:?} (missing {:?})\n",
                    p.as_ref().map(BTreeSet::len),
                    p.map(|p| expected.difference(&p).copied().collect::<Vec<_>>())
                );
            }
            panic!(
                "{service}: nodes {which:?} do not list the {} expected instances within {limit:?}\n{seen}{}",
                expected.len(),
                c.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Registers persistent instances of `service` through random live nodes
/// from `writers` tasks until `stop`; returns the acknowledged ports and
/// when the first acknowledgement after `mark` came.
struct Storm {
    acked: Arc<Mutex<BTreeSet<u16>>>,
    acks_at: Arc<Mutex<Vec<Instant>>>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn storm(
    addrs: Vec<std::net::SocketAddr>,
    alive: Arc<Mutex<Vec<usize>>>,
    service: &str,
    writers: u16,
) -> Storm {
    let acked = Arc::new(Mutex::new(BTreeSet::new()));
    let acks_at = Arc::new(Mutex::new(Vec::new()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (acked, acks_at, alive, addrs) =
            (acked.clone(), acks_at.clone(), alive.clone(), addrs.clone());
        let stopped = stopped.clone();
        let service = service.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut n: u16 = 0;
            let mut pick = w as usize;
            while !*stopped.borrow() {
                let port = 10_000 + w * 2_000 + n;
                n += 1;
                let live = alive.lock().unwrap().clone();
                pick = pick.wrapping_mul(31).wrapping_add(7);
                let addr = addrs[live[pick % live.len()]];
                let Ok(Ok(mut conn)) = tokio::time::timeout(SECOND, binary::Conn::open(addr)).await
                else {
                    continue;
                };
                let answer = tokio::time::timeout(
                    4 * SECOND,
                    conn.call(Method::Post, &register_target(&service, port)),
                )
                .await;
                if let Ok(Ok((200, body))) = answer {
                    assert_eq!(body, "ok");
                    acked.lock().unwrap().insert(port);
                    acks_at.lock().unwrap().push(Instant::now());
                }
            }
        }));
    }
    Storm {
        acked,
        acks_at,
        stop,
        tasks,
    }
}

impl Storm {
    async fn until_acked(&self, n: usize, limit: Duration, what: &str) {
        until(limit, what, || async {
            self.acked.lock().unwrap().len() >= n
        })
        .await;
    }

    async fn finish(self) -> BTreeSet<u16> {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        let acked = self.acked.lock().unwrap().clone();
        acked
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_mid_storm_loses_no_acknowledged_write_and_restart_catches_up() {
    let mut c = RaftCluster::start(3, &[]).await;
    let addrs: Vec<_> = c.nodes.iter().map(|n| n.addr).collect();
    let alive = Arc::new(Mutex::new(vec![0, 1, 2]));
    let service = "storm";
    let s = storm(addrs, alive.clone(), service, 6);
    s.until_acked(150, 30 * SECOND, "150 writes acknowledged before the kill")
        .await;

    let leader = c.until_leader(&[0, 1, 2], 5 * SECOND).await;
    let survivors: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    *alive.lock().unwrap() = survivors.clone();
    let killed_at = Instant::now();
    c.nodes[leader].kill9().await;
    let before = s.acked.lock().unwrap().len();
    s.until_acked(
        before + 150,
        20 * SECOND,
        "150 more writes acknowledged after the kill",
    )
    .await;
    let resumed = s
        .acks_at
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|t| *t > killed_at + Duration::from_millis(50))
        .min()
        .map(|t| t - killed_at);
    let new_leader = c.until_leader(&survivors, 5 * SECOND).await;
    assert_ne!(new_leader, leader);
    let acked = s.finish().await;
    println!(
        "killed leader node {leader}; first acknowledged write after the kill: {resumed:?}; {} acknowledged in all",
        acked.len()
    );

    // Every acknowledged write is on both survivors (more may be: a write
    // whose answer was lost with the leader may still have committed).
    let started = Instant::now();
    loop {
        let mut ok = true;
        for &i in &survivors {
            match ports(&c.nodes[i], service).await {
                Some(p) if acked.is_subset(&p) => {}
                _ => ok = false,
            }
        }
        if ok {
            break;
        }
        if started.elapsed() > 10 * SECOND {
            for &i in &survivors {
                let p = ports(&c.nodes[i], service).await.unwrap_or_default();
                println!(
                    "node {i} misses {:?}",
                    acked.difference(&p).collect::<Vec<_>>()
                );
            }
            panic!("acknowledged writes missing on a survivor\n{}", c.logs());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let on_survivor = ports(&c.nodes[survivors[0]], service).await.expect("list");
    until_lists(&c, &survivors, service, &on_survivor, 10 * SECOND).await;

    // The killed node restarts from its own disk, catches up, and serves
    // the same list.
    c.nodes[leader].restart().await;
    until_lists(&c, &[0, 1, 2], service, &on_survivor, 20 * SECOND).await;

    // Writes through the restarted node go to the leader and reach everyone.
    write_acknowledged(&c, leader, &register_target(service, 9_999)).await;
    let mut expected = on_survivor.clone();
    expected.insert(9_999);
    until_lists(&c, &[0, 1, 2], service, &expected, 10 * SECOND).await;
    // Every node shows every member's Raft role; one leader.
    let mut leaders = 0;
    for n in &c.nodes {
        if n.raft_role().await.as_deref() == Some("LEADER") {
            leaders += 1;
        }
    }
    assert_eq!(leaders, 1, "{}", c.logs());
    assert!(
        c.nodes[new_leader]
            .metric("registry_raft_leader_changes_total")
            .await
            >= 1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_node_comes_back_by_snapshot() {
    let mut c = RaftCluster::start(3, &["--raft-snapshot-logs", "20"]).await;
    let service = "wiped";
    let mut expected = BTreeSet::new();
    // One entry per write (sequential): enough entries for several
    // snapshots and a compacted log.
    for port in 1..=80u16 {
        write_acknowledged(&c, port as usize % 3, &register_target(service, port)).await;
        expected.insert(port);
    }
    // A service created explicitly travels in the snapshot too.
    let (status, _) = c.nodes[0]
        .call(
            Method::Post,
            "/nacos/v1/ns/service?serviceName=explicit&protectThreshold=0.5",
        )
        .await;
    assert_eq!(status, 200);
    until_lists(&c, &[0, 1, 2], service, &expected, 10 * SECOND).await;
    let leader = c.until_leader(&[0, 1, 2], 5 * SECOND).await;
    let victim = (leader + 1) % 3;
    // Killed, wiped and restarted at once: the leader still holds the
    // victim's replication state ("matched up to the last entry") when the
    // node comes back under the same id (a hash of its address) with an
    // empty log. Taking part as that voter is openraft's follower log
    // reversion (its engine stops: `Fatal: panicked`) and a voter that lost
    // its log and vote; the node must rejoin as a learner instead.
    c.nodes[victim].kill9().await;
    wipe(&c.dirs[victim]);
    c.nodes[victim].restart().await;
    c.until_ready(&[victim], 45 * SECOND).await;
    assert!(
        c.nodes[victim]
            .log_text()
            .contains("the leader removed this node's old id"),
        "the wiped node did not rejoin as a new learner\n{}",
        c.logs()
    );
    until_lists(&c, &[victim], service, &expected, 20 * SECOND).await;
    until(10 * SECOND, "the explicit service on the wiped node", || async {
        matches!(
            c.nodes[victim].try_call(Method::Get, "/nacos/v1/ns/service?serviceName=explicit").await,
            Some((200, body)) if body.contains("0.5")
        )
    })
    .await;
    assert!(
        c.nodes[victim]
            .metric("registry_raft_snapshots_installed_total")
            .await
            >= 1.0,
        "the wiped node caught up without a snapshot\n{}",
        c.logs()
    );
    // The leader may have changed meanwhile: some node sent it.
    let mut sent = 0.0;
    for n in &c.nodes {
        sent += n.metric("registry_raft_snapshot_chunks_sent_total").await;
    }
    assert!(sent >= 1.0, "no snapshot chunk sent\n{}", c.logs());
    // A voter again, and it keeps taking part: writes through every node,
    // the rejoined one included, are acknowledged and on every node.
    until(
        20 * SECOND,
        "the rejoined node is a voter again",
        || async {
            c.nodes[victim].raft_role().await.as_deref() == Some("FOLLOWER")
                || c.nodes[victim].raft_role().await.as_deref() == Some("LEADER")
        },
    )
    .await;
    for port in 81..=100u16 {
        write_acknowledged(&c, port as usize % 3, &register_target(service, port)).await;
        expected.insert(port);
    }
    until_lists(&c, &[0, 1, 2], service, &expected, 10 * SECOND).await;
    for (i, n) in c.nodes.iter().enumerate() {
        let log = n.log_text();
        assert!(
            !log.contains("panicked") && !log.contains("log reversion"),
            "node {i}'s Raft engine stopped\n{}",
            c.logs()
        );
    }
}

fn wipe(dir: &Path) {
    std::fs::remove_dir_all(dir).expect("wipe the data directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_keeps_writing_and_a_node_alone_refuses() {
    let c = RaftCluster::start(3, &[]).await;
    let service = "split";
    let leader = c.until_leader(&[0, 1, 2], 5 * SECOND).await;
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();

    // One follower frozen: the other two are a majority and keep writing.
    c.nodes[followers[0]].signal("STOP");
    let mut expected = BTreeSet::new();
    for port in 1..=10u16 {
        let via = if port % 2 == 0 { leader } else { followers[1] };
        write_acknowledged(&c, via, &register_target(service, port)).await;
        expected.insert(port);
    }
    until_lists(&c, &[leader, followers[1]], service, &expected, 5 * SECOND).await;

    // The second live node frozen too: the one left alone cannot commit and
    // says so (the leader's write times out; a follower has no leader).
    let alone = c.until_leader(&[leader, followers[1]], 10 * SECOND).await;
    let other = if alone == leader {
        followers[1]
    } else {
        leader
    };
    c.nodes[other].signal("STOP");
    let (status, body) = c.nodes[alone]
        .call(Method::Post, &register_target(service, 500))
        .await;
    c.nodes[followers[0]].signal("CONT");
    c.nodes[other].signal("CONT");
    assert_eq!(status, 503, "a lone node acknowledged a write: {body}");
    assert!(
        body.contains("majority")
            && (body.contains("not acknowledged") || body.contains("not applied")),
        "unclear refusal: {body}"
    );

    // Back together: writes are accepted again and every node converges
    // (a node back from a freeze reloads Distro's replica before it serves).
    c.until_ready(&[0, 1, 2], 10 * SECOND).await;
    // The thawed followers may start an election first: retry (a client
    // moves on after a 503 too) until the write is acknowledged.
    let node = &c.nodes[followers[0]];
    until(
        10 * SECOND,
        "a write acknowledged after the thaw",
        || async {
            node.try_call(Method::Post, &register_target(service, 11))
                .await
                == Some((200, "ok".to_owned()))
        },
    )
    .await;
    expected.insert(11);
    // The refused write was never acknowledged; it may still commit once
    // the leader reaches a majority again (as any timed-out request may).
    let with_refused: BTreeSet<u16> = {
        let mut e = expected.clone();
        e.insert(500);
        e
    };
    let started = Instant::now();
    loop {
        let lists = [
            ports(&c.nodes[0], service).await,
            ports(&c.nodes[1], service).await,
            ports(&c.nodes[2], service).await,
        ];
        let same = lists.iter().all(|l| l.is_some() && *l == lists[0]);
        let l0 = lists[0].clone().unwrap_or_default();
        if same && (l0 == expected || l0 == with_refused) {
            break;
        }
        assert!(
            started.elapsed() < 10 * SECOND,
            "no convergence: {lists:?}\n{}",
            c.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_registers_persistent_instances_through_a_leader_kill() {
    let compat = std::env::var_os("NACOS_COMPAT_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/compat"),
        PathBuf::from,
    );
    let python = compat.join("venv/bin/python");
    assert!(
        python.exists(),
        "nacos-sdk-python not found at {}: run scripts/deps/clients.sh",
        python.display()
    );
    let mut c = RaftCluster::start(3, &[]).await;
    let members = c
        .nodes
        .iter()
        .map(|n| n.addr.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/compat/python_raft.py");
    let client = tokio::process::Command::new(python)
        .arg(script)
        .arg(&members)
        .arg("8")
        .kill_on_drop(true)
        .output();
    let client = tokio::spawn(client);
    tokio::time::sleep(2 * SECOND).await;
    let leader = c.until_leader(&[0, 1, 2], 5 * SECOND).await;
    c.nodes[leader].kill9().await;
    tokio::time::sleep(2 * SECOND).await;
    c.nodes[leader].restart().await;
    let out = tokio::time::timeout(120 * SECOND, client)
        .await
        .expect("client finished")
        .expect("client task")
        .expect("client ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("python raft: all checks passed"),
        "client failed ({}):\n{stdout}\n{}\nleader was node {leader}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        c.logs()
    );
    println!("{stdout}");
    // Every node, the restarted one included, ends with the same list.
    c.until_ready(&[0, 1, 2], 45 * SECOND).await;
    let reference = ports(&c.nodes[(leader + 1) % 3], "py-raft")
        .await
        .expect("list");
    until_lists(&c, &[0, 1, 2], "py-raft", &reference, 20 * SECOND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_persistent_instances_go_through_raft_from_any_node() {
    use registry_proto::grpc::message::{
        InstanceResponse, NamingHead, PersistentInstanceRequest, WireInstance,
    };
    use registry_proto::grpc::{Message as _, Payload};
    let c = RaftCluster::start(3, &[]).await;
    let leader = c.until_leader(&[0, 1, 2], 5 * SECOND).await;
    let follower = (leader + 1) % 3;
    let request = |kind: &str, port: i64| PersistentInstanceRequest {
        naming: NamingHead {
            namespace: Some("public".into()),
            service_name: Some("grpc-raft".into()),
            group_name: Some("DEFAULT_GROUP".into()),
        },
        r#type: Some(kind.into()),
        instance: Some(WireInstance {
            ip: Some("127.0.0.1".into()),
            port: Some(port),
            ephemeral: Some(false),
            ..WireInstance::default()
        }),
        ..PersistentInstanceRequest::default()
    };
    // Retried while an election runs (a missed heartbeat on a loaded
    // machine), as a client would; an error answer names why.
    let acknowledged = |via: usize, kind: &'static str, port: i64| {
        let addr = c.nodes[via].grpc;
        let body = request(kind, port);
        async move {
            let client = grpc_client::Raw::connect(addr).await;
            let _stream = client.set_up().await;
            let started = Instant::now();
            loop {
                let p = client.call(Payload::of(&body)).await;
                if p.type_name() == InstanceResponse::TYPE {
                    return;
                }
                assert!(
                    started.elapsed() < 10 * SECOND,
                    "{kind} {port}: {}",
                    String::from_utf8_lossy(p.json())
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    // Through a follower (relayed to the leader) and through the leader.
    acknowledged(follower, "registerInstance", 7001).await;
    acknowledged(leader, "registerInstance", 7002).await;
    let expected: BTreeSet<u16> = [7001, 7002].into_iter().collect();
    until_lists(&c, &[0, 1, 2], "grpc-raft", &expected, 10 * SECOND).await;
    acknowledged(follower, "deregisterInstance", 7001).await;
    let expected: BTreeSet<u16> = [7002].into_iter().collect();
    until_lists(&c, &[0, 1, 2], "grpc-raft", &expected, 10 * SECOND).await;
}

/// The operator's layer over a persistent instance travels in the Raft log
/// (Nacos keeps instance metadata in its CP group): edited through a
/// follower, every node lays it over the instance, and the client's next
/// registration (weight 1 again) keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_layer_is_logged_and_outlives_a_re_register() {
    let c = RaftCluster::start(3, &[]).await;
    let leader = c.until_leader(&[0, 1, 2], 10 * SECOND).await;
    let follower = (leader + 1) % 3;
    let register = register_target("raft-layer", 7500);
    write_acknowledged(&c, leader, &register).await;
    let edit = "/nacos/v3/admin/ns/instance?serviceName=raft-layer&ip=127.0.0.1&port=7500\
                &ephemeral=false&weight=3&enabled=false";
    let started = Instant::now();
    loop {
        match c.nodes[follower].try_call(Method::Put, edit).await {
            Some((200, _)) => break,
            // The register is acknowledged once the leader applied it; the
            // follower checks the service against its own store, which may
            // not have applied the entry yet (21004 until it has).
            Some((400, body)) if body.contains("21004") && started.elapsed() < 10 * SECOND => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Some((503, _)) | None if started.elapsed() < 10 * SECOND => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("edit through node {follower}: {other:?}\n{}", c.logs()),
        }
    }
    write_acknowledged(&c, (leader + 2) % 3, &register).await;
    until(10 * SECOND, "every node lays the logged layer", || async {
        for n in &c.nodes {
            if !layered(n).await {
                return false;
            }
        }
        true
    })
    .await;
}

/// Whether `node` reads 127.0.0.1:7500 of `raft-layer` with the layer of
/// weight 3, disabled.
async fn layered(node: &Node) -> bool {
    let target = "/nacos/v3/admin/ns/instance?serviceName=raft-layer&ip=127.0.0.1&port=7500\
                  &ephemeral=false";
    let Some((200, body)) = node.try_call(Method::Get, target).await else {
        return false;
    };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["weight"] == 3.0 && v["data"]["enabled"] == false
}
