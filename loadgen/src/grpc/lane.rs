//! One simulated 2.x client as a worker's lane: the worker queues its requests on a
//! [`Lane`] exactly as it does for an HTTP connection, and this task carries them
//! over the client's gRPC connection.
//!
//! The connection is what the real clients open: a server check, the bidirectional
//! stream with the connection setup on it, then a health check until the server
//! answers it (it has seen the setup). Requests are unary calls multiplexed on the
//! connection: each is spawned when the lane takes it, so none waits for an earlier
//! answer, up to the lane's depth in flight (waiting for room is recorded as
//! connection wait, apart from send lag: [`Lane::ready_at`]).
//! Pushes (`NotifySubscriberRequest`) arrive on the stream, are handed to the
//! worker ([`Exchange::pushed`]) and acked; a `ClientDetectionRequest` is answered.
//!
//! Failover: when the connection breaks (its stream ends, or a call fails for want
//! of a connection), the lane moves to the next server in its list, as a Nacos
//! client rotates through its server list, reconnects, and asks the worker to redo
//! what the client held ([`Exchange::reconnected`]): its registrations and
//! subscriptions, as the clients' redo service does.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use anyhow::Context as _;
use registry_proto::grpc::message::{NotifySubscriberRequest, RequestHead};
use registry_proto::grpc::{Message, Payload, REQUEST_PATH, STREAM_PATH};
use tokio::sync::mpsc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

use super::request;
use crate::conn::{Lane, LaneConfig, Request};
use crate::recorder::ErrorClass;
use crate::schedule::{Clock, Nanos};

/// What a gRPC lane needs from its worker.
pub trait Exchange {
    /// The request's payload.
    fn payload(&self, req: &Request) -> Payload;
    /// The request is being sent at `sent`; it could have been from `ready` on
    /// ([`Lane::ready_at`]).
    fn sent(&self, req: &Request, ready: Nanos, sent: Nanos);
    /// The request was answered (`Ok`) or failed (`Err`) at `done`.
    fn answered(
        &self,
        req: &Request,
        sent: Nanos,
        done: Nanos,
        result: Result<&Payload, ErrorClass>,
    );
    /// A queued request was never sent; declared failed at `declared`.
    fn abandon(&self, req: &Request, class: ErrorClass, declared: Nanos);
    /// Lane `lane`'s stream carried a push, received at `at`.
    fn pushed(&self, lane: usize, push: &NotifySubscriberRequest, at: Nanos);
    /// A push was acked.
    fn acked(&self);
    /// Lane `lane` connected again after losing its connection: redo what the
    /// client held.
    fn reconnected(&self, lane: usize);
}

/// A live connection: the channel and whether it still works.
#[derive(Clone)]
struct Connection {
    channel: Channel,
    broken: Rc<Cell<bool>>,
}

/// A lane's connection while it has one, shared by the lane's task and the worker's
/// driver: the driver starts a due call itself ([`write_through`]) instead of waiting
/// for the lane's task to be scheduled behind the other lanes' and connections' tasks.
#[derive(Default)]
pub struct Wire(RefCell<Option<Connection>>);

/// Starts `lane`'s queued calls on its connection now, as many as its depth has room
/// for: called by the driver right after it queued what came due. Without a
/// connection (connecting, failing over) the lane's task sends them once it has one.
pub fn write_through<E: Exchange + 'static>(
    ex: &Rc<E>,
    lane: &Rc<Lane>,
    wire: &Wire,
    cfg: LaneConfig,
    clock: Clock,
) {
    if lane.outstanding() == lane.in_flight() || lane.is_closing() {
        return;
    }
    let Some(conn) = wire.0.borrow().clone() else {
        return;
    };
    if !conn.broken.get() {
        start_calls(ex, lane, &conn, cfg, clock);
    }
}

