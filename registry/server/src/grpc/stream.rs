//! One bidirectional stream (`/BiRequestStream/requestBiStream`): the life of a
//! connection.
//!
//! 1. The first message must be `ConnectionSetupRequest` (within the setup timeout);
//!    it registers the connection in the [`Hub`](crate::hub::Hub). There is no
//!    answer to it (the server check said `supportAbilityNegotiation: false`).
//! 2. Then the stream carries the client's answers to the server's requests: push acks
//!    (`NotifySubscriberResponse`, handed to the notifier, which owns the ack table) and
//!    detection answers (`ClientDetectionResponse`).
//! 3. A connection quiet for the idle time gets a `ClientDetectionRequest`; one that
//!    does not answer within the detection timeout is dropped.
//! 4. When the stream ends (client closed, dropped, or the server stops), the
//!    connection's ephemeral instances are deregistered through the write path, so
//!    their subscribers are pushed, and its subscriptions are removed.

use std::sync::Arc;
use std::time::Duration;

use registry_proto::grpc::message::{ClientDetectionRequest, RequestHead};
use registry_proto::grpc::{code, decode, refusal_payload, ClientMessage, Payload, Refusal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Streaming;

use super::handler::{deregister_owned, unsubscribe_owned};
use crate::clock::Clock;
use crate::hub::{connection_id, Connection, Outbound, Refused};
use crate::state::App;

/// How long a new stream may take to send its setup.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs one stream until it ends; `outbound` feeds the response stream.
pub async fn run(
    app: Arc<App>,
    peer: std::net::SocketAddr,
    mut inbound: Streaming<Payload>,
    outbound: mpsc::Sender<Outbound>,
    cancel: CancellationToken,
) {
    let grpc = &app.grpc;
    let Some(conn) = setup(&app, peer, &mut inbound, &outbound).await else {
        return;
    };
    grpc.metrics.connections.set(grpc.hub.len() as u64);
    tracing::debug!(id = %conn.id, version = %conn.client_version, "gRPC connection set up");
    serve(&app, &conn, &mut inbound, &cancel).await;
    grpc.hub.remove(&conn);
    grpc.metrics.connections.set(grpc.hub.len() as u64);
    if !grpc.stopping() {
        release(&app, &conn);
    }
    tracing::debug!(id = %conn.id, "gRPC connection closed");
}

async fn setup(
    app: &Arc<App>,
    peer: std::net::SocketAddr,
    inbound: &mut Streaming<Payload>,
    outbound: &mpsc::Sender<Outbound>,
) -> Option<Arc<Connection>> {
    let grpc = &app.grpc;
    let first = tokio::time::timeout(SETUP_TIMEOUT, inbound.message()).await;
    let Ok(Ok(Some(payload))) = first else {
        return None;
    };
    let refuse = |r: Refusal| {
        grpc.metrics.refused.inc();
        let _ = outbound.try_send(Arc::new(refusal_payload(&r)));
        None
    };
    let client_version = match decode(payload.type_name(), payload.json(), &app.parse_limits) {
        Ok(d) => match d.message {
            ClientMessage::ConnectionSetup { client_version } => client_version,
            _ => {
                return refuse(Refusal::new(
                    code::UN_REGISTER,
                    "the first message on the stream must be ConnectionSetupRequest",
                ))
            }
        },
        Err(r) => return refuse(r),
    };
    let registered = grpc.hub.register(
        peer,
        connection_id(peer, Clock::wall_ms()),
        client_version,
        outbound.clone(),
        app.clock.now().0,
    );
    match registered {
        Ok(conn) => Some(conn),
        Err(Refused::Full) => refuse(Refusal::new(
            code::OVER_THRESHOLD,
            format!(
                "too many connections: the server holds its limit of {}",
                grpc.limits.max_connections
            ),
        )),
        Err(Refused::Duplicate) => refuse(Refusal::new(
            code::INVALID_PARAM,
            "this connection is already set up",
        )),
    }
}

/// Reads the stream until it ends, the client stops answering, or the server stops.
async fn serve(
    app: &Arc<App>,
    conn: &Arc<Connection>,
    inbound: &mut Streaming<Payload>,
    cancel: &CancellationToken,
) {
    let grpc = &app.grpc;
    let idle = grpc.limits.idle_ms;
    let mut tick = tokio::time::interval(Duration::from_millis((idle / 4).max(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // When a detection was sent: (request id, monotonic ms).
    let mut probing: Option<(u64, u64)> = None;
    let mut next_probe = 1u64;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            message = inbound.message() => match message {
                Ok(Some(payload)) => {
                    conn.touch(app.clock.now().0);
                    on_message(app, conn, &payload, &mut probing);
                }
                // Closed by the client, or broken.
                Ok(None) | Err(_) => return,
            },
            _ = tick.tick() => {
                let now = app.clock.now().0;
                let last = conn.last_active.load(std::sync::atomic::Ordering::Relaxed);
                // Any message or unary request since the probe proves the client alive.
                if probing.is_some_and(|(_, sent)| last > sent) {
                    probing = None;
                }
                if let Some((_, sent)) = probing {
                    if now >= sent + grpc.limits.detect_timeout_ms {
                        grpc.metrics.dropped_idle.inc();
                        tracing::debug!(id = %conn.id, "no answer to detection: dropping");
                        return;
                    }
                } else if now >= last + idle {
                    let id = next_probe;
                    next_probe += 1;
                    let probe = Arc::new(Payload::of(&ClientDetectionRequest {
                        head: RequestHead {
                            request_id: Some(format!("detect-{id}")),
                            ..RequestHead::default()
                        },
                    }));
                    if conn.outbound.try_send(probe).is_err() {
                        return;
                    }
                    probing = Some((id, now));
                }
            }
        }
    }
}

fn on_message(app: &App, conn: &Connection, payload: &Payload, probing: &mut Option<(u64, u64)>) {
    match decode(payload.type_name(), payload.json(), &app.parse_limits) {
        Ok(d) => match d.message {
            ClientMessage::NotifyAck(head) => {
                let seq = head
                    .request_id
                    .as_deref()
                    .and_then(|r| r.parse::<u64>().ok());
                match seq {
                    Some(seq) => app.grpc.ack(conn.number, seq),
                    None => app.metrics.push.bad_acks.inc(),
                }
            }
            ClientMessage::DetectionAck(_) => *probing = None,
            // Anything else on the stream is a client request in the wrong place.
            _ => app.grpc.metrics.refused.inc(),
        },
        Err(_) => app.grpc.metrics.refused.inc(),
    }
}

/// Gives back what the connection owned, through the write path.
fn release(app: &App, conn: &Connection) {
    let (instances, subscriptions) = {
        let mut owned = conn.owned.lock();
        (
            std::mem::take(&mut owned.instances),
            std::mem::take(&mut owned.subscriptions),
        )
    };
    for s in &subscriptions {
        unsubscribe_owned(app, conn, s);
    }
    for i in &instances {
        deregister_owned(app, conn, i);
    }
    if let Some(cluster) = &app.cluster {
        cluster.connection_closed(app, conn);
    }
}
