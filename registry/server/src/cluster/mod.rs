//! The registry as a member of a cluster: Distro, as Nacos runs it for
//! ephemeral instances (1.x service-owned, 2.x connection-owned). Absent
//! without `--members`: then nothing here runs and the request path pays
//! one `None` check.
//!
//! - Every node knows every member from a static list and probes the others
//!   ([`members`]); the UP members, sorted, decide each service's
//!   responsible node (Nacos's `DistroMapper` hash).
//! - A client write or beat reaching a node that is not responsible is
//!   relayed to the one that is, once ([`relay`]), over pooled keep-alive,
//!   pipelined peer connections ([`link`]).
//! - The responsible node replicates every changed service's whole state to
//!   every peer, merged per service within a window ([`replicate`]); peers
//!   apply it idempotently by the writer's revision
//!   ([`registry_core::Store::apply_replica`]).
//! - Every few seconds it sends checksums of what it owns; a peer that
//!   differs fetches the service, and drops what the owner no longer has
//!   ([`verify`]). A starting node (or one that was frozen) loads a full
//!   snapshot before it serves ([`verify::load_snapshot`]).
//! - Only the responsible node expires instances, and a node that takes a
//!   service over first gives its instances a fresh lease
//!   ([`members::Cluster::update_view`]).
//! - The peer endpoints ([`api`]) accept only members (and the cluster
//!   secret when one is configured) and bounded, versioned messages.
//!
//! - Nacos 2.x clients are replicated per connection, not per service
//!   ([`clients`]): the node holding a gRPC connection sends its whole
//!   instance set with a revision to every member; peers hold synced
//!   copies, renew them by the owner's verify and drop them after a grace
//!   once it stops. Service states carry only 1.x (heartbeat) instances.
//! - A service's subscriber list on one node covers every member's
//!   subscribers: [`subscribers`] asks the others over a peer route.
//! - Namespaces are cluster-wide: with Raft their changes are log entries;
//!   without, members exchange whole stamped tables (`namespaces`).
//! - A state or client set larger than one peer message travels in parts
//!   and is applied whole once every part arrived (`parts`).
//!
//! Replication consumes the same change events the notifier does
//! ([`Cluster::changed`], the change feed's tap), so every node also pushes
//! replicated changes to its own subscribers.
//!
//! The doors never name this module: the server installs [`hook::Hook`] in
//! `App::cluster` at start, and HTTP, gRPC and the sweeper call it
//! (`state::ClusterHook`).

pub mod api;
pub mod clients;
pub mod hook;
mod link;
pub mod members;
pub mod membership;
mod namespaces;
mod parts;
pub mod raft;
pub mod relay;
mod replicate;
pub(crate) mod subscribers;
pub mod verify;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use parking_lot::Mutex;
use registry_core::{ChangeEvent, ServiceKey};
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::Config;
use crate::metrics::{Counter, Histogram};
use crate::state::App;
use registry_proto::prometheus::{Exposition, Kind};

pub use members::{Cluster, MemberState};

/// Bounds of the replication-lag histogram, in milliseconds.
const LAG_BOUNDS_MS: [u64; 12] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 5_000, 30_000];

/// What the cluster was configured with.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// This node's advertised address.
    pub me: String,
    /// Every member's address, this node's included, sorted.
    pub members: Vec<String>,
    /// How often peers are probed.
    pub probe_interval: Duration,
    /// Failed probes in a row after which a peer is DOWN.
    pub probe_failures: u32,
    /// Window in which changes to one service are merged into one message.
    pub sync_window: Duration,
    /// How often the owner sends its checksums.
    pub verify_interval: Duration,
    /// How long a relayed request may take before it is served locally.
    pub relay_timeout: Duration,
    /// The cluster secret peers must present, if any.
    pub secret: Option<String>,
    /// Largest peer message sent or accepted, in bytes.
    pub max_message: usize,
    /// How long a synced 2.x client lives without its owner renewing it.
    pub client_grace: Duration,
    /// How often a node sends its 2.x clients' revisions to its peers.
    pub client_verify_interval: Duration,
    /// The Raft group of persistent data, with `--data-dir`.
    pub raft: Option<raft::RaftSettings>,
}

