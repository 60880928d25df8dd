//! The state the request path shares, and who writes what in it.
//!
//! [`App`] is what HTTP handlers, the sweeper and the notifier see. The
//! parts that run on their own take only their pieces, never the whole
//! `App`: the health checker a [`HealthChecks`] (store, change feed, clock,
//! targets, counters, settings), persistence an `Arc<Store>`. So the module
//! graph points one way: `state` → `health`, `persist`, `events`,
//! `list_cache`, … and none of those reach back into `state`.
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
//!   queue of gRPC push acks to the notifier (see `crate::grpc`).
//! - `auth`: read-only after start.
//! - `cluster`: `None` for a single node; else membership, replication and
//!   relaying (see [`crate::cluster`]), which also sees every change event.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use registry_core::{ChangeEvent, ServiceKey, Store, SubscriberConfig, Subscribers};
use registry_proto::http1::Limits;
use registry_proto::naming::ParseLimits;
use tokio::sync::mpsc;

use crate::auth::Auth;
use crate::clock::Clock;
use crate::cluster::{Cluster, ClusterConfig};
use crate::config::Config;
use crate::events::ChangeFeed;
use crate::health::{HealthChecks, HealthStats, Targets};
use crate::http::BufferBudget;
use crate::list_cache::ListCache;
use crate::metrics::Metrics;
use crate::persist::Persist;
use crate::write::Writer;

/// The server's shared state.
pub struct App {
    /// The configuration it was started with.
    pub config: Config,
    /// The registry.
    pub store: Arc<Store>,
    /// Monotonic and wall time.
    pub clock: Clock,
    /// Prometheus metrics.
    pub metrics: Metrics,
    /// HTTP framing limits.
    pub http_limits: Limits,
    /// Parameter size limits.
    pub parse_limits: ParseLimits,
    /// Encoded instance lists.
    pub lists: ListCache,
    /// Push subscriptions.
    pub subscribers: Subscribers,
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
    /// Cluster membership and Distro; `None` without `--members`.
    pub cluster: Option<Arc<Cluster>>,
    /// The gRPC (Nacos 2.x) connections and ack queue.
    pub grpc: crate::grpc::Grpc,
    /// Change events on their way to the notifier.
    pub changes: Arc<ChangeFeed>,
    /// The one write path every door and writing task goes through.
    pub writer: Writer,
    /// The namespaces, with their quotas (see [`crate::namespaces`]).
    pub namespaces: Arc<crate::namespaces::NamespaceBook>,
}

impl App {
    /// State for a server with `config`. With `--data-dir` it opens the
    /// database and loads every persistent instance and explicit service
    /// before returning, so nothing is served from a half-loaded store.
    ///
    /// # Errors
    /// When the configuration is invalid, or the data directory or users
    /// file cannot be used.
    pub fn new(config: Config) -> anyhow::Result<App> {
        App::with_clock(config, Clock::start())
    }

    /// [`App::new`] on a given clock: tests pass [`Clock::adjustable`] to
    /// move the server's time forward instead of sleeping.
    ///
    /// # Errors
    /// As [`App::new`].
    pub fn with_clock(config: Config, clock: Clock) -> anyhow::Result<App> {
        config.validate().map_err(anyhow::Error::msg)?;
        let cluster = match ClusterConfig::from_config(&config)? {
            Some(c) => Some(Arc::new(Cluster::new(c)?)),
            None => None,
        };
        // In a cluster, --data-dir holds the Raft log instead: persistent
        // writes are durable once committed there (see `cluster::raft`).
        let raft = cluster.as_ref().is_some_and(|c| c.raft_enabled());
        let persist = match &config.data_dir {
            Some(dir) if !raft => Some(Arc::new(Persist::open(
                dir,
                config.data_cache_bytes,
                config.max_pending_writes,
                config.max_commit_batch,
            )?)),
            _ => None,
        };
        let auth = match &config.auth_users {
            Some(path) => {
                // Cluster members must accept each other's tokens: a
                // relayed request carries the token its client got from
                // another node. The key then derives from the shared secret.
                let cluster_secret = cluster.as_ref().and_then(|c| c.config.secret.as_deref());
                let key = match (&persist, cluster_secret) {
                    (_, Some(secret)) => crate::auth::key_from_secret(secret),
                    (Some(p), None) => p.auth_key()?,
                    (None, None) => crate::auth::random_key()?,
                };
                let auth = Auth::load(
                    path,
                    key,
                    config.auth_token_ttl_secs,
                    config.auth_max_logins,
                )?;
                Some(Arc::new(auth))
            }
            None => None,
        };
        let mut app = App::build(config, clock, persist, auth, raft);
        app.namespaces = Arc::new(crate::namespaces::NamespaceBook::open(
            app.config.data_dir.as_deref(),
        )?);
        app.writer = app.writer.clone().with_namespaces(app.namespaces.clone());
        if let Some(c) = cluster {
            // Replication consumes the same change events as the notifier.
            let tap = c.clone();
            app.changes
                .set_tap(Box::new(move |event| tap.changed(event)));
            app.cluster = Some(c);
        }
        match &app.persist {
            Some(p) => {
                let targets = &app.health_targets;
                let r = p.restore(&app.store, app.clock.now(), |s| targets.insert(s))?;
                tracing::info!(
                    dir = %p.dir().display(),
                    services = r.services,
                    instances = r.instances,
                    skipped = r.skipped,
                    ms = r.elapsed.as_secs_f64() * 1e3,
                    "recovered persistent state"
                );
            }
            None if raft => tracing::info!(
                "persistent instances and services are replicated by Raft under --data-dir"
            ),
            None => tracing::info!(
                "no --data-dir: persistent instances and services are kept in memory only"
            ),
        }
        Ok(app)
    }

    fn build(
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
            persist.clone(),
            raft,
        );
        App {
            store,
            clock,
            metrics: Metrics::default(),
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
            lists: ListCache::new(config.list_cache_bytes, config.list_cache_idle_ms),
            subscribers: Subscribers::new(SubscriberConfig {
                lease_ms: config.subscriber_lease_ms,
                max_per_ip: config.max_subscribers_per_ip,
                max_total: config.max_subscribers,
            }),
            inflight: AtomicUsize::new(0),
            buffers: BufferBudget::new(config.max_buffered_bytes),
            persist,
            health_targets,
            health_stats: Arc::default(),
            auth,
            cluster: None,
            grpc: crate::grpc::Grpc::new(config.grpc_limits()),
            changes,
            writer,
            namespaces: Arc::default(),
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
            verdicts: self.cluster.as_ref().filter(|c| c.raft_enabled()).map(|c| {
                Arc::new(crate::cluster::raft::LeaderChecks(c.clone()))
                    as Arc<dyn crate::health::Verdicts>
            }),
        }
    }

    /// Hands a change to the notifier (see [`ChangeFeed::publish`]).
    pub fn publish(&self, event: Option<ChangeEvent>) {
        self.changes.publish(event)
    }

    /// The event receiver; the notifier takes it once.
    pub(crate) fn take_events(&self) -> Option<mpsc::Receiver<ChangeEvent>> {
        self.changes.take_receiver()
    }

    /// Services that overflowed the queue since the last call.
    pub(crate) fn take_overflow(&self) -> Vec<ServiceKey> {
        self.changes.take_overflow()
    }

    /// Resolves when the overflow set has entries.
    pub(crate) async fn overflowed(&self) {
        self.changes.overflowed().await
    }
}
