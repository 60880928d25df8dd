//! The peer protocol of a registry cluster (Distro, as Nacos 1.x runs it
//! for ephemeral instances), and Nacos's member list answer.
//!
//! Peers talk HTTP/1.1 to each other's API port. Every peer message body is
//! one JSON object carrying the protocol version, the sender's advertised
//! address and incarnation, and, when the cluster has one, its secret
//! ([`Envelope`]); the payload differs per endpoint:
//!
//! | endpoint | request | answer |
//! |---|---|---|
//! | `POST /nacos/v1/core/cluster/report` | [`Report`] | [`Report`] |
//! | `PUT /nacos/v1/ns/distro/datum` | [`Datums`] (replication) | `ok` |
//! | `PUT /nacos/v1/ns/distro/checksum` | [`Checksums`] | `ok` |
//! | `POST /nacos/v1/ns/distro/datum` | [`Fetch`] | [`Datums`] |
//! | `POST /nacos/v1/ns/distro/datums` | [`SnapshotPart`] | [`Datums`] |
//! | `PUT /nacos/v1/ns/distro/clients` | [`ClientSets`] (2.x clients) | `ok` |
//! | `PUT /nacos/v1/ns/distro/clients/verify` | [`ClientVerify`] | [`ClientVerifyAnswer`] |
//! | `PUT /nacos/v1/ns/distro/namespaces` | [`NamespaceSet`] | [`NamespaceSet`] |
//!
//! Namespaces (a cluster without Raft) travel as the whole table, deletes
//! as tombstones, each entry stamped by the node that last changed it: a
//! receiver keeps, per id, the entry with the higher [`NamespaceEntry::wins`]
//! and answers with its own table, so one exchange converges both sides.
//!
//! Nacos 2.x clients are replicated per client, not per service: the node
//! holding a client's gRPC connection sends the client's whole instance set
//! with its revision ([`ClientPart`]), in parts of at most one message each,
//! and the receiver applies a revision only once every part has arrived.
//! A service state larger than one message travels the same way, as
//! [`Datum`]s with `part`/`parts`.
//!
//! Client writes that reach a node not responsible for their service are
//! relayed to the responsible one with [`write_relayed`], which marks them
//! with the [`RELAYED_BY`] parameter so they are never relayed twice.
//!
//! Decoding is bounded ([`decode`] refuses more than `max` bytes before
//! parsing) and checks the version before the payload, so an old peer gets
//! "unsupported version", not a shape error. Nothing here opens a socket.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::http1::Method;
use crate::naming::route::Route;

/// The protocol version this build speaks. A peer with another version is
/// refused: replication across versions is not defined. Version 2 added
/// 2.x client sets and services in parts; service states no longer carry
/// connection-held instances.
pub const VERSION: u32 = 2;

/// Query parameter marking a client request relayed by a peer; its value
/// is the relaying node's advertised address.
pub const RELAYED_BY: &str = "relayedBy";

/// Path of the member list (Nacos `GET /v1/core/cluster/nodes`).
pub const NODES_PATH: &str = Route::ClusterNodes.path();
/// Path of an operator's membership change: `POST` adds the member named
/// by `address`, `DELETE` removes it.
pub const MEMBER_PATH: &str = Route::ClusterMemberAdd.path();
/// Path of the liveness probe between peers.
pub const REPORT_PATH: &str = Route::ClusterReport.path();
/// Path of replication (`PUT`) and of fetching named services (`POST`).
pub const DATUM_PATH: &str = Route::DistroReplicate.path();
/// Path of the periodic checksums.
pub const CHECKSUM_PATH: &str = Route::DistroChecksum.path();
/// Path of the full snapshot, in parts.
pub const SNAPSHOT_PATH: &str = Route::DistroSnapshot.path();
/// Replicated 2.x client sets.
pub const CLIENTS_PATH: &str = Route::DistroClients.path();
/// A responsible node's client revisions, for renewal and repair.
pub const CLIENT_VERIFY_PATH: &str = Route::DistroClientVerify.path();
/// A node's own push subscribers of one service (the console's and the
/// admin APIs' cluster-wide subscriber lists gather them from every member).
pub const SUBSCRIBERS_PATH: &str = Route::DistroSubscribers.path();
/// A node's namespace table, exchanged both ways (a cluster without Raft).
pub const NAMESPACES_PATH: &str = Route::DistroNamespaces.path();
/// Path of the readiness endpoint (Nacos 2.x's).
pub const READINESS_PATH: &str = Route::Readiness.path();
/// Path of every Raft peer message (`POST`). Here rather than in `raft`,
/// which only builds with the `raft` feature: every node routes it.
pub const RAFT_PATH: &str = Route::RaftRpc.path();

