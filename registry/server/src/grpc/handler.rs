//! Unary requests (`/Request/request`): one payload in, one payload out.
//!
//! The order of checks is Nacos's: server check first (it needs no connection), then
//! the type (302 for an unknown one), then the connection (301 before setup), then the
//! request's own validation (400) and the store. Every refusal is an `ErrorResponse`
//! payload; a write is either applied whole or not at all (batches go through
//! [`registry_core::Store::register_held`], which checks everything first).

use std::net::SocketAddr;
use std::sync::Arc;

use registry_core::{InstanceAddr, RegistryError, ServiceKey, ServiceRef, Subscriber};
use registry_proto::grpc::message::{
    BatchInstanceResponse, HealthCheckResponse, InstanceResponse, QueryServiceResponse,
    ResponseHead, ServerCheckResponse, ServiceListResponse, SubscribeServiceResponse,
};
use registry_proto::grpc::{
    code, decode, refusal_payload, ClientMessage, InstanceOp, InstanceSpec, Payload, Refusal,
    ServiceId,
};

use super::connection::{connection_id, Connection, OwnedInstance, OwnedSubscription};
use super::convert::{instance_spec, service_info};
use super::Grpc;
use crate::clock::Clock;
use crate::persist::Change;
use crate::state::App;

/// Answers one unary payload from `peer`.
pub async fn handle(app: &Arc<App>, grpc: &Grpc, peer: SocketAddr, payload: &Payload) -> Payload {
    match answer(app, grpc, peer, payload).await {
        Ok(p) => p,
        Err(r) => {
            grpc.metrics.refused.inc();
            refusal_payload(&r)
        }
    }
}

async fn answer(
    app: &Arc<App>,
    grpc: &Grpc,
    peer: SocketAddr,
    payload: &Payload,
) -> Result<Payload, Refusal> {
    let json = payload.json();
    if json.len() > grpc.limits.max_body_bytes {
        return Err(Refusal::new(
            code::OVER_THRESHOLD,
            format!(
                "payload too large: {} bytes, the limit is {}",
                json.len(),
                grpc.limits.max_body_bytes
            ),
        ));
    }
    if grpc.stopping() {
        return Err(Refusal::new(
            code::INVALID_SERVER_STATUS,
            code::STARTING_TEXT,
        ));
    }
    let decoded = decode(payload.type_name(), json, &app.parse_limits)?;
    let id = decoded.request_id;
    if let ClientMessage::ServerCheck = decoded.message {
        if grpc.hub.is_full() {
            return Err(Refusal {
                code: code::OVER_THRESHOLD,
                message: format!(
                    "too many connections: the server holds its limit of {}",
                    grpc.limits.max_connections
                ),
                request_id: id,
            });
        }
        return Ok(Payload::of(&ServerCheckResponse {
            head: ResponseHead::ok(id),
            connection_id: Some(connection_id(peer, Clock::wall_ms())),
            support_ability_negotiation: false,
        }));
    }
    let Some(conn) = grpc.hub.by_peer(peer) else {
        return Err(Refusal {
            code: code::UN_REGISTER,
            message: code::UN_REGISTER_TEXT.into(),
            request_id: id,
        });
    };
    conn.touch(app.clock.now().0);
    // With `--auth-users`, naming requests need the `accessToken` header, as on HTTP
    // (a health check does not: it names no resource; stream-only types get their
    // 302 below, as Nacos finds no handler before its auth filter runs).
    if let (Some(auth), Some(secured)) = (&app.auth, Secured::of(&decoded.message)) {
        if let Err(denied) = auth.check(payload.header("accessToken")) {
            grpc.metrics.refused.inc();
            return Ok(secured.denied(id, denied));
        }
    }
    match decoded.message {
        ClientMessage::HealthCheck => Ok(Payload::of(&HealthCheckResponse {
            head: ResponseHead::ok(id),
        })),
        ClientMessage::Instance {
            service,
            op,
            instance,
            op_name,
            ..
        } => {
            write_instance(app, &conn, &service, op, &instance, &id).await?;
            Ok(Payload::of(&InstanceResponse {
                head: ResponseHead::ok(id),
                r#type: Some(op_name),
            }))
        }
        ClientMessage::BatchInstance {
            service,
            op,
            instances,
            op_name,
        } => {
            batch(app, &conn, &service, op, &instances, &id)?;
            Ok(Payload::of(&BatchInstanceResponse {
                head: ResponseHead::ok(id),
                r#type: Some(op_name),
            }))
        }
        ClientMessage::Subscribe {
            service,
            subscribe,
            clusters,
        } => {
            let key = key(&service);
            if subscribe {
                self::subscribe(app, grpc, &conn, &key, &clusters, &id)?;
            } else {
                unsubscribe(app, &conn, &key, &clusters);
            }
            let snapshot = app.store.snapshot(key.as_ref());
            Ok(Payload::of(&SubscribeServiceResponse {
                head: ResponseHead::ok(id),
                service_info: Some(service_info(&key, snapshot.as_deref(), &clusters, false)),
            }))
        }
        ClientMessage::Query {
            service,
            clusters,
            healthy_only,
        } => {
            let key = key(&service);
            let snapshot = app.store.snapshot(key.as_ref());
            Ok(Payload::of(&QueryServiceResponse {
                head: ResponseHead::ok(id),
                service_info: Some(service_info(
                    &key,
                    snapshot.as_deref(),
                    &clusters,
                    healthy_only,
                )),
            }))
        }
        ClientMessage::ServiceList {
            namespace,
            group,
            page_no,
            page_size,
        } => {
            let page = app
                .store
                .list_services(&namespace, Some(&group), page_no, page_size);
            Ok(Payload::of(&ServiceListResponse {
                head: ResponseHead::ok(id),
                count: page.count as i64,
                service_names: page
                    .services
                    .iter()
                    .map(|k| k.service_name().to_owned())
                    .collect(),
            }))
        }
        // Stream-only messages have no unary handler, as in Nacos.
        ClientMessage::ServerCheck
        | ClientMessage::ConnectionSetup { .. }
        | ClientMessage::NotifyAck(_)
        | ClientMessage::DetectionAck(_) => Err(Refusal {
            code: code::NO_HANDLER,
            message: code::NO_HANDLER_TEXT.into(),
            request_id: id,
        }),
    }
}

