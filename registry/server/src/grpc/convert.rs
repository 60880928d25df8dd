//! The gRPC half of `crate::convert`: validated 2.x requests become core specs
//! (the `ServiceInfo` answers and pushes carry is [`crate::service_info`]'s).

use registry_core::{InstanceAddr, InstanceSpec, Metadata};
use registry_proto::grpc::{self, code, Refusal};

/// The core's spec of a validated instance.
///
/// # Errors
/// A refusal (400) for a host name where the core needs an IP literal, or metadata
/// the core refuses.
pub fn instance_spec(spec: &grpc::InstanceSpec) -> Result<InstanceSpec<'_>, Refusal> {
    let invalid = |message: String| Refusal::new(code::INVALID_PARAM, message);
    let ip = crate::convert::ip(&spec.ip).map_err(|e| invalid(e.to_string()))?;
    let metadata =
        Metadata::from_pairs(spec.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|_| invalid("metadata format incorrect".into()))?;
    Ok(InstanceSpec {
        addr: InstanceAddr {
            cluster: &spec.cluster,
            ip,
            port: spec.port,
        },
        weight: spec.weight,
        healthy: spec.healthy,
        enabled: spec.enabled,
        ephemeral: spec.ephemeral,
        metadata,
    })
}
