//! Persistent data in a cluster: one Raft group over the members, run by
//! the `openraft` engine (CP, next to Distro's AP for ephemeral data).
//!
//! Present when the registry runs with both `--members` and `--data-dir`.
//! Every write of persistent data (register, update, patch or deregister
//! of a persistent instance; create, update or delete of a service; the
//! leader's health verdicts) is a typed command in the Raft log
//! (`registry_proto::raft::Command`, versioned):
//!
//! - a client write reaching the leader is queued for the proposer
//!   ([`propose`]), which puts every command waiting into one entry and
//!   keeps a few entries in flight, so one fsync and one round trip serve
//!   many writes; the client is answered with the outcome of applying its
//!   command on the leader, i.e. only once it is committed;
//! - a client write reaching a follower is relayed unchanged to the leader
//!   over the cluster's pooled links and its answer returned as it came
//!   ([`client`]); with no leader, or on a node cut off from the majority,
//!   it is refused with a 503 that says so, and nothing is applied;
//! - a write made on a follower by another door (gRPC, the health checker)
//!   is handed to the leader as its typed command ([`net::Forwarder`]);
//! - every node applies committed commands to its own store through the
//!   one write path ([`crate::write`], from [`machine`]); reads stay local.
//!
//! Storage is redb under `--data-dir` ([`log`]: log and vote; the state
//! machine's snapshot in the same file). Peer messages travel over HTTP on
//! the members' API ports ([`net`]). Health checks of persistent instances
//! run on the leader only and propose their verdicts.

