//! The v2/v3 admin endpoints past instances and services: the cluster
//! health-check update, the checkers, the log level, the v2 instance
//! statuses, the 2.x client views (`/client`, `/client/publish/list`,
//! `/client/subscribe/list`, `/client/service/{publisher,subscriber}/list`,
//! `/client/distro`) and a service's subscribers. Each names the Nacos
//! controller it follows; bodies are admin reads, built with `serde_json`.
//!
//! Clients here are 2.x gRPC connections, by Nacos's connection id
//! (`<millis>_<ip>_<port>`), as `/client/list` lists them; 1.x HTTP
//! instances have no client id.

use std::sync::Arc;

use registry_core::{ServiceKey, ServiceRef, Subscriber, Subscription};
use registry_proto::naming::route::Route;
use registry_proto::openapi::admin::{self, ClientServiceForm, ClusterForm, SubscriberPage};
use registry_proto::openapi::envelope::{self, ApiError, ErrorCode};
use serde_json::{json, Value};

use super::api;
use crate::http::error::Failure;
use crate::http::writes::{apply, Door};
use crate::http::{Exchange, Reply, Scratch};
use crate::hub::Connection;
use crate::write::Command;

/// Answers an admin route of this module.
pub(crate) fn handle(
    ex: &Exchange<'_>,
    route: Route,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    match route {
        Route::V3ClusterUpdate => cluster_update(ex, scratch),
        Route::V3HealthCheckers => {
            envelope::success(&mut scratch.body, admin::encode_checkers);
            Ok(Reply::Json)
        }
        Route::V3OpsLog => ops_log(ex, scratch),
        // `ServiceControllerV3.listSelectorTypes`: the selectors this server
        // applies (Nacos's `SelectorManager` loads the same two).
        Route::V3SelectorTypes => data(scratch, &json!(["none", "label"])),
        Route::V2InstanceStatuses => statuses(ex, scratch),
        Route::V3ClientDistro => client_distro(ex, scratch),
        Route::V2ClientDetail | Route::V3ClientDetail => client_detail(ex, scratch),
        Route::V2ClientPublished => published(ex, scratch, false),
        Route::V3ClientPublished => published(ex, scratch, true),
        Route::V2ClientSubscribed => subscribed(ex, scratch, false),
        Route::V3ClientSubscribed => subscribed(ex, scratch, true),
        Route::V2ServicePublishers => publishers(ex, scratch, false),
        Route::V3ServicePublishers => publishers(ex, scratch, true),
        Route::V2ServiceSubscriberClients => subscriber_clients(ex, scratch, false),
        Route::V3ServiceSubscriberClients => subscriber_clients(ex, scratch, true),
        Route::V3ServiceSubscribers => service_subscribers(ex, scratch),
        other => Err(api(ApiError::new(
            404,
            ErrorCode::ResourceNotFound,
            format!("no such api: {}", other.name()),
        ))),
    }
}

fn data(scratch: &mut Scratch, value: &Value) -> Result<Reply, Failure> {
    envelope::success(&mut scratch.body, |o| {
        // A `Value` always serialises.
        let _ = serde_json::to_writer(o, value);
    });
    Ok(Reply::Json)
}

