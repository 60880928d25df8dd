//! Dynamic membership through the real binaries: `registry members add`
//! and `remove` against a running Raft cluster of real processes. A dead
//! node is replaced by one at a new address with one add and one remove
//! while a writer keeps writing: every acknowledged write is on every member
//! after, the Distro member list follows on every node, and the change
//! survives a restart (the new majority is the new membership, not the
//! configured one). With auth on, the change needs a login. A member
//! added at run time that becomes the leader is reached by the followers'
//! typed writes (gRPC persistent instances), although their start lists
//! never named it.

use crate::binary;
use crate::cluster_support;
use crate::grpc_client;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use binary::Conn;
use cluster_support::{free_addrs, until, Node};
use registry_proto::http1::Method;

const RAFT: &[&str] = &[
    "--raft-election-timeout-ms",
    "800",
    "--raft-heartbeat-ms",
    "100",
    "--raft-write-timeout-ms",
    "2000",
    "--raft-snapshot-logs",
    "50",
    "--health-check-interval-ms",
    "0",
];

fn data_args(dir: &Path, name: &str, join: bool) -> Vec<String> {
    let mut v = vec![
        "--data-dir".to_owned(),
        dir.join(name).to_str().unwrap().to_owned(),
    ];
    v.extend(RAFT.iter().map(|s| s.to_string()));
    if join {
        v.push("--cluster-join".into());
    }
    v
}

async fn start(
    addr: SocketAddr,
    members: &[SocketAddr],
    extra: &[String],
    dir: &Path,
    name: &str,
) -> Node {
    let members: Vec<String> = members.iter().map(|a| a.to_string()).collect();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    Node::start(
        addr,
        &members.join(","),
        &extra,
        &dir.join(format!("{name}.log")),
    )
    .await
}

