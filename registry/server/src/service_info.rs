//! The 2.x `ServiceInfo`, as a query answers it and a push carries it: its
//! `cacheMillis`, its `lastRefTime`, and the owned form a push serialises (a
//! query's answer is written in one pass by `registry_convert::grpc`, which
//! the test below holds to the same JSON). Below both the gRPC door and the
//! notifier, so neither reaches into the other.
//!
//! The name is ungrouped: the Python client keys its cache on
//! `groupName@@name`, so a grouped name there would never match.
//! `lastRefTime` is strictly increasing across every `ServiceInfo` this process writes:
//! the Python client drops an update whose `lastRefTime` is not newer than what it
//! holds, so two encodings in the same millisecond must still differ.

use std::sync::atomic::{AtomicU64, Ordering};

use registry_core::{ServiceKey, ServiceSnapshot, View};
use registry_proto::grpc::message::{Host, ServiceInfo};
use registry_proto::naming::instance_id;
use registry_proto::naming::ServiceName;

use crate::clock::Clock;

/// `cacheMillis` told to 2.x clients (Nacos's default push cache time).
pub const CACHE_MILLIS: i64 = 10_000;

static LAST_REF: AtomicU64 = AtomicU64::new(0);

/// Wall-clock ms, bumped past the last value handed out.
pub fn next_ref_time() -> i64 {
    let wall = Clock::wall_ms();
    let mut prev = LAST_REF.load(Ordering::Relaxed);
    loop {
        let next = wall.max(prev + 1);
        match LAST_REF.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next as i64,
            Err(p) => prev = p,
        }
    }
}

/// The `ServiceInfo` of `snapshot` (or of a missing service) for a view.
pub fn service_info(
    service: &ServiceKey,
    snapshot: Option<&ServiceSnapshot>,
    clusters: &str,
    healthy_only: bool,
) -> ServiceInfo {
    let name = ServiceName::new(service.group(), service.service_name());
    let cluster_list: Vec<&str> = clusters
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let (hosts, reach, checksum) = match snapshot {
        Some(s) => {
            let sel = s.select(&View {
                clusters: &cluster_list,
                healthy_only,
            });
            let hosts = sel
                .hosts
                .iter()
                .map(|(i, healthy)| {
                    let ip = i.ip.to_string();
                    Host {
                        instance_id: instance_id(&ip, i.port, &i.cluster, &name),
                        ip,
                        port: i64::from(i.port),
                        weight: i.weight,
                        healthy: *healthy,
                        enabled: i.enabled,
                        ephemeral: i.ephemeral,
                        cluster_name: i.cluster.to_string(),
                        service_name: service.grouped_name().to_owned(),
                        metadata: i
                            .metadata
                            .iter()
                            .map(|(k, v)| (k.to_owned(), v.to_owned()))
                            .collect(),
                    }
                })
                .collect();
            (
                hosts,
                sel.reach_protection_threshold,
                format!("{:016x}", s.checksum()),
            )
        }
        None => (Vec::new(), false, String::new()),
    };
    ServiceInfo {
        name: service.service_name().to_owned(),
        group_name: service.group().to_owned(),
        clusters: clusters.to_owned(),
        cache_millis: CACHE_MILLIS,
        hosts,
        last_ref_time: next_ref_time(),
        checksum,
        all_ips: false,
        reach_protection_threshold: reach,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_core::{InstanceSpec, Metadata};

    /// The answers' one-pass encoder (`registry_convert::grpc`) writes what the
    /// owned `ServiceInfo` (still used by pushes) serialises to.
    #[test]
    fn the_one_pass_encoding_matches_the_owned_service_info() {
        use registry_core::{Millis, ServiceRef, Store, StoreConfig};
        let store = Store::new(StoreConfig::default());
        let svc = ServiceRef::new("public", "DEFAULT_GROUP@@a");
        for (cluster, port, healthy) in [("DEFAULT", 80, true), ("east", 81, false)] {
            let spec = InstanceSpec {
                healthy,
                weight: 2.5,
                metadata: Metadata::from_pairs([("k", "v\"q"), ("zone", "z1")]).unwrap(),
                ..InstanceSpec::new(cluster, "10.0.0.1".parse().unwrap(), port)
            };
            store.register(svc, &spec, Millis(0)).unwrap();
        }
        let key = ServiceKey::new("public", "DEFAULT_GROUP@@a");
        let snapshot = store.snapshot(key.as_ref());
        for (clusters, healthy_only) in [("", false), ("east, DEFAULT", false), ("", true)] {
            for snap in [snapshot.as_deref(), None] {
                let owned = service_info(&key, snap, clusters, healthy_only);
                let list: Vec<&str> = clusters
                    .split(',')
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect();
                let view = registry_convert::grpc::InfoView {
                    service: &key,
                    clusters,
                    cluster_list: &list,
                    healthy_only,
                    cache_millis: CACHE_MILLIS,
                    last_ref_time: owned.last_ref_time,
                };
                let mut out = Vec::new();
                registry_convert::grpc::encode_service_info(snap, &view, &mut out);
                let ours: serde_json::Value = serde_json::from_slice(&out).unwrap();
                assert_eq!(ours, serde_json::to_value(&owned).unwrap(), "{clusters:?}");
            }
        }
    }

    #[test]
    fn ref_times_strictly_increase_within_one_millisecond() {
        let a = next_ref_time();
        let b = next_ref_time();
        let c = next_ref_time();
        assert!(a < b && b < c);
    }
}
