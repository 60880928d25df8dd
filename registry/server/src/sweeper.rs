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
//! [`ListCache::evict`]: crate::list_cache::ListCache::evict
//! [`Store::expire_step`]: registry_core::Store::expire_step
//! [`EXPIRE_STEP_BUDGET`]: registry_core::EXPIRE_STEP_BUDGET

use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use registry_core::{ExpireReport, Millis, ServiceKey, EXPIRE_STEP_BUDGET};
use tokio::sync::oneshot;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::state::App;

/// Name of the sweeper's thread (a `registry-` thread, so an embedded
/// registry counts its CPU).
pub const THREAD_NAME: &str = "registry-sweeper";

/// Most list-cache entries one eviction looks at (a few milliseconds).
const EVICT_STEPS: usize = 1 << 16;

/// One pass to run: its time, and who waits for the end of it.
type PassRequest = (Millis, oneshot::Sender<()>);

/// Runs until `cancel` fires.
pub async fn run(app: Arc<App>, cancel: CancellationToken) {
    let (passes, requests) = std_mpsc::sync_channel::<PassRequest>(1);
    let worker = {
        let app = app.clone();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                while let Ok((now, done)) = requests.recv() {
                    sweep_at(&app, now);
                    app.lists.evict(now, EVICT_STEPS);
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
    let mut tick = tokio::time::interval(Duration::from_millis(app.config.sweep_interval_ms));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut last_subscriber_sweep = app.clock.now();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let (done, finished) = oneshot::channel();
        if passes.send((app.clock.now(), done)).is_err() {
            break;
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = finished => {}
        }
        let now = app.clock.now();
        // Subscriptions lapse on their own at push time; removing them is
        // only about memory, so once per half lease is enough.
        if now.0 >= last_subscriber_sweep.0 + app.config.subscriber_lease_ms / 2 {
            app.subscribers.expire(now);
            app.metrics
                .push
                .subscribers
                .set(app.subscribers.len() as u64);
            last_subscriber_sweep = now;
        }
    }
    // The thread ends after the pass it is on.
    drop(passes);
    let _ = tokio::task::spawn_blocking(move || worker.join()).await;
}

/// One whole expiry pass at the current time and a list-cache eviction,
/// on the caller's thread.
pub fn sweep_once(app: &App) {
    let now = app.clock.now();
    sweep_at(app, now);
    app.lists.evict(now, EVICT_STEPS);
}

/// One expiry pass at `now`, in bounded steps; each step's events go to
/// the notifier as soon as the step is done.
fn sweep_at(app: &App, now: Millis) {
    let mut pass = app.store.expire_pass(now);
    let mut report = ExpireReport::default();
    let (mut unhealthy, mut removed, mut services) = (0, 0, 0);
    // In a cluster only a service's responsible node expires it, and only
    // while its view of the members is current.
    let current = app
        .cluster
        .as_ref()
        .is_some_and(|c| c.may_act_as_owner(now));
    let owned = |key: &ServiceKey| current && app.cluster.as_ref().is_some_and(|c| c.owns(key));
    loop {
        // Each step's events are published by the write path at once.
        let more = match app.cluster {
            None => app
                .writer
                .expire_step(&mut pass, EXPIRE_STEP_BUDGET, &mut report, None),
            Some(_) => {
                app.writer
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
    app.metrics.expired_unhealthy.add(unhealthy as u64);
    app.metrics.expired_removed.add(removed as u64);
    app.metrics.services_removed.add(services as u64);
    app.metrics.sweeps.inc();
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
