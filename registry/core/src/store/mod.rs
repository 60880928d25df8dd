//! The sharded service store: every registry operation, and who may write.
//!
//! Services are spread over N shards (a power of two) by a hash of
//! (namespace, service). Each shard owns:
//! - a lock-free index (`papaya`) from service key to [`ServiceCell`]:
//!   readers never lock it; the cell (the service's current snapshot) lives
//!   in the map's entry, so a beat goes from the key it compared straight
//!   to the snapshot;
//! - a [`LeaseTable`] of beat deadlines, renewed in place by beats;
//! - one writer lock serialising every change to the shard's services.
//!
//! The store also keeps a sorted index of service names per namespace and
//! group (`service_index`), written when a service is created or removed,
//! so a page of `list_services` costs the page.
//!
//! Expiry scans each shard's compact lease slab (8 bytes per ephemeral
//! instance, no lock) and then works through what is due in bounded steps
//! ([`Store::expire_step`]), each holding the shard's writer lock for about
//! [`EXPIRE_STEP_BUDGET`] instances, so a mass expiry never holds a shard
//! for long.
//!
//! Reads (`query`, `beat`) load the current snapshot and never wait for a
//! writer. A write takes its shard's lock, builds the service's next
//! snapshot (sharing all but one root-to-leaf path of the instance list
//! with the current one, see [`InstanceList`]), publishes it with a new revision, and
//! returns a [`ChangeEvent`] for the notifier. The store is pure: no clock,
//! no I/O.
//!
//! This module holds the shards, the writer's state and the plumbing every
//! write shares (`cell_or_create`, `publish`, `commit`); the operations
//! live in child modules named after what they own: `read` (snapshots,
//! counts, listings), `instance` (instance writes and the beat), `service`
//! (service writes), `expire` (the sweeper's passes), `held` (instances
//! held by a 2.x connection) and `replica` (applying replicated state).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use foldhash::fast::FixedState;
use parking_lot::Mutex;

use crate::error::RegistryError;
use crate::event::ChangeEvent;
use crate::instance_list::InstanceList;
use crate::intern::Interner;
use crate::lease::{LeaseSlot, LeaseTable, SlotAllocator};
use crate::model::{Instance, InstanceSpec, LeaseTimeouts, Millis, ServiceKey, ServiceRef};
use crate::service_index::ServiceIndex;
use crate::shared_str::SharedStr;
use crate::snapshot::{EmptiedAt, ServiceId, ServiceSnapshot};

mod expire;
mod held;
mod instance;
mod layers;
mod read;
mod replica;
mod service;
#[cfg(test)]
mod tests;

pub use expire::{ExpirePass, ExpireReport, EXPIRE_STEP_BUDGET};
pub use instance::BeatOutcome;
pub use read::ServicePage;
pub use replica::{Applied, Replica};

/// Store settings. Build with struct update syntax over `Default`.
#[derive(Clone, Debug, PartialEq)]
pub struct StoreConfig {
    /// Number of shards; must be a power of two.
    pub shards: usize,
    /// Default heartbeat timing; `preserved.*` metadata overrides it.
    pub timeouts: LeaseTimeouts,
    /// How long an auto-created service may stay empty before it is removed
    /// (Nacos cleans empty services after 60 s).
    pub empty_service_ttl_ms: u64,
    /// Most instances one service may hold.
    pub max_instances_per_service: usize,
    /// Most services the store may hold.
    pub max_services: usize,
    /// How long the operator's layer of an address outlives its last
    /// instance (Nacos's `expired-metadata.expired-time`, 60 s).
    pub override_ttl_ms: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            shards: 64,
            timeouts: LeaseTimeouts::NACOS,
            empty_service_ttl_ms: 60_000,
            max_instances_per_service: 200_000,
            max_services: 4_000_000,
            override_ttl_ms: 60_000,
        }
    }
}

/// Counts of what the store holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Services, including empty ones.
    pub services: usize,
    /// Instances, ephemeral and persistent.
    pub instances: usize,
    /// Bytes held by the lease slabs.
    pub lease_bytes: usize,
}

