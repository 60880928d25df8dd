//! A randomised Raft test with in-process nodes (three embedded registries,
//! each on its own runtime and data directory): random persistent
//! registrations and deregistrations through random nodes, interleaved with
//! node stops and restarts. Afterwards every node holds exactly what the
//! acknowledged writes say: each instance whose last acknowledged write was
//! a registration is listed everywhere, and no node lists one whose last
//! acknowledged write was a deregistration, or one that was never
//! acknowledged at all. A write refused with "was not applied" changes
//! nothing; one that failed ambiguously (timed out: it may have committed)
//! leaves its instance unknown until the next acknowledged write to it.
//!
//! `RAFT_SEED=<n>` replays a run; the seed is printed.

use crate::cluster_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use registry_server::{Config, Embedded};

const SERVICE: &str = "random";
const PORTS: u64 = 24;
const OPERATIONS: usize = 60;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One blocking request on a fresh connection: status and body, or `None`.
fn call(addr: SocketAddr, method: &str, target: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(4))).ok()?;
    let req = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

fn ports(addr: SocketAddr) -> Option<BTreeSet<u16>> {
    let (status, body) = call(
        addr,
        "GET",
        &format!("/nacos/v1/ns/instance/list?serviceName={SERVICE}"),
    )?;
    if status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    Some(
        v["hosts"]
            .as_array()?
            .iter()
            .map(|h| h["port"].as_u64().unwrap_or(0) as u16)
            .collect(),
    )
}

fn config(addr: SocketAddr, members: &str, dir: &std::path::Path) -> Config {
    let mut c = Config::for_test();
    c.listen = addr;
    c.members = members.split(',').map(str::to_owned).collect();
    c.data_dir = Some(dir.to_path_buf());
    c.workers = 1;
    c.cluster_probe_interval_ms = 200;
    c.cluster_relay_timeout_ms = 1_000;
    c.distro_verify_interval_ms = 500;
    c.raft_election_timeout_ms = 500;
    c.raft_heartbeat_ms = 100;
    c.raft_write_timeout_ms = 2_000;
    c.raft_snapshot_logs = 16;
    c.shutdown_grace_ms = 1_000;
    c
}

