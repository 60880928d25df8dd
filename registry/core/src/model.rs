//! The Nacos naming data model: service keys, instances, their identity and
//! the heartbeat timeouts that `preserved.*` metadata can override.
//!
//! namespace (default `public`) → service `group@@name` (default group
//! `DEFAULT_GROUP`) → cluster (default `DEFAULT`) → instance `ip:port`, with
//! ephemeral and persistent instances kept apart as Nacos keeps them in two
//! lists: an ephemeral and a persistent instance may share an address.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use crate::error::RegistryError;
use crate::lease::LeaseSlot;
use crate::metadata::Metadata;
use crate::shared_str::SharedStr;

/// The namespace used when a request names none.
pub const DEFAULT_NAMESPACE: &str = "public";
/// The group used when a service name carries none.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// The cluster used when a request names none.
pub const DEFAULT_CLUSTER: &str = "DEFAULT";
/// Separates group and service in a grouped service name.
pub const GROUP_SEPARATOR: &str = "@@";
/// Largest weight Nacos accepts.
pub const MAX_WEIGHT: f64 = 10000.0;

/// Metadata keys that override an instance's heartbeat timing, in ms.
pub mod preserved {
    /// Interval the client is told to beat at.
    pub const BEAT_INTERVAL: &str = "preserved.heart.beat.interval";
    /// Silence after which the instance is marked unhealthy.
    pub const BEAT_TIMEOUT: &str = "preserved.heart.beat.timeout";
    /// Silence after which the instance is deleted.
    pub const DELETE_TIMEOUT: &str = "preserved.ip.delete.timeout";
}

/// A point in time in milliseconds from an epoch chosen by the caller (the
/// server uses a monotonic clock). The core never reads a clock itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Millis(pub u64);

impl Millis {
    /// `self + ms`, saturating.
    pub fn plus(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }
}

/// A service's identity: namespace and grouped name (`group@@name`).
///
/// Cloning is two reference-count increments.
#[derive(Clone, PartialEq, Eq)]
pub struct ServiceKey {
    namespace: Arc<str>,
    name: Arc<str>,
}

impl ServiceKey {
    /// A key from a namespace and a grouped service name.
    pub fn new(namespace: &str, grouped_name: &str) -> Self {
        ServiceKey {
            namespace: Arc::from(namespace),
            name: Arc::from(grouped_name),
        }
    }

    pub(crate) fn from_shared(namespace: Arc<str>, name: Arc<str>) -> Self {
        ServiceKey { namespace, name }
    }

    /// The namespace id.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The grouped name, `group@@name`.
    pub fn grouped_name(&self) -> &str {
        &self.name
    }

    /// The group part of the name (`DEFAULT_GROUP` when ungrouped).
    pub fn group(&self) -> &str {
        split_group(&self.name).0
    }

    /// The name without its group.
    pub fn service_name(&self) -> &str {
        split_group(&self.name).1
    }

    /// A borrowed view of this key.
    pub fn as_ref(&self) -> ServiceRef<'_> {
        ServiceRef {
            namespace: &self.namespace,
            name: &self.name,
        }
    }
}

/// Splits `group@@name` into its parts; a name without `@@` is in the
/// default group.
pub fn split_group(grouped: &str) -> (&str, &str) {
    match grouped.find(GROUP_SEPARATOR) {
        Some(i) => (&grouped[..i], &grouped[i + GROUP_SEPARATOR.len()..]),
        None => (DEFAULT_GROUP, grouped),
    }
}

impl fmt::Debug for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}##{}", self.namespace, self.name)
    }
}

impl Hash for ServiceKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_ref().hash(state)
    }
}

/// A borrowed service identity, for lookups that must not allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceRef<'a> {
    /// Namespace id.
    pub namespace: &'a str,
    /// Grouped service name.
    pub name: &'a str,
}

impl<'a> ServiceRef<'a> {
    /// A borrowed key.
    pub fn new(namespace: &'a str, grouped_name: &'a str) -> Self {
        ServiceRef {
            namespace,
            name: grouped_name,
        }
    }
}

impl Hash for ServiceRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write(self.namespace.as_bytes());
        state.write_u8(0xff);
        state.write(self.name.as_bytes());
    }
}

impl papaya::Equivalent<ServiceKey> for ServiceRef<'_> {
    fn equivalent(&self, key: &ServiceKey) -> bool {
        *self.namespace == *key.namespace && *self.name == *key.name
    }
}

/// Where an instance lives inside its service: cluster, IP and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceAddr<'a> {
    /// Cluster name.
    pub cluster: &'a str,
    /// Instance IP.
    pub ip: IpAddr,
    /// Instance port.
    pub port: u16,
}

