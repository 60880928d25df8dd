//! Changing the members of a running cluster: `registry members add|remove
//! ADDR`, `POST|DELETE /nacos/v1/core/cluster/member?address=ADDR` and the
//! console all come here.
//!
//! The Raft group is the record of membership. An add makes the node a
//! learner (openraft's `add_learner`: the leader replicates its log, or its
//! snapshot when the log was compacted), waits until the learner has caught
//! up to the entry that added it, then makes it a voter
//! (`change_membership`, a joint configuration and then the new uniform
//! one, so no two majorities can disagree). A remove takes it out of the
//! voters and the node list at once. The change is committed in the log,
//! so every node, and every node restarted later, ends with the same list;
//! [`follow`] hands each committed list to Distro ([`Cluster::set_members`]),
//! so the member view and service ownership follow everywhere.
//!
//! Any member takes the request: a follower relays it once to the leader
//! (with its `accessToken`, checked there again) and passes the answer on.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, Raft, ServerState};
use registry_proto::distro;
use registry_proto::naming::route::Route;
use registry_proto::raft::{NodeId, TypeConfig};

use super::raft::{node_id, Consensus};
use super::Cluster;
use crate::reply::{Done, Failure, Reply};
use crate::state::{App, Exchange};

/// How long an added node may take to catch up before the add gives up
/// (it stays a learner; `remove` takes it out).
const CATCH_UP: Duration = Duration::from_secs(60);

/// What an operator asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Add,
    Remove,
}

/// Answers `POST` (add) or `DELETE` (remove) of
/// `/nacos/v1/core/cluster/member?address=ip:port` with the membership
/// after the change, as JSON.
///
/// # Errors
/// 400 for a bad address or a registry without the Raft group; 503 when no
/// leader is reachable; the leader's refusal otherwise.
pub(crate) fn handle(
    ex: &Exchange<'_>,
    cluster: &Arc<Cluster>,
    route: Route,
) -> Result<Reply, Failure> {
    let change = match route {
        Route::ClusterMemberAdd => Change::Add,
        _ => Change::Remove,
    };
    let Some(consensus) = cluster.consensus().cloned() else {
        return Err(Failure::new(
            400,
            "changing members needs the Raft group: run every member with --data-dir",
        ));
    };
    let raw = ex.params.get("address").unwrap_or("");
    let addr: SocketAddr = raw.trim().parse().map_err(|_| {
        Failure::new(
            400,
            format!("address must be a member's ip:port as the members name it, got {raw:?}"),
        )
    })?;
    let addr = addr.to_string();
    let relayed = ex.params.get(distro::RELAYED_BY).is_some();
    if relayed && !cluster.is_member_ip(ex.peer.ip()) {
        return Err(Failure::new(
            403,
            "relayed requests are only accepted from cluster members",
        ));
    }
    let position = consensus.position();
    if position.role != "LEADER" {
        if relayed {
            return Err(Failure::new(
                503,
                "this node stopped being the Raft leader; try again",
            ));
        }
        return forward(cluster, &consensus, position.leader, ex.request);
    }
    Ok(Reply::Later(Box::pin(async move {
        match change {
            Change::Add => add(&consensus.raft, &addr).await?,
            Change::Remove => remove(&consensus.raft, &addr).await?,
        }
        Ok(Done::Json(describe(&consensus.raft)))
    })))
}

/// Relays the request to the leader and passes its answer on.
fn forward(
    cluster: &Arc<Cluster>,
    consensus: &Consensus,
    leader: Option<NodeId>,
    request: &registry_proto::http1::Request<'_>,
) -> Result<Reply, Failure> {
    let Some(target) = leader.and_then(|id| consensus.address(id)) else {
        return Err(Failure::new(
            503,
            "no Raft leader: this node cannot reach a majority of the cluster; nothing changed",
        ));
    };
    let target = target.to_owned();
    let bytes = super::relay::envelope(cluster, request, &target);
    let cluster = cluster.clone();
    Ok(Reply::Later(Box::pin(async move {
        match super::relay::send(&cluster, &target, bytes).await? {
            Ok(a) => Ok(super::relay::answered(a)),
            Err(e) => Err(Failure::new(
                503,
                format!("no answer from the Raft leader {target}: {e}; the change may or may not have been made"),
            )),
        }
    })))
}

/// Makes `addr` a learner, waits until it has caught up, then a voter.
async fn add(raft: &Raft<TypeConfig>, addr: &str) -> Result<(), Failure> {
    let id = node_id(addr);
    let voters: BTreeSet<NodeId> = {
        let m = raft.metrics();
        let m = m.borrow();
        m.membership_config.membership().voter_ids().collect()
    };
    if voters.contains(&id) {
        return Ok(());
    }
    let added = raft
        .add_learner(id, BasicNode::new(addr), false)
        .await
        .map_err(refusal)?;
    let entry = added.log_id.index;
    let caught_up = raft
        .wait(Some(CATCH_UP))
        .metrics(
            |m| {
                m.state != ServerState::Leader
                    || m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id).cloned().flatten())
                        .is_some_and(|l| l.index >= entry)
            },
            "the new member catches up",
        )
        .await;
    if caught_up.is_err() {
        return Err(Failure::new(
            503,
            format!(
                "{addr} was added as a learner but did not catch up within {} s: is it running \
                 with --cluster-join, --data-dir and members that include this one? \
                 `registry members remove {addr}` takes it out",
                CATCH_UP.as_secs()
            ),
        ));
    }
    raft.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
        .await
        .map_err(refusal)?;
    Ok(())
}