fn start(addr: SocketAddr, members: &str, dir: &std::path::Path) -> Embedded {
    // The port was just released by the previous life; retry briefly.
    let started = Instant::now();
    loop {
        match Embedded::start(config(addr, members, dir)) {
            Ok(e) => return e,
            Err(e) if started.elapsed() < Duration::from_secs(10) => {
                eprintln!("restart of {addr} failed ({e:#}), retrying");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("cannot restart {addr}: {e:#}"),
        }
    }
}

/// Waits until every node in `live` is ready and one of them leads.
fn until_serving(addrs: &[SocketAddr], live: &[usize]) {
    let started = Instant::now();
    loop {
        let ready = live.iter().all(|i| {
            matches!(
                call(addrs[*i], "GET", "/nacos/v1/console/health/readiness"),
                Some((200, _))
            )
        });
        let leader = live.iter().any(|i| {
            call(addrs[*i], "GET", "/nacos/v1/core/cluster/nodes").is_some_and(|(_, body)| {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                let me = addrs[*i].to_string();
                v["data"].as_array().is_some_and(|a| {
                    a.iter().any(|m| {
                        m["address"].as_str() == Some(&me)
                            && m["extendInfo"]["raftRole"].as_str() == Some("LEADER")
                    })
                })
            })
        });
        if ready && leader {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nodes {live:?} not serving with a leader"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the model knows of one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    Present,
    Absent,
    /// A write to it failed ambiguously since the last acknowledged one.
    Unknown,
}

#[test]
fn random_writes_stops_and_restarts_keep_every_acknowledged_write() {
    let seed = std::env::var("RAFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("RAFT_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let addrs = cluster_support::free_addrs(3);
    let members = addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let dirs: Vec<_> = (0..3).map(|i| dir.path().join(format!("n{i}"))).collect();
    let mut nodes: Vec<Option<Embedded>> = (0..3)
        .map(|i| Some(start(addrs[i], &members, &dirs[i])))
        .collect();
    until_serving(&addrs, &[0, 1, 2]);

    let mut model: BTreeMap<u16, Known> = BTreeMap::new();
    let (mut acked, mut refused, mut ambiguous, mut stops) = (0, 0, 0, 0);
    for _ in 0..OPERATIONS {
        let live: Vec<usize> = (0..3).filter(|i| nodes[*i].is_some()).collect();
        let roll = rng.below(100);
        if roll < 10 && live.len() == 3 {
            let victim = rng.below(3) as usize;
            if let Some(n) = nodes[victim].take() {
                n.stop().expect("stop");
                stops += 1;
            }
            continue;
        }
        if roll < 25 && live.len() < 3 {
            let back = (0..3)
                .find(|i| nodes[*i].is_none())
                .expect("a stopped node");
            nodes[back] = Some(start(addrs[back], &members, &dirs[back]));
            until_serving(&addrs, &[0, 1, 2]);
            continue;
        }
        let port = 1 + rng.below(PORTS) as u16;
        let via = live[rng.below(live.len() as u64) as usize];
        let register = rng.below(3) != 0;
        let method = if register { "POST" } else { "DELETE" };
        let target = format!(
            "/nacos/v1/ns/instance?serviceName={SERVICE}&ip=127.0.0.1&port={port}&ephemeral=false"
        );
        match call(addrs[via], method, &target) {
            Some((200, _)) => {
                acked += 1;
                model.insert(
                    port,
                    if register {
                        Known::Present
                    } else {
                        Known::Absent
                    },
                );
            }
            Some((_, body))
                if body.contains("was not applied") || body.contains("server is starting") =>
            {
                refused += 1;
            }
            other => {
                if ambiguous < 5 {
                    println!("ambiguous answer from node {via}: {other:?}");
                }
                ambiguous += 1;
                model.insert(port, Known::Unknown);
            }
        }
    }
    for i in 0..3 {
        if nodes[i].is_none() {
            nodes[i] = Some(start(addrs[i], &members, &dirs[i]));
        }
    }
    println!("acknowledged {acked}, refused {refused}, ambiguous {ambiguous}, stops {stops}");
    // Judged against the writes tried, not OPERATIONS: a seed that stops nodes
    // often tries fewer writes, and a restarted node refuses a burst of them
    // ("server is starting", "was not applied") until Raft has caught it up, so
    // a fixed bound failed one run in six of one seed (29 of 60, 17 refused).
    let tried = acked + refused + ambiguous;
    assert!(
        tried >= OPERATIONS / 2 && acked * 2 >= tried,
        "too few writes acknowledged to mean anything: {acked} of {tried} tried"
    );

    // Quiescence: every node lists the same set, consistent with the model.
    let started = Instant::now();
    let lists = loop {
        let lists: Vec<Option<BTreeSet<u16>>> = addrs.iter().map(|a| ports(*a)).collect();
        let same = lists.iter().all(|l| l.is_some() && *l == lists[0]);
        if same {
            break lists;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nodes do not converge (seed {seed}): {lists:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let listed = lists[0].clone().unwrap_or_default();
    for (port, known) in &model {
        match known {
            Known::Present => assert!(
                listed.contains(port),
                "acknowledged registration of {port} lost (seed {seed}): {listed:?}"
            ),
            Known::Absent => assert!(
                !listed.contains(port),
                "acknowledged deregistration of {port} undone (seed {seed}): {listed:?}"
            ),
            Known::Unknown => {}
        }
    }
    for port in &listed {
        assert!(
            model.contains_key(port),
            "{port} listed but no write to it was ever acknowledged or attempted ambiguously (seed {seed})"
        );
    }
    for n in nodes.into_iter().flatten() {
        n.stop().expect("stop");
    }
}