/// `PUT /v3/admin/ns/cluster` (`ClusterControllerV3.update`,
/// `ClusterOperatorV2Impl.updateClusterMetadata`): the cluster's checker is
/// kept where the server's health checker reads it, the service metadata
/// key `preserved.health.checker.<cluster>` (see `crate::health`), through
/// a service update of the write path. An unknown service is 400
/// `{30000}` (Nacos's `NacosException(INVALID_PARAM)`).
fn cluster_update(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let form = ClusterForm::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    // Nacos parses the cluster's `metadata` too (extend data, kept nowhere here).
    if let Some(m) = ex.params.optional("metadata") {
        registry_proto::naming::Metadata::parse(m, &ex.app.parse_limits).map_err(api)?;
    }
    let grouped = form.service.grouped();
    let svc = ServiceRef::new(form.namespace_id, &grouped);
    let Some(snapshot) = ex.app.store.snapshot(svc) else {
        return Err(api(ApiError::new(
            400,
            ErrorCode::ServerError,
            format!(
                "service not found groupName: {},serviceName: {}",
                form.service.group, form.service.name
            ),
        )));
    };
    let key = format!("{}.{}", crate::health::CHECKER_KEY, form.cluster);
    let value = form.checker.metadata_value();
    // With `useInstancePort4Check=false` the checks probe `checkPort`
    // (kept beside the checker); with true the key goes.
    let port_key = format!("{}.{}", crate::health::CHECK_PORT_KEY, form.cluster);
    let port = form.check_port.to_string();
    let port_pair = (!form.use_instance_port).then_some((port_key.as_str(), port.as_str()));
    // Later pairs win: the new checker replaces the cluster's old one.
    let metadata = registry_core::Metadata::from_pairs(
        snapshot
            .metadata()
            .iter()
            .filter(|(k, _)| *k != port_key)
            .chain(std::iter::once((key.as_str(), value.as_str())))
            .chain(port_pair),
    )
    .map_err(|_| {
        api(ApiError::new(
            400,
            ErrorCode::ParameterValidate,
            "the health-check path cannot be kept in the service metadata",
        ))
    })?;
    let selector = snapshot.selector().map(Arc::<str>::from);
    let command = Command::ServiceUpdate {
        service: svc,
        protect_threshold: snapshot.protect_threshold(),
        metadata: Some(&metadata),
        selector: selector.as_ref(),
    };
    apply(ex, command, Door::Envelope, scratch)
}

/// `PUT /v3/admin/ns/ops/log` (`OperatorControllerV3.setLogLevel`): the
/// logger's level changed in the running filter ([`crate::log_levels`]);
/// a level or name it cannot apply is 400 `{20002}`, an embedded server
/// (no filter installed) 501.
fn ops_log(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    use crate::log_levels::{set, LevelError};
    let (name, level) = admin::log_form(&ex.params).map_err(api)?;
    match set(name, level) {
        Ok(directives) => {
            tracing::info!(logger = name, level, %directives, "log level changed");
            data(scratch, &json!("ok"))
        }
        Err(e @ LevelError::NotInstalled) => Err(api(ApiError::new(
            501,
            ErrorCode::ServerError,
            e.to_string(),
        ))),
        Err(e) => Err(api(ApiError::new(
            400,
            ErrorCode::ParameterValidate,
            e.to_string(),
        ))),
    }
}

/// v2 `/instance/statuses/{key}` (`InstanceControllerV2.listWithHealthStatus`):
/// a raw `{"ips":["ip:port_healthy"]}` of every instance (an unknown
/// service has none).
fn statuses(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let raw = ex
        .request
        .path
        .strip_prefix(registry_proto::openapi::route::STATUSES_PREFIX)
        .unwrap_or_default();
    let key = registry_proto::params::percent_decode(raw.as_bytes()).map_err(api)?;
    let (namespace, grouped) = admin::statuses_key(&key).map_err(api)?;
    let snapshot = ex.app.store.snapshot(ServiceRef::new(namespace, grouped));
    let rows: Vec<(String, u16, bool)> = snapshot
        .iter()
        .flat_map(|s| s.instances().iter())
        .map(|i| (i.ip.to_string(), i.port, i.healthy))
        .collect();
    admin::encode_statuses(
        &mut scratch.body,
        rows.iter().map(|(ip, port, h)| (ip.as_str(), *port, *h)),
    );
    Ok(Reply::Json)
}

/// v3 `GET /client/distro` (`ClientServiceImpl.getResponsibleServer4Client`):
/// the member Distro's hash of `ip:port` picks; this node alone without a
/// cluster.
fn client_distro(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let (ip, port) = admin::distro_form(&ex.params).map_err(api)?;
    let tag = format!("{ip}:{port}");
    let me = ex.app.config.listen.to_string();
    let server = match &ex.app.cluster {
        None => me,
        Some(c) => c.responsible_for(&tag),
    };
    data(scratch, &json!({ "responsibleServer": server }))
}

/// The connection `clientId` names; 404 `{20004}` as `checkClientId` says.
fn client(ex: &Exchange<'_>) -> Result<Arc<Connection>, Failure> {
    let id = admin::client_id(&ex.params).map_err(api)?;
    ex.app.grpc.hub.by_id(id).ok_or_else(|| {
        api(ApiError::new(
            404,
            ErrorCode::ResourceNotFound,
            format!("clientId [ {id} ] not exist"),
        ))
    })
}

