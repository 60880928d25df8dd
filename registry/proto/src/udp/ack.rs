//! The push acknowledgement: `{"type":"push-ack","lastRefTime":<n>,"data":""}`.
//!
//! The server parses one ack per push per subscriber, so [`parse_ack`] allocates
//! nothing: `type` is borrowed and `data` (for a `dump-ack`, the client's whole cache)
//! is skipped without being built. `lastRefTime` may be a JSON string (the Java client
//! quotes it) or a number (the Node client).

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::json;

/// Largest ack accepted, the size of the server's receive buffer in Nacos.
pub const MAX_ACK: usize = 64 * 1024;

/// What an ack acknowledges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// `push-ack`: a `dom`/`service` push was applied.
    PushAck,
    /// `dump-ack`: the answer to a `dump` push.
    DumpAck,
    /// `unknown-ack`: the client did not understand the push type.
    UnknownAck,
}

impl AckKind {
    /// The `type` text.
    pub fn as_str(self) -> &'static str {
        match self {
            AckKind::PushAck => "push-ack",
            AckKind::DumpAck => "dump-ack",
            AckKind::UnknownAck => "unknown-ack",
        }
    }
}

/// A parsed ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// The ack type.
    pub kind: AckKind,
    /// The push sequence number it acknowledges.
    pub last_ref_time: u64,
}

/// Why a datagram is not an ack. Small and `Copy`: acks arrive at push rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// Larger than [`MAX_ACK`]: dropped unread.
    #[error("ack datagram larger than {MAX_ACK} bytes")]
    Oversize,
    /// Not a JSON object with a string `type` and an integer `lastRefTime`.
    #[error("malformed ack datagram")]
    Malformed,
    /// A well-formed ack whose `type` is none of the three known ones.
    #[error("unknown ack type")]
    UnknownType,
}

#[derive(Deserialize)]
struct RawAck<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(rename = "lastRefTime", deserialize_with = "json::lenient_u64")]
    last_ref_time: u64,
    #[serde(default, rename = "data")]
    _data: IgnoredAny,
}

/// Parses an ack datagram.
pub fn parse_ack(datagram: &[u8]) -> Result<Ack, AckError> {
    if datagram.len() > MAX_ACK {
        return Err(AckError::Oversize);
    }
    let raw: RawAck<'_> = serde_json::from_slice(datagram).map_err(|_| AckError::Malformed)?;
    let kind = match &*raw.kind {
        "push-ack" => AckKind::PushAck,
        "dump-ack" => AckKind::DumpAck,
        "unknown-ack" => AckKind::UnknownAck,
        _ => return Err(AckError::UnknownType),
    };
    Ok(Ack {
        kind,
        last_ref_time: raw.last_ref_time,
    })
}

/// Appends a `push-ack` for `last_ref_time`, as the Node client sends it.
pub fn encode_ack(last_ref_time: u64, out: &mut Vec<u8>) {
    encode_ack_of(AckKind::PushAck, last_ref_time, out);
}

/// Appends an ack of `kind` with empty `data`.
pub fn encode_ack_of(kind: AckKind, last_ref_time: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_str().as_bytes());
    out.extend_from_slice(b"\",\"lastRefTime\":");
    json::write_u64(out, last_ref_time);
    out.extend_from_slice(b",\"data\":\"\"}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_and_node_shapes() {
        let java = br#"{"type": "push-ack", "lastRefTime":"1234567890123", "data":""}"#;
        assert_eq!(
            parse_ack(java),
            Ok(Ack {
                kind: AckKind::PushAck,
                last_ref_time: 1_234_567_890_123
            })
        );
        let mut node = Vec::new();
        encode_ack(42, &mut node);
        assert_eq!(node, br#"{"type":"push-ack","lastRefTime":42,"data":""}"#);
        assert_eq!(parse_ack(&node).unwrap().last_ref_time, 42);
        let dump = br#"{"type":"dump-ack","lastRefTime":1,"data":"{\"a\":{\"b\":[1,2]}}"}"#;
        assert_eq!(parse_ack(dump).unwrap().kind, AckKind::DumpAck);
        assert_eq!(
            parse_ack(br#"{"type":"unknown-ack","lastRefTime":1}"#)
                .unwrap()
                .kind,
            AckKind::UnknownAck
        );
    }

    #[test]
    fn rejects() {
        assert_eq!(
            parse_ack(br#"{"type":"nope","lastRefTime":1}"#),
            Err(AckError::UnknownType)
        );
        for bad in [
            &br#"{"type":"push-ack"}"#[..],
            br#"{"lastRefTime":1}"#,
            br#"{"type":"push-ack","lastRefTime":"x"}"#,
            br#"{"type":"push-ack","lastRefTime":-1}"#,
            br#"{"type":1,"lastRefTime":1}"#,
            b"",
            b"[]",
            b"\xff",
        ] {
            assert_eq!(parse_ack(bad), Err(AckError::Malformed), "{bad:?}");
        }
        let mut big = br#"{"type":"push-ack","lastRefTime":1,"data":""#.to_vec();
        big.resize(MAX_ACK + 1, b' ');
        assert_eq!(parse_ack(&big), Err(AckError::Oversize));
    }
}
