//! The operator's layer over what clients register.
//!
//! Nacos 2.x and 3.x keep an instance's `InstanceMetadata` (weight,
//! enabled, extra metadata) apart from what its client published, and lay
//! it over every read of the instance (`naming/.../core/v2/index/
//! ServiceStorage.parseInstance` → `utils/InstanceUtil.updateInstanceMetadata`):
//! the layer's weight and enabled replace the client's, its metadata keys
//! are put over the client's. So an operator who takes an instance offline
//! keeps it offline when the client registers again or redoes on a new
//! connection. The layer is keyed by cluster, IP and port
//! (`InstancePublishInfo.genMetadataId`): it covers the ephemeral and the
//! persistent instance at an address alike. It is dropped once its address
//! has held no instance for the store's `override_ttl_ms`
//! (`nacos.naming.clean.expired-metadata.expired-time`, 60 s, in
//! `core/v2/cleaner/ExpiredMetadataCleaner`).
//!
//! Here the layer is applied when an instance is written, not on each read:
//! a snapshot's instances are the effective ones, so every reader (lists,
//! pushes, DNS, the console) stays as it is and pays nothing. To recompute
//! an instance after an edit of the layer, each entry keeps the metadata
//! the client registered (`bases`).
//!
//! The edits are Nacos's (`core/InstanceOperatorClientImpl`):
//! [`OverrideEdit::Replace`] is `updateInstance`'s `buildMetadata` (the
//! form's weight, enabled and metadata), [`OverrideEdit::Patch`]
//! `patchInstance` (the given fields over the old layer, metadata replaced
//! whole), [`OverrideEdit::Put`] and [`OverrideEdit::Remove`]
//! `batchUpdateMetadata` and `batchDeleteMetadata` (keys put into, or
//! removed from, the layer's metadata; a key the client registered stays).
//! An edit without an old layer starts from Nacos's defaults (weight 1,
//! enabled), as `new InstanceMetadata()` does.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::RegistryError;
use crate::metadata::Metadata;
use crate::model::{check_weight, InstanceAddr, Millis};
use crate::shared_str::SharedStr;

/// The operator's layer of one address.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceOverride {
    /// Replaces the client's weight.
    pub weight: f64,
    /// Replaces the client's enabled.
    pub enabled: bool,
    /// Put over the client's metadata.
    pub metadata: Metadata,
}

impl Default for InstanceOverride {
    /// `new InstanceMetadata()`: weight 1, enabled, no metadata.
    fn default() -> Self {
        InstanceOverride {
            weight: 1.0,
            enabled: true,
            metadata: Metadata::empty(),
        }
    }
}

