//! A service's subscriber list covers every member of a cluster of real
//! `registry` processes, not only the node answering (Nacos's
//! `aggregation`, and a long-standing complaint about its console): the
//! v1 list the console reads and the v3 admin page gather each member's
//! own subscribers over the peer route; a member that does not answer is
//! named as unreachable within the bounded wait, the rest still listed.
//! Also the later doors' writes in a cluster: a v2 or v3 HTTP register
//! reaching a node that is not the service's responsible one is relayed to
//! it, as a 1.x write is, so every member lists it.

use crate::cluster_support;

use std::time::{Duration, Instant};

use cluster_support::{until, TestCluster};
use registry_proto::http1::Method;
use serde_json::Value;

const LIST: &str = "/nacos/v1/ns/service/subscribers?serviceName=watched";
const V3: &str = "/nacos/v3/admin/ns/service/subscribers?serviceName=watched";

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_of_every_member_are_listed() {
    let mut c = TestCluster::start(3, &[]).await;
    // A 1.x push subscriber on node 1 and one on node 2, none on node 0.
    let mut sockets = Vec::new();
    for node in &c.nodes[1..] {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        let (status, body) = node
            .call(
                Method::Get,
                &format!("/nacos/v1/ns/instance/list?serviceName=watched&udpPort={port}"),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        sockets.push((udp, node.addr.to_string()));
    }
    let (status, body) = c.nodes[0].call(Method::Get, LIST).await;
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["count"], 2, "{v}");
    let mut nodes: Vec<String> = v["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["node"].as_str().unwrap().to_owned())
        .collect();
    nodes.sort();
    let mut expected: Vec<String> = sockets.iter().map(|(_, n)| n.clone()).collect();
    expected.sort();
    assert_eq!(nodes, expected, "{v}");
    assert_eq!(v["unreachable"], serde_json::json!([]));
    // Paged after the merge.
    let (_, body) = c.nodes[0]
        .call(Method::Get, &format!("{LIST}&pageSize=1&pageNo=2"))
        .await;
    let v = json(&body);
    assert_eq!(
        (
            v["count"].clone(),
            v["subscribers"].as_array().unwrap().len()
        ),
        (2.into(), 1)
    );
    // `aggregation=false`: this node's own only (what the peers are asked).
    let (_, body) = c.nodes[0]
        .call(Method::Get, &format!("{LIST}&aggregation=false"))
        .await;
    assert_eq!(json(&body)["count"], 0, "{body}");
    // The v3 admin page gathers the same.
    let (status, body) = c.nodes[0].call(Method::Get, V3).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["data"]["totalCount"], 2, "{body}");

    // A member that is gone: named, within the bounded wait; the others listed.
    let gone = c.nodes[2].addr.to_string();
    c.nodes[2].kill9().await;
    let started = Instant::now();
    let (status, body) = c.nodes[0].call(Method::Get, LIST).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["count"], 1, "{v}");
    assert_eq!(v["unreachable"][0]["node"], serde_json::json!(gone), "{v}");
    assert_eq!(
        v["subscribers"][0]["node"],
        serde_json::json!(c.nodes[1].addr.to_string())
    );
    // Peers refuse a malformed peer message; the refusal is logged at
    // debug, which the binary's filter leaves out until `PUT /ops/log`
    // (`OperatorControllerV3.setLogLevel`) turns `naming-distro` (the
    // cluster) to DEBUG in the running process.
    let refuse = || c.nodes[0].call(Method::Put, "/nacos/v1/ns/distro/subscribers");
    let (status, _) = refuse().await;
    assert!(status == 400 || status == 403, "{status}");
    assert!(!c.nodes[0].log_text().contains("peer request refused"));
    let (status, body) = c.nodes[0]
        .call(
            Method::Put,
            "/nacos/v3/admin/ns/ops/log?logName=naming-distro&logLevel=DEBUG",
        )
        .await;
    assert_eq!(
        (status, json(&body)["data"].clone()),
        (200, "ok".into()),
        "{body}"
    );
    refuse().await;
    until(
        Duration::from_secs(5),
        "the refusal logged at debug",
        || async { c.nodes[0].log_text().contains("peer request refused") },
    )
    .await;
    drop(sockets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_and_v3_writes_reach_the_responsible_node() {
    let c = TestCluster::start(3, &[]).await;
    let limit = Duration::from_secs(5);
    // Leases far longer than the test: what is asserted is where the
    // writes land, never how fast they expire.
    let lease = "%7B%22preserved.heart.beat.timeout%22%3A%22600000%22%2C%22preserved.ip.delete.timeout%22%3A%22600000%22%7D";
    // Services node 0 is responsible for, written through nodes 1 and 2.
    let v3 = c.service_owned_by(0, "v3w");
    let v2 = c.service_owned_by(0, "v2w");
    let (status, body) = c.nodes[1]
        .call(
            Method::Post,
            &format!(
                "/nacos/v3/client/ns/instance?serviceName={v3}&ip=127.0.0.1&port=7001&metadata={lease}"
            ),
        )
        .await;
    assert_eq!(
        (status, json(&body)["data"].clone()),
        (200, "ok".into()),
        "{body}"
    );
    let (status, body) = c.nodes[2]
        .call(
            Method::Post,
            &format!(
                "/nacos/v2/ns/instance?serviceName={v2}&ip=127.0.0.1&port=7002&metadata={lease}"
            ),
        )
        .await;
    assert_eq!(
        (status, json(&body)["data"].clone()),
        (200, "ok".into()),
        "{body}"
    );
    c.until_everywhere(&v3, &[(7001, true)], limit).await;
    c.until_everywhere(&v2, &[(7002, true)], limit).await;
    // Relayed, not served where they arrived: the owner replicated them.
    assert_eq!(
        c.nodes[1].metric("registry_cluster_relayed_total").await,
        1.0
    );
    assert_eq!(
        c.nodes[2].metric("registry_cluster_relayed_total").await,
        1.0
    );
    // The v3 heartbeat is relayed too: it renews on the owner.
    let (status, body) = c.nodes[2]
        .call(
            Method::Post,
            &format!(
                "/nacos/v3/client/ns/instance?serviceName={v3}&ip=127.0.0.1&port=7001&heartBeat=true"
            ),
        )
        .await;
    assert_eq!(
        (status, json(&body)["code"].clone()),
        (200, 0.into()),
        "{body}"
    );
    assert_eq!(
        c.nodes[2].metric("registry_cluster_relayed_total").await,
        2.0
    );
    // A deregister through another non-owner reaches every member.
    let (status, body) = c.nodes[2]
        .call(
            Method::Delete,
            &format!("/nacos/v3/client/ns/instance?serviceName={v3}&ip=127.0.0.1&port=7001"),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    c.until_everywhere(&v3, &[], limit).await;
}