impl ClusterConfig {
    /// The cluster part of `config`; `None` without `--members` or
    /// `--members-file` (a single node).
    ///
    /// # Errors
    /// When the member list or secret file cannot be read or makes no sense.
    pub fn from_config(config: &Config) -> anyhow::Result<Option<ClusterConfig>> {
        let mut members: Vec<String> = config.members.clone();
        if let Some(path) = &config.members_file {
            members.extend(read_members_file(path)?);
        }
        if members.is_empty() {
            return Ok(None);
        }
        let mut normalised = Vec::with_capacity(members.len());
        for m in &members {
            let addr: SocketAddr = m
                .trim()
                .parse()
                .with_context(|| format!("member {m:?} is not an ip:port address"))?;
            normalised.push(addr.to_string());
        }
        normalised.sort();
        normalised.dedup();
        let me = match &config.advertise {
            Some(a) => a
                .parse::<SocketAddr>()
                .with_context(|| format!("--advertise {a:?} is not an ip:port address"))?
                .to_string(),
            None => config.listen.to_string(),
        };
        if !normalised.contains(&me) {
            anyhow::bail!(
                "this node's address {me} is not in the member list {normalised:?} \
                 (set --advertise, or --listen with the port the members name)"
            );
        }
        let secret = match &config.cluster_secret_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading --cluster-secret-file {}", path.display()))?;
                let secret = text.trim().to_owned();
                if secret.len() < 16 {
                    anyhow::bail!("the cluster secret must be at least 16 characters");
                }
                Some(secret)
            }
            None if config.auth_users.is_some() => anyhow::bail!(
                "--auth-users in a cluster needs --cluster-secret-file (peers must prove membership)"
            ),
            None => None,
        };
        let raft = config.data_dir.as_ref().map(|dir| raft::RaftSettings {
            dir: dir.clone(),
            cache_bytes: config.data_cache_bytes,
            election_timeout: Duration::from_millis(config.raft_election_timeout_ms.max(10)),
            heartbeat: Duration::from_millis(config.raft_heartbeat_ms.max(1)),
            snapshot_logs: config.raft_snapshot_logs.max(1),
            write_timeout: Duration::from_millis(config.raft_write_timeout_ms.max(1)),
            join: config.cluster_join,
            min_free: config.data_min_free_bytes,
        });
        Ok(Some(ClusterConfig {
            me,
            members: normalised,
            probe_interval: Duration::from_millis(config.cluster_probe_interval_ms.max(1)),
            probe_failures: config.cluster_probe_failures.max(1),
            sync_window: Duration::from_millis(config.distro_sync_window_ms),
            verify_interval: Duration::from_millis(config.distro_verify_interval_ms.max(1)),
            relay_timeout: Duration::from_millis(config.cluster_relay_timeout_ms.max(1)),
            secret,
            max_message: config.max_body_bytes,
            client_grace: Duration::from_millis(config.client_expire_grace_ms.max(1)),
            client_verify_interval: Duration::from_millis(config.client_verify_interval_ms.max(1)),
            raft,
        }))
    }
}