pub mod client;
pub mod log;
pub mod machine;
pub mod net;
mod propose;
mod rejoin;
mod renumber;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use openraft::{BasicNode, Raft, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use redb::Database;
use registry_proto::raft::{Command, NodeId, Outcome, TypeConfig};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::{Counter, Histogram};
use crate::state::App;
use crate::write::WriteError;
use registry_proto::prometheus::{Exposition, Kind};

/// Bounds of the commit-latency histogram, in microseconds.
const COMMIT_BOUNDS_US: [u64; 14] = [
    250, 500, 1_000, 2_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    5_000_000, 30_000_000,
];

/// What `--data-dir` with `--members` configures.
#[derive(Clone, Debug)]
pub struct RaftSettings {
    /// The data directory.
    pub dir: PathBuf,
    /// Page cache of the database, in bytes.
    pub cache_bytes: usize,
    /// Shortest election timeout (the longest is twice this).
    pub election_timeout: Duration,
    /// Leader heartbeat interval.
    pub heartbeat: Duration,
    /// Entries applied between two snapshots.
    pub snapshot_logs: u64,
    /// How long a client write waits for its commit.
    pub write_timeout: Duration,
    /// Joins an existing group (`--cluster-join`) instead of starting one.
    pub join: bool,
    /// Free space kept in reserve under the data directory.
    pub min_free: u64,
}

/// Counters of the Raft group, rendered into `/metrics`.
pub struct RaftStats {
    /// Client writes committed through this node as leader.
    pub committed: Counter,
    /// Commands applied to this node's store.
    pub applied: Counter,
    /// Entries proposed by this node.
    pub proposals: Counter,
    /// Client writes refused (no leader, not leader, timeout, too large).
    pub refused: Counter,
    /// Client writes relayed to the leader.
    pub forwarded: Counter,
    /// Times this node saw the leader change.
    pub leader_changes: Counter,
    /// Snapshots built here.
    pub snapshots_built: Counter,
    /// Snapshots installed from a leader.
    pub snapshots_installed: Counter,
    /// Size of the last snapshot built or installed, in bytes.
    pub snapshot_bytes: AtomicU64,
    /// Snapshot chunks sent to followers.
    pub snapshot_chunks_sent: Counter,
    /// Snapshot bytes sent to followers.
    pub snapshot_bytes_sent: Counter,
    /// Snapshot chunks received.
    pub snapshot_chunks_received: Counter,
    /// Snapshot bytes received.
    pub snapshot_bytes_received: Counter,
    /// Bytes of Raft messages sent.
    pub bytes_sent: Counter,
    /// Proposal to commit and apply on the leader, in µs.
    pub commit_latency: Histogram,
}

impl Default for RaftStats {
    fn default() -> Self {
        RaftStats {
            committed: Counter::default(),
            applied: Counter::default(),
            proposals: Counter::default(),
            refused: Counter::default(),
            forwarded: Counter::default(),
            leader_changes: Counter::default(),
            snapshots_built: Counter::default(),
            snapshots_installed: Counter::default(),
            snapshot_bytes: AtomicU64::new(0),
            snapshot_chunks_sent: Counter::default(),
            snapshot_bytes_sent: Counter::default(),
            snapshot_chunks_received: Counter::default(),
            snapshot_bytes_received: Counter::default(),
            bytes_sent: Counter::default(),
            commit_latency: Histogram::new(&COMMIT_BOUNDS_US),
        }
    }
}

/// What the engine's storage and the rest of the server share.
#[derive(Default)]
pub struct Shared {
    /// Held while the state machine applies entries or installs a snapshot,
    /// and while Distro merges a replicated service state: the merge reads
    /// the persistent part it keeps, so no apply may run in between.
    pub apply_lock: Mutex<()>,
    /// Counters.
    pub stats: RaftStats,
}

/// A client write waiting for its outcome.
pub(crate) struct Proposal {
    command: Command,
    weight: usize,
    done: oneshot::Sender<Result<Outcome, String>>,
}

/// The Raft group as this node runs it.
pub struct Consensus {
    /// The engine.
    pub raft: Raft<TypeConfig>,
    /// This node's id.
    pub id: NodeId,
    /// Addresses of members by id, as the group's membership names them;
    /// kept for the life of the process (see [`Consensus::address`]).
    addresses: Mutex<BTreeMap<NodeId, &'static str>>,
    /// Shared with the storage.
    pub shared: Arc<Shared>,
    queue: mpsc::Sender<Proposal>,
    /// Largest command accepted, in bytes of its JSON.
    pub max_command: usize,
    /// The data directory's free-space check, passed before a proposal.
    pub disk: Arc<crate::disk::Disk>,
    write_timeout: Duration,
    /// Links to hand writes to the leader over.
    forward: net::Forwarder,
}

/// The database opened at configuration time, waiting for [`start`].
pub struct Pending {
    db: Mutex<Option<Database>>,
    /// The settings.
    pub settings: RaftSettings,
}

impl Pending {
    /// Opens the database (so a locked or unreadable one fails the start).
    ///
    /// # Errors
    /// When the database cannot be opened.
    pub fn open(settings: RaftSettings) -> anyhow::Result<Pending> {
        let db = log::open(&settings.dir, settings.cache_bytes)?;
        Ok(Pending {
            db: Mutex::new(Some(db)),
            settings,
        })
    }
}

/// A member's Raft id: a hash (FNV-1a, 64 bits) of its advertised address,
/// so every node derives the same id for an address with nobody handing ids
/// out, and a node added at run time knows its own id before it is added.
pub fn node_id(addr: &str) -> NodeId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in addr.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // openraft reserves no id, but 0 reads as "none" in logs and metrics.
    h.max(1)
}

/// Member ids of `members` (addresses), in the same order.
pub fn member_ids(members: &[String]) -> Vec<(NodeId, String)> {
    members.iter().map(|m| (node_id(m), m.clone())).collect()
}

