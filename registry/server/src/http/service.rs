//! `/nacos/v1/ns/service` and `/service/list`.
//!
//! Service create, update and delete are persistent writes (Nacos keeps
//! service metadata durable) through [`crate::write`]: answered once
//! committed.

use registry_core::{ServiceRef, ServiceSpec};
use registry_proto::naming::service::{
    encode_service_list, ClusterView, Selector, ServiceDetailView, ServiceKey, ServiceListRequest,
    ServiceRequest, ALL_GROUPS,
};

use super::error::{self, Failure, Op};
use super::{later, Done, Exchange, Reply, Scratch};
use crate::convert::{self, MetadataJson};
use crate::write::legacy::{selector_text, update_selector};
use crate::write::{Command, Outcome};

/// A service write's answer: `ok` once durable.
fn answer(
    ex: &Exchange<'_>,
    command: Command<'_>,
    op: impl Fn(&str) -> Op<'_> + Send + 'static,
) -> Result<Reply, Failure> {
    let name = command.service().name;
    match ex.app.writer.apply(command, ex.now) {
        Ok(Outcome::Done(_)) => Ok(Reply::Text("ok")),
        Ok(Outcome::Later(pending)) => {
            let name = name.to_owned();
            Ok(later(pending, Done::Text("ok"), move |e| {
                error::write(e, op(&name))
            }))
        }
        Err(e) => Err(error::write(e, op(name))),
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
    let command = Command::ServiceCreate {
        service: ServiceRef::new(req.key.namespace_id, &name),
        spec: &spec,
    };
    answer(ex, command, |service| Op::ServiceCreate { service })
}

/// `PUT /service`: replace threshold, metadata and selector, as Nacos 1.4 does.
pub(crate) fn update(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let req = ServiceRequest::parse_update(&ex.params, &ex.app.parse_limits)?;
    let name = req.key.service.grouped();
    let selector = update_selector(&req.selector);
    let metadata = convert::metadata(&req.metadata)?;
    let command = Command::ServiceUpdate {
        service: ServiceRef::new(req.key.namespace_id, &name),
        protect_threshold: req.protect_threshold,
        metadata: Some(&metadata),
        selector: Some(&selector),
    };
    answer(ex, command, |service| Op::ServiceUpdate { service })
}

/// `DELETE /service`: remove a service and its instances (Nacos 1.4.8).
pub(crate) fn delete(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let key = ServiceKey::parse(&ex.params, &ex.app.parse_limits)?;
    let name = key.service.grouped();
    let command = Command::ServiceDelete {
        service: ServiceRef::new(key.namespace_id, &name),
    };
    answer(ex, command, |service| Op::ServiceDelete { service })
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
