//! `/nacos/v1/ns/service` and `/service/list`.
//!
//! Service create, update and delete are persistent writes (Nacos keeps
//! service metadata durable): answered once committed, see [`super::durable`].

use std::sync::Arc;

use registry_core::{ServiceKey as CoreKey, ServiceRef, ServiceSpec};
use registry_proto::naming::service::{
    encode_service_list, ClusterView, Selector, ServiceDetailView, ServiceKey, ServiceListRequest,
    ServiceRequest, ALL_GROUPS,
};

use super::error::{registry, Failure, Op};
use super::{durable, reserve, Exchange, Reply, Scratch};
use crate::convert::{self, MetadataJson};
use crate::persist::Change;

fn service_change(namespace: &str, grouped: &str, settings: bool) -> Change {
    Change::Service {
        service: CoreKey::new(namespace, grouped),
        settings,
    }
}

fn selector_text(selector: &Selector) -> Option<Arc<str>> {
    match selector {
        Selector::None => None,
        other => serde_json::to_string(other).ok().map(Arc::from),
    }
}

/// `POST /service`: create a service explicitly.
pub(crate) fn create(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let req = ServiceRequest::parse_create(&ex.params, &ex.app.parse_limits)?;
    let name = req.key.service.grouped();
    let spec = ServiceSpec {
        protect_threshold: req.protect_threshold,
        metadata: convert::metadata(&req.metadata)?,
        selector: selector_text(&req.selector),
    };
    let ticket = reserve(ex.app)?;
    let written = ex
        .app
        .store
        .create_service(ServiceRef::new(req.key.namespace_id, &name), &spec, ex.now)
        .map_err(|e| registry(e, Op::ServiceCreate { service: &name }))?;
    ex.app.publish(written.event);
    let namespace = req.key.namespace_id;
    Ok(durable(ticket, || service_change(namespace, &name, true)))
}

/// `PUT /service`: replace threshold, metadata and selector, as Nacos 1.4 does.
pub(crate) fn update(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let req = ServiceRequest::parse_update(&ex.params, &ex.app.parse_limits)?;
    let name = req.key.service.grouped();
    // Nacos 1.4 always replaces the selector: absent or `none` clears it.
    let selector =
        Some(selector_text(&req.selector).unwrap_or_else(|| Arc::from(r#"{"type":"none"}"#)));
    let ticket = reserve(ex.app)?;
    let written = ex
        .app
        .store
        .update_service(
            ServiceRef::new(req.key.namespace_id, &name),
            req.protect_threshold,
            Some(convert::metadata(&req.metadata)?),
            selector,
            ex.now,
        )
        .map_err(|e| registry(e, Op::ServiceUpdate { service: &name }))?;
    ex.app.publish(written.event);
    let namespace = req.key.namespace_id;
    Ok(durable(ticket, || service_change(namespace, &name, true)))
}

/// `DELETE /service`: remove a service and its instances (Nacos 1.4.8).
pub(crate) fn delete(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let key = ServiceKey::parse(&ex.params, &ex.app.parse_limits)?;
    let name = key.service.grouped();
    let ticket = reserve(ex.app)?;
    let written = ex
        .app
        .store
        .delete_service(ServiceRef::new(key.namespace_id, &name))
        .map_err(|e| registry(e, Op::ServiceDelete { service: &name }))?;
    ex.app.publish(written.event);
    let namespace = key.namespace_id;
    Ok(durable(ticket, || service_change(namespace, &name, false)))
}

/// `GET /service`: service detail.
pub(crate) fn detail(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let key = ServiceKey::parse(&ex.params, &ex.app.parse_limits)?;
    let name = key.service.grouped();
    let Some(snap) = ex
        .app
        .store
        .snapshot(ServiceRef::new(key.namespace_id, &name))
    else {
        return Err(Failure::no_such_service(&name));
    };
    let selector = Selector::parse(snap.selector()).unwrap_or_default();
    let no_metadata = registry_core::Metadata::empty();
    let clusters: Vec<ClusterView<'_, MetadataJson<'_>>> = snap
        .cluster_names()
        .into_iter()
        .map(|name| ClusterView {
            name,
            metadata: MetadataJson(&no_metadata),
        })
        .collect();
    let view = ServiceDetailView {
        service: key.service,
        namespace_id: key.namespace_id,
        protect_threshold: snap.protect_threshold(),
        metadata: MetadataJson(snap.metadata()),
        selector: &selector,
        clusters: &clusters,
    };
    let _ = view.encode(&mut scratch.body);
    Ok(Reply::Json)
}

/// `GET /service/list`: a page of service names, ungrouped.
pub(crate) fn list(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let req = ServiceListRequest::parse(&ex.params, &ex.app.parse_limits)?;
    let group = (req.group != ALL_GROUPS).then_some(req.group);
    let page = ex.app.store.list_services(
        req.namespace_id,
        group,
        req.page_no as usize,
        req.page_size as usize,
    );
    // Nacos removes `group@@` from the names of a one-group page; for `*`
    // the replace matches nothing and names stay grouped (1.4.x
    // ServiceController.list), which also keeps them distinct.
    let names = page.services.iter().map(|k| {
        if group.is_some() {
            k.service_name()
        } else {
            k.grouped_name()
        }
    });
    encode_service_list(&mut scratch.body, page.count, names);
    Ok(Reply::Json)
}
