//! `/nacos/v1/ns/catalog/{services,service,instances}`: what the console's
//! service pages read, in the shapes of Nacos's console API (`count` +
//! `serviceList`, `service` + `clusters`, `count` + `list`), with the
//! fields Nacos does not have added (subscriber counts, last beat). A
//! service's subscriber list is the API's (`crate::cluster::subscribers`).

use registry_core::{Instance, ServiceKey, ServiceRef, ServiceSnapshot, Subscription};
use registry_proto::naming::service::ServiceKey as WireKey;
use registry_proto::params::Params;
use serde::Serialize;

use super::bounded;
use super::search::{search, Query};
use crate::clock::Clock;
use crate::convert::MetadataJson;
use crate::reply::Failure;
use crate::state::App;

/// Most services on one page.
const MAX_SERVICES_PAGE: usize = 500;
/// Most instances on one page.
const MAX_ROWS_PAGE: usize = 1000;
/// Deepest page: bounds the heap a page scan keeps (`pageNo * pageSize`).
const MAX_PAGE_NO: usize = 100_000;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServiceRow<'a> {
    name: &'a str,
    group_name: &'a str,
    cluster_count: usize,
    ip_count: usize,
    healthy_instance_count: usize,
    disabled_instance_count: usize,
    subscriber_count: usize,
    /// Nacos's console field (a protect-threshold trigger); always "false"
    /// here: the threshold is applied per query, not remembered.
    trigger_flag: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServicesPage<'a> {
    count: usize,
    service_list: Vec<ServiceRow<'a>>,
}

/// Counts of one snapshot's instances.
#[derive(Default)]
struct Counts {
    clusters: usize,
    instances: usize,
    healthy: usize,
    disabled: usize,
}

fn counts(s: &ServiceSnapshot) -> Counts {
    let mut c = Counts::default();
    let mut last: Option<&str> = None;
    // Instances are sorted by cluster first, so clusters are runs.
    for i in s.instances() {
        if last != Some(&*i.cluster) {
            c.clusters += 1;
            last = Some(&*i.cluster);
        }
        c.instances += 1;
        c.healthy += usize::from(i.healthy);
        c.disabled += usize::from(!i.enabled);
    }
    c
}

/// `GET /nacos/v1/ns/catalog/services`: a page of a namespace's services
/// whose name and group contain the search texts (ignoring case), sorted by
/// grouped name, with live instance and subscriber counts for the page.
/// Without a search, a page of the store's own sorted index (O(page),
/// exact); with one, one pass over that index (see `console::search`).
pub(super) fn services(app: &App, params: &Params<'_>, body: &mut Vec<u8>) -> Result<(), Failure> {
    let namespace = params.optional_or("namespaceId", registry_core::DEFAULT_NAMESPACE);
    let name = params.optional_or("serviceNameParam", "").trim();
    let group = params.optional_or("groupNameParam", "").trim();
    let page_no = bounded(params, "pageNo", 1, MAX_PAGE_NO)?;
    let page_size = bounded(params, "pageSize", 10, MAX_SERVICES_PAGE)?;

    let (count, keys) = if name.is_empty() && group.is_empty() {
        // The store's own sorted index: exact and O(page).
        let page = app.store.list_services(namespace, None, page_no, page_size);
        (page.count, page.services)
    } else {
        let query = Query {
            namespace,
            name,
            group,
            page_no,
            page_size,
        };
        search(&app.store, &query)
    };

    let snapshots: Vec<_> = keys
        .iter()
        .map(|k| app.store.snapshot(k.as_ref()))
        .collect();
    let subscribers = subscriber_counts(app, &keys);
    let service_list = keys
        .iter()
        .zip(&snapshots)
        .zip(subscribers)
        .map(|((k, snap), subscriber_count)| {
            let c = snap.as_deref().map(counts).unwrap_or_default();
            ServiceRow {
                name: k.service_name(),
                group_name: k.group(),
                cluster_count: c.clusters,
                ip_count: c.instances,
                healthy_instance_count: c.healthy,
                disabled_instance_count: c.disabled,
                subscriber_count,
                trigger_flag: "false",
            }
        })
        .collect();
    encode(
        body,
        &ServicesPage {
            count,
            service_list,
        },
    )
}

/// Live subscriptions of each service.
fn subscriber_counts(app: &App, keys: &[ServiceKey]) -> Vec<usize> {
    let now = app.clock.now();
    let mut buf: Vec<Subscription> = Vec::new();
    keys.iter()
        .map(|k| {
            buf.clear();
            app.subscribers.targets(k, now, &mut buf);
            buf.len()
        })
        .collect()
}