/// The requests Nacos's handlers mark `@Secured`: they need a token with auth on.
#[derive(Clone, Copy)]
enum Secured {
    Instance,
    Batch,
    Subscribe,
    Query,
    List,
}

impl Secured {
    fn of(message: &ClientMessage) -> Option<Secured> {
        Some(match message {
            ClientMessage::Instance { .. } => Secured::Instance,
            ClientMessage::BatchInstance { .. } => Secured::Batch,
            ClientMessage::Subscribe { .. } => Secured::Subscribe,
            ClientMessage::Query { .. } => Secured::Query,
            ClientMessage::ServiceList { .. } => Secured::List,
            _ => return None,
        })
    }

    /// Nacos's answer when its auth filter refuses: not an `ErrorResponse` but the
    /// handler's own response type, failed with `NO_RIGHT` (403) and the auth
    /// plugin's result formatted as `Code: 401, Message: <reason>.` (Nacos's
    /// `RemoteRequestAuthFilter` and `AuthResult.format`; an identity failure is 401).
    fn denied(self, request_id: Option<String>, denied: crate::auth::Denied) -> Payload {
        let head = ResponseHead::fail(
            request_id,
            code::NO_RIGHT,
            format!("Code: 401, Message: {denied}."),
        );
        match self {
            Secured::Instance => Payload::of(&InstanceResponse {
                head,
                ..InstanceResponse::default()
            }),
            Secured::Batch => Payload::of(&BatchInstanceResponse {
                head,
                ..BatchInstanceResponse::default()
            }),
            Secured::Subscribe => Payload::of(&SubscribeServiceResponse {
                head,
                ..SubscribeServiceResponse::default()
            }),
            Secured::Query => Payload::of(&QueryServiceResponse {
                head,
                ..QueryServiceResponse::default()
            }),
            Secured::List => Payload::of(&ServiceListResponse {
                head,
                ..ServiceListResponse::default()
            }),
        }
    }
}

fn key(service: &ServiceId) -> ServiceKey {
    ServiceKey::new(&service.namespace, &service.grouped())
}