impl StoreStats {
    /// Estimated heap bytes of the instances: their structs, which hold
    /// every per-instance field (interned names and metadata are shared and
    /// not counted), plus the lease owner's slot and the lists' size-class
    /// rounding: [`INSTANCE_EXTRA_BYTES`].
    pub fn instance_bytes(&self) -> usize {
        self.instances * (std::mem::size_of::<Instance>() + INSTANCE_EXTRA_BYTES)
    }

    /// Estimated heap bytes of the services without their instances: the
    /// cell and snapshot, the map and listing-index entries, the name.
    pub fn service_bytes(&self) -> usize {
        self.services * SERVICE_BYTES
    }
}

/// What one instance costs beyond its struct: its lease owner's slot (8
/// bytes) and the instance list's rounding up to the allocator's size
/// class. Measured, not derived: `benches/src/bin/footprint.rs` with 600k
/// services and 600k, then 1.2M instances grows jemalloc's `allocated` by
/// 108 bytes per added instance, 14 of them the lease slab (counted in
/// `lease_bytes`) and 80 the struct (64 since the cluster name and the
/// metadata are one pointer each; the size-class rounding is unchanged:
/// one instance fills the 64-byte class, two the 128-byte one).
///
/// A flat list keeps its block when it shrinks to half or more (see
/// `instance_list::flat_capacity`): while a fleet deregisters, the lists
/// hold up to twice this, and the difference shows as `allocated_other`.
const INSTANCE_EXTRA_BYTES: usize = 14;

/// What one service costs besides its instances, measured the same way
/// (600k services of one instance each: 419 bytes per service once the
/// instances and leases are taken out, of which about 14 are the emptied
/// queue that the sweeper drains in a running server). The parts, by
/// jemalloc size class: the snapshot's `Arc` (96; it was 160 before the
/// rarely set settings moved behind one optional pointer, and `footprint`
/// with 600k services / 1.1M instances fell by 28.8 MB, 48 bytes a
/// service; then 112 until the key moved behind the identity), the name
/// (64 for a 40-odd byte name), the service's identity ([`ServiceId`], 48:
/// its key, shared by its snapshots; it replaced a 32-byte
/// `Arc<ServiceCell>` when the cell moved into the map entry, see
/// [`ServiceCell`]), papaya's boxed map entry (48, the key and the cell)
/// and table slot, and the listing index's key (32, in chunks half to fully
/// used). `store_services` on `/metrics` is this times the services.
const SERVICE_BYTES: usize = 357;

/// The result of a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The service's revision after the write.
    pub revision: u64,
    /// Set when readers can see a change; `None` for a no-op.
    pub event: Option<ChangeEvent>,
}

/// One service's current snapshot, held in its shard's map entry (the
/// entry a lookup lands on already holds it, so a beat follows no pointer
/// between the map and the snapshot), with the service's identity. Written
/// only under its shard's writer lock; read by anyone, lock-free.
pub struct ServiceCell {
    snapshot: ArcSwap<ServiceSnapshot>,
    id: Arc<ServiceId>,
}

impl ServiceCell {
    /// The current snapshot, without touching the reference count when the
    /// caller keeps it briefly.
    pub fn load(&self) -> Guard<Arc<ServiceSnapshot>> {
        self.snapshot.load()
    }
}

/// A shard's service map, pinned: a cell borrowed from it lives as long as
/// the pin.
type Pinned<'a> =
    papaya::HashMapRef<'a, ServiceKey, ServiceCell, FixedState, papaya::LocalGuard<'a>>;

/// The cell of the service incarnation `id`, if it still exists.
fn cell_of<'g>(map: &'g Pinned<'_>, id: &Arc<ServiceId>) -> Option<&'g ServiceCell> {
    map.get(&id.key.as_ref()).filter(|c| Arc::ptr_eq(&c.id, id))
}

struct Shard {
    services: papaya::HashMap<ServiceKey, ServiceCell, FixedState>,
    leases: LeaseTable,
    writer: Mutex<Writer>,
    /// Counters written by the writer, read by `stats` (`Relaxed`: they are
    /// independent gauges, no other memory is published through them).
    services_count: AtomicUsize,
    instances_count: AtomicUsize,
    /// The writer has empty auto-created services to look at in `expire`.
    has_emptied: AtomicBool,
    /// The writer has services with operator layers for the sweep.
    has_overrides: AtomicBool,
}