/// A change of an address's layer (see the module header for Nacos's
/// names of each).
#[derive(Clone, Copy, Debug)]
pub enum OverrideEdit<'a> {
    /// The whole layer.
    Replace(&'a InstanceOverride),
    /// The given fields over the old layer; metadata replaced whole.
    Patch {
        /// New weight.
        weight: Option<f64>,
        /// New enabled.
        enabled: Option<bool>,
        /// New metadata of the layer.
        metadata: Option<&'a Metadata>,
    },
    /// Keys put into the layer's metadata.
    Put(&'a Metadata),
    /// Keys (their values ignored) removed from the layer's metadata.
    Remove(&'a Metadata),
}

impl OverrideEdit<'_> {
    /// The layer after this edit of `old`.
    ///
    /// # Errors
    /// [`RegistryError::InvalidWeight`] for a weight out of range.
    pub fn applied_to(
        &self,
        old: Option<&InstanceOverride>,
    ) -> Result<InstanceOverride, RegistryError> {
        let mut next = old.cloned().unwrap_or_default();
        match *self {
            OverrideEdit::Replace(layer) => next = layer.clone(),
            OverrideEdit::Patch {
                weight,
                enabled,
                metadata,
            } => {
                if let Some(w) = weight {
                    next.weight = w;
                }
                if let Some(e) = enabled {
                    next.enabled = e;
                }
                if let Some(m) = metadata {
                    next.metadata = m.clone();
                }
            }
            OverrideEdit::Put(m) => next.metadata = next.metadata.merged(m)?,
            OverrideEdit::Remove(m) => {
                next.metadata =
                    Metadata::from_pairs(next.metadata.iter().filter(|(k, _)| m.get(k).is_none()))?;
            }
        }
        check_weight(next.weight)?;
        Ok(next)
    }
}

/// "Present": the address holds an instance.
const PRESENT: u64 = u64::MAX;

/// One address's layer, with what its instances registered.
#[derive(Debug)]
pub(crate) struct OverrideEntry {
    pub(crate) cluster: SharedStr,
    pub(crate) ip: IpAddr,
    pub(crate) port: u16,
    pub(crate) layer: InstanceOverride,
    /// The metadata the client registered, persistent at 0 and ephemeral
    /// at 1; `None` where no instance was written since the layer.
    pub(crate) bases: [Option<Metadata>; 2],
    /// Since when the address holds no instance ([`PRESENT`] while it
    /// does). Set by the store's sweep under the shard's writer lock, read
    /// by writers under it: an atomic only so snapshots can share entries.
    absent_since: AtomicU64,
}

impl Clone for OverrideEntry {
    fn clone(&self) -> Self {
        OverrideEntry {
            cluster: self.cluster.clone(),
            ip: self.ip,
            port: self.port,
            layer: self.layer.clone(),
            bases: self.bases.clone(),
            absent_since: AtomicU64::new(self.absent_since.load(Ordering::Relaxed)),
        }
    }
}

impl OverrideEntry {
    pub(crate) fn new(
        addr: InstanceAddr<'_>,
        cluster: SharedStr,
        layer: InstanceOverride,
    ) -> OverrideEntry {
        OverrideEntry {
            cluster,
            ip: addr.ip,
            port: addr.port,
            layer,
            bases: [None, None],
            absent_since: AtomicU64::new(PRESENT),
        }
    }

    fn matches(&self, addr: InstanceAddr<'_>) -> bool {
        self.port == addr.port && self.ip == addr.ip && *self.cluster == *addr.cluster
    }

    /// Since when the address has been empty, if it is.
    pub(crate) fn absent_since(&self) -> Option<Millis> {
        match self.absent_since.load(Ordering::Relaxed) {
            PRESENT => None,
            t => Some(Millis(t)),
        }
    }

    pub(crate) fn mark_absent(&self, since: Option<Millis>) {
        let v = since.map_or(PRESENT, |t| t.0.min(PRESENT - 1));
        self.absent_since.store(v, Ordering::Relaxed);
    }

    /// Whether the layer has outlived its address by `ttl_ms` at `now`.
    pub(crate) fn expired(&self, now: Millis, ttl_ms: u64) -> bool {
        self.absent_since()
            .is_some_and(|t| now.0.saturating_sub(t.0) >= ttl_ms)
    }

    /// The metadata readers see over `registered`.
    pub(crate) fn effective_metadata(
        &self,
        registered: &Metadata,
    ) -> Result<Metadata, RegistryError> {
        if self.layer.metadata.is_empty() {
            Ok(registered.clone())
        } else {
            registered.merged(&self.layer.metadata)
        }
    }

    /// A public view of the entry.
    pub(crate) fn view(&self) -> OverrideView<'_> {
        OverrideView {
            addr: InstanceAddr {
                cluster: &self.cluster,
                ip: self.ip,
                port: self.port,
            },
            layer: &self.layer,
        }
    }
}

/// One address's layer as a snapshot shows it (for persistence and
/// replication).
#[derive(Clone, Copy, Debug)]
pub struct OverrideView<'a> {
    /// The address.
    pub addr: InstanceAddr<'a>,
    /// Its layer.
    pub layer: &'a InstanceOverride,
}

