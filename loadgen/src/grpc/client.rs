//! The 2.x client's gRPC over HTTP/2, spoken through `h2` directly: unary calls on
//! `/Request/request`, the bidirectional `/BiRequestStream/requestBiStream`, and the
//! opening every connection makes (server check, stream, setup, health check until
//! the server has seen the setup), shared by the fleet's lanes ([`super::lane`]) and
//! the verification lists ([`super::check`]).
//!
//! Why not tonic's `Channel`: it puts a buffer task and hyper between a call and the
//! socket, so a call's bytes are written whenever those tasks next run, and nothing
//! tells the caller when that was. Over `h2` the only task between a call and the
//! socket is the connection's own, whose socket a lane wraps ([`super::stamp`]) to
//! learn when each call's last byte left; and each call knows its stream id. The
//! message framing is `registry_proto::grpc::frame`'s.
//!
//! The client is generic over the socket: a lane's is stamped and runs on its
//! worker's `LocalSet`, the lister's is a plain `TcpStream` on its own runtime; the
//! caller spawns the connection task that [`handshake`] returns.

use std::cell::Cell;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};
use http::header::{HeaderValue, CONTENT_TYPE, TE};
use http::{HeaderMap, Method, Uri};
use registry_proto::grpc::frame::{self, Decoder, FrameError};
use registry_proto::grpc::{Payload, REQUEST_PATH, STREAM_PATH};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::request;

/// The largest answer taken: a query of a large service runs to megabytes (tonic's
/// default limit, 4 MiB, refused such lists).
const MAX_MESSAGE: usize = 64 << 20;
/// Receive windows as hyper's client sets them (h2's own 64 KiB would pace a large
/// answer to round trips).
const STREAM_WINDOW: u32 = 2 << 20;
const CONNECTION_WINDOW: u32 = 5 << 20;

