//! Arbitrary bytes as the DATA of a gRPC stream, cut into frames where the input's
//! first byte says: the decoder must never panic, must give the same messages
//! however the bytes were cut, and a message it encodes must come back whole.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::grpc::frame::{encode, Decoder};

/// Every message (or the error that stopped the stream) from `data` in pieces of
/// `step` bytes.
fn decode_in_steps(data: &[u8], step: usize) -> (Vec<registry_proto::grpc::Payload>, bool) {
    let mut d = Decoder::new(1 << 16);
    let mut out = Vec::new();
    for piece in data.chunks(step.max(1)) {
        d.extend(piece);
        loop {
            match d.message() {
                Ok(Some(p)) => out.push(p),
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    let whole = decode_in_steps(rest, rest.len());
    let cut = decode_in_steps(rest, usize::from(step));
    assert_eq!(whole, cut, "the cut changed what was decoded");
    for p in &whole.0 {
        let mut d = Decoder::new(1 << 16);
        d.extend(&encode(p));
        assert_eq!(d.message().ok().flatten().as_ref(), Some(p));
        assert_eq!(d.pending(), 0);
    }
});
