//! `/nacos/v1/ns/instance`, `/instance/beat` and `/instance/list`.
//!
//! Writes become [`Command`]s for the one write path ([`crate::write`]);
//! persistent ones (`ephemeral=false`) answer once durable
//! ([`Outcome::Later`]). Beats and lists stay on their own paths: a beat
//! renews a lease and only publishes when it revives an instance.

use std::net::SocketAddr;

use registry_core::{
    BeatOutcome, InstanceAddr, InstancePatch, InstanceSpec, ServiceKey, ServiceRef, Subscriber,
};
use registry_proto::naming::beat::{beat_not_found, beat_ok, BeatRequest};
use registry_proto::naming::instance::{
    InstanceDetailView, InstanceKey, InstancePatch as PatchRequest, InstanceRequest,
};
use registry_proto::naming::list::ListRequest;
use registry_proto::naming::ServiceName;

use super::error::{self, registry, Failure, Op};
use super::{later, Done, Exchange, Reply, Scratch};
use crate::convert::{self, encode_list, ListView, MetadataJson};
use crate::list_cache::ListCache;
use crate::write::legacy::strict_update;
use crate::write::{Command, Outcome, Pending};

/// `cacheMillis` for a client that only polls (Nacos `defaultCacheMillis`).
const POLL_CACHE_MILLIS: u64 = 3_000;
use crate::notifier::PUSH_CACHE_MILLIS;

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
    let strict = strict_update(ex.request.user_agent());
    write(ex, &req, strict, scratch)
}

fn write(
    ex: &Exchange<'_>,
    req: &InstanceRequest<'_>,
    strict: bool,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    crate::gate_test::slow_handler();
    let spec = convert::instance_spec(req, true)?;
    // The connection's buffer, not a fresh `String` per register.
    grouped(&req.key.service, &mut scratch.name);
    let name = &scratch.name;
    let svc = ServiceRef::new(req.key.namespace_id, name);
    let command = Command::Register {
        service: svc,
        instance: &spec,
        strict,
    };
    match ex.app.writer.apply(command, ex.now) {
        Ok(Outcome::Done(_)) => Ok(Reply::Text("ok")),
        Ok(Outcome::Later(pending)) => {
            let (namespace, service) = (svc.namespace.to_owned(), name.clone());
            let instance = req.key.instance_id();
            Ok(later(pending, Done::Text("ok"), move |e| {
                error::write(
                    e,
                    Op::Write {
                        namespace: &namespace,
                        service: &service,
                        instance: &instance,
                    },
                )
            }))
        }
        Err(e) => Err(error::write(
            e,
            Op::Write {
                namespace: req.key.namespace_id,
                service: name,
                instance: &req.key.instance_id(),
            },
        )),
    }
}

/// A write whose refusals read as a patch's (`instance not found`).
fn patch_like(ex: &Exchange<'_>, command: Command<'_>) -> Result<Reply, Failure> {
    match ex.app.writer.apply(command, ex.now) {
        Ok(Outcome::Done(_)) => Ok(Reply::Text("ok")),
        Ok(Outcome::Later(pending)) => Ok(later(pending, Done::Text("ok"), |e| {
            error::write(e, Op::Patch)
        })),
        Err(e) => Err(error::write(e, Op::Patch)),
    }
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
    patch_like(
        ex,
        Command::Deregister {
            service: ServiceRef::new(key.namespace_id, &name),
            addr,
            ephemeral: key.ephemeral.unwrap_or(true),
        },
    )
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
    // Without `ephemeral` the write path patches the ephemeral instance at
    // the address if there is one, else the persistent one.
    patch_like(
        ex,
        Command::Patch {
            service: ServiceRef::new(req.key.namespace_id, &name),
            addr,
            ephemeral: req.key.ephemeral,
            patch: &patch,
        },
    )
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
            app.writer.publish_revived(event);
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
                let command = Command::Register {
                    service: svc,
                    instance: &spec,
                    strict: false,
                };
                let render = |e| {
                    error::write(
                        e,
                        Op::Write {
                            namespace: req.namespace_id,
                            service: &scratch.name,
                            instance: "",
                        },
                    )
                };
                match app.writer.apply(command, now).map_err(render)? {
                    Outcome::Done(_) => spec_interval(app, &spec),
                    Outcome::Later(pending) => {
                        return Ok(beat_persistent(ex, svc, &spec, pending, &mut scratch.body))
                    }
                }
            }
        },
    };
    app.metrics.beats.inc();
    beat_ok(&mut scratch.body, u64::from(interval), true);
    Ok(Reply::Json)
}

/// A beat whose body registered a persistent instance (rare: the Java
/// client only beats ephemeral ones): answered once durable, like any
/// persistent write.
fn beat_persistent(
    ex: &Exchange<'_>,
    svc: ServiceRef<'_>,
    spec: &InstanceSpec<'_>,
    pending: Pending,
    body: &mut Vec<u8>,
) -> Reply {
    let app = ex.app;
    app.metrics.beats.inc();
    beat_ok(body, u64::from(spec_interval(app, spec)), true);
    let (namespace, service) = (svc.namespace.to_owned(), svc.name.to_owned());
    later(pending, Done::Json(body.clone()), move |e| {
        error::write(
            e,
            Op::Write {
                namespace: &namespace,
                service: &service,
                instance: "",
            },
        )
    })
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
