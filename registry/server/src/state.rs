//! The state the request path shares, and who writes what in it.
//!
//! [`App`] is what the doors (HTTP, gRPC, the console) and the cluster see.
//! The long-lived tasks below it take only their pieces, never the whole
//! `App`: the health checker a [`HealthChecks`] (store, change feed, clock,
//! targets, counters, settings), the notifier a [`Pushes`], the sweeper a
//! [`Sweeps`], persistence an `Arc<Store>`, the write path its [`Writer`].
//! So the module graph points one way: the doors and the cluster → `state`
//! → `health`, `notifier`, `sweeper`, `persist`, `events`, `list_cache`,
//! `hub`, `buffers`, `reply`, `config`, …, and none of those reach back into `state`
//! (`tests/module_graph.rs` holds that).
//!
//! The cluster sits above the doors' state, not inside it: `App` holds it
//! as a [`ClusterHook`], which the doors call, so no door names the
//! cluster's modules (see `crate::startup` for how it is installed).
//!
//! - `store`: written by HTTP handlers, the sweeper and the health checker
//!   through its shard locks; read lock-free by everyone.
//! - `subscribers`: written by list handlers (one refresh per subscriber per
//!   poll) and gRPC subscribe requests, read by the notifier when a service
//!   is due; sharded internally (see `registry_core::subscribers`).
//! - `lists`: the encoded-list cache keyed by (service, view) holding one
//!   revision each, filled by whoever encodes first (see [`ListCache`]).
//! - `changes`: change events, sent by every writer, received only by the
//!   notifier (see [`ChangeFeed`]).
//! - `persist`: its queue is written by persistent-write handlers; the
//!   database is owned by the writer thread once it starts.
//! - `health_targets`: written by persistent writes and the restore,
//!   pruned by the health checker; one mutex, never on ephemeral paths.
//! - `grpc`: the gRPC connection table (written by stream tasks) and the
//!   queue of gRPC push acks to the notifier (see [`crate::hub`]).
//! - `auth`: read-only after start.
//! - `door_metrics`: one entry per door, added as the server starts it;
//!   read by `/metrics`.
//! - `cluster`: `None` for a single node; else membership, replication and
//!   relaying behind a [`ClusterHook`] (`crate::cluster::hook`), which also
//!   sees every change event.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use registry_core::{ChangeEvent, Millis, ServiceKey, Store, SubscriberConfig, Subscribers};
use registry_proto::distro::{LocalSubscribers, SubscribersQuery};
use registry_proto::http1::{Limits, Request};
use registry_proto::naming::route::Route;
use registry_proto::naming::ParseLimits;
use registry_proto::params::Params;
use tokio_util::sync::CancellationToken;

use crate::auth::Auth;
use crate::buffers::BufferBudget;
use crate::clock::Clock;
use crate::config::Config;
use crate::events::ChangeFeed;
use crate::health::{HealthChecks, HealthStats, Targets, Verdicts};
use crate::hub::Connection;
use crate::list_cache::ListCache;
use crate::metrics::Metrics;
use crate::notifier::Pushes;
use crate::persist::Persist;
use crate::reply::{Failure, Verdict};
use crate::sweeper::{Owners, Sweeps};
use crate::write::Writer;
use registry_proto::prometheus::Exposition;

/// The server's shared state.
pub struct App {
    /// The configuration it was started with.
    pub config: Config,
    /// The registry.
    pub store: Arc<Store>,
    /// Monotonic and wall time.
    pub clock: Clock,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// HTTP framing limits.
    pub http_limits: Limits,
    /// Parameter size limits.
    pub parse_limits: ParseLimits,
    /// Encoded instance lists.
    pub lists: Arc<ListCache>,
    /// Push subscriptions.
    pub subscribers: Arc<Subscribers>,
    /// Requests being handled now, for the in-flight bound.
    pub inflight: AtomicUsize,
    /// Connection read buffers, within `--max-buffered-bytes`.
    pub buffers: BufferBudget,
    /// The durable store of persistent state; `None` without `--data-dir`.
    pub persist: Option<Arc<Persist>>,
    /// Services holding persistent instances, for the health checker.
    pub health_targets: Arc<Targets>,
    /// Health check counters.
    pub health_stats: Arc<HealthStats>,
    /// Access control; `None` without `--auth-users`.
    pub auth: Option<Arc<Auth>>,
    /// Cluster membership, relaying, Distro and Raft; `None` without
    /// `--members`.
    pub(crate) cluster: Option<Arc<dyn ClusterHook>>,
    /// The gRPC (Nacos 2.x) connections and ack queue.
    pub grpc: Arc<crate::hub::Grpc>,
    /// Change events on their way to the notifier.
    pub changes: Arc<ChangeFeed>,
    /// The one write path every door and writing task goes through.
    pub writer: Writer,
    /// The namespaces, with their quotas (see [`crate::namespaces`]).
    pub namespaces: Arc<crate::namespaces::NamespaceBook>,
    /// The running doors' metric families (see `crate::door`), added as
    /// each starts.
    pub door_metrics: crate::metrics::Board,
}

