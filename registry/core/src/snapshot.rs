//! Immutable, revisioned service snapshots and the query views over them.
//!
//! Each service's state is one `Arc<ServiceSnapshot>` behind an `ArcSwap` in
//! its [`ServiceCell`](crate::store::ServiceCell). Readers load it without a
//! lock; a writer builds a new snapshot and swaps the pointer. The new
//! snapshot shares all but one root-to-leaf path of its instance list with
//! the old one ([`InstanceList`]), so a write's cost grows with the log of
//! the service's size. A snapshot never changes after it is published, so a reader
//! holding one sees one consistent revision, never a torn mix.

use std::sync::Arc;

use crate::instance_list::InstanceList;
use crate::metadata::Metadata;
use crate::model::{Instance, InstanceAddr, Millis, ServiceKey};
use crate::overrides::{OverrideView, Overrides};

/// One published state of a service.
///
/// A registry holds hundreds of thousands of these, one per service, so
/// the layout is kept small: 80 bytes, which with the `Arc`'s counts is
/// jemalloc's 96-byte class (it was 144, the 160-byte class, then 96 and
/// the 112-byte class: 29 and 10 MB more at 600k services; the list's
/// persistent count took the last 8 bytes the class had). The settings
/// that only the service API sets live behind one optional pointer, a
/// peer's origin behind another, the key behind the service's identity,
/// and "not empty" is a sentinel instead of an `Option`'s tag.
///
/// `repr(C)` pins where a beat reads: the instance list's 24-byte head at
/// offset 16, 32 bytes into the `Arc`'s block. jemalloc's 96-byte blocks
/// start on a 32-byte boundary, so that head never straddles two cache
/// lines: a beat in a fleet past the caches misses once on the snapshot,
/// not twice (at the compiler's offset 0 it straddled in every other
/// block; `scripts/beat-misses.sh`, 0.3 misses a beat).
#[derive(Debug)]
#[repr(C)]
pub struct ServiceSnapshot {
    /// The service incarnation this is a state of; holds the key.
    pub(crate) id: Arc<ServiceId>,
    pub(crate) revision: u64,
    /// Sorted by [`Instance::sort_key`], with its digest.
    pub(crate) instances: InstanceList,
    /// When the last instance left (for the cleanup of auto-created
    /// services), as [`EmptiedAt`].
    pub(crate) emptied_at: EmptiedAt,
    /// `None` for a service with [`ServiceSettings::PLAIN`]: a service
    /// that only registrations created.
    pub(crate) settings: Option<Arc<ServiceSettings>>,
    /// Where this state came from: `None` for a write made here
    /// ([`Origin::LOCAL`]), else the peer and its revision (cluster
    /// replication). Boxed: 16 bytes inline would push every snapshot
    /// into the next size class for the sake of replicas only.
    pub(crate) origin: Option<Box<Origin>>,
}

/// A service's settings besides its instances. Most services never set
/// any (they are created by a registration), so snapshots share one
/// default ([`ServiceSettings::PLAIN`]) and hold a pointer only for the
/// others. Replaced whole by the service API and by replication, never
/// by an instance write.
#[derive(Clone, Debug)]
pub(crate) struct ServiceSettings {
    pub(crate) protect_threshold: f32,
    pub(crate) metadata: Metadata,
    pub(crate) selector: Option<Arc<str>>,
    /// Created through the service API: kept when it has no instances.
    pub(crate) explicit: bool,
    /// The operator's layers over its instances (`crate::overrides`);
    /// `None` for none. Carried by every write, like the rest.
    pub(crate) overrides: Option<Arc<Overrides>>,
}

impl ServiceSettings {
    /// What a service created by a registration has.
    pub(crate) const PLAIN: ServiceSettings = ServiceSettings {
        protect_threshold: 0.0,
        metadata: Metadata::empty(),
        selector: None,
        explicit: false,
        overrides: None,
    };

    /// These settings as a snapshot holds them: no allocation for
    /// [`ServiceSettings::PLAIN`].
    pub(crate) fn shared(self) -> Option<Arc<ServiceSettings>> {
        let plain = self.protect_threshold.to_bits() == 0
            && self.metadata.is_empty()
            && self.selector.is_none()
            && !self.explicit
            && self.overrides.is_none();
        (!plain).then(|| Arc::new(self))
    }
}

/// One incarnation of a service: its key, shared by all its snapshots, and
/// what the store's side tables (a lease slot's owner, the emptied
/// services) hold to find the service again and to tell it from one
/// deleted and re-created under the same name since (by pointer).
#[derive(Debug)]
pub(crate) struct ServiceId {
    pub(crate) key: ServiceKey,
}

