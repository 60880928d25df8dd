//! One simulated 2.x client as a worker's lane: the worker queues its requests on a
//! [`Lane`] exactly as it does for an HTTP connection, and this task carries them
//! over the client's gRPC connection.
//!
//! The connection is what the real clients open: a server check, the bidirectional
//! stream with the connection setup on it, then a health check until the server
//! answers it (it has seen the setup). Requests are unary calls multiplexed on the
//! connection: each is spawned when the lane takes it, so none waits for an earlier
//! answer, up to the lane's depth in flight, or the server's stream limit if it is
//! lower (waiting for room is recorded as connection wait, apart from send lag:
//! [`Lane::ready_at`]).
//!
//! A call is sent at the write that hands its last byte to the socket, not when it
//! is spawned: the connection speaks HTTP/2 through `h2` ([`super::client`]) over a
//! socket that stamps each stream's end as it writes it ([`super::stamp`]), and the
//! call takes its stream's stamp once it is over. Its send lag runs from when it
//! could be sent to that stamp, and the part from its spawn to the stamp (queued in
//! the generator's own HTTP/2 client, behind the worker's other tasks) is recorded
//! apart too ([`Exchange::sent`]); its service time runs from the stamp. A call
//! that failed before its last byte left was never sent: it fails as a request that
//! was never written does.
//!
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

use bytes::Bytes;
use registry_proto::grpc::message::{NotifySubscriberRequest, RequestHead};
use registry_proto::grpc::{Message, Payload};

use super::client::{self, Client, Inbound};
use super::request;
use super::stamp::{Stamped, Stamps};
use crate::conn::{Lane, LaneConfig, Request};
use crate::recorder::{ErrorClass, Failure};
use crate::schedule::{Clock, Nanos};

/// What a call still queued when the run ended failed of.
const RUN_ENDED: Failure = Failure::new(
    ErrorClass::Timeout,
    "not sent before the run ended (the lane gave up)",
);

/// What a gRPC lane needs from its worker.
pub trait Exchange {
    /// The request's payload.
    fn payload(&self, req: &Request) -> Payload;
    /// The request's call was started at `at`; its bytes are on their way. Called
    /// before they can reach the server, so anything a push might reveal is known.
    fn started(&self, req: &Request, at: Nanos);
    /// The request's last byte was written to the socket at `sent`; it could have
    /// been from `ready` on ([`Lane::ready_at`]) and its call started at `started`.
    /// `stamped` is false when the socket took no stamp for it and `sent` fell back
    /// to `started` (answered before its last byte was seen leaving).
    fn sent(&self, req: &Request, ready: Nanos, started: Nanos, sent: Nanos, stamped: bool);
    /// The request was answered (`Ok`) or failed (`Err`) at `done`; `sent` is when
    /// it was written ([`Exchange::sent`]), `None` when it never was.
    fn answered(
        &self,
        req: &Request,
        sent: Option<Nanos>,
        done: Nanos,
        result: Result<&Payload, &Failure>,
    );
    /// A queued request was never sent; declared failed at `declared`.
    fn abandon(&self, req: &Request, failure: &Failure, declared: Nanos);
    /// Lane `lane`'s stream carried a push, received at `at`.
    fn pushed(&self, lane: usize, push: &NotifySubscriberRequest, at: Nanos);
    /// A push was acked.
    fn acked(&self);
    /// Lane `lane` connected again after losing its connection: redo what the
    /// client held.
    fn reconnected(&self, lane: usize);
}

/// A live connection: its client, the stamps its socket writes, and whether it
/// still works.
#[derive(Clone)]
struct Connection {
    client: Client,
    stamps: Rc<RefCell<Stamps>>,
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
/// the call is under way (its start recorded) when this returns; its bytes are
/// written when the connection's task next runs.
fn start_calls<E: Exchange + 'static>(
    ex: &Rc<E>,
    lane: &Rc<Lane>,
    conn: &Connection,
    cfg: LaneConfig,
    clock: Clock,
) {
    let depth = depth(cfg, conn);
    while lane.in_flight() < depth {
        let Some(req) = lane.take() else { break };
        let started = clock.now();
        let ready = lane.ready_at(req.intended);
        ex.started(&req, started);
        lane.set_in_flight(lane.in_flight() + 1);
        let payload = ex.payload(&req);
        let (ex, lane, conn) = (ex.clone(), lane.clone(), conn.clone());
        tokio::task::spawn_local(async move {
            let stream = Cell::new(None);
            let answer =
                tokio::time::timeout(cfg.timeout, conn.client.unary(&payload, &stream)).await;
            let done = clock.now();
            // Taken whatever the outcome, so no stamp outlives its call.
            let wired = stream.get().and_then(|s| conn.stamps.borrow_mut().take(s));
            if lane.in_flight() >= depth {
                lane.room_from(done);
            }
            lane.set_in_flight(lane.in_flight().saturating_sub(1));
            let result = match &answer {
                Ok(Ok(p)) if p.type_name() == "ErrorResponse" => Err(error_response(p)),
                Ok(Ok(p)) => Ok(p),
                Ok(Err(e)) => {
                    conn.broken.set(true);
                    Err(Failure::because(
                        ErrorClass::Connection,
                        format_args!("call: {e}"),
                    ))
                }
                Err(_) => Err(Failure::because(
                    ErrorClass::Timeout,
                    format_args!("no answer within {:?}", cfg.timeout),
                )),
            };
            let times = CallTimes {
                ready,
                started,
                wired,
                done,
            };
            finish(&*ex, &req, times, result.as_ref().map(|p| *p));
            lane.wake();
        });
    }
}

