//! The accept loop and the per-connection loop, with the deadlines and the
//! memory budget that keep slow or hostile clients from holding the server.
//!
//! # Deadlines
//! A connection is always under exactly one deadline, and reading a byte
//! never moves it (a client dribbling one byte a second gains nothing):
//! - idle (nothing buffered): `--idle-timeout-ms` after its last response;
//!   then it is closed quietly;
//! - a request head started: `--head-timeout-ms` after its first byte
//!   arrived, for the whole head;
//! - the head is complete, the body is not: `--body-timeout-ms` after the
//!   head completed, for the whole body.
//!
//! A request past its deadline is answered 408 and the connection closed.
//! Every write of responses must finish within `--write-timeout-ms`, or the
//! connection is closed: a client that never reads cannot park a task on
//! a full socket buffer.
//!
//! # Memory
//! Read buffers are charged to one [`BufferBudget`] shared by every
//! connection (`--max-buffered-bytes`) before they are allocated. A
//! connection whose buffer cannot grow (a large body while the budget is
//! spent) is answered 503 and closed; a new connection that cannot get its
//! first buffer is refused like one past `--max-connections`. So
//! `max_connections × max_body` can never be allocated at once, whatever
//! the clients send. Buffers grown for a large request shrink back once it
//! is answered.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use registry_proto::http1::{needs_continue, parse_request, write_response, ContentType, CONTINUE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tokio_util::task::TaskTracker;

use super::error::{Failure, TOO_MANY_CONNECTIONS};
use super::responses::{Responses, SLICES};
use super::{answer, Later, Scratch};
use crate::buffers::{BufferBudget, READ_CHUNK};
use crate::state::App;

/// Bytes of responses after which a pipelined batch is written before the
/// rest is answered, bounding per-connection memory.
const FLUSH_AT: usize = 256 * 1024;
/// Longest a connection closed with an error response drains its input.
const LINGER: Duration = Duration::from_millis(500);
/// A buffer larger than this is shrunk back to [`READ_CHUNK`] once empty.
const SHRINK_ABOVE: usize = 4 * READ_CHUNK;
/// The most a pipelining connection's buffer grows to for its batches (see
/// `ReadBuffer::make_room`); no larger than [`SHRINK_ABOVE`], so it is kept
/// while the connection pipelines rather than shrunk after every batch.
const PIPELINE_MAX: usize = SHRINK_ABOVE;

/// A connection's read buffer, whose capacity is charged to the budget.
struct ReadBuffer<'a> {
    bytes: Vec<u8>,
    budget: &'a BufferBudget,
}

impl<'a> ReadBuffer<'a> {
    /// The first buffer, or `None` when the budget is spent.
    fn new(budget: &'a BufferBudget) -> Option<ReadBuffer<'a>> {
        if !budget.try_charge(READ_CHUNK) {
            return None;
        }
        Some(ReadBuffer {
            bytes: Vec::with_capacity(READ_CHUNK),
            budget,
        })
    }

    /// Makes room for a read: at least a quarter chunk free. Grows by
    /// doubling, each step charged first; `false` when the budget is spent.
    ///
    /// `filled` says the last read filled the buffer, so the peer had more
    /// to send: a pipeliner whose batch is larger than the buffer (64 Java
    /// client beats are ~30 KiB). Its buffer then doubles, up to
    /// [`PIPELINE_MAX`], if the budget allows; else a batch would take two
    /// reads, two writes, and a request cut at the buffer's end would be
    /// framed again after the next read: why 64-deep pipelines of such beats
    /// ran no faster per CPU second than 32-deep ones.
    fn make_room(&mut self, filled: bool) -> bool {
        let (len, cap) = (self.bytes.len(), self.bytes.capacity());
        if filled && cap < PIPELINE_MAX && self.budget.try_charge(cap) {
            self.bytes.reserve_exact(2 * cap - len);
            let extra = self.bytes.capacity().saturating_sub(2 * cap);
            self.budget.charge_over(extra);
            return true;
        }
        if cap - len >= READ_CHUNK / 4 {
            return true;
        }
        let want = (cap * 2).max(len + READ_CHUNK);
        if !self.budget.try_charge(want - cap) {
            return false;
        }
        self.bytes.reserve_exact(want - len);
        // A Vec reports the capacity asked for; should it ever report more,
        // charge that too, so that the release on drop matches.
        let extra = self.bytes.capacity().saturating_sub(want);
        self.budget.charge_over(extra);
        true
    }

    /// Returns the memory of a large request once it is answered.
    fn shrink_if_large(&mut self) {
        let cap = self.bytes.capacity();
        if cap > SHRINK_ABOVE && self.bytes.len() < READ_CHUNK {
            self.bytes.shrink_to(READ_CHUNK);
            self.budget
                .release(cap.saturating_sub(self.bytes.capacity()));
        }
    }
}

impl Drop for ReadBuffer<'_> {
    fn drop(&mut self) {
        self.budget.release(self.bytes.capacity());
    }
}

