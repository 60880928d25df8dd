//! HTTP/1.1 client connections: keep-alive, optional pipelining, source addresses.
//!
//! A worker owns a few [`Lane`]s; each is one keep-alive connection driven by one
//! local task ([`drive`]), fed by the worker's scheduler through a queue. The task
//! writes up to `depth` requests ahead of their responses (1 = one at a time, like a
//! Java client; more pipelines them), reads and frames responses with
//! `registry_proto::http1::parse_response`, and hands each one to the worker's
//! [`Exchange`], which records it and updates the fleet. It never holds a borrow of the
//! worker's state across an await.
//!
//! Connections are spread over loopback source addresses `127.0.0.x`: the socket is
//! bound before `connect` (with `IP_BIND_ADDRESS_NO_PORT`, so the kernel picks the port
//! at connect time and ports are shared between destinations). This matters for push:
//! the registry pushes to the HTTP peer's source IP, so a subscriber's UDP socket is
//! bound to the same address as the connection its polls use.
//!
//! Servers: a lane is given the list of servers (one, or every member of a cluster)
//! and the one to start with; the worker spreads its lanes over the list. When a
//! connection attempt fails, the lane moves on to the next server in the list, as a
//! Nacos client rotates through its server list, so a dead node's clients fail over
//! to the live ones.
//!
//! Failures: a request without a response after the timeout fails as `timeout`, a
//! connection that breaks fails its in-flight requests as `connection`; queued requests
//! wait for the reconnect (and fail as `connection` if the server stays unreachable for
//! longer than the timeout). A response saying `Connection: close` ends the connection
//! gracefully: the requests pipelined behind it are sent again on the next one.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use registry_proto::http1::{finish_response_at_eof, parse_response, Response, RESPONSE_MAX_BODY};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::recorder::{ErrorClass, Failure, Op};
use crate::schedule::{Clock, Nanos};

/// What a request still queued or in flight when the run ended failed of.
const RUN_ENDED: Failure = Failure::new(
    ErrorClass::Timeout,
    "no answer before the run ended (the lane gave up)",
);

/// What a request that waited in its lane's queue longer than the timeout failed of.
const QUEUED_TOO_LONG: Failure = Failure::new(
    ErrorClass::Timeout,
    "waited longer than the request timeout to be written (not sent)",
);

/// One request as the scheduler hands it to a lane: 24 bytes, no payload (the
/// [`Exchange`] encodes it when it is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// What it is.
    pub op: Op,
    /// Whose: a local instance index, a subscriber index or a service index.
    pub id: u32,
    /// The subscriber generation it was made for (0 otherwise).
    pub generation: u32,
    /// The intended send time.
    pub intended: Nanos,
}

/// What a lane needs from its worker: request bytes, and what to do with responses.
pub trait Exchange {
    /// Appends the request's bytes to `out`.
    fn encode(&self, req: &Request, out: &mut Vec<u8>);
    /// The request is being written at `sent`; it could have been from `ready` on
    /// (its intended time, or later when its connection had no room for it).
    fn sent(&self, req: &Request, ready: Nanos, sent: Nanos);
    /// The request was answered (`Ok`) or failed without an answer (`Err`) at `done`.
    fn complete(
        &self,
        req: &Request,
        sent: Nanos,
        done: Nanos,
        result: Result<&Response<'_>, &Failure>,
    );
    /// A queued request was never sent (the server stayed unreachable, it waited
    /// longer than the timeout, or the run ended); declared failed at `declared`.
    fn abandon(&self, req: &Request, failure: &Failure, declared: Nanos);
    /// Whether the worker's driver is due to run (see [`crate::schedule::DriverDue`]):
    /// the lane then yields the thread before its next read.
    fn driver_due(&self) -> bool;
}

/// The queue between a worker's scheduler and one connection task.
#[derive(Debug)]
pub struct Lane {
    queue: RefCell<VecDeque<Request>>,
    notify: Notify,
    /// Whether the task can take more requests right now (so a push wakes it).
    room: Cell<bool>,
    in_flight: Cell<usize>,
    /// Since when the connection has had room for another request: a request
    /// intended before that waited for the wire until then, not for loadgen.
    room_since: Cell<Nanos>,
    oldest_sent: Cell<Nanos>,
    abort: Cell<bool>,
    closing: Cell<bool>,
    /// Set when the run ends: whatever is still queued or in flight fails now.
    gave_up: Cell<bool>,
    /// The source address the connection is bound to (`None`: the OS picks).
    pub source: Option<IpAddr>,
    /// The servers this lane may use, and the index of the one it uses now.
    servers: Rc<[SocketAddr]>,
    server: Cell<usize>,
    /// The open connection, shared by the lane's task and the worker's driver
    /// ([`Lane::write_through`]); `None` while connecting.
    wire: RefCell<Option<Wire>>,
}

