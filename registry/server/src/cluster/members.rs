//! Membership: the member list, each peer's state from probes, and the view
//! that decides which node is responsible for a service.
//!
//! The list starts as configured (`--members`); with Raft it then follows
//! the Raft group's membership, which operators change at run time
//! ([`super::membership`]): [`Cluster::set_members`] swaps the peers in,
//! keeping the links and states of those that stay.
//!
//! Every node probes every peer each interval (`POST /v1/core/cluster/report`
//! carrying its own readiness). A peer that answers is UP when it has loaded
//! its snapshot and STARTING before; after `probe_failures` failures in a row
//! it is DOWN. A report received from a peer counts as an answer too.
//!
//! The view is the sorted list of UP members, this node included once it
//! is ready; a service's responsible node is `responsible_index(grouped
//! name, view length)` in it, as Nacos's `DistroMapper` computes. When the
//! view changes, this node renews the leases of every service it gains
//! *before* publishing the view, so the sweeper never expires a service it
//! just took over on beats that went to the previous owner.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use registry_core::{Millis, ServiceKey};
use registry_proto::distro::{self, Envelope, Report};
use registry_proto::http1::Method;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

use super::link::Link;
use super::verify::{Repair, Round};
use super::{incarnation, ClusterConfig, ClusterStats, Dirty, Stamp};
use crate::clock::Clock;
use crate::state::App;

/// A peer's state as this node sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum MemberState {
    /// Not heard from yet.
    Unknown = 0,
    /// Answers, but has not loaded its snapshot.
    Starting = 1,
    /// Answers and serves.
    Up = 2,
    /// Failed the configured number of probes in a row.
    Down = 3,
}

impl MemberState {
    fn from_u8(v: u8) -> MemberState {
        match v {
            1 => MemberState::Starting,
            2 => MemberState::Up,
            3 => MemberState::Down,
            _ => MemberState::Unknown,
        }
    }

    /// Nacos's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Unknown | MemberState::Starting => "STARTING",
            MemberState::Up => "UP",
            MemberState::Down => "DOWN",
        }
    }
}

/// Another member, with its links.
pub(crate) struct Peer {
    pub addr: String,
    relay: [Link; 2],
    next_relay: AtomicUsize,
    /// Replication, checksums, fetches and snapshots.
    pub sync: Link,
    probe: Link,
    state: AtomicU8,
    fails: AtomicU32,
    last_ms: AtomicU64,
    /// The newest report heard from it: (incarnation, `Report::seq`).
    last_report: Mutex<(u64, u64)>,
    /// Its Raft role and log position as it last reported them.
    raft: Mutex<Option<distro::RaftMemberView>>,
    /// Its 2.x connections and clients as it last reported them.
    clients: Mutex<Option<distro::ClientCounts>>,
}

impl Peer {
    fn new(addr: SocketAddr, config: &ClusterConfig) -> Peer {
        Peer {
            addr: addr.to_string(),
            relay: [
                Link::new(addr, config.relay_timeout),
                Link::new(addr, config.relay_timeout),
            ],
            next_relay: AtomicUsize::new(0),
            // Snapshot parts and large batches may take a while.
            sync: Link::new(addr, config.relay_timeout.max(Duration::from_secs(10))),
            probe: Link::new(addr, config.probe_interval.max(Duration::from_millis(200))),
            state: AtomicU8::new(MemberState::Unknown as u8),
            fails: AtomicU32::new(0),
            last_ms: AtomicU64::new(0),
            last_report: Mutex::new((0, 0)),
            raft: Mutex::new(None),
            clients: Mutex::new(None),
        }
    }

    /// Its Raft state as it last reported it.
    pub fn raft(&self) -> Option<distro::RaftMemberView> {
        self.raft.lock().clone()
    }

    /// Its 2.x connections and clients as it last reported them.
    pub fn clients(&self) -> Option<distro::ClientCounts> {
        *self.clients.lock()
    }

    /// Takes `report` as an answer unless it is older than one already
    /// heard from the same incarnation (see `Report::seq`); returns whether
    /// it was taken.
    fn heard(&self, report: &Report) -> bool {
        if report.seq != 0 {
            let mut last = self.last_report.lock();
            if last.0 == report.node && report.seq <= last.1 {
                return false;
            }
            *last = (report.node, report.seq);
        }
        self.answered(report.ready);
        if report.raft.is_some() {
            *self.raft.lock() = report.raft.clone();
        }
        if report.clients.is_some() {
            *self.clients.lock() = report.clients;
        }
        true
    }

