//! Namespaces are cluster-wide, as in Nacos, across real `registry`
//! processes on loopback. Without Raft (Distro only) the members exchange
//! stamped tables: a namespace created through one node's v3 admin API is
//! listed by the others' v1 and v3 lists, a v3 register into it through
//! another node is accepted, an update and a delete made anywhere reach
//! every node, a namespace holding services is refused on every node (with
//! `--namespace-delete-protection`; Nacos itself deletes it), a
//! restarted node (empty table) has the cluster's namespaces after its
//! first exchange, and a bad table on the peer route is refused with the
//! reason, nothing of it applied. With Raft (`--data-dir`) the changes are
//! log entries: the same through any node, a restarted node has them, and
//! a wiped node gets them back in the leader's snapshot.

use crate::binary;
use crate::cluster_support;

use std::time::Duration;

use cluster_support::{start_raft_nodes, until, Node, TestCluster};
use registry_proto::http1::Method;
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(15);
const V1_LIST: &str = "/nacos/v1/console/namespaces";
const V3_LIST: &str = "/nacos/v3/admin/core/namespace/list";
const V3: &str = "/nacos/v3/admin/core/namespace";

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// `(id, name, desc)` of every custom namespace `node` lists through `list`
/// (v1 and v3 both answer `{"data": [...]}`); `None` when it does not answer.
async fn listed(node: &Node, list: &str) -> Option<Vec<(String, String, String)>> {
    let (200, body) = node.try_call(Method::Get, list).await? else {
        return None;
    };
    let v: Value = serde_json::from_str(&body).ok()?;
    let mut out: Vec<(String, String, String)> = v["data"]
        .as_array()?
        .iter()
        .filter(|n| n["namespace"] != "public" && n["namespace"] != "")
        .map(|n| {
            let s = |k: &str| n[k].as_str().unwrap_or("").to_owned();
            (s("namespace"), s("namespaceShowName"), s("namespaceDesc"))
        })
        .collect();
    out.sort();
    Some(out)
}