/// A lane's open connection and what is on it. Borrowed only between awaits, by
/// the lane's task or by the driver, never by both: one thread runs them.
#[derive(Debug)]
struct Wire {
    stream: Rc<TcpStream>,
    /// Written requests awaiting their answers, in order, with their write times.
    inflight: VecDeque<(Request, Nanos)>,
    /// Encoded requests not yet (all) written, from `wpos`.
    wbuf: Vec<u8>,
    wpos: usize,
    /// Most requests in flight, and how long a request may wait to be written.
    limits: (usize, Nanos),
}

/// What one step of a connection left: whether nothing is in flight, whether the
/// pipeline has room, whether bytes are still to be written.
struct Step {
    idle: bool,
    room: bool,
    writing: bool,
}

impl Lane {
    /// An empty lane whose connection binds `source` and goes to `servers[first]`.
    pub fn new(source: Option<IpAddr>, servers: Rc<[SocketAddr]>, first: usize) -> Lane {
        Lane {
            queue: RefCell::new(VecDeque::new()),
            notify: Notify::new(),
            room: Cell::new(true),
            in_flight: Cell::new(0),
            room_since: Cell::new(0),
            oldest_sent: Cell::new(Nanos::MAX),
            abort: Cell::new(false),
            closing: Cell::new(false),
            gave_up: Cell::new(false),
            source,
            server: Cell::new(first % servers.len().max(1)),
            servers,
            wire: RefCell::new(None),
        }
    }

    /// The server the lane connects to now.
    pub fn server(&self) -> SocketAddr {
        self.servers[self.server.get()]
    }

    /// Moves on to the next server in the list (a failed connection attempt).
    pub fn fail_over(&self) {
        self.server
            .set((self.server.get() + 1) % self.servers.len());
    }

    /// Queues a request, waking the connection task if it has room to send.
    pub fn push(&self, req: Request) {
        self.queue.borrow_mut().push_back(req);
        if self.room.get() {
            self.notify.notify_one();
        }
    }

    /// Requests queued or in flight.
    pub fn outstanding(&self) -> usize {
        self.queue.borrow().len() + self.in_flight.get()
    }

    /// Queued (not yet written) requests that match `pred`.
    pub fn queued_matching(&self, pred: impl Fn(&Request) -> bool) -> usize {
        self.queue.borrow().iter().filter(|r| pred(r)).count()
    }

    /// Aborts the connection if its oldest request has waited longer than `timeout`.
    pub fn check_timeout(&self, now: Nanos, timeout: Duration) {
        let oldest = self.oldest_sent.get();
        if self.in_flight.get() > 0
            && oldest != Nanos::MAX
            && now.saturating_sub(oldest) > timeout.as_nanos() as Nanos
        {
            self.abort.set(true);
            self.notify.notify_one();
        }
    }

    /// Asks the task to finish what is queued and stop.
    pub fn close(&self) {
        self.closing.set(true);
        self.notify.notify_one();
    }

    /// Ends the lane now: requests in flight fail as timeouts and queued ones are
    /// abandoned, each recorded at this moment (so a stalled server's last requests
    /// are in the record too, instead of vanishing with the task).
    pub fn give_up(&self) {
        self.closing.set(true);
        self.gave_up.set(true);
        self.notify.notify_one();
    }

    /// Abandons every queued request for `failure`, declared at `now`.
    fn abandon_queued<E: Exchange>(&self, ex: &E, failure: &Failure, now: Nanos) {
        let queued: Vec<Request> = self.queue.borrow_mut().drain(..).collect();
        for r in &queued {
            ex.abandon(r, failure, now);
        }
    }

    fn pop(&self) -> Option<Request> {
        self.queue.borrow_mut().pop_front()
    }

    /// Takes the next queued request (for a lane task other than [`drive`]).
    pub fn take(&self) -> Option<Request> {
        self.pop()
    }

    /// Takes every queued request.
    pub fn take_all(&self) -> Vec<Request> {
        self.queue.borrow_mut().drain(..).collect()
    }

    /// Takes the queued requests intended before `cutoff` (all of them once the lane
    /// is closing): those that waited too long for an unreachable server.
    pub fn take_stale(&self, cutoff: Nanos) -> Vec<Request> {
        let closing = self.closing.get();
        let mut q = self.queue.borrow_mut();
        let (old, keep): (Vec<_>, Vec<_>) =
            q.drain(..).partition(|r| closing || r.intended < cutoff);
        q.extend(keep);
        old
    }

    /// Whether the run asked the lane to finish ([`Lane::close`]).
    pub fn is_closing(&self) -> bool {
        self.closing.get()
    }

