//! The 2.x (gRPC) connections as every part of the server shares them: the
//! table of connections and what each one owns, the gRPC bounds and
//! counters, and the queue of push acks to the notifier ([`Grpc`]).
//!
//! Shared state, below the doors: the gRPC door (`grpc`) fills it, the
//! notifier pushes through it, the cluster and the console count and read
//! it. It knows no door.
//!
//! A Nacos 2.x client opens one HTTP/2 connection; its unary requests and its stream
//! arrive over it, so the peer address identifies the connection (Nacos does the same:
//! its connection id is `<millis>_<ip>_<port>`). A connection is registered when its
//! stream delivers `ConnectionSetupRequest` and removed when the stream ends.
//!
//! Each [`Connection`] owns the ephemeral instances registered through it and its
//! subscriptions; when it goes, the stream task removes both through the write path
//! (see `grpc::stream`). The outbound queue carries the server's own requests
//! (pushes, detections) to the stream; it is bounded, and a connection whose queue is
//! full misses the push (counted; the retry sends it again).
//!
//! Who writes: the stream task inserts and removes its connection; unary handlers add
//! to and remove from a connection's owned sets (one short mutex per connection); the
//! notifier only reads the table to find a connection's queue.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use registry_core::ServiceKey;
use registry_proto::grpc::Payload;
use tokio::sync::mpsc;

use crate::metrics::{Counter, Gauge};
use registry_proto::prometheus::Exposition;

/// Server requests waiting to be written on one stream. The queue's memory is
/// its blocks of 32 slots (tokio allocates the first with the channel, the rest
/// as it fills), so the bound costs nothing while a connection is idle.
pub const OUTBOUND_QUEUE: usize = 1024;

/// A server request queued on a stream. Shared, not copied: one push goes to
/// every subscribed connection and sits in the notifier's ack table for each,
/// and an `Arc` keeps each queue slot at one pointer (a `Payload` is ~180
/// bytes, so the first block of an idle queue was ~6 KiB).
pub type Outbound = Arc<Payload>;

/// An instance a connection registered: service, cluster, address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedInstance {
    /// The service.
    pub service: ServiceKey,
    /// The cluster.
    pub cluster: Arc<str>,
    /// IP.
    pub ip: IpAddr,
    /// Port.
    pub port: u16,
}

/// A subscription a connection holds: service and view.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedSubscription {
    /// The service.
    pub service: ServiceKey,
    /// `clusters` as sent.
    pub clusters: Arc<str>,
}

/// A set keyed by our own names and addresses: foldhash, not the default
/// SipHash (which guards against chosen keys; a connection only ever hurts its
/// own set; SipHash was ~2k of the ~40k instructions of a 2.x register).
pub type OwnedSet<T> = HashSet<T, foldhash::fast::FixedState>;

/// What a connection owns; its mutex is taken by its own requests only.
#[derive(Default)]
pub struct Owned {
    /// Ephemeral instances registered through it.
    pub instances: OwnedSet<OwnedInstance>,
    /// Its subscriptions.
    pub subscriptions: OwnedSet<OwnedSubscription>,
}

/// One set-up connection.
pub struct Connection {
    /// The server's number for it (the subscriber id in the subscription table).
    pub number: u64,
    /// Nacos's id: `<millis>_<ip>_<port>`.
    pub id: String,
    /// The peer.
    pub peer: SocketAddr,
    /// `clientVersion` from its setup.
    pub client_version: String,
    /// Server requests to write on its stream.
    pub outbound: mpsc::Sender<Outbound>,
    /// Instances and subscriptions it owns.
    pub owned: Mutex<Owned>,
    /// Monotonic ms of its last message, for idle detection.
    pub last_active: AtomicU64,
}

impl Connection {
    /// Notes activity at monotonic `now_ms`.
    pub fn touch(&self, now_ms: u64) {
        self.last_active.store(now_ms, Ordering::Relaxed);
    }
}

/// Nacos's connection id for a peer.
pub fn connection_id(peer: SocketAddr, wall_ms: u64) -> String {
    format!("{wall_ms}_{}_{}", peer.ip(), peer.port())
}

/// Why a connection could not be registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The table holds its maximum.
    Full,
    /// A connection from this peer is already set up.
    Duplicate,
}