/// Accepts connections until `cancel` fires. Each connection runs as a task
/// in `tracker`.
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    tracker: TaskTracker,
    cancel: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if app.metrics.connections.get() as usize >= app.config.max_connections {
            app.metrics.connections_refused.inc();
            refuse(stream, TOO_MANY_CONNECTIONS);
            continue;
        }
        let _ = stream.set_nodelay(true);
        app.metrics.connections.inc();
        let (app, cancel) = (app.clone(), cancel.clone());
        tracker.spawn(async move {
            connection(&app, stream, peer, cancel).await;
            app.metrics.connections.dec();
        });
    }
}

/// Answers 503 without reading and closes. A best-effort single write: a
/// connection past a limit must not cost a task.
fn refuse(stream: TcpStream, text: &str) {
    let mut out = Vec::with_capacity(160);
    write_response(&mut out, 503, ContentType::Text, text.as_bytes(), false);
    let _ = stream.try_write(&out);
}

/// Which deadline a connection is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    /// Nothing buffered.
    Idle,
    /// Part of a request head.
    Head,
    /// A complete head, part of its body.
    Body,
}

/// The deadline bookkeeping of one connection.
struct Deadlines {
    idle: Duration,
    head: Duration,
    body: Duration,
    /// When the connection last went idle.
    idle_since: Instant,
    /// When the first byte of the buffered partial request arrived.
    request_since: Option<Instant>,
    /// When its head was complete.
    body_since: Option<Instant>,
}

impl Deadlines {
    fn new(app: &App) -> Deadlines {
        let c = &app.config;
        Deadlines {
            idle: Duration::from_millis(c.idle_timeout_ms),
            head: Duration::from_millis(c.head_timeout_ms),
            body: Duration::from_millis(c.body_timeout_ms),
            idle_since: Instant::now(),
            request_since: None,
            body_since: None,
        }
    }

    /// Updates the state after a batch was answered; `buffered` is what is
    /// left of a partial request, `completed` whether any request finished.
    fn after_batch(&mut self, buffered: &[u8], completed: bool, now: Instant) {
        if completed {
            self.request_since = None;
            self.body_since = None;
        }
        if buffered.is_empty() {
            if completed || self.request_since.is_some() {
                self.idle_since = now;
            }
            self.request_since = None;
            self.body_since = None;
            return;
        }
        self.request_since.get_or_insert(now);
        if self.body_since.is_none() && head_complete(buffered) {
            self.body_since = Some(now);
        }
    }

    fn current(&self) -> (Waiting, Instant) {
        match (self.request_since, self.body_since) {
            (None, _) => (Waiting::Idle, self.idle_since + self.idle),
            (Some(t), None) => (Waiting::Head, t + self.head),
            (Some(_), Some(t)) => (Waiting::Body, t + self.body),
        }
    }
}

/// Whether `buffered` (a partial request) holds the end of its head.
fn head_complete(buffered: &[u8]) -> bool {
    buffered.windows(4).any(|w| w == b"\r\n\r\n") || buffered.windows(2).any(|w| w == b"\n\n")
}

