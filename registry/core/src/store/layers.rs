//! The store's side of the operator's layers (`crate::overrides`): editing
//! one address's layer, laying it over instances as they are written, and
//! the sweep that drops a layer whose address stayed empty for
//! `override_ttl_ms`.
//!
//! A child of `store` so it can reach the shards. Each service's layers
//! live in its snapshot's settings, so they are written under the shard's
//! writer lock like everything else of the service, and travel with it
//! (replication, persistence read them off the snapshot).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{cell_of, check_name, derive, Store, Written};
use crate::error::RegistryError;
use crate::intern::Interner;
use crate::metadata::Metadata;
use crate::model::{Instance, InstanceAddr, Millis, ServiceKey, ServiceRef};
use crate::overrides::{InstanceOverride, OverrideEdit, OverrideEntry, Overrides};
use crate::snapshot::{ServiceSettings, ServiceSnapshot};

/// Lays a service's layers over instances while one write builds its next
/// snapshot, and collects what the write changes in the layers themselves
/// (the registered metadata an entry keeps, an expired entry dropped).
pub(super) struct Layering<'a> {
    old: Option<&'a Overrides>,
    next: Option<Overrides>,
    now: Millis,
    ttl_ms: u64,
}

impl<'a> Layering<'a> {
    pub(super) fn new(old: &'a ServiceSnapshot, now: Millis, ttl_ms: u64) -> Layering<'a> {
        Layering {
            old: old.settings().overrides.as_deref(),
            next: None,
            now,
            ttl_ms,
        }
    }

    /// Lays the layer at `inst`'s address, if any, over `inst`, written
    /// from what its client `registered`. One `Option` test when the
    /// service has no layers: the register paths pay nothing else.
    pub(super) fn lay(
        &mut self,
        inst: &mut Instance,
        registered: &Metadata,
        interner: &mut Interner,
    ) -> Result<(), RegistryError> {
        let Some(layers) = self.next.as_ref().or(self.old) else {
            return Ok(());
        };
        let addr = InstanceAddr {
            cluster: &inst.cluster,
            ip: inst.ip,
            port: inst.port,
        };
        let Some(entry) = layers.find(addr) else {
            return Ok(());
        };
        if entry.expired(self.now, self.ttl_ms) {
            let next = layers.without(|e| e.expired(self.now, self.ttl_ms));
            self.next = Some(next);
            return Ok(());
        }
        entry.mark_absent(None);
        inst.weight = entry.layer.weight;
        inst.enabled = entry.layer.enabled;
        inst.metadata = interner.metadata(entry.effective_metadata(registered)?);
        let slot = usize::from(inst.ephemeral);
        if entry.bases[slot].as_ref() != Some(registered) {
            let mut kept = entry.clone();
            kept.bases[slot] = Some(registered.clone());
            self.next = Some(layers.with(kept));
        }
        Ok(())
    }

    /// The settings of the next snapshot when the layers changed.
    pub(super) fn settings(self, old: &ServiceSnapshot) -> Option<Option<Arc<ServiceSettings>>> {
        let next = self.next?;
        Some(
            ServiceSettings {
                overrides: (!next.is_empty()).then(|| Arc::new(next)),
                ..old.settings().clone()
            }
            .shared(),
        )
    }
}

impl Store {
    /// Edits the operator's layer at `addr` in `service` and lays it over
    /// the instances there (Nacos's `updateInstance`, `patchInstance`,
    /// `batchUpdateMetadata`, `batchDeleteMetadata`). An address with no
    /// instance keeps the layer for when one registers (for the layer's
    /// time to live). `create` makes the service if it is missing (loading
    /// stored layers); else a missing service is an error.
    ///
    /// # Errors
    /// [`RegistryError::ServiceNotFound`], a bad name or weight.
    pub fn edit_override(
        &self,
        service: ServiceRef<'_>,
        addr: InstanceAddr<'_>,
        edit: OverrideEdit<'_>,
        now: Millis,
        create: bool,
    ) -> Result<Written, RegistryError> {
        check_name(service)?;
        if addr.cluster.is_empty() {
            return Err(RegistryError::InvalidName);
        }
        let ttl = self.config.override_ttl_ms;
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let cell = if create {
            self.cell_or_create(shard, &map, &mut w, service, now)?
        } else {
            map.get(&service).ok_or(RegistryError::ServiceNotFound)?
        };
        let old = cell.snapshot.load_full();
        let layers = old.settings().overrides.as_deref();
        let prior = layers
            .and_then(|l| l.find(addr))
            .filter(|e| !e.expired(now, ttl));
        let layer = edit.applied_to(prior.map(|e| &e.layer))?;
        let cluster = match prior {
            Some(e) => e.cluster.clone(),
            None => w.interner.cluster(addr.cluster),
        };
        let mut entry = OverrideEntry::new(addr, cluster, layer);
        if let Some(p) = prior {
            entry.bases = p.bases.clone();
        }
        let (instances, present) = relaid(&old, addr, &mut entry, &mut w.interner)?;
        if !present && matches!(edit, OverrideEdit::Patch { .. }) {
            // `patchInstance` looks the instance up first.
            return Err(RegistryError::InstanceNotFound);
        }
        entry.mark_absent(match (present, prior.and_then(|p| p.absent_since())) {
            (true, _) => None,
            (false, since) => since.or(Some(now)),
        });
        let kept = match layers {
            Some(l) => l.without(|e| e.expired(now, ttl)),
            None => Overrides::default(),
        };
        let next = ServiceSnapshot {
            settings: ServiceSettings {
                overrides: Some(Arc::new(kept.with(entry))),
                ..old.settings().clone()
            }
            .shared(),
            ..derive(&old, instances)
        };
        if layers.is_none() {
            w.overridden.push(cell.id.clone());
            shard.has_overrides.store(true, Ordering::Relaxed);
        }
        Ok(self.publish_next(shard, &mut w, cell, &old, next, now))
    }

