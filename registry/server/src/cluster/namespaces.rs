//! The namespace table across a cluster without Raft (with Raft, namespace
//! changes are log entries and this module does nothing).
//!
//! Every change on a node is stamped by its book (`crate::namespaces`);
//! right after a change, and every verify interval anyway, the node sends
//! its whole table (tombstones included) to every member not DOWN over
//! [`distro::NAMESPACES_PATH`], and the receiver merges it and answers with
//! its own, which the sender merges in turn. So a change reaches every
//! member in one exchange, and a member that missed one, or restarted with
//! an empty table, has the cluster's table after its first round. A table
//! is small (an administrator's list), so it always travels whole.

use std::sync::Arc;

use registry_proto::distro::{self, NamespaceSet};
use tokio_util::sync::CancellationToken;

use super::clients::call;
use super::members::MemberState;
use super::Cluster;
use crate::reply::Failure;
use crate::state::App;

/// Sends this node's table to every member after each change and every
/// verify interval, merging each answer (see the module docs).
pub(crate) async fn sync_loop(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    if cluster.raft_enabled() {
        return;
    }
    let mut tick = tokio::time::interval(cluster.config.verify_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
            _ = app.namespaces.changed().notified() => {}
        }
        let body = distro::encode(&cluster.envelope(app.namespaces.set()));
        if body.len() > cluster.config.max_message {
            tracing::warn!(
                bytes = body.len(),
                limit = cluster.config.max_message,
                "the namespace table exceeds one peer message: not replicated"
            );
            continue;
        }
        let body: Arc<[u8]> = body.into();
        for i in 0..cluster.peers().len() {
            if cluster.peers()[i].state() == MemberState::Down {
                continue;
            }
            let (app, cluster, body) = (app.clone(), cluster.clone(), body.clone());
            tokio::spawn(async move { exchange(&app, &cluster, i, &body).await });
        }
    }
}

/// One exchange with peer `i`: our table there, its table here.
async fn exchange(app: &App, cluster: &Cluster, i: usize, body: &[u8]) {
    let peer = &cluster.peers()[i];
    let answer = match call(peer, distro::NAMESPACES_PATH, body).await {
        Ok(a) => a,
        Err(e) => {
            cluster.stats.send_failed.inc();
            tracing::debug!(peer = %peer.addr, error = %e, "namespace exchange failed");
            return;
        }
    };
    let merged = distro::decode_answer::<NamespaceSet>(&answer, cluster.config.max_message)
        .map_err(|e| e.to_string())
        .and_then(|set| app.namespaces.merge(&set));
    match merged {
        Ok(0) => {}
        Ok(n) => tracing::info!(peer = %peer.addr, changed = n, "namespaces merged from a peer"),
        Err(e) => tracing::warn!(peer = %peer.addr, error = %e, "bad namespace table from a peer"),
    }
}

/// A peer's table (`Route::DistroNamespaces`): merged, then this node's
/// table as the answer.
///
/// # Errors
/// 400 when this cluster keeps namespaces in its Raft log, or for a bad
/// entry (then nothing of the message is merged).
pub(crate) fn answer(
    app: &App,
    cluster: &Cluster,
    from: &str,
    set: &NamespaceSet,
) -> Result<Vec<u8>, Failure> {
    let refuse = |text: String| {
        cluster.stats.refused.inc();
        Failure::new(400, text)
    };
    if cluster.raft_enabled() {
        return Err(refuse(
            "this cluster replicates namespaces through its Raft log, not by exchange".into(),
        ));
    }
    match app.namespaces.merge(set) {
        Ok(0) => {}
        Ok(n) => tracing::info!(peer = %from, changed = n, "namespaces merged from a peer"),
        Err(why) => return Err(refuse(format!("malformed peer message: {why}"))),
    }
    Ok(distro::encode_answer(&app.namespaces.set()))
}