/// Starts the engine: loads the stored snapshot into the store, opens the
/// log, and initialises the group on first start. Returns the tasks it
/// spawned (proposer, leader watch).
///
/// Longer than 80 lines: one ordered sequence (database, engine settings,
/// state machine with the stored snapshot, log, network, the first start's
/// initialisation, the proposer and its tasks), each step using the ones
/// before it.
///
/// # Errors
/// When the storage cannot be read or the engine refuses its settings.
pub async fn start(
    app: &Arc<App>,
    cluster: &Arc<super::Cluster>,
    pending: &Pending,
) -> anyhow::Result<(Arc<Consensus>, Vec<tokio::task::JoinHandle<()>>)> {
    let settings = &pending.settings;
    let db = Arc::new(
        pending
            .db
            .lock()
            .take()
            .context("the Raft database was already taken")?,
    );
    let shared = Arc::new(Shared::default());
    let members = member_ids(&cluster.config.members);
    let id = members
        .iter()
        .find(|(_, a)| *a == cluster.config.me)
        .map(|(i, _)| *i)
        .context("this node is not in the member list")?;
    let election = settings.election_timeout.as_millis().max(10) as u64;
    let max_message = cluster.config.max_message.max(64 * 1024);
    // Bounds that keep every peer message within the peers' body limit:
    // an entry of at most max/32 bytes, at most 16 entries per append.
    let max_command = max_message / 32;
    let config = openraft::Config {
        cluster_name: "registry".into(),
        election_timeout_min: election,
        election_timeout_max: election * 2,
        heartbeat_interval: (settings.heartbeat.as_millis() as u64).clamp(1, election / 2),
        install_snapshot_timeout: 10_000,
        max_payload_entries: 16,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(settings.snapshot_logs.max(1)),
        snapshot_max_chunk_size: (max_message / 8) as u64,
        max_in_snapshot_log_to_keep: settings.snapshot_logs / 10,
        ..Default::default()
    }
    .validate()
    .context("Raft settings")?;
    let machine = machine::Machine::open(app, db.clone(), shared.clone())?;
    let disk = Arc::new(crate::disk::Disk::new(&settings.dir, settings.min_free));
    let log_store = log::LogStore::new(db, disk.clone());
    let sender = net::Sender {
        me: cluster.config.me.clone(),
        node: cluster.node,
        secret: cluster.config.secret.clone(),
        max_message,
    };
    let sender_copy = sender.clone();
    let forward = net::Forwarder::new(
        sender.clone(),
        settings.write_timeout.max(Duration::from_secs(1)),
    );
    let network = net::Network::new(
        sender,
        Duration::from_millis(election).max(Duration::from_millis(500)),
        shared.clone(),
    );
    let raft = Raft::new(id, Arc::new(config), network, log_store, machine)
        .await
        .context("starting the Raft engine")?;
    refuse_positional_ids(&raft, &settings.dir)?;
    take_part(&raft, cluster, &sender_copy, settings.join, &members).await?;
    let (queue, proposals) = mpsc::channel(16_384);
    let consensus = Arc::new(Consensus {
        raft: raft.clone(),
        id,
        addresses: Mutex::new(BTreeMap::new()),
        shared: shared.clone(),
        queue,
        max_command,
        disk,
        write_timeout: settings.write_timeout,
        forward,
    });
    let tasks = vec![
        tokio::spawn(propose::run(
            raft.clone(),
            proposals,
            shared.clone(),
            settings.write_timeout,
            max_command,
        )),
        tokio::spawn(watch_leader(raft.clone(), shared)),
        tokio::spawn(super::membership::follow(
            app.clone(),
            cluster.clone(),
            raft,
        )),
    ];
    tracing::info!(id, dir = %settings.dir.display(), "Raft group member started");
    Ok((consensus, tasks))
}