/// All set-up connections.
pub struct Hub {
    by_peer: papaya::HashMap<SocketAddr, Arc<Connection>, foldhash::fast::FixedState>,
    by_number: papaya::HashMap<u64, Arc<Connection>, foldhash::fast::FixedState>,
    count: AtomicUsize,
    next_number: AtomicU64,
    max: usize,
}

impl Hub {
    /// An empty table holding at most `max` connections.
    pub fn new(max: usize) -> Hub {
        Hub {
            by_peer: papaya::HashMap::default(),
            by_number: papaya::HashMap::default(),
            count: AtomicUsize::new(0),
            next_number: AtomicU64::new(1),
            max,
        }
    }

    /// True when another connection would be refused.
    pub fn is_full(&self) -> bool {
        self.count.load(Ordering::Relaxed) >= self.max
    }

    /// Connections set up now.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// True when no connection is set up.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Registers a connection from `peer`.
    ///
    /// # Errors
    /// [`Refused::Full`] at the limit, [`Refused::Duplicate`] when `peer` already has one.
    pub fn register(
        &self,
        peer: SocketAddr,
        id: String,
        client_version: String,
        outbound: mpsc::Sender<Outbound>,
        now_ms: u64,
    ) -> Result<Arc<Connection>, Refused> {
        if self.count.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(Refused::Full);
        }
        let conn = Arc::new(Connection {
            number: self.next_number.fetch_add(1, Ordering::Relaxed),
            id,
            peer,
            client_version,
            outbound,
            owned: Mutex::default(),
            last_active: AtomicU64::new(now_ms),
        });
        let by_peer = self.by_peer.pin();
        if by_peer.try_insert(peer, conn.clone()).is_err() {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(Refused::Duplicate);
        }
        self.by_number.pin().insert(conn.number, conn.clone());
        Ok(conn)
    }

    /// Removes a connection (its owned state is the caller's to clean up).
    pub fn remove(&self, conn: &Connection) {
        let by_peer = self.by_peer.pin();
        if by_peer
            .remove_if(&conn.peer, |_, c| c.number == conn.number)
            .is_ok_and(|r| r.is_some())
        {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        self.by_number.pin().remove(&conn.number);
    }

    /// The connection of a peer, if it is set up.
    pub fn by_peer(&self, peer: SocketAddr) -> Option<Arc<Connection>> {
        self.by_peer.pin().get(&peer).cloned()
    }

    /// Every set-up connection, by number (the v2/v3 admin client views;
    /// an admin read, so a walk of the table is fine).
    pub fn all(&self) -> Vec<Arc<Connection>> {
        let mut all: Vec<Arc<Connection>> = self.by_number.pin().values().cloned().collect();
        all.sort_by_key(|c| c.number);
        all
    }

    /// The connection whose Nacos id is `id` (`<millis>_<ip>_<port>`).
    pub fn by_id(&self, id: &str) -> Option<Arc<Connection>> {
        let (rest, port) = id.rsplit_once('_')?;
        let (_, ip) = rest.split_once('_')?;
        let peer = SocketAddr::new(ip.parse().ok()?, port.parse().ok()?);
        self.by_peer(peer).filter(|c| c.id == id)
    }

    /// The Nacos ids of every set-up connection, sorted (the v2/v3
    /// `/client/list`; an admin read, so a walk of the table is fine).
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .by_number
            .pin()
            .values()
            .map(|c| c.id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// The connection with a number, if it is still open.
    pub fn by_number(&self, number: u64) -> Option<Arc<Connection>> {
        self.by_number.pin().get(&number).cloned()
    }
}

/// Acks read from streams, waiting for the notifier.
const ACK_QUEUE: usize = 65_536;

/// Bounds of the gRPC server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest JSON body answered normally; larger ones get a 503 payload (and
    /// messages over twice this are refused by the transport).
    pub max_body_bytes: usize,
    /// Most set-up connections.
    pub max_connections: usize,
    /// Most TCP sockets open at once, set up or not (checked at accept).
    pub max_sockets: usize,
    /// Most subscriptions one connection may hold.
    pub max_subscriptions_per_connection: usize,
    /// Quiet time after which a connection is sent a detection, ms.
    pub idle_ms: u64,
    /// Time a detection may go unanswered before the connection is dropped, ms.
    pub detect_timeout_ms: u64,
}

