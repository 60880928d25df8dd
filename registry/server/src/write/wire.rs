//! Commands as the Raft log carries them (`registry_proto::raft`), both
//! ways, and the core's refusals as the log's outcomes carry them.
//!
//! Only persistent writes travel: [`to_log`] has no form for a replica or
//! a connection's ephemeral set, which [`super::Writer::apply`] never
//! proposes.

use std::sync::Arc;

use registry_core::namespace::NamespaceError;
use registry_core::{
    model::preserved, InstanceAddr, InstanceOverride, InstancePatch, InstanceSpec, Metadata,
    Millis, Namespace, OverrideEdit, Quota, RegistryError, ServiceRef, ServiceSpec,
};
use registry_proto::raft::{self, Addr, LayerEdit, Outcome, Pairs, Refusal, Service, Write};

use super::{Applied, Command, WriteError, Writer};
use crate::namespaces::BookError;

fn service(s: ServiceRef<'_>) -> Service {
    Service {
        ns: s.namespace.to_owned(),
        name: s.name.to_owned(),
    }
}

fn addr(a: InstanceAddr<'_>) -> Addr {
    Addr {
        cluster: a.cluster.to_owned(),
        ip: a.ip,
        port: a.port,
    }
}

fn pairs(m: &Metadata) -> Pairs {
    m.iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The log's form of a persistent write; `None` for the memory-only
/// commands (replicas, a connection's ephemeral set), which never travel.
///
/// One arm per command, each a field-by-field copy into the log's type:
/// a table as long as the command enum, not logic to split.
pub fn to_log(command: &Command<'_>) -> Option<raft::Command> {
    let write = match *command {
        Command::Register {
            service: s,
            instance,
            strict,
        } => Write::Register {
            service: service(s),
            instance: raft::Instance {
                addr: addr(instance.addr),
                weight: instance.weight,
                healthy: instance.healthy,
                enabled: instance.enabled,
                ephemeral: instance.ephemeral,
                metadata: pairs(&instance.metadata),
            },
            strict,
        },
        Command::Deregister {
            service: s,
            addr: a,
            ephemeral,
        } => Write::Deregister {
            service: service(s),
            addr: addr(a),
            ephemeral,
        },
        Command::Patch {
            service: s,
            addr: a,
            ephemeral,
            patch,
        } => Write::Patch {
            service: service(s),
            addr: addr(a),
            // Decided once, by the proposer, so every node patches the
            // same instance whatever else it holds at the address.
            ephemeral: ephemeral.unwrap_or(false),
            weight: patch.weight,
            enabled: patch.enabled,
            healthy: patch.healthy,
            metadata: patch.metadata.as_ref().map(pairs),
        },
        Command::ServiceCreate { service: s, spec } => Write::ServiceCreate {
            service: service(s),
            threshold: spec.protect_threshold,
            metadata: pairs(&spec.metadata),
            selector: spec.selector.as_deref().map(str::to_owned),
        },
        Command::ServiceUpdate {
            service: s,
            protect_threshold,
            metadata,
            selector,
        } => Write::ServiceUpdate {
            service: service(s),
            threshold: protect_threshold,
            metadata: metadata.map(pairs),
            selector: selector.map(|s| s.to_string()),
        },
        Command::ServiceDelete { service: s } => Write::ServiceDelete {
            service: service(s),
        },
        Command::Health {
            service: s,
            addr: a,
            ephemeral,
            healthy,
        } => Write::Health {
            service: service(s),
            addr: addr(a),
            ephemeral,
            healthy,
        },
        Command::Metadata {
            service: s,
            addrs,
            ephemeral,
            metadata,
            remove,
        } => Write::Metadata {
            service: service(s),
            addrs: addrs.iter().map(|a| addr(*a)).collect(),
            ephemeral,
            metadata: pairs(metadata),
            remove,
        },
        Command::Override {
            service: s,
            addrs,
            edit,
        } => Write::Override {
            service: service(s),
            addrs: addrs.iter().map(|a| addr(*a)).collect(),
            edit: layer_edit(edit),
        },
        Command::NamespaceCreate { namespace } => Write::NamespaceCreate {
            namespace: logged_namespace(namespace),
        },
        Command::NamespaceUpdate { namespace } => Write::NamespaceUpdate {
            namespace: logged_namespace(namespace),
        },
        Command::NamespaceDelete { id } => Write::NamespaceDelete { id: id.to_owned() },
        Command::Replace { .. } | Command::Replica { .. } | Command::Drop { .. } => return None,
    };
    Some(raft::Command::typed(write))
}

fn layer_edit(edit: OverrideEdit<'_>) -> LayerEdit {
    match edit {
        OverrideEdit::Replace(l) => LayerEdit::Replace {
            weight: l.weight,
            enabled: l.enabled,
            metadata: pairs(&l.metadata),
        },
        OverrideEdit::Patch {
            weight,
            enabled,
            metadata,
        } => LayerEdit::Patch {
            weight,
            enabled,
            metadata: metadata.map(pairs),
        },
        OverrideEdit::Put(m) => LayerEdit::Put { metadata: pairs(m) },
        OverrideEdit::Remove(m) => LayerEdit::Remove { metadata: pairs(m) },
    }
}

/// A logged layer edit applied at `addrs` of `service` (the edit borrows
/// what this builds, so it is applied here).
fn apply_layer_edit(
    writer: &Writer,
    service: &Service,
    addrs: &[Addr],
    edit: &LayerEdit,
    now: Millis,
) -> Result<Applied, WriteError> {
    let addrs: Vec<InstanceAddr<'_>> = addrs.iter().map(at).collect();
    let layer;
    let m;
    let pairs_of;
    let edit = match edit {
        LayerEdit::Replace {
            weight,
            enabled,
            metadata: p,
        } => {
            layer = InstanceOverride {
                weight: *weight,
                enabled: *enabled,
                metadata: metadata(p)?,
            };
            OverrideEdit::Replace(&layer)
        }
        LayerEdit::Patch {
            weight,
            enabled,
            metadata: p,
        } => {
            m = p.as_ref().map(metadata).transpose()?;
            OverrideEdit::Patch {
                weight: *weight,
                enabled: *enabled,
                metadata: m.as_ref(),
            }
        }
        LayerEdit::Put { metadata: p } => {
            pairs_of = metadata(p)?;
            OverrideEdit::Put(&pairs_of)
        }
        LayerEdit::Remove { metadata: p } => {
            pairs_of = metadata(p)?;
            OverrideEdit::Remove(&pairs_of)
        }
    };
    writer.apply_committed(
        Command::Override {
            service: svc(service),
            addrs: &addrs,
            edit,
        },
        now,
    )
}

/// The table's namespace as the log (and a Raft snapshot) carries it.
pub fn logged_namespace(n: &Namespace) -> raft::Namespace {
    raft::Namespace {
        id: n.id.clone(),
        name: n.name.clone(),
        desc: n.desc.clone(),
        max_services: n.quota.max_services,
        max_instances: n.quota.max_instances,
    }
}

/// A logged namespace as the table holds it.
pub fn namespace(n: &raft::Namespace) -> Namespace {
    Namespace {
        id: n.id.clone(),
        name: n.name.clone(),
        desc: n.desc.clone(),
        quota: Quota {
            max_services: n.max_services,
            max_instances: n.max_instances,
        },
    }
}

fn metadata(p: &Pairs) -> Result<Metadata, WriteError> {
    Ok(Metadata::from_pairs(p.iter().map(|(k, v)| (k, v)))?)
}

fn at(a: &Addr) -> InstanceAddr<'_> {
    InstanceAddr {
        cluster: &a.cluster,
        ip: a.ip,
        port: a.port,
    }
}