/// Waits until every node in `nodes` lists exactly `expected` through both
/// v1 and v3; on time out, says what each lists and shows its log's tail.
async fn until_listed(nodes: &[&Node], expected: &[(&str, &str, &str)]) {
    let want: Vec<(String, String, String)> = expected
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    let started = std::time::Instant::now();
    'poll: loop {
        for node in nodes {
            for list in [V1_LIST, V3_LIST] {
                if listed(node, list).await.as_ref() != Some(&want) {
                    if started.elapsed() > LIMIT {
                        break 'poll;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue 'poll;
                }
            }
        }
        return;
    }
    let mut seen = String::new();
    for node in nodes {
        let text = node.log_text();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        seen += &format!(
            "--- {}: v1 {:?}, v3 {:?}\n{}\n",
            node.addr,
            listed(node, V1_LIST).await,
            listed(node, V3_LIST).await,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    panic!("not within {LIMIT:?}: every node lists {expected:?}\n{seen}");
}

/// A v3 admin call's envelope `code` (0 is success) and its HTTP status.
async fn v3(node: &Node, method: Method, query: &str) -> (u16, i64, String) {
    let (status, body) = node.call(method, &format!("{V3}?{query}")).await;
    let code = json(&body)["code"].as_i64().unwrap_or(-1);
    (status, code, body)
}

/// Ports of `service`'s instances in namespace `ns` as `node` lists them.
async fn ports_in(node: &Node, ns: &str, service: &str) -> Option<Vec<u64>> {
    let target = format!("/nacos/v1/ns/instance/list?namespaceId={ns}&serviceName={service}");
    let (200, body) = node.try_call(Method::Get, &target).await? else {
        return None;
    };
    let v: Value = serde_json::from_str(&body).ok()?;
    let mut ports: Vec<u64> = v["hosts"]
        .as_array()?
        .iter()
        .filter_map(|h| h["port"].as_u64())
        .collect();
    ports.sort();
    Some(ports)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_reach_every_member_without_raft() {
    let mut c = TestCluster::start(3, &["--namespace-delete-protection=true"]).await;

    // Created through node 0's v3 admin API: listed by all three, both doors.
    let (status, code, body) = v3(
        &c.nodes[0],
        Method::Post,
        "namespaceId=dev&namespaceName=Dev&namespaceDesc=first",
    )
    .await;
    assert_eq!((status, code), (200, 0), "{body}");
    until_listed(
        &c.nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev", "first")],
    )
    .await;

    // A v3 register into it through node 1 is accepted and listed everywhere.
    let (status, body) = c.nodes[1]
        .call(
            Method::Post,
            "/nacos/v3/client/ns/instance?namespaceId=dev&serviceName=held&ip=127.0.0.1&port=7001",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["code"], 0, "{body}");
    until(LIMIT, "every node lists dev's service", || async {
        for n in &c.nodes {
            if ports_in(n, "dev", "held").await != Some(vec![7001]) {
                return false;
            }
        }
        true
    })
    .await;

    // Updated through node 1: node 2 (and every node) sees the new name.
    let (status, code, body) = v3(
        &c.nodes[1],
        Method::Put,
        "namespaceId=dev&namespaceName=Dev2&namespaceDesc=second",
    )
    .await;
    assert_eq!((status, code), (200, 0), "{body}");
    until_listed(
        &c.nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "second")],
    )
    .await;

    // It holds a service: with the protection on, a delete is refused on
    // every node, v3 and v1.
    for (i, n) in c.nodes.iter().enumerate() {
        let (status, code, body) = v3(n, Method::Delete, "namespaceId=dev").await;
        assert_ne!(
            (status, code),
            (200, 0),
            "node {i} deleted a namespace holding services"
        );
        assert!(body.contains("still holds"), "node {i}: {body}");
        let (status, body) = n
            .call(
                Method::Delete,
                "/nacos/v1/console/namespaces?namespaceId=dev",
            )
            .await;
        assert_eq!((status, body.as_str()), (200, "false"), "node {i}");
    }

    // Created on node 0, deleted through node 2's v1 door: gone everywhere.
    let (status, code, body) =
        v3(&c.nodes[0], Method::Post, "namespaceId=qa&namespaceName=QA").await;
    assert_eq!((status, code), (200, 0), "{body}");
    until_listed(
        &c.nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "second"), ("qa", "QA", "")],
    )
    .await;
    let (status, body) = c.nodes[2]
        .call(
            Method::Delete,
            "/nacos/v1/console/namespaces?namespaceId=qa",
        )
        .await;
    assert_eq!((status, body.as_str()), (200, "true"));
    until_listed(
        &c.nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "second")],
    )
    .await;

    // A restarted node (no data dir: it starts with an empty table) has
    // the cluster's namespaces again after its first exchange.
    c.nodes[2].restart().await;
    until_ready(&[&c.nodes[2]]).await;
    until_listed(
        &c.nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "second")],
    )
    .await;

    // Bad tables on the peer route: refused with the reason, nothing applied.
    let from = c.nodes[0].addr.to_string();
    let bad = [
        (
            format!(
                r#"{{"v":2,"from":"{from}","node":1,"body":{{"items":[{{"id":"a b","stamp":9,"name":"x"}}]}}}}"#
            ),
            "mismatch the pattern",
        ),
        (
            format!(
                r#"{{"v":2,"from":"{from}","node":1,"body":{{"items":[{{"id":"ok","stamp":9,"name":"n@me"}},{{"id":"fine","stamp":9,"name":"f"}}]}}}}"#
            ),
            "illegal char",
        ),
        (
            format!(
                r#"{{"v":2,"from":"{from}","node":1,"body":{{"items":[{{"id":"public","stamp":9,"name":"p"}}]}}}}"#
            ),
            "not replicated",
        ),
        (
            format!(
                r#"{{"v":2,"from":"{from}","node":1,"body":{{"items":[{{"id":"x","stamp":1,"name":"x"}},{{"id":"x","stamp":2,"name":"y"}}]}}}}"#
            ),
            "listed twice",
        ),
        (
            format!(
                r#"{{"v":2,"from":"{from}","node":1,"body":{{"items":[{{"id":"x","stamp":"soon"}}]}}}}"#
            ),
            "malformed",
        ),
        ("{not json".to_owned(), "malformed"),
    ];
    for (message, why) in &bad {
        let (status, text) = send_table(&c.nodes[1], message).await;
        assert_eq!(status, 400, "{message}: {text}");
        assert!(text.contains(why), "{message}: {text}");
    }
    // A message naming no member is refused before it is read.
    let stranger = r#"{"v":2,"from":"127.0.0.1:1","node":1,"body":{"items":[]}}"#;
    assert_eq!(send_table(&c.nodes[1], stranger).await.0, 403);
    assert_eq!(
        listed(&c.nodes[1], V3_LIST).await,
        Some(vec![("dev".into(), "Dev2".into(), "second".into())]),
        "a refused table changed nothing"
    );
}

/// `PUT` of a raw namespace table message to `node`'s peer route.
async fn send_table(node: &Node, body: &str) -> (u16, String) {
    let request = format!(
        "PUT {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        registry_proto::distro::NAMESPACES_PATH,
        node.addr,
        body.len()
    );
    let mut conn = binary::Conn::open(node.addr).await.expect("connect");
    conn.send(request.as_bytes()).await.expect("answer")
}

/// Three Raft nodes (real processes), each with its own data dir under the
/// returned temporary directory (`dir/data{i}`).
async fn raft_nodes(extra: &[&str]) -> (tempfile::TempDir, Vec<Node>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (nodes, _) = start_raft_nodes(dir.path(), 3, extra).await;
    until_ready(&nodes.iter().collect::<Vec<_>>()).await;
    (dir, nodes)
}