/// State only the shard's writer touches.
struct Writer {
    next_revision: u64,
    slots: SlotAllocator,
    /// Which service owns each lease slot, for the sweeper.
    owners: Vec<Option<Arc<ServiceId>>>,
    interner: Interner,
    /// Auto-created services that became empty, oldest first (the
    /// sweeper puts ones not yet due back at the end).
    emptied: VecDeque<Arc<ServiceId>>,
    /// Services holding operator layers (`layers`), for their sweep.
    overridden: Vec<Arc<ServiceId>>,
}

impl Writer {
    /// The interned cluster name and the lease slot for `spec`: an
    /// `existing` instance keeps its own; a new one gets the interned name
    /// and, if ephemeral, a fresh slot owned by `cell` (which the caller
    /// activates). The caller looks `existing` up once: in a large list
    /// each lookup by index is a walk down its tree.
    fn place(
        &mut self,
        existing: Option<&Instance>,
        spec: &InstanceSpec<'_>,
        cell: &ServiceCell,
    ) -> (SharedStr, LeaseSlot) {
        match existing {
            Some(inst) => (inst.cluster.clone(), inst.lease),
            None => {
                let lease = if spec.ephemeral {
                    let slot = self.slots.allocate();
                    set_owner(&mut self.owners, slot, Some(cell.id.clone()));
                    slot
                } else {
                    LeaseSlot::NONE
                };
                (self.interner.cluster(spec.addr.cluster), lease)
            }
        }
    }
}

/// The registry: sharded services with lock-free snapshots and leases.
pub struct Store {
    shards: Box<[Shard]>,
    /// Service names sorted per namespace and group, for listings.
    index: ServiceIndex,
    mask: u64,
    hasher: FixedState,
    config: StoreConfig,
}

impl Store {
    /// An empty store.
    ///
    /// # Panics
    /// If `config.shards` is not a power of two; validate configuration
    /// from users with [`StoreConfig::validate`] first.
    pub fn new(config: StoreConfig) -> Store {
        config.validate().expect("invalid store configuration");
        let shards = (0..config.shards)
            .map(|_| Shard {
                // Blocking resizes: a reader never helps migrate a table
                // (incremental mode makes `get` do copy work on the beat
                // path); writers, which create services rarely, pay instead.
                services: papaya::HashMap::builder()
                    .hasher(FixedState::with_seed(0x5eed))
                    .resize_mode(papaya::ResizeMode::Blocking)
                    .build(),
                leases: LeaseTable::new(),
                writer: Mutex::new(Writer {
                    next_revision: 0,
                    slots: SlotAllocator::default(),
                    owners: Vec::new(),
                    interner: Interner::default(),
                    emptied: VecDeque::new(),
                    overridden: Vec::new(),
                }),
                services_count: AtomicUsize::new(0),
                instances_count: AtomicUsize::new(0),
                has_emptied: AtomicBool::new(false),
                has_overrides: AtomicBool::new(false),
            })
            .collect();
        Store {
            shards,
            index: ServiceIndex::default(),
            mask: config.shards as u64 - 1,
            hasher: FixedState::with_seed(0x9e37_79b9),
            config,
        }
    }

