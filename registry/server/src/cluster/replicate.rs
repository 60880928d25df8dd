//! Replication: the responsible node sends each changed service's whole
//! state to every peer, merged per service within the sync window; peers
//! apply it idempotently by the writer's revision.
//!
//! The replicator is a consumer of the same change events the notifier
//! gets (see [`Cluster::changed`]); it sends only services this node is
//! responsible for, so a state applied from a peer is not sent back.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;

use registry_core::{
    InstanceAddr, InstanceOverride, InstanceSpec, Metadata, Millis, Origin, Replica, ServiceKey,
    ServiceRef, ServiceSnapshot, Store,
};
use registry_proto::distro::{self, Datum, Datums, InstanceState, OverrideState, ServiceState};
use registry_proto::http1::Method;
use tokio_util::sync::CancellationToken;

use super::members::{MemberState, Peer};
use super::parts::Offered;
use super::{Cluster, ClusterStats};
use crate::clock::Clock;
use crate::state::App;
use crate::write::{Applied, Command, Outcome};

/// Waits for changes, lets the window pass, sends what is due.
pub(crate) async fn run(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = cluster.dirty.ready.notified() => {}
        }
        // Changes arriving within the window merge into this batch.
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(cluster.config.sync_window) => {}
        }
        let due: Vec<(ServiceKey, (u64, u64))> = cluster.dirty.services.lock().drain().collect();
        // A node back from a freeze holds a stale replica: what it would
        // send could overwrite the newer state its peers wrote meanwhile.
        // It reloads from them instead; checksums repair the rest.
        if !cluster.may_act_as_owner(app.clock.now()) {
            continue;
        }
        let datums: Vec<Datum> = due
            .into_iter()
            .filter(|(key, _)| cluster.owns(key))
            .map(|(key, (changed_ms, revision))| datum_of(&app.store, &key, revision, changed_ms))
            .collect();
        if datums.is_empty() {
            continue;
        }
        send_to_peers(&cluster, datums);
    }
}

/// Sends `datums` to every peer not known DOWN, in messages within the
/// size bound, without waiting for the answers.
fn send_to_peers(cluster: &Arc<Cluster>, datums: Vec<Datum>) {
    let count = datums.len() as u64;
    let messages = pack(cluster, datums);
    for peer in cluster.peers().iter() {
        if peer.state() == MemberState::Down {
            continue;
        }
        let stats = cluster.stats.clone();
        let messages = messages.clone();
        let peer = peer.clone();
        tokio::spawn(async move {
            send(&peer, &stats, &messages).await;
            stats.datums_sent.add(count);
        });
    }
}

/// Sends the services this node was responsible for until a view change
/// made `to` responsible, to `to`, at once: a member back from a partition
/// or a restart missed what was written meanwhile, and as their owner it
/// would answer their beats "unknown instance" and its checksum rounds
/// would make every replica drop them (see `verify::drop_unlisted`). The
/// receiver applies them as any replica, by origin.
pub(super) fn hand_over(app: &App, cluster: &Cluster, handed: Vec<(ServiceKey, String)>) {
    let mut by_peer: std::collections::HashMap<String, Vec<Datum>> = Default::default();
    for (key, to) in handed {
        by_peer
            .entry(to)
            .or_default()
            .push(datum_of(&app.store, &key, 0, Clock::wall_ms()));
    }
    for (to, datums) in by_peer {
        let Some(peer) = cluster.peer(&to) else {
            continue;
        };
        let count = datums.len() as u64;
        let messages = pack(cluster, datums);
        let stats = cluster.stats.clone();
        tracing::debug!(peer = %to, services = count, "handing services over");
        tokio::spawn(async move {
            send(&peer, &stats, &messages).await;
            stats.datums_sent.add(count);
        });
    }
}

