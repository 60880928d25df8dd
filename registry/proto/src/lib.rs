//! Nacos naming wire formats (1.x HTTP/UDP and 2.x gRPC), shared by the registry server and the load generator.
//!
//! Everything here is pure: bytes in, typed values out, and typed values in, bytes out.
//! There are no sockets, no async runtime and no dependency on `registry-core`; the
//! server's `convert` module maps these types onto the core model. The server uses the
//! parsing side of each surface and the encoding side of each response; the load
//! generator uses the opposite halves (request builders, response and push decoders).
//!
//! # Layout
//!
//! - [`http1`]: HTTP/1.1 framing in both directions. Pipelining-aware request parsing that
//!   borrows from the input buffer, response writing without per-call formatting, and the
//!   client side (request writing, `Content-Length` and chunked response parsing).
//! - [`params`]: request parameters from the query string and a form body, percent
//!   decoding and encoding, and the lenient Java-style helpers (`required`, booleans).
//! - [`error`]: [`ProtoError`], whose `Display` is exactly the body text Nacos answers.
//! - [`naming`]: typed, validated requests and responses of `/nacos/v1/ns/*`, one module
//!   per API resource (`instance`, `beat`, `list`, `service`, `operator`), plus the
//!   [`naming::route`] table (every endpoint of every generation, one row each, and
//!   what the server asks of a route) and the client-side request builders in
//!   [`naming::client`].
//! - [`openapi`]: the v2 Open API and the v3 client and admin APIs: the `Result`
//!   envelope and its error codes, their forms and bodies, namespaces, and the
//!   resolver under the names those doors use ([`openapi::route`]).
//! - [`distro`]: the cluster's peer protocol (membership reports, replication, checksums,
//!   snapshots), request relaying and Nacos's member list.
//! - [`dns`]: the DNS door's protocol: names for services, clusters and instances
//!   and their escape, and the answer to a query (hickory-proto's wire format).
//! - [`auth`]: `POST /nacos/v1/auth/login` parameters and response.
//! - [`grpc`]: the Nacos 2.x gRPC protocol: the `Payload` message, its JSON bodies, and
//!   the decoder from a payload to a validated request with Nacos's error codes.
//! - [`prometheus`]: the Prometheus text exposition format, the one writer of the
//!   server's `/metrics` and of loadgen's `--metrics-listen` page.
//! - [`udp`]: the push packet ([`udp::push`]) and its acknowledgement ([`udp::ack`]).
//! - `raft` (feature `raft`, which the server and the fuzz targets turn on): the Raft
//!   group's log entries and peer messages, in `openraft`'s types.
//! - `json` (private): hand-written JSON text for hot paths and lenient scalar readers.
//!
//! Error values follow one rule: every parse error carries the exact text a client should
//! see and the HTTP status to send (`status()`), so the server maps them in one place.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod auth;
pub mod distro;
pub mod dns;
pub mod error;
pub mod grpc;
pub mod http1;
mod json;
pub mod naming;
pub mod openapi;
pub mod params;
pub mod prometheus;
#[cfg(feature = "raft")]
pub mod raft;
pub mod udp;

pub use error::ProtoError;