/// Takes `addr` out of the voters and the node list.
async fn remove(raft: &Raft<TypeConfig>, addr: &str) -> Result<(), Failure> {
    let id = node_id(addr);
    let (voters, nodes): (BTreeSet<NodeId>, BTreeSet<NodeId>) = {
        let m = raft.metrics();
        let m = m.borrow();
        let ms = m.membership_config.membership();
        (
            ms.voter_ids().collect(),
            ms.nodes().map(|(i, _)| *i).collect(),
        )
    };
    if !nodes.contains(&id) {
        return Err(Failure::new(
            404,
            format!("{addr} is not a member of this cluster"),
        ));
    }
    let change = if voters.contains(&id) {
        if voters.len() == 1 {
            return Err(Failure::new(
                400,
                format!("{addr} is the last voter: a cluster cannot remove all its members"),
            ));
        }
        ChangeMembers::RemoveVoters(BTreeSet::from([id]))
    } else {
        ChangeMembers::RemoveNodes(BTreeSet::from([id]))
    };
    raft.change_membership(change, false)
        .await
        .map_err(refusal)?;
    Ok(())
}

/// Answers a member whose Raft store came back empty under its old id
/// (`RaftRequest::Rejoin`, see [`super::raft::rejoin`]): on the leader,
/// takes `addr` out of the membership, so its replication state (which
/// says it holds the log) is dropped, then adds it back in the background
/// as a learner that catches up from nothing and is then made a voter.
///
/// # Errors
/// When this node is not the leader or the removal is refused.
pub(crate) async fn readmit(raft: &Raft<TypeConfig>, addr: &str) -> Result<(), String> {
    let id = node_id(addr);
    let (leader, known) = {
        let m = raft.metrics();
        let m = m.borrow();
        let known = m.membership_config.membership().get_node(&id).is_some();
        (m.state == ServerState::Leader, known)
    };
    if !leader {
        return Err("this node is not the Raft leader; ask the leader".into());
    }
    if known {
        tracing::warn!(
            member = addr,
            id,
            "a member came back with an empty Raft store: removing its old id before adding it back as a learner"
        );
        remove(raft, addr).await.map_err(|f| f.text.into_owned())?;
    }
    let raft = raft.clone();
    let addr = addr.to_owned();
    tokio::spawn(async move {
        match add(&raft, &addr).await {
            Ok(()) => {
                tracing::info!(member = %addr, "rejoined member caught up and is a voter again")
            }
            Err(f) => {
                tracing::error!(member = %addr, error = %f.text, "adding back a rejoining member failed")
            }
        }
    });
    Ok(())
}

fn refusal(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> Failure {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => Failure::new(
            503,
            "this node stopped being the Raft leader during the change; try again",
        ),
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            Failure::new(409, format!("membership change refused: {e}"))
        }
        RaftError::Fatal(e) => Failure::new(503, format!("the Raft engine stopped: {e}")),
    }
}

/// The membership as JSON: `{"voters":[...],"learners":[...]}`, addresses
/// sorted.
fn describe(raft: &Raft<TypeConfig>) -> Vec<u8> {
    let m = raft.metrics();
    let m = m.borrow();
    let ms = m.membership_config.membership();
    let voters: BTreeSet<NodeId> = ms.voter_ids().collect();
    let mut v: Vec<&str> = Vec::new();
    let mut l: Vec<&str> = Vec::new();
    for (id, node) in ms.nodes() {
        if voters.contains(id) {
            v.push(&node.addr);
        } else {
            l.push(&node.addr);
        }
    }
    v.sort_unstable();
    l.sort_unstable();
    serde_json::to_vec(&serde_json::json!({ "voters": v, "learners": l })).unwrap_or_default()
}

/// Hands every membership the Raft group settles on to Distro, on every
/// node, until the engine stops. A node not yet in any group (joining)
/// keeps its configured list.
pub(crate) async fn follow(app: Arc<App>, cluster: Arc<Cluster>, raft: Raft<TypeConfig>) {
    let mut rx = raft.metrics();
    let mut last: Vec<String> = Vec::new();
    loop {
        let addrs: Vec<String> = {
            let m = rx.borrow();
            let mut v: Vec<String> = m
                .membership_config
                .membership()
                .nodes()
                .map(|(_, n)| n.addr.clone())
                .collect();
            v.sort();
            v
        };
        if !addrs.is_empty() && addrs != last {
            cluster.set_members(&app, &addrs);
            last = addrs;
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}