/// Takes queued requests while the lane has room and spawns each one's unary call:
/// the call is under way (its send recorded) when this returns.
fn start_calls<E: Exchange + 'static>(
    ex: &Rc<E>,
    lane: &Rc<Lane>,
    conn: &Connection,
    cfg: LaneConfig,
    clock: Clock,
) {
    while lane.in_flight() < cfg.depth {
        let Some(req) = lane.take() else { break };
        let sent = clock.now();
        ex.sent(&req, lane.ready_at(req.intended), sent);
        lane.set_in_flight(lane.in_flight() + 1);
        let payload = ex.payload(&req);
        let (ex, lane, channel, broken) = (
            ex.clone(),
            lane.clone(),
            conn.channel.clone(),
            conn.broken.clone(),
        );
        tokio::task::spawn_local(async move {
            let answer = tokio::time::timeout(cfg.timeout, unary(&channel, payload)).await;
            let done = clock.now();
            if lane.in_flight() >= cfg.depth {
                lane.room_from(done);
            }
            lane.set_in_flight(lane.in_flight().saturating_sub(1));
            let result = match &answer {
                Ok(Ok(p)) if p.type_name() == "ErrorResponse" => Err(ErrorClass::Protocol),
                Ok(Ok(p)) => Ok(p),
                Ok(Err(_)) => {
                    broken.set(true);
                    Err(ErrorClass::Connection)
                }
                Err(_) => Err(ErrorClass::Timeout),
            };
            ex.answered(&req, sent, done, result);
            lane.wake();
        });
    }
}

/// Runs lane `number` (one simulated client) until the lane is closed and empty.
pub async fn drive<E: Exchange + 'static>(
    ex: Rc<E>,
    lane: Rc<Lane>,
    wire: Rc<Wire>,
    number: usize,
    cfg: LaneConfig,
    clock: Clock,
    namespace: Rc<str>,
) {
    let mut connected_before = false;
    let mut failures = 0u32;
    loop {
        if lane.is_closing() && lane.outstanding() == 0 {
            return;
        }
        if lane.has_given_up() {
            let now = clock.now();
            for r in lane.take_all() {
                Exchange::abandon(&*ex, &r, ErrorClass::Timeout, now);
            }
            return;
        }
        let conn = match connect(&ex, &lane, number, &clock, &namespace).await {
            Ok(c) => c,
            Err(_) => {
                failures += 1;
                lane.fail_over();
                let now = clock.now();
                for r in lane.take_stale(now.saturating_sub(cfg.timeout.as_nanos() as Nanos)) {
                    Exchange::abandon(&*ex, &r, ErrorClass::Connection, now);
                }
                tokio::time::sleep(Duration::from_millis(u64::from(failures.min(10)) * 50)).await;
                continue;
            }
        };
        failures = 0;
        lane.room_from(clock.now());
        if connected_before {
            ex.reconnected(number);
        }
        connected_before = true;
        *wire.0.borrow_mut() = Some(conn.clone());
        let more = session(&ex, &lane, &conn, cfg, clock).await;
        *wire.0.borrow_mut() = None;
        if !more {
            return;
        }
        // Broken: on to the next server.
        lane.fail_over();
    }
}