    pub fn state(&self) -> MemberState {
        MemberState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// One of the pooled relay links, in turn.
    pub fn relay_link(&self) -> &Link {
        let i = self.next_relay.fetch_add(1, Ordering::Relaxed);
        &self.relay[i % self.relay.len()]
    }

    fn answered(&self, ready: bool) {
        self.fails.store(0, Ordering::Release);
        self.last_ms.store(Clock::wall_ms(), Ordering::Release);
        let state = if ready {
            MemberState::Up
        } else {
            MemberState::Starting
        };
        self.state.store(state as u8, Ordering::Release);
    }

    pub fn failed(&self, limit: u32) {
        let fails = self.fails.fetch_add(1, Ordering::AcqRel) + 1;
        if fails >= limit {
            self.state.store(MemberState::Down as u8, Ordering::Release);
        }
    }
}

/// Who is responsible for what: the sorted UP members and this node's
/// place among them (`None` while it is not ready).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    up: Vec<String>,
    me: Option<usize>,
}

impl View {
    /// What this view's checksum rounds carry (`Checksums::view`).
    pub fn fingerprint(&self) -> u64 {
        distro::view_fingerprint(&self.up)
    }

    /// The index of the node responsible for `grouped_name`, if any is up.
    fn owner_index(&self, grouped_name: &str) -> Option<usize> {
        (!self.up.is_empty()).then(|| distro::responsible_index(grouped_name, self.up.len()))
    }

    fn owns(&self, grouped_name: &str) -> bool {
        self.me.is_some() && self.owner_index(grouped_name) == self.me
    }
}

/// Who answers for a service.
pub enum Owner {
    /// This node.
    Me,
    /// Another member, by address.
    Peer(String),
    /// Nobody is up (this node is starting alone).
    Nobody,
}

/// The cluster state shared by the request path and the cluster's tasks.
pub struct Cluster {
    /// The configuration.
    pub config: ClusterConfig,
    /// This process's incarnation id.
    pub node: u64,
    /// The other members; replaced whole when the membership changes.
    peers: ArcSwap<Vec<Arc<Peer>>>,
    view: ArcSwap<View>,
    /// Serialises [`Cluster::update_view`]: the probe loop and the report
    /// route both recompute it, and a slower caller must not publish an
    /// older view over a newer one.
    view_update: Mutex<()>,
    pub(super) ready: AtomicBool,
    /// Woken when the node stops being ready (it must load a snapshot).
    pub(super) reload: Notify,
    pub(super) member_ips: ArcSwap<HashSet<IpAddr>>,
    pub(super) dirty: Dirty,
    repairs: OnceLock<mpsc::Sender<Repair>>,
    /// Monotonic ms when the last probe round ended.
    last_round: Stamp,
    /// Services a checksum round missed once, with the sender and the
    /// view they were missed in; dropped when the same sender misses them
    /// again in the same view (see `verify::drop_unlisted`).
    pub(super) suspects: Mutex<HashMap<ServiceKey, (String, u64)>>,
    /// Counts this node's view changes: a suspicion from an earlier view
    /// says nothing about the owner of now.
    pub(super) view_epoch: AtomicU64,
    /// Counts the reports this node builds (`Report::seq`).
    report_seq: AtomicU64,
    /// Checksum rounds being received, per sender.
    pub(super) rounds: Mutex<HashMap<String, Round>>,
    /// Service states arriving in parts.
    pub(super) datum_parts: Mutex<super::parts::Parts<registry_proto::distro::Datum>>,
    /// Nacos 2.x clients: native ones and synced copies.
    pub clients: super::clients::ClientSync,
    /// Counters for `/metrics`.
    pub stats: Arc<ClusterStats>,
    /// The Raft database, opened at configuration, until the engine starts.
    pub(super) raft_pending: Option<super::raft::Pending>,
    /// The Raft group once its engine runs.
    pub(super) consensus: OnceLock<Arc<super::raft::Consensus>>,
}