/// `GET /client` (`ClientServiceImpl.getClientDetail`): a connection-based
/// client's summary.
fn client_detail(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    if let Some(address) = address_client(ex)? {
        return address_detail(ex, scratch, &address);
    }
    let conn = client(ex)?;
    let idle = ex
        .now
        .0
        .saturating_sub(conn.last_active.load(std::sync::atomic::Ordering::Relaxed));
    let last_updated = crate::clock::Clock::wall_ms().saturating_sub(idle);
    data(
        scratch,
        &json!({
            "clientId": conn.id,
            "ephemeral": true,
            "lastUpdatedTime": last_updated,
            "clientType": "connection",
            "connectType": "GRPC",
            "appName": "-",
            "version": conn.client_version,
            "clientIp": conn.peer.ip().to_string(),
            "clientPort": conn.peer.port(),
        }),
    )
}

/// An address client's summary (`ClientSummaryInfo` of an
/// `IpPortBasedClient`: `clientType` "ipPort", no connection fields). Its
/// `lastUpdatedTime` is its instances' latest beat; persistent instances
/// have none kept here, so theirs is 0.
fn address_detail(
    ex: &Exchange<'_>,
    scratch: &mut Scratch,
    c: &crate::ip_port_clients::AddressClient,
) -> Result<Reply, Failure> {
    let wall = crate::clock::Clock::wall_ms();
    let last_updated = c
        .last_beat
        .map_or(0, |at| wall.saturating_sub(ex.now.0.saturating_sub(at.0)));
    data(
        scratch,
        &json!({
            "clientId": c.id,
            "ephemeral": c.ephemeral,
            "lastUpdatedTime": last_updated,
            "clientType": "ipPort",
            "connectType": null,
            "appName": null,
            "version": null,
            "clientIp": null,
            "clientPort": null,
        }),
    )
}

/// The address client `clientId` names (`ip:port#true`/`#false`), if any.
fn address_client(
    ex: &Exchange<'_>,
) -> Result<Option<crate::ip_port_clients::AddressClient>, Failure> {
    let id = admin::client_id(&ex.params).map_err(api)?;
    Ok(crate::ip_port_clients::address_client(ex.app, id))
}

/// `GET /client/publish/list`: what a client registered, one row per
/// instance. v3 (`getPublishedServiceList`): `ClientServiceInfo` rows; v2
/// (`getPublishedServiceListAdapt`): `{namespace, group, serviceName,
/// registeredInstance}`.
fn published(ex: &Exchange<'_>, scratch: &mut Scratch, v3: bool) -> Result<Reply, Failure> {
    let rows: Vec<(ServiceKey, String, std::net::IpAddr, u16)> = match address_client(ex)? {
        Some(c) => c
            .published
            .into_iter()
            .map(|p| (p.service, p.cluster, p.ip, p.port))
            .collect(),
        None => {
            let conn = client(ex)?;
            let mut owned: Vec<_> = conn.owned.lock().instances.iter().cloned().collect();
            owned.sort_by(|a, b| {
                (a.service.grouped_name(), &a.cluster, a.ip, a.port).cmp(&(
                    b.service.grouped_name(),
                    &b.cluster,
                    b.ip,
                    b.port,
                ))
            });
            owned
                .into_iter()
                .map(|o| (o.service, o.cluster.to_string(), o.ip, o.port))
                .collect()
        }
    };
    let rows: Vec<Value> = rows
        .iter()
        .map(|(service, cluster, ip, port)| {
            let (ns, group, name) = names(service);
            if v3 {
                json!({
                    "namespaceId": ns, "groupName": group, "serviceName": name,
                    "publisherInfo": {"clientId": null, "ip": ip.to_string(), "port": port, "clusterName": cluster},
                    "subscriberInfo": null,
                })
            } else {
                json!({
                    "namespace": ns, "group": group, "serviceName": name,
                    "registeredInstance": {"ip": ip.to_string(), "port": port, "cluster": cluster},
                })
            }
        })
        .collect();
    data(scratch, &Value::Array(rows))
}

fn names(key: &ServiceKey) -> (&str, &str, &str) {
    (key.namespace(), key.group(), key.service_name())
}

/// How Nacos describes a 2.x subscriber (`SubscribeServiceRequestHandler`):
/// address and ip the client's IP, agent its version, port 0, app
/// `unknown` (the request's `app` header is not kept here).
struct SubscriberFacts {
    ip: String,
    port: u16,
    address: String,
    agent: String,
    app: &'static str,
}