/// A store refusal as Nacos's codes: limits are 503, the rest 400.
fn store_refusal(e: RegistryError, request_id: &Option<String>) -> Refusal {
    let code = match e {
        RegistryError::TooManyInstances { .. } | RegistryError::TooManyServices { .. } => {
            code::OVER_THRESHOLD
        }
        _ => code::INVALID_PARAM,
    };
    Refusal {
        code,
        message: e.to_string(),
        request_id: request_id.clone(),
    }
}

async fn write_instance(
    app: &Arc<App>,
    conn: &Connection,
    service: &ServiceId,
    op: InstanceOp,
    instance: &InstanceSpec,
    id: &Option<String>,
) -> Result<(), Refusal> {
    let spec = instance_spec(instance, id)?;
    let grouped = service.grouped();
    let svc = ServiceRef::new(&service.namespace, &grouped);
    let now = app.clock.now();
    if !spec.ephemeral {
        return persistent(app, svc, op, &spec, id).await;
    }
    let owned = OwnedInstance {
        service: key(service),
        cluster: Arc::from(spec.addr.cluster),
        ip: spec.addr.ip,
        port: spec.addr.port,
    };
    match op {
        InstanceOp::Register => {
            let written = app
                .store
                .register_held(svc, std::slice::from_ref(&spec), now)
                .map_err(|e| store_refusal(e, id))?;
            app.publish(written.event);
            conn.owned.lock().instances.insert(owned);
        }
        InstanceOp::Deregister => {
            let written = app
                .store
                .deregister(svc, spec.addr, true, now)
                .map_err(|e| store_refusal(e, id))?;
            app.publish(written.event);
            conn.owned.lock().instances.remove(&owned);
        }
    }
    crate::cluster::clients::native_changed(app, conn);
    Ok(())
}

/// A persistent instance: not owned by the connection; with `--data-dir` answered
/// once durable, like the HTTP path.
async fn persistent(
    app: &Arc<App>,
    svc: ServiceRef<'_>,
    op: InstanceOp,
    spec: &registry_core::InstanceSpec<'_>,
    id: &Option<String>,
) -> Result<(), Refusal> {
    let busy = |e: crate::persist::PersistError| Refusal {
        code: code::OVER_THRESHOLD,
        message: e.to_string(),
        request_id: id.clone(),
    };
    // In a Raft cluster the log is the durable record: the write is a
    // command, applied everywhere once committed.
    if let Some(cluster) = &app.cluster {
        if let Some(consensus) = cluster.consensus() {
            let register = op == InstanceOp::Register;
            return crate::cluster::raft::client::grpc_write(
                cluster, consensus, register, svc, spec,
            )
            .await
            .map_err(|message| Refusal {
                code: code::SERVER_ERROR,
                message,
                request_id: id.clone(),
            });
        }
    }
    let ticket = match &app.persist {
        Some(p) => Some(p.reserve().map_err(busy)?),
        None => None,
    };
    let now = app.clock.now();
    let written = match op {
        InstanceOp::Register => app.store.register(svc, spec, now),
        InstanceOp::Deregister => app.store.deregister(svc, spec.addr, false, now),
    }
    .map_err(|e| store_refusal(e, id))?;
    app.publish(written.event);
    if op == InstanceOp::Register {
        app.health_targets.insert(svc);
    }
    let Some(ticket) = ticket else {
        return Ok(());
    };
    let committed = ticket.submit(Change::Instance {
        service: ServiceKey::new(svc.namespace, svc.name),
        cluster: Arc::from(spec.addr.cluster),
        ip: spec.addr.ip,
        port: spec.addr.port,
    });
    match committed.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(busy(e)),
        Err(_) => Err(busy(crate::persist::PersistError::Stopped)),
    }
}

