//! Format-1 log commands as typed writes.
//!
//! Before typed commands, a Raft log entry carried each persistent write
//! as the 1.x API received it (endpoint, query string, `User-Agent`) and
//! every node replayed it through the HTTP handler. Such commands are
//! still read: from a `raft.redb` written by an older build (migrated when
//! it is opened, see `crate::cluster::raft::log`) and from an older leader
//! during a rolling upgrade. This module reads their parameters with the
//! same 1.x parsers the HTTP door uses and gives the typed [`Write`] they
//! meant; a command whose parameters do not parse was refused by the
//! handler when first applied, and is refused (changes nothing) again.

use std::sync::Arc;

use registry_core::{InstanceAddr, InstancePatch, ServiceRef, ServiceSpec};
use registry_proto::naming::instance::{
    InstanceKey, InstancePatch as PatchRequest, InstanceRequest,
};
use registry_proto::naming::service::{Selector, ServiceKey, ServiceRequest};
use registry_proto::naming::ParseLimits;
use registry_proto::params::Params;
use registry_proto::raft::{self, Addr, Service, Write, WriteOp};
use registry_proto::ProtoError;

use super::{wire, Command};
use crate::convert;

/// Whether a 1.x `PUT /instance` from this `User-Agent` is strict (refuses
/// an unknown instance): Java clients ≥ 1.0.0 (and the Node client, which
/// presents itself as one); an upsert for others, as in Nacos.
pub fn strict_update(user_agent: Option<&str>) -> bool {
    user_agent.is_some_and(|ua| {
        ua.starts_with("Nacos-Java-Client:v") && !ua.starts_with("Nacos-Java-Client:v0.")
    })
}

/// A selector as the store keeps it: `None` for no selector.
pub fn selector_text(selector: &Selector) -> Option<Arc<str>> {
    match selector {
        Selector::None => None,
        other => serde_json::to_string(other).ok().map(Arc::from),
    }
}

/// The typed write a format-1 command meant.
///
/// # Errors
/// Why its parameters do not make a write (as the 1.x API says it).
pub fn typed(command: &raft::Command, limits: &ParseLimits) -> Result<Write, String> {
    match command {
        raft::Command::Typed { write, .. } => Ok(write.clone()),
        raft::Command::LegacyWrite { op, params, agent } => {
            write(*op, params, agent.as_deref(), limits)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "not a persistent write".to_owned())
        }
        raft::Command::LegacyHealth {
            namespace,
            service,
            cluster,
            ip,
            port,
            healthy,
        } => Ok(Write::Health {
            service: Service {
                ns: namespace.clone(),
                name: service.clone(),
            },
            addr: Addr {
                cluster: cluster.clone(),
                ip: ip.parse().map_err(|_| format!("invalid ip {ip}"))?,
                port: *port,
            },
            ephemeral: false,
            healthy: *healthy,
        }),
    }
}

fn logged(command: &Command<'_>) -> Option<Write> {
    match wire::to_log(command) {
        Some(raft::Command::Typed { write, .. }) => Some(write),
        _ => None,
    }
}