/// How many calls the lane keeps in flight on `conn`: its depth, or fewer when the
/// server allows fewer streams (one of them the bidi stream's). A call beyond the
/// server's limit would wait inside `h2` for a stream, the server's wait counted as
/// the generator's; held in the lane it is connection wait, as a full pipeline is.
fn depth(cfg: LaneConfig, conn: &Connection) -> usize {
    cfg.depth
        .min(conn.client.max_streams().saturating_sub(1))
        .max(1)
}

/// The moments of one call.
#[derive(Clone, Copy)]
struct CallTimes {
    ready: Nanos,
    started: Nanos,
    /// When its last byte was written, if it was.
    wired: Option<Nanos>,
    done: Nanos,
}

/// A server's `ErrorResponse` as a protocol failure carrying its code and message.
fn error_response(p: &Payload) -> Failure {
    match serde_json::from_slice::<registry_proto::grpc::message::ResponseHead>(p.json()) {
        Ok(head) => Failure::because(
            ErrorClass::Protocol,
            format_args!(
                "ErrorResponse {} {}: {}",
                head.result_code,
                head.error_code,
                head.message.as_deref().unwrap_or("(no message)")
            ),
        ),
        Err(_) => Failure::because(
            ErrorClass::Protocol,
            format_args!("ErrorResponse {}", String::from_utf8_lossy(p.json())),
        ),
    }
}