impl Cluster {
    /// The cluster for `config`. A member list of one is ready at once.
    ///
    /// # Errors
    /// When the OS gives no randomness for the incarnation id.
    pub fn new(config: ClusterConfig) -> anyhow::Result<Cluster> {
        let mut peers = Vec::new();
        let mut member_ips = HashSet::new();
        for m in &config.members {
            let addr: SocketAddr = m.parse()?;
            member_ips.insert(addr.ip());
            if *m == config.me {
                continue;
            }
            peers.push(Arc::new(Peer::new(addr, &config)));
        }
        let alone = peers.is_empty();
        let cluster = Cluster {
            node: incarnation()?,
            peers: ArcSwap::from_pointee(peers),
            view: ArcSwap::from_pointee(View {
                up: Vec::new(),
                me: None,
            }),
            view_update: Mutex::new(()),
            ready: AtomicBool::new(alone),
            reload: Notify::new(),
            member_ips: ArcSwap::from_pointee(member_ips),
            dirty: Dirty::default(),
            repairs: OnceLock::new(),
            last_round: Stamp::new(),
            suspects: Mutex::new(HashMap::new()),
            view_epoch: AtomicU64::new(0),
            report_seq: AtomicU64::new(0),
            rounds: Mutex::new(HashMap::new()),
            datum_parts: Mutex::new(super::parts::Parts::default()),
            clients: super::clients::ClientSync::new(
                config.client_grace,
                config.client_verify_interval,
            ),
            stats: Arc::default(),
            raft_pending: match &config.raft {
                Some(settings) => Some(super::raft::Pending::open(settings.clone())?),
                None => None,
            },
            consensus: OnceLock::new(),
            config,
        };
        cluster.view.store(Arc::new(cluster.compute_view()));
        Ok(cluster)
    }

    pub(super) fn set_repairs(&self, tx: mpsc::Sender<Repair>) {
        let _ = self.repairs.set(tx);
    }

    pub(super) fn repairs(&self) -> Option<&mpsc::Sender<Repair>> {
        self.repairs.get()
    }

    /// The other members now (a snapshot: the list may change after).
    pub(crate) fn peers(&self) -> Arc<Vec<Arc<Peer>>> {
        self.peers.load_full()
    }

    pub(crate) fn peer(&self, addr: &str) -> Option<Arc<Peer>> {
        self.peers.load().iter().find(|p| p.addr == addr).cloned()
    }

    /// Every member's address now, this node's included, sorted.
    pub fn member_addresses(&self) -> Vec<String> {
        let mut all: Vec<String> = self.peers.load().iter().map(|p| p.addr.clone()).collect();
        all.push(self.config.me.clone());
        all.sort();
        all
    }

    /// Makes `members` (addresses; this node's may be among them) the
    /// member list: peers that stay keep their links and states, new ones
    /// start unknown, and the view is recomputed at once. Returns whether
    /// anything changed.
    pub fn set_members(&self, app: &App, members: &[String]) -> bool {
        let mut wanted: Vec<String> = members.to_vec();
        wanted.sort();
        wanted.dedup();
        if wanted.iter().all(|m| *m != self.config.me) {
            tracing::warn!(me = %self.config.me, ?wanted, "this node is not among the members any more");
        }
        let old = self.peers.load_full();
        let mut next = Vec::with_capacity(wanted.len());
        let mut ips = HashSet::new();
        for m in &wanted {
            let Ok(addr) = m.parse::<SocketAddr>() else {
                tracing::warn!(member = %m, "ignoring a member that is not ip:port");
                continue;
            };
            ips.insert(addr.ip());
            if *m == self.config.me {
                continue;
            }
            match old.iter().find(|p| p.addr == *m) {
                Some(p) => next.push(p.clone()),
                None => next.push(Arc::new(Peer::new(addr, &self.config))),
            }
        }
        let same =
            next.len() == old.len() && next.iter().zip(old.iter()).all(|(a, b)| a.addr == b.addr);
        if same {
            return false;
        }
        if let Ok(me) = self.config.me.parse::<SocketAddr>() {
            ips.insert(me.ip());
        }
        tracing::info!(members = ?wanted, "cluster membership changed");
        self.member_ips.store(Arc::new(ips));
        self.peers.store(Arc::new(next));
        self.update_view(app);
        true
    }

    /// The node responsible for `grouped_name` in the current view.
    pub fn owner(&self, grouped_name: &str) -> Owner {
        let view = self.view.load();
        match view.owner_index(grouped_name) {
            None => Owner::Nobody,
            Some(i) if Some(i) == view.me => Owner::Me,
            Some(i) if self.peers.load().iter().any(|p| p.addr == view.up[i]) => {
                Owner::Peer(view.up[i].clone())
            }
            Some(_) => Owner::Nobody,
        }
    }

    /// The fingerprint of this node's current view (`Checksums::view`).
    pub(super) fn view_fingerprint(&self) -> u64 {
        self.view.load().fingerprint()
    }

    /// Whether this node is responsible for `key` now.
    pub fn owns(&self, key: &ServiceKey) -> bool {
        self.view.load().owns(key.grouped_name())
    }

    /// Whether the member at `addr` is responsible for `key` in this
    /// node's view.
    pub fn owned_by(&self, key: &ServiceKey, addr: &str) -> bool {
        let view = self.view.load();
        view.owner_index(key.grouped_name())
            .is_some_and(|i| view.up[i] == addr)
    }

