//! One keep-alive HTTP/1.1 connection to a peer, shared by every caller.
//!
//! Callers queue requests; the link's task takes every request waiting,
//! writes them in one pipelined batch, and reads the answers in order, so
//! many relayed beats cost one write and one read between two nodes. A
//! failed or slow exchange (past the timeout) drops the connection and
//! fails the calls of that batch; the next batch connects again. The task
//! starts on the first call (links are built before the runtime runs).

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use registry_proto::http1::parse_response;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

/// Requests waiting for a link before callers are refused.
const QUEUE: usize = 4_096;
/// Most requests written in one batch.
const BATCH: usize = 256;

/// A peer's answer.
#[derive(Debug)]
pub(crate) struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Whether the body is JSON (else plain text).
    pub json: bool,
    /// The body.
    pub body: Vec<u8>,
}

struct Call {
    request: Vec<u8>,
    reply: oneshot::Sender<Result<Answer, String>>,
}

/// A pipelined connection to one peer.
pub(crate) struct Link {
    addr: SocketAddr,
    timeout: Duration,
    queue: OnceLock<mpsc::Sender<Call>>,
}

impl Link {
    /// A link to `addr` whose exchanges may take `timeout`.
    pub fn new(addr: SocketAddr, timeout: Duration) -> Link {
        Link {
            addr,
            timeout,
            queue: OnceLock::new(),
        }
    }

    /// Sends one complete request and waits for its answer.
    ///
    /// # Errors
    /// A text saying why no answer came (connect, timeout, framing).
    pub async fn call(&self, request: Vec<u8>) -> Result<Answer, String> {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::channel(QUEUE);
            tokio::spawn(run(self.addr, self.timeout, rx));
            tx
        });
        let (reply, answer) = oneshot::channel();
        queue
            .try_send(Call { request, reply })
            .map_err(|_| format!("too many requests queued for {}", self.addr))?;
        // The task bounds each exchange by the timeout; a second one covers
        // waiting behind the batch before ours.
        match tokio::time::timeout(self.timeout * 2, answer).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(format!("connection to {} failed", self.addr)),
            Err(_) => Err(format!("no answer from {} in time", self.addr)),
        }
    }
}

async fn run(addr: SocketAddr, timeout: Duration, mut queue: mpsc::Receiver<Call>) {
    let mut conn: Option<TcpStream> = None;
    let mut calls: Vec<Call> = Vec::with_capacity(BATCH);
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    while queue.recv_many(&mut calls, BATCH).await > 0 {
        let done = tokio::time::timeout(timeout, exchange(&mut conn, addr, &mut calls, &mut buf));
        let failure = match done.await {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(_) => format!("no answer from {addr} within {timeout:?}"),
        };
        // The stream's state is unknown now: start over on the next batch.
        conn = None;
        buf.clear();
        for call in calls.drain(..) {
            let _ = call.reply.send(Err(failure.clone()));
        }
    }
}

/// Whether a connection kept from an earlier batch is still open: the peer
/// may have closed it since (it restarted, or dropped an idle connection),
/// and its FIN (or RST) waits unread. Written on, such a connection fails
/// the whole batch ("closed the connection") although the peer is up again;
/// checked first, the batch goes on a new connection, and nothing of it has
/// been sent on the old one, so nothing is sent twice. A peer that closes at
/// the very moment the batch is written still fails that batch.
fn open(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    // Between batches the peer owes no bytes: any read result but "nothing
    // yet" (EOF, an error, or stray bytes) means the stream is unusable.
    matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Writes every call's request, then answers them in order. Calls answered
/// are removed from `calls`; on error the rest stay for the caller to fail.
async fn exchange(
    conn: &mut Option<TcpStream>,
    addr: SocketAddr,
    calls: &mut Vec<Call>,
    buf: &mut Vec<u8>,
) -> Result<(), String> {
    if conn.as_ref().is_some_and(|stream| !open(stream)) {
        *conn = None;
        buf.clear();
    }
    if conn.is_none() {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        *conn = Some(stream);
    }
    let Some(stream) = conn.as_mut() else {
        return Err("no connection".into());
    };
    let total: usize = calls.iter().map(|c| c.request.len()).sum();
    let mut out = Vec::with_capacity(total);
    for c in calls.iter() {
        out.extend_from_slice(&c.request);
    }
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("writing to {addr}: {e}"))?;
    let mut keep_alive = true;
    let pending = std::mem::take(calls);
    let mut rest = pending.into_iter();
    while let Some(call) = rest.next() {
        let answer = loop {
            match parse_response(buf) {
                Ok(Some((r, used))) => {
                    keep_alive &= r.keep_alive;
                    let answer = Answer {
                        status: r.status,
                        json: r.content_type.is_some_and(|ct| ct.contains("json")),
                        body: r.body.into_owned(),
                    };
                    buf.drain(..used);
                    break answer;
                }
                Ok(None) => {}
                Err(e) => {
                    calls.push(call);
                    calls.extend(rest);
                    return Err(format!("bad answer from {addr}: {e}"));
                }
            }
            if buf.capacity() - buf.len() < 4096 {
                buf.reserve(16 * 1024);
            }
            match stream.read_buf(buf).await {
                Ok(0) | Err(_) => {
                    calls.push(call);
                    calls.extend(rest);
                    return Err(format!("{addr} closed the connection"));
                }
                Ok(_) => {}
            }
        };
        let _ = call.reply.send(Ok(answer));
    }
    if !keep_alive {
        *conn = None;
        buf.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    /// Reads one request's head (these requests have no body) and answers it.
    async fn answer_one(stream: &mut TcpStream) {
        let mut got = Vec::new();
        let mut chunk = [0u8; 1024];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the link closed before its request");
            got.extend_from_slice(&chunk[..n]);
        }
        stream.write_all(ANSWER).await.expect("write");
    }

    #[tokio::test]
    async fn a_connection_the_peer_closed_between_batches_is_replaced_not_failed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (closed_tx, closed_rx) = oneshot::channel();
        let peer = tokio::spawn(async move {
            // First connection: one answer, then closed, as by a restart.
            let (mut first, _) = listener.accept().await.unwrap();
            answer_one(&mut first).await;
            drop(first);
            closed_tx.send(()).unwrap();
            // The link's next call must come on a new connection.
            let (mut second, _) = listener.accept().await.unwrap();
            answer_one(&mut second).await;
        });
        let link = Link::new(addr, Duration::from_secs(5));
        let request = b"GET / HTTP/1.1\r\nHost: peer\r\n\r\n".to_vec();
        let first = link.call(request.clone()).await.expect("first answer");
        assert_eq!((first.status, first.body.as_slice()), (200, &b"ok"[..]));
        closed_rx.await.unwrap();
        // Let the peer's FIN reach this side before the next batch is written.
        tokio::task::yield_now().await;
        let second = link
            .call(request)
            .await
            .expect("answered on a new connection");
        assert_eq!((second.status, second.body.as_slice()), (200, &b"ok"[..]));
        peer.await.unwrap();
    }
}
