//! Nacos 2.x clients across the cluster: connection-owned replication.
//!
//! A 2.x client's ephemeral instances belong to its gRPC connection, and so
//! to the node holding it, whatever node their services' hash names. That
//! node replicates the connection's whole instance set, with a revision
//! that grows with every change, to every member ([`sync_loop`]), merged
//! per client within the sync window, in parts of at most one message.
//! Peers hold it as a *synced* client and apply a revision once, whole
//! ([`on_client_sets`]); the store's view of a service merges native
//! clients, synced clients and 1.x instances, and keeps an instance while
//! any client holds it (`registry_core::clients`). Closing the connection
//! replicates the removal.
//!
//! Renewal and repair: every client-verify interval the responsible node
//! sends each peer its clients' revisions ([`verify_loop`]); a peer renews
//! those it holds at that revision and names the others, which the owner
//! sends again. A synced client not renewed within the grace (its node
//! died, was cut off, or dropped it while a removal was lost) is removed
//! ([`expiry_loop`]); the grace covers a client's reconnect to a survivor
//! and its redo, so a reconnected client's instances are never missing.
//!
//! 1.x instances keep the service-owned Distro of [`super::replicate`]:
//! service states carry only heartbeat-leased instances, and the store
//! keeps connection-held ones when it applies them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use registry_core::{
    ClientInstance, Clients, Effect, InstanceAddr, Metadata, Millis, Replaced, ServiceKey,
    ServiceRef,
};
use registry_proto::distro::{
    self, ClientInstanceState, ClientPart, ClientSets, ClientVerify, ClientVerifyAnswer,
    InstanceState,
};
use registry_proto::http1::Method;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::members::MemberState;
use super::parts::{Offered, Parts};
use super::Cluster;
use crate::clock::Clock;
use crate::hub::Connection;
use crate::state::App;
use crate::write::Command;

/// Client revisions named in one verify message.
const VERIFY_BATCH: usize = 8192;

/// A client waiting to be sent: when its first unsent change happened, and
/// the revision of its removal when it is gone.
#[derive(Clone, Copy)]
struct Due {
    first_ms: u64,
    removed_at: Option<u64>,
}

/// The cluster's 2.x client state on this node.
pub struct ClientSync {
    /// Every client held here, native and synced, and who holds what.
    table: Mutex<Clients>,
    /// Native clients changed since the last send.
    dirty: Mutex<HashMap<Arc<str>, Due>>,
    ready: Notify,
    /// Client sets arriving in parts.
    parts: Mutex<Parts<ClientPart>>,
    /// How long a synced client lives without its owner renewing it.
    pub grace: Duration,
    /// How often this node sends its clients' revisions.
    pub verify_interval: Duration,
}

impl ClientSync {
    /// Empty, with the given grace and verify interval.
    pub fn new(grace: Duration, verify_interval: Duration) -> ClientSync {
        ClientSync {
            table: Mutex::new(Clients::new()),
            dirty: Mutex::new(HashMap::new()),
            ready: Notify::new(),
            parts: Mutex::new(Parts::default()),
            grace,
            verify_interval,
        }
    }

    /// (native, synced) clients held now.
    pub fn counts(&self) -> (usize, usize) {
        self.table.lock().counts()
    }

    /// Where every held client's instances sit.
    pub fn places(&self) -> std::collections::HashSet<registry_core::Place> {
        let table = self.table.lock();
        table
            .iter()
            .flat_map(|(_, c)| c.instances.iter().map(ClientInstance::place))
            .collect()
    }

    /// Synced clients per owning member.
    pub fn synced_by_owner(&self) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for (_, c) in self.table.lock().iter() {
            if let Some(o) = &c.owner {
                *out.entry(o.to_string()).or_default() += 1;
            }
        }
        out
    }

    fn mark(&self, id: Arc<str>, removed_at: Option<u64>) {
        let mut dirty = self.dirty.lock();
        let due = dirty.entry(id).or_insert(Due {
            first_ms: Clock::wall_ms(),
            removed_at: None,
        });
        due.removed_at = removed_at;
        drop(dirty);
        self.ready.notify_one();
    }
}