/// Sends replication messages to one peer, in order.
async fn send(peer: &Peer, stats: &ClusterStats, messages: &[Vec<u8>]) {
    for body in messages {
        let mut request = Vec::with_capacity(body.len() + 160);
        distro::write_peer_request(
            &mut request,
            Method::Put,
            distro::DATUM_PATH,
            &peer.addr,
            body,
        );
        match peer.sync.call(request).await {
            Ok(a) if a.status == 200 => {}
            Ok(a) => {
                stats.send_failed.inc();
                tracing::debug!(peer = %peer.addr, status = a.status,
                    body = %String::from_utf8_lossy(&a.body), "replication refused");
            }
            Err(e) => {
                stats.send_failed.inc();
                tracing::debug!(peer = %peer.addr, error = %e, "replication failed");
            }
        }
    }
}

/// Encodes `datums` into envelopes of at most the message bound. A state
/// larger than that goes as several datums of one revision, each with a
/// share of the instances ([`split`]); the receiver applies it whole.
pub(super) fn pack(cluster: &Cluster, datums: Vec<Datum>) -> Arc<[Vec<u8>]> {
    // Room for the envelope around the items.
    let budget = cluster.config.max_message.saturating_sub(1024).max(1024);
    let mut messages = Vec::new();
    let mut batch: Vec<Datum> = Vec::new();
    let mut size = 0;
    for whole in datums {
        for d in split(whole, budget) {
            let len = serde_json::to_vec(&d).map_or(usize::MAX, |b| b.len() + 1);
            if len > budget {
                // Only a single instance (or the settings) over the bound
                // gets here, which the store's metadata limit rules out.
                cluster.stats.oversize.inc();
                tracing::warn!(service = %d.service, bytes = len, "a part of a service state exceeds the peer message bound");
                continue;
            }
            if size + len > budget && !batch.is_empty() {
                messages.push(encode_datums(cluster, std::mem::take(&mut batch)));
                size = 0;
            }
            size += len;
            batch.push(d);
        }
    }
    if !batch.is_empty() {
        messages.push(encode_datums(cluster, batch));
    }
    messages.into()
}

/// `d` as parts of at most `budget` bytes each (itself when it fits).
pub(super) fn split(d: Datum, budget: usize) -> Vec<Datum> {
    let len = serde_json::to_vec(&d).map_or(usize::MAX, |b| b.len());
    let Some(state) = d.state.as_ref().filter(|_| len > budget) else {
        return vec![d];
    };
    let mut groups: Vec<Vec<InstanceState>> = vec![Vec::new()];
    let mut size = 0;
    // The whole state carries no part fields (skipped at their defaults)
    // and each part does: without room for them a part filled to within a
    // few bytes of the budget came out over it and was skipped.
    const PART_FIELDS: usize = r#","part":4294967295,"parts":4294967295"#.len();
    let overhead = len
        - state
            .instances
            .iter()
            .map(instance_len)
            .sum::<usize>()
            .min(len)
        + PART_FIELDS;
    for i in &state.instances {
        let l = instance_len(i);
        if size + l + overhead > budget && !groups.last().is_some_and(Vec::is_empty) {
            groups.push(Vec::new());
            size = 0;
        }
        size += l;
        if let Some(g) = groups.last_mut() {
            g.push(i.clone());
        }
    }
    let parts = groups.len() as u32;
    groups
        .into_iter()
        .enumerate()
        .map(|(part, instances)| Datum {
            state: Some(ServiceState {
                instances,
                ..ServiceState {
                    instances: Vec::new(),
                    ..state.clone()
                }
            }),
            part: part as u32,
            parts,
            ..d.clone()
        })
        .collect()
}

fn instance_len(i: &InstanceState) -> usize {
    serde_json::to_vec(i).map_or(usize::MAX / 4, |b| b.len() + 1)
}

fn encode_datums(cluster: &Cluster, items: Vec<Datum>) -> Vec<u8> {
    distro::encode(&cluster.envelope(Datums {
        node: cluster.node,
        items,
    }))
}

