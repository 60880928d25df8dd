//! Instances held by a live connection (Nacos 2.x clients): registered one or many at a
//! time under one writer lock and one published revision, with leases that never fall
//! due, so the sweeper leaves them alone. They leave the store when their connection
//! deregisters them or closes (the server calls [`Store::deregister`] for each).
//!
//! A child module of `store` so it can use the shard internals without widening them.

use std::sync::atomic::Ordering;

use super::layers::Layering;
use super::{check_name, derive, Store, Written};
use crate::error::RegistryError;
use crate::lease;
use crate::model::{check_weight, Instance, InstanceSpec, LeaseTimeouts, Millis, ServiceRef};

/// Deadline of a held lease: never due, and distinct from a free slot.
pub(crate) const HELD: u64 = lease::FREE - 2;

impl Store {
    /// Registers (upserts) `specs` in `service` as instances held by a connection:
    /// ephemeral ones get a lease that never expires. All or nothing: every spec is
    /// validated and the service's capacity checked before anything changes, and the
    /// whole batch is published as one revision (one event, one snapshot copy).
    ///
    /// # Errors
    /// A validation error of any spec, [`RegistryError::TooManyInstances`] or
    /// [`RegistryError::TooManyServices`]; the store is unchanged then.
    pub fn register_held(
        &self,
        service: ServiceRef<'_>,
        specs: &[InstanceSpec<'_>],
        now: Millis,
    ) -> Result<Written, RegistryError> {
        check_name(service)?;
        let timeouts = self.checked_timeouts(specs)?;
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let cell = self.cell_or_create(shard, &map, &mut w, service, now)?;
        let old = cell.snapshot.load_full();
        // Conservative (a duplicate inside the batch counts twice): refuse before
        // touching anything rather than stop half way.
        let added = specs
            .iter()
            .filter(|s| old.position(s.addr, s.ephemeral).is_err())
            .count();
        if added > 0 && old.instances.len() + added > self.config.max_instances_per_service {
            return Err(RegistryError::TooManyInstances {
                limit: self.config.max_instances_per_service,
            });
        }
        let mut instances = old.instances.clone();
        let mut changed = false;
        let mut layering = Layering::new(&old, now, self.config.override_ttl_ms);
        for (spec, timeouts) in specs.iter().zip(timeouts) {
            let pos = instances.position((
                spec.addr.cluster,
                spec.addr.ip,
                spec.addr.port,
                spec.ephemeral,
            ));
            let existing = pos.ok().map(|i| &instances[i]);
            let (cluster, lease) = w.place(existing, spec, cell);
            if lease.is_some() {
                match pos {
                    Ok(_) => shard.leases.renew(lease, HELD),
                    Err(_) => shard.leases.activate(lease, HELD),
                }
            }
            let metadata = w.interner.metadata(spec.metadata.clone());
            let mut inst = Instance::from_spec(spec, cluster, metadata, timeouts, lease);
            layering.lay(&mut inst, &spec.metadata, &mut w.interner)?;
            if existing.is_some_and(|e| e.same_visible_state(&inst)) {
                continue;
            }
            // Each step shares all but one path of the tree with the one
            // before.
            instances = match pos {
                Ok(i) => instances.with_replaced(i, inst),
                Err(i) => {
                    shard.instances_count.fetch_add(1, Ordering::Relaxed);
                    instances.with_inserted(i, inst)
                }
            };
            changed = true;
        }
        let settings = layering.settings(&old);
        let mut next = derive(&old, instances);
        if let Some(settings) = settings {
            next.settings = settings;
        } else if !changed {
            return Ok(Written {
                revision: old.revision,
                event: None,
            });
        }
        if !changed {
            // Only what a layer keeps of the registration changed.
            // (`derive` keeps the old revision until `commit`.)
            cell.snapshot.store(std::sync::Arc::new(next));
            return Ok(Written {
                revision: old.revision,
                event: None,
            });
        }
        Ok(self.publish_next(shard, &mut w, cell, &old, next, now))
    }

    /// Every spec validated, with its lease timing: an error refuses the
    /// whole batch before anything changes.
    fn checked_timeouts(
        &self,
        specs: &[InstanceSpec<'_>],
    ) -> Result<Vec<LeaseTimeouts>, RegistryError> {
        let mut timeouts = Vec::with_capacity(specs.len());
        for spec in specs {
            check_weight(spec.weight)?;
            if spec.addr.cluster.is_empty() {
                return Err(RegistryError::InvalidName);
            }
            timeouts.push(LeaseTimeouts::from_metadata(
                &spec.metadata,
                self.config.timeouts,
            )?);
        }
        Ok(timeouts)
    }
}

#[cfg(test)]
mod tests {
    use crate::model::InstanceAddr;
    use crate::store::StoreConfig;
    use crate::{InstanceSpec, Millis, ServiceRef, Store};

    fn spec(port: u16) -> InstanceSpec<'static> {
        InstanceSpec::new("DEFAULT", "10.0.0.1".parse().unwrap(), port)
    }

    #[test]
    fn held_instances_outlive_every_timeout_and_leave_on_deregister() {
        let store = Store::new(StoreConfig::default());
        let svc = ServiceRef::new("public", "DEFAULT_GROUP@@held");
        let w = store
            .register_held(svc, &[spec(1), spec(2)], Millis(0))
            .unwrap();
        assert!(w.event.is_some());
        let report = store.expire(Millis(10_000_000));
        assert_eq!((report.removed, report.unhealthy), (0, 0));
        assert_eq!(store.snapshot(svc).unwrap().instances().len(), 2);
        let addr = InstanceAddr {
            cluster: "DEFAULT",
            ip: "10.0.0.1".parse().unwrap(),
            port: 1,
        };
        store
            .deregister(svc, addr, true, Millis(10_000_001))
            .unwrap();
        assert_eq!(store.snapshot(svc).unwrap().instances().len(), 1);
    }

    #[test]
    fn a_batch_over_capacity_changes_nothing() {
        let store = Store::new(StoreConfig {
            max_instances_per_service: 2,
            ..StoreConfig::default()
        });
        let svc = ServiceRef::new("public", "DEFAULT_GROUP@@cap");
        store.register_held(svc, &[spec(1)], Millis(0)).unwrap();
        let err = store
            .register_held(svc, &[spec(2), spec(3)], Millis(1))
            .unwrap_err();
        assert!(matches!(err, crate::RegistryError::TooManyInstances { .. }));
        assert_eq!(store.snapshot(svc).unwrap().instances().len(), 1);
        // A bad weight anywhere in the batch refuses the whole batch.
        let bad = InstanceSpec {
            weight: -1.0,
            ..spec(4)
        };
        assert!(store
            .register_held(svc, &[spec(2), bad], Millis(2))
            .is_err());
        assert_eq!(store.snapshot(svc).unwrap().instances().len(), 1);
    }

    #[test]
    fn re_registering_the_same_state_publishes_nothing() {
        let store = Store::new(StoreConfig::default());
        let svc = ServiceRef::new("public", "DEFAULT_GROUP@@same");
        store.register_held(svc, &[spec(1)], Millis(0)).unwrap();
        let again = store.register_held(svc, &[spec(1)], Millis(5)).unwrap();
        assert!(again.event.is_none());
    }
}
