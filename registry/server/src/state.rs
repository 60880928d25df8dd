//! The state every part of the server shares, and who writes what in it.
//!
//! - `store`: written by HTTP handlers and the sweeper through its shard
//!   locks; read lock-free by everyone.
//! - `subscribers`: written by list handlers (one refresh per subscriber per
//!   poll) and gRPC subscribe requests, read by the notifier when a service
//!   is due; sharded internally (see `registry_core::subscribers`).
//! - `lists`: the encoded-list cache, filled by whoever encodes first.
//! - change events: sent by writers, received only by the notifier.
//! - `persist`: its queue is written by persistent-write handlers; the
//!   database is owned by the writer thread once it starts.
//! - `health_targets`: written by persistent writes and the restore,
//!   pruned by the health checker; one mutex, never on ephemeral paths.
//! - `grpc`: the gRPC connection table (written by stream tasks) and the
//!   queue of gRPC push acks to the notifier (see `crate::grpc`).
//! - `auth`: read-only after start.

use std::collections::HashSet;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use parking_lot::Mutex;
use registry_core::{ChangeEvent, ServiceKey, Store, SubscriberConfig, Subscribers};
use registry_proto::http1::Limits;
use registry_proto::naming::ParseLimits;
use tokio::sync::{mpsc, Notify};

use crate::auth::Auth;
use crate::clock::Clock;
use crate::config::Config;
use crate::health::{HealthStats, Targets};
use crate::list_cache::ListCache;
use crate::metrics::Metrics;
use crate::persist::Persist;

/// Events buffered between writers and the notifier before the overflow
/// set takes over.
const EVENT_QUEUE: usize = 65_536;

/// The server's shared state.
pub struct App {
    /// The configuration it was started with.
    pub config: Config,
    /// The registry.
    pub store: Store,
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
    /// The durable store of persistent state; `None` without `--data-dir`.
    pub persist: Option<Persist>,
    /// Services holding persistent instances, for the health checker.
    pub health_targets: Targets,
    /// Health check counters.
    pub health_stats: HealthStats,
    /// Access control; `None` without `--auth-users`.
    pub auth: Option<Arc<Auth>>,
    /// The gRPC (Nacos 2.x) connections and ack queue.
    pub grpc: crate::grpc::Grpc,
    events: mpsc::Sender<ChangeEvent>,
    receiver: Mutex<Option<mpsc::Receiver<ChangeEvent>>>,
    /// Services whose events did not fit in the queue; never more than one
    /// entry per service, so bounded by the store.
    overflow: Mutex<HashSet<ServiceKey>>,
    overflow_ready: Notify,
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
        config.validate().map_err(anyhow::Error::msg)?;
        let persist = match &config.data_dir {
            Some(dir) => Some(Persist::open(
                dir,
                config.data_cache_bytes,
                config.max_pending_writes,
                config.max_commit_batch,
            )?),
            None => None,
        };
        let auth = match &config.auth_users {
            Some(path) => {
                let key = match &persist {
                    Some(p) => p.auth_key()?,
                    None => crate::auth::random_key()?,
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
        let app = App::build(config, persist, auth);
        match &app.persist {
            Some(p) => {
                let r = p.restore(&app)?;
                tracing::info!(
                    dir = %p.dir().display(),
                    services = r.services,
                    instances = r.instances,
                    skipped = r.skipped,
                    ms = r.elapsed.as_secs_f64() * 1e3,
                    "recovered persistent state"
                );
            }
            None => tracing::info!(
                "no --data-dir: persistent instances and services are kept in memory only"
            ),
        }
        Ok(app)
    }

    fn build(config: Config, persist: Option<Persist>, auth: Option<Arc<Auth>>) -> App {
        let (events, receiver) = mpsc::channel(EVENT_QUEUE);
        App {
            store: Store::new(config.store_config()),
            clock: Clock::start(),
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
            lists: ListCache::new(config.list_cache_bytes),
            subscribers: Subscribers::new(SubscriberConfig {
                lease_ms: config.subscriber_lease_ms,
                max_per_ip: config.max_subscribers_per_ip,
                max_total: config.max_subscribers,
            }),
            inflight: AtomicUsize::new(0),
            persist,
            health_targets: Targets::default(),
            health_stats: HealthStats::default(),
            auth,
            grpc: crate::grpc::Grpc::new(config.grpc_limits()),
            events,
            receiver: Mutex::new(Some(receiver)),
            overflow: Mutex::new(HashSet::new()),
            overflow_ready: Notify::new(),
            config,
        }
    }

    /// Hands a change to the notifier. Never blocks: when the queue is full
    /// the service goes into the overflow set instead.
    pub fn publish(&self, event: Option<ChangeEvent>) {
        let Some(event) = event else { return };
        if let Err(mpsc::error::TrySendError::Full(event)) = self.events.try_send(event) {
            self.overflow.lock().insert(event.service);
            self.overflow_ready.notify_one();
        }
    }

    /// The event receiver; the notifier takes it once.
    pub(crate) fn take_events(&self) -> Option<mpsc::Receiver<ChangeEvent>> {
        self.receiver.lock().take()
    }

    /// Services that overflowed the queue since the last call.
    pub(crate) fn take_overflow(&self) -> Vec<ServiceKey> {
        self.overflow.lock().drain().collect()
    }

    /// Resolves when the overflow set has entries.
    pub(crate) async fn overflowed(&self) {
        self.overflow_ready.notified().await
    }
}
