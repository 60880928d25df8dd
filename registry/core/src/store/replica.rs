//! The store's side of cluster replication (Distro): applying a service
//! state received from the service's responsible node, renewing leases when
//! this node takes a service over, and deferring the leases of services
//! another node is responsible for.
//!
//! A child of `store` so it can reach the shards; the server's `cluster`
//! module decides *when* to call these, the store only keeps them correct
//! under its shard locks.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::held::HELD;
use super::layers::{carried, lay_carried};
use super::{check_name, Shard, Store, Written};
use crate::error::RegistryError;
use crate::instance_list::InstanceList;
use crate::lease::{self, LeaseSlot};
use crate::metadata::Metadata;
use crate::model::{check_threshold, check_weight, Instance, InstanceSpec, LeaseTimeouts};
use crate::model::{InstanceAddr, Millis, ServiceRef};
use crate::overrides::InstanceOverride;
use crate::snapshot::{Origin, ServiceSettings, ServiceSnapshot};
use crate::store::ServiceCell;

/// A service's whole state as its responsible node published it.
#[derive(Clone, Debug)]
pub struct Replica<'a> {
    /// Which node wrote it, at which of its revisions.
    pub origin: Origin,
    /// Protect threshold in `[0, 1]`.
    pub protect_threshold: f32,
    /// Service metadata.
    pub metadata: Metadata,
    /// Raw selector JSON.
    pub selector: Option<Arc<str>>,
    /// Created through the service API.
    pub explicit: bool,
    /// Every instance, in any order; a repeated address keeps its first.
    pub instances: Vec<InstanceSpec<'a>>,
    /// The operator's layers (already laid over `instances`).
    pub overrides: Vec<(InstanceAddr<'a>, InstanceOverride)>,
}

/// What [`Store::apply_replica`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// This node already holds this or a later revision from that origin:
    /// nothing changed (duplicates and reordered messages land here).
    Stale,
    /// Recorded as the new origin, but nothing a reader sees changed.
    Unchanged,
    /// Published as a new revision.
    Written(Written),
}

type Checked<'s, 'a> = (&'s InstanceSpec<'a>, LeaseTimeouts);

/// The order instances are kept in (`Instance::sort_key`), compared field
/// by field: comparing the same 4-tuple type as `snapshot::position` would
/// give that tuple's `Ord` a second caller, and the compiler then stops
/// inlining it into the beat's lookup (+3% instructions per beat, measured
/// by `scripts/gates.sh`).
fn order(a: &Checked<'_, '_>, b: &Checked<'_, '_>) -> std::cmp::Ordering {
    let (a, b) = (&a.0.addr, &b.0.addr);
    a.cluster
        .cmp(b.cluster)
        .then_with(|| a.ip.cmp(&b.ip))
        .then_with(|| a.port.cmp(&b.port))
}

fn same_place(a: &Checked<'_, '_>, b: &Checked<'_, '_>) -> bool {
    order(a, b).is_eq() && a.0.ephemeral == b.0.ephemeral
}

