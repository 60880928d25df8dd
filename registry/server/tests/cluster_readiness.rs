//! A node restarted into a running cluster answers no client as if its store
//! were complete until it has taken its peers' state (issue 34, item 2), on
//! real processes.
//!
//! The gap this closes: the HTTP door answered 503 while the node loaded its
//! snapshot, but the gRPC door answered the 2.x clients' server check, took
//! their connections and redo, and served their queries and subscriptions
//! from the empty store (a restarted Nacos node's empty lists, alibaba/nacos
//! #12160). Nacos refuses every gRPC request with INVALID_SERVER_STATUS (300,
//! "Server is starting,please try later.") until it has started
//! (core/remote/grpc/GrpcRequestAcceptor.java); its naming readiness is the
//! Distro snapshot loaded (naming/cluster/ServerStatusManager.java,
//! `distroProtocol.isInitialized()`, set by
//! core/distributed/distro/task/load/DistroLoadDataTask.java once a member's
//! snapshot is processed), and HTTP gets 503 until then.
//!
//! The peers are frozen (SIGSTOP) while the node restarts, so it cannot load
//! anything and stays unready for as long as the test looks: its probes of
//! them time out instead of being refused, and it needs many failures in a row
//! (`--cluster-probe-failures 30`) before it would call them DOWN and start
//! alone.

use std::time::Duration;

use registry_proto::grpc::message::{ServerCheckRequest, ServerCheckResponse};
use registry_proto::http1::Method;

use crate::cluster_support::{until, TestCluster};
use crate::grpc_client::Raw;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_refuses_2x_and_1x_clients_until_it_has_loaded_its_peers_state() {
    let mut c = TestCluster::start(3, &["--cluster-probe-failures", "30"]).await;
    let service = c.service_owned_by(1, "readiness");
    assert_eq!(c.nodes[1].register(&service, 7001).await.0, 200);
    c.until_everywhere(&service, &[(7001, true)], Duration::from_secs(10))
        .await;

    c.nodes[1].signal("STOP");
    c.nodes[2].signal("STOP");
    c.nodes[0].restart().await;
    let node = &c.nodes[0];

    // Not ready: the readiness probe, a 1.x list and a 2.x server check all
    // say so.
    assert!(!node.ready().await, "{}", node.log_text());
    let list = format!("/nacos/v1/ns/instance/list?serviceName={service}");
    let (status, body) = node.call(Method::Get, &list).await;
    assert_eq!(status, 503, "a 1.x list before the snapshot: {body}");
    let raw = Raw::connect(node.grpc).await;
    let (ty, json) = raw.request(&ServerCheckRequest::default()).await;
    assert_eq!(
        ty, "ErrorResponse",
        "a 2.x server check before the snapshot"
    );
    assert_eq!(json["errorCode"], 300, "{json}");
    assert_eq!(json["message"], "Server is starting,please try later.");

    // The peers come back: the node loads their state, then serves it.
    c.nodes[1].signal("CONT");
    c.nodes[2].signal("CONT");
    let node = &c.nodes[0];
    until(Duration::from_secs(15), "the restarted node ready", || {
        node.ready()
    })
    .await;
    let check: ServerCheckResponse = raw.expect(&ServerCheckRequest::default()).await;
    assert!(check.connection_id.is_some());
    assert_eq!(
        node.ports(&service).await,
        Some(vec![7001]),
        "the first list after readiness holds the peers' state\n{}",
        c.logs()
    );
}
