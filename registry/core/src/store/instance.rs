//! Instance writes and the beat: register (an upsert), update, patch,
//! health changes and deregister, each under its shard's writer lock and
//! published as the service's next snapshot; the beat renews a lease in
//! place and takes the write path only to revive an unhealthy instance.

use std::sync::atomic::Ordering;

use super::layers::Layering;
use super::{check_name, derive, Store, Written};
use crate::error::RegistryError;
use crate::event::ChangeEvent;
use crate::intern::Interner;
use crate::lease;
use crate::model::{
    check_weight, Instance, InstanceAddr, InstancePatch, InstanceSpec, LeaseTimeouts, Millis,
    ServiceRef,
};
use crate::snapshot::ServiceSnapshot;

/// The result of a beat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BeatOutcome {
    /// The lease was renewed; beat again after `interval_ms`.
    Renewed {
        /// The instance's beat interval.
        interval_ms: u32,
    },
    /// The lease was renewed and the unhealthy instance turned healthy.
    Revived {
        /// The instance's beat interval.
        interval_ms: u32,
        /// The health change, for the notifier.
        event: ChangeEvent,
    },
    /// No such instance: the client should register again (Nacos `20404`).
    NotFound,
}

/// How `upsert` treats a missing instance.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Upsert {
    /// Create the service and the instance as needed.
    Register,
    /// Fail if either is missing.
    Update,
}

impl Store {
    /// Renews an ephemeral instance's lease in place. Only an unhealthy →
    /// healthy transition takes the write path. A persistent instance is
    /// acknowledged without renewal, as Nacos does.
    pub fn beat(
        &self,
        service: ServiceRef<'_>,
        addr: InstanceAddr<'_>,
        now: Millis,
    ) -> BeatOutcome {
        let shard = self.shard(service);
        let map = shard.services.pin();
        let Some(cell) = map.get(&service) else {
            return BeatOutcome::NotFound;
        };
        let snap = cell.snapshot.load();
        let Some(inst) = snap.find(addr, true) else {
            return match snap.find(addr, false) {
                Some(p) => BeatOutcome::Renewed {
                    interval_ms: p.timeouts.beat_interval_ms,
                },
                None => BeatOutcome::NotFound,
            };
        };
        let interval_ms = inst.timeouts.beat_interval_ms;
        shard
            .leases
            .renew(inst.lease, lease::beat_deadline(now, &inst.timeouts));
        if inst.healthy {
            return BeatOutcome::Renewed { interval_ms };
        }
        drop(snap);
        match self.set_health(service, addr, true, true, now) {
            Ok(Written {
                event: Some(event), ..
            }) => BeatOutcome::Revived { interval_ms, event },
            Ok(_) => BeatOutcome::Renewed { interval_ms },
            // Deleted between our read and the write: register again.
            Err(_) => BeatOutcome::NotFound,
        }
    }

    /// Registers an instance, creating the service if needed, or replaces
    /// the fields of an existing one (upsert). Registering counts as a beat.
    pub fn register(
        &self,
        service: ServiceRef<'_>,
        spec: &InstanceSpec<'_>,
        now: Millis,
    ) -> Result<Written, RegistryError> {
        self.upsert(service, spec, now, Upsert::Register)
    }

    /// Replaces the fields of an existing instance.
    ///
    /// # Errors
    /// [`RegistryError::ServiceNotFound`] or [`RegistryError::InstanceNotFound`].
    pub fn update(
        &self,
        service: ServiceRef<'_>,
        spec: &InstanceSpec<'_>,
        now: Millis,
    ) -> Result<Written, RegistryError> {
        self.upsert(service, spec, now, Upsert::Update)
    }

    fn upsert(
        &self,
        service: ServiceRef<'_>,
        spec: &InstanceSpec<'_>,
        now: Millis,
        mode: Upsert,
    ) -> Result<Written, RegistryError> {
        check_name(service)?;
        check_weight(spec.weight)?;
        if spec.addr.cluster.is_empty() {
            return Err(RegistryError::InvalidName);
        }
        let timeouts = LeaseTimeouts::from_metadata(&spec.metadata, self.config.timeouts)?;
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let cell = match mode {
            Upsert::Register => self.cell_or_create(shard, &map, &mut w, service, now)?,
            Upsert::Update => map.get(&service).ok_or(RegistryError::ServiceNotFound)?,
        };
        let old = cell.snapshot.load_full();
        let pos = old.position(spec.addr, spec.ephemeral);
        if pos.is_err() {
            if mode == Upsert::Update {
                return Err(RegistryError::InstanceNotFound);
            }
            if old.instances.len() >= self.config.max_instances_per_service {
                return Err(RegistryError::TooManyInstances {
                    limit: self.config.max_instances_per_service,
                });
            }
        }
        let existing = pos.ok().map(|i| &old.instances[i]);
        let (cluster, lease) = w.place(existing, spec, cell);
        let metadata = w.interner.metadata(spec.metadata.clone());
        let mut inst = Instance::from_spec(spec, cluster, metadata, timeouts, lease);
        let mut layering = Layering::new(&old, now, self.config.override_ttl_ms);
        layering.lay(&mut inst, &spec.metadata, &mut w.interner)?;
        if lease.is_some() {
            let deadline = lease::beat_deadline(now, &timeouts);
            match pos {
                Ok(_) => shard.leases.renew(lease, deadline),
                Err(_) => shard.leases.activate(lease, deadline),
            }
        }
        let settings = layering.settings(&old);
        if existing.is_some_and(|e| e.same_visible_state(&inst)) {
            if let Some(settings) = settings {
                // Only what the layer keeps of the registration changed:
                // readers see the same, so the revision stays.
                // (`derive` keeps the old revision until `commit`.)
                cell.snapshot.store(std::sync::Arc::new(ServiceSnapshot {
                    settings,
                    ..derive(&old, old.instances.clone())
                }));
            }
            return Ok(Written {
                revision: old.revision,
                event: None,
            });
        }
        let instances = match pos {
            Ok(i) => old.instances.with_replaced(i, inst),
            Err(i) => {
                shard.instances_count.fetch_add(1, Ordering::Relaxed);
                old.instances.with_inserted(i, inst)
            }
        };
        let mut next = derive(&old, instances);
        if let Some(settings) = settings {
            next.settings = settings;
        }
        Ok(self.publish_next(shard, &mut w, cell, &old, next, now))
    }