impl Store {
    /// Makes `replica` the service's state unless this node already holds
    /// that origin's revision or a later one (idempotent, so a message may
    /// arrive twice or late). Creates the service if needed. Ephemeral
    /// instances get a fresh lease (the owner saw them alive), kept leases
    /// are renewed, dropped instances release theirs.
    ///
    /// # Errors
    /// A validation error for the state; nothing is applied then.
    ///
    /// Longer than 80 lines: one pass under the shard's writer lock whose
    /// steps (held instances, placement and leases, counts, the next
    /// snapshot) share the guard, the cell and the old snapshot; split, each
    /// would take most of them as arguments.
    pub fn apply_replica(
        &self,
        service: ServiceRef<'_>,
        replica: &Replica<'_>,
        now: Millis,
    ) -> Result<Applied, RegistryError> {
        check_name(service)?;
        let specs = self.checked_specs(replica)?;
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let cell = self.cell_or_create(shard, &map, &mut w, service, now)?;
        let old = cell.snapshot.load_full();
        if old.origin().covers(&replica.origin) {
            return Ok(Applied::Stale);
        }
        let mut kept = vec![false; old.instances.len()];
        // Instances a connection holds (Nacos 2.x clients, native or
        // synced) are not the service owner's to replace: they stay, and a
        // replicated 1.x instance at the same place yields to them.
        // The layers the replica brings are laid over those too (an
        // operator's edit reaches the owner first and comes back here).
        let layers = carried(&replica.overrides, &mut w.interner);
        let mut held = Vec::new();
        for (i, inst) in old.instances.iter().enumerate() {
            if shard.leases.deadline(inst.lease) == HELD {
                kept[i] = true;
                let mut inst = inst.clone();
                if let Some(l) = &layers {
                    lay_carried(l, &mut inst, &mut w.interner)?;
                }
                held.push(inst);
            }
        }
        let mut instances = Vec::with_capacity(specs.len() + held.len());
        for (spec, timeouts) in specs {
            let pos = old.position(spec.addr, spec.ephemeral);
            if let Ok(i) = pos {
                if kept[i] {
                    continue;
                }
                kept[i] = true;
            }
            let (cluster, lease) = w.place(pos.ok().map(|i| &old.instances[i]), spec, cell);
            if lease.is_some() {
                let deadline = lease::beat_deadline(now, &timeouts);
                match pos {
                    Ok(_) => shard.leases.renew(lease, deadline),
                    Err(_) => shard.leases.activate(lease, deadline),
                }
            }
            let metadata = w.interner.metadata(spec.metadata.clone());
            instances.push(Instance::from_spec(
                spec, cluster, metadata, timeouts, lease,
            ));
        }
        for (inst, kept) in old.instances.iter().zip(kept) {
            if !kept {
                self.release_lease(shard, &mut w, inst.lease);
            }
        }
        let held_count = held.len();
        let instances = merge_sorted(instances, held);
        shard
            .instances_count
            .fetch_add(instances.len() - held_count, Ordering::Relaxed);
        shard
            .instances_count
            .fetch_add(held_count, Ordering::Relaxed);
        shard
            .instances_count
            .fetch_sub(old.instances.len(), Ordering::Relaxed);
        let next = ServiceSnapshot {
            id: old.id.clone(),
            revision: old.revision,
            instances: InstanceList::from_sorted(instances),
            emptied_at: old.emptied_at,
            settings: ServiceSettings {
                protect_threshold: replica.protect_threshold,
                metadata: w.interner.metadata(replica.metadata.clone()),
                selector: replica.selector.clone(),
                explicit: replica.explicit,
                overrides: layers,
            }
            .shared(),
            origin: (replica.origin != Origin::LOCAL).then(|| Box::new(replica.origin)),
        };
        if !replica.overrides.is_empty() && !w.overridden.iter().any(|id| Arc::ptr_eq(id, &cell.id))
        {
            w.overridden.push(cell.id.clone());
            shard.has_overrides.store(true, Ordering::Relaxed);
        }
        if same_visible_state(&old, &next) {
            // Same revision: cached encodings of it stay valid.
            cell.snapshot.store(Arc::new(next));
            return Ok(Applied::Unchanged);
        }
        let empty_now = next.instances.is_empty() && !next.is_explicit();
        let empty_before = old.instances.is_empty() && !old.is_explicit();
        let written = self.commit(&mut w, cell, next, now);
        if empty_now && !empty_before {
            w.emptied.push_back(cell.id.clone());
            shard.has_emptied.store(true, Ordering::Relaxed);
        }
        Ok(Applied::Written(written))
    }

    /// `replica`'s instances validated, with their lease timings, sorted
    /// by place and without duplicates; an error applies nothing.
    fn checked_specs<'r, 's>(
        &self,
        replica: &'r Replica<'s>,
    ) -> Result<Vec<Checked<'r, 's>>, RegistryError> {
        check_threshold(replica.protect_threshold)?;
        if replica.instances.len() > self.config.max_instances_per_service {
            return Err(RegistryError::TooManyInstances {
                limit: self.config.max_instances_per_service,
            });
        }
        for (addr, layer) in &replica.overrides {
            check_weight(layer.weight)?;
            if addr.cluster.is_empty() {
                return Err(RegistryError::InvalidName);
            }
        }
        let mut specs: Vec<Checked<'_, '_>> = Vec::with_capacity(replica.instances.len());
        for spec in &replica.instances {
            check_weight(spec.weight)?;
            let timeouts = LeaseTimeouts::from_metadata(&spec.metadata, self.config.timeouts)?;
            specs.push((spec, timeouts));
        }
        specs.sort_by(|a, b| order(a, b).then_with(|| a.0.ephemeral.cmp(&b.0.ephemeral)));
        specs.dedup_by(|a, b| same_place(a, b));
        Ok(specs)
    }