/// The datum for a service: its state now, or its removal at `revision`.
/// A state this node holds as a peer's replica goes with that peer's
/// origin (writer and revision), not as this node's own: passed on in a
/// snapshot or a hand-over, it must not look newer than what its writer
/// holds (a node back from a freeze would take its own acked writes
/// back to what it had replicated before it stopped).
pub(super) fn datum_of(store: &Store, key: &ServiceKey, revision: u64, changed_ms: u64) -> Datum {
    match store.snapshot(key.as_ref()) {
        Some(snap) => {
            let origin = snap.origin();
            Datum {
                ns: key.namespace().to_owned(),
                service: key.grouped_name().to_owned(),
                revision: if origin == Origin::LOCAL {
                    snap.revision()
                } else {
                    origin.revision
                },
                // Origin::LOCAL's node is 0, the wire's "the sender".
                writer: origin.node,
                changed_ms,
                state: Some(state_of(store, &snap)),
                part: 0,
                parts: 1,
            }
        }
        None => Datum {
            ns: key.namespace().to_owned(),
            service: key.grouped_name().to_owned(),
            revision,
            writer: 0,
            changed_ms,
            state: None,
            part: 0,
            parts: 1,
        },
    }
}

/// A snapshot as the wire carries it: its settings and the instances that
/// live by heartbeat. Instances a connection holds are replicated with
/// their client's set ([`super::clients`]), never with the service.
pub(super) fn state_of(store: &Store, snap: &ServiceSnapshot) -> ServiceState {
    let pairs = |m: &Metadata| -> Vec<(String, String)> {
        m.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    ServiceState {
        protect_threshold: snap.protect_threshold(),
        metadata: pairs(snap.metadata()),
        selector: snap.selector().map(str::to_owned),
        explicit: snap.is_explicit(),
        instances: snap
            .instances()
            .iter()
            .filter(|i| !store.is_held(snap.key().as_ref(), i))
            .map(|i| InstanceState {
                ip: i.ip.to_string(),
                port: i.port,
                cluster: i.cluster.to_string(),
                weight: i.weight,
                healthy: i.healthy,
                enabled: i.enabled,
                ephemeral: i.ephemeral,
                metadata: pairs(&i.metadata),
            })
            .collect(),
        overrides: snap
            .overrides()
            .map(|o| OverrideState {
                ip: o.addr.ip.to_string(),
                port: o.addr.port,
                cluster: o.addr.cluster.to_owned(),
                weight: o.layer.weight,
                enabled: o.layer.enabled,
                metadata: pairs(&o.layer.metadata),
            })
            .collect(),
    }
}

/// What applying a batch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ApplyReport {
    /// States that changed this node's replica.
    pub applied: usize,
    /// States already held.
    pub stale: usize,
    /// States refused as invalid.
    pub invalid: usize,
}