/// Heartbeat timing of one ephemeral instance, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimeouts {
    /// Interval the client should beat at (`clientBeatInterval`).
    pub beat_interval_ms: u32,
    /// Silence after which the instance turns unhealthy.
    pub beat_timeout_ms: u32,
    /// Silence after which the instance is deleted.
    pub delete_timeout_ms: u32,
}

impl LeaseTimeouts {
    /// Nacos's defaults: beat every 5 s, unhealthy after 15 s, deleted after 30 s.
    pub const NACOS: LeaseTimeouts = LeaseTimeouts {
        beat_interval_ms: 5_000,
        beat_timeout_ms: 15_000,
        delete_timeout_ms: 30_000,
    };

    /// `defaults` with any `preserved.*` overrides found in `metadata`.
    ///
    /// # Errors
    /// [`RegistryError::InvalidTimeout`] when an override is not a positive
    /// integer that fits in 32 bits.
    pub fn from_metadata(
        metadata: &Metadata,
        defaults: LeaseTimeouts,
    ) -> Result<Self, RegistryError> {
        let read = |key: &'static str, default: u32| -> Result<u32, RegistryError> {
            match metadata.get(key) {
                None => Ok(default),
                Some(v) => match v.trim().parse::<u32>() {
                    Ok(n) if n > 0 => Ok(n),
                    _ => Err(RegistryError::InvalidTimeout { key }),
                },
            }
        };
        Ok(LeaseTimeouts {
            beat_interval_ms: read(preserved::BEAT_INTERVAL, defaults.beat_interval_ms)?,
            beat_timeout_ms: read(preserved::BEAT_TIMEOUT, defaults.beat_timeout_ms)?,
            delete_timeout_ms: read(preserved::DELETE_TIMEOUT, defaults.delete_timeout_ms)?,
        })
    }

    /// Silence after which the sweeper must first look at the instance.
    pub(crate) fn first_check_ms(&self) -> u64 {
        u64::from(self.beat_timeout_ms.min(self.delete_timeout_ms))
    }
}

/// One registered instance as readers see it. Immutable once published; a
/// beat renews its lease slot, never the instance itself.
///
/// 64 bytes (a test holds it there): a list of one instance is jemalloc's
/// 64-byte class and of two the 128-byte one, where two 16-byte string
/// pointers made them 80 and 160.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    /// IP address.
    pub ip: IpAddr,
    /// Port.
    pub port: u16,
    /// Healthy as last decided by beats, the sweeper or a health check.
    pub healthy: bool,
    /// Disabled instances are hidden from queries.
    pub enabled: bool,
    /// Ephemeral instances live by heartbeat; persistent ones are checked by
    /// the server and never expired.
    pub ephemeral: bool,
    /// Load-balancing weight in `[0, 10000]`.
    pub weight: f64,
    /// Cluster name (interned, one pointer wide: see [`SharedStr`]).
    pub cluster: SharedStr,
    /// Instance metadata (interned).
    pub metadata: Metadata,
    /// Heartbeat timing, from defaults and `preserved.*` metadata.
    pub timeouts: LeaseTimeouts,
    pub(crate) lease: LeaseSlot,
}

impl Instance {
    /// Nacos's instance id, `ip#port#cluster#group@@name`.
    pub fn instance_id(&self, service: &ServiceKey) -> String {
        format!(
            "{}#{}#{}#{}",
            self.ip,
            self.port,
            self.cluster,
            service.grouped_name()
        )
    }

    /// The instance `spec` describes, with its cluster name and metadata
    /// already interned by the shard's writer and its lease slot chosen.
    /// The one place a spec becomes an instance (register, held register,
    /// replica apply).
    pub(crate) fn from_spec(
        spec: &InstanceSpec<'_>,
        cluster: SharedStr,
        metadata: Metadata,
        timeouts: LeaseTimeouts,
        lease: LeaseSlot,
    ) -> Instance {
        Instance {
            ip: spec.addr.ip,
            port: spec.addr.port,
            healthy: spec.healthy,
            enabled: spec.enabled,
            ephemeral: spec.ephemeral,
            weight: spec.weight,
            cluster,
            metadata,
            timeouts,
            lease,
        }
    }

    /// Sort key: cluster, IP, port, then persistent before ephemeral.
    pub(crate) fn sort_key(&self) -> (&str, IpAddr, u16, bool) {
        (&self.cluster, self.ip, self.port, self.ephemeral)
    }

    /// True when `other` differs in anything a reader can see.
    pub(crate) fn same_visible_state(&self, other: &Instance) -> bool {
        self.healthy == other.healthy
            && self.enabled == other.enabled
            && self.weight.to_bits() == other.weight.to_bits()
            && self.metadata == other.metadata
            && self.timeouts == other.timeouts
    }
}

