//! The Nacos 2.x gRPC front door: a tonic server on the gRPC port (by default the HTTP
//! port + 1000, which every Nacos client assumes) serving the unary
//! `/Request/request` and the bidirectional `/BiRequestStream/requestBiStream`.
//!
//! It is a second way into the same store, subscriber table and notifier as the 1.x
//! HTTP API: a gRPC register is visible to 1.x queries and pushes, and the other way
//! round. The table of set-up connections, the bounds, counters and ack queue are
//! shared state below the doors ([`crate::hub`]). What is gRPC's own:
//! - [`handler`]: unary requests, Nacos's order of checks and error codes;
//! - [`query`]: query and subscribe answers, cached per (service, revision, view);
//! - [`stream`]: a connection's life: setup, acks, idle detection, release on close;
//! - [`convert`]: wire ⇄ core for 2.x (instance specs; `ServiceInfo` is
//!   [`crate::service_info`]'s);
//! - [`admission`]: the cap on raw TCP sockets, applied at accept;
//! - `door`: the door the server registers ([`GrpcDoor`]: bind, start, bounded drain).
//!
//! Pushes to connections are sent by the notifier (`crate::notifier`), which owns the
//! ack table of both protocols; the stream task hands it the acks it reads through a
//! bounded queue ([`crate::hub::Grpc::ack`]).
//!
//! The two services are written by hand over `tonic::server::Grpc` (no code
//! generation, so the build needs no `protoc`); the messages are prost types declared
//! in `registry_proto::grpc`.

pub mod admission;
pub mod convert;
mod door;
pub mod handler;
pub mod query;
pub mod stream;

pub use door::GrpcDoor;

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use registry_proto::grpc::{Payload, REQUEST_PATH, STREAM_PATH};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt as _;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;
use tonic::codegen::{http, BoxFuture, BoxStream, Service};
use tonic::server::NamedService;
use tonic::{Request, Response, Status, Streaming};

use crate::hub::{Outbound, OUTBOUND_QUEUE};
use crate::state::App;

/// How long shutdown waits for gRPC connections to close after their streams
/// ended, before dropping them (see `GrpcDoor`).
pub const DRAIN: std::time::Duration = std::time::Duration::from_millis(500);

/// Serves gRPC on `listener` until `cancel` fires; then refuses new requests, ends
/// every stream and lets tonic close the connections.
pub async fn serve(app: Arc<App>, listener: tokio::net::TcpListener, cancel: CancellationToken) {
    let incoming = admission::Incoming::new(listener, app.clone());
    let streams = CancellationToken::new();
    let shutdown = {
        let (app, streams, cancel) = (app.clone(), streams.clone(), cancel.clone());
        async move {
            cancel.cancelled().await;
            app.grpc.stop();
            streams.cancel();
        }
    };
    let served = tonic::transport::Server::builder()
        .add_service(RequestService { app: app.clone() })
        .add_service(StreamService { app, streams })
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    if let Err(e) = served {
        tracing::error!(error = %e, "gRPC server failed");
    }
}

/// The codec's starting buffer: tonic's default is 8 KiB for each direction,
/// allocated per unary call and held for a stream's whole life (the read buffer
/// of `Streaming`, the write buffer of the response body): 16 KiB of every idle
/// connection for messages that are a few hundred bytes. Both grow on demand
/// for a larger message, so a small start costs only a reallocation then.
const CODEC_BUFFER: usize = 512;

/// `tonic_prost`'s codec with [`CODEC_BUFFER`]: `ProstCodec` takes no buffer
/// settings, its encoder and decoder do, so this only picks them.
#[derive(Clone, Copy, Default)]
struct PayloadCodec;

impl tonic::codec::Codec for PayloadCodec {
    type Encode = Payload;
    type Decode = Payload;
    type Encoder = tonic_prost::ProstEncoder<Payload>;
    type Decoder = tonic_prost::ProstDecoder<Payload>;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstEncoder::new(buffers())
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstDecoder::new(buffers())
    }
}

fn buffers() -> tonic::codec::BufferSettings {
    // tonic's default yield threshold (32 KiB): only the start size changes.
    tonic::codec::BufferSettings::new(CODEC_BUFFER, 32 * 1024)
}

fn codec_limit(app: &App) -> usize {
    app.grpc.limits.max_body_bytes.saturating_mul(2)
}

/// `/Request/request`.
#[derive(Clone)]
struct RequestService {
    app: Arc<App>,
}

impl NamedService for RequestService {
    const NAME: &'static str = "Request";
}

impl Service<http::Request<Body>> for RequestService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let app = self.app.clone();
        Box::pin(async move {
            if req.uri().path() != REQUEST_PATH {
                return Ok(Status::unimplemented("unknown method").into_http());
            }
            let limit = codec_limit(&app);
            let mut grpc = tonic::server::Grpc::new(PayloadCodec).max_decoding_message_size(limit);
            Ok(grpc.unary(Unary { app }, req).await)
        })
    }
}

struct Unary {
    app: Arc<App>,
}

impl Service<Request<Payload>> for Unary {
    type Response = Response<Payload>;
    type Error = Status;
    type Future = BoxFuture<Response<Payload>, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Payload>) -> Self::Future {
        let app = self.app.clone();
        Box::pin(async move {
            let Some(peer) = req.remote_addr() else {
                return Err(Status::internal("no peer address"));
            };
            let payload = req.into_inner();
            Ok(Response::new(
                handler::handle(&app, &app.grpc, peer, &payload).await,
            ))
        })
    }
}

/// `/BiRequestStream/requestBiStream`.
#[derive(Clone)]
struct StreamService {
    app: Arc<App>,
    streams: CancellationToken,
}

impl NamedService for StreamService {
    const NAME: &'static str = "BiRequestStream";
}

impl Service<http::Request<Body>> for StreamService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let (app, streams) = (self.app.clone(), self.streams.clone());
        Box::pin(async move {
            if req.uri().path() != STREAM_PATH {
                return Ok(Status::unimplemented("unknown method").into_http());
            }
            let limit = codec_limit(&app);
            let mut grpc = tonic::server::Grpc::new(PayloadCodec).max_decoding_message_size(limit);
            Ok(grpc.streaming(Bidi { app, streams }, req).await)
        })
    }
}

struct Bidi {
    app: Arc<App>,
    streams: CancellationToken,
}

impl Service<Request<Streaming<Payload>>> for Bidi {
    type Response = Response<BoxStream<Payload>>;
    type Error = Status;
    type Future = BoxFuture<Self::Response, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Streaming<Payload>>) -> Self::Future {
        let (app, streams) = (self.app.clone(), self.streams.clone());
        Box::pin(async move {
            let Some(peer) = req.remote_addr() else {
                return Err(Status::internal("no peer address"));
            };
            let (tx, rx) = mpsc::channel::<Outbound>(OUTBOUND_QUEUE);
            tokio::spawn(stream::run(app, peer, req.into_inner(), tx, streams));
            // The encoder wants an owned message: a shared push is copied here
            // (its JSON is a `Bytes`, so that copy is a type name and a count).
            let out: BoxStream<Payload> =
                Box::pin(ReceiverStream::new(rx).map(|p| Ok(Arc::unwrap_or_clone(p))));
            Ok(Response::new(out))
        })
    }
}
