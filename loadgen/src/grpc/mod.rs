//! The Nacos 2.x fleet (`protocol = "grpc"`): simulated clients, each with its own
//! gRPC connection (server check, stream, setup, as the real clients do), that
//! register their instances (in batches where the profile says), query, subscribe,
//! receive `NotifySubscriberRequest` pushes on their stream and ack them.
//!
//! It is not a driver of its own: the workers ([`crate::worker`]) drive it with the
//! same plan, wheels, fleet, pacers and recorders as the 1.x fleet, and the runner
//! walks the same phases and verifies the same way. What is 2.x is here: a worker's
//! lane is one client's connection ([`lane`]), and the requests are [`request`]'s,
//! what the real clients send, field for field. Both speak HTTP/2 through `h2`
//! ([`client`]), over a socket that stamps when each call's bytes left ([`stamp`]).

pub mod check;
pub mod client;
pub mod lane;
pub mod request;
pub mod stamp;
