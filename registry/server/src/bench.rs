//! The server's request path without sockets or a disk: the real HTTP and
//! gRPC handlers called on request values, writing through the one write
//! path ([`crate::write::Writer::apply`]) with persistence in memory
//! ([`InMemory`]). For the instruction-count gates
//! (`benches/src/bin/hotpaths.rs`), which must count what the server runs,
//! not copies of it: a change in a handler is a change in the gate.
//!
//! What is left out is I/O and scheduling: the socket reads and writes, the
//! tokio tasks around them, and for gRPC the HTTP/2 frames and the codec's
//! message header (tonic's). A request's answer never waits here: an
//! ephemeral write is applied at once, and a persistent one is "durable" as
//! soon as the in-memory journal takes it, so each exchange is polled once.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use anyhow::Context as _;
use clap::Parser as _;
use registry_core::ChangeEvent;
use registry_proto::grpc::Payload;
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::config::Config;
use crate::hub::{connection_id, Connection, Outbound};
use crate::persist::InMemory;
use crate::state::App;
use crate::write::Writer;

/// A single node's state with no listener, no notifier and no data
/// directory. Persistent writes go to an [`InMemory`] journal; the change
/// events the notifier would take are drained by [`Server::drain_changes`].
pub struct Server {
    /// The server state the doors see.
    pub app: Arc<App>,
    /// The journal persistent writes are submitted to.
    pub journal: Arc<InMemory>,
    changes: parking_lot::Mutex<mpsc::Receiver<ChangeEvent>>,
}

impl Server {
    /// The server of the default configuration (the flags' defaults, as a
    /// `registry` with no arguments), changed by `edit`.
    ///
    /// # Errors
    /// When the edited configuration is invalid, or names a data directory
    /// or cluster members (this server has neither).
    pub fn new(edit: impl FnOnce(&mut Config)) -> anyhow::Result<Server> {
        let mut config = Config::parse_from(["registry"]);
        edit(&mut config);
        if config.data_dir.is_some() || !config.members.is_empty() {
            anyhow::bail!("a bench server has no data directory and no cluster");
        }
        let mut app = App::with_clock(config, Clock::start())?;
        let journal = Arc::new(InMemory::default());
        app.writer = Writer::new(
            app.store.clone(),
            app.changes.clone(),
            app.health_targets.clone(),
            Some(journal.clone()),
            false,
        )
        .with_namespaces(app.namespaces.clone());
        let changes = app
            .changes
            .take_receiver()
            .context("the change feed's receiver")?;
        Ok(Server {
            app: Arc::new(app),
            journal,
            changes: parking_lot::Mutex::new(changes),
        })
    }

    /// Takes the change events published so far, as the notifier would
    /// (without it the feed fills and overflows); how many there were.
    pub fn drain_changes(&self) -> usize {
        let mut rx = self.changes.lock();
        let mut n = 0;
        while rx.try_recv().is_ok() {
            n += 1;
        }
        n + self.app.changes.take_overflow().len()
    }

    /// An HTTP connection from `peer`, without its socket.
    pub fn http(&self, peer: SocketAddr) -> HttpConnection<'_> {
        HttpConnection {
            app: &self.app,
            peer,
            batch: crate::http::Batch::default(),
        }
    }

    /// A set-up 2.x connection from `peer` (as after its
    /// `ConnectionSetupRequest`), without its stream.
    ///
    /// # Errors
    /// When the connection table refuses it (full, or `peer` has one).
    pub fn grpc(&self, peer: SocketAddr) -> anyhow::Result<GrpcConnection> {
        let (outbound, pushes) = mpsc::channel(crate::hub::OUTBOUND_QUEUE);
        let app = self.app.clone();
        let conn = app
            .grpc
            .hub
            .register(
                peer,
                connection_id(peer, Clock::wall_ms()),
                "Nacos-Java-Client:v2.4.2".into(),
                outbound,
                app.clock.now().0,
            )
            .map_err(|e| anyhow::anyhow!("the connection table refused {peer}: {e:?}"))?;
        Ok(GrpcConnection {
            app,
            conn,
            _pushes: pushes,
        })
    }
}

/// One HTTP/1.1 connection's answering: what its task does with the bytes
/// it read, and the bytes it would write.
pub struct HttpConnection<'a> {
    app: &'a App,
    peer: SocketAddr,
    batch: crate::http::Batch<'a>,
}

impl HttpConnection<'_> {
    /// Answers every complete request in `bytes` (pipelined ones too) as
    /// the connection task does: parse, route, handler, response; returns
    /// what it would write, and how many bytes of `bytes` it took.
    /// `None` when an answer had to wait (it never does here).
    pub fn exchange(&mut self, bytes: &[u8]) -> Option<(Written<'_>, usize)> {
        self.batch.out.clear(usize::MAX, 0);
        let mut clock = tokio::time::Instant::now();
        let progress = self
            .batch
            .answer(self.app, bytes, self.peer, false, &mut clock);
        poll_once(self.batch.finish_later())?;
        Some((Written(&self.batch.out), progress.consumed))
    }
}

/// What a connection would write for a batch: its bytes and the cached
/// bodies it writes from the cache instead of copying them (see
/// `http::responses`), as the connection holds them.
pub struct Written<'a>(&'a crate::http::Responses);

impl Written<'_> {
    /// Bytes it would write.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it would write nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bytes as they would go out, in one buffer: a copy the connection
    /// never makes, for checking what was answered outside measured loops.
    pub fn to_vec(&self) -> Vec<u8> {
        self.0.to_vec()
    }
}

/// One set-up 2.x connection; removed from the table when dropped.
pub struct GrpcConnection {
    app: Arc<App>,
    conn: Arc<Connection>,
    /// What the server would push on the stream (kept open, never read).
    _pushes: mpsc::Receiver<Outbound>,
}

impl GrpcConnection {
    /// Answers one unary request (`/Request/request`) as the gRPC door
    /// does once tonic has decoded it; `None` when the answer had to wait
    /// (it never does here).
    pub fn request(&self, payload: &Payload) -> Option<Payload> {
        let app = &self.app;
        poll_once(crate::grpc::handler::handle(
            app,
            &app.grpc,
            self.conn.peer,
            payload,
        ))
    }

    /// Instances this connection owns (those its registers added).
    pub fn owned_instances(&self) -> usize {
        self.conn.owned.lock().instances.len()
    }
}

impl Drop for GrpcConnection {
    fn drop(&mut self) {
        self.app.grpc.hub.remove(&self.conn);
    }
}

/// Polls `f` once: the bench path never waits.
fn poll_once<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}
