//! Connection-owned client sets (Nacos 2.x clients) and who holds each
//! instance, across the cluster.
//!
//! A 2.x client's ephemeral instances belong to its connection. The node
//! holding the connection has the *native* client; every other node holds a
//! *synced* copy of its whole set, stamped with the owner's revision. The
//! same instance (service, cluster, ip, port) may be held by several
//! clients at once: a client that lost its node reconnects to another and
//! registers again while the dead node's copy is still held. The instance
//! stays in the store while any client holds it, and leaves it when the
//! last one lets go.
//!
//! This table is pure bookkeeping: [`Clients::replace`] and
//! [`Clients::remove`] return the [`Effect`]s the store must take (put an
//! instance's content, or remove it), and the server applies them under the
//! same lock, so the table and the store never disagree about who holds
//! what. Time comes in as [`Millis`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use crate::metadata::Metadata;
use crate::model::{InstanceAddr, InstanceSpec, Millis, ServiceKey};

/// One instance of a client's set, with everything a reader can see.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientInstance {
    /// The service.
    pub service: ServiceKey,
    /// Cluster name.
    pub cluster: Arc<str>,
    /// IP.
    pub ip: IpAddr,
    /// Port.
    pub port: u16,
    /// Load-balancing weight.
    pub weight: f64,
    /// Healthy.
    pub healthy: bool,
    /// Visible to queries.
    pub enabled: bool,
    /// Metadata.
    pub metadata: Metadata,
}

/// Where an instance sits: what two clients holding "the same" instance
/// share.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    /// The service.
    pub service: ServiceKey,
    /// Cluster name.
    pub cluster: Arc<str>,
    /// IP.
    pub ip: IpAddr,
    /// Port.
    pub port: u16,
}

impl ClientInstance {
    /// Where it sits.
    pub fn place(&self) -> Place {
        Place {
            service: self.service.clone(),
            cluster: self.cluster.clone(),
            ip: self.ip,
            port: self.port,
        }
    }

    /// The ephemeral instance spec the store registers for it.
    pub fn spec(&self) -> InstanceSpec<'_> {
        InstanceSpec {
            addr: InstanceAddr {
                cluster: &self.cluster,
                ip: self.ip,
                port: self.port,
            },
            weight: self.weight,
            healthy: self.healthy,
            enabled: self.enabled,
            ephemeral: true,
            metadata: self.metadata.clone(),
        }
    }
}

/// What the store must do after a change of the table.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Make this content the instance's (register or update, held).
    Put(ClientInstance),
    /// No client holds this instance any more.
    Remove(Place),
}

/// A client as this node holds it.
#[derive(Clone, Debug)]
pub struct ClientState {
    /// The member responsible for it; `None` when it is this node's own
    /// (native) client.
    pub owner: Option<Arc<str>>,
    /// The owner's revision of the set.
    pub revision: u64,
    /// When its owner last confirmed it (sync or verify), on this node's clock.
    pub renewed: Millis,
    /// Its instances, one per place.
    pub instances: Vec<ClientInstance>,
}

/// What [`Clients::replace`] did.
#[derive(Debug, PartialEq)]
pub enum Replaced {
    /// The table already holds this revision or a later one of the client,
    /// or the client was removed at or after it: nothing changed.
    Stale,
    /// Applied; the store must take these effects.
    Applied(Vec<Effect>),
}

/// Every client this node knows, native and synced, and the holders of
/// each instance.
#[derive(Default)]
pub struct Clients {
    clients: HashMap<Arc<str>, ClientState>,
    holders: HashMap<Place, Vec<Arc<str>>>,
    /// Removed synced clients and the revision they were removed at, so a
    /// late message cannot bring them back; forgotten by [`Clients::prune`].
    removed: HashMap<Arc<str>, (u64, Millis)>,
}

impl Clients {
    /// An empty table.
    pub fn new() -> Clients {
        Clients::default()
    }

    /// The client `id`, if held.
    pub fn get(&self, id: &str) -> Option<&ClientState> {
        self.clients.get(id)
    }

