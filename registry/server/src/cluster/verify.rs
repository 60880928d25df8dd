//! Drift repair and catch-up: the periodic checksums of what each node is
//! responsible for, fetching what differs, dropping what its owner no
//! longer has, and the full snapshot a node loads before it serves.
//!
//! A service missing from its owner's list is dropped only when two whole
//! rounds in a row miss it: a list built just before a replication message
//! may not name a service that message created. The owner's list comes in
//! parts; the store is scanned for unlisted services once per round.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use registry_core::{ServiceKey, ServiceSnapshot, Store};
use registry_proto::distro::{self, Checksums, Datums, Fetch, SnapshotPart};
use registry_proto::http1::Method;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::members::{MemberState, Peer};
use super::replicate::{apply_datums, datum_of};
use super::Cluster;
use crate::state::App;

/// Services to fetch from their owner.
pub(crate) struct Repair {
    from: String,
    keys: Vec<(String, String)>,
}

/// Parts a snapshot is loaded in.
const SNAPSHOT_PARTS: u32 = 16;
/// Services named in one fetch.
const FETCH_BATCH: usize = 512;
/// Bytes budgeted per checksum entry when splitting the list into parts.
const CHECKSUM_ENTRY_BYTES: usize = 96;

/// The checksum peers compare: the instance list's (kept by the store)
/// folded with the service's own settings. FNV-1a, the same everywhere.
pub fn state_checksum(store: &Store, snap: &ServiceSnapshot) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    };
    eat(&store.replicated_digest(snap).to_le_bytes());
    eat(&snap.protect_threshold().to_bits().to_le_bytes());
    for (k, v) in snap.metadata().iter() {
        eat(k.as_bytes());
        eat(&[0]);
        eat(v.as_bytes());
        eat(&[0xff]);
    }
    eat(snap.selector().unwrap_or("").as_bytes());
    eat(&[u8::from(snap.is_explicit())]);
    h
}

/// Every verify interval, sends the checksums of the services this node
/// is responsible for to every UP peer.
pub(crate) async fn checksum_loop(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(cluster.config.verify_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        // Not while the view is stale: after a freeze this tick fires at
        // once, before the probe task notices the gap and reloads.
        if !cluster.may_act_as_owner(app.clock.now()) {
            continue;
        }
        let view = cluster.view_fingerprint();
        let mut owned = Vec::new();
        app.store.for_each_service(|snap| {
            if cluster.owns(snap.key()) {
                owned.push((
                    snap.key().namespace().to_owned(),
                    snap.key().grouped_name().to_owned(),
                    state_checksum(&app.store, snap),
                ));
            }
        });
        let budget = cluster.config.max_message / 2;
        let parts = (owned.len() * CHECKSUM_ENTRY_BYTES)
            .div_ceil(budget.max(1))
            .max(1) as u32;
        let mut lists: Vec<Checksums> = (0..parts)
            .map(|part| Checksums {
                part,
                parts,
                items: Vec::new(),
                view,
            })
            .collect();
        for item in owned {
            let p = distro::part_of(&item.0, &item.1, parts) as usize;
            lists[p].items.push(item);
        }
        let bodies: Arc<[Vec<u8>]> = lists
            .into_iter()
            .map(|l| distro::encode(&cluster.envelope(l)))
            .collect();
        for peer in cluster.peers().iter() {
            if peer.state() != MemberState::Up {
                continue;
            }
            let (cluster, bodies, peer) = (cluster.clone(), bodies.clone(), peer.clone());
            tokio::spawn(async move {
                for body in bodies.iter() {
                    if send(&peer, Method::Put, distro::CHECKSUM_PATH, body)
                        .await
                        .is_err()
                    {
                        cluster.stats.send_failed.inc();
                        return;
                    }
                }
            });
        }
    }
}

/// The parts of one sender's checksum round received so far.
#[derive(Default)]
pub(crate) struct Round {
    parts: u32,
    seen: u32,
    listed: HashSet<ServiceKey>,
}

