//! The door of the v2 Open API (`/nacos/v2/ns/...`) and the v3 client and
//! admin APIs (`/nacos/v3/client/ns/...`, `/nacos/v3/admin/ns/...`): each
//! handler parses its form (`registry_proto::openapi`), runs the typed read
//! query ([`super::query`]) or write command ([`crate::write`]), and renders
//! the outcome in the `Result` envelope. Errors are rendered by
//! [`super::error`] (`Failure::envelope`).
//!
//! Each handler names the Nacos controller whose behaviour it follows.
//!
//! # Layout
//! - this file: the dispatch and the reads (lists, details, switches, metrics);
//! - `write`: instance and service writes, beats and health.
//! - `admin`: cluster checkers, log level, statuses, 2.x client views,
//!   a service's subscribers.

use registry_core::{InstanceAddr, ServiceRef};
use registry_proto::naming::instance::InstanceKey;
use registry_proto::naming::route::{Handler, Route};
use registry_proto::naming::service::{Selector, ServiceKey};
use registry_proto::openapi::envelope::{self, ApiError, ErrorCode};
use registry_proto::openapi::instance::{encode_instance, DetailV2View, ListForm, ListKind};
use registry_proto::openapi::service::{
    self as svc, ClusterInfoView, DetailKind, ServiceDetailView, ServicePage, ServiceView,
};

use super::error::Failure;
use super::namespace::{self, Action};
use super::query::{self, Selection};
use super::{Exchange, Reply, Scratch};
use crate::convert::{self, MetadataJson};

/// Answers a v2 or v3 route.
pub(crate) fn handle(
    ex: &Exchange<'_>,
    route: Route,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    match route {
        Route::V2InstanceList => list_v2(ex, scratch),
        Route::V3ClientList => list_v3(ex, scratch, ListKind::V3Client),
        Route::V3InstanceList => list_v3(ex, scratch, ListKind::V3Admin),
        Route::V2InstanceDetail => detail(ex, scratch, false),
        Route::V3InstanceDetail => detail(ex, scratch, true),
        Route::V2ServiceDetail => service_detail(ex, scratch, DetailKind::V2),
        Route::V3ServiceDetail => service_detail(ex, scratch, DetailKind::V3),
        Route::V2ServiceList => service_list_v2(ex, scratch),
        Route::V3ServiceList => service_list_v3(ex, scratch),
        Route::V2Switches | Route::V3Switches => {
            super::operator::switches_3x(ex, scratch);
            wrap(Reply::Json, scratch)
        }
        Route::V2Metrics | Route::V3Metrics => {
            let v2 = route == Route::V2Metrics;
            super::operator::metrics_v2_v3(ex, scratch, v2);
            wrap(Reply::Json, scratch)
        }
        Route::V2ClientList | Route::V3ClientListAdmin => client_list(ex, scratch),
        Route::V2NamespaceList | Route::V3NamespaceList => {
            namespace::open(ex, Action::List, scratch)
        }
        Route::V2NamespaceDetail | Route::V3NamespaceDetail => {
            namespace::open(ex, Action::Detail, scratch)
        }
        Route::V2NamespaceCreate | Route::V3NamespaceCreate => {
            namespace::open(ex, Action::Create, scratch)
        }
        Route::V2NamespaceUpdate | Route::V3NamespaceUpdate => {
            namespace::open(ex, Action::Update, scratch)
        }
        Route::V2NamespaceDelete | Route::V3NamespaceDelete => {
            namespace::open(ex, Action::Delete, scratch)
        }
        Route::V3NamespaceCheck => namespace::open(ex, Action::Check, scratch),
        r if r.handler() == Handler::OpenAdmin => admin::handle(ex, r, scratch),
        other => write::handle(ex, other, scratch),
    }
}

/// Puts a JSON body a shared renderer wrote into the envelope.
fn wrap(reply: Reply, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let data = std::mem::take(&mut scratch.body);
    envelope::success(&mut scratch.body, |o| o.extend_from_slice(&data));
    Ok(reply)
}

fn api(e: impl Into<ApiError>) -> Failure {
    Failure::from(e.into())
}

/// v2 `GET /instance/list` (`InstanceControllerV2.list`): Nacos 3's
/// `ServiceInfo` in the envelope; enabled instances, protect threshold.
fn list_v2(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let form = ListForm::parse(&ex.params, &ex.app.parse_limits, ListKind::V2).map_err(api)?;
    let grouped = form.service.grouped();
    let rows = query::service(ex.app, form.namespace_id, &grouped);
    let clusters: Vec<&str> = form.cluster_list().collect();
    let list = rows.client_list(&clusters, form.healthy_only);
    envelope::success(&mut scratch.body, |o| {
        query::encode_service_info(&list, form.service, form.clusters, o);
    });
    Ok(Reply::Json)
}

