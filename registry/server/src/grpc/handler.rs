//! Unary requests (`/Request/request`): one payload in, one payload out.
//!
//! The order of checks is Nacos's: server check first (it needs no connection), then
//! the type (302 for an unknown one), then the connection (301 before setup), then the
//! request's own validation (400) and the store. Every refusal is an `ErrorResponse`
//! payload. Writes are [`Command`]s for the one write path ([`crate::write`]);
//! a write is either applied whole or not at all (ephemeral registers are a
//! [`Command::Replace`], which checks everything first).

use std::collections::HashSet;
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

use super::convert::instance_spec;
use crate::clock::Clock;
use crate::hub::Grpc;
use crate::hub::{connection_id, Connection, OwnedInstance, OwnedSubscription};
use crate::state::App;
use crate::write::{Command, Outcome, WriteError};

/// Answers one unary payload from `peer`. This is where the answer gets the
/// request's id ([`Payload::answering`]): the functions below build answers and
/// refusals without it.
pub async fn handle(app: &Arc<App>, grpc: &Grpc, peer: SocketAddr, payload: &Payload) -> Payload {
    let (id, answered) = match admit(app, grpc, payload) {
        Ok(decoded) => {
            let id = decoded.request_id;
            (id, answer(app, grpc, peer, payload, decoded.message).await)
        }
        // The decoder names the id when it could read one.
        Err(r) => (r.request_id.clone(), Err(r)),
    };
    match answered {
        Ok(p) => p.answering(id.as_deref()),
        Err(r) => {
            grpc.metrics.refused.inc();
            refusal_payload(&Refusal {
                request_id: id,
                ..r
            })
        }
    }
}

/// The checks before a payload is read: its size and the server's state; then
/// the decoded request.
fn admit(
    app: &App,
    grpc: &Grpc,
    payload: &Payload,
) -> Result<registry_proto::grpc::Decoded, Refusal> {
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
    // Stopping, or a cluster node that has not taken its peers' state yet: a
    // node restarted into a running cluster would otherwise accept the 2.x
    // clients' server check, connection and redo, and answer their queries and
    // subscriptions from an empty store. Nacos refuses every request, server
    // check included, with INVALID_SERVER_STATUS until the server has started
    // (core/remote/grpc/GrpcRequestAcceptor.java, `ApplicationUtils.isStarted`);
    // here "started" also means the Distro snapshot is loaded, the readiness
    // Nacos's HTTP door enforces (naming/cluster/ServerStatusManager.java,
    // `distroProtocol.isInitialized()`). A client refused the check tries its
    // next server, as Nacos's RpcClient does.
    let unready = app.cluster.as_ref().is_some_and(|c| !c.is_ready());
    if grpc.stopping() || unready {
        return Err(Refusal::new(
            code::INVALID_SERVER_STATUS,
            code::STARTING_TEXT,
        ));
    }
    decode(payload.type_name(), json, &app.parse_limits)
}

async fn answer(
    app: &Arc<App>,
    grpc: &Grpc,
    peer: SocketAddr,
    payload: &Payload,
    message: ClientMessage,
) -> Result<Payload, Refusal> {
    if let ClientMessage::ServerCheck = message {
        return server_check(grpc, peer);
    }
    let Some(conn) = grpc.hub.by_peer(peer) else {
        return Err(Refusal::new(code::UN_REGISTER, code::UN_REGISTER_TEXT));
    };
    conn.touch(app.clock.now().0);
    // With `--auth-users`, naming requests need the `accessToken` header, as on HTTP
    // (a health check does not: it names no resource; stream-only types get their
    // 302 below, as Nacos finds no handler before its auth filter runs).
    if let (Some(auth), Some(secured)) = (&app.auth, Secured::of(&message)) {
        if let Err(denied) = auth.check(payload.header("accessToken")) {
            grpc.metrics.refused.inc();
            return Ok(secured.denied(denied));
        }
    }
    serve(app, grpc, &conn, message).await
}

/// `ServerCheckRequest`: needs no connection; refused when the hub is full.
fn server_check(grpc: &Grpc, peer: SocketAddr) -> Result<Payload, Refusal> {
    if grpc.hub.is_full() {
        return Err(Refusal::new(
            code::OVER_THRESHOLD,
            format!(
                "too many connections: the server holds its limit of {}",
                grpc.limits.max_connections
            ),
        ));
    }
    Ok(Payload::of(&ServerCheckResponse {
        head: ResponseHead::ok(None),
        connection_id: Some(connection_id(peer, Clock::wall_ms())),
        support_ability_negotiation: false,
    }))
}

