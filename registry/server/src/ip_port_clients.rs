//! Nacos's address clients, derived from the store: every address that
//! publishes an instance without a 2.x connection behind it is one client.
//!
//! Nacos 2.x/3.x keeps two kinds of clients
//! (`naming/core/v2/client/impl/`): a `ConnectionBasedClient` per gRPC
//! connection, and an `IpPortBasedClient` per address that registered over
//! HTTP, with the id `ip:port#true` for its ephemeral instances and
//! `ip:port#false` for persistent ones (every persistent instance, whatever
//! door it came through: `PersistentClientOperationServiceImpl`). The
//! admin views (`client/list`, the operator's metrics) count both. We keep
//! no table for the second kind: a 1.x or v2/v3 registration is an
//! instance and a lease, so the address clients are read off the store
//! when asked, leaving out the ephemeral instances a connection holds.
//! That costs a walk over every instance for the views of all clients
//! (the list, a client's detail, the metrics) and over one service's for
//! its publishers: admin views, asked rarely, never on a client's path.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use registry_core::Place;

use crate::state::App;

/// `IpPortBasedClient.ID_DELIMITER`, between the address and the flag.
pub const ID_DELIMITER: char = '#';

/// One address client: its id and what it publishes.
#[derive(Clone, Debug, PartialEq)]
pub struct AddressClient {
    /// `ip:port#true` or `ip:port#false`.
    pub id: String,
    /// Ephemeral (`#true`) or persistent (`#false`).
    pub ephemeral: bool,
    /// The instances it publishes, ordered by service, cluster and address.
    pub published: Vec<Published>,
    /// The latest beat of its instances on this node's monotonic clock
    /// (`None` for persistent instances, which have no beat).
    pub last_beat: Option<registry_core::Millis>,
}

/// One instance an address client publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The service.
    pub service: registry_core::ServiceKey,
    /// Its cluster.
    pub cluster: String,
    /// Its address.
    pub ip: IpAddr,
    /// Its port.
    pub port: u16,
}

/// The address clients, ordered by id.
pub fn address_clients(app: &App) -> Vec<AddressClient> {
    let held = connection_places(app);
    let mut by_id: BTreeMap<String, AddressClient> = BTreeMap::new();
    app.store
        .for_each_service(|snap| add_service(app, &held, snap, &mut by_id));
    let mut clients: Vec<AddressClient> = by_id.into_values().collect();
    for c in &mut clients {
        c.published.sort_by(|a, b| {
            let key = |p: &Published| {
                (
                    p.service.namespace().to_owned(),
                    p.service.grouped_name().to_owned(),
                    p.cluster.clone(),
                    p.ip,
                    p.port,
                )
            };
            key(a).cmp(&key(b))
        });
    }
    clients
}

/// The address clients publishing into `service`, ordered by id, each
/// with only what it publishes there.
pub fn publishing_into(app: &App, service: registry_core::ServiceRef<'_>) -> Vec<AddressClient> {
    let Some(snap) = app.store.snapshot(service) else {
        return Vec::new();
    };
    let held = connection_places(app);
    let mut by_id = BTreeMap::new();
    add_service(app, &held, &snap, &mut by_id);
    by_id.into_values().collect()
}

/// Adds `snap`'s instances that no connection holds to their clients.
fn add_service(
    app: &App,
    held: &HashSet<Place>,
    snap: &registry_core::ServiceSnapshot,
    by_id: &mut BTreeMap<String, AddressClient>,
) {
    for i in snap.instances() {
        // A place only to look up: skipped when no connection holds anything.
        let connection_held = i.ephemeral
            && !held.is_empty()
            && held.contains(&place(snap.key(), &i.cluster, i.ip, i.port));
        if connection_held {
            continue;
        }
        let id = client_id(i.ip, i.port, i.ephemeral);
        let client = by_id.entry(id.clone()).or_insert(AddressClient {
            id,
            ephemeral: i.ephemeral,
            published: Vec::new(),
            last_beat: None,
        });
        client.published.push(Published {
            service: snap.key().clone(),
            cluster: i.cluster.to_string(),
            ip: i.ip,
            port: i.port,
        });
        let beat = app.store.last_beat(snap.key().as_ref(), i);
        client.last_beat = client.last_beat.max(beat);
    }
}

/// The address client `id` names, if it publishes anything now.
pub fn address_client(app: &App, id: &str) -> Option<AddressClient> {
    // Only an id of the form `ip:port#bool` can name one: spare the walk.
    let (_, flag) = id.rsplit_once(ID_DELIMITER)?;
    if flag != "true" && flag != "false" {
        return None;
    }
    address_clients(app).into_iter().find(|c| c.id == id)
}

/// `IpPortBasedClient.getClientId`: `ip:port#ephemeral` (IPv6 as written,
/// without brackets, as Nacos joins them).
pub fn client_id(ip: IpAddr, port: u16, ephemeral: bool) -> String {
    format!("{ip}:{port}{ID_DELIMITER}{ephemeral}")
}

/// Where the 2.x connections' instances sit: this node's connections, and
/// in a cluster every client the cluster table holds (native and synced).
fn connection_places(app: &App) -> HashSet<Place> {
    if let Some(cluster) = &app.cluster {
        return cluster.connection_places();
    }
    let mut out = HashSet::new();
    for conn in app.grpc.hub.all() {
        let owned = conn.owned.lock();
        out.extend(owned.instances.iter().map(|o| Place {
            service: o.service.clone(),
            cluster: o.cluster.clone(),
            ip: o.ip,
            port: o.port,
        }));
    }
    out
}

fn place(service: &registry_core::ServiceKey, cluster: &str, ip: IpAddr, port: u16) -> Place {
    Place {
        service: service.clone(),
        cluster: cluster.into(),
        ip,
        port,
    }
}
