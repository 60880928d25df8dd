//! The push datagram: `{"type":"dom","data":"<service info JSON as a string>",
//! "lastRefTime":<n>}`, gzip-compressed when it is 1024 bytes or more (Nacos
//! `compressIfNecessary`; clients detect the gzip magic `1f 8b`).
//!
//! The server encodes each push once per service change and sends the same bytes to
//! every subscriber, so the encoder favours size (default compression level) over speed.
//! Keep `lastRefTime` below 2^53: the Node client holds it as a double and echoes a
//! rounded value otherwise.

use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::Deserialize;

use crate::json;
use crate::naming::list::ServiceInfo;

/// Packets at least this long are gzip-compressed.
pub const GZIP_THRESHOLD: usize = 1024;

/// Most bytes [`decode_push`] inflates a compressed datagram to (a guard against
/// compression bombs; a 64 KiB datagram of real service info inflates far less).
pub const MAX_INFLATED: usize = 16 * 1024 * 1024;

/// How an encoded push went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Plain JSON.
    Plain,
    /// Gzip-compressed JSON.
    Gzip,
}

/// Appends the push datagram for `data_json` (the UTF-8 service info body) to `out`
/// and says whether it was compressed. The caller checks `out`'s growth against
/// [`super::MAX_DATAGRAM`] before sending.
pub fn encode_push(data_json: &[u8], last_ref_time: u64, out: &mut Vec<u8>) -> Encoding {
    let start = out.len();
    out.reserve(data_json.len() + data_json.len() / 8 + 64);
    out.extend_from_slice(b"{\"type\":\"dom\",\"data\":");
    json::write_str(out, data_json);
    out.extend_from_slice(b",\"lastRefTime\":");
    json::write_u64(out, last_ref_time);
    out.push(b'}');
    if out.len() - start < GZIP_THRESHOLD {
        return Encoding::Plain;
    }
    let plain = out.split_off(start);
    let mut gz = GzEncoder::new(std::mem::take(out), Compression::default());
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(&plain);
    *out = gz.finish().unwrap_or_default();
    Encoding::Gzip
}

/// The kind of a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushKind {
    /// `dom`: a service changed (the only kind servers send).
    Dom,
    /// `service`: treated like `dom` by clients.
    Service,
    /// `dump`: the server asks for the client's whole cache.
    Dump,
    /// Anything else (clients answer `unknown-ack`).
    Other,
}

/// A decoded push datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushPacket {
    /// `type`.
    pub kind: PushKind,
    /// `data`: the service info JSON text.
    pub data: String,
    /// `lastRefTime`: the sequence number to echo in the ack.
    pub last_ref_time: u64,
    /// Whether the datagram was gzip-compressed.
    pub compressed: bool,
}

impl PushPacket {
    /// Parses `data` as a service info.
    pub fn service_info(&self) -> Result<ServiceInfo, serde_json::Error> {
        ServiceInfo::parse(self.data.as_bytes())
    }
}

/// Why a datagram is not a push.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// Starts with the gzip magic but does not inflate.
    #[error("push datagram has a gzip header but does not decompress")]
    Gzip,
    /// Inflates beyond [`MAX_INFLATED`].
    #[error("push datagram inflates beyond {MAX_INFLATED} bytes")]
    TooLarge,
    /// Not a JSON object with string `type`, string `data` and integer `lastRefTime`.
    #[error("malformed push datagram: {0}")]
    Malformed(Box<str>),
}

#[derive(Deserialize)]
struct RawPush {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: String,
    #[serde(rename = "lastRefTime", deserialize_with = "json::lenient_u64")]
    last_ref_time: u64,
}

/// Decodes a push datagram, inflating it when it starts with the gzip magic.
pub fn decode_push(datagram: &[u8]) -> Result<PushPacket, PushError> {
    let compressed = datagram.starts_with(&[0x1f, 0x8b]);
    let inflated;
    let text = if compressed {
        let mut buf = Vec::with_capacity(datagram.len() * 4);
        GzDecoder::new(datagram)
            .take(MAX_INFLATED as u64 + 1)
            .read_to_end(&mut buf)
            .map_err(|_| PushError::Gzip)?;
        if buf.len() > MAX_INFLATED {
            return Err(PushError::TooLarge);
        }
        inflated = buf;
        &inflated[..]
    } else {
        datagram
    };
    let raw: RawPush = serde_json::from_slice(text.trim_ascii())
        .map_err(|e| PushError::Malformed(e.to_string().into()))?;
    let kind = match raw.kind.as_str() {
        "dom" => PushKind::Dom,
        "service" => PushKind::Service,
        "dump" => PushKind::Dump,
        _ => PushKind::Other,
    };
    Ok(PushPacket {
        kind,
        data: raw.data,
        last_ref_time: raw.last_ref_time,
        compressed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_push_is_plain_json() {
        let mut out = Vec::new();
        let enc = encode_push(br#"{"name":"G@@s","hosts":[]}"#, 7, &mut out);
        assert_eq!(enc, Encoding::Plain);
        assert_eq!(
            out,
            br#"{"type":"dom","data":"{\"name\":\"G@@s\",\"hosts\":[]}","lastRefTime":7}"#
        );
        let p = decode_push(&out).unwrap();
        assert_eq!(
            (p.kind, p.last_ref_time, p.compressed),
            (PushKind::Dom, 7, false)
        );
        assert_eq!(p.service_info().unwrap().name, "G@@s");
    }

    #[test]
    fn large_push_is_gzip_and_round_trips() {
        let data = format!(r#"{{"name":"G@@s","checksum":"{}"}}"#, "x".repeat(2000));
        let mut out = b"keep".to_vec();
        assert_eq!(encode_push(data.as_bytes(), 1, &mut out), Encoding::Gzip);
        assert!(out.starts_with(b"keep\x1f\x8b"));
        assert!(out.len() < 200);
        let p = decode_push(&out[4..]).unwrap();
        assert_eq!((p.data.as_str(), p.compressed), (data.as_str(), true));
    }

    #[test]
    fn threshold_is_on_the_whole_packet() {
        // Envelope overhead: {"type":"dom","data":"", "lastRefTime":0} = 43 bytes.
        let overhead = {
            let mut o = Vec::new();
            encode_push(b"", 0, &mut o);
            o.len()
        };
        let fits = "a".repeat(GZIP_THRESHOLD - overhead - 1);
        let mut out = Vec::new();
        assert_eq!(encode_push(fits.as_bytes(), 0, &mut out), Encoding::Plain);
        assert_eq!(out.len(), GZIP_THRESHOLD - 1);
        out.clear();
        let over = "a".repeat(GZIP_THRESHOLD - overhead);
        assert_eq!(encode_push(over.as_bytes(), 0, &mut out), Encoding::Gzip);
    }

    #[test]
    fn decode_errors() {
        assert_eq!(decode_push(b"\x1f\x8bjunk"), Err(PushError::Gzip));
        assert!(matches!(decode_push(b"{}"), Err(PushError::Malformed(_))));
        assert!(matches!(
            decode_push(b"not json"),
            Err(PushError::Malformed(_))
        ));
        let p = decode_push(br#"{"type":"dump","lastRefTime":"12"}"#).unwrap();
        assert_eq!(
            (p.kind, p.last_ref_time, p.data.as_str()),
            (PushKind::Dump, 12, "")
        );
    }
}