/// A service's layers, sorted by address; few, so a sorted vector.
#[derive(Clone, Debug, Default)]
pub(crate) struct Overrides(Vec<OverrideEntry>);

impl Overrides {
    pub(crate) fn find(&self, addr: InstanceAddr<'_>) -> Option<&OverrideEntry> {
        self.0.iter().find(|e| e.matches(addr))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &OverrideEntry> {
        self.0.iter()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// These layers with `entry` in place of the one at its address.
    pub(crate) fn with(&self, entry: OverrideEntry) -> Overrides {
        let mut next: Vec<OverrideEntry> = self
            .0
            .iter()
            .filter(|e| !(e.port == entry.port && e.ip == entry.ip && e.cluster == entry.cluster))
            .cloned()
            .collect();
        next.push(entry);
        next.sort_by(|a, b| {
            (a.cluster.as_str(), a.ip, a.port).cmp(&(b.cluster.as_str(), b.ip, b.port))
        });
        Overrides(next)
    }

    /// These layers without those `drop` picks.
    pub(crate) fn without(&self, drop: impl Fn(&OverrideEntry) -> bool) -> Overrides {
        Overrides(self.0.iter().filter(|e| !drop(e)).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(pairs: &[(&str, &str)]) -> Metadata {
        Metadata::from_pairs(pairs.iter().copied()).unwrap()
    }

    #[test]
    fn edits_follow_nacos_instance_operator() {
        // updateInstance: the form's fields, whatever was there.
        let set = InstanceOverride {
            weight: 3.0,
            enabled: false,
            metadata: md(&[("a", "1")]),
        };
        let replaced = OverrideEdit::Replace(&set).applied_to(None).unwrap();
        assert_eq!(replaced, set);
        // patchInstance: only what is given; metadata replaced whole.
        let b = md(&[("b", "2")]);
        let patched = OverrideEdit::Patch {
            weight: None,
            enabled: Some(true),
            metadata: Some(&b),
        }
        .applied_to(Some(&set))
        .unwrap();
        assert_eq!((patched.weight, patched.enabled), (3.0, true));
        assert_eq!(patched.metadata, b);
        // batchUpdateMetadata without a layer: Nacos's defaults plus the keys.
        let put = OverrideEdit::Put(&b).applied_to(None).unwrap();
        assert_eq!((put.weight, put.enabled, put.metadata), (1.0, true, b));
        // batchDeleteMetadata: keys leave the layer only.
        let removed = OverrideEdit::Remove(&md(&[("a", "")]))
            .applied_to(Some(&set))
            .unwrap();
        assert!(removed.metadata.is_empty());
        assert_eq!(removed.weight, 3.0);
        // A weight out of range is refused.
        assert!(OverrideEdit::Patch {
            weight: Some(-1.0),
            enabled: None,
            metadata: None
        }
        .applied_to(None)
        .is_err());
    }

    #[test]
    fn an_entry_expires_only_after_its_address_was_empty_for_the_ttl() {
        let addr = InstanceAddr {
            cluster: "DEFAULT",
            ip: "10.0.0.1".parse().unwrap(),
            port: 80,
        };
        let e = OverrideEntry::new(addr, SharedStr::new("DEFAULT"), InstanceOverride::default());
        assert!(!e.expired(Millis(1_000_000), 60_000));
        e.mark_absent(Some(Millis(1_000)));
        assert!(!e.expired(Millis(60_999), 60_000));
        assert!(e.expired(Millis(61_000), 60_000));
        e.mark_absent(None);
        assert!(!e.expired(Millis(1_000_000), 60_000));
        let set = md(&[("k", "layer")]);
        let layered = OverrideEntry::new(
            addr,
            SharedStr::new("DEFAULT"),
            InstanceOverride {
                metadata: set,
                ..InstanceOverride::default()
            },
        );
        let seen = layered
            .effective_metadata(&md(&[("k", "client"), ("j", "x")]))
            .unwrap();
        assert_eq!((seen.get("k"), seen.get("j")), (Some("layer"), Some("x")));
    }
}
