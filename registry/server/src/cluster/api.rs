//! The cluster's HTTP endpoints: the member list, readiness, and the peer
//! endpoints (report, replicate, checksum, fetch, snapshot, 2.x client sets
//! and their verify, a service's local subscribers, the namespace table),
//! and an operator's membership change (see [`super::membership`]).
//!
//! A peer request is refused (403) unless it comes from a member's IP,
//! names a member other than this node as its sender from that IP, and,
//! when the cluster has a secret, presents it (compared in constant time).
//! Its body is bounded and versioned (400 with the reason otherwise), and
//! nothing of a refused message is applied.

use std::sync::Arc;

use registry_proto::distro::RaftMemberView;
use registry_proto::distro::{
    self, Checksums, ClientSets, ClientVerify, Datums, DistroError, Envelope, Fetch, MemberView,
    NamespaceSet, Report, SnapshotPart,
};
use registry_proto::naming::route::Route;
use registry_proto::raft::RaftRequest;
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;

use super::clients::{on_client_sets, on_verify};
use super::replicate::apply_datums;
use super::verify::{answer_fetch, answer_snapshot, on_checksums};
use super::Cluster;
use crate::reply::{Done, Failure, Reply};
use crate::state::Exchange;

/// Answers a cluster route.
///
/// A table of one arm per peer route (decode, check, hand to the module
/// that owns it): longer than 80 lines as the routes are many, not split.
///
/// # Errors
/// 403 for a non-member or a wrong secret, 400 for a bad message.
pub(crate) fn handle(
    ex: &Exchange<'_>,
    cluster: &Arc<Cluster>,
    route: Route,
    body: &mut Vec<u8>,
) -> Result<Reply, Failure> {
    let app = ex.app;
    match route {
        Route::ClusterNodes => {
            members(app, cluster, body);
            Ok(Reply::Json)
        }
        Route::Readiness => readiness(cluster.is_ready()),
        Route::ClusterMemberAdd | Route::ClusterMemberRemove => {
            super::membership::handle(ex, cluster, route)
        }
        Route::ClusterReport => {
            let m: Envelope<Report> = admit(ex, cluster)?;
            cluster.heard_from(app, &m.from, &m.body);
            let answer = cluster.report(app.grpc.hub.len() as u64);
            *body = distro::encode_answer(&answer);
            Ok(Reply::Json)
        }
        Route::DistroReplicate => {
            let m: Envelope<Datums> = admit(ex, cluster)?;
            let r = apply_datums(app, cluster, m.body.node, &m.body.items, true);
            if r.invalid > 0 {
                tracing::warn!(from = %m.from, invalid = r.invalid, "refused invalid replicated states");
            }
            Ok(Reply::Text("ok"))
        }
        Route::DistroClients => {
            let m: Envelope<ClientSets> = admit(ex, cluster)?;
            let r = on_client_sets(app, cluster, &m.from, &m.body);
            if r.invalid > 0 {
                tracing::warn!(from = %m.from, invalid = r.invalid, "refused invalid client sets");
            }
            Ok(Reply::Text("ok"))
        }
        Route::DistroSubscribers => {
            let m: Envelope<distro::SubscribersQuery> = admit(ex, cluster)?;
            *body = distro::encode_answer(&super::subscribers::answer(app, &m.body));
            Ok(Reply::Json)
        }
        Route::DistroNamespaces => {
            let m: Envelope<NamespaceSet> = admit(ex, cluster)?;
            *body = super::namespaces::answer(app, cluster, &m.from, &m.body)?;
            Ok(Reply::Json)
        }
        Route::DistroClientVerify => {
            let m: Envelope<ClientVerify> = admit(ex, cluster)?;
            *body = distro::encode_answer(&on_verify(app, cluster, &m.body));
            Ok(Reply::Json)
        }
        Route::DistroChecksum => {
            let m: Envelope<Checksums> = admit(ex, cluster)?;
            if m.body.parts == 0 || m.body.part >= m.body.parts {
                cluster.stats.refused.inc();
                return Err(Failure::new(
                    400,
                    "malformed peer message: part out of range",
                ));
            }
            on_checksums(app, cluster, &m.from, &m.body);
            Ok(Reply::Text("ok"))
        }
        Route::DistroFetch => {
            let m: Envelope<Fetch> = admit(ex, cluster)?;
            *body = distro::encode_answer(&answer_fetch(app, cluster, &m.body));
            Ok(Reply::Json)
        }
        Route::DistroSnapshot => {
            let m: Envelope<SnapshotPart> = admit(ex, cluster)?;
            if m.body.parts == 0 || m.body.part >= m.body.parts {
                cluster.stats.refused.inc();
                return Err(Failure::new(
                    400,
                    "malformed peer message: part out of range",
                ));
            }
            *body = distro::encode_answer(&answer_snapshot(app, cluster, m.body));
            Ok(Reply::Json)
        }
        Route::RaftRpc => raft_rpc(ex, cluster),
        _ => Err(Failure::new(404, "not a cluster route")),
    }
}