/// Notes a change of `conn`'s owned instances, after the gRPC door wrote
/// them to the store: the connection's whole set becomes its native
/// client's next revision, instances other clients still hold are put
/// back, and the set is queued for the peers.
pub fn native_changed(app: &App, cluster: &Cluster, conn: &Connection) {
    let set: Vec<ClientInstance> = {
        let owned = conn.owned.lock();
        owned
            .instances
            .iter()
            .filter_map(|o| {
                let svc = o.service.as_ref();
                let addr = InstanceAddr {
                    cluster: &o.cluster,
                    ip: o.ip,
                    port: o.port,
                };
                app.store
                    .read(svc, |s| s.find(addr, true).cloned())
                    .flatten()
                    .map(|i| ClientInstance {
                        service: o.service.clone(),
                        cluster: o.cluster.clone(),
                        ip: o.ip,
                        port: o.port,
                        weight: i.weight,
                        healthy: i.healthy,
                        enabled: i.enabled,
                        metadata: i.metadata.clone(),
                    })
            })
            .collect()
    };
    let sync = &cluster.clients;
    let mut table = sync.table.lock();
    let revision = table.get(&conn.id).map_or(0, |c| c.revision) + 1;
    if let Replaced::Applied(effects) =
        table.replace(&conn.id, None, revision, set, app.clock.now())
    {
        apply_effects(app, effects);
    }
    drop(table);
    sync.mark(Arc::from(conn.id.as_str()), None);
}

/// Notes that `conn` closed, after the gRPC door removed its instances:
/// instances other clients still hold are put back, and the removal is
/// queued for the peers.
pub fn native_closed(app: &App, cluster: &Cluster, conn: &Connection) {
    let sync = &cluster.clients;
    let mut table = sync.table.lock();
    let Some(revision) = table.get(&conn.id).map(|c| c.revision + 1) else {
        return;
    };
    let effects = table.remove(&conn.id, None, app.clock.now());
    apply_effects(app, effects);
    drop(table);
    sync.mark(Arc::from(conn.id.as_str()), Some(revision));
}

/// Applies the table's effects through the write path, which publishes
/// each change (so this node's subscribers are pushed). Called under the
/// table's lock.
fn apply_effects(app: &App, effects: Vec<Effect>) {
    let now = app.clock.now();
    let mut puts: HashMap<ServiceKey, Vec<ClientInstance>> = HashMap::new();
    for e in effects {
        match e {
            Effect::Put(i) => puts.entry(i.service.clone()).or_default().push(i),
            Effect::Remove(p) => {
                let command = Command::Deregister {
                    service: p.service.as_ref(),
                    addr: InstanceAddr {
                        cluster: &p.cluster,
                        ip: p.ip,
                        port: p.port,
                    },
                    ephemeral: true,
                };
                // Removing what is not there is no error and no event.
                let _ = app.writer.apply(command, now);
            }
        }
    }
    for (service, instances) in puts {
        let specs: Vec<_> = instances.iter().map(ClientInstance::spec).collect();
        let command = Command::Replace {
            service: service.as_ref(),
            instances: &specs,
            stale: &[],
        };
        if let Err(e) = app.writer.apply(command, now) {
            tracing::warn!(service = service.grouped_name(), error = ?e,
                "a replicated client set could not be stored");
        }
    }
}

/// Waits for changed native clients, lets the window pass, sends them.
pub(crate) async fn sync_loop(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    let sync = &cluster.clients;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = sync.ready.notified() => {}
        }
        // Changes arriving within the window merge into this batch.
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(cluster.config.sync_window) => {}
        }
        let due: Vec<(Arc<str>, Due)> = sync.dirty.lock().drain().collect();
        let parts = parts_of(&app, &cluster, &due);
        if !parts.is_empty() {
            send_parts(&cluster, parts);
        }
    }
}