fn svc(s: &Service) -> ServiceRef<'_> {
    ServiceRef::new(&s.ns, &s.name)
}

/// Applies a committed write of the log through the write path.
///
/// # Errors
/// The store's refusal, the same on every node.
///
/// One arm per logged write, each building its borrowed `Command` from the
/// log's owned form: a table as long as the write enum, not logic to split.
pub fn apply_logged(writer: &Writer, write: &Write, now: Millis) -> Result<Applied, WriteError> {
    let apply = |c: Command<'_>| writer.apply_committed(c, now);
    match write {
        Write::Register {
            service,
            instance: i,
            strict,
        } => {
            let spec = InstanceSpec {
                weight: i.weight,
                healthy: i.healthy,
                enabled: i.enabled,
                ephemeral: i.ephemeral,
                metadata: metadata(&i.metadata)?,
                ..InstanceSpec::new(&i.addr.cluster, i.addr.ip, i.addr.port)
            };
            apply(Command::Register {
                service: svc(service),
                instance: &spec,
                strict: *strict,
            })
        }
        Write::Deregister {
            service,
            addr,
            ephemeral,
        } => apply(Command::Deregister {
            service: svc(service),
            addr: at(addr),
            ephemeral: *ephemeral,
        }),
        Write::Patch {
            service,
            addr,
            ephemeral,
            weight,
            enabled,
            healthy,
            metadata: m,
        } => {
            let patch = InstancePatch {
                weight: *weight,
                enabled: *enabled,
                healthy: *healthy,
                metadata: m.as_ref().map(metadata).transpose()?,
            };
            apply(Command::Patch {
                service: svc(service),
                addr: at(addr),
                ephemeral: Some(*ephemeral),
                patch: &patch,
            })
        }
        Write::ServiceCreate {
            service,
            threshold,
            metadata: m,
            selector,
        } => {
            let spec = ServiceSpec {
                protect_threshold: *threshold,
                metadata: metadata(m)?,
                selector: selector.as_deref().map(Arc::from),
            };
            apply(Command::ServiceCreate {
                service: svc(service),
                spec: &spec,
            })
        }
        Write::ServiceUpdate {
            service,
            threshold,
            metadata: m,
            selector,
        } => {
            let m = m.as_ref().map(metadata).transpose()?;
            let selector = selector.as_deref().map(Arc::from);
            apply(Command::ServiceUpdate {
                service: svc(service),
                protect_threshold: *threshold,
                metadata: m.as_ref(),
                selector: selector.as_ref(),
            })
        }
        Write::ServiceDelete { service } => apply(Command::ServiceDelete {
            service: svc(service),
        }),
        Write::Health {
            service,
            addr,
            ephemeral,
            healthy,
        } => apply(Command::Health {
            service: svc(service),
            addr: at(addr),
            ephemeral: *ephemeral,
            healthy: *healthy,
        }),
        Write::Metadata {
            service,
            addrs,
            ephemeral,
            metadata: m,
            remove,
        } => {
            let addrs: Vec<InstanceAddr<'_>> = addrs.iter().map(at).collect();
            let m = metadata(m)?;
            apply(Command::Metadata {
                service: svc(service),
                addrs: &addrs,
                ephemeral: *ephemeral,
                metadata: &m,
                remove: *remove,
            })
        }
        Write::Override {
            service,
            addrs,
            edit,
        } => apply_layer_edit(writer, service, addrs, edit, now),
        Write::NamespaceCreate { namespace: n } => apply(Command::NamespaceCreate {
            namespace: &namespace(n),
        }),
        Write::NamespaceUpdate { namespace: n } => apply(Command::NamespaceUpdate {
            namespace: &namespace(n),
        }),
        Write::NamespaceDelete { id } => apply(Command::NamespaceDelete { id }),
    }
}

