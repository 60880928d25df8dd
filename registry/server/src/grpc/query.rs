//! The 2.x read answers: `ServiceQueryRequest` and the state a
//! `SubscribeServiceRequest` answers with.
//!
//! A `serviceInfo` is encoded at most once per (service, revision, view) while it
//! is cached, in the same [`ListCache`] as the 1.x list bodies (its keys end in
//! `g`, so a 2.x body is never served to a 1.x reader: the two shapes differ).
//! The cached bytes are the `serviceInfo` object only; each answer writes its own
//! head and splices the cached object in ([`ResponseHead::encode_with`]), and the
//! handler sets the request's id ([`Payload::answering`]): no re-encoding.
//!
//! `lastRefTime` is the time of the encoding, so answers of one revision carry the
//! same value: a client dropping a `lastRefTime` that is not newer drops only a
//! state it already holds. A newer revision is encoded after it exists, so its
//! value is newer than any encoding of an older revision made before it.

use std::sync::Arc;

use registry_convert::grpc::{encode_service_info, InfoView};
use registry_core::ServiceKey;
use registry_proto::grpc::message::{
    Message, QueryServiceResponse, ResponseHead, SubscribeServiceResponse,
};
use registry_proto::grpc::Payload;

use crate::list_cache::{CachedList, ListCache};
use crate::service_info::{next_ref_time, CACHE_MILLIS};
use crate::state::App;

/// The `QueryServiceResponse` to a query of `service`.
pub fn query(app: &App, service: &ServiceKey, clusters: &str, healthy_only: bool) -> Payload {
    let info = service_info(app, service, clusters, healthy_only);
    answer::<QueryServiceResponse>(&info)
}

/// The `SubscribeServiceResponse` to a (un)subscription of `service`.
pub fn subscribed(app: &App, service: &ServiceKey, clusters: &str) -> Payload {
    let info = service_info(app, service, clusters, false);
    answer::<SubscribeServiceResponse>(&info)
}

/// Without the request's id: [`super::handler::handle`] sets it.
fn answer<T: Message>(info: &CachedList) -> Payload {
    let json = ResponseHead::ok(None).encode_with("serviceInfo", &info.body);
    Payload::new(T::TYPE, json)
}

/// The `serviceInfo` JSON of the service's current revision for a view, cached.
fn service_info(
    app: &App,
    service: &ServiceKey,
    clusters: &str,
    healthy_only: bool,
) -> Arc<CachedList> {
    let snapshot = app.store.snapshot(service.as_ref());
    let revision = snapshot.as_ref().map_or(0, |s| s.revision());
    let mut key = String::with_capacity(
        service.namespace().len() + service.grouped_name().len() + clusters.len() + 6,
    );
    ListCache::key(
        &mut key,
        service.namespace(),
        service.grouped_name(),
        clusters,
        healthy_only,
        false,
    );
    key.push('g');
    if let Some(hit) = app.lists.get(&key, revision) {
        return hit;
    }
    let cluster_list: Vec<&str> = clusters
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let view = InfoView {
        service,
        clusters,
        cluster_list: &cluster_list,
        healthy_only,
        cache_millis: CACHE_MILLIS,
        last_ref_time: next_ref_time(),
    };
    let mut body = Vec::with_capacity(512);
    encode_service_info(snapshot.as_deref(), &view, &mut body);
    app.lists.put(&key, revision, body)
}
