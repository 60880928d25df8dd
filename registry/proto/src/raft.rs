//! The Raft group's wire formats: what a log entry holds ([`Batch`] of
//! [`Command`]s), what applying it answers ([`Outcome`]), and the peer
//! messages between nodes ([`RaftRequest`], [`RaftAnswer`]).
//!
//! Persistent instances and explicitly created services are replicated by
//! the `openraft` engine; this module only names its type configuration
//! ([`TypeConfig`]) and the shapes that travel. A command is a client's
//! write as the naming API received it (which endpoint, its parameters,
//! its `User-Agent`), so every node applies it through the same handler the
//! HTTP API uses; health verdicts decided by the leader's checks are the
//! one command the server makes itself.
//!
//! Peer messages travel as the body of `POST` [`RAFT_PATH`] inside the
//! cluster's [`crate::distro::Envelope`] (version, sender, secret), decoded
//! with [`crate::distro::decode`]: bounded, version first, then shape.
//! Nothing here opens a socket.

use std::io::Cursor;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

pub use crate::distro::RAFT_PATH;

/// A member's Raft node id.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The registry's Raft types: entries carry [`Batch`]es, applying one
    /// answers [`Outcomes`]; snapshots are bytes in memory.
    pub TypeConfig:
        D = Batch,
        R = Outcomes,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        SnapshotData = Cursor<Vec<u8>>,
);

/// The naming API endpoints whose persistent writes are Raft commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WriteOp {
    /// `POST /nacos/v1/ns/instance`
    Register,
    /// `PUT /nacos/v1/ns/instance`
    Update,
    /// `DELETE /nacos/v1/ns/instance`
    Deregister,
    /// `PATCH /nacos/v1/ns/instance`
    Patch,
    /// `POST /nacos/v1/ns/service`
    ServiceCreate,
    /// `PUT /nacos/v1/ns/service`
    ServiceUpdate,
    /// `DELETE /nacos/v1/ns/service`
    ServiceDelete,
}

/// One replicated write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Command {
    /// A client's write: the endpoint, its parameters as one
    /// `application/x-www-form-urlencoded` string (query and form body), and
    /// its `User-Agent` (it decides whether an update is strict).
    Write {
        /// The endpoint.
        op: WriteOp,
        /// The parameters, percent-encoded.
        params: String,
        /// The client's `User-Agent`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    /// A health verdict of the leader's checks for a persistent instance.
    Health {
        /// Namespace id.
        namespace: String,
        /// Grouped service name (`group@@name`).
        service: String,
        /// Cluster name.
        cluster: String,
        /// Instance ip.
        ip: String,
        /// Instance port.
        port: u16,
        /// The verdict.
        healthy: bool,
    },
}

impl Command {
    /// Bytes this command adds to an entry, roughly (for batch bounds).
    pub fn weight(&self) -> usize {
        match self {
            Command::Write { params, agent, .. } => {
                64 + params.len() + agent.as_ref().map_or(0, String::len)
            }
            Command::Health {
                namespace,
                service,
                cluster,
                ip,
                ..
            } => 96 + namespace.len() + service.len() + cluster.len() + ip.len(),
        }
    }
}

/// The commands of one log entry, applied in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Batch(pub Vec<Command>);

impl std::fmt::Display for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "batch of {} commands", self.0.len())
    }
}

/// What applying one command answered: the HTTP status, body and its type,
/// as the handler would have answered the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// HTTP status.
    pub status: u16,
    /// Whether the body is JSON (else plain text).
    pub json: bool,
    /// The body.
    pub body: String,
}

/// One [`Outcome`] per command of a [`Batch`], in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes(pub Vec<Outcome>);

/// A Raft peer message (the payload of the envelope).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RaftRequest {
    /// Log replication and heartbeats.
    Append(AppendEntriesRequest<TypeConfig>),
    /// A candidate asks for a vote.
    Vote(VoteRequest<NodeId>),
    /// One chunk of a snapshot.
    Snapshot(InstallSnapshotRequest<TypeConfig>),
}

/// The answer to a [`RaftRequest`] of the same kind (a JSON body with no
/// envelope, read with [`crate::distro::decode_answer`]).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RaftAnswer {
    /// To [`RaftRequest::Append`].
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// To [`RaftRequest::Vote`].
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// To [`RaftRequest::Snapshot`].
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distro::{decode, encode, Envelope, VERSION};

    #[test]
    fn a_vote_round_trips_through_the_envelope_and_garbage_is_refused() {
        let m = Envelope {
            v: VERSION,
            from: "127.0.0.1:8848".into(),
            node: 7,
            secret: None,
            body: RaftRequest::Vote(VoteRequest::new(openraft::Vote::new(3, 1), None)),
        };
        let bytes = encode(&m);
        let back: Envelope<RaftRequest> = decode(&bytes, 1 << 20).unwrap();
        assert_eq!(encode(&back), bytes);
        assert!(decode::<RaftRequest>(
            b"{\"v\":1,\"from\":\"x\",\"node\":1,\"body\":{\"vote\":7}}",
            1 << 20
        )
        .is_err());
        assert!(decode::<RaftRequest>(&bytes, 10).is_err());
    }

    #[test]
    fn commands_keep_their_shape() {
        let c = Command::Write {
            op: WriteOp::Register,
            params: "serviceName=a&ip=1.1.1.1&port=1&ephemeral=false".into(),
            agent: None,
        };
        let text = serde_json::to_string(&Batch(vec![c.clone()])).unwrap();
        assert_eq!(
            text,
            r#"[{"kind":"write","op":"register","params":"serviceName=a&ip=1.1.1.1&port=1&ephemeral=false"}]"#
        );
        let back: Batch = serde_json::from_str(&text).unwrap();
        assert_eq!(back.0, vec![c]);
    }
}