/// Reports a finished call: its send, if its bytes left, then its outcome.
fn finish<E: Exchange>(ex: &E, req: &Request, t: CallTimes, result: Result<&Payload, &Failure>) {
    let answered = match &result {
        Ok(_) => true,
        Err(f) => f.class == ErrorClass::Protocol,
    };
    let sent = match t.wired {
        Some(wired) => Some((wired, true)),
        // Answered before its last byte was seen leaving (a server may answer before
        // reading the whole request): it was sent, when is known no better than its
        // start (the fallback, counted apart).
        None if answered => Some((t.started, false)),
        None => None,
    };
    if let Some((sent, stamped)) = sent {
        ex.sent(req, t.ready, t.started, sent, stamped);
    }
    ex.answered(req, sent.map(|s| s.0), t.done, result);
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
                Exchange::abandon(&*ex, &r, &RUN_ENDED, now);
            }
            return;
        }
        let conn = match connect(&ex, &lane, number, &clock, &namespace).await {
            Ok(c) => c,
            Err(e) => {
                let failure = Failure::because(
                    ErrorClass::Connection,
                    format_args!("connecting to {}: {e:#}", lane.server()),
                );
                failures += 1;
                lane.fail_over();
                let now = clock.now();
                for r in lane.take_stale(now.saturating_sub(cfg.timeout.as_nanos() as Nanos)) {
                    Exchange::abandon(&*ex, &r, &failure, now);
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
                Exchange::abandon(&**ex, &r, &RUN_ENDED, now);
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
/// setup, health check, over a socket that stamps what it writes.
async fn connect<E: Exchange + 'static>(
    ex: &Rc<E>,
    lane: &Rc<Lane>,
    number: usize,
    clock: &Clock,
    namespace: &str,
) -> anyhow::Result<Connection> {
    let addr = lane.server();
    let tcp = client::dial(addr, Duration::from_secs(2)).await?;
    let stamps = Rc::new(RefCell::new(Stamps::default()));
    let (client, io) = client::handshake(Stamped::new(tcp, stamps.clone(), *clock), addr).await?;
    tokio::task::spawn_local(async move {
        // Its end (the peer gone, or every handle dropped) fails what is in flight.
        let _ = io.await;
    });
    let (tx, inbound) = client::open(&client, namespace).await?;
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
    client::registered(&client, 500).await?;
    // The opening's calls were stamped too, and no call takes their stamps.
    stamps.borrow_mut().clear();
    Ok(Connection {
        client,
        stamps,
        broken,
    })
}

/// Reads the stream: pushes to the worker and acked, detections answered; its
/// end marks the connection broken.
async fn read_stream<E: Exchange + 'static>(
    ex: Rc<E>,
    lane: Rc<Lane>,
    number: usize,
    clock: Clock,
    mut inbound: Inbound,
    mut tx: h2::SendStream<Bytes>,
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
        if client::send(&mut tx, &request::ack(answer, &id)).is_err() {
            break;
        }
        if answer == "NotifySubscriberResponse" {
            ex.acked();
        }
    }
    broken.set(true);
    lane.wake();
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
        started: RefCell<Vec<Nanos>>,
        /// (started, sent) of each send.
        sent: RefCell<Vec<(Nanos, Nanos)>>,
        /// Stamped and fallback sends, counted as the worker counts them.
        recorder: RefCell<crate::recorder::Recorder>,
        answered: RefCell<Vec<Answer>>,
    }

    /// (sent, done, outcome) of an answer.
    type Answer = (Option<Nanos>, Nanos, Result<String, ErrorClass>);

    impl Exchange for Ex {
        fn payload(&self, _: &Request) -> Payload {
            request::health_check()
        }
        fn started(&self, _: &Request, at: Nanos) {
            self.started.borrow_mut().push(at);
        }
        fn sent(&self, req: &Request, _: Nanos, started: Nanos, sent: Nanos, stamped: bool) {
            self.sent.borrow_mut().push((started, sent));
            let mut r = self.recorder.borrow_mut();
            r.client_queue(req.op, started, sent, stamped);
        }
        fn answered(
            &self,
            _: &Request,
            sent: Option<Nanos>,
            done: Nanos,
            r: Result<&Payload, &Failure>,
        ) {
            let r = r.map(|p| p.type_name().to_string()).map_err(|f| f.class);
            self.answered.borrow_mut().push((sent, done, r));
        }
        fn abandon(&self, _: &Request, _: &Failure, _: Nanos) {}
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
    /// the lane's task; with the lane's depth in flight it waits for room. Each call
    /// is sent when its socket took its last byte: after its start (the connection's
    /// task writes it), before its answer.
    #[test]
    fn a_due_call_starts_from_the_driver_and_is_sent_when_its_bytes_leave() {
        let server = embedded();
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
            assert!(
                ex.started.borrow().is_empty(),
                "no connection: nothing started"
            );
            assert_eq!(lane.outstanding(), 1, "still queued for the lane's task");

            let conn = connect(&ex, &lane, 0, &clock, "").await.expect("connects");
            *wire.0.borrow_mut() = Some(conn);
            lane.push(query(clock.now()));
            write_through(&ex, &lane, &wire, cfg, clock);
            assert_eq!(
                ex.started.borrow().len(),
                1,
                "the first call started in the call"
            );
            assert!(
                ex.sent.borrow().is_empty(),
                "its send is known once its bytes left"
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
            let sent = ex.sent.borrow();
            assert_eq!(sent.len(), 2, "both sent");
            for ((started, wired), (sent, done, r)) in sent.iter().zip(answered.iter()) {
                assert_eq!(r.as_deref(), Ok("HealthCheckResponse"));
                assert_eq!(*sent, Some(*wired), "answered with the send it reported");
                assert!(
                    started <= wired && wired <= done,
                    "{started} <= {wired} <= {done}"
                );
            }
            assert!(
                wire.0.borrow().as_ref().unwrap().stamps.borrow().is_empty(),
                "every stamp taken by its call"
            );
            let q = ex.recorder.take().finish().ops[Op::Query as usize].clone();
            assert_eq!(
                (q.stamped, q.fallback),
                (2, 0),
                "both timed by their stamps"
            );
        });
        drop(server);
    }

    /// With the socket's stamping off (the test hook), calls are still sent and
    /// answered, but each is timed by the fallback to its start, and counted so: a
    /// broken stamp cannot pass as a working one.
    #[test]
    fn a_call_without_a_stamp_is_counted_as_a_fallback() {
        let server = embedded();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        super::super::stamp::off::OFF.with(|off| off.set(true));
        local.block_on(&rt, async {
            let clock = Clock::start();
            let ex = Rc::new(Ex::default());
            let lane = Rc::new(Lane::new(None, Rc::from(vec![server.grpc_addr]), 0));
            let wire = Wire::default();
            let cfg = LaneConfig {
                depth: 4,
                timeout: Duration::from_secs(5),
            };
            let conn = connect(&ex, &lane, 0, &clock, "").await.expect("connects");
            *wire.0.borrow_mut() = Some(conn);
            lane.push(query(clock.now()));
            lane.push(query(clock.now()));
            let deadline = clock.now() + 5 * crate::schedule::SECOND;
            while ex.answered.borrow().len() < 2 && clock.now() < deadline {
                write_through(&ex, &lane, &wire, cfg, clock);
                let _ = tokio::time::timeout(Duration::from_millis(100), lane.notified()).await;
            }
            assert_eq!(ex.answered.borrow().len(), 2);
            for (started, sent) in ex.sent.borrow().iter() {
                assert_eq!(started, sent, "the fallback: sent at its start");
            }
            let q = ex.recorder.take().finish().ops[Op::Query as usize].clone();
            assert_eq!((q.stamped, q.fallback), (0, 2));
        });
        super::super::stamp::off::OFF.with(|off| off.set(false));
        drop(server);
    }

    fn embedded() -> registry_server::Embedded {
        let mut config = registry_server::Config::parse_from(["registry"]);
        config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        registry_server::Embedded::start(config).expect("registry starts")
    }
}
