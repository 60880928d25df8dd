//! Relaying client writes to the responsible node (Nacos's `DistroFilter`).
//!
//! Runs before a handler when the registry is in a cluster:
//! - until the node has loaded its snapshot, client requests get a 503;
//! - a write or beat for a service another node is responsible for is
//!   sent to that node unchanged (plus the `relayedBy` mark) and its answer
//!   goes back to the client as it came;
//! - a request carrying the mark is never relayed again: it is served here
//!   when this node is responsible for its service, and refused with
//!   Nacos's 400 "receive invalid redirect request from peer" when it is
//!   not (the two views disagree for a moment after a change). Serving it
//!   anyway acknowledged a write that only this node held: its owner never
//!   got it (a node replicates only what it owns) and the owner's checksum
//!   rounds then dropped it. Nacos clients take the 400 as a failed call
//!   and try the next server;
//! - when the responsible node cannot be reached, the client gets a 503
//!   (Nacos clients then try another server) and the failure counts as a
//!   failed probe, so a dead owner is noticed sooner under load.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use registry_proto::distro::{self, Relayed};
use registry_proto::http1::{ContentType, Request};
use registry_proto::naming::route::Route;
use registry_proto::naming::ServiceName;
use registry_proto::params::Params;

use super::link::Answer;
use super::members::Owner;
use super::Cluster;
use crate::reply::{Done, Failure, Reply, Verdict};
use crate::state::App;

/// Decides whether this node serves `request` or relays it.
///
/// # Errors
/// 503 while loading; 403 for a relay mark from a non-member.
pub(crate) fn intercept(
    app: &App,
    cluster: &Arc<Cluster>,
    route: Route,
    request: &Request<'_>,
    peer: SocketAddr,
    params: &Params<'_>,
) -> Result<Verdict, Failure> {
    // Which routes a loading node serves and which it relays are the route
    // table's (`InCluster`).
    if !cluster.is_ready() && !route.is_served_while_loading() {
        return Err(Failure::new(
            503,
            "server is starting: loading the cluster snapshot, please try again later",
        ));
    }
    if !route.is_relayed_to_owner() {
        return Ok(Verdict::Local);
    }
    let relayed = params.get(distro::RELAYED_BY).is_some();
    if relayed && !cluster.is_member_ip(peer.ip()) {
        cluster.stats.refused.inc();
        return Err(Failure::new(
            403,
            "relayed requests are only accepted from cluster members",
        ));
    }
    // Persistent data has one writer, the Raft leader, whatever the service.
    if let Some(consensus) = cluster.consensus() {
        if let Some(answer) =
            super::raft::client::intercept(app, cluster, consensus, route, request, params, relayed)
        {
            return answer;
        }
    }
    // A request whose service cannot be named is the handler's to refuse.
    let Ok(service) = ServiceName::from_params(params, &app.parse_limits) else {
        return Ok(Verdict::Local);
    };
    let mut grouped = String::with_capacity(service.grouped_len());
    service.write_grouped(&mut grouped);
    let target = match cluster.owner(&grouped) {
        Owner::Me | Owner::Nobody => return Ok(Verdict::Local),
        Owner::Peer(_) if relayed => {
            cluster.stats.relay_misdirected.inc();
            return Err(Failure::new(
                400,
                format!("receive invalid redirect request from peer {}", peer.ip()),
            ));
        }
        Owner::Peer(addr) => addr.to_owned(),
    };
    let bytes = envelope(cluster, request, &target);
    let cluster = cluster.clone();
    Ok(Verdict::Answer(Reply::Later(Box::pin(async move {
        match send(&cluster, &target, bytes).await? {
            Ok(a) => {
                cluster.stats.relayed.inc();
                Ok(answered(a))
            }
            Err(e) => {
                cluster.stats.relay_failed.inc();
                if let Some(peer) = cluster.peer(&target) {
                    peer.failed(cluster.config.probe_failures);
                }
                Err(Failure::new(
                    503,
                    format!("the node responsible for this service is unreachable: {e}"),
                ))
            }
        }
    }))))
}

/// `request` unchanged in the relay envelope for `target` (the `relayedBy`
/// mark): what Distro's owner relay and Raft's leader relay both send.
pub(crate) fn envelope(cluster: &Cluster, request: &Request<'_>, target: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(256 + request.query.len() + request.body.len());
    distro::write_relayed(
        &mut bytes,
        &Relayed {
            method: request.method_token,
            path: request.path,
            query: request.query,
            user_agent: request.user_agent(),
            content_type: request.content_type(),
            body: &request.body,
        },
        target,
        &cluster.config.me,
    );
    bytes
}

/// Sends an [`envelope`] over one of `target`'s relay links and records the
/// round trip. The inner `Err` is the link's failure text; a `target` that
/// is no member is a 503.
pub(crate) async fn send(
    cluster: &Cluster,
    target: &str,
    bytes: Vec<u8>,
) -> Result<Result<Answer, String>, Failure> {
    let started = Instant::now();
    let Some(peer) = cluster.peer(target) else {
        return Err(Failure::new(503, format!("{target} is not a member")));
    };
    let answer = peer.relay_link().call(bytes).await;
    cluster
        .stats
        .relay_latency
        .record_duration(started.elapsed());
    Ok(answer)
}

/// A peer's answer, passed on to the client as it came.
pub(crate) fn answered(a: Answer) -> Done {
    let ct = if a.json {
        ContentType::Json
    } else {
        ContentType::Text
    };
    Done::Relayed(a.status, ct, a.body)
}
