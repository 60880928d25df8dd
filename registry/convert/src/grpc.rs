//! Snapshots as the 2.x `ServiceInfo` JSON, written in one pass.
//!
//! The shape is `registry_proto::grpc::message::ServiceInfo` (field for field,
//! in its order), but serialised from borrowed views of the snapshot: the owned
//! type costs a `String` per host field and a copy of every metadata entry
//! before serde writes them out again, which made the encoding most of a 2.x
//! query's cost. Here each value is written once, straight from the snapshot.
//! The owned type stays the reading side's (loadgen, tests).
//!
//! The name is ungrouped (the Python client keys its cache on
//! `groupName@@name`, so a grouped name there would never match); hosts carry
//! the grouped `serviceName` and Nacos's `ip#port#cluster#group@@name` id.

use std::fmt;

use registry_core::{Instance, ServiceKey, ServiceSnapshot, View};
use serde::ser::{SerializeStruct, Serializer};
use serde::Serialize;

use crate::MetadataJson;

/// What a 2.x answer shows of a service.
#[derive(Clone, Copy, Debug)]
pub struct InfoView<'a> {
    /// The service.
    pub service: &'a ServiceKey,
    /// `clusters` as the client sent it (echoed: clients key their cache on it).
    pub clusters: &'a str,
    /// Parsed cluster filter.
    pub cluster_list: &'a [&'a str],
    /// Only healthy instances.
    pub healthy_only: bool,
    /// `cacheMillis` to tell the client.
    pub cache_millis: i64,
    /// `lastRefTime` (see the server's `next_ref_time`).
    pub last_ref_time: i64,
}

/// Appends the `ServiceInfo` JSON object of `snapshot` (or of a missing service)
/// for `view` to `out`.
pub fn encode_service_info(
    snapshot: Option<&ServiceSnapshot>,
    view: &InfoView<'_>,
    out: &mut Vec<u8>,
) {
    let (hosts, reach, checksum) = match snapshot {
        Some(s) => {
            let sel = s.select(&View {
                clusters: view.cluster_list,
                healthy_only: view.healthy_only,
            });
            (
                sel.hosts,
                sel.reach_protection_threshold,
                Some(s.checksum()),
            )
        }
        None => (Vec::new(), false, None),
    };
    let info = InfoJson {
        view,
        hosts: &hosts,
        reach,
        checksum,
    };
    // Strings, numbers and maps of strings: serialising cannot fail.
    let _ = serde_json::to_writer(out, &info);
}

struct InfoJson<'a> {
    view: &'a InfoView<'a>,
    hosts: &'a [(&'a Instance, bool)],
    reach: bool,
    checksum: Option<u64>,
}

impl Serialize for InfoJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.view;
        let mut m = s.serialize_struct("ServiceInfo", 9)?;
        m.serialize_field("name", v.service.service_name())?;
        m.serialize_field("groupName", v.service.group())?;
        m.serialize_field("clusters", v.clusters)?;
        m.serialize_field("cacheMillis", &v.cache_millis)?;
        m.serialize_field(
            "hosts",
            &Hosts {
                service: v.service,
                hosts: self.hosts,
            },
        )?;
        m.serialize_field("lastRefTime", &v.last_ref_time)?;
        m.serialize_field("checksum", &Checksum(self.checksum))?;
        m.serialize_field("allIPs", &false)?;
        m.serialize_field("reachProtectionThreshold", &self.reach)?;
        m.end()
    }
}

struct Hosts<'a> {
    service: &'a ServiceKey,
    hosts: &'a [(&'a Instance, bool)],
}

impl Serialize for Hosts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.hosts.iter().map(|(i, healthy)| HostJson {
            service: self.service,
            instance: i,
            healthy: *healthy,
        }))
    }
}

struct HostJson<'a> {
    service: &'a ServiceKey,
    instance: &'a Instance,
    healthy: bool,
}

impl Serialize for HostJson<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let i = self.instance;
        let mut m = s.serialize_struct("Instance", 10)?;
        m.serialize_field("instanceId", &InstanceId(i, self.service))?;
        m.serialize_field("ip", &Shown(&i.ip))?;
        m.serialize_field("port", &i.port)?;
        m.serialize_field("weight", &i.weight)?;
        m.serialize_field("healthy", &self.healthy)?;
        m.serialize_field("enabled", &i.enabled)?;
        m.serialize_field("ephemeral", &i.ephemeral)?;
        m.serialize_field("clusterName", &*i.cluster)?;
        m.serialize_field("serviceName", self.service.grouped_name())?;
        m.serialize_field("metadata", &MetadataJson(&i.metadata))?;
        m.end()
    }
}

/// A `Display` value as a JSON string, without an intermediate `String`.
struct Shown<'a, T>(&'a T);

impl<T: fmt::Display> Serialize for Shown<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self.0)
    }
}

/// Nacos's instance id, `ip#port#cluster#group@@name`.
struct InstanceId<'a>(&'a Instance, &'a ServiceKey);

impl Serialize for InstanceId<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for InstanceId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (i, service) = (self.0, self.1);
        write!(
            f,
            "{}#{}#{}#{}",
            i.ip,
            i.port,
            i.cluster,
            service.grouped_name()
        )
    }
}

/// The snapshot's checksum as 16 hex digits, `""` for a missing service.
struct Checksum(Option<u64>);

impl Serialize for Checksum {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(c) => s.collect_str(&format_args!("{c:016x}")),
            None => s.serialize_str(""),
        }
    }
}