/// v3 `GET /instance/list`: the client's (`InstanceOpenApiController.list`:
/// enabled, protect threshold, `healthyOnly` ignored, an unknown service
/// is an empty list) or the admin's (`InstanceControllerV3.list` via
/// `CatalogServiceV2Impl.listInstances`: every instance, `healthyOnly`
/// honoured, an unknown service or cluster is 404 `{30000}`).
fn list_v3(ex: &Exchange<'_>, scratch: &mut Scratch, kind: ListKind) -> Result<Reply, Failure> {
    let form = ListForm::parse(&ex.params, &ex.app.parse_limits, kind).map_err(api)?;
    let grouped = form.service.grouped();
    let rows = query::service(ex.app, form.namespace_id, &grouped);
    let clusters: Vec<&str> = form.cluster_list().collect();
    let selection = if kind == ListKind::V3Admin {
        let Some(s) = &rows.snapshot else {
            return Err(api(ApiError::new(
                404,
                ErrorCode::ServerError,
                format!("service {grouped} is not found!"),
            )));
        };
        let names = s.cluster_names();
        if let Some(c) = clusters.iter().find(|c| !names.contains(c)) {
            return Err(api(ApiError::new(
                404,
                ErrorCode::ServerError,
                format!("cluster {c} is not found!"),
            )));
        }
        Selection::Admin
    } else {
        Selection::Client
    };
    let selected = rows.each(&clusters, form.healthy_only, selection);
    envelope::success(&mut scratch.body, |o| {
        query::encode_rows(&selected, form.service, o)
    });
    Ok(Reply::Json)
}

/// v2 `GET /instance` (`InstanceControllerV2.detail`) and v3 admin
/// `GET /instance` (`InstanceControllerV3.detail`); an unknown instance is
/// 404 `{20004}` (`InstanceOperatorClientImpl.getInstance0`).
fn detail(ex: &Exchange<'_>, scratch: &mut Scratch, v3: bool) -> Result<Reply, Failure> {
    let key = InstanceKey::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let grouped = key.service.grouped();
    let addr = InstanceAddr {
        cluster: key.cluster,
        ip: convert::ip(key.ip).map_err(api)?,
        port: key.port,
    };
    let rows = query::service(ex.app, key.namespace_id, &grouped);
    let not_found = |detail: String| api(ApiError::new(404, ErrorCode::ResourceNotFound, detail));
    let Some(s) = rows.snapshot.as_ref().filter(|s| !s.instances().is_empty()) else {
        return Err(not_found(format!(
            "no ips found for cluster {} in service {grouped}",
            key.cluster
        )));
    };
    let Some(i) = s.find_any(addr) else {
        return Err(not_found("no matched ip found!".to_owned()));
    };
    let ip = i.ip.to_string();
    let view = query::view(i, i.healthy, &ip, key.service);
    envelope::success(&mut scratch.body, |o| {
        if v3 {
            encode_instance(o, &view);
        } else {
            encode_instance(o, &DetailV2View { instance: view });
        }
    });
    Ok(Reply::Json)
}

/// v2/v3 `GET /service` (`ServiceControllerV2.detail`,
/// `ServiceControllerV3.detail`): unknown is 400 `{21008}`
/// (`ServiceOperatorV2Impl.queryService`).
fn service_detail(
    ex: &Exchange<'_>,
    scratch: &mut Scratch,
    kind: DetailKind,
) -> Result<Reply, Failure> {
    let key = ServiceKey::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let grouped = key.service.grouped();
    let Some(s) = ex
        .app
        .store
        .snapshot(ServiceRef::new(key.namespace_id, &grouped))
    else {
        return Err(api(ApiError::new(
            400,
            ErrorCode::ServiceNotExist,
            format!(
                "service not found, namespace: {}, serviceName: {grouped}",
                key.namespace_id
            ),
        )));
    };
    let empty = registry_core::Metadata::empty();
    let names = s.cluster_names();
    let default = ex.app.config.default_checker();
    let checkers: Vec<_> = names
        .iter()
        .map(|n| crate::health::checker_for(s.metadata(), n, &default))
        .collect();
    let clusters: Vec<_> = names
        .iter()
        .zip(&checkers)
        .map(|(n, checker)| {
            let port = crate::health::check_port_for(s.metadata(), n);
            ClusterInfoView {
                name: n,
                check_port: port.unwrap_or(80),
                use_instance_port: port.is_none(),
                checker,
                metadata: MetadataJson(&empty),
            }
        })
        .collect();
    let selector = s
        .selector()
        .and_then(|t| Selector::parse(Some(t)).ok())
        .unwrap_or(Selector::None);
    let view = ServiceDetailView {
        kind,
        namespace_id: key.namespace_id,
        name: key.service.name,
        group: key.service.group,
        clusters: &clusters,
        metadata: MetadataJson(s.metadata()),
        protect_threshold: s.protect_threshold(),
        selector: &selector,
        ephemeral: !s.is_explicit(),
    };
    envelope::success(&mut scratch.body, |o| view.encode(o));
    Ok(Reply::Json)
}