    /// Drops every layer whose address has held no instance for
    /// `override_ttl_ms`, and notes since when the others are empty; run
    /// by the sweeper every few seconds, so a layer lives its time to live
    /// to within one sweep (Nacos's cleaner looks every 5 s). Readers see
    /// no change (the instances are the same), so the snapshot keeps its
    /// revision. Returns the services whose layers changed, for whoever
    /// stores them.
    pub fn sweep_overrides(&self, now: Millis) -> Vec<ServiceKey> {
        let ttl = self.config.override_ttl_ms;
        let mut changed = Vec::new();
        for shard in self.shards.iter() {
            if !shard.has_overrides.load(Ordering::Relaxed) {
                continue;
            }
            let mut w = shard.writer.lock();
            let map = shard.services.pin();
            for id in std::mem::take(&mut w.overridden) {
                let Some(cell) = cell_of(&map, &id) else {
                    // Removed with its layers (emptied, deleted): whoever
                    // stores them drops them too.
                    changed.push(id.key.clone());
                    continue;
                };
                let old = cell.snapshot.load_full();
                let Some(layers) = old.settings().overrides.clone() else {
                    continue;
                };
                let mut expired = false;
                for e in layers.iter() {
                    let at = e.view().addr;
                    if old.find_any(at).is_some() {
                        e.mark_absent(None);
                    } else if e.absent_since().is_none() {
                        e.mark_absent(Some(now));
                    } else {
                        expired |= e.expired(now, ttl);
                    }
                }
                let mut left = true;
                if expired {
                    let kept = layers.without(|e| e.expired(now, ttl));
                    left = !kept.is_empty();
                    // `derive` keeps the revision: readers see no change.
                    let next = ServiceSnapshot {
                        settings: ServiceSettings {
                            overrides: left.then(|| Arc::new(kept)),
                            ..old.settings().clone()
                        }
                        .shared(),
                        ..derive(&old, old.instances.clone())
                    };
                    cell.snapshot.store(Arc::new(next));
                    changed.push(old.key().clone());
                }
                if left {
                    w.overridden.push(id);
                }
            }
            let any = !w.overridden.is_empty();
            shard.has_overrides.store(any, Ordering::Relaxed);
        }
        changed
    }
}

/// `old`'s instances with `entry` laid over those at `addr` (persistent
/// and ephemeral), keeping in `entry` the metadata each registered (the
/// instance's own when the address had no layer yet); and whether there
/// were any.
fn relaid(
    old: &ServiceSnapshot,
    addr: InstanceAddr<'_>,
    entry: &mut OverrideEntry,
    interner: &mut Interner,
) -> Result<(crate::instance_list::InstanceList, bool), RegistryError> {
    let mut instances = old.instances.clone();
    let mut present = false;
    for ephemeral in [false, true] {
        let Ok(i) = instances.position((addr.cluster, addr.ip, addr.port, ephemeral)) else {
            continue;
        };
        present = true;
        let slot = usize::from(ephemeral);
        let base = entry.bases[slot]
            .get_or_insert_with(|| instances[i].metadata.clone())
            .clone();
        let mut inst = instances[i].clone();
        inst.weight = entry.layer.weight;
        inst.enabled = entry.layer.enabled;
        inst.metadata = interner.metadata(entry.effective_metadata(&base)?);
        if !inst.same_visible_state(&instances[i]) {
            instances = instances.with_replaced(i, inst);
        }
    }
    Ok((instances, present))
}

/// Layers a replica or a stored record carries, as a snapshot keeps them
/// (the registered metadata unknown: the instances' own is used when an
/// edit needs it).
pub(super) fn carried(
    layers: &[(InstanceAddr<'_>, InstanceOverride)],
    interner: &mut Interner,
) -> Option<Arc<Overrides>> {
    if layers.is_empty() {
        return None;
    }
    let mut all = Overrides::default();
    for (addr, layer) in layers {
        let cluster = interner.cluster(addr.cluster);
        all = all.with(OverrideEntry::new(*addr, cluster, layer.clone()));
    }
    Some(Arc::new(all))
}

/// Lays the carried layer at `inst`'s address over it, its own metadata
/// standing for what the client registered.
pub(super) fn lay_carried(
    layers: &Overrides,
    inst: &mut Instance,
    interner: &mut Interner,
) -> Result<(), RegistryError> {
    let addr = InstanceAddr {
        cluster: &inst.cluster,
        ip: inst.ip,
        port: inst.port,
    };
    if let Some(e) = layers.find(addr) {
        inst.weight = e.layer.weight;
        inst.enabled = e.layer.enabled;
        inst.metadata = interner.metadata(e.effective_metadata(&inst.metadata)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::model::InstanceAddr;
    use crate::overrides::{InstanceOverride, OverrideEdit};
    use crate::store::StoreConfig;
    use crate::{InstanceSpec, Metadata, Millis, ServiceRef, Store};

    const SVC: ServiceRef<'static> = ServiceRef {
        namespace: "public",
        name: "DEFAULT_GROUP@@layered",
    };

    fn addr() -> InstanceAddr<'static> {
        InstanceAddr {
            cluster: "DEFAULT",
            ip: "127.0.0.1".parse().unwrap(),
            port: 8080,
        }
    }

    fn md(pairs: &[(&str, &str)]) -> Metadata {
        Metadata::from_pairs(pairs.iter().copied()).unwrap()
    }

    fn client(metadata: Metadata) -> InstanceSpec<'static> {
        InstanceSpec {
            weight: 2.0,
            metadata,
            ..InstanceSpec::new("DEFAULT", addr().ip, addr().port)
        }
    }

    fn seen(store: &Store) -> (f64, bool, Metadata) {
        let snap = store.snapshot(SVC).unwrap();
        let i = snap.find(addr(), true).unwrap();
        (i.weight, i.enabled, i.metadata.clone())
    }

    #[test]
    fn an_operator_layer_outlives_the_clients_re_registration() {
        let store = Store::new(StoreConfig::default());
        store
            .register(SVC, &client(md(&[("a", "1")])), Millis(0))
            .unwrap();
        let layer = InstanceOverride {
            weight: 3.0,
            enabled: false,
            metadata: md(&[("b", "2")]),
        };
        let w = store
            .edit_override(SVC, addr(), OverrideEdit::Replace(&layer), Millis(1), false)
            .unwrap();
        assert!(w.event.is_some());
        assert_eq!(seen(&store), (3.0, false, md(&[("a", "1"), ("b", "2")])));
        // The 1.x client registers again, the 2.x one redoes: the layer stays.
        store
            .register(SVC, &client(md(&[("a", "9")])), Millis(2))
            .unwrap();
        assert_eq!(seen(&store), (3.0, false, md(&[("a", "9"), ("b", "2")])));
        store
            .register_held(SVC, &[client(md(&[("a", "1")]))], Millis(3))
            .unwrap();
        assert_eq!(seen(&store), (3.0, false, md(&[("a", "1"), ("b", "2")])));
        // batchDeleteMetadata takes a key out of the layer only: the
        // client's own value shows again.
        store
            .edit_override(
                SVC,
                addr(),
                OverrideEdit::Remove(&md(&[("b", ""), ("a", "")])),
                Millis(4),
                false,
            )
            .unwrap();
        assert_eq!(seen(&store), (3.0, false, md(&[("a", "1")])));
    }

    #[test]
    fn a_layer_is_dropped_once_its_address_was_empty_for_the_ttl() {
        let store = Store::new(StoreConfig::default());
        store.register(SVC, &client(md(&[])), Millis(0)).unwrap();
        store
            .edit_override(
                SVC,
                addr(),
                OverrideEdit::Patch {
                    weight: None,
                    enabled: Some(false),
                    metadata: None,
                },
                Millis(0),
                false,
            )
            .unwrap();
        // Another instance keeps the service alive meanwhile.
        let other = InstanceSpec::new("DEFAULT", addr().ip, 9);
        store.register(SVC, &other, Millis(0)).unwrap();
        store.deregister(SVC, addr(), true, Millis(10)).unwrap();
        assert!(store.sweep_overrides(Millis(1_000)).is_empty());
        // Back within the time to live: still disabled.
        store
            .register(SVC, &client(md(&[])), Millis(30_000))
            .unwrap();
        assert!(!seen(&store).1);
        store.deregister(SVC, addr(), true, Millis(30_001)).unwrap();
        assert!(store.sweep_overrides(Millis(31_000)).is_empty());
        assert_eq!(store.sweep_overrides(Millis(91_000)).len(), 1);
        assert_eq!(store.snapshot(SVC).unwrap().overrides().count(), 0);
        // Gone for longer than the time to live: the client's own state.
        store
            .register(SVC, &client(md(&[])), Millis(92_000))
            .unwrap();
        assert_eq!(seen(&store), (2.0, true, md(&[])));
    }

    #[test]
    fn an_edit_of_an_unknown_service_is_refused_and_of_an_empty_address_kept() {
        let store = Store::new(StoreConfig::default());
        let layer = InstanceOverride::default();
        assert!(store
            .edit_override(SVC, addr(), OverrideEdit::Replace(&layer), Millis(0), false)
            .is_err());
        let other = InstanceSpec::new("DEFAULT", addr().ip, 9);
        store.register(SVC, &other, Millis(0)).unwrap();
        let off = InstanceOverride {
            enabled: false,
            ..InstanceOverride::default()
        };
        store
            .edit_override(SVC, addr(), OverrideEdit::Replace(&off), Millis(0), false)
            .unwrap();
        store.register(SVC, &client(md(&[])), Millis(5)).unwrap();
        assert_eq!(seen(&store), (1.0, false, md(&[])));
    }
}
