//! Across services: the namespaces with their service counts
//! (`/nacos/v1/console/namespaces`: the namespace records, plus any
//! namespace holding services without one, as HTTP registers never check
//! that a namespace exists; counts from the store's sorted service index), and every
//! instance of one IP (`/nacos/v1/console/instances?ip=`), which the
//! console's "take this IP offline" action then disables one by one
//! through the public API.
//!
//! The IP search is one lock-free pass over the store that loads every
//! service's snapshot: under a second at 600k services on a busy machine,
//! for an operator's action, never for client traffic.

use std::net::IpAddr;

use registry_core::DEFAULT_NAMESPACE;
use registry_proto::params::Params;
use serde::Serialize;

use super::catalog::encode;
use crate::reply::Failure;
use crate::state::App;

/// Most instances one IP search returns; past it the answer says so.
const MAX_IP_MATCHES: usize = 10_000;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NamespaceRow {
    namespace: String,
    namespace_show_name: String,
    namespace_desc: String,
    /// Nacos's reported config quota.
    quota: u32,
    config_count: u32,
    service_count: usize,
    /// Nacos's namespace type: 0 for the built-in `public`, 2 for others.
    #[serde(rename = "type")]
    kind: u8,
}

/// Nacos's envelope for console lists.
#[derive(Serialize)]
struct Envelope<T> {
    code: u16,
    message: Option<String>,
    data: T,
}

/// `GET /nacos/v1/console/namespaces`: every namespace (`public` first,
/// then the records, then namespaces holding services without a record),
/// with its service count.
pub(super) fn namespaces(app: &App, body: &mut Vec<u8>) -> Result<(), Failure> {
    let counts = app.store.namespace_counts();
    let count_of = |id: &str| counts.iter().find(|(n, _)| n == id).map_or(0, |(_, c)| *c);
    let records = app.namespaces.table().list();
    let mut data: Vec<NamespaceRow> = records
        .iter()
        .map(|n| NamespaceRow {
            namespace_show_name: n.name.clone(),
            namespace_desc: n.desc.clone(),
            ..row(&n.id, count_of(&n.id))
        })
        .collect();
    data.extend(
        counts
            .iter()
            .filter(|(n, _)| records.iter().all(|r| r.id != *n))
            .map(|(n, count)| row(n, *count)),
    );
    encode(
        body,
        &Envelope {
            code: 200,
            message: None,
            data,
        },
    )
}

fn row(namespace: &str, service_count: usize) -> NamespaceRow {
    NamespaceRow {
        namespace: namespace.to_string(),
        namespace_show_name: namespace.to_string(),
        namespace_desc: String::new(),
        quota: registry_core::namespace::NACOS_REPORTED_QUOTA,
        config_count: 0,
        service_count,
        kind: if namespace == DEFAULT_NAMESPACE {
            registry_proto::openapi::namespace::TYPE_GLOBAL
        } else {
            registry_proto::openapi::namespace::TYPE_CUSTOM
        },
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IpInstanceRow {
    namespace_id: String,
    service_name: String,
    group_name: String,
    cluster_name: String,
    ip: String,
    port: u16,
    weight: f64,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
}

#[derive(Serialize)]
struct IpInstances {
    count: usize,
    truncated: bool,
    list: Vec<IpInstanceRow>,
}

/// `GET /nacos/v1/console/instances?ip=[&namespaceId=]`: every instance at
/// `ip`, in every namespace unless one is named.
pub(super) fn instances_of_ip(
    app: &App,
    params: &Params<'_>,
    body: &mut Vec<u8>,
) -> Result<(), Failure> {
    let text = params
        .optional("ip")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Failure::new(400, "Param 'ip' is required."))?;
    let ip: IpAddr = text
        .parse()
        .map_err(|_| Failure::new(400, format!("ip is not an IP address: {text}")))?;
    let namespace = params
        .optional("namespaceId")
        .map(str::trim)
        .filter(|n| !n.is_empty());
    let (mut list, mut count) = (Vec::new(), 0usize);
    app.store.for_each_service(|snap| {
        let key = snap.key();
        if namespace.is_some_and(|n| n != key.namespace()) {
            return;
        }
        for i in snap.instances().iter().filter(|i| i.ip == ip) {
            count += 1;
            if list.len() < MAX_IP_MATCHES {
                list.push(IpInstanceRow {
                    namespace_id: key.namespace().to_string(),
                    service_name: key.service_name().to_string(),
                    group_name: key.group().to_string(),
                    cluster_name: i.cluster.to_string(),
                    ip: i.ip.to_string(),
                    port: i.port,
                    weight: i.weight,
                    healthy: i.healthy,
                    enabled: i.enabled,
                    ephemeral: i.ephemeral,
                });
            }
        }
    });
    list.sort_by(|a, b| {
        (&a.namespace_id, &a.group_name, &a.service_name, a.port).cmp(&(
            &b.namespace_id,
            &b.group_name,
            &b.service_name,
            b.port,
        ))
    });
    encode(
        body,
        &IpInstances {
            count,
            truncated: count > list.len(),
            list,
        },
    )
}