/// What a caller registers: the fields of an instance.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceSpec<'a> {
    /// Cluster, IP and port.
    pub addr: InstanceAddr<'a>,
    /// Load-balancing weight in `[0, 10000]`.
    pub weight: f64,
    /// Initial health.
    pub healthy: bool,
    /// Visible to queries.
    pub enabled: bool,
    /// Lives by heartbeat when true.
    pub ephemeral: bool,
    /// Metadata, including any `preserved.*` overrides.
    pub metadata: Metadata,
}

impl<'a> InstanceSpec<'a> {
    /// An enabled, healthy, ephemeral instance of weight 1 with no metadata.
    pub fn new(cluster: &'a str, ip: IpAddr, port: u16) -> Self {
        InstanceSpec {
            addr: InstanceAddr { cluster, ip, port },
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: Metadata::empty(),
        }
    }
}

/// Fields a `PATCH` may change; `None` leaves the field as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstancePatch {
    /// New weight.
    pub weight: Option<f64>,
    /// New enabled flag.
    pub enabled: Option<bool>,
    /// New health (meaningful for persistent instances).
    pub healthy: Option<bool>,
    /// Replacement metadata.
    pub metadata: Option<Metadata>,
}

/// Service-level settings for create and update.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceSpec {
    /// Healthy share at or below which queries return every instance.
    pub protect_threshold: f32,
    /// Service metadata.
    pub metadata: Metadata,
    /// The raw selector JSON, kept and echoed; `None` is `{"type":"none"}`.
    pub selector: Option<Arc<str>>,
}

pub(crate) fn check_weight(w: f64) -> Result<(), RegistryError> {
    if w.is_finite() && (0.0..=MAX_WEIGHT).contains(&w) {
        Ok(())
    } else {
        Err(RegistryError::InvalidWeight)
    }
}

pub(crate) fn check_threshold(t: f32) -> Result<(), RegistryError> {
    if t.is_finite() && (0.0..=1.0).contains(&t) {
        Ok(())
    } else {
        Err(RegistryError::InvalidProtectThreshold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn key_and_ref_hash_alike() {
        let s = foldhash::fast::FixedState::with_seed(7);
        let k = ServiceKey::new("public", "DEFAULT_GROUP@@a");
        assert_eq!(
            s.hash_one(&k),
            s.hash_one(ServiceRef::new("public", "DEFAULT_GROUP@@a"))
        );
    }

    #[test]
    fn group_split() {
        let k = ServiceKey::new("public", "G1@@svc");
        assert_eq!((k.group(), k.service_name()), ("G1", "svc"));
        assert_eq!(split_group("plain"), (DEFAULT_GROUP, "plain"));
    }

    #[test]
    fn an_instance_is_64_bytes() {
        // A million instances in lists of one or two: at 64 bytes such a
        // list is exactly a size class (64, 128); one byte more is 80, 160.
        assert!(std::mem::size_of::<Instance>() <= 64);
    }

    #[test]
    fn instance_id_matches_nacos() {
        let key = ServiceKey::new("public", "DEFAULT_GROUP@@svc");
        let i = Instance {
            ip: "10.10.10.10".parse().unwrap(),
            port: 8888,
            healthy: true,
            enabled: true,
            ephemeral: true,
            weight: 1.0,
            cluster: SharedStr::new("DEFAULT"),
            metadata: Metadata::empty(),
            timeouts: LeaseTimeouts::NACOS,
            lease: LeaseSlot::NONE,
        };
        assert_eq!(
            i.instance_id(&key),
            "10.10.10.10#8888#DEFAULT#DEFAULT_GROUP@@svc"
        );
    }

    #[test]
    fn preserved_overrides_and_errors() {
        let m = Metadata::from_pairs([
            (preserved::BEAT_INTERVAL, "1000"),
            (preserved::BEAT_TIMEOUT, "3000"),
        ])
        .unwrap();
        let t = LeaseTimeouts::from_metadata(&m, LeaseTimeouts::NACOS).unwrap();
        assert_eq!(
            t,
            LeaseTimeouts {
                beat_interval_ms: 1000,
                beat_timeout_ms: 3000,
                delete_timeout_ms: 30_000
            }
        );
        let bad = Metadata::from_pairs([(preserved::DELETE_TIMEOUT, "soon")]).unwrap();
        assert_eq!(
            LeaseTimeouts::from_metadata(&bad, LeaseTimeouts::NACOS),
            Err(RegistryError::InvalidTimeout {
                key: preserved::DELETE_TIMEOUT
            })
        );
    }

    #[test]
    fn weight_bounds() {
        assert!(check_weight(0.0).is_ok());
        assert!(check_weight(10000.0).is_ok());
        assert!(check_weight(10000.1).is_err());
        assert!(check_weight(-0.1).is_err());
        assert!(check_weight(f64::NAN).is_err());
    }
}