    /// Whether the run gave up on the lane ([`Lane::give_up`]).
    pub fn has_given_up(&self) -> bool {
        self.gave_up.get()
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    /// Sets the count of requests in flight (kept by the lane's task).
    pub fn set_in_flight(&self, n: usize) {
        self.in_flight.set(n);
    }

    /// Writes the queued requests from here (the worker's driver, as soon as they
    /// are due) when the connection is open with room and nothing half-written:
    /// a due request then leaves without waiting for this lane's task to be
    /// scheduled behind the other lanes' work. The task is woken to read the
    /// answers. Anything else (no connection, a full pipeline, a partial write) is
    /// left to the task.
    pub fn write_through<E: Exchange>(&self, ex: &E, clock: &Clock) {
        if self.queue.borrow().is_empty() || self.closing.get() {
            return;
        }
        let Ok(mut wire) = self.wire.try_borrow_mut() else {
            return;
        };
        let Some(w) = wire.as_mut() else { return };
        if w.wpos < w.wbuf.len() || w.inflight.len() >= w.limits.0 {
            return;
        }
        fill(ex, self, w.limits, clock, &mut w.inflight, &mut w.wbuf);
        // A failed write stays in the buffer: the task's own write meets the
        // error and reconnects.
        let _ = flush(&w.stream, &mut w.wbuf, &mut w.wpos);
        drop(wire);
        self.notify.notify_one();
    }

    /// Fills the pipeline from the queue and writes what the socket takes.
    fn step<E: Exchange>(&self, ex: &E, clock: &Clock) -> Result<Step, End> {
        let mut wire = self.wire.borrow_mut();
        let Some(w) = wire.as_mut() else {
            return Err(End::Reconnect(None));
        };
        fill(ex, self, w.limits, clock, &mut w.inflight, &mut w.wbuf);
        flush(&w.stream, &mut w.wbuf, &mut w.wpos)?;
        Ok(Step {
            idle: w.inflight.is_empty(),
            room: w.inflight.len() < w.limits.0,
            writing: w.wpos < w.wbuf.len(),
        })
    }

    /// Reads and completes what has arrived; marks the room an answer made in a
    /// full pipeline. `Some` when the connection must end.
    fn read<E: Exchange>(&self, ex: &E, clock: &Clock, reader: &mut Reader) -> Option<End> {
        let mut wire = self.wire.borrow_mut();
        let w = wire.as_mut()?;
        let full = w.inflight.len() >= w.limits.0;
        let stream = w.stream.clone();
        let end = read_responses(ex, &stream, clock, &mut w.inflight, reader);
        if end.is_none() && full && w.inflight.len() < w.limits.0 {
            self.room_from(clock.now());
        }
        end
    }

    /// The connection has room for another request from `at` on: it opened, or an
    /// answer freed a full pipeline.
    pub fn room_from(&self, at: Nanos) {
        self.room_since.set(at);
    }

    /// When a request intended at `intended` could first have been written: what
    /// it waited for before that was the wire's (a full pipeline's earlier answers,
    /// a reconnect), what it waited after, loadgen's.
    pub fn ready_at(&self, intended: Nanos) -> Nanos {
        intended.max(self.room_since.get())
    }

    /// Wakes the lane's task.
    pub fn wake(&self) {
        self.notify.notify_one();
    }

    /// Waits until the lane's task is woken.
    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

/// The loopback source address of connection number `n` spread over `count`
/// addresses: `127.0.0.1` to `127.0.0.count`, in turn.
pub fn loopback_source(n: u32, count: u8) -> IpAddr {
    IpAddr::V4(std::net::Ipv4Addr::new(
        127,
        0,
        0,
        1 + (n % u32::from(count.max(1))) as u8,
    ))
}

/// Opens a TCP connection to `target`, bound to `source` if given.
pub async fn connect(target: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let socket = Socket::new(
        Domain::for_address(target),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_nonblocking(true)?;
    socket.set_nodelay(true)?;
    if let Some(ip) = source {
        // Let connect() choose the port, so the 4-tuple (not the source port alone)
        // must be unique: without it every bound socket holds a port of its own.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let _ = nix::sys::socket::setsockopt(
            &socket,
            nix::sys::socket::sockopt::IpBindAddressNoPort,
            &true,
        );
        socket.bind(&SocketAddr::new(ip, 0).into())?;
    }
    match socket.connect(&target.into()) {
        Ok(()) => {}
        Err(e)
            if e.raw_os_error() == Some(nix::errno::Errno::EINPROGRESS as i32)
                || e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    let stream = TcpStream::from_std(std::net::TcpStream::from(socket))?;
    stream.writable().await?;
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    stream.peer_addr()?;
    Ok(stream)
}

/// A response read buffer: reads append, framed responses are consumed from the front.
#[derive(Debug)]
pub struct Reader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    framer: Framer,
}

/// Frames responses as `parse_response` does, remembering the heads it has seen on
/// this connection, each with what `parse_response` made of it.
///
/// Why: a registry answers the same request kind with the same head byte for byte
/// (status line, `Content-Type`, `Content-Length` of a same-sized body), and a
/// generator issuing ~700k requests/s on one core cannot afford to parse each head
/// again (httparse, field collection, UTF-8 checks were ~9 % of its CPU). A response
/// that starts with a known head is framed by comparing bytes. That is exact, not a
/// second parser: the head's parse depends on its bytes alone, and only a head whose
/// body was framed by `Content-Length` is kept (the body then ends exactly where the
/// response does, which a chunked body never does), so the same bytes frame the same
/// way. Anything else (a new head, a chunked or close-delimited body, an error) goes
/// to `parse_response`, which may add the head here.
#[derive(Debug, Default)]
pub struct Framer {
    heads: Vec<KnownHead>,
    /// The entry the next new head replaces once the table is full.
    next: usize,
}

#[derive(Debug)]
struct KnownHead {
    /// The status line through the blank line.
    head: Box<[u8]>,
    body_len: usize,
    status: u16,
    version: registry_proto::http1::Version,
    keep_alive: bool,
    content_type: Option<Box<str>>,
    content_encoding: Option<Box<str>>,
}

impl Framer {
    /// Frames the first response in `bytes`, as `parse_response` does: `Ok(None)`
    /// when it has not fully arrived.
    pub fn frame<'a>(
        &'a mut self,
        bytes: &'a [u8],
    ) -> Result<Option<(Response<'a>, usize)>, registry_proto::http1::HttpError> {
        if let Some(i) = self.find(bytes) {
            return Ok(self.frame_known(i, bytes));
        }
        let framed = parse_response(bytes)?;
        if let Some((resp, used)) = &framed {
            self.learn(bytes, resp, *used);
        }
        Ok(framed)
    }

    /// Heads kept per connection: a few request kinds share a connection.
    const MAX: usize = 4;
    /// Longer heads are not worth keeping (no registry answer has one).
    const MAX_HEAD: usize = 512;

    /// Which known head `bytes` starts with.
    fn find(&self, bytes: &[u8]) -> Option<usize> {
        self.heads.iter().position(|k| bytes.starts_with(&k.head))
    }

    /// The response at the start of `bytes`, whose head is entry `i`; `None` when its
    /// body has not fully arrived.
    fn frame_known<'a>(&'a self, i: usize, bytes: &'a [u8]) -> Option<(Response<'a>, usize)> {
        let k = &self.heads[i];
        let used = k.head.len() + k.body_len;
        if bytes.len() < used {
            return None;
        }
        let response = Response {
            status: k.status,
            version: k.version,
            keep_alive: k.keep_alive,
            content_type: k.content_type.as_deref(),
            content_encoding: k.content_encoding.as_deref(),
            body: std::borrow::Cow::Borrowed(&bytes[k.head.len()..used]),
        };
        Some((response, used))
    }