/// Sends the lane's requests over `conn` until the lane is done (`false`) or the
/// connection breaks (`true`).
async fn session<E: Exchange + 'static>(
    ex: &Rc<E>,
    lane: &Rc<Lane>,
    conn: &Connection,
    cfg: LaneConfig,
    clock: Clock,
) -> bool {
    loop {
        if lane.has_given_up() {
            let now = clock.now();
            for r in lane.take_all() {
                Exchange::abandon(&**ex, &r, ErrorClass::Timeout, now);
            }
            return false;
        }
        if conn.broken.get() {
            return true;
        }
        start_calls(ex, lane, conn, cfg, clock);
        if lane.is_closing() && lane.outstanding() == 0 {
            return false;
        }
        // Woken by a new request, an answer (room), the stream's end or the run's.
        tokio::select! {
            () = lane.notified() => {}
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
}

/// Opens the client's connection to the lane's server: server check, stream,
/// setup, health check.
async fn connect<E: Exchange + 'static>(
    ex: &Rc<E>,
    lane: &Rc<Lane>,
    number: usize,
    clock: &Clock,
    namespace: &str,
) -> anyhow::Result<Connection> {
    let (channel, inbound, tx) =
        open(lane.server(), namespace, 256, Duration::from_secs(2)).await?;
    let broken = Rc::new(Cell::new(false));
    tokio::task::spawn_local(read_stream(
        ex.clone(),
        lane.clone(),
        number,
        *clock,
        inbound,
        tx,
        broken.clone(),
    ));
    registered(&channel, 500).await?;
    Ok(Connection { channel, broken })
}

/// The opening every 2.x connection makes, as the real clients do: server
/// check, the bidi stream (a queue of `queue` payloads), the connection setup.
/// The caller reads the stream (the server's detection requests must be answered).
pub(crate) async fn open(
    addr: std::net::SocketAddr,
    namespace: &str,
    queue: usize,
    timeout: Duration,
) -> anyhow::Result<(Channel, tonic::Streaming<Payload>, mpsc::Sender<Payload>)> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))?
        .tcp_nodelay(true)
        .connect_timeout(timeout)
        .connect()
        .await
        .with_context(|| format!("connecting to gRPC {addr}"))?;
    let check = unary(&channel, request::server_check()).await?;
    anyhow::ensure!(
        check.type_name() == "ServerCheckResponse",
        "server check refused: {}",
        String::from_utf8_lossy(check.json())
    );
    let (tx, rx) = mpsc::channel::<Payload>(queue);
    let mut g = tonic::client::Grpc::new(channel.clone());
    g.ready().await?;
    let inbound = g
        .streaming(
            tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
            PathAndQuery::from_static(STREAM_PATH),
            tonic_prost::ProstCodec::<Payload, Payload>::default(),
        )
        .await?
        .into_inner();
    tx.send(request::connection_setup(namespace)).await?;
    Ok((channel, inbound, tx))
}

