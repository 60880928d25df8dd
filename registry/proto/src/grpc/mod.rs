//! The Nacos 2.x gRPC protocol's wire formats: the `Payload` protobuf message, the
//! JSON bodies it carries, and the decoder from a payload to a validated request.
//!
//! No sockets and no gRPC stack here: the server (`registry-server`'s `grpc` module)
//! moves [`Payload`]s over tonic, loadgen's 2.x fleet and `conn-fleet` over `h2` with
//! [`frame`]'s message framing; this module only says what is in them.
//!
//! - [`payload`]: `Payload`, `Metadata` and `Any` as prost messages declared in Rust.
//! - [`frame`]: gRPC's 5-byte message prefix (encode, incremental decode) and
//!   `grpc-status`, for a client over plain HTTP/2.
//! - [`message`]: request and response bodies (serde, both directions).
//! - [`decode`]: (type name, JSON) → [`decode::ClientMessage`] or a [`decode::Refusal`].
//! - [`code`]: Nacos's error codes and texts.

pub mod decode;
pub mod frame;
pub mod message;
pub mod payload;

pub use decode::{decode, ClientMessage, Decoded, InstanceOp, InstanceSpec, Refusal, ServiceId};
pub use message::Message;
pub use payload::{Any, Metadata, Payload};

/// The unary method's path (the proto has no package).
pub const REQUEST_PATH: &str = "/Request/request";
/// The bidirectional stream's path.
pub const STREAM_PATH: &str = "/BiRequestStream/requestBiStream";
/// Every Nacos client computes the gRPC port as the HTTP port plus this.
pub const PORT_OFFSET: u16 = 1000;

/// Nacos's error codes (`NacosException`) and the texts Nacos answers with.
pub mod code {
    /// No right: missing, invalid or expired `accessToken` (`NO_RIGHT`).
    pub const NO_RIGHT: i32 = 403;
    /// Invalid parameter (`NacosException.INVALID_PARAM`).
    pub const INVALID_PARAM: i32 = 400;
    /// A failure inside the server (`SERVER_ERROR`).
    pub const SERVER_ERROR: i32 = 500;
    /// The payload could not be parsed (`BAD_GATEWAY`, Nacos's answer to a bad body).
    pub const BAD_GATEWAY: i32 = 502;
    /// Over a limit (`OVER_THRESHOLD`).
    pub const OVER_THRESHOLD: i32 = 503;
    /// The server is starting or stopping (`INVALID_SERVER_STATUS`).
    pub const INVALID_SERVER_STATUS: i32 = 300;
    /// A request before the connection's setup (`UN_REGISTER`).
    pub const UN_REGISTER: i32 = 301;
    /// No handler for the type (`NO_HANDLER`).
    pub const NO_HANDLER: i32 = 302;

    /// Nacos's text for [`INVALID_SERVER_STATUS`].
    pub const STARTING_TEXT: &str = "Server is starting,please try later.";
    /// Nacos's text for [`UN_REGISTER`].
    pub const UN_REGISTER_TEXT: &str = "Connection is unregistered.";
    /// Nacos's text for [`NO_HANDLER`].
    pub const NO_HANDLER_TEXT: &str = "RequestHandler Not Found";
}

/// The [`message::ErrorResponse`] payload for a refusal.
pub fn refusal_payload(r: &Refusal) -> Payload {
    Payload::of(&message::ErrorResponse {
        head: message::ResponseHead::fail(r.request_id.clone(), r.code, r.message.clone()),
    })
}