/// Reads Nacos's `cluster.conf`: one `ip:port` per line, `#` comments.
fn read_members_file(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --members-file {}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Counters of the cluster's work, rendered into `/metrics`.
pub struct ClusterStats {
    /// Client requests relayed to the responsible node.
    pub relayed: Counter,
    /// Relays that found the responsible node unreachable (answered 503).
    pub relay_failed: Counter,
    /// Peer reports ignored as older than one already heard (delivered late).
    pub stale_reports: Counter,
    /// Checksum rounds whose sender's view differed from this node's: what
    /// they leave out is not dropped.
    pub rounds_other_view: Counter,
    /// Relayed requests refused because this node is not responsible for
    /// their service (the sender's view of the members differed).
    pub relay_misdirected: Counter,
    /// Relayed request round trips, in microseconds.
    pub relay_latency: Histogram,
    /// Service states sent to peers (one per service per peer).
    pub datums_sent: Counter,
    /// Replication messages that failed to reach a peer.
    pub send_failed: Counter,
    /// Service states too large for one peer message (not replicated;
    /// checksums cannot repair them either).
    pub oversize: Counter,
    /// Service states applied from peers.
    pub datums_applied: Counter,
    /// Service states from peers that were already held (duplicates).
    pub datums_stale: Counter,
    /// Service states from peers refused as invalid.
    pub datums_invalid: Counter,
    /// Time from the owner's change to its application here, in ms.
    pub lag_ms: Histogram,
    /// Services fetched or dropped because a checksum differed.
    pub repairs: Counter,
    /// Peer requests refused (non-member, secret, version, malformed).
    pub refused: Counter,
    /// Times the responsible-node view changed.
    pub view_changes: Counter,
    /// Leases renewed on takeover.
    pub takeover_leases: Counter,
    /// Snapshots loaded from a peer.
    pub snapshots_loaded: Counter,
    /// 2.x client set parts sent to peers (one per part per peer).
    pub client_parts_sent: Counter,
    /// 2.x client revisions and removals applied from peers.
    pub client_sets_applied: Counter,
    /// 2.x clients a peer asked for again (verify found them missing or old).
    pub client_repairs: Counter,
    /// Synced 2.x clients removed because their owner stopped renewing them.
    pub clients_expired: Counter,
    /// Time from a 2.x client's change on its node to its application here, in ms.
    pub client_lag_ms: Histogram,
}

impl Default for ClusterStats {
    fn default() -> Self {
        ClusterStats {
            relayed: Counter::default(),
            relay_failed: Counter::default(),
            relay_misdirected: Counter::default(),
            stale_reports: Counter::default(),
            rounds_other_view: Counter::default(),
            relay_latency: Histogram::latency(),
            datums_sent: Counter::default(),
            send_failed: Counter::default(),
            oversize: Counter::default(),
            datums_applied: Counter::default(),
            datums_stale: Counter::default(),
            datums_invalid: Counter::default(),
            lag_ms: Histogram::new(&LAG_BOUNDS_MS),
            repairs: Counter::default(),
            refused: Counter::default(),
            view_changes: Counter::default(),
            takeover_leases: Counter::default(),
            snapshots_loaded: Counter::default(),
            client_parts_sent: Counter::default(),
            client_sets_applied: Counter::default(),
            client_repairs: Counter::default(),
            clients_expired: Counter::default(),
            client_lag_ms: Histogram::new(&LAG_BOUNDS_MS),
        }
    }
}

/// Changes waiting for the replicator: first wall-clock ms seen and the
/// highest revision, per service.
#[derive(Default)]
pub(crate) struct Dirty {
    services: Mutex<HashMap<ServiceKey, (u64, u64)>>,
    ready: Notify,
}

impl Cluster {
    /// Notes a change for replication. Called for every published change;
    /// the replicator decides later whether this node is responsible.
    pub fn changed(&self, event: &ChangeEvent) {
        let mut map = self.dirty.services.lock();
        let entry = map
            .entry(event.service.clone())
            .or_insert((Clock::wall_ms(), 0));
        entry.1 = entry.1.max(event.revision);
        drop(map);
        self.dirty.ready.notify_one();
    }

    /// Whether a peer request from `ip` may come from a member.
    pub fn is_member_ip(&self, ip: IpAddr) -> bool {
        self.member_ips.load().contains(&ip)
    }

    /// Whether this node has loaded its snapshot and serves clients (and,
    /// with Raft, its engine has loaded the persistent state).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
            && (self.config.raft.is_none() || self.consensus.get().is_some())
    }

    /// The Raft group, once started (`None` without `--data-dir`).
    pub fn consensus(&self) -> Option<&Arc<raft::Consensus>> {
        self.consensus.get()
    }

    /// Whether persistent data is replicated by Raft (Distro must then
    /// leave it alone).
    pub fn raft_enabled(&self) -> bool {
        self.config.raft.is_some()
    }
}