/// One connection's life: read a batch, answer every complete request in
/// it, write the answers at once, then wait for more under the deadline.
async fn connection(app: &App, mut stream: TcpStream, peer: SocketAddr, cancel: CancellationToken) {
    let Some(mut rbuf) = ReadBuffer::new(&app.buffers) else {
        app.metrics.buffer_refusals.inc();
        refuse(stream, &Failure::buffers_exhausted().text);
        return;
    };
    let mut batch = Batch::default();
    let write_timeout = Duration::from_millis(app.config.write_timeout_ms);
    let mut deadlines = Deadlines::new(app);
    // One timer and one cancellation waiter for the connection's life, not
    // one of each per read: a fresh `sleep_until` took the timer wheel's
    // lock twice a request (insert, then remove on drop), a fresh
    // `cancelled()` the token's list lock twice. The timer may stand
    // earlier than the deadline, never later (see `read_more`).
    let timer = tokio::time::sleep_until(deadlines.current().1);
    tokio::pin!(timer);
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    // Whether the last read filled the buffer (see `ReadBuffer::make_room`).
    let mut filled = false;
    loop {
        let shutting_down = cancel.is_cancelled();
        // One clock read for the batch; each answer then reads it once more,
        // at its end, which is the next request's start (see `answer`).
        let mut clock = Instant::now();
        let answered = batch.answer(app, &rbuf.bytes, peer, shutting_down, &mut clock);
        rbuf.bytes.drain(..answered.consumed);
        // Whether this batch waited (for a commit, for the peer to read),
        // so that `clock` no longer says when it was answered.
        let mut waited = !batch.later.is_empty();
        batch.finish_later().await;
        let out = &mut batch.out;
        if !out.is_empty() && !write_out(app, &mut stream, out, write_timeout, &mut waited).await {
            return;
        }
        // Large cached bodies are not in the buffer (see `responses`), so a
        // batch of lists leaves it small; one grown past this by other large
        // answers is given back rather than kept by an idle connection.
        out.clear(SHRINK_ABOVE, READ_CHUNK);
        if !answered.open || shutting_down {
            let _ = stream.shutdown().await;
            return;
        }
        if answered.backlog {
            // Complete requests are still buffered: answer them first.
            continue;
        }
        rbuf.shrink_if_large();
        // `clock` is when the last answer ended (or when the batch was
        // read). Unless the batch waited, the write since then took
        // microseconds, which no deadline (milliseconds at least) can tell
        // apart: no clock read for it.
        let answered_at = if waited { Instant::now() } else { clock };
        deadlines.after_batch(&rbuf.bytes, answered.consumed > 0, answered_at);
        if !rbuf.make_room(filled) {
            app.metrics.buffer_refusals.inc();
            close_with(
                app,
                &mut stream,
                Failure::buffers_exhausted(),
                write_timeout,
            )
            .await;
            return;
        }
        let wait = Wait {
            deadlines: &deadlines,
            timer: timer.as_mut(),
            cancelled: cancelled.as_mut(),
            write_timeout,
        };
        match read_more(app, &mut stream, &mut rbuf.bytes, wait).await {
            Some(Ok(0) | Err(_)) | None => return,
            Some(Ok(_)) => filled = rbuf.bytes.len() == rbuf.bytes.capacity(),
        }
    }
}

/// What a connection keeps between batches of requests.
#[derive(Default)]
pub(crate) struct Batch<'a> {
    /// The answers, written at the end of the batch. Allocated by the first
    /// response, not by a client that never sends one.
    pub(crate) out: Responses,
    scratch: Scratch,
    /// Responses still to come (persistent writes, logins), each with the
    /// place its bytes belong at ([`Responses::mark`]), so the batch keeps
    /// its order.
    later: Vec<(usize, Later<'a>)>,
    /// `100 Continue` was sent for the request now being read.
    continued: bool,
}