    /// Every client held, native and synced.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &ClientState)> {
        self.clients.iter()
    }

    /// (native, synced) client counts.
    pub fn counts(&self) -> (usize, usize) {
        let native = self.clients.values().filter(|c| c.owner.is_none()).count();
        (native, self.clients.len() - native)
    }

    /// How many clients hold the instance at `place`.
    pub fn holder_count(&self, place: &Place) -> usize {
        self.holders.get(place).map_or(0, Vec::len)
    }

    /// Makes `instances` the whole set of client `id` at `revision`,
    /// owned by `owner` (`None`: this node's own). A synced client's
    /// older or equal revision is [`Replaced::Stale`]; a native client's
    /// revision is the caller's (it increments it). A repeated place keeps
    /// its last entry.
    pub fn replace(
        &mut self,
        id: &str,
        owner: Option<&str>,
        revision: u64,
        instances: Vec<ClientInstance>,
        now: Millis,
    ) -> Replaced {
        if owner.is_some() {
            let known = self.clients.get(id).map(|c| c.revision);
            let gone = self.removed.get(id).map(|r| r.0);
            if known.is_some_and(|r| r >= revision) || gone.is_some_and(|r| r >= revision) {
                if let Some(c) = self.clients.get_mut(id) {
                    c.renewed = now;
                }
                return Replaced::Stale;
            }
        }
        let mut by_place: HashMap<Place, ClientInstance> = HashMap::with_capacity(instances.len());
        for inst in instances {
            by_place.insert(inst.place(), inst);
        }
        let key: Arc<str> = Arc::from(id);
        let old: HashMap<Place, ClientInstance> = self
            .clients
            .remove(id)
            .map(|c| c.instances)
            .unwrap_or_default()
            .into_iter()
            .map(|i| (i.place(), i))
            .collect();
        let mut effects = Vec::new();
        for place in old.keys() {
            if !by_place.contains_key(place) {
                effects.extend(self.let_go(place, &key));
            }
        }
        let mut set = Vec::with_capacity(by_place.len());
        for (place, new) in by_place {
            match old.get(&place) {
                Some(o) if *o == new => {}
                Some(_) => effects.push(Effect::Put(new.clone())),
                None => {
                    let holders = self.holders.entry(place).or_default();
                    if !holders.contains(&key) {
                        holders.push(key.clone());
                    }
                    effects.push(Effect::Put(new.clone()));
                }
            }
            set.push(new);
        }
        self.removed.remove(id);
        self.clients.insert(
            key,
            ClientState {
                owner: owner.map(Arc::from),
                revision,
                renewed: now,
                instances: set,
            },
        );
        Replaced::Applied(effects)
    }

    /// Removes client `id` (its connection closed, or its owner stopped
    /// renewing it). `revision` of a synced client's removal guards against
    /// late messages; `None` removes whatever is held.
    pub fn remove(&mut self, id: &str, revision: Option<u64>, now: Millis) -> Vec<Effect> {
        if let (Some(r), Some(c)) = (revision, self.clients.get(id)) {
            if c.revision > r {
                return Vec::new();
            }
        }
        let Some((key, state)) = self.clients.remove_entry(id) else {
            if let Some(r) = revision {
                let entry = self.removed.entry(Arc::from(id)).or_insert((r, now));
                entry.0 = entry.0.max(r);
            }
            return Vec::new();
        };
        // Only an owner's removal is final; a client dropped for silence
        // may come back at the same revision when its owner speaks again.
        if let (Some(r), Some(_)) = (revision, &state.owner) {
            self.removed.insert(key.clone(), (r, now));
        }
        let mut effects = Vec::new();
        for inst in state.instances {
            effects.extend(self.let_go(&inst.place(), &key));
        }
        effects
    }

    /// Notes that `owner` confirmed client `id` at `revision`. False when
    /// this node does not hold that revision (the owner must send it).
    pub fn renew(&mut self, id: &str, revision: u64, now: Millis) -> bool {
        match self.clients.get_mut(id) {
            Some(c) if c.revision == revision => {
                c.renewed = now;
                true
            }
            _ => false,
        }
    }

    /// Synced clients for which `stale` says their owner stopped
    /// renewing them: `stale(owner, renewed)`.
    pub fn expired(&self, mut stale: impl FnMut(&str, Millis) -> bool) -> Vec<Arc<str>> {
        self.clients
            .iter()
            .filter(|(_, c)| c.owner.as_deref().is_some_and(|o| stale(o, c.renewed)))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Forgets removals older than `before`.
    pub fn prune(&mut self, before: Millis) {
        self.removed.retain(|_, (_, at)| *at >= before);
    }

    /// `key` no longer holds `place`: the store removes the instance, or
    /// takes the content of a remaining holder.
    fn let_go(&mut self, place: &Place, key: &Arc<str>) -> Option<Effect> {
        let holders = self.holders.get_mut(place)?;
        holders.retain(|h| h != key);
        let Some(other) = holders.last().cloned() else {
            self.holders.remove(place);
            return Some(Effect::Remove(place.clone()));
        };
        self.clients
            .get(&other)
            .and_then(|c| c.instances.iter().find(|i| i.place() == *place))
            .map(|i| Effect::Put(i.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(port: u16, weight: f64) -> ClientInstance {
        ClientInstance {
            service: ServiceKey::new("public", "DEFAULT_GROUP@@svc"),
            cluster: Arc::from("DEFAULT"),
            ip: "10.0.0.1".parse().unwrap(),
            port,
            weight,
            healthy: true,
            enabled: true,
            metadata: Metadata::empty(),
        }
    }

    fn effects(r: Replaced) -> Vec<Effect> {
        match r {
            Replaced::Applied(e) => e,
            Replaced::Stale => panic!("stale"),
        }
    }

    #[test]
    fn a_set_is_replaced_by_revision_and_only_its_changes_reach_the_store() {
        let mut t = Clients::new();
        let e = effects(t.replace(
            "c1",
            Some("n1"),
            1,
            vec![inst(1, 1.0), inst(2, 1.0)],
            Millis(0),
        ));
        assert_eq!(e.len(), 2);
        // An older or equal revision changes nothing.
        assert_eq!(
            t.replace("c1", Some("n1"), 1, vec![], Millis(1)),
            Replaced::Stale
        );
        let e = effects(t.replace("c1", Some("n1"), 2, vec![inst(1, 2.0)], Millis(2)));
        assert_eq!(e.len(), 2);
        assert!(e.contains(&Effect::Put(inst(1, 2.0))));
        assert!(e.contains(&Effect::Remove(inst(2, 1.0).place())));
        assert_eq!(t.counts(), (0, 1));
    }

    #[test]
    fn an_instance_stays_while_any_client_holds_it() {
        let mut t = Clients::new();
        // The dead node's copy and the reconnected native client.
        effects(t.replace("old", Some("n1"), 3, vec![inst(1, 1.0)], Millis(0)));
        effects(t.replace("new", None, 1, vec![inst(1, 1.0)], Millis(5)));
        assert_eq!(t.holder_count(&inst(1, 1.0).place()), 2);
        let e = t.remove("old", None, Millis(10));
        // The other holder's content is put back, nothing is removed.
        assert_eq!(e, vec![Effect::Put(inst(1, 1.0))]);
        let e = t.remove("new", None, Millis(11));
        assert_eq!(e, vec![Effect::Remove(inst(1, 1.0).place())]);
    }

    #[test]
    fn a_removed_client_is_not_brought_back_by_a_late_message() {
        let mut t = Clients::new();
        effects(t.replace("c", Some("n1"), 4, vec![inst(1, 1.0)], Millis(0)));
        assert_eq!(t.remove("c", Some(5), Millis(1)).len(), 1);
        assert_eq!(
            t.replace("c", Some("n1"), 4, vec![inst(1, 1.0)], Millis(2)),
            Replaced::Stale
        );
        t.prune(Millis(100));
        assert!(matches!(
            t.replace("c", Some("n1"), 4, vec![inst(1, 1.0)], Millis(200)),
            Replaced::Applied(_)
        ));
    }

    #[test]
    fn expiry_picks_synced_clients_of_silent_owners_only() {
        let mut t = Clients::new();
        effects(t.replace("a", Some("n1"), 1, vec![inst(1, 1.0)], Millis(0)));
        effects(t.replace("b", Some("n2"), 1, vec![inst(2, 1.0)], Millis(0)));
        effects(t.replace("mine", None, 1, vec![inst(3, 1.0)], Millis(0)));
        assert!(t.renew("b", 1, Millis(50)));
        assert!(!t.renew("b", 2, Millis(50)));
        let gone = t.expired(|owner, renewed| owner == "n1" && renewed.0 < 10);
        assert_eq!(gone, vec![Arc::from("a")]);
    }
}