impl Limits {
    /// The bounds `config` sets.
    pub fn from_config(config: &crate::config::Config) -> Limits {
        Limits {
            max_body_bytes: config.grpc_max_body_bytes,
            max_connections: config.grpc_max_connections,
            max_sockets: config.grpc_max_sockets,
            max_subscriptions_per_connection: config.grpc_max_subscriptions_per_connection,
            idle_ms: config.grpc_idle_ms,
            detect_timeout_ms: config.grpc_detect_timeout_ms,
        }
    }
}

/// gRPC counters.
#[derive(Default)]
pub struct Metrics {
    /// Set-up connections.
    pub connections: Gauge,
    /// Requests answered with an `ErrorResponse`.
    pub refused: Counter,
    /// Connections dropped for not answering a detection.
    pub dropped_idle: Counter,
    /// Acks dropped because the notifier's queue was full.
    pub acks_dropped: Counter,
    /// TCP sockets open on the gRPC port (set up or not).
    pub sockets: Gauge,
    /// Sockets closed at accept for being over `--grpc-max-sockets`.
    pub sockets_refused: Counter,
}

impl Metrics {
    /// Appends the gRPC door's families.
    pub fn render(&self, e: &mut Exposition<'_>) {
        e.gauge(
            "registry_grpc_connections",
            "gRPC (Nacos 2.x) connections set up.",
            self.connections.get(),
        );
        e.counter(
            "registry_grpc_refused_total",
            "gRPC requests answered with an ErrorResponse.",
            self.refused.get(),
        );
        e.counter(
            "registry_grpc_dropped_idle_total",
            "Connections dropped for not answering a detection.",
            self.dropped_idle.get(),
        );
        e.counter(
            "registry_grpc_acks_dropped_total",
            "Push acks dropped on a full queue.",
            self.acks_dropped.get(),
        );
        e.gauge(
            "registry_grpc_sockets",
            "TCP sockets open on the gRPC port, set up or not.",
            self.sockets.get(),
        );
        e.counter(
            "registry_grpc_sockets_refused_total",
            "Sockets closed at accept for being over --grpc-max-sockets.",
            self.sockets_refused.get(),
        );
    }
}

/// The 2.x connections' shared state (one per server): the table, the
/// bounds, the counters and the ack queue to the notifier.
pub struct Grpc {
    /// Set-up connections.
    pub hub: Hub,
    /// Bounds.
    pub limits: Limits,
    /// Counters.
    pub metrics: Metrics,
    acks: mpsc::Sender<(u64, u64)>,
    ack_receiver: Mutex<Option<mpsc::Receiver<(u64, u64)>>>,
    stopping: AtomicBool,
    /// Sockets open now: incremented only by the accept loop, decremented when a
    /// connection is dropped (see `grpc::admission`).
    pub(crate) sockets: AtomicUsize,
}

impl Grpc {
    /// State for a server with `limits`.
    pub fn new(limits: Limits) -> Grpc {
        let (acks, receiver) = mpsc::channel(ACK_QUEUE);
        Grpc {
            hub: Hub::new(limits.max_connections),
            limits,
            metrics: Metrics::default(),
            acks,
            ack_receiver: Mutex::new(Some(receiver)),
            stopping: AtomicBool::new(false),
            sockets: AtomicUsize::new(0),
        }
    }

    /// Hands the ack of push `seq` on connection `number` to the notifier. Never
    /// blocks: a full queue drops the ack (the push is then resent once).
    pub fn ack(&self, number: u64, seq: u64) {
        if self.acks.try_send((number, seq)).is_err() {
            self.metrics.acks_dropped.inc();
        }
    }

    /// The ack receiver; the notifier takes it once.
    pub(crate) fn take_acks(&self) -> Option<mpsc::Receiver<(u64, u64)>> {
        self.ack_receiver.lock().take()
    }

    /// Marks the start of shutdown (see [`Grpc::stopping`]).
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// True once shutdown began: requests are refused, closing connections keep
    /// their instances (the process is going away).
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }
}
