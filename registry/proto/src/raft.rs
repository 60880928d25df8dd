//! The Raft group's wire formats: what a log entry holds ([`Batch`] of
//! [`Command`]s), what applying it answers ([`Outcome`]), and the peer
//! messages between nodes ([`RaftRequest`], [`RaftAnswer`]).
//!
//! Persistent instances and explicitly created services are replicated by
//! the `openraft` engine; this module only names its type configuration
//! ([`TypeConfig`]) and the shapes that travel. A command is a typed,
//! protocol-neutral [`Write`] tagged with its format ([`COMMAND_FORMAT`]):
//! whichever door took the write (1.x HTTP, 2.x gRPC, the health checker),
//! every node applies the same write through the server's one write path.
//! Format 1 carried the 1.x query string instead; it still decodes, so old
//! logs can be migrated and older leaders read.
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

/// The format of the commands this build writes into the log. Format 1
/// (before typed commands) carried a 1.x query string per write; it is
/// still read ([`Command::LegacyWrite`], [`Command::LegacyHealth`]) and
/// turned into a typed [`Write`] before it is applied.
pub const COMMAND_FORMAT: u16 = 2;

/// Format 1's naming API endpoints whose persistent writes were Raft
/// commands. Read only: from old logs and from older leaders during a
/// rolling upgrade.
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

/// One replicated write: a typed write of the current format, or one of
/// format 1 to migrate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Command {
    /// A typed write, protocol-neutral: the same whichever door took it.
    Typed {
        /// The format it was written in ([`COMMAND_FORMAT`]); a node
        /// refuses a format it does not know rather than guess.
        v: u16,
        /// The write.
        write: Write,
    },
    /// Format 1: a client's write as the 1.x API received it: the
    /// endpoint, its parameters as one `application/x-www-form-urlencoded`
    /// string (query and form body), and its `User-Agent`.
    #[serde(rename = "write")]
    LegacyWrite {
        /// The endpoint.
        op: WriteOp,
        /// The parameters, percent-encoded.
        params: String,
        /// The client's `User-Agent`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
    },
    /// Format 1: a health verdict of the leader's checks.
    #[serde(rename = "health")]
    LegacyHealth {
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
    /// `write` in the current format.
    pub fn typed(write: Write) -> Command {
        Command::Typed {
            v: COMMAND_FORMAT,
            write,
        }
    }

    /// Whether this command is of format 1.
    pub fn is_legacy(&self) -> bool {
        !matches!(self, Command::Typed { .. })
    }
}

/// A service: namespace id and grouped name (`group@@name`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    /// Namespace id.
    pub ns: String,
    /// Grouped service name.
    pub name: String,
}

/// Where an instance is: cluster, ip and port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Addr {
    /// Cluster name.
    pub cluster: String,
    /// IP literal.
    pub ip: std::net::IpAddr,
    /// Port.
    pub port: u16,
}

/// Metadata as pairs, in the order they were given.
pub type Pairs = Vec<(String, String)>;

/// An instance's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    /// Where it is.
    pub addr: Addr,
    /// Weight.
    pub weight: f64,
    /// Healthy.
    pub healthy: bool,
    /// Enabled.
    pub enabled: bool,
    /// Persistent instances only travel in the log, but the flag is kept
    /// so a command says what it writes.
    pub ephemeral: bool,
    /// Metadata.
    pub metadata: Pairs,
}

/// A typed write of persistent data (format 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Write {
    /// Register (upsert) an instance; `strict` refuses an unknown one.
    Register {
        /// The service.
        service: Service,
        /// The instance.
        instance: Instance,
        /// An update that must find the instance (Nacos's strict `PUT`).
        #[serde(default)]
        strict: bool,
    },
    /// Deregister an instance.
    Deregister {
        /// The service.
        service: Service,
        /// The instance.
        addr: Addr,
        /// Which of the two instances at the address.
        ephemeral: bool,
    },
    /// Change only the given fields of an instance.
    Patch {
        /// The service.
        service: Service,
        /// The instance.
        addr: Addr,
        /// Which of the two instances at the address.
        ephemeral: bool,
        /// New weight.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<f64>,
        /// New enabled flag.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        enabled: Option<bool>,
        /// New health.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        healthy: Option<bool>,
        /// New metadata (replacing the old).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Pairs>,
    },
    /// Create a service explicitly.
    ServiceCreate {
        /// The service.
        service: Service,
        /// Protect threshold.
        threshold: f32,
        /// Metadata.
        metadata: Pairs,
        /// Selector JSON.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
    },
    /// Update a service's settings.
    ServiceUpdate {
        /// The service.
        service: Service,
        /// Protect threshold.
        threshold: f32,
        /// Metadata, when replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Pairs>,
        /// Selector JSON, when replaced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
    },
    /// Delete a service and its instances.
    ServiceDelete {
        /// The service.
        service: Service,
    },
    /// A health verdict for an instance.
    Health {
        /// The service.
        service: Service,
        /// The instance.
        addr: Addr,
        /// Which of the two instances at the address.
        ephemeral: bool,
        /// The verdict.
        healthy: bool,
    },
    /// Add (or, with `remove`, delete) metadata keys of several instances.
    Metadata {
        /// The service.
        service: Service,
        /// The instances.
        addrs: Vec<Addr>,
        /// Which of the two instances at each address.
        ephemeral: bool,
        /// The pairs to set (or whose keys to remove).
        metadata: Pairs,
        /// Remove the keys instead of setting them.
        #[serde(default)]
        remove: bool,
    },
    /// Edit the operator's layer at several addresses (added after
    /// format 2's first writes, like the namespaces).
    Override {
        /// The service.
        service: Service,
        /// The addresses.
        addrs: Vec<Addr>,
        /// The edit.
        edit: LayerEdit,
    },
    /// Create a namespace (added after format 2's first writes: a log
    /// written before holds none, so it reads as it did).
    NamespaceCreate {
        /// The namespace.
        namespace: Namespace,
    },
    /// Change a namespace's name, description and quotas.
    NamespaceUpdate {
        /// The namespace.
        namespace: Namespace,
    },
    /// Delete a namespace. The proposer checked that it holds no services;
    /// every node deletes it alike, whatever its own store holds then.
    NamespaceDelete {
        /// The namespace id.
        id: String,
    },
}

