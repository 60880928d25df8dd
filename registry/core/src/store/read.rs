//! Reads of the store: snapshots, single instances, counts and service
//! listings. None of them takes a lock on the way to a snapshot; listings
//! read the sorted per-namespace index.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Store, StoreStats};
use crate::error::RegistryError;
use crate::lease;
use crate::model::{Instance, InstanceAddr, Millis, ServiceKey, ServiceRef};
use crate::snapshot::ServiceSnapshot;

/// One page of a service listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServicePage {
    /// Services matching the filter, on all pages.
    pub count: usize,
    /// This page's services, sorted by grouped name.
    pub services: Vec<ServiceKey>,
}

impl Store {
    /// The current snapshot of a service.
    pub fn snapshot(&self, service: ServiceRef<'_>) -> Option<Arc<ServiceSnapshot>> {
        let shard = self.shard(service);
        let map = shard.services.pin();
        map.get(&service).map(|c| c.snapshot.load_full())
    }

    /// Runs `f` on the current snapshot without cloning its `Arc`.
    pub fn read<R>(
        &self,
        service: ServiceRef<'_>,
        f: impl FnOnce(&ServiceSnapshot) -> R,
    ) -> Option<R> {
        let shard = self.shard(service);
        let map = shard.services.pin();
        let cell = map.get(&service)?;
        let snap = cell.snapshot.load();
        Some(f(&snap))
    }

    /// One instance, with Nacos's three ways of not finding it.
    pub fn instance(
        &self,
        service: ServiceRef<'_>,
        addr: InstanceAddr<'_>,
    ) -> Result<Instance, RegistryError> {
        self.read(service, |s| {
            if let Some(i) = s.find_any(addr) {
                return Ok(i.clone());
            }
            if s.instances().iter().any(|i| *i.cluster == *addr.cluster) {
                Err(RegistryError::InstanceNotFound)
            } else {
                Err(RegistryError::ClusterNotFound)
            }
        })
        .unwrap_or(Err(RegistryError::ServiceNotFound))
    }

    /// Counts of services and instances.
    pub fn stats(&self) -> StoreStats {
        let mut st = StoreStats::default();
        for s in self.shards.iter() {
            st.services += s.services_count.load(Ordering::Relaxed);
            st.instances += s.instances_count.load(Ordering::Relaxed);
            st.lease_bytes += s.leases.heap_bytes();
        }
        st
    }

    /// A page of the services in `namespace`, sorted by grouped name.
    /// `group` of `None` lists every group (Nacos's `*`). Pages count from 1.
    ///
    /// Cost: O(page) for the first page of one group, from a sorted index
    /// per namespace and group; never a scan of every service.
    pub fn list_services(
        &self,
        namespace: &str,
        group: Option<&str>,
        page_no: usize,
        page_size: usize,
    ) -> ServicePage {
        let offset = page_no.saturating_sub(1).saturating_mul(page_size);
        let (count, services) = self.index.page(namespace, group, offset, page_size);
        ServicePage { count, services }
    }

    /// Visits the services of `namespace` in the order of
    /// [`Store::list_services`] until `visit` returns false: for searches
    /// by substring (the console). Holds the sorted index's read lock for
    /// the visit, so a service being created waits for it; keep `visit`
    /// cheap.
    pub fn scan_services(&self, namespace: &str, visit: impl FnMut(&ServiceKey) -> bool) {
        self.index.scan(namespace, visit);
    }

    /// Every namespace holding services, with its service count, sorted
    /// by namespace; O(namespaces × groups).
    pub fn namespace_counts(&self) -> Vec<(String, usize)> {
        self.index.namespace_counts()
    }

    /// When `instance` of `service` last renewed its lease, as encoded in
    /// its lease slot; `None` for a persistent instance. A display value:
    /// if the instance was removed since the caller loaded it, the slot may
    /// already belong to another instance.
    pub fn last_beat(&self, service: ServiceRef<'_>, instance: &Instance) -> Option<Millis> {
        if !instance.lease.is_some() {
            return None;
        }
        let deadline = self.shard(service).leases.deadline(instance.lease);
        (deadline != lease::FREE).then(|| lease::last_beat(deadline, &instance.timeouts))
    }
}