/// Starts the cluster's tasks; each ends when `cancel` fires.
pub fn start(
    app: &Arc<App>,
    cluster: Arc<Cluster>,
    cancel: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (repair_tx, repair_rx) = mpsc::channel(64);
    cluster.set_repairs(repair_tx);
    let mut tasks = Vec::new();
    if cluster.raft_pending.is_some() {
        tasks.push(tokio::spawn(run_raft(
            app.clone(),
            cluster.clone(),
            cancel.clone(),
        )));
    }
    tasks.extend([
        tokio::spawn(members::probe_loop(
            app.clone(),
            cluster.clone(),
            cancel.clone(),
        )),
        tokio::spawn(replicate::run(app.clone(), cluster.clone(), cancel.clone())),
        tokio::spawn(clients::sync_loop(
            app.clone(),
            cluster.clone(),
            cancel.clone(),
        )),
        tokio::spawn(clients::verify_loop(
            app.clone(),
            cluster.clone(),
            cancel.clone(),
        )),
        tokio::spawn(clients::expiry_loop(
            app.clone(),
            cluster.clone(),
            cancel.clone(),
        )),
        tokio::spawn(namespaces::sync_loop(
            app.clone(),
            cluster.clone(),
            cancel.clone(),
        )),
        tokio::spawn(verify::checksum_loop(
            app.clone(),
            cluster.clone(),
            cancel.clone(),
        )),
        tokio::spawn(verify::repair_loop(
            app.clone(),
            cluster.clone(),
            repair_rx,
            cancel.clone(),
        )),
        tokio::spawn(verify::load_snapshot(app.clone(), cluster, cancel.clone())),
    ]);
    tasks
}

/// Starts the Raft engine, runs it until `cancel`, then shuts it down. A
/// node whose engine cannot start (unreadable storage) stops the process:
/// serving without its persistent state would answer wrong lists.
async fn run_raft(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    let Some(pending) = &cluster.raft_pending else {
        return;
    };
    let (consensus, tasks) = match raft::start(&app, &cluster, pending).await {
        Ok(started) => started,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "the Raft engine could not start");
            std::process::exit(1);
        }
    };
    // Persistent writes from every door are proposed from now on.
    app.writer.set_log(consensus.clone());
    let _ = cluster.consensus.set(consensus.clone());
    cancel.cancelled().await;
    if let Err(e) = consensus.raft.shutdown().await {
        tracing::warn!(error = %e, "Raft engine shutdown");
    }
    for t in tasks {
        t.abort();
    }
}

/// A random, non-zero incarnation id.
fn incarnation() -> anyhow::Result<u64> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| anyhow::anyhow!("reading OS randomness: {e}"))?;
    Ok(u64::from_le_bytes(b).max(1))
}

/// A time in ms shared between tasks (the last probe round's end).
pub(crate) struct Stamp(AtomicU64);

impl Stamp {
    fn new() -> Stamp {
        Stamp(AtomicU64::new(0))
    }
    fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::Release);
    }
    fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

impl Cluster {
    /// Appends the cluster's metrics in the Prometheus text format.
    pub fn render(&self, e: &mut Exposition<'_>) {
        let s = &self.stats;
        for (name, help, v) in self.counters() {
            e.counter(name, help, v);
        }
        e.gauge(
            "registry_cluster_ready",
            "Whether this node has loaded its snapshot and serves.",
            u8::from(self.is_ready()),
        );
        const MEMBER_UP: &str = "registry_cluster_member_up";
        e.family(
            MEMBER_UP,
            Kind::Gauge,
            "Member states seen from this node (1 UP, 0 otherwise).",
        );
        for (addr, state, _, _) in self.member_states() {
            let member = addr.to_string();
            let up = u8::from(state == MemberState::Up);
            e.sample(
                MEMBER_UP,
                &[("member", &member), ("state", state.name())],
                up,
            );
        }
        const LAG: &str = "registry_cluster_replication_lag_seconds";
        e.family(
            LAG,
            Kind::Histogram,
            "Owner's change to its application here.",
        );
        s.lag_ms.render(e, LAG, &[], 1e3);
        const CLIENT_LAG: &str = "registry_cluster_client_lag_seconds";
        e.family(
            CLIENT_LAG,
            Kind::Histogram,
            "A 2.x client's change on its node to its application here.",
        );
        s.client_lag_ms.render(e, CLIENT_LAG, &[], 1e3);
        let (native, synced) = self.clients.counts();
        const CLIENTS: &str = "registry_cluster_clients";
        e.family(
            CLIENTS,
            Kind::Gauge,
            "2.x clients held here (native: connected here; synced: copies).",
        );
        e.sample(CLIENTS, &[("kind", "native")], native);
        e.sample(CLIENTS, &[("kind", "synced")], synced);
        const RELAY: &str = "registry_cluster_relay_seconds";
        e.family(RELAY, Kind::Histogram, "Round trip of a relayed request.");
        s.relay_latency.render(e, RELAY, &[], 1e6);
        if let Some(c) = self.consensus() {
            c.render(e);
        }
    }