/// Why a peer message was refused. `Display` is the 400 text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DistroError {
    /// Larger than the receiver accepts.
    #[error("peer message of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Another protocol version.
    #[error("unsupported peer protocol version {got}, this node speaks {VERSION}")]
    Version {
        /// The version it named.
        got: u32,
    },
    /// Not a message of the expected shape.
    #[error("malformed peer message: {0}")]
    Malformed(String),
}

/// What every peer message carries besides its payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    /// Protocol version ([`VERSION`]).
    pub v: u32,
    /// The sender's advertised address (`ip:port`), a member's.
    pub from: String,
    /// The sender's incarnation: random per process start, so revisions of
    /// a restarted node are never compared with its previous life's.
    pub node: u64,
    /// The cluster secret when the cluster has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The payload.
    pub body: T,
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

/// Decodes a peer message of at most `max` bytes: size, then version, then
/// shape.
///
/// # Errors
/// [`DistroError`] naming what is wrong.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], max: usize) -> Result<Envelope<T>, DistroError> {
    if bytes.len() > max {
        return Err(DistroError::TooLarge {
            len: bytes.len(),
            max,
        });
    }
    let head: VersionOnly =
        serde_json::from_slice(bytes).map_err(|e| DistroError::Malformed(e.to_string()))?;
    if head.v != VERSION {
        return Err(DistroError::Version { got: head.v });
    }
    serde_json::from_slice(bytes).map_err(|e| DistroError::Malformed(e.to_string()))
}

/// Encodes a peer message.
pub fn encode<T: Serialize>(message: &Envelope<T>) -> Vec<u8> {
    // Serialising these plain structs cannot fail.
    serde_json::to_vec(message).unwrap_or_default()
}

/// Decodes an answer payload that carries no envelope (a [`Datums`] or a
/// [`Report`] answered to our request), bounded like [`decode`].
///
/// # Errors
/// [`DistroError::TooLarge`] or [`DistroError::Malformed`].
pub fn decode_answer<T: DeserializeOwned>(bytes: &[u8], max: usize) -> Result<T, DistroError> {
    if bytes.len() > max {
        return Err(DistroError::TooLarge {
            len: bytes.len(),
            max,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| DistroError::Malformed(e.to_string()))
}

/// Encodes an answer payload.
pub fn encode_answer<T: Serialize>(answer: &T) -> Vec<u8> {
    serde_json::to_vec(answer).unwrap_or_default()
}

/// The probe: "I am alive", and whether the sender serves (has loaded its
/// snapshot). Answered with the receiver's own report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The node's incarnation.
    pub node: u64,
    /// It has loaded its snapshot and serves clients.
    pub ready: bool,
    /// Its Raft role and log position, in a cluster with Raft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raft: Option<RaftMemberView>,
    /// Its 2.x connections and clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<ClientCounts>,
    /// Counts the reports this incarnation built, from 1; 0 from a sender
    /// that does not count. A receiver ignores a report no newer than one it
    /// already has: TCP delivers what a socket had queued even after its
    /// process died (a probe written into a partition arrives once the
    /// partition heals), and such a report must not bring a dead node back.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub seq: u64,
}

/// A node's 2.x connections and clients, for the member list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCounts {
    /// gRPC connections set up on it.
    pub connections: u64,
    /// Its own clients holding instances (one per connection).
    pub native_clients: u64,
    /// Copies of other members' clients it holds.
    pub synced_clients: u64,
}

/// Service states from the node that wrote them (`node`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Datums {
    /// The writing node's incarnation: the origin of every item.
    pub node: u64,
    /// One entry per service.
    pub items: Vec<Datum>,
}

