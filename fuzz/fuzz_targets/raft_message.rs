//! Arbitrary bytes as Raft peer messages (appends, votes, snapshot chunks,
//! with the log entries and commands inside): decoding must never panic,
//! must refuse what exceeds the bound, and an accepted message must
//! re-encode to bytes that decode and encode to the same bytes again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::distro::{decode, decode_answer, encode, encode_answer};
use registry_proto::raft::{Batch, RaftAnswer, RaftRequest};

const MAX: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    match decode::<RaftRequest>(data, MAX) {
        Ok(m) => {
            assert!(data.len() <= MAX);
            let once = encode(&m);
            let again = decode::<RaftRequest>(&once, usize::MAX).expect("re-decodes");
            assert_eq!(encode(&again), once);
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    if let Ok(a) = decode_answer::<RaftAnswer>(data, MAX) {
        let once = encode_answer(&a);
        let again = decode_answer::<RaftAnswer>(&once, usize::MAX).expect("re-decodes");
        assert_eq!(encode_answer(&again), once);
    }
    // A log entry's payload as the state machine reads it.
    let _ = serde_json::from_slice::<Batch>(data);
});
