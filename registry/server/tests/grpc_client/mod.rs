//! A bare gRPC client for the tests: Nacos payloads over a real tonic channel (one
//! HTTP/2 connection, as the real clients use), with no client-side logic, so tests
//! can send exactly what they mean, bad input included.

use std::net::SocketAddr;
use std::time::Duration;

use registry_proto::grpc::message::{ConnectionSetupRequest, RequestHead, ResponseHead};
use registry_proto::grpc::{Message, Payload, REQUEST_PATH, STREAM_PATH};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::Streaming;

/// One connection to the server.
pub struct Raw {
    channel: Channel,
}

/// A set-up connection's stream: what we send on it and what the server sends.
pub struct Stream {
    pub tx: mpsc::Sender<Payload>,
    pub rx: Streaming<Payload>,
}

impl Raw {
    pub async fn connect(addr: SocketAddr) -> Raw {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("valid uri")
            .connect()
            .await
            .expect("connect");
        Raw { channel }
    }

    /// One unary call with a raw payload.
    pub async fn call(&self, p: Payload) -> Payload {
        self.try_call(p).await.expect("unary call")
    }

    /// One unary call; a transport-level refusal comes back as the status.
    pub async fn try_call(&self, p: Payload) -> Result<Payload, tonic::Status> {
        let mut g = tonic::client::Grpc::new(self.channel.clone());
        g.ready().await.expect("channel ready");
        g.unary(
            tonic::Request::new(p),
            PathAndQuery::from_static(REQUEST_PATH),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .map(tonic::Response::into_inner)
    }

    /// A typed request, answered with its JSON.
    pub async fn request<T: Message + Serialize>(&self, body: &T) -> (String, serde_json::Value) {
        let p = self.call(Payload::of(body)).await;
        let json = serde_json::from_slice(p.json()).expect("answer is JSON");
        (p.type_name().to_owned(), json)
    }

    /// A typed request whose answer must be `R`.
    pub async fn expect<T: Message + Serialize, R: Message + DeserializeOwned>(
        &self,
        body: &T,
    ) -> R {
        let p = self.call(Payload::of(body)).await;
        assert_eq!(
            p.type_name(),
            R::TYPE,
            "answer: {}",
            String::from_utf8_lossy(p.json())
        );
        serde_json::from_slice(p.json()).expect("answer decodes")
    }

    /// Opens the bidirectional stream.
    pub async fn open_stream(&self) -> Stream {
        let (tx, rx) = mpsc::channel::<Payload>(64);
        let mut g = tonic::client::Grpc::new(self.channel.clone());
        g.ready().await.expect("channel ready");
        let rx = g
            .streaming(
                tonic::Request::new(ReceiverStream::new(rx)),
                PathAndQuery::from_static(STREAM_PATH),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .expect("stream opened")
            .into_inner();
        Stream { tx, rx }
    }

    /// Opens the stream, sends the setup and waits until the server answers a health
    /// check (it has registered the connection).
    pub async fn set_up(&self) -> Stream {
        let stream = self.open_stream().await;
        stream
            .tx
            .send(Payload::of(&ConnectionSetupRequest {
                client_version: Some("raw-test".into()),
                ..ConnectionSetupRequest::default()
            }))
            .await
            .expect("setup sent");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let p = self
                .call(Payload::new(
                    "HealthCheckRequest",
                    &br#"{"requestId":"hc","headers":{}}"#[..],
                ))
                .await;
            if p.type_name() == "HealthCheckResponse" {
                return stream;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "setup not registered"
            );
            tokio::task::yield_now().await;
        }
    }
}

impl Stream {
    /// The next server request on the stream, within `limit`.
    pub async fn next(&mut self, limit: Duration) -> Option<Payload> {
        tokio::time::timeout(limit, self.rx.message())
            .await
            .ok()
            .and_then(Result::ok)
            .flatten()
    }

    /// The next server request other than a detection, within `limit`; detections
    /// (sent after the idle time, which tests on paused time pass quickly) are
    /// answered as a live client does.
    pub async fn next_push(&mut self, limit: Duration) -> Option<Payload> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let p = self.next(left).await?;
            if p.type_name() != "ClientDetectionRequest" {
                return Some(p);
            }
            self.answer("ClientDetectionResponse", &p).await;
        }
    }

    /// Keeps a connection whose pushes the test does not read alive: a task answers
    /// its detections until the stream ends.
    pub fn keep_alive(mut self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while let Ok(Some(p)) = self.rx.message().await {
                if p.type_name() == "ClientDetectionRequest" {
                    self.answer("ClientDetectionResponse", &p).await;
                }
            }
        })
    }

    /// Answers a server request with `type_name` and its request id.
    pub async fn answer(&self, type_name: &str, request: &Payload) {
        let id: RequestHead = serde_json::from_slice(request.json()).expect("request head");
        let body = serde_json::to_vec(&ResponseHead::ok(id.request_id)).expect("json");
        self.tx
            .send(Payload::new(type_name, body))
            .await
            .expect("answer sent");
    }
}
