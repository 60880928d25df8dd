//! `/nacos/v1/ns/instance`, `/instance/beat` and `/instance/list`.
//!
//! Writes of persistent instances (`ephemeral=false`) reserve a place in
//! the next commit before touching the store and answer once the commit is
//! durable ([`super::durable`]); ephemeral writes, beats and lists are
//! unchanged: synchronous, with no lock or allocation added.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use registry_core::{
    BeatOutcome, InstanceAddr, InstancePatch, InstanceSpec, ServiceKey, ServiceRef, Subscriber,
};
use registry_proto::naming::beat::{beat_not_found, beat_ok, BeatRequest};
use registry_proto::naming::instance::{
    InstanceDetailView, InstanceKey, InstancePatch as PatchRequest, InstanceRequest,
};
use registry_proto::naming::list::ListRequest;
use registry_proto::naming::ServiceName;

use super::error::{registry, Failure, Op};
use super::{durable, durable_with, reserve, Done, Exchange, Reply, Scratch};
use crate::convert::{self, encode_list, ListView, MetadataJson};
use crate::list_cache::ListCache;
use crate::persist::Change;

/// `cacheMillis` for a client that only polls (Nacos `defaultCacheMillis`).
const POLL_CACHE_MILLIS: u64 = 3_000;
/// `cacheMillis` for a push subscriber (Nacos `defaultPushCacheMillis`).
pub(crate) const PUSH_CACHE_MILLIS: u64 = 10_000;

fn grouped(service: &ServiceName<'_>, into: &mut String) {
    into.clear();
    service.write_grouped(into);
}

/// `POST /instance`: register (upsert).
pub(crate) fn register(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let req = InstanceRequest::parse(&ex.params, &ex.app.parse_limits)?;
    write(ex, &req, false, scratch)
}

/// `PUT /instance`: update. Strict for Java clients ≥ 1.0.0 (and the Node
/// client, which presents itself as one); an upsert for others, as in Nacos.
pub(crate) fn update(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let req = InstanceRequest::parse(&ex.params, &ex.app.parse_limits)?;
    let strict = ex.request.user_agent().is_some_and(|ua| {
        ua.starts_with("Nacos-Java-Client:v") && !ua.starts_with("Nacos-Java-Client:v0.")
    });
    write(ex, &req, strict, scratch)
}

/// The change record of a persistent instance.
fn instance_change(svc: ServiceRef<'_>, cluster: &str, ip: IpAddr, port: u16) -> Change {
    Change::Instance {
        service: ServiceKey::new(svc.namespace, svc.name),
        cluster: Arc::from(cluster),
        ip,
        port,
    }
}

fn write(
    ex: &Exchange<'_>,
    req: &InstanceRequest<'_>,
    strict: bool,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    let spec = convert::instance_spec(req, true)?;
    let ticket = if spec.ephemeral {
        None
    } else {
        reserve(ex.app)?
    };
    // The connection's buffer, not a fresh `String` per register.
    grouped(&req.key.service, &mut scratch.name);
    let name = &scratch.name;
    let svc = ServiceRef::new(req.key.namespace_id, name);
    let now = ex.now;
    let result = if strict {
        ex.app.store.update(svc, &spec, now)
    } else {
        ex.app.store.register(svc, &spec, now)
    };
    let written = result.map_err(|e| {
        registry(
            e,
            Op::Write {
                namespace: req.key.namespace_id,
                service: name,
                instance: &req.key.instance_id(),
            },
        )
    })?;
    ex.app.publish(written.event);
    if spec.ephemeral {
        return Ok(Reply::Text("ok"));
    }
    ex.app.health_targets.insert(svc);
    let a = spec.addr;
    Ok(durable(ticket, || {
        instance_change(svc, a.cluster, a.ip, a.port)
    }))
}

/// `DELETE /instance`: deregister; `ok` even when there was nothing to remove.
pub(crate) fn deregister(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let key = InstanceKey::parse(&ex.params, &ex.app.parse_limits)?;
    let name = key.service.grouped();
    let addr = InstanceAddr {
        cluster: key.cluster,
        ip: convert::ip(key.ip)?,
        port: key.port,
    };
    let ephemeral = key.ephemeral.unwrap_or(true);
    let ticket = if ephemeral { None } else { reserve(ex.app)? };
    let svc = ServiceRef::new(key.namespace_id, &name);
    let written = ex
        .app
        .store
        .deregister(svc, addr, ephemeral, ex.now)
        .map_err(|e| registry(e, Op::Patch))?;
    ex.app.publish(written.event);
    if ephemeral {
        return Ok(Reply::Text("ok"));
    }
    Ok(durable(ticket, || {
        instance_change(svc, addr.cluster, addr.ip, addr.port)
    }))
}

