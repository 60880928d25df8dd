//! The accept loop and the per-connection loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use registry_proto::http1::{needs_continue, parse_request, write_response, ContentType, CONTINUE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{answer, Answered, Later, Scratch};
use crate::state::App;

/// Write buffer size after which a pipelined batch is flushed before the
/// rest is answered, bounding per-connection memory.
const FLUSH_AT: usize = 256 * 1024;
/// Initial read buffer size.
const READ_CHUNK: usize = 16 * 1024;

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
            refuse(stream);
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
/// connection past the limit must not cost a task.
fn refuse(stream: TcpStream) {
    let mut out = Vec::with_capacity(160);
    write_response(
        &mut out,
        503,
        ContentType::Text,
        b"too many connections, please try again later",
        false,
    );
    let _ = stream.try_write(&out);
}

async fn connection(app: &App, mut stream: TcpStream, peer: SocketAddr, cancel: CancellationToken) {
    let mut rbuf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut wbuf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut scratch = Scratch::default();
    // Responses still to come (persistent writes, logins), each with the
    // write-buffer offset its bytes belong at, so the batch keeps its order.
    let mut later: Vec<(usize, Later<'_>)> = Vec::new();
    let idle = Duration::from_millis(app.config.idle_timeout_ms);
    let mut continued = false;
    loop {
        let shutting_down = cancel.is_cancelled();
        let mut consumed = 0;
        let mut open = true;
        let mut backlog = false;
        while open {
            match parse_request(&rbuf[consumed..], &app.http_limits) {
                Ok(Some((request, used))) => {
                    consumed += used;
                    continued = false;
                    open = match answer(app, &request, peer, &mut scratch, &mut wbuf, shutting_down)
                    {
                        Answered::Now(keep_alive) => keep_alive,
                        Answered::Later(l) => {
                            let keep_alive = l.keep_alive;
                            later.push((wbuf.len(), l));
                            keep_alive
                        }
                    };
                    if wbuf.len() >= FLUSH_AT {
                        backlog = true;
                        break;
                    }
                }
                Ok(None) => {
                    if !continued && needs_continue(&rbuf[consumed..], &app.http_limits) {
                        wbuf.extend_from_slice(CONTINUE);
                        continued = true;
                    }
                    break;
                }
                Err(e) => {
                    // The stream cannot be resynchronised: answer and close.
                    write_response(
                        &mut wbuf,
                        e.status(),
                        ContentType::Text,
                        e.to_string().as_bytes(),
                        false,
                    );
                    app.metrics.request(None, e.status(), Duration::ZERO);
                    open = false;
                }
            }
        }
        rbuf.drain(..consumed);
        if !later.is_empty() {
            // Every deferred request of the batch is already queued (one
            // commit serves them all); insert each response where it goes.
            let mut shift = 0;
            let mut bytes = Vec::new();
            for (at, l) in later.drain(..) {
                bytes.clear();
                l.finish(&mut bytes).await;
                wbuf.splice(at + shift..at + shift, bytes.iter().copied());
                shift += bytes.len();
            }
        }
        if !wbuf.is_empty() {
            if stream.write_all(&wbuf).await.is_err() {
                return;
            }
            wbuf.clear();
        }
        if !open || shutting_down {
            let _ = stream.shutdown().await;
            return;
        }
        if backlog {
            // Complete requests are still buffered: answer them first.
            continue;
        }
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 4 {
            rbuf.reserve(READ_CHUNK);
        }
        let read = tokio::select! {
            r = stream.read_buf(&mut rbuf) => r,
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(idle) => return,
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