/// The service a request names (`namespaceId`, `serviceName`, `groupName`,
/// validated as the naming API does) and its current snapshot.
fn named_service(
    app: &App,
    params: &Params<'_>,
) -> Result<(ServiceKey, std::sync::Arc<ServiceSnapshot>), Failure> {
    let wire = WireKey::parse(params, &app.parse_limits)?;
    let grouped = wire.service.grouped();
    let snapshot = app
        .store
        .snapshot(ServiceRef::new(wire.namespace_id, &grouped))
        .ok_or_else(|| Failure::new(404, format!("no service {grouped} found!")))?;
    Ok((ServiceKey::new(wire.namespace_id, &grouped), snapshot))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServiceInfo<'a> {
    namespace_id: &'a str,
    name: &'a str,
    group_name: &'a str,
    protect_threshold: f32,
    metadata: MetadataJson<'a>,
    selector: serde_json::Value,
    revision: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterRow<'a> {
    name: &'a str,
    instance_count: usize,
    healthy_count: usize,
}

#[derive(Serialize)]
struct ServiceDetail<'a> {
    service: ServiceInfo<'a>,
    clusters: Vec<ClusterRow<'a>>,
}

/// `GET /nacos/v1/ns/catalog/service`: one service's settings and clusters.
pub(super) fn service(app: &App, params: &Params<'_>, body: &mut Vec<u8>) -> Result<(), Failure> {
    let (key, snap) = named_service(app, params)?;
    let mut clusters: Vec<ClusterRow<'_>> = Vec::new();
    for i in snap.instances() {
        match clusters.last_mut() {
            Some(c) if c.name == &*i.cluster => {
                c.instance_count += 1;
                c.healthy_count += usize::from(i.healthy);
            }
            _ => clusters.push(ClusterRow {
                name: &i.cluster,
                instance_count: 1,
                healthy_count: usize::from(i.healthy),
            }),
        }
    }
    let selector = snap
        .selector()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| serde_json::json!({ "type": "none" }));
    let detail = ServiceDetail {
        service: ServiceInfo {
            namespace_id: key.namespace(),
            name: key.service_name(),
            group_name: key.group(),
            protect_threshold: snap.protect_threshold(),
            metadata: MetadataJson(snap.metadata()),
            selector,
            revision: snap.revision(),
        },
        clusters,
    };
    encode(body, &detail)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InstanceRow<'a> {
    instance_id: String,
    ip: String,
    port: u16,
    weight: f64,
    healthy: bool,
    enabled: bool,
    ephemeral: bool,
    cluster_name: &'a str,
    service_name: &'a str,
    metadata: MetadataJson<'a>,
    /// Wall-clock milliseconds of the last beat; `null` for persistent
    /// instances, which do not beat.
    last_beat: Option<u64>,
}

#[derive(Serialize)]
struct Rows<T> {
    count: usize,
    list: Vec<T>,
}

/// `GET /nacos/v1/ns/catalog/instances`: a page of a service's instances
/// (optionally of one `clusterName`), in cluster, IP, port order.
pub(super) fn instances(app: &App, params: &Params<'_>, body: &mut Vec<u8>) -> Result<(), Failure> {
    let (key, snap) = named_service(app, params)?;
    let cluster = params
        .optional("clusterName")
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let page_no = bounded(params, "pageNo", 1, MAX_PAGE_NO)?;
    let page_size = bounded(params, "pageSize", 100, MAX_ROWS_PAGE)?;
    let selected = |i: &&Instance| cluster.is_none_or(|c| *i.cluster == *c);
    let count = snap.instances().iter().filter(selected).count();
    let (mono_now, wall_now) = (app.clock.now(), Clock::wall_ms());
    let list = snap
        .instances()
        .iter()
        .filter(selected)
        .skip((page_no - 1).saturating_mul(page_size))
        .take(page_size)
        .map(|i| InstanceRow {
            instance_id: i.instance_id(&key),
            ip: i.ip.to_string(),
            port: i.port,
            weight: i.weight,
            healthy: i.healthy,
            enabled: i.enabled,
            ephemeral: i.ephemeral,
            cluster_name: &i.cluster,
            service_name: key.grouped_name(),
            metadata: MetadataJson(&i.metadata),
            last_beat: app
                .store
                .last_beat(key.as_ref(), i)
                .map(|at| wall_now.saturating_sub(mono_now.0.saturating_sub(at.0))),
        })
        .collect();
    encode(body, &Rows { count, list })
}

/// Writes `value` as JSON; serialising these plain structs cannot fail
/// short of memory, which is answered 500 rather than a panic.
pub(super) fn encode(body: &mut Vec<u8>, value: &impl Serialize) -> Result<(), Failure> {
    serde_json::to_writer(&mut *body, value)
        .map_err(|e| Failure::new(500, format!("Server failed,{e}")))
}
