//! The services the health checker visits: those that hold (or held)
//! persistent instances. Written by the write path (a persistent register)
//! and the restore; pruned by the health checker. Below both, so neither
//! depends on the other.

use std::collections::HashSet;

use parking_lot::Mutex;
use registry_core::{ServiceKey, ServiceRef, Store};

/// Services that hold (or held) persistent instances: the ones the checker
/// visits. Written by persistent writes and the restore (one short lock
/// each, off the ephemeral paths); pruned by the checker.
#[derive(Default)]
pub struct Targets(Mutex<HashSet<ServiceKey>>);

impl Targets {
    /// Adds a service with a persistent instance.
    pub fn insert(&self, service: ServiceRef<'_>) {
        let key = ServiceKey::new(service.namespace, service.name);
        self.0.lock().insert(key);
    }

    /// Every service in the set.
    pub fn list(&self) -> Vec<ServiceKey> {
        self.0.lock().iter().cloned().collect()
    }

    /// Drops `service` unless it holds persistent instances. The store is
    /// read under the lock: a writer inserts after applying, so either its
    /// instance is visible here or its insert comes after this removal.
    pub fn prune(&self, store: &Store, service: &ServiceKey) {
        let mut set = self.0.lock();
        let holds = store
            .read(service.as_ref(), |s| {
                s.instances().iter().any(|i| !i.ephemeral)
            })
            .unwrap_or(false);
        if !holds {
            set.remove(service);
        }
    }
}