    /// Gives every ephemeral instance of `service` a fresh lease, as if each
    /// had just beaten: a node taking a service over does this before it
    /// expires anything, because the beats went to the previous owner.
    /// Returns the number of leases renewed.
    pub fn refresh_leases(&self, service: ServiceRef<'_>, now: Millis) -> usize {
        let shard = self.shard(service);
        // Under the writer lock, so an expiry pass in progress sees either
        // the old deadline or the new one for the whole service.
        let _w = shard.writer.lock();
        let map = shard.services.pin();
        let Some(cell) = map.get(&service) else {
            return 0;
        };
        let snap = cell.snapshot.load();
        let mut renewed = 0;
        // A held lease (a connection's instance) never falls due; a beat
        // deadline would make it expire.
        for inst in snap
            .instances
            .iter()
            .filter(|i| i.lease.is_some() && shard.leases.deadline(i.lease) != HELD)
        {
            shard
                .leases
                .renew(inst.lease, lease::beat_deadline(now, &inst.timeouts));
            renewed += 1;
        }
        renewed
    }

    /// Calls `f` with every service's current snapshot, shard by shard, in
    /// no particular order (checksums, snapshots for a starting peer).
    pub fn for_each_service(&self, mut f: impl FnMut(&Arc<ServiceSnapshot>)) {
        for shard in self.shards.iter() {
            let map = shard.services.pin();
            for (_, cell) in map.iter() {
                f(&cell.snapshot.load());
            }
        }
    }
}

/// Pushes the due leases of a service this node is not responsible for one
/// first-check period ahead, without looking at health: its owner decides.
pub(super) fn defer_leases(shard: &Shard, cell: &ServiceCell, due: &[LeaseSlot], now: Millis) {
    let snap = cell.snapshot.load();
    for inst in snap.instances.iter() {
        if !inst.lease.is_some() || due.binary_search(&inst.lease).is_err() {
            continue;
        }
        if lease::due_at(shard.leases.deadline(inst.lease)) <= now {
            shard
                .leases
                .renew(inst.lease, lease::beat_deadline(now, &inst.timeouts));
        }
    }
}

/// Two lists sorted by `Instance::sort_key`, with no place in both, as one.
fn merge_sorted(a: Vec<Instance>, b: Vec<Instance>) -> Vec<Instance> {
    if b.is_empty() {
        return a;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.sort_key() < y.sort_key(),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return out,
        };
        out.extend(if take_a { a.next() } else { b.next() });
    }
}

impl Store {
    /// Whether `instance` of `service` is held by a connection (a Nacos 2.x
    /// client's, native or synced) rather than living by heartbeat: such
    /// instances are replicated per client, not with the service's state.
    pub fn is_held(&self, service: ServiceRef<'_>, instance: &Instance) -> bool {
        instance.lease.is_some() && self.shard(service).leases.deadline(instance.lease) == HELD
    }

    /// The digest of `snap`'s instances that are not held by a connection:
    /// what the service's responsible node replicates, so what Distro's
    /// checksums compare (client sets have their own revisions).
    pub fn replicated_digest(&self, snap: &ServiceSnapshot) -> u64 {
        let shard = self.shard(snap.key().as_ref());
        snap.instances
            .iter()
            .filter(|i| i.lease.is_some() && shard.leases.deadline(i.lease) == HELD)
            .fold(snap.instances.digest(), |d, i| {
                d.wrapping_sub(crate::instance_list::instance_hash(i))
            })
    }
}