impl App {
    /// The state of `config` with its parts made (see `crate::startup`):
    /// no cluster yet, no namespaces read.
    pub(crate) fn build(
        config: Config,
        clock: Clock,
        persist: Option<Arc<Persist>>,
        auth: Option<Arc<Auth>>,
        raft: bool,
    ) -> App {
        let store = Arc::new(Store::new(config.store_config()));
        let changes = Arc::<ChangeFeed>::default();
        let health_targets = Arc::<Targets>::default();
        let writer = Writer::new(
            store.clone(),
            changes.clone(),
            health_targets.clone(),
            persist
                .clone()
                .map(|p| p as Arc<dyn crate::persist::Journal>),
            raft,
        );
        App {
            store,
            clock,
            metrics: Arc::default(),
            http_limits: Limits {
                max_url_len: config.max_url_bytes,
                max_head_bytes: config.max_header_bytes,
                max_body: config.max_body_bytes,
                ..Limits::default()
            },
            parse_limits: ParseLimits {
                max_metadata_bytes: config.max_metadata_bytes,
                ..ParseLimits::default()
            },
            lists: Arc::new(ListCache::new(
                config.list_cache_bytes,
                config.list_cache_idle_ms,
            )),
            subscribers: Arc::new(Subscribers::new(SubscriberConfig {
                lease_ms: config.subscriber_lease_ms,
                max_per_ip: config.max_subscribers_per_ip,
                max_total: config.max_subscribers,
            })),
            inflight: AtomicUsize::new(0),
            buffers: BufferBudget::new(config.max_buffered_bytes),
            persist,
            health_targets,
            health_stats: Arc::default(),
            auth,
            cluster: None,
            grpc: Arc::new(crate::hub::Grpc::new(crate::hub::Limits::from_config(
                &config,
            ))),
            changes,
            writer,
            namespaces: Arc::default(),
            door_metrics: crate::metrics::Board::default(),
            config,
        }
    }

    /// What the health checker needs, and nothing else.
    pub fn health_checks(&self) -> HealthChecks {
        HealthChecks {
            store: self.store.clone(),
            writer: self.writer.clone(),
            clock: self.clock.clone(),
            targets: self.health_targets.clone(),
            stats: self.health_stats.clone(),
            settings: self.config.health_settings(),
            verdicts: self.cluster.as_ref().and_then(|c| c.health_verdicts()),
        }
    }

    /// What the notifier needs, and nothing else.
    pub fn pushes(&self) -> Pushes {
        Pushes {
            store: self.store.clone(),
            clock: self.clock.clone(),
            subscribers: self.subscribers.clone(),
            lists: self.lists.clone(),
            changes: self.changes.clone(),
            grpc: self.grpc.clone(),
            metrics: self.metrics.clone(),
            window_ms: self.config.push_window_ms,
            ack_timeout: Duration::from_millis(self.config.push_ack_timeout_ms),
            max_pending: self.config.max_pending_acks,
        }
    }

    /// What the sweeper needs, and nothing else.
    pub fn sweeps(&self) -> Sweeps {
        Sweeps {
            store: self.store.clone(),
            writer: self.writer.clone(),
            clock: self.clock.clone(),
            lists: self.lists.clone(),
            subscribers: self.subscribers.clone(),
            metrics: self.metrics.clone(),
            owners: self
                .cluster
                .clone()
                .map(|c| Arc::new(ClusterOwners(c)) as Arc<dyn Owners>),
            interval: Duration::from_millis(self.config.sweep_interval_ms),
            subscriber_lease_ms: self.config.subscriber_lease_ms,
        }
    }

    /// Hands a change to the notifier (see [`ChangeFeed::publish`]).
    pub fn publish(&self, event: Option<ChangeEvent>) {
        self.changes.publish(event)
    }
}