/// `registry members ARGS`, with `stdin` as its standard input.
async fn members_cli(args: &[&str], stdin: &str) -> std::process::Output {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_registry"))
        .arg("members")
        .args(args)
        .env_remove("REGISTRY_USERNAME")
        .env_remove("REGISTRY_SERVER")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start registry members");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

/// `registry members ARGS` until it is not refused with 503 (at most 30 s):
/// when the node just killed was the Raft leader, a change is answered "no
/// answer from the Raft leader ... may or may not have been made" until the
/// others elect a new one, and an operator runs it again (add and remove are
/// idempotent). Any other answer is returned as it is.
async fn members_cli_retrying(args: &[&str]) -> std::process::Output {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = members_cli(args, "").await;
        let refused = !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("503");
        if !refused || tokio::time::Instant::now() >= deadline {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn show(out: &std::process::Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn register(port: u16) -> String {
    format!("/nacos/v1/ns/instance?serviceName=kept&ip=127.0.0.1&port={port}&ephemeral=false")
}

/// Writes persistent instances one after another through `targets` in
/// turn until `stop`, recording the ports whose write was acknowledged.
/// Registers persistent instances through `targets` in turn until `stop`,
/// recording each acknowledged port with the member that took it.
fn writer(
    targets: Arc<Mutex<Vec<SocketAddr>>>,
    acked: Arc<Mutex<Vec<(u16, SocketAddr)>>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut port = 20_000u16;
        while !stop.load(Ordering::Relaxed) {
            let all = targets.lock().unwrap().clone();
            let target = all[usize::from(port) % all.len()];
            port += 1;
            let answer = tokio::time::timeout(Duration::from_secs(5), async {
                Conn::open(target)
                    .await
                    .ok()?
                    .call(Method::Post, &register(port))
                    .await
                    .ok()
            })
            .await
            .ok()
            .flatten();
            if matches!(&answer, Some((200, b)) if b == "ok") {
                acked.lock().unwrap().push((port, target));
            } else {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    })
}

async fn addresses(node: &Node) -> Vec<String> {
    node.members().await.into_iter().map(|(a, _)| a).collect()
}

fn sorted(addrs: &[SocketAddr]) -> Vec<String> {
    let mut v: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    v.sort();
    v
}

/// Waits until every node in `nodes` lists every port of `acked`.
async fn until_kept(nodes: &[&Node], acked: &[u16]) {
    until(
        Duration::from_secs(30),
        "every acknowledged write on every member",
        || async {
            for n in nodes {
                let Some(have) = n.ports("kept").await else {
                    return false;
                };
                if acked.iter().any(|p| !have.contains(p)) {
                    return false;
                }
            }
            true
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_is_replaced_by_one_add_and_one_remove_losing_no_write() {
    let dir = tempfile::tempdir().unwrap();
    let addrs = free_addrs(4);
    let (a, b, c, d) = (addrs[0], addrs[1], addrs[2], addrs[3]);
    let first = [a, b, c];
    let mut na = start(
        a,
        &first,
        &data_args(dir.path(), "a", false),
        dir.path(),
        "a",
    )
    .await;
    let mut nb = start(
        b,
        &first,
        &data_args(dir.path(), "b", false),
        dir.path(),
        "b",
    )
    .await;
    let mut nc = start(
        c,
        &first,
        &data_args(dir.path(), "c", false),
        dir.path(),
        "c",
    )
    .await;
    until(Duration::from_secs(45), "three members ready", || async {
        na.ready().await && nb.ready().await && nc.ready().await
    })
    .await;

    let targets = Arc::new(Mutex::new(vec![a, b, c]));
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writes = writer(targets.clone(), acked.clone(), stop.clone());
    until(Duration::from_secs(20), "writes flowing", || async {
        na.ports("kept").await.is_some_and(|p| p.len() >= 20)
    })
    .await;

    // C dies for good; D at a new address takes its place.
    nc.kill9().await;
    *targets.lock().unwrap() = vec![a, b];
    let nd = start(
        d,
        &[a, b, d],
        &data_args(dir.path(), "d", true),
        dir.path(),
        "d",
    )
    .await;
    let out = members_cli_retrying(&["add", &d.to_string(), "--server", &a.to_string()]).await;
    assert!(
        out.status.success(),
        "add: {}\n{}",
        show(&out),
        na.log_text()
    );
    *targets.lock().unwrap() = vec![a, b, d];
    let out =
        members_cli_retrying(&["remove", &c.to_string(), "--server", &format!("http://{b}")]).await;
    assert!(out.status.success(), "remove: {}", show(&out));
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        body.contains(&d.to_string()) && !body.contains(&c.to_string()),
        "the membership after the remove: {body}"
    );
    // Writes go on after the change: acknowledged through each member of
    // the new set, D (which joined empty) included.
    let mark = acked.lock().unwrap().len();
    until(
        Duration::from_secs(20),
        "a write acknowledged through each of A, B and D after the change",
        || async {
            let after = acked.lock().unwrap()[mark..].to_vec();
            [a, b, d]
                .iter()
                .all(|m| after.iter().any(|(_, via)| via == m))
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    writes.await.unwrap();
    let acked: Vec<u16> = acked.lock().unwrap().iter().map(|(p, _)| *p).collect();
    assert!(
        acked.len() >= 20,
        "the writer got {} writes through",
        acked.len()
    );
    until_kept(&[&na, &nb, &nd], &acked).await;

    // The Distro member list follows on every node.
    let want = sorted(&[a, b, d]);
    for n in [&na, &nb, &nd] {
        until(
            Duration::from_secs(15),
            "the member list is A, B, D, all UP",
            || async {
                let m = n.members().await;
                m.iter().map(|(x, _)| x.clone()).collect::<Vec<_>>() == want
                    && m.iter().all(|(_, s)| s == "UP")
            },
        )
        .await;
    }

    // Bad requests change nothing.
    let out = members_cli(&["add", "not-an-address", "--server", &a.to_string()], "").await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("address must be"),
        "{}",
        show(&out)
    );
    let out = members_cli(&["remove", &c.to_string(), "--server", &a.to_string()], "").await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a member"),
        "{}",
        show(&out)
    );

    // A restart keeps the new membership although A's flags still name C;
    // with B gone too, A and D are the majority of {A, B, D}.
    na.restart().await;
    until(
        Duration::from_secs(20),
        "A lists A, B, D after its restart",
        || async { addresses(&na).await == want },
    )
    .await;
    nb.kill9().await;
    until(Duration::from_secs(30), "a write acknowledged by A and D alone", || async {
        matches!(na.try_call(Method::Post, &register(19_999)).await, Some((200, b)) if b == "ok")
    })
    .await;
    until_kept(&[&na, &nd], &[19_999]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_a_membership_change_needs_a_login() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let mut add_user = std::process::Command::new(env!("CARGO_BIN_EXE_registry"))
        .args([
            "users",
            "add",
            "ops",
            "--iterations",
            "10000",
            "--file",
            users.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        add_user
            .stdin
            .take()
            .unwrap()
            .write_all(b"opspass\n")
            .unwrap();
    }
    assert!(add_user.wait().unwrap().success());
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "a-cluster-secret-of-some-length").unwrap();
    let auth = |name: &str, join: bool| {
        let mut v = data_args(dir.path(), name, join);
        v.extend([
            "--auth-users".to_owned(),
            users.to_str().unwrap().to_owned(),
            "--cluster-secret-file".to_owned(),
            secret.to_str().unwrap().to_owned(),
        ]);
        v
    };
    let addrs = free_addrs(2);
    let (a, d) = (addrs[0], addrs[1]);
    // A cluster of one grows to two.
    let na = start(a, &[a], &auth("a", false), dir.path(), "a").await;
    let nd = start(d, &[a, d], &auth("d", true), dir.path(), "d").await;
    let out = members_cli(&["add", &d.to_string(), "--server", &a.to_string()], "").await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("403"),
        "{}",
        show(&out)
    );
    let out = members_cli(
        &[
            "add",
            &d.to_string(),
            "--server",
            &a.to_string(),
            "--username",
            "ops",
        ],
        "wrong\n",
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("login as ops refused"),
        "{}",
        show(&out)
    );
    let out = members_cli(
        &[
            "add",
            &d.to_string(),
            "--server",
            &a.to_string(),
            "--username",
            "ops",
        ],
        "opspass\n",
    )
    .await;
    assert!(out.status.success(), "{}\n{}", show(&out), na.log_text());
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        body.contains(&d.to_string()) && body.contains("voters"),
        "{body}"
    );
    let _ = nd;
}

/// Raft flags with the election timeout `election_ms`.
fn timed_args(dir: &Path, name: &str, join: bool, election_ms: &str) -> Vec<String> {
    let mut v = vec![
        "--data-dir".to_owned(),
        dir.join(name).to_str().unwrap().to_owned(),
        "--raft-election-timeout-ms".into(),
        election_ms.into(),
    ];
    v.extend(RAFT[2..].iter().map(|s| s.to_string()));
    if join {
        v.push("--cluster-join".into());
    }
    v
}

/// Registers a persistent instance over gRPC through `node` (retried while
/// an election runs, as a client would); the last error answer if it was
/// never acknowledged within 10 s.
async fn grpc_persistent(node: &Node, port: i64) -> Result<(), String> {
    use registry_proto::grpc::message::{
        InstanceResponse, NamingHead, PersistentInstanceRequest, WireInstance,
    };
    use registry_proto::grpc::{Message as _, Payload};
    let body = PersistentInstanceRequest {
        naming: NamingHead {
            namespace: Some("public".into()),
            service_name: Some("kept".into()),
            group_name: Some("DEFAULT_GROUP".into()),
        },
        r#type: Some("registerInstance".into()),
        instance: Some(WireInstance {
            ip: Some("127.0.0.1".into()),
            port: Some(port),
            ephemeral: Some(false),
            ..WireInstance::default()
        }),
        ..PersistentInstanceRequest::default()
    };
    let client = grpc_client::Raw::connect(node.grpc).await;
    let _stream = client.set_up().await;
    let started = std::time::Instant::now();
    loop {
        let p = client.call(Payload::of(&body)).await;
        if p.type_name() == InstanceResponse::TYPE {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err(String::from_utf8_lossy(p.json()).into_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_added_at_run_time_gets_the_followers_forwarded_writes() {
    let dir = tempfile::tempdir().unwrap();
    let addrs = free_addrs(4);
    let first = [addrs[0], addrs[1], addrs[2]];
    // The start-list members wait long before an election; D, added later,
    // campaigns at once when the leader goes, with terms ever higher, so
    // it is the one elected (a start-list member's vote request meets
    // D's higher term and fails).
    let mut nodes = Vec::new();
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        let args = timed_args(dir.path(), name, false, "1500");
        nodes.push(start(addrs[i], &first, &args, dir.path(), name).await);
    }
    until(Duration::from_secs(45), "three members ready", || async {
        for n in &nodes {
            if !n.ready().await {
                return false;
            }
        }
        true
    })
    .await;
    let d = addrs[3];
    let args = timed_args(dir.path(), "d", true, "200");
    nodes.push(start(d, &addrs, &args, dir.path(), "d").await);
    // Retried as an operator would while an election runs (D, a voter
    // with a short timeout, may start one as it joins); an add of a voter
    // is a no-op.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let server = addrs[0].to_string();
        let out = members_cli(&["add", &d.to_string(), "--server", &server], "").await;
        if out.status.success() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "add: {}", show(&out));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The start-list leader goes (once) until D leads.
    let mut killed = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut leader = None;
        for (i, n) in nodes.iter().enumerate() {
            if killed != Some(i) && n.raft_role().await.as_deref() == Some("LEADER") {
                leader = Some(i);
            }
        }
        match leader {
            Some(3) => break,
            Some(i) if killed.is_none() => {
                nodes[i].kill9().await;
                killed = Some(i);
            }
            _ => {}
        }
        assert!(
            std::time::Instant::now() < deadline,
            "D, added at run time, never led (leader {leader:?}, killed {killed:?})\n{}",
            nodes[3].log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A typed write through each live start-list member (its Forwarder
    // never had D's address at start) is acknowledged and on every node.
    let mut ports = Vec::new();
    for i in (0..3).filter(|i| killed != Some(*i)) {
        let port = 30_000 + i as i64;
        grpc_persistent(&nodes[i], port)
            .await
            .unwrap_or_else(|e| panic!("via {}: {e}\n{}", nodes[i].addr, nodes[i].log_text()));
        ports.push(port as u16);
    }
    if let Some(k) = killed {
        nodes[k].restart().await;
    }
    let all: Vec<&Node> = nodes.iter().collect();
    until_kept(&all, &ports).await;
}