/// `PATCH /instance`: change only the given fields.
pub(crate) fn patch(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let req = PatchRequest::parse(&ex.params, &ex.app.parse_limits)?;
    let name = req.key.service.grouped();
    let addr = InstanceAddr {
        cluster: req.key.cluster,
        ip: convert::ip(req.key.ip)?,
        port: req.key.port,
    };
    let patch = InstancePatch {
        weight: req.weight,
        enabled: req.enabled,
        healthy: req.healthy,
        metadata: req.metadata.as_ref().map(convert::metadata).transpose()?,
    };
    let svc = ServiceRef::new(req.key.namespace_id, &name);
    // Without `ephemeral` the store patches the ephemeral instance at the
    // address if there is one, else the persistent one: decide the same way.
    let persistent = match req.key.ephemeral {
        Some(e) => !e,
        None => ex
            .app
            .store
            .read(svc, |s| s.find(addr, true).is_none())
            .unwrap_or(false),
    };
    let ticket = if persistent { reserve(ex.app)? } else { None };
    let written = ex
        .app
        .store
        .patch(svc, addr, req.key.ephemeral, &patch, ex.now)
        .map_err(|e| registry(e, Op::Patch))?;
    ex.app.publish(written.event);
    if !persistent {
        return Ok(Reply::Text("ok"));
    }
    Ok(durable(ticket, || {
        instance_change(svc, addr.cluster, addr.ip, addr.port)
    }))
}

/// `GET /instance`: one instance.
pub(crate) fn detail(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let key = InstanceKey::parse(&ex.params, &ex.app.parse_limits)?;
    grouped(&key.service, &mut scratch.name);
    let addr = InstanceAddr {
        cluster: key.cluster,
        ip: convert::ip(key.ip)?,
        port: key.port,
    };
    let inst = ex
        .app
        .store
        .instance(ServiceRef::new(key.namespace_id, &scratch.name), addr)
        .map_err(|e| {
            registry(
                e,
                Op::Detail {
                    service: &scratch.name,
                    cluster: key.cluster,
                },
            )
        })?;
    let ip = inst.ip.to_string();
    let view = InstanceDetailView {
        service: key.service,
        ip: &ip,
        port: inst.port,
        cluster_name: &inst.cluster,
        weight: inst.weight,
        healthy: inst.healthy,
        instance_id: None,
        metadata: MetadataJson(&inst.metadata),
    };
    let _ = view.encode(&mut scratch.body);
    Ok(Reply::Json)
}

/// `PUT /instance/beat`: renew a lease; `20404` for an unknown instance
/// unless the beat body lets us register it again (as Nacos does).
pub(crate) fn beat(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let req = BeatRequest::parse(&ex.params, &ex.app.parse_limits)?;
    grouped(&req.service, &mut scratch.name);
    let svc = ServiceRef::new(req.namespace_id, &scratch.name);
    let addr = InstanceAddr {
        cluster: &req.cluster,
        ip: convert::ip(&req.ip)?,
        port: req.port,
    };
    let app = ex.app;
    let now = ex.now;
    let interval = match app.store.beat(svc, addr, now) {
        BeatOutcome::Renewed { interval_ms } => interval_ms,
        BeatOutcome::Revived { interval_ms, event } => {
            app.publish(Some(event));
            interval_ms
        }
        BeatOutcome::NotFound => match &req.beat {
            None => {
                app.metrics.beats_not_found.inc();
                beat_not_found(&mut scratch.body, u64::from(app.config.beat_interval_ms));
                return Ok(Reply::Json);
            }
            Some(body) => {
                // "Perform data compensation": register from the beat body,
                // whose fields only this rare path decodes.
                let info = body.info(&app.parse_limits)?;
                let spec = InstanceSpec {
                    weight: info.weight,
                    ephemeral: info.ephemeral,
                    metadata: convert::metadata(&info.metadata)?,
                    ..InstanceSpec::new(addr.cluster, addr.ip, addr.port)
                };
                if !spec.ephemeral {
                    return beat_persistent(ex, svc, &spec, &mut scratch.body);
                }
                let written = app.store.register(svc, &spec, now).map_err(|e| {
                    registry(
                        e,
                        Op::Write {
                            namespace: req.namespace_id,
                            service: &scratch.name,
                            instance: "",
                        },
                    )
                })?;
                app.publish(written.event);
                spec_interval(app, &spec)
            }
        },
    };
    app.metrics.beats.inc();
    beat_ok(&mut scratch.body, u64::from(interval), true);
    Ok(Reply::Json)
}

