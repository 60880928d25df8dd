//! The lease sweeper: a task that calls [`Store::expire`] every tick and
//! hands the resulting changes to the notifier; it also lets lapsed push
//! subscriptions go.
//!
//! [`Store::expire`]: registry_core::Store::expire

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::state::App;

/// Runs until `cancel` fires.
pub async fn run(app: Arc<App>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_millis(app.config.sweep_interval_ms));
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut last_subscriber_sweep = app.clock.now();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        sweep_once(&app);
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
}

/// One expiry pass at the current time.
pub fn sweep_once(app: &App) {
    let report = app.store.expire(app.clock.now());
    app.metrics.expired_unhealthy.add(report.unhealthy as u64);
    app.metrics.expired_removed.add(report.removed as u64);
    app.metrics
        .services_removed
        .add(report.services_removed as u64);
    if report.unhealthy + report.removed > 0 {
        tracing::debug!(
            unhealthy = report.unhealthy,
            removed = report.removed,
            "leases expired"
        );
    }
    for event in report.events {
        app.publish(Some(event));
    }
}
