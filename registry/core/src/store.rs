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
use crate::lease::{self, LeaseSlot, LeaseTable, SlotAllocator};
use crate::metadata::Metadata;
use crate::model::{
    check_threshold, check_weight, Instance, InstanceAddr, InstancePatch, InstanceSpec,
    LeaseTimeouts, Millis, ServiceKey, ServiceRef, ServiceSpec,
};
use crate::service_index::ServiceIndex;
use crate::shared_str::SharedStr;
use crate::snapshot::{EmptiedAt, ServiceId, ServiceSettings, ServiceSnapshot};

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
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            shards: 64,
            timeouts: LeaseTimeouts::NACOS,
            empty_service_ttl_ms: 60_000,
            max_instances_per_service: 200_000,
            max_services: 4_000_000,
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

/// What one expiry pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpireReport {
    /// One event per changed service.
    pub events: Vec<ChangeEvent>,
    /// Instances marked unhealthy.
    pub unhealthy: usize,
    /// Instances deleted.
    pub removed: usize,
    /// Empty auto-created services removed.
    pub services_removed: usize,
}

/// Instances a sweeper step touches under one hold of a shard's writer
/// lock, at most (a larger service is expired whole, alone): a few hundred
/// microseconds of copying.
pub const EXPIRE_STEP_BUDGET: usize = 4_096;

/// A sweeper pass in progress: which shard, and what is left of it.
/// Made by [`Store::expire_pass`], advanced by [`Store::expire_step`].
pub struct ExpirePass {
    now: Millis,
    shard: usize,
    phase: Phase,
    /// Due slots of the shard not yet resolved to their service.
    due: Vec<LeaseSlot>,
    /// Due slots with their service, grouped by service.
    work: Vec<(Arc<ServiceId>, LeaseSlot)>,
    holds: usize,
    max_held: usize,
}

impl ExpirePass {
    /// Writer-lock holds taken so far.
    pub fn holds(&self) -> usize {
        self.holds
    }

    /// Most instances touched under one hold so far.
    pub fn max_held(&self) -> usize {
        self.max_held
    }

    fn note_hold(&mut self, touched: usize) {
        self.holds += 1;
        self.max_held = self.max_held.max(touched);
    }
}

/// Where a pass is within its current shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Scan the lease slab (no lock).
    Scan,
    /// Resolve due slots to their services, `budget` per hold.
    Resolve,
    /// Expire services, about `budget` instances per hold.
    Expire,
    /// Look at emptied services; `left` of the list still to visit.
    Emptied { left: Option<usize> },
    /// This shard is finished.
    Done,
}

/// One page of a service listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServicePage {
    /// Services matching the filter, on all pages.
    pub count: usize,
    /// This page's services, sorted by grouped name.
    pub services: Vec<ServiceKey>,
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