/// How far [`Batch::answer`] got.
pub(crate) struct Progress {
    /// Bytes of the read buffer taken by the requests answered.
    pub(crate) consumed: usize,
    /// Whether the connection may stay open.
    pub(crate) open: bool,
    /// The write buffer filled up while complete requests remain buffered.
    backlog: bool,
}

impl<'a> Batch<'a> {
    /// Answers the complete requests at the front of `buffered`, until it
    /// holds none, the responses reach [`FLUSH_AT`] bytes, or they share
    /// as many bodies as one write takes.
    pub(crate) fn answer(
        &mut self,
        app: &'a App,
        buffered: &[u8],
        peer: SocketAddr,
        shutting_down: bool,
        clock: &mut Instant,
    ) -> Progress {
        let mut done = Progress {
            consumed: 0,
            open: true,
            backlog: false,
        };
        while done.open {
            if done.consumed == buffered.len() {
                // Nothing buffered: no request, no `Expect` to answer, and
                // no parser call to say so (the usual end of a batch).
                break;
            }
            let rest = &buffered[done.consumed..];
            match parse_request(rest, &app.http_limits) {
                Ok(Some((request, used))) => {
                    done.consumed += used;
                    self.continued = false;
                    let out = &mut self.out;
                    done.open = match answer(
                        app,
                        &request,
                        peer,
                        &mut self.scratch,
                        out,
                        shutting_down,
                        clock,
                    ) {
                        super::Answered::Now(keep_alive) => keep_alive,
                        super::Answered::Later(l) => {
                            let keep_alive = l.keep_alive;
                            self.later.push((out.mark(), l));
                            keep_alive
                        }
                    };
                    if out.len() >= FLUSH_AT || out.is_full() {
                        done.backlog = true;
                        break;
                    }
                }
                Ok(None) => {
                    if !self.continued && needs_continue(rest, &app.http_limits) {
                        self.out.bytes().extend_from_slice(CONTINUE);
                        self.continued = true;
                    }
                    break;
                }
                Err(e) => {
                    // The stream cannot be resynchronised: answer and close.
                    let f = Failure::from(e);
                    let text = f.text.as_bytes();
                    let out = self.out.bytes();
                    write_response(out, f.status, ContentType::Text, text, false);
                    app.metrics.request(None, f.status, Duration::ZERO);
                    done.open = false;
                }
            }
        }
        done
    }

    /// Waits for the batch's deferred responses and inserts each where it
    /// goes. Every one is already queued (one commit serves them all).
    pub(crate) async fn finish_later(&mut self) {
        if self.later.is_empty() {
            return;
        }
        let mut shift = 0;
        let mut bytes = Vec::new();
        for (at, l) in self.later.drain(..) {
            bytes.clear();
            l.finish(&mut bytes).await;
            self.out.insert(at + shift, &bytes);
            shift += bytes.len();
        }
    }
}

/// What a connection waits on between batches.
struct Wait<'w, 'c> {
    deadlines: &'w Deadlines,
    timer: Pin<&'w mut Sleep>,
    cancelled: Pin<&'w mut WaitForCancellationFuture<'c>>,
    write_timeout: Duration,
}

/// Reads more of the stream into `buf`, or closes the connection at its
/// deadline (408 for a request in progress) or at shutdown: `None` then.
async fn read_more(
    app: &App,
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    mut wait: Wait<'_, '_>,
) -> Option<std::io::Result<usize>> {
    let (waiting, deadline) = wait.deadlines.current();
    // The timer moves earlier at once, later only when it fires: an
    // idle connection's deadline moves later with every request, and a
    // timer that fires early is cheaper than moving it every request.
    if deadline < wait.timer.deadline() {
        wait.timer.as_mut().reset(deadline);
    }
    loop {
        tokio::select! {
            r = stream.read_buf(buf) => return Some(r),
            _ = &mut wait.cancelled => return None,
            _ = &mut wait.timer => {
                if wait.timer.deadline() < deadline {
                    // It stood at an older deadline: wait on.
                    wait.timer.as_mut().reset(deadline);
                    continue;
                }
                let limit = wait.write_timeout;
                match waiting {
                    Waiting::Idle => {}
                    Waiting::Head => {
                        app.metrics.head_timeouts.inc();
                        close_with(app, stream, Failure::request_timeout(), limit).await;
                    }
                    Waiting::Body => {
                        app.metrics.body_timeouts.inc();
                        close_with(app, stream, Failure::request_timeout(), limit).await;
                    }
                }
                return None;
            }
        }
    }
}