/// The default every snapshot without settings of its own reads.
static PLAIN: ServiceSettings = ServiceSettings::PLAIN;

/// `Option<Millis>` in 8 bytes: [`EmptiedAt::NOT_EMPTY`] is `None`. A time
/// at the very end of the clock's range is stored 1 ms early, so it cannot
/// read as "not empty".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EmptiedAt(u64);

impl EmptiedAt {
    /// The service has instances.
    pub(crate) const NOT_EMPTY: EmptiedAt = EmptiedAt(u64::MAX);

    pub(crate) fn new(at: Option<Millis>) -> EmptiedAt {
        match at {
            Some(t) => EmptiedAt(t.0.min(u64::MAX - 1)),
            None => EmptiedAt::NOT_EMPTY,
        }
    }

    pub(crate) fn get(self) -> Option<Millis> {
        (self != EmptiedAt::NOT_EMPTY).then_some(Millis(self.0))
    }
}

/// The source of a service's state in a cluster: which node wrote it and
/// at which of that node's revisions. Revisions of different nodes are not
/// comparable; one node's only grow while it runs, so `node` names a
/// process incarnation, not just an address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The writing node's incarnation id; 0 for a local write.
    pub node: u64,
    /// The service's revision on that node.
    pub revision: u64,
}

impl Origin {
    /// Written on this node.
    pub const LOCAL: Origin = Origin {
        node: 0,
        revision: 0,
    };

    /// Whether `self` is already at or past `other` from the same node, so
    /// applying `other` again would change nothing or go backwards.
    pub fn covers(&self, other: &Origin) -> bool {
        self.node == other.node && self.node != 0 && self.revision >= other.revision
    }
}

/// Which instances a query asks for.
#[derive(Clone, Copy, Debug, Default)]
pub struct View<'a> {
    /// Cluster names to include; empty means all clusters.
    pub clusters: &'a [&'a str],
    /// Return only instances reported healthy.
    pub healthy_only: bool,
}

/// The result of a query: instances with the health each is reported with.
#[derive(Debug)]
pub struct Selection<'s> {
    /// Instances to return, with the health to report for each. Under
    /// protection, unhealthy instances are reported healthy, as Nacos does.
    pub hosts: Vec<(&'s Instance, bool)>,
    /// The healthy share fell to or below the protect threshold.
    pub reach_protection_threshold: bool,
}

impl ServiceSnapshot {
    pub(crate) fn empty(id: Arc<ServiceId>, revision: u64, explicit: bool, now: Millis) -> Self {
        ServiceSnapshot {
            id,
            revision,
            instances: InstanceList::default(),
            emptied_at: EmptiedAt::new(Some(now)),
            settings: ServiceSettings {
                explicit,
                ..ServiceSettings::PLAIN
            }
            .shared(),
            origin: None,
        }
    }

    /// The service's settings, shared or the default.
    pub(crate) fn settings(&self) -> &ServiceSettings {
        self.settings.as_deref().unwrap_or(&PLAIN)
    }