/// The member list (`Route::ClusterNodes`): every member's
/// state as this node sees it, with Raft roles and 2.x client counts.
fn members(app: &crate::state::App, cluster: &Cluster, body: &mut Vec<u8>) {
    let states = cluster.member_states();
    let consensus = cluster.consensus();
    let raft_of = |addr: &str| -> Option<RaftMemberView> {
        let c = consensus?;
        if addr == cluster.config.me {
            return Some(c.position().view());
        }
        let reported = cluster.peer(addr).and_then(|p| p.raft());
        Some(reported.unwrap_or_else(|| RaftMemberView {
            role: "UNKNOWN".into(),
            ..RaftMemberView::default()
        }))
    };
    let views: Vec<MemberView<'_>> = states
        .iter()
        .map(|(addr, state, last, fails)| MemberView {
            address: addr,
            state: state.name(),
            last_refresh_ms: *last,
            fail_count: *fails,
            raft: raft_of(addr),
            clients: if *addr == cluster.config.me {
                Some(cluster.client_counts(app.grpc.hub.len() as u64))
            } else {
                cluster.peer(addr).and_then(|p| p.clients())
            },
        })
        .collect();
    distro::encode_members(body, &views);
}

/// A Raft RPC from a peer, answered once the engine has handled it.
fn raft_rpc(ex: &Exchange<'_>, cluster: &Cluster) -> Result<Reply, Failure> {
    let m: Envelope<RaftRequest> = admit(ex, cluster)?;
    let Some(consensus) = cluster.consensus() else {
        return Err(Failure::new(
            503,
            "the Raft engine is not running on this node",
        ));
    };
    let consensus = consensus.clone();
    Ok(Reply::Later(Box::pin(async move {
        let answer = super::raft::net::serve(&consensus, &m.from, m.body).await;
        Ok(Done::Json(distro::encode_answer(&answer)))
    })))
}

fn readiness(ready: bool) -> Result<Reply, Failure> {
    if ready {
        Ok(Reply::Text("OK"))
    } else {
        Err(Failure::new(
            503,
            "not ready: loading the cluster snapshot from a peer",
        ))
    }
}

/// Checks a peer request's origin, secret and message; counts refusals.
fn admit<T: DeserializeOwned>(
    ex: &Exchange<'_>,
    cluster: &Cluster,
) -> Result<Envelope<T>, Failure> {
    let refuse = |status: u16, text: String| {
        cluster.stats.refused.inc();
        tracing::debug!(peer = %ex.peer, status, %text, "peer request refused");
        Failure::new(status, text)
    };
    if !cluster.is_member_ip(ex.peer.ip()) {
        return Err(refuse(
            403,
            format!(
                "peer requests are only accepted from cluster members, not {}",
                ex.peer.ip()
            ),
        ));
    }
    let m: Envelope<T> = distro::decode(&ex.request.body, cluster.config.max_message)
        .map_err(|e: DistroError| refuse(400, e.to_string()))?;
    let sender_ok = m.from != cluster.config.me
        && cluster.peer(&m.from).is_some()
        && m.from
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| a.ip() == ex.peer.ip());
    if !sender_ok {
        return Err(refuse(
            403,
            format!("{} is not another member of this cluster", m.from),
        ));
    }
    if let Some(secret) = &cluster.config.secret {
        let given = m.secret.as_deref().unwrap_or("");
        if !bool::from(given.as_bytes().ct_eq(secret.as_bytes())) {
            return Err(refuse(403, "wrong or missing cluster secret".into()));
        }
    }
    Ok(m)
}