/// One service's state at a revision of its writer, or its removal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Datum {
    /// Namespace id.
    pub ns: String,
    /// Grouped service name.
    pub service: String,
    /// The service's revision on the writing node.
    pub revision: u64,
    /// The incarnation that wrote this state when it is not the message's
    /// sender (0): a replica passed on in a snapshot, a fetch or a
    /// hand-over keeps its writer, so a node never takes an old copy of
    /// its own writes back over what it holds now.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub writer: u64,
    /// Wall-clock ms when the writer first saw the change (0 when not a
    /// fresh change), for the replication-lag metric.
    #[serde(default)]
    pub changed_ms: u64,
    /// The state; `None` when the service was deleted.
    pub state: Option<ServiceState>,
    /// Which part of the state this is (0-based): a state larger than one
    /// message is sent as `parts` datums of one revision, each with a
    /// share of the instances and the same settings.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub part: u32,
    /// How many parts the state has (1 when whole).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub parts: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

fn one() -> u32 {
    1
}

/// Most parts one state or client set may be split into.
pub const MAX_PARTS: u32 = 4096;

/// 2.x client sets, or parts of them, written by the node `node`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSets {
    /// The sender's incarnation.
    pub node: u64,
    /// The parts, in any order.
    pub items: Vec<ClientPart>,
}

/// A part of one client's whole instance set at a revision, or its removal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientPart {
    /// The client id (Nacos's connection id).
    pub client: String,
    /// The client's revision on its responsible node.
    pub revision: u64,
    /// Wall-clock ms when the owner first saw the change (0 when not a
    /// fresh change), for the replication-lag metric.
    #[serde(default)]
    pub changed_ms: u64,
    /// True when the client is gone (its connection closed); then there
    /// are no instances and one part.
    #[serde(default)]
    pub removed: bool,
    /// This part's index.
    #[serde(default)]
    pub part: u32,
    /// How many parts this revision has.
    #[serde(default = "one")]
    pub parts: u32,
    /// This part's share of the instances.
    #[serde(default)]
    pub instances: Vec<ClientInstanceState>,
}

impl ClientPart {
    /// Checks what the types cannot say.
    ///
    /// # Errors
    /// A description of what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if self.client.is_empty() || self.client.len() > 256 {
            return Err("a client id must have 1 to 256 bytes".into());
        }
        if self.parts == 0 || self.parts > MAX_PARTS || self.part >= self.parts {
            return Err(format!(
                "part {} of {} is out of range (at most {MAX_PARTS} parts)",
                self.part, self.parts
            ));
        }
        if self.removed && (self.parts != 1 || !self.instances.is_empty()) {
            return Err("a removal has one part and no instances".into());
        }
        if self.instances.iter().any(|i| !i.instance.ephemeral) {
            return Err("a client set holds ephemeral instances only".into());
        }
        Ok(())
    }
}

/// One instance of a client set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientInstanceState {
    /// Namespace id.
    pub ns: String,
    /// Grouped service name.
    pub service: String,
    /// The instance.
    #[serde(rename = "i")]
    pub instance: InstanceState,
}

/// The revisions of the clients a node is responsible for: a receiver
/// holding each at that revision renews it, and names the others in its
/// answer so the owner sends them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientVerify {
    /// (client id, revision) pairs.
    pub items: Vec<(String, u64)>,
}

/// The clients of a [`ClientVerify`] the receiver does not hold at the
/// listed revision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientVerifyAnswer {
    /// Client ids the owner should send in full.
    pub resend: Vec<String>,
}

/// A service's whole state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceState {
    /// Protect threshold.
    #[serde(deserialize_with = "finite_f32")]
    pub protect_threshold: f32,
    /// Service metadata, as key/value pairs.
    #[serde(default)]
    pub metadata: Vec<(String, String)>,
    /// Raw selector JSON.
    #[serde(default)]
    pub selector: Option<String>,
    /// Created through the service API.
    #[serde(default)]
    pub explicit: bool,
    /// Every instance.
    pub instances: Vec<InstanceState>,
    /// The operator's layers over them (Nacos's instance metadata), by
    /// address; absent from a sender that has none (or predates them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OverrideState>,
}