fn facts(
    ex: &Exchange<'_>,
    s: &Subscription,
) -> Option<(SubscriberFacts, Option<Arc<Connection>>)> {
    match s.subscriber {
        // 1.x: the UDP push address; its `User-Agent` is not kept.
        Subscriber::Udp(addr) => Some((
            SubscriberFacts {
                ip: addr.ip().to_string(),
                port: addr.port(),
                address: addr.to_string(),
                agent: String::new(),
                app: "unknown",
            },
            None,
        )),
        Subscriber::Connection(number) => {
            let conn = ex.app.grpc.hub.by_number(number)?;
            let ip = conn.peer.ip().to_string();
            Some((
                SubscriberFacts {
                    address: ip.clone(),
                    ip,
                    port: 0,
                    agent: conn.client_version.clone(),
                    app: "unknown",
                },
                Some(conn),
            ))
        }
    }
}

/// `GET /client/subscribe/list`: what a client subscribes to. v3:
/// `ClientServiceInfo` rows with `subscriberInfo`; v2 (`...Adapt`):
/// `{namespace, group, serviceName, subscriberInfo: {app, agent, addr}}`.
fn subscribed(ex: &Exchange<'_>, scratch: &mut Scratch, v3: bool) -> Result<Reply, Failure> {
    // A 1.x subscriber is an address client of its UDP address in Nacos;
    // ours are not kept as clients, so a publishing address subscribes to
    // nothing here.
    if address_client(ex)?.is_some() {
        return data(scratch, &Value::Array(Vec::new()));
    }
    let conn = client(ex)?;
    let mut subs: Vec<_> = conn.owned.lock().subscriptions.iter().cloned().collect();
    subs.sort_by(|a, b| a.service.grouped_name().cmp(b.service.grouped_name()));
    let ip = conn.peer.ip().to_string();
    let rows: Vec<Value> = subs
        .iter()
        .map(|s| {
            let (ns, group, name) = names(&s.service);
            if v3 {
                json!({
                    "namespaceId": ns, "groupName": group, "serviceName": name,
                    "publisherInfo": null,
                    "subscriberInfo": {"clientId": null, "appName": "unknown", "agent": conn.client_version, "address": ip},
                })
            } else {
                json!({
                    "namespace": ns, "group": group, "serviceName": name,
                    "subscriberInfo": {"app": "unknown", "agent": conn.client_version, "addr": ip},
                })
            }
        })
        .collect();
    data(scratch, &Value::Array(rows))
}

/// `GET /client/service/publisher/list`: the clients that registered an
/// instance of the service. v3 (`filterInstancePublishInfo`): `ip`/`port`
/// filter when given → `{clientId, ip, port, clusterName}`. v2 (the
/// `ephemeral` overload): Nacos compares `ip` and `port` even when absent,
/// so only an exact `ip` and `port` match is listed → `{ip, port, cluster,
/// clientId}`.
fn publishers(ex: &Exchange<'_>, scratch: &mut Scratch, v3: bool) -> Result<Reply, Failure> {
    let form = ClientServiceForm::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let key = ServiceKey::new(form.namespace_id, &form.grouped);
    let mut rows = Vec::new();
    for conn in ex.app.grpc.hub.all() {
        let mut owned: Vec<_> = conn
            .owned
            .lock()
            .instances
            .iter()
            .filter(|o| o.service == key)
            .cloned()
            .collect();
        owned.sort_by(|a, b| (&a.cluster, a.ip, a.port).cmp(&(&b.cluster, b.ip, b.port)));
        for o in owned {
            let ip = o.ip.to_string();
            let matches = if v3 {
                form.ip.is_none_or(|want| want == ip) && form.port.is_none_or(|p| p == o.port)
            } else {
                form.ip == Some(ip.as_str()) && form.port == Some(o.port)
            };
            if !matches {
                continue;
            }
            rows.push(publisher_row(v3, &conn.id, &ip, o.port, &o.cluster));
        }
    }
    // The address clients that publish into it (`IpPortBasedClient`s).
    for c in crate::ip_port_clients::publishing_into(ex.app, key.as_ref()) {
        for p in &c.published {
            let ip = p.ip.to_string();
            let matches = if v3 {
                form.ip.is_none_or(|want| want == ip) && form.port.is_none_or(|want| want == p.port)
            } else {
                form.ip == Some(ip.as_str()) && form.port == Some(p.port)
            };
            if matches {
                rows.push(publisher_row(v3, &c.id, &ip, p.port, &p.cluster));
            }
        }
    }
    data(scratch, &Value::Array(rows))
}