/// Applies datums written by the node `node`, publishing every change to
/// the notifier (and so to this node's subscribers).
pub(crate) fn apply_datums(
    app: &App,
    cluster: &Cluster,
    node: u64,
    items: &[Datum],
    record_lag: bool,
) -> ApplyReport {
    let now = app.clock.now();
    let wall = Clock::wall_ms();
    let mut report = ApplyReport::default();
    let whole = assemble(cluster, node, items, wall, &mut report);
    for d in whole.iter().map(|d| d.as_ref()) {
        let origin = Origin {
            node: if d.writer == 0 { node } else { d.writer },
            revision: d.revision,
        };
        // This incarnation's own write, passed back by a peer: what it
        // holds now is that write or a later one, never older.
        if origin.node == cluster.node {
            report.stale += 1;
            continue;
        }
        let service = ServiceRef::new(&d.ns, &d.service);
        let outcome = if cluster.raft_enabled() {
            // Raft owns the persistent part: merge under its apply lock so
            // no committed entry lands between the read and the write.
            let _serialised = cluster.consensus().map(|c| c.shared.apply_lock.lock());
            let local = app.store.snapshot(service);
            match (&d.state, local.as_deref()) {
                (Some(state), local) => replica_of(state, origin).and_then(|replica| {
                    apply_replica(app, service, &keep_persistent(replica, local, origin), now)
                }),
                (None, Some(l)) if holds_persistent(l) => {
                    let kept = keep_persistent(empty_replica(origin), Some(l), origin);
                    apply_replica(app, service, &kept, now)
                }
                (None, _) => Ok(remove(app, service, origin, now)),
            }
        } else {
            match &d.state {
                Some(state) => replica_of(state, origin)
                    .and_then(|replica| apply_replica(app, service, &replica, now)),
                None => Ok(remove(app, service, origin, now)),
            }
        };
        tracing::debug!(from = node, service = %d.service, revision = d.revision,
            instances = d.state.as_ref().map_or(0, |s| s.instances.len()), ?outcome, "peer state");
        match outcome {
            Ok(a) if a.stale => report.stale += 1,
            Ok(a) => {
                report.applied += 1;
                if a.changed && record_lag && d.changed_ms > 0 {
                    cluster
                        .stats
                        .lag_ms
                        .record(wall.saturating_sub(d.changed_ms));
                }
            }
            Err(()) => report.invalid += 1,
        }
    }
    cluster.stats.datums_applied.add(report.applied as u64);
    cluster.stats.datums_stale.add(report.stale as u64);
    cluster.stats.datums_invalid.add(report.invalid as u64);
    report
}

/// `items` with every state sent in parts put back together; parts of
/// states not yet complete wait in the cluster's [`Parts`].
fn assemble<'a>(
    cluster: &Cluster,
    node: u64,
    items: &'a [Datum],
    wall: u64,
    report: &mut ApplyReport,
) -> Vec<Cow<'a, Datum>> {
    let mut whole = Vec::with_capacity(items.len());
    for d in items {
        if d.parts <= 1 && d.part == 0 {
            whole.push(Cow::Borrowed(d));
            continue;
        }
        if d.part >= d.parts || d.parts > distro::MAX_PARTS || d.state.is_none() {
            report.invalid += 1;
            continue;
        }
        let key = format!("{node}/{}/{}", d.ns, d.service);
        let offered =
            cluster
                .datum_parts
                .lock()
                .offer(key, d.revision, d.part, d.parts, d.clone(), wall);
        if let Offered::Complete(parts) = offered {
            let mut it = parts.into_iter();
            let Some(mut first) = it.next() else { continue };
            if let Some(state) = first.state.as_mut() {
                for more in it {
                    state
                        .instances
                        .extend(more.state.map(|s| s.instances).unwrap_or_default());
                }
            }
            (first.part, first.parts) = (0, 1);
            whole.push(Cow::Owned(first));
        }
    }
    whole
}

/// Whether a service holds data Raft replicates (explicit settings or a
/// persistent instance): Distro must not remove it.
pub(crate) fn holds_persistent(snap: &ServiceSnapshot) -> bool {
    snap.is_explicit() || snap.instances().iter().any(|i| !i.ephemeral)
}

fn empty_replica(origin: Origin) -> Replica<'static> {
    Replica {
        origin,
        protect_threshold: 0.0,
        metadata: Metadata::empty(),
        selector: None,
        explicit: false,
        instances: Vec::new(),
        overrides: Vec::new(),
    }
}