/// A beat whose body registers a persistent instance (rare: the Java
/// client only beats ephemeral ones): a persistent write like any other.
fn beat_persistent(
    ex: &Exchange<'_>,
    svc: ServiceRef<'_>,
    spec: &InstanceSpec<'_>,
    body: &mut Vec<u8>,
) -> Result<Reply, Failure> {
    let app = ex.app;
    let ticket = reserve(app)?;
    let written = app.store.register(svc, spec, ex.now).map_err(|e| {
        registry(
            e,
            Op::Write {
                namespace: svc.namespace,
                service: svc.name,
                instance: "",
            },
        )
    })?;
    app.publish(written.event);
    app.health_targets.insert(svc);
    app.metrics.beats.inc();
    beat_ok(body, u64::from(spec_interval(app, spec)), true);
    let a = spec.addr;
    Ok(durable_with(
        ticket,
        || instance_change(svc, a.cluster, a.ip, a.port),
        Done::Json(body.clone()),
        Reply::Json,
    ))
}

fn spec_interval(app: &crate::state::App, spec: &InstanceSpec<'_>) -> u32 {
    registry_core::LeaseTimeouts::from_metadata(&spec.metadata, app.store.config().timeouts)
        .map_or(app.config.beat_interval_ms, |t| t.beat_interval_ms)
}

/// `GET /instance/list`: the instance list, cached per revision and view;
/// with `udpPort`, also subscribes the HTTP peer to pushes.
pub(crate) fn list(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let req = ListRequest::parse(&ex.params, &ex.app.parse_limits)?;
    let app = ex.app;
    grouped(&req.service, &mut scratch.name);
    let subscribed = req.udp_port > 0 && subscribe(ex, &req, &scratch.name);
    let snapshot = app
        .store
        .snapshot(ServiceRef::new(req.namespace_id, &scratch.name));
    let revision = snapshot.as_ref().map_or(0, |s| s.revision());
    ListCache::key(
        &mut scratch.key,
        req.namespace_id,
        &scratch.name,
        req.clusters,
        req.healthy_only,
        subscribed,
    );
    if let Some(hit) = app.lists.get(&scratch.key, revision) {
        return Ok(Reply::Cached(hit));
    }
    let clusters: Vec<&str> = req.cluster_list().collect();
    let view = ListView {
        service: req.service,
        clusters: req.clusters,
        cluster_list: &clusters,
        healthy_only: req.healthy_only,
        cache_millis: if subscribed {
            PUSH_CACHE_MILLIS
        } else {
            POLL_CACHE_MILLIS
        },
        last_ref_time: crate::clock::Clock::wall_ms(),
    };
    let mut body = Vec::with_capacity(512);
    encode_list(snapshot.as_deref(), &view, &mut body);
    Ok(Reply::Cached(app.lists.put(&scratch.key, revision, body)))
}

/// Subscribes the HTTP peer's address at `udpPort` (never `clientIP`:
/// that would let any caller aim our pushes at a third party).
fn subscribe(ex: &Exchange<'_>, req: &ListRequest<'_>, grouped: &str) -> bool {
    let app = ex.app;
    let target = Subscriber::Udp(SocketAddr::new(ex.peer.ip(), req.udp_port));
    let key = ServiceKey::new(req.namespace_id, grouped);
    let subs = &app.subscribers;
    let outcome = subs.subscribe(&key, target, req.clusters, req.healthy_only, ex.now);
    app.metrics.push.subscribers.set(subs.len() as u64);
    if !outcome.is_subscribed() {
        app.metrics.push.subscribe_refused.inc();
    }
    outcome.is_subscribed()
}