/// Writes `bytes` within `limit`; `false` (the connection is done) when the
/// peer went away or did not read in time. Sets `waited` when the bytes did
/// not all fit the socket buffer at once.
async fn write_all(
    app: &App,
    stream: &mut TcpStream,
    bytes: &[u8],
    limit: Duration,
    waited: &mut bool,
) -> bool {
    // Almost every write fits the socket buffer at once: try it before
    // arming the deadline, whose `timeout` costs a clock read and a timer.
    let bytes = match stream.try_write(bytes) {
        Ok(n) if n == bytes.len() => return true,
        Ok(n) => &bytes[n..],
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => bytes,
        Err(_) => return false,
    };
    *waited = true;
    match tokio::time::timeout(limit, stream.write_all(bytes)).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) => false,
        Err(_) => {
            app.metrics.write_timeouts.inc();
            false
        }
    }
}

/// Writes a batch's responses within `limit`, as [`write_all`] does: one
/// `write` of the bytes when no body is shared, else one `writev` of the
/// bytes' pieces and the shared bodies.
async fn write_out(
    app: &App,
    stream: &mut TcpStream,
    out: &Responses,
    limit: Duration,
    waited: &mut bool,
) -> bool {
    if let Some(bytes) = out.contiguous() {
        return write_all(app, stream, bytes, limit, waited).await;
    }
    let mut slices = [IoSlice::new(&[]); SLICES];
    let n = out.slices(&mut slices);
    let mut rest = &mut slices[..n];
    match stream.try_write_vectored(rest) {
        Ok(n) => IoSlice::advance_slices(&mut rest, n),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(_) => return false,
    }
    if rest.is_empty() {
        return true;
    }
    *waited = true;
    let finish = async {
        while !rest.is_empty() {
            match stream.write_vectored(rest).await? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n => IoSlice::advance_slices(&mut rest, n),
            }
        }
        Ok::<(), std::io::Error>(())
    };
    match tokio::time::timeout(limit, finish).await {
        Ok(Ok(())) => true,
        Ok(Err(_)) => false,
        Err(_) => {
            app.metrics.write_timeouts.inc();
            false
        }
    }
}

