//! Raft messages between members: `POST /nacos/v1/core/raft` on each
//! member's API port, the body a cluster envelope (version, sender,
//! secret) around a [`RaftRequest`], the answer a [`RaftAnswer`].
//!
//! Sending: one pipelined keep-alive [`Link`] per peer for appends and
//! votes, and another for snapshot chunks, so a large snapshot never delays
//! the heartbeats that keep a leader in place. A peer that does not answer
//! within the link's timeout is reported to openraft as unreachable (it
//! backs off); an answer that does not decode is a network error.
//!
//! Receiving ([`serve`]): the cluster's `admit` has already checked the
//! sender (member IP, member address, secret) and decoded the message
//! within `--max-body-bytes`; the message goes to the local engine.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use parking_lot::Mutex;
use registry_proto::distro::{self, Envelope, VERSION};
use registry_proto::http1::Method;
use registry_proto::raft::{NodeId, RaftAnswer, RaftRequest, TypeConfig, RAFT_PATH};

use super::super::link::Link;
use super::Shared;

/// The sender's identity, put in every envelope.
#[derive(Clone)]
pub struct Sender {
    /// This node's advertised address.
    pub me: String,
    /// This process's incarnation.
    pub node: u64,
    /// The cluster secret, if any.
    pub secret: Option<String>,
    /// Largest answer accepted.
    pub max_message: usize,
}

struct PeerLinks {
    addr: String,
    rpc: Link,
    snapshot: Link,
}

/// Builds a client per peer. Links are made the first time openraft asks
/// for a member (the membership names its address, so members added at run
/// time need nothing else) and kept as long as the engine.
#[derive(Clone)]
pub struct Network {
    sender: Sender,
    peers: Arc<Mutex<HashMap<NodeId, Arc<PeerLinks>>>>,
    rpc_timeout: Duration,
    shared: Arc<Shared>,
}

impl Network {
    /// A network whose RPCs time out after `rpc_timeout` (snapshot chunks
    /// after at least 10 s).
    pub fn new(sender: Sender, rpc_timeout: Duration, shared: Arc<Shared>) -> Network {
        Network {
            sender,
            peers: Arc::new(Mutex::new(HashMap::new())),
            rpc_timeout,
            shared,
        }
    }

    /// The links to `target` at `addr`; `None` when the address does not
    /// parse (the member is then unreachable).
    fn links(&self, target: NodeId, addr: &str) -> Option<Arc<PeerLinks>> {
        let mut peers = self.peers.lock();
        if let Some(l) = peers.get(&target).filter(|l| l.addr == addr) {
            return Some(l.clone());
        }
        let sock: SocketAddr = addr.parse().ok()?;
        let links = Arc::new(PeerLinks {
            addr: addr.to_owned(),
            rpc: Link::new(sock, self.rpc_timeout),
            snapshot: Link::new(sock, self.rpc_timeout.max(Duration::from_secs(10))),
        });
        peers.insert(target, links.clone());
        Some(links)
    }
}

/// A client for one peer.
pub struct Client {
    target: NodeId,
    links: Option<Arc<PeerLinks>>,
    sender: Sender,
    shared: Arc<Shared>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Client;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Client {
        Client {
            target,
            links: self.links(target, &node.addr),
            sender: self.sender.clone(),
            shared: self.shared.clone(),
        }
    }
}

type Rpc<T, E = RaftError<NodeId>> = Result<T, RPCError<NodeId, BasicNode, E>>;

fn unreachable<E: std::error::Error>(text: String) -> RPCError<NodeId, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&std::io::Error::other(text)))
}

fn network<E: std::error::Error>(text: String) -> RPCError<NodeId, BasicNode, E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(text)))
}

// The error type is openraft's, fixed by the `RaftNetwork` signatures.
#[allow(clippy::result_large_err)]
impl Client {
    async fn call<E: std::error::Error>(
        &self,
        message: RaftRequest,
        snapshot: bool,
    ) -> Rpc<RaftAnswer, E> {
        let Some(links) = &self.links else {
            return Err(unreachable(format!("node {} is not a member", self.target)));
        };
        let body = distro::encode(&Envelope {
            v: VERSION,
            from: self.sender.me.clone(),
            node: self.sender.node,
            secret: self.sender.secret.clone(),
            body: message,
        });
        self.shared.stats.bytes_sent.add(body.len() as u64);
        let mut request = Vec::with_capacity(body.len() + 160);
        distro::write_peer_request(&mut request, Method::Post, RAFT_PATH, &links.addr, &body);
        let link = if snapshot {
            &links.snapshot
        } else {
            &links.rpc
        };
        let answer = link.call(request).await.map_err(unreachable)?;
        if answer.status != 200 {
            return Err(network(format!(
                "{} answered {}: {}",
                links.addr,
                answer.status,
                String::from_utf8_lossy(&answer.body)
            )));
        }
        distro::decode_answer::<RaftAnswer>(&answer.body, self.sender.max_message.max(1 << 20) * 4)
            .map_err(|e| network(format!("{}: {e}", links.addr)))
    }