/// Waits until the server has registered the connection's setup (it answers
/// health checks only then), polling every 10 ms at most `tries` times.
pub(crate) async fn registered(channel: &Channel, tries: u32) -> anyhow::Result<()> {
    for _ in 0..tries {
        let p = unary(channel, request::health_check()).await?;
        if p.type_name() == "HealthCheckResponse" {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the server never registered the connection's setup")
}

/// Reads the stream: pushes to the worker and acked, detections answered; its
/// end marks the connection broken.
async fn read_stream<E: Exchange + 'static>(
    ex: Rc<E>,
    lane: Rc<Lane>,
    number: usize,
    clock: Clock,
    mut inbound: tonic::Streaming<Payload>,
    tx: mpsc::Sender<Payload>,
    broken: Rc<Cell<bool>>,
) {
    while let Ok(Some(p)) = inbound.message().await {
        let answer = match p.type_name() {
            NotifySubscriberRequest::TYPE => {
                if let Ok(push) = serde_json::from_slice::<NotifySubscriberRequest>(p.json()) {
                    ex.pushed(number, &push, clock.now());
                }
                "NotifySubscriberResponse"
            }
            "ClientDetectionRequest" => "ClientDetectionResponse",
            _ => continue,
        };
        let id = serde_json::from_slice::<RequestHead>(p.json())
            .ok()
            .and_then(|h| h.request_id)
            .unwrap_or_default();
        if tx.send(request::ack(answer, &id)).await.is_err() {
            break;
        }
        if answer == "NotifySubscriberResponse" {
            ex.acked();
        }
    }
    broken.set(true);
    lane.wake();
}

/// One unary call on `channel`.
pub async fn unary(channel: &Channel, p: Payload) -> anyhow::Result<Payload> {
    let mut g = tonic::client::Grpc::new(channel.clone());
    g.ready().await?;
    let answer = g
        .unary(
            tonic::Request::new(p),
            PathAndQuery::from_static(REQUEST_PATH),
            tonic_prost::ProstCodec::<Payload, Payload>::default(),
        )
        .await?;
    Ok(answer.into_inner())
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use std::cell::RefCell;
    use std::net::{Ipv4Addr, SocketAddr};

    use clap::Parser as _;

    use super::*;
    use crate::recorder::Op;

    /// Records what the lane tells it.
    #[derive(Default)]
    struct Ex {
        sent: RefCell<Vec<Nanos>>,
        answered: RefCell<Vec<Result<String, ErrorClass>>>,
    }

    impl Exchange for Ex {
        fn payload(&self, _: &Request) -> Payload {
            request::health_check()
        }
        fn sent(&self, _: &Request, _: Nanos, sent: Nanos) {
            self.sent.borrow_mut().push(sent);
        }
        fn answered(&self, _: &Request, _: Nanos, _: Nanos, r: Result<&Payload, ErrorClass>) {
            let r = r.map(|p| p.type_name().to_string());
            self.answered.borrow_mut().push(r);
        }
        fn abandon(&self, _: &Request, _: ErrorClass, _: Nanos) {}
        fn pushed(&self, _: usize, _: &NotifySubscriberRequest, _: Nanos) {}
        fn acked(&self) {}
        fn reconnected(&self, _: usize) {}
    }

    fn query(intended: Nanos) -> Request {
        Request {
            op: Op::Query,
            id: 0,
            generation: 0,
            intended,
        }
    }

    /// The driver's write-through starts a due call at once, before any other task
    /// (the lane's own included) runs; with no connection it leaves the request to
    /// the lane's task; with the lane's depth in flight it waits for room.
    #[test]
    fn a_due_call_starts_from_the_driver_without_waiting_for_the_lanes_task() {
        let mut config = registry_server::Config::parse_from(["registry"]);
        config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let server = registry_server::Embedded::start(config).expect("registry starts");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let clock = Clock::start();
            let ex = Rc::new(Ex::default());
            let lane = Rc::new(Lane::new(None, Rc::from(vec![server.grpc_addr]), 0));
            let wire = Wire::default();
            let cfg = LaneConfig {
                depth: 1,
                timeout: Duration::from_secs(5),
            };
            lane.push(query(clock.now()));
            write_through(&ex, &lane, &wire, cfg, clock);
            assert!(ex.sent.borrow().is_empty(), "no connection: nothing sent");
            assert_eq!(lane.outstanding(), 1, "still queued for the lane's task");

            let (channel, _inbound, _tx) = open(server.grpc_addr, "", 8, Duration::from_secs(2))
                .await
                .expect("connects");
            registered(&channel, 500).await.expect("set up");
            let broken = Rc::new(Cell::new(false));
            *wire.0.borrow_mut() = Some(Connection { channel, broken });
            lane.push(query(clock.now()));
            write_through(&ex, &lane, &wire, cfg, clock);
            assert_eq!(
                ex.sent.borrow().len(),
                1,
                "the first call started in the call"
            );
            assert_eq!(lane.in_flight(), 1);
            assert_eq!(lane.outstanding(), 2, "the second waits for room (depth 1)");
            let deadline = clock.now() + 5 * crate::schedule::SECOND;
            while ex.answered.borrow().len() < 2 && clock.now() < deadline {
                write_through(&ex, &lane, &wire, cfg, clock);
                let _ = tokio::time::timeout(Duration::from_millis(100), lane.notified()).await;
            }
            let answered = ex.answered.borrow();
            assert_eq!(answered.len(), 2, "both answered: {answered:?}");
            assert!(answered
                .iter()
                .all(|r| r.as_deref() == Ok("HealthCheckResponse")));
        });
        drop(server);
    }
}