/// The log's outcome of a write applied on the leader.
pub fn outcome(result: &Result<Applied, WriteError>) -> Outcome {
    match result {
        Ok(a) => Outcome::Applied {
            revision: a.revision,
        },
        Err(WriteError::Store(e)) => Outcome::Refused(refusal(e)),
        Err(WriteError::Namespace(BookError::Refused(NamespaceError::Exists(id)))) => {
            Outcome::Refused(Refusal::NamespaceExists { id: id.clone() })
        }
        Err(WriteError::Namespace(BookError::Refused(NamespaceError::NotFound(id)))) => {
            Outcome::Refused(Refusal::NamespaceNotFound { id: id.clone() })
        }
        Err(e) => Outcome::Refused(Refusal::Invalid {
            text: e.to_string(),
        }),
    }
}

/// A leader's outcome as the waiting door's result.
///
/// # Errors
/// The refusal, as the store's error where it was one.
pub fn result(outcome: Outcome) -> Result<Applied, WriteError> {
    match outcome {
        Outcome::Applied { revision } => Ok(Applied {
            revision,
            changed: revision > 0,
            stale: false,
        }),
        Outcome::Refused(r) => Err(error(r)),
    }
}

fn refusal(e: &RegistryError) -> Refusal {
    use RegistryError as E;
    match *e {
        E::ServiceNotFound => Refusal::ServiceNotFound,
        E::InstanceNotFound => Refusal::InstanceNotFound,
        E::ClusterNotFound => Refusal::ClusterNotFound,
        E::ServiceExists => Refusal::ServiceExists,
        E::InvalidWeight => Refusal::InvalidWeight,
        E::InvalidProtectThreshold => Refusal::InvalidProtectThreshold,
        E::InvalidMetadata => Refusal::InvalidMetadata,
        E::InvalidTimeout { key } => Refusal::InvalidTimeout { key: key.into() },
        E::InvalidName => Refusal::InvalidName,
        E::TooManyInstances { limit } => Refusal::TooManyInstances {
            limit: limit as u64,
        },
        E::TooManyServices { limit } => Refusal::TooManyServices {
            limit: limit as u64,
        },
    }
}

