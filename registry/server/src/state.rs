//! The state every part of the server shares, and who writes what in it.
//!
//! - `store`: written by HTTP handlers and the sweeper through its shard
//!   locks; read lock-free by everyone.
//! - `subscribers`: written by list handlers (one refresh per subscriber per
//!   poll), read by the notifier when a service is due; one mutex.
//! - `lists`: the encoded-list cache, filled by whoever encodes first.
//! - change events: sent by writers, received only by the notifier.

use std::collections::HashSet;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use parking_lot::Mutex;
use registry_core::{ChangeEvent, ServiceKey, Store, SubscriberConfig, Subscribers};
use registry_proto::http1::Limits;
use registry_proto::naming::ParseLimits;
use tokio::sync::{mpsc, Notify};

use crate::clock::Clock;
use crate::config::Config;
use crate::list_cache::ListCache;
use crate::metrics::Metrics;

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
    pub subscribers: Mutex<Subscribers>,
    /// Requests being handled now, for the in-flight bound.
    pub inflight: AtomicUsize,
    events: mpsc::Sender<ChangeEvent>,
    receiver: Mutex<Option<mpsc::Receiver<ChangeEvent>>>,
    /// Services whose events did not fit in the queue; never more than one
    /// entry per service, so bounded by the store.
    overflow: Mutex<HashSet<ServiceKey>>,
    overflow_ready: Notify,
}

impl App {
    /// State for a server with `config`.
    ///
    /// # Errors
    /// When the configuration is invalid.
    pub fn new(config: Config) -> anyhow::Result<App> {
        config.validate().map_err(anyhow::Error::msg)?;
        let (events, receiver) = mpsc::channel(EVENT_QUEUE);
        Ok(App {
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
            subscribers: Mutex::new(Subscribers::new(SubscriberConfig {
                lease_ms: config.subscriber_lease_ms,
                max_per_ip: config.max_subscribers_per_ip,
                max_total: config.max_subscribers,
            })),
            inflight: AtomicUsize::new(0),
            events,
            receiver: Mutex::new(Some(receiver)),
            overflow: Mutex::new(HashSet::new()),
            overflow_ready: Notify::new(),
            config,
        })
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

/// Shared handle type.
pub type Shared = Arc<App>;