/// A format-1 entry (a 1.x query string) as the typed write it stands for.
/// One arm per 1.x write operation, each parsing its parameters as the 1.x
/// handler did: a table as long as the operation enum, not logic to split.
fn write(
    op: WriteOp,
    params: &str,
    agent: Option<&str>,
    limits: &ParseLimits,
) -> Result<Option<Write>, ProtoError> {
    let params = Params::parse(params, None)?;
    match op {
        WriteOp::Register | WriteOp::Update => {
            let req = InstanceRequest::parse(&params, limits)?;
            let spec = convert::instance_spec(&req, true)?;
            let name = req.key.service.grouped();
            Ok(logged(&Command::Register {
                service: ServiceRef::new(req.key.namespace_id, &name),
                instance: &spec,
                strict: op == WriteOp::Update && strict_update(agent),
            }))
        }
        WriteOp::Deregister => {
            let key = InstanceKey::parse(&params, limits)?;
            let name = key.service.grouped();
            Ok(logged(&Command::Deregister {
                service: ServiceRef::new(key.namespace_id, &name),
                addr: InstanceAddr {
                    cluster: key.cluster,
                    ip: convert::ip(key.ip)?,
                    port: key.port,
                },
                ephemeral: key.ephemeral.unwrap_or(true),
            }))
        }
        WriteOp::Patch => {
            let req = PatchRequest::parse(&params, limits)?;
            let name = req.key.service.grouped();
            let patch = InstancePatch {
                weight: req.weight,
                enabled: req.enabled,
                healthy: req.healthy,
                metadata: req.metadata.as_ref().map(convert::metadata).transpose()?,
            };
            Ok(logged(&Command::Patch {
                service: ServiceRef::new(req.key.namespace_id, &name),
                addr: InstanceAddr {
                    cluster: req.key.cluster,
                    ip: convert::ip(req.key.ip)?,
                    port: req.key.port,
                },
                // Format 1 pinned `ephemeral=false` on every patch it logged.
                ephemeral: Some(req.key.ephemeral.unwrap_or(false)),
                patch: &patch,
            }))
        }
        WriteOp::ServiceCreate => {
            let req = ServiceRequest::parse_create(&params, limits)?;
            let name = req.key.service.grouped();
            let spec = ServiceSpec {
                protect_threshold: req.protect_threshold,
                metadata: convert::metadata(&req.metadata)?,
                selector: selector_text(&req.selector),
            };
            Ok(logged(&Command::ServiceCreate {
                service: ServiceRef::new(req.key.namespace_id, &name),
                spec: &spec,
            }))
        }
        WriteOp::ServiceUpdate => {
            let req = ServiceRequest::parse_update(&params, limits)?;
            let name = req.key.service.grouped();
            let metadata = convert::metadata(&req.metadata)?;
            let selector = update_selector(&req.selector);
            Ok(logged(&Command::ServiceUpdate {
                service: ServiceRef::new(req.key.namespace_id, &name),
                protect_threshold: req.protect_threshold,
                metadata: Some(&metadata),
                selector: Some(&selector),
            }))
        }
        WriteOp::ServiceDelete => {
            let key = ServiceKey::parse(&params, limits)?;
            let name = key.service.grouped();
            Ok(logged(&Command::ServiceDelete {
                service: ServiceRef::new(key.namespace_id, &name),
            }))
        }
    }
}

/// The selector a 1.x service update sets: Nacos 1.4 always replaces it,
/// and an absent or `none` selector clears it.
pub fn update_selector(selector: &Selector) -> Arc<str> {
    selector_text(selector).unwrap_or_else(|| Arc::from(r#"{"type":"none"}"#))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy(op: WriteOp, params: &str, agent: Option<&str>) -> Result<Write, String> {
        typed(
            &raft::Command::LegacyWrite {
                op,
                params: params.into(),
                agent: agent.map(str::to_owned),
            },
            &ParseLimits::default(),
        )
    }

    #[test]
    fn format_one_writes_mean_typed_writes() {
        let w = legacy(
            WriteOp::Update,
            "serviceName=a&ip=1.1.1.1&port=8&ephemeral=false&weight=2&metadata=%7B%22k%22%3A%22v%22%7D",
            Some("Nacos-Java-Client:v2.1.0"),
        )
        .unwrap();
        let Write::Register {
            service,
            instance,
            strict,
        } = w
        else {
            panic!("a register: {w:?}");
        };
        assert_eq!(service.ns, "public");
        assert_eq!(service.name, "DEFAULT_GROUP@@a");
        assert!(strict);
        assert!(!instance.ephemeral);
        assert_eq!(instance.weight, 2.0);
        assert_eq!(instance.addr.cluster, "DEFAULT");
        assert_eq!(instance.metadata, vec![("k".to_owned(), "v".to_owned())]);
        let w = legacy(
            WriteOp::Patch,
            "serviceName=a&ip=1.1.1.1&port=8&weight=3",
            None,
        )
        .unwrap();
        assert!(matches!(
            w,
            Write::Patch {
                ephemeral: false,
                weight: Some(3.0),
                ..
            }
        ));
        let w = legacy(
            WriteOp::ServiceUpdate,
            "serviceName=a&protectThreshold=0.5",
            None,
        )
        .unwrap();
        assert!(
            matches!(w, Write::ServiceUpdate { selector: Some(s), .. } if s == r#"{"type":"none"}"#)
        );
    }

    #[test]
    fn format_one_writes_that_do_not_parse_are_refused() {
        let e = legacy(WriteOp::Register, "serviceName=a&ip=not-an-ip&port=8", None).unwrap_err();
        assert!(!e.is_empty());
        assert!(legacy(WriteOp::ServiceDelete, "", None).is_err());
    }
}