/// The parts to send for `due`: each native client's whole set at its
/// revision, or its removal.
fn parts_of(_app: &App, cluster: &Cluster, due: &[(Arc<str>, Due)]) -> Vec<ClientPart> {
    let budget = part_budget(cluster);
    let table = cluster.clients.table.lock();
    let mut out = Vec::new();
    for (id, d) in due {
        match (table.get(id), d.removed_at) {
            (Some(c), _) if c.owner.is_none() => {
                let instances: Vec<ClientInstanceState> = c.instances.iter().map(wire).collect();
                out.extend(split_client(id, c.revision, d.first_ms, instances, budget));
            }
            (None, Some(revision)) => out.push(ClientPart {
                client: id.to_string(),
                revision,
                changed_ms: d.first_ms,
                removed: true,
                part: 0,
                parts: 1,
                instances: Vec::new(),
            }),
            _ => {}
        }
    }
    out
}

/// Bytes of instances one part may carry.
fn part_budget(cluster: &Cluster) -> usize {
    cluster.config.max_message.saturating_sub(4096).max(1024)
}

/// A client set as parts of at most `budget` bytes of instances each.
fn split_client(
    id: &str,
    revision: u64,
    changed_ms: u64,
    instances: Vec<ClientInstanceState>,
    budget: usize,
) -> Vec<ClientPart> {
    let mut groups: Vec<Vec<ClientInstanceState>> = vec![Vec::new()];
    let mut size = 0;
    for i in instances {
        let len = serde_json::to_vec(&i).map_or(budget, |b| b.len() + 1);
        if size + len > budget && groups.last().is_some_and(|g| !g.is_empty()) {
            groups.push(Vec::new());
            size = 0;
        }
        size += len;
        if let Some(g) = groups.last_mut() {
            g.push(i);
        }
    }
    let parts = groups.len() as u32;
    groups
        .into_iter()
        .enumerate()
        .map(|(part, instances)| ClientPart {
            client: id.to_owned(),
            revision,
            changed_ms,
            removed: false,
            part: part as u32,
            parts,
            instances,
        })
        .collect()
}

fn wire(i: &ClientInstance) -> ClientInstanceState {
    ClientInstanceState {
        ns: i.service.namespace().to_owned(),
        service: i.service.grouped_name().to_owned(),
        instance: InstanceState {
            ip: i.ip.to_string(),
            port: i.port,
            cluster: i.cluster.to_string(),
            weight: i.weight,
            healthy: i.healthy,
            enabled: i.enabled,
            ephemeral: true,
            metadata: i
                .metadata
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        },
    }
}

/// Sends `parts` to every peer not known DOWN, packed into messages of at
/// most the bound, without waiting for the answers.
fn send_parts(cluster: &Arc<Cluster>, parts: Vec<ClientPart>) {
    let budget = cluster.config.max_message.saturating_sub(1024).max(1024);
    let mut messages: Vec<Vec<u8>> = Vec::new();
    let mut batch = Vec::new();
    let mut size = 0;
    let count = parts.len() as u64;
    for p in parts {
        let len = serde_json::to_vec(&p).map_or(budget, |b| b.len() + 1);
        if size + len > budget && !batch.is_empty() {
            messages.push(encode_sets(cluster, std::mem::take(&mut batch)));
            size = 0;
        }
        size += len;
        batch.push(p);
    }
    if !batch.is_empty() {
        messages.push(encode_sets(cluster, batch));
    }
    let messages: Arc<[Vec<u8>]> = messages.into();
    for i in 0..cluster.peers().len() {
        if cluster.peers()[i].state() == MemberState::Down {
            continue;
        }
        let (cluster, messages) = (cluster.clone(), messages.clone());
        tokio::spawn(async move {
            let peer = &cluster.peers()[i];
            for body in messages.iter() {
                if let Err(e) = call(peer, distro::CLIENTS_PATH, body).await {
                    cluster.stats.send_failed.inc();
                    tracing::debug!(peer = %peer.addr, error = %e, "client replication failed");
                }
            }
            cluster.stats.client_parts_sent.add(count);
        });
    }
}