/// Compares a peer's checksums with this node's replica: queues a fetch of
/// what differs and, once every part of the sender's round has arrived,
/// drops what the sender owns but no longer lists (on the second round in a
/// row that misses it, and only when the sender's view of the members is
/// this node's). One scan of the store per sender per round, not
/// per part. Returns the number dropped.
pub(crate) fn on_checksums(app: &App, cluster: &Cluster, from: &str, list: &Checksums) -> usize {
    let mut fetch = Vec::new();
    let mut listed = Vec::with_capacity(list.items.len());
    for (ns, name, sum) in &list.items {
        let key = ServiceKey::new(ns, name);
        let same = app
            .store
            .read(key.as_ref(), |s| state_checksum(&app.store, s) == *sum)
            .unwrap_or(false);
        if !same {
            fetch.push((ns.clone(), name.clone()));
        }
        listed.push(key);
    }
    if !fetch.is_empty() {
        if let Some(tx) = cluster.repairs() {
            // A full queue drops the request: the next round asks again.
            let _ = tx.try_send(Repair {
                from: from.to_owned(),
                keys: fetch,
            });
        }
    }
    let complete = {
        let mut rounds = cluster.rounds.lock();
        let round = rounds.entry(from.to_owned()).or_default();
        if list.part == 0 || round.parts != list.parts {
            *round = Round {
                parts: list.parts,
                ..Round::default()
            };
        }
        round.seen += 1;
        round.listed.extend(listed);
        // A lost part leaves the round incomplete: nothing is dropped then.
        (list.part + 1 == list.parts).then(|| std::mem::take(round))
    };
    match complete {
        // Only a sender that sees the same members may be taken at its word
        // about what it owns; a round from another view also ends this
        // sender's suspicions.
        Some(_) if list.view != 0 && list.view != cluster.view_fingerprint() => {
            cluster.stats.rounds_other_view.inc();
            cluster.suspects.lock().retain(|_, (by, _)| by != from);
            0
        }
        Some(round) if round.seen == round.parts => {
            drop_unlisted(app, cluster, from, &round.listed)
        }
        _ => 0,
    }
}

/// Drops services `from` owns that its whole round did not list, the
/// second time in a row within one view of this node. Views of two nodes
/// differ for a moment after every change: a sender that does not yet
/// own a service this node already thinks it owns misses it once, and a
/// suspicion left from another sender or an earlier view (when the service
/// may have had another owner, this node included) must not count as the
/// first miss, or an instance beating all along would be dropped here.
fn drop_unlisted(app: &App, cluster: &Cluster, from: &str, listed: &HashSet<ServiceKey>) -> usize {
    // Read before the ownership below: a change in between makes this
    // round's suspicions count for nothing, never the other way round.
    let epoch = cluster
        .view_epoch
        .load(std::sync::atomic::Ordering::Acquire);
    let mut missing: Vec<ServiceKey> = Vec::new();
    app.store.for_each_service(|snap| {
        let key = snap.key();
        // Raft's data stays whatever Distro's owner lists.
        if cluster.raft_enabled() && super::replicate::holds_persistent(snap) {
            return;
        }
        // Connection-held instances are their clients' to remove.
        let held = snap
            .instances()
            .iter()
            .any(|i| app.store.is_held(key.as_ref(), i));
        if !held && !listed.contains(key) && cluster.owned_by(key, from) {
            missing.push(key.clone());
        }
    });
    let mut dropped = 0;
    let mut suspects = cluster.suspects.lock();
    let mut still = HashSet::new();
    for key in missing {
        let again = suspects
            .get(&key)
            .is_some_and(|(by, seen)| by == from && *seen == epoch);
        if again {
            suspects.remove(&key);
            let command = crate::write::Command::Drop {
                service: key.as_ref(),
            };
            // In memory only: applied at once.
            if let Ok(crate::write::Outcome::Done(_)) = app.writer.apply(command, app.clock.now()) {
                tracing::info!(service = %key.grouped_name(), owner = from,
                    "dropped a service its owner left out of two checksum rounds");
                dropped += 1;
            }
        } else {
            still.insert(key);
        }
    }
    // This sender's suspects are now exactly those it missed this round
    // for the first time; others' are left alone.
    suspects.retain(|_, (by, _)| by != from);
    suspects.extend(still.into_iter().map(|k| (k, (from.to_owned(), epoch))));
    drop(suspects);
    cluster.stats.repairs.add(dropped as u64);
    dropped
}

/// Fetches the services checksums found different, from their owner.
pub(crate) async fn repair_loop(
    app: Arc<App>,
    cluster: Arc<Cluster>,
    mut repairs: mpsc::Receiver<Repair>,
    cancel: CancellationToken,
) {
    loop {
        let repair = tokio::select! {
            _ = cancel.cancelled() => return,
            r = repairs.recv() => match r { Some(r) => r, None => return },
        };
        let Some(peer) = cluster.peer(&repair.from) else {
            continue;
        };
        for keys in repair.keys.chunks(FETCH_BATCH) {
            let body = distro::encode(&cluster.envelope(Fetch {
                keys: keys.to_vec(),
            }));
            match fetch_datums(&peer, &cluster, distro::DATUM_PATH, &body).await {
                Ok(datums) => {
                    let r = apply_datums(&app, &cluster, datums.node, &datums.items, false);
                    cluster.stats.repairs.add(r.applied as u64);
                }
                Err(e) => tracing::debug!(peer = %peer.addr, error = %e, "repair fetch failed"),
            }
        }
    }
}