/// v2 `GET /service/list` (`ServiceControllerV2.list`).
fn service_list_v2(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let form = svc::ListForm::parse(&ex.params, &ex.app.parse_limits, svc::ListKind::V2)?;
    let page = ex.app.store.list_services(
        form.namespace_id,
        Some(form.group),
        form.page_no,
        form.page_size,
    );
    envelope::success(&mut scratch.body, |o| {
        svc::encode_v2_list(
            o,
            page.count,
            page.services.iter().map(|k| k.grouped_name()),
        );
    });
    Ok(Reply::Json)
}

/// v3 admin `GET /service/list` (`ServiceControllerV3.list`): a page of
/// `ServiceView`s matching the substrings.
fn service_list_v3(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let form = svc::ListForm::parse(&ex.params, &ex.app.parse_limits, svc::ListKind::V3)?;
    // ServiceListForm's boolean `withInstances`, bound by Spring.
    if ex
        .params
        .optional("withInstances")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return service_details_v3(ex, &form, scratch);
    }
    let found = query::search(
        ex.app,
        form.namespace_id,
        form.group,
        form.name,
        form.ignore_empty,
    );
    let items: Vec<_> = found
        .iter()
        .skip(form.offset())
        .take(form.page_size)
        .map(|k| {
            let c = query::counts(ex.app, k);
            let (group, name) = query::split_grouped(k.grouped_name());
            ServiceView {
                name,
                group_name: group,
                cluster_count: c.clusters,
                ip_count: c.instances,
                healthy_instance_count: c.healthy,
                trigger_flag: if c.trigger { "true" } else { "false" },
            }
        })
        .collect();
    let page = ServicePage {
        total_count: found.len(),
        page_number: form.page_no,
        pages_available: svc::pages(found.len(), form.page_size),
        page_items: items,
    };
    envelope::success(&mut scratch.body, |o| page.encode(o));
    Ok(Reply::Json)
}

/// v3 `service/list?withInstances=true`
/// (`ServiceControllerV3.list` → `CatalogServiceV2Impl.pageListServiceDetail`):
/// every matching service (empty ones too: that path has no
/// `ignoreEmptyService`) with its instances by cluster.
fn service_details_v3(
    ex: &Exchange<'_>,
    form: &svc::ListForm<'_>,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    let found = query::search(ex.app, form.namespace_id, form.group, form.name, false);
    let snaps: Vec<_> = found
        .iter()
        .skip(form.offset())
        .take(form.page_size)
        .filter_map(|k| ex.app.store.snapshot(k.as_ref()))
        .collect();
    let ips: Vec<Vec<String>> = snaps
        .iter()
        .map(|s| s.instances().iter().map(|i| i.ip.to_string()).collect())
        .collect();
    let items: Vec<_> = snaps
        .iter()
        .zip(&ips)
        .map(|(snap, ips)| {
            let (group, name) = query::split_grouped(snap.key().grouped_name());
            let service = registry_proto::naming::ServiceName { group, name };
            let mut clusters: Vec<(&str, Vec<_>)> = Vec::new();
            for (i, ip) in snap.instances().iter().zip(ips) {
                let view = query::view(i, i.healthy, ip, service);
                match clusters.iter_mut().find(|(c, _)| *c == &*i.cluster) {
                    Some((_, hosts)) => hosts.push(view),
                    None => clusters.push((&i.cluster, vec![view])),
                }
            }
            svc::ServiceWithInstances {
                name,
                group,
                clusters,
                metadata: MetadataJson(snap.metadata()),
            }
        })
        .collect();
    let page = svc::DetailPage {
        total_count: found.len(),
        page_number: form.page_no,
        pages_available: svc::pages(found.len(), form.page_size),
        page_items: items,
    };
    envelope::success(&mut scratch.body, |o| {
        // Strings, numbers and maps of strings: serialising cannot fail.
        let _ = serde_json::to_writer(o, &page);
    });
    Ok(Reply::Json)
}

/// v2/v3 `GET /client/list` (`ClientInfoControllerV2.getClientList`,
/// `clientManager.allClientId()`): this node's gRPC connection ids, then
/// the address clients (`ip:port#true`, `ip:port#false`).
fn client_list(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let mut ids = ex.app.grpc.hub.ids();
    // HTTP registrations are clients too (`IpPortBasedClient`).
    ids.extend(
        crate::ip_port_clients::address_clients(ex.app)
            .into_iter()
            .map(|c| c.id),
    );
    envelope::success(&mut scratch.body, |o| {
        let _ = serde_json::to_writer(o, &ids);
    });
    Ok(Reply::Json)
}

mod admin;
mod write;