/// How a node with no Raft state yet takes part: a joining node waits to be
/// added; an empty member of a group that has data rejoins as a learner
/// ([`rejoin`]); otherwise (first start) it initialises the group.
async fn take_part(
    raft: &Raft<TypeConfig>,
    cluster: &super::Cluster,
    sender: &net::Sender,
    join: bool,
    members: &[(NodeId, String)],
) -> anyhow::Result<()> {
    if raft.is_initialized().await.unwrap_or(true) {
        return Ok(());
    }
    if join {
        // A joining node never starts a group of its own: the leader adds
        // it (`registry members add`), as a learner first.
        tracing::info!("joining: waiting to be added to the Raft group");
        return Ok(());
    }
    if rejoin::decide(cluster, sender).await? == rejoin::Start::Rejoined {
        return Ok(());
    }
    let nodes: BTreeMap<NodeId, BasicNode> = members
        .iter()
        .map(|(i, a)| (*i, BasicNode::new(a)))
        .collect();
    // Every member does this with the same list on its first start;
    // openraft accepts identical initialisations.
    if let Err(e) = raft.initialize(nodes).await {
        tracing::debug!(error = %e, "Raft group already initialised");
    }
    Ok(())
}

/// Refuses a Raft database written by a build that numbered members by
/// their position in the sorted `--members` list (1, 2, 3, ...): its votes
/// and membership name ids this build never uses, so the node could neither
/// vote nor be counted.
fn refuse_positional_ids(raft: &Raft<TypeConfig>, dir: &std::path::Path) -> anyhow::Result<()> {
    let m = raft.metrics().borrow().membership_config.clone();
    for (id, node) in m.membership().nodes() {
        if *id != node_id(&node.addr) {
            anyhow::bail!(
                "{}/raft.redb names member {} by id {id}, as builds before member ids were \
                 hashed from addresses did; this build cannot use it. Move the data directory \
                 away and start with an empty one: the node then loads the persistent data \
                 from the other members (start every member so if the whole cluster is old)",
                dir.display(),
                node.addr
            );
        }
    }
    Ok(())
}

/// Counts leader changes as this node sees them.
async fn watch_leader(raft: Raft<TypeConfig>, shared: Arc<Shared>) {
    let mut rx = raft.metrics();
    let mut leader = rx.borrow().current_leader;
    while rx.changed().await.is_ok() {
        let now = rx.borrow().current_leader;
        if now != leader {
            if now.is_some() {
                shared.stats.leader_changes.inc();
            }
            tracing::info!(leader = ?now, "Raft leader changed");
            leader = now;
        }
    }
}

/// This node's Raft position, as `/cluster/nodes` and `/metrics` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// `LEADER`, `FOLLOWER`, `CANDIDATE`, `LEARNER` or `SHUTDOWN`.
    pub role: &'static str,
    /// Current term.
    pub term: u64,
    /// Index of the last log entry.
    pub last_log: u64,
    /// Index of the last applied entry.
    pub applied: u64,
    /// The leader's address, if one is known.
    pub leader: Option<NodeId>,
}

impl Position {
    /// As the member list shows it.
    pub fn view(&self) -> registry_proto::distro::RaftMemberView {
        registry_proto::distro::RaftMemberView {
            role: self.role.to_owned(),
            term: self.term,
            last_log_index: self.last_log,
            applied_index: self.applied,
        }
    }
}

impl Consensus {
    /// This node's role and log position now.
    pub fn position(&self) -> Position {
        let m = self.raft.metrics().borrow().clone();
        Position {
            role: role_name(m.state),
            term: m.current_term,
            last_log: m.last_log_index.unwrap_or(0),
            applied: m.last_applied.map_or(0, |l| l.index),
            leader: m.current_leader,
        }
    }