/// The operator's layer of one address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverrideState {
    /// IP address (text).
    pub ip: String,
    /// Port.
    pub port: u16,
    /// Cluster name.
    pub cluster: String,
    /// Weight laid over the client's.
    pub weight: f64,
    /// Enabled laid over the client's.
    pub enabled: bool,
    /// Metadata put over the client's, as key/value pairs.
    #[serde(default)]
    pub metadata: Vec<(String, String)>,
}

/// An `f32` within its range. serde reads a number beyond it as infinity,
/// which JSON cannot carry (it writes `null`): such a message would not
/// survive its own re-encoding, so it is refused as malformed instead.
fn finite_f32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
    let v = f32::deserialize(d)?;
    match v.is_finite() {
        true => Ok(v),
        false => Err(serde::de::Error::custom("a number beyond the range of f32")),
    }
}

/// One instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceState {
    /// IP address (text).
    pub ip: String,
    /// Port.
    pub port: u16,
    /// Cluster name.
    pub cluster: String,
    /// Weight.
    pub weight: f64,
    /// Health.
    pub healthy: bool,
    /// Enabled.
    pub enabled: bool,
    /// Ephemeral (lives by heartbeat).
    pub ephemeral: bool,
    /// Metadata, as key/value pairs.
    #[serde(default)]
    pub metadata: Vec<(String, String)>,
}

/// Checksums of the services the sender is responsible for, in one part of
/// `parts`: a service is in part `hash % parts` (see [`part_of`]), and a
/// receiver drops services of that part the sender is responsible for that
/// the list does not name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Checksums {
    /// Which part this is.
    pub part: u32,
    /// How many parts the sender split its services into.
    pub parts: u32,
    /// `(namespace, grouped name, checksum)`.
    pub items: Vec<(String, String, u64)>,
    /// The sender's view of the UP members ([`view_fingerprint`]); 0 from a
    /// sender that does not say. A receiver drops what the list leaves out
    /// only when its own view is the same: when two views differ, each node
    /// may take the other for a service's owner, neither lists it, and both
    /// would drop an instance that is beating all along.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub view: u64,
}

/// A fingerprint of a view (the sorted addresses of the UP members), the
/// same on every node whatever its build: FNV-1a over the addresses, each
/// ended by a comma; never 0.
pub fn view_fingerprint(up: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in up
        .iter()
        .flat_map(|a| a.bytes().chain(std::iter::once(b',')))
    {
        h ^= u64::from(byte);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.max(1)
}

/// Longest namespace id an entry may carry (Nacos's 128).
pub const MAX_NAMESPACE_ID: usize = 128;

/// One namespace as a node's table holds it, or its tombstone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceEntry {
    /// The id (never `public`, which every node has built in).
    pub id: String,
    /// When it was last changed: the changing node's wall clock in ms,
    /// moved past every stamp it had seen, so a later change wins.
    pub stamp: u64,
    /// Deleted: a tombstone, so a node that missed the delete drops it.
    #[serde(default)]
    pub deleted: bool,
    /// Display name.
    #[serde(default)]
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

impl NamespaceEntry {
    /// Whether this entry replaces `other` of the same id: the later stamp,
    /// and on equal stamps a fixed order of the contents, so every node
    /// picks the same one.
    pub fn wins(&self, other: &NamespaceEntry) -> bool {
        let key = |e: &NamespaceEntry| {
            (
                e.stamp,
                e.deleted,
                e.name.clone(),
                e.desc.clone(),
                e.max_services,
                e.max_instances,
            )
        };
        key(self) > key(other)
    }
}

/// A node's whole namespace table, tombstones included.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceSet {
    /// The entries, one per id.
    pub items: Vec<NamespaceEntry>,
}

