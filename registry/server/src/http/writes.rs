//! The writes several doors share, and how a write is applied and
//! answered in a door's format: plain text (v1) or the `Result` envelope
//! (v2, v3). Each door parses its own form; the metadata batch and health
//! forms are the same on every door, so their handlers live here once.

use registry_core::{InstanceAddr, OverrideEdit, ServiceRef};
use registry_proto::naming::batch::{encode_updated, updated_name, MetadataBatch};
use registry_proto::naming::health::HealthUpdate;
use registry_proto::openapi::envelope::{self, ApiError, ErrorCode};

use super::error::{self, Failure};
use super::{later, Done, Exchange, Reply, Scratch};
use crate::write::{Command, Outcome, WriteError};

fn api(e: impl Into<ApiError>) -> Failure {
    Failure::from(e.into())
}

/// Which format a shared write answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Door {
    /// v1: plain text.
    Text,
    /// v2/v3: the envelope.
    Envelope,
}

/// A refused write in the envelope, with Nacos's code for the refusal
/// (`ServiceOperatorV2Impl`, `InstanceOperatorClientImpl`,
/// `NamingRequestUtil.checkWeight`).
pub(crate) fn refused(e: WriteError, grouped: &str, namespace: &str) -> Failure {
    use registry_core::RegistryError as E;
    let (status, code, detail) = match e {
        WriteError::Store(E::ServiceNotFound) => (
            400,
            ErrorCode::ServiceNotExist,
            format!("service not found, namespace: {namespace}, service: {grouped}"),
        ),
        WriteError::Store(E::InstanceNotFound | E::ClusterNotFound) => (
            400,
            ErrorCode::InstanceNotFound,
            "instance not found".to_owned(),
        ),
        WriteError::Store(E::ServiceExists) => (
            400,
            ErrorCode::ServiceAlreadyExist,
            format!("specified service {grouped} already exists!"),
        ),
        WriteError::Store(E::InvalidWeight) => (
            400,
            ErrorCode::WeightError,
            "instance format invalid: The weights range from 0.0 to 10000.0".to_owned(),
        ),
        WriteError::Store(e @ (E::InvalidMetadata | E::InvalidTimeout { .. })) => {
            (400, ErrorCode::InstanceMetadataError, e.to_string())
        }
        WriteError::Store(e @ (E::TooManyInstances { .. } | E::TooManyServices { .. })) => {
            (400, ErrorCode::IllegalState, e.to_string())
        }
        WriteError::Store(e) => (400, ErrorCode::ParameterValidate, e.to_string()),
        other => {
            let plain = error::write(other, error::Op::Patch);
            (
                plain.status,
                ErrorCode::ServerError,
                plain.text.into_owned(),
            )
        }
    };
    api(ApiError::new(status, code, detail))
}

/// Applies `command` and answers `ok` in `door`'s format, now or once durable.
pub(crate) fn apply(
    ex: &Exchange<'_>,
    command: Command<'_>,
    door: Door,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    let svc = command.service();
    let (grouped, namespace) = (svc.name.to_owned(), svc.namespace.to_owned());
    let render = move |e: WriteError| match door {
        Door::Envelope => refused(e, &grouped, &namespace),
        Door::Text => error::write(e, error::Op::Patch),
    };
    let done = match door {
        Door::Envelope => {
            let mut body = Vec::new();
            envelope::success_str(&mut body, "ok");
            Done::Json(body)
        }
        Door::Text => Done::Text("ok"),
    };
    match ex.app.writer.apply(command, ex.now) {
        Ok(Outcome::Done(_)) => match done {
            Done::Json(body) => {
                scratch.body = body;
                Ok(Reply::Json)
            }
            _ => Ok(Reply::Text("ok")),
        },
        Ok(Outcome::Later(pending)) => Ok(later(pending, done, render)),
        Err(e) => Err(render(e)),
    }
}

/// `PUT /health/instance` of every door (`HealthController`,
/// `HealthControllerV2`, `HealthControllerV3`): the persistent instance at
/// the address if there is one, else (v1 only) the ephemeral one; v2/v3
/// only where the cluster's checker is `NONE` ([`health_allowed`]).
pub(crate) fn health(
    ex: &Exchange<'_>,
    scratch: &mut Scratch,
    door: Door,
) -> Result<Reply, Failure> {
    let parsed = HealthUpdate::parse(&ex.params, &ex.app.parse_limits);
    let req = match (parsed, door) {
        (Ok(r), _) => r,
        (Err(e), Door::Envelope) => return Err(api(e)),
        (Err(e), Door::Text) => return Err(e.into()),
    };
    let grouped = req.key.service.grouped();
    let svc = ServiceRef::new(req.key.namespace_id, &grouped);
    let addr = InstanceAddr {
        cluster: req.key.cluster,
        ip: crate::convert::ip(req.key.ip)?,
        port: req.key.port,
    };
    let persistent = ex
        .app
        .store
        .read(svc, |s| s.find(addr, false).is_some())
        .unwrap_or(false);
    if door == Door::Envelope {
        health_allowed(ex, svc, &grouped, addr.cluster)?;
        if !persistent {
            // HealthOperatorV2Impl: only an address client's persistent
            // instance is updated; none is no error.
            envelope::success_str(&mut scratch.body, "ok");
            return Ok(Reply::Json);
        }
    }
    let command = Command::Health {
        service: svc,
        addr,
        ephemeral: !persistent,
        healthy: req.healthy,
    };
    apply(ex, command, door, scratch)
}

