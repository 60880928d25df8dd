//! What a member does when its Raft store is empty at start: initialise a
//! new group with the others, or rejoin the group they already run.
//!
//! A member's Raft id is a hash of its address, so a member whose data
//! directory was wiped comes back under the id its peers' membership still
//! names as a voter, with no log and no vote. Taking part as that voter is
//! wrong twice over: the leader's replication state says the member holds
//! the log (openraft's "follower log reversion", which stops the member's
//! engine), and counting a voter that lost what it acknowledged in a
//! majority can lose committed entries. So before its engine serves, such
//! a member asks the leader (`RaftRequest::Rejoin`) to take the old id out
//! of the membership and add it back as a learner, which catches up by
//! snapshot and is then made a voter ([`super::super::membership::readmit`]).
//!
//! Which case it is comes from the peers' reports (their Raft role and log
//! position): a peer that leads, or holds entries past the first
//! membership, means a group with data. When every peer answers and none
//! has data, this is the cluster's first start and the member initialises
//! the group with the others, as before. The wait is bounded: a member
//! that sees a group with data but reaches no leader to rejoin through
//! refuses to start, with the reason.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use registry_proto::distro::{self, Envelope, RaftMemberView, VERSION};
use registry_proto::http1::Method;
use registry_proto::raft::{RaftAnswer, RaftRequest, RAFT_PATH};

use super::super::link::Link;
use super::super::members::MemberState;
use super::super::Cluster;
use super::net::Sender;

/// How an empty member takes part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// With the configured members, as a new group (first start).
    Initialize,
    /// The leader took the old id out and adds this node back as a learner.
    Rejoined,
}

/// What the peers' last reports say.
struct Seen {
    /// A peer that reports itself the leader.
    leader: Option<String>,
    /// A peer leads or holds entries past the group's first membership.
    has_data: bool,
    /// Every peer has answered a probe.
    all_answered: bool,
}

fn seen(cluster: &Cluster) -> Seen {
    let mut s = Seen {
        leader: None,
        has_data: false,
        all_answered: true,
    };
    for addr in cluster.config.members.iter() {
        if *addr == cluster.config.me {
            continue;
        }
        let Some(peer) = cluster.peer(addr) else {
            continue;
        };
        if !matches!(peer.state(), MemberState::Starting | MemberState::Up) {
            s.all_answered = false;
        }
        let Some(RaftMemberView {
            role,
            last_log_index,
            ..
        }) = peer.raft()
        else {
            continue;
        };
        if role == "LEADER" {
            s.leader = Some(addr.clone());
        }
        s.has_data |= role == "LEADER" || last_log_index > 0;
    }
    s
}

/// Decides how this member, whose Raft store is empty, takes part; asks
/// the leader to readmit it when the group already has data.
///
/// # Errors
/// When the peers' group has data and no leader readmitted this node
/// within the wait (ten probe intervals, at least 5 s).
pub(super) async fn decide(cluster: &Cluster, sender: &Sender) -> anyhow::Result<Start> {
    if cluster.config.members.len() < 2 {
        return Ok(Start::Initialize);
    }
    let wait = (cluster.config.probe_interval * 10).max(Duration::from_secs(5));
    let deadline = Instant::now() + wait;
    tracing::info!(
        "this node's Raft store is empty: asking the peers whether their group already has data"
    );
    let mut refusal: Option<String> = None;
    loop {
        let s = seen(cluster);
        let mut pause = Duration::from_millis(50);
        if let Some(leader) = &s.leader {
            match ask(sender, leader, wait).await {
                Ok(()) => {
                    tracing::warn!(
                        %leader,
                        "the group already has data and this node's Raft store is empty (its \
                         data directory was lost): the leader removed this node's old id and \
                         adds it back as a learner; it votes again once it has caught up"
                    );
                    return Ok(Start::Rejoined);
                }
                Err(e) => {
                    tracing::warn!(%leader, error = %e, "rejoin refused; retrying");
                    refusal = Some(e);
                    pause = Duration::from_millis(250);
                }
            }
        } else if !s.has_data && s.all_answered {
            tracing::info!("every peer answers and none holds Raft data: first start of the group");
            return Ok(Start::Initialize);
        }
        if Instant::now() >= deadline {
            return give_up(&s, wait, refusal);
        }
        tokio::time::sleep(pause).await;
    }
}

/// At the end of the wait: initialise when no peer showed data (the others
/// are not up yet: a first start), refuse to start otherwise.
fn give_up(s: &Seen, wait: Duration, refusal: Option<String>) -> anyhow::Result<Start> {
    if !s.has_data {
        tracing::warn!(
            "not every peer answered within {} s and none that did holds Raft data: \
             initialising the group as on a first start",
            wait.as_secs()
        );
        return Ok(Start::Initialize);
    }
    let why = refusal.map_or_else(
        || "no peer reported itself the Raft leader".to_owned(),
        |e| format!("the leader refused: {e}"),
    );
    anyhow::bail!(
        "this node's Raft store is empty but its peers' group has data, so it must rejoin as a \
         new learner rather than as the voter it was (it lost its log and vote); within {} s {why}. \
         Start it again once the group has a leader, or remove it (`registry members remove`) and \
         add it back",
        wait.as_secs()
    )
}

/// Sends `RaftRequest::Rejoin` to the leader at `addr`.
async fn ask(sender: &Sender, addr: &str, timeout: Duration) -> Result<(), String> {
    let sock: SocketAddr = addr
        .parse()
        .map_err(|_| format!("{addr:?} is not ip:port"))?;
    let body = distro::encode(&Envelope {
        v: VERSION,
        from: sender.me.clone(),
        node: sender.node,
        secret: sender.secret.clone(),
        body: RaftRequest::Rejoin,
    });
    let mut request = Vec::with_capacity(body.len() + 160);
    distro::write_peer_request(&mut request, Method::Post, RAFT_PATH, addr, &body);
    let answer = Link::new(sock, timeout).call(request).await?;
    if answer.status != 200 {
        return Err(format!(
            "{addr} answered {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    match distro::decode_answer::<RaftAnswer>(&answer.body, 1 << 20) {
        Ok(RaftAnswer::Rejoin(r)) => r,
        Ok(_) => Err(format!("{addr} answered a rejoin with another kind")),
        Err(e) => Err(format!("{addr}: {e}")),
    }
}