impl NamespaceSet {
    /// The shape checks a receiver makes before merging anything: ids
    /// non-empty, at most [`MAX_NAMESPACE_ID`] bytes, not `public`, each
    /// once. (The table's own rules, run on merge, check the rest.)
    ///
    /// # Errors
    /// The first entry that fails, and why.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::with_capacity(self.items.len());
        for e in &self.items {
            if e.id.is_empty() || e.id.len() > MAX_NAMESPACE_ID {
                return Err(format!(
                    "namespace id of {} bytes (1 to {MAX_NAMESPACE_ID})",
                    e.id.len()
                ));
            }
            if e.id == "public" {
                return Err("the default namespace [public] is not replicated".into());
            }
            if !seen.insert(e.id.as_str()) {
                return Err(format!("namespace [{}] listed twice", e.id));
            }
        }
        Ok(())
    }
}

/// Asks a member for its own subscribers of one service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscribersQuery {
    /// The namespace.
    pub ns: String,
    /// Grouped service name.
    pub service: String,
    /// Most rows to send back (the answer still counts them all).
    pub limit: usize,
}

/// One push subscriber as a node holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriberRow {
    /// `ip:port` pushes go to (a 2.x client's connection address).
    pub addr_str: String,
    /// IP.
    pub ip: String,
    /// Port.
    pub port: u16,
    /// `udp` (1.x) or `grpc` (2.x).
    pub protocol: String,
    /// A 2.x client's version; 1.x subscriptions keep no `User-Agent`.
    pub agent: Option<String>,
    /// The clusters it asked for (empty: all).
    pub clusters: String,
    /// Whether it asked for healthy instances only.
    pub healthy_only: bool,
    /// Milliseconds until its lease lapses (a connection's never does).
    pub expires_in_ms: u64,
    /// The member it is connected to (filled in by the node that gathers).
    #[serde(default)]
    pub node: String,
}

/// A node's answer to a [`SubscribersQuery`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalSubscribers {
    /// How many subscribers it has.
    pub count: usize,
    /// The first `limit` of them.
    pub rows: Vec<SubscriberRow>,
}

/// Services to send in full: `(namespace, grouped name)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fetch {
    /// The services.
    pub keys: Vec<(String, String)>,
}

/// One part of the full snapshot a starting node loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPart {
    /// Which part.
    pub part: u32,
    /// Of how many.
    pub parts: u32,
}