/// `batchRegisterInstance` replaces the connection's instances of the service with the
/// batch (Nacos 2.x semantics); `batchDeregisterInstance` removes the listed ones.
fn batch(
    app: &Arc<App>,
    conn: &Connection,
    service: &ServiceId,
    op: InstanceOp,
    instances: &[InstanceSpec],
    id: &Option<String>,
) -> Result<(), Refusal> {
    let specs = instances
        .iter()
        .map(|i| instance_spec(i, id))
        .collect::<Result<Vec<_>, _>>()?;
    let grouped = service.grouped();
    let svc = ServiceRef::new(&service.namespace, &grouped);
    let service_key = key(service);
    let now = app.clock.now();
    let owned_of = |s: &registry_core::InstanceSpec<'_>| OwnedInstance {
        service: service_key.clone(),
        cluster: Arc::from(s.addr.cluster),
        ip: s.addr.ip,
        port: s.addr.port,
    };
    match op {
        InstanceOp::Register => {
            let written = app
                .store
                .register_held(svc, &specs, now)
                .map_err(|e| store_refusal(e, id))?;
            app.publish(written.event);
            let batch: std::collections::HashSet<OwnedInstance> =
                specs.iter().map(owned_of).collect();
            let stale: Vec<OwnedInstance> = {
                let mut owned = conn.owned.lock();
                let stale = owned
                    .instances
                    .iter()
                    .filter(|o| o.service == service_key && !batch.contains(*o))
                    .cloned()
                    .collect();
                owned.instances.extend(batch);
                stale
            };
            for o in stale {
                deregister_owned(app, conn, &o);
            }
        }
        InstanceOp::Deregister => {
            for s in &specs {
                let written = app
                    .store
                    .deregister(svc, s.addr, true, now)
                    .map_err(|e| store_refusal(e, id))?;
                app.publish(written.event);
                conn.owned.lock().instances.remove(&owned_of(s));
            }
        }
    }
    crate::cluster::clients::native_changed(app, conn);
    Ok(())
}

/// Removes one of a connection's instances through the write path.
pub fn deregister_owned(app: &App, conn: &Connection, o: &OwnedInstance) {
    conn.owned.lock().instances.remove(o);
    let addr = InstanceAddr {
        cluster: &o.cluster,
        ip: o.ip,
        port: o.port,
    };
    // Deregistering cannot fail for a well-formed key; a missing one is a no-op.
    if let Ok(written) = app
        .store
        .deregister(o.service.as_ref(), addr, true, app.clock.now())
    {
        app.publish(written.event);
    }
}

fn subscribe(
    app: &App,
    grpc: &Grpc,
    conn: &Connection,
    service: &ServiceKey,
    clusters: &str,
    id: &Option<String>,
) -> Result<(), Refusal> {
    let sub = OwnedSubscription {
        service: service.clone(),
        clusters: Arc::from(clusters),
    };
    {
        let owned = conn.owned.lock();
        if !owned.subscriptions.contains(&sub)
            && owned.subscriptions.len() >= grpc.limits.max_subscriptions_per_connection
        {
            return Err(Refusal {
                code: code::OVER_THRESHOLD,
                message: format!(
                    "too many subscriptions on this connection: the limit is {}",
                    grpc.limits.max_subscriptions_per_connection
                ),
                request_id: id.clone(),
            });
        }
    }
    let outcome = app.subscribers.subscribe(
        service,
        Subscriber::Connection(conn.number),
        clusters,
        false,
        app.clock.now(),
    );
    app.metrics
        .push
        .subscribers
        .set(app.subscribers.len() as u64);
    if !outcome.is_subscribed() {
        app.metrics.push.subscribe_refused.inc();
        return Err(Refusal {
            code: code::OVER_THRESHOLD,
            message: "too many subscriptions: the server holds its limit".into(),
            request_id: id.clone(),
        });
    }
    conn.owned.lock().subscriptions.insert(sub);
    Ok(())
}

fn unsubscribe(app: &App, conn: &Connection, service: &ServiceKey, clusters: &str) {
    let sub = OwnedSubscription {
        service: service.clone(),
        clusters: Arc::from(clusters),
    };
    conn.owned.lock().subscriptions.remove(&sub);
    app.subscribers.unsubscribe(
        service,
        Subscriber::Connection(conn.number),
        clusters,
        false,
    );
    app.metrics
        .push
        .subscribers
        .set(app.subscribers.len() as u64);
}

/// Removes a connection's subscription (used when it closes).
pub fn unsubscribe_owned(app: &App, conn: &Connection, s: &OwnedSubscription) {
    unsubscribe(app, conn, &s.service, &s.clusters);
}
