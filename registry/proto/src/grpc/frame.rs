//! gRPC's message framing inside HTTP/2 DATA, for a client that talks HTTP/2 itself
//! (loadgen's 2.x fleet and `benches`' `conn-fleet`, over `h2`): each message is a
//! 1-byte compressed flag, a 4-byte big-endian length and the protobuf [`Payload`],
//! and a message may be split over DATA frames or share one with the next, so the
//! decoder keeps what it has not framed yet. A call's outcome is the `grpc-status`
//! of its trailers (or of its headers, in a trailers-only answer): [`status`] reads it.
//!
//! Pure: bytes in, payloads out; the sockets and the HTTP/2 stack are the caller's.
//! The server side frames through tonic and does not use this module.

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use prost::Message as _;

use super::Payload;

/// The flag byte and the length before every message.
pub const PREFIX_LEN: usize = 5;

/// Why a received byte sequence is not a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The compressed flag is set: nothing negotiated a compression, so the peer
    /// does not speak this client's gRPC. Fix the peer, or the `grpc-encoding` it
    /// was offered.
    #[error("a compressed gRPC message, but no compression was negotiated")]
    Compressed,
    /// The length prefix is over the decoder's limit; raise the limit if such
    /// answers are expected (a query of a very large service).
    #[error("a gRPC message of {len} bytes, over the limit of {limit}")]
    TooLong {
        /// The prefix's length.
        len: usize,
        /// The decoder's limit.
        limit: usize,
    },
    /// The message's bytes are not a `Payload`.
    #[error("a gRPC message that is not a Payload")]
    NotPayload,
}

/// `p` as one gRPC message: the 5-byte prefix and its protobuf encoding.
pub fn encode(p: &Payload) -> Bytes {
    let len = p.encoded_len();
    let mut out = BytesMut::with_capacity(PREFIX_LEN + len);
    out.put_u8(0);
    // A Payload over 4 GiB cannot be built from the JSON bodies this crate writes.
    out.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    p.encode_raw(&mut out);
    out.freeze()
}

/// Messages out of a stream's DATA, in the order they were sent: [`Decoder::extend`]
/// with each DATA frame's bytes, then [`Decoder::message`] until it has none complete.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    limit: usize,
}

impl Decoder {
    /// A decoder refusing messages over `limit` bytes (without the prefix): the
    /// buffer never grows past one message of that size and one DATA frame.
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            buf: BytesMut::new(),
            limit,
        }
    }

    /// Adds the next bytes of the stream.
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next complete message, `None` while its bytes have not all arrived. After
    /// an error the stream cannot be framed any further (the length of what follows
    /// is unknown), so the caller ends the call.
    pub fn message(&mut self) -> Result<Option<Payload>, FrameError> {
        if self.buf.len() < PREFIX_LEN {
            return Ok(None);
        }
        if self.buf[0] != 0 {
            return Err(FrameError::Compressed);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]);
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > self.limit {
            return Err(FrameError::TooLong {
                len,
                limit: self.limit,
            });
        }
        if self.buf.len() - PREFIX_LEN < len {
            return Ok(None);
        }
        self.buf.advance(PREFIX_LEN);
        let body = self.buf.split_to(len).freeze();
        Payload::decode(body)
            .map(Some)
            .map_err(|_| FrameError::NotPayload)
    }

    /// Bytes received but not yet framed (a message cut short when the stream ends).
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// The `grpc-status` header's value as a code (0 is OK); `None` when it is not a
/// decimal number, which a caller treats as a failed call.
pub fn status(value: &[u8]) -> Option<u32> {
    std::str::from_utf8(value).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(i: usize) -> Payload {
        Payload::new("HealthCheckRequest", format!("{{\"requestId\":\"{i}\"}}"))
    }

    #[test]
    fn an_encoded_message_is_its_prefix_and_the_protobuf() {
        let p = payload(7);
        let m = encode(&p);
        assert_eq!(m[0], 0, "not compressed");
        let len = u32::from_be_bytes([m[1], m[2], m[3], m[4]]) as usize;
        assert_eq!(len, m.len() - PREFIX_LEN);
        assert_eq!(&m[PREFIX_LEN..], &p.encode_to_vec()[..]);
    }

    #[test]
    fn messages_split_and_joined_across_data_frames_come_out_whole_and_in_order() {
        let stream: Vec<u8> = (0..5).flat_map(|i| encode(&payload(i)).to_vec()).collect();
        // Every cut of the stream into two frames, and byte-by-byte.
        for cut in 0..=stream.len() {
            let mut d = Decoder::new(1 << 20);
            let mut out = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                d.extend(part);
                while let Some(p) = d.message().unwrap() {
                    out.push(p);
                }
            }
            assert_eq!(out, (0..5).map(payload).collect::<Vec<_>>(), "cut {cut}");
            assert_eq!(d.pending(), 0);
        }
        let mut d = Decoder::new(1 << 20);
        let mut n = 0;
        for b in &stream {
            d.extend(std::slice::from_ref(b));
            while d.message().unwrap().is_some() {
                n += 1;
            }
        }
        assert_eq!(n, 5);
    }

    #[test]
    fn a_message_cut_short_waits_and_is_left_pending() {
        let m = encode(&payload(1));
        let mut d = Decoder::new(1 << 20);
        d.extend(&m[..m.len() - 1]);
        assert_eq!(d.message(), Ok(None));
        assert_eq!(d.pending(), m.len() - 1);
    }

    #[test]
    fn compressed_oversized_and_garbage_messages_are_errors() {
        let mut d = Decoder::new(1 << 20);
        d.extend(&[1, 0, 0, 0, 0]);
        assert_eq!(d.message(), Err(FrameError::Compressed));

        let mut d = Decoder::new(10);
        d.extend(&[0, 0, 0, 0, 11]);
        assert_eq!(d.message(), Err(FrameError::TooLong { len: 11, limit: 10 }));

        let mut d = Decoder::new(10);
        d.extend(&[0, 0, 0, 0, 2, 0xff, 0xff]);
        assert_eq!(d.message(), Err(FrameError::NotPayload));
    }

    #[test]
    fn the_status_header_is_a_decimal_code() {
        assert_eq!(status(b"0"), Some(0));
        assert_eq!(status(b"14"), Some(14));
        assert_eq!(status(b"x"), None);
        assert_eq!(status(&[0xff]), None);
    }
}