/// The sweeper's question to a cluster, asked of its hook.
struct ClusterOwners(Arc<dyn ClusterHook>);

impl Owners for ClusterOwners {
    fn may_act_as_owner(&self, now: Millis) -> bool {
        self.0.may_act_as_owner(now)
    }

    fn owns(&self, key: &ServiceKey) -> bool {
        self.0.owns(key)
    }
}

/// A request as a handler sees it: what the doors' handlers and the
/// cluster's endpoints take.
pub(crate) struct Exchange<'a> {
    pub app: &'a App,
    pub peer: SocketAddr,
    pub request: &'a Request<'a>,
    pub params: Params<'a>,
    /// The core's time for this request, from the same clock read that
    /// starts its latency measurement: one read per request, not two.
    pub now: Millis,
}

/// Each other member's own subscribers of a service, with its address: its
/// rows, or why it did not answer; in member order.
pub(crate) type PeerSubscribers =
    Pin<Box<dyn Future<Output = Vec<(String, Result<LocalSubscribers, String>)>> + Send>>;

/// How a cluster (`--members`) takes part in the server, installed in
/// [`App::cluster`] at start. The doors call it and never name the
/// cluster's modules: HTTP asks [`ClusterHook::intercept`] before every
/// handler, gRPC reports each connection's owned set, the sweeper asks who
/// owns a service, the operator endpoints and `/metrics` ask what it knows.
pub(crate) trait ClusterHook: Send + Sync {
    /// Before an HTTP request's handler: [`Verdict::Local`] to serve it
    /// here, else the cluster's answer (a relay in flight, one of the
    /// cluster's routes, [`Route::is_cluster`], or a refusal). `body`
    /// is the response body being assembled.
    ///
    /// # Errors
    /// 503 while the node loads its snapshot or its Raft group is not
    /// ready, 403 for a peer request from a non-member.
    fn intercept(
        &self,
        ex: &Exchange<'_>,
        route: Route,
        body: &mut Vec<u8>,
    ) -> Result<Verdict, Failure>;

    /// The instances 2.x connection `conn` holds changed, after the gRPC
    /// door wrote them (see `cluster::clients`).
    fn connection_changed(&self, app: &App, conn: &Connection);

    /// 2.x connection `conn` closed, after the gRPC door removed its
    /// instances.
    fn connection_closed(&self, app: &App, conn: &Connection);

    /// Whether this node's view of the members is current enough to
    /// expire what it owns at `now`.
    fn may_act_as_owner(&self, now: Millis) -> bool;

    /// Whether this node is responsible for `key`.
    fn owns(&self, key: &ServiceKey) -> bool;

    /// Whether this node has taken its peers' state (or knows it is alone)
    /// and may answer clients as if its store were complete: the gRPC door
    /// refuses 2.x requests until then, as the HTTP door answers 503.
    fn is_ready(&self) -> bool;

    /// This node's address as members name it.
    fn me(&self) -> &str;

    /// Every member's address and state name (`UP`, `DOWN`, …).
    fn members(&self) -> Vec<(String, &'static str)>;

    /// `None` without Raft; else the leader's address and the term, or
    /// `None` inside while no leader is known.
    fn raft_leader(&self) -> Option<Option<(String, u64)>>;

    /// Appends the cluster's metric families.
    fn render(&self, e: &mut Exposition<'_>);

    /// Where persistent instances' health checks run (the Raft leader
    /// only), or `None` when every node checks its own.
    fn health_verdicts(&self) -> Option<Arc<dyn Verdicts>>;

    /// The member Distro's hash of `tag` (a client's `ip:port`) picks.
    fn responsible_for(&self, tag: &str) -> String;

    /// Every other member's own subscribers of `query`'s service, asked at
    /// once, each with its address: its rows, or why it did not answer
    /// (see `cluster::subscribers`).
    fn peer_subscribers(&self, query: SubscribersQuery) -> PeerSubscribers;

    /// Where every 2.x client this node holds (its own and the synced
    /// copies of its peers') has its instances.
    fn connection_places(&self) -> std::collections::HashSet<registry_core::Place>;

    /// The 2.x clients this node holds: (its own, synced copies).
    fn connection_counts(&self) -> (usize, usize);

    /// Starts the cluster's tasks; each ends when `cancel` fires.
    fn start(&self, app: &Arc<App>, cancel: &CancellationToken)
        -> Vec<tokio::task::JoinHandle<()>>;
}