/// Answers `failure` with `Connection: close` (best effort, within the
/// write deadline) and shuts the connection down.
async fn close_with(app: &App, stream: &mut TcpStream, failure: Failure, limit: Duration) {
    let mut out = Vec::with_capacity(192);
    write_response(
        &mut out,
        failure.status,
        ContentType::Text,
        failure.text.as_bytes(),
        false,
    );
    app.metrics.request(None, failure.status, Duration::ZERO);
    if !write_all(app, stream, &out, limit, &mut false).await {
        return;
    }
    let _ = tokio::time::timeout(limit, stream.shutdown()).await;
    // A lingering close: closing with unread input makes the kernel send a
    // reset, which can destroy the response before the client reads it.
    // So read and drop what is still coming, for a short bounded time.
    let linger = async {
        let mut sink = [0u8; 4096];
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER.min(limit), linger).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_past_its_limit_and_takes_back_what_is_released() {
        let budget = BufferBudget::new(2 * READ_CHUNK + READ_CHUNK / 2);
        let a = ReadBuffer::new(&budget).unwrap();
        let mut b = ReadBuffer::new(&budget).unwrap();
        assert!(ReadBuffer::new(&budget).is_none(), "a third does not fit");
        assert_eq!(budget.used(), 2 * READ_CHUNK);
        // b wants to double: one chunk more would be 3 > 2.5.
        b.bytes.resize(READ_CHUNK, b'x');
        assert!(!b.make_room(false));
        drop(a);
        assert!(b.make_room(false), "room after a's release");
        assert_eq!(budget.used(), b.bytes.capacity());
        assert!(budget.used() <= budget.limit());
        b.bytes.clear();
        drop(b);
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.peak(), 2 * READ_CHUNK);
    }

    #[test]
    fn large_buffers_shrink_back_and_release() {
        let budget = BufferBudget::new(64 * READ_CHUNK);
        let mut r = ReadBuffer::new(&budget).unwrap();
        for _ in 0..4 {
            let spare = r.bytes.capacity() - r.bytes.len();
            r.bytes.resize(r.bytes.len() + spare, b'x');
            assert!(r.make_room(false));
        }
        assert!(r.bytes.capacity() > SHRINK_ABOVE);
        assert_eq!(budget.used(), r.bytes.capacity());
        r.bytes.clear();
        r.shrink_if_large();
        assert_eq!(budget.used(), r.bytes.capacity());
        assert!(budget.used() <= SHRINK_ABOVE);
    }

    #[test]
    fn a_filled_buffer_doubles_up_to_the_pipeline_size_within_the_budget() {
        let budget = BufferBudget::new(3 * READ_CHUNK);
        let mut r = ReadBuffer::new(&budget).unwrap();
        // Not filled: a quarter chunk free is room enough, no growth.
        r.bytes.resize(READ_CHUNK / 2, b'x');
        assert!(r.make_room(false));
        assert_eq!(r.bytes.capacity(), READ_CHUNK);
        // Filled: doubles, charged.
        r.bytes.resize(READ_CHUNK, b'x');
        assert!(r.make_room(true));
        assert_eq!(r.bytes.capacity(), 2 * READ_CHUNK);
        assert_eq!(budget.used(), 2 * READ_CHUNK);
        // Filled again, but doubling does not fit the budget: the ordinary
        // rule answers (there is room), nothing more is charged.
        r.bytes.clear();
        assert!(r.make_room(true));
        assert_eq!(budget.used(), 2 * READ_CHUNK);
        let roomy = BufferBudget::new(64 * READ_CHUNK);
        let mut p = ReadBuffer::new(&roomy).unwrap();
        for _ in 0..6 {
            let spare = p.bytes.capacity() - p.bytes.len();
            p.bytes.resize(p.bytes.len() + spare, b'x');
            p.bytes.clear();
            assert!(p.make_room(true));
        }
        assert_eq!(
            p.bytes.capacity(),
            PIPELINE_MAX,
            "never past the pipeline size"
        );
        assert_eq!(roomy.used(), PIPELINE_MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn dribbled_bytes_do_not_move_the_head_deadline() {
        let mut d = Deadlines {
            idle: Duration::from_secs(60),
            head: Duration::from_secs(10),
            body: Duration::from_secs(30),
            idle_since: Instant::now(),
            request_since: None,
            body_since: None,
        };
        let start = Instant::now();
        assert_eq!(
            d.current(),
            (Waiting::Idle, start + Duration::from_secs(60))
        );
        d.after_batch(b"G", false, Instant::now());
        for _ in 0..9 {
            tokio::time::advance(Duration::from_secs(1)).await;
            d.after_batch(b"GE", false, Instant::now());
        }
        assert_eq!(
            d.current(),
            (Waiting::Head, start + Duration::from_secs(10))
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let head_done = Instant::now();
        d.after_batch(
            b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\nab",
            false,
            head_done,
        );
        assert_eq!(
            d.current(),
            (Waiting::Body, head_done + Duration::from_secs(30))
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let answered = Instant::now();
        d.after_batch(b"", true, answered);
        assert_eq!(
            d.current(),
            (Waiting::Idle, answered + Duration::from_secs(60))
        );
        // A request that completes while the next one starts: the next one's clock.
        tokio::time::advance(Duration::from_secs(1)).await;
        let next = Instant::now();
        d.after_batch(b"GET /x", true, next);
        assert_eq!(d.current(), (Waiting::Head, next + Duration::from_secs(10)));
    }
}