    /// Remembers the head of `resp`, which `parse_response` framed as the first
    /// `used` bytes of `bytes`, if its body was framed by `Content-Length`.
    fn learn(&mut self, bytes: &[u8], resp: &Response<'_>, used: usize) {
        let std::borrow::Cow::Borrowed(body) = &resp.body else {
            return; // joined chunks
        };
        let Some(head_len) = used.checked_sub(body.len()) else {
            return;
        };
        // A `Content-Length` body ends where the response ends; a chunk's data is
        // followed by at least the last chunk, so it never does.
        if !std::ptr::eq(body.as_ptr_range().end, bytes[..used].as_ptr_range().end)
            || head_len > Self::MAX_HEAD
            || !bytes[..head_len].ends_with(b"\r\n\r\n")
        {
            return;
        }
        let known = KnownHead {
            head: bytes[..head_len].into(),
            body_len: body.len(),
            status: resp.status,
            version: resp.version,
            keep_alive: resp.keep_alive,
            content_type: resp.content_type.map(Into::into),
            content_encoding: resp.content_encoding.map(Into::into),
        };
        if self.heads.len() < Self::MAX {
            self.heads.push(known);
        } else {
            self.heads[self.next] = known;
            self.next = (self.next + 1) % Self::MAX;
        }
    }
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

impl Reader {
    /// A 64 KiB buffer (it grows for large responses).
    pub fn new() -> Reader {
        Reader {
            buf: vec![0; 64 * 1024],
            start: 0,
            end: 0,
            framer: Framer::default(),
        }
    }