    /// Whether this node may act as the owner of its services at `now`
    /// (expire them, send their checksums): it is ready and its view is
    /// current. A node whose probe rounds stopped (it was frozen, or
    /// starved) holds a stale replica: the beats and writes may have gone to
    /// a node that took its services over, and checksums sent from that
    /// replica would make its peers fetch and adopt the stale state.
    ///
    /// It must also see at least half the members UP (itself included). A
    /// node cut off from the rest sees only itself and would own every
    /// service; the beats of their instances go to the other side, so
    /// expiring them there would only produce deletes that its checksums
    /// spread once the partition heals (an instance beating through the
    /// majority would vanish from it).
    pub fn may_act_as_owner(&self, now: Millis) -> bool {
        let stale_after = self.config.probe_interval.as_millis() as u64 * 3 + 1_000;
        let members = self.peers.load().len() + 1;
        self.is_ready()
            && now.0.saturating_sub(self.last_round.get()) <= stale_after
            && self.view.load().up.len() * 2 >= members
    }

    /// The members as Nacos lists them, this node first.
    pub fn member_states(&self) -> Vec<(String, MemberState, u64, u32)> {
        let me = if self.is_ready() {
            MemberState::Up
        } else {
            MemberState::Starting
        };
        let mut out = vec![(self.config.me.clone(), me, Clock::wall_ms(), 0)];
        for p in self.peers.load().iter() {
            out.push((
                p.addr.clone(),
                p.state(),
                p.last_ms.load(Ordering::Acquire),
                p.fails.load(Ordering::Acquire),
            ));
        }
        out
    }

    /// A report from `from` arrived: it is alive. The view follows at once,
    /// not at the end of this node's next probe round: a member listed UP
    /// is then already the one writes for its services are relayed to (a
    /// write served here on a stale view would be dropped by its owner's
    /// checksums).
    pub(super) fn heard_from(&self, app: &App, from: &str, report: &Report) {
        if let Some(p) = self.peer(from) {
            if p.heard(report) {
                self.update_view(app);
            } else {
                self.stats.stale_reports.inc();
            }
        }
    }

    /// This node's report to its peers; `connections`: its gRPC
    /// connections now.
    pub(super) fn report(&self, connections: u64) -> Report {
        Report {
            node: self.node,
            ready: self.is_ready(),
            raft: self.consensus().map(|c| c.position().view()),
            clients: Some(self.client_counts(connections)),
            seq: self.report_seq.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }

    /// This node's 2.x connections and clients.
    pub fn client_counts(&self, connections: u64) -> distro::ClientCounts {
        let (native, synced) = self.clients.counts();
        distro::ClientCounts {
            connections,
            native_clients: native as u64,
            synced_clients: synced as u64,
        }
    }

    /// Marks this node ready (snapshot loaded) or not (must load one).
    pub(super) fn set_ready(&self, app: &App, ready: bool) {
        let was = self.ready.swap(ready, Ordering::AcqRel);
        if was && !ready {
            self.reload.notify_one();
        }
        self.update_view(app);
    }

    fn compute_view(&self) -> View {
        let mut up: Vec<String> = self
            .peers
            .load()
            .iter()
            .filter(|p| p.state() == MemberState::Up)
            .map(|p| p.addr.clone())
            .collect();
        if self.is_ready() {
            up.push(self.config.me.clone());
        }
        up.sort();
        let me = up.iter().position(|a| *a == self.config.me);
        View { up, me }
    }

    /// Recomputes the view; on a change, first renews the leases of every
    /// service this node gains, then publishes it.
    pub(super) fn update_view(&self, app: &App) {
        let _one = self.view_update.lock();
        let next = self.compute_view();
        let old = self.view.load_full();
        if *old == next {
            return;
        }
        let now = app.clock.now();
        // Only a node whose copy is current hands its services over (one
        // cut off or frozen until now holds what may be stale).
        let acting = self.may_act_as_owner(now);
        let mut renewed = 0;
        let mut handed: Vec<(ServiceKey, String)> = Vec::new();
        app.store.for_each_service(|snap| {
            let name = snap.key().grouped_name();
            if next.owns(name) && !old.owns(name) {
                renewed += app.store.refresh_leases(snap.key().as_ref(), now);
            } else if acting && old.owns(name) && !next.owns(name) {
                if let Some(i) = next.owner_index(name) {
                    handed.push((snap.key().clone(), next.up[i].clone()));
                }
            }
        });
        self.stats.view_changes.inc();
        self.stats.takeover_leases.add(renewed as u64);
        tracing::info!(up = ?next.up, me = ?next.me, renewed, handed = handed.len(), "cluster view changed");
        self.view.store(Arc::new(next));
        self.view_epoch.fetch_add(1, Ordering::AcqRel);
        super::replicate::hand_over(app, self, handed);
    }

    /// The envelope of a peer message from this node.
    pub(super) fn envelope<T>(&self, body: T) -> Envelope<T> {
        Envelope {
            v: distro::VERSION,
            from: self.config.me.clone(),
            node: self.node,
            secret: self.config.secret.clone(),
            body,
        }
    }
}

/// Probes every peer each interval until `cancel` fires, and keeps the view
/// current. A round that ends long after the previous one means this process
/// was frozen or starved: it stops serving and reloads a snapshot, since
/// its peers may have taken its services over meanwhile.
pub(crate) async fn probe_loop(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    let interval = cluster.config.probe_interval;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    cluster.last_round.set(app.clock.now().0);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let started = app.clock.now();
        let gap = started.0.saturating_sub(cluster.last_round.get());
        if gap > interval.as_millis() as u64 * 3 + 1_000 && cluster.is_ready() {
            tracing::warn!(
                gap_ms = gap,
                "probe rounds stalled; reloading the cluster snapshot"
            );
            cluster.set_ready(&app, false);
        }
        probe_round(&app, &cluster, app.grpc.hub.len() as u64).await;
        cluster.last_round.set(app.clock.now().0);
        cluster.update_view(&app);
    }
}