    /// The configuration the store was built with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    fn shard(&self, service: ServiceRef<'_>) -> &Shard {
        use std::hash::BuildHasher;
        let h = self.hasher.hash_one(service);
        &self.shards[(h & self.mask) as usize]
    }

    /// Index of the shard owning `service`, for tests and diagnostics.
    pub fn shard_of(&self, service: ServiceRef<'_>) -> usize {
        use std::hash::BuildHasher;
        (self.hasher.hash_one(service) & self.mask) as usize
    }

    // ----- write-path plumbing ---------------------------------------------

    fn cell_or_create<'g>(
        &self,
        shard: &Shard,
        map: &'g Pinned<'_>,
        w: &mut Writer,
        service: ServiceRef<'_>,
        now: Millis,
    ) -> Result<&'g ServiceCell, RegistryError> {
        if let Some(c) = map.get(&service) {
            return Ok(c);
        }
        check_name(service)?;
        if self.stats_services() >= self.config.max_services {
            return Err(RegistryError::TooManyServices {
                limit: self.config.max_services,
            });
        }
        w.next_revision += 1;
        let key = ServiceKey::from_shared(
            w.interner.string(service.namespace),
            Arc::from(service.name),
        );
        let id = Arc::new(ServiceId { key: key.clone() });
        let cell = ServiceCell {
            snapshot: ArcSwap::from_pointee(ServiceSnapshot::empty(
                id.clone(),
                w.next_revision,
                false,
                now,
            )),
            id: id.clone(),
        };
        self.index.insert(&key);
        let cell = map.get_or_insert(key, cell);
        shard.services_count.fetch_add(1, Ordering::Relaxed);
        // Until an instance arrives it is an empty auto-created service.
        w.emptied.push_back(id);
        shard.has_emptied.store(true, Ordering::Relaxed);
        Ok(cell)
    }

    fn stats_services(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.services_count.load(Ordering::Relaxed))
            .sum()
    }

    fn release_lease(&self, shard: &Shard, w: &mut Writer, slot: LeaseSlot) {
        if slot.is_some() {
            shard.leases.release(slot);
            set_owner(&mut w.owners, slot, None);
            w.slots.free(slot);
        }
    }

    /// Publishes `instances` as the service's next revision.
    fn publish(
        &self,
        shard: &Shard,
        w: &mut Writer,
        cell: &ServiceCell,
        old: &ServiceSnapshot,
        instances: InstanceList,
        now: Millis,
    ) -> Written {
        self.publish_next(shard, w, cell, old, derive(old, instances), now)
    }

    /// Publishes `next` (settings and instances) as the service's next
    /// revision.
    fn publish_next(
        &self,
        shard: &Shard,
        w: &mut Writer,
        cell: &ServiceCell,
        old: &ServiceSnapshot,
        next: ServiceSnapshot,
        now: Millis,
    ) -> Written {
        let became_empty =
            next.instances.is_empty() && !old.instances.is_empty() && !old.is_explicit();
        let written = self.commit(w, cell, next, now);
        if became_empty {
            w.emptied.push_back(cell.id.clone());
            shard.has_emptied.store(true, Ordering::Relaxed);
        }
        written
    }

    fn commit(
        &self,
        w: &mut Writer,
        cell: &ServiceCell,
        mut next: ServiceSnapshot,
        now: Millis,
    ) -> Written {
        w.next_revision += 1;
        next.revision = w.next_revision;
        next.emptied_at = EmptiedAt::new(match (next.instances.is_empty(), next.emptied_at()) {
            (false, _) => None,
            (true, Some(t)) => Some(t),
            (true, None) => Some(now),
        });
        let event = ChangeEvent {
            service: next.key().clone(),
            revision: next.revision,
        };
        cell.snapshot.store(Arc::new(next));
        Written {
            revision: event.revision,
            event: Some(event),
        }
    }
}

impl StoreConfig {
    /// Checks the settings a user can get wrong.
    ///
    /// # Errors
    /// A message naming the bad setting.
    pub fn validate(&self) -> Result<(), String> {
        if !self.shards.is_power_of_two() {
            return Err(format!(
                "shards must be a power of two, got {}",
                self.shards
            ));
        }
        let t = &self.timeouts;
        if t.beat_interval_ms == 0 || t.beat_timeout_ms == 0 || t.delete_timeout_ms == 0 {
            return Err("heartbeat interval and timeouts must be positive".into());
        }
        Ok(())
    }
}

/// The next snapshot: `old`'s settings with new instances. The revision is
/// set by `commit`.
fn derive(old: &ServiceSnapshot, instances: InstanceList) -> ServiceSnapshot {
    ServiceSnapshot {
        id: old.id.clone(),
        revision: old.revision,
        instances,
        emptied_at: old.emptied_at,
        settings: old.settings.clone(),
        // Every local write makes this node the source of the state.
        origin: None,
    }
}

fn set_owner(
    owners: &mut Vec<Option<Arc<ServiceId>>>,
    slot: LeaseSlot,
    owner: Option<Arc<ServiceId>>,
) {
    let i = slot.0 as usize;
    if owners.len() <= i {
        owners.resize(i + 1, None);
    }
    owners[i] = owner;
}

fn check_name(service: ServiceRef<'_>) -> Result<(), RegistryError> {
    if service.namespace.is_empty() || service.name.is_empty() {
        Err(RegistryError::InvalidName)
    } else {
        Ok(())
    }
}