/// Why a call or the stream failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// HTTP/2 failed: the connection (I/O, `GOAWAY`) or the stream (reset).
    #[error("HTTP/2: {0}")]
    Http2(#[from] h2::Error),
    /// An answer that was not HTTP 200.
    #[error("HTTP status {0}")]
    Http(u16),
    /// A `grpc-status` other than OK (or not a number, read as unknown: 2).
    #[error("grpc-status {0}")]
    Status(u32),
    /// The answer ended without its `grpc-status`.
    #[error("the answer ended without a grpc-status")]
    NoStatus,
    /// The answer's status was OK but it carried no message.
    #[error("the answer carried no message")]
    NoAnswer,
    /// The answer's bytes are not gRPC messages.
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// One HTTP/2 connection's request side: cheap to clone, one per call.
#[derive(Clone)]
pub struct Client {
    send: SendRequest<Bytes>,
    unary: Uri,
    stream: Uri,
}

/// A TCP connection to `addr`, within `timeout`, with `TCP_NODELAY` (a call is one
/// small write that must not wait for the previous one's ACK).
pub async fn dial(addr: SocketAddr, timeout: Duration) -> anyhow::Result<TcpStream> {
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .with_context(|| format!("connecting to gRPC {addr} timed out"))?
        .with_context(|| format!("connecting to gRPC {addr}"))?;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// The HTTP/2 handshake on `io`, a connection to `addr`: the client and the
/// connection task, which the caller spawns (it does all of the socket's I/O).
pub async fn handshake<T: AsyncRead + AsyncWrite + Unpin>(
    io: T,
    addr: SocketAddr,
) -> anyhow::Result<(Client, h2::client::Connection<T, Bytes>)> {
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .enable_push(false)
        .handshake(io)
        .await
        .with_context(|| format!("HTTP/2 handshake with {addr}"))?;
    let uri = |path: &str| Uri::try_from(format!("http://{addr}{path}"));
    let client = Client {
        send,
        unary: uri(REQUEST_PATH)?,
        stream: uri(STREAM_PATH)?,
    };
    Ok((client, conn))
}

/// A gRPC POST of `uri`, as every gRPC client sends it.
fn request(uri: &Uri) -> http::Request<()> {
    let mut r = http::Request::new(());
    *r.method_mut() = Method::POST;
    *r.uri_mut() = uri.clone();
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    h.insert(TE, HeaderValue::from_static("trailers"));
    r
}

impl Client {
    /// How many streams the server lets this connection have open at once (its
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`; unbounded until it says).
    pub fn max_streams(&self) -> usize {
        self.send.current_max_send_streams()
    }

    /// One unary call. Its stream id goes into `stream` as soon as it has one, so a
    /// caller that gives up on the call (a timeout) still knows which stream it was.
    pub async fn unary(
        &self,
        p: &Payload,
        stream: &Cell<Option<u32>>,
    ) -> Result<Payload, CallError> {
        let mut send = self.send.clone().ready().await?;
        let (response, mut body) = send.send_request(request(&self.unary), false)?;
        stream.set(Some(response.stream_id().into()));
        body.send_data(frame::encode(p), true)?;
        let (head, recv) = response.await?.into_parts();
        let mut inbound = Inbound::answer(head.status.as_u16(), &head.headers, recv)?;
        let answer = inbound.message().await?;
        inbound.finish().await?;
        answer.ok_or(CallError::NoAnswer)
    }

    /// Opens the bidirectional stream with `first` on it: the request side (for
    /// answers to the server's requests) and the server's messages.
    pub async fn stream(&self, first: &Payload) -> Result<(SendStream<Bytes>, Inbound), CallError> {
        let mut send = self.send.clone().ready().await?;
        let (response, mut tx) = send.send_request(request(&self.stream), false)?;
        tx.send_data(frame::encode(first), false)?;
        let (head, recv) = response.await?.into_parts();
        Ok((
            tx,
            Inbound::answer(head.status.as_u16(), &head.headers, recv)?,
        ))
    }
}

/// Sends `p` on the stream's request side (queued in `h2`, written by the
/// connection's task).
pub fn send(tx: &mut SendStream<Bytes>, p: &Payload) -> Result<(), CallError> {
    Ok(tx.send_data(frame::encode(p), false)?)
}

/// The server's side of a call or of the stream: its messages, then its status.
pub struct Inbound {
    body: RecvStream,
    decoder: Decoder,
    /// A `grpc-status` in the answer's headers (a trailers-only answer).
    status: Option<u32>,
}

impl Inbound {
    /// The answer whose head was `status` and `headers`; an error when it is not one.
    fn answer(status: u16, headers: &HeaderMap, body: RecvStream) -> Result<Inbound, CallError> {
        if status != 200 {
            return Err(CallError::Http(status));
        }
        let status = grpc_status(headers);
        if let Some(code) = status.filter(|c| *c != 0) {
            return Err(CallError::Status(code));
        }
        Ok(Inbound {
            body,
            decoder: Decoder::new(MAX_MESSAGE),
            status,
        })
    }

    /// The next message; `None` once the server's data has ended.
    pub async fn message(&mut self) -> Result<Option<Payload>, CallError> {
        loop {
            if let Some(p) = self.decoder.message()? {
                return Ok(Some(p));
            }
            match self.body.data().await {
                Some(chunk) => {
                    let chunk = chunk?;
                    // Handing the window back at once: the bytes are copied out.
                    let _ = self.body.flow_control().release_capacity(chunk.len());
                    self.decoder.extend(&chunk);
                }
                None => return Ok(None),
            }
        }
    }

    /// Reads the rest of the answer and its `grpc-status`: OK, or the error.
    async fn finish(&mut self) -> Result<(), CallError> {
        while self.message().await?.is_some() {}
        let trailers = self.body.trailers().await?;
        match trailers.as_ref().and_then(grpc_status).or(self.status) {
            Some(0) => Ok(()),
            Some(code) => Err(CallError::Status(code)),
            None => Err(CallError::NoStatus),
        }
    }
}

/// The `grpc-status` in `headers`, if there is one (unreadable: 2, UNKNOWN).
fn grpc_status(headers: &HeaderMap) -> Option<u32> {
    let v = headers.get("grpc-status")?;
    Some(frame::status(v.as_bytes()).unwrap_or(2))
}

/// The opening every 2.x connection makes, as the real clients do: server check,
/// the bidi stream, the connection setup on it. The caller reads the stream (the
/// server's detection requests must be answered).
pub async fn open(
    client: &Client,
    namespace: &str,
) -> anyhow::Result<(SendStream<Bytes>, Inbound)> {
    let check = client
        .unary(&request::server_check(), &Cell::new(None))
        .await
        .context("server check")?;
    anyhow::ensure!(
        check.type_name() == "ServerCheckResponse",
        "server check refused: {}",
        String::from_utf8_lossy(check.json())
    );
    let setup = request::connection_setup(namespace);
    client.stream(&setup).await.context("opening the stream")
}

/// Waits until the server has registered the connection's setup (it answers
/// health checks only then), polling every 10 ms at most `tries` times.
pub async fn registered(client: &Client, tries: u32) -> anyhow::Result<()> {
    for _ in 0..tries {
        let p = client
            .unary(&request::health_check(), &Cell::new(None))
            .await?;
        if p.type_name() == "HealthCheckResponse" {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the server never registered the connection's setup")
}