fn error(r: Refusal) -> WriteError {
    use RegistryError as E;
    WriteError::Store(match r {
        Refusal::ServiceNotFound => E::ServiceNotFound,
        Refusal::InstanceNotFound => E::InstanceNotFound,
        Refusal::ClusterNotFound => E::ClusterNotFound,
        Refusal::ServiceExists => E::ServiceExists,
        Refusal::InvalidWeight => E::InvalidWeight,
        Refusal::InvalidProtectThreshold => E::InvalidProtectThreshold,
        Refusal::InvalidMetadata => E::InvalidMetadata,
        Refusal::InvalidTimeout { key } => E::InvalidTimeout {
            key: [
                preserved::BEAT_INTERVAL,
                preserved::BEAT_TIMEOUT,
                preserved::DELETE_TIMEOUT,
            ]
            .into_iter()
            .find(|k| *k == key)
            .unwrap_or(preserved::BEAT_TIMEOUT),
        },
        Refusal::InvalidName => E::InvalidName,
        Refusal::TooManyInstances { limit } => E::TooManyInstances {
            limit: limit as usize,
        },
        Refusal::TooManyServices { limit } => E::TooManyServices {
            limit: limit as usize,
        },
        Refusal::Invalid { text } => return WriteError::Invalid(text),
        Refusal::Stopped => return WriteError::Log("the server is shutting down".into()),
        Refusal::NamespaceExists { id } => {
            return WriteError::Namespace(NamespaceError::Exists(id).into())
        }
        Refusal::NamespaceNotFound { id } => {
            return WriteError::Namespace(NamespaceError::NotFound(id).into())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_comes_back_as_the_same_error() {
        let all = [
            RegistryError::ServiceNotFound,
            RegistryError::InstanceNotFound,
            RegistryError::ClusterNotFound,
            RegistryError::ServiceExists,
            RegistryError::InvalidWeight,
            RegistryError::InvalidProtectThreshold,
            RegistryError::InvalidMetadata,
            RegistryError::InvalidTimeout {
                key: preserved::DELETE_TIMEOUT,
            },
            RegistryError::InvalidName,
            RegistryError::TooManyInstances { limit: 3 },
            RegistryError::TooManyServices { limit: 4 },
        ];
        for e in all {
            let wire = serde_json::to_string(&outcome(&Err(WriteError::Store(e)))).unwrap();
            let back: Outcome = serde_json::from_str(&wire).unwrap();
            assert_eq!(result(back), Err(WriteError::Store(e)));
        }
        for e in [
            NamespaceError::Exists("dev".into()),
            NamespaceError::NotFound("qa".into()),
        ] {
            let refused = Err(WriteError::Namespace(e.into()));
            let wire = serde_json::to_string(&outcome(&refused)).unwrap();
            let back: Outcome = serde_json::from_str(&wire).unwrap();
            assert_eq!(result(back), refused);
        }
    }
}