fn encode_sets(cluster: &Cluster, items: Vec<ClientPart>) -> Vec<u8> {
    distro::encode(&cluster.envelope(ClientSets {
        node: cluster.node,
        items,
    }))
}

/// One peer request over the peer's sync link: the body of a 200 answer.
pub(super) async fn call(
    peer: &super::members::Peer,
    path: &str,
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let mut request = Vec::with_capacity(body.len() + 160);
    distro::write_peer_request(&mut request, Method::Put, path, &peer.addr, body);
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

/// What applying a message of client sets did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientReport {
    /// Client revisions (or removals) applied.
    pub applied: usize,
    /// Already held, or older than what is held.
    pub stale: usize,
    /// Refused as invalid (nothing of such a part is applied).
    pub invalid: usize,
}

/// Applies client sets (or parts of them) written by member `from`.
pub(crate) fn on_client_sets(
    app: &App,
    cluster: &Cluster,
    from: &str,
    sets: &ClientSets,
) -> ClientReport {
    let mut report = ClientReport::default();
    let wall = Clock::wall_ms();
    for p in &sets.items {
        if p.check().is_err() {
            report.invalid += 1;
            continue;
        }
        if p.removed {
            let mut table = cluster.clients.table.lock();
            let effects = table.remove(&p.client, Some(p.revision), app.clock.now());
            apply_effects(app, effects);
            report.applied += 1;
            continue;
        }
        let key = format!("{from}/{}", p.client);
        let offered =
            cluster
                .clients
                .parts
                .lock()
                .offer(key, p.revision, p.part, p.parts, p.clone(), wall);
        let Offered::Complete(parts) = offered else {
            continue;
        };
        let Ok(instances) = parts
            .iter()
            .flat_map(|p| p.instances.iter())
            .map(instance_of)
            .collect::<Result<Vec<_>, ()>>()
        else {
            report.invalid += 1;
            continue;
        };
        let mut table = cluster.clients.table.lock();
        match table.replace(
            &p.client,
            Some(from),
            p.revision,
            instances,
            app.clock.now(),
        ) {
            Replaced::Stale => report.stale += 1,
            Replaced::Applied(effects) => {
                apply_effects(app, effects);
                report.applied += 1;
                if p.changed_ms > 0 {
                    cluster
                        .stats
                        .client_lag_ms
                        .record(wall.saturating_sub(p.changed_ms));
                }
            }
        }
    }
    cluster.stats.client_sets_applied.add(report.applied as u64);
    cluster.stats.datums_invalid.add(report.invalid as u64);
    report
}

/// A replicated instance as the store takes it; `Err` when it names no IP
/// or its metadata is refused.
fn instance_of(i: &ClientInstanceState) -> Result<ClientInstance, ()> {
    let ip: IpAddr = i.instance.ip.parse().map_err(|_| ())?;
    let service = ServiceRef::new(&i.ns, &i.service);
    if service.namespace.is_empty() || service.name.is_empty() || i.instance.cluster.is_empty() {
        return Err(());
    }
    if !i.instance.weight.is_finite() {
        return Err(());
    }
    Ok(ClientInstance {
        service: ServiceKey::new(&i.ns, &i.service),
        cluster: Arc::from(i.instance.cluster.as_str()),
        ip,
        port: i.instance.port,
        weight: i.instance.weight,
        healthy: i.instance.healthy,
        enabled: i.instance.enabled,
        metadata: Metadata::from_pairs(i.instance.metadata.iter().map(|(k, v)| (k, v)))
            .map_err(|_| ())?,
    })
}