/// The datums of the named services, for a peer's fetch.
pub(crate) fn answer_fetch(app: &App, cluster: &Cluster, fetch: &Fetch) -> Datums {
    let items = fetch
        .keys
        .iter()
        .map(|(ns, name)| datum_of(&app.store, &ServiceKey::new(ns, name), 0, 0))
        // A service this node does not hold is not sent: absence is the
        // checksum's business, and a removal needs its writer's revision.
        .filter(|d| d.state.is_some())
        .collect();
    Datums {
        node: cluster.node,
        items,
    }
}

/// One part of this node's full replica, for a starting peer.
pub(crate) fn answer_snapshot(app: &App, cluster: &Cluster, part: SnapshotPart) -> Datums {
    let mut keys = Vec::new();
    app.store.for_each_service(|snap| {
        let k = snap.key();
        if distro::part_of(k.namespace(), k.grouped_name(), part.parts) == part.part {
            keys.push(k.clone());
        }
    });
    Datums {
        node: cluster.node,
        items: keys
            .iter()
            .map(|k| datum_of(&app.store, k, 0, 0))
            .filter(|d| d.state.is_some())
            .collect(),
    }
}

/// While this node is not ready, loads a full snapshot from an UP peer,
/// then declares itself ready. When no peer is UP and every peer has
/// answered as STARTING or is DOWN, there is nothing to load: the cluster
/// is starting (or this is the last node), and it becomes ready empty.
pub(crate) async fn load_snapshot(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    loop {
        // Distro's own readiness, not `is_ready`: that also waits for the
        // Raft engine, and asking again until it runs would spin (a
        // one-member cluster has nobody to ask and never waits).
        if cluster.ready.load(std::sync::atomic::Ordering::Acquire) {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = cluster.reload.notified() => {}
            }
            continue;
        }
        let up: Vec<Arc<Peer>> = cluster
            .peers()
            .iter()
            .filter(|p| p.state() == MemberState::Up)
            .cloned()
            .collect();
        let mut loaded = false;
        for peer in up.iter() {
            match load_from(&app, &cluster, peer).await {
                Ok(services) => {
                    tracing::info!(peer = %peer.addr, services, "loaded the cluster snapshot");
                    cluster.stats.snapshots_loaded.inc();
                    loaded = true;
                    break;
                }
                Err(e) => tracing::warn!(peer = %peer.addr, error = %e, "snapshot load failed"),
            }
        }
        let nobody_to_ask = up.is_empty()
            && cluster
                .peers()
                .iter()
                .all(|p| matches!(p.state(), MemberState::Starting | MemberState::Down));
        if loaded || nobody_to_ask {
            if nobody_to_ask {
                tracing::info!("no peer serves yet: starting with an empty replica");
            }
            cluster.set_ready(&app, true);
            // Still not ready (a Raft node whose engine has not loaded its
            // state yet): wait below rather than spin on this branch.
            if cluster.is_ready() {
                continue;
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

async fn load_from(app: &App, cluster: &Cluster, peer: &Peer) -> Result<usize, String> {
    let mut services = 0;
    for part in 0..SNAPSHOT_PARTS {
        let body = distro::encode(&cluster.envelope(SnapshotPart {
            part,
            parts: SNAPSHOT_PARTS,
        }));
        let datums = fetch_datums(peer, cluster, distro::SNAPSHOT_PATH, &body).await?;
        services += datums.items.len();
        apply_datums(app, cluster, datums.node, &datums.items, false);
    }
    Ok(services)
}

async fn send(peer: &Peer, method: Method, path: &str, body: &[u8]) -> Result<Vec<u8>, String> {
    let mut request = Vec::with_capacity(body.len() + 160);
    distro::write_peer_request(&mut request, method, path, &peer.addr, body);
    let answer = peer.sync.call(request).await?;
    if answer.status != 200 {
        return Err(format!(
            "{} answered {}: {}",
            peer.addr,
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    Ok(answer.body)
}

async fn fetch_datums(
    peer: &Peer,
    _cluster: &Cluster,
    path: &str,
    body: &[u8],
) -> Result<Datums, String> {
    let bytes = send(peer, Method::Post, path, body).await?;
    distro::decode_answer::<Datums>(&bytes, registry_proto::http1::RESPONSE_MAX_BODY)
        .map_err(|e| e.to_string())
}
