//! The Nacos 1.x UDP push protocol: the server's push datagram ([`push`]) and the
//! client's acknowledgement ([`ack`]).
//!
//! A push carries a whole service info (the `instance/list` body) as a JSON string in a
//! JSON envelope, gzip-compressed when large. The client answers from the socket it
//! subscribed with, echoing the envelope's `lastRefTime`, which the server uses as the
//! ack sequence number.

pub mod ack;
pub mod push;

/// Largest UDP payload over IPv4 (65535 − 8 UDP − 20 IP header bytes). A push larger
/// than this cannot be sent; the caller drops it and counts the failure, and the client
/// catches up by polling.
pub const MAX_DATAGRAM: usize = 65_507;