/// An edit of an operator's layer (`registry_core::OverrideEdit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LayerEdit {
    /// The whole layer.
    Replace {
        /// Weight.
        weight: f64,
        /// Enabled.
        enabled: bool,
        /// Metadata.
        metadata: Pairs,
    },
    /// The given fields; metadata replaced whole.
    Patch {
        /// Weight.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<f64>,
        /// Enabled.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        enabled: Option<bool>,
        /// Metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metadata: Option<Pairs>,
    },
    /// Keys put into the layer.
    Put {
        /// The pairs.
        metadata: Pairs,
    },
    /// Keys removed from the layer.
    Remove {
        /// The pairs whose keys go.
        metadata: Pairs,
    },
}

/// A namespace as the log carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    /// Its id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub desc: String,
    /// Most services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_services: Option<u32>,
    /// Most instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_instances: Option<u32>,
}

impl Command {
    /// Bytes this command adds to an entry, roughly (for batch bounds).
    pub fn weight(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |v| v.len())
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

/// Why the store refused a command: the core's error, by name, so the
/// door that waits renders it in its own format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "reason")]
pub enum Refusal {
    /// No such service.
    ServiceNotFound,
    /// No such instance.
    InstanceNotFound,
    /// No such cluster.
    ClusterNotFound,
    /// The service exists already.
    ServiceExists,
    /// Weight out of range.
    InvalidWeight,
    /// Protect threshold out of range.
    InvalidProtectThreshold,
    /// Metadata refused.
    InvalidMetadata,
    /// A `preserved.*` timeout that is not a positive number.
    InvalidTimeout {
        /// The metadata key.
        key: String,
    },
    /// An empty name.
    InvalidName,
    /// The service holds its maximum of instances.
    TooManyInstances {
        /// The limit.
        limit: u64,
    },
    /// The registry holds its maximum of services.
    TooManyServices {
        /// The limit.
        limit: u64,
    },
    /// A command this node cannot apply (a format-1 write whose parameters
    /// do not parse, or a format it does not know); the text says why.
    Invalid {
        /// Why.
        text: String,
    },
    /// The node is shutting down.
    Stopped,
    /// A namespace with this id exists already.
    NamespaceExists {
        /// The id.
        id: String,
    },
    /// No namespace has this id.
    NamespaceNotFound {
        /// The id.
        id: String,
    },
}

/// What applying one command did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Applied; the service's revision after it.
    Applied {
        /// The revision.
        revision: u64,
    },
    /// Refused; nothing changed.
    Refused(Refusal),
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
    /// A follower hands a client's write to the leader to propose.
    Propose(Command),
    /// A member whose Raft store is empty asks the leader to take its old
    /// id out of the membership and add it back as a learner (the sender's
    /// address is the envelope's `from`).
    Rejoin,
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
    /// To [`RaftRequest::Propose`]: the outcome of applying it on the
    /// leader once committed, or why it was not (no longer leader, not
    /// committed in time).
    Propose(Result<Outcome, String>),
    /// To [`RaftRequest::Rejoin`]: the old id is out of the membership and
    /// the leader is adding the sender back, or why not.
    Rejoin(Result<(), String>),
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
    fn format_one_commands_still_decode() {
        let text = r#"[{"kind":"write","op":"register","params":"serviceName=a&ip=1.1.1.1&port=1&ephemeral=false"},{"kind":"health","namespace":"public","service":"G@@a","cluster":"c","ip":"1.1.1.1","port":1,"healthy":false}]"#;
        let back: Batch = serde_json::from_str(text).unwrap();
        assert_eq!(
            back.0[0],
            Command::LegacyWrite {
                op: WriteOp::Register,
                params: "serviceName=a&ip=1.1.1.1&port=1&ephemeral=false".into(),
                agent: None,
            }
        );
        assert!(back.0.iter().all(Command::is_legacy));
        // Written back unchanged: the migration's test writes old logs with it.
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }

    #[test]
    fn typed_commands_carry_their_format() {
        let c = Command::typed(Write::ServiceDelete {
            service: Service {
                ns: "public".into(),
                name: "G@@a".into(),
            },
        });
        let text = serde_json::to_string(&c).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"typed","v":2,"write":{"serviceDelete":{"service":{"ns":"public","name":"G@@a"}}}}"#
        );
        assert_eq!(serde_json::from_str::<Command>(&text).unwrap(), c);
        assert!(!c.is_legacy());
    }
}
