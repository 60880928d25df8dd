//! The lease sweeper: expires silent ephemeral instances and empty
//! auto-created services, and lets lapsed push subscriptions go.
//!
//! # Where it runs
//! A task on the runtime only keeps time: every `--sweep-interval-ms` it
//! hands the current time to a thread of its own, `registry-sweeper`, and
//! waits for that pass to finish (passes never overlap, and a slow pass
//! skips ticks rather than queueing them). The pass itself never runs on a
//! request thread.
//!
//! # What a pass costs
//! A pass is a sequence of [`Store::expire_step`]s: per shard, one linear
//! scan of the compact lease slab (8 bytes per ephemeral instance, no lock,
//! about 1.5 ms per 1.1M instances), then the due instances in bounded
//! steps, each holding that shard's writer lock for at most about
//! [`EXPIRE_STEP_BUDGET`] instances. So a mass expiry of 100k instances is
//! many short holds, between which writes and beats of that shard go on,
//! and its change events reach the notifier step by step.
//!
//! # The list cache
//! After each pass the same thread moves the list cache's CLOCK hand
//! ([`ListCache::evict`], a bounded number of steps): paced by the pass's
//! time to drop lists not read for an idle period, and further while the
//! cache is over its budget. So no request ever does eviction work.
//!
//! # What it needs
//! [`Sweeps`] holds exactly what the sweeper touches: the store, the write
//! path, the clock, the list cache, the push subscriptions, the counters,
//! and in a cluster the [`Owners`] that say what this node may expire. It
//! does not see the server state ([`crate::state::App`], which makes it).
//!
//! [`ListCache::evict`]: crate::list_cache::ListCache::evict
//! [`Store::expire_step`]: registry_core::Store::expire_step
//! [`EXPIRE_STEP_BUDGET`]: registry_core::EXPIRE_STEP_BUDGET

use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use registry_core::{ExpireReport, Millis, ServiceKey, Store, Subscribers, EXPIRE_STEP_BUDGET};
use tokio::sync::oneshot;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::list_cache::ListCache;
use crate::metrics::Metrics;
use crate::write::Writer;

/// Name of the sweeper's thread (a `registry-` thread, so an embedded
/// registry counts its CPU).
pub const THREAD_NAME: &str = "registry-sweeper";

/// Most list-cache entries one eviction looks at (a few milliseconds).
const EVICT_STEPS: usize = 1 << 16;

/// One pass to run: its time, and who waits for the end of it.
type PassRequest = (Millis, oneshot::Sender<()>);

/// What the sweeper touches, and nothing else.
pub struct Sweeps {
    /// The registry whose leases it scans.
    pub store: Arc<Store>,
    /// The write path every expiry goes through (and is published by).
    pub writer: Writer,
    /// Time.
    pub clock: Clock,
    /// The encoded lists it evicts after each pass.
    pub lists: Arc<ListCache>,
    /// The push subscriptions it lets lapse.
    pub subscribers: Arc<Subscribers>,
    /// Its counters (expiries, passes, subscriptions).
    pub metrics: Arc<Metrics>,
    /// In a cluster, what this node may expire; `None` for a single node.
    pub owners: Option<Arc<dyn Owners>>,
    /// `--sweep-interval-ms`.
    pub interval: Duration,
    /// `--subscriber-lease-ms`.
    pub subscriber_lease_ms: u64,
}

/// What a cluster tells the sweeper: in a cluster only a service's
/// responsible node expires it, and only while its view of the members is
/// current.
pub trait Owners: Send + Sync {
    /// Whether this node's view of the members is current enough to expire
    /// what it owns at `now`.
    fn may_act_as_owner(&self, now: Millis) -> bool;

    /// Whether this node is responsible for `key`.
    fn owns(&self, key: &ServiceKey) -> bool;
}

/// Runs until `cancel` fires.
pub async fn run(sweeps: Sweeps, cancel: CancellationToken) {
    let sweeps = Arc::new(sweeps);
    let (passes, requests) = std_mpsc::sync_channel::<PassRequest>(1);
    let worker = {
        let sweeps = sweeps.clone();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                while let Ok((now, done)) = requests.recv() {
                    sweep_at(&sweeps, now);
                    sweeps.lists.evict(now, EVICT_STEPS);
                    let _ = done.send(());
                }
            })
    };
    let worker = match worker {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the sweeper thread; nothing will expire");
            return;
        }
    };
    let mut tick = tokio::time::interval(sweeps.interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut last_subscriber_sweep = sweeps.clock.now();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let (done, finished) = oneshot::channel();
        if passes.send((sweeps.clock.now(), done)).is_err() {
            break;
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = finished => {}
        }
        let now = sweeps.clock.now();
        // Subscriptions lapse on their own at push time; removing them is
        // only about memory, so once per half lease is enough.
        if now.0 >= last_subscriber_sweep.0 + sweeps.subscriber_lease_ms / 2 {
            sweeps.subscribers.expire(now);
            sweeps
                .metrics
                .push
                .subscribers
                .set(sweeps.subscribers.len() as u64);
            last_subscriber_sweep = now;
        }
    }
    // The thread ends after the pass it is on.
    drop(passes);
    let _ = tokio::task::spawn_blocking(move || worker.join()).await;
}

/// One whole expiry pass at the current time and a list-cache eviction,
/// on the caller's thread.
pub fn sweep_once(sweeps: &Sweeps) {
    let now = sweeps.clock.now();
    sweep_at(sweeps, now);
    sweeps.lists.evict(now, EVICT_STEPS);
}

/// One expiry pass at `now`, in bounded steps; each step's events go to
/// the notifier as soon as the step is done.
fn sweep_at(sweeps: &Sweeps, now: Millis) {
    let mut pass = sweeps.store.expire_pass(now);
    let mut report = ExpireReport::default();
    let (mut unhealthy, mut removed, mut services) = (0, 0, 0);
    // In a cluster only a service's responsible node expires it, and only
    // while its view of the members is current.
    let current = sweeps
        .owners
        .as_ref()
        .is_some_and(|c| c.may_act_as_owner(now));
    let owned = |key: &ServiceKey| current && sweeps.owners.as_ref().is_some_and(|c| c.owns(key));
    loop {
        // Each step's events are published by the write path at once.
        let more = match sweeps.owners {
            None => sweeps
                .writer
                .expire_step(&mut pass, EXPIRE_STEP_BUDGET, &mut report, None),
            Some(_) => {
                sweeps
                    .writer
                    .expire_step(&mut pass, EXPIRE_STEP_BUDGET, &mut report, Some(&owned))
            }
        };
        unhealthy += std::mem::take(&mut report.unhealthy);
        removed += std::mem::take(&mut report.removed);
        services += std::mem::take(&mut report.services_removed);
        if !more {
            break;
        }
    }
    sweeps.writer.sweep_overrides(now);
    sweeps.metrics.expired_unhealthy.add(unhealthy as u64);
    sweeps.metrics.expired_removed.add(removed as u64);
    sweeps.metrics.services_removed.add(services as u64);
    sweeps.metrics.sweeps.inc();
    if unhealthy + removed > 0 {
        tracing::debug!(
            unhealthy,
            removed,
            lock_holds = pass.holds(),
            most_under_one_hold = pass.max_held(),
            "leases expired"
        );
    }
}