/// How `upsert` treats a missing instance.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Upsert {
    /// Create the service and the instance as needed.
    Register,
    /// Fail if either is missing.
    Update,
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
                }),
                services_count: AtomicUsize::new(0),
                instances_count: AtomicUsize::new(0),
                has_emptied: AtomicBool::new(false),
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

    // ----- reads -------------------------------------------------------

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

    // ----- the beat ------------------------------------------------------

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

    // ----- instance writes ------------------------------------------------

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
        let inst = Instance::from_spec(spec, cluster, metadata, timeouts, lease);
        if lease.is_some() {
            let deadline = lease::beat_deadline(now, &timeouts);
            match pos {
                Ok(_) => shard.leases.renew(lease, deadline),
                Err(_) => shard.leases.activate(lease, deadline),
            }
        }
        if existing.is_some_and(|e| e.same_visible_state(&inst)) {
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
        Ok(self.publish(shard, &mut w, cell, &old, instances, now))
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

    // ----- service writes -------------------------------------------------

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

    // ----- expiry ---------------------------------------------------------

    /// One whole sweeper pass: marks ephemeral instances unhealthy after
    /// their beat timeout, deletes them after their delete timeout, and
    /// removes auto-created services empty for longer than the configured
    /// TTL. Persistent instances are never touched.
    ///
    /// Runs [`Store::expire_step`] with [`EXPIRE_STEP_BUDGET`] until the
    /// pass is done; the sweeper calls the steps itself, publishing the
    /// events of each as it goes.
    pub fn expire(&self, now: Millis) -> ExpireReport {
        let mut pass = self.expire_pass(now);
        let mut report = ExpireReport::default();
        while self.expire_step(&mut pass, EXPIRE_STEP_BUDGET, &mut report) {}
        report
    }

    /// [`Store::expire`] restricted to the services `owned` accepts (see
    /// [`Store::expire_step_owned`]).
    pub fn expire_owned(&self, now: Millis, owned: impl Fn(&ServiceKey) -> bool) -> ExpireReport {
        let mut pass = self.expire_pass(now);
        let mut report = ExpireReport::default();
        while self.expire_step_owned(&mut pass, EXPIRE_STEP_BUDGET, &mut report, &owned) {}
        report
    }

    /// Starts a sweeper pass at `now`; [`Store::expire_step`] advances it.
    pub fn expire_pass(&self, now: Millis) -> ExpirePass {
        ExpirePass {
            now,
            shard: 0,
            phase: Phase::Scan,
            due: Vec::new(),
            work: Vec::new(),
            holds: 0,
            max_held: 0,
        }
    }

    /// Advances `pass` by one bounded step and adds what it did to
    /// `report`. Returns `false` once the pass is finished.
    ///
    /// A step takes at most one shard's writer lock once, and under it
    /// touches about `budget` instances: lease slots resolved to their
    /// service, instances copied into a service's next snapshot, or empty
    /// services looked at. A service is always expired whole, in one
    /// snapshot, so a service larger than `budget` makes one step alone.
    /// Between steps the lock is free: writers and beats of that shard go
    /// ahead, and everything a step acts on is re-checked under the lock
    /// (a lease renewed or a slot reused since the scan is left alone).
    ///
    /// The scan itself (one linear pass over the shard's lease slab,
    /// 8 bytes per instance) takes no lock.
    pub fn expire_step(
        &self,
        pass: &mut ExpirePass,
        budget: usize,
        report: &mut ExpireReport,
    ) -> bool {
        self.expire_step_owned(pass, budget, report, &|_| true)
    }

    /// [`Store::expire_step`] that expires only the services `owned`
    /// accepts: in a cluster only a service's responsible node expires it.
    /// Due leases of other services are pushed one first-check period
    /// ahead instead (one look per period), and a node that takes a service
    /// over renews them with [`Store::refresh_leases`] before it owns it.
    pub fn expire_step_owned(
        &self,
        pass: &mut ExpirePass,
        budget: usize,
        report: &mut ExpireReport,
        owned: &dyn Fn(&ServiceKey) -> bool,
    ) -> bool {
        let budget = budget.max(1);
        let Some(shard) = self.shards.get(pass.shard) else {
            return false;
        };
        let now = pass.now;
        match pass.phase {
            Phase::Scan => {
                pass.due.clear();
                pass.work.clear();
                shard.leases.scan_due(now, &mut pass.due);
                let emptied = shard.has_emptied.load(Ordering::Relaxed);
                pass.phase = if !pass.due.is_empty() {
                    Phase::Resolve
                } else if emptied {
                    Phase::Emptied { left: None }
                } else {
                    Phase::Done
                };
            }
            Phase::Resolve => {
                let w = shard.writer.lock();
                let take = pass.due.len().min(budget);
                for slot in pass.due.drain(pass.due.len() - take..) {
                    if let Some(Some(owner)) = w.owners.get(slot.0 as usize) {
                        pass.work.push((owner.clone(), slot));
                    }
                }
                drop(w);
                pass.note_hold(take);
                if pass.due.is_empty() {
                    // Grouped by service, each group's slots sorted; taken
                    // from the back in `Expire`.
                    pass.work
                        .sort_by_key(|(c, s)| std::cmp::Reverse((Arc::as_ptr(c) as usize, *s)));
                    pass.phase = Phase::Expire;
                }
            }
            Phase::Expire => {
                let mut w = shard.writer.lock();
                let map = shard.services.pin();
                let mut touched = 0;
                let mut slots = Vec::new();
                while touched < budget {
                    let Some((id, _)) = pass.work.last() else {
                        break;
                    };
                    let id = id.clone();
                    slots.clear();
                    while let Some((c, s)) = pass.work.last() {
                        if !Arc::ptr_eq(c, &id) {
                            break;
                        }
                        // Still this service's slot? It may have been freed
                        // and handed to another instance since the scan.
                        if matches!(w.owners.get(s.0 as usize), Some(Some(o)) if Arc::ptr_eq(o, &id))
                        {
                            slots.push(*s);
                        }
                        pass.work.pop();
                    }
                    slots.sort_unstable();
                    // A slot still owned belongs to a live instance, so its
                    // service is in the map; deleted, it owns no slot.
                    let Some(cell) = cell_of(&map, &id) else {
                        touched += 1;
                        continue;
                    };
                    touched += cell.snapshot.load().instances.len().max(1);
                    if slots.is_empty() {
                        continue;
                    }
                    if owned(&id.key) {
                        self.expire_service(shard, &mut w, cell, &slots, now, report);
                    } else {
                        replica::defer_leases(shard, cell, &slots, now);
                    }
                }
                drop(map);
                drop(w);
                pass.note_hold(touched);
                if pass.work.is_empty() {
                    pass.phase = if shard.has_emptied.load(Ordering::Relaxed) {
                        Phase::Emptied { left: None }
                    } else {
                        Phase::Done
                    };
                }
            }
            Phase::Emptied { left } => {
                let mut w = shard.writer.lock();
                // Visit each service that was on the list when this phase
                // began once; kept ones go to the back.
                let left = left.unwrap_or(w.emptied.len());
                let take = left.min(budget);
                self.remove_empty_services(shard, &mut w, now, take, report);
                drop(w);
                pass.note_hold(take);
                pass.phase = if left > take {
                    Phase::Emptied {
                        left: Some(left - take),
                    }
                } else {
                    Phase::Done
                };
            }
            Phase::Done => {}
        }
        if pass.phase == Phase::Done {
            pass.shard += 1;
            pass.phase = Phase::Scan;
        }
        pass.shard < self.shards.len()
    }

    fn expire_service(
        &self,
        shard: &Shard,
        w: &mut Writer,
        cell: &ServiceCell,
        due: &[LeaseSlot],
        now: Millis,
        report: &mut ExpireReport,
    ) {
        let old = cell.snapshot.load_full();
        let mut instances: Vec<Instance> = Vec::with_capacity(old.instances.len());
        let mut changed = false;
        for inst in old.instances.iter() {
            if !inst.lease.is_some() || due.binary_search(&inst.lease).is_err() {
                instances.push(inst.clone());
                continue;
            }
            // Re-read under the lock: a beat may have renewed it since the scan.
            let deadline = shard.leases.deadline(inst.lease);
            if lease::due_at(deadline) > now {
                instances.push(inst.clone());
                continue;
            }
            let last = lease::last_beat(deadline, &inst.timeouts);
            if now >= last.plus(u64::from(inst.timeouts.delete_timeout_ms)) {
                self.release_lease(shard, w, inst.lease);
                shard.instances_count.fetch_sub(1, Ordering::Relaxed);
                report.removed += 1;
                changed = true;
                continue;
            }
            let mut kept = inst.clone();
            if inst.healthy && now >= last.plus(u64::from(inst.timeouts.beat_timeout_ms)) {
                kept.healthy = false;
                report.unhealthy += 1;
                changed = true;
            }
            // Next look at the delete time, unless a beat renews it first.
            shard.leases.postpone(
                inst.lease,
                deadline,
                lease::postponed_deadline(last, &inst.timeouts),
            );
            instances.push(kept);
        }
        if changed {
            let instances = InstanceList::from_sorted(instances);
            let written = self.publish(shard, w, cell, &old, instances, now);
            report.events.extend(written.event);
        }
    }

    /// Looks at the `take` oldest entries of the shard's emptied list:
    /// removes services empty past the TTL, drops ones no longer empty,
    /// and puts the rest back at the end.
    fn remove_empty_services(
        &self,
        shard: &Shard,
        w: &mut Writer,
        now: Millis,
        take: usize,
        report: &mut ExpireReport,
    ) {
        let ttl = self.config.empty_service_ttl_ms;
        let map = shard.services.pin();
        for _ in 0..take.min(w.emptied.len()) {
            let Some(id) = w.emptied.pop_front() else {
                break;
            };
            // Deleted (or deleted and re-created) since it was queued.
            let Some(cell) = cell_of(&map, &id) else {
                continue;
            };
            let snap = cell.snapshot.load();
            let Some(since) = snap.emptied_at() else {
                continue;
            };
            if snap.is_explicit() || !snap.instances.is_empty() {
                continue;
            }
            if now < since.plus(ttl) {
                drop(snap);
                w.emptied.push_back(id);
                continue;
            }
            // `cell_of` found this incarnation, and only this shard's
            // writer (us) changes the map: the entry removed is this one.
            map.remove(&id.key.as_ref());
            self.index.remove(&id.key);
            shard.services_count.fetch_sub(1, Ordering::Relaxed);
            report.services_removed += 1;
        }
        shard
            .has_emptied
            .store(!w.emptied.is_empty(), Ordering::Relaxed);
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
        let next = derive(old, instances);
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

#[path = "replica.rs"]
mod replica;
pub use replica::{Applied, Replica};

#[path = "store_held.rs"]
mod held;

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