/// A set-up connection's admitted request, by type.
async fn serve(
    app: &Arc<App>,
    grpc: &Grpc,
    conn: &Connection,
    message: ClientMessage,
) -> Result<Payload, Refusal> {
    match message {
        ClientMessage::HealthCheck => Ok(Payload::of(&HealthCheckResponse {
            head: ResponseHead::ok(None),
        })),
        ClientMessage::Instance {
            service,
            op,
            instance,
            op_name,
            ..
        } => {
            write_instance(app, conn, &service, op, &instance).await?;
            Ok(Payload::of(&InstanceResponse {
                head: ResponseHead::ok(None),
                r#type: Some(op_name),
            }))
        }
        ClientMessage::BatchInstance {
            service,
            op,
            instances,
            op_name,
        } => {
            batch(app, conn, &service, op, &instances).await?;
            Ok(Payload::of(&BatchInstanceResponse {
                head: ResponseHead::ok(None),
                r#type: Some(op_name),
            }))
        }
        ClientMessage::Subscribe {
            service,
            subscribe,
            clusters,
        } => subscription(app, grpc, conn, &service, subscribe, &clusters),
        ClientMessage::Query {
            service,
            clusters,
            healthy_only,
        } => {
            let key = key(&service);
            Ok(super::query::query(app, &key, &clusters, healthy_only))
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
                head: ResponseHead::ok(None),
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
        | ClientMessage::DetectionAck(_) => {
            Err(Refusal::new(code::NO_HANDLER, code::NO_HANDLER_TEXT))
        }
    }
}

/// `SubscribeServiceRequest`: (un)subscribes, answers the service as it is.
fn subscription(
    app: &App,
    grpc: &Grpc,
    conn: &Connection,
    service: &ServiceId,
    on: bool,
    clusters: &str,
) -> Result<Payload, Refusal> {
    let key = key(service);
    if on {
        subscribe(app, grpc, conn, &key, clusters)?;
    } else {
        unsubscribe(app, conn, &key, clusters);
    }
    Ok(super::query::subscribed(app, &key, clusters))
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
    fn denied(self, denied: crate::auth::Denied) -> Payload {
        let head = ResponseHead::fail(
            None,
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
fn store_refusal(e: RegistryError) -> Refusal {
    let code = match e {
        RegistryError::TooManyInstances { .. } | RegistryError::TooManyServices { .. } => {
            code::OVER_THRESHOLD
        }
        _ => code::INVALID_PARAM,
    };
    Refusal::new(code, e.to_string())
}

/// A refused write as Nacos's codes: a full commit queue is 503, a Raft
/// log that did not take it 500, the store's refusals as [`store_refusal`].
fn write_refusal(e: WriteError) -> Refusal {
    let code = match e {
        WriteError::Store(e) => return store_refusal(e),
        WriteError::Persist(_) => code::OVER_THRESHOLD,
        WriteError::Log(_)
        | WriteError::TooLarge { .. }
        | WriteError::Invalid(_)
        | WriteError::Namespace(_) => code::SERVER_ERROR,
    };
    Refusal::new(code, e.to_string())
}

/// Waits for a write to be durable where it has to be (persistent
/// instances: with `--data-dir` or in a Raft cluster, like the HTTP path).
async fn settle(applied: Result<Outcome, WriteError>) -> Result<(), Refusal> {
    match applied.map_err(write_refusal)? {
        Outcome::Done(_) => Ok(()),
        Outcome::Later(pending) => pending.await.map(drop).map_err(write_refusal),
    }
}

/// One instance. An ephemeral one is owned by the connection (removed when
/// it closes); a persistent one is not.
async fn write_instance(
    app: &Arc<App>,
    conn: &Connection,
    service: &ServiceId,
    op: InstanceOp,
    instance: &InstanceSpec,
) -> Result<(), Refusal> {
    crate::gate_test::slow_handler();
    let spec = instance_spec(instance)?;
    let grouped = service.grouped();
    let svc = ServiceRef::new(&service.namespace, &grouped);
    if op == InstanceOp::Register {
        // Nacos's NacosRuntimeException(400, ..), which ErrorResponse.build
        // answers with its code and text.
        if let Some(text) = crate::write::kind_conflict(&app.store, svc, spec.ephemeral) {
            return Err(Refusal::new(code::INVALID_PARAM, text));
        }
    }
    let command = match op {
        // All or nothing, as a batch of one (the store checks it first).
        InstanceOp::Register if spec.ephemeral => Command::Replace {
            service: svc,
            instances: std::slice::from_ref(&spec),
            stale: &[],
        },
        InstanceOp::Register => Command::Register {
            service: svc,
            instance: &spec,
            strict: false,
        },
        InstanceOp::Deregister => Command::Deregister {
            service: svc,
            addr: spec.addr,
            ephemeral: spec.ephemeral,
        },
    };
    settle(app.writer.apply(command, app.clock.now())).await?;
    if spec.ephemeral {
        let owned = OwnedInstance {
            service: key(service),
            cluster: Arc::from(spec.addr.cluster),
            ip: spec.addr.ip,
            port: spec.addr.port,
        };
        let mut held = conn.owned.lock();
        match op {
            InstanceOp::Register => held.instances.insert(owned),
            InstanceOp::Deregister => held.instances.remove(&owned),
        };
    }
    if let Some(cluster) = &app.cluster {
        cluster.connection_changed(app, conn);
    }
    Ok(())
}

fn addr_of(o: &OwnedInstance) -> InstanceAddr<'_> {
    InstanceAddr {
        cluster: &o.cluster,
        ip: o.ip,
        port: o.port,
    }
}

/// `batchRegisterInstance` replaces the connection's instances of the service with the
/// batch (Nacos 2.x semantics); `batchDeregisterInstance` removes the listed ones.
async fn batch(
    app: &Arc<App>,
    conn: &Connection,
    service: &ServiceId,
    op: InstanceOp,
    instances: &[InstanceSpec],
) -> Result<(), Refusal> {
    let specs = instances
        .iter()
        .map(instance_spec)
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
            if let Some(text) = crate::write::kind_conflict(&app.store, svc, true) {
                return Err(Refusal::new(code::INVALID_PARAM, text));
            }
            let batch: HashSet<OwnedInstance> = specs.iter().map(owned_of).collect();
            let stale: Vec<OwnedInstance> = conn
                .owned
                .lock()
                .instances
                .iter()
                .filter(|o| o.service == service_key && !batch.contains(*o))
                .cloned()
                .collect();
            let stale_addrs: Vec<InstanceAddr<'_>> = stale.iter().map(addr_of).collect();
            let command = Command::Replace {
                service: svc,
                instances: &specs,
                stale: &stale_addrs,
            };
            settle(app.writer.apply(command, now)).await?;
            let mut owned = conn.owned.lock();
            for o in &stale {
                owned.instances.remove(o);
            }
            owned.instances.extend(batch);
        }
        InstanceOp::Deregister => {
            for s in &specs {
                let command = Command::Deregister {
                    service: svc,
                    addr: s.addr,
                    ephemeral: true,
                };
                settle(app.writer.apply(command, now)).await?;
                conn.owned.lock().instances.remove(&owned_of(s));
            }
        }
    }
    if let Some(cluster) = &app.cluster {
        cluster.connection_changed(app, conn);
    }
    Ok(())
}

/// Removes one of a connection's instances through the write path.
pub fn deregister_owned(app: &App, conn: &Connection, o: &OwnedInstance) {
    conn.owned.lock().instances.remove(o);
    let command = Command::Deregister {
        service: o.service.as_ref(),
        addr: addr_of(o),
        ephemeral: true,
    };
    // Ephemeral: applied at once. Deregistering cannot fail for a
    // well-formed key; a missing one is a no-op.
    let _ = app.writer.apply(command, app.clock.now());
}

fn subscribe(
    app: &App,
    grpc: &Grpc,
    conn: &Connection,
    service: &ServiceKey,
    clusters: &str,
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
            return Err(Refusal::new(
                code::OVER_THRESHOLD,
                format!(
                    "too many subscriptions on this connection: the limit is {}",
                    grpc.limits.max_subscriptions_per_connection
                ),
            ));
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
        return Err(Refusal::new(
            code::OVER_THRESHOLD,
            "too many subscriptions: the server holds its limit",
        ));
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