/// One row of `client/service/publisher/list`: v3 `ClientPublisherInfo`,
/// v2 `{ip, port, cluster, clientId}`.
fn publisher_row(v3: bool, client_id: &str, ip: &str, port: u16, cluster: &str) -> Value {
    if v3 {
        json!({"clientId": client_id, "ip": ip, "port": port, "clusterName": cluster})
    } else {
        json!({"ip": ip, "port": port, "cluster": cluster, "clientId": client_id})
    }
}

/// `GET /client/service/subscriber/list`: the clients subscribed to the
/// service (`ip`/`port` filter when given). v3: `{clientId, appName, agent,
/// address}`; v2: `{clientId, ip, port}`.
fn subscriber_clients(
    ex: &Exchange<'_>,
    scratch: &mut Scratch,
    v3: bool,
) -> Result<Reply, Failure> {
    let form = ClientServiceForm::parse(&ex.params, &ex.app.parse_limits).map_err(api)?;
    let key = ServiceKey::new(form.namespace_id, &form.grouped);
    let mut subs = Vec::new();
    ex.app
        .subscribers
        .targets(&key, ex.app.clock.now(), &mut subs);
    subs.sort_by_key(|s| s.subscriber);
    let rows: Vec<Value> = subs
        .iter()
        .filter_map(|s| facts(ex, s))
        // Only connections are 2.x clients.
        .filter_map(|(f, conn)| conn.map(|c| (f, c)))
        .filter(|(f, _)| {
            form.ip.is_none_or(|want| want == f.ip) && form.port.is_none_or(|p| p == f.port)
        })
        .map(|(f, conn)| {
            if v3 {
                json!({"clientId": conn.id, "appName": f.app, "agent": f.agent, "address": f.address})
            } else {
                json!({"clientId": conn.id, "ip": f.ip, "port": f.port})
            }
        })
        .collect();
    data(scratch, &Value::Array(rows))
}

/// v3 `GET /service/subscribers` (`ServiceControllerV3.subscribers`,
/// `ServiceOperatorV2Impl.getSubscribers`): a `Page` of `SubscriberInfo`
/// (`namespaceId, groupName, serviceName, ip, port, agent, appName,
/// address`), 1.x UDP and 2.x alike; with `aggregation` (default true)
/// every member's, gathered as `SubscribeManager` does
/// (`crate::subscriber_list`). A 2.x subscriber is its client's IP
/// with port 0, as Nacos records it.
fn service_subscribers(ex: &Exchange<'_>, _scratch: &mut Scratch) -> Result<Reply, Failure> {
    let key = registry_proto::naming::service::ServiceKey::parse(&ex.params, &ex.app.parse_limits)
        .map_err(api)?;
    let page = SubscriberPage::parse(&ex.params).map_err(api)?;
    let (ns, group, name) = (
        key.namespace_id.to_owned(),
        key.service.group.to_owned(),
        key.service.name.to_owned(),
    );
    let service = ServiceKey::new(key.namespace_id, &key.service.grouped());
    let offset = (page.page_no - 1).saturating_mul(page.page_size);
    let gathering = crate::subscriber_list::gather(
        ex.app,
        &service,
        offset.saturating_add(page.page_size),
        page.aggregation,
    );
    Ok(Reply::Later(Box::pin(async move {
        let g = gathering.await;
        let items: Vec<Value> = g
            .rows
            .iter()
            .skip(offset)
            .take(page.page_size)
            .map(|r| {
                let port = if r.protocol == "grpc" { 0 } else { r.port };
                json!({
                    "namespaceId": ns, "groupName": group, "serviceName": name,
                    "ip": r.ip, "port": port, "agent": r.agent.clone().unwrap_or_default(),
                    "appName": "unknown", "address": format!("{}:{port}", r.ip),
                })
            })
            .collect();
        let value = json!({
            "totalCount": g.count,
            "pageNumber": page.page_no,
            "pagesAvailable": g.count.div_ceil(page.page_size),
            "pageItems": items,
        });
        let mut body = Vec::new();
        envelope::success(&mut body, |o| {
            let _ = serde_json::to_writer(o, &value);
        });
        Ok(crate::http::Done::Json(body))
    })))
}