fn same_visible_state(old: &ServiceSnapshot, next: &ServiceSnapshot) -> bool {
    let (a, b) = (old.settings(), next.settings());
    a.protect_threshold.to_bits() == b.protect_threshold.to_bits()
        && a.metadata == b.metadata
        && a.selector == b.selector
        && a.explicit == b.explicit
        && old.instances.len() == next.instances.len()
        && old
            .instances
            .iter()
            .zip(next.instances.iter())
            .all(|(a, b)| a.sort_key() == b.sort_key() && a.same_visible_state(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;
    use std::net::IpAddr;

    const SVC: ServiceRef<'static> = ServiceRef {
        namespace: "public",
        name: "DEFAULT_GROUP@@demo",
    };

    fn store() -> Store {
        Store::new(StoreConfig {
            shards: 2,
            ..StoreConfig::default()
        })
    }

    fn ip() -> IpAddr {
        "10.0.0.1".parse().unwrap()
    }

    fn replica(node: u64, revision: u64, ports: &[u16]) -> Replica<'static> {
        Replica {
            overrides: Vec::new(),
            origin: Origin { node, revision },
            protect_threshold: 0.0,
            metadata: Metadata::empty(),
            selector: None,
            explicit: false,
            instances: ports
                .iter()
                .map(|p| InstanceSpec::new("DEFAULT", ip(), *p))
                .collect(),
        }
    }

    fn ports(s: &Store) -> Vec<u16> {
        s.snapshot(SVC)
            .map(|s| s.instances().iter().map(|i| i.port).collect())
            .unwrap_or_default()
    }

    #[test]
    fn connection_held_instances_survive_the_owners_state_and_its_checksum() {
        let s = store();
        s.apply_replica(SVC, &replica(7, 1, &[1, 3]), Millis(0))
            .unwrap();
        // A 2.x client's instances, held by its connection.
        s.register_held(
            SVC,
            &[
                InstanceSpec::new("DEFAULT", ip(), 2),
                InstanceSpec::new("DEFAULT", ip(), 3),
            ],
            Millis(1),
        )
        .unwrap();
        assert_eq!(ports(&s), vec![1, 2, 3]);
        let snap = s.snapshot(SVC).unwrap();
        let held: Vec<u16> = snap
            .instances()
            .iter()
            .filter(|i| s.is_held(SVC, i))
            .map(|i| i.port)
            .collect();
        assert_eq!(held, vec![2, 3]);
        // Distro's checksum sees only what the owner replicates (1, and 3
        // before the client took it over).
        assert_ne!(s.replicated_digest(&snap), snap.checksum());
        // The owner's next state drops 1 and knows nothing of 2: the held
        // ones stay, the owner's 5 joins them, and the count is right.
        s.apply_replica(SVC, &replica(7, 2, &[3, 5]), Millis(2))
            .unwrap();
        assert_eq!(ports(&s), vec![2, 3, 5]);
        assert_eq!(s.stats().instances, 3);
        // A takeover renews leases but never turns a held one into a beat lease.
        s.refresh_leases(SVC, Millis(3));
        assert_eq!(s.expire(Millis(100_000_000)).removed, 1);
        assert_eq!(ports(&s), vec![2, 3]);
    }

    #[test]
    fn applies_then_ignores_duplicates_and_older_revisions() {
        let s = store();
        let a = s.apply_replica(SVC, &replica(7, 5, &[2, 1]), Millis(0));
        assert!(matches!(
            a,
            Ok(Applied::Written(Written { event: Some(_), .. }))
        ));
        assert_eq!(ports(&s), vec![1, 2]);
        assert_eq!(s.stats().instances, 2);
        let rev = s.snapshot(SVC).unwrap().revision();
        assert_eq!(
            s.apply_replica(SVC, &replica(7, 5, &[2, 1]), Millis(1)),
            Ok(Applied::Stale)
        );
        assert_eq!(
            s.apply_replica(SVC, &replica(7, 4, &[9]), Millis(1)),
            Ok(Applied::Stale)
        );
        assert_eq!(ports(&s), vec![1, 2]);
        assert_eq!(s.snapshot(SVC).unwrap().revision(), rev);
        // A later revision replaces the list; so does another origin.
        s.apply_replica(SVC, &replica(7, 6, &[3]), Millis(2))
            .unwrap();
        assert_eq!(ports(&s), vec![3]);
        s.apply_replica(SVC, &replica(8, 1, &[4, 3]), Millis(2))
            .unwrap();
        assert_eq!(ports(&s), vec![3, 4]);
        assert_eq!(s.stats().instances, 2);
        assert_eq!(
            s.snapshot(SVC).unwrap().origin(),
            Origin {
                node: 8,
                revision: 1
            }
        );
    }

    #[test]
    fn same_content_from_a_new_origin_keeps_the_revision() {
        let s = store();
        s.apply_replica(SVC, &replica(1, 1, &[1]), Millis(0))
            .unwrap();
        let rev = s.snapshot(SVC).unwrap().revision();
        assert_eq!(
            s.apply_replica(SVC, &replica(2, 9, &[1]), Millis(0)),
            Ok(Applied::Unchanged)
        );
        let snap = s.snapshot(SVC).unwrap();
        assert_eq!((snap.revision(), snap.origin().node), (rev, 2));
    }

    #[test]
    fn a_local_write_after_a_replica_is_local_again() {
        let s = store();
        s.apply_replica(SVC, &replica(1, 1, &[1]), Millis(0))
            .unwrap();
        s.register(SVC, &InstanceSpec::new("DEFAULT", ip(), 2), Millis(0))
            .unwrap();
        assert_eq!(s.snapshot(SVC).unwrap().origin(), Origin::LOCAL);
        // A local state never covers anything: the next replica applies.
        s.apply_replica(SVC, &replica(1, 1, &[5]), Millis(0))
            .unwrap();
        assert_eq!(ports(&s), vec![5]);
    }

    #[test]
    fn invalid_replicas_change_nothing() {
        let s = store();
        let mut bad = replica(1, 1, &[1]);
        bad.instances[0].weight = f64::NAN;
        assert_eq!(
            s.apply_replica(SVC, &bad, Millis(0)),
            Err(RegistryError::InvalidWeight)
        );
        let mut bad = replica(1, 1, &[1]);
        bad.protect_threshold = 2.0;
        assert!(s.apply_replica(SVC, &bad, Millis(0)).is_err());
        assert!(s.snapshot(SVC).is_none());
        assert_eq!(s.stats().services, 0);
    }

    #[test]
    fn only_owned_services_expire_and_others_are_deferred() {
        let s = store();
        let t = s.config().timeouts;
        s.apply_replica(SVC, &replica(1, 1, &[1]), Millis(0))
            .unwrap();
        let other = ServiceRef::new("public", "DEFAULT_GROUP@@other");
        s.register(other, &InstanceSpec::new("DEFAULT", ip(), 1), Millis(0))
            .unwrap();
        let mine = |k: &crate::ServiceKey| k.grouped_name() == other.name;
        // Past the delete timeout: the owned service loses its instance,
        // the replica keeps its own, healthy.
        let late = Millis(u64::from(t.delete_timeout_ms) + 1);
        let first = s.expire_owned(Millis(u64::from(t.beat_timeout_ms)), mine);
        assert_eq!(first.unhealthy, 1);
        let r = s.expire_owned(late, mine);
        assert_eq!(r.removed, 1);
        assert_eq!(ports(&s), vec![1]);
        assert!(s.snapshot(SVC).unwrap().instances()[0].healthy);
        // Taken over: a fresh lease, then it expires one timeout later.
        assert_eq!(s.refresh_leases(SVC, late), 1);
        let all = |_: &crate::ServiceKey| true;
        let r = s.expire_owned(late.plus(u64::from(t.beat_timeout_ms) - 1), all);
        assert_eq!((r.unhealthy, r.removed), (0, 0));
        let r = s.expire_owned(late.plus(u64::from(t.beat_timeout_ms)), all);
        assert_eq!(r.unhealthy, 1);
        let r = s.expire_owned(late.plus(u64::from(t.delete_timeout_ms)), all);
        assert_eq!(r.removed, 1);
        assert!(ports(&s).is_empty());
    }

    #[test]
    fn for_each_service_visits_every_service() {
        let s = store();
        for n in ["a", "b", "c"] {
            s.register(
                ServiceRef::new("ns", n),
                &InstanceSpec::new("DEFAULT", ip(), 1),
                Millis(0),
            )
            .unwrap();
        }
        let mut names = Vec::new();
        s.for_each_service(|snap| names.push(snap.key().grouped_name().to_owned()));
        names.sort();
        assert_eq!(names, ["a", "b", "c"]);
    }
}