    /// The operator's layers over the service's instances (already laid
    /// over the instances this snapshot holds), by address.
    pub fn overrides(&self) -> impl Iterator<Item = OverrideView<'_>> {
        self.settings()
            .overrides
            .iter()
            .flat_map(|o| o.iter().map(|e| e.view()))
    }

    /// Where this state came from (see [`Origin`]).
    pub fn origin(&self) -> Origin {
        self.origin.as_deref().copied().unwrap_or(Origin::LOCAL)
    }

    /// Whether an empty service was created through the service API (kept
    /// when empty) rather than by a registration.
    pub fn is_explicit(&self) -> bool {
        self.settings().explicit
    }

    /// When the last instance left; `None` while it has instances.
    pub(crate) fn emptied_at(&self) -> Option<Millis> {
        self.emptied_at.get()
    }

    /// The service's identity.
    pub fn key(&self) -> &ServiceKey {
        &self.id.key
    }

    /// Grows with every published change to the service; never reused, even
    /// across deletion and re-creation.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Protect threshold in `[0, 1]`.
    pub fn protect_threshold(&self) -> f32 {
        self.settings().protect_threshold
    }

    /// Service metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.settings().metadata
    }

    /// Raw selector JSON, if one was set.
    pub fn selector(&self) -> Option<&str> {
        self.settings().selector.as_deref()
    }

    /// All instances, ephemeral and persistent, sorted by cluster, IP, port.
    pub fn instances(&self) -> &InstanceList {
        &self.instances
    }

    /// Whether the service holds an instance of the other kind than
    /// `ephemeral`: Nacos 2.x/3.x give a service one kind, and its v2/v3 and
    /// 2.x doors refuse a registration of the other.
    pub fn holds_other_kind(&self, ephemeral: bool) -> bool {
        let persistent = self.instances.persistent_len();
        if ephemeral {
            persistent > 0
        } else {
            persistent < self.instances.len()
        }
    }

    /// A 64-bit digest of the visible instance list; changes whenever it does.
    pub fn checksum(&self) -> u64 {
        self.instances.digest()
    }

    /// Distinct cluster names in use, sorted.
    pub fn cluster_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.instances.iter().map(|i| &*i.cluster).collect();
        names.dedup();
        names
    }

    /// Finds an instance; `ephemeral` picks between the two lists.
    pub fn find(&self, addr: InstanceAddr<'_>, ephemeral: bool) -> Option<&Instance> {
        self.instances
            .find((addr.cluster, addr.ip, addr.port, ephemeral))
    }

    /// Finds an instance in either list, ephemeral first.
    pub fn find_any(&self, addr: InstanceAddr<'_>) -> Option<&Instance> {
        self.find(addr, true).or_else(|| self.find(addr, false))
    }

    pub(crate) fn position(&self, addr: InstanceAddr<'_>, ephemeral: bool) -> Result<usize, usize> {
        self.instances
            .position((addr.cluster, addr.ip, addr.port, ephemeral))
    }

    /// Selects the instances a query returns, with Nacos 1.4's semantics:
    /// the cluster filter picks the served set; if the healthy share of that
    /// set is at or below the protect threshold, every instance is returned
    /// and reported healthy; disabled instances are never returned, and
    /// `healthy_only` drops those reported unhealthy.
    pub fn select(&self, view: &View<'_>) -> Selection<'_> {
        let served = self
            .instances
            .iter()
            .filter(|i| view.clusters.is_empty() || view.clusters.contains(&&*i.cluster));
        let (mut total, mut healthy) = (0usize, 0usize);
        for i in served.clone() {
            total += 1;
            healthy += usize::from(i.healthy);
        }
        let protect =
            total > 0 && (healthy as f64 / total as f64) <= f64::from(self.protect_threshold());
        let hosts = served
            .filter(|i| i.enabled)
            .map(|i| (i, i.healthy || protect))
            .filter(|(_, reported)| *reported || !view.healthy_only)
            .collect();
        Selection {
            hosts,
            reach_protection_threshold: protect,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_fits_the_96_byte_class() {
        // 600k services hold one each: every 16 bytes here is ~10 MB of
        // the registry under `nacos-1x-report`. 80 bytes plus the `Arc`'s
        // two counts is jemalloc's 96-byte class.
        assert!(std::mem::size_of::<ServiceSnapshot>() <= 80);
        // The head a beat reads: see the layout note on the struct.
        assert_eq!(std::mem::offset_of!(ServiceSnapshot, instances), 16);
        // Representation, digest and the persistent count.
        assert!(std::mem::size_of::<InstanceList>() <= 40);
    }

    #[test]
    fn plain_settings_take_no_allocation_and_others_read_back() {
        assert!(ServiceSettings::PLAIN.shared().is_none());
        let id = Arc::new(ServiceId {
            key: ServiceKey::new("public", "DEFAULT_GROUP@@a"),
        });
        let plain = ServiceSnapshot::empty(id.clone(), 1, false, Millis(5));
        assert!(plain.settings.is_none());
        assert_eq!(
            (
                plain.protect_threshold(),
                plain.is_explicit(),
                plain.origin()
            ),
            (0.0, false, Origin::LOCAL)
        );
        assert_eq!(plain.emptied_at(), Some(Millis(5)));
        let explicit = ServiceSnapshot::empty(id, 1, true, Millis(5));
        assert!(explicit.is_explicit());
        let set = ServiceSettings {
            protect_threshold: 0.5,
            selector: Some(Arc::from("{}")),
            ..ServiceSettings::PLAIN
        }
        .shared()
        .expect("non-default settings are kept");
        assert_eq!(set.protect_threshold, 0.5);
    }

    #[test]
    fn emptied_at_round_trips_every_time() {
        for t in [None, Some(0), Some(1), Some(u64::MAX - 1)] {
            assert_eq!(EmptiedAt::new(t.map(Millis)).get(), t.map(Millis));
        }
        // The end of the clock is kept 1 ms early, never as "not empty".
        assert_eq!(
            EmptiedAt::new(Some(Millis(u64::MAX))).get(),
            Some(Millis(u64::MAX - 1))
        );
    }
}