    /// Forgets buffered bytes (after a reconnect).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Whether bytes of an unfinished response are buffered.
    pub fn has_partial(&self) -> bool {
        self.end > self.start
    }

    /// One non-blocking read. `Ok(0)` is end of stream.
    pub fn read(&mut self, stream: &TcpStream) -> io::Result<usize> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < RESPONSE_MAX_BODY + 64 * 1024 {
                let n = self.buf.len() * 2;
                self.buf.resize(n, 0);
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "response too large",
                ));
            }
        }
        let n = stream.try_read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// Hands every complete buffered response to `f`, in order; stops early when `f`
    /// returns false. Errors are framing errors (the connection is unusable).
    pub fn drain(
        &mut self,
        mut f: impl FnMut(&Response<'_>) -> bool,
    ) -> Result<(), registry_proto::http1::HttpError> {
        let Reader {
            buf,
            start,
            end,
            framer,
        } = self;
        while *start < *end {
            let framed = framer.frame(&buf[*start..*end])?;
            match framed {
                Some((resp, used)) => {
                    *start += used;
                    if !f(&resp) {
                        break;
                    }
                }
                None => break,
            }
        }
        if *start == *end {
            *start = 0;
            *end = 0;
        }
        Ok(())
    }

    /// The response left in the buffer when the peer closed (a close-delimited body).
    pub fn finish_at_eof(&mut self, f: impl FnOnce(&Response<'_>)) -> bool {
        match finish_response_at_eof(&self.buf[self.start..self.end]) {
            Ok((resp, _)) => {
                f(&resp);
                self.clear();
                true
            }
            Err(_) => false,
        }
    }
}

/// How a connection ended.
enum End {
    /// Closed on request, nothing left.
    Closed,
    /// Reconnect; in-flight requests fail for the reason, or are sent again (`None`).
    Reconnect(Option<Failure>),
    /// The run ended ([`Lane::give_up`]): everything outstanding fails now.
    GaveUp,
}

/// Settings of one lane's task.
#[derive(Debug, Clone, Copy)]
pub struct LaneConfig {
    /// Most requests in flight.
    pub depth: usize,
    /// Request timeout (also how long queued requests wait for an unreachable server).
    pub timeout: Duration,
}

/// Runs one lane's connection until the lane is closed and empty.
pub async fn drive<E: Exchange>(ex: Rc<E>, lane: Rc<Lane>, cfg: LaneConfig, clock: Clock) {
    let limits = (cfg.depth, cfg.timeout.as_nanos() as Nanos);
    let mut reader = Reader::new();
    let mut failures = 0u32;
    loop {
        if lane.closing.get() && lane.outstanding() == 0 {
            return;
        }
        if lane.gave_up.get() {
            lane.abandon_queued(&*ex, &RUN_ENDED, clock.now());
            return;
        }
        let stream = match connect(lane.server(), lane.source).await {
            Ok(s) => {
                failures = 0;
                Rc::new(s)
            }
            Err(e) => {
                let failure = Failure::because(
                    ErrorClass::Connection,
                    format_args!("connecting to {}: {e}", lane.server()),
                );
                failures += 1;
                lane.fail_over();
                // The server is unreachable: give up on what waited too long.
                let now = clock.now();
                let cutoff = now.saturating_sub(cfg.timeout.as_nanos() as Nanos);
                for r in &lane.take_stale(cutoff) {
                    ex.abandon(r, &failure, now);
                }
                let backoff = Duration::from_millis(u64::from(failures.min(10)) * 50);
                tokio::time::sleep(backoff).await;
                continue;
            }
        };
        lane.abort.set(false);
        lane.room_from(clock.now());
        reader.clear();
        *lane.wire.borrow_mut() = Some(Wire {
            stream: stream.clone(),
            inflight: VecDeque::with_capacity(cfg.depth),
            wbuf: Vec::with_capacity(8 * 1024),
            wpos: 0,
            limits,
        });
        let end = session(&*ex, &lane, &stream, &clock, &mut reader).await;
        let mut inflight = lane
            .wire
            .borrow_mut()
            .take()
            .map(|w| w.inflight)
            .unwrap_or_default();
        lane.in_flight.set(0);
        lane.oldest_sent.set(Nanos::MAX);
        match end {
            End::Closed => return,
            End::GaveUp => {
                let now = clock.now();
                while let Some((req, sent)) = inflight.pop_front() {
                    ex.complete(&req, sent, now, Err(&RUN_ENDED));
                }
                lane.abandon_queued(&*ex, &RUN_ENDED, now);
                return;
            }
            End::Reconnect(None) => {
                let mut q = lane.queue.borrow_mut();
                while let Some((req, _)) = inflight.pop_back() {
                    q.push_front(req);
                }
            }
            End::Reconnect(Some(failure)) => {
                let done = clock.now();
                while let Some((req, sent)) = inflight.pop_front() {
                    ex.complete(&req, sent, done, Err(&failure));
                }
            }
        }
    }
}

/// One connection's life: fill the pipeline from the lane's queue, write, wait
/// for the socket or the lane, read and complete responses; until the lane closes,
/// is given up, or the connection must be made again. The driver may have
/// written requests on it in between ([`Lane::write_through`]).
async fn session<E: Exchange>(
    ex: &E,
    lane: &Lane,
    stream: &TcpStream,
    clock: &Clock,
    reader: &mut Reader,
) -> End {
    loop {
        if lane.gave_up.get() {
            return End::GaveUp;
        }
        let step = match lane.step(ex, clock) {
            Ok(step) => step,
            Err(end) => return end,
        };
        if step.idle {
            if lane.closing.get() {
                return End::Closed;
            }
            if let Some(end) = idle(lane, stream, reader).await {
                return end;
            }
            continue;
        }
        lane.room.set(step.room);
        let interest = if step.writing {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        tokio::select! {
            biased;
            r = stream.ready(interest) => {
                let ready = match r {
                    Ok(r) => r,
                    Err(e) => return End::Reconnect(Some(Failure::because(
                        ErrorClass::Connection,
                        format_args!("waiting on the socket: {e}"),
                    ))),
                };
                if ready.is_readable() {
                    if let Some(end) = lane.read(ex, clock, reader) {
                        return end;
                    }
                }
            }
            _ = lane.notify.notified() => {}
        }
        if ex.driver_due() {
            tokio::task::yield_now().await;
        }
        if lane.gave_up.get() {
            return End::GaveUp;
        }
        if lane.abort.get() {
            return End::Reconnect(Some(Failure::new(
                ErrorClass::Timeout,
                "no answer within the request timeout (the connection is dropped)",
            )));
        }
    }
}

/// Takes from the lane's queue what the pipeline has room for, encoding each
/// request into `wbuf` and stamping it sent now.
fn fill<E: Exchange>(
    ex: &E,
    lane: &Lane,
    (depth, timeout): (usize, Nanos),
    clock: &Clock,
    inflight: &mut VecDeque<(Request, Nanos)>,
    wbuf: &mut Vec<u8>,
) {
    if inflight.len() < depth {
        let now = clock.now();
        while inflight.len() < depth {
            let Some(req) = lane.pop() else { break };
            if now.saturating_sub(req.intended) > timeout {
                // Waited longer than a client would: a timeout, not sent. This
                // also bounds the backlog of a generator or server that fell behind.
                ex.abandon(&req, &QUEUED_TOO_LONG, now);
                continue;
            }
            ex.encode(&req, wbuf);
            ex.sent(&req, lane.ready_at(req.intended), now);
            inflight.push_back((req, now));
        }
    }
    lane.in_flight.set(inflight.len());
    lane.oldest_sent
        .set(inflight.front().map_or(Nanos::MAX, |x| x.1));
}

/// Writes as much of `wbuf` from `wpos` as the socket takes (the buffer empties
/// once all of it is written).
fn flush(stream: &TcpStream, wbuf: &mut Vec<u8>, wpos: &mut usize) -> Result<(), End> {
    while *wpos < wbuf.len() {
        match stream.try_write(&wbuf[*wpos..]) {
            Ok(n) => *wpos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => {
                return Err(End::Reconnect(Some(Failure::because(
                    ErrorClass::Connection,
                    format_args!("writing: {e}"),
                ))))
            }
        }
    }
    if *wpos == wbuf.len() {
        wbuf.clear();
        *wpos = 0;
    }
    Ok(())
}

/// Nothing in flight: waits for work, but notices a server that closes the
/// connection (`Some`: start afresh).
async fn idle(lane: &Lane, stream: &TcpStream, reader: &mut Reader) -> Option<End> {
    lane.room.set(true);
    tokio::select! {
        // First: the driver wakes the task after writing on its connection.
        biased;
        _ = lane.notify.notified() => None,
        r = stream.ready(Interest::READABLE) => {
            if r.is_err() {
                return Some(End::Reconnect(None));
            }
            if lane.in_flight.get() > 0 {
                return None; // answers to what the driver wrote: read them busy
            }
            match reader.read(stream) {
                // Spurious readiness.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
                // End of stream (the server closed an idle connection), an
                // error, or bytes nobody asked for: start afresh.
                _ => Some(End::Reconnect(None)),
            }
        }
    }
}

/// Reads until the socket would block, completing every framed response. `Some` when
/// the connection must end.
fn read_responses<E: Exchange>(
    ex: &E,
    stream: &TcpStream,
    clock: &Clock,
    inflight: &mut VecDeque<(Request, Nanos)>,
    reader: &mut Reader,
) -> Option<End> {
    loop {
        match reader.read(stream) {
            Ok(0) => {
                let done = clock.now();
                if reader.has_partial() {
                    if let Some((req, sent)) = inflight.front().copied() {
                        if reader.finish_at_eof(|resp| ex.complete(&req, sent, done, Ok(resp))) {
                            inflight.pop_front();
                        }
                    }
                }
                return Some(End::Reconnect(Some(Failure::new(
                    ErrorClass::Connection,
                    "the server closed the connection before answering",
                ))));
            }
            Ok(_) => {
                let done = clock.now();
                let mut close = false;
                let mut stray = false;
                let framed = reader.drain(|resp| match inflight.pop_front() {
                    Some((req, sent)) => {
                        ex.complete(&req, sent, done, Ok(resp));
                        if !resp.keep_alive {
                            close = true;
                        }
                        !close
                    }
                    None => {
                        stray = true;
                        false
                    }
                });
                if let Err(e) = framed {
                    return Some(End::Reconnect(Some(Failure::because(
                        ErrorClass::Protocol,
                        format_args!("unreadable response: {e}"),
                    ))));
                }
                if stray {
                    return Some(End::Reconnect(Some(Failure::new(
                        ErrorClass::Protocol,
                        "a response to no request",
                    ))));
                }
                if close {
                    return Some(End::Reconnect(None));
                }
                if inflight.is_empty() && !reader.has_partial() {
                    // Everything asked for has arrived, so nothing more can be on the
                    // way: forget the readiness instead of paying a read that would
                    // only say "would block".
                    clear_readable(stream);
                    return None;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e) => {
                return Some(End::Reconnect(Some(Failure::because(
                    ErrorClass::Connection,
                    format_args!("reading: {e}"),
                ))))
            }
        }
    }
}

/// Clears the stream's read readiness without a system call. Only safe when the peer
/// cannot have sent anything since the last read (no request is outstanding); otherwise
/// its arrival could be forgotten.
pub fn clear_readable(stream: &TcpStream) {
    let _ = stream.try_io(Interest::READABLE, || {
        Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What a response is taken to be, for comparing two framings.
    type Seen = (u16, bool, Option<String>, Option<String>, Vec<u8>);

    fn seen(r: &Response<'_>) -> Seen {
        (
            r.status,
            r.keep_alive,
            r.content_type.map(str::to_owned),
            r.content_encoding.map(str::to_owned),
            r.body.to_vec(),
        )
    }

    /// `parse_response` over the whole wire: the responses, and whether it ended in
    /// a framing error.
    fn reference(wire: &[u8]) -> (Vec<Seen>, bool) {
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            match parse_response(&wire[at..]) {
                Ok(Some((r, used))) => {
                    out.push(seen(&r));
                    at += used;
                }
                Ok(None) => return (out, false),
                Err(_) => return (out, true),
            }
        }
    }

    /// The reader fed `wire` in pieces cut at `cuts`, draining after each piece.
    fn through_reader(wire: &[u8], cuts: &[usize]) -> (Vec<Seen>, bool) {
        let mut reader = Reader::new();
        let mut out = Vec::new();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
        cuts.push(wire.len());
        cuts.sort_unstable();
        let mut from = 0;
        for cut in cuts {
            let piece = &wire[from..cut];
            from = cut;
            reader.buf[reader.end..reader.end + piece.len()].copy_from_slice(piece);
            reader.end += piece.len();
            if reader
                .drain(|r| {
                    out.push(seen(r));
                    true
                })
                .is_err()
            {
                return (out, true);
            }
        }
        (out, false)
    }

    fn response() -> impl Strategy<Value = Vec<u8>> {
        let head = prop_oneof![
            Just("HTTP/1.1 200 OK\r\nContent-Type: application/json;charset=UTF-8\r\n"),
            Just("HTTP/1.1 200 OK\r\nContent-Type: text/plain;charset=UTF-8\r\n"),
            Just("HTTP/1.1 500 Internal Server Error\r\n"),
            Just("HTTP/1.1 204 No Content\r\n"),
            Just("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n"),
            Just("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nConnection: close\r\n"),
        ];
        let framing = prop_oneof![
            Just(0u8), // Content-Length
            Just(1),   // chunked, one chunk
            Just(2),   // chunked, two chunks
        ];
        (head, framing, proptest::collection::vec(b'a'..=b'c', 0..6)).prop_map(
            |(head, framing, body)| {
                let mut w = head.as_bytes().to_vec();
                let body_text = String::from_utf8(body.clone()).unwrap();
                match framing {
                    0 => w.extend(format!("Content-Length: {}\r\n\r\n{body_text}", body.len()).bytes()),
                    1 => w.extend(
                        format!("Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{body_text}\r\n0\r\n\r\n", body.len())
                            .bytes(),
                    ),
                    _ => w.extend(
                        format!("Transfer-Encoding: chunked\r\n\r\n1\r\nz\r\n{:x}\r\n{body_text}\r\n0\r\n\r\n", body.len())
                            .bytes(),
                    ),
                }
                w
            },
        )
    }

    proptest! {
        /// Known heads frame exactly as `parse_response` does, across any read
        /// boundaries, for responses that repeat heads (the common case), vary them,
        /// and for bytes that are damaged.
        #[test]
        fn known_heads_frame_as_the_parser_does(
            responses in proptest::collection::vec(response(), 0..24),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
            damage in proptest::option::of((any::<usize>(), any::<u8>())),
        ) {
            let mut wire: Vec<u8> = responses.concat();
            if let (Some((at, byte)), false) = (damage, wire.is_empty()) {
                let at = at % wire.len();
                wire[at] = byte;
            }
            let (want, want_err) = reference(&wire);
            let (got, got_err) = through_reader(&wire, &cuts);
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(got_err, want_err);
        }
    }

    #[test]
    fn a_repeated_head_is_framed_from_memory() {
        let one = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok";
        let wire = one.repeat(3);
        let mut reader = Reader::new();
        reader.buf[..wire.len()].copy_from_slice(&wire);
        reader.end = wire.len();
        let mut n = 0;
        reader
            .drain(|r| {
                assert_eq!(
                    (r.status, &*r.body, r.content_type),
                    (200, &b"ok"[..], Some("text/plain"))
                );
                n += 1;
                true
            })
            .unwrap();
        assert_eq!(n, 3);
        assert_eq!(reader.framer.heads.len(), 1, "one head learnt, then reused");
        // A chunked response is never remembered.
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
        reader.buf[..chunked.len()].copy_from_slice(chunked);
        reader.end = chunked.len();
        reader.drain(|r| &*r.body == b"ok").unwrap();
        assert_eq!(reader.framer.heads.len(), 1);
    }

    #[test]
    fn a_request_is_ready_when_its_connection_has_room() {
        let lane = Lane::new(None, Rc::from(vec!["127.0.0.1:1".parse().unwrap()]), 0);
        assert_eq!(lane.ready_at(5), 5, "room all along: ready when intended");
        lane.room_from(9);
        assert_eq!(
            lane.ready_at(5),
            9,
            "waited for the wire until there was room"
        );
        assert_eq!(lane.ready_at(12), 12);
    }

    #[test]
    fn lane_wakes_only_with_room() {
        let servers: Rc<[SocketAddr]> = Rc::from(vec![
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        ]);
        let lane = Lane::new(None, servers, 3);
        assert_eq!(lane.server().port(), 2, "starts at first mod len");
        lane.fail_over();
        assert_eq!(lane.server().port(), 1, "rotates through the list");
        lane.fail_over();
        assert_eq!(lane.server().port(), 2);
        let r = Request {
            op: Op::Beat,
            id: 1,
            generation: 0,
            intended: 5,
        };
        lane.push(r);
        lane.room.set(false);
        lane.push(r);
        assert_eq!(lane.outstanding(), 2);
        assert_eq!(lane.pop(), Some(r));
        lane.in_flight.set(1);
        lane.oldest_sent.set(1_000);
        lane.check_timeout(1_000 + 5_000_000, Duration::from_millis(10));
        assert!(!lane.abort.get());
        lane.check_timeout(1_000 + 20_000_000, Duration::from_millis(10));
        assert!(lane.abort.get());
        assert_eq!(lane.queued_matching(|q| q.op == Op::Beat), 1);
    }

    #[test]
    fn reader_frames_pipelined_responses_across_reads() {
        let mut reader = Reader::new();
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 X\r\nContent-Length: 1\r\n\r\nx";
        // Simulate two reads: the second response arrives split.
        let cut = 45;
        reader.buf[..cut].copy_from_slice(&wire[..cut]);
        reader.end = cut;
        let mut seen = Vec::new();
        reader
            .drain(|r| {
                seen.push(r.status);
                true
            })
            .unwrap();
        assert_eq!(seen, [200]);
        assert!(reader.has_partial());
        let rest = &wire[cut..];
        reader.buf[reader.end..reader.end + rest.len()].copy_from_slice(rest);
        reader.end += rest.len();
        reader
            .drain(|r| {
                seen.push(r.status);
                true
            })
            .unwrap();
        assert_eq!(seen, [200, 500]);
        assert!(!reader.has_partial());
    }
}
