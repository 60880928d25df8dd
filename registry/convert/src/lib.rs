//! The one place wire types (`registry-proto`) meet core types
//! (`registry-core`): parameters become core commands, snapshots become
//! response views.
//!
//! A crate of its own, not a module of the server, so that the programs
//! that measure these paths (`benches`' `hotpaths`, run by the
//! instruction-count gates) build without the server's runtime, gRPC and
//! storage dependencies. The server re-exports it as `registry_server::convert`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod grpc;

use std::net::IpAddr;

use registry_core::{InstanceAddr, InstanceSpec, Metadata, ServiceSnapshot, View};
use registry_proto::naming::instance::InstanceRequest;
use registry_proto::naming::list::{HeartbeatTimes, HostView, ServiceInfoView};
use registry_proto::naming::metadata::Metadata as WireMetadata;
use registry_proto::naming::ServiceName;
use registry_proto::ProtoError;
use serde::ser::SerializeMap;

/// Serialises core metadata as the JSON object clients expect.
#[derive(Clone, Copy)]
pub struct MetadataJson<'a>(pub &'a Metadata);

impl serde::Serialize for MetadataJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for (k, v) in self.0.iter() {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Core metadata from wire metadata.
///
/// # Errors
/// [`ProtoError::MetadataFormat`] for keys the core refuses (empty, NUL).
pub fn metadata(wire: &WireMetadata) -> Result<Metadata, ProtoError> {
    Metadata::from_pairs(wire.iter()).map_err(|_| ProtoError::MetadataFormat(wire.to_json().into()))
}

/// Parses an IP the proto layer already validated the Nacos way; anything
/// that is not a literal address (host names) is refused here.
///
/// # Errors
/// [`ProtoError::InvalidIp`].
pub fn ip(text: &str) -> Result<IpAddr, ProtoError> {
    text.trim().parse().map_err(|_| ProtoError::InvalidIp)
}

/// The core's view of a register or update request.
///
/// # Errors
/// An invalid IP or metadata.
pub fn instance_spec<'a>(
    req: &'a InstanceRequest<'_>,
    ephemeral_default: bool,
) -> Result<InstanceSpec<'a>, ProtoError> {
    Ok(InstanceSpec {
        addr: InstanceAddr {
            cluster: req.key.cluster,
            ip: ip(req.key.ip)?,
            port: req.key.port,
        },
        weight: req.weight,
        healthy: req.healthy,
        enabled: req.enabled,
        ephemeral: req.key.ephemeral.unwrap_or(ephemeral_default),
        metadata: metadata(&req.metadata)?,
    })
}

/// What a list response needs besides the snapshot.
pub struct ListView<'a> {
    /// Service name as the client named it (grouped in the response).
    pub service: ServiceName<'a>,
    /// The `clusters` parameter exactly as sent.
    pub clusters: &'a str,
    /// Parsed cluster filter.
    pub cluster_list: &'a [&'a str],
    /// `healthyOnly`.
    pub healthy_only: bool,
    /// `cacheMillis` to tell the client.
    pub cache_millis: u64,
    /// `lastRefTime`, wall-clock ms.
    pub last_ref_time: u64,
}

/// Encodes the instance-list JSON of `snapshot` (or of a missing service)
/// for `view` into `out`.
pub fn encode_list(snapshot: Option<&ServiceSnapshot>, view: &ListView<'_>, out: &mut Vec<u8>) {
    let empty = Metadata::empty();
    let (hosts_src, reach, checksum, meta) = match snapshot {
        Some(s) => {
            let sel = s.select(&View {
                clusters: view.cluster_list,
                healthy_only: view.healthy_only,
            });
            (
                sel.hosts,
                sel.reach_protection_threshold,
                format!("{:016x}", s.checksum()),
                s.metadata(),
            )
        }
        None => (Vec::new(), false, String::new(), &empty),
    };
    let ips: Vec<String> = hosts_src.iter().map(|(i, _)| i.ip.to_string()).collect();
    let hosts: Vec<HostView<'_, MetadataJson<'_>>> = hosts_src
        .iter()
        .zip(&ips)
        .map(|((i, reported_healthy), ip)| HostView {
            ip,
            port: i.port,
            healthy: *reported_healthy,
            enabled: i.enabled,
            weight: i.weight,
            ephemeral: i.ephemeral,
            cluster_name: &i.cluster,
            service: view.service,
            instance_id: None,
            metadata: MetadataJson(&i.metadata),
            heartbeat: HeartbeatTimes {
                interval_ms: u64::from(i.timeouts.beat_interval_ms),
                timeout_ms: u64::from(i.timeouts.beat_timeout_ms),
                delete_timeout_ms: u64::from(i.timeouts.delete_timeout_ms),
            },
        })
        .collect();
    let info = ServiceInfoView {
        service: view.service,
        clusters: view.clusters,
        cache_millis: view.cache_millis,
        hosts: &hosts,
        last_ref_time: view.last_ref_time,
        checksum: &checksum,
        reach_protection_threshold: reach,
        metadata: MetadataJson(meta),
    };
    // Strings, numbers and maps of strings: serialising cannot fail.
    let _ = info.encode(out);
}