/// Waits until `nodes` serve clients (a Raft node loads its state first;
/// on a loaded machine an election can take a while, as in `raft.rs`).
async fn until_ready(nodes: &[&Node]) {
    until(Duration::from_secs(45), "the nodes ready", || async {
        for n in nodes {
            if !n.ready().await {
                return false;
            }
        }
        true
    })
    .await;
}

/// Creates namespace `id` through `node`, retrying while the group has no
/// leader (503, or no answer while a write waits for one) as a client would.
async fn create_logged(node: &Node, id: &str) {
    let what = format!("namespace {id} created through {}", node.addr);
    let target = format!("{V3}?namespaceId={id}&namespaceName={id}");
    until(Duration::from_secs(45), &what, || async {
        let Some((status, body)) = node.try_call(Method::Post, &target).await else {
            return false;
        };
        // Exists: an earlier try was committed after its answer timed out.
        (status, json(&body)["code"].as_i64()) == (200, Some(0)) || body.contains("already exist")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_are_raft_log_entries_with_a_data_dir() {
    let (_dir, mut nodes) = raft_nodes(&["--namespace-delete-protection=true"]).await;
    // A write through a node that has no leader yet answers 503: retried.
    create_logged(&nodes[0], "dev").await;
    until_listed(&nodes.iter().collect::<Vec<_>>(), &[("dev", "dev", "")]).await;

    // Updated through node 1, seen by node 2.
    let (status, code, body) = v3(
        &nodes[1],
        Method::Put,
        "namespaceId=dev&namespaceName=Dev2&namespaceDesc=logged",
    )
    .await;
    assert_eq!((status, code), (200, 0), "{body}");
    until_listed(
        &nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "logged")],
    )
    .await;

    // A second namespace, then node 2 restarts: it has both from its log.
    let (status, code, body) = v3(&nodes[2], Method::Post, "namespaceId=qa&namespaceName=QA").await;
    assert_eq!((status, code), (200, 0), "{body}");
    until_listed(
        &nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "logged"), ("qa", "QA", "")],
    )
    .await;
    nodes[2].restart().await;
    until_ready(&[&nodes[2]]).await;
    until_listed(
        &nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "logged"), ("qa", "QA", "")],
    )
    .await;

    // A delete through node 2 reaches all; a namespace holding a service
    // is refused on every node.
    let (status, body) = nodes[2]
        .call(
            Method::Delete,
            "/nacos/v1/console/namespaces?namespaceId=qa",
        )
        .await;
    assert_eq!((status, body.as_str()), (200, "true"));
    until_listed(
        &nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "logged")],
    )
    .await;
    let (status, body) = nodes[0]
        .call(
            Method::Post,
            "/nacos/v3/client/ns/instance?namespaceId=dev&serviceName=held&ip=127.0.0.1&port=7002&ephemeral=false",
        )
        .await;
    assert_eq!(
        (status, json(&body)["code"].as_i64()),
        (200, Some(0)),
        "{body}"
    );
    until(
        LIMIT,
        "every node lists dev's persistent service",
        || async {
            for n in &nodes {
                if ports_in(n, "dev", "held").await != Some(vec![7002]) {
                    return false;
                }
            }
            true
        },
    )
    .await;
    for (i, n) in nodes.iter().enumerate() {
        let (status, code, body) = v3(n, Method::Delete, "namespaceId=dev").await;
        assert_ne!(
            (status, code),
            (200, 0),
            "node {i} deleted a namespace holding services"
        );
        assert!(body.contains("still holds"), "node {i}: {body}");
    }
    until_listed(
        &nodes.iter().collect::<Vec<_>>(),
        &[("dev", "Dev2", "logged")],
    )
    .await;
}

/// A node whose data dir is wiped gets the namespaces back from the
/// leader's snapshot (the log before it is compacted away): the snapshot
/// carries the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiped_raft_node_gets_the_namespaces_from_a_snapshot() {
    let (dir, mut nodes) = raft_nodes(&["--raft-snapshot-logs", "10"]).await;
    let ids: Vec<String> = (0..30).map(|i| format!("ns-{i:02}")).collect();
    for (i, id) in ids.iter().enumerate() {
        create_logged(&nodes[i % 3], id).await;
    }
    let expected: Vec<(&str, &str, &str)> = ids
        .iter()
        .map(|id| (id.as_str(), id.as_str(), ""))
        .collect();
    until_listed(&nodes.iter().collect::<Vec<_>>(), &expected).await;
    nodes[2].kill9().await;
    std::fs::remove_dir_all(dir.path().join("data2")).expect("wipe node 2's data dir");
    nodes[2].restart().await;
    until_ready(&[&nodes[2]]).await;
    until_listed(&[&nodes[2]], &expected).await;
    assert!(
        nodes[2]
            .metric("registry_raft_snapshots_installed_total")
            .await
            >= 1.0,
        "the wiped node caught up without a snapshot\n{}",
        nodes[2].log_text()
    );
}
