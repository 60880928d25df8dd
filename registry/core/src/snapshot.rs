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

/// One published state of a service.
#[derive(Debug)]
pub struct ServiceSnapshot {
    pub(crate) key: ServiceKey,
    pub(crate) revision: u64,
    pub(crate) protect_threshold: f32,
    pub(crate) metadata: Metadata,
    pub(crate) selector: Option<Arc<str>>,
    /// Sorted by [`Instance::sort_key`], with its digest.
    pub(crate) instances: InstanceList,
    /// Created through the service API: kept when it has no instances.
    pub(crate) explicit: bool,
    /// When the last instance left, for the cleanup of auto-created services.
    pub(crate) emptied_at: Option<Millis>,
    /// Where this state came from: [`Origin::LOCAL`] for a write made
    /// here, else the peer and its revision (cluster replication).
    pub(crate) origin: Origin,
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
    pub(crate) fn empty(key: ServiceKey, revision: u64, explicit: bool, now: Millis) -> Self {
        ServiceSnapshot {
            key,
            revision,
            protect_threshold: 0.0,
            metadata: Metadata::empty(),
            selector: None,
            instances: InstanceList::default(),
            explicit,
            emptied_at: Some(now),
            origin: Origin::LOCAL,
        }
    }

    /// Where this state came from (see [`Origin`]).
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Whether an empty service was created through the service API (kept
    /// when empty) rather than by a registration.
    pub fn is_explicit(&self) -> bool {
        self.explicit
    }

    /// The service's identity.
    pub fn key(&self) -> &ServiceKey {
        &self.key
    }

    /// Grows with every published change to the service; never reused, even
    /// across deletion and re-creation.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Protect threshold in `[0, 1]`.
    pub fn protect_threshold(&self) -> f32 {
        self.protect_threshold
    }

    /// Service metadata.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Raw selector JSON, if one was set.
    pub fn selector(&self) -> Option<&str> {
        self.selector.as_deref()
    }

    /// All instances, ephemeral and persistent, sorted by cluster, IP, port.
    pub fn instances(&self) -> &InstanceList {
        &self.instances
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
            total > 0 && (healthy as f64 / total as f64) <= f64::from(self.protect_threshold);
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