/// Probes every peer once; the view follows each answer as it comes (see
/// [`Cluster::heard_from`]), not only the round's slowest.
async fn probe_round(app: &App, cluster: &Arc<Cluster>, connections: u64) {
    let report = distro::encode(&cluster.envelope(cluster.report(connections)));
    let mut probes = tokio::task::JoinSet::new();
    for peer in cluster.peers().iter() {
        let cluster = cluster.clone();
        let report = report.clone();
        let peer = peer.clone();
        probes.spawn(async move {
            let mut request = Vec::with_capacity(report.len() + 160);
            distro::write_peer_request(
                &mut request,
                Method::Post,
                distro::REPORT_PATH,
                &peer.addr,
                &report,
            );
            let answer = peer.probe.call(request).await;
            match answer.ok().filter(|a| a.status == 200).and_then(|a| {
                distro::decode_answer::<Report>(&a.body, cluster.config.max_message).ok()
            }) {
                // An answer older than a report the peer sent since says
                // nothing either way (they crossed).
                Some(r) => {
                    if !peer.heard(&r) {
                        cluster.stats.stale_reports.inc();
                    }
                }
                None => peer.failed(cluster.config.probe_failures),
            }
        });
    }
    while probes.join_next().await.is_some() {
        cluster.update_view(app);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ClusterConfig {
        ClusterConfig {
            me: "127.0.0.1:1".into(),
            members: vec!["127.0.0.1:1".into(), "127.0.0.1:2".into()],
            probe_interval: Duration::from_millis(200),
            probe_failures: 3,
            sync_window: Duration::from_millis(10),
            verify_interval: Duration::from_millis(500),
            relay_timeout: Duration::from_secs(1),
            secret: None,
            max_message: 1 << 20,
            client_grace: Duration::from_secs(3),
            client_verify_interval: Duration::from_secs(1),
            raft: None,
        }
    }

    fn report(node: u64, seq: u64) -> Report {
        Report {
            node,
            ready: true,
            raft: None,
            clients: None,
            seq,
        }
    }

    #[test]
    fn a_report_delivered_late_does_not_bring_a_dead_peer_back() {
        let peer = Peer::new("127.0.0.1:2".parse().unwrap(), &config());
        assert!(peer.heard(&report(7, 5)));
        assert_eq!(peer.state(), MemberState::Up);
        for _ in 0..3 {
            peer.failed(3);
        }
        assert_eq!(peer.state(), MemberState::Down);
        // What a socket held when the peer died arrives now: older than
        // what was heard, or the same report again.
        assert!(!peer.heard(&report(7, 4)));
        assert!(!peer.heard(&report(7, 5)));
        assert_eq!(peer.state(), MemberState::Down);
        // The first report of a restarted incarnation is taken, and so is a
        // sender that does not count (0) without resetting the count.
        assert!(peer.heard(&report(8, 1)));
        assert_eq!(peer.state(), MemberState::Up);
        assert!(peer.heard(&report(8, 0)));
        assert!(!peer.heard(&report(8, 1)));
        assert!(peer.heard(&report(8, 2)));
    }
}