/// v2/v3 (`HealthOperatorV2Impl.updateHealthStatusForPersistentInstance`):
/// a health update is the operator's only where the cluster's checker is
/// `NONE`; anywhere else the checker decides, and Nacos refuses with 400 /
/// 30000. The checker is the `preserved.health.checker.<cluster>` service
/// metadata `PUT /v3/admin/ns/cluster` writes; a cluster without one has
/// `--health-checker`'s (TCP by default, as Nacos's `ClusterMetadata`).
fn health_allowed(
    ex: &Exchange<'_>,
    svc: ServiceRef<'_>,
    grouped: &str,
    cluster: &str,
) -> Result<(), Failure> {
    let default = ex.app.config.default_checker();
    let none = ex
        .app
        .store
        .read(svc, |s| {
            crate::health::checker_for(s.metadata(), cluster, &default)
                == crate::health::Checker::None
        })
        .unwrap_or(false);
    if none {
        return Ok(());
    }
    Err(api(ApiError::new(
        400,
        ErrorCode::ServerError,
        format!("health check is still working, service: {grouped}, cluster: {cluster}"),
    )))
}

/// The (ip, port, cluster) of the batch's instances that exist: those it
/// names, or every one of the kind.
fn batch_targets(
    ex: &Exchange<'_>,
    svc: ServiceRef<'_>,
    req: &MetadataBatch<'_>,
    ephemeral: bool,
) -> Vec<(String, u16, String)> {
    ex.app
        .store
        .read(svc, |s| {
            s.instances()
                .iter()
                .filter(|i| i.ephemeral == ephemeral)
                .filter(|i| {
                    req.instances.as_ref().is_none_or(|named| {
                        named.iter().any(|t| {
                            t.port == i.port
                                && t.cluster_name == *i.cluster
                                && t.ip.parse().ok() == Some(i.ip)
                        })
                    })
                })
                .map(|i| (i.ip.to_string(), i.port, i.cluster.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `PUT`/`DELETE /instance/metadata/batch` of every door: the named
/// instances (or all of the kind) that exist get the metadata merged in, or
/// its keys removed; the answer names them.
pub(crate) fn metadata_batch(
    ex: &Exchange<'_>,
    scratch: &mut Scratch,
    remove: bool,
    door: Door,
) -> Result<Reply, Failure> {
    let req = match (MetadataBatch::parse(&ex.params, &ex.app.parse_limits), door) {
        (Ok(r), _) => r,
        (Err(e), Door::Envelope) => return Err(api(e)),
        (Err(e), Door::Text) => return Err(e.into()),
    };
    let grouped = req.service.grouped();
    let svc = ServiceRef::new(req.namespace_id, &grouped);
    let ephemeral = !req.persistent;
    let targets = batch_targets(ex, svc, &req, ephemeral);
    let ips: Vec<std::net::IpAddr> = targets
        .iter()
        .filter_map(|(ip, _, _)| ip.parse().ok())
        .collect();
    let addrs: Vec<InstanceAddr<'_>> = targets
        .iter()
        .zip(&ips)
        .map(|((_, port, cluster), ip)| InstanceAddr {
            cluster,
            ip: *ip,
            port: *port,
        })
        .collect();
    let metadata = crate::convert::metadata(&req.metadata)?;
    let names: Vec<String> = targets
        .iter()
        .map(|(ip, port, cluster)| updated_name(ip, *port, cluster, ephemeral))
        .collect();
    let mut body = Vec::new();
    match door {
        Door::Envelope => envelope::success(&mut body, |o| encode_updated(o, &names)),
        Door::Text => encode_updated(&mut body, &names),
    }
    if !addrs.is_empty() {
        // The v2/v3 doors write the operator's layer (Nacos 3's
        // `batchUpdateMetadata`/`batchDeleteMetadata`); the 1.x door the
        // instances' own metadata, as Nacos 1.x does.
        let command = match (door, remove) {
            (Door::Envelope, false) => Command::Override {
                service: svc,
                addrs: &addrs,
                edit: OverrideEdit::Put(&metadata),
            },
            (Door::Envelope, true) => Command::Override {
                service: svc,
                addrs: &addrs,
                edit: OverrideEdit::Remove(&metadata),
            },
            (Door::Text, _) => Command::Metadata {
                service: svc,
                addrs: &addrs,
                ephemeral,
                metadata: &metadata,
                remove,
            },
        };
        let (g, n) = (grouped.clone(), req.namespace_id.to_owned());
        let render = move |e: WriteError| match door {
            Door::Envelope => refused(e, &g, &n),
            Door::Text => error::write(e, error::Op::Patch),
        };
        match ex.app.writer.apply(command, ex.now) {
            Ok(Outcome::Done(_)) => {}
            Ok(Outcome::Later(pending)) => return Ok(later(pending, Done::Json(body), render)),
            Err(e) => return Err(render(e)),
        }
    }
    scratch.body = body;
    Ok(Reply::Json)
}