    /// The cluster's counters: (name, help, value). A table, one row per
    /// counter, hence its length.
    fn counters(&self) -> [(&'static str, &'static str, u64); 20] {
        let s = &self.stats;
        [
            (
                "registry_cluster_client_parts_sent_total",
                "2.x client set parts sent to peers, one per part per peer.",
                s.client_parts_sent.get(),
            ),
            (
                "registry_cluster_client_sets_applied_total",
                "2.x client revisions and removals applied from peers.",
                s.client_sets_applied.get(),
            ),
            (
                "registry_cluster_client_repairs_total",
                "2.x clients a peer asked for again after a verify.",
                s.client_repairs.get(),
            ),
            (
                "registry_cluster_clients_expired_total",
                "Synced 2.x clients removed because their owner stopped renewing them.",
                s.clients_expired.get(),
            ),
            (
                "registry_cluster_relayed_total",
                "Client requests relayed to the responsible node.",
                s.relayed.get(),
            ),
            (
                "registry_cluster_relay_failed_total",
                "Relays that found the responsible node unreachable (answered 503).",
                s.relay_failed.get(),
            ),
            (
                "registry_cluster_stale_reports_total",
                "Peer reports ignored as older than one already heard (delivered late).",
                s.stale_reports.get(),
            ),
            (
                "registry_cluster_rounds_other_view_total",
                "Checksum rounds from a peer whose view of the members differed (nothing dropped on them).",
                s.rounds_other_view.get(),
            ),
            (
                "registry_cluster_relay_misdirected_total",
                "Relayed requests refused (400) because this node is not responsible for their service.",
                s.relay_misdirected.get(),
            ),
            (
                "registry_cluster_datums_sent_total",
                "Service states sent to peers, one per service per peer.",
                s.datums_sent.get(),
            ),
            (
                "registry_cluster_send_failed_total",
                "Peer messages that failed or were refused.",
                s.send_failed.get(),
            ),
            (
                "registry_cluster_oversize_total",
                "Service states too large for one peer message.",
                s.oversize.get(),
            ),
            (
                "registry_cluster_datums_applied_total",
                "Service states from peers applied here.",
                s.datums_applied.get(),
            ),
            (
                "registry_cluster_datums_stale_total",
                "Service states from peers already held.",
                s.datums_stale.get(),
            ),
            (
                "registry_cluster_datums_invalid_total",
                "Service states from peers refused as invalid.",
                s.datums_invalid.get(),
            ),
            (
                "registry_cluster_checksum_repairs_total",
                "Services fetched or dropped because checksums differed.",
                s.repairs.get(),
            ),
            (
                "registry_cluster_peer_refused_total",
                "Peer requests refused (non-member, secret, version, malformed).",
                s.refused.get(),
            ),
            (
                "registry_cluster_view_changes_total",
                "Changes of the responsible-node view.",
                s.view_changes.get(),
            ),
            (
                "registry_cluster_takeover_leases_total",
                "Leases renewed when taking services over.",
                s.takeover_leases.get(),
            ),
            (
                "registry_cluster_snapshots_loaded_total",
                "Full snapshots loaded from a peer.",
                s.snapshots_loaded.get(),
            ),
        ]
    }
}
