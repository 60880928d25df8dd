//! Service writes: explicit creation, settings updates and deletion with
//! all of a service's instances.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{check_name, derive, Store, Written};
use crate::error::RegistryError;
use crate::event::ChangeEvent;
use crate::instance_list::InstanceList;
use crate::metadata::Metadata;
use crate::model::{check_threshold, Millis, ServiceRef, ServiceSpec};
use crate::snapshot::{ServiceSettings, ServiceSnapshot};

impl Store {
    /// Creates a service explicitly. Explicit services are kept when empty.
    ///
    /// # Errors
    /// [`RegistryError::ServiceExists`] if it exists, even auto-created.
    pub fn create_service(
        &self,
        service: ServiceRef<'_>,
        spec: &ServiceSpec,
        now: Millis,
    ) -> Result<Written, RegistryError> {
        check_name(service)?;
        check_threshold(spec.protect_threshold)?;
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        if map.get(&service).is_some() {
            return Err(RegistryError::ServiceExists);
        }
        let cell = self.cell_or_create(shard, &map, &mut w, service, now)?;
        let old = cell.snapshot.load_full();
        let next = ServiceSnapshot {
            settings: ServiceSettings {
                protect_threshold: spec.protect_threshold,
                metadata: w.interner.metadata(spec.metadata.clone()),
                selector: spec.selector.clone(),
                explicit: true,
                overrides: None,
            }
            .shared(),
            ..derive(&old, InstanceList::default())
        };
        Ok(self.commit(&mut w, cell, next, now))
    }

    /// Replaces a service's settings. `None` fields keep their value.
    ///
    /// # Errors
    /// [`RegistryError::ServiceNotFound`] or an invalid threshold.
    pub fn update_service(
        &self,
        service: ServiceRef<'_>,
        protect_threshold: f32,
        metadata: Option<Metadata>,
        selector: Option<Arc<str>>,
        now: Millis,
    ) -> Result<Written, RegistryError> {
        check_threshold(protect_threshold)?;
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let cell = map.get(&service).ok_or(RegistryError::ServiceNotFound)?;
        let old = cell.snapshot.load_full();
        let metadata = match metadata {
            Some(m) => w.interner.metadata(m),
            None => old.metadata().clone(),
        };
        let next = ServiceSnapshot {
            settings: ServiceSettings {
                protect_threshold,
                metadata,
                selector: selector.or_else(|| old.settings().selector.clone()),
                explicit: true,
                overrides: old.settings().overrides.clone(),
            }
            .shared(),
            ..derive(&old, old.instances.clone())
        };
        Ok(self.commit(&mut w, cell, next, now))
    }

    /// Deletes a service with all its instances, as Nacos 1.4.8 does.
    ///
    /// # Errors
    /// [`RegistryError::ServiceNotFound`].
    pub fn delete_service(&self, service: ServiceRef<'_>) -> Result<Written, RegistryError> {
        let shard = self.shard(service);
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let cell = map.get(&service).ok_or(RegistryError::ServiceNotFound)?;
        let old = cell.snapshot.load_full();
        for inst in old.instances.iter() {
            self.release_lease(shard, &mut w, inst.lease);
        }
        shard
            .instances_count
            .fetch_sub(old.instances.len(), Ordering::Relaxed);
        map.remove(&service);
        self.index.remove(old.key());
        shard.services_count.fetch_sub(1, Ordering::Relaxed);
        w.next_revision += 1;
        Ok(Written {
            revision: w.next_revision,
            event: Some(ChangeEvent {
                service: old.key().clone(),
                revision: w.next_revision,
            }),
        })
    }
}