/// The part (of `parts`) a service belongs to: FNV-1a of namespace and
/// name, the same on every node and every build.
pub fn part_of(namespace: &str, name: &str, parts: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in namespace.bytes().chain([0xff]).chain(name.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    (h % u64::from(parts.max(1))) as u32
}

/// Java's `String.hashCode` over UTF-16 code units, which Nacos's
/// `DistroMapper` uses to pick a service's responsible node.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The index of the responsible node among `members` UP members, as Nacos
/// computes it: `abs(hashCode(groupedName) % Integer.MAX_VALUE) % members`.
pub fn responsible_index(grouped_name: &str, members: usize) -> usize {
    let h = java_hash(grouped_name) % i32::MAX;
    (h.unsigned_abs() as usize) % members.max(1)
}

/// Writes a client request relayed to the responsible node: the same
/// method, path, query, `User-Agent`, `Content-Type` and body, plus
/// [`RELAYED_BY`]`=from` in the query.
pub fn write_relayed(out: &mut Vec<u8>, request: &Relayed<'_>, host: &str, from: &str) {
    out.extend_from_slice(request.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(request.path.as_bytes());
    out.push(b'?');
    if !request.query.is_empty() {
        out.extend_from_slice(request.query.as_bytes());
        out.push(b'&');
    }
    out.extend_from_slice(RELAYED_BY.as_bytes());
    out.push(b'=');
    out.extend_from_slice(from.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    if let Some(ua) = request.user_agent {
        out.extend_from_slice(b"\r\nUser-Agent: ");
        out.extend_from_slice(ua.as_bytes());
    }
    if let Some(ct) = request.content_type {
        out.extend_from_slice(b"\r\nContent-Type: ");
        out.extend_from_slice(ct.as_bytes());
    }
    out.extend_from_slice(b"\r\nContent-Length: ");
    out.extend_from_slice(itoa::Buffer::new().format(request.body.len()).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(request.body);
}

/// The parts of a client request that a relay keeps.
#[derive(Debug, Clone, Copy)]
pub struct Relayed<'a> {
    /// The method token as sent.
    pub method: &'a str,
    /// The path.
    pub path: &'a str,
    /// The raw query, without `?`.
    pub query: &'a str,
    /// `User-Agent`, which decides some semantics (strict update).
    pub user_agent: Option<&'a str>,
    /// `Content-Type` (form bodies carry parameters).
    pub content_type: Option<&'a str>,
    /// The body.
    pub body: &'a [u8],
}

/// Writes a peer request with a JSON body.
pub fn write_peer_request(out: &mut Vec<u8>, method: Method, path: &str, host: &str, body: &[u8]) {
    crate::http1::write_request(out, method, path, host, Some(("application/json", body)));
}

/// One member in Nacos's member list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView<'a> {
    /// `ip:port`.
    pub address: &'a str,
    /// `UP`, `DOWN` or `STARTING`.
    pub state: &'a str,
    /// Wall-clock ms of the last successful probe (0: never).
    pub last_refresh_ms: u64,
    /// Failed probes in a row.
    pub fail_count: u32,
    /// The member's Raft role and log position, in a cluster with Raft.
    pub raft: Option<RaftMemberView>,
    /// Its 2.x connections and clients, as it last reported them.
    pub clients: Option<ClientCounts>,
}

/// A member's Raft state as one node knows it, shown in `extendInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RaftMemberView {
    /// `LEADER`, `FOLLOWER`, `CANDIDATE`, `LEARNER`, `SHUTDOWN` or `UNKNOWN`.
    pub role: String,
    /// Its current term.
    pub term: u64,
    /// Index of its last log entry.
    pub last_log_index: u64,
    /// Index of the last entry it applied.
    pub applied_index: u64,
}

/// A member's `extendInfo`: Nacos's `lastRefreshTime`, then its Raft
/// state and its 2.x connections and clients where known.
fn extend_info(m: &MemberView<'_>) -> serde_json::Value {
    let mut info = serde_json::json!({ "lastRefreshTime": m.last_refresh_ms });
    if let Some(r) = &m.raft {
        info["raftRole"] = r.role.clone().into();
        info["raftTerm"] = r.term.into();
        info["raftLastLogIndex"] = r.last_log_index.into();
        info["raftAppliedIndex"] = r.applied_index.into();
    }
    if let Some(c) = &m.clients {
        info["connections"] = c.connections.into();
        info["nativeClients"] = c.native_clients.into();
        info["syncedClients"] = c.synced_clients.into();
    }
    info
}

/// Encodes `GET /nacos/v1/core/cluster/nodes`'s answer as Nacos 1.4 does:
/// `{"code":200,"message":null,"data":[{"ip","port","state","extendInfo":
/// {"lastRefreshTime"},"address","failAccessCnt"}]}`.
pub fn encode_members(out: &mut Vec<u8>, members: &[MemberView<'_>]) {
    let data: Vec<serde_json::Value> = members
        .iter()
        .map(|m| {
            let (ip, port) = m.address.rsplit_once(':').unwrap_or((m.address, "0"));
            serde_json::json!({
                "ip": ip.trim_start_matches('[').trim_end_matches(']'),
                "port": port.parse::<u16>().unwrap_or(0),
                "state": m.state,
                "extendInfo": extend_info(m),
                "address": m.address,
                "failAccessCnt": m.fail_count,
            })
        })
        .collect();
    let body = serde_json::json!({ "code": 200, "message": null, "data": data });
    out.extend_from_slice(body.to_string().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope<T>(body: T) -> Envelope<T> {
        Envelope {
            v: VERSION,
            from: "127.0.0.1:8848".into(),
            node: 42,
            secret: None,
            body,
        }
    }

    #[test]
    fn java_hash_matches_java() {
        // Values from `String.hashCode` in Java.
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(java_hash("hello"), 99_162_322);
        assert_eq!(java_hash("DEFAULT_GROUP@@demo"), {
            let mut h = 0i32;
            for c in "DEFAULT_GROUP@@demo".bytes() {
                h = h.wrapping_mul(31).wrapping_add(i32::from(c));
            }
            h
        });
        // Overflowing, negative: "polygenelubricants" hashes to i32::MIN in Java.
        assert_eq!(java_hash("polygenelubricants"), i32::MIN);
        assert_eq!(responsible_index("polygenelubricants", 3), 1);
    }

    #[test]
    fn view_fingerprints_tell_views_apart_and_old_messages_read_as_unknown() {
        let three: Vec<String> = ["10.0.0.1:8848", "10.0.0.2:8848", "10.0.0.3:8848"]
            .map(String::from)
            .to_vec();
        assert_eq!(view_fingerprint(&three), view_fingerprint(&three.clone()));
        assert_ne!(view_fingerprint(&three), view_fingerprint(&three[..2]));
        assert_ne!(view_fingerprint(&three[..2]), view_fingerprint(&three[1..]));
        assert_ne!(view_fingerprint(&[]), 0);
        // A sender of before these fields: a report without `seq` and
        // checksums without `view` read as 0 ("not said").
        let report: Report = serde_json::from_str(r#"{"node":7,"ready":true}"#).unwrap();
        assert_eq!(report.seq, 0);
        let sums: Checksums = serde_json::from_str(r#"{"part":0,"parts":1,"items":[]}"#).unwrap();
        assert_eq!(sums.view, 0);
        // And a zero is not written, as an old receiver would not expect it.
        let json = serde_json::to_string(&Checksums::default()).unwrap();
        assert!(!json.contains("view"), "{json}");
    }

    #[test]
    fn responsible_index_is_in_range_and_stable() {
        for n in 1..6 {
            for s in ["a", "b", "DEFAULT_GROUP@@x", "ünïcode"] {
                let i = responsible_index(s, n);
                assert!(i < n);
                assert_eq!(i, responsible_index(s, n));
            }
        }
    }

    #[test]
    fn datums_round_trip() {
        let m = envelope(Datums {
            node: 9,
            items: vec![Datum {
                ns: "public".into(),
                service: "DEFAULT_GROUP@@a".into(),
                revision: u64::MAX,
                writer: 3,
                changed_ms: 1,
                state: Some(ServiceState {
                    protect_threshold: 0.5,
                    metadata: vec![("k".into(), "v".into())],
                    selector: None,
                    explicit: false,
                    overrides: Vec::new(),
                    instances: vec![InstanceState {
                        ip: "10.0.0.1".into(),
                        port: 80,
                        cluster: "DEFAULT".into(),
                        weight: 1.5,
                        healthy: true,
                        enabled: true,
                        ephemeral: true,
                        metadata: vec![],
                    }],
                }),
                part: 2,
                parts: 3,
            }],
        });
        let bytes = encode(&m);
        assert_eq!(decode::<Datums>(&bytes, 1 << 20), Ok(m));
    }

    #[test]
    fn client_sets_round_trip_and_bad_parts_are_refused_with_a_reason() {
        let part = ClientPart {
            client: "1700000000000_127.0.0.1_5000".into(),
            revision: 4,
            changed_ms: 9,
            removed: false,
            part: 1,
            parts: 2,
            instances: vec![ClientInstanceState {
                ns: "public".into(),
                service: "DEFAULT_GROUP@@a".into(),
                instance: InstanceState {
                    ip: "10.0.0.1".into(),
                    port: 80,
                    cluster: "DEFAULT".into(),
                    weight: 1.0,
                    healthy: true,
                    enabled: true,
                    ephemeral: true,
                    metadata: vec![],
                },
            }],
        };
        let m = envelope(ClientSets {
            node: 3,
            items: vec![part.clone()],
        });
        assert_eq!(decode::<ClientSets>(&encode(&m), 1 << 20), Ok(m));
        assert_eq!(part.check(), Ok(()));
        let out_of_range = ClientPart {
            part: 2,
            ..part.clone()
        };
        assert!(out_of_range.check().unwrap_err().contains("out of range"));
        let removal_with_instances = ClientPart {
            removed: true,
            parts: 1,
            part: 0,
            ..part.clone()
        };
        assert!(removal_with_instances.check().is_err());
        let mut persistent = part;
        persistent.instances[0].instance.ephemeral = false;
        assert!(persistent.check().unwrap_err().contains("ephemeral"));
    }

    /// Found by `cargo fuzz run distro_message`: a threshold beyond `f32`
    /// read as infinity, which re-encoded as `null` and no longer decoded.
    #[test]
    fn a_threshold_beyond_f32_is_refused() {
        let datums = |threshold: &str| {
            format!(
                r#"{{"v":2,"from":"a","node":1,"body":{{"node":2,"items":[{{"ns":"public","service":"s","revision":1,"state":{{"protect_threshold":{threshold},"instances":[]}}}}]}}}}"#
            )
        };
        let decoded = decode::<Datums>(datums("0.25").as_bytes(), 1 << 20).unwrap();
        let state = decoded.body.items[0].state.as_ref().unwrap();
        assert_eq!(state.protect_threshold, 0.25);
        // Refused by this check, or by serde_json itself where a feature
        // another crate enables makes it range-check floats.
        for beyond in ["4e38", "-1e39"] {
            let refused = decode::<Datums>(datums(beyond).as_bytes(), 1 << 20);
            assert!(
                matches!(refused, Err(DistroError::Malformed(_))),
                "{beyond}: {refused:?}"
            );
        }
    }

    #[test]
    fn refusals_say_why() {
        let bytes = encode(&envelope(Report {
            node: 1,
            ready: true,
            raft: None,
            clients: None,
            seq: 1,
        }));
        assert!(matches!(
            decode::<Report>(&bytes, 10),
            Err(DistroError::TooLarge { max: 10, .. })
        ));
        let old = String::from_utf8(bytes.clone())
            .unwrap()
            .replace("\"v\":2", "\"v\":0");
        assert_eq!(
            decode::<Report>(old.as_bytes(), 1 << 20),
            Err(DistroError::Version { got: 0 })
        );
        assert!(matches!(
            decode::<Datums>(&bytes, 1 << 20),
            Err(DistroError::Malformed(_))
        ));
        assert!(matches!(
            decode::<Report>(b"{", 1 << 20),
            Err(DistroError::Malformed(_))
        ));
    }

    #[test]
    fn relayed_requests_keep_what_matters() {
        let mut out = Vec::new();
        let r = Relayed {
            method: "POST",
            path: "/nacos/v1/ns/instance",
            query: "serviceName=a&ip=1.1.1.1&port=1",
            user_agent: Some("Nacos-Java-Client:v1.4.1"),
            content_type: None,
            body: b"",
        };
        write_relayed(&mut out, &r, "127.0.0.1:2", "127.0.0.1:1");
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(
            "POST /nacos/v1/ns/instance?serviceName=a&ip=1.1.1.1&port=1&relayedBy=127.0.0.1:1 HTTP/1.1\r\n"
        ));
        assert!(text.contains("User-Agent: Nacos-Java-Client:v1.4.1\r\n"));
        assert!(text.ends_with("Content-Length: 0\r\n\r\n"));
    }

    #[test]
    fn members_encode_as_nacos() {
        let mut out = Vec::new();
        encode_members(
            &mut out,
            &[MemberView {
                address: "127.0.0.1:8848",
                state: "UP",
                last_refresh_ms: 5,
                fail_count: 0,
                raft: None,
                clients: Some(ClientCounts {
                    connections: 3,
                    native_clients: 2,
                    synced_clients: 7,
                }),
            }],
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["code"], 200);
        assert_eq!(v["data"][0]["ip"], "127.0.0.1");
        assert_eq!(v["data"][0]["port"], 8848);
        assert_eq!(v["data"][0]["state"], "UP");
        assert_eq!(v["data"][0]["extendInfo"]["lastRefreshTime"], 5);
        assert_eq!(v["data"][0]["extendInfo"]["connections"], 3);
        assert_eq!(v["data"][0]["extendInfo"]["syncedClients"], 7);
    }

    #[test]
    fn parts_cover_and_are_stable() {
        assert_eq!(part_of("public", "a", 1), 0);
        let p = part_of("public", "DEFAULT_GROUP@@a", 7);
        assert!(p < 7);
        assert_eq!(p, part_of("public", "DEFAULT_GROUP@@a", 7));
    }
}