    fn remote<T, E: std::error::Error>(
        &self,
        r: Result<T, RaftError<NodeId, E>>,
    ) -> Rpc<T, RaftError<NodeId, E>> {
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Client {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<NodeId>> {
        match self.call(RaftRequest::Append(rpc), false).await? {
            RaftAnswer::Append(r) => self.remote(r),
            _ => Err(network("answer of another kind to an append".into())),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Rpc<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> {
        let bytes = rpc.data.len() as u64;
        let answer = self.call(RaftRequest::Snapshot(rpc), true).await?;
        self.shared.stats.snapshot_chunks_sent.inc();
        self.shared.stats.snapshot_bytes_sent.add(bytes);
        match answer {
            RaftAnswer::Snapshot(r) => self.remote(r),
            _ => Err(network("answer of another kind to a snapshot chunk".into())),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Rpc<VoteResponse<NodeId>> {
        match self.call(RaftRequest::Vote(rpc), false).await? {
            RaftAnswer::Vote(r) => self.remote(r),
            _ => Err(network("answer of another kind to a vote".into())),
        }
    }
}

/// Hands a received message from member `from` to the local engine; the
/// answer to send back.
pub async fn serve(consensus: &super::Consensus, from: &str, message: RaftRequest) -> RaftAnswer {
    let (raft, shared) = (&consensus.raft, &consensus.shared);
    match message {
        RaftRequest::Append(r) => RaftAnswer::Append(raft.append_entries(r).await),
        RaftRequest::Vote(r) => RaftAnswer::Vote(raft.vote(r).await),
        RaftRequest::Snapshot(r) => {
            shared.stats.snapshot_chunks_received.inc();
            shared
                .stats
                .snapshot_bytes_received
                .add(r.data.len() as u64);
            RaftAnswer::Snapshot(raft.install_snapshot(r).await)
        }
        RaftRequest::Propose(command) => RaftAnswer::Propose(consensus.propose_here(command).await),
        RaftRequest::Rejoin => {
            RaftAnswer::Rejoin(super::super::membership::readmit(raft, from).await)
        }
    }
}

/// The links a follower hands client writes to the leader over (their
/// own, so a burst of writes never queues behind the engine's appends).
/// Made the first time a member leads, by the address the group's
/// membership names for it, so a leader added at run time (`registry
/// members add`) is reached like one from the start list.
pub struct Forwarder {
    sender: Sender,
    timeout: Duration,
    links: Mutex<HashMap<String, Arc<Link>>>,
}

impl Forwarder {
    /// A forwarder whose exchanges time out after `timeout`.
    pub fn new(sender: Sender, timeout: Duration) -> Forwarder {
        Forwarder {
            sender,
            timeout,
            links: Mutex::new(HashMap::new()),
        }
    }

    /// The link to the leader at `addr`, made on first use.
    fn link(&self, addr: &str) -> Result<Arc<Link>, String> {
        let mut links = self.links.lock();
        if let Some(l) = links.get(addr) {
            return Ok(l.clone());
        }
        let sock: SocketAddr = addr.parse().map_err(|_| {
            format!("the Raft leader's address {addr:?} is not ip:port; the write was not applied")
        })?;
        let link = Arc::new(Link::new(sock, self.timeout));
        links.insert(addr.to_owned(), link.clone());
        Ok(link)
    }

    /// Sends `command` to the leader at `addr` to propose; its outcome
    /// there, or why there is none (the text says whether it was applied).
    pub async fn propose(
        &self,
        addr: &str,
        command: registry_proto::raft::Command,
    ) -> Result<registry_proto::raft::Outcome, String> {
        let link = self.link(addr)?;
        let body = distro::encode(&Envelope {
            v: VERSION,
            from: self.sender.me.clone(),
            node: self.sender.node,
            secret: self.sender.secret.clone(),
            body: RaftRequest::Propose(command),
        });
        let mut request = Vec::with_capacity(body.len() + 160);
        distro::write_peer_request(&mut request, Method::Post, RAFT_PATH, addr, &body);
        let answer = match link.call(request).await {
            Ok(a) => a,
            // Never sent: the leader cannot have applied it.
            Err(e) if e.starts_with("connecting to") => {
                return Err(format!(
                    "the Raft leader {addr} is unreachable ({e}); the write was not applied, please retry"
                ))
            }
            Err(e) => {
                return Err(format!(
                    "no answer from the Raft leader {addr}: {e}; the write was not acknowledged, please retry"
                ))
            }
        };
        if answer.status != 200 {
            return Err(format!(
                "the Raft leader {addr} answered {}: {}; the write was not acknowledged",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            ));
        }
        match distro::decode_answer::<RaftAnswer>(
            &answer.body,
            self.sender.max_message.max(1 << 20),
        ) {
            Ok(RaftAnswer::Propose(r)) => r,
            Ok(_) => Err(format!(
                "{addr} answered a proposal with another kind; the write was not acknowledged"
            )),
            Err(e) => Err(format!("{addr}: {e}; the write was not acknowledged")),
        }
    }
}