    /// The leader's index of each member's matched log (known on the leader only).
    pub fn matched(&self) -> BTreeMap<NodeId, u64> {
        let m = self.raft.metrics().borrow().clone();
        m.replication
            .map(|r| {
                r.into_iter()
                    .map(|(id, l)| (id, l.map_or(0, |l| l.index)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The address of member `id`, as the group's membership names it.
    ///
    /// Addresses are leaked once each, to hand out plain borrows for the
    /// life of the process: one per member ever seen, a few bytes each.
    pub fn address(&self, id: NodeId) -> Option<&str> {
        let mut known = self.addresses.lock();
        if let Some(a) = known.get(&id) {
            return Some(*a);
        }
        let addr = {
            let m = self.raft.metrics();
            let m = m.borrow();
            m.membership_config.membership().get_node(&id)?.addr.clone()
        };
        let addr: &'static str = Box::leak(addr.into_boxed_str());
        known.insert(id, addr);
        Some(addr)
    }

    /// Queues `command` for the next entry; resolves with its outcome on
    /// this node (the leader) once committed and applied.
    pub(crate) fn propose(
        &self,
        command: Command,
        weight: usize,
    ) -> oneshot::Receiver<Result<Outcome, String>> {
        let (done, outcome) = oneshot::channel();
        // Refused before it is in the log: a leader whose own append would
        // fail would stop its engine (see `crate::disk`).
        if let Err(full) = self.disk.check() {
            self.shared.stats.refused.inc();
            let _ = done.send(Err(full.to_string()));
            return outcome;
        }
        if let Err(e) = self.queue.try_send(Proposal {
            command,
            weight,
            done,
        }) {
            let (proposal, text) = match e {
                mpsc::error::TrySendError::Full(p) => (
                    p,
                    "too many writes waiting for a Raft commit, please try again later",
                ),
                mpsc::error::TrySendError::Closed(p) => (p, "the server is shutting down"),
            };
            let _ = proposal.done.send(Err(text.to_owned()));
        }
        outcome
    }

    /// How long a write waits for its commit.
    pub fn write_timeout(&self) -> Duration {
        self.write_timeout
    }

    /// Appends the Raft metrics in the Prometheus text format.
    pub fn render(&self, e: &mut Exposition<'_>) {
        let s = &self.shared.stats;
        for (name, help, v) in self.counters() {
            e.counter(name, help, v);
        }
        let p = self.position();
        let gauges = [
            (
                "registry_raft_snapshot_bytes",
                "Size of the last snapshot built or installed.",
                s.snapshot_bytes.load(Ordering::Relaxed),
            ),
            (
                "registry_raft_last_log_index",
                "Index of this node's last log entry.",
                p.last_log,
            ),
            (
                "registry_raft_applied_index",
                "Index of the last entry applied here.",
                p.applied,
            ),
            (
                "registry_raft_leader",
                "Whether this node is the leader.",
                u64::from(p.role == "LEADER"),
            ),
        ];
        for (name, help, v) in gauges {
            e.gauge(name, help, v);
        }
        const COMMIT: &str = "registry_raft_commit_seconds";
        e.family(
            COMMIT,
            Kind::Histogram,
            "Persistent write proposed to committed and applied on the leader.",
        );
        s.commit_latency.render(e, COMMIT, &[], 1e6);
    }

    /// Raft's counters: (name, help, value).
    fn counters(&self) -> [(&'static str, &'static str, u64); 14] {
        let s = &self.shared.stats;
        [
            (
                "registry_raft_committed_total",
                "Client writes committed through this node as leader.",
                s.committed.get(),
            ),
            (
                "registry_raft_applied_total",
                "Commands applied to this node's store.",
                s.applied.get(),
            ),
            (
                "registry_raft_proposals_total",
                "Log entries proposed by this node (each holds many writes).",
                s.proposals.get(),
            ),
            (
                "registry_raft_refused_total",
                "Persistent writes refused: no leader, not committed in time, too large.",
                s.refused.get(),
            ),
            (
                "registry_raft_forwarded_total",
                "Persistent writes relayed to the leader.",
                s.forwarded.get(),
            ),
            (
                "registry_raft_leader_changes_total",
                "Leader changes seen by this node.",
                s.leader_changes.get(),
            ),
            (
                "registry_raft_snapshots_built_total",
                "Snapshots built here.",
                s.snapshots_built.get(),
            ),
            (
                "registry_raft_snapshots_installed_total",
                "Snapshots installed from a leader.",
                s.snapshots_installed.get(),
            ),
            (
                "registry_raft_snapshot_chunks_sent_total",
                "Snapshot chunks sent to followers.",
                s.snapshot_chunks_sent.get(),
            ),
            (
                "registry_raft_snapshot_sent_bytes_total",
                "Snapshot bytes sent to followers.",
                s.snapshot_bytes_sent.get(),
            ),
            (
                "registry_raft_snapshot_chunks_received_total",
                "Snapshot chunks received.",
                s.snapshot_chunks_received.get(),
            ),
            (
                "registry_raft_snapshot_received_bytes_total",
                "Snapshot bytes received.",
                s.snapshot_bytes_received.get(),
            ),
            (
                "registry_raft_sent_bytes_total",
                "Bytes of Raft messages sent.",
                s.bytes_sent.get(),
            ),
            (
                "registry_raft_term",
                "Current term (a counter: it only grows).",
                self.position().term,
            ),
        ]
    }
}

impl Consensus {
    /// Proposes `command` if this node is the leader and waits for its
    /// outcome here; why not, otherwise (the text says it was not applied).
    pub async fn propose_here(&self, command: Command) -> Result<Outcome, String> {
        if self.position().leader != Some(self.id) {
            self.shared.stats.refused.inc();
            return Err(
                "this node is no longer the Raft leader; the write was not applied, please retry"
                    .into(),
            );
        }
        let weight = command.weight();
        match self.propose(command, weight).await {
            Ok(outcome) => outcome,
            Err(_) => Err("the server is shutting down".into()),
        }
    }
}

/// The Raft log as the write path's durable submit: proposed here on the
/// leader, handed to the leader by a follower (as the typed command, over
/// [`net::Forwarder`]), refused without a leader.
impl crate::write::Log for Consensus {
    fn submit(self: Arc<Self>, command: Command) -> crate::write::Pending {
        let weight = command.weight();
        if weight > self.max_command {
            self.shared.stats.refused.inc();
            let limit = self.max_command;
            return Box::pin(std::future::ready(Err(WriteError::TooLarge {
                bytes: weight,
                limit,
            })));
        }
        let position = self.position();
        if position.leader == Some(self.id) {
            let outcome = self.propose(command, weight);
            return Box::pin(async move {
                match outcome.await {
                    Ok(Ok(o)) => crate::write::wire::result(o),
                    Ok(Err(text)) => Err(WriteError::Log(text)),
                    Err(_) => Err(WriteError::Log("the server is shutting down".into())),
                }
            });
        }
        let Some(leader) = position.leader else {
            self.shared.stats.refused.inc();
            return Box::pin(std::future::ready(Err(WriteError::Log(
                "no Raft leader: this node cannot reach a majority of the cluster, so it \
                 accepts no persistent writes; the write was not applied"
                    .into(),
            ))));
        };
        Box::pin(async move {
            // The leader's address as the group's membership names it now,
            // so a leader added at run time is reached too.
            let Some(addr) = self.address(leader) else {
                self.shared.stats.refused.inc();
                return Err(WriteError::Log(format!(
                    "the Raft leader (node {leader}) is not in this node's membership yet; the \
                     write was not applied, please retry"
                )));
            };
            match self.forward.propose(addr, command).await {
                Ok(o) => {
                    self.shared.stats.forwarded.inc();
                    crate::write::wire::result(o)
                }
                Err(text) => {
                    self.shared.stats.refused.inc();
                    Err(WriteError::Log(text))
                }
            }
        })
    }
}

/// Health checks in a Raft cluster: run on the leader only; its verdicts
/// go through the write path, which proposes them.
pub struct LeaderChecks(pub Arc<super::Cluster>);

impl crate::health::Verdicts for LeaderChecks {
    fn checks_here(&self) -> bool {
        self.0
            .consensus()
            .is_some_and(|c| c.raft.metrics().borrow().state == ServerState::Leader)
    }
}

fn role_name(s: ServerState) -> &'static str {
    match s {
        ServerState::Leader => "LEADER",
        ServerState::Follower => "FOLLOWER",
        ServerState::Candidate => "CANDIDATE",
        ServerState::Learner => "LEARNER",
        ServerState::Shutdown => "SHUTDOWN",
    }
}