/// `replica`'s ephemeral instances with this node's persistent instances
/// and service settings (Raft's), when it holds the service.
fn keep_persistent<'a>(
    mut replica: Replica<'a>,
    local: Option<&'a ServiceSnapshot>,
    origin: Origin,
) -> Replica<'a> {
    replica.origin = origin;
    replica.instances.retain(|i| i.ephemeral);
    match local {
        Some(l) => {
            replica.protect_threshold = l.protect_threshold();
            replica.metadata = l.metadata().clone();
            replica.selector = l.selector().map(Arc::from);
            replica.explicit = l.is_explicit();
            // The layers are in the log too: every node applied them.
            replica.overrides = l.overrides().map(|o| (o.addr, o.layer.clone())).collect();
            for i in l.instances().iter().filter(|i| !i.ephemeral) {
                replica.instances.push(InstanceSpec {
                    addr: InstanceAddr {
                        cluster: &i.cluster,
                        ip: i.ip,
                        port: i.port,
                    },
                    weight: i.weight,
                    healthy: i.healthy,
                    enabled: i.enabled,
                    ephemeral: false,
                    metadata: i.metadata.clone(),
                });
            }
        }
        None => replica.explicit = false,
    }
    replica
}

/// A peer's state of a service through the write path (memory only).
fn apply_replica(
    app: &App,
    service: ServiceRef<'_>,
    replica: &Replica<'_>,
    now: Millis,
) -> Result<Applied, ()> {
    match app.writer.apply(Command::Replica { service, replica }, now) {
        Ok(Outcome::Done(a)) => Ok(a),
        // A replica is never durable: nothing to wait for.
        Ok(Outcome::Later(_)) => Ok(Applied::default()),
        Err(_) => Err(()),
    }
}

const STALE: Applied = Applied {
    revision: 0,
    changed: false,
    stale: true,
};

/// Deletes a service its writer removed, unless this node holds a later
/// state from that writer.
fn remove(app: &App, service: ServiceRef<'_>, origin: Origin, now: Millis) -> Applied {
    let Some(snap) = app.store.snapshot(service) else {
        return STALE;
    };
    if snap.origin().covers(&origin) {
        return STALE;
    }
    // Connection-held instances are their clients', not the service
    // owner's: only the owner's part goes.
    if snap
        .instances()
        .iter()
        .any(|i| app.store.is_held(service, i))
    {
        return apply_replica(app, service, &empty_replica(origin), now).unwrap_or(STALE);
    }
    match app.writer.apply(Command::Drop { service }, now) {
        Ok(Outcome::Done(a)) => a,
        Ok(Outcome::Later(_)) | Err(_) => STALE,
    }
}

fn replica_of(state: &ServiceState, origin: Origin) -> Result<Replica<'_>, ()> {
    let mut instances = Vec::with_capacity(state.instances.len());
    for i in &state.instances {
        let ip: IpAddr = i.ip.parse().map_err(|_| ())?;
        instances.push(InstanceSpec {
            addr: InstanceAddr {
                cluster: &i.cluster,
                ip,
                port: i.port,
            },
            weight: i.weight,
            healthy: i.healthy,
            enabled: i.enabled,
            ephemeral: i.ephemeral,
            metadata: Metadata::from_pairs(i.metadata.iter().map(|(k, v)| (k, v)))
                .map_err(|_| ())?,
        });
    }
    let mut overrides = Vec::with_capacity(state.overrides.len());
    for o in &state.overrides {
        let addr = InstanceAddr {
            cluster: &o.cluster,
            ip: o.ip.parse().map_err(|_| ())?,
            port: o.port,
        };
        let layer = InstanceOverride {
            weight: o.weight,
            enabled: o.enabled,
            metadata: Metadata::from_pairs(o.metadata.iter().map(|(k, v)| (k, v)))
                .map_err(|_| ())?,
        };
        overrides.push((addr, layer));
    }
    Ok(Replica {
        overrides,
        origin,
        protect_threshold: state.protect_threshold,
        metadata: Metadata::from_pairs(state.metadata.iter().map(|(k, v)| (k, v)))
            .map_err(|_| ())?,
        selector: state.selector.as_deref().map(Arc::from),
        explicit: state.explicit,
        instances,
    })
}