/// Renews the clients of `list` held at the listed revision; answers the
/// others, which the owner then sends in full.
pub(crate) fn on_verify(app: &App, cluster: &Cluster, list: &ClientVerify) -> ClientVerifyAnswer {
    let now = app.clock.now();
    let mut table = cluster.clients.table.lock();
    let resend = list
        .items
        .iter()
        .filter(|(id, revision)| !table.renew(id, *revision, now))
        .map(|(id, _)| id.clone())
        .collect();
    ClientVerifyAnswer { resend }
}

/// Every verify interval, sends each peer the revisions of this node's
/// clients, and queues what a peer asks for again.
pub(crate) async fn verify_loop(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(cluster.clients.verify_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let _ = &app;
        let natives: Vec<(String, u64)> = cluster
            .clients
            .table
            .lock()
            .iter()
            .filter(|(_, c)| c.owner.is_none())
            .map(|(id, c)| (id.to_string(), c.revision))
            .collect();
        let bodies: Arc<[Vec<u8>]> = natives
            .chunks(VERIFY_BATCH)
            .map(|items| {
                distro::encode(&cluster.envelope(ClientVerify {
                    items: items.to_vec(),
                }))
            })
            .collect();
        if bodies.is_empty() {
            continue;
        }
        for i in 0..cluster.peers().len() {
            if cluster.peers()[i].state() == MemberState::Down {
                continue;
            }
            let (cluster, bodies) = (cluster.clone(), bodies.clone());
            tokio::spawn(async move { verify_peer(&cluster, i, &bodies).await });
        }
    }
}

async fn verify_peer(cluster: &Cluster, i: usize, bodies: &[Vec<u8>]) {
    let peer = &cluster.peers()[i];
    for body in bodies {
        let answer = match call(peer, distro::CLIENT_VERIFY_PATH, body).await {
            Ok(a) => a,
            Err(e) => {
                cluster.stats.send_failed.inc();
                tracing::debug!(peer = %peer.addr, error = %e, "client verify failed");
                return;
            }
        };
        match distro::decode_answer::<ClientVerifyAnswer>(&answer, cluster.config.max_message) {
            Ok(a) => {
                cluster.stats.client_repairs.add(a.resend.len() as u64);
                for id in a.resend {
                    let native = cluster
                        .clients
                        .table
                        .lock()
                        .get(&id)
                        .is_some_and(|c| c.owner.is_none());
                    if native {
                        cluster.clients.mark(Arc::from(id), None);
                    }
                }
            }
            Err(e) => tracing::debug!(peer = %peer.addr, error = %e, "bad client verify answer"),
        }
    }
}

/// Removes synced clients their owner stopped renewing for longer than
/// the grace. A node that was itself frozen renews everything first: the
/// owners did not stop, this node did.
pub(crate) async fn expiry_loop(app: Arc<App>, cluster: Arc<Cluster>, cancel: CancellationToken) {
    let sync = &cluster.clients;
    let grace = sync.grace.as_millis() as u64;
    let step = Duration::from_millis((grace / 8).clamp(10, 1000));
    let mut tick = tokio::time::interval(step);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last = app.clock.now();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = app.clock.now();
        let gap = now.0.saturating_sub(last.0);
        last = now;
        let mut table = sync.table.lock();
        if gap > grace / 2 + step.as_millis() as u64 {
            // Frozen (SIGSTOP, a long pause): give the owners a grace.
            let ids: Vec<(Arc<str>, u64)> = table
                .iter()
                .map(|(id, c)| (id.clone(), c.revision))
                .collect();
            for (id, revision) in ids {
                table.renew(&id, revision, now);
            }
            continue;
        }
        let expired = table.expired(|_, renewed| now.0.saturating_sub(renewed.0) > grace);
        for id in &expired {
            let effects = table.remove(id, None, now);
            apply_effects(&app, effects);
        }
        table.prune(Millis(now.0.saturating_sub(grace.saturating_mul(6))));
        drop(table);
        if !expired.is_empty() {
            cluster.stats.clients_expired.add(expired.len() as u64);
            tracing::info!(
                clients = expired.len(),
                "removed synced clients their owner stopped renewing"
            );
        }
    }
}