    /// Removes an instance. Removing what does not exist is not an error
    /// (Nacos answers `ok`) and produces no event.
    pub fn deregister(
        &self,
        service: ServiceRef<'_>,
        addr: InstanceAddr<'_>,
        ephemeral: bool,
        now: Millis,
    ) -> Result<Written, RegistryError> {
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let Some(cell) = map.get(&service) else {
            return Ok(Written {
                revision: 0,
                event: None,
            });
        };
        let old = cell.snapshot.load_full();
        let Ok(i) = old.position(addr, ephemeral) else {
            return Ok(Written {
                revision: old.revision,
                event: None,
            });
        };
        let instances = old.instances.with_removed(i);
        self.release_lease(shard, &mut w, old.instances[i].lease);
        shard.instances_count.fetch_sub(1, Ordering::Relaxed);
        Ok(self.publish(shard, &mut w, cell, &old, instances, now))
    }

    /// Changes only the given fields. `ephemeral` of `None` patches the
    /// ephemeral instance at `addr` if there is one, else the persistent one.
    ///
    /// # Errors
    /// [`RegistryError::ServiceNotFound`], [`RegistryError::InstanceNotFound`],
    /// or a validation error for the new values.
    pub fn patch(
        &self,
        service: ServiceRef<'_>,
        addr: InstanceAddr<'_>,
        ephemeral: Option<bool>,
        patch: &InstancePatch,
        now: Millis,
    ) -> Result<Written, RegistryError> {
        if let Some(w) = patch.weight {
            check_weight(w)?;
        }
        let timeouts = match &patch.metadata {
            Some(m) => Some(LeaseTimeouts::from_metadata(m, self.config.timeouts)?),
            None => None,
        };
        self.modify(service, addr, ephemeral, now, |inst, interner| {
            if let Some(w) = patch.weight {
                inst.weight = w;
            }
            if let Some(e) = patch.enabled {
                inst.enabled = e;
            }
            if let Some(h) = patch.healthy {
                inst.healthy = h;
            }
            if let (Some(m), Some(t)) = (&patch.metadata, timeouts) {
                inst.metadata = interner.metadata(m.clone());
                inst.timeouts = t;
            }
        })
    }

    /// Sets an instance's health: used by beats reviving an instance and by
    /// the server's health checks of persistent instances.
    pub fn set_health(
        &self,
        service: ServiceRef<'_>,
        addr: InstanceAddr<'_>,
        ephemeral: bool,
        healthy: bool,
        now: Millis,
    ) -> Result<Written, RegistryError> {
        self.modify(service, addr, Some(ephemeral), now, |inst, _| {
            inst.healthy = healthy;
        })
    }

    fn modify(
        &self,
        service: ServiceRef<'_>,
        addr: InstanceAddr<'_>,
        ephemeral: Option<bool>,
        now: Millis,
        change: impl FnOnce(&mut Instance, &mut Interner),
    ) -> Result<Written, RegistryError> {
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let cell = map.get(&service).ok_or(RegistryError::ServiceNotFound)?;
        let old = cell.snapshot.load_full();
        let i = match ephemeral {
            Some(e) => old.position(addr, e).ok(),
            None => old
                .position(addr, true)
                .or_else(|_| old.position(addr, false))
                .ok(),
        }
        .ok_or(RegistryError::InstanceNotFound)?;
        let mut inst = old.instances[i].clone();
        change(&mut inst, &mut w.interner);
        if inst.same_visible_state(&old.instances[i]) {
            return Ok(Written {
                revision: old.revision,
                event: None,
            });
        }
        let instances = old.instances.with_replaced(i, inst);
        Ok(self.publish(shard, &mut w, cell, &old, instances, now))
    }
}
